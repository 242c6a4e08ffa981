#!/usr/bin/env python3
"""prism-session-capture --graph prints, per real rank, its collectives
against the model (daemon/hybrid/op_time_report.h), as prismd does at the end
of a hybrid run. On the GPU-host recording of Megatron-core at 1024 ranks,
stage-1 rank 512 (test/fixtures/hybrid/mcore-1024-r512-lazy.rec, 2026-12-02,
before the same-node link): its DP all-reduce, which NCCL ran as a tree,
added most (its first send to its end holds the wait for its virtual
members), then its 68 TP all-reduces of 2 MiB an iteration at about 155 us
each against the model's 30.5 us over NVLink.

  session_capture_op_times_test.py PRISM_GRAPHGEN PRISM_SESSION_CAPTURE"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "..", "examples", "megatron", "gpt-1024.yaml")
RECORDING = os.path.join(HERE, "fixtures", "hybrid", "mcore-1024-r512-lazy.rec")


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def main(graphgen, capture):
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "mcore-1024.graph")
        r = subprocess.run([graphgen, "job", JOB, "-o", graph], capture_output=True, text=True, timeout=300)
        expect(r.returncode == 0, f"prism-graphgen job: {r.stderr}")
        r = subprocess.run([capture, "--graph", graph, "-o", os.path.join(tmp, "out"), RECORDING],
                           capture_output=True, text=True, timeout=300)
        expect(r.returncode == 0, f"prism-session-capture: exit {r.returncode}: {r.stderr}")
        lines = [l for l in r.stdout.splitlines() if l.startswith("collectives against the model, rank 512 ")]
        expect(len(lines) == 1, f"one line for rank 512 in:\n{r.stdout}")
        expect(re.search(r"\): all-reduce \(tree\) 128\.04 MiB on 256 ranks \(64 nodes\) x1\.0: ", lines[0]) is not None,
               f"the DP all-reduce (a tree) first: {lines[0]}")
        tp = re.search(r"; all-reduce 2\.00 MiB on 2 ranks \(1 node\) x68\.0: ([0-9.]+) us against ([0-9.]+) us, "
                       r"\+([0-9.]+) ms", lines[0])
        expect(tp is not None, f"the TP all-reduces second: {lines[0]}")
        took, model, added = (float(g) for g in tp.groups())
        expect(abs(model - 30.5) < 0.5, f"the model's 2 MiB all-reduce over NVLink: {model} us")
        expect(140 < took < 170, f"the recorded median: {took} us")
        expect(abs(added - (took - model) * 68 / 1000) < 0.02, f"added per iteration: {added} ms")
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:3])
