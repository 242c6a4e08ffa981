"""Communication times from NCCL's own kernel stamps (driver.py --op-timing nccl).

The plugin's profiler role, with PRISM_OP_TIMES=DIR, writes one JSON line
per NCCL operation to DIR/prism-ops.<pid>.jsonl (docs/plugin.md, "Operation
times"): its GPU start and stop (%globaltimer, the kernel's earliest channel
start and latest channel stop) and enqueued_wall_ns, CLOCK_REALTIME when
NCCL started the operation's profiler event inside the launching call. The
driver brackets each of its communication calls with time.time_ns() (the
same clock); the lines whose enqueued_wall_ns falls inside a bracket are
that call's operations (a send/recv group: several). A call's time is its
operations' span: the latest stop minus the earliest start.

No CUDA event goes into the program's streams: the point (a DP8 step ran
530 ms an iteration without events around its collectives, 697 ms with
them; docs/timing.md).
"""
import bisect
import os
import statistics
import sys

# The reader `prism op-times` uses (scripts/prism_launcher/op_times.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from prism_launcher.op_times import read_op_lines  # noqa: E402


def log_path(directory, pid):
    return os.path.join(directory, f"prism-ops.{pid}.jsonl")


def read_lines(path):
    """(records, bad): the JSON lines of one process's log, as `prism
    op-times` reads them (lines that do not parse are counted); ([], 0)
    when the file is absent."""
    if not os.path.isfile(path):
        return [], 0
    return read_op_lines([path])


def match_calls(calls, records):
    """calls: [(label, iteration, t0_ns, t1_ns)], the driver's brackets (not
    overlapping: one thread launches them in order). Returns, per call in
    order, (label, iteration, span_us or None, operations matched)."""
    stamped = sorted((r for r in records if r.get("enqueued_wall_ns") is not None),
                     key=lambda r: r["enqueued_wall_ns"])
    keys = [r["enqueued_wall_ns"] for r in stamped]
    out = []
    for label, it, t0, t1 in calls:
        lo, hi = bisect.bisect_left(keys, t0), bisect.bisect_right(keys, t1)
        ops = stamped[lo:hi]
        starts = [r["kernel_start_ns"] for r in ops if r.get("kernel_start_ns") is not None]
        stops = [r["kernel_stop_ns"] for r in ops if r.get("kernel_stop_ns") is not None]
        span = (max(stops) - min(starts)) / 1e3 if starts and stops and max(stops) >= min(starts) else None
        out.append((label, it, span, len(ops)))
    return out


def comm_us(matched, kind_of):
    """driver.py's comm_us from matched calls: per kind (kind_of(label)) the
    median span in us and how many calls had one."""
    per_kind = {}
    for label, _, span, _ in matched:
        if span is not None:
            per_kind.setdefault(kind_of(label), []).append(span)
    return {k: {"median": round(statistics.median(v), 1), "n": len(v)} for k, v in per_kind.items()}


def summary(matched, bad_lines):
    """What the matching came to, for the result file and a warning."""
    calls = len(matched)
    timed = sum(1 for _, _, span, _ in matched if span is not None)
    unmatched = sum(1 for _, _, _, n in matched if n == 0)
    return {"calls": calls, "timed": timed, "without_operation": unmatched, "bad_lines": bad_lines}


def problem(s, directory):
    """A sentence naming what went wrong, or "" when every call was timed."""
    if s["calls"] == 0 or s["timed"] == s["calls"]:
        return ""
    if s["timed"] == 0:
        return (f"--op-timing nccl: none of {s['calls']} communication calls found NCCL's kernel stamps in "
                f"{directory} (is NCCL_PROFILER_PLUGIN Prism's plugin, and NCCL 2.27 or newer?)")
    return (f"--op-timing nccl: {s['calls'] - s['timed']} of {s['calls']} communication calls have no kernel "
            f"stamps ({s['without_operation']} matched no operation line); their kinds' medians leave them out")
