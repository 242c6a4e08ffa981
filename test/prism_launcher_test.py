#!/usr/bin/env python3
"""Tests of scripts/prism (the launcher) that need no GPU: the environment
each real rank gets (--dry-run) and the errors for bad input."""
import json
import os
import subprocess
import sys
import unittest

PRISM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "prism")


def run(*args):
    return subprocess.run([sys.executable, PRISM, *args], capture_output=True, text=True)


class DryRun(unittest.TestCase):
    def test_each_real_rank_gets_its_own_environment(self):
        out = run("run", "--graph", "g", "--world", "64", "--ranks", "0,5", "--plugin", PRISM,
                  "--comm-id", "127.0.0.1:29999", "--dry-run", "--", "python3", "train.py")
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        self.assertEqual([r["rank"] for r in rows], [0, 5])
        for r in rows:
            env = r["env"]
            self.assertEqual(env["RANK"], str(r["rank"]))
            self.assertEqual(env["WORLD_SIZE"], "64")
            self.assertEqual(env["NCCL_HOSTID"], f"prism-real-{r['rank']}")
            self.assertEqual(env["NCCL_NET"], "Prism")
            self.assertEqual(env["NCCL_COMM_ID"], "127.0.0.1:29999")
            self.assertEqual(env["TORCHELASTIC_USE_AGENT_STORE"], "True")
            self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
            self.assertEqual(env["TORCH_NCCL_RANKS_PER_ROOT"], "1048576")
            self.assertEqual(r["command"], ["python3", "train.py"])

    def test_default_daemon_is_prismds_per_user_socket(self):
        def daemon_with(runtime_dir):
            env = dict(os.environ)
            env.pop("XDG_RUNTIME_DIR", None)
            if runtime_dir is not None:
                env["XDG_RUNTIME_DIR"] = runtime_dir
            out = subprocess.run([sys.executable, PRISM, "run", "--graph", "g", "--world", "8", "--ranks", "0",
                                  "--plugin", PRISM, "--dry-run", "--", "true"],
                                 capture_output=True, text=True, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            return json.loads(out.stdout.splitlines()[0])["env"]["PRISM_DAEMON"]
        self.assertEqual(daemon_with("/run/user/4242"), "unix:///run/user/4242/prismd.sock")
        self.assertEqual(daemon_with(None), f"unix:///tmp/prismd-{os.getuid()}.sock")
        self.assertEqual(daemon_with("relative"), f"unix:///tmp/prismd-{os.getuid()}.sock")

    def test_rank_ranges(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "2-4", "--plugin", PRISM, "--dry-run",
                  "--", "true")
        self.assertEqual([json.loads(l)["rank"] for l in out.stdout.splitlines()], [2, 3, 4])

    def test_rank_outside_the_world_is_refused(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "9", "--plugin", PRISM, "--dry-run",
                  "--", "true")
        self.assertEqual(out.returncode, 2)
        self.assertIn("outside the graph's 8 ranks", out.stderr)

    def test_missing_command_is_refused(self):
        out = run("run", "--graph", "g", "--world", "8", "--ranks", "0", "--plugin", PRISM)
        self.assertEqual(out.returncode, 2)
        self.assertIn("nothing to run", out.stderr)

    def test_unique_id_bytes_match_nccl(self):
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("prism_launcher", PRISM)
        spec = importlib.util.spec_from_loader("prism_launcher", loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        uid = mod.nccl_comm_id_bytes("127.0.0.1:29555")
        # Measured from NCCL 2.28.9 with NCCL_COMM_ID=127.0.0.1:29555 (wire notes 1.6).
        self.assertEqual(uid[:16].hex(), "8002800280028002020073737f000001")
        self.assertEqual(len(uid), 128)
        self.assertEqual(uid[16:], bytes(112))


if __name__ == "__main__":
    unittest.main()
