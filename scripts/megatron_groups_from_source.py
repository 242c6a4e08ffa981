#!/usr/bin/env python3
"""Derive, without torch, the process groups Megatron-core's
`parallel_state.initialize_model_parallel` creates: run Megatron's own
megatron/core/parallel_state.py (read from a file, e.g. `git show
REV:megatron/core/parallel_state.py`) against small stand-ins for torch,
numpy and the two Megatron modules it imports, recording every
`torch.distributed.new_group` call in order.

This is the build host's stand-in for scripts/gpu/capture_megatron_groups.py
(which runs the real Megatron-core and torch with PyTorch's fake backend);
both write the same JSON layout, this one with "source": "stub". Stand-ins:
torch.distributed answers is_initialized/get_rank/get_world_size and records
new_group; nothing else of torch is called on the default arguments.

  python3 scripts/megatron_groups_from_source.py --parallel-state FILE \
      --world 16 --rank 0 --tp 2 --pp 2 [--vpp 2] [--cp 1] [--ep 1] [--no-gloo] \
      [--label REV] --out FILE.json
  python3 scripts/megatron_groups_from_source.py --parallel-state FILE --label REV --out-dir DIR
      (every preset of capture_megatron_groups.py; --variants: its variants)
"""
import argparse
import importlib.util
import json
import os
import sys
import types

# The presets and PyTorch's split color, shared with the GPU-host capture
# (which imports torch only when it captures).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
from capture_megatron_groups import PRESETS, VARIANTS, add_config_args, split_color  # noqa: E402


def stub_modules(world, rank, calls):
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    torch.distributed = dist
    torch._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(ProcessGroup=object))
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0, synchronize=lambda: None)
    dist.is_initialized = lambda: True
    dist.get_world_size = lambda group=None: world
    dist.get_rank = lambda group=None: rank

    def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
                  use_local_synchronization=False, group_desc=None):
        sorted_ranks = sorted(ranks)
        calls.append({
            "n": len(calls) + 1, "api": "new_group", "ranks": list(ranks), "sorted_ranks": sorted_ranks,
            "backend": backend, "group_desc": group_desc,
            "use_local_synchronization": bool(use_local_synchronization),
            "pg_options": None, "group_count": len(calls) + 2,
            "member": rank in sorted_ranks, "split_color": split_color(sorted_ranks)})
        return ("group", len(calls))

    dist.new_group = new_group

    numpy = types.ModuleType("numpy")

    def prod(values):
        out = 1
        for v in values:
            out *= v
        return out
    numpy.prod = prod

    megatron = types.ModuleType("megatron")
    megatron.__path__ = []
    core = types.ModuleType("megatron.core")
    core.__path__ = []
    utils = types.ModuleType("megatron.core.utils")
    utils.GlobalMemoryBuffer = lambda *a, **k: object()
    utils.is_torch_min_version = lambda version: True
    inference = types.ModuleType("megatron.core.inference")
    inference.__path__ = []
    symmetric = types.ModuleType("megatron.core.inference.symmetric_memory")
    symmetric.SymmetricMemoryManager = type("SymmetricMemoryManager", (), {})
    return {"torch": torch, "torch.distributed": dist, "numpy": numpy, "megatron": megatron,
            "megatron.core": core, "megatron.core.utils": utils, "megatron.core.inference": inference,
            "megatron.core.inference.symmetric_memory": symmetric}


def derive(parallel_state_path, world, rank, tp, pp, vpp, cp, ep, gloo):
    calls = []
    saved = dict(sys.modules)
    try:
        sys.modules.update(stub_modules(world, rank, calls))
        spec = importlib.util.spec_from_file_location("megatron.core.parallel_state", parallel_state_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["megatron.core.parallel_state"] = module
        spec.loader.exec_module(module)
        kwargs = dict(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                      virtual_pipeline_model_parallel_size=vpp, context_parallel_size=cp,
                      expert_model_parallel_size=ep)
        if not gloo:
            kwargs["create_gloo_process_groups"] = False
        module.initialize_model_parallel(**kwargs)
    finally:
        sys.modules.clear()
        sys.modules.update(saved)
    return calls


def write(path, label, args_cfg, world, rank, calls):
    result = {"source": "stub", "megatron": {"describe": label}, "torch": None,
              "config": args_cfg, "world": world, "rank": rank,
              "group_count_at_end": len(calls) + 1, "calls": calls}
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"{path}: {len(calls)} groups")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parallel-state", required=True, help="a copy of megatron/core/parallel_state.py")
    ap.add_argument("--label", default=None, help="Megatron revision the file is from")
    add_config_args(ap)
    args = ap.parse_args()
    jobs = []
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        for name, cfg in (VARIANTS if args.variants else PRESETS).items():
            for rank in sorted({0, cfg["world"] - cfg["world"] // cfg["pp"]}):
                jobs.append((os.path.join(args.out_dir, f"{name}-r{rank}.json"), dict(cfg, rank=rank, gloo=True)))
    elif args.world and args.out:
        jobs.append((args.out, dict(world=args.world, rank=args.rank, tp=args.tp, pp=args.pp, vpp=args.vpp,
                                    cp=args.cp, ep=args.ep, gloo=not args.no_gloo)))
    else:
        ap.error("give --out-dir, or --world and --out")
    for path, c in jobs:
        calls = derive(args.parallel_state, c["world"], c["rank"], c["tp"], c["pp"], c["vpp"], c["cp"], c["ep"],
                       c["gloo"])
        cfg = {k: c[k] for k in ("tp", "pp", "vpp", "cp", "ep")}
        cfg["create_gloo_process_groups"] = c["gloo"]
        write(path, args.label, cfg, c["world"], c["rank"], calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
