#!/usr/bin/env python3
"""Runs one rank of a fidelity experiment: the graph's program of this rank,
op by op, with PyTorch and NCCL (bench/fidelity/README.md).

The program comes from `prism-graphgen inspect GRAPH --ops RANK` (--ops) and
the communicators from `prism-graphgen inspect GRAPH --json` (--comms), so
the ground truth (every rank real), the hybrid runs (some ranks real, the
rest played by prismd from the same graph) and prismd's own replay all run
the same ops. Compute ops are torch.cuda._sleep on one SM (ranks sharing a
GPU under MPS do not slow each other); collectives and send/recv go through
torch.distributed on the NCCL groups the graph names (every group is made
with new_group, in the graph's order, by every rank: PyTorch splits the
world communicator with the colors the graph records).

Prints one JSON line: iteration times (step) or per-op times (sweep), peak
GPU memory (PyTorch's reserved peak plus NCCL's device allocations from its
ALLOC log), and the calibration of the sleep kernel.
"""
import argparse
import faulthandler
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time

import host_watch
import op_times
import whereabouts

DTYPE_BYTES = 2  # the graph's ops are bf16


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "-1")),
                    help="default: $RANK (with --env-init)")
    ap.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "0")),
                    help="default: $WORLD_SIZE (with --env-init)")
    ap.add_argument("--ops", required=True,
                    help="this rank's program (prism-graphgen inspect --ops RANK); {rank} is replaced by the rank")
    ap.add_argument("--comms", required=True, help="the graph's summary (prism-graphgen inspect --json)")
    ap.add_argument("--iterations", type=int, required=True, help="iterations to run (step: warmup included)")
    ap.add_argument("--warmup", type=int, default=0, help="iterations (step) or repetitions (sweep) not measured")
    ap.add_argument("--mode", choices=["step", "sweep"], required=True)
    ap.add_argument("--env-init", action="store_true",
                    help="start as an ordinary program under `prism run` does: init_process_group through env:// "
                         "(MASTER_ADDR/PORT, the store prismd hosts) and no device_id, so each group's NCCL "
                         "communicator is made at its first collective (only its members take part; a "
                         "world of thousands avoids one world-wide split per group)")
    ap.add_argument("--store-port", type=int, default=0)
    ap.add_argument("--store-host", default="127.0.0.1")
    ap.add_argument("--store-master", action="store_true", help="host PyTorch's TCP store (rank 0 of the run)")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--late-iteration", type=int, default=-1, help="this rank computes longer in that iteration")
    ap.add_argument("--late-ms", type=float, default=0.0)
    ap.add_argument("--cpu", action="store_true", help="gloo on the CPU, sleeps on the host (a smoke test only)")
    ap.add_argument("--op-timing", choices=["compute", "all", "comm", "none", "nccl"], default="compute",
                    help="step: which ops of a measured iteration get CUDA timing events around them (the "
                         "timeline, comm_us, compute_us); iterations are timed either way. Events around "
                         "communication change what some programs do: all or comm only for per-kind tables. "
                         "nccl: compute ops by events, communication by NCCL's own kernel stamps "
                         "(PRISM_OP_TIMES through Prism's profiler role; no event in the streams)")
    ap.add_argument("--op-times-dir", default="",
                    help="--op-timing nccl: where the plugin writes its operation lines (PRISM_OP_TIMES; "
                         "default: that variable, else op-times/ beside --out, else a new temporary directory)")
    ap.add_argument("--gc", choices=host_watch.GC_MODES, default="python",
                    help="step: Python's garbage collector during the iterations: python (as Python runs it), "
                         "freeze (collect once after start-up and never scan those objects again), off "
                         "(disabled); the result's host section records every collection either way")
    ap.add_argument("--out", default="", help="also write the JSON line here")
    a = ap.parse_args(argv)
    # One command line for every real rank (prism run): {rank} in paths.
    a.ops = a.ops.replace("{rank}", str(a.rank))
    a.out = a.out.replace("{rank}", str(a.rank))
    if a.rank < 0 or a.world <= 0:
        ap.error("--rank and --world (or RANK and WORLD_SIZE) are needed")
    if not a.env_init and a.store_port <= 0:
        ap.error("--store-port is needed (or --env-init)")
    return a


class SleepClock:
    """Turns nanoseconds into torch.cuda._sleep cycles (measured once)."""

    def __init__(self, torch, cpu):
        self.torch, self.cpu = torch, cpu
        self.cycles_per_ns = 1.0
        if cpu:
            return
        t = torch
        s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        t.cuda._sleep(1_000_000)  # warm the clocks
        samples = []
        for _ in range(5):
            s.record()
            t.cuda._sleep(20_000_000)
            e.record()
            e.synchronize()
            samples.append(20_000_000 / (s.elapsed_time(e) * 1e6))
        self.cycles_per_ns = statistics.median(samples)

    def sleep(self, ns):
        if ns <= 0:
            return
        if self.cpu:
            time.sleep(ns * 1e-9)
        else:
            self.torch.cuda._sleep(int(ns * self.cycles_per_ns))


def timeline(marks, timed):
    """Every timed op as [iteration, label, start_ms, end_ms], times from its
    iteration's start (step mode): where each rank's time went, to line up
    with prismd's play of the same graph (bench/hybrid_explain)."""
    rows = [[it, label, round(marks[it].elapsed_time(s), 3), round(marks[it].elapsed_time(e), 3)]
            for label, s, e, it in timed]
    return sorted(rows, key=lambda r: (r[0], r[2]))


def late_op(entry, marks, compute_timed, ops, late_ms):
    """The op made late (--late-iteration), as the GPU ran it: how long its
    sleep lasted against what was asked (the graph's duration plus
    --late-ms), when it started in its iteration, and the same op's usual
    figures in the timed iterations (a late truth's iteration may grow by
    more than the delay: is it the sleep, or what came after it?)."""
    label, s, e, it = entry
    graph_ms = next((o["duration_ns"] for o in ops if o["type"] == "compute" and o.get("label", "") == label), 0) / 1e6
    usual = [(marks[i].elapsed_time(s2), s2.elapsed_time(e2)) for l2, s2, e2, i in compute_timed if l2 == label]
    return {"label": label, "iteration": it, "graph_ms": round(graph_ms, 4), "late_ms": late_ms,
            "measured_ms": round(s.elapsed_time(e), 4), "start_ms": round(marks[it].elapsed_time(s), 4),
            "usual_ms": round(statistics.median(d for _, d in usual), 4) if usual else None,
            "usual_start_ms": round(statistics.median(t for t, _ in usual), 4) if usual else None}


def nccl_device_bytes():
    """Sum of NCCL's device allocations in this process's NCCL_DEBUG_FILE (ALLOC)."""
    pattern = os.environ.get("NCCL_DEBUG_FILE", "")
    if not pattern:
        return None
    path = pattern.replace("%h", os.uname().nodename).replace("%p", str(os.getpid()))
    total = 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r"Cuda Alloc Size (\d+)", line)
                if m:
                    total += int(m.group(1))
    except OSError:
        return None
    return total


class Runner:
    def __init__(self, args, torch, dist):
        self.a, self.torch, self.dist = args, torch, dist
        self.dev = torch.device("cpu") if args.cpu else torch.device("cuda", args.gpu)
        self.dtype = torch.float32 if args.cpu else torch.bfloat16
        with open(args.ops) as f:
            self.program = json.load(f)
        with open(args.comms) as f:
            self.summary = json.load(f)
        self.ops = self.program["ops"]
        self.buffers = {}
        self.groups = {}
        # r<R>.at beside the result: what this rank is about to do (whereabouts.py; a hung run's snapshot)
        self.at = whereabouts.Whereabouts(re.sub(r"\.json$", "", args.out) + ".at" if args.out else "")

    def init(self):
        a, torch, dist = self.a, self.torch, self.dist
        self.op_calls = None  # --op-timing nccl: (label, iteration, t0_ns, t1_ns) of measured comm calls
        if a.op_timing == "nccl" and not a.cpu:
            self.start_op_times()
        self.at.note("init: the world's process group")
        if a.env_init:
            if not a.cpu:
                torch.cuda.set_device(self.dev)
            dist.init_process_group("gloo" if a.cpu else "nccl", rank=a.rank, world_size=a.world)
        else:
            self.init_with_own_store()
        comms = sorted((g for k in self.summary["communicators"]["by_kind"] for g in k.get("groups", [])),
                       key=lambda c: c["id"])
        for c in comms:
            if c["id"] == 0:
                self.groups[0] = dist.group.WORLD
            else:  # every rank creates every group, in the graph's order
                self.at.note(f"init: group {c['id']} of {len(comms) - 1}, members {c['members']}")
                self.groups[c["id"]] = dist.new_group(ranks=c["members"])
        self.compute = torch.cuda.current_stream() if not a.cpu else None
        self.side = torch.cuda.Stream() if not a.cpu else None
        self.clock = SleepClock(torch, a.cpu)
        self.compute_timed = []  # (label, start, end, iteration) of timed compute ops (step)
        self.late_timed = []  # the same for the op made late (--late-iteration)
        self.iteration = 0  # the step being enqueued (timed ops carry it)
        targets = set()
        for op in self.ops:
            targets.update(op["deps"])
        self.dep_targets = targets

    def start_op_times(self):
        """--op-timing nccl: the plugin's profiler role writes NCCL's kernel
        stamps per operation (PRISM_OP_TIMES), set before NCCL loads it."""
        prof = os.environ.get("NCCL_PROFILER_PLUGIN", "")
        if not prof or prof == "none":
            raise SystemExit("driver: --op-timing nccl needs Prism's plugin as NCCL's profiler: set "
                             "NCCL_PROFILER_PLUGIN=/path/to/libnccl-net-prism.so (prism run and run-gpu.sh do)")
        d = self.a.op_times_dir or os.environ.get("PRISM_OP_TIMES", "")
        if not d:
            d = (os.path.join(os.path.dirname(os.path.abspath(self.a.out)), "op-times") if self.a.out
                 else tempfile.mkdtemp(prefix="prism-op-times-"))
        os.makedirs(d, exist_ok=True)
        os.environ["PRISM_OP_TIMES"] = d
        self.op_times_dir = d
        self.op_calls = []

    def init_with_own_store(self):
        """The ground truth's and run-gpu.sh's start: rank 0 hosts the store,
        communicators are made eagerly (device_id)."""
        a, torch, dist = self.a, self.torch, self.dist
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "True"  # clients do not wait for absent (virtual) ranks
        store = dist.TCPStore(a.store_host, a.store_port, a.world, is_master=a.store_master, wait_for_workers=False)
        if a.cpu:
            dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world)
        else:
            torch.cuda.set_device(self.dev)
            dist.init_process_group("nccl", store=store, rank=a.rank, world_size=a.world, device_id=self.dev)

    def buffer(self, key, nbytes):
        k = (key, nbytes)
        if k not in self.buffers:
            self.buffers[k] = self.torch.ones(max(nbytes // DTYPE_BYTES, 1), dtype=self.dtype, device=self.dev)
        return self.buffers[k]

    def group_of(self, op):
        return self.groups[op["comm"]]

    def collective(self, op):
        dist, n = self.dist, op["bytes"]
        g = self.group_of(op)
        size = dist.get_world_size(g)
        kind = op["kind"]
        if kind in ("allreduce", "barrier"):
            dist.all_reduce(self.buffer("ar", n), group=g)
        elif self.a.cpu and kind in ("allgather", "reducescatter"):  # gloo lacks the tensor forms
            dist.all_reduce(self.buffer("cpu-" + kind, n // size), group=g)
        elif kind == "allgather":
            dist.all_gather_into_tensor(self.buffer("ag-out", n), self.buffer("ag-in", n // size), group=g)
        elif kind == "reducescatter":
            dist.reduce_scatter_tensor(self.buffer("rs-out", n // size), self.buffer("rs-in", n), group=g)
        else:
            raise SystemExit(f"driver: collective kind {kind} is not supported by the fidelity driver")

    def p2p(self, ops):
        dist = self.dist
        batch = []
        for op in ops:
            g = self.group_of(op)
            fn = dist.isend if op["type"] == "send" else dist.irecv
            buf = self.buffer("send" if op["type"] == "send" else "recv", op["bytes"])
            batch.append(dist.P2POp(fn, buf, op["peer_rank"], group=g))
        for w in dist.batch_isend_irecv(batch):
            w.wait()

    def stream_of(self, op):
        return self.side if op["stream"] == 1 else self.compute

    def run_iteration(self, extra_ns, timed):
        """Enqueues one pass over the program (a group_start..group_end pair
        of send/recv goes out as one batch_isend_irecv, one NCCL group)."""
        events = {}
        # A sweep times every operation by events whatever --op-timing says
        # (its per-op medians are what it measures); a step as asked.
        comm_timed = timed if self.a.mode == "sweep" or self.a.op_timing in ("all", "comm") else None
        brackets = self.op_calls if timed is not None else None  # None unless --op-timing nccl
        ops, i = self.ops, 0
        while i < len(ops):
            op, t = ops[i], ops[i]["type"]
            if t == "group_start":
                j, group = i + 1, []
                while ops[j]["type"] != "group_end":
                    group.append(ops[j])
                    j += 1
                self._launch(lambda g=group: self.p2p(g), group[0], events, range(i, j + 1), comm_timed, brackets)
                i = j + 1
                continue
            if t == "compute":
                ns = op["duration_ns"] + (extra_ns if i == 0 else 0)
                # Timed too (compute_us): whether a sleep lasts what the graph
                # says while every rank shares the GPUs (SleepClock is measured
                # once, on an idle GPU).
                time_it = (timed is not None and 0 < ns == op["duration_ns"]
                           and self.a.op_timing in ("all", "compute", "nccl"))
                # The late op itself is timed in any case (late_op): did its
                # sleep last what was asked while the others waited for it?
                sink = self.compute_timed if time_it else (self.late_timed if ns != op["duration_ns"] else None)
                self._launch(lambda ns=ns: self.clock.sleep(ns), op, events, [i], sink)
            elif t == "collective":
                self._launch(lambda op=op: self.collective(op), op, events, [i], comm_timed, brackets)
            elif t in ("send", "recv"):
                self._launch(lambda op=op: self.p2p([op]), op, events, [i], comm_timed, brackets)
            i += 1
        if not self.a.cpu:
            self.compute.wait_stream(self.side)

    def _launch(self, fn, op, events, indices, timed, brackets=None):
        """Enqueues `fn` on the op's stream after its dependencies. `timed`:
        CUDA events around it; `brackets`: the host clock around the call
        (NCCL's operations are matched to it by op_times.py)."""
        self.at.note(f"iteration {self.iteration} op {indices[0]} {op.get('type', '')} {op.get('label', '')}")
        if self.a.cpu:
            fn()
            return
        torch = self.torch
        stream = self.stream_of(op)
        for d in op["deps"]:
            if d in events:
                stream.wait_event(events[d])
        with torch.cuda.stream(stream):
            start = torch.cuda.Event(enable_timing=True) if timed is not None else None
            if start is not None:
                start.record()
            t0 = time.time_ns() if brackets is not None else 0
            fn()
            if brackets is not None:
                brackets.append((op.get("label", ""), self.iteration, t0, time.time_ns()))
            if start is not None:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                timed.append((op.get("label", ""), start, end, self.iteration))
            if any(i in self.dep_targets for i in indices):
                ev = torch.cuda.Event()
                ev.record()
                for i in indices:
                    events[i] = ev

    def wait_idle(self):
        """Waits for both streams without spinning: a spinning wait in every
        rank at once (torch.cuda.synchronize) took a core each and slowed the
        ground truth's last iterations (NCCL's proxy threads starved)."""
        torch = self.torch
        for stream in (self.compute, self.side):
            ev = torch.cuda.Event(blocking=True)
            ev.record(stream)
            ev.synchronize()
        torch.cuda.synchronize()

    def run(self):
        a, torch = self.a, self.torch
        result = {"rank": a.rank, "world": a.world, "mode": a.mode, "spec": self.summary["job"]["name"]}
        if a.mode == "step":
            marks, timed, done_marks = [], [], []
            watch = host_watch.HostWatch(a.gc)
            watch.start()
            for it in range(a.iterations):
                extra = int(a.late_ms * 1e6) if it == a.late_iteration else 0
                if a.cpu:
                    watch.enqueuing(it)
                    marks.append(time.perf_counter())
                    self.run_iteration(extra, None)
                    continue
                ev = torch.cuda.Event(enable_timing=True)
                ev.record(self.compute)
                marks.append(ev)
                # As a training loop that reads its loss: the host runs at most
                # one iteration ahead of the GPU (waiting without spinning).
                # Unbounded, it filled CUDA's launch queue after about a dozen
                # iterations, and NCCL's host-side enqueue then lagged the
                # GPU: ground truths slowed down mid-run, by 2x at 16 ranks.
                if len(done_marks) >= 2:
                    watch.wait_for_gpu(it, done_marks[-2].synchronize)
                else:
                    watch.enqueuing(it)
                self.iteration = it
                self.run_iteration(extra, timed if it >= a.warmup else None)
                done = torch.cuda.Event(blocking=True)
                done.record(self.compute)
                done_marks.append(done)
            self.at.note(f"all {a.iterations} iterations enqueued: waiting for the GPU")
            if a.cpu:
                marks.append(time.perf_counter())
                times = [1e3 * (marks[i + 1] - marks[i]) for i in range(len(marks) - 1)]
            else:
                end = torch.cuda.Event(enable_timing=True)
                end.record(self.compute)
                marks.append(end)
                self.wait_idle()
                times = [marks[i].elapsed_time(marks[i + 1]) for i in range(len(marks) - 1)]
            watch.stop()
            result["iteration_ms"] = [round(t, 4) for t in times]
            result["host"] = watch.as_json()
            if self.late_timed:
                result["late_op"] = late_op(self.late_timed[0], marks, self.compute_timed, self.ops, a.late_ms)
            if timed or self.compute_timed:
                result["timeline"] = timeline(marks, timed + self.compute_timed)
            result["warmup"] = a.warmup
            if timed:  # where the time goes: communication ops by kind (label without the numbers)
                per_kind = {}
                for label, s, e, _ in timed:
                    kind = re.sub(r"\s*(mb|layer)\s+\d+", "", label).strip()
                    per_kind.setdefault(kind, []).append(s.elapsed_time(e) * 1e3)
                result["comm_us"] = {k: {"median": round(statistics.median(v), 1), "n": len(v)}
                                     for k, v in per_kind.items()}
            if self.compute_timed:  # measured sleep against the graph's duration, per compute kind
                graph_ns = {o.get("label", ""): o["duration_ns"] for o in self.ops if o["type"] == "compute"}
                per_kind = {}
                for label, s, e, _ in self.compute_timed:
                    kind = re.sub(r"\s*(mb|layer)\s+\d+", "", label).strip()
                    m, g = per_kind.setdefault(kind, ([], []))  # (label, start, end, iteration)
                    m.append(s.elapsed_time(e) * 1e3)
                    g.append(graph_ns.get(label, 0) / 1e3)
                result["compute_us"] = {k: {"median": round(statistics.median(m), 1), "n": len(m),
                                            "graph_us": round(statistics.median(g), 1)}
                                        for k, (m, g) in per_kind.items()}
        else:
            timed = []
            self.run_iteration(0, timed)
            if not a.cpu:
                self.wait_idle()
            per_label = {}
            for label, s, e, _ in timed:
                per_label.setdefault(label, []).append(s.elapsed_time(e) * 1e3)
            ops = {}
            for label, us in per_label.items():
                kept = us[a.warmup:] if len(us) > a.warmup else us
                ops[label] = {"mean_us": round(statistics.mean(kept), 2), "median_us": round(statistics.median(kept), 2),
                              "min_us": round(min(kept), 2), "n": len(kept)}
            result["ops"] = ops
        if not a.cpu:
            result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(self.dev)
            result["sleep_cycles_per_ns"] = round(self.clock.cycles_per_ns, 4)
        return result

    def finish(self, result):
        self.dist.destroy_process_group()  # finalize: the plugin writes its last operation lines
        if self.op_calls is not None:
            self.add_op_times(result)
        nccl = nccl_device_bytes()
        if nccl is not None:
            result["nccl_device_bytes"] = nccl
            result["peak_gpu_bytes"] = result.get("peak_reserved_bytes", 0) + nccl
        line = json.dumps(result)
        print("FIDELITY " + line, flush=True)
        if self.a.out:
            with open(self.a.out, "w") as f:
                f.write(line + "\n")

    def add_op_times(self, result):
        """--op-timing nccl: comm_us from NCCL's kernel stamps (op_times.py)."""
        records, bad = op_times.read_lines(op_times.log_path(self.op_times_dir, os.getpid()))
        matched = op_times.match_calls(self.op_calls, records)
        result["comm_timing"] = "nccl-kernel"
        result["op_times"] = op_times.summary(matched, bad)
        comm = op_times.comm_us(matched, lambda label: re.sub(r"\s*(mb|layer)\s+\d+", "", label).strip())
        if comm:
            result["comm_us"] = comm
        why = op_times.problem(result["op_times"], self.op_times_dir)
        if why:
            print("driver: " + why, file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(argv)
    # run-gpu.sh sends SIGUSR1 to a rank still running shortly before RUN_TIMEOUT: every thread's Python
    # stack goes to stderr (the rank's log), so a hung run says where it waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    import torch
    import torch.distributed as dist
    r = Runner(args, torch, dist)
    r.init()
    result = r.run()
    r.finish(result)


if __name__ == "__main__":
    sys.exit(main())
