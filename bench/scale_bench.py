#!/usr/bin/env python3
"""What 131,072 ranks cost against 8192 ranks of the same job, measured side
by side in one run: prism-graphgen (YAML to graph file) and prismd --simulate
(load, classes, replay) of examples/llama3-405b-131072.yaml and of the same
job at world 8192 (DP64, global batch 1024: the same 16 microbatches per
iteration, the same 16 programs).

Usage: scale_bench.py BUILD_DIR [--rounds N] [--workdir DIR]
Rounds alternate the two sizes; prints each step's median CPU seconds (user
plus system: the build host is shared) beside its median wall seconds, and
the ratios 131072 / 8192 of graphgen, simulate and their sum (CPU)."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIG = os.path.join(HERE, "..", "examples", "llama3-405b-131072.yaml")


def small_yaml(text):
    """The 131072-rank job's YAML at world 8192 with the same microbatches."""
    out = text.replace("world: 131072", "world: 8192").replace("global_batch: 16384", "global_batch: 1024")
    out = out.replace("name: llama3-405b-131072", "name: llama3-405b-8192")
    if out == text or "world: 8192" not in out or "global_batch: 1024" not in out:
        sys.exit("scale_bench: the example's world or global_batch line changed; update scale_bench.py")
    return out


def timed(cmd):
    """The command's CPU seconds (user + system, its own accounting: the
    build host is shared, and wall time would count the other processes)
    and its wall seconds."""
    start = time.monotonic()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"scale_bench: {' '.join(cmd)} failed ({code}): {err.strip()[-400:]}")
    return usage.ru_utime + usage.ru_stime, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    graphgen = os.path.join(args.build, "graphgen", "prism-graphgen")
    prismd = os.path.join(args.build, "daemon", "prismd")
    work = args.workdir or tempfile.mkdtemp(prefix="scale_bench.")
    with open(BIG) as f:
        big_text = f.read()
    jobs = {"8192": os.path.join(work, "8192.yaml"), "131072": BIG}
    with open(jobs["8192"], "w") as f:
        f.write(small_yaml(big_text))
    times = {size: {"graphgen": [], "simulate": []} for size in jobs}
    walls = {size: {"graphgen": [], "simulate": []} for size in jobs}
    for _ in range(max(1, args.rounds)):
        for size, yaml in jobs.items():
            graph = os.path.join(work, f"{size}.pb")
            for step, cmd in (("graphgen", [graphgen, "job", yaml, "-o", graph]),
                              ("simulate", [prismd, "--graph", graph, "--simulate"])):
                cpu, wall = timed(cmd)
                times[size][step].append(cpu)
                walls[size][step].append(wall)
    med = {size: {step: statistics.median(v) for step, v in steps.items()} for size, steps in times.items()}
    for size in jobs:
        m = med[size]
        w = {step: statistics.median(v) for step, v in walls[size].items()}
        print(f"{size:>6} ranks, CPU seconds: graphgen {m['graphgen']:.3f}, simulate {m['simulate']:.3f}, "
              f"sum {m['graphgen'] + m['simulate']:.3f} (medians of {args.rounds}; wall {w['graphgen']:.3f}, "
              f"{w['simulate']:.3f})")
    for step in ("graphgen", "simulate"):
        print(f"ratio 131072/8192 {step}: {med['131072'][step] / med['8192'][step]:.2f}")
    total = {size: med[size]["graphgen"] + med[size]["simulate"] for size in jobs}
    print(f"ratio 131072/8192 graphgen + simulate: {total['131072'] / total['8192']:.2f}")


if __name__ == "__main__":
    main()
