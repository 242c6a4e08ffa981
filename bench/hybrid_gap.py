#!/usr/bin/env python3
"""hybrid_gap: where a real rank's iteration in a hybrid run runs longer (or
shorter) than `prismd --simulate` plays the same rank, per op kind.

Usage: hybrid_gap.py [--explain BIN] [--graphgen BIN] [--step-cost-us US]
                     [--ring-only] [--nic-model M] [--skip N] GRAPH RECORDING RANK

--nic-model: prismd's (queues or interleave) for both sides' engine.

RECORDING: prismd --record-sessions of the hybrid run (or a copy without its
per-message events: `hybrid_explain --ops-only IN OUT`, `prism-session-capture
--ops-only`). Both sides come from bench/hybrid_explain: the recording's
replay (what the engine played for RANK: the real rank's own reported starts
and ends) and `model:RANK` (the real rank as the model plays it, which is what
--simulate gives).

For each iteration from --skip (default 1: the start-up iteration left out)
and each op of RANK, the gap at its end: (its end - its iteration's start) in
the hybrid minus the same in the model. Along each stream in program order,
an op's share of the iteration's gap is its gap minus the previous op's on
that stream (what that op added); the shares of a stream add up to its last
op's gap, and its line "after its last op" (the iteration's gap minus that:
the rest of the iteration, until the job's last rank ends it) makes them add
up to the iteration's gap. A real rank's last op ends, for the engine, when
NCCL enqueues its next one, often well before the job's end of the
iteration, so that line can be large and the last op's share as large the
other way. A compute op is charged together with the op after it (a real
rank's compute ends, for the engine, when the next op is reported: NCCL
reports it when the host enqueues it, often ahead of the GPU). Printed per
kind (compute by label; a collective by communicator and kind; send/recv by
communicator and peer), means per iteration in ms:

  iterations K  hybrid X ms  model Y ms  gap Z ms (P%)
  stream S  kind  ops-per-iteration  added-ms  (duration hybrid - model, ms)
  stream S  after its last op  1.0  added-ms  (the same)
  stream S ends G  (its last op's gap, ms: the sum of its lines' added-ms
                    other than "after its last op")
  top  iteration op kind added-ms  (the 12 ops that added most)

Exit 0; 2 on bad use or when a side has fewer iterations than --skip + 1.
"""
import argparse
import collections
import json
import os
import subprocess
import sys


def run_explain(args, source, ranks, iterations=None, tool="hybrid_gap"):
    """hybrid_explain's output for `source` and `ranks` (args: explain, graph,
    step_cost_us, ring_only); exits naming `tool` when it fails."""
    cmd = [args.explain]
    if iterations:
        cmd += ["--iterations", str(iterations)]
    if args.step_cost_us is not None:
        cmd += ["--step-cost-us", str(args.step_cost_us)]
    if args.ring_only:
        cmd += ["--ring-only"]
    if getattr(args, "nic_model", None):
        cmd += ["--nic-model", args.nic_model]
    cmd += [args.graph, source, str(ranks)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{tool}: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return out


def explain(args, source, rank, iterations=None):
    out = run_explain(args, source, rank, iterations)
    ends, ops = [], []
    for line in out.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "iteration":
            ends.append(float(f[2]))
        elif f[0] == "op" and int(f[1]) == rank:
            ops.append((int(f[2]), f[3], float(f[5]), float(f[6])))
    # The k-th time op j is played belongs to iteration k.
    seen = collections.Counter()
    per_it = collections.defaultdict(dict)
    for op, kind, start, end in ops:
        per_it[seen[op]][op] = (kind, start, end)
        seen[op] += 1
    return ends, per_it


def describe(graph_ops, op, kind):
    if graph_ops is None or op >= len(graph_ops):
        return kind
    o = graph_ops[op]
    if o["type"] == "compute":
        return f"compute {o.get('label', '')}".rstrip()
    if o["type"] == "collective":
        return f"{o['kind']} {o.get('comm_name', '')} {o['bytes']} B"
    if o["type"] in ("send", "recv"):
        return f"{o['type']} {o.get('comm_name', '')} peer {o.get('peer_rank')}"
    return o["type"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--explain", default=os.path.join(here, "..", "build", "bench", "hybrid_explain"))
    p.add_argument("--graphgen", default=None, help="prism-graphgen, for the ops' communicators (else kinds only)")
    p.add_argument("--step-cost-us", type=float, default=None)
    p.add_argument("--ring-only", action="store_true")
    p.add_argument("--nic-model", default=None, choices=["queues", "interleave"])
    p.add_argument("--skip", type=int, default=1)
    p.add_argument("graph")
    p.add_argument("recording")
    p.add_argument("rank", type=int)
    args = p.parse_args()

    graph_ops = None
    if args.graphgen:
        out = subprocess.run([args.graphgen, "inspect", args.graph, "--ops", str(args.rank)],
                             capture_output=True, text=True, check=True)
        graph_ops = json.loads(out.stdout)["ops"]

    h_ends, h_it = explain(args, args.recording, args.rank)
    m_ends, m_it = explain(args, f"model:{args.rank}", args.rank, iterations=max(len(h_ends), args.skip + 1) + 1)
    its = [k for k in range(args.skip, min(len(h_ends), len(m_ends)))]
    if not its:
        print(f"hybrid_gap: {len(h_ends)} hybrid and {len(m_ends)} model iterations, none after --skip {args.skip}",
              file=sys.stderr)
        return 2

    def start_of(ends, k):
        return ends[k - 1] if k > 0 else 0.0

    added = collections.defaultdict(float)   # (stream, desc) -> us over the iterations
    dur = collections.defaultdict(float)     # (stream, desc) -> hybrid - model duration, us
    count = collections.Counter()
    top = []
    stream_end = collections.defaultdict(float)  # stream -> its last op's gap, summed over the iterations
    h_total = m_total = 0.0
    for k in its:
        hs, ms = start_of(h_ends, k), start_of(m_ends, k)
        h_total += h_ends[k] - hs
        m_total += m_ends[k] - ms
        last = collections.defaultdict(float)  # stream -> previous op's gap
        for op in sorted(set(h_it[k]) & set(m_it[k])):
            kind, h0, h1 = h_it[k][op]
            _, m0, m1 = m_it[k][op]
            stream = graph_ops[op].get("stream", 0) if graph_ops and op < len(graph_ops) else 0
            gap = (h1 - hs) - (m1 - ms)
            if kind == "compute" and op + 1 in h_it[k]:
                continue  # charged with the next op: a real rank's compute ends when its next op is reported
            key = (stream, describe(graph_ops, op, kind))
            added[key] += gap - last[stream]
            dur[key] += (h1 - h0) - (m1 - m0)
            count[key] += 1
            top.append((gap - last[stream], k, op, key[1]))
            last[stream] = gap
        it_gap = (h_ends[k] - hs) - (m_ends[k] - ms)
        for stream, g in last.items():
            stream_end[stream] += g
            key = (stream, "after its last op")
            added[key] += it_gap - g
            dur[key] += it_gap - g
            count[key] += 1
    n = len(its)
    gap = (h_total - m_total) / n
    print(f"iterations {n}  hybrid {h_total / n / 1000:.3f} ms  model {m_total / n / 1000:.3f} ms  "
          f"gap {gap / 1000:.3f} ms ({100 * gap / (m_total / n):+.2f}%)")
    for key in sorted(added, key=lambda x: (x[0], -abs(added[x]))):
        print(f"stream {key[0]}  {key[1]}  {count[key] / n:.1f}  {added[key] / n / 1000:+.3f}  "
              f"({dur[key] / n / 1000:+.3f})")
    for stream in sorted(stream_end):
        print(f"stream {stream} ends {stream_end[stream] / n / 1000:+.3f}")
    for a, k, op, d in sorted(top, key=lambda x: -x[0])[:12]:
        print(f"top  {k}  {op}  {d}  {a / 1000:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
