#!/usr/bin/env python3
"""The model against the step layouts' ground truths: one row per spec.

Runs `prism-graphgen fidelity SPEC -o G; prismd --graph G --simulate --json
--metrics-address none [FLAGS]` for every spec whose truth's mean is known and
prints the model's iteration and its error against that mean. The truths ran
on the GPU hosts (2.5 Gbit/s links shaped by the plugin, ranks as MPS
clients; one H200 and 16 cores, or two H200s and 32 cores, as the table
says); their figures come from docs/timing.md "Measured" and
docs/network-model.md "Launch order", their raw results are not kept.

Usage: bench/fidelity/model_table.py [--build build] [-- PRISMD_FLAGS...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (spec, truth's mean iteration in ms, where and when the truth was taken)
TWO_GPUS = "2 H200, 32 cores, 2026-12-01"  # docs/timing.md "Truths with cores to spare"
ONE_GPU = "1 H200, 16 cores"               # 16 MPS clients on one GPU
TRUTHS = [
    ("step-n8-2g5", 402.830, TWO_GPUS),
    ("step-n8-2g5-straggler", 403.753, TWO_GPUS),
    ("step-n16-2g5", 905.153, TWO_GPUS),
    ("step-n16-dp4-2g5", 484.236, TWO_GPUS),
    ("step-n16-dp4-2g5", 488.881, ONE_GPU + ", 2026-12-01"),  # docs/timing.md "Tree window"
    ("step-n16-tp4-2g5", 457.106, ONE_GPU + ", 2026-12-02"),
    ("step-n16-dp8-2g5", 701.217, ONE_GPU + ", 2026-12-02"),
    ("step-n16-pp4-2g5", 273.237, ONE_GPU + ", 2026-12-02"),
    ("step-n16-pp4-2g5-slow", 282.874, ONE_GPU + ", 2026-12-02"),
]


def model_ms(build, spec_path, flags, tmp):
    graph = os.path.join(tmp, os.path.basename(spec_path) + ".pb")
    subprocess.run([os.path.join(build, "graphgen", "prism-graphgen"), "fidelity", spec_path, "-o", graph],
                   check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(build, "daemon", "prismd"), "--graph", graph, "--simulate", "--json",
                          "--metrics-address", "none"] + flags, check=True, capture_output=True, text=True).stdout
    return 1e3 * json.loads(out)["iteration_time_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("flags", nargs="*", help="extra prismd flags (after --)")
    a = ap.parse_args()
    specs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs")
    worst = 0.0
    total = 0.0
    print("| spec | truth's host | truth (ms) | model (ms) | error |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name, truth, host in TRUTHS:
            if name not in models:
                models[name] = model_ms(a.build, os.path.join(specs, name + ".yaml"), a.flags, tmp)
            m = models[name]
            err = 100.0 * (m - truth) / truth
            worst = max(worst, abs(err))
            total += abs(err)
            print(f"| {name} | {host} | {truth:.3f} | {m:.3f} | {err:+.2f}% |")
    print(f"mean |error| {total / len(TRUTHS):.2f}%, worst {worst:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
