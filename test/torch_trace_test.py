#!/usr/bin/env python3
"""scripts/prism_torch (the torch.distributed trace `prism capture` injects)
on a stand-in torch package with torch.distributed's call signatures (no
torch on CI): an unmodified program's calls, async flags, waits, batches,
groups and memory end up in FOLDER/torch-rank-<RANK>.jsonl; a program that
never calls torch.distributed writes nothing; a sitecustomize already on the
path still runs; prism-session-capture (the path given as the first
argument, if any) reads the trace the module wrote.

  torch_trace_test.py [PRISM_SESSION_CAPTURE]"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(os.path.dirname(HERE), "scripts", "prism_torch")

FAKE_INIT = '''
__version__ = "0.0-fake"
class _Cuda:
    allocated = 0
    def is_initialized(self):
        return True
    side = False
    def current_stream(self):
        return _Stream(7 if self.side else 1)
    def default_stream(self):
        return _Stream(1)
    def memory_stats_as_nested_dict(self):
        return {"allocated_bytes": {"all": {"current": self.allocated, "peak": 4096}},
                "reserved_bytes": {"all": {"current": 8192}}}
class _Stream:
    def __init__(self, handle):
        self.cuda_stream = handle
    def __eq__(self, other):
        return self.cuda_stream == other.cuda_stream
cuda = _Cuda()
class Tensor:
    def __init__(self, n, size=4):
        self.n, self.size = n, size
        self.dtype = "torch.float32" if size == 4 else "torch.bfloat16"
    def numel(self):
        return self.n
    def element_size(self):
        return self.size
'''

FAKE_C10D = '''
class Work:
    waited = 0
    def wait(self, timeout=None):
        Work.waited += 1
        return True
class ProcessGroup:
    def __init__(self, ranks, backend="nccl"):
        self.ranks, self.backend = ranks, backend
    def rank(self):
        return 0
    def size(self):
        return len(self.ranks)
class group:
    WORLD = ProcessGroup(list(range(8)))
class ReduceOp:
    SUM = 0
def is_available():
    return True
def get_process_group_ranks(g):
    return g.ranks
def get_backend(g=None):
    return (g or group.WORLD).backend
def get_global_rank(g, r):
    return g.ranks[r]
def new_group(ranks, backend="nccl"):
    return ProcessGroup(ranks, backend)
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    return Work() if async_op else None
def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    return Work() if async_op else None
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return Work() if async_op else None
def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    return Work()
def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    return Work()
class P2POp:
    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in [isend, irecv]:
            raise ValueError("Invalid op")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer
def batch_isend_irecv(p2p_op_list):
    for p in p2p_op_list:
        p.op(p.tensor, p.peer, p.group, p.tag)
    return [Work()]
__all__ = ["Work", "group", "ReduceOp", "is_available", "get_process_group_ranks", "get_backend",
           "get_global_rank", "new_group", "all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor",
           "isend", "irecv", "P2POp", "batch_isend_irecv"]
'''

PROGRAM = '''
import torch
import torch.distributed as dist
from torch.distributed import all_reduce
tp = dist.new_group([0, 1])
pp = dist.new_group([0, 4])
gloo = dist.new_group([0, 1, 2, 3], backend="gloo")
all_reduce(torch.Tensor(16, 2), group=tp)                       # sync, bf16
torch.cuda.allocated = 1000
w = dist.reduce_scatter_tensor(torch.Tensor(2), torch.Tensor(4), group=None, async_op=True)
ops = [dist.P2POp(dist.isend, torch.Tensor(8), 4, pp), dist.P2POp(dist.irecv, torch.Tensor(8), None, pp, group_peer=1)]
for work in dist.batch_isend_irecv(ops):
    work.wait()
torch.cuda.side = True
dist.all_gather_into_tensor(torch.Tensor(32), torch.Tensor(4), gloo, True)
w.wait()
print("program done")
'''


def fake_torch(root):
    os.makedirs(os.path.join(root, "torch", "distributed"))
    with open(os.path.join(root, "torch", "__init__.py"), "w") as f:
        f.write(FAKE_INIT)
    with open(os.path.join(root, "torch", "distributed", "__init__.py"), "w") as f:
        f.write("from .distributed_c10d import *\nfrom . import distributed_c10d\n")
    with open(os.path.join(root, "torch", "distributed", "distributed_c10d.py"), "w") as f:
        f.write(FAKE_C10D)


def run(root, program, env_extra):
    path = os.path.join(root, "program.py")
    with open(path, "w") as f:
        f.write(program)
    env = dict(os.environ, RANK="3", **env_extra)
    return subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, cwd=root, timeout=60)


def main():
    failures = []

    def check(cond, what):
        print(("ok: " if cond else "FAILED: ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as root:
        fake_torch(os.path.join(root, "lib"))
        other = os.path.join(root, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("print('the program\\'s own sitecustomize ran')\n")
        trace_dir = os.path.join(root, "trace")
        pythonpath = os.pathsep.join([HOOK, os.path.join(root, "lib"), other])
        out = run(root, PROGRAM, {"PYTHONPATH": pythonpath, "PRISM_TORCH_TRACE": trace_dir})
        check(out.returncode == 0 and "program done" in out.stdout, f"the program runs under the trace: {out.stderr}")
        check("own sitecustomize ran" in out.stdout, "a sitecustomize later on the path still runs")
        path = os.path.join(trace_dir, "torch-rank-3.jsonl")
        check(os.path.isfile(path), "the trace is written as torch-rank-<RANK>.jsonl")
        lines = [json.loads(l) for l in open(path)] if os.path.isfile(path) else [{}]
        check(lines[0].get("format") == "prism-torch-trace/1" and lines[0].get("rank") == 3, f"header: {lines[0]}")
        groups = {l["group"]: l for l in lines if "group" in l and "op" not in l}
        ops = [l for l in lines if "op" in l]
        waits = [l["wait"] for l in lines if "wait" in l]
        check([o["fn"] for o in ops] == ["all_reduce", "reduce_scatter_tensor", "isend", "irecv",
                                         "all_gather_into_tensor"], f"calls in order: {[o['fn'] for o in ops]}")
        check([o["async"] for o in ops] == [False, True, True, True, True], "async flags")
        check([o.get("dtype") for o in ops] == ["torch.bfloat16"] + ["torch.float32"] * 4, "dtypes")
        check([o["bytes"] for o in ops] == [32, 16, 32, 32, 128], f"bytes (full-buffer): {[o['bytes'] for o in ops]}")
        check([groups[o["group"]]["ranks"] for o in ops] == [[0, 1], list(range(8)), [0, 4], [0, 4], [0, 1, 2, 3]],
              "groups by their global ranks (None: the world)")
        check(groups[ops[4]["group"]]["backend"] == "gloo", "the backend of each group")
        check(ops[2].get("peer") == 4 and ops[3].get("peer") == 4 and ops[2].get("batch") == ops[3].get("batch") == 0,
              "a batch's P2POps, peers as global ranks (group_peer converted)")
        check(waits == [[2, 3], [1]], f"waits name the calls their work stands for: {waits}")
        check(ops[0].get("mem") == 0 and ops[1].get("mem") == 1000 and ops[1].get("peak") == 4096
              and ops[1].get("reserved") == 8192, "allocator memory at each call")
        check("stream" not in ops[0] and ops[4].get("stream") == 7, "a side stream is named, the default one not")

        if len(sys.argv) > 1 and os.path.isfile(path):  # prism-session-capture reads what the module wrote
            sessions = os.path.join(root, "sessions.rec")
            with open(sessions, "w") as f:
                f.write('{"format":"prism-session-recording/1","start_realtime_ns":0,"lookahead_ns":0,'
                        '"real_ranks":[3],"graph":"follow:w"}\n'
                        '{"at":1,"comm":{"hash":7,"graph_comm":0,"name":"world","members":[0,1,2,3,4,5,6,7]}}\n')
            out = subprocess.run([sys.argv[1], sessions, "--torch-trace", trace_dir, "-o", os.path.join(root, "rec")],
                                 capture_output=True, text=True, timeout=60)
            check(out.returncode == 2 and "no real rank reported an operation" in out.stderr
                  and "torch-rank-3.jsonl" not in out.stderr,
                  f"prism-session-capture --torch-trace reads the trace (then finds no operation): {out.stderr.strip()}")
        quiet = os.path.join(root, "quiet")
        out = run(root, "import torch.distributed\nprint('imported')\n",
                  {"PYTHONPATH": pythonpath, "PRISM_TORCH_TRACE": quiet})
        check(out.returncode == 0 and not os.path.exists(quiet), "a program that calls nothing writes no trace")
        out = run(root, PROGRAM, {"PYTHONPATH": os.pathsep.join([HOOK, os.path.join(root, "lib")])})
        check(out.returncode == 0 and not os.path.exists(os.path.join(root, "trace2")),
              "without PRISM_TORCH_TRACE nothing is patched")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
