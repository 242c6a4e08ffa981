"""Where a ground truth's slow iterations began (compare.py).

A truth packs every rank onto one host, and its iterations scatter upwards:
most sit near the model, a few run 1-10% over it. driver.py's timeline gives
every timed op of every rank as [iteration, label, start_ms, end_ms], times
from that rank's own iteration start. An op that started later than it
usually does (its median start over the measured iterations) in a slow
iteration is where the delay shows on that rank; the earliest such op over
all ranks is where it began, and whether the op itself ran long (a compute
whose sleep lasted longer) or waited (its start moved, its length did not)
says which.

first_late_ops(results, iteration, late_ms, top) -> [(rank, label, late_ms,
    start_ms, longer_ms)], the ops of that iteration that started at least
    late_ms after their usual start, earliest first (each in its own rank's
    iteration: the ranks' clocks are not compared).
late_into(results, iteration, late_ms, top) -> [(rank, label, late_ms)], the
    ranks whose last timed op of the iteration before started at least
    late_ms after its usual start, latest first: a rank that came into the
    iteration late, which its peers then wait for in their first collective.
waits_opened(results, late_ms, on_time_ms) -> {label: count}, over every
    rank and iteration (a late run's own late iteration aside): the ops that
    started at least late_ms after their usual start while the op before
    them on that rank (by usual start) started within on_time_ms of its own. The wait opened between the two:
    in what the rank ran there (a collective, a pipeline receive) or in its
    host, not in a delay it carried from earlier in the iteration.

On the one-GPU host (one H100, 2026-12-05, 21 truths of the dp, pp and tp
layouts, bundle of main ddd4a34), every one of the 53 iterations more than
1% over their truth's median (the late runs' late iteration aside) had its
first late op at `fwd mb 0 layer 0`, right after the iteration's DP
all-gather; of the 11 over 3% that had a timed iteration before them, 9
came after a rank whose optimizer of the iteration before started 5.9-14.6
ms late. Waits of 4 ms or more opened before the optimizer 134 times (the
DP reduce-scatter before it), before pp4's `bwd mb 7 layer 0` 27 (the
pipeline receive), 106 before other ops, and never in a compute op.

Usage: bench/fidelity/spikes.py [--over PCT] RUN_DIR...   (truth run directories,
    r<rank>.json each): every iteration of rank 0 more than PCT (default 1)
    over its run's median, the late run's own late iteration aside, with its
    first late op and the rank that came into it latest; then the counts,
    and where waits of 4 ms or more opened (waits_opened).
"""
import glob
import json
import os
import re
import statistics
import sys


def per_op(result):
    """{label: {iteration: (start_ms, end_ms)}} of one rank's timeline."""
    ops = {}
    for it, label, start, end in result.get("timeline", []):
        ops.setdefault(label, {})[it] = (start, end)
    return ops


def timed_ops(result):
    """One rank's ops that ran in three iterations or more (enough for a
    median), with their usual start: ({label: {iteration: (start_ms,
    end_ms)}}, {label: median start ms})."""
    ops = {label: runs for label, runs in per_op(result).items() if len(runs) >= 3}
    usual = {label: statistics.median(s for s, _ in runs.values()) for label, runs in ops.items()}
    return ops, usual


def first_late_ops(results, iteration, late_ms=1.0, top=3):
    """The ops of `iteration` (over every rank in results: {rank: driver
    result}) that started at least late_ms after their median start, earliest
    first, at most `top`: (rank, label, how late, start, how much longer it ran
    than its median), all ms."""
    late = []
    for rank, result in results.items():
        ops, usual = timed_ops(result)
        for label, runs in ops.items():
            if iteration not in runs:
                continue
            start, end = runs[iteration]
            usual_start = usual[label]
            usual_length = statistics.median(e - s for s, e in runs.values())
            if start - usual_start >= late_ms:
                late.append((rank, label, start - usual_start, start, (end - start) - usual_length))
    late.sort(key=lambda op: op[3])
    return late[:top]


def describe(ops):
    """One phrase per op: 'rank 3 fwd mb 0 layer 0 +14.0 ms at 28.2 ms'."""
    return "; ".join(f"rank {r} {label} {lateness:+.1f} ms at {start:.1f} ms"
                     + (f" (ran {longer:+.1f} ms long)" if abs(longer) >= 0.5 else "")
                     for r, label, lateness, start, longer in ops)


def late_into(results, iteration, late_ms=1.0, top=3):
    """The ranks whose last timed op of iteration - 1 (the op whose usual
    start is latest) started at least late_ms after its usual start, latest
    first, at most `top`: (rank, label, how late in ms)."""
    late = []
    for rank, result in results.items():
        ops, usual = timed_ops(result)
        if not ops:
            continue
        last = max(usual, key=usual.get)
        if iteration - 1 in ops[last]:
            lateness = ops[last][iteration - 1][0] - usual[last]
            if lateness >= late_ms:
                late.append((rank, last, lateness))
    late.sort(key=lambda op: -op[2])
    return late[:top]


def waits_opened(results, late_ms=4.0, on_time_ms=1.0):
    """{label: how many times} an op of that label started at least late_ms
    after its median start while the op before it on the same rank (ops in
    the order of their median starts) started less than on_time_ms after its
    own, over every rank and iteration of `results` ({rank: driver result})
    but the one a --late-iteration run made late."""
    made_late = made_late_iterations(results)
    opened = {}
    for result in results.values():
        ops, usual = timed_ops(result)
        order = sorted(usual, key=usual.get)
        for before, label in zip(order, order[1:]):
            for it, (start, _) in ops[label].items():
                if it not in ops[before] or it in made_late:
                    continue
                if start - usual[label] >= late_ms and ops[before][it][0] - usual[before] < on_time_ms:
                    opened[label] = opened.get(label, 0) + 1
    return opened


def run_results(run_dir):
    """{rank: driver result} of a run directory's r<rank>.json files."""
    results = {}
    for path in glob.glob(os.path.join(run_dir, "r*.json")):
        m = re.fullmatch(r"r(\d+)\.json", os.path.basename(path))
        if m:
            with open(path) as f:
                results[int(m.group(1))] = json.load(f)
    return results


def made_late_iterations(results):
    """The iterations a --late-iteration run made late (driver.py's late_op)."""
    return {r["late_op"]["iteration"] for r in results.values() if r.get("late_op")}


def slow_iterations(results, over_pct):
    """Rank 0's measured iterations more than over_pct over their median, the
    iteration a --late-iteration run made late aside: [(iteration, % over)]."""
    t = results[0]
    warmup, times = t.get("warmup", 0), t["iteration_ms"][t.get("warmup", 0):]
    med = statistics.median(times)
    made_late = made_late_iterations(results)
    return [(warmup + i, 100.0 * (ms - med) / med) for i, ms in enumerate(times)
            if 100.0 * (ms - med) / med > over_pct and warmup + i not in made_late]


def main(argv):
    over = 1.0
    if len(argv) > 2 and argv[1] == "--over":
        over, argv = float(argv[2]), argv[:1] + argv[3:]
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    firsts, big, big_led, opened = {}, 0, 0, {}
    for run_dir in argv[1:]:
        results = run_results(run_dir)
        if 0 not in results or "timeline" not in results[0]:
            print(f"{run_dir}: no rank 0 result with a timeline (driver.py --op-timing compute)")
            continue
        for label, n in waits_opened(results).items():
            opened[label] = opened.get(label, 0) + n
        for it, pct in slow_iterations(results, over):
            first, into = first_late_ops(results, it, top=1), late_into(results, it, top=1)
            label = first[0][1] if first else "none"
            firsts[label] = firsts.get(label, 0) + 1
            came = f"rank {into[0][0]} {into[0][1]} {into[0][2]:+.1f} ms" if into else "-"
            print(f"{os.path.basename(os.path.normpath(run_dir))} iteration {it} {pct:+.2f}%: first late "
                  f"{describe(first) or 'none'}; came in latest: {came}")
            if pct > 3.0 and it - 1 >= results[0].get("warmup", 0):
                big += 1
                big_led += bool(into and into[0][2] >= 5.0)
    total = sum(firsts.values())
    print(f"{total} iterations over {over:g}%; first late op: "
          + ", ".join(f"{k} {v}" for k, v in sorted(firsts.items(), key=lambda kv: -kv[1])))
    print(f"over 3% with a timed iteration before: {big}; after a rank that came in 5 ms or more late: {big_led}")
    print("waits of 4 ms or more that opened right before an op (the op before it on time): "
          + (", ".join(f"{k} {v}" for k, v in sorted(opened.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
