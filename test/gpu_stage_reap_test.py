#!/usr/bin/env python3
"""scripts/gpu/stage_reap.sh without a GPU: what a stage of run-titan.sh or run-capture.sh left running
(a rank in a session of its own, its child ignoring SIGTERM) is ended and waited for before the next stage
(on 2026-12-02 a stalled refine round's rank still held the GPU when the check started)."""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "..", "scripts", "gpu", "stage_reap.sh")


def marked(tag):
    """Processes whose environment holds PRISM_STAGE_TAG=tag."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"PRISM_STAGE_TAG={tag}".encode() in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found


class StageReap(unittest.TestCase):
    def test_a_stage_s_leftovers_in_their_own_session_are_ended(self):
        tag = f"reap-test-{os.getpid()}"
        ready = os.path.join(tempfile.mkdtemp(), "ready")
        # A "rank" in its own session that ignores SIGTERM, with a child, as a stalled stage leaves them.
        script = f"""
source {HELPER}
env "$(stage_env {tag})" setsid bash -c 'trap "" TERM; sleep 300 & touch {ready}; wait' &
for i in $(seq 100); do [[ -f {ready} ]] && break; sleep 0.1; done
REAP_GRACE_S=1 reap_stage {tag}
reap_stage {tag}; echo "second: $?"
"""
        try:
            done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
            self.assertTrue(os.path.exists(ready), done.stderr)
            self.assertIn("stage left processes behind: ended", done.stdout)
            self.assertNotIn("still there", done.stdout)
            self.assertIn("second: 0", done.stdout)
            self.assertEqual(done.stdout.count("stage left processes"), 1)  # nothing left for the second
            self.assertEqual(marked(tag), [])
        finally:
            for pid in marked(tag):
                os.kill(pid, 9)


if __name__ == "__main__":
    unittest.main()
