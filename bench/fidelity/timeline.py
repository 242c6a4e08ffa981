#!/usr/bin/env python3
"""Lines up one rank's ops in a ground truth (or hybrid) run with prismd's
play of the same graph: where a run's time went, op by op.

Usage: bench/fidelity/timeline.py RUN_DIR TRACE --rank R [--iteration I]
                                  [--model-iteration J] [--comm-only]
       bench/fidelity/timeline.py RUN_DIR --rank R --iteration I --against J [--comm-only]
  RUN_DIR  a run-gpu.sh result directory holding r<R>.json (step mode:
           driver.py's `timeline`, every timed op's start and end)
  TRACE    prismd --simulate --trace FILE --trace-ranks R (Chrome trace JSON)
  --iteration I        the run's iteration (counted from the first; default:
                       the first timed one, after the warm-up)
  --model-iteration J  the model's (default: I)

Prints, per op of the model's iteration in start order, its start, end and
duration in ms from the iteration's start beside the run's op of the same
label (the n-th of that label in the iteration). A send/recv group that the
model plays as several ops with one label and one start is one op in the
run. Ops the run did not time print "-".

With --against J (no TRACE): the run's iteration I beside its own iteration
J, op by op, and how much later each op of I started and ended: where a
late rank's delay (run-gpu.sh's truth-late, LATE_ITER) grew on its way
through the step. Both iterations must be timed (after the warm-up).
"""
import argparse
import json
import os
import sys


def run_ops(run_dir, rank, iteration):
    """The run's ops of `iteration` as (label, start_ms, end_ms), by start."""
    with open(os.path.join(run_dir, f"r{rank}.json")) as f:
        result = json.load(f)
    if "timeline" not in result:
        sys.exit(f"timeline.py: {run_dir}/r{rank}.json has no timeline "
                 "(a step run by driver.py of commit f68dfe3 or later)")
    if iteration is None:
        iteration = result.get("warmup", 0)
    rows = [(label, start, end) for it, label, start, end in result["timeline"] if it == iteration]
    if not rows:
        sys.exit(f"timeline.py: {run_dir}/r{rank}.json times no op in iteration {iteration}")
    return iteration, sorted(rows, key=lambda r: r[1])


def model_ops(trace_path, rank, iteration):
    """The model's ops of `iteration` on `rank` as (label, start_ms, end_ms),
    and the iteration's length in ms. Iterations start at the rank's
    "iteration start" marker ops."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [e for e in events if e.get("ph") == "X" and e.get("pid") == rank]
    if not ops:
        sys.exit(f"timeline.py: {trace_path} holds no op of rank {rank} (prismd --trace-ranks)")
    starts = sorted(e["ts"] for e in ops if e["name"] == "iteration start")
    if iteration + 1 >= len(starts):
        sys.exit(f"timeline.py: {trace_path} has {max(len(starts) - 1, 0)} whole iterations of rank {rank}")
    begin, end = starts[iteration], starts[iteration + 1]
    rows, seen = [], set()
    for e in sorted(ops, key=lambda e: (e["ts"], e["name"])):
        if not begin <= e["ts"] < end or e["name"] == "iteration start":
            continue
        key = (e["name"], e["ts"])  # one send/recv group: several ops, one label, one start
        if key in seen:
            continue
        seen.add(key)
        rows.append((e["name"], (e["ts"] - begin) / 1000, (e["ts"] + e["dur"] - begin) / 1000))
    return rows, (end - begin) / 1000


def line_up(model, run):
    """Pairs each model op with the run's n-th op of the same label."""
    left = {}
    for label, start, end in run:
        left.setdefault(label, []).append((start, end))
    return [(label, start, end, left[label].pop(0) if left.get(label) else None) for label, start, end in model]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("trace", nargs="?")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--iteration", type=int)
    p.add_argument("--model-iteration", type=int)
    p.add_argument("--comm-only", action="store_true", help="leave out compute ops")
    p.add_argument("--against", type=int, help="compare with the run's own iteration J instead of a trace")
    a = p.parse_args(argv)
    if a.against is not None:
        return against(a)
    if a.trace is None:
        p.error("give a TRACE, or --against J")
    iteration, run = run_ops(a.run_dir, a.rank, a.iteration)
    model_iteration = a.model_iteration if a.model_iteration is not None else iteration
    model, length = model_ops(a.trace, a.rank, model_iteration)
    compute = {label for label, _, _ in model if label.startswith(("fwd", "bwd", "optimizer"))}
    print(f"rank {a.rank}: run iteration {iteration}, model iteration {model_iteration} ({length:.3f} ms)")
    print(f"{'op':36s} {'model start':>11s} {'end':>9s} {'ms':>8s}   {'run start':>9s} {'end':>9s} {'ms':>8s}")
    for label, start, end, got in line_up(model, run):
        if a.comm_only and label in compute:
            continue
        theirs = f"{got[0]:9.3f} {got[1]:9.3f} {got[1] - got[0]:8.3f}" if got else f"{'-':>9s} {'-':>9s} {'-':>8s}"
        print(f"{label[:36]:36s} {start:11.3f} {end:9.3f} {end - start:8.3f}   {theirs}")


def against(a):
    """The run's iteration a.iteration beside its iteration a.against."""
    if a.iteration is None:
        sys.exit("timeline.py: --against needs --iteration")
    _, late = run_ops(a.run_dir, a.rank, a.iteration)
    _, base = run_ops(a.run_dir, a.rank, a.against)
    with open(os.path.join(a.run_dir, f"r{a.rank}.json")) as f:
        its = json.load(f)["iteration_ms"]
    print(f"rank {a.rank}: iteration {a.iteration} ({its[a.iteration]:.3f} ms) against iteration {a.against} "
          f"({its[a.against]:.3f} ms): {its[a.iteration] - its[a.against]:+.3f} ms")
    print(f"{'op':36s} {'start':>9s} {'end':>9s} {'ms':>8s}   {'start':>9s} {'end':>9s} {'ms':>8s}   "
          f"{'later by':>8s} {'ends':>8s}")
    for label, start, end, got in line_up(base, late):
        if a.comm_only and label.startswith(("fwd", "bwd", "optimizer")):
            continue
        if not got:
            print(f"{label[:36]:36s} {start:9.3f} {end:9.3f} {end - start:8.3f}   {'-':>9s} {'-':>9s} {'-':>8s}")
            continue
        print(f"{label[:36]:36s} {start:9.3f} {end:9.3f} {end - start:8.3f}   {got[0]:9.3f} {got[1]:9.3f} "
              f"{got[1] - got[0]:8.3f}   {got[0] - start:+8.3f} {got[1] - end:+8.3f}")


if __name__ == "__main__":
    main()
