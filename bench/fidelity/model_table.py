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
Each row says how its truth was timed: the rows timed with CUDA events
around every operation (the bench's default until 2026-12-04) measured a
program those events changed, so the summary lines keep them apart from
the rows without (what the model is fitted to).

Usage: bench/fidelity/model_table.py [--build build] [-- PRISMD_FLAGS...]
  PRISMD_FLAGS go to both columns; in the host's they win over its own
  (e.g. `-- --step-turnaround-us 90 --nic-model interleave` tries another
  turnaround and NIC model against every truth).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truth_host  # noqa: E402

# How a truth was timed. Until 2026-12-04 (commit 03c604e) driver.py put a
# CUDA event before and after every operation of a measured iteration; those
# events change the program (docs/timing.md, "The driver's own events, and
# pooled truths": dp8 700 ms with them, 530 ms without), so their rows show
# what the bench measured then, not what the program takes. The model is
# fitted to the others.
EVENTS = "events around every op"      # the bench's default until 03c604e
COMPUTE = "events around compute only"  # OP_TIMING=compute: communication left alone
WARMUP = "warm-up, no events"           # the median of the warm-up iterations (1 and 2) of five truths
# (spec, truth's mean iteration in ms, where and when the truth was taken, how it was timed)
TWO_GPUS = "2 H200, 32 cores, 2026-12-01"  # docs/timing.md "Truths with cores to spare"
ONE_GPU = "1 H200, 16 cores"               # 16 MPS clients on one GPU
TRUTHS = [
    ("step-n8-2g5", 402.830, TWO_GPUS, EVENTS),
    ("step-n8-2g5-straggler", 403.753, TWO_GPUS, EVENTS),
    ("step-n16-2g5", 905.153, TWO_GPUS, EVENTS),
    ("step-n16-dp4-2g5", 484.236, TWO_GPUS, EVENTS),
    ("step-n16-dp4-2g5", 488.881, ONE_GPU + ", 2026-12-01", EVENTS),  # docs/timing.md "Tree window"
    ("step-n16-tp4-2g5", 457.106, ONE_GPU + ", 2026-12-02", EVENTS),
    ("step-n16-dp8-2g5", 701.217, ONE_GPU + ", 2026-12-02", EVENTS),
    ("step-n16-pp4-2g5", 273.237, ONE_GPU + ", 2026-12-02", EVENTS),
    ("step-n16-pp4-2g5-slow", 282.874, ONE_GPU + ", 2026-12-02", EVENTS),
    # Real peers over Unix sockets (docs/timing.md "Three layouts"): the same
    # layouts again, truths of 2026-12-04 00:37-00:41 and 02:50 UTC.
    ("step-n16-tp4-2g5", 446.919, ONE_GPU + ", 2026-12-04", EVENTS),
    ("step-n16-tp4-2g5", 452.180, ONE_GPU + ", 2026-12-04", EVENTS),
    ("step-n16-dp8-2g5", 697.269, ONE_GPU + ", 2026-12-04", EVENTS),
    ("step-n16-dp8-2g5", 698.034, ONE_GPU + ", 2026-12-04", EVENTS),
    ("step-n16-pp4-2g5", 273.444, ONE_GPU + ", 2026-12-04", EVENTS),
    ("step-n16-pp4-2g5-slow", 281.280, ONE_GPU + ", 2026-12-04", EVENTS),
    # Without events around communication (docs/timing.md "The driver's own
    # events, and pooled truths", runs ended 19:14-19:41 UTC 2026-12-04).
    ("step-n16-dp8-2g5", 529.9, ONE_GPU + ", 2026-12-04", COMPUTE),
    ("step-n16-dp4-2g5", 474.3, ONE_GPU + ", 2026-12-04", COMPUTE),
    ("step-n16-pp4-2g5", 274.4, ONE_GPU + ", 2026-12-04", WARMUP),
    ("step-n16-pp4-2g5-slow", 277.8, ONE_GPU + ", 2026-12-04", WARMUP),
    ("step-n16-tp4-2g5", 448.9, ONE_GPU + ", 2026-12-04", WARMUP),
    # Pools of three truths (one for dp4: two of three hung), rank 0's mean
    # (docs/timing.md "The acceptance runs on the new defaults", runs of
    # 02:06-02:27 UTC 2026-12-05); step-n8-2g5 is eight ranks on the GPU.
    ("step-n16-dp8-2g5", 529.134, ONE_GPU + ", 2026-12-05", COMPUTE),
    ("step-n16-dp4-2g5", 473.132, ONE_GPU + ", 2026-12-05", COMPUTE),
    ("step-n16-tp4-2g5", 447.611, ONE_GPU + ", 2026-12-05", COMPUTE),
    ("step-n16-pp4-2g5", 270.267, ONE_GPU + ", 2026-12-05", COMPUTE),
    ("step-n16-pp4-2g5-slow", 279.964, ONE_GPU + ", 2026-12-05", COMPUTE),
    ("step-n8-2g5", 402.775, ONE_GPU + ", 2026-12-05", COMPUTE),
]
# What a truth's host adds that a cluster does not: truth_host.py's step
# turnaround for the spec's rank count on that host (docs/network-model.md,
# "A packed host's step turnaround").
HOSTS = {TWO_GPUS: "two-h200", ONE_GPU: "one-h200"}


def host_flags(host, ranks):
    return truth_host.flags(HOSTS[ONE_GPU] if host.startswith(ONE_GPU) else HOSTS[TWO_GPUS], ranks)


def option_name(token):
    """A prismd option's name without its value or its "no-" ("--no-calibration" -> "calibration")."""
    name = token[2:].split("=", 1)[0]
    return name[3:] if name.startswith("no-") else name


def with_flags(host, user):
    """The host's flags with the user's after them, the user's winning: a host option the user gives too
    (as --X, --no-X or --X=V) is left out with its value, since prismd refuses an option given twice.
    with_flags(["--step-turnaround-us", "140", "--no-calibration"], ["--step-turnaround-us", "45"])
    == ["--no-calibration", "--step-turnaround-us", "45"]."""
    given = {option_name(t) for t in user if t.startswith("--")}
    kept, i = [], 0
    while i < len(host):
        token = host[i]
        takes_value = "=" not in token and i + 1 < len(host) and not host[i + 1].startswith("--")
        step = 2 if takes_value else 1
        if not (token.startswith("--") and option_name(token) in given):
            kept += host[i:i + step]
        i += step
    return kept + list(user)


def spec_ranks(spec_path):
    with open(spec_path) as f:
        layout = yaml.safe_load(f)["layout"]
    return layout["tp"] * layout["pp"] * layout["dp"]


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
    errors = {}  # (column, timed with events?) -> [|error| %]
    print("| spec | truth's host | timed | truth (ms) | model (ms) | error | model with the host's flags (ms) | error |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        models = {}

        def model(name, flags):
            key = (name, tuple(flags))
            if key not in models:
                models[key] = model_ms(a.build, os.path.join(specs, name + ".yaml"), flags, tmp)
            return models[key]

        for name, truth, host, timed in TRUTHS:
            m = model(name, a.flags)
            h = model(name, with_flags(host_flags(host, spec_ranks(os.path.join(specs, name + ".yaml"))), a.flags))
            e, eh = 100.0 * (m - truth) / truth, 100.0 * (h - truth) / truth
            evented = timed == EVENTS
            errors.setdefault(("defaults", evented), []).append(abs(e))
            errors.setdefault(("host", evented), []).append(abs(eh))
            print(f"| {name} | {host} | {timed} | {truth:.3f} | {m:.3f} | {e:+.2f}% | {h:.3f} | {eh:+.2f}% |")
    for evented, what in ((False, "truths without events around communication (what the model is fitted to)"),
                          (True, "truths timed with events around every op (the program perturbed)")):
        for column in ("defaults", "host"):
            v = errors.get((column, evented), [])
            if v:
                print(f"{column}, {what}: mean |error| {sum(v) / len(v):.2f}%, worst {max(v):.2f}% ({len(v)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
