#!/usr/bin/env python3
"""An ordinary PyTorch program with Gloo groups, written as a user would (it
knows nothing about Prism): a default group with the backend
"cpu:gloo,cuda:nccl" (by name: PyTorch 2.11's init_process_group() without a
backend gives NCCL alone on a CUDA host), then Gloo groups made with
new_group(backend="gloo") in the order the graph lists its groups (TP groups
of consecutive ranks, then DP groups), CPU collectives on each Gloo group
and a CUDA all-reduce on the default group (NCCL).

  python gloo_check.py [--device-id] [--tp 8] [--no-subgroups]

--device-id     pass device_id (eager NCCL init of the default group)
--no-subgroups  only the default group's Gloo backend
Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (env://).
Prints "OK rank R" at the end; any failure raises.
"""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist


def timed(name, fn):
    t = time.time()
    out = fn()
    print(f"{name}: {time.time() - t:.3f} s", flush=True)
    return out


def cpu_collectives(label, group, size):
    x = torch.ones(4)
    if group is not None:  # the default group's barrier() may pick NCCL (cuda): Gloo groups only
        timed(f"barrier {label}", lambda: dist.barrier(group=group))
    timed(f"all_reduce {label} (cpu)", lambda: dist.all_reduce(x, group=group))
    y = torch.arange(3, dtype=torch.float32)
    root = dist.get_global_rank(group, 0) if group is not None else 0
    timed(f"broadcast {label} (cpu)", lambda: dist.broadcast(y, src=root, group=group))
    outs = [torch.empty(2) for _ in range(size)]
    timed(f"all_gather {label} (cpu)", lambda: dist.all_gather(outs, torch.full((2,), 7.0), group=group))
    big = torch.ones(1 << 18)
    timed(f"all_reduce {label} 1 MiB (cpu)", lambda: dist.all_reduce(big, group=group))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device-id", action="store_true")
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--no-subgroups", action="store_true")
    ap.add_argument("--timeout", type=int, default=120, help="process group timeout, seconds")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    extra = {"device_id": device} if args.device_id else {}

    t0 = time.time()
    timeout = datetime.timedelta(seconds=args.timeout)
    # By name: without a backend PyTorch 2.11 makes an NCCL-only default group on a
    # CUDA host (measured 2026-12-02: "No backend type associated with device type cpu").
    dist.init_process_group("cpu:gloo,cuda:nccl", timeout=timeout, **extra)
    print(f"init_process_group (cpu:gloo,cuda:nccl): {time.time() - t0:.2f} s", flush=True)
    cpu_collectives("world", None, world)

    if not args.no_subgroups:
        tp = args.tp
        t1 = time.time()
        tp_group = dp_group = None
        for start in range(0, world, tp):  # every rank makes every group, TP first, then DP
            ranks = list(range(start, start + tp))
            group = dist.new_group(ranks, backend="gloo")
            if rank in ranks:
                tp_group = group
        for first in range(tp):
            ranks = list(range(first, world, tp))
            group = dist.new_group(ranks, backend="gloo")
            if rank in ranks:
                dp_group = group
        print(f"new_group(backend='gloo') x{world // tp + tp}: {time.time() - t1:.2f} s", flush=True)
        cpu_collectives("tp", tp_group, tp)
        cpu_collectives("dp", dp_group, world // tp)

    x = torch.ones(1 << 18, device=device)  # 1 MiB, the graph's all-reduce
    timed("all_reduce world (cuda, nccl)", lambda: (dist.all_reduce(x), torch.cuda.synchronize()))
    dist.destroy_process_group()
    print(f"OK rank {rank}", flush=True)


if __name__ == "__main__":
    main()
