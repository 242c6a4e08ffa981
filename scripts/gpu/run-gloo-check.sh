#!/usr/bin/env bash
# Virtual ranks in the real ranks' Gloo groups under `prism run` on a GPU
# host (issue 23, item 1): an ordinary PyTorch program (gloo_check.py, no
# Prism code) whose default group has the default backend of
# init_process_group("cpu:gloo,cuda:nccl") and that makes
# Gloo groups with new_group(backend="gloo") in the graph's group order, then
# runs CPU collectives on them (barrier, all_reduce, broadcast, all_gather)
# and one CUDA all-reduce (NCCL). prismd plays every other rank, Gloo
# included. Per world (64, then 1024): rank 0 real with eager Gloo (full mesh
# at group creation), with lazy Gloo (TORCH_GLOO_LAZY_INIT=1), ranks 0 and 13
# real, rank 0 real with device_id (eager NCCL; default group only), and
# rank 13 real (rank 0 virtual) with the default group only.
#
# Usage: scripts/gpu/run-gloo-check.sh [BUNDLE_DIR]
#   BUNDLE_DIR: scripts/bundle-runtime.sh output (prismd, libnccl-net-prism.so,
#               prism-graphgen, lib/); default $PRISM_BUNDLE or build/prism-runtime
# Env: OUT (default /tmp/prism-gloo-<time>), PYTHON (python3), WORLDS (default
#      "64 1024"), ONLY (grep -E over labels, e.g. 'n64'), BUDGET (s, default 500:
#      variants not started by then are skipped), RUN_TIMEOUT (s per run, default 120).
# Writes $OUT/summary.txt (the table) and $OUT/<label>/{run.out,prismd.log,rank<R>.log}.
# The table's "gloo" column: prismd's Gloo contexts / pairs it opened / Gloo errors
# (from prismd.log); "div" counts divergences, "waits" prismd's wait reports.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prism="$here/../prism"
bundle="${1:-${PRISM_BUNDLE:-$here/../../build/prism-runtime}}"
bundle="$(cd "$bundle" 2>/dev/null && pwd)" || { echo "no bundle dir ${1:-}" >&2; exit 2; }
for f in prismd libnccl-net-prism.so; do
  [[ -x "$bundle/$f" || -f "$bundle/$f" ]] || { echo "missing $bundle/$f (scripts/bundle-runtime.sh)" >&2; exit 2; }
done
graphgen="$bundle/prism-graphgen"
[[ -x "$graphgen" ]] || graphgen="$here/../../build/graphgen/prism-graphgen"
[[ -x "$graphgen" ]] || { echo "no prism-graphgen in $bundle (rebuild the bundle)" >&2; exit 2; }
export PRISM_HOME="$bundle" NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
# A real rank of a 1024-rank eager Gloo group holds a socket per peer and group.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
OUT="${OUT:-/tmp/prism-gloo-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT"
py="${PYTHON:-python3}"
budget="${BUDGET:-500}"
run_timeout="${RUN_TIMEOUT:-120}"
rows="$OUT/rows.txt"; : > "$rows"
row() { printf '%-34s %-6s %-8s %-44s %6s %-14s %4s %5s\n' "$@" >> "$rows"; }
port=29900
next_port() { port=$((port + 7)); }

for world in ${WORLDS:-64 1024}; do
  "$graphgen" collective --op allreduce --bytes 1M --ranks "$world" --subgroups 8 -o "$OUT/g$world.graph" \
    > /dev/null || exit 2
done

# label: <gloo eager|lazy>-<nccl lazy|device>-<subgroups|world-only>-r<reals>-n<world>
variants=()
for world in ${WORLDS:-64 1024}; do
  # device_id with the default group only: with a bound device, c10d makes the non-members of a
  # Gloo-only new_group split the world's NCCL communicator (NOCOLOR) while its members do not split,
  # a hang without Prism too (as c10d's source reads; not checked on 2.11).
  variants+=("$world 0 eager lazy sub" "$world 0 lazy lazy sub" "$world 0,13 eager lazy sub"
             "$world 0 eager device world" "$world 13 eager lazy world")
done
skipped=0
version=auto
for v in "${variants[@]}"; do
  read -r world reals gloo nccl groups <<< "$v"
  label="gloo$gloo-nccl$nccl-$groups-r${reals/,/+}-n$world"
  [[ -n "${ONLY:-}" ]] && ! grep -qE "$ONLY" <<< "$label" && continue
  if (( SECONDS > budget )); then skipped=$((skipped + 1)); row "$label" "$world" "$reals" "skipped (BUDGET)" "-" "-" "-" "-"; continue; fi
  next_port
  dir="$OUT/$label"; mkdir -p "$dir"
  envs=(); [[ $gloo == lazy ]] && envs=(TORCH_GLOO_LAZY_INIT=1)
  flags=(); [[ $nccl == device ]] && flags+=(--device-id); [[ $groups == world ]] && flags+=(--no-subgroups)
  t0=$EPOCHREALTIME
  env "${envs[@]}" timeout -s INT "$run_timeout" "$py" "$prism" run --graph "$OUT/g$world.graph" --ranks "$reals" \
    --nccl-version "$version" --store-port "$port" --log-dir "$dir" -- \
    "$py" "$here/gloo_check.py" --tp 8 --timeout 120 "${flags[@]}" > "$dir/run.out" 2>&1
  rc=$?
  version=2.28.9  # asked of the program's NCCL once (auto), then given
  secs=$(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}")
  nreal=$(tr ',' '\n' <<< "$reals" | wc -l)
  oks=$(grep -c "OK rank" "$dir/run.out")
  log="$dir/prismd.log"
  contexts=$(grep -c "gloo: Gloo context" "$log" 2>/dev/null); contexts=${contexts:-0}
  gerrs=$(grep -c "\[error\] gloo:" "$log" 2>/dev/null); gerrs=${gerrs:-0}
  pairs=$(grep -oE "[0-9]+ pairs opened" "$log" 2>/dev/null | tail -1 | grep -oE "^[0-9]+"); pairs=${pairs:--}
  div=$(grep -c "divergence:" "$log" 2>/dev/null); div=${div:-0}
  waits=$(grep -c "waiting [0-9]* s:" "$log" 2>/dev/null); waits=${waits:-0}
  if [[ $rc == 0 && $oks == "$nreal" ]]; then
    result="ok"
  else
    why=$(grep -hE "Error|error:|FAIL|Timeout|timed out" "$dir/run.out" | grep -v "^\[prismd\]" | tail -1 | cut -c1-60)
    [[ $rc == 124 || $rc == 130 ]] && why="timeout ${run_timeout}s; ${why}"
    result="FAIL rc=$rc: ${why:-see run.out}"
  fi
  row "$label" "$world" "$reals" "${result:0:44}" "$secs" "$contexts/$pairs/$gerrs" "$div" "$waits"
done

{
  echo "== prism run with Gloo groups ($(date -Is), $OUT)"
  printf '%-34s %-6s %-8s %-44s %6s %-14s %4s %5s\n' variant world real result secs gloo:ctx/pairs/err div waits
  cat "$rows"
  (( skipped > 0 )) && echo "($skipped variants skipped: BUDGET=${budget}s reached; rerun with ONLY=...)"
  echo "Gloo errors (first 5):"; grep -h "\[error\] gloo:" "$OUT"/*/prismd.log 2>/dev/null | head -5 | cut -c1-300
} | tee "$OUT/summary.txt"
