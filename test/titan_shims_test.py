#!/usr/bin/env python3
"""examples/torchtitan/shims (no torch here): the tyro stand-in against a config shaped like
TorchTitan's JobConfig (nested dataclasses, optional, literal, list and bool fields), and the
datasets stand-in. With PRISM_TITAN_SRC set to a TorchTitan tree (scripts/titan-source.sh),
also TorchTitan's own ConfigManager reading examples/torchtitan/llama3_debug.toml, under a
stand-in torch module that only satisfies its imports."""
import dataclasses
import importlib.abc
import importlib.machinery
import os
import sys
import types
import typing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "torchtitan", "shims"))

import datasets  # noqa: E402
import tyro  # noqa: E402
from datasets.distributed import split_dataset_by_node  # noqa: E402

passed = failed = 0


def check(name, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {name}")


@dataclasses.dataclass
class Training:
    steps: int = 10
    seq_len: int = 2048
    max_norm: float | int = 1.0
    dataset_path: str | None = None
    compile: bool = False


@dataclasses.dataclass
class Parallelism:
    tensor_parallel_degree: int = 1
    fsdp_reshard_after_forward: typing.Literal["default", "always", "never"] = "default"


@dataclasses.dataclass
class Compile:
    components: list[str] = dataclasses.field(default_factory=lambda: ["model", "loss"])
    enable: bool = False


@dataclasses.dataclass
class Job:
    training: Training = dataclasses.field(default_factory=Training)
    parallelism: Parallelism = dataclasses.field(default_factory=Parallelism)
    compile: Compile = dataclasses.field(default_factory=Compile)


base = Job()
base.training.steps = 3  # as if from the TOML file
cfg = tyro.cli(Job, args=["--training.steps", "12", "--parallelism.tensor-parallel-degree=8",
                          "--training.dataset_path", "/x", "--compile.components", "model",
                          "--compile.enable", "--training.no-compile", "--training.max_norm", "0.5",
                          "--parallelism.fsdp_reshard_after_forward", "never"],
               default=base, registry=tyro.constructors.ConstructorRegistry())
check("int override", cfg.training.steps == 12)
check("dashes and =", cfg.parallelism.tensor_parallel_degree == 8)
check("optional str", cfg.training.dataset_path == "/x")
check("list[str] comma-separated", cfg.compile.components == ["model"])
check("bool flag", cfg.compile.enable is True)
check("bool no- flag", cfg.training.compile is False)
check("float | int", cfg.training.max_norm == 0.5)
check("literal", cfg.parallelism.fsdp_reshard_after_forward == "never")
toml_base = Job()
toml_base.training.seq_len = 1024  # as if from the TOML file
check("the TOML's values stay", tyro.cli(Job, args=["--training.steps", "2"], default=toml_base).training.seq_len == 1024)

for bad, why in ((["--training.stepz", "3"], "unknown option --training.stepz"),
                 (["--parallelism.fsdp_reshard_after_forward", "sometimes"], "not one of"),
                 (["--training.steps"], "needs a value"),
                 (["--nosuch.steps", "1"], "no section")):
    try:
        tyro.cli(Job, args=bad, default=Job())
        check(f"refuses {bad}", False)
    except SystemExit as e:
        check(f"refuses {bad}: {e}", why in str(e))

ds = datasets.load_dataset("tests/assets/c4_test", split="train")
check("synthetic samples", len(ds) == 256 and isinstance(ds[0]["text"], str) and len(ds[0]["text"].split()) == 2000)
check("deterministic", datasets.load_dataset("tests/assets/c4_test", split="train")[3] == ds[3])
check("skip", ds.skip(250)[0] == ds[250] and len(ds.skip(250)) == 6)
part = split_dataset_by_node(ds, 3, 8)
check("split by node", len(part) == 32 and part[0] == ds[3] and part[1] == ds[11])
check("more ranks than samples: every rank reads all", len(split_dataset_by_node(ds, 5, 1024)) == 256)

# prism_titan.py's changes around torch, on a stand-in torch.distributed.
sys.path.insert(0, os.path.join(ROOT, "examples", "torchtitan"))
import prism_titan  # noqa: E402

calls = []


class FakePG:
    def __init__(self, name):
        self.group_name = name
        self.bound_device_id = "cuda:0"


default_pg = FakePG("0")


def fake_new_group(ranks=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    calls.append((tuple(ranks), backend, default_pg.bound_device_id))
    return FakePG(f"g{len(calls)}") if 2 in ranks else None


def fake_split_group(**kwargs):
    calls.append(("split", kwargs.get("parent_pg").group_name))
    return FakePG("split")


def fake_init(backend=None, timeout=None, device_id=None):
    calls.append(("init", backend, device_id))


c10d = types.SimpleNamespace(new_group=fake_new_group, is_initialized=lambda: True,
                             _get_default_group=lambda: default_pg, get_rank=lambda: 2)
mesh = types.SimpleNamespace(new_group=fake_new_group, split_group=fake_split_group)
fake_torch = types.SimpleNamespace(device=lambda kind, index: f"{kind}:{index}",
                                   distributed=types.SimpleNamespace(init_process_group=fake_init))
sys.modules["torch.distributed"] = types.SimpleNamespace(device_mesh=mesh, distributed_c10d=c10d)
os.environ["LOCAL_RANK"] = "0"
prism_titan.patch_eager_init(fake_torch)
fake_torch.distributed.init_process_group(backend="nccl", timeout=5, _ranks=[])
check("init_process_group gets device_id (and no _ranks this torch lacks)", calls == [("init", "nccl", "cuda:0")])
prism_titan.patch_mesh_groups(fake_torch)
calls.clear()
got = mesh.split_group(parent_pg=default_pg, split_ranks=[[0, 1], [2, 3]], timeout=None, pg_options=None,
                       group_desc="mesh_tp")
check("DeviceMesh's split_group: a new_group per group, in order, the rank's returned",
      calls == [((0, 1), None, "cuda:0"), ((2, 3), None, "cuda:0")] and got.group_name == "g2")
calls.clear()
mesh.new_group(ranks=[5], backend="fake", group_desc="mesh_pp")
check("a fake group is made with no bound device (no NCCL split)", calls == [((5,), "fake", None)]
      and default_pg.bound_device_id == "cuda:0")
other = FakePG("other")
calls.clear()
mesh.split_group(parent_pg=other, split_ranks=[[0, 1]])
check("a split of another parent is left to PyTorch", calls == [("split", "other")])
del sys.modules["torch.distributed"]
saved = prism_titan.OPTIONAL_TORCH_NAMES
prism_titan.OPTIONAL_TORCH_NAMES = {"prism_no_such_module.sub": ["_Runtime", "helper"], "json": ["dumps", "_NoSuch"]}
filled = prism_titan.fill_missing_torch_names()
check("missing torch names become placeholders, listed",
      filled == ["prism_no_such_module.sub", "prism_no_such_module.sub._Runtime", "prism_no_such_module.sub.helper",
                 "json._NoSuch"])
from prism_no_such_module.sub import _Runtime, helper  # noqa: E402


class Sub(_Runtime):  # TorchTitan subclasses some of them at import
    pass


try:
    helper()
    check("a placeholder fails when used", False)
except RuntimeError as e:
    check("a placeholder fails when used", "not in this torch" in str(e))
import json  # noqa: E402
check("present names are kept", json.dumps([1]) == "[1]")
del json._NoSuch
del sys.modules["prism_no_such_module.sub"]
prism_titan.OPTIONAL_TORCH_NAMES = saved

titan = os.environ.get("PRISM_TITAN_SRC")
if titan and os.path.isdir(os.path.join(titan, "torchtitan")):
    class _Stub(type):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Stub(name, (), {})

        def __call__(cls, *a, **k):
            return _Stub("r", (), {})

        def __getitem__(cls, k):
            return _Stub("g", (), {})

        def __or__(cls, o):
            return cls

        def __ror__(cls, o):
            return cls

    class _StubModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Stub(name, (), {})

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        STUBBED = ("torch", "tokenizers", "einops", "safetensors", "triton")

        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in self.STUBBED:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            m = _StubModule(spec.name)
            m.__path__ = []
            return m

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, _Finder())
    sys.path.insert(1, titan)
    from torchtitan.config.manager import ConfigManager  # noqa: E402
    toml = os.path.join(ROOT, "examples", "torchtitan", "llama3_debug.toml")
    c = ConfigManager().parse_args(["--job.config_file", toml, "--training.steps", "7",
                                    "--parallelism.tensor_parallel_degree", "8",
                                    "--model.hf_assets_path", os.path.join(titan, "tests/assets/tokenizer")])
    check("TorchTitan reads the TOML", c.model.name == "llama3" and c.model.flavor == "debugmodel"
          and c.debug.seed == 42 and c.metrics.log_freq == 1 and c.checkpoint.enable is False)
    check("TorchTitan takes the overrides", c.training.steps == 7 and c.parallelism.tensor_parallel_degree == 8)
    try:
        ConfigManager().parse_args(["--job.config_file", toml, "--training.stepz", "7"])
        check("TorchTitan config refuses unknown keys", False)
    except SystemExit:
        check("TorchTitan config refuses unknown keys", True)
else:
    print("PRISM_TITAN_SRC not set: TorchTitan's own ConfigManager not checked")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
