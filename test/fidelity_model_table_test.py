#!/usr/bin/env python3
"""bench/fidelity/model_table.py's flags: the user's prismd flags go after the
truth host's and win over them (prismd refuses an option given twice)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "fidelity"))
import model_table  # noqa: E402

HOST = ["--step-turnaround-us", "140", "--no-calibration"]


class WithFlags(unittest.TestCase):
    def test_no_user_flags_keep_the_hosts(self):
        self.assertEqual(model_table.with_flags(HOST, []), HOST)

    def test_a_host_option_the_user_gives_goes_with_its_value(self):
        self.assertEqual(model_table.with_flags(HOST, ["--step-turnaround-us", "45", "--nic-model", "turns"]),
                         ["--no-calibration", "--step-turnaround-us", "45", "--nic-model", "turns"])

    def test_no_and_yes_forms_and_inline_values_are_one_option(self):
        self.assertEqual(model_table.with_flags(HOST, ["--calibration"]),
                         ["--step-turnaround-us", "140", "--calibration"])
        self.assertEqual(model_table.with_flags(HOST, ["--step-turnaround-us=90"]),
                         ["--no-calibration", "--step-turnaround-us=90"])
        self.assertEqual(model_table.with_flags(["--step-turnaround-us=140"], ["--step-turnaround-us", "90"]),
                         ["--step-turnaround-us", "90"])

    def test_the_one_h200_host_gives_what_truth_host_says(self):
        self.assertEqual(model_table.host_flags(model_table.ONE_GPU + ", 2026-12-05", 16), HOST)


if __name__ == "__main__":
    unittest.main()
