#!/usr/bin/env python3
"""What 131,072 ranks cost against 8192 ranks of the same job, measured side
by side in one run: prism-graphgen (YAML to graph file) and prismd --simulate
(load, classes, replay) of examples/llama3-405b-131072.yaml and of the same
job at world 8192 (DP64, global batch 1024: the same 16 microbatches per
iteration, the same 16 programs).

Usage: scale_bench.py BUILD_DIR [--rounds N] [--workdir DIR]
Rounds alternate the two sizes; prints each step's median wall seconds and
the ratio 131072 / 8192 of graphgen, simulate and their sum."""
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
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"scale_bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return took


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
    for _ in range(max(1, args.rounds)):
        for size, yaml in jobs.items():
            graph = os.path.join(work, f"{size}.pb")
            times[size]["graphgen"].append(timed([graphgen, "job", yaml, "-o", graph]))
            times[size]["simulate"].append(timed([prismd, "--graph", graph, "--simulate"]))
    med = {size: {step: statistics.median(v) for step, v in steps.items()} for size, steps in times.items()}
    for size in jobs:
        m = med[size]
        print(f"{size:>6} ranks: graphgen {m['graphgen']:.3f} s, simulate {m['simulate']:.3f} s, "
              f"sum {m['graphgen'] + m['simulate']:.3f} s (medians of {args.rounds})")
    for step in ("graphgen", "simulate"):
        print(f"ratio 131072/8192 {step}: {med['131072'][step] / med['8192'][step]:.2f}")
    total = {size: med[size]["graphgen"] + med[size]["simulate"] for size in jobs}
    print(f"ratio 131072/8192 graphgen + simulate: {total['131072'] / total['8192']:.2f}")


if __name__ == "__main__":
    main()
