#!/usr/bin/env python3
"""hybrid_pat_split: where a real rank's PAT all-gathers and reduce-scatters
in a hybrid run spend the time the model does not, message by message.

Usage: hybrid_pat_split.py [--explain BIN] [--step-cost-us US] [--latency-us L]
                           [--ops] GRAPH RECORDING RANK

RECORDING: prismd --record-sessions of the hybrid run WITH its per-message
events (not an --ops-only copy). bench/hybrid_explain prints both sides: the
recording (its real/sched/conn/msg lines) and `model:RANK` (each op's time as
--simulate plays it). L: the link's one-way latency (the spec's; default 5).

Each real-rank op runs from `start` (the end of the rank's previous op; the
first op: its first send) to `end` (its last receive). Its time splits into:
  pre     start -> its first send (NCCL's launch and first step; the model: 0)
  wire    the sends' own wire time on the rank's link (transmit link busy)
  idle    the link idle between the first send and the last send's end,
          each idle stretch (up to the post of the send that ends it) split:
    floor   a receive completing in it was held by the plugin's PAT floor
            (or PatLate) past its mirror (its twin send's end + L)
    mirror  ... waited for its mirror: this rank's own twin send, + L
    test    ... NCCL's test() found it done after its time (late_us)
    react   the last such receive found done -> the send's post
    pause   no receive completed in the stretch (NCCL's own order: a
            window's end, the GPU's work between steps)
  tail    the last send's end -> end
and, per op: held_n / held, the receives the plugin timed past their mirror
(PAT's floor, PatLate) and by how much in all, on the critical path or not;
the schedule: sent - ready (sched_late), ready - the first send when later
(ready_after_first: only then does a late schedule move a PAT receive, whose
floor starts at the later of ready and the first send, and which the plugin
times from its first send while no schedule is there), receives done before
it came (pre_sched), receives flagged waited_for_schedule (flagged; before
2026-12-03 also those that waited for their own twin send without a
schedule), and how long the op's first receive waited for the schedule
after its time (first_wait).
A receive's "mirror" needs its dimension: the op's connections per direction
and channel, ranked by the bytes they carry in it (dimension 0 the most, as
NCCL's PAT does on a power-of-two communicator); `step` pairs a receive with
its twin send.

Prints per op (us), then the medians per kind with the model's time:
  op  OP kind  total  model  gap  pre  wire  idle  floor  mirror  test  react
      pause  tail  held_n  held  sched_late  ready_after_first  pre_sched
      flagged  first_wait  react_med (the median react of its stretches)
      slot_med (the median spacing of a connection's receive posts past its
      first 8, NCCL_STEPS: NCCL's kernel freeing a slot, its pace per message)
  kind  KIND  n  (the same columns: medians over its ops)
--ops prints each op's idle stretches too (stretch OP from to us cause: the
dimension of the send that ends it, and "pause" or the receive it waited for).
Exit 0; 2 on bad use.
"""
import argparse
import collections
import statistics
import subprocess
import sys


def run_explain(args, source):
    cmd = [args.explain, "--step-cost-us", str(args.step_cost_us), args.graph, source, str(args.rank)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"hybrid_pat_split: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return [line.split("\t") for line in out.stdout.splitlines()]


def model_times(rows, rank):
    per_kind = collections.defaultdict(list)
    for f in rows:
        if f[0] == "op" and int(f[1]) == rank and f[3] == "collective":
            per_kind[f[4].split()[0]].append(float(f[6]) - float(f[5]))
    return {k: statistics.median(v) for k, v in per_kind.items()}


def load(rows):
    is_send, real, sched, msgs = {}, {}, {}, collections.defaultdict(dict)
    for f in rows:
        if f[0] == "conn":
            is_send[f[2]] = f[3] == "1"
        elif f[0] == "real":
            real[int(f[2])] = dict(kind=int(f[3]), seq=int(f[4]), at=float(f[7]), first=float(f[8]), end=float(f[9]),
                                   comm=f[10] if len(f) > 10 else "")
        elif f[0] == "sched":
            # NCCL numbers each communicator's calls from 0: kind and seq name an op only with its communicator
            # (hybrid_explain's last column since 2026-12-03; "" in older output).
            key = (int(f[3]), int(f[4]), f[8] if len(f) > 8 else "")
            sched.setdefault(key, (float(f[2]), float(f[7])))
        elif f[0] == "msg":
            m = msgs[(int(f[7]), f[3], int(f[4]))]
            m.update(conn=f[3], op=int(f[7]), ch=int(f[8]), step=int(f[9]))
            m[f[2]] = float(f[6])
            if f[2] == "completed":
                m.update(bytes=int(f[5]), late=float(f[10]), waited=len(f) > 11 and f[11] == "1")
    return is_send, real, sched, msgs


def dims_of(op_msgs, is_send):
    total = collections.Counter()
    for m in op_msgs:
        total[(is_send.get(m["conn"], False), m["ch"], m["conn"])] += m.get("bytes", 0)
    ranked = collections.defaultdict(list)
    for (send, ch, conn), b in total.items():
        ranked[(send, ch)].append((-b, conn))
    dim = {}
    for lst in ranked.values():
        for d, (_, conn) in enumerate(sorted(lst)):
            dim[conn] = d
    return dim


def split_op(op, info, start, op_msgs, is_send, sched, args):
    lat = args.latency_us
    dim = dims_of(op_msgs, is_send)
    sends = sorted((m for m in op_msgs if is_send.get(m["conn"])), key=lambda m: m["posted"])
    recvs = [m for m in op_msgs if not is_send.get(m["conn"])]
    twin = {(m["ch"], dim[m["conn"]], m["step"]): m["completed"] for m in sends}
    for r in recvs:
        r["timed"] = r["completed"]  # Completed.at_ns: the plugin's time for it
        r["seen"] = r["completed"] + r["late"]  # NCCL's test() found it done then
        t = twin.get((r["ch"], dim[r["conn"]], r["step"]))
        r["mirror"] = t + lat if t is not None else None
    row = collections.OrderedDict()
    row["total"] = info["end"] - start
    row["pre"] = info["first"] - start
    # The link: sends' done times are its modelled wire ends, in order.
    busy_to, wire, idle = None, 0.0, []
    for s in sorted(sends, key=lambda m: m["completed"]):
        w = s["bytes"] * 8 / (args.gbps * 1e3)
        begin = s["completed"] - w
        if busy_to is not None and begin > busy_to + 0.05:
            idle.append((busy_to, begin, dim[s["conn"]]))
        busy_to = s["completed"] if busy_to is None else max(busy_to, s["completed"])
        wire += w
    row["wire"] = wire
    row["idle"] = sum(b - a for a, b, _ in idle)
    for k in ("floor", "mirror", "test", "react", "pause"):
        row[k] = 0.0
    reacts, stretches = [], []
    done = sorted(recvs, key=lambda r: r["seen"])
    all_gather = info["kind"] == 2
    for a, b, d in idle:
        # Only receives on the dimensions the send waits for: an all-gather's
        # on higher ones, a reduce-scatter's on lower ones.
        inside = [r for r in done if a < r["seen"] <= b and
                  (dim[r["conn"]] > d if all_gather else dim[r["conn"]] < d)]
        if not inside:
            row["pause"] += b - a
            stretches.append((a, b, f"d{d} pause"))
            continue
        r = inside[-1]
        react = b - r["seen"]
        row["react"] += react
        reacts.append(react)
        test = min(r["late"], r["seen"] - a)
        row["test"] += test
        held_to = r["seen"] - test
        mirror = r["mirror"] if r["mirror"] is not None else held_to
        floor = max(0.0, held_to - max(a, mirror))
        row["floor"] += floor
        row["mirror"] += max(0.0, held_to - a - floor)
        stretches.append((a, b, f"d{d} after d{dim[r['conn']]} step {r['step']} floor {floor:.1f} react {react:.1f}"))
    row["tail"] = info["end"] - busy_to
    sent, ready = sched.get((info["kind"], info["seq"], info["comm"]), (float("nan"), float("nan")))
    held = [r["timed"] - r["mirror"] for r in recvs if r["mirror"] is not None and r["timed"] > r["mirror"] + 0.5]
    row["held_n"] = len(held)
    row["held"] = sum(held)
    row["sched_late"] = sent - ready
    row["ready_after_first"] = max(0.0, ready - info["first"])
    row["pre_sched"] = sum(1 for r in recvs if r["seen"] < sent)
    row["flagged"] = sum(1 for r in recvs if r["waited"])
    first = min(recvs, key=lambda r: r["timed"])
    row["first_wait"] = max(0.0, min(first["seen"], sent) - first["timed"]) if first["seen"] > sent else 0.0
    row["react_med"] = statistics.median(reacts) if reacts else 0.0
    # A connection's receives past its first NCCL_STEPS (8) are posted as
    # NCCL's kernel frees a slot: the spacing is its pace per message.
    by_conn = collections.defaultdict(list)
    for r in recvs:
        by_conn[r["conn"]].append(r["posted"])
    spacing = []
    for posts in by_conn.values():
        posts.sort()
        spacing += [b - a for a, b in zip(posts[8:], posts[9:])]
    row["slot_med"] = statistics.median(spacing) if spacing else 0.0
    return row, stretches


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--explain", default="build/bench/hybrid_explain")
    p.add_argument("--step-cost-us", type=float, default=12.5)
    p.add_argument("--latency-us", type=float, default=5.0)
    p.add_argument("--gbps", type=float, default=100.0, help="the link's bandwidth (the spec's)")
    p.add_argument("--ops", action="store_true")
    p.add_argument("graph")
    p.add_argument("recording")
    p.add_argument("rank", type=int)
    args = p.parse_args()
    model = model_times(run_explain(args, f"model:{args.rank}"), args.rank)
    is_send, real, sched, msgs = load(run_explain(args, args.recording))
    if not any("completed" in m for m in msgs.values()):
        print("hybrid_pat_split: the recording has no per-message events (an --ops-only copy?)", file=sys.stderr)
        return 2
    kinds = {2: "allgather", 3: "reducescatter"}
    per_kind, prev = collections.defaultdict(list), None
    for op in sorted(real):
        info = real[op]
        start = prev if prev is not None else info["first"]
        prev = info["end"]
        op_msgs = [m for m in msgs.values() if m["op"] == op and "completed" in m and "posted" in m]
        kind = kinds.get(info["kind"], str(info["kind"]))
        if not op_msgs:
            continue
        row, stretches = split_op(op, info, start, op_msgs, is_send, sched, args)
        row["model"] = model.get(kind, float("nan"))
        row["gap"] = row["total"] - row["model"]
        per_kind[kind].append(row)
        cols = ["total", "model", "gap"] + [k for k in row if k not in ("total", "model", "gap")]
        print("op", op, kind, "  ".join(f"{k} {row[k]:.1f}" for k in cols), sep="\t")
        if args.ops:
            for a, b, why in stretches:
                print("stretch", op, f"{a:.1f}", f"{b:.1f}", f"{b - a:.1f}", why, sep="\t")
    for kind, rows in per_kind.items():
        cols = list(rows[0].keys())
        cols = ["total", "model", "gap"] + [k for k in cols if k not in ("total", "model", "gap")]
        med = {k: statistics.median(r[k] for r in rows) for k in cols}
        print("kind", kind, len(rows), "  ".join(f"{k} {med[k]:.1f}" for k in cols), sep="\t")
    return 0


if __name__ == "__main__":
    sys.exit(main())
