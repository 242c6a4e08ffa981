#!/usr/bin/env python3
"""examples/train_gpt.py runs end to end on the CPU (gloo), 8 ranks, TP2 PP2
DP2 and TP1 PP4 GPipe, and every rank's first iteration issues exactly the
communication train_gpt_plan.rank_ops() lists (the script's own check).

Needs a Python with torch (any version >= 1.13; Debian's python3-torch will
do); without one the test is skipped (exit 77), as on CI, where torch is not
installed. The GPU run (scripts/gpu/run-train-gpt.sh) makes the same check
with NCCL.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "examples", "train_gpt.py")
SMALL = ["--layers", "4", "--hidden", "64", "--heads", "4", "--ffn-hidden", "256", "--seq-len", "32",
         "--vocab", "500", "--iterations", "2"]
SKIP = 77


def python_with_torch():
    for exe in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if exe and subprocess.run([exe, "-c", "import torch"], capture_output=True).returncode == 0:
            return exe
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_job(python, world, extra, tmp):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        out = open(os.path.join(tmp, f"rank{rank}.log"), "w")
        procs.append((subprocess.Popen([python, SCRIPT, "--cpu", *SMALL, *extra], env=env, stdout=out,
                                       stderr=subprocess.STDOUT), out))
    return procs


def wait_job(procs, timeout_s):
    """Waits for every rank; the first failure (or the deadline) stops the
    others at once, so a rank stuck on a dead peer never holds the test."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        codes = [p.poll() for p, _ in procs]
        if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
            break
        time.sleep(0.2)
    codes = []
    for p, out in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
            codes.append("killed (another rank failed, or the deadline passed)")
        else:
            codes.append(p.returncode)
        out.close()
    return codes


def run_job(python, world, extra, tmp, attempts=2):
    for attempt in range(attempts):
        procs = start_job(python, world, extra, tmp)
        codes = wait_job(procs, 240)
        rank0 = open(procs[0][1].name, errors="replace").read()
        # The port free_port() found may be taken by another test before rank 0's store binds it.
        if codes[0] != 0 and "address already in use" in rank0.lower() and attempt + 1 < attempts:
            continue
        break
    failures = []
    for rank, ((p, out), rc) in enumerate(zip(procs, codes)):
        text = open(out.name, errors="replace").read()
        events = [json.loads(l) for l in text.splitlines() if l.startswith("{")]
        checks = [e for e in events if e.get("train_gpt") == "ops-check" and e.get("match")]
        done = [e for e in events if e.get("train_gpt") == "done"]
        if rc != 0 or len(checks) != 1 or len(done) != 1:
            failures.append(f"rank {rank} (exit {rc}):\n{text[-1500:]}")
    return failures


def main():
    python = python_with_torch()
    if not python:
        print("SKIP: no Python with torch here (CI has none); train_gpt.py's CPU run needs one "
              "(apt-get install python3-torch)")
        return SKIP
    failures = []
    for extra in (["--tp", "2", "--pp", "2"], ["--tp", "1", "--pp", "4", "--schedule", "gpipe"]):
        with tempfile.TemporaryDirectory() as tmp:
            failures += [f"{' '.join(extra)}: {f}" for f in run_job(python, 8, extra, tmp)]
    for f in failures:
        print(f)
    print("ok" if not failures else f"{len(failures)} rank(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
