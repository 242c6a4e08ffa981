#!/usr/bin/env python3
"""The hostile-but-fair checks of issue 12 against the built binaries
(prismd, prism-graphgen), as CI runs them: loopback and /tmp only, every step
bounded in time. Run by ctest (test/daemon.cmake) as

  hostile_checks.py PRISMD PRISM_GRAPHGEN EXAMPLES_DIR

Covers: the --listen socket is never taken over and is created 0600 at a
per-user default path (items 1, 2); prismd exits within a fraction of a
second, also with metrics on (item 5; 2 s before); --simulate checks --trace
first and prints a partial report on SIGTERM (item 6); graphgen refuses
devices, directories, duplicate keys and wrapping flags (item 7); directories
are named as such (item 8); CLI ranges and slow metrics clients (item 10).
The timing checks bound a fixed wait that was 2 s (civetweb's poll quantum)
with a generous margin; they are not performance measurements."""
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

PRISMD, GRAPHGEN, EXAMPLES = sys.argv[1:4] if len(sys.argv) >= 4 else (None, None, None)
PLUGIN = os.path.join(os.path.dirname(os.path.dirname(PRISMD)), "plugin", "libnccl-net-prism.so") if PRISMD else None
STEP_TIMEOUT = 60  # seconds, for any one command
EXIT_BOUND = 1.5   # seconds; exit used to wait out a 2 s poll quantum


def run(*args, env=None, timeout=STEP_TIMEOUT, preexec=None):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=preexec)


def answers(path):
    """Whether something accepts connections on the Unix socket `path`."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_for(predicate, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="prism-hostile-")
        cls.small = os.path.join(cls.dir, "small.graph")
        out = run(GRAPHGEN, "job", os.path.join(EXAMPLES, "small-8.yaml"), "-o", cls.small)
        assert out.returncode == 0, out.stderr
        cls.gpt = os.path.join(cls.dir, "gpt.graph")
        out = run(GRAPHGEN, "job", os.path.join(EXAMPLES, "gpt3-175b-8192.yaml"), "-o", cls.gpt)
        assert out.returncode == 0, out.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def hybrid(self, *extra, env=None):
        p = subprocess.Popen([PRISMD, "--graph", self.small, "--metrics-address", "127.0.0.1:0", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        return p

    def stop(self, p):
        """SIGTERM; returns (exit code, seconds to exit)."""
        start = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=STEP_TIMEOUT)
        return rc, time.monotonic() - start

    # ---- items 1, 2: the --listen socket ----

    def test_a_live_socket_is_not_taken_over(self):
        sock = os.path.join(self.dir, "live.sock")
        first = self.hybrid("--listen", "unix://" + sock)
        self.assertTrue(wait_for(lambda: answers(sock)), "the first prismd never listened")
        second = run(PRISMD, "--graph", self.small, "--metrics-address", "none", "--listen", "unix://" + sock)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn("another prismd", second.stderr)
        self.assertTrue(answers(sock), "the first prismd lost its socket")
        self.assertEqual(stat.S_IMODE(os.lstat(sock).st_mode), 0o600)
        rc, _ = self.stop(first)
        self.assertEqual(rc, 0)
        self.assertFalse(os.path.exists(sock))

    def test_default_socket_is_per_user_and_private(self):
        runtime = os.path.join(self.dir, "run")
        os.mkdir(runtime, 0o700)
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        p = self.hybrid(env=env)
        sock = os.path.join(runtime, "prismd.sock")
        self.assertTrue(wait_for(lambda: answers(sock)), "prismd did not listen at $XDG_RUNTIME_DIR/prismd.sock")
        self.assertEqual(stat.S_IMODE(os.lstat(sock).st_mode), 0o600)
        self.assertEqual(os.lstat(sock).st_uid, os.getuid())
        rc, _ = self.stop(p)
        self.assertEqual(rc, 0)
        self.assertFalse(os.path.exists(sock))

    # ---- item 5: exit time ----

    def test_simulate_exits_promptly_with_metrics_on(self):
        start = time.monotonic()
        out = run(PRISMD, "--graph", self.gpt, "--simulate", "--metrics-address", "127.0.0.1:0")
        took = time.monotonic() - start
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("predicted iteration time", out.stdout)
        print(f"\nprismd --simulate gpt3-175b-8192 with metrics: {took:.3f} s", file=sys.stderr)
        self.assertLess(took, EXIT_BOUND)

    def test_hybrid_exits_promptly_on_sigterm(self):
        sock = os.path.join(self.dir, "exit.sock")
        p = self.hybrid("--listen", "unix://" + sock)
        self.assertTrue(wait_for(lambda: answers(sock)))
        rc, took = self.stop(p)
        print(f"\nprismd hybrid exit after SIGTERM with metrics: {took:.3f} s", file=sys.stderr)
        self.assertEqual(rc, 0)
        self.assertLess(took, EXIT_BOUND)

    # ---- item 6: --simulate keeps its work ----

    def test_bad_trace_path_is_refused_before_the_replay(self):
        out = run(PRISMD, "--graph", self.small, "--simulate", "--metrics-address", "none",
                  "--trace", os.path.join(self.dir, "missing", "t.json"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("--trace", out.stderr)
        self.assertEqual(out.stdout, "")

    def test_sigterm_during_simulate_prints_a_partial_report(self):
        sock = os.path.join(self.dir, "sim.sock")
        p = subprocess.Popen([PRISMD, "--graph", self.gpt, "--simulate", "--iterations", "1000000",
                              "--metrics-address", "none", "--listen", "unix://" + sock],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: answers(sock)))
        time.sleep(0.3)  # let the replay run a little
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=STEP_TIMEOUT)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("STOPPED after", out)
        self.assertIn("predicted iteration time", out)
        self.assertFalse(os.path.exists(sock))

    # ---- item 7: graphgen reads anything ----

    def graphgen(self, *args, limit_memory=False):
        def cap():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        return run(GRAPHGEN, *args, preexec=cap if limit_memory else None)

    def test_graphgen_refuses_devices_directories_and_duplicates(self):
        out_graph = os.path.join(self.dir, "never.graph")
        r = self.graphgen("job", "/dev/zero", "-o", out_graph, limit_memory=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("not a regular file", r.stderr)
        r = self.graphgen("job", self.dir, "-o", out_graph)
        self.assertEqual(r.returncode, 2)
        self.assertIn("is a directory", r.stderr)
        job = os.path.join(self.dir, "dup.yaml")
        with open(os.path.join(EXAMPLES, "small-8.yaml")) as f, open(job, "w") as g:
            g.write(f.read() + "name: again\n")
        r = self.graphgen("job", job, "-o", out_graph)
        self.assertEqual(r.returncode, 2)
        self.assertIn("twice", r.stderr)
        with open(os.path.join(EXAMPLES, "small-8.yaml")) as f, open(job, "w") as g:
            g.write(f.read() + "compute_table: /dev/zero\n")
        r = self.graphgen("job", job, "-o", out_graph, limit_memory=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("compute_table", r.stderr)
        self.assertFalse(os.path.exists(out_graph))

    def test_graphgen_refuses_flags_that_wrap(self):
        out_graph = os.path.join(self.dir, "never.graph")
        base = ["collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8", "-o", out_graph]
        for flag, value in [("--nic-gbps", "-5"), ("--nic-latency-us", "1e300"), ("--ranks", "16777216")]:
            r = self.graphgen(*base, flag, value)
            self.assertEqual(r.returncode, 2, f"{flag} {value}: {r.stderr}")
            self.assertIn(flag, r.stderr)
        self.assertFalse(os.path.exists(out_graph))

    # ---- item 8: a directory is named ----

    def test_a_directory_graph_is_named(self):
        out = run(PRISMD, "--graph", self.dir, "--simulate", "--metrics-address", "none")
        self.assertEqual(out.returncode, 1)
        self.assertIn("is a directory", out.stderr)

    # ---- item 10: CLI and the metrics endpoint ----

    def test_cli_ranges(self):
        for args in (["--iterations", "0"], ["--lag-limit-ms", "-5"]):
            out = run(PRISMD, "--graph", self.small, "--simulate", "--metrics-address", "none", *args)
            self.assertEqual(out.returncode, 2, args)
            self.assertIn(args[0], out.stderr)

    def test_metrics_answer_behind_slow_and_idle_clients(self):
        sock = os.path.join(self.dir, "metrics.sock")
        port = self.free_port()
        p = subprocess.Popen([PRISMD, "--graph", self.small, "--metrics-address", f"127.0.0.1:{port}",
                              "--listen", "unix://" + sock], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: answers(sock)))
        held = []
        for i in range(48):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i < 8:
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            held.append(c)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                self.assertEqual(r.status, 200)
                self.assertIn(b"prism_", r.read())
        finally:
            for c in held:
                c.close()

    # ---- issue 27, items 1-3: the store under another user's idle connections ----

    def plugin_reaches(self, sock):
        """Whether the built plugin's init reaches prismd at unix://`sock` over gRPC (its Announce is answered:
        accepted, or refused for its NCCL version); False when prismd does not answer within 5 s."""
        code = ("import ctypes, sys\n"
                "lib = ctypes.CDLL(sys.argv[1])\n"
                "net = ctypes.addressof(ctypes.c_char.in_dll(lib, 'ncclNetPlugin_v11'))\n"
                "init = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64, "
                "ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(ctypes.c_void_p.from_address(net + 8).value)\n"
                "ctx, cfg = ctypes.c_void_p(), ctypes.c_int(-1)\n"
                "print(init(ctypes.byref(ctx), 0x1234, ctypes.byref(cfg), None, None))\n")
        env = dict(os.environ, PRISM_DAEMON="unix://" + sock, PRISM_DAEMON_TIMEOUT_MS="5000")
        out = run(sys.executable, "-c", code, PLUGIN, env=env)
        return "cannot reach prismd" not in out.stderr and out.returncode == 0

    @staticmethod
    def store_ping_ms(port):
        """Milliseconds for VALIDATE + PING to be answered by the store at 127.0.0.1:`port` (10 s at most)."""
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(bytes([0]) + (0x3C85F7CE).to_bytes(4, "little") + bytes([13]) + (77).to_bytes(4, "little"))
            reply = b""
            while len(reply) < 4:
                chunk = s.recv(4 - len(reply))
                if not chunk:
                    raise AssertionError("the store closed a validated client's PING")
                reply += chunk
        assert int.from_bytes(reply, "little") == 77
        return (time.monotonic() - start) * 1000

    @staticmethod
    def fds_and_rss(pid):
        with open(f"/proc/{pid}/status") as f:
            rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return len(os.listdir(f"/proc/{pid}/fd")), rss_kib // 1024

    def idle_connections_of_nobody(self, port, n, first=b""):
        """A process of uid 65534 holding `n` connections to the store, each sent `first` (nothing: idle);
        returns (process, count held)."""
        code = ("import socket, sys\n"
                "held = []\n"
                "for _ in range(int(sys.argv[2])):\n"
                "    s = socket.socket()\n"
                "    s.settimeout(5)\n"
                "    try:\n"
                "        s.connect(('127.0.0.1', int(sys.argv[1])))\n"
                "        s.sendall(bytes.fromhex(sys.argv[3]))\n"
                "    except OSError:\n"
                "        break\n"
                "    held.append(s)\n"
                "print(len(held), flush=True)\n"
                "answered = closed = 0\n"
                "for s in held if sys.argv[3] else []:  # what the store did with each one's request\n"
                "    try:\n"
                "        data = s.recv(4)\n"
                "        answered += bool(data)\n"
                "        closed += not data\n"
                "    except OSError:\n"
                "        closed += 1\n"
                "print(answered, closed, flush=True)\n"
                "sys.stdin.read()\n")

        def as_nobody():
            resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
            os.setgid(65534)
            os.setuid(65534)
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # one nobody may run
        p = subprocess.Popen([python, "-c", code, str(port), str(n), first.hex()], stdin=subprocess.PIPE, cwd="/",
                             stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        return p, int(p.stdout.readline() or 0)

    def test_store_refuses_another_users_clients(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as a second user (CI runs as root)")
        sock = os.path.join(self.dir, "store-uid.sock")
        port = self.free_port()
        err_path = sock + ".err"
        with open(err_path, "w") as err:
            p = subprocess.Popen([PRISMD, "--graph", self.small, "--real-ranks", "0", "--listen", "unix://" + sock,
                                  "--metrics-address", "none", "--torch-store", f"127.0.0.1:{port}"],
                                 stdout=subprocess.DEVNULL, stderr=err)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: answers(sock)), "prismd never listened")
        validate_ping = bytes([0]) + (0x3C85F7CE).to_bytes(4, "little") + bytes([13]) + (9).to_bytes(4, "little")
        attacker, held = self.idle_connections_of_nobody(port, 600, validate_ping)  # more than the 512 cap
        self.assertEqual(held, 600)
        answered, closed = map(int, attacker.stdout.readline().split())
        self.assertEqual((answered, closed), (0, 600), "another user's clients were served")
        self.assertGreaterEqual(self.store_ping_ms(port), 0)  # this user's client still is
        attacker.stdin.close()
        attacker.wait(timeout=STEP_TIMEOUT)
        rc, _ = self.stop(p)
        self.assertEqual(rc, 0)
        with open(err_path) as f:
            self.assertIn("runs as uid 65534, not as prismd's uid 0: refused", f.read())

    def test_store_serves_under_another_users_idle_connections(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to act as a second user (CI runs as root)")
        for soft, hard in ((1024, 8192), (128, 128)):  # the limit raised; a limit that cannot be raised
            with self.subTest(nofile=(soft, hard)):
                self.store_under_attack(soft, hard)

    def store_under_attack(self, soft, hard):
        sock = os.path.join(self.dir, f"store-{soft}.sock")
        port = self.free_port()

        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        out_path, err_path = sock + ".out", sock + ".err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            p = subprocess.Popen([PRISMD, "--graph", self.small, "--real-ranks", "0", "--listen", "unix://" + sock,
                                  "--metrics-address", "none", "--torch-store", f"127.0.0.1:{port}"],
                                 stdout=out, stderr=err, preexec_fn=low_limit)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: answers(sock)), "prismd never listened")
        with open(f"/proc/{p.pid}/limits") as f:
            limit = next(line.split()[3:5] for line in f if line.startswith("Max open files"))
        self.assertEqual(limit, [str(hard), str(hard)], "prismd left its soft open-file limit below the hard one")
        self.assertTrue(wait_for(lambda: self.store_ping_ms(port) >= 0))
        fds0, rss0 = self.fds_and_rss(p.pid)
        attacker, held = self.idle_connections_of_nobody(port, 2000)
        self.assertEqual(held, 2000, "the store's backlog refused connections")
        pings = [self.store_ping_ms(port) for _ in range(20)]
        fds, rss = self.fds_and_rss(p.pid)
        served = self.plugin_reaches(sock)
        print(f"\nnofile {soft}/{hard}: 2000 idle connections of uid 65534: store PING+VALIDATE max "
              f"{max(pings):.1f} ms, median {sorted(pings)[10]:.1f} ms over 20; prismd fds {fds0} -> {fds}, "
              f"RSS {rss0} -> {rss} MiB", file=sys.stderr)
        self.assertTrue(served, "prismd's gRPC did not answer the plugin while the store was flooded")
        self.assertLess(fds, hard // 2 + fds0, "the store took more than its share of prismd's descriptors")
        self.assertLess(rss - rss0, 256, "prismd's memory grew without bound")
        attacker.stdin.close()
        attacker.wait(timeout=STEP_TIMEOUT)
        self.assertTrue(wait_for(lambda: self.fds_and_rss(p.pid)[0] <= fds0 + 4), "descriptors not given back")
        self.assertGreaterEqual(self.store_ping_ms(port), 0)
        self.assertTrue(self.plugin_reaches(sock), "prismd's gRPC did not recover")
        rc, _ = self.stop(p)
        self.assertEqual(rc, 0)
        with open(out_path) as f:
            self.assertNotIn("store:", f.read(), "store log lines went to stdout, not stderr")
        with open(err_path) as f:
            self.assertIn("store:", f.read())

    @staticmethod
    def free_port():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port


if __name__ == "__main__":
    if None in (PRISMD, GRAPHGEN, EXAMPLES):
        sys.exit("usage: hostile_checks.py PRISMD PRISM_GRAPHGEN EXAMPLES_DIR")
    unittest.main(argv=sys.argv[:1], verbosity=2)
