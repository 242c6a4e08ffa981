"""prism op-times DIR: what NCCL's kernels took per operation kind, from the
lines the plugin writes with PRISM_OP_TIMES=DIR (docs/plugin.md,
"Operation times"): one JSON line per NCCL operation of every real rank
(and every rank of a ground truth that loads the plugin as NCCL's
profiler), with the kernel's GPU start and stop.

Rows group operations by kind, bytes, algorithm, protocol and communicator
size; each gives how many there were, the median and the 10th and 90th
percentiles of the kernel's time (earliest channel start to latest channel
stop, waits for peers included) and their sum. Standard library only."""

import glob
import json
import os
import statistics

from prism_launcher.common import PrismError, say

OP_TIMES_HELP = __doc__


def read_op_lines(paths):
    """(records, bad): every parsed line of the given files; lines that do
    not parse (a file cut by a crash) are counted."""
    records, bad = [], 0
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError:
                    bad += 1
    return records, bad


def op_files(target):
    """The prism-ops.<pid>.jsonl files of a directory, or the one file named."""
    if os.path.isfile(target):
        return [target]
    if not os.path.isdir(target):
        raise PrismError(f"{target}: no such file or directory (run the ranks with PRISM_OP_TIMES={target} first)")
    files = sorted(glob.glob(os.path.join(target, "prism-ops.*.jsonl")))
    if not files:
        raise PrismError(f"{target} holds no prism-ops.<pid>.jsonl: the ranks wrote no operation times there "
                         f"(set PRISM_OP_TIMES={target} and NCCL_PROFILER_PLUGIN to the plugin's path, which prism "
                         "run sets; NCCL 2.27 or newer)")
    return files


def percentile(sorted_values, q):
    """The q-quantile (0..1) by nearest rank of an ascending list."""
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def kernel_us(record):
    start, stop = record.get("kernel_start_ns"), record.get("kernel_stop_ns")
    if start is None or stop is None or stop < start:
        return None
    return (stop - start) / 1e3


def summarise(records):
    """Rows (dicts) per (kind, bytes, algo, proto, nranks), busiest first,
    and how many operations carried no kernel stamps."""
    groups, unstamped = {}, 0
    for r in records:
        us = kernel_us(r)
        if us is None:
            unstamped += 1
            continue
        key = (r.get("kind", "?"), r.get("bytes", 0), r.get("algo", ""), r.get("proto", ""), r.get("nranks", 0))
        groups.setdefault(key, []).append(us)
    rows = []
    for (kind, nbytes, algo, proto, nranks), values in groups.items():
        values.sort()
        rows.append({"kind": kind, "bytes": nbytes, "algo": algo, "proto": proto, "nranks": nranks,
                     "count": len(values), "median_us": round(statistics.median(values), 1),
                     "p10_us": round(percentile(values, 0.1), 1), "p90_us": round(percentile(values, 0.9), 1),
                     "total_ms": round(sum(values) / 1e3, 3)})
    rows.sort(key=lambda row: -row["total_ms"])
    return rows, unstamped


def human_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"


def print_op_times(target, limit):
    """prism run --op-times: the table at the end of the run, or why there is none."""
    if not glob.glob(os.path.join(target, "prism-ops.*.jsonl")):
        say(f"no operation times in {target}: the real ranks ran no NCCL operation through the plugin's profiler "
            "role (a program without NCCL, or NCCL older than 2.27)")
        return
    files = op_files(target)
    records, _ = read_op_lines(files)
    rows, unstamped = summarise(records)
    say(f"NCCL's kernel time per operation kind on the real ranks ({len(records)} operations; all of it: "
        f"prism op-times {target}):")
    for row in rows[:limit]:
        say(f"  {row['kind']:14s} {human_bytes(row['bytes']):>10s} {row['algo']:>6s} {row['proto']:>7s} "
            f"x{row['count']:<6d} median {row['median_us']:.1f} us, total {row['total_ms']:.3f} ms")
    if unstamped:
        say(f"  {unstamped} operation(s) without kernel stamps")


def cmd_op_times(args):
    files = op_files(args.target)
    records, bad = read_op_lines(files)
    rows, unstamped = summarise(records)
    if args.json:
        print(json.dumps({"files": len(files), "operations": len(records), "without_stamps": unstamped,
                          "bad_lines": bad, "rows": rows}, indent=1))
        return 0
    print(f"{len(records)} NCCL operations from {len(files)} process(es) in {args.target}")
    print(f"{'kind':14s} {'bytes':>12s} {'algo':>6s} {'proto':>7s} {'ranks':>6s} {'count':>6s} "
          f"{'median us':>11s} {'p10 us':>10s} {'p90 us':>10s} {'total ms':>10s}")
    for row in rows[:args.limit] if args.limit > 0 else rows:
        print(f"{row['kind'][:14]:14s} {human_bytes(row['bytes']):>12s} {row['algo'][:6]:>6s} {row['proto'][:7]:>7s} "
              f"{row['nranks']:6d} {row['count']:6d} {row['median_us']:11.1f} {row['p10_us']:10.1f} "
              f"{row['p90_us']:10.1f} {row['total_ms']:10.3f}")
    if args.limit > 0 and len(rows) > args.limit:
        print(f"... {len(rows) - args.limit} more rows (--limit 0 prints them all)")
    if unstamped:
        print(f"{unstamped} operation(s) carried no kernel stamps (a point-to-point operation NCCL moved without "
              "its proxy thread, or a rank that ended before its kernel reported)")
    if bad:
        print(f"{bad} line(s) did not parse (a file cut short?)")
    return 0
