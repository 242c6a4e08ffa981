"""`prism run`: prismd and the real ranks' processes, their logs and output, and the supervision that
stops them all together (on Ctrl-C, a failed rank or a diverged run)."""

import ctypes
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from prism_launcher.op_times import print_op_times
from prism_launcher.common import (DIVERGED, PrismError, choose_store_port, find_tool, free_port, gpu_env, gpu_pool, inspect_graph, link_env, nccl_version, need_tool, parse_ranks, port_free, rank_env, ring_copy_env, say, usable_cores, wire_profile, world_size_of)

# ---------------------------------------------------------------- run: processes

def nccl_algo_args(environ, prismd_args):
    """prismd's --nccl-algo and --nccl-proto from the ranks' NCCL_ALGO and NCCL_PROTO, so that
    the virtual ranks and the report play only what the real ranks' NCCL may (unless
    --prismd-arg already gives one)."""
    args = []
    for var, flag in (("NCCL_ALGO", "--nccl-algo"), ("NCCL_PROTO", "--nccl-proto")):
        if environ.get(var) and not any(a.startswith(flag) for a in prismd_args):
            args += [flag, environ[var]]
    return args


class Prismd:
    """prismd started for this run: log to a file, warnings to the terminal."""

    def __init__(self, exe, args, ranks, store_port, profile, log_dir):
        self.metrics_port = args.metrics_port or free_port()
        if args.metrics_port and not port_free(args.metrics_port):
            raise PrismError(f"port {args.metrics_port} (prismd's /metrics and /status) is in use: pass another "
                             f"--metrics-port")
        self.follow = "--follow" in args.prismd_arg
        self.listen = f"unix://{log_dir}/prismd.sock"
        self.log_path = os.path.join(log_dir, "prismd.log")
        cmd = [exe, "--graph", args.graph, "--real-ranks", ",".join(map(str, ranks)),
               "--listen", self.listen, "--metrics-address", f"127.0.0.1:{self.metrics_port}",
               "--torch-store", f"127.0.0.1:{store_port}"]
        if profile is not None:
            cmd += ["--wire-profile", str(profile)]
        if args.comm_id:
            cmd += ["--nccl-comm-id", args.comm_id]
        cmd += ["--on-divergence", args.on_divergence]
        cmd += nccl_algo_args(os.environ, args.prismd_arg)
        cmd += args.prismd_arg
        self.log = open_log(self.log_path)
        # The caller's LD_PRELOAD is for the ranks (another NCCL, a shim); prismd runs without it.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                     preexec_fn=die_with_parent())
        self.stop_tail = threading.Event()

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = open(self.log_path, errors="replace").read()
            if self.proc.poll() is not None:
                errors = [l for l in text.splitlines() if l.startswith("prismd:") or "error" in l.lower()]
                raise PrismError(errors[-1] if errors else f"prismd exited with status {self.proc.returncode}: "
                                 f"see {self.log_path}")
            if "prismd: serving gRPC" in text:
                return
            time.sleep(0.05)
        raise PrismError(f"prismd was not ready within {timeout:.0f} s: see {self.log_path}")

    def divergence(self):
        """prismd's reason for stopping a diverged run (exit status 3), or None."""
        try:
            text = open(self.log_path, errors="replace").read()
        except OSError:
            return None
        lines = [l for l in text.splitlines() if l.startswith("prismd: the run diverged from the graph: ")]
        return lines[0][len("prismd: "):].split("; stopping the run")[0] if lines else None

    # prismd's exit lines a user reads first: the run's own iteration time and throughput, what it matched and
    # diverged, how late its receives were, and the step cost its NCCL took where the run played another.
    SUMMARY = (re.compile(r"^this hybrid run's iteration time:"), re.compile(r"^throughput:"),
               re.compile(r"^prismd: hybrid:"), re.compile(r"^prismd: late receives"),
               re.compile(r"^prismd: rank \d+'s NCCL took "),
               re.compile(r"^prismd: collectives against the model, "))

    def summary(self):
        """The lines of prismd's exit report that `prism run` shows when the job ends (the log has them all)."""
        try:
            with open(self.log_path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        picked = [l for pattern in self.SUMMARY for l in lines if pattern.match(l)]  # in SUMMARY's order
        return [l[len("prismd: "):] if l.startswith("prismd: ") else l for l in picked]

    def status(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/status", timeout=2) as r:
                return json.loads(r.read().decode())
        except (OSError, ValueError):
            return None

    def tail(self, out_lock):
        """Forwards prismd's warnings and errors to the terminal as "[prismd] ..."."""
        def run():
            with open(self.log_path, errors="replace") as f:
                while not self.stop_tail.is_set():
                    line = f.readline()
                    if not line:
                        time.sleep(0.1)
                        continue
                    if "[warning]" in line or "[error]" in line or "[critical]" in line:
                        with out_lock:
                            sys.stdout.write("[prismd] " + line.split("] ", 2)[-1])
                            sys.stdout.flush()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def stop(self):
        self.stop_tail.set()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def watch_status(url, out_lock, stop):
    """For a prismd this run did not start: shows what /status says it waits for."""
    def run():
        shown = {}
        while not stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    status = json.loads(r.read().decode())
            except (OSError, ValueError):
                status = {}
            now = time.time()
            lines = [f"startup error: {e}" for e in status.get("startup_errors", [])]
            lines += [f"{w['communicator']} waiting {w['seconds']:.0f} s: {w['waits_for']}"
                      for w in status.get("waiting", [])]
            for line in lines:
                key = line.split(" waiting ")[0] + line.split(" s: ", 1)[-1]
                if now - shown.get(key, 0) >= 30:
                    shown[key] = now
                    with out_lock:
                        sys.stdout.write(f"[prismd] {line}\n")
                        sys.stdout.flush()
            stop.wait(1)
    threading.Thread(target=run, daemon=True).start()


def die_with_parent():
    """A preexec_fn: the child (prismd, a rank) gets SIGTERM when prism run dies, even by SIGKILL, which leaves
    no chance to stop it otherwise (PR_SET_PDEATHSIG; its own session keeps it out of the terminal's signals)."""
    parent = os.getpid()

    def arm():
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # prism run died before the signal was armed
            os._exit(1)
    return arm


def rank_preexec():
    """A rank's preexec_fn: die with prism run (die_with_parent), and its open-file limit raised to the hard
    limit: a real rank of a full-mesh Gloo group holds a socket per member (1023 in a 1024-rank world group,
    docs/bootstrap.md "Gloo groups"), over the usual soft limit of 1024."""
    arm = die_with_parent()

    def run():
        raise_open_files()
        arm()
    return run


def raise_open_files():
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


def make_log_dir(given):
    """The run's log directory. By default a fresh one (mkdtemp: a random name, created exclusively, 0700), so
    no other user can predict it or plant files in it; --log-dir must be a directory of this user that no one else
    may write to."""
    if not given:
        return tempfile.mkdtemp(prefix=f"prism-run-{os.getuid()}-{time.strftime('%Y%m%d-%H%M%S')}-")
    path = os.path.abspath(given)
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PrismError(f"--log-dir {path} is a symlink or not a directory: give a directory of your own")
    if st.st_uid != os.getuid():
        raise PrismError(f"--log-dir {path} belongs to uid {st.st_uid}, not you: give a directory of your own")
    if st.st_mode & 0o022:
        raise PrismError(f"--log-dir {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}), who could "
                         f"plant links there: `chmod go-w {path}` or give another directory")
    return path


def open_log(path):
    """A log file opened for writing, never through a symlink (O_NOFOLLOW), readable by this user only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "w")


def pump(stream, prefix, log_path, out_lock):
    def run():
        with open_log(log_path) as log:
            for line in iter(stream.readline, ""):
                log.write(line)
                log.flush()
                with out_lock:
                    sys.stdout.write(prefix + line)
                    sys.stdout.flush()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def group_members(pgid):
    """The live (not zombie) processes of process group `pgid`, from /proc; None where /proc cannot tell."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after "(comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(pid))
    return found


def stop_ranks(procs, sig, grace, settle=30):
    """Stops each rank's process group (its own session: the rank and whatever it started): `sig`, then
    SIGKILL after `grace` seconds to what is left of the group, the rank's children too (a rank that exits
    at `sig` can leave its children holding the GPU for the next run: a refine round of TorchTitan
    FSDP2+TP stopped after a stall, 2026-12-02, and the next stage found the GPU busy); then waits up to
    `settle` seconds for every process of those groups to be gone, and says which were not."""
    for p in procs.values():
        if p.poll() is None:
            signal_group(p, sig)
    deadline = time.time() + grace
    for p in procs.values():
        while p.poll() is None and time.time() < deadline:
            time.sleep(0.05)
    for p in procs.values():
        if p.poll() is None or group_members(p.pid):
            signal_group(p, signal.SIGKILL)
        p.wait()
    deadline = time.time() + settle
    left = {}
    while time.time() < deadline:
        left = {p.pid: group_members(p.pid) for p in procs.values()}
        if not any(left.values()):
            return
        time.sleep(0.1)
    for pgid, pids in left.items():
        if pids:
            say(f"warning: {len(pids)} process(es) of rank process group {pgid} still there {settle} s after "
                f"SIGKILL: {pids[:8]} (the GPU may still be held)")


def exit_status(rc):
    return 128 - rc if rc < 0 else rc  # killed by signal n -> 128 + n


class Interrupted(Exception):
    def __init__(self, signum):
        self.signum = signum


def warn_if_nothing_matched(rank, prismd):
    """A rank that exits having matched no operation with the graph ran without
    Prism in its NCCL (or ran no collective the graph has): say so."""
    if prismd is None or prismd.follow:  # prismd --follow has no graph to match
        return
    status = prismd.status()
    rows = [r for r in (status or {}).get("real_ranks", []) if r.get("rank") == rank]
    if rows and rows[0].get("ops_matched") == 0:
        say(f"warning: rank {rank} exited having matched 0 operations with the graph: its NCCL did not use the "
            f"Prism plugin (NCCL_NET_PLUGIN, NCCL_NET=Prism) or it ran no collective the graph has "
            f"(prismd's log: {prismd.log_path})")


def supervise(procs, ranks, prismd, out_lock):
    """Waits for the ranks; returns the job's exit status."""
    interrupted = []
    exited = set()

    def on_signal(signum, _):
        if interrupted:  # a second Ctrl-C (or a signal to the whole group) while stopping: carry on stopping
            return
        interrupted.append(signum)
        raise Interrupted(signum)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            for r, p in procs.items():
                if p.poll() is not None and r not in exited:
                    exited.add(r)
                    warn_if_nothing_matched(r, prismd)
            failed = [(r, p.returncode) for r, p in procs.items() if p.poll() is not None and p.returncode != 0]
            # prismd stopping a diverged run closes its store first: a rank may fail of that before prismd exits.
            stopped = (prismd.proc.poll() is not None or failed) and prismd.divergence() if prismd else None
            if stopped:
                say(f"prismd stopped the run: {stopped}; stopping the ranks (prism run --on-divergence follow "
                    f"keeps a run going)")
                stop_ranks(procs, signal.SIGTERM, 10)
                return DIVERGED
            if failed:
                rank, rc = failed[0]
                say(f"rank {rank} exited with status {exit_status(rc)}; stopping the other ranks")
                stop_ranks(procs, signal.SIGTERM, 10)
                return exit_status(rc)
            if all(p.poll() is not None for p in procs.values()):
                return 0
            if prismd is not None and prismd.proc.poll() is not None:
                say(f"prismd exited with status {prismd.proc.returncode} while the ranks ran: see "
                    f"{prismd.log_path}; stopping the ranks")
                stop_ranks(procs, signal.SIGTERM, 10)
                return 1
            time.sleep(0.1)
    except Interrupted as e:
        say("interrupted: stopping the ranks and prismd")
        stop_ranks(procs, signal.SIGINT, 10)
        return 128 + e.signum
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def cmd_run(args):
    command = args.command[1:] if args.command and args.command[0] == "--" else args.command
    if not command:
        raise PrismError("nothing to run: put the program after --, e.g. prism run --graph g --ranks 0 -- "
                         "python train.py")
    ranks = parse_ranks(args.ranks)
    plugin = need_tool("libnccl-net-prism.so", args.plugin, "--plugin")
    facts = {}
    if os.path.isfile(args.graph):
        if find_tool("prism-graphgen", args.graphgen):
            facts = inspect_graph(args.graph, args.graphgen)
        elif "PRISM_LINK_GBPS" not in os.environ:  # the caller's setting wins (rank_env)
            say("prism-graphgen not found: the real ranks' sends to virtual ranks are not shaped to the graph's "
                "NIC (pass --graphgen PATH, or set PRISM_LINK_GBPS and PRISM_LINK_LATENCY_US)")
    plugin_env = {**link_env(facts), **ring_copy_env(len(ranks), usable_cores())}
    device_env, sharing = gpu_env(ranks, gpu_pool(getattr(args, "gpus", "auto"), os.environ))
    if sharing:
        say(sharing)
    graph_world = int(facts.get("ranks", 0))
    if args.world and graph_world and args.world != graph_world:
        raise PrismError(f"--world {args.world} disagrees with the graph's {graph_world} ranks: leave --world out "
                         f"(the graph's is the default) or make a graph of {args.world} ranks")
    if getattr(args, "op_times", False):
        plugin_env["PRISM_OP_TIMES"] = "<log dir of this run>/op-times"  # set below, once the log dir exists
    if args.dry_run:
        world = args.world or int(facts.get("ranks", 0)) or world_size_of(args.graph, args.graphgen)
        bad = [r for r in ranks if r < 0 or r >= world]
        if bad:
            raise PrismError(f"--ranks {bad} outside the graph's {world} ranks")
        store_port = args.store_port or 29500
        daemon = args.daemon or "unix://<prismd of this run>"
        for r in ranks:
            env = rank_env(args, r, world, plugin, store_port, daemon, plugin_env, device_env[r])
            shown = {k: env[k] for k in sorted(env) if k.startswith(("NCCL_", "PRISM_", "RANK", "WORLD", "LOCAL_",
                                                                      "MASTER_", "TORCH", "GROUP_", "PYTHONPATH",
                                                                      "CUDA_VISIBLE_DEVICES"))}
            print(json.dumps({"rank": r, "env": shown, "command": command}))
        return 0
    if not os.path.isfile(args.graph):
        raise PrismError(f"graph {args.graph}: no such file (make one with `prism graph ...`)")
    log_dir = make_log_dir(args.log_dir)
    if "PRISM_OP_TIMES" in plugin_env:
        plugin_env["PRISM_OP_TIMES"] = os.path.join(log_dir, "op-times")
    store_port = choose_store_port(args)
    out_lock = threading.Lock()
    prismd = None
    stop_watch = threading.Event()
    if args.daemon:
        daemon = args.daemon
        world = args.world or int(facts.get("ranks", 0)) or world_size_of(args.graph, args.graphgen)
        if args.daemon_status:
            watch_status(f"http://{args.daemon_status}/status", out_lock, stop_watch)
    else:
        version = nccl_version(args, command)
        profile = wire_profile(version)
        prismd = Prismd(need_tool("prismd", args.prismd, "--prismd"), args, ranks, store_port, profile, log_dir)
        try:
            prismd.wait_ready(args.ready_timeout)
        except PrismError:
            prismd.stop()
            raise
        status = prismd.status() or {}
        world = int(status.get("world_size", 0)) or args.world
        if args.world and world != args.world:
            prismd.stop()
            raise PrismError(f"--world {args.world} disagrees with the graph's {world} ranks: leave --world out "
                             f"(the graph's is the default) or make a graph of {args.world} ranks")
        daemon = prismd.listen
        say(f"prismd ready (graph {status.get('graph', args.graph)}, {world} ranks, real {args.ranks}, NCCL "
            f"{version or 'as the first rank announces'}); /status on http://127.0.0.1:{prismd.metrics_port}/status; logs in {log_dir}")
        prismd.tail(out_lock)
    procs = {}
    try:
        for r in ranks:
            env = rank_env(args, r, world, plugin, store_port, daemon, plugin_env, device_env[r])
            procs[r] = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1, start_new_session=True, preexec_fn=rank_preexec())
            pump(procs[r].stdout, f"[rank {r}] ", os.path.join(log_dir, f"rank{r}.log"), out_lock)
        status = supervise(procs, ranks, prismd, out_lock)
    finally:
        stop_watch.set()
        stop_ranks(procs, signal.SIGTERM, 5)
        if prismd is not None:
            prismd.stop()
    if prismd is not None:
        summary = prismd.summary()
        if summary:
            say(f"prismd's report (all of it in {prismd.log_path}):")
            for line in summary:
                say(f"  {line}")
    if "PRISM_OP_TIMES" in plugin_env:
        print_op_times(os.environ.get("PRISM_OP_TIMES") or plugin_env["PRISM_OP_TIMES"], limit=12)
    say(f"job exited with status {status}")
    return status
