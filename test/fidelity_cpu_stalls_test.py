#!/usr/bin/env python3
"""bench/fidelity/cpu_stalls.py on a made-up report, and prism-cpu-stalls itself
(argv[1], when given: the built program) for a short watch."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "fidelity"))
import cpu_stalls  # noqa: E402

PROGRAM = sys.argv.pop(1) if len(sys.argv) > 1 else None

MS = 1_000_000
T0 = 1_700_000_000_000 * MS  # a wall clock (ns)


def report(stalls, fifo_refused=False):
    lines = ["# prism-cpu-stalls: 1000 us sleeps on each CPU, fair and fifo; watched 3000 ms; stalls over 2000 us listed",
             "wakes fair cpu 0 n 2900 p50_us 20 p99_us 80 max_us 12000 over 3 over_ms 20.5",
             "wakes fair cpu 1 n 2950 p50_us 20 p99_us 60 max_us 900 over 0 over_ms 0.0"]
    if fifo_refused:
        lines.append("# cpu 0: SCHED_FIFO refused (Operation not permitted): no fifo sleeper (run as root)")
    else:
        lines += ["wakes fifo cpu 0 n 2950 p50_us 20 p99_us 40 max_us 9000 over 1 over_ms 9.0",
                  "wakes fifo cpu 1 n 2960 p50_us 20 p99_us 40 max_us 300 over 0 over_ms 0.0"]
    lines += ["steal cpu 0 ms 12", "steal cpu 1 ms 0"]
    lines += [f"stall {wall} {cpu} {policy} {us}" for wall, cpu, policy, us in stalls]
    return "\n".join(lines) + "\n"


def results(iteration_ms, enqueue_ms, warmup=2, late=None):
    """Rank 0's driver result: iteration times and the host's enqueue wall clocks (ms after T0)."""
    r0 = {"iteration_ms": iteration_ms, "warmup": warmup,
          "host": {"enqueue_ns": [T0 + int(ms * MS) for ms in enqueue_ms]}}
    if late is not None:
        r0["late_op"] = {"iteration": late}
    return {0: r0}


class Reading(unittest.TestCase):
    def test_the_report_is_read_by_line_kind(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(report([(T0 + 5 * MS, 0, "fair", 12000), (T0 + 6 * MS, 0, "fifo", 9000)]))
        s = cpu_stalls.read(f.name)
        os.unlink(f.name)
        self.assertEqual(len(s["wakes"]), 4)
        self.assertEqual(s["wakes"][0]["max_us"], 12000)
        self.assertEqual(s["steal_ms"], {0: 12, 1: 0})
        self.assertEqual(s["stalls"][1], (T0 + 6 * MS, 0, "fifo", 9000))


class Iterations(unittest.TestCase):
    # Enqueue k waits for iteration k-2: iteration 100 ms each, enqueues at 0, 0, 100, 200, ...
    # so between enqueue k and k+1 (k >= 2) the GPU runs iteration k-1.
    ENQ = [0, 0, 100, 200, 300, 400, 500, 600]

    def test_a_wall_time_maps_to_the_iteration_its_gpu_ran(self):
        host = results([100] * 8, self.ENQ)[0]["host"]
        self.assertIsNone(cpu_stalls.gpu_iteration_at(host, T0 + 50 * MS))  # before enqueue 2
        self.assertEqual(cpu_stalls.gpu_iteration_at(host, T0 + 150 * MS), 1)
        self.assertEqual(cpu_stalls.gpu_iteration_at(host, T0 + 450 * MS), 4)
        self.assertEqual(cpu_stalls.gpu_iteration_at(host, T0 + 650 * MS), 6)

    def test_slow_iterations_holding_a_long_stall_are_counted_apart_from_the_others(self):
        times = [100, 100, 100, 100, 110, 100, 108, 100]  # 4 and 6 slow (over 1%)
        res = results(times, self.ENQ)
        stalls = [(T0 + 450 * MS, 0, "fifo", 9000),   # iteration 4, long: counts
                  (T0 + 250 * MS, 1, "fifo", 6000),   # iteration 2, long, not slow
                  (T0 + 650 * MS, 0, "fifo", 3000),   # iteration 6, under 5 ms: not counted
                  (T0 + 660 * MS, 0, "fair", 9000)]   # iteration 6, other policy
        self.assertEqual(cpu_stalls.slow_iteration_stalls(stalls, res, "fifo"), (1, 2, 1, 4))
        self.assertEqual(cpu_stalls.slow_iteration_stalls(stalls, res, "fair"), (1, 2, 0, 4))

    def test_a_late_run_s_own_late_iteration_is_left_out(self):
        times = [100, 100, 100, 100, 110, 100, 108, 100]
        res = results(times, self.ENQ, late=4)
        stalls = [(T0 + 450 * MS, 0, "fifo", 9000)]
        self.assertEqual(cpu_stalls.slow_iteration_stalls(stalls, res, "fifo"), (0, 1, 0, 4))

    def test_the_summary_names_both_policies_steal_and_the_slow_iterations(self):
        times = [100, 100, 100, 100, 110, 100, 108, 100]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(report([(T0 + 450 * MS, 0, "fifo", 9000), (T0 + 455 * MS, 0, "fair", 12000)]))
        text = cpu_stalls.summary(f.name, results(times, self.ENQ))
        os.unlink(f.name)
        self.assertIn("fifo 1 wakes over 2 ms on 1 of 2 CPUs, longest 9.0 ms, 9.0 ms in all", text)
        self.assertIn("fair 3 wakes over 2 ms on 1 of 2 CPUs, longest 12.0 ms", text)
        self.assertIn("steal 12 ms over 2 CPUs", text)
        self.assertIn("fifo stalls of 5 ms or more in 1 of 2 slow iterations (over 1%), 0 of 4 others", text)
        # measured from enqueue 3 (iteration 2 starts) to the last enqueue + two iterations: 200..800 ms
        self.assertIn("fifo in the measured iterations (0.6 s): 1 wakes over 2 ms, 1 of 5 ms or more, longest 9.0 ms",
                      text)

    def test_stalls_outside_the_measured_iterations_are_left_out_of_its_count(self):
        times = [100] * 8
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(report([(T0 + 50 * MS, 0, "fair", 30000), (T0 + 950 * MS, 0, "fair", 9000),
                            (T0 + 300 * MS, 1, "fair", 2500)]))
        text = cpu_stalls.summary(f.name, results(times, self.ENQ))
        os.unlink(f.name)
        self.assertIn("fair in the measured iterations (0.6 s): 1 wakes over 2 ms, 0 of 5 ms or more, longest 2.5 ms",
                      text)

    def test_a_refused_fifo_sleeper_is_said(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(report([], fifo_refused=True))
        text = cpu_stalls.summary(f.name, {})
        os.unlink(f.name)
        self.assertIn("fifo: none ran", text)
        self.assertIn("SCHED_FIFO refused", text)
        self.assertNotIn("fifo stalls of", text)

    def test_a_report_without_its_summary_is_said_to_be_cut(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(l for l in report([(T0, 0, "fair", 3000)]).splitlines() if l.startswith("stall")))
        text = cpu_stalls.summary(f.name, {})
        os.unlink(f.name)
        self.assertIn("1 stall lines but no summary", text)


@unittest.skipUnless(PROGRAM, "prism-cpu-stalls not given")
class Program(unittest.TestCase):
    def test_a_short_watch_reports_every_cpu_and_its_steal(self):
        out = subprocess.run([PROGRAM, "--duration-ms", "300", "--period-us", "2000"], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(out.stdout)
        s = cpu_stalls.read(f.name)
        os.unlink(f.name)
        cpus = len(os.sched_getaffinity(0))
        fair = [w for w in s["wakes"] if w["policy"] == "fair"]
        self.assertEqual(len(fair), cpus)
        self.assertTrue(all(w["n"] >= 10 for w in fair), fair)  # 300 ms of 2 ms sleeps
        fifo = [w for w in s["wakes"] if w["policy"] == "fifo"]
        self.assertEqual(len(fifo) + sum("refused" in n for n in s["notes"]), cpus)
        if os.path.exists("/proc/stat"):
            self.assertEqual(len(s["steal_ms"]), cpus)

    def test_a_bad_option_is_named(self):
        out = subprocess.run([PROGRAM, "--period-us", "0"], capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--period-us needs a positive integer", out.stderr)


if __name__ == "__main__":
    unittest.main()
