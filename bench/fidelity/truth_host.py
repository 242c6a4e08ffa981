#!/usr/bin/env python3
"""What a ground truth's host adds to the model that a cluster does not.

A ground truth packs every rank of a spec on the GPU host as MPS clients of
one GPU, each its own NCCL "host". A ring step's handoff there (the GPU
noticing the step's data, the proxy thread posting the next send) waits for
a GPU and cores that fifteen other ranks share, which a cluster's ranks,
each with its GPU, do not: prismd's `--step-turnaround-us T` charges it on
every step of a ring collective across nodes (docs/network-model.md, "A
packed host's step turnaround"). T depends on how many ranks share the GPU
and the host's cores, so the bench takes it from this table, measured per
host and ranks per GPU, and a real cluster's prediction takes none.

On that host the bench's hybrids also run without calibration (prismd
--no-calibration, docs/timing.md "Calibration"): T is fitted to iteration
means with the model's own TP all-reduce times, which it over-charges
(per operation the packed host's ring step costs 0-100 us) to stand in for
NIC effects of the truth's link that the model lacks (its FIFO tail,
docs/network-model.md). A real rank's clean measurement gives the
all-virtual TP all-reduces the truth's own time and removes that stand-in
without adding what it stood for: `prismd --simulate` of a local build
whose model took, for every TP all-reduce, the time the GPU host's hybrids
measured (5.10, 6.81, 3.47 ms) came out -2.3% (tp4), -0.8% (dp4) and -2.4%
(pp4) against the pooled truths of 2026-12-05, where the model's own gives
+0.72, -0.11 and -0.98%. A cluster's prediction keeps calibration.

One place for it: prepare.sh asks `truth_host.py HOST N` for the model's
flags of an N-rank spec (and writes them into meta.env, so that run-gpu.sh's
hybrids run with the same), model_table.py imports `flags`.

The figures hold for the GPU they were measured on: on an H100 (16 cores,
2026-12-05, the same 16-rank specs) the truths need 111 us (tp4) to 268 us
(dp8) and no one T fits them (docs/network-model.md). run-gpu.sh therefore
asks `truth_host.py --gpu HOST NAME` whether the GPU it finds is the one
HOST's figures came from, and says so in every result when it is not.

Usage: truth_host.py HOST RANKS       prints the prismd flags, one line (empty: none)
       truth_host.py --gpu HOST NAME  exit 0 when NAME (nvidia-smi's name) is HOST's GPU or HOST
                                      names none; else 1, and why on stdout
  HOST: one-h200 (every rank on one H200, 16 cores), two-h200 (two H200s, 32
  cores), cluster (a GPU each: nothing added)
"""
import sys

# Ranks per GPU -> T (us), fitted to the iteration means of the truths taken
# without CUDA events around communication (model_table.py's rows; the
# command and the fit in docs/network-model.md):
#   16 ranks (dp4 124, dp8 143, tp4 124, pp4 156 us on the truths of
#   2026-12-05: 140 us)
#   8 ranks (step-n8-2g5, 2026-12-05, 402.775 ms against 401.303 ms with
#   none: 44 us)
PACKED_STEP_TURNAROUND_US = {
    "one-h200": {16: 140, 8: 45},
    "two-h200": {},  # 4 and 8 ranks per GPU, 4 cores each: its truths hold without (2026-12-01)
    "cluster": {},
}

# The GPU each host's figures were measured on (a word of nvidia-smi's name); None: any.
HOST_GPU = {"one-h200": "H200", "two-h200": "H200", "cluster": None}


def step_turnaround_us(host, ranks):
    """T in us for a truth of RANKS ranks on HOST (0: none); KeyError for an
    unknown host, ValueError for a rank count the host has no figure for."""
    table = PACKED_STEP_TURNAROUND_US[host]
    if not table:
        return 0
    if ranks not in table:
        known = ", ".join(str(k) for k in sorted(table))
        raise ValueError(f"no step turnaround measured on {host} for {ranks} ranks (measured: {known}); "
                         f"take its truths without and fit T as docs/network-model.md says, or set "
                         f"TRUTH_HOST=cluster for no host term")
    return table[ranks]


def flags(host, ranks):
    """The prismd flags that model a truth of RANKS ranks on HOST."""
    t = step_turnaround_us(host, ranks)
    return ["--step-turnaround-us", str(t), "--no-calibration"] if t else []


def gpu_mismatch(host, gpu_name):
    """None when GPU_NAME (nvidia-smi's name, e.g. "NVIDIA H200") is the GPU HOST's
    figures were measured on, or HOST names none; else one line saying so.
    KeyError for an unknown host."""
    want = HOST_GPU[host]
    if want is None or want in gpu_name.split():
        return None
    return (f"TRUTH_HOST={host}'s step turnaround was measured on an {want}, this GPU is {gpu_name.strip()}: "
            f"the model's host term (and every hybrid's, from meta.env) is not this host's; the truths "
            f"still stand, the model column and the hybrids' errors carry the difference "
            f"(bench/fidelity/truth_host.py)")


def unknown_host(host):
    """Says HOST is none of the table's, on stderr; returns main's exit code 2."""
    sys.stderr.write(f"truth_host: unknown host {host} (known: {', '.join(PACKED_STEP_TURNAROUND_US)})\n")
    return 2


def main(argv):
    if len(argv) == 4 and argv[1] == "--gpu":
        try:
            why = gpu_mismatch(argv[2], argv[3])
        except KeyError:
            return unknown_host(argv[2])
        if why:
            print(why)
            return 1
        return 0
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    host, ranks = argv[1], argv[2]
    try:
        print(" ".join(flags(host, int(ranks))))
    except KeyError:
        return unknown_host(host)
    except ValueError as e:
        sys.stderr.write(f"truth_host: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
