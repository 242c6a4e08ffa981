#!/usr/bin/env python3
"""bench/fidelity/run-gpu.sh's handling of a hung truth, with stand-ins for the
GPU host's tools (nvidia-smi, MPS) and for driver.py (FIDELITY_DRIVER): a
truth whose every rank runs into RUN_TIMEOUT is kept as TAG.hungK and run
again (RETRY_HUNG, default 1); compare.py leaves the hung run out."""
import json
import os
import stat
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_GPU = os.path.join(HERE, "..", "bench", "fidelity", "run-gpu.sh")

# Hangs (sleeps past RUN_TIMEOUT) in the first FAKE_HANGS attempts of a run, counted from the
# lines the ranks append to FAKE_STATE/starts; then writes a result as driver.py would.
FAKE_DRIVER = r'''
import json, os, signal, sys, time
sys.path.insert(0, os.environ["FAKE_BENCH"])
import whereabouts
def arg(name):
    return sys.argv[sys.argv.index(name) + 1]
world = int(arg("--world"))
# driver.py dumps its stacks on SIGUSR1 (faulthandler): this one says who it is
signal.signal(signal.SIGUSR1, lambda *_: print(f"stacks of rank {arg('--rank')}", file=sys.stderr, flush=True))
with open(os.path.join(os.environ["FAKE_STATE"], "starts"), "a") as f:
    f.write(arg("--rank") + "\n")
with open(os.path.join(os.environ["FAKE_STATE"], "starts")) as f:
    attempt = (len(f.readlines()) + world - 1) // world
at = whereabouts.Whereabouts(arg("--out")[:-len(".json")] + ".at")
at.note("init: group 20 of 20, members [9, 11, 13, 15]")
at.note(f"iteration 0 op {7 + int(arg('--rank'))} recv")  # as driver.py's _launch
if attempt <= int(os.environ.get("FAKE_HANGS", "1")):
    time.sleep(60)
with open(arg("--out"), "w") as f:
    json.dump({"rank": int(arg("--rank")), "world": world, "mode": "step", "iteration_ms": [10.0, 10.0],
               "warmup": 0}, f)
'''


def kernel_stacks_readable():
    """Whether this process may read a process's kernel stack (/proc/PID/task/TID/stack), as run-gpu.sh does."""
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/stack") as f:
            return bool(f.read())
    except OSError:
        return False


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class HungTruth(unittest.TestCase):
    def run_gpu(self, hangs, retry=None, run_timeout=2):
        tmp = tempfile.mkdtemp(prefix="run-gpu-test-")
        fake_bin, state, data, out, bundle = (os.path.join(tmp, d) for d in ("bin", "state", "data", "out", "B"))
        for d in (fake_bin, state, os.path.join(data, "spec"), bundle):
            os.makedirs(d)
        executable(os.path.join(fake_bin, "nvidia-cuda-mps-control"), "#!/bin/sh\ncat > /dev/null\nexit 0\n")
        executable(os.path.join(fake_bin, "nvidia-smi"), "#!/bin/sh\necho 'Fake GPU'\n")
        executable(os.path.join(tmp, "driver.py"), FAKE_DRIVER)
        with open(os.path.join(data, "spec", "meta.env"), "w") as f:
            f.write("N=2\nITERATIONS=2\nWARMUP=0\nMODE=step\nGBPS=2.5\nLAT_US=25\n")
        env = dict(os.environ, PATH=fake_bin + os.pathsep + os.environ["PATH"], OUT=out, RUN_TIMEOUT=str(run_timeout),
                   FIDELITY_DRIVER=os.path.join(tmp, "driver.py"), FAKE_STATE=state, FAKE_HANGS=str(hangs),
                   FAKE_BENCH=os.path.join(HERE, "..", "bench", "fidelity"),
                   YIELD_SLEEP_US="0")
        if retry is not None:
            env["RETRY_HUNG"] = str(retry)
        proc = subprocess.run(["bash", RUN_GPU, bundle, data, "spec:truth"], env=env, capture_output=True,
                              text=True, timeout=120)
        return out, proc.stdout + proc.stderr

    def test_a_hung_truth_is_kept_apart_and_run_again(self):
        out, log = self.run_gpu(hangs=1)
        self.assertIn("spec-truth: every rank ran into RUN_TIMEOUT; kept as spec-truth.hung1, run again", log)
        self.assertTrue(os.path.isfile(os.path.join(out, "spec-truth.hung1", "FAILED")), log)
        with open(os.path.join(out, "spec-truth", "r0.json")) as f:
            self.assertEqual(json.load(f)["iteration_ms"], [10.0, 10.0])
        self.assertFalse(os.path.exists(os.path.join(out, "spec-truth", "FAILED")), log)

    def test_every_hung_rank_leaves_its_threads_and_stacks_before_the_timeout(self):
        # The snapshot comes at half of RUN_TIMEOUT: 3 s, after the stand-ins' start even on a busy host.
        out, log = self.run_gpu(hangs=1, run_timeout=6)
        hung = os.path.join(out, "spec-truth.hung1")
        with open(os.path.join(hung, "hang-threads.txt")) as f:
            threads = f.read()
        for rank in (0, 1):
            self.assertRegex(threads, rf"# rank {rank} pid (\d+) at: iteration 0 op {7 + rank} recv\n"
                                      rf"\1 \1 \[.+\] \S* syscall=\S+ state=[A-Z]\n", threads)
            with open(os.path.join(hung, f"r{rank}.log")) as f:
                self.assertIn(f"stacks of rank {rank}", f.read())
        if kernel_stacks_readable():  # as root, outside a container that hides them
            with open(os.path.join(hung, "hang-kernel-stacks.txt")) as f:
                stacks = f.read()
            for rank in (0, 1):
                self.assertRegex(stacks, rf"# rank {rank} pid \d+: its main thread's kernel stack\n\S")

    def test_retries_stop_at_retry_hung(self):
        out, log = self.run_gpu(hangs=5, retry=1)
        self.assertTrue(os.path.isdir(os.path.join(out, "spec-truth.hung1")), log)
        self.assertFalse(os.path.exists(os.path.join(out, "spec-truth.hung2")), log)
        self.assertTrue(os.path.isfile(os.path.join(out, "spec-truth", "FAILED")), log)

    def test_retry_hung_0_never_runs_again(self):
        out, log = self.run_gpu(hangs=1, retry=0)
        self.assertFalse(os.path.exists(os.path.join(out, "spec-truth.hung1")), log)
        with open(os.path.join(out, "spec-truth", "FAILED")) as f:
            self.assertIn("status 124", f.read())


if __name__ == "__main__":
    unittest.main()
