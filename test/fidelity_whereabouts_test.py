#!/usr/bin/env python3
"""bench/fidelity/whereabouts.py: the one line a rank keeps of what it is about to do."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "fidelity"))
import whereabouts  # noqa: E402


class Whereabouts(unittest.TestCase):
    def test_each_note_replaces_the_last_and_another_process_reads_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r3.at")
            at = whereabouts.Whereabouts(path)
            self.assertIsNone(whereabouts.read(path))  # nothing noted yet
            at.note("init: group 20 of 20, members [9, 11, 13, 15]")
            at.note("iteration 0 op 12 recv")  # shorter: nothing of the last one stays
            self.assertEqual(whereabouts.read(path), "iteration 0 op 12 recv")
            with open(path, "rb") as f:  # what run-gpu.sh's `read -r` sees: one line
                raw = f.read()
            self.assertEqual(len(raw), whereabouts.SIZE)
            self.assertEqual(raw.count(b"\n"), 1)
            at.close()

    def test_a_long_or_multiline_note_stays_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r0.at")
            at = whereabouts.Whereabouts(path)
            at.note("a\nb " + "x" * 500)
            text = whereabouts.read(path)
            self.assertTrue(text.startswith("a b xxx"))
            self.assertEqual(len(text), whereabouts.SIZE - 1)
            at.close()

    def test_no_path_notes_nothing_and_a_missing_file_reads_none(self):
        whereabouts.Whereabouts("").note("anything")
        self.assertIsNone(whereabouts.read("/nonexistent/r0.at"))


class DriverNotes(unittest.TestCase):
    def test_the_driver_notes_each_op_before_it_launches_it(self):
        import driver  # noqa: E402 (no torch needed on the CPU path of _launch)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r5.at")
            r = driver.Runner.__new__(driver.Runner)
            r.a = driver.parse_args(["--rank", "5", "--world", "8", "--ops", "o", "--comms", "c", "--iterations", "3",
                                     "--mode", "step", "--store-port", "1", "--cpu"])
            r.at = whereabouts.Whereabouts(path)
            r.iteration = 4
            seen = []
            r._launch(lambda: seen.append(whereabouts.read(path)),
                      {"type": "recv", "label": "recv gradient", "deps": []}, {}, [12], None)
            self.assertEqual(seen, ["iteration 4 op 12 recv recv gradient"])  # noted before it ran
            r.at.close()

    def test_the_at_file_sits_beside_the_result(self):
        import driver  # noqa: E402
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "ops.json"), "w") as f:
                f.write('{"ops": []}')
            with open(os.path.join(tmp, "comms.json"), "w") as f:
                f.write("{}")
            args = driver.parse_args(["--rank", "2", "--world", "8", "--ops", os.path.join(tmp, "ops.json"),
                                      "--comms", os.path.join(tmp, "comms.json"), "--iterations", "3",
                                      "--mode", "step", "--store-port", "1", "--cpu",
                                      "--out", os.path.join(tmp, "r2.json")])
            r = driver.Runner(args, FakeTorch(), None)
            r.at.note("init: the world's process group")
            self.assertEqual(whereabouts.read(os.path.join(tmp, "r2.at")), "init: the world's process group")
            r.at.close()


class FakeTorch:
    """What Runner.__init__ asks of torch on the CPU path."""
    float32 = bfloat16 = object()

    @staticmethod
    def device(*args):
        return args


if __name__ == "__main__":
    unittest.main()
