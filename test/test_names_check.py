#!/usr/bin/env python3
"""Guards the Catch2 test names that ctest sees.

catch_discover_tests turns each test case into a ctest entry by its name and
splits names at ';' into entries that match nothing. Such entries fail (they
run with `-w NoTests`), but this check names the cause: every test case name
of the executables given must be free of ';' and of leading/trailing blanks,
and each ctest entry of those executables must select exactly one case.

Usage: test_names_check.py EXECUTABLE...
"""
import subprocess
import sys


def names(exe):
    out = subprocess.run([exe, "--list-test-names-only"], capture_output=True, text=True, timeout=60)
    return [line for line in out.stdout.splitlines() if line.strip()]


def problems(exe):
    found = []
    for name in names(exe):
        if ";" in name:
            found.append(f"{exe}: test case name holds ';' (ctest splits it into entries "
                         f"that run nothing; use ',' or 'and'): {name!r}")
        if name != name.strip():
            found.append(f"{exe}: test case name starts or ends with a blank: {name!r}")
    return found


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = []
    for exe in argv[1:]:
        found += problems(exe)
    for line in found:
        print(line)
    if found:
        return 1
    print(f"test names: {len(argv) - 1} executables, no name ctest would split")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
