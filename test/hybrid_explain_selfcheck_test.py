#!/usr/bin/env python3
"""hybrid_explain's self-check on TorchTitan FSDP2+TP at 1024 ranks
(test/fixtures/capture/titan-1024-fsdp-tp/): `hybrid_explain --ring-only
--step-cost-us C GRAPH model:0 0` (rank 0 real, exactly as --simulate plays
it) must replay to `prismd --simulate --nccl-algo Ring --step-cost-us C`'s
iteration time. Before 2026-12-03 the replay's engine played the virtual
ranks with NCCL's tree and PAT and no step cost (only the model:0 recording
had the options): its iterations came out 502-580 ms against 490.05 ms.

The same on the fidelity bench's own step graphs (bench/fidelity/specs),
with prismd's flags as the bench passes them: until 2026-12-04
hybrid_explain played sends non-eager while prismd's default is eager, and
its model:0 replay of step-n16-pp4-2g5 came out at 273.1 ms an iteration
against --simulate's 264.3 (the slow-rank spec 291.1 against 272.3, dp8
531.8 against 525.1).

  hybrid_explain_selfcheck_test.py PRISM_GRAPHGEN PRISMD HYBRID_EXPLAIN"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "capture", "titan-1024-fsdp-tp")
STEP_COST_US = "9.272"  # the recording's own figure


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    expect(r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-600:]}")
    return r.stdout


def main(graphgen, prismd, explain):
    with tempfile.TemporaryDirectory() as tmp:
        world = os.path.join(tmp, "world.graph")
        graph = os.path.join(tmp, "refine-2.graph")
        run([graphgen, "collective", "--op", "allreduce", "--bytes", "1K", "--ranks", "1024", "--gpus-per-node", "1",
             "--nic-gbps", "10", "--nic-latency-us", "10", "--name", "world", "-o", world])
        run([graphgen, "extrapolate", os.path.join(FIX, "refine-2-rank-0.capture.jsonl"), "--cluster", world,
             "--name", "role-0", "-o", graph])
        sim = json.loads(run([prismd, "--graph", graph, "--simulate", "--iterations", "3", "--json",
                              "--metrics-address", "none", "--nccl-algo", "Ring", "--step-cost-us", STEP_COST_US]))
        t = sim["iteration_times_s"][1] * 1e6  # us
        expect(abs(t - 490051.2) < 1.0, f"--simulate of round 2's graph: {t} us (the GPU host's figure: 0.4901 s)")
        out = run([explain, "--iterations", "3", "--ring-only", "--step-cost-us", STEP_COST_US, graph, "model:0", "0"])
        ends = [float(l.split("\t")[2]) for l in out.splitlines() if l.startswith("iteration\t")]
        expect(len(ends) == 3, f"3 iterations replayed: {ends}")
        periods = [b - a for a, b in zip([0.0] + ends, ends)]
        expect(all(abs(p - t) < 1.0 for p in periods),
               f"model:0's replay, iteration by iteration (us): {periods} against --simulate's {t}")
        starts = [float(l.split("\t")[5]) for l in out.splitlines() if l.startswith("op\t0\t0\t")]
        expect(len(starts) == 3 and all(abs(b - a - t) < 1.0 for a, b in zip(starts, starts[1:])),
               f"rank 0's first op every {t} us: {starts}")
    fidelity_specs(graphgen, prismd, explain)
    print("ok")


SPECS = os.path.join(HERE, "..", "bench", "fidelity", "specs")


def fidelity_specs(graphgen, prismd, explain):
    """model:R replays of the bench's step graphs against --simulate, with
    the bench's collective turnaround, ring only and under NCCL's choice."""
    cases = [("step-n16-pp4-2g5", "0", ["--ring-only"]), ("step-n16-pp4-2g5-slow", "0,4", ["--ring-only"]),
             ("step-n16-dp8-2g5", "0,8", ["--ring-only"]), ("step-n16-tp4-2g5", "0", [])]
    with tempfile.TemporaryDirectory() as tmp:
        for name, reals, algo in cases:
            graph = os.path.join(tmp, name + ".graph")
            run([graphgen, "fidelity", os.path.join(SPECS, name + ".yaml"), "-o", graph])
            sim_flags = ["--nccl-algo", "Ring"] if algo else []
            sim = json.loads(run([prismd, "--graph", graph, "--simulate", "--iterations", "3", "--json",
                                  "--metrics-address", "none", "--step-cost-us", "0",
                                  "--collective-turnaround-us", "450"] + sim_flags))
            t = sim["iteration_times_s"][-1] * 1e6
            out = run([explain, "--iterations", "3", "--step-cost-us", "0", "--collective-turnaround-us", "450"]
                      + algo + [graph, "model:" + reals, "0"])
            ends = [float(l.split("\t")[2]) for l in out.splitlines() if l.startswith("iteration\t")]
            periods = [b - a for a, b in zip([0.0] + ends, ends)]
            expect(len(periods) >= 2 and all(abs(p - t) < 1.0 for p in periods),
                   f"{name}, model:{reals} replayed (us per iteration): {periods} against --simulate's {t}")


if __name__ == "__main__":
    if len(sys.argv) == 4:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
