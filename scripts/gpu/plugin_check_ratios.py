#!/usr/bin/env python3
"""Summary of one run-plugin-check.sh run: per world, every plugin run against
the Socket run of the same world (Socket time / plugin time per operation and
size: above 1 the plugin is faster), the lowest ratio, and NCCL's choice
(algorithm, protocol, channels) per operation as rank 0 logged it
(NCCL_DEBUG_SUBSYS=TUNING).

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
    ordered = sorted(round_times)
    n = len(ordered)
    if n == 0:
        raise ValueError("no rounds")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


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
        base = runs.get(f"socket-w{w}")
        if base is None:
            print(f"world {w}: no Socket run")
            continue
        ref = {(r["op"], r["bytes"]): r["time_us"] for r in base["results"]}
        for label, doc in sorted(runs.items()):
            if doc["world_size"] != w or label == base["label"]:
                continue
            print(f"\n{label} against {base['label']} (Socket us / plugin us; >1: plugin faster)")
            print(f"{'op':>15} {'bytes':>11} {'socket us':>11} {'plugin us':>11} {'ratio':>7}")
            worst = None
            for r in doc["results"]:
                key = (r["op"], r["bytes"])
                if key not in ref:
                    continue
                ratio = ref[key] / r["time_us"] if r["time_us"] > 0 else 0.0
                print(f"{r['op']:>15} {r['bytes']:>11} {ref[key]:11.1f} {r['time_us']:11.1f} {ratio:7.2f}")
                if worst is None or ratio < worst[0]:
                    worst = (ratio, r["op"], r["bytes"])
            if worst:
                print(f"{label}: lowest ratio {worst[0]:.2f} ({worst[1]} {worst[2]} B); "
                      f"failures: {len(doc['failures'])}")
        for label in sorted(l for l, d in runs.items() if d["world_size"] == w):
            picked = choices(out, label)
            if picked:
                text = "; ".join(f"{c} {b}: {v}" for (c, b), v in sorted(picked.items()))
                print(f"NCCL's choice, {label}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
