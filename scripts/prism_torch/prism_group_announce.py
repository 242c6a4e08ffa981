"""Tells prismd, through PyTorch's store, which ranks each torch.distributed.split_group
call puts this rank with, for `prism capture` without a graph (prismd --follow;
docs/capture.md, "prismd without the program's graph").

Why: split_group (what DeviceMesh calls on a default group started with device_id)
makes one ncclCommSplit per call, and PyTorch 2.11 passes each group's lowest rank as
its color: the color does not say which ranks the group has, and prismd, playing the
other ranks, must know them before the split completes. new_group's color is a hash of
its ranks, which prismd finds by search, so it needs nothing from here.

What: before the original split_group runs, this rank's group (global ranks, ascending)
goes into the default store under

  prism/split_group/<global rank>/<k>     {"members": [r, ...]}     (k: this rank's k-th call)

and is read back, so that the store (hosted by prismd) has seen the key before the
split begins. A rank in no group of the call (NCCL's NOCOLOR) announces nothing.
Loaded by sitecustomize.py when PRISM_ANNOUNCE_GROUPS is set (prism capture sets it).

Never raises into the program: a failure to announce is printed once, and the split
goes on (prismd then refuses it, saying why).
"""
import inspect
import json
import sys

import prism_after_import

KEY_PREFIX = "prism/split_group"


class _Announcer:
    def __init__(self, c10d):
        self.c10d = c10d
        self.calls = 0
        self.warned = False

    def warn(self, e):
        if not self.warned:
            self.warned = True
            print(f"prism: split_group not announced to prismd: {type(e).__name__}: {e}", file=sys.stderr,
                  flush=True)

    def members(self, parent_pg, split_ranks):
        """This rank's group of the call as global ranks, ascending; None when it is in none."""
        c10d = self.c10d
        parent = parent_pg if parent_pg is not None else c10d._get_default_group()
        parent_ranks = c10d.get_process_group_ranks(parent)  # global ranks, in the parent's order
        me = c10d.get_rank()
        if me not in parent_ranks:
            return None
        mine = parent_ranks.index(me)
        for group in split_ranks or []:
            if mine in group:
                return sorted(parent_ranks[r] for r in group)
        return None

    def announce(self, parent_pg, split_ranks):
        members = self.members(parent_pg, split_ranks)
        if members is None:
            return
        key = f"{KEY_PREFIX}/{self.c10d.get_rank()}/{self.calls}"
        self.calls += 1
        store = self.c10d._get_default_store()
        store.set(key, json.dumps({"members": members}))
        store.get(key)  # a round trip: the store has acted on the set before the split starts


def wrap_split_group(c10d, original):
    """split_group with the announcement first; the original's signature and result."""
    announcer = _Announcer(c10d)
    signature = inspect.signature(original)

    def split_group(*args, **kwargs):
        try:
            bound = signature.bind_partial(*args, **kwargs)
            announcer.announce(bound.arguments.get("parent_pg"), bound.arguments.get("split_ranks"))
        except Exception as e:  # never stop the program for the announcement's sake
            announcer.warn(e)
        return original(*args, **kwargs)

    split_group._prism_announced = True
    split_group.__wrapped__ = original
    return split_group


def patch(dist):
    """Wraps split_group where the program and DeviceMesh find it."""
    c10d = dist.distributed_c10d
    original = getattr(c10d, "split_group", None)
    if original is None or getattr(original, "_prism_announced", False):
        return
    wrapped = wrap_split_group(c10d, original)
    c10d.split_group = wrapped
    if getattr(dist, "split_group", None) is original:
        dist.split_group = wrapped
    mesh = sys.modules.get("torch.distributed.device_mesh")
    if mesh is not None and getattr(mesh, "split_group", None) is original:
        mesh.split_group = wrapped


def install():
    """Patches torch.distributed now if it is imported, else when it is (DeviceMesh, imported by it,
    has then bound split_group already, which patch() replaces too)."""
    prism_after_import.call_after_import("torch.distributed", patch, "split_group announcements")
