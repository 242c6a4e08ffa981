#!/usr/bin/env bash
# Fuzzes the graph loader + engine setup (fuzz/graph_fuzz.cc) with libFuzzer.
#   scripts/fuzz-graph.sh [SECONDS] [extra libFuzzer flags, e.g. -jobs=1]
# Builds build-fuzz/ with clang 14 (-DPRISM_BUILD_FUZZ=ON), writes a seed
# corpus of small valid graphs, runs for SECONDS (default 600). Crashes land in
# build-fuzz/fuzz-artifacts/; the exit status is libFuzzer's (0 = clean).
set -euo pipefail
seconds="${1:-600}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DPRISM_BUILD_FUZZ=ON -DPRISM_BUILD_TESTS=OFF -DPRISM_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" -j2 graph_fuzz graph_fuzz_seeds
corpus="$build/fuzz-corpus"
mkdir -p "$corpus" "$build/fuzz-artifacts"
"$build/fuzz/graph_fuzz_seeds" "$corpus"
cd "$build"
exec "$build/fuzz/graph_fuzz" -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -timeout=20 \
  -artifact_prefix="$build/fuzz-artifacts/" "$@" "$corpus"
