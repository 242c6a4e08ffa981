#!/usr/bin/env python3
"""scripts/gpu/run-plugin-check.sh and plugin_check_ratios.py without a GPU:
a stand-in Python plays the PyTorch ranks (it writes rank 0's JSON and a
TUNING line from the environment it was given), so that the plugin variants'
settings, the NIC speed the plugin is given and the ratio summary are checked
on every build (the real check runs on the GPU host)."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "..", "scripts", "gpu", "run-plugin-check.sh")
sys.path.insert(0, os.path.join(HERE, "..", "scripts", "gpu"))
import plugin_check_ratios  # noqa: E402

# Rank 0 reports a time from its settings: Socket 200 us; the plugin
# PRISM_INLINE_BYTES us when set, else 100 us.
FAKE_PYTHON = r"""#!/usr/bin/env bash
case "$1" in
  *plugin_pytorch.py)
    echo "host NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}"
    if [[ $RANK == 0 ]]; then
      t=$([[ $NCCL_NET == Socket ]] && echo 200 || echo "${PRISM_INLINE_BYTES:-100}")
      [[ $NCCL_NET == Socket && $PRISM_CHECK_LABEL == *-p2 ]] && t=300   # pass 2's Socket run is slower
      echo "$PRISM_CHECK_LABEL" >> "$OUT/order.txt"
      cat > "$OUT/$PRISM_CHECK_LABEL.json" <<EOF
{"label": "$PRISM_CHECK_LABEL", "world_size": $WORLD_SIZE, "init_s": 1, "iters": 5, "failures": [],
 "nic": "${PRISM_NIC_SPEED_MBPS:-unset}", "subsys": "$NCCL_DEBUG_SUBSYS", "wait": "${PRISM_CHECK_WAIT:-spin}",
 "results": [{"op": "all_reduce", "bytes": 1048576, "time_us": $t, "algbw_GBps": 1, "correct": true}]}
EOF
    fi ;;
  *) exec python3 "$@" ;;
esac
"""


def lo_speed():
    """What NCCL Socket reports for lo: its sysfs speed, else 10000."""
    try:
        with open("/sys/class/net/lo/speed") as f:
            v = f.read().strip()
        return v if v.isdigit() and int(v) > 0 else "10000"
    except OSError:
        return "10000"


class PluginCheckScripts(unittest.TestCase):
    def run_check(self, tmp, env_extra, passes_default=False):
        """The check with the stand-in Python; one pass unless env_extra says otherwise, or the script's
        default with passes_default set."""
        bundle = os.path.join(tmp, "bundle")
        os.makedirs(bundle, exist_ok=True)
        open(os.path.join(bundle, "libnccl-net-prism.so"), "w").close()
        fake = os.path.join(tmp, "python")
        with open(fake, "w") as f:
            f.write(FAKE_PYTHON)
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        out = os.path.join(tmp, "out")
        env = dict(os.environ, NO_MPS="1", OUT=out, PYTHON=fake, WORLDS="2", PRISM_CHECK_PASSES="1")
        if passes_default:
            del env["PRISM_CHECK_PASSES"]
        env.update(env_extra)
        proc = subprocess.run(["bash", CHECK, bundle], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        docs = {}
        for name in os.listdir(out):
            if name.endswith(".json"):
                with open(os.path.join(out, name)) as f:
                    doc = json.load(f)
                docs[doc["label"]] = doc
        return proc.stdout, docs

    def test_the_wait_for_the_gpu_reaches_every_rank_of_both_transports(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, docs = self.run_check(tmp, {"PRISM_CHECK_WAIT": "blocking"})
            self.assertEqual({label: doc["wait"] for label, doc in docs.items()},
                             {"prism-w2": "blocking", "socket-w2": "blocking"})

    def test_variants_nic_speed_and_ratios(self):
        with tempfile.TemporaryDirectory() as tmp:
            text, docs = self.run_check(tmp, {
                "PRISM_VARIANTS": "prism slow:PRISM_INLINE_BYTES=400 fast:PRISM_INLINE_BYTES=50,PRISM_NIC_SPEED_MBPS=400000"})
            self.assertEqual(sorted(docs), ["fast-w2", "prism-w2", "slow-w2", "socket-w2"])
            # The plugin gets Socket's speed for lo unless a variant sets its own.
            self.assertEqual(docs["prism-w2"]["nic"], lo_speed())
            self.assertEqual(docs["fast-w2"]["nic"], "400000")
            self.assertEqual(docs["socket-w2"]["nic"], "unset")
            self.assertIn("TUNING", docs["socket-w2"]["subsys"])
            self.assertIn("prism-w2: lowest ratio 2.00 (all_reduce 1048576 B)", text)
            self.assertIn("slow-w2: lowest ratio 0.50", text)
            self.assertIn("fast-w2: lowest ratio 4.00", text)
            self.assertIn("NCCL's choice, socket-w2: AllReduce 1048576: RING/SIMPLE ch0..1", text)

    def test_passes_alternate_and_pool_by_median(self):
        with tempfile.TemporaryDirectory() as tmp:
            text, docs = self.run_check(tmp, {"PRISM_VARIANTS": "prism slow:PRISM_INLINE_BYTES=400",
                                              "PRISM_CHECK_PASSES": "3"})
            self.assertEqual(sorted(docs), sorted(f"{v}-w2-p{k}" for v in ("prism", "slow", "socket") for k in (1, 2, 3)))
            with open(os.path.join(tmp, "out", "order.txt")) as f:
                order = f.read().split()
            # Socket last in odd passes, first in even ones.
            self.assertEqual(order, ["prism-w2-p1", "slow-w2-p1", "socket-w2-p1", "socket-w2-p2", "prism-w2-p2",
                                     "slow-w2-p2", "prism-w2-p3", "slow-w2-p3", "socket-w2-p3"])
            # Each pass against its own Socket run: pass 2 gives 3.00 where passes 1 and 3 give 2.00.
            self.assertIn("prism-w2-p2: lowest ratio 3.00", text)
            self.assertIn("prism-w2-p3: lowest ratio 2.00", text)
            self.assertIn("prism: lowest median ratio 2.00 (all_reduce 1048576 B) over 3 passes", text)
            self.assertIn("slow: lowest median ratio 0.50 (all_reduce 1048576 B) over 3 passes", text)
            self.assertRegex(text, r"all_reduce\s+1048576\s+2\.00\s+2\.00\.\.3\.00")

    def test_the_default_is_four_passes_socket_first_in_every_other(self):
        with tempfile.TemporaryDirectory() as tmp:
            text, docs = self.run_check(tmp, {}, passes_default=True)
            self.assertEqual(sorted(docs), sorted(f"{v}-w2-p{k}" for v in ("prism", "socket") for k in (1, 2, 3, 4)))
            self.assertIn("prism: lowest median ratio 2.00 (all_reduce 1048576 B) over 4 passes", text)

    def test_passes_must_be_a_positive_integer(self):
        with tempfile.TemporaryDirectory() as tmp:
            bundle = os.path.join(tmp, "bundle")
            os.makedirs(bundle)
            open(os.path.join(bundle, "libnccl-net-prism.so"), "w").close()
            env = dict(os.environ, NO_MPS="1", OUT=os.path.join(tmp, "out"), PRISM_CHECK_PASSES="two")
            proc = subprocess.run(["bash", CHECK, bundle], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("PRISM_CHECK_PASSES must be a positive integer", proc.stderr)

    def test_plugin_keeps_its_own_speed_when_asked(self):
        with tempfile.TemporaryDirectory() as tmp:
            text, docs = self.run_check(tmp, {"PRISM_CHECK_NIC_MBPS": "plugin"})
            self.assertEqual(docs["prism-w2"]["nic"], "unset")
            self.assertIn("plugin NIC speed: the plugin's PRISM_NIC_SPEED_MBPS", text)


class SteadyTime(unittest.TestCase):
    def test_one_stalled_round_does_not_decide(self):
        # Five rounds of a 1 MiB operation, one hit by a 17 ms stall.
        self.assertEqual(plugin_check_ratios.steady_time([0.0008, 0.0041, 0.0009, 0.0008, 0.0007]), 0.0008)
        self.assertEqual(plugin_check_ratios.steady_time([0.002, 0.001]), 0.0015)
        self.assertEqual(plugin_check_ratios.steady_time([0.003]), 0.003)
        with self.assertRaises(ValueError):
            plugin_check_ratios.steady_time([])


if __name__ == "__main__":
    unittest.main()
