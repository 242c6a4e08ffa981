#!/usr/bin/env python3
"""Where a packed ground truth's CPU goes, by thread name.

Samples /proc/PID/task/TID/stat of every process whose command line contains
PATTERN, every INTERVAL seconds, until it gets SIGTERM or SIGINT; then writes
one line per thread name (NCCL's proxy threads, the plugin's progress
threads, PyTorch's, ...) with the CPU seconds all those threads used between
their first and last sample, the share of one core that is over the sampled
wall time, and how many threads had that name. A thread seen once adds
nothing (no interval to measure).

Usage: thread_cpu.py PATTERN OUT [INTERVAL]   (run-gpu.sh: THREAD_CPU=1)
"""
import os
import signal
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def matching_pids(pattern, me):
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if pattern.encode() in f.read():
                    yield int(entry)
        except OSError:
            pass


def thread_times(pid):
    """{tid: (name, cpu ticks)} of one process; empty if it is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The name sits in parentheses and may itself hold spaces or ')'.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[(pid, int(tid))] = (name, int(fields[11]) + int(fields[12]))  # utime + stime
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pattern, out_path = sys.argv[1], sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    first, last = {}, {}
    t_first = t_last = None
    while not stop:
        now = time.monotonic()
        for pid in matching_pids(pattern, os.getpid()):
            for key, value in thread_times(pid).items():
                first.setdefault(key, value)
                last[key] = value
                t_first = t_first if t_first is not None else now
                t_last = now
        time.sleep(interval)
    by_name = {}
    for key, (name, ticks) in last.items():
        used = (ticks - first[key][1]) / TICKS
        total, count = by_name.get(name, (0.0, 0))
        by_name[name] = (total + used, count + 1)
    wall = (t_last - t_first) if t_first is not None else 0.0
    with open(out_path, "w") as f:
        f.write(f"# CPU by thread name over {wall:.1f} s sampled; cores = CPU s / wall s\n")
        f.write("cpu_s\tcores\tthreads\tname\n")
        for name, (used, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0]):
            cores = used / wall if wall > 0 else 0.0
            f.write(f"{used:.2f}\t{cores:.2f}\t{count}\t{name}\n")
        total = sum(u for u, _ in by_name.values())
        f.write(f"{total:.2f}\t{total / wall if wall > 0 else 0.0:.2f}\t{len(last)}\tall\n")


if __name__ == "__main__":
    main()
