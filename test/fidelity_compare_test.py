#!/usr/bin/env python3
"""bench/fidelity/compare.py on made-up results (no GPU): a run without a
ground truth is printed beside prismd --simulate's pretty-printed report."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "..", "bench", "fidelity", "compare.py")


class TruthlessRun(unittest.TestCase):
    def test_hybrid_run_beside_the_model(self):
        out, data = tempfile.mkdtemp(), tempfile.mkdtemp()
        os.makedirs(os.path.join(out, "big-hybrid1-run"))
        os.makedirs(os.path.join(data, "big"))
        with open(os.path.join(data, "big", "model.json"), "w") as f:
            json.dump({"graph": "big", "iteration_time_s": 0.5}, f, indent=2)  # several lines, as prismd writes it
        with open(os.path.join(out, "big-hybrid1-run", "r0.json"), "w") as f:
            f.write(json.dumps({"warmup": 1, "iteration_ms": [900.0, 505.0, 510.0]}) + "\n")
        text = subprocess.run([sys.executable, COMPARE, out, data], capture_output=True, text=True,
                              check=True).stdout
        self.assertIn("big: hybrid1-run vs prismd --simulate, rank 0: 2 iterations after 1 warm-up", text)
        self.assertIn("model 500.000 ms, hybrid 507.500 ms, difference +1.50%", text)


if __name__ == "__main__":
    unittest.main()
