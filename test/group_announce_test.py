#!/usr/bin/env python3
"""scripts/prism_torch/prism_group_announce.py (what `prism capture` injects so
that prismd --follow learns split_group's groups) on a stand-in torch package
with torch.distributed's names (no torch on CI), run the way a program runs
under prism capture (sitecustomize first on PYTHONPATH, PRISM_ANNOUNCE_GROUPS
set): DeviceMesh's split_group, bound before the hook could see it, and
torch.distributed.split_group both announce this rank's group (global ranks)
in the default store, set then read back, before the split; a rank in no group
announces nothing; a split_group of a subgroup maps its ranks to global ones;
a store that fails is reported once and the split still runs; without the
variable nothing is wrapped."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(os.path.dirname(HERE), "scripts", "prism_torch")

FAKE_C10D = '''
import os
LOG = []          # what the store saw, in order
SPLITS = []       # the split_group calls that ran
class Store:
    fail = False
    def set(self, key, value):
        if Store.fail:
            raise RuntimeError("store gone")
        LOG.append(("set", key, value))
    def get(self, key):
        LOG.append(("get", key))
        return b""
_store = Store()
class ProcessGroup:
    def __init__(self, ranks):
        self.ranks = ranks
_world = ProcessGroup(list(range(8)))
def _get_default_store():
    return _store
def _get_default_group():
    return _world
def get_process_group_ranks(g):
    return g.ranks
def get_rank():
    return int(os.environ["RANK"])
def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None):
    SPLITS.append((len(LOG), split_ranks, group_desc))
    return "child"
'''

FAKE_DIST_INIT = '''
from . import distributed_c10d
from .distributed_c10d import split_group
from . import device_mesh
'''

FAKE_MESH = '''
from torch.distributed.distributed_c10d import split_group
def make_dim(split_ranks):
    return split_group(split_ranks=split_ranks, group_desc="mesh_tp")
'''

PROGRAM = '''
import json, os, sys
import torch.distributed as dist
from torch.distributed import device_mesh, distributed_c10d as c10d
out = {}
out["mesh"] = device_mesh.make_dim([[0, 1, 2, 3], [4, 5, 6, 7]])
out["plain"] = dist.split_group(c10d.ProcessGroup([2, 4, 6, 5]), [[0, 3], [1, 2]], None, None, "sub")
out["none"] = dist.split_group(split_ranks=[[0, 1]])
c10d.Store.fail = True
out["failed"] = dist.split_group(split_ranks=[[4, 5, 6, 7]])
out["log"] = c10d.LOG
out["splits"] = c10d.SPLITS
out["wrapped"] = getattr(dist.split_group, "_prism_announced", False)
print(json.dumps(out))
'''


def make_torch(root):
    pkg = os.path.join(root, "torch", "distributed")
    os.makedirs(pkg)
    open(os.path.join(root, "torch", "__init__.py"), "w").write("")
    open(os.path.join(pkg, "__init__.py"), "w").write(FAKE_DIST_INIT)
    open(os.path.join(pkg, "distributed_c10d.py"), "w").write(FAKE_C10D)
    open(os.path.join(pkg, "device_mesh.py"), "w").write(FAKE_MESH)


def run(root, rank, announce):
    env = dict(os.environ, RANK=str(rank), PYTHONPATH=os.pathsep.join([HOOK, root]))
    env.pop("PRISM_TORCH_TRACE", None)
    if announce:
        env["PRISM_ANNOUNCE_GROUPS"] = "1"
    else:
        env.pop("PRISM_ANNOUNCE_GROUPS", None)
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"program failed: {p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as root:
        make_torch(root)
        out, err = run(root, 5, announce=True)
        log = [tuple(x) for x in out["log"]]
        check(out["wrapped"], "torch.distributed.split_group is not wrapped")
        # DeviceMesh bound split_group at its import; its call announced rank 5's group first.
        check(log[:2] == [("set", "prism/split_group/5/0", json.dumps({"members": [4, 5, 6, 7]})),
                          ("get", "prism/split_group/5/0")], f"mesh announcement: {log[:2]}")
        check(out["splits"][0][0] == 2, f"the mesh split ran before its announcement was read back: {out['splits']}")
        # A subgroup [2, 4, 6, 5]: rank 5 is its index 3, in [0, 3] -> global [2, 5].
        check(log[2:4] == [("set", "prism/split_group/5/1", json.dumps({"members": [2, 5]})),
                           ("get", "prism/split_group/5/1")], f"subgroup announcement: {log[2:4]}")
        # Rank 5 in no group of [[0, 1]]: nothing announced, the split still ran.
        check(len(log) == 4, f"a rank in no group announced something: {log[4:]}")
        check([s[1] for s in out["splits"]] == [[[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 3], [1, 2]], [[0, 1]], [[4, 5, 6, 7]]],
              f"the original split_group did not run every time: {out['splits']}")
        check(out["failed"] == "child", "a failing store stopped the split")
        check(err.count("split_group not announced to prismd") == 1, f"the store's failure is not said once: {err!r}")

        out, err = run(root, 5, announce=False)
        check(not out["wrapped"] and out["log"] == [], "without PRISM_ANNOUNCE_GROUPS something was wrapped")

    for f in failures:
        print("FAIL:", f)
    print("group announce:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
