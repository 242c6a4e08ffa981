#!/usr/bin/env bash
# Runs one libFuzzer target of Prism:
#   scripts/fuzz.sh TARGET [SECONDS] [extra libFuzzer flags, e.g. -jobs=1]
# TARGET: graph       graph loader + engine setup and replay (fuzz/graph_fuzz.cc)
#         job         job YAML parser + graph generator (fuzz/job_yaml_fuzz.cc)
#         collective  `prism-graphgen collective` flags (fuzz/collective_flags_fuzz.cc)
#         store       prismd's PyTorch store: protocol + live server (fuzz/store_protocol_fuzz.cc)
#         plugin-env  the plugin's PRISM_* environment (fuzz/plugin_env_fuzz.cc)
# Builds build-fuzz/ with clang 14 (-DPRISM_BUILD_FUZZ=ON), writes a seed
# corpus (graphs from graph_fuzz_seeds; examples/*.yaml; a few flag lines),
# runs for SECONDS (default 600). Crashes land in build-fuzz/fuzz-artifacts/;
# the exit status is libFuzzer's (0 = clean).
set -euo pipefail
target="${1:?usage: scripts/fuzz.sh graph|job|collective|store|plugin-env [SECONDS] [libFuzzer flags]}"
shift
seconds="${1:-600}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
case "$target" in
  graph) binary=graph_fuzz; max_len=16384 ;;
  job) binary=job_yaml_fuzz; max_len=8192 ;;
  collective) binary=collective_flags_fuzz; max_len=512 ;;
  store) binary=store_protocol_fuzz; max_len=4096 ;;
  plugin-env) binary=plugin_env_fuzz; max_len=1024 ;;
  *) echo "fuzz.sh: unknown target '$target' (graph, job, collective, store or plugin-env)" >&2; exit 2 ;;
esac
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DPRISM_BUILD_FUZZ=ON -DPRISM_BUILD_TESTS=OFF -DPRISM_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" -j"${PRISM_JOBS:-2}" "$binary" graph_fuzz_seeds
corpus="$build/fuzz-corpus-$target"
mkdir -p "$corpus" "$build/fuzz-artifacts"
case "$target" in
  graph) "$build/fuzz/graph_fuzz_seeds" "$corpus" ;;
  job) cp "$root"/examples/*.yaml "$corpus/" ;;
  collective)
    i=0
    while IFS= read -r line; do printf '%s\n' "$line" > "$corpus/seed-$i"; i=$((i + 1)); done <<'SEEDS'
--op allreduce --bytes 1M --ranks 8
--op allgather --bytes 64K --ranks 16 --gpus-per-node 8 --algo ring --iterations 3
--op reducescatter --bytes 1G --ranks 64 --nic-gbps 400 --nic-latency-us 5 --nics-per-node 8
--op alltoall --bytes 4096 --ranks 4 --nvlink-gbps 3600 --nvlink-latency-us 1 --name t
--op broadcast --bytes 512K --ranks 32 --algo tree --gpus-per-node 4
--op sendrecv --bytes 1M --ranks 8 --subgroups 2 --max-subgroups 1
--op allreduce --bytes 16M --ranks 128 --subgroups 8 --iterations 1000000
SEEDS
    ;;
  store)  # a byte choosing VALIDATE, then requests as PyTorch's client sends them
    python3 - "$corpus" <<'PY'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
seeds = [
    bytes([3]) + s(b"/k"),                                                   # GET
    bytes([1]) + s(b"/default_pg/0//cuda//0") + s(bytes(128)),               # SET
    bytes([4]) + s(b"/n") + struct.pack("<q", 7) + bytes([4]) + s(b"/n") + struct.pack("<q", 2**63 - 1),  # ADD x2
    bytes([6]) + struct.pack("<Q", 2) + s(b"/a") + s(b"/b") + bytes([12]),   # WAIT, CANCEL_WAIT
    bytes([9]) + s(b"/x") + s(b"abc") + bytes([17]),                          # APPEND, LIST_KEYS
    bytes([11]) + struct.pack("<Q", 1) + s(b"/m") + s(b"v") + bytes([10]) + struct.pack("<Q", 1) + s(b"/m"),
    bytes([14]) + s(b"/q") + s(b"item") + bytes([15]) + s(b"/q") + bytes([16]) + s(b"/q"),
    bytes([18]) + s(b"/bar") + struct.pack("<q", 1) + bytes([13]) + struct.pack("<I", 5),
]
for i, body in enumerate(seeds):
    open(f"{sys.argv[1]}/seed-{i}", "wb").write(bytes([1]) + body)
PY
    ;;
  plugin-env)  # "<index byte><value>" lines: NIC names, numbers, the daemon address
    printf '\001nic%%d\n\000\064\n\002400000\n' > "$corpus/seed-0"
    printf '\001%%s%%s%%n\n\02799999999999\n' > "$corpus/seed-1"
    printf '\030unix:///tmp/x.sock\n\032 0,1001\n\033pattern\n' > "$corpus/seed-2"
    ;;
esac
cd "$build"
exec "$build/fuzz/$binary" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=20 \
  -artifact_prefix="$build/fuzz-artifacts/$target-" "$@" "$corpus"
