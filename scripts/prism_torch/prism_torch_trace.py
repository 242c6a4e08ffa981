"""What a real rank's program asks of torch.distributed, for `prism capture`
(docs/capture.md, "Streams, dependencies and memory").

NCCL's profiler (the plugin's view) sees every NCCL operation but not what
PyTorch does around it: whether the program waits for it at once (async_op
False: the compute stream waits right after the call) or later (async_op
True: the compute stream waits at work.wait(), so the operation overlaps
what runs in between), nor the program's memory. This module, loaded by
sitecustomize.py when PRISM_TORCH_TRACE names a folder, wraps the
torch.distributed calls as torch.distributed is imported (no change to the
program) and writes FOLDER/torch-rank-<RANK>.jsonl, JSON lines:

  {"format": "prism-torch-trace/1", "rank": R, "torch": "2.11.0"}
  {"group": G, "ranks": [...], "backend": "nccl", "name": "3"}   a process group, first time it is used
  {"op": N, "fn": "all_reduce", "group": G, "async": false, "bytes": B, "dtype": "torch.bfloat16", "t": NS,
   "mem": A, "peak": P, "reserved": V}                   one call, in call order
  {"op": N, "fn": "isend", "group": G, "peer": P, "batch": K, ...}   one P2POp of batch_isend_irecv K
  {"wait": [N, ...], "t": NS}                            work.wait() of those calls

`bytes` follows the graph's full-buffer convention (an all-gather's output,
a reduce-scatter's input); `peer` and the ranks are global ranks; `t` is
CLOCK_REALTIME ns at the call; `mem`, `peak`, `reserved`: the CUDA caching
allocator's allocated, peak allocated and reserved bytes at the call (absent
before CUDA is initialised); `stream`: the current CUDA stream when it is
not the default one (the capture puts such a call on a stream of its own,
docs/capture.md "side streams"). Calls made
inside another wrapped call (the
isends of a batch_isend_irecv) are recorded once, by the outer call.

Never raises into the program: a failure to record is printed once and the
call goes on unrecorded.
"""
import atexit
import inspect
import json
import os
import sys
import threading
import time

import prism_after_import

FORMAT = "prism-torch-trace/1"
# the torch.distributed calls recorded
COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather", "reduce_scatter",
               "broadcast", "reduce", "all_to_all_single", "all_to_all", "barrier", "gather", "scatter",
               "send", "recv", "isend", "irecv", "batch_isend_irecv")


def _nbytes(t):
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:
        return 0


def _payload(fn, a):
    """Bytes of a call in the graph's convention, from its bound arguments `a`."""
    if fn in ("all_reduce", "broadcast", "reduce", "send", "recv", "isend", "irecv"):
        return _nbytes(a.get("tensor"))
    if fn == "all_gather_into_tensor":
        return _nbytes(a.get("output_tensor"))
    if fn in ("reduce_scatter_tensor", "all_to_all_single"):
        return _nbytes(a.get("input"))
    if fn == "all_gather":
        return sum(_nbytes(t) for t in (a.get("tensor_list") or []))
    if fn == "reduce_scatter":
        return sum(_nbytes(t) for t in (a.get("input_list") or []))
    if fn == "all_to_all":
        return sum(_nbytes(t) for t in (a.get("input_tensor_list") or []))
    return 0


def _dtype(fn, a):
    """The element type of the call's main tensor, as torch names it ("torch.bfloat16"), or None."""
    name = {"all_gather_into_tensor": "output_tensor", "reduce_scatter_tensor": "input",
            "all_to_all_single": "input"}.get(fn, "tensor")
    t = a.get(name)
    if t is None and fn in ("all_gather", "reduce_scatter", "all_to_all"):
        lst = a.get({"all_gather": "tensor_list", "reduce_scatter": "input_list"}.get(fn, "input_tensor_list"))
        t = lst[0] if lst else None
    dtype = getattr(t, "dtype", None)
    return str(dtype) if dtype is not None else None


def _global_peer(dist, group, peer, group_peer):
    if peer is not None:
        return int(peer)
    if group_peer is not None:
        return int(dist.get_global_rank(group if group is not None else dist.group.WORLD, group_peer))
    return None


class Trace:
    def __init__(self, folder, torch):
        self.torch = torch
        self.folder = folder
        self.file = None          # opened at the first call recorded (a python that only imports torch writes none)
        self.lock = threading.RLock()
        self.depth = threading.local()
        self.next_op = 0
        self.next_batch = 0
        self.groups = {}          # id(group object) -> (number, group object)
        self.pending = {}         # id(work) -> (work, [op numbers])
        self.warned = False
        self.lines = 0
        atexit.register(self.close)

    def start(self):
        os.makedirs(self.folder, exist_ok=True)
        rank = os.environ.get("RANK", f"pid{os.getpid()}")
        self.file = open(os.path.join(self.folder, f"torch-rank-{rank}.jsonl"), "w", buffering=1 << 16)
        self.file.write(json.dumps({"format": FORMAT, "rank": int(rank) if rank.isdigit() else -1,
                                    "torch": str(getattr(self.torch, "__version__", "?"))}) + "\n")

    def line(self, obj):
        if self.file is None:
            self.start()
        self.file.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.lines += 1
        if self.lines % 256 == 0:
            self.file.flush()

    def close(self):
        with self.lock:
            if self.file is not None and not self.file.closed:
                self.file.close()

    def warn(self, e):
        if not self.warned:
            self.warned = True
            print(f"prism: torch trace: {type(e).__name__}: {e} (recording goes on where it can)", file=sys.stderr,
                  flush=True)

    def group(self, dist, g):
        g = g if g is not None else dist.group.WORLD
        key = id(g)
        if key not in self.groups:
            number = len(self.groups)
            self.groups[key] = (number, g)   # the object is kept: its id stays unique
            self.line({"group": number, "ranks": list(dist.get_process_group_ranks(g)),
                       "backend": str(dist.get_backend(g)), "name": str(getattr(g, "group_name", ""))})
        return self.groups[key][0]

    def memory(self):
        cuda = getattr(self.torch, "cuda", None)
        try:
            if cuda is None or not cuda.is_initialized():
                return {}
            s = cuda.memory_stats_as_nested_dict()
            out = {"mem": s["allocated_bytes"]["all"]["current"], "peak": s["allocated_bytes"]["all"]["peak"],
                   "reserved": s["reserved_bytes"]["all"]["current"]}
            current = cuda.current_stream()
            if current != cuda.default_stream():  # a side stream (FSDP's all-gather stream, say): which one
                out["stream"] = int(current.cuda_stream)
            return out
        except Exception:
            return {}

    def op(self, dist, fn, group, is_async, nbytes, peer=None, batch=None, dtype=None):
        number = self.next_op
        self.next_op += 1
        rec = {"op": number, "fn": fn, "group": self.group(dist, group), "async": bool(is_async), "bytes": nbytes}
        if dtype is not None:
            rec["dtype"] = dtype
        if peer is not None:
            rec["peer"] = int(peer)
        if batch is not None:
            rec["batch"] = batch
        rec["t"] = time.time_ns()
        rec.update(self.memory())
        self.line(rec)
        return number

    def returned(self, work, numbers):
        """Remembers which calls `work` (a Work, a list of them, or None) stands for."""
        works = work if isinstance(work, (list, tuple)) else [work]
        for w in works:
            if w is None or not hasattr(w, "wait"):
                continue
            self.patch_wait(type(w))
            self.pending[id(w)] = (w, numbers)
        while len(self.pending) > 65536:          # never waited: forget the oldest
            self.pending.pop(next(iter(self.pending)))

    def patch_wait(self, cls):
        if getattr(cls, "_prism_wait_patched", False):
            return
        original = cls.wait
        trace = self

        def wait(self, *args, **kwargs):
            try:
                with trace.lock:
                    entry = trace.pending.pop(id(self), None)
                    if entry is not None:
                        trace.line({"wait": entry[1], "t": time.time_ns()})
            except Exception as e:
                trace.warn(e)
            return original(self, *args, **kwargs)

        try:
            cls.wait = wait
            cls._prism_wait_patched = True
        except (AttributeError, TypeError) as e:  # a type that cannot be patched: waits go unrecorded
            self.warn(e)


def _bound(signature, args, kwargs):
    try:
        return signature.bind(*args, **kwargs).arguments if signature is not None else dict(kwargs)
    except TypeError:
        return dict(kwargs)


def _record(trace, dist, fn, signature, args, kwargs):
    """The op numbers of one call (one per P2POp of a batch)."""
    a = _bound(signature, args, kwargs)
    if fn == "batch_isend_irecv":
        batch = trace.next_batch
        trace.next_batch += 1
        numbers = []
        for p in a.get("p2p_op_list") or []:
            kind = getattr(p.op, "_prism_name", getattr(p.op, "__name__", "?"))
            peer = _global_peer(dist, p.group, getattr(p, "peer", None), getattr(p, "group_peer", None))
            numbers.append(trace.op(dist, kind, p.group, True, _nbytes(p.tensor), peer=peer, batch=batch,
                                    dtype=_dtype("isend", {"tensor": p.tensor})))
        return numbers
    peer = None
    if fn in ("send", "isend"):
        peer = _global_peer(dist, a.get("group"), a.get("dst"), a.get("group_dst"))
    elif fn in ("recv", "irecv"):
        peer = _global_peer(dist, a.get("group"), a.get("src"), a.get("group_src"))
    is_async = fn in ("isend", "irecv") or bool(a.get("async_op", False))
    return [trace.op(dist, fn, a.get("group"), is_async, _payload(fn, a), peer=peer, dtype=_dtype(fn, a))]


def _wrap(trace, dist, fn, original):
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None

    def call(*args, **kwargs):
        if getattr(trace.depth, "n", 0) > 0:
            return original(*args, **kwargs)
        numbers = []
        try:
            with trace.lock:
                numbers = _record(trace, dist, fn, signature, args, kwargs)
        except Exception as e:
            trace.warn(e)
        trace.depth.n = getattr(trace.depth, "n", 0) + 1
        try:
            result = original(*args, **kwargs)
        finally:
            trace.depth.n -= 1
        if numbers:
            try:
                with trace.lock:
                    trace.returned(result, numbers)
            except Exception as e:
                trace.warn(e)
        return result

    call.__name__ = getattr(original, "__name__", fn)
    call.__doc__ = getattr(original, "__doc__", None)
    call.__wrapped__ = original
    call._prism_name = fn
    return call


def patch(dist, torch, folder):
    """Wraps torch.distributed's calls (and distributed_c10d's, which P2POp checks against)."""
    if getattr(dist, "_prism_traced", False) or not getattr(dist, "is_available", lambda: False)():
        return None
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    trace = Trace(folder, torch)
    for fn in COLLECTIVES:
        original = getattr(dist, fn, None)
        if original is None:
            continue
        wrapped = _wrap(trace, dist, fn, original)
        setattr(dist, fn, wrapped)
        if c10d is not None and getattr(c10d, fn, None) is original:
            setattr(c10d, fn, wrapped)
    dist._prism_traced = True
    return trace


def install(folder):
    """Patches torch.distributed now if it is imported, else when it is."""
    prism_after_import.call_after_import("torch.distributed", lambda m: patch(m, sys.modules["torch"], folder),
                                         "torch trace")
