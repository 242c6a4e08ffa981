#!/usr/bin/env python3
"""scripts/gpu/capture_megatron_groups.py without torch or Megatron: stand-ins
for torch.distributed (a group counter as PyTorch keeps one), PyTorch's fake
backend and a parallel_state that makes NCCL and Gloo groups, so that the
capture's wrapping and its JSON are checked on every build (the real capture
runs on the GPU host)."""
import importlib.util
import json
import os
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripts", "gpu", "capture_megatron_groups.py")


def load_script():
    spec = importlib.util.spec_from_file_location("capture_megatron_groups", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_modules(calls_seen):
    torch = types.ModuleType("torch")
    torch.__version__ = "fake"
    dist = types.ModuleType("torch.distributed")
    c10d = types.ModuleType("torch.distributed.distributed_c10d")
    c10d._world = types.SimpleNamespace(group_count=0)
    state = {}

    def init_process_group(backend, store, rank, world_size):
        state.update(rank=rank, world=world_size)
        c10d._world.group_count = 1  # the default group is "0"

    def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
                  group_desc=None, **kw):
        calls_seen.append(backend)
        c10d._world.group_count += 1
        return object()

    for m in (dist, c10d):
        m.init_process_group = init_process_group
        m.destroy_process_group = lambda: None
        m.new_group = new_group
        m.new_subgroups_by_enumeration = lambda *a, **k: None
    dist.distributed_c10d = c10d
    torch.distributed = dist
    fake_pg = types.ModuleType("torch.testing._internal.distributed.fake_pg")
    fake_pg.FakeStore = lambda: object()

    megatron = types.ModuleType("megatron")
    megatron.__path__ = []
    core = types.ModuleType("megatron.core")
    core.__path__ = []
    ps = types.ModuleType("megatron.core.parallel_state")

    def initialize_model_parallel(tensor_model_parallel_size, pipeline_model_parallel_size, **kw):
        import torch as t  # the stand-in, as Megatron's module sees it
        for ranks in ([0, 2], [1, 3]):
            t.distributed.new_group(ranks=ranks, group_desc="DATA_PARALLEL_GROUP")
            t.distributed.new_group(ranks=ranks, backend="gloo", group_desc="DATA_PARALLEL_GROUP_GLOO")
        t.distributed.new_group(ranks=[3, 1], group_desc="OTHER")

    ps.initialize_model_parallel = initialize_model_parallel
    core.parallel_state = ps
    megatron.core = core
    mods = {"torch": torch, "torch.distributed": dist, "torch.distributed.distributed_c10d": c10d,
            "torch.testing": types.ModuleType("torch.testing"),
            "torch.testing._internal": types.ModuleType("torch.testing._internal"),
            "torch.testing._internal.distributed": types.ModuleType("torch.testing._internal.distributed"),
            "torch.testing._internal.distributed.fake_pg": fake_pg,
            "megatron": megatron, "megatron.core": core, "megatron.core.parallel_state": ps}
    return mods


class Capture(unittest.TestCase):
    def test_every_call_recorded_in_order_with_pytorchs_numbers(self):
        script = load_script()
        forwarded = []
        saved = dict(sys.modules)
        sys.modules.update(fake_modules(forwarded))
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "t.json")
                args = types.SimpleNamespace(megatron=None, world=4, rank=1, tp=1, pp=1, vpp=None, cp=1, ep=1,
                                             no_gloo=False, out=out)
                script.capture_one(args)
                with open(out) as f:
                    table = json.load(f)
        finally:
            sys.modules.clear()
            sys.modules.update(saved)
        calls = table["calls"]
        self.assertEqual([c["n"] for c in calls], [1, 2, 3, 4, 5])
        self.assertEqual([c["backend"] for c in calls], [None, "gloo", None, "gloo", None])
        self.assertEqual([c["group_count"] for c in calls], [2, 3, 4, 5, 6])  # n + 1: PyTorch's group n
        self.assertEqual(calls[4]["sorted_ranks"], [1, 3])
        self.assertEqual(calls[4]["ranks"], [3, 1])
        self.assertEqual([c["member"] for c in calls], [False, False, True, True, True])
        self.assertEqual(calls[1]["group_desc"], "DATA_PARALLEL_GROUP_GLOO")
        self.assertEqual(calls[0]["split_color"], script.split_color([0, 2]))
        self.assertEqual(forwarded, ["fake"] * 5)  # Gloo cannot form over a FakeStore: forwarded as fake
        self.assertEqual(table["group_count_at_end"], 6)


if __name__ == "__main__":
    unittest.main()
