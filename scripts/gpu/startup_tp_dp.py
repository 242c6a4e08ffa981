#!/usr/bin/env python3
"""An ordinary tensor/data-parallel PyTorch program, written as a user would
(it knows nothing about Prism): start the process group, make the TP and DP
groups, run a few collectives, tear down.

  python startup_tp_dp.py --init env|store|tcp [--device-id] [--tp 4]

--init env    init_process_group("nccl")                     (env://, also under torchrun)
--init store  TCPStore(MASTER_ADDR, MASTER_PORT, world, is_master=rank == 0)
              then init_process_group("nccl", store=store, ...)
--init tcp    init_process_group("nccl", init_method="tcp://MASTER_ADDR:MASTER_PORT", ...)
--device-id   pass device_id (eager NCCL init; new_group splits the world);
              without it PyTorch makes each group's communicator at its first collective.
Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT like any launcher-started program.
"""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", choices=["env", "store", "tcp"], default="env")
    ap.add_argument("--device-id", action="store_true")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=60, help="process group timeout, seconds")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    timeout = datetime.timedelta(seconds=args.timeout)
    extra = {"device_id": device} if args.device_id else {}

    t0 = time.time()
    if args.init == "env":
        dist.init_process_group("nccl", timeout=timeout, **extra)
    elif args.init == "store":
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                              is_master=(rank == 0), timeout=timeout)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=world, timeout=timeout, **extra)
    else:
        url = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        dist.init_process_group("nccl", init_method=url, rank=rank, world_size=world, timeout=timeout, **extra)
    print(f"init_process_group: {time.time() - t0:.2f} s", flush=True)

    tp = args.tp
    t1 = time.time()
    tp_group = dp_group = None
    for start in range(0, world, tp):  # every rank makes every group, TP first, then DP
        ranks = list(range(start, start + tp))
        group = dist.new_group(ranks)
        if rank in ranks:
            tp_group = group
    for first in range(tp):
        ranks = list(range(first, world, tp))
        group = dist.new_group(ranks)
        if rank in ranks:
            dp_group = group
    print(f"new_group x{world // tp + tp}: {time.time() - t1:.2f} s", flush=True)

    x = torch.ones(1 << 20, device=device)
    for name, fn in (("all_reduce world", lambda: dist.all_reduce(x)),
                     ("all_reduce tp", lambda: dist.all_reduce(x, group=tp_group)),
                     ("all_reduce dp", lambda: dist.all_reduce(x, group=dp_group)),
                     ("broadcast world", lambda: dist.broadcast(x, src=0)),
                     ("all_gather tp", lambda: dist.all_gather_into_tensor(
                         torch.empty(tp * x.numel(), device=device), x, group=tp_group))):
        t = time.time()
        fn()
        torch.cuda.synchronize()
        print(f"{name}: {time.time() - t:.3f} s", flush=True)

    dist.destroy_process_group()
    print(f"OK rank {rank} of {world}: {time.time() - t0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
