#!/usr/bin/env python3
"""A neighbour on the GPU: another process that moves RATE GB/s each way
between pinned host memory and the GPU (copy engines, two streams), as a
second real rank on the same GPU moves its NCCL traffic through host
memory. bench/fidelity/run-gpu.sh starts it beside a run with
NEIGHBOUR_GBPS=RATE, to tell what a run's second real rank costs through
the GPU's host link from what it costs through Prism (docs/timing.md, "Two
real ranks on one GPU").

Usage: gpu_neighbour.py RATE_GB_PER_S [SECONDS] [--device N]
Runs until SECONDS pass (default: until SIGTERM) and prints the rate it
held; exits 2 without torch or CUDA."""
import argparse
import signal
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rate", type=float, help="GB/s each way (host to GPU and GPU to host)")
    p.add_argument("seconds", type=float, nargs="?", default=0.0, help="run this long (0: until SIGTERM)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--chunk-mib", type=int, default=8, help="bytes per copy, each way")
    a = p.parse_args()
    if a.rate <= 0:
        p.error("RATE must be positive")
    try:
        import torch
    except ImportError:
        print("gpu_neighbour: needs torch (pip install torch) on a host with a GPU", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_neighbour: no CUDA device visible (CUDA_VISIBLE_DEVICES? MPS pipe?)", file=sys.stderr)
        return 2
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    n = a.chunk_mib << 20
    dev = torch.device("cuda", a.device)
    h_in = torch.empty(n, dtype=torch.uint8).pin_memory()
    h_out = torch.empty(n, dtype=torch.uint8).pin_memory()
    d_in = torch.empty(n, dtype=torch.uint8, device=dev)
    d_out = torch.empty(n, dtype=torch.uint8, device=dev)
    up, down = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    period = n / (a.rate * 1e9)  # seconds per chunk at RATE
    t0 = time.monotonic()
    moved = 0
    while not stop and (a.seconds <= 0 or time.monotonic() - t0 < a.seconds):
        t = time.monotonic()
        with torch.cuda.stream(up):
            d_in.copy_(h_in, non_blocking=True)
        with torch.cuda.stream(down):
            h_out.copy_(d_out, non_blocking=True)
        torch.cuda.synchronize(dev)
        moved += n
        rest = period - (time.monotonic() - t)
        if rest > 0:
            time.sleep(rest)
    took = time.monotonic() - t0
    print(f"gpu neighbour: {moved / took / 1e9 if took > 0 else 0:.1f} GB/s each way over {took:.1f} s "
          f"(asked {a.rate:g})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
