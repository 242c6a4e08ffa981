#!/usr/bin/env python3
"""hybrid_segments: a hybrid run's iteration cut at milestones, against
`prismd --simulate` (the model), segment by segment.

Usage: hybrid_segments.py [--explain BIN] [--step-cost-us US] [--ring-only]
                          [--skip N] GRAPH RECORDING RANKS OPS

RANKS: comma-separated ranks (e.g. 0,1); OPS: comma-separated op indices of
their program, in the order their ends come in an iteration (e.g.
136,155,158,159). A milestone is the latest end of that op over RANKS in
the iteration; the segments run from the iteration's start to the first
milestone, between milestones, and from the last to the iteration's end
(the job's: its last rank's). Both sides come from bench/hybrid_explain:
the recording's replay and `model:RANKS` (as bench/hybrid_gap.py does).
Unlike hybrid_gap's per-op shares, a segment does not depend on which rank
ends it, nor on a real rank's ops ending, for the engine, when NCCL
enqueues the next one: pick milestones whose end is a transfer's (a
collective, a receive).

Prints means per iteration from --skip (default 1), in ms:
  iterations K  hybrid X ms  model Y ms  gap Z ms (P%)
  segment  FROM -> TO  hybrid H  model M  gap G   (FROM/TO: start, an op
           "INDEX LABEL", end; the gaps add up to the iteration's)

Exit 0; 2 on bad use or when a side has fewer iterations than --skip + 1.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hybrid_gap import run_explain  # noqa: E402


def explain(args, source, iterations=None):
    out = run_explain(args, source, args.ranks, iterations, tool="hybrid_segments")
    ends, seen, label = [], collections.Counter(), {}
    per_it = collections.defaultdict(lambda: collections.defaultdict(float))  # iteration -> op -> latest end
    for line in out.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "iteration":
            ends.append(float(f[2]))
        elif f[0] == "op":
            rank, op = int(f[1]), int(f[2])
            k = seen[(rank, op)]  # the k-th time op is played belongs to iteration k
            seen[(rank, op)] += 1
            per_it[k][op] = max(per_it[k][op], float(f[6])) if op in per_it[k] else float(f[6])
            label[op] = f[4]
    return ends, per_it, label


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--explain", default=os.path.join(here, "..", "build", "bench", "hybrid_explain"))
    p.add_argument("--step-cost-us", type=float, default=None)
    p.add_argument("--ring-only", action="store_true")
    p.add_argument("--skip", type=int, default=1)
    p.add_argument("graph")
    p.add_argument("recording")
    p.add_argument("ranks")
    p.add_argument("ops")
    args = p.parse_args()
    try:
        ops = [int(x) for x in args.ops.split(",")]
    except ValueError:
        print(f"hybrid_segments: OPS must be op indices: {args.ops}", file=sys.stderr)
        return 2

    h_ends, h_it, label = explain(args, args.recording)
    m_ends, m_it, _ = explain(args, f"model:{args.ranks}", iterations=max(len(h_ends), args.skip + 1) + 1)
    its = [k for k in range(args.skip, min(len(h_ends), len(m_ends)))
           if all(o in h_it[k] and o in m_it[k] for o in ops)]
    if not its:
        print(f"hybrid_segments: {len(h_ends)} hybrid and {len(m_ends)} model iterations with every op of {ops}, "
              f"none after --skip {args.skip}", file=sys.stderr)
        return 2

    names = ["start"] + [f"{o} {label.get(o, '')}".rstrip() for o in ops] + ["end"]
    h_seg = [0.0] * (len(ops) + 1)
    m_seg = [0.0] * (len(ops) + 1)
    for k in its:
        for ends, it, seg in ((h_ends, h_it, h_seg), (m_ends, m_it, m_seg)):
            points = [ends[k - 1] if k > 0 else 0.0] + [it[k][o] for o in ops] + [ends[k]]
            for i in range(len(seg)):
                seg[i] += points[i + 1] - points[i]
    n = len(its)
    h_total, m_total = sum(h_seg) / n, sum(m_seg) / n
    gap = h_total - m_total
    print(f"iterations {n}  hybrid {h_total / 1000:.3f} ms  model {m_total / 1000:.3f} ms  "
          f"gap {gap / 1000:.3f} ms ({100 * gap / m_total:+.2f}%)")
    for i in range(len(h_seg)):
        h, m = h_seg[i] / n / 1000, m_seg[i] / n / 1000
        print(f"segment  {names[i]} -> {names[i + 1]}  hybrid {h:.3f}  model {m:.3f}  gap {h - m:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
