#!/usr/bin/env python3
"""The model against the step layouts' ground truths: one row per spec.

Runs `prism-graphgen fidelity SPEC -o G; prismd --graph G --simulate --json
--metrics-address none [FLAGS]` for every spec whose truth's mean is known and
prints the model's iteration and its error against that mean, with prismd's
defaults and with the flags of the truth's host (HOST_FLAGS). The truths ran
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
    # Real peers over Unix sockets (docs/timing.md "Three layouts"): the same
    # layouts again, truths of 2026-12-04 00:37-00:41 and 02:50 UTC.
    ("step-n16-tp4-2g5", 446.919, ONE_GPU + ", 2026-12-04"),
    ("step-n16-tp4-2g5", 452.180, ONE_GPU + ", 2026-12-04"),
    ("step-n16-dp8-2g5", 697.269, ONE_GPU + ", 2026-12-04"),
    ("step-n16-dp8-2g5", 698.034, ONE_GPU + ", 2026-12-04"),
    ("step-n16-pp4-2g5", 273.444, ONE_GPU + ", 2026-12-04"),
    ("step-n16-pp4-2g5-slow", 281.280, ONE_GPU + ", 2026-12-04"),
]
# What a truth's host adds that a cluster does not (docs/network-model.md,
# "A packed host's step turnaround"): prismd flags for the "host" column.
# 450 us once per ring collective fits the one-GPU truths, tp4's rings of four
# among them, where 225 us per step (--step-turnaround-us 225) over-charged
# the short rings.
HOST_FLAGS = {TWO_GPUS: [], ONE_GPU: ["--collective-turnaround-us", "450"]}


def host_flags(host):
    return HOST_FLAGS[ONE_GPU] if host.startswith(ONE_GPU) else HOST_FLAGS[TWO_GPUS]


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
    cols = {"defaults": [], "host": []}
    print("| spec | truth's host | truth (ms) | model (ms) | error | model with the host's flags (ms) | error |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        models = {}

        def model(name, flags):
            key = (name, tuple(flags))
            if key not in models:
                models[key] = model_ms(a.build, os.path.join(specs, name + ".yaml"), flags, tmp)
            return models[key]

        for name, truth, host in TRUTHS:
            m = model(name, a.flags)
            h = model(name, a.flags + host_flags(host))
            e, eh = 100.0 * (m - truth) / truth, 100.0 * (h - truth) / truth
            cols["defaults"].append(abs(e))
            cols["host"].append(abs(eh))
            print(f"| {name} | {host} | {truth:.3f} | {m:.3f} | {e:+.2f}% | {h:.3f} | {eh:+.2f}% |")
    for k, v in cols.items():
        print(f"{k}: mean |error| {sum(v) / len(v):.2f}%, worst {max(v):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
