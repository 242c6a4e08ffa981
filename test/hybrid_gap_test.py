#!/usr/bin/env python3
"""bench/hybrid_gap.py on the step-n8 fixture (test/fixtures/hybrid/step-n8.yaml,
its graph made with prism-graphgen fidelity): a model recording of rank 0
(`model:0`, the real rank exactly as --simulate plays it) has no gap, op kind
by op kind; the recorded hybrid run of rank 0 (step-n8-hybrid1-causal.rec)
has its replay's gap over the model (+1.021 ms of 129.487 ms per iteration,
28 iterations after the first), each stream's shares add up to its
last op's gap, and with its line "after its last op" to the iteration's gap
(hybrid_gap printed no such line until 2026-12-03: at 8192 ranks a real
rank's shares then added up to -126.5 ms of a +14.8 ms gap), and the
pipeline receive from the virtual stage is the op that adds most. Then
bench/hybrid_segments.py on the same: the model's segments equal the
model's, and the recording's segment gaps add up to its iteration's gap.
hybrid_explain's real, sched and fsched lines end with the operation's
communicator (its commHash): one session carries all the real rank's
communicators, and NCCL numbers each one's calls from 0, so kind and seq
alone name several operations (TorchTitan FSDP2+TP's rank 5: its TP and
FSDP all-gathers); before 2026-12-03 the lines did not say which.

  hybrid_gap_test.py PRISM_GRAPHGEN HYBRID_EXPLAIN"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "hybrid")
GAP = os.path.join(HERE, "..", "bench", "hybrid_gap.py")
SEGMENTS = os.path.join(HERE, "..", "bench", "hybrid_segments.py")


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def gap(graphgen, explain, graph, source):
    r = subprocess.run([sys.executable, GAP, "--explain", explain, "--graphgen", graphgen, graph, source, "0"],
                       capture_output=True, text=True, timeout=300)
    expect(r.returncode == 0, f"hybrid_gap.py {source}: exit {r.returncode}: {r.stderr}")
    return r.stdout.splitlines()


def main(graphgen, explain):
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "step-n8.graph")
        subprocess.run([graphgen, "fidelity", os.path.join(FIX, "step-n8.yaml"), "-o", graph], check=True,
                       capture_output=True)
        model = gap(graphgen, explain, graph, "model:0")
        expect(model[0].endswith("gap 0.000 ms (+0.00%)"), f"the model against itself: {model[0]!r}")
        shares = [l for l in model if l.startswith("stream ") and " ends " not in l and "after its last op" not in l]
        expect(len(shares) >= 4, f"op kinds of rank 0: {shares}")
        expect(all(re.search(r"  [+-]0\.000  \([+-]0\.000\)$", l) for l in shares), f"no share: {shares}")

        hybrid = gap(graphgen, explain, graph, os.path.join(FIX, "step-n8-hybrid1-causal.rec"))
        expect(hybrid[0] == "iterations 28  hybrid 130.508 ms  model 129.487 ms  gap 1.021 ms (+0.79%)",
               f"the recorded run: {hybrid[0]!r}")
        kinds = {l.split("  ")[1] for l in hybrid if l.startswith("stream ") and " ends " not in l}
        expect({"allreduce tp[0] 2097152 B", "send pp[0] peer 4", "recv pp[0] peer 4"} <= kinds, f"kinds: {kinds}")
        it_gap = float(hybrid[0].split("gap ")[1].split()[0])
        for stream in ("0", "1"):
            lines = [l for l in hybrid if l.startswith(f"stream {stream}  ")]
            shares = [float(l.split("  ")[3]) for l in lines if "after its last op" not in l]
            after = [float(l.split("  ")[3]) for l in lines if "after its last op" in l]
            end = [float(l.split()[-1]) for l in hybrid if l.startswith(f"stream {stream} ends ")]
            expect(len(end) == 1 and abs(sum(shares) - end[0]) < 0.005,
                   f"stream {stream}: its shares {shares} add up to its last op's gap {end}")
            expect(len(after) == 1 and abs(sum(shares) + after[0] - it_gap) < 0.005,
                   f"stream {stream}: its shares {shares} and after its last op {after} add up to {it_gap}")
        out = subprocess.run([explain, graph, os.path.join(FIX, "step-n8-hybrid1-causal.rec"), "0"],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        keyed = [l.split("\t") for l in out.splitlines() if l.split("\t")[0] in ("real", "sched", "fsched")]
        expect(keyed and all(re.fullmatch(r"[0-9a-f]+", f[-1]) and len(f) == {"real": 11, "sched": 9, "fsched": 12}[f[0]] for f in keyed),
               f"real/sched/fsched lines end with the communicator: {keyed[:2]}")
        real = [f for f in keyed if f[0] == "real"]
        comms = {f[-1] for f in real}
        expect(len(comms) >= 2, f"rank 0's communicators: {comms}")
        expect(len({(f[3], f[4], f[5], f[-1]) for f in real}) == len(real),
               "kind, seq, peer and communicator name one operation")
        top = [l for l in hybrid if l.startswith("top ")]
        expect(top and "recv pp[0] peer 4" in top[0], f"the op that adds most: {top[:1]}")

        for source, total in (("model:0", "gap 0.000 ms"), (os.path.join(FIX, "step-n8-hybrid1-causal.rec"),
                                                            "gap 1.021 ms")):
            r = subprocess.run([sys.executable, SEGMENTS, "--explain", explain, graph, source, "0", "1,2,3"],
                               capture_output=True, text=True, timeout=300)
            expect(r.returncode == 0, f"hybrid_segments.py {source}: exit {r.returncode}: {r.stderr}")
            out = r.stdout.splitlines()
            expect(total in out[0], f"hybrid_segments.py {source}: {out[0]!r}")
            gaps = [float(l.split("gap ")[1]) for l in out[1:]]
            expect(len(gaps) == 4 and abs(sum(gaps) - float(total.split()[1])) < 0.005,
                   f"hybrid_segments.py {source}: segments {gaps} add up to {total}")
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
