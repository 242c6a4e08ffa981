#!/usr/bin/env python3
"""Tests of scripts/prism (the launcher) that need no GPU: the environment
each real rank gets (--dry-run), the errors for bad input, and whole runs
with prismd and a stand-in for PyTorch ranks (test/fake_torch_program.py):
the NCCL id through prismd's store, a failing rank, a rank that never comes,
Ctrl-C."""
import json
import shlex
import shutil
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PRISM = os.path.join(HERE, "..", "scripts", "prism")
FAKE = os.path.join(HERE, "fake_torch_program.py")
BUILD = os.environ.get("PRISM_BUILD_DIR", os.path.join(HERE, "..", "build"))
GRAPHGEN = os.path.join(BUILD, "graphgen", "prism-graphgen")
PRISMD = os.path.join(BUILD, "daemon", "prismd")
PLUGIN = os.path.join(BUILD, "plugin", "libnccl-net-prism.so")


def run(*args, timeout=120):
    return subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True, timeout=timeout)


def have_binaries():
    return all(os.path.isfile(p) for p in (GRAPHGEN, PRISMD, PLUGIN))


def stat_mode(path):
    import stat
    return stat.S_IMODE(os.stat(path).st_mode)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load_launcher():
    """The launcher as one namespace: scripts/prism (a module with no .py suffix) and the names of its
    package beside it, scripts/prism_launcher (common, run, capture)."""
    import importlib
    import importlib.machinery
    import importlib.util
    import types
    loader = importlib.machinery.SourceFileLoader("prism_script", PRISM)
    spec = importlib.util.spec_from_loader("prism_script", loader)
    script = importlib.util.module_from_spec(spec)
    loader.exec_module(script)  # puts scripts/ on sys.path
    names = {}
    for part in ("common", "run", "capture"):
        names.update(vars(importlib.import_module("prism_launcher." + part)))
    names.update(vars(script))
    return types.SimpleNamespace(**names)


def read_lines_until(proc, stop, seconds=60):
    """`proc`'s output lines until stop(line) holds: (that line, every line read); (None, lines) when the output
    ends or `seconds` pass first."""
    seen = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if stop(line):
            return line, seen
    return None, seen


def processes_mentioning(text, environ=False):
    """Processes whose command line (or, with `environ`, environment too) holds `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for what in ("cmdline", "environ") if environ else ("cmdline",):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
                        break
            except OSError:
                pass
    return found


class DryRun(unittest.TestCase):
    def test_each_real_rank_gets_its_own_environment(self):
        out = run("run", "--graph", "g", "--world", "64", "--ranks", "0,5", "--plugin", PRISM,
                  "--comm-id", "127.0.0.1:29999", "--dry-run", "--", "python3", "train.py")
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        self.assertEqual([r["rank"] for r in rows], [0, 5])
        for r in rows:
            env = r["env"]
            self.assertEqual(env["RANK"], str(r["rank"]))
            self.assertEqual(env["WORLD_SIZE"], "64")
            self.assertEqual(env["NCCL_HOSTID"], f"prism-real-{r['rank']}")
            self.assertEqual(env["NCCL_NET"], "Prism")
            self.assertEqual(env["NCCL_COMM_ID"], "127.0.0.1:29999")
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")
            self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
            self.assertEqual(env["TORCH_NCCL_RANKS_PER_ROOT"], "1048576")
            self.assertEqual(env["NCCL_PROFILER_PLUGIN"], env["NCCL_NET_PLUGIN"])  # timing: the profiler role
            self.assertEqual(env["NCCL_NET_SHARED_COMMS"], "0")
            self.assertEqual(r["command"], ["python3", "train.py"])

    def test_no_shaping_warning_when_the_caller_sets_the_link(self):
        with tempfile.TemporaryDirectory() as d:
            graph = os.path.join(d, "g.graph")
            open(graph, "w").close()  # a graph file prism-graphgen (not found) cannot inspect
            args = ["run", "--graph", graph, "--world", "8", "--ranks", "0", "--plugin", PRISM,
                    "--graphgen", os.path.join(d, "none"), "--dry-run", "--", "python3", "t.py"]
            env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_LINK")}
            out = subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("are not shaped", out.stderr)
            env.update(PRISM_LINK_GBPS="10", PRISM_LINK_LATENCY_US="10")  # as scripts/gpu/run-train-gpt.sh
            out = subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertNotIn("are not shaped", out.stderr)
            self.assertEqual(json.loads(out.stdout.splitlines()[0])["env"]["PRISM_LINK_GBPS"], "10")

    def test_ranks_get_the_hard_open_file_limit(self):
        # A real rank of a full-mesh Gloo group holds a socket per member.
        import resource
        launcher = load_launcher()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard <= 256:
            self.skipTest(f"hard open-file limit {hard}")
        probe = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        try:
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                 preexec_fn=launcher.rank_preexec(), check=True)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        self.assertEqual(int(out.stdout), hard)

    def test_default_daemon_is_prismds_per_user_socket(self):
        # prism run starts a prismd of its own; the per-user default is what a
        # prismd started by hand listens on (and what --daemon means by default).
        def daemon_with(runtime_dir):
            env = dict(os.environ)
            env.pop("XDG_RUNTIME_DIR", None)
            if runtime_dir is not None:
                env["XDG_RUNTIME_DIR"] = runtime_dir
            code = ("import importlib.machinery as m, sys; sys.argv=['prism'];"
                    f"mod=m.SourceFileLoader('prism_cli', {PRISM!r}).load_module();"
                    "print(mod.default_daemon_address())")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            return out.stdout.strip()
        self.assertEqual(daemon_with("/run/user/4242"), "unix:///run/user/4242/prismd.sock")
        self.assertEqual(daemon_with(None), f"unix:///tmp/prismd-{os.getuid()}.sock")
        self.assertEqual(daemon_with("relative"), f"unix:///tmp/prismd-{os.getuid()}.sock")

    def test_prismd_follows_the_ranks_nccl_algo(self):
        code = ("import importlib.machinery as m, sys, json; sys.argv=['prism'];"
                f"m.SourceFileLoader('prism_cli', {PRISM!r}).load_module();"
                "import prism_launcher.run as mod;"
                "print(json.dumps([mod.nccl_algo_args({'NCCL_ALGO': 'Ring'}, []),"
                " mod.nccl_algo_args({}, []),"
                " mod.nccl_algo_args({'NCCL_ALGO': 'Ring'}, ['--nccl-algo=Tree']),"
                " mod.nccl_algo_args({'NCCL_ALGO': 'PAT', 'NCCL_PROTO': 'Simple'}, [])]))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), [["--nccl-algo", "Ring"], [], [],
                                                  ["--nccl-algo", "PAT", "--nccl-proto", "Simple"]])

    def test_two_real_ranks_with_cores_to_spare_copy_on_the_plugins_threads(self):
        launcher = load_launcher()
        self.assertEqual(launcher.ring_copy_env(2, 16), {"PRISM_INLINE_BYTES": "262144"})
        self.assertEqual(launcher.ring_copy_env(2, 8), {"PRISM_INLINE_BYTES": "262144"})
        self.assertEqual(launcher.ring_copy_env(2, 7), {})   # under 4 cores a rank
        self.assertEqual(launcher.ring_copy_env(8, 16), {})  # 8 ranks on 16 cores lost by it
        self.assertEqual(launcher.ring_copy_env(1, 64), {})  # no real peer to copy to
        # --dry-run shows what this host gives two ranks; the caller's own setting wins.
        args = ["run", "--graph", "g", "--world", "8", "--ranks", "0,1", "--plugin", PRISM, "--dry-run", "--", "true"]
        want = launcher.ring_copy_env(2, launcher.usable_cores()).get("PRISM_INLINE_BYTES")
        env = {k: v for k, v in os.environ.items() if k != "PRISM_INLINE_BYTES"}
        out = subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout.splitlines()[0])["env"].get("PRISM_INLINE_BYTES"), want)
        env["PRISM_INLINE_BYTES"] = "4096"
        out = subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(json.loads(out.stdout.splitlines()[0])["env"]["PRISM_INLINE_BYTES"], "4096")

    def test_real_ranks_spread_over_the_gpus_one_each_where_there_are_enough(self):
        launcher = load_launcher()
        self.assertEqual(launcher.gpu_pool("none", {"CUDA_VISIBLE_DEVICES": "0,1"}), [])
        self.assertEqual(launcher.gpu_pool("2,GPU-ab", {}), ["2", "GPU-ab"])
        self.assertEqual(launcher.gpu_pool("auto", {"CUDA_VISIBLE_DEVICES": "3, 1"}, lambda: ["0"]), ["3", "1"])
        self.assertEqual(launcher.gpu_pool("auto", {}, lambda: ["0", "1"]), ["0", "1"])
        self.assertEqual(launcher.gpu_pool("auto", {}, lambda: []), [])
        with self.assertRaises(launcher.PrismError):
            launcher.gpu_pool("0,,1", {})
        self.assertEqual(launcher.gpu_env([0, 5], ["6", "7"]),
                         ({0: {"CUDA_VISIBLE_DEVICES": "6"}, 5: {"CUDA_VISIBLE_DEVICES": "7"}}, None))
        self.assertEqual(launcher.gpu_env([0], []), ({0: {}}, None))
        by_rank, note = launcher.gpu_env([0, 1, 2], ["0", "1"])
        self.assertEqual([by_rank[r]["CUDA_VISIBLE_DEVICES"] for r in (0, 1, 2)], ["0", "1", "0"])
        self.assertIn("3 real ranks on 2 GPU(s) (GPU 0: ranks 0, 2)", note)
        # --dry-run: the caller's list is the pool, each rank one of it; --gpus none leaves the caller's.
        base = ["run", "--graph", "g", "--world", "8", "--ranks", "0,5", "--plugin", PRISM, "--dry-run"]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="4,7")
        for extra, want, shared in (([], ["4", "7"], False), (["--gpus", "none"], ["4,7", "4,7"], False),
                                    (["--gpus", "2"], ["2", "2"], True)):
            out = subprocess.run([sys.executable, PRISM, *base, *extra, "--", "true"], capture_output=True, text=True,
                                 timeout=60, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            rows = [json.loads(line) for line in out.stdout.splitlines()]
            self.assertEqual([r["env"].get("CUDA_VISIBLE_DEVICES") for r in rows], want, extra)
            self.assertEqual("share a GPU" in out.stderr, shared, out.stderr)

    def test_rank_ranges(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "2-4", "--plugin", PRISM, "--dry-run",
                  "--", "true")
        self.assertEqual([json.loads(l)["rank"] for l in out.stdout.splitlines()], [2, 3, 4])

    def test_rank_outside_the_world_is_refused(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "9", "--plugin", PRISM, "--dry-run",
                  "--", "true")
        self.assertEqual(out.returncode, 2)
        self.assertIn("outside the graph's 8 ranks", out.stderr)

    def test_missing_command_is_refused(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "0", "--plugin", PRISM)
        self.assertEqual(out.returncode, 2)
        self.assertIn("nothing to run", out.stderr)

    def test_default_environment_uses_prismds_store_and_no_fixed_id(self):
        out = run("run", "--graph", "g", "--world", "16", "--ranks", "5", "--plugin", PRISM, "--dry-run",
                  "--", "python3", "train.py")
        self.assertEqual(out.returncode, 0, out.stderr)
        env = json.loads(out.stdout.splitlines()[0])["env"]
        self.assertNotIn("NCCL_COMM_ID", env)
        self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
        self.assertEqual(env["MASTER_PORT"], "29500")
        self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")
        self.assertEqual(env["NCCL_SOCKET_IFNAME"], "lo")

    def test_help_of_every_verb(self):
        top = run("--help")
        self.assertEqual(top.returncode, 0)
        for verb in ("run", "capture", "graph", "inspect", "simulate"):
            self.assertIn(verb, top.stdout)
        self.assertIn("MASTER_PORT", run("run", "--help").stdout)
        self.assertIn("captured.graph", run("capture", "--help").stdout)

    def test_capture_needs_its_own_prismd(self):
        out = run("capture", "--out", "/nonexistent/x", "--graph", "g", "--ranks", "0", "--daemon", "unix:///x",
                  "--", "python3", "t.py")
        self.assertEqual(out.returncode, 2)
        self.assertIn("prism capture starts its own prismd", out.stderr)

    def test_unique_id_bytes_match_nccl(self):
        mod = load_launcher()
        uid = mod.nccl_comm_id_bytes("127.0.0.1:29555")
        # Measured from NCCL 2.28.9 with NCCL_COMM_ID=127.0.0.1:29555 (docs/bootstrap.md).
        self.assertEqual(uid[:16].hex(), "8002800280028002020073737f000001")
        self.assertEqual(len(uid), 128)
        self.assertEqual(uid[16:], bytes(112))


    def test_log_directory_is_private_and_logs_never_follow_links(self):
        import stat
        mod = load_launcher()
        tmp = tempfile.mkdtemp(prefix="prism-logdir-test-")
        try:
            # The default: a fresh directory each time, 0700, never one that exists.
            a, b = mod.make_log_dir(None), mod.make_log_dir(None)
            self.assertNotEqual(a, b)
            self.assertEqual(stat.S_IMODE(os.stat(a).st_mode), 0o700)
            os.rmdir(a)
            os.rmdir(b)
            # --log-dir writable by others, or a symlink: refused with the reason.
            shared = os.path.join(tmp, "shared")
            os.mkdir(shared)
            os.chmod(shared, 0o777)
            with self.assertRaisesRegex(mod.PrismError, "writable by other users"):
                mod.make_log_dir(shared)
            link = os.path.join(tmp, "link")
            os.symlink(shared, link)
            with self.assertRaisesRegex(mod.PrismError, "symlink or not a directory"):
                mod.make_log_dir(link)
            # A log planted as a symlink to the caller's file is not written through.
            mine = mod.make_log_dir(os.path.join(tmp, "mine"))
            victim = os.path.join(tmp, "victim")
            with open(victim, "w") as f:
                f.write("precious")
            os.symlink(victim, os.path.join(mine, "rank0.log"))
            with self.assertRaises(OSError):
                mod.open_log(os.path.join(mine, "rank0.log"))
            with open(victim) as f:
                self.assertEqual(f.read(), "precious")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_nccl_version_is_asked_of_the_programs_python_through_env(self):
        mod = load_launcher()
        # A stand-in torch (no libnccl loaded: the probe falls back to
        # torch.cuda.nccl.version()), found through the command's own `env`.
        fake = tempfile.mkdtemp(prefix="fake-torch-")
        os.makedirs(os.path.join(fake, "torch", "cuda"))
        with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
            f.write("from . import cuda\n")
        with open(os.path.join(fake, "torch", "cuda", "__init__.py"), "w") as f:
            f.write("class nccl:\n    @staticmethod\n    def version():\n        return (2, 27, 7)\n")
        args = type("Args", (), {"nccl_version": "auto"})()
        self.assertEqual(mod.nccl_version(args, ["env", f"PYTHONPATH={fake}", sys.executable, "train.py"]), "2.27.7")
        self.assertEqual(mod.wire_profile("2.27.7"), 22707)
        args.nccl_version = "2.30.7"
        self.assertEqual(mod.nccl_version(args, ["python3", "train.py"]), "2.30.7")
        # Not a python program: prismd learns the release from the first rank's plugin.
        self.assertIsNone(mod.nccl_version(type("Args", (), {"nccl_version": "auto"})(), ["./a.out"]))
        self.assertIsNone(mod.wire_profile(None))


class PortChecks(unittest.TestCase):
    def test_a_port_left_in_time_wait_is_free_a_listening_one_is_not(self):
        # The server side closes first, as prismd's /status does: the port stays
        # in TIME_WAIT after the listener is gone. prismd (SO_REUSEADDR) can listen
        # there again, so `prism run --metrics-port` must not refuse it.
        launcher = load_launcher()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        self.assertFalse(launcher.port_free(port), "a listening port counts as in use")
        served.close()
        time.sleep(0.05)
        client.close()
        listener.close()
        self.assertTrue(launcher.port_free(port), "a port with only a TIME_WAIT connection left is free for prismd")


class Refine(unittest.TestCase):
    """prism capture --refine K: the loop over rounds (each round's capture stubbed)."""

    def rounds(self, steadies, k, first=(0, 0.5)):
        mod, said, calls = load_launcher(), [], []

        def run_round(n):
            calls.append(n)
            value = steadies[n - 1]
            return (value, None) if isinstance(value, int) else (0, value)
        return mod.refine_rounds(run_round, first, k, said.append), said, calls

    def test_rounds_stop_when_the_iteration_changes_by_under_half_a_percent(self):
        (status, last), said, calls = self.rounds([(0, 0.46), (0, 0.452), (0, 0.4505), (0, 0.45)], 5)
        self.assertEqual((status, last, calls), (0, 3, [1, 2, 3]))
        self.assertEqual(said[:3], ["round 1: rank 0 steady 0.5000 s -> 0.4600 s, change 8.00%",
                                    "round 2: rank 0 steady 0.4600 s -> 0.4520 s, change 1.74%",
                                    "round 3: rank 0 steady 0.4520 s -> 0.4505 s, change 0.33%"])
        self.assertIn("stable after round 3", said[3])

    def test_rounds_end_at_k_and_say_so(self):
        (status, last), said, _ = self.rounds([(0, 0.4), (0, 0.3)], 2)
        self.assertEqual((status, last), (0, 2))
        self.assertIn("not stable after 2 round(s)", said[-1])

    def test_a_failed_round_keeps_the_last_graph(self):
        (status, last), said, _ = self.rounds([(0, 0.4), 3], 4)
        self.assertEqual((status, last), (3, 1))
        self.assertIn("round 2 captured nothing (status 3); the graph of round 1 stands", said[-1])

    def test_the_steady_iteration_comes_from_prism_session_capture(self):
        mod = load_launcher()
        lines = ["rank 512: 900 operations, 9 iterations of 100 from operation 2; compute 0.1 s per iteration; "
                 "steady iteration 0.5125 s; torch trace: ...",
                 "rank 0: 30 iterations, 840 operations matched to the program (0 not in it); 12 of 18 compute ops "
                 "measured; compute 0.038 s per iteration (the graph: 0.037 s); steady iteration 0.0412 s; wrote x",
                 "measured: ranks 0, 512 (2 of 1024)"]
        self.assertEqual(mod.first_steady(lines), (0, 0.0412))
        self.assertIsNone(mod.first_steady(["measured: ranks 0"]))


class StopRanks(unittest.TestCase):
    """A stopped run (a stall, a failed rank, a refine round that ends) leaves no process of a rank's group
    behind for the next run: after a stall on the GPU host (2026-12-02) the next stage found the GPU busy."""

    def test_a_rank_that_exits_at_the_signal_leaves_no_child_behind(self):
        mod = load_launcher()
        marker = f"prism-stop-ranks-{os.getpid()}"
        # The rank exits at SIGTERM; its child (in its process group, ignoring SIGTERM) would live on.
        ready = os.path.join(tempfile.mkdtemp(), "ready")
        child = (f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); open('{ready}', 'w').close(); "
                 f"time.sleep(300)")
        rank = subprocess.Popen(["sh", "-c", f"{sys.executable} -c {shlex.quote(child)} {marker} & "
                                             f"trap 'exit 0' TERM; while :; do sleep 0.05; done"],
                                start_new_session=True)
        try:
            deadline = time.time() + 10
            while not os.path.exists(ready) and time.time() < deadline:
                time.sleep(0.05)
            self.assertTrue(os.path.exists(ready))
            mod.stop_ranks({0: rank}, signal.SIGTERM, 1)
            self.assertIsNotNone(rank.poll())
            self.assertEqual(processes_mentioning(marker), [])
            self.assertEqual(mod.group_members(rank.pid), [])
        finally:
            for pid in processes_mentioning(marker):
                os.kill(pid, signal.SIGKILL)
            if rank.poll() is None:
                rank.kill()


@unittest.skipUnless(have_binaries(), "prismd, prism-graphgen or the plugin is not built")
class WholeRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="prism-launcher-test-")
        cls.graph = os.path.join(cls.tmp, "g16.graph")
        subprocess.run([GRAPHGEN, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "16",
                        "--subgroups", "8", "-o", cls.graph], check=True, capture_output=True)

    def launch(self, ranks, *program_args, extra=(), graph=None):
        log_dir = tempfile.mkdtemp(prefix="run-", dir=self.tmp)
        cmd = [sys.executable, PRISM, "run", "--graph", graph or self.graph, "--ranks", ranks, "--nccl-version", "2.28.9",
               "--store-port", str(free_port()), "--log-dir", log_dir, *extra,
               "--", sys.executable, FAKE, *program_args]
        return cmd, log_dir

    def test_capture_records_the_sessions_and_says_when_no_operation_was_measured(self):
        capture_tool = os.path.join(BUILD, "daemon", "hybrid", "prism-session-capture")
        if not os.path.isfile(capture_tool):
            self.skipTest("prism-session-capture not built")
        out_dir = os.path.join(self.tmp, "capture")
        cmd, _ = self.launch("5")
        cmd[2:3] = ["capture", "--out", out_dir]  # prism run ... -> prism capture --out DIR ...
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        # The stand-in rank never loads the plugin: prismd recorded the run, but no operation to measure.
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("no real rank reported an operation of the graph's", out.stderr)
        self.assertIn("prism-session-capture failed (status 2)", out.stderr)
        with open(os.path.join(out_dir, "sessions.rec")) as f:
            self.assertIn('"format":"prism-session-recording/1"', f.readline())
        self.assertEqual(stat_mode(out_dir), 0o700)
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(again.returncode, 2)
        self.assertIn("already exists", again.stderr)

    def test_capture_without_a_graph_follows_the_real_ranks(self):
        capture_tool = os.path.join(BUILD, "daemon", "hybrid", "prism-session-capture")
        if not os.path.isfile(capture_tool):
            self.skipTest("prism-session-capture not built")
        out_dir = os.path.join(self.tmp, "capture-follow")
        cmd, _ = self.launch("5")
        at = cmd.index("--graph")
        cmd[at:at + 2] = ["--world", "16"]
        cmd[2:3] = ["capture", "--out", out_dir]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        # prismd ran --follow on DIR/world.graph; the stand-in rank reported no operation.
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("no real rank reported an operation", out.stderr)
        self.assertTrue(os.path.isfile(os.path.join(out_dir, "world.graph")))
        with open(os.path.join(out_dir, "sessions.rec")) as f:
            self.assertIn('"graph":"follow:world"', f.readline())
        w = cmd.index("--world")
        no_world_cmd = [os.path.join(self.tmp, "capture-nw") if c == out_dir else c for c in cmd[:w] + cmd[w + 2:]]
        no_world = subprocess.run(no_world_cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(no_world.returncode, 2)
        self.assertIn("needs --world N", no_world.stderr)

    def test_capture_puts_the_torch_trace_on_the_ranks_path(self):
        graph = os.path.join(self.tmp, "trace.graph")
        subprocess.run([GRAPHGEN, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8", "-o", graph],
                       check=True, capture_output=True)
        out_dir = os.path.join(self.tmp, "trace-capture")
        base = [sys.executable, PRISM, "capture", "--out", out_dir, "--graph", graph, "--ranks", "3", "--dry-run"]
        out = subprocess.run(base + ["--", "python3", "t.py"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PYTHONPATH="/mine"))
        self.assertEqual(out.returncode, 0, out.stderr)
        env = json.loads(out.stdout.splitlines()[0])["env"]
        hook = os.path.join(os.path.dirname(os.path.abspath(PRISM)), "prism_torch")
        self.assertEqual(env["PYTHONPATH"], hook + os.pathsep + "/mine")
        self.assertEqual(env["PRISM_TORCH_TRACE"], os.path.join(out_dir, "torch"))
        self.assertTrue(os.path.isfile(os.path.join(hook, "sitecustomize.py")))
        out = subprocess.run(base + ["--no-torch-trace", "--", "python3", "t.py"], capture_output=True, text=True,
                             timeout=60)
        env = json.loads(out.stdout.splitlines()[0])["env"]
        self.assertNotIn("PRISM_TORCH_TRACE", env)
        self.assertNotIn("PRISM_ANNOUNCE_GROUPS", env)  # a graph names the groups

    def test_a_follow_capture_has_the_ranks_announce_their_split_group_groups(self):
        # Without --graph prismd follows the ranks: scripts/prism_torch goes on their path with
        # PRISM_ANNOUNCE_GROUPS, also without the torch trace; --dry-run shows it (it used to fail there).
        base = [sys.executable, PRISM, "capture", "--out", os.path.join(self.tmp, "follow-dry"), "--world", "16",
                "--ranks", "0", "--dry-run"]
        hook = os.path.join(os.path.dirname(os.path.abspath(PRISM)), "prism_torch")
        for extra in ([], ["--no-torch-trace"]):
            out = subprocess.run(base + extra + ["--", "python3", "t.py"], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            env = json.loads(out.stdout.splitlines()[0])["env"]
            self.assertEqual(env.get("PRISM_ANNOUNCE_GROUPS"), "1")
            self.assertTrue(env["PYTHONPATH"].startswith(hook), env["PYTHONPATH"])
            self.assertEqual("PRISM_TORCH_TRACE" in env, not extra)

    def test_a_follow_capture_hands_the_ranks_torch_traces_to_prism_session_capture(self):
        # The rank writes a torch trace where PRISM_TORCH_TRACE says (as scripts/prism_torch would), then does
        # what the stand-in rank does; a stand-in prism-session-capture records how it was called.
        calls = os.path.join(self.tmp, "session-capture-calls.txt")
        tool = os.path.join(self.tmp, "fake-session-capture")
        with open(tool, "w") as f:
            f.write(f"""#!{sys.executable}
import sys
if "--help" in sys.argv:
    print("--torch-trace TEXT  the real ranks' torch traces")
    print("--world-graph TEXT  the world graph prismd ran with")
    print("--run-step-cost-us FLOAT  the step cost prismd played")
    sys.exit(0)
open({calls!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
sys.exit(2)
""")
        os.chmod(tool, 0o700)
        rank = os.path.join(self.tmp, "traced-rank.sh")
        with open(rank, "w") as f:
            f.write(f"""mkdir -p "$PRISM_TORCH_TRACE" && echo '{{"format":"prism-torch-trace/1","rank":5}}' > \
"$PRISM_TORCH_TRACE/torch-rank-$RANK.jsonl" && exec {sys.executable} {FAKE}
""")
        out_dir = os.path.join(self.tmp, "capture-traced")
        cmd, _ = self.launch("5")
        at = cmd.index("--graph")
        cmd[at:at + 2] = ["--world", "16", "--session-capture", tool]
        cmd[2:3] = ["capture", "--out", out_dir]
        cmd[cmd.index("--") + 1:] = ["sh", rank]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("prism-session-capture failed (status 2)".replace("prism-session-capture", "fake-session-capture"),
                      out.stderr)
        with open(calls) as f:
            called = f.read()
        self.assertIn(f"--torch-trace {os.path.join(out_dir, 'torch')}", called)
        # The world graph prismd played: NCCL's step cost is fitted on its links.
        self.assertIn(f"--world-graph {os.path.join(out_dir, 'world.graph')}", called)
        # prismd --follow measured with no lockstep floor beyond the link latency, and said so.
        self.assertIn("--run-step-cost-us 0", called)
        self.assertTrue(os.path.isfile(os.path.join(out_dir, "torch", "torch-rank-5.jsonl")))
        # An older prism-session-capture (no --torch-trace in its help): the traces are kept, not handed over.
        with open(tool) as f:
            text = f.read()
        with open(tool, "w") as f:
            f.write(text.replace("--torch-trace TEXT", "--graph TEXT").replace("--world-graph TEXT", "-o TEXT")
                    .replace("--run-step-cost-us FLOAT", "-o TEXT"))
        os.remove(calls)
        older = [os.path.join(self.tmp, "capture-traced-2") if c == out_dir else c for c in cmd]
        out = subprocess.run(older, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("does not read torch traces (an older build)", out.stderr)
        with open(calls) as f:
            called = f.read()
        self.assertNotIn("--torch-trace", called)
        self.assertNotIn("--world-graph", called)
        self.assertNotIn("--run-step-cost-us", called)

    def test_the_plugins_link_is_the_graphs_nic(self):
        graph = os.path.join(self.tmp, "nic.graph")
        subprocess.run([GRAPHGEN, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8",
                        "--nic-gbps", "25", "--nic-latency-us", "7", "-o", graph], check=True, capture_output=True)
        out = subprocess.run([sys.executable, PRISM, "run", "--graph", graph, "--ranks", "3", "--dry-run",
                              "--", "python3", "t.py"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        env = json.loads(out.stdout.splitlines()[0])["env"]
        self.assertEqual(env["WORLD_SIZE"], "8")
        self.assertEqual(env["PRISM_LINK_GBPS"], "25")
        self.assertEqual(env["PRISM_LINK_LATENCY_US"], "7")
        self.assertEqual(env["PRISM_NIC_SPEED_MBPS"], "25000")
        # the caller's own setting wins
        out = subprocess.run([sys.executable, PRISM, "run", "--graph", graph, "--ranks", "3", "--dry-run",
                              "--", "python3", "t.py"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PRISM_LINK_GBPS="100"))
        self.assertEqual(json.loads(out.stdout.splitlines()[0])["env"]["PRISM_LINK_GBPS"], "100")

    def test_the_plugins_link_is_one_gpus_share_of_the_nics(self):
        graph = os.path.join(self.tmp, "nic-share.graph")
        subprocess.run([GRAPHGEN, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "16",
                        "--gpus-per-node", "8", "--nics-per-node", "4", "--nic-gbps", "400", "-o", graph],
                       check=True, capture_output=True)
        out = subprocess.run([sys.executable, PRISM, "run", "--graph", graph, "--ranks", "3", "--dry-run",
                              "--", "python3", "t.py"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        env = json.loads(out.stdout.splitlines()[0])["env"]
        self.assertEqual(env["PRISM_LINK_GBPS"], "200")  # 4 x 400 Gbit/s over 8 GPUs, as the engine
        self.assertEqual(env["PRISM_NIC_SPEED_MBPS"], "400000")  # what one NIC is, for NCCL's tuning

    def test_op_times_point_the_ranks_at_the_log_dir_and_the_run_ends_with_their_table(self):
        out = subprocess.run([sys.executable, PRISM, "run", "--graph", self.graph, "--ranks", "3", "--op-times",
                              "--dry-run", "--", "python3", "t.py"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout.splitlines()[0])["env"]["PRISM_OP_TIMES"],
                         "<log dir of this run>/op-times")
        cmd, log_dir = self.launch("5", extra=["--op-times"])
        # The stand-in rank never loads NCCL: no lines, and the run says so at its end.
        run_out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(run_out.returncode, 0, run_out.stdout + run_out.stderr)
        self.assertIn(f"prism: no operation times in {os.path.join(log_dir, 'op-times')}: the real ranks ran no NCCL "
                      "operation through the plugin's profiler role", run_out.stderr)
        # Lines there (as a real rank's plugin writes them) give the table.
        os.makedirs(os.path.join(log_dir, "op-times"))
        with open(os.path.join(log_dir, "op-times", "prism-ops.7.jsonl"), "w") as f:
            f.write(op_line("allreduce", 1 << 20, 100, 2_100))
        sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
        from prism_launcher.op_times import print_op_times
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            print_op_times(os.path.join(log_dir, "op-times"), limit=12)
        self.assertIn("NCCL's kernel time per operation kind on the real ranks (1 operations", err.getvalue())
        self.assertRegex(err.getvalue(), r"allreduce +1 MiB +RING +SIMPLE x1 +median 2\.0 us, total 0\.002 ms")

    def test_a_virtual_rank_0s_nccl_id_comes_from_prismds_store(self):
        cmd, _ = self.launch("5")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("[rank 5] got the world's NCCL id: 128 bytes, root 127.64.", out.stdout)
        self.assertIn("prismd ready", out.stderr)

    def test_a_rank_that_matched_no_operation_is_warned_about(self):
        # The stand-in rank never loads the plugin: prismd matches none of its operations.
        cmd, _ = self.launch("5")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("prism: warning: rank 5 exited having matched 0 operations with the graph", out.stderr)

    def test_the_job_ends_with_prismds_report(self):
        # What a user reads when the job ends: prismd's exit lines, not only "job exited".
        cmd, log_dir = self.launch("5")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn(f"prism: prismd's report (all of it in {os.path.join(log_dir, 'prismd.log')}):", out.stderr)
        self.assertRegex(out.stderr, r"prism:   hybrid: 0 real-rank operations matched, 0 unmatched")
        self.assertRegex(out.stderr, r"prism:   late receives")
        self.assertLess(out.stderr.index("prismd's report"), out.stderr.index("job exited with status 0"))

    def test_the_callers_ld_preload_reaches_the_ranks_not_prismd(self):
        cmd, log_dir = self.launch("5")
        bogus = os.path.join(self.tmp, "no-such-preload.so")  # ld.so names it in every process that gets it
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, LD_PRELOAD=bogus))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        with open(os.path.join(log_dir, "prismd.log"), errors="replace") as f:
            self.assertNotIn("no-such-preload", f.read())
        self.assertIn("no-such-preload", out.stdout + out.stderr + "".join(
            open(os.path.join(log_dir, n), errors="replace").read() for n in os.listdir(log_dir) if n != "prismd.log"))

    def test_a_group_the_graph_does_not_have_stops_the_run_with_the_reason(self):
        # Without --on-divergence stop this rank would wait for the id until the launcher's timeout.
        cmd, log_dir = self.launch("5", "--group", "999", "--give-up", "600")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 3, out.stdout + out.stderr)
        self.assertIn("prismd stopped the run: the run diverged from the graph: PyTorch's store: rank 5 waits for "
                      "NCCL id", out.stderr)
        self.assertIn("new_group call #999", out.stderr)
        self.assertEqual(processes_mentioning(log_dir), [])

    def megatron_graph(self):
        """TP2 PP2 on 16 ranks with Megatron-core's groups: 1-16 GTP, then dp_cp[i] 17+2i, its Gloo twin 18+2i."""
        job = os.path.join(self.tmp, "megatron16.yaml")
        graph = os.path.join(self.tmp, "megatron16.graph")
        with open(job, "w") as f:
            f.write("name: m16\nworld: 16\nmodel: {layers: 4, hidden: 256, heads: 8, seq_len: 128, vocab: 1024}\n"
                    "parallel: {tp: 2, pp: 2, process_groups: megatron}\n")
        subprocess.run([GRAPHGEN, "job", job, "-o", graph], check=True, capture_output=True)
        return graph

    def test_megatron_group_numbers_count_the_gloo_groups(self):
        # Rank 3 is the second member of dp_cp[1] = [1, 3, 5, 7], PyTorch group 19 (after 16 GTP groups and
        # dp_cp[0] with its Gloo twin): prismd plays its comm rank 0 and sets the id.
        cmd, _ = self.launch("3", "--group", "19", "--give-up", "60", graph=self.megatron_graph())
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("got group 19's NCCL id", out.stdout)

    def test_an_nccl_id_for_a_gloo_group_of_the_graph_stops_the_run(self):
        # PyTorch group 20 is dp_cp_gloo[1] in the graph: a program asking for its NCCL id has other groups.
        cmd, _ = self.launch("3", "--group", "20", "--give-up", "600", graph=self.megatron_graph())
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 3, out.stdout + out.stderr)
        self.assertIn("which is the Gloo group dp_cp_gloo[1] (PyTorch group 20) in the graph", out.stderr)

    def test_on_divergence_follow_keeps_the_run_going_and_says_so(self):
        cmd, log_dir = self.launch("5", "--group", "999", "--give-up", "5", extra=("--on-divergence", "follow"))
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("gave up waiting for group 999", out.stdout)
        with open(os.path.join(log_dir, "prismd.log"), errors="replace") as f:
            log = f.read()
        self.assertIn("following it (--on-divergence follow)", log)
        self.assertNotIn("the run diverged from the graph", log)

    def test_a_failing_rank_stops_the_others_and_sets_the_exit_status(self):
        cmd, log_dir = self.launch("0,1", "--fail-rank", "1", "--code", "3", "--linger", "600")
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 3, out.stdout + out.stderr)
        self.assertIn("rank 1 exited with status 3", out.stderr)
        self.assertEqual(processes_mentioning(log_dir), [])

    def test_sigkill_of_prism_run_takes_prismd_and_the_ranks_with_it(self):
        cmd, log_dir = self.launch("0,5", "--absent-rank", "5", "--linger", "600")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _, seen = read_lines_until(proc, lambda line: line.startswith("[rank 0]"))  # prismd up, rank 0 running
        self.assertTrue(processes_mentioning(log_dir, environ=True), "".join(seen))
        proc.kill()  # no chance to clean up: the children must go by themselves
        proc.wait()
        deadline = time.time() + 30
        while processes_mentioning(log_dir, environ=True) and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(processes_mentioning(log_dir, environ=True), [], "".join(seen))

    def test_a_rank_that_never_comes_is_named_and_ctrl_c_stops_everything(self):
        cmd, log_dir = self.launch("0,5", "--absent-rank", "5", "--linger", "600")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        named, seen = read_lines_until(proc, lambda line: line.startswith("[prismd]") and "real rank(s) 5" in line
                                       and "not connected" in line)
        status_url = next((line.split("/status on ")[1].split(";")[0] for line in seen if "/status on " in line), None)
        self.assertIsNotNone(named, "".join(seen))
        with urllib.request.urlopen(status_url, timeout=5) as r:  # the same wait on prismd's /status
            status = json.loads(r.read().decode())
        self.assertTrue(any(w["ranks"] == [5] and "not connected" in w["waits_for"] for w in status["waiting"]),
                        status)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, rest)
        self.assertIn("interrupted", rest)
        self.assertEqual(processes_mentioning(log_dir), [])

    def test_bad_inputs_give_one_line_and_status_2(self):
        garbage = os.path.join(self.tmp, "garbage.graph")
        with open(garbage, "wb") as f:
            f.write(b"not a graph at all")
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        busy = held.getsockname()[1]
        cases = {
            "graph": ["run", "--graph", garbage, "--ranks", "0", "--nccl-version", "2.28.9", "--store-port",
                      str(free_port()), "--", "true"],
            "plugin": ["run", "--graph", self.graph, "--ranks", "0", "--plugin", "/nonexistent/libnccl-net-prism.so",
                       "--", "true"],
            "port": ["run", "--graph", self.graph, "--ranks", "0", "--store-port", str(busy), "--", "true"],
            "nccl": ["run", "--graph", self.graph, "--ranks", "0", "--nccl-version", "2.22.3", "--store-port",
                     str(free_port()), "--", "true"],
        }
        expected = {"graph": "graph", "plugin": "no such file", "port": "in use", "nccl": "2.22.3"}
        for name, argv in cases.items():
            with self.subTest(name):
                out = run(*argv)
                self.assertEqual(out.returncode, 2, out.stderr)
                lines = out.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, out.stderr)
                self.assertTrue(lines[0].startswith("prism: error: "), lines[0])
                self.assertIn(expected[name], lines[0])
        held.close()


def op_line(kind, nbytes, start, stop, nranks=8, algo="RING", pid=1):
    return json.dumps({"pid": pid, "comm": "0x1", "rank": 0, "nranks": nranks, "op": 1, "kind": kind, "seq": 0,
                       "peer": -1, "root": 0, "bytes": nbytes, "algo": algo, "proto": "SIMPLE", "channels": 2,
                       "enqueued_wall_ns": 1, "kernel_start_ns": start, "kernel_stop_ns": stop,
                       "kernel_channels": 2 if start is not None else 0, "complete": start is not None}) + "\n"


class OpTimes(unittest.TestCase):
    """prism op-times DIR: the plugin's PRISM_OP_TIMES lines per operation kind."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_rows_per_kind_and_size_busiest_first_with_what_had_no_stamps(self):
        with open(os.path.join(self.tmp, "prism-ops.100.jsonl"), "w") as f:
            f.write(op_line("allreduce", 32 << 20, 1_000, 31_000) + op_line("allreduce", 32 << 20, 40_000, 72_000))
            f.write(op_line("send", 1 << 20, None, None, nranks=2, algo=""))
        with open(os.path.join(self.tmp, "prism-ops.101.jsonl"), "w") as f:
            f.write(op_line("allgather", 4 << 20, 0, 90_000, pid=101) + '{"kind": "allga')  # cut short
        out = run("op-times", self.tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], f"4 NCCL operations from 2 process(es) in {self.tmp}")
        self.assertRegex(lines[2], r"^allgather +4 MiB +RING +SIMPLE +8 +1 +90\.0 +90\.0 +90\.0 +0\.090$")
        self.assertRegex(lines[3], r"^allreduce +32 MiB +RING +SIMPLE +8 +2 +31\.0 +30\.0 +32\.0 +0\.062$")
        self.assertIn("1 operation(s) carried no kernel stamps", out.stdout)
        self.assertIn("1 line(s) did not parse", out.stdout)
        as_json = json.loads(run("op-times", self.tmp, "--json").stdout)
        self.assertEqual((as_json["operations"], as_json["without_stamps"], as_json["bad_lines"]), (4, 1, 1))
        self.assertEqual([r["kind"] for r in as_json["rows"]], ["allgather", "allreduce"])

    def test_a_directory_without_lines_says_how_to_make_them(self):
        for target, expected in ((self.tmp, "holds no prism-ops.<pid>.jsonl"),
                                 (os.path.join(self.tmp, "absent"), "no such file or directory")):
            with self.subTest(target):
                out = run("op-times", target)
                self.assertEqual(out.returncode, 2)
                self.assertTrue(out.stderr.startswith("prism: error: "), out.stderr)
                self.assertIn(expected, out.stderr)
                self.assertIn("PRISM_OP_TIMES=", out.stderr)


if __name__ == "__main__":
    unittest.main()
