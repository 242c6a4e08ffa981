#!/usr/bin/env python3
"""scripts/gpu/results_pack.sh (no GPU): pack_results keeps the named files with their
paths, the *.log ones as their last 300 KB, no other file, and drops an archive over
15 MiB with a line that says so; ops_only leaves a folder without a recording alone
and says when a copy fails, without stopping the script."""
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HELPERS = os.path.join(HERE, "..", "scripts", "gpu", "results_pack.sh")


def bash(script):
    return subprocess.run(["bash", "-c", f'source "{HELPERS}"; {script}'], capture_output=True, text=True, timeout=60)


def expect(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "out")
        write(os.path.join(src, "rows.txt"), b"row\n")
        write(os.path.join(src, "run-a", "captured.graph"), b"graph")
        write(os.path.join(src, "run-a", "prismd.log"), b"x" * 400_000 + b"the end\n")
        write(os.path.join(src, "run-a", "sessions.rec"), b"big")          # not named: stays behind
        write(os.path.join(src, "a", "b", "c", "captured.graph"), b"deep")  # below the depth
        dest = os.path.join(tmp, "p.tgz")
        r = bash(f'pack_results "{src}" "{dest}" 2 rows.txt captured.graph "*.log"')
        expect(r.returncode == 0 and "packed into" in r.stdout, f"pack_results: {r.stdout} {r.stderr}")
        with tarfile.open(dest) as t:
            names = sorted(m.name for m in t.getmembers() if m.isfile())
            expect(names == ["./rows.txt", "./run-a/captured.graph", "./run-a/prismd.log"], f"members: {names}")
            log = t.extractfile("./run-a/prismd.log").read()
        expect(len(log) == 300_000 and log.endswith(b"the end\n"), f"the log's tail: {len(log)} bytes")

        write(os.path.join(src, "run-b", "huge.log"), b"")
        write(os.path.join(src, "run-b", "captured.graph"), os.urandom(16 * 1024 * 1024))
        big = os.path.join(tmp, "big.tgz")
        r = bash(f'pack_results "{src}" "{big}" 2 captured.graph')
        expect(not os.path.exists(big) and "over 15 MiB; left out" in r.stdout, f"an archive over 15 MiB: {r.stdout}")

        r = bash(f'ops_only /nonexistent "{src}/run-b"; echo "rc=$?"')
        expect(r.stdout.strip() == "rc=0", f"ops_only without a recording: {r.stdout} {r.stderr}")
        r = bash(f'ops_only /nonexistent "{src}/run-a"; echo "rc=$?"')
        expect(r.stdout.strip() == f"(no ops-only copy of {src}/run-a/sessions.rec)\nrc=0",
               f"ops_only whose copy fails says so and goes on: {r.stdout} {r.stderr}")
    print("ok")


if __name__ == "__main__":
    main()
