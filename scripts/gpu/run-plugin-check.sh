#!/usr/bin/env bash
# Plugin check on a GPU host: PyTorch ranks on one GPU, each its own NCCL
# "host" (NCCL_HOSTID), talking through libnccl-net-prism.so, then the same
# through NCCL's own Socket transport for comparison. 2 and 8 ranks, under MPS.
# Each world runs Socket once and every plugin variant (PRISM_VARIANTS) beside
# it; plugin_check_ratios.py then prints Socket time / plugin time per
# operation and size (above 1: the plugin is faster) and NCCL's algorithm,
# protocol and channels per run (NCCL_DEBUG_SUBSYS has TUNING).
# PRISM_CHECK_PASSES=K (default 4) repeats that K times per world, Socket
# first in every other pass, labels ending in -p<k>; each pass's plugin runs
# are compared with its own Socket run and the summary gives, per variant and
# operation, the median of the K ratios with their range: on the one-GPU host
# (2026-12-02) the same plugin configuration run twice differed by up to 30%
# per operation, more than any variant moved it. The plugin runs first in
# the odd passes, so an odd K puts it first once more often than Socket: on
# one H100 (2026-12-05, K=3) the 8-rank 1 MiB all-reduce took 1884 and 1735
# us in the two passes the plugin ran first and 1266 us in the one Socket
# did (Socket 1670-1690 in all three); an even K balances the order. The
# default is 4 passes (1 until 2026-12-06): on one H100 that day two runs
# of one pass each would have put the 8-rank 1 MiB send/recv at 0.18 and
# 2.16 (docs/plugin.md), so one pass decides nothing.
# The plugin reports the NIC speed NCCL Socket reports for lo (its
# /sys/class/net/lo/speed, else NCCL's 10000 Mb/s), so that NCCL tunes both
# alike (channels, protocol): measured on the GPU host on 2026-12-02 with the
# plugin's own 400 Gb/s, NCCL ran 4 channels and LL for a 1 MiB all-reduce
# through the plugin against 2 channels and Simple through Socket, and the
# check compared those choices more than the transports.
# PRISM_CHECK_NIC_MBPS=plugin keeps the plugin's PRISM_NIC_SPEED_MBPS.
#
# Usage: scripts/gpu/run-plugin-check.sh [BUNDLE_DIR]
#   BUNDLE_DIR: output of scripts/bundle-runtime.sh (holds libnccl-net-prism.so)
#               default: $PRISM_BUNDLE or <repo>/build/prism-runtime
# Env: OUT (results directory; default /tmp/prism-plugin-check-<time>),
#      WORLDS (default "2 8"), PRISM_CHECK_SIZES, PRISM_CHECK_ITERS (iterations
#        per timed round, 5), PRISM_CHECK_ROUNDS (timed rounds, 5; an
#        operation's time is the median round, plugin_pytorch.py),
#      PRISM_CHECK_WAIT (spin, the default, or blocking: how every rank of
#        both transports waits for the GPU at the end of a round; blocking
#        leaves the cores to NCCL's proxy threads, plugin_pytorch.py),
#      PRISM_CHECK_NIC_MBPS (default: as above; a variant's own
#        PRISM_NIC_SPEED_MBPS wins),
#      PRISM_VARIANTS (default "prism"): space-separated plugin runs, each
#        LABEL or LABEL:K=V,K=V (e.g. "prism threads:PRISM_INLINE_BYTES=0"),
#        the K=V set for that run's ranks only,
#      PRISM_CHECK_PASSES (default 4; above),
#      PYTHON (default python3), NO_MPS=1 to skip MPS, RUN_TIMEOUT (s per run, 75),
#      any PRISM_* (passed on).
# Writes $OUT/summary.txt, $OUT/<label>.json, $OUT/<label>/rank<r>.log.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle="${1:-${PRISM_BUNDLE:-$here/../../build/prism-runtime}}"
bundle="$(cd "$bundle" && pwd)" || { echo "no bundle dir $bundle" >&2; exit 1; }
plugin="$bundle/libnccl-net-prism.so"
[[ -f "$plugin" ]] || { echo "missing $plugin (run scripts/bundle-runtime.sh)" >&2; exit 1; }
OUT="${OUT:-/tmp/prism-plugin-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
export OUT
py="${PYTHON:-python3}"
worlds="${WORLDS:-2 8}"
summary="$OUT/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

mps_started=0
if [[ "${NO_MPS:-0}" != 1 ]] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then mps_started=1; else say "WARNING: MPS did not start"; fi
fi
cleanup() {
  if [[ $mps_started == 1 ]]; then echo quit | nvidia-cuda-mps-control || true; fi
}
trap cleanup EXIT

# What NCCL Socket reports for lo (net_socket.cc: the sysfs speed, else 10000).
socket_mbps="$(cat /sys/class/net/lo/speed 2> /dev/null || true)"
[[ "$socket_mbps" =~ ^[0-9]+$ && "$socket_mbps" -gt 0 ]] || socket_mbps=10000
nic_mbps="${PRISM_CHECK_NIC_MBPS:-$socket_mbps}"

port=29500
run_one() {  # label world transport [K=V,K=V]
  local label="$1" world="$2" transport="$3" extra="${4:-}" dir="$OUT/$1" pids=() rc=0
  mkdir -p "$dir"
  port=$((port + 7))
  for ((r = 0; r < world; r++)); do
    local -a env=(RANK=$r WORLD_SIZE=$world LOCAL_RANK=0 MASTER_ADDR=127.0.0.1
      MASTER_PORT=$port PRISM_CHECK_LABEL=$label NCCL_HOSTID="prism-check-host-$r"
      NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV,TUNING
      NCCL_SOCKET_IFNAME=lo NCCL_RAS_ENABLE=0 NCCL_MNNVL_ENABLE=0)
    if [[ $transport == prism ]]; then
      env+=(NCCL_NET_PLUGIN="$plugin" NCCL_NET=Prism PRISM_SOCKET_IFADDR=127.0.0.1)
      [[ $nic_mbps != plugin ]] && env+=(PRISM_NIC_SPEED_MBPS="$nic_mbps")
      [[ -n $extra ]] && IFS=, read -r -a kv <<< "$extra" && env+=("${kv[@]}")
    else
      env+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket)
    fi
    env "${env[@]}" timeout "${RUN_TIMEOUT:-75}" "$py" "$here/plugin_pytorch.py" > "$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  local via
  via=$(grep -h -c "via NET/Prism" "$dir"/rank*.log | awk '{s+=$1} END {print s+0}')
  grep -h "^\[rank 0\]" "$dir/rank0.log" | tee -a "$summary"
  say "$label: exit $([[ $rc == 0 ]] && echo ok || echo FAILED), 'via NET/Prism' lines: $via"
  if [[ $rc != 0 ]]; then
    say "  last lines of failing logs:"
    for f in "$dir"/rank*.log; do tail -n 5 "$f" | sed "s|^|  $(basename "$f"): |" | tee -a "$summary"; done
  fi
  return $rc
}

status=0
start=$(date +%s)
say "plugin: $plugin"
say "MPS: $([[ $mps_started == 1 ]] && echo on || echo off)"
say "plugin NIC speed: $([[ $nic_mbps == plugin ]] && echo "the plugin's PRISM_NIC_SPEED_MBPS" || echo "$nic_mbps Mb/s (NCCL Socket reports $socket_mbps)")"
passes="${PRISM_CHECK_PASSES:-4}"
[[ "$passes" =~ ^[1-9][0-9]*$ ]] || { echo "PRISM_CHECK_PASSES must be a positive integer, not '$passes'" >&2; exit 2; }
run_variants() {  # world label-suffix
  for v in ${PRISM_VARIANTS:-prism}; do
    vlabel="${v%%:*}" venv=""
    [[ $v == *:* ]] && venv="${v#*:}"
    say "variant $vlabel: ${venv:-plugin defaults}"
    run_one "$vlabel-w$1$2" "$1" prism "$venv" || status=1
  done
}
for w in $worlds; do
  for ((k = 1; k <= passes; k++)); do
    suffix=""
    ((passes > 1)) && suffix="-p$k" && say "world $w, pass $k of $passes"
    if ((k % 2 == 0)); then
      run_one "socket-w$w$suffix" "$w" socket || status=1
      run_variants "$w" "$suffix"
    else
      run_variants "$w" "$suffix"
      run_one "socket-w$w$suffix" "$w" socket || status=1
    fi
  done
done
"$py" "$here/plugin_check_ratios.py" "$OUT" | tee -a "$summary"
say "total $(( $(date +%s) - start )) s; results in $OUT"
exit $status
