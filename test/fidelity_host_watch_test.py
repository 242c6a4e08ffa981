#!/usr/bin/env python3
"""bench/fidelity/host_watch.py with a made-up clock and collector (no GPU)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "fidelity"))
import host_watch  # noqa: E402


class FakeClock:
    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns


class FakeCollector:
    """The part of Python's gc module HostWatch uses, recording the calls."""
    def __init__(self):
        self.callbacks, self.calls = [], []

    def collect(self):
        self.calls.append("collect")

    def freeze(self):
        self.calls.append("freeze")

    def unfreeze(self):
        self.calls.append("unfreeze")

    def disable(self):
        self.calls.append("disable")

    def enable(self):
        self.calls.append("enable")


class Waits(unittest.TestCase):
    def test_each_iteration_keeps_how_long_its_host_waited_for_the_gpu(self):
        clock = FakeClock()
        w = host_watch.HostWatch("python", clock_ns=clock, collector=FakeCollector())
        w.start()
        w.enqueuing(0)
        w.enqueuing(1)

        def gpu_busy_for(ms):
            return lambda: setattr(clock, "ns", clock.ns + int(ms * 1e6))
        w.wait_for_gpu(2, gpu_busy_for(95.5))
        w.wait_for_gpu(3, gpu_busy_for(0.25))
        self.assertEqual(w.as_json()["wait_ms"], [None, None, 95.5, 0.25])


class Collections(unittest.TestCase):
    def test_a_collection_is_timed_and_filed_under_the_iteration_being_enqueued(self):
        clock, gc = FakeClock(), FakeCollector()
        w = host_watch.HostWatch("python", clock_ns=clock, collector=gc)
        w.start()
        self.assertEqual(gc.calls, [])  # python: the collector is left as it runs
        w.enqueuing(4)
        for cb in gc.callbacks:
            cb("start", {"generation": 2})
        clock.ns += 12_500_000
        for cb in gc.callbacks:
            cb("stop", {"generation": 2})
        self.assertEqual(w.as_json()["gc"], [[4, 2, 12.5]])
        w.stop()
        self.assertEqual(gc.callbacks, [])

    def test_freeze_and_off_take_the_collector_off_the_loop_and_give_it_back(self):
        gc = FakeCollector()
        w = host_watch.HostWatch("freeze", collector=gc)
        w.start()
        w.stop()
        self.assertEqual(gc.calls, ["collect", "freeze", "unfreeze"])
        gc = FakeCollector()
        w = host_watch.HostWatch("off", collector=gc)
        w.start()
        w.stop()
        self.assertEqual(gc.calls, ["collect", "disable", "enable"])

    def test_an_unknown_mode_is_refused_with_the_modes_named(self):
        with self.assertRaisesRegex(ValueError, "one of python, freeze, off"):
            host_watch.HostWatch("manual")


class Enqueues(unittest.TestCase):
    def test_each_iteration_keeps_the_wall_clock_at_which_its_enqueue_began(self):
        wall = FakeClock()
        w = host_watch.HostWatch("python", clock_ns=FakeClock(), collector=FakeCollector(), wall_ns=wall)
        w.start()
        wall.ns = 1_000
        w.enqueuing(0)
        w.wait_for_gpu(1, lambda: setattr(wall, "ns", 5_000))
        self.assertEqual(w.as_json()["enqueue_ns"], [1_000, 5_000])

    def test_a_rank_later_than_its_own_habit_is_named_and_a_stage_that_is_always_later_is_not(self):
        ms = 1_000_000
        # Rank 1 (a later pipeline stage) always begins 30 ms after rank 0; in iteration 3 rank 2 begins 9 ms
        # later than it usually does.
        hosts = {0: {"enqueue_ns": [i * 100 * ms for i in range(5)]},
                 1: {"enqueue_ns": [i * 100 * ms + 30 * ms for i in range(5)]},
                 2: {"enqueue_ns": [i * 100 * ms + (9 * ms if i == 3 else 0) for i in range(5)]}}
        self.assertEqual([(r, round(x, 1)) for r, x in host_watch.late_enqueues(hosts, 3)], [(2, 9.0)])
        self.assertEqual(host_watch.late_enqueues(hosts, 2), [])
        self.assertEqual(host_watch.late_enqueues({0: hosts[0]}, 3), [])  # one rank: nothing to hold it against


class Stalls(unittest.TestCase):
    def test_a_long_collection_or_a_host_behind_its_gpu_is_named_and_a_quiet_host_is_not(self):
        host = {"wait_ms": [None, None, 90.0, 0.2, 90.0], "gc": [[2, 2, 8.0], [4, 0, 0.1]]}
        self.assertEqual(host_watch.stalls(host, 1), "gc 8.0 ms")  # while enqueuing the next one
        self.assertEqual(host_watch.stalls(host, 2), "gc 8.0 ms, host behind (0.20 ms wait)")
        self.assertEqual(host_watch.stalls(host, 4), "")


if __name__ == "__main__":
    unittest.main()
