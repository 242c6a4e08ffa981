#!/usr/bin/env python3
"""bench/fidelity/acceptance.sh without a GPU: `prepare` makes every spec's
data (graphs, programs, the model's times, model-late.json) with the
ground truths cut to 15 iterations; each group's `run` (DRY=1) lists the
runs it gives run-gpu.sh: TRUTHS truths with the hybrids between them.

  fidelity_acceptance_test.py BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "bench", "fidelity", "acceptance.sh")
BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")


def run(*args, env=None):
    e = dict(os.environ, BUILD_DIR=BUILD, **(env or {}))
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=e, timeout=600)


class Acceptance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = tempfile.mkdtemp()
        cls.prepared = run("prepare", cls.data)

    def test_prepare_makes_every_spec_with_short_truths_and_the_model_of_a_late_rank(self):
        self.assertEqual(self.prepared.returncode, 0, self.prepared.stderr)
        specs = sorted(os.listdir(self.data))
        self.assertEqual(specs, ["step-n16-dp4-2g5", "step-n16-dp8-2g5", "step-n16-pp4-2g5", "step-n16-pp4-2g5-slow",
                                 "step-n16-tp4-2g5", "step-n8-2g5", "sweep-n16-pat-2g5", "sweep-n8-pat-2g5"])
        with open(os.path.join(self.data, "step-n16-dp8-2g5", "meta.env")) as f:
            meta = f.read()
        self.assertIn("ITERATIONS=15\n", meta)
        self.assertIn("WARMUP=3\n", meta)
        for rank in (0, 4):  # rank 0 and the spec's second real rank (TP2 x DP2)
            with open(os.path.join(self.data, "step-n16-pp4-2g5", f"model-late-r{rank}.json")) as f:
                late = json.load(f)["late"][0]
            self.assertEqual((late["rank"], late["iteration"], late["ms"]), (rank, 10, 20.0))
        # The GPU host's packed ranks: a step turnaround for the spec's rank count, in the model and in
        # meta.env for the hybrids (truth_host.py).
        for spec, turnaround in (("step-n16-pp4-2g5", 140.0), ("step-n8-2g5", 45.0)):
            with open(os.path.join(self.data, spec, "model.json")) as f:
                model = json.load(f)
            self.assertEqual((model["nccl_step_turnaround_us"], model["nccl_collective_turnaround_us"]),
                             (turnaround, 0.0))
            with open(os.path.join(self.data, spec, "meta.env")) as f:
                meta = f.read()
            self.assertIn(f'MODEL_FLAGS="--step-turnaround-us {turnaround:g} --no-calibration"\n', meta)
            self.assertIn("TRUTH_HOST=one-h200\n", meta)  # run-gpu.sh checks the GPU against it

    def test_a_host_without_a_figure_for_the_rank_count_is_refused_by_name(self):
        tool = os.path.join(HERE, "..", "bench", "fidelity", "truth_host.py")
        ok = subprocess.run([sys.executable, tool, "one-h200", "16"], capture_output=True, text=True)
        self.assertEqual((ok.returncode, ok.stdout), (0, "--step-turnaround-us 140 --no-calibration\n"))
        cluster = subprocess.run([sys.executable, tool, "cluster", "8192"], capture_output=True, text=True)
        self.assertEqual((cluster.returncode, cluster.stdout), (0, "\n"))
        for args, says in ((["one-h200", "12"], "no step turnaround measured on one-h200 for 12 ranks"),
                           (["an-h100", "16"], "unknown host an-h100")):
            bad = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn(says, bad.stderr)

    def test_a_gpu_other_than_the_one_the_host_s_figures_came_from_is_named(self):
        tool = os.path.join(HERE, "..", "bench", "fidelity", "truth_host.py")
        for host, gpu in (("one-h200", "NVIDIA H200"), ("two-h200", "NVIDIA H200 NVL"), ("cluster", "NVIDIA H100")):
            same = subprocess.run([sys.executable, tool, "--gpu", host, gpu], capture_output=True, text=True)
            self.assertEqual((same.returncode, same.stdout), (0, ""), (host, gpu))
        other = subprocess.run([sys.executable, tool, "--gpu", "one-h200", "NVIDIA H100 80GB HBM3"],
                               capture_output=True, text=True)
        self.assertEqual(other.returncode, 1)
        self.assertIn("measured on an H200, this GPU is NVIDIA H100 80GB HBM3", other.stdout)
        unknown = subprocess.run([sys.executable, tool, "--gpu", "an-h100", "NVIDIA H100"], capture_output=True, text=True)
        self.assertEqual(unknown.returncode, 2)
        self.assertIn("unknown host an-h100", unknown.stderr)

    def test_each_group_lists_pooled_truths_and_its_hybrids(self):
        out = run("run", "B", self.data, "pp", env={"DRY": "1"})
        self.assertEqual(out.returncode, 0, out.stderr)
        runs = out.stdout.strip().splitlines()[-1].split()[3:]
        self.assertEqual(runs[:5], ["step-n16-pp4-2g5:truth", "step-n16-pp4-2g5:hybrid1",
                                    "step-n16-pp4-2g5:truth-again", "step-n16-pp4-2g5:hybrid2",
                                    "step-n16-pp4-2g5:truth-again2"])
        self.assertIn("step-n16-pp4-2g5-slow:truth-again2", runs)
        self.assertEqual(runs[-4:], ["step-n16-pp4-2g5:truth-late", "step-n16-pp4-2g5:truth-late-again",
                                     "step-n16-pp4-2g5:truth-late-again2", "step-n16-pp4-2g5:hybrid1-late"])
        five = run("run", "B", self.data, "pat", env={"DRY": "1", "TRUTHS": "5"})
        runs = five.stdout.strip().splitlines()[-1].split()[3:]
        self.assertEqual(sum(1 for r in runs if r.startswith("sweep-n8-pat-2g5:truth")), 5)
        self.assertIn("sweep-n16-pat-2g5:hybrid1", runs)

    def test_several_groups_run_one_after_the_other_each_in_its_own_out_and_environment(self):
        out = run("run", "B", self.data, "pp,vlate,kinds,pat", env={"DRY": "1", "OUT": "/o"})
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.strip().splitlines()[2:6]  # vlate and kinds
        # Each group's environment is its own: pp's late rank stays 0, pat's timing the default
        # (the list's check once exported vlate's LATE_RANK and kinds' OP_TIMING to every group).
        self.assertEqual(out.stdout.strip().splitlines()[0], "acceptance: group pp: 14 runs (OUT /o/pp)")
        self.assertEqual(out.stdout.strip().splitlines()[6], "acceptance: group pat: 8 runs (OUT /o/pat)")
        self.assertEqual(lines[0], "acceptance: group vlate: 4 runs (OUT /o/vlate) LATE_RANK=4")
        self.assertEqual(lines[2], "acceptance: group kinds: 12 runs (OUT /o/kinds) OP_TIMING=nccl")
        self.assertTrue(lines[1].endswith("step-n16-pp4-2g5:truth-late-again2 step-n16-pp4-2g5:hybrid1-late"))
        # Each spec's truths pooled (one truth's DP medians move by 5%), its hybrid after the first.
        self.assertIn("step-n16-dp8-2g5:truth step-n16-dp8-2g5:hybrid1 step-n16-dp8-2g5:truth-again "
                      "step-n16-dp8-2g5:truth-again2 step-n16-pp4-2g5:truth", lines[3])
        bad = run("run", "B", self.data, "vlate,everything", env={"DRY": "1"})
        self.assertEqual(bad.returncode, 2)  # refused before any group runs
        self.assertIn("unknown group everything", bad.stderr)
        self.assertNotIn("acceptance: group vlate", bad.stdout)

    def test_the_calibration_group_runs_three_layouts_with_calibrated_hybrids(self):
        out = run("run", "B", self.data, "cal,tp", env={"DRY": "1", "OUT": "/o"})
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.strip().splitlines()
        self.assertEqual(lines[0], "acceptance: group cal: 15 runs (OUT /o/cal) PRISMD_FLAGS=--calibration")
        runs = lines[1].split()[3:]
        self.assertEqual(sorted({r.split(":")[0] for r in runs}),
                         ["step-n16-dp4-2g5", "step-n16-pp4-2g5", "step-n16-tp4-2g5"])
        self.assertIn("step-n16-pp4-2g5:hybrid2", runs)
        # The next group runs as the packed host's MODEL_FLAGS say (no --calibration of its own).
        self.assertEqual(lines[2], "acceptance: group tp: 10 runs (OUT /o/tp)")

    def test_the_round_robin_group_sets_every_rank_s_nic_order_and_the_engine_s_model(self):
        out = run("run", "B", self.data, "rr,pp", env={"DRY": "1", "OUT": "/o", "EXTRA_ENV": "A=1"})
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.strip().splitlines()
        self.assertEqual(lines[0], "acceptance: group rr: 15 runs (OUT /o/rr) PRISMD_FLAGS=--nic-model turns "
                                   "EXTRA_ENV=A=1 PRISM_LINK_ORDER=round-robin")
        self.assertIn("step-n16-dp4-2g5:truth-again2", lines[1].split())
        # The next group keeps the caller's EXTRA_ENV alone and the posting order.
        self.assertTrue(lines[2].startswith("acceptance: group pp: "), lines[2])
        self.assertTrue(lines[2].endswith("EXTRA_ENV=A=1"), lines[2])

    def test_fewer_than_three_truths_or_an_unknown_group_is_refused(self):
        two = run("run", "B", self.data, "dp", env={"DRY": "1", "TRUTHS": "2"})
        self.assertEqual(two.returncode, 2)
        self.assertIn("three or more are needed to pool", two.stderr)
        self.assertEqual(run("run", "B", self.data, "everything", env={"DRY": "1"}).returncode, 2)


if __name__ == "__main__":
    unittest.main()
