#!/usr/bin/env python3
"""Capture, from Megatron-core itself, every process group
`parallel_state.initialize_model_parallel` creates, in creation order.

One process plays one rank of a chosen world with PyTorch's fake process-group
backend (torch.testing._internal.distributed.fake_pg: FakeStore, backend
"fake"; no GPU, no other process, no network). `torch.distributed.new_group`,
`new_subgroups_by_enumeration` and `split_group` are wrapped so that every
call is recorded (ranks as passed and sorted, backend, group_desc,
use_local_synchronization, pg_options' split fields if any, PyTorch's own
group counter after the call and the ncclCommSplit color PyTorch derives from
the ranks), then forwarded to PyTorch with the fake backend (a Gloo group
cannot form over a FakeStore, so its backend is recorded and replaced).

Megatron-core is imported from a source checkout (no pip install):

  PYTHONPATH=/path/to/Megatron-LM python3 scripts/gpu/capture_megatron_groups.py \
      --megatron /path/to/Megatron-LM --out-dir DIR            # every preset below
  python3 scripts/gpu/capture_megatron_groups.py --megatron M --world 64 --rank 0 \
      --tp 2 --pp 2 [--vpp 2] [--cp 1] [--ep 1] [--no-gloo] --out FILE.json

Presets (--out-dir), each for rank 0 and for the first rank of the last
pipeline stage: tp2-pp2-w64, tp2-pp2-w16, tp1-pp4-w8, tp2-pp2-cp1-vpp2-w16;
with --variants: tp2-pp2-cp2-w16, tp2-pp1-ep4-w16, tp2-pp2-cp2-ep2-w32,
tp1-pp2-vpp2-w8.
Output (one JSON file per world/rank/config):
  {"megatron": {"path", "commit", "describe"}, "torch": "2.11.0",
   "config": {...}, "rank": R, "world": W,
   "calls": [{"n": 1, "api": "new_group", "ranks": [...], "sorted_ranks": [...],
              "backend": "gloo"|null, "group_desc": "...", "use_local_synchronization": false,
              "pg_options": {...}|null, "group_count": 2, "member": true,
              "split_color": 123}, ...]}
`n` counts new_group-like calls from 1, as PyTorch numbers groups after the
default group "0"; prism-graphgen's `process_groups: megatron` plan is
checked against these files (test/megatron_groups_fixture_test.py).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

PRESETS = {
    "tp2-pp2-w64": dict(world=64, tp=2, pp=2, vpp=None, cp=1, ep=1),
    "tp2-pp2-w16": dict(world=16, tp=2, pp=2, vpp=None, cp=1, ep=1),
    "tp1-pp4-w8": dict(world=8, tp=1, pp=4, vpp=None, cp=1, ep=1),
    "tp2-pp2-cp1-vpp2-w16": dict(world=16, tp=2, pp=2, vpp=2, cp=1, ep=1),
}
# Further variants (context and expert parallelism, virtual pipeline without TP): --variants.
VARIANTS = {
    "tp2-pp2-cp2-w16": dict(world=16, tp=2, pp=2, vpp=None, cp=2, ep=1),
    "tp2-pp1-ep4-w16": dict(world=16, tp=2, pp=1, vpp=None, cp=1, ep=4),
    "tp2-pp2-cp2-ep2-w32": dict(world=32, tp=2, pp=2, vpp=None, cp=2, ep=2),
    "tp1-pp2-vpp2-w8": dict(world=8, tp=1, pp=2, vpp=2, cp=1, ep=1),
}


def split_color(sorted_ranks):
    """PyTorch's _process_group_color for these ranks (ncclCommSplit color)."""
    max_c_int = 2 ** (ctypes.sizeof(ctypes.c_int) * 8 - 1)
    return abs(hash(tuple(sorted_ranks))) % max_c_int


def describe_options(opts):
    if opts is None:
        return None
    out = {"type": type(opts).__name__}
    for name in ("split_from", "split_color", "global_ranks_in_group", "group_name",
                 "is_high_priority_stream", "_is_high_priority_stream"):
        if hasattr(opts, name):
            value = getattr(opts, name)
            if name == "split_from":
                value = None if value is None else repr(value)
            try:
                json.dumps(value)
            except TypeError:
                value = repr(value)
            out[name] = value
    return out


class Recorder:
    """Wraps torch.distributed's group constructors; records every call."""

    def __init__(self, dist, c10d, rank):
        self.dist, self.c10d, self.rank = dist, c10d, rank
        self.calls = []
        self.depth = 0  # > 0 inside new_subgroups_by_enumeration / split_group
        self.orig_new_group = c10d.new_group
        self.orig_enum = c10d.new_subgroups_by_enumeration
        self.orig_split = getattr(c10d, "split_group", None)

    def group_count(self):
        world = getattr(self.c10d, "_world", None)
        return getattr(world, "group_count", None)

    def new_group(self, ranks=None, timeout=None, backend=None, pg_options=None,
                  use_local_synchronization=False, group_desc=None, device_id=None, **kw):
        ranks_list = list(ranks) if ranks is not None else None
        sorted_ranks = sorted(ranks_list) if ranks_list is not None else None
        record = {
            "n": None, "api": "new_group" if self.depth == 0 else "new_group(inner)",
            "ranks": ranks_list, "sorted_ranks": sorted_ranks,
            "backend": None if backend is None else str(backend),
            "group_desc": group_desc,
            "use_local_synchronization": bool(use_local_synchronization),
            "pg_options": describe_options(pg_options),
            "member": sorted_ranks is None or self.rank in sorted_ranks,
            "split_color": split_color(sorted_ranks) if sorted_ranks else None,
        }
        # Forward with the fake backend: Gloo cannot form over a FakeStore,
        # and NCCL options mean nothing to the fake backend.
        group = self.orig_new_group(ranks=ranks_list, timeout=timeout, backend="fake", pg_options=None,
                                    use_local_synchronization=use_local_synchronization,
                                    group_desc=group_desc, **kw)
        record["group_count"] = self.group_count()
        self.calls.append(record)
        record["n"] = len([c for c in self.calls if c["api"] in ("new_group", "new_group(inner)")])
        return group

    def new_subgroups_by_enumeration(self, ranks_per_subgroup_list, timeout=None, backend=None,
                                     pg_options=None, group_desc=None, **kw):
        self.calls.append({"api": "new_subgroups_by_enumeration",
                           "ranks_per_subgroup_list": [list(r) for r in ranks_per_subgroup_list],
                           "backend": None if backend is None else str(backend),
                           "group_desc": group_desc, "pg_options": describe_options(pg_options)})
        self.depth += 1
        try:
            return self.orig_enum(ranks_per_subgroup_list, timeout=timeout, backend=backend,
                                  pg_options=pg_options, group_desc=group_desc, **kw)
        finally:
            self.depth -= 1

    def split_group(self, parent_pg=None, split_ranks=None, timeout=None, pg_options=None,
                    group_desc=None, **kw):
        self.calls.append({"api": "split_group",
                           "split_ranks": [list(r) for r in (split_ranks or [])],
                           "group_desc": group_desc, "pg_options": describe_options(pg_options),
                           "group_count_before": self.group_count()})
        # The fake backend cannot split; record only and fall back to new_group
        # for this rank's part so that the caller gets a group.
        mine = [r for r in (split_ranks or []) if self.rank in r]
        return self.new_group(mine[0] if mine else [self.rank], timeout=timeout, group_desc=group_desc)

    def install(self):
        for module in (self.dist, self.c10d):
            module.new_group = self.new_group
            module.new_subgroups_by_enumeration = self.new_subgroups_by_enumeration
            if self.orig_split is not None:
                module.split_group = self.split_group


def git_info(path):
    """The checkout's commit, only when `path` is itself the top of a git checkout (a copy of
    Megatron inside another repository must not report that repository's commit)."""
    def run(*args):
        try:
            return subprocess.run(["git", "-C", path, *args], capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    info = {"path": os.path.abspath(path), "commit": None, "describe": None, "date": None}
    top = run("rev-parse", "--show-toplevel")
    if top and os.path.realpath(top) == os.path.realpath(path):
        info.update(commit=run("rev-parse", "HEAD"), describe=run("describe", "--tags", "--always"),
                    date=run("log", "-1", "--format=%cI"))
    return info


def capture_one(args):
    if args.megatron:
        sys.path.insert(0, os.path.abspath(args.megatron))
    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers backend "fake"

    os.environ.setdefault("TORCH_DIST_INIT_BARRIER", "0")  # no store barrier over a FakeStore

    dist.init_process_group(backend="fake", store=FakeStore(), rank=args.rank, world_size=args.world)
    recorder = Recorder(dist, c10d, args.rank)
    recorder.install()

    from megatron.core import parallel_state
    kwargs = dict(tensor_model_parallel_size=args.tp, pipeline_model_parallel_size=args.pp,
                  virtual_pipeline_model_parallel_size=args.vpp, context_parallel_size=args.cp,
                  expert_model_parallel_size=args.ep)
    if args.no_gloo:
        kwargs["create_gloo_process_groups"] = False
    parallel_state.initialize_model_parallel(**kwargs)

    result = {
        "megatron": git_info(args.megatron) if args.megatron else None,
        "torch": torch.__version__,
        "config": {"tp": args.tp, "pp": args.pp, "vpp": args.vpp, "cp": args.cp, "ep": args.ep,
                   "create_gloo_process_groups": not args.no_gloo},
        "world": args.world, "rank": args.rank,
        "group_count_at_end": recorder.group_count(),
        "calls": recorder.calls,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"{args.out}: {len([c for c in recorder.calls if c.get('n')])} groups "
          f"(PyTorch group count {recorder.group_count()})", flush=True)
    dist.destroy_process_group()


def capture_presets(args):
    os.makedirs(args.out_dir, exist_ok=True)
    failures = 0
    for name, cfg in (VARIANTS if args.variants else PRESETS).items():
        last_stage_rank = cfg["world"] - cfg["world"] // cfg["pp"]
        for rank in sorted({0, last_stage_rank}):
            out = os.path.join(args.out_dir, f"{name}-r{rank}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--megatron", args.megatron,
                   "--world", str(cfg["world"]), "--rank", str(rank), "--tp", str(cfg["tp"]),
                   "--pp", str(cfg["pp"]), "--cp", str(cfg["cp"]), "--ep", str(cfg["ep"]), "--out", out]
            if cfg["vpp"]:
                cmd += ["--vpp", str(cfg["vpp"])]
            # One process per capture: parallel_state and c10d keep global state.
            rc = subprocess.run(cmd).returncode
            if rc != 0:
                print(f"capture {name} rank {rank} failed (exit {rc})", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


def add_config_args(ap):
    """The flags that choose what to record (shared with scripts/megatron_groups_from_source.py)."""
    ap.add_argument("--out-dir", help="every preset into this folder")
    ap.add_argument("--variants", action="store_true", help="with --out-dir: the further variants instead")
    ap.add_argument("--world", type=int)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--vpp", type=int, default=None)
    ap.add_argument("--cp", type=int, default=1)
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--no-gloo", action="store_true", help="create_gloo_process_groups=False")
    ap.add_argument("--out", help="output JSON file (one world, rank and config)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megatron", default=os.environ.get("MEGATRON_PATH"),
                    help="Megatron-LM source checkout (put on sys.path)")
    add_config_args(ap)
    args = ap.parse_args()
    if not args.megatron:
        ap.error("--megatron PATH (a Megatron-LM source checkout) is required")
    if args.out_dir:
        return capture_presets(args)
    if not args.world or not args.out:
        ap.error("give --out-dir for the presets, or --world and --out for one capture")
    capture_one(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
