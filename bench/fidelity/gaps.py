#!/usr/bin/env python3
"""Where in the iteration a hybrid run or the model parts from its ground truth.

For one rank of a step spec, the gap before each compute op (from the
previous compute op's start, or the iteration's start) is the compute before
it plus the communication it waited for. This prints the truth's mean gap
over its measured iterations (several truths: pooled, each weighing alike)
and, for every other run and for prismd's play of the graph, how much longer
or shorter the same gap was. A pipeline exchange that a virtual stage answers
late, or a TP all-reduce that the model holds back less than the truth's NIC
did, shows as one row.

With --spread it prints instead, for every truth and run apart, the
standard deviation of each gap over that run's measured iterations (and of
the iteration): where a truth's iteration-to-iteration spread comes from,
which no deterministic model can follow (two truths' link orders side by
side: docs/plugin.md, "Link shaping").

Usage: bench/fidelity/gaps.py --rank R --truth DIR [--truth DIR ...]
                              [--run NAME=DIR ...] [--graph GRAPH [--prismd BIN]]
                              [--spread] [-- PRISMD_FLAGS...]
  DIR     a run-gpu.sh result directory with r<R>.json (driver.py's
          `timeline`, op_timing compute or all)
  GRAPH   the spec's graph: the model's column, from `prismd --graph GRAPH
          --simulate --trace` (its sixth iteration) with PRISMD_FLAGS (the
          spec's MODEL_FLAGS, from its meta.env)

Example (docs/network-model.md, "A packed host's step turnaround"):
  bench/fidelity/gaps.py --rank 0 --truth OUT/step-n16-tp4-2g5-truth \\
    --truth OUT/step-n16-tp4-2g5-truth-again --run hybrid1=OUT/step-n16-tp4-2g5-hybrid1 \\
    --graph D/step-n16-tp4-2g5/graph -- --step-turnaround-us 140
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODEL_ITERATION = 5  # the model's iteration read: past any start-up


def read_result(run_dir, rank):
    """(path, driver.py's result for `rank`), stopping with a clear message
    when it has no timeline."""
    path = os.path.join(run_dir, f"r{rank}.json")
    with open(path) as f:
        result = json.load(f)
    if "timeline" not in result:
        sys.exit(f"gaps.py: {path} has no timeline (driver.py --op-timing compute or all)")
    return path, result


def run_starts(run_dir, rank):
    """(mean start in ms from the iteration's start per compute label, mean
    iteration in ms) over the run's measured iterations."""
    path, result = read_result(run_dir, rank)
    warmup = result.get("warmup", 0)
    starts = {}
    for it, label, start, _ in result["timeline"]:
        if it >= warmup:
            starts.setdefault(label, []).append(start)
    times = result["iteration_ms"][warmup:]
    if not starts or not times:
        sys.exit(f"gaps.py: {path}: no measured iteration")
    return {k: statistics.mean(v) for k, v in starts.items()}, statistics.mean(times)


def run_gap_spreads(run_dir, rank, labels):
    """Per label of `labels` (in order), then to the iteration's end and the
    iteration: the standard deviation (ms) over the run's measured iterations."""
    path, result = read_result(run_dir, rank)
    warmup = result.get("warmup", 0)
    per_iteration = {}
    for it, label, start, _ in result["timeline"]:
        if it >= warmup:
            per_iteration.setdefault(it, {})[label] = start
    rows = [[] for _ in range(len(labels) + 2)]
    for it, starts in sorted(per_iteration.items()):
        if it >= len(result["iteration_ms"]) or any(k not in starts for k in labels):
            continue
        iteration = result["iteration_ms"][it]
        for i, g in enumerate(gaps(starts, iteration, labels)):
            rows[i].append(g)
        rows[-1].append(iteration)
    if len(rows[-1]) < 2:
        sys.exit(f"gaps.py: {path}: fewer than two measured iterations with every op of the truth's")
    return [statistics.pstdev(v) for v in rows]


def pooled(runs):
    """The truths' starts and iteration, each truth weighing alike; labels all share."""
    labels = set(runs[0][0])
    for starts, _ in runs[1:]:
        labels &= set(starts)
    return ({k: statistics.mean(r[0][k] for r in runs) for k in labels},
            statistics.mean(r[1] for r in runs))


def model_starts(prismd, graph, rank, flags):
    """The model's compute starts (ms) and iteration for `rank`, from its trace."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        cmd = [prismd, "--graph", graph, "--simulate", "--metrics-address", "none", "--iterations",
               str(MODEL_ITERATION + 2), "--trace", trace, "--trace-ranks", str(rank)] + flags
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gaps.py: {' '.join(cmd)}: exit {r.returncode}: {r.stderr[-400:]}")
        with open(trace) as f:
            d = json.load(f)
    events = d["traceEvents"] if isinstance(d, dict) else d
    ops = [e for e in events if e.get("ph") == "X" and e.get("pid") == rank and e.get("cat") == "compute"]
    marks = sorted(e["ts"] for e in ops if e["name"] == "iteration start")
    if len(marks) < MODEL_ITERATION + 2:
        sys.exit(f"gaps.py: the model's trace of rank {rank} has {len(marks)} iterations")
    t0, t1 = marks[MODEL_ITERATION], marks[MODEL_ITERATION + 1]
    starts = {e["name"]: (e["ts"] - t0) / 1e3 for e in ops if t0 <= e["ts"] < t1 and e["name"] != "iteration start"}
    return starts, (t1 - t0) / 1e3


def gaps(starts, iteration, labels):
    """The gap before each label in `labels` (start order), then to the iteration's end."""
    out, prev = [], 0.0
    for label in labels:
        out.append(starts[label] - prev)
        prev = starts[label]
    out.append(iteration - prev)
    return out


def main(argv):
    flags = []
    if "--" in argv:
        i = argv.index("--")
        argv, flags = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description="gaps between compute ops: truth against runs and the model")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--truth", action="append", required=True, help="a truth's result directory (repeat to pool)")
    p.add_argument("--run", action="append", default=[], help="NAME=DIR, a run held against the truth")
    p.add_argument("--graph", help="the spec's graph, for the model's column")
    p.add_argument("--prismd", default=os.path.join("build", "daemon", "prismd"))
    p.add_argument("--spread", action="store_true", help="each run's sd of every gap over its iterations")
    a = p.parse_args(argv)
    truth, truth_iteration = pooled([run_starts(d, a.rank) for d in a.truth])
    labels = sorted(truth, key=truth.get)
    if a.spread:
        print_spreads(a, labels)
        return
    columns = []
    for spec in a.run:
        name, sep, directory = spec.partition("=")
        if not sep:
            sys.exit(f"gaps.py: --run {spec}: NAME=DIR")
        columns.append((name, run_starts(directory, a.rank)))
    if a.graph:
        columns.append(("model", model_starts(a.prismd, a.graph, a.rank, flags)))
    for name, (starts, _) in columns:
        missing = [k for k in labels if k not in starts]
        if missing:
            sys.exit(f"gaps.py: {name} has no op {missing[0]!r} of the truth's")
    base = gaps(truth, truth_iteration, labels)
    print(f"rank {a.rank}: gap before each compute op, ms (truth: the mean of {len(a.truth)}); the others: "
          f"their gap minus the truth's")
    print(f"{'op':26s}{'truth':>10s}" + "".join(f"{name:>10s}" for name, _ in columns))
    diffs = [gaps(starts, it, labels) for _, (starts, it) in columns]
    for i, label in enumerate(labels + ["(to the iteration's end)"]):
        print(f"{label:26s}{base[i]:10.2f}" + "".join(f"{d[i] - base[i]:+10.2f}" for d in diffs))
    print(f"{'iteration':26s}{truth_iteration:10.2f}"
          + "".join(f"{it - truth_iteration:+10.2f}" for _, (_, it) in columns))


def print_spreads(a, labels):
    """--spread: the sd of every gap, per truth and run, in the truths' op order."""
    columns = [(f"truth{i + 1}" if len(a.truth) > 1 else "truth", d) for i, d in enumerate(a.truth)]
    for spec in a.run:
        name, sep, directory = spec.partition("=")
        if not sep:
            sys.exit(f"gaps.py: --run {spec}: NAME=DIR")
        columns.append((name, directory))
    spreads = [run_gap_spreads(d, a.rank, labels) for _, d in columns]
    print(f"rank {a.rank}: standard deviation of the gap before each compute op over each run's measured "
          f"iterations, ms")
    print(f"{'op':26s}" + "".join(f"{name:>10s}" for name, _ in columns))
    for i, label in enumerate(labels + ["(to the iteration's end)", "iteration"]):
        print(f"{label:26s}" + "".join(f"{sd[i]:10.2f}" for sd in spreads))


if __name__ == "__main__":
    main(sys.argv[1:])
