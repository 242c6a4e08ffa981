#!/usr/bin/env python3
"""prism-graphgen's `process_groups: megatron` plan against tables of the
groups Megatron-core's initialize_model_parallel creates
(test/fixtures/megatron-groups/<revision>/<config>-r<rank>.json.gz, see the
README there): every PyTorch group in creation order (group n of the table is
the graph's process group n), its backend (NCCL or Gloo), its members, its
group_desc, and for NCCL groups the split color PyTorch passes. A Megatron
change that adds, drops or reorders a group fails here, not as a hang under
prism run.

  python3 test/megatron_groups_fixture_test.py build/graphgen/prism-graphgen
"""
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "megatron-groups")
GRAPHGEN = None
# Fixture folder -> the job file's parallel.megatron_version.
VERSIONS = {"d98e8a64dd": "d98e8a64dd", "d98e8a64dd-variants": "d98e8a64dd", "core_v0.18.2": "core_v0.18.2"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def table_groups(table):
    """[(n, backend, sorted members, group_desc, split color)] of the table's new_group calls."""
    out = []
    for call in table["calls"]:
        if call.get("api") not in ("new_group", "new_group(inner)"):
            raise AssertionError(f"the table has a {call.get('api')} call, which the plan does not model")
        backend = call["backend"] or "nccl"   # None = the default group's backend (init with nccl)
        out.append((call["n"], backend, call["sorted_ranks"], call["group_desc"], call["split_color"]))
    return out


def job_yaml(table, version):
    c = table["config"]
    vpp = c.get("vpp") or 1
    m = c["pp"] * 2 if vpp > 1 else 1          # interleaving needs microbatches % pp == 0
    dp = table["world"] // (c["tp"] * c["pp"] * c["cp"])
    gloo = "true" if c.get("create_gloo_process_groups", True) else "false"
    moe = f", experts: {2 * c['ep']}" if c["ep"] > 1 else ""  # ep > 1 needs experts
    sp = ", sequence_parallel: true" if c["ep"] > 1 and c["tp"] > 1 else ""  # Megatron: MoE with tp needs SP
    return (f"name: fixture\nworld: {table['world']}\n"
            f"model: {{layers: {c['pp'] * vpp * 2}, hidden: 256, heads: 8, seq_len: 128, vocab: 1024{moe}}}\n"
            f"parallel: {{tp: {c['tp']}, pp: {c['pp']}, cp: {c['cp']}, ep: {c['ep']}, vpp: {vpp}, "
            f"global_batch: {m * dp}, process_groups: megatron, megatron_version: {version}, "
            f"gloo_groups: {gloo}{sp}}}\n")


def graph_groups(yaml_text, tmp):
    job = os.path.join(tmp, "job.yaml")
    graph = os.path.join(tmp, "job.graph")
    with open(job, "w") as f:
        f.write(yaml_text)
    subprocess.run([GRAPHGEN, "job", job, "-o", graph], check=True, capture_output=True)
    summary = json.loads(subprocess.run([GRAPHGEN, "inspect", graph, "--json"], check=True,
                                        capture_output=True, text=True).stdout)
    comms = {g["id"]: g for k in summary["communicators"]["by_kind"] for g in k["groups"]}
    out = []
    for g in summary["process_groups"]["groups"][1:]:   # 0 is the default group
        if g["backend"] == "gloo":
            out.append((g["n"], "gloo", g["members"], g["desc"], None))
        else:
            c = comms[g["communicator"]]
            out.append((g["n"], "nccl", sorted(c["members"]), g["desc"], c.get("color")))
    return out


class MegatronGroupPlan(unittest.TestCase):
    def test_fixtures_exist(self):
        for folder in VERSIONS:
            self.assertTrue(glob.glob(os.path.join(FIXTURES, folder, "*.json*")), folder)

    def test_plan_equals_megatron(self):
        for folder, version in VERSIONS.items():
            for path in sorted(glob.glob(os.path.join(FIXTURES, folder, "*.json*"))):
                table = load(path)
                with self.subTest(table=f"{folder}/{os.path.basename(path)}"), \
                        tempfile.TemporaryDirectory() as tmp:
                    want = table_groups(table)
                    got = graph_groups(job_yaml(table, version), tmp)
                    for w, g in zip(want, got):
                        # The split color only where the table has it for an NCCL group.
                        g_cmp = g if w[4] is not None and w[1] == "nccl" else g[:4] + (w[4],)
                        self.assertEqual(g_cmp, w, f"PyTorch group {w[0]}: graph {g[:4]}, Megatron {w[:4]}")
                    self.assertEqual(len(got), len(want), "number of groups")
                    if table.get("group_count_at_end") is not None:
                        self.assertEqual(table["group_count_at_end"], len(want) + 1)

    def test_group_numbers_are_pytorchs(self):
        """A captured table's group_count after each call is PyTorch's own group number."""
        for path in sorted(glob.glob(os.path.join(FIXTURES, "*", "*.json*"))):
            table = load(path)
            for call in table["calls"]:
                if call.get("group_count") is not None:
                    self.assertEqual(call["group_count"], call["n"] + 1, f"{path}: call {call['n']}")

    def test_eager_split_calls_line_up(self):
        """With device_id, PyTorch 2.11 has every rank split the world once per NCCL group (NOCOLOR
        outside it) and once per Gloo group it is not in (its members do not split): each table's
        calls must give every rank as many splits, and every NCCL group's members must reach its
        split at the same position, or Megatron's eager start-up hangs in NCCL without Prism too.
        prismd lays its calls out the same way (daemon/bootstrap/split_calls.cc)."""
        for path in sorted(glob.glob(os.path.join(FIXTURES, "*", "*.json*"))):
            table = load(path)
            world = table["world"]
            skipped = [0] * world  # Gloo groups so far that hold the rank
            made = 0
            for n, backend, members, _, _ in table_groups(table):
                made += 1
                if backend == "gloo":
                    for m in members:
                        skipped[m] += 1
                    continue
                positions = {made - skipped[m] for m in members}
                self.assertEqual(len(positions), 1, f"{path}: group {n}'s members split at {sorted(positions)}")
            self.assertEqual(len({made - k for k in skipped}), 1, f"{path}: ranks make different split counts")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: megatron_groups_fixture_test.py PRISM_GRAPHGEN")
    GRAPHGEN = sys.argv.pop(1)
    unittest.main()
