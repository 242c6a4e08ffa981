#!/usr/bin/env python3
"""bench/fidelity/gaps.py on made-up run results: the truths pooled, each
run's gap before every compute op held against the truth's, and a clear
stop for a result without a timeline or without an op of the truth's. (The
model's column reads prismd's trace; it ran on the GPU host's results of
2026-12-05, docs/network-model.md.)"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GAPS = os.path.join(HERE, "..", "bench", "fidelity", "gaps.py")


def result(iterations, starts, warmup=1):
    """A driver.py step result: every iteration's compute ops at `starts`
    (label -> ms from the iteration's start); iteration_ms as given."""
    timeline = [[it, label, s, s + 1.0] for it in range(len(iterations)) for label, s in starts.items()]
    return {"rank": 0, "warmup": warmup, "iteration_ms": iterations, "timeline": timeline}


def write(directory, r):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "r0.json"), "w") as f:
        json.dump(r, f)


def gaps(*args):
    return subprocess.run([sys.executable, GAPS] + list(args), capture_output=True, text=True)


class Gaps(unittest.TestCase):
    def test_truths_pool_and_a_run_shows_where_it_parts(self):
        with tempfile.TemporaryDirectory() as tmp:
            t1, t2, h = (os.path.join(tmp, n) for n in ("truth", "truth-again", "hybrid1"))
            write(t1, result([99.0, 100.0, 100.0], {"fwd": 10.0, "bwd": 40.0}))
            write(t2, result([99.0, 102.0, 102.0], {"fwd": 12.0, "bwd": 42.0}))
            # The hybrid waits 5 ms longer before its backward.
            write(h, result([99.0, 106.0, 106.0], {"fwd": 11.0, "bwd": 46.0}))
            r = gaps("--rank", "0", "--truth", t1, "--truth", t2, "--run", "hybrid1=" + h)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = {line[:26].strip(): line[26:].split() for line in r.stdout.splitlines()[2:]}
            self.assertEqual(rows["fwd"], ["11.00", "+0.00"])
            self.assertEqual(rows["bwd"], ["30.00", "+5.00"])
            self.assertEqual(rows["(to the iteration's end)"], ["60.00", "+0.00"])
            self.assertEqual(rows["iteration"], ["101.00", "+5.00"])

    def test_spread_gives_each_run_s_sd_of_every_gap(self):
        with tempfile.TemporaryDirectory() as tmp:
            t, h = os.path.join(tmp, "truth"), os.path.join(tmp, "hybrid1")
            # The truth's backward starts 40 or 44 ms in (sd 2), its iterations
            # 100 or 104; the hybrid's do not move.
            r = {"rank": 0, "warmup": 1, "iteration_ms": [0.0, 100.0, 104.0, 100.0, 104.0], "timeline": []}
            for it, bwd in enumerate([0.0, 40.0, 44.0, 40.0, 44.0]):
                r["timeline"] += [[it, "fwd", 10.0, 11.0], [it, "bwd", bwd, bwd + 1.0]]
            write(t, r)
            write(h, result([99.0, 102.0, 102.0], {"fwd": 10.0, "bwd": 42.0}))
            out = gaps("--rank", "0", "--truth", t, "--run", "hybrid1=" + h, "--spread")
            self.assertEqual(out.returncode, 0, out.stderr)
            rows = {line[:26].strip(): line[26:].split() for line in out.stdout.splitlines()[2:]}
            self.assertEqual(rows["fwd"], ["0.00", "0.00"])
            self.assertEqual(rows["bwd"], ["2.00", "0.00"])
            self.assertEqual(rows["(to the iteration's end)"], ["0.00", "0.00"])
            self.assertEqual(rows["iteration"], ["2.00", "0.00"])

    def test_a_result_without_a_timeline_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = os.path.join(tmp, "truth")
            os.makedirs(d)
            with open(os.path.join(d, "r0.json"), "w") as f:
                json.dump({"rank": 0, "iteration_ms": [1.0]}, f)
            r = gaps("--rank", "0", "--truth", d)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("r0.json has no timeline", r.stderr)

    def test_a_run_missing_an_op_of_the_truth_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            t, h = os.path.join(tmp, "truth"), os.path.join(tmp, "hybrid1")
            write(t, result([100.0, 100.0], {"fwd": 10.0, "bwd": 40.0}))
            write(h, result([100.0, 100.0], {"fwd": 10.0}))
            r = gaps("--rank", "0", "--truth", t, "--run", "hybrid1=" + h)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("hybrid1 has no op 'bwd'", r.stderr)


if __name__ == "__main__":
    unittest.main()
