#!/usr/bin/env python3
"""prism-session-capture --slim (docs/reference.md) on the GPU-host follow
capture of train_gpt.py at 1024 ranks (test/fixtures/capture/train-gpt-1024-follow/,
itself slimmed): slimming it again keeps every line and writes the same bytes;
the slimmed copy captures the same recordings, byte for byte; an existing
output file, a recording of a run with a graph and -o next to --slim are
refused with their reason and exit status. --ops-only (what a replay reads:
communicators, schedules, the operations' events; no per-message event) takes
a run with a graph (test/fixtures/hybrid/step-n8-hybrid1-causal.rec, which has
no per-message event) and keeps it byte for byte.

  session_capture_slim_test.py PRISM_SESSION_CAPTURE"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "capture", "train-gpt-1024-follow")
NOT_FOLLOW = os.path.join(HERE, "fixtures", "hybrid", "step-smoke-hybrid1.rec")
GRAPH_RUN = os.path.join(HERE, "fixtures", "hybrid", "step-n8-hybrid1-causal.rec")


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def main(tool):
    rec = os.path.join(FIXTURE, "sessions.rec")
    with tempfile.TemporaryDirectory() as tmp:
        slim = os.path.join(tmp, "slim.rec")
        r = run(tool, rec, "--slim", slim)
        expect(r.returncode == 0, f"--slim of the fixture: exit {r.returncode}: {r.stderr}")
        lines = sum(1 for _ in open(rec)) - 1  # less the header
        expect(f"{lines} of {lines} lines" in r.stdout, f"every line kept: {r.stdout!r}")
        expect(open(slim, "rb").read() == open(rec, "rb").read(), "slimming a slim recording changes nothing")

        outs = []
        for source, name in ((rec, "a"), (slim, "b")):
            out = os.path.join(tmp, name)
            r = run(tool, source, "-o", out, "--torch-trace", os.path.join(FIXTURE, "torch"))
            expect(r.returncode == 0, f"capture of {source}: exit {r.returncode}: {r.stderr}")
            outs.append(out)
        for f in ("rank-0.capture.jsonl", "rank-512.capture.jsonl"):
            a, b = (open(os.path.join(o, f), "rb").read() for o in outs)
            expect(a == b, f"{f}: the slimmed recording captures the same")

        r = run(tool, rec, "--slim", slim)
        expect(r.returncode == 1 and "already exists" in r.stderr, f"existing output: {r.returncode} {r.stderr!r}")
        r = run(tool, NOT_FOLLOW, "--slim", os.path.join(tmp, "x.rec"))
        expect(r.returncode == 2 and "not of a prismd --follow run" in r.stderr,
               f"a run with a graph: {r.returncode} {r.stderr!r}")
        expect(not os.path.exists(os.path.join(tmp, "x.rec")), "nothing written for a refused recording")
        ops = os.path.join(tmp, "ops.rec")
        r = run(tool, GRAPH_RUN, "--ops-only", ops)
        whole = sum(1 for _ in open(GRAPH_RUN)) - 1
        expect(r.returncode == 0 and f"{whole} of {whole} lines" in r.stdout,
               f"--ops-only of a run with a graph: {r.returncode} {r.stdout!r} {r.stderr!r}")
        expect(open(ops, "rb").read() == open(GRAPH_RUN, "rb").read(),
               "a fixture without per-message events is kept byte for byte")
        r = run(tool, GRAPH_RUN, "--ops-only", os.path.join(tmp, "z.rec"), "-o", os.path.join(tmp, "d"))
        expect(r.returncode == 2 and "leave out" in r.stderr, f"-o with --ops-only: {r.returncode} {r.stderr!r}")
        r = run(tool, rec, "--slim", os.path.join(tmp, "y.rec"), "-o", os.path.join(tmp, "c"))
        expect(r.returncode == 2 and "leave out -o" in r.stderr, f"-o with --slim: {r.returncode} {r.stderr!r}")
    print("ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
