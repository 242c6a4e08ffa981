#!/usr/bin/env python3
"""bench/fidelity/compare.py on made-up results (no GPU): a run without a
ground truth is printed beside prismd --simulate's pretty-printed report."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "bench", "fidelity", "compare.py")
TIMELINE = os.path.join(HERE, "..", "bench", "fidelity", "timeline.py")


def one_file_run(run, name, text):
    """compare.py's output on one run directory `run` holding only file `name`."""
    out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
    os.makedirs(os.path.join(out, run))
    with open(os.path.join(out, run, name), "w") as f:
        f.write(text)
    return run_compare(out, data)


def run_compare(out, data):
    """compare.py's output on the results in `out` and the prepared data in `data`."""
    return subprocess.run([sys.executable, COMPARE, out, data], capture_output=True, text=True, check=True).stdout


class TruthlessRun(unittest.TestCase):
    def test_hybrid_run_beside_the_model(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(out, "big-hybrid1-run"))
        os.makedirs(os.path.join(data, "big"))
        with open(os.path.join(data, "big", "model.json"), "w") as f:
            json.dump({"graph": "big", "iteration_time_s": 0.5}, f, indent=2)  # several lines, as prismd writes it
        with open(os.path.join(out, "big-hybrid1-run", "r0.json"), "w") as f:
            f.write(json.dumps({"warmup": 1, "iteration_ms": [900.0, 505.0, 510.0]}) + "\n")
        text = run_compare(out, data)
        self.assertIn("big: hybrid1-run vs prismd --simulate, rank 0: 2 iterations after 1 warm-up", text)
        self.assertIn("model 500.000 ms, hybrid 507.500 ms, difference +1.50%", text)


def sweep_data(data, name, model_us):
    """Prepared data of a sweep: meta.env and rank 0's model trace with `model_us` per label."""
    os.makedirs(os.path.join(data, name))
    with open(os.path.join(data, name, "meta.env"), "w") as f:
        f.write("N=8192\nMODE=sweep\n")
    events = [{"ph": "X", "name": k, "cat": "collective", "pid": 0, "dur": v} for k, v in model_us.items()]
    with open(os.path.join(data, name, "model-trace.json"), "w") as f:
        json.dump({"traceEvents": events}, f)


class PrismdLines(unittest.TestCase):
    def test_a_hybrid_runs_late_receives_line_is_shown_with_its_lag(self):
        log = ("prismd: hybrid: 14 real-rank operations matched, 0 unmatched, 14 finished\n"
               "prismd: late receives in steady iterations (6): 0.120 ms per iteration (0.16% of the iteration) "
               "waiting for prismd's schedule over 40 receives, 0.310 ms by NCCL's test() after the time\n"
               "prismd: engine lag over 900 events: p50 <=1 us, p99 <=20 us\n"
               "prismd: an unrelated line\n")
        text = one_file_run("big-hybrid1-run", "prismd.log", log)
        self.assertIn("late receives in steady iterations (6): 0.120 ms per iteration (0.16% of the iteration)",
                      text)
        self.assertIn("engine lag over 900 events", text)
        self.assertNotIn("an unrelated line", text)


class SweepWithoutTruth(unittest.TestCase):
    def test_the_real_rank_beside_the_model_per_op(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        sweep_data(data, "big", {"allgather 67108864": 5000.0})
        os.makedirs(os.path.join(out, "big-hybrid1-run"))
        with open(os.path.join(out, "big-hybrid1-run", "r0.json"), "w") as f:
            json.dump({"ops": {"allgather 67108864": {"median_us": 5100.0}}}, f)
        text = run_compare(out, data)
        self.assertIn("big: hybrid1-run vs prismd --simulate, rank 0 (median per op; no ground truth)", text)
        self.assertIn("allgather        67108864      5100.0       5000.0    +2.0%", text)

    def test_each_real_rank_of_a_run_beside_the_model(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        sweep_data(data, "big", {"allgather 67108864": 5000.0})
        for run, ranks in (("big-hybrid2-run", {0: 5100.0, 1: 4950.0}), ("big-hybrid1-run", {5: 5050.0})):
            os.makedirs(os.path.join(out, run))
            for rank, us in ranks.items():
                with open(os.path.join(out, run, f"r{rank}.json"), "w") as f:
                    json.dump({"ops": {"allgather 67108864": {"median_us": us}}}, f)
        text = run_compare(out, data)
        self.assertIn("big: hybrid2-run vs prismd --simulate, rank 0 (median per op; no ground truth)", text)
        self.assertIn("big: hybrid2-run vs prismd --simulate, rank 1 (median per op; no ground truth)", text)
        self.assertIn("allgather        67108864      4950.0       5000.0    -1.0%", text)
        self.assertIn("big: hybrid1-run vs prismd --simulate, rank 5 (median per op; no ground truth)", text)
        self.assertIn("allgather        67108864      5050.0       5000.0    +1.0%", text)

    def test_the_hybrid_table_carries_the_simulate_column(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        sweep_data(data, "sw", {"allgather 1048576": 100.0})
        for run, us in (("sw-truth", 110.0), ("sw-hybrid1", 99.0)):
            os.makedirs(os.path.join(out, run))
            with open(os.path.join(out, run, "r0.json"), "w") as f:
                json.dump({"ops": {"allgather 1048576": {"median_us": us}}}, f)
        text = run_compare(out, data)
        self.assertIn("allgather         1048576       110.0        99.0   -10.0%        100.0    -9.1%", text)


class PooledSweep(unittest.TestCase):
    def test_three_sweep_truths_are_pooled_per_op_and_each_held_against_the_others(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(data, "sw"))
        with open(os.path.join(data, "sw", "meta.env"), "w") as f:
            f.write("N=8\nMODE=sweep\n")
        with open(os.path.join(data, "sw", "model-trace.json"), "w") as f:
            json.dump({"traceEvents": [{"ph": "X", "name": "allgather 1048576", "cat": "collective", "pid": 0,
                                        "dur": 100.0}]}, f)
        for run, us in (("sw-truth", 100.0), ("sw-truth-again", 116.0), ("sw-truth-again2", 104.0),
                        ("sw-hybrid1", 106.0)):
            os.makedirs(os.path.join(out, run))
            with open(os.path.join(out, run, "r0.json"), "w") as f:
                json.dump({"ops": {"allgather 1048576": {"median_us": us}, "allgather 65536": {"median_us": 9.0}}}, f)
        text = run_compare(out, data)
        self.assertIn("## sw: against the pooled truth (3 runs: truth, truth-again, truth-again2), rank 0", text)
        self.assertRegex(text, r"allgather +1048576 +104\.0 +106\.0 +\+1\.9% +100\.0 +-3\.8%")
        # Each truth against the median of the other two: 100 vs 110, 116 vs 102, 104 vs 108.
        self.assertIn("sw: worst |error| at 1 MiB and above against the pooled truth: hybrid1 1.92% (a truth against "
                      "the others: median 9.09%, worst 13.73%; truth 9.09%, truth-again 13.73%, truth-again2 3.70%)",
                      text)


class TruthAgainstModel(unittest.TestCase):
    def test_spread_and_kinds_beside_the_model(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(out, "st-truth"))
        os.makedirs(os.path.join(data, "st"))
        with open(os.path.join(data, "st", "meta.env"), "w") as f:
            f.write("N=2\nMODE=step\n")
        with open(os.path.join(data, "st", "model.json"), "w") as f:
            json.dump({"graph": "st", "iteration_time_s": 0.1}, f, indent=2)
        trace = {"traceEvents": [
            {"ph": "X", "name": "tp all-reduce fwd mb 0 layer 0", "cat": "collective", "pid": 0, "dur": 1000.0},
            {"ph": "X", "name": "tp all-reduce fwd mb 1 layer 0", "cat": "collective", "pid": 0, "dur": 3000.0},
            {"ph": "X", "name": "tp all-reduce fwd mb 2 layer 1", "cat": "collective", "pid": 0, "dur": 1000.0},
            {"ph": "X", "name": "tp all-reduce fwd mb 0 layer 0", "cat": "collective", "pid": 1, "dur": 9000.0},
            {"ph": "X", "name": "fwd mb 0 layer 0", "cat": "compute", "pid": 0, "dur": 1500.0}]}
        with open(os.path.join(data, "st", "model-trace.json"), "w") as f:
            json.dump(trace, f)
        with open(os.path.join(out, "st-truth", "r0.json"), "w") as f:
            f.write(json.dumps({"warmup": 1, "iteration_ms": [500.0, 101.0, 104.0, 102.0, 103.0],
                                "comm_us": {"tp all-reduce fwd": {"median": 1100.0, "n": 3}},
                                "compute_us": {"fwd": {"median": 1530.0, "n": 4, "graph_us": 1500.0}}}) + "\n")
        text = run_compare(out, data)
        self.assertIn("st: truth vs prismd --simulate, rank 0: 4 iterations", text)
        self.assertIn("model 100.000 ms; truth min 101.000 (+1.00%)", text)
        self.assertIn("median 102.500 (+2.50%), mean 102.500 (+2.50%)", text)
        # rank 0's three all-reduces grouped as the driver groups them: median 1000 us, 9.1% under the truth
        self.assertIn("st: per operation kind, rank 0: median us over the measured iterations (truth, timed by "
                      "cuda-events; err against it)", text)
        self.assertRegex(text, r"tp all-reduce fwd\s+1100\.0\s+1000\.0\s+-9\.1%")
        # 9.1% but only 100 us off: within the floor.
        self.assertIn("kinds within 5% (or 100 us) of the truth: model yes (worst 9.1%: tp all-reduce fwd)", text)
        self.assertIn("compute fwd: median 1530.0 us over 4 (graph 1500.0 us)", text)


def truth_rank(out, rank, iteration_ms, **fields):
    """Rank `rank`'s driver result in OUT/st-truth (warm-up 1) with more fields (host, timeline)."""
    os.makedirs(os.path.join(out, "st-truth"), exist_ok=True)
    with open(os.path.join(out, "st-truth", f"r{rank}.json"), "w") as f:
        json.dump(dict(warmup=1, iteration_ms=iteration_ms, **fields), f)


class TruthHosts(unittest.TestCase):
    def test_a_slow_iteration_is_put_beside_the_hosts_that_stalled_around_it(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        # Rank 0's iteration 2 is 10% over the median: rank 1 collected for 12 ms while enqueuing it.
        # Iteration 4 is 5% over: rank 0's host had fallen behind (it waited 0.1 ms before iteration 5).
        # Rank 1 began to enqueue iteration 4 12 ms after rank 0 (usually with it): +6 ms against the two's median.
        ms = 1_000_000
        host0 = {"gc_mode": "python", "wait_ms": [None, None, 90.0, 95.0, 96.0, 0.1], "gc": [[1, 0, 0.2]],
                 "enqueue_ns": [i * 100 * ms for i in range(6)]}
        host1 = {"gc_mode": "python", "wait_ms": [None, None, 90.0, 95.0, 96.0, 97.0],
                 "gc": [[2, 2, 12.0], [3, 0, 0.3]],
                 "enqueue_ns": [i * 100 * ms + (12 * ms if i == 4 else 0) for i in range(6)]}
        for rank, host in ((0, host0), (1, host1)):
            truth_rank(out, rank, [500.0, 100.0, 110.0, 100.0, 105.0, 100.0], host=host)
        text = run_compare(out, data)
        self.assertIn("hosts (2 ranks, gc python): 3 collections in the measured iterations, longest 12.0 ms", text)
        self.assertIn("iteration 2 +10.00% over the median: rank 1 gc 12.0 ms", text)
        self.assertIn("iteration 4 +5.00% over the median: rank 0 host behind (0.10 ms wait); "
                      "rank 1 began to enqueue it +6.0 ms late", text)
        self.assertNotIn("iteration 3 ", text)


class TruthSpikes(unittest.TestCase):
    def test_a_slow_iteration_names_its_first_late_op_and_the_rank_that_came_into_it_late(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)

        def timeline(shift_fwd, shift_opt):  # iterations 1-5: fwd at 10 ms, optimizer at 90 ms
            tl = []
            for it in range(1, 6):
                tl.append([it, "fwd mb 0 layer 0", 10.0 + shift_fwd.get(it, 0.0), 12.0 + shift_fwd.get(it, 0.0)])
                tl.append([it, "optimizer", 90.0 + shift_opt.get(it, 0.0), 91.0 + shift_opt.get(it, 0.0)])
            return tl
        # Iteration 4 is 8% over the median: rank 1's optimizer of iteration 3 started 9 ms late, and rank 0
        # waited for it, its first forward of iteration 4 8 ms late.
        ranks = {0: timeline({4: 8.0}, {}), 1: timeline({}, {3: 9.0})}
        for rank, tl in ranks.items():
            truth_rank(out, rank, [500.0, 100.0, 100.0, 100.0, 108.0, 100.0], timeline=tl)
        text = run_compare(out, data)
        self.assertIn("iteration 4 +8.00% over the median: first late: rank 0 fwd mb 0 layer 0 +8.0 ms at 18.0 ms; "
                      "came in late from iteration 3: rank 1 (optimizer +9.0 ms)", text)
        self.assertNotIn("iteration 3 ", text)  # at the median: not a slow iteration


class SpikesCommand(unittest.TestCase):
    def test_it_counts_slow_iterations_by_their_first_late_op_and_leaves_a_made_late_one_out(self):
        out = tempfile.mkdtemp()

        def timeline(shift_fwd, shift_opt):  # iterations 1-6: fwd at 10 ms, optimizer at 90 ms
            return [row for it in range(1, 7) for row in (
                [it, "fwd mb 0 layer 0", 10.0 + shift_fwd.get(it, 0.0), 12.0 + shift_fwd.get(it, 0.0)],
                [it, "optimizer", 90.0 + shift_opt.get(it, 0.0), 91.0 + shift_opt.get(it, 0.0)])]
        # Iteration 4: 8% over, after rank 1's late optimizer; iteration 6: 20% over, but the run made it late.
        iteration_ms = [500.0, 100.0, 100.0, 100.0, 108.0, 100.0, 120.0]
        truth_rank(out, 0, iteration_ms, timeline=timeline({4: 8.0, 6: 20.0}, {}),
                   late_op={"iteration": 6})
        truth_rank(out, 1, iteration_ms, timeline=timeline({}, {3: 9.0}))
        spikes = os.path.join(HERE, "..", "bench", "fidelity", "spikes.py")
        text = subprocess.run([sys.executable, spikes, os.path.join(out, "st-truth")], capture_output=True,
                              text=True, check=True).stdout
        self.assertIn("st-truth iteration 4 +8.00%: first late rank 0 fwd mb 0 layer 0 +8.0 ms at 18.0 ms; "
                      "came in latest: rank 1 optimizer +9.0 ms", text)
        self.assertNotIn("iteration 6", text)
        self.assertIn("1 iterations over 1%; first late op: fwd mb 0 layer 0 1", text)
        self.assertIn("over 3% with a timed iteration before: 1; after a rank that came in 5 ms or more late: 1", text)


    def test_it_counts_where_waits_opened_and_not_where_a_rank_carried_one(self):
        out = tempfile.mkdtemp()

        def timeline(shifts):  # iterations 1-5: fwd at 10 ms, bwd at 50 ms, optimizer at 90 ms
            return [[it, label, at + shifts.get((it, label), 0.0), at + 1.0 + shifts.get((it, label), 0.0)]
                    for it in range(1, 6) for label, at in (("fwd", 10.0), ("bwd", 50.0), ("optimizer", 90.0))]
        # Rank 0, iteration 3: a wait opened before bwd (6 ms) and the optimizer carried it; rank 1, iteration
        # 4: one opened before the optimizer (5 ms); rank 1's 3 ms wait before bwd is under 4 ms; the 7 ms
        # before rank 0's bwd of iteration 5 is the run's own late iteration (late_op), left out.
        iteration_ms = [500.0, 100.0, 100.0, 100.0, 100.0, 100.0]
        truth_rank(out, 0, iteration_ms, timeline=timeline({(3, "bwd"): 6.0, (3, "optimizer"): 6.0, (5, "bwd"): 7.0}),
                   late_op={"iteration": 5})
        truth_rank(out, 1, iteration_ms, timeline=timeline({(4, "optimizer"): 5.0, (2, "bwd"): 3.0}))
        spikes = os.path.join(HERE, "..", "bench", "fidelity", "spikes.py")
        text = subprocess.run([sys.executable, spikes, os.path.join(out, "st-truth")], capture_output=True,
                              text=True, check=True).stdout
        self.assertIn("waits of 4 ms or more that opened right before an op (the op before it on time): "
                      "bwd 1, optimizer 1\n", text)


class StepBounds(unittest.TestCase):
    def test_hybrid_against_truth_is_judged_against_the_bounds(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        for d in ("st-truth", "st-hybrid1"):
            os.makedirs(os.path.join(out, d))
        os.makedirs(os.path.join(data, "st"))
        with open(os.path.join(data, "st", "meta.env"), "w") as f:
            f.write("N=2\nMODE=step\n")
        with open(os.path.join(data, "st", "model.json"), "w") as f:
            json.dump({"graph": "st", "iteration_time_s": 0.1}, f)
        mem = {"peak_reserved_bytes": 1000, "nccl_device_bytes": 0}
        with open(os.path.join(out, "st-truth", "r0.json"), "w") as f:
            json.dump(dict(mem, warmup=1, iteration_ms=[500.0, 100.0, 100.0, 100.0], peak_gpu_bytes=1000), f)
        # Mean -1%, one iteration 3% off: both bounds (0.5%, 1.5%) are missed.
        with open(os.path.join(out, "st-hybrid1", "r0.json"), "w") as f:
            json.dump(dict(mem, warmup=1, iteration_ms=[400.0, 97.0, 100.0, 100.0], peak_gpu_bytes=1000), f)
        text = run_compare(out, data)
        self.assertIn("bounds: mean 1.00% > 0.5%; worst iteration 3.00% > 1.5%; peak memory 0.00% <= 0.1% "
                      "-> outside: mean, worst iteration", text)
        # Within 0.5% and 1.5%.
        with open(os.path.join(out, "st-hybrid1", "r0.json"), "w") as f:
            json.dump(dict(mem, warmup=1, iteration_ms=[400.0, 99.0, 100.0, 100.2], peak_gpu_bytes=1000), f)
        self.assertIn("bounds: mean 0.27% <= 0.5%; worst iteration 1.00% <= 1.5%; peak memory 0.00% <= 0.1% "
                      "-> within every bound", run_compare(out, data))


def step_data(data, name, model_ms, meta="", trace=()):
    """Prepared data of a step: meta.env, model.json and (optionally) a model trace."""
    os.makedirs(os.path.join(data, name))
    with open(os.path.join(data, name, "meta.env"), "w") as f:
        f.write("N=8\nMODE=step\nWARMUP=1\nSECOND_REAL=4\n" + meta)
    with open(os.path.join(data, name, "model.json"), "w") as f:
        json.dump({"graph": name, "iteration_time_s": model_ms / 1e3}, f)
    if trace:
        with open(os.path.join(data, name, "model-trace.json"), "w") as f:
            json.dump({"traceEvents": list(trace)}, f)


def step_run(out, run, rank, iteration_ms, comm=None, comm_timing=None):
    """A driver result r<rank>.json of a step run (warm-up 1)."""
    os.makedirs(os.path.join(out, run), exist_ok=True)
    r = {"warmup": 1, "iteration_ms": iteration_ms}
    if comm:
        r["comm_us"] = {k: {"median": v, "n": 4} for k, v in comm.items()}
    if comm_timing:
        r["comm_timing"] = comm_timing
    with open(os.path.join(out, run, f"r{rank}.json"), "w") as f:
        json.dump(r, f)


class KindTable(unittest.TestCase):
    def test_every_kind_in_truth_hybrids_and_model_with_errors_and_the_5pct_verdict(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        ev = lambda name, ts, dur, pid=0: {"ph": "X", "name": name, "cat": "p2p", "pid": pid, "ts": ts, "dur": dur}
        # A send/recv group is two trace ops with one label and one start: one op of 3000 us, as the driver times it.
        step_data(data, "st", 100.0, trace=[ev("send activation, recv gradient", 10, 1000.0),
                                            ev("send activation, recv gradient", 10, 3000.0),
                                            ev("send activation, recv gradient", 500, 3000.0),
                                            ev("dp all-gather layer 0", 0, 2000.0),
                                            ev("dp all-gather layer 1", 0, 2000.0),
                                            ev("send gradient", 0, 2000.0, pid=4)])
        kinds = {"send activation, recv gradient": 3100.0, "dp all-gather": 2600.0}
        step_run(out, "st-truth", 0, [500.0, 100.0], kinds)
        step_run(out, "st-truth", 4, [500.0, 100.0], {"send gradient": 60.0})
        step_run(out, "st-hybrid1", 0, [500.0, 100.0], {"send activation, recv gradient": 3000.0,
                                                         "dp all-gather": 2500.0})
        step_run(out, "st-hybrid2", 4, [500.0, 100.0], {"send gradient": 61.0})
        text = run_compare(out, data)
        # Columns: the runs that have this rank real, then the model.
        self.assertRegex(text, r"kind +truth +hybrid1 +err +model +err\n")
        self.assertRegex(text, r"dp all-gather +2600\.0 +2500\.0 +-3\.8% +2000\.0 +-23\.1%")
        self.assertRegex(text, r"send activation, recv gradient +3100\.0 +3000\.0 +-3\.2% +3000\.0 +-3\.2%")
        self.assertIn("kinds within 5% (or 100 us) of the truth: hybrid1 yes (worst 3.8%: dp all-gather); "
                      "model NO (worst 23.1%: dp all-gather; outside: dp all-gather)", text)
        # Rank 4 (hybrid2's second real rank): a send whose kernel ends when its data is in NCCL's buffers.
        self.assertIn("st: per operation kind, rank 4:", text)
        self.assertRegex(text, r"kind +truth +hybrid2 +err +model +err\n")
        self.assertRegex(text, r"send gradient +60\.0 +61\.0 +\+1\.7% +2000\.0 +\+3233\.3%")
        self.assertIn("kinds within 5% (or 100 us) of the truth: hybrid2 yes (worst 1.7%: send gradient); "
                      "model NO (worst 3233.3%: send gradient; outside: send gradient)", text)


class KindTimingMethods(unittest.TestCase):
    def test_a_hybrid_timed_another_way_than_the_truth_is_left_out_and_named(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        kinds = {"dp all-gather": 2600.0}
        step_run(out, "st-truth", 0, [500.0, 100.0], kinds, comm_timing="nccl-kernel")
        step_run(out, "st-hybrid1", 0, [500.0, 100.0], {"dp all-gather": 2550.0}, comm_timing="nccl-kernel")
        step_run(out, "st-hybrid2", 0, [500.0, 100.0], {"dp all-gather": 9000.0})  # CUDA events
        text = run_compare(out, data)
        self.assertIn("rank 0: median us over the measured iterations (truth, timed by nccl-kernel;", text)
        self.assertIn("left out, timed another way than the truth: hybrid2 (cuda-events)", text)
        self.assertRegex(text, r"kind +truth +hybrid1 +err\n")
        self.assertRegex(text, r"dp all-gather +2600\.0 +2550\.0 +-1\.9%")
        self.assertIn("kinds within 5% (or 100 us) of the truth: hybrid1 yes (worst 1.9%: dp all-gather)", text)


class KindsOutside(unittest.TestCase):
    def test_the_kinds_outside_are_told_apart_though_a_kind_has_a_comma(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_run(out, "st-truth", 0, [500.0, 100.0], {"send activation, recv gradient": 3100.0, "dp all-gather": 2600.0})
        step_run(out, "st-hybrid1", 0, [500.0, 100.0], {"send activation, recv gradient": 3500.0, "dp all-gather": 2000.0})
        text = run_compare(out, data)
        self.assertIn("hybrid1 NO (worst 23.1%: dp all-gather; outside: dp all-gather | send activation, recv gradient)",
                      text)
        self.assertRegex(text, r"\nst +hybrid1 +0 +1 +\+0\.00% +0\.00% +- +NO +outside: kinds \(dp all-gather \| "
                               r"send activation, recv gradient\)\n")


class Perturbations(unittest.TestCase):
    def test_a_late_rank_table_gives_the_late_iteration_and_the_growth_it_passed_on(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        truth = [500.0] + [100.0] * 9 + [135.0, 101.0] + [100.0] * 6
        hybrid = [500.0] + [100.0] * 9 + [120.0, 100.0] + [100.0] * 6
        step_run(out, "st-truth-late", 0, truth)
        step_run(out, "st-hybrid1-late", 0, hybrid)
        text = run_compare(out, data)
        self.assertIn("st: late real rank (rank 0 computes 20 ms longer in iteration 10), rank 0", text)
        self.assertRegex(text, r"\n +10 +135\.000 +120\.000 +-11\.11%  <- late\n")
        self.assertIn("growth over the run's median iteration: late iteration truth +35.000 ms, hybrid +20.000 ms; "
                      "iterations 10..13 together truth +36.000 ms, hybrid +20.000 ms (the delay: 20 ms)", text)
        self.assertIn("late iteration 11.11% > 1%", text)
        self.assertNotIn("the model (prismd --simulate --late", text)
        self.assertNotIn("late op as its GPU ran it", text)  # driver.py left no late_op
        # driver.py's late_op: the late sleep ran 15 ms long in the truth, as asked in the hybrid.
        for run, took in (("st-truth-late", 37.0), ("st-hybrid1-late", 22.0)):
            with open(os.path.join(out, run, "r0.json")) as f:
                r = json.load(f)
            r["late_op"] = {"label": "fwd mb 0", "iteration": 10, "graph_ms": 2.0, "late_ms": 20.0,
                            "measured_ms": took, "start_ms": 0.5, "usual_ms": 2.01, "usual_start_ms": 0.4}
            with open(os.path.join(out, run, "r0.json"), "w") as f:
                json.dump(r, f)
        text = run_compare(out, data)
        self.assertIn("st: rank 0's late op as its GPU ran it (ms)", text)
        self.assertRegex(text, r"\ntruth-late +fwd mb 0 +22\.000 +37\.000 +\+15\.000 +2\.010 +0\.500 +0\.400\n")
        self.assertRegex(text, r"\nhybrid1-late +fwd mb 0 +22\.000 +22\.000 +\+0\.000 ")
        # prepare.sh's model-late.json: what prismd --simulate --late makes of the same delay.
        with open(os.path.join(data, "st", "model-late-r0.json"), "w") as f:
            json.dump({"late": [{"rank": 0, "iteration": 10, "ms": 20.0, "iteration_over_others_ms": 17.5}]}, f)
        text = run_compare(out, data)
        self.assertIn("the model (prismd --simulate --late 0:10:20, prepare.sh): late iteration +17.500 ms over the "
                      "others", text)

    def test_a_slow_rank_table_gives_what_it_cost_against_the_spec_it_came_from(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_data(data, "st-slow", 104.0, meta="STRAGGLER_RANK=3\nSTRAGGLER_SCALE=1.5\n")
        step_run(out, "st-truth", 0, [500.0, 100.0, 100.0])
        step_run(out, "st-hybrid1", 0, [500.0, 100.0, 100.0])
        step_run(out, "st-slow-truth", 0, [500.0, 102.0, 102.0])
        step_run(out, "st-slow-hybrid1", 0, [500.0, 103.0, 103.0])
        text = run_compare(out, data)
        self.assertIn("st-slow: slow virtual rank 3 (compute x1.5), rank 0, ms (err against the truth)", text)
        self.assertRegex(text, r"mean +102\.000 +\+0\.00% +103\.000 +\+0\.98% +104\.000 +\+1\.96%")
        self.assertIn("what the slow rank cost (mean iteration against st): truth +2.000 ms (+2.00%), "
                      "hybrid1 +3.000 ms (+3.00%), model +4.000 ms (+4.00%)", text)
        self.assertIn("slow rank mean 0.98% <= 1%", text)
        self.assertNotIn("slow rank 3's compute", text)  # the truth's rank 3 left no compute_us
        with open(os.path.join(out, "st-slow-truth", "r3.json"), "w") as f:
            json.dump({"warmup": 1, "iteration_ms": [500.0, 102.0, 102.0],
                       "compute_us": {"fwd": {"median": 3010.0, "n": 8, "graph_us": 3000.0}}}, f)
        text = run_compare(out, data)
        self.assertIn("slow rank 3's compute fwd in the truth: median 3010.0 us (graph 3000.0 us)\n", text)


class TruthAgainstItself(unittest.TestCase):
    def test_a_second_truth_is_judged_against_the_first_as_a_hybrid_is(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_run(out, "st-truth", 0, [500.0, 100.0, 100.0])
        step_run(out, "st-truth-again", 0, [500.0, 101.0, 103.0])
        step_run(out, "st-truth-late", 0, [500.0] + [100.0] * 9 + [135.0, 100.0])
        step_run(out, "st-truth-late-again", 0, [500.0] + [100.0] * 9 + [118.0, 100.0])
        text = run_compare(out, data)
        self.assertIn("## st: truth-again vs truth, rank 0", text)
        self.assertIn("mean iteration: truth 100.000 ms, again 102.000 ms, error +2.00%", text)
        self.assertIn("bounds: mean 2.00% > 0.5%; worst iteration 3.00% > 1.5%", text)
        self.assertIn("## st: truth-late-again vs truth-late, rank 0", text)
        self.assertIn("late iteration 12.59% > 1%", text)
        self.assertNotIn("own spread", text)  # no hybrid to set beside it

    def test_a_hybrid_is_set_beside_the_truths_own_spread(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_run(out, "st-truth", 0, [500.0, 100.0, 100.0])
        step_run(out, "st-truth-again", 0, [500.0, 101.0, 103.0])
        step_run(out, "st-hybrid1", 0, [500.0, 101.0, 101.0])
        step_run(out, "st-hybrid2", 0, [500.0, 104.0, 100.0])
        text = run_compare(out, data)
        self.assertIn("st: hybrid1 against the truth's own spread (truth-again), rank 0: mean 1.00% vs 2.00%; "
                      "worst iteration 1.00% vs 3.00% -> within the truth's own spread", text)
        self.assertIn("st: hybrid2 against the truth's own spread (truth-again), rank 0: mean 2.00% vs 2.00%; "
                      "worst iteration 4.00% vs 3.00% -> outside the truth's own spread: worst iteration", text)


    def test_three_truths_are_pooled_and_each_is_held_against_the_others(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_run(out, "st-truth", 0, [500.0, 100.0, 104.0], {"tp all-reduce": 1000.0})
        step_run(out, "st-truth-again", 0, [500.0, 102.0, 100.0], {"tp all-reduce": 1100.0})
        step_run(out, "st-truth-again2", 0, [500.0, 98.0, 101.0], {"tp all-reduce": 1040.0})
        step_run(out, "st-hybrid1", 0, [500.0, 100.0, 101.0], {"tp all-reduce": 1050.0})
        text = run_compare(out, data)
        # Per iteration the median of the three runs: 100, 101; per kind the median of the medians: 1040.
        self.assertIn("## st: hybrid1 vs the pooled truth (3 runs), rank 0", text)
        self.assertIn("mean iteration: truth 100.500 ms, hybrid 100.500 ms, error +0.00%; worst iteration |error| 0.00%",
                      text)
        self.assertIn("tp all-reduce                          1040.0       1050.0    +1.0%", text)
        # The first truth against the median of the other two (100, 100.5): +1.5%, worst 3.48%.
        self.assertIn("## st: truth vs the pool of the other 2, rank 0", text)
        self.assertIn("mean iteration: truth 100.250 ms, again 102.000 ms, error +1.75%; worst iteration |error| 3.48%",
                      text)
        # Each truth against the other two: mean 1.75%, 0.25%, 1.97% (median 1.75); worst 3.48, 3.03, 2.97.
        self.assertIn("st: hybrid1 against the pooled truth (3 runs), rank 0: mean 0.00% (a truth against the others: "
                      "median 1.75%, worst 1.97%); worst iteration 0.00% (a truth against the others: median 3.03%, "
                      "worst 3.48%) -> within a typical truth's spread", text)
        # A truth that left no results (a run that timed out) is left out of the pool, and named.
        os.makedirs(os.path.join(out, "st-truth-again3"))
        self.assertIn("(left out, no results: truth-again3)", run_compare(out, data))
        # With two truths there is no pool.
        os.rename(os.path.join(out, "st-truth-again2"), os.path.join(out, "elsewhere"))
        text = run_compare(out, data)
        self.assertIn("st: no pooled truth: 2 of its runs left results (three are needed)", text)
        self.assertNotIn("against the pooled", text)

    def test_pooled_slow_rank_cost_against_the_pooled_base(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_data(data, "st-slow", 104.0, meta="STRAGGLER_RANK=3\nSTRAGGLER_SCALE=1.5\n")
        for kind, base, slow in (("truth", 100.0, 103.0), ("truth-again", 99.0, 101.0),
                                 ("truth-again2", 104.0, 102.0)):
            step_run(out, f"st-{kind}", 0, [500.0, base, base])
            step_run(out, f"st-slow-{kind}", 0, [500.0, slow, slow])
        step_run(out, "st-hybrid1", 0, [500.0, 100.0, 100.0])
        step_run(out, "st-slow-hybrid1", 0, [500.0, 103.5, 103.5])
        text = run_compare(out, data)
        # Pools: base 100 (median of 100, 99, 104), slow 102 (of 103, 101, 102): the slow rank cost 2 ms.
        self.assertIn("st-slow: what the slow rank cost, pooled (3 truths of st and the pool above), rank 0's mean "
                      "iteration: truth +2.000 ms, hybrid1 +3.500 ms (+1.500 ms against the truth's), model +4.000 ms "
                      "(+2.000 ms against the truth's)", text)
        # The last table: one line per hybrid and real rank against its (pooled) truth.
        summary = text[text.index("## Acceptance summary"):]
        self.assertRegex(summary, r"\nst +hybrid1 +0 +3 +\+0\.00% +0\.00% +- +- +within\n")
        self.assertRegex(summary, r"\nst-slow +hybrid1 +0 +3 +\+1\.47% +1\.47% +- +- +outside: slow rank mean\n")

    def test_truths_timed_two_ways_pool_no_kind_medians(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        step_data(data, "st", 100.0)
        step_run(out, "st-truth", 0, [500.0, 100.0], {"tp all-reduce": 1000.0}, comm_timing="nccl-kernel")
        step_run(out, "st-truth-again", 0, [500.0, 100.0], {"tp all-reduce": 1100.0}, comm_timing="nccl-kernel")
        step_run(out, "st-truth-again2", 0, [500.0, 100.0], {"tp all-reduce": 1900.0})
        step_run(out, "st-hybrid1", 0, [500.0, 100.0], {"tp all-reduce": 1050.0}, comm_timing="nccl-kernel")
        text = run_compare(out, data)
        self.assertIn("## st: hybrid1 vs the pooled truth (3 runs), rank 0", text)
        self.assertNotIn("per operation kind, rank 0: median us over the measured iterations (pooled truth", text)


class TruthGate(unittest.TestCase):
    def test_a_sweep_truth_is_checked_against_the_model_at_large_sizes(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(out, "sw-truth"))
        os.makedirs(os.path.join(data, "sw"))
        with open(os.path.join(data, "sw", "meta.env"), "w") as f:
            f.write("N=4\nMODE=sweep\n")
        trace = {"traceEvents": [
            {"ph": "X", "name": "allreduce 1048576", "cat": "collective", "pid": 0, "dur": 100.0},
            {"ph": "X", "name": "allreduce 16777216", "cat": "collective", "pid": 0, "dur": 1000.0},
            {"ph": "X", "name": "allreduce 67108864", "cat": "collective", "pid": 0, "dur": 4000.0}]}
        with open(os.path.join(data, "sw", "model-trace.json"), "w") as f:
            json.dump(trace, f)

        def gate(truth_us):
            with open(os.path.join(out, "sw-truth", "r0.json"), "w") as f:
                json.dump({"ops": {k: {"median_us": v} for k, v in truth_us.items()}}, f)
            text = run_compare(out, data)
            return [l for l in text.splitlines() if l.startswith("truth holds")]

        # 1 MiB far off does not count; 16 and 64 MiB within 2%.
        self.assertEqual(gate({"allreduce 1048576": 300.0, "allreduce 16777216": 1010.0,
                               "allreduce 67108864": 4040.0}),
                         ["truth holds the model at 16 MiB and above (within 2%): yes, worst 0.99%"])
        held = gate({"allreduce 1048576": 100.0, "allreduce 16777216": 1100.0, "allreduce 67108864": 4000.0})
        self.assertEqual(len(held), 1)
        self.assertIn("NO, worst 9.09%", held[0])


class ThreadCpu(unittest.TestCase):
    def test_the_busiest_threads_of_a_run_are_named(self):
        text = one_file_run("st-truth", "threads.txt",
                            "# CPU by thread name over 22.0 s sampled; cores = CPU s / wall s\n"
                            "cpu_s\tcores\tthreads\tname\n"
                            "178.65\t8.11\t32\tNCCL Progress 1\n52.96\t2.41\t128\tpython3\n"
                            "9.43\t0.43\t288\tprism progress\n1.94\t0.09\t32\tNCCL Service  0\n"
                            "243.24\t11.05\t602\tall\n")
        self.assertIn("[st-truth] CPU by thread, in cores: NCCL Progress 1 8.11 (32 threads), python3 2.41 "
                      "(128 threads), prism progress 0.43 (288 threads); all 11.05", text)


class Neighbour(unittest.TestCase):
    def test_the_gpu_neighbours_rate_is_given_per_run(self):
        text = one_file_run("sw-hybrid1-run", "neighbour.txt",
                            "gpu neighbour: 11.4 GB/s each way over 9.0 s (asked 12.5)\n")
        self.assertIn("[sw-hybrid1-run] gpu neighbour: 11.4 GB/s each way over 9.0 s (asked 12.5)", text)

    def test_a_neighbour_that_printed_nothing_is_named(self):
        text = one_file_run("sw-hybrid1-run", "neighbour.txt", "")
        self.assertIn("[sw-hybrid1-run] gpu neighbour: no output (did it start?)", text)


class NcclChoices(unittest.TestCase):
    def test_the_algorithms_and_protocols_nccl_chose_are_listed_per_size(self):
        text = one_file_run("sw-truth", "nccl-choices.txt",
                            "AllGather 65536 RING LL 24\nAllGather 1048576 RING LL128 24\n"
                            "AllReduce 1073741824 RING SIMPLE 20\nAllReduce 1073741824 TREE SIMPLE 4\n")
        self.assertIn("[sw-truth] NCCL's choices (its TUNING log, all ranks); protocols in use: LL, LL128, SIMPLE",
                      text)
        self.assertIn("  AllGather: 64K RING/LL, 1M RING/LL128", text)
        self.assertIn("  AllReduce: 1G RING/SIMPLE+TREE/SIMPLE", text)


class Hang(unittest.TestCase):
    def test_a_run_still_running_near_its_timeout_says_where_its_threads_wait(self):
        text = one_file_run("st-truth", "hang-threads.txt",
                            "100 100 [python3] futex_wait_queue syscall=202\n"
                            "100 101 [NCCL Progress 1] hrtimer_nanosleep syscall=230\n"
                            "200 200 [python3] futex_wait_queue syscall=202\n200 201 [prism progress] "
                            " syscall=running\n")
        self.assertIn("[st-truth] 2 rank(s) still running shortly before RUN_TIMEOUT; threads: python3 in "
                      "futex_wait_queue x2, NCCL Progress 1 in hrtimer_nanosleep x1, prism progress in (running) x1",
                      text)

    def test_each_rank_of_a_hung_run_is_placed_by_its_main_threads_innermost_frames(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        run = os.path.join(out, "st-truth.hung1")
        os.makedirs(run)
        main = ('Current thread 0x00007f01 (most recent call first):\n'
                '  File "/venv/torch/distributed/distributed_c10d.py", line {line} in {fn}\n'
                '  File "/repo/bench/fidelity/driver.py", line {own} in {own_fn}\n'
                '  File "/repo/bench/fidelity/driver.py", line 471 in <module>\n')
        other = ('Thread 0x00007f02 (most recent call first):\n'
                 '  File "/usr/lib/python3.12/threading.py", line 359 in wait\n'
                 '  File "/usr/lib/python3.12/threading.py", line 1012 in _bootstrap\n\n')
        p2p = dict(line=2785, fn="_coalescing_manager", own=259, own_fn="p2p")
        logs = {0: other + main.format(**p2p), 1: main.format(**p2p) + "\n" + other,
                2: main.format(line=2253, fn="_new_process_group_helper", own=186, own_fn="init"),
                3: main.format(**p2p), 4: ""}
        threads = ""
        for rank, text in logs.items():
            with open(os.path.join(run, f"r{rank}.log"), "w") as f:
                f.write(text)
            pid = 100 + rank
            at = " at: iteration 0 op 12 recv" if rank == 3 else ""  # driver.py's whereabouts (rank 3's alone)
            threads += f"# rank {rank} pid {pid}{at}\n{pid} {pid} [python3] 0 syscall=running state=R\n"
            if rank != 4:  # rank 4: its process in exit, one thread tearing down
                threads += f"{pid} {pid + 50} [NCCL Progress 1] hrtimer_nanosleep syscall=230 state=S\n"
            threads += f"{pid} {pid + 60} [cuda-EvtHandlr] os_acquire_rwlock_write syscall=7 state=D\n"
        with open(os.path.join(run, "hang-threads.txt"), "w") as f:
            f.write(threads)
        text = run_compare(out, data)
        self.assertIn("[st-truth.hung1] 5 rank(s) still running", text)
        self.assertIn("  ranks 0-1: distributed_c10d.py:2785 _coalescing_manager < driver.py:259 p2p\n", text)
        self.assertIn("  rank 3: at iteration 0 op 12 recv: distributed_c10d.py:2785 _coalescing_manager < "
                      "driver.py:259 p2p\n", text)
        self.assertIn("  rank 2: distributed_c10d.py:2253 _new_process_group_helper < driver.py:186 init\n", text)
        self.assertIn("  rank 4: no Python stack written; 2 thread(s) left (exiting?)\n", text)


class LinkHold(unittest.TestCase):
    def test_the_rank_whose_bytes_landed_late_most_often_is_named(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        run = os.path.join(out, "sw-truth")
        os.makedirs(run)
        line = ("NET/Prism: pid {pid}: shaped receives: 100; bytes landed after the modelled delivery "
                "(or the posting, if later): {k} ({k}.0%), "
                "p50 <=0 us, p99 <=50 us, max 70.0 us; test() saw them p50 <=1 us, p99 <=5 us later\n")
        for rank, late in ((0, 2), (1, 40), (2, 5)):
            with open(os.path.join(run, f"r{rank}.log"), "w") as f:
                f.write("iteration 1\n" + line.format(pid=100 + rank, k=late))
        text = run_compare(out, data)
        self.assertIn("[sw-truth] links held (3 ranks reporting): rank 1 (most late): shaped receives: 100; "
                      "bytes landed after the modelled delivery (or the posting, if later): 40 (40.0%)", text)
        self.assertIn("  rank 0: shaped receives: 100; bytes landed after the modelled delivery "
                      "(or the posting, if later): 2 (2.0%)", text)


class Timeline(unittest.TestCase):
    """bench/fidelity/timeline.py: a run's op timeline beside prismd's trace."""

    def run_timeline(self, *extra):
        out = tempfile.mkdtemp()
        run = os.path.join(out, "st-truth")
        os.makedirs(run)
        timeline = [[0, "tp all-reduce", 0.5, 1.0],  # warm-up iteration
                    [1, "fwd", 0.0, 1.5], [1, "tp all-reduce", 1.5, 8.5], [1, "send act, recv grad", 8.5, 20.0]]
        with open(os.path.join(run, "r2.json"), "w") as f:
            json.dump({"warmup": 1, "iteration_ms": [30.0, 30.0], "timeline": timeline}, f)
        def op(name, ts_us, dur_us, pid=2):
            return {"ph": "X", "name": name, "cat": "x", "pid": pid, "tid": 0, "ts": ts_us, "dur": dur_us}
        events = [op("iteration start", 0, 0), op("iteration start", 25000, 0), op("iteration start", 50000, 0),
                  op("fwd", 25000, 1500), op("tp all-reduce", 26500, 6700),
                  # a send/recv group: two ops, one label, one start: one op of the run
                  op("send act, recv grad", 33200, 13400), op("send act, recv grad", 33200, 13400),
                  op("tp all-reduce", 26500, 6700, pid=3)]
        trace = os.path.join(out, "trace.json")
        with open(trace, "w") as f:
            json.dump({"traceEvents": events}, f)
        return subprocess.run([sys.executable, TIMELINE, run, trace, "--rank", "2", *extra],
                              capture_output=True, text=True)

    def test_ops_line_up_by_label_in_the_first_timed_iteration(self):
        r = self.run_timeline()
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "rank 2: run iteration 1, model iteration 1 (25.000 ms)")
        self.assertEqual(len(lines), 5)  # header, column names, three ops
        self.assertRegex(lines[3], r"^tp all-reduce +1\.500 +8\.200 +6\.700 +1\.500 +8\.500 +7\.000$")
        self.assertRegex(lines[4], r"^send act, recv grad +8\.200 +21\.600 +13\.400 +8\.500 +20\.000 +11\.500$")

    def test_against_lines_up_an_iteration_with_another_of_the_same_run(self):
        run = os.path.join(tempfile.mkdtemp(), "st-truth-late")
        os.makedirs(run)
        timeline = [[1, "fwd", 0.0, 1.5], [1, "tp all-reduce", 1.5, 8.5],
                    [2, "fwd", 0.0, 21.5], [2, "tp all-reduce", 21.5, 35.0]]
        with open(os.path.join(run, "r0.json"), "w") as f:
            json.dump({"warmup": 1, "iteration_ms": [30.0, 30.0, 50.0], "timeline": timeline}, f)
        r = subprocess.run([sys.executable, TIMELINE, run, "--rank", "0", "--iteration", "2", "--against", "1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "rank 0: iteration 2 (50.000 ms) against iteration 1 (30.000 ms): +20.000 ms")
        self.assertRegex(lines[3], r"^tp all-reduce +1\.500 +8\.500 +7\.000 +21\.500 +35\.000 +13\.500 +"
                                   r"\+20\.000 +\+26\.500$")

    def test_comm_only_leaves_out_compute_and_a_missing_iteration_is_named(self):
        r = self.run_timeline("--comm-only")
        self.assertNotIn("\nfwd ", r.stdout)
        r = self.run_timeline("--iteration", "3")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("times no op in iteration 3", r.stderr)


if __name__ == "__main__":
    unittest.main()
