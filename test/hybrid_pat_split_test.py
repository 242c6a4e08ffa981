#!/usr/bin/env python3
"""bench/hybrid_pat_split.py on a hand-made all-gather of one real-rank op
(a stand-in for hybrid_explain prints it): two dimensions on one channel at
100 Gbit/s + 5 us. The link is idle 30 us before the send on dimension 0
that the receive on dimension 1 feeds (5 us its mirror, 3 us NCCL's test(),
22 us from NCCL seeing it to the send) and 40 us before the second send on
dimension 0 (no receive it waits for: a pause); the floor held the first
receive on dimension 0 10 us past its mirror while the link was busy.
The session's other communicator (b0b0) has an all-gather of the same seq,
and the op's own has a second schedule: the op's is the first of its own
communicator's (before 2026-12-03 the last of that kind and seq was taken,
any communicator's: the check for an earlier one compared text with numbers).

  hybrid_pat_split_test.py (no arguments)"""
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT = os.path.join(HERE, "..", "bench", "hybrid_pat_split.py")

# What hybrid_explain prints (columns as bench/hybrid_explain.cc says).
# Connections: 11 sends on dimension 1 (fewer bytes), 12 sends on dimension 0,
# 13 receives on dimension 1, 14 receives on dimension 0; all channel 0.
RECORDING = """\
conn\t1\t11\t1\t0.0
conn\t1\t12\t1\t0.0
conn\t1\t13\t0\t0.0
conn\t1\t14\t0\t0.0
sched\t1\t150.0\t2\t0\t-1\t1\t90.0\ta1a1
sched\t1\t160.0\t2\t0\t-1\t1\t155.0\tb0b0
sched\t1\t170.0\t2\t0\t-1\t1\t95.0\ta1a1
msg\t1\tposted\t13\t0\t125000\t50.0\t1\t0\t0\t0\t0
msg\t1\tposted\t14\t0\t250000\t60.0\t1\t0\t0\t0\t0
msg\t1\tposted\t14\t1\t250000\t61.0\t1\t0\t1\t0\t0
msg\t1\tposted\t11\t0\t125000\t100.0\t1\t0\t0\t0\t0
msg\t1\tcompleted\t11\t0\t125000\t110.0\t1\t0\t0\t0.0\t0
msg\t1\tcompleted\t13\t0\t125000\t115.0\t1\t0\t0\t3.0\t1
msg\t1\tposted\t12\t0\t250000\t140.0\t1\t0\t0\t0\t0
msg\t1\tcompleted\t12\t0\t250000\t160.0\t1\t0\t0\t0.0\t0
msg\t1\tcompleted\t14\t0\t250000\t175.0\t1\t0\t0\t1.0\t0
msg\t1\tposted\t12\t1\t250000\t200.0\t1\t0\t1\t0\t0
msg\t1\tcompleted\t12\t1\t250000\t220.0\t1\t0\t1\t0.0\t0
msg\t1\tcompleted\t14\t1\t250000\t225.0\t1\t0\t1\t2.0\t0
real\t1\t1\t2\t0\t-1\t8192\t0.0\t100.0\t225.0\ta1a1
"""
MODEL = "op\t0\t0\tcollective\tallgather 67108864\t0.0\t100.0\n"


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("rec.tsv", RECORDING), ("model.tsv", MODEL)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        fake = os.path.join(tmp, "explain")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\n"
                    f'case "$*" in *model:*) cat {tmp}/model.tsv ;; *) cat {tmp}/rec.tsv ;; esac\n')
        os.chmod(fake, stat.S_IRWXU)
        r = subprocess.run([sys.executable, SPLIT, "--ops", "--explain", fake, "graph", "rec", "0"],
                           capture_output=True, text=True, timeout=60)
        expect(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
        ops = [l.split("\t") for l in r.stdout.splitlines() if l.startswith("op\t")]
        expect(len(ops) == 1 and ops[0][1] == "1" and ops[0][2] == "allgather", f"one all-gather op: {r.stdout}")
        fields = ops[0][3].split("  ")
        got = {k: float(v) for k, v in (x.split(" ") for x in fields)}
        want = {"total": 125.0, "model": 100.0, "gap": 25.0, "pre": 0.0, "wire": 50.0, "idle": 70.0,
                "floor": 0.0, "mirror": 5.0, "test": 3.0, "react": 22.0, "pause": 40.0, "tail": 5.0,
                "held_n": 1.0, "held": 10.0, "sched_late": 60.0, "ready_after_first": 0.0, "pre_sched": 1.0,
                "flagged": 1.0, "first_wait": 0.0}
        for k, v in want.items():
            expect(abs(got.get(k, -1e9) - v) < 0.05, f"{k}: {got.get(k)} (want {v}); {ops[0][3]}")
        stretches = [l.split("\t") for l in r.stdout.splitlines() if l.startswith("stretch\t")]
        expect([s[5] for s in stretches] == ["d0 after d1 step 0 floor 0.0 react 22.0", "d0 pause"],
               f"stretches: {stretches}")
        expect(any(l.startswith("kind\tallgather\t1\t") for l in r.stdout.splitlines()), "a kind line")
    print("ok")


if __name__ == "__main__":
    main()
