#!/usr/bin/env python3
"""examples/train_gpt.py and its graphs agree (no torch, no GPU needed).

train_gpt.py runs its training loop from examples/train_gpt_plan.py and, on
the GPU, checks after its first iteration that the communication it issued is
exactly train_gpt_plan.rank_ops(). This test closes the loop on the CPU side:
for each examples/train-gpt-*.yaml (and a few other layouts), the graph that
prism-graphgen makes has
  * train_gpt.py's default configuration (so `train_gpt.py` with no model flags
    is the job file's program),
  * the same process groups, members and creation order as the script creates,
  * for every rank checked, the same collectives and send/recvs, in the same
    order, with the same sizes, dtypes, communicators, peers and labels
    (`prism-graphgen inspect --ops RANK`).
Usage: train_gpt_plan_test.py PATH/TO/prism-graphgen
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")
sys.path.insert(0, EXAMPLES)
import train_gpt_plan as plan  # noqa: E402

GRAPHGEN = None
COMM_FIELDS = ("type", "kind", "bytes", "dtype", "comm", "peer", "label")


def graphgen(*args):
    out = subprocess.run([GRAPHGEN, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"prism-graphgen {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def make_graph(job_path, tmp):
    path = os.path.join(tmp, os.path.basename(job_path) + ".graph")
    graphgen("job", job_path, "-o", path)
    return path


def config_of(summary):
    """train_gpt_plan.Config for the job a graph was made from."""
    a, l = summary["job"]["attributes"], summary["layout"]
    dp = l["dp"]
    return plan.Config(world=summary["ranks"], layers=int(a["model.layers"]), hidden=int(a["model.hidden"]),
                       heads=int(a["model.heads"]), ffn_hidden=int(a["model.ffn_hidden"]),
                       seq_len=int(a["model.seq_len"]), vocab=int(a["model.vocab"]), micro_batch=l["micro_batch"],
                       microbatches=l["global_batch"] // (l["micro_batch"] * dp), tp=l["tp"], pp=l["pp"],
                       schedule=l["schedule"], groups=a["process_groups"]).check()


def graph_groups(summary):
    """[(name, members)] of every PyTorch group but the default one, in creation order (Gloo groups too)."""
    comms = {g["id"]: g for k in summary["communicators"]["by_kind"] for g in k["groups"]}
    out = []
    for g in summary["process_groups"]["groups"][1:]:
        out.append((g["name"], g["members"] if g["backend"] == "gloo" else comms[g["communicator"]]["members"]))
    return out


def graph_comm_ops(graph, rank):
    program = json.loads(graphgen("inspect", graph, "--ops", str(rank)))
    ops = []
    for op in program["ops"]:
        if op["type"] == "compute":
            continue
        row = {k: op[k] for k in COMM_FIELDS if k in op}
        if "comm_name" in op:
            row["comm"] = op["comm_name"]
        ops.append(row)
    return ops


def plan_comm_ops(cfg, rank):
    return [{k: op[k] for k in COMM_FIELDS if k in op} for op in plan.rank_ops(cfg, rank)]


def sample_ranks(cfg):
    if cfg.world <= 16:
        return list(range(cfg.world))
    stage = cfg.tp * cfg.dp
    return sorted({0, 1, cfg.tp, stage - 1, stage, cfg.world // 2 + 1, cfg.world - 1})


class Agreement(unittest.TestCase):
    def check_graph(self, graph, expect_defaults):
        summary = json.loads(graphgen("inspect", graph, "--json"))
        cfg = config_of(summary)
        if expect_defaults:
            self.assertEqual(dataclass_without_world(cfg), dataclass_without_world(plan.Config()),
                             "the job file and train_gpt.py's default flags differ")
        self.assertEqual(graph_groups(summary), [(n, m) for n, _, m in plan.process_groups(cfg)])
        for rank in sample_ranks(cfg):
            with self.subTest(graph=os.path.basename(graph), rank=rank):
                want, got = graph_comm_ops(graph, rank), plan_comm_ops(cfg, rank)
                for i, (w, g) in enumerate(zip(want, got)):
                    self.assertEqual(g, w, f"rank {rank}: op {i} differs (graph {w}, train_gpt {g})")
                self.assertEqual(len(got), len(want), f"rank {rank}: op count")
        return cfg

    def test_example_job_files(self):
        jobs = sorted(f for f in os.listdir(EXAMPLES) if f.startswith("train-gpt-") and f.endswith(".yaml"))
        self.assertEqual(jobs, ["train-gpt-1024.yaml", "train-gpt-8.yaml", "train-gpt-8192.yaml"])
        with tempfile.TemporaryDirectory() as tmp:
            for job in jobs:
                cfg = self.check_graph(make_graph(os.path.join(EXAMPLES, job), tmp), expect_defaults=True)
                self.assertEqual(f"train-gpt-{cfg.world}.yaml", job)

    def test_other_layouts(self):
        """Megatron's full set of groups, GPipe, more stages than microbatches, no TP, one stage."""
        layouts = [
            "world: 16\n  parallel: {tp: 2, pp: 4, micro_batch: 1, global_batch: 6, process_groups: megatron}",
            "world: 16\n  parallel: {tp: 2, pp: 4, micro_batch: 2, global_batch: 16, schedule: gpipe, "
            "process_groups: minimal}",
            "world: 8\n  parallel: {tp: 1, pp: 2, micro_batch: 1, global_batch: 8, process_groups: minimal}",
            "world: 4\n  parallel: {tp: 4, pp: 1, micro_batch: 1, global_batch: 2, process_groups: minimal}",
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for i, layout in enumerate(layouts):
                world, par = layout.split("\n  ")
                path = os.path.join(tmp, f"job{i}.yaml")
                with open(path, "w") as f:
                    f.write(f"name: t{i}\n{world}\nmodel: {{layers: 4, hidden: 256, heads: 8, seq_len: 128, "
                            f"vocab: 1000}}\n{par}\ncluster: {{gpus_per_node: 1}}\n")
                with self.subTest(layout=layout):
                    self.check_graph(make_graph(path, tmp), expect_defaults=False)

    def test_plan_cli_lists_ops_without_torch(self):
        out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train_gpt_plan.py"), "--world", "8",
                              "--rank", "5"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        self.assertEqual(rows, plan.rank_ops(plan.Config(world=8), 5))
        bad = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train_gpt_plan.py"), "--world", "6"],
                             capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("not divisible by tp*pp", bad.stderr)


def dataclass_without_world(cfg):
    d = dict(vars(cfg))
    d.pop("world")
    return d


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: train_gpt_plan_test.py PATH/TO/prism-graphgen")
    GRAPHGEN = sys.argv.pop(1)
    unittest.main()
