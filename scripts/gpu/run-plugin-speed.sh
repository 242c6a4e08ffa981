#!/usr/bin/env bash
# The plugin's real-peer path against NCCL's Socket transport on a GPU host,
# in one command (docs/plugin.md, "Per-message cost"):
#  1. plugin_ring_bench (no GPU): ring all-reduce traffic between 2 and 8
#     processes through the plugin beside NCCL Socket's TCP scheme, wall and
#     CPU time, once per PRISM_INLINE_BYTES value in RING_INLINE;
#  2. run-plugin-check.sh: PyTorch ranks on the GPU, the plugin variants in
#     PRISM_VARIANTS beside one NCCL Socket run per world, with the ratios.
#
# Usage: scripts/gpu/run-plugin-speed.sh [BUNDLE_DIR]
#   BUNDLE_DIR: scripts/bundle-runtime.sh output (libnccl-net-prism.so, and
#               plugin_ring_bench when it was built; part 1 is skipped without)
# Env: OUT (default /tmp/prism-plugin-speed-<time>), RING_INLINE (default
#      "1073741824 262144 0"), PRISM_VARIANTS (default: prism = the plugin's
#      defaults; bulk256k = PRISM_INLINE_BYTES=262144: NCCL's 512 KiB Simple
#      steps by the progress threads; idle256k = PRISM_IDLE_INLINE_BYTES=262144:
#      the same only while the host has idle cores; nic400g = PRISM_NIC_SPEED_MBPS=400000, the
#      plugin's own default speed, where NCCL tunes otherwise than for Socket
#      (run-plugin-check.sh gives the others Socket's speed); add
#      threads:PRISM_INLINE_BYTES=0 for the earlier scheme), WORLDS,
#      RUN_TIMEOUT (default 60),
#      anything run-plugin-check.sh reads.
# Writes $OUT/ring-bench.txt and $OUT/check/summary.txt.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle="${1:-${PRISM_BUNDLE:-$here/../../build/prism-runtime}}"
bundle="$(cd "$bundle" && pwd)" || { echo "no bundle dir $bundle" >&2; exit 1; }
OUT="${OUT:-/tmp/prism-plugin-speed-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
start=$(date +%s)
status=0

if [[ -x "$bundle/plugin_ring_bench" ]]; then
  for v in ${RING_INLINE:-1073741824 262144 0}; do
    timeout 120 "$bundle/plugin_ring_bench" --plugin "$bundle/libnccl-net-prism.so" --ranks 2,8 \
      --sizes 1,32 --iters 3 --repeat 3 --env "PRISM_INLINE_BYTES=$v" --env PRISM_SOCKET_IFADDR=127.0.0.1 || status=1
  done 2>&1 | tee "$OUT/ring-bench.txt"
else
  echo "no $bundle/plugin_ring_bench (build it, then scripts/bundle-runtime.sh): part 1 skipped" | tee "$OUT/ring-bench.txt"
fi

OUT="$OUT/check" RUN_TIMEOUT="${RUN_TIMEOUT:-60}" \
  PRISM_VARIANTS="${PRISM_VARIANTS:-prism bulk256k:PRISM_INLINE_BYTES=262144 idle256k:PRISM_IDLE_INLINE_BYTES=262144 nic400g:PRISM_NIC_SPEED_MBPS=400000}" \
  "$here/run-plugin-check.sh" "$bundle" || status=1
echo "run-plugin-speed: $(( $(date +%s) - start )) s in all; results in $OUT"
exit $status
