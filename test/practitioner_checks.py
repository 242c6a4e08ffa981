#!/usr/bin/env python3
"""What a practitioner expects of the built binaries (issue 25, items 3-6),
loopback and /tmp only, every step bounded in time. Run by ctest
(test/daemon.cmake) as

  practitioner_checks.py PRISMD PRISM_GRAPHGEN EXAMPLES_DIR PRISM_SCRIPT

Item 3, waiting made visible: a hybrid prismd whose real rank never connects
says so on stderr and in /status's alerts; --simulate with --real-ranks is
refused. Item 4, CLI conventions: usage errors exit 2 with a "prismd:" line;
a mistyped subcommand names the nearest one; a missing output folder is
named; --bytes takes every form its help gives; prism run --world that
disagrees with the graph is refused. Item 5, progress: a long --simulate on
a terminal shows a progress line; /status gives percent_done. Item 6,
traces: the default traces one rank per pipeline stage; a trace estimated
over --trace-limit-mb is refused before the replay. No check is on time:
waits only bound how long a check may take."""
import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

PRISMD, GRAPHGEN, EXAMPLES, PRISM = sys.argv[1:5] if len(sys.argv) >= 5 else (None,) * 4
STEP_TIMEOUT = 120  # seconds, for any one command


def run(*args, timeout=STEP_TIMEOUT):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_of(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
            return json.loads(r.read().decode())
    except (OSError, ValueError):
        return None


def wait_for(predicate, seconds=STEP_TIMEOUT):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return None


class Practitioner(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="prism-practitioner-")
        cls.small = os.path.join(cls.dir, "small-8.graph")
        out = run(GRAPHGEN, "job", os.path.join(EXAMPLES, "small-8.yaml"), "-o", cls.small)
        assert out.returncode == 0, out.stderr
        cls.coll = os.path.join(cls.dir, "coll8.graph")
        out = run(GRAPHGEN, "collective", "--op", "allreduce", "--bytes", "1M", "--ranks", "8", "-o", cls.coll)
        assert out.returncode == 0, out.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def start(self, *args, **kw):
        p = subprocess.Popen([PRISMD, *args], text=True, **kw)
        self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
        return p

    # ---- item 3: waiting made visible ----

    def test_a_real_rank_that_never_connects_is_named_on_stderr_and_in_status(self):
        port = free_port()
        p = self.start("--graph", self.coll, "--real-ranks", "0", "--listen", "unix://" + os.path.join(self.dir, "h.sock"),
                       "--metrics-address", f"127.0.0.1:{port}", "--torch-store", f"127.0.0.1:{free_port()}",
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        said = None
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline and said is None:
            ready, _, _ = select.select([p.stderr], [], [], 1)
            if ready:
                line = p.stderr.readline()
                if not line:
                    break
                if "waiting for real rank 0 to connect (since " in line:
                    said = line
        self.assertIsNotNone(said, "prismd never said it waits for real rank 0")
        self.assertTrue(said.startswith("prismd: "), said)
        status = status_of(port)
        self.assertTrue(any(a["key"] == "real-ranks" and "real rank 0" in a["text"] for a in status["alerts"]),
                        status)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=STEP_TIMEOUT)

    def test_simulate_with_real_ranks_is_refused(self):
        out = run(PRISMD, "--graph", self.small, "--simulate", "--real-ranks", "0", "--metrics-address", "none")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertTrue(out.stderr.startswith("prismd: --real-ranks with --simulate"), out.stderr)
        self.assertEqual(out.stdout, "")

    # ---- item 4: CLI conventions ----

    def test_usage_errors_exit_2_with_a_prismd_line(self):
        for args, word in [((), "--graph"), (("--graph", self.small, "--simulat"), "--simulat"),
                           (("--graph", self.small, "--simulate", "--iterations", "x"), "--iterations"),
                           (("--graph", self.small, "--simulate", "--nic-model", "fair"), "--nic-model")]:
            with self.subTest(args=args):
                out = run(PRISMD, *args, "--metrics-address", "none")
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertTrue(out.stderr.startswith("prismd: "), out.stderr)
                self.assertIn(word, out.stderr)

    def test_a_mistyped_subcommand_names_the_nearest(self):
        out = run(GRAPHGEN, "jbo", "x.yaml", "-o", "x.graph")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("unknown command 'jbo'; did you mean 'job'?", out.stderr)
        out = run(sys.executable, PRISM, "rnu", "--graph", "g")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("unknown verb 'rnu'; did you mean 'run'?", out.stderr)

    def test_a_missing_output_folder_is_named(self):
        missing = os.path.join(self.dir, "no-such-folder")
        out = run(GRAPHGEN, "job", os.path.join(EXAMPLES, "small-8.yaml"), "-o", os.path.join(missing, "g.graph"))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(f"folder {missing} does not exist", out.stderr)

    def test_bytes_takes_every_documented_form(self):
        for text in ("4096", "64K", "64KiB", "64KB", "1M", "1MiB", "1MB", "1G", "1GiB", "1m"):
            with self.subTest(text=text):
                out = run(GRAPHGEN, "collective", "--op", "allreduce", "--bytes", text, "--ranks", "2",
                          "-o", os.path.join(self.dir, "b.graph"))
                self.assertEqual(out.returncode, 0, out.stderr)

    def test_prism_run_refuses_a_world_that_disagrees_with_the_graph(self):
        out = run(sys.executable, PRISM, "run", "--graph", self.small, "--world", "16", "--ranks", "0",
                  "--graphgen", GRAPHGEN, "--plugin", PRISMD, "--dry-run", "--", "python3", "t.py")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--world 16 disagrees with the graph's 8 ranks", out.stderr)

    # ---- item 5: progress ----

    def test_a_long_simulation_on_a_terminal_shows_progress(self):
        master, slave = pty.openpty()
        p = self.start("--graph", self.small, "--simulate", "--iterations", "1000000", "--metrics-address", "none",
                       stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = ""
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline and "% replayed" not in seen:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    seen += os.read(master, 4096).decode(errors="replace")
                except OSError:
                    break
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=STEP_TIMEOUT)
        os.close(master)
        self.assertIn("% replayed", seen)
        self.assertIn("M events/s", seen)
        self.assertIn("left", seen)

    def test_no_progress_line_when_stderr_is_not_a_terminal(self):
        out = run(PRISMD, "--graph", self.small, "--simulate", "--iterations", "3", "--metrics-address", "none")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("replayed", out.stderr)

    def test_status_gives_percent_done(self):
        port = free_port()
        p = self.start("--graph", self.small, "--simulate", "--iterations", "1000000",
                       "--metrics-address", f"127.0.0.1:{port}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        status = wait_for(lambda: (s := status_of(port)) and s.get("percent_done", 0) > 0 and s)
        self.assertIsNotNone(status)
        self.assertGreater(status["percent_done"], 0)
        self.assertLess(status["percent_done"], 100)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=STEP_TIMEOUT)

    # ---- item 6: traces ----

    def test_the_default_trace_shows_one_rank_per_pipeline_stage(self):
        trace = os.path.join(self.dir, "t.json")
        out = run(PRISMD, "--graph", self.small, "--simulate", "--metrics-address", "none", "--trace", trace)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(trace) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        pids = sorted({e["pid"] for e in events if e.get("ph") == "X"})
        self.assertEqual(pids, [0, 4])  # small-8: TP2 PP2 DP2, stage 1 starts at rank 4
        self.assertTrue(any(e.get("ph") == "s" for e in events))  # pipeline flows between them

    def test_a_huge_trace_is_refused_before_the_replay(self):
        trace = os.path.join(self.dir, "huge.json")
        out = run(PRISMD, "--graph", self.small, "--simulate", "--metrics-address", "none", "--trace", trace,
                  "--trace-ranks", "0-7", "--iterations", "100000", "--trace-limit-mb", "64")
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("over --trace-limit-mb 64", out.stderr)
        self.assertEqual(out.stdout, "")
        self.assertFalse(os.path.exists(trace))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
