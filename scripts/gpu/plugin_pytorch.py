#!/usr/bin/env python3
"""One rank of the plugin check: collectives and send/recv through NCCL with
correctness checks and algorithm bandwidth. Run by run-plugin-check.sh, one
process per rank, all on cuda:0 (each rank its own NCCL_HOSTID).

Env: RANK, WORLD_SIZE, MASTER_PORT, PRISM_CHECK_LABEL, PRISM_CHECK_SIZES
(comma-separated bytes), PRISM_CHECK_ITERS (iterations per round, 5),
PRISM_CHECK_ROUNDS (timed rounds, 5), PRISM_CHECK_WAIT (how a round waits
for the GPU: spin, torch.cuda.synchronize, the default; blocking, a
blocking CUDA event, so that the ranks' main threads leave their cores to
the proxy threads while they wait, as bench/fidelity/driver.py does),
OUT (results directory).
Rank 0 writes $OUT/<label>.json and prints one line per (op, size).
An operation's time is the median over the rounds of the slowest rank's mean
per iteration in that round (plugin_check_ratios.steady_time). With one
5-iteration mean, 8 ranks on the 16-core GPU host (2026-12-02, b945b5c) gave
Socket 4808 us and the plugin 2461 us for a 1 MiB all_reduce, and Socket
802 us against the plugin's 4280 us for a 1 MiB send_recv, in the same run.
"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from plugin_check_ratios import steady_time


def log(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def gpu_waiter(mode):
    """How a round waits for its operations: 'spin' (torch.cuda.synchronize:
    the thread spins on a core) or 'blocking' (a blocking event recorded on
    the current stream, which every operation here makes wait for NCCL)."""
    if mode == "spin":
        return torch.cuda.synchronize
    if mode == "blocking":
        def wait():
            ev = torch.cuda.Event(blocking=True)
            ev.record()
            ev.synchronize()
        return wait
    raise SystemExit(f"PRISM_CHECK_WAIT={mode!r}: use spin or blocking")


def make_ops(rank, world, n, dev):
    """(name, buffer bytes for algbw, run(), check()) per operation."""
    tri = world * (world + 1) / 2
    ops = []

    ar = torch.empty(n, dtype=torch.float32, device=dev)
    def ar_run():
        ar.fill_(rank + 1)
        dist.all_reduce(ar)
    ops.append(("all_reduce", n * 4, ar_run, lambda: bool(torch.all(ar == tri))))

    ag_in = torch.full((n,), float(rank + 1), dtype=torch.float32, device=dev)
    ag_out = torch.empty(world * n, dtype=torch.float32, device=dev)
    ag_expect = torch.arange(1, world + 1, dtype=torch.float32, device=dev).repeat_interleave(n)
    ops.append(("all_gather", world * n * 4,
                lambda: dist.all_gather_into_tensor(ag_out, ag_in),
                lambda: bool(torch.equal(ag_out, ag_expect))))

    rs_in = ((rank + 1) * torch.arange(1, world + 1, dtype=torch.float32, device=dev)
             ).repeat_interleave(n)
    rs_out = torch.empty(n, dtype=torch.float32, device=dev)
    ops.append(("reduce_scatter", world * n * 4,
                lambda: dist.reduce_scatter_tensor(rs_out, rs_in),
                lambda: bool(torch.all(rs_out == (rank + 1) * tri))))

    bc = torch.empty(n, dtype=torch.float32, device=dev)
    bc_expect = torch.arange(n, dtype=torch.float32, device=dev) % 1000
    def bc_run():
        if rank == 0:
            bc.copy_(bc_expect)
        else:
            bc.zero_()
        dist.broadcast(bc, src=0)
    ops.append(("broadcast", n * 4, bc_run, lambda: bool(torch.equal(bc, bc_expect))))

    sr_out = torch.full((n,), float(rank + 1), dtype=torch.float32, device=dev)
    sr_in = torch.empty(n, dtype=torch.float32, device=dev)
    peer_to, peer_from = (rank + 1) % world, (rank - 1) % world
    def sr_run():
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, sr_out, peer_to),
                                       dist.P2POp(dist.irecv, sr_in, peer_from)])
        for r in reqs:
            r.wait()
    ops.append(("send_recv", n * 4, sr_run, lambda: bool(torch.all(sr_in == peer_from + 1))))
    return ops


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"])
    label = os.environ.get("PRISM_CHECK_LABEL", "run")
    sizes = [int(s) for s in os.environ.get("PRISM_CHECK_SIZES", "1048576,33554432").split(",")]
    iters = int(os.environ.get("PRISM_CHECK_ITERS", "5"))
    rounds = max(1, int(os.environ.get("PRISM_CHECK_ROUNDS", "5")))
    out_dir = os.environ.get("OUT", "")
    wait_mode = os.environ.get("PRISM_CHECK_WAIT", "spin")
    wait_gpu = gpu_waiter(wait_mode)
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    t0 = time.time()
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=dev,
                            timeout=datetime.timedelta(seconds=120))
    dist.barrier()
    init_s = time.time() - t0
    results, failures = [], []
    for size in sizes:
        n = max(1, size // 4)
        for name, nbytes, run, check in make_ops(rank, world, n, dev):
            run()
            torch.cuda.synchronize()
            ok = check()
            flags = torch.tensor([0 if ok else 1], dtype=torch.int32, device=dev)
            dist.all_reduce(flags)
            all_ok = int(flags.item()) == 0
            if not all_ok:
                failures.append(f"{name} {size}")
            run()  # warm-up
            torch.cuda.synchronize()
            round_secs = []
            for _ in range(rounds):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(iters):
                    run()
                wait_gpu()
                round_secs.append((time.perf_counter() - start) / iters)
            # The slowest rank defines each round's time.
            t = torch.tensor(round_secs, dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            round_secs = [float(x) for x in t.tolist()]
            secs = steady_time(round_secs)
            row = {"op": name, "bytes": nbytes, "time_us": secs * 1e6,
                   "rounds_us": [round(x * 1e6, 1) for x in round_secs],
                   "algbw_GBps": nbytes / secs / 1e9, "correct": all_ok}
            results.append(row)
            if rank == 0:
                log(rank, f"{label:>14} {name:>14} {nbytes:>11} B  {secs * 1e6:10.1f} us  "
                          f"{row['algbw_GBps']:8.3f} GB/s  {'ok' if all_ok else 'WRONG'}")
    dist.destroy_process_group()
    if rank == 0:
        doc = {"label": label, "world_size": world, "init_s": init_s, "iters": iters, "rounds": rounds,
               "wait": wait_mode,
               "results": results, "failures": failures}
        if out_dir:
            with open(os.path.join(out_dir, f"{label}.json"), "w") as f:
                json.dump(doc, f, indent=1)
        log(rank, f"{label}: init {init_s:.2f} s, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
