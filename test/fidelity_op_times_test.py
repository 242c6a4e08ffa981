#!/usr/bin/env python3
"""bench/fidelity/op_times.py: the driver's communication calls matched to
the plugin's operation lines (PRISM_OP_TIMES) by the host clock, without a
GPU; and driver.py's --op-timing nccl refusing to start without the plugin
as NCCL's profiler."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "fidelity"))

import op_times  # noqa: E402


def line(enq, start, stop, kind="allreduce", complete=True):
    return {"kind": kind, "enqueued_wall_ns": enq, "kernel_start_ns": start, "kernel_stop_ns": stop,
            "complete": complete}


class Matching(unittest.TestCase):
    def test_each_call_gets_the_span_of_the_operations_it_enqueued(self):
        calls = [("dp all-reduce mb 0", 3, 1_000, 2_000),
                 ("send activation mb 1", 3, 3_000, 4_000),   # a send/recv group: two operations
                 ("dp all-reduce mb 1", 4, 5_000, 6_000)]
        records = [line(5_500, 90_000_000, 90_030_000),
                   line(1_500, 10_000_000, 10_250_000),
                   line(3_100, 20_000_000, 20_001_000, "send"),
                   line(3_900, 19_999_000, 20_400_000, "recv"),
                   line(7_000, 1, 2)]                               # after every call: nobody's
        m = op_times.match_calls(calls, records)
        self.assertEqual([(l, it, n) for l, it, _, n in m],
                         [("dp all-reduce mb 0", 3, 1), ("send activation mb 1", 3, 2), ("dp all-reduce mb 1", 4, 1)])
        self.assertEqual([span for _, _, span, _ in m], [250.0, 401.0, 30.0])
        kinds = op_times.comm_us(m, lambda label: label.rsplit(" mb ", 1)[0])
        self.assertEqual(kinds, {"dp all-reduce": {"median": 140.0, "n": 2},
                                 "send activation": {"median": 401.0, "n": 1}})
        self.assertEqual(op_times.summary(m, 0), {"calls": 3, "timed": 3, "without_operation": 0, "bad_lines": 0})
        self.assertEqual(op_times.problem(op_times.summary(m, 0), "D"), "")

    def test_an_operation_without_stamps_leaves_its_call_untimed_and_is_said(self):
        calls = [("a mb 0", 0, 0, 10), ("a mb 1", 0, 20, 30), ("a mb 2", 0, 40, 50)]
        records = [line(5, 100, 300), line(25, None, None, complete=False)]
        m = op_times.match_calls(calls, records)
        self.assertEqual([span for _, _, span, _ in m], [0.2, None, None])
        s = op_times.summary(m, 1)
        self.assertEqual(s, {"calls": 3, "timed": 1, "without_operation": 1, "bad_lines": 1})
        self.assertIn("2 of 3 communication calls have no kernel stamps (1 matched no operation line)",
                      op_times.problem(s, "D"))

    def test_no_stamps_at_all_names_the_profiler(self):
        m = op_times.match_calls([("a", 0, 0, 10)], [])
        why = op_times.problem(op_times.summary(m, 0), "/tmp/d")
        self.assertIn("none of 1 communication calls found NCCL's kernel stamps in /tmp/d", why)
        self.assertIn("NCCL_PROFILER_PLUGIN", why)

    def test_the_log_is_read_with_a_cut_line_counted(self):
        d = tempfile.mkdtemp()
        path = op_times.log_path(d, 4242)
        self.assertTrue(path.endswith("/prism-ops.4242.jsonl"))
        with open(path, "w") as f:
            f.write(json.dumps(line(1, 2, 3)) + "\n\n" + '{"kind":"allre')
        records, bad = op_times.read_lines(path)
        self.assertEqual((len(records), bad), (1, 1))
        self.assertEqual(op_times.read_lines(os.path.join(d, "none.jsonl")), ([], 0))


class DriverRefuses(unittest.TestCase):
    def test_nccl_timing_without_the_profiler_plugin_says_how_to_fix_it(self):
        import driver  # noqa: E402 (no torch needed to build a Runner's op timing)
        args = driver.parse_args(["--rank", "0", "--world", "2", "--ops", "o", "--comms", "c", "--iterations", "3",
                                  "--mode", "step", "--store-port", "1", "--op-timing", "nccl"])
        r = driver.Runner.__new__(driver.Runner)
        r.a = args
        saved = os.environ.pop("NCCL_PROFILER_PLUGIN", None)
        try:
            with self.assertRaises(SystemExit) as e:
                r.start_op_times()
            self.assertIn("NCCL_PROFILER_PLUGIN=/path/to/libnccl-net-prism.so", str(e.exception))
            os.environ["NCCL_PROFILER_PLUGIN"] = "/x/libnccl-net-prism.so"
            d = tempfile.mkdtemp()
            args.op_times_dir = os.path.join(d, "times")
            saved_times = os.environ.pop("PRISM_OP_TIMES", None)
            r.start_op_times()
            self.assertEqual(os.environ["PRISM_OP_TIMES"], os.path.join(d, "times"))
            self.assertTrue(os.path.isdir(os.path.join(d, "times")))
            self.assertEqual(r.op_calls, [])
            os.environ.pop("PRISM_OP_TIMES")
            if saved_times is not None:
                os.environ["PRISM_OP_TIMES"] = saved_times
        finally:
            os.environ.pop("NCCL_PROFILER_PLUGIN", None)
            if saved is not None:
                os.environ["NCCL_PROFILER_PLUGIN"] = saved


class FakeEvent:
    """A CUDA timing event at a made-up time (ms)."""

    def __init__(self, ms):
        self.ms = ms

    def elapsed_time(self, later):
        return later.ms - self.ms


class DriverLateOp(unittest.TestCase):
    def test_the_late_op_is_set_beside_what_was_asked_and_its_usual_run(self):
        import driver  # noqa: E402
        ops = [{"type": "compute", "label": "fwd mb 0", "duration_ns": 2_000_000}]
        marks = [FakeEvent(100.0 * i) for i in range(4)]  # iteration starts
        usual = [("fwd mb 0", FakeEvent(100.0 * i + 0.5), FakeEvent(100.0 * i + 2.5), i) for i in (1, 3)]
        late = ("fwd mb 0", FakeEvent(201.0), FakeEvent(238.0), 2)  # 37 ms, 1 ms into iteration 2
        op = driver.late_op(late, marks, usual, ops, 20.0)
        self.assertEqual(op, {"label": "fwd mb 0", "iteration": 2, "graph_ms": 2.0, "late_ms": 20.0,
                              "measured_ms": 37.0, "start_ms": 1.0, "usual_ms": 2.0, "usual_start_ms": 0.5})
        self.assertIsNone(driver.late_op(late, marks, [], ops, 20.0)["usual_ms"])


if __name__ == "__main__":
    unittest.main()
