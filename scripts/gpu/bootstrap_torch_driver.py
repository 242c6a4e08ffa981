#!/usr/bin/env python3
"""PyTorch driver for prismd's bootstrap emulation (run by the lead on the GPU host).

Runs ONE real rank (default rank 0) of a WORLD_SIZE job whose other ranks prismd
plays. As docs/bootstrap.md ("Ids from PyTorch's store") describes: the TCPStore is started separately
with wait_for_workers=False, TORCHELASTIC_USE_AGENT_STORE=True makes the rank use
it without waiting for absent ranks, NCCL_COMM_ID makes NCCL's unique id
predictable (real rank 0 hosts the NCCL root there; with rank 0 virtual, prismd
hosts it), and init_process_group gets device_id (eager init; new_group then uses
ncclCommSplit).

Example (prismd started with the same --graph/plan, NCCL_COMM_ID and real ranks):
  NCCL_COMM_ID=127.0.0.1:29555 NCCL_NET_PLUGIN=prism NCCL_NET=Prism \
  NCCL_RAS_ENABLE=0 NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_WIN_ENABLE=0 \
  python3 bootstrap_torch_driver.py --world-size 64 --rank 0
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def nccl_comm_id_bytes(comm_id):
    """The 128-byte ncclUniqueId NCCL builds from NCCL_COMM_ID=host:port (IPv4)."""
    import socket
    import struct
    host, port = comm_id.rsplit(":", 1)
    uid = struct.pack("<Q", 0x0280028002800280) + struct.pack("<H", socket.AF_INET)
    uid += struct.pack(">H", int(port)) + socket.inet_aton(socket.gethostbyname(host))
    return uid + bytes(128 - len(uid))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--store-port", type=int, default=29600)
    ap.add_argument("--tp", type=int, default=8, help="TP-like group size (consecutive ranks)")
    ap.add_argument("--max-groups", type=int, default=0,
                    help="create at most this many groups of each kind (0 = all); must match the graph's "
                         "prism-graphgen collective --max-subgroups")
    ap.add_argument("--store-client", action="store_true",
                    help="connect to a store another real rank hosts instead of hosting it")
    ap.add_argument("--publish-id", action="store_true",
                    help="rank 0 is virtual: put NCCL_COMM_ID's unique id into the store under the key "
                         "PyTorch 2.11's non-zero ranks read ('0//cuda//0' with store=)")
    ap.add_argument("--collectives", action="store_true", help="run a few collectives")
    args = ap.parse_args()
    if "NCCL_COMM_ID" not in os.environ:
        raise SystemExit("set NCCL_COMM_ID=host:port (the same address prismd was given)")
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(args.store_port)
    store = dist.TCPStore("127.0.0.1", args.store_port, args.world_size,
                          is_master=not args.store_client, wait_for_workers=False)
    if args.publish_id:
        store.set("0//cuda//0", nccl_comm_id_bytes(os.environ["NCCL_COMM_ID"]))
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    t0 = time.time()
    dist.init_process_group("nccl", store=store, rank=args.rank, world_size=args.world_size,
                            device_id=dev)
    print(f"init_process_group: {time.time() - t0:.3f} s", flush=True)
    n, r, tp = args.world_size, args.rank, args.tp
    t1 = time.time()
    tp_groups = [list(range(s, min(s + tp, n))) for s in range(0, n, tp)]
    dp_groups = [list(range(i, n, tp)) for i in range(tp)]
    if args.max_groups:
        tp_groups, dp_groups = tp_groups[:args.max_groups], dp_groups[:args.max_groups]
    mine = {}
    for kind, groups in (("tp", tp_groups), ("dp", dp_groups)):
        for g in groups:  # every rank calls new_group for every group (Megatron style)
            pg = dist.new_group(g)
            if r in g:
                mine[kind] = pg
    print(f"new_group x{len(tp_groups) + len(dp_groups)}: {time.time() - t1:.3f} s", flush=True)
    if args.collectives:
        elems = max(1024, (1 << 24) // n)  # all_gather output stays at 64 MiB of floats
        x = torch.ones(elems, device=dev)
        for name, fn in (("all_reduce", lambda: dist.all_reduce(x)),
                         ("broadcast", lambda: dist.broadcast(x, src=0)),
                         ("all_gather", lambda: dist.all_gather_into_tensor(
                             torch.empty(n * x.numel(), device=dev), x)),
                         ("reduce_scatter", lambda: dist.reduce_scatter_tensor(
                             torch.empty(x.numel() // n or 1, device=dev),
                             torch.ones((x.numel() // n or 1) * n, device=dev))),
                         ("tp all_reduce", lambda: dist.all_reduce(x, group=mine["tp"]) if "tp" in mine else None),
                         ("send/recv", lambda: (dist.send(x, (r + 1) % n), dist.recv(x, (r - 1) % n)))):
            t = time.time()
            fn()
            torch.cuda.synchronize()
            print(f"{name}: {time.time() - t:.3f} s (x[0] = {x[0].item():g})", flush=True)
    t2 = time.time()
    dist.destroy_process_group()
    print(f"destroy_process_group: {time.time() - t2:.3f} s", flush=True)


if __name__ == "__main__":
    main()
