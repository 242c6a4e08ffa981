#!/usr/bin/env python3
"""Run TorchTitan's own training entry (torchtitan/train.py, `main(Trainer)`) under Prism.

    python examples/torchtitan/prism_titan.py --titan DIR [--lazy] [--keep-barrier] \
        -- --job.config_file examples/torchtitan/llama3_debug.toml --training.steps 10 ...

DIR is a TorchTitan source tree (v0.2.2, 73a0e69: `scripts/titan-source.sh` makes one); the
arguments after `--` are TorchTitan's own (its TOML file and `--section.key value`
overrides). The process starts as torchrun starts one (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR/PORT), which `prism run` and `prism capture` provide.

What this entry adds around TorchTitan, none of it in TorchTitan's files:

* shims/ goes first on sys.path: stand-ins for `tyro`, `torchdata` and `datasets`, which
  the GPU host lacks (each shim's docstring says what it provides).
* Eager communicators: torch.distributed.init_process_group gets device_id=cuda:LOCAL_RANK
  (TorchTitan passes none). Prism's `prismd --follow` (prism capture without a graph)
  learns a group from the real ranks' ncclCommSplit; a lazily created NCCL group names
  no members it can see. --lazy leaves init_process_group as is.
* DeviceMesh makes its groups with new_group, one call per group, as it does for
  TorchTitan's lazy start-up: each new_group is then an ncclCommSplit of the world
  (members pass the group's color, the others NOCOLOR), as for Megatron's groups.
  --mesh-split-group keeps PyTorch's own eager path instead: split_group, one
  ncclCommSplit of the world per mesh dimension making every group of it (a handful
  of world splits at 8192 ranks instead of about 2,070). PyTorch 2.11 colors each of
  those groups by its lowest rank, which does not say which ranks the group has;
  `prism capture` has each rank announce its group in the store first, which prismd
  follows, and the captured graph keeps each call one split (docs/capture.md; tested
  on the build host, not yet run on the GPU host).
* No NCCL split for DeviceMesh's "fake" dimensions (TorchTitan's degree-1 dimensions):
  with an eager default group, PyTorch's new_group makes every non-member rank call
  ncclCommSplit(NOCOLOR) on the world even for a backend that is not NCCL, i.e. N-1
  world-wide splits per degree-1 dimension (10 x 1023 at 1024 ranks). The lazy start-up
  TorchTitan uses makes none; the entry keeps it so (the default group's bound device is
  hidden while a "fake" group is made).
* The barrier TorchTitan issues once, after step 1, before lowering the process groups'
  timeouts (distributed/utils.py set_pg_timeouts) is left out: it is one world all-reduce
  outside the repeating iteration, which a graph captured from the iterations does not
  hold, so a hybrid run of that graph would count it as a divergence. The timeouts are
  still set. --keep-barrier keeps it.
* A few names TorchTitan imports for features this example does not use (pipeline and
  context parallelism, varlen attention, MoE all-to-all, HF checkpoints) from torch modules
  that change between releases become placeholders when this torch lacks them (they fail if
  used); the start line lists them (OPTIONAL_TORCH_NAMES).
* One JSON line per step on stdout, {"titan": "iteration", "step": k, "time_s": t}: the
  wall time from the end of the previous step (the start of step 1) to the end of this
  one, after torch.cuda.synchronize(); scripts/gpu/run-titan.sh reads them.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--titan", default=os.environ.get("PRISM_TITAN_SRC"),
                    help="TorchTitan source tree (holding torchtitan/ and tests/assets/tokenizer); "
                         "default $PRISM_TITAN_SRC")
    ap.add_argument("--lazy", action="store_true",
                    help="leave init_process_group without device_id (lazy NCCL groups; prismd --follow "
                         "refuses groups other than the world then)")
    ap.add_argument("--mesh-split-group", action="store_true",
                    help="let DeviceMesh make each mesh dimension's groups with one split_group call "
                         "(PyTorch's eager path) instead of a new_group per group")
    ap.add_argument("--keep-barrier", action="store_true",
                    help="keep TorchTitan's barrier after step 1")
    ap.add_argument("titan_args", nargs=argparse.REMAINDER,
                    help="-- then TorchTitan's arguments (--job.config_file F, --section.key value)")
    args = ap.parse_args()
    if not args.titan or not os.path.isdir(os.path.join(args.titan, "torchtitan")):
        ap.error(f"--titan {args.titan!r} holds no torchtitan/ package: give a TorchTitan source tree "
                 "(scripts/titan-source.sh makes one) or set PRISM_TITAN_SRC")
    rest = args.titan_args[1:] if args.titan_args[:1] == ["--"] else args.titan_args
    return args, rest


def with_defaults(titan, rest):
    """TorchTitan's relative default paths point into its own checkout: point them there."""
    keys = {a.split("=")[0].replace("-", "_") for a in rest if a.startswith("--")}
    out = list(rest)
    if "--model.hf_assets_path" not in keys:
        out += ["--model.hf_assets_path", os.path.join(titan, "tests", "assets", "tokenizer")]
    if "--job.dump_folder" not in keys:
        out += ["--job.dump_folder", os.environ.get("PRISM_TITAN_DUMP", f"/tmp/prism-titan-{os.getpid()}")]
    return out


# Names TorchTitan v0.2.2 imports at start-up from torch modules that change between releases,
# for features this example does not use (pipeline and context parallelism, varlen attention,
# MoE all-to-all, Hugging Face checkpoints). One a torch release lacks becomes a placeholder that
# fails if used, and the start line lists it.
OPTIONAL_TORCH_NAMES = {
    "torch.distributed.pipelining.schedules": [
        "OVERLAP_F_B", "PipelineScheduleMulti", "PipelineScheduleSingle", "ScheduleDualPipeV",
        "ScheduleZBVZeroBubble", "_Action", "_PipelineContext", "_PipelineSchedule",
        "_PipelineScheduleRuntime", "_wait_batch_p2p", "get_schedule_class"],
    "torch.distributed.pipelining.stage": ["_PipelineStageBase"],
    "torch.distributed.tensor.experimental._attention": [
        "_ContextParallel", "_HeadTailLoadBalancer", "_PTRRLoadBalancer", "_context_parallel_shard",
        "_enable_context_parallel_dispatcher"],
    "torch.nn.attention.varlen": ["varlen_attn"],
    "torch.distributed.checkpoint._consolidate_hf_safetensors": ["consolidate_safetensors_files_on_every_rank"],
    "torch.distributed._functional_collectives": ["all_to_all_single", "all_to_all_single_autograd"],
}


def placeholder(module, name):
    def unavailable(*_a, **_k):
        raise RuntimeError(f"{module}.{name} is not in this torch: the TorchTitan feature using it "
                           "cannot run here (examples/torchtitan/prism_titan.py)")
    if name.lstrip("_")[:1].isupper() and not name.isupper():
        return type(name, (), {"__init__": unavailable})  # a class TorchTitan may subclass
    return unavailable


def fill_missing_torch_names():
    import importlib
    import types
    filled = []
    for module, names in OPTIONAL_TORCH_NAMES.items():
        try:
            m = importlib.import_module(module)
        except Exception:  # noqa: BLE001 (absent, or failing to import in this torch)
            m = types.ModuleType(module)
            sys.modules[module] = m
            filled.append(module)
        for name in names:
            if not hasattr(m, name):
                setattr(m, name, placeholder(module, name))
                filled.append(f"{module}.{name}")
    return filled


def emit(**fields):
    print(json.dumps({"titan": fields.pop("event"), **fields}), flush=True)


def patch_eager_init(torch):
    import inspect
    dist = torch.distributed
    original = dist.init_process_group
    accepted = inspect.signature(original).parameters

    def init_process_group(*args, **kwargs):
        if kwargs.get("device_id") is None:
            kwargs["device_id"] = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if "_ranks" in kwargs and not kwargs["_ranks"] and "_ranks" not in accepted:
            kwargs.pop("_ranks")  # TorchTitan passes _ranks=[] (a newer torch's parameter): the default
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group


def patch_mesh_groups(torch, keep_split_group=False):
    from torch.distributed import device_mesh, distributed_c10d as c10d
    original = c10d.new_group

    def new_group(*args, **kwargs):
        if str(kwargs.get("backend")) != "fake" or not c10d.is_initialized():
            return original(*args, **kwargs)
        default = c10d._get_default_group()
        bound = default.bound_device_id
        default.bound_device_id = None  # no split source: non-members make no NCCL split
        try:
            return original(*args, **kwargs)
        finally:
            default.bound_device_id = bound

    original_split = getattr(device_mesh, "split_group", None)

    def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None, **kwargs):
        """DeviceMesh's lazy path: a new_group per group, every rank calling each, in order."""
        if kwargs or (parent_pg is not None and parent_pg is not c10d._get_default_group()):
            return original_split(parent_pg=parent_pg, split_ranks=split_ranks, timeout=timeout,
                                  pg_options=pg_options, group_desc=group_desc, **kwargs)
        rank, mine = c10d.get_rank(), None
        for ranks in split_ranks:
            group = new_group(ranks=ranks, timeout=timeout, pg_options=pg_options, group_desc=group_desc)
            if rank in ranks:
                mine = group
        return mine

    c10d.new_group = new_group
    device_mesh.new_group = new_group
    if original_split is not None and not keep_split_group:
        device_mesh.split_group = split_group


def patch_barrier(torch, dist_utils):
    original = dist_utils.set_pg_timeouts

    def set_pg_timeouts(*args, **kwargs):
        barrier = torch.distributed.barrier
        torch.distributed.barrier = lambda *a, **k: None
        try:
            return original(*args, **kwargs)
        finally:
            torch.distributed.barrier = barrier

    dist_utils.set_pg_timeouts = set_pg_timeouts


def patch_step_timing(torch, trainer_cls):
    original = trainer_cls.train_step
    last = [None]

    def train_step(self, *args, **kwargs):
        if last[0] is None:
            torch.cuda.synchronize()
            last[0] = time.perf_counter()
        result = original(self, *args, **kwargs)
        torch.cuda.synchronize()
        now = time.perf_counter()
        emit(event="iteration", step=self.step, time_s=round(now - last[0], 6),
             rank=int(os.environ.get("RANK", "0")))
        last[0] = now
        return result

    trainer_cls.train_step = train_step


def main():
    args, rest = parse()
    titan = os.path.abspath(args.titan)
    sys.path[:0] = [os.path.join(HERE, "shims"), titan]
    # TorchTitan's ConfigManager.parse_args reads sys.argv[1:] (bound when its module loads).
    sys.argv = [os.path.join(titan, "torchtitan", "train.py")] + with_defaults(titan, rest)

    import torch
    if not torch.cuda.is_available():
        sys.exit("prism_titan.py: no CUDA device: TorchTitan's llama3 training needs one GPU per real rank")
    if not args.lazy:
        patch_eager_init(torch)
        patch_mesh_groups(torch, keep_split_group=args.mesh_split_group)

    placeholders = fill_missing_torch_names()
    import torchtitan.distributed.utils as dist_utils
    import torchtitan.train as titan_train
    if not args.keep_barrier:
        patch_barrier(torch, dist_utils)
    patch_step_timing(torch, titan_train.Trainer)

    commit = ""
    try:
        commit = open(os.path.join(titan, "COMMIT")).read().strip()
    except OSError:
        pass
    emit(event="start", rank=int(os.environ.get("RANK", "0")), world=int(os.environ.get("WORLD_SIZE", "1")),
         torch=torch.__version__, torchtitan=commit, eager=not args.lazy, barrier=args.keep_barrier,
         mesh_groups="split_group" if args.mesh_split_group else "new_group",
         placeholders=placeholders, argv=sys.argv[1:])
    titan_train.main(titan_train.Trainer)
    emit(event="done", rank=int(os.environ.get("RANK", "0")))


if __name__ == "__main__":
    main()
