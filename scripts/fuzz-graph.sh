#!/usr/bin/env bash
# Fuzzes the graph loader + engine setup (fuzz/graph_fuzz.cc) with libFuzzer:
#   scripts/fuzz-graph.sh [SECONDS] [extra libFuzzer flags, e.g. -jobs=1]
# The same as scripts/fuzz.sh graph (which also runs the job YAML and the
# collective-flags fuzzers).
exec "$(dirname "$0")/fuzz.sh" graph "$@"
