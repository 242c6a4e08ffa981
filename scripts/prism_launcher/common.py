"""The launcher's shared pieces: its errors, the tools it finds, and the inputs of a run (ranks, ports,
the graph's facts, NCCL's version and each real rank's environment). Standard library only."""

import json
import os
import shutil
import socket
import subprocess
import sys

# scripts/, where the launcher and scripts/prism_torch live (this file is in scripts/prism_launcher/)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIVERGED = 3  # prismd's exit status when it stopped a run that diverged from the graph
REPO = os.path.dirname(HERE)

RUN_HELP = """\
prism run --graph G --ranks R [options] -- PROGRAM ARGS...

Starts prismd for graph G (unless --daemon names a running one), waits until
it is ready, then starts one process per real rank R with the environment a
user could set by hand, prefixes their output with "[rank R]", shows what
prismd waits for ("[prismd] ..."), stops everything on Ctrl-C, when a rank
fails or when prismd stops the run because the ranks diverged from the graph
(--on-divergence), and exits with the job's status (the first failing rank's,
130 on Ctrl-C, 3 when prismd stopped a diverged run, with the reason).

Each real rank gets:
  RANK WORLD_SIZE LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK
  MASTER_ADDR=127.0.0.1 MASTER_PORT=<store port>  prismd hosts PyTorch's store
  TORCHELASTIC_USE_AGENT_STORE=True               ranks are store clients, so
                                                  absent virtual ranks are not
                                                  waited for (env://, tcp://,
                                                  store= on MASTER_PORT, torchrun)
  NCCL_NET_PLUGIN=<libnccl-net-prism.so> NCCL_NET=Prism PRISM_DAEMON=<prismd>
  NCCL_PROFILER_PLUGIN=<libnccl-net-prism.so>     tells prismd which operation
                                                  each message belongs to
  NCCL_HOSTID=prism-real-<rank>                   each real rank is its own host
  PRISM_LINK_GBPS PRISM_LINK_LATENCY_US           the graph's NIC, per GPU (prism-graphgen
  PRISM_NIC_SPEED_MBPS                            inspect): sends to virtual ranks
                                                  take the full-scale job's time
  PRISM_INLINE_BYTES=262144                       with 2+ real ranks and 4+ cores each:
                                                  the plugin's copies between them on
                                                  its progress threads (docs/plugin.md)
  CUDA_VISIBLE_DEVICES=<one GPU>                  the real ranks spread over --gpus in
                                                  order (default auto: the caller's
                                                  CUDA_VISIBLE_DEVICES list, else every
                                                  GPU nvidia-smi lists; none: not set),
                                                  so that each has a GPU of its own
                                                  where there are enough
  NCCL_SOCKET_IFNAME=lo and the NCCL settings prismd's bootstrap needs
  (docs/bootstrap.md: NVLS, collnet, MNNVL, windows, RAS off; eager
  connection; no shared p2p comms; one NCCL root per communicator:
  TORCH_NCCL_RANKS_PER_ROOT=1048576)
Variables set in the caller's environment win, except RANK, WORLD_SIZE,
NCCL_HOSTID and CUDA_VISIBLE_DEVICES (narrowed to the rank's GPU). NCCL_COMM_ID is not set (prismd learns every NCCL id from the
store), unless --comm-id asks for the older fixed-id mode. The caller's
LD_PRELOAD goes to the ranks only, not to prismd.
"""

NCCL_DEFAULTS = {
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_COLLNET_ENABLE": "0",
    "NCCL_MNNVL_ENABLE": "0",
    "NCCL_WIN_ENABLE": "0",
    "NCCL_RAS_ENABLE": "0",
    "NCCL_RUNTIME_CONNECT": "0",
    "NCCL_PXN_DISABLE": "1",
    # p2p over the network with one connection per peer: NCCL's shared p2p
    # comms index a per-proxy table by the peer's local rank, which virtual
    # peers on emulated hosts do not fit (step-n8 with one real rank failed
    # with "not a receive comm" in the shared recv path).
    "NCCL_NET_SHARED_COMMS": "0",
    # One NCCL root per communicator (PyTorch would otherwise use one root per
    # 128 ranks, with ids from ranks that may be virtual).
    "TORCH_NCCL_RANKS_PER_ROOT": "1048576",
}


class PrismError(Exception):
    pass


def die(msg, code=2):
    print(f"prism: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def say(msg):
    print(f"prism: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- tools

def find_first(paths):
    for p in paths:
        if p and os.path.isfile(p):
            return os.path.abspath(p)
    return None


def find_tool(name, given, env_home_name=None):
    if given:
        return os.path.abspath(given) if os.path.isfile(given) else None
    home = os.environ.get("PRISM_HOME")
    build = os.environ.get("PRISM_BUILD_DIR", os.path.join(REPO, "build"))
    candidates = [given,
                  os.path.join(home, env_home_name or name) if home else None,
                  os.path.join(build, {"prismd": "daemon/prismd", "prism-graphgen": "graphgen/prism-graphgen",
                                       "prism-session-capture": "daemon/hybrid/prism-session-capture",
                                       "libnccl-net-prism.so": "prism-runtime/libnccl-net-prism.so"}.get(name, name)),
                  os.path.join(build, "prism-runtime", name),
                  os.path.join(build, "plugin", name) if name.endswith(".so") else None,
                  shutil.which(name)]
    return find_first(candidates)


def need_tool(name, given, flag):
    path = find_tool(name, given)
    if not path:
        if given:
            raise PrismError(f"{flag} {given}: no such file")
        raise PrismError(f"{name} not found: build it (scripts/setup.sh --all), set PRISM_HOME to a bundle "
                         f"(scripts/bundle-runtime.sh), or pass {flag} PATH")
    return path


# ---------------------------------------------------------------- run: inputs

def parse_ranks(text):
    ranks = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                ranks.extend(range(int(lo), int(hi) + 1))
            else:
                ranks.append(int(part))
        except ValueError:
            raise PrismError(f"--ranks '{text}': use numbers and ranges, e.g. 0 or 0,5 or 0-3")
    if not ranks:
        raise PrismError("--ranks names no rank (example: --ranks 0 or --ranks 0,5 or --ranks 0-3)")
    return sorted(set(ranks))


def port_free(port, host="127.0.0.1"):
    """Whether prismd could listen on `port`. prismd's servers set SO_REUSEADDR,
    so the check does too: connections of an earlier prismd that linger in
    TIME_WAIT (its /status, polled until it ended) do not make a free port busy,
    while a socket still listening there does."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def choose_store_port(args):
    if args.store_port:
        if not args.daemon and not port_free(args.store_port):
            raise PrismError(f"port {args.store_port} (PyTorch's store, MASTER_PORT) is in use: stop what holds it "
                             f"(another job or prismd?) or pass another --store-port")
        return args.store_port
    if args.daemon or port_free(29500):
        return 29500
    port = free_port()
    say(f"port 29500 is in use; PyTorch's store (MASTER_PORT) is on {port}")
    return port


def inspect_graph(graph, graphgen):
    """prism-graphgen inspect --json of the graph (docs/inspect-json.md)."""
    exe = find_tool("prism-graphgen", graphgen)
    if not exe:
        raise PrismError("cannot read the graph without prism-graphgen (world size, NIC): pass --graphgen PATH")
    out = subprocess.run([exe, "inspect", graph, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise PrismError(f"graph {graph}: {last_line(out.stderr)}")
    return json.loads(out.stdout)


def world_size_of(graph, graphgen):
    return int(inspect_graph(graph, graphgen)["ranks"])


def link_env(facts):
    """The plugin's link shaping from the graph's NIC: a real rank's sends to
    virtual ranks take the time the full-scale job gives one GPU, its share
    nic.count * bandwidth / gpus_per_node as in the engine (receives are timed
    by prismd's schedules, which carry the same share; docs/network-model.md)."""
    nic = facts.get("nic") or {}
    bps, latency_ns = int(nic.get("bandwidth_bps", 0)), int(nic.get("latency_ns", 0))
    share = int(nic.get("count", 0)) * bps // max(1, int(facts.get("gpus_per_node", 1)))
    if share <= 0:
        return {}
    return {
        "PRISM_LINK_GBPS": f"{share / 1e9:g}",
        "PRISM_LINK_LATENCY_US": f"{latency_ns / 1e3:g}",
        "PRISM_NIC_SPEED_MBPS": str(max(1, bps // 1_000_000)),
    }


# The real ranks of one `prism run` share this host: their payloads to each
# other go through the plugin's shared-memory rings (docs/plugin.md, "Real
# peers"). With at least this many cores per real rank the copies of NCCL's
# 512 KiB steps go to the plugin's progress threads: two real ranks on a
# 16-core GPU host moved about 3x the bytes, and their PAT all-gather at 100
# Gbit/s ran a median 22% over the model instead of 35% (scattered 7-43%),
# while 8 ranks packed on the same 16 cores lost by it (docs/plugin.md,
# "Link shaping").
CORES_PER_RANK_FOR_COPY_THREADS = 4
COPY_THREADS_ENV = {"PRISM_INLINE_BYTES": "262144"}


def ring_copy_env(real_ranks, cores):
    """PRISM_INLINE_BYTES for `real_ranks` real ranks on a host of `cores` usable cores: copies on progress
    threads when there are 2 or more real ranks and CORES_PER_RANK_FOR_COPY_THREADS cores each, else nothing
    (the plugin's default: NCCL's proxy thread copies). The caller's own setting wins (rank_env)."""
    if real_ranks >= 2 and cores >= CORES_PER_RANK_FOR_COPY_THREADS * real_ranks:
        return dict(COPY_THREADS_ENV)
    return {}


def gpu_pool(spec, environ, list_gpus=None):
    """The GPUs `prism run --gpus SPEC` spreads the real ranks over, as CUDA_VISIBLE_DEVICES entries: SPEC
    'none' gives [] (the ranks keep the caller's CUDA_VISIBLE_DEVICES, or all the host's GPUs); a list 'A,B,...'
    itself; 'auto' the caller's CUDA_VISIBLE_DEVICES list when set, else the GPUs `list_gpus()` finds (default:
    nvidia-smi's), else [] (no GPU found: nothing set)."""
    if spec == "none":
        return []
    if spec != "auto":
        pool = [g.strip() for g in spec.split(",")]
        if not pool or any(not g for g in pool):
            raise PrismError(f"--gpus {spec!r}: give auto, none or a comma-separated list of GPUs (0,1 or GPU-UUIDs)")
        return pool
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    return (list_gpus or nvidia_smi_gpus)()


def nvidia_smi_gpus():
    """The host's GPUs by index, as `nvidia-smi -L` lists them; [] without nvidia-smi or when it fails."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [str(i) for i, line in enumerate(l for l in out.stdout.splitlines() if l.startswith("GPU "))]


def gpu_env(ranks, pool):
    """Each real rank's CUDA_VISIBLE_DEVICES: the k-th rank of `ranks` gets pool[k % len(pool)] ({} per
    rank when the pool is empty), and the note to print when some share a GPU (else None)."""
    if not pool:
        return {r: {} for r in ranks}, None
    by_rank = {r: {"CUDA_VISIBLE_DEVICES": pool[k % len(pool)]} for k, r in enumerate(ranks)}
    if len(ranks) <= len(pool):
        return by_rank, None
    sharing = {}
    for r in ranks:
        sharing.setdefault(by_rank[r]["CUDA_VISIBLE_DEVICES"], []).append(r)
    shared = "; ".join(f"GPU {g}: ranks {', '.join(map(str, rs))}" for g, rs in sharing.items() if len(rs) > 1)
    note = (f"{len(ranks)} real ranks on {len(pool)} GPU(s) ({shared}): ranks that share a GPU share its host link "
            f"too, which slows them at fast links (docs/timing.md, \"Two real ranks on one GPU\"); run them under "
            f"CUDA MPS so that they run at once")
    return by_rank, note


def usable_cores():
    """The cores this process may run on (its affinity mask: taskset, a cgroup's cpuset), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "(no message)"


def nccl_comm_id_bytes(comm_id):
    """The 128-byte ncclUniqueId NCCL builds from NCCL_COMM_ID=host:port (IPv4)."""
    import struct
    host, port = comm_id.rsplit(":", 1)
    uid = struct.pack("<Q", 0x0280028002800280) + struct.pack("<H", socket.AF_INET)
    uid += struct.pack(">H", int(port)) + socket.inet_aton(socket.gethostbyname(host))
    return uid + bytes(128 - len(uid))


def probe_target(command):
    """The program and environment of COMMAND, seen through a leading `env VAR=value ...`."""
    env, i = dict(os.environ), 0
    if command and os.path.basename(command[0]) == "env":
        i = 1
        while i < len(command) and "=" in command[i] and not command[i].startswith("-"):
            key, value = command[i].split("=", 1)
            env[key] = value
            i += 1
    return (command[i] if i < len(command) else ""), env


# Asks the NCCL that `import torch` loaded (LD_PRELOAD or PyTorch's own) for
# its version; torch.cuda.nccl.version() gives the one PyTorch was built with.
NCCL_VERSION_PROBE = """
import ctypes, os, torch
try:
    lib = ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    code = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(code))
    v = code.value
except Exception:
    v = torch.cuda.nccl.version()
if isinstance(v, tuple):
    print('.'.join(map(str, v)))
elif v >= 10000:
    print(f'{v // 10000}.{v // 100 % 100}.{v % 100}')
else:
    print(f'{v // 1000}.{v // 100 % 10}.{v % 100}')
"""


def nccl_version(args, command):
    """The real ranks' NCCL version: --nccl-version, else asked of the NCCL the program's python loads; None
    when that cannot be asked (prismd then learns it from the first rank's plugin at NCCL init)."""
    if args.nccl_version != "auto":
        return args.nccl_version
    exe, env = probe_target(command)
    if not os.path.basename(exe).startswith("python"):
        return None
    try:
        out = subprocess.run([exe, "-c", NCCL_VERSION_PROBE], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def wire_profile(version):
    """NCCL's version code for X.Y.Z (None: unknown); prismd says whether it plays that release."""
    if version is None:
        return None
    parts = version.split(".")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        return int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2])
    raise PrismError(f"--nccl-version '{version}': use X.Y.Z, e.g. 2.28.9")


def rank_env(args, rank, world, plugin, store_port, daemon, plugin_env, device_env=None):
    """`plugin_env`: the PRISM_* settings the run chose (link_env, ring_copy_env); the caller's own win.
    `device_env`: this rank's CUDA_VISIBLE_DEVICES (gpu_env), which narrows the caller's."""
    env = dict(NCCL_DEFAULTS)
    env.update(plugin_env)
    env.update({
        "NCCL_NET_PLUGIN": plugin,
        "NCCL_NET": "Prism",
        # The same library is NCCL's profiler plugin: it learns which operation
        # each message belongs to, which is what puts virtual ranks on time.
        "NCCL_PROFILER_PLUGIN": plugin,
        "PRISM_DAEMON": daemon,
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(store_port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "NCCL_HOSTID": f"prism-real-{rank}",
        "NCCL_SOCKET_IFNAME": args.ifname,
    })
    if args.comm_id:
        env["NCCL_COMM_ID"] = args.comm_id
    env.update(os.environ)  # the caller's explicit settings win ...
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "NCCL_HOSTID": f"prism-real-{rank}"})  # ... but these
    env.update(device_env or {})  # ... and the rank's own GPU, one of the caller's
    env.update(getattr(args, "rank_env_extra", None) or {})  # prism capture's torch trace
    if not args.comm_id:
        env.pop("NCCL_COMM_ID", None)  # one fixed id would serialise every communicator's init
    return env
