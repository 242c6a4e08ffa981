#!/usr/bin/env python3
"""Summary of one run-plugin-check.sh run: per world, every plugin run against
the Socket run of the same world (Socket time / plugin time per operation and
size: above 1 the plugin is faster), the lowest ratio, and NCCL's choice
(algorithm, protocol, channels) per operation as rank 0 logged it
(NCCL_DEBUG_SUBSYS=TUNING).

With several passes (labels ending in -p<k>, PRISM_CHECK_PASSES), each
pass's plugin runs are compared with that pass's Socket run, then per variant
and operation the median of the passes' ratios and their range.

Usage: plugin_check_ratios.py OUT_DIR   (reads OUT_DIR/<label>.json and
OUT_DIR/<label>/rank0.log as run-plugin-check.sh writes them)
"""
import collections
import glob
import json
import os
import re
import sys

def steady_time(round_times):
    """An operation's time from its timed rounds (each the slowest rank's mean
    per iteration): the median, so that a stall in one round (a thread that
    lost its core for milliseconds) does not decide a ratio."""
    if not round_times:
        raise ValueError("no rounds")
    return median(round_times)


LABEL = re.compile(r"^(?P<variant>.+)-w(?P<world>\d+)(?:-p(?P<npass>\d+))?$")


def split_label(label):
    """(variant, pass) of a run label: 'prism-w8' -> ('prism', None), 'prism-w8-p2' -> ('prism', 2)."""
    m = LABEL.match(label)
    if not m:
        return label, None
    return m.group("variant"), int(m.group("npass")) if m.group("npass") else None


def median(values):
    """The middle value (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def pooled(ratios_by_variant):
    """{variant: {(op, bytes): [ratio per pass]}} -> lines: per variant and
    operation the median ratio and its range over the passes, then the
    variant's lowest median."""
    lines = []
    for variant, per_op in sorted(ratios_by_variant.items()):
        passes = max(len(v) for v in per_op.values())
        lines.append(f"\n{variant} against Socket over {passes} passes (median of the passes' ratios, lowest..highest)")
        lines.append(f"{'op':>15} {'bytes':>11} {'median':>7} {'range':>13}")
        worst = None
        for (op, nbytes), values in per_op.items():
            mid = median(values)
            lines.append(f"{op:>15} {nbytes:>11} {mid:7.2f} {min(values):6.2f}..{max(values):.2f}")
            if worst is None or mid < worst[0]:
                worst = (mid, op, nbytes)
        lines.append(f"{variant}: lowest median ratio {worst[0]:.2f} ({worst[1]} {worst[2]} B) over {passes} passes")
    return lines


TUNING = re.compile(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")


def load(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        runs[doc["label"]] = doc
    return runs


def choices(out, label):
    """{(collective, bytes): 'ALGO/PROTO chLo..Hi'} from rank 0's log (most frequent)."""
    seen = collections.defaultdict(collections.Counter)
    path = os.path.join(out, label, "rank0.log")
    if not os.path.exists(path):
        return {}
    with open(path, errors="replace") as f:
        for line in f:
            m = TUNING.search(line)
            if m:
                coll, nbytes, algo, proto, lo, hi = m.groups()
                seen[(coll, int(nbytes))][f"{algo}/{proto} ch{lo}..{hi}"] += 1
    return {k: c.most_common(1)[0][0] for k, c in seen.items()}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    runs = load(out)
    worlds = sorted({d["world_size"] for d in runs.values()})
    for w in worlds:
        ratios_by_variant = collections.defaultdict(lambda: collections.defaultdict(list))
        npasses = sorted({split_label(l)[1] for l, d in runs.items() if d["world_size"] == w},
                         key=lambda p: p or 0)
        for npass in npasses:
            base_label = f"socket-w{w}" + (f"-p{npass}" if npass else "")
            if base_label not in runs:
                print(f"world {w}: no Socket run {base_label}")
                continue
            compare_pass(runs, w, npass, runs[base_label], ratios_by_variant)
        if len(npasses) > 1 or (npasses and npasses[0]):
            print("\n".join(pooled(ratios_by_variant)))
        for label in sorted(l for l, d in runs.items() if d["world_size"] == w):
            picked = choices(out, label)
            if picked:
                text = "; ".join(f"{c} {b}: {v}" for (c, b), v in sorted(picked.items()))
                print(f"NCCL's choice, {label}: {text}")
    return 0


def compare_pass(runs, w, npass, base, ratios_by_variant):
    """Prints every plugin run of world `w` and pass `npass` against `base`
    (that pass's Socket run) and adds its ratios to `ratios_by_variant`."""
    ref = {(r["op"], r["bytes"]): r["time_us"] for r in base["results"]}
    for label, doc in sorted(runs.items()):
        variant, p = split_label(label)
        if doc["world_size"] != w or p != npass or variant == "socket":
            continue
        print(f"\n{label} against {base['label']} (Socket us / plugin us; >1: plugin faster)")
        print(f"{'op':>15} {'bytes':>11} {'socket us':>11} {'plugin us':>11} {'ratio':>7}")
        worst = None
        for r in doc["results"]:
            key = (r["op"], r["bytes"])
            if key not in ref:
                continue
            ratio = ref[key] / r["time_us"] if r["time_us"] > 0 else 0.0
            ratios_by_variant[variant][key].append(ratio)
            print(f"{r['op']:>15} {r['bytes']:>11} {ref[key]:11.1f} {r['time_us']:11.1f} {ratio:7.2f}")
            if worst is None or ratio < worst[0]:
                worst = (ratio, r["op"], r["bytes"])
        if worst:
            print(f"{label}: lowest ratio {worst[0]:.2f} ({worst[1]} {worst[2]} B); "
                  f"failures: {len(doc['failures'])}")


if __name__ == "__main__":
    sys.exit(main())
