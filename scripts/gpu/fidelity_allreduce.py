#!/usr/bin/env python3
"""Times all_reduce on one rank, for the hybrid-vs-ground-truth comparison
(scripts/gpu/run-fidelity-baseline.sh). Environment as bootstrap_torch_driver.py
(RANK/WORLD_SIZE given as flags; NCCL_COMM_ID set). Prints one JSON line per
size: {"rank", "world", "bytes", "mean_us", "min_us", "iters"}."""
import argparse
import json
import os
import socket
import struct
import time

import torch
import torch.distributed as dist


def nccl_comm_id_bytes(comm_id):
    host, port = comm_id.rsplit(":", 1)
    uid = struct.pack("<Q", 0x0280028002800280) + struct.pack("<H", socket.AF_INET)
    uid += struct.pack(">H", int(port)) + socket.inet_aton(socket.gethostbyname(host))
    return uid + bytes(128 - len(uid))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--store-port", type=int, required=True)
    ap.add_argument("--store-client", action="store_true")
    ap.add_argument("--sizes", default="1048576,16777216,67108864")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    store = dist.TCPStore("127.0.0.1", args.store_port, args.world_size,
                          is_master=not args.store_client, wait_for_workers=False)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", store=store, rank=args.rank, world_size=args.world_size, device_id=dev)
    for size in [int(s) for s in args.sizes.split(",")]:
        x = torch.ones(size // 4, device=dev)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier() if os.environ.get("FIDELITY_BARRIER") == "1" else None
        times = []
        for _ in range(args.iters):
            t = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        print(json.dumps({"rank": args.rank, "world": args.world_size, "bytes": size,
                          "mean_us": round(1e6 * sum(times) / len(times), 1),
                          "min_us": round(1e6 * min(times), 1), "iters": len(times)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
