#!/usr/bin/env bash
# Hybrid check on a GPU host: real PyTorch ranks among virtual ranks played by
# prismd (NCCL bootstrap emulation + plugin sessions), one scenario at a time.
#
# Usage: scripts/gpu/run-hybrid-check.sh BUNDLE_DIR [SCENARIO...]
#   BUNDLE_DIR: scripts/bundle-runtime.sh output with prismd, the plugin, and
#               graphs/<N>.graph made by
#               prism-graphgen collective --op allreduce --bytes 1M --ranks N --subgroups 8 [--max-subgroups 1]
#   SCENARIO: N:REALRANKS[:MAXGROUPS], e.g. 8:0 64:5 64:0,5 8192:0:1
# Env: OUT (results dir), RECORD=1 (prismd --record-wire into $OUT/<scenario>/wire),
#      COLLECTIVES=0 to skip collectives, STEP_TIMEOUT (s, default 150),
#      PRISMD_FLAGS (extra prismd flags, e.g. "--wire-profile 23007 --allow-unverified-wire-profile"),
#      EXTRA_ENV (extra VAR=value words for every real rank, e.g. LD_PRELOAD=... for another NCCL).
# Writes $OUT/hybrid-summary.txt and per-scenario logs.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle="$(cd "${1:?bundle dir}" && pwd)"; shift
OUT="${OUT:-/tmp/prism-hybrid-$(date +%H%M%S)}"; mkdir -p "$OUT"
summary="$OUT/hybrid-summary.txt"
say() { echo "$*" | tee -a "$summary"; }
port=29700
for scenario in "$@"; do
  IFS=: read -r n reals maxg <<< "$scenario"
  label="n${n}-r${reals//,/_}"; dir="$OUT/$label"; mkdir -p "$dir"
  port=$((port + 11)); comm_id="127.0.0.1:$port"; sock="/tmp/prismd-$label.sock"
  rec=(); [[ "${RECORD:-0}" == 1 ]] && rec=(--record-wire "$dir/wire")
  "$bundle/prismd" --graph "$bundle/graphs/$n.graph" --real-ranks "$reals" --nccl-comm-id "$comm_id" \
    --listen "unix://$sock" --metrics-address "127.0.0.1:$((port + 1))" "${rec[@]}" ${PRISMD_FLAGS:-} > "$dir/prismd.log" 2>&1 &
  pd=$!
  for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
  first="${reals%%,*}"; pids=(); t0=$EPOCHREALTIME
  for r in ${reals//,/ }; do
    client=(); [[ $r != "$first" ]] && client=(--store-client)
    [[ $r == "$first" && $first != 0 ]] && client=(--publish-id)
    coll=(--collectives); [[ "${COLLECTIVES:-1}" == 0 ]] && coll=()
    env PYTHONUNBUFFERED=1 NCCL_COMM_ID="$comm_id" NCCL_NET_PLUGIN="$bundle/libnccl-net-prism.so" NCCL_NET=Prism \
      PRISM_DAEMON="unix://$sock" NCCL_HOSTID="prism-real-$r" NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0 \
      NCCL_MNNVL_ENABLE=0 NCCL_WIN_ENABLE=0 NCCL_COLLNET_ENABLE=0 NCCL_RUNTIME_CONNECT=0 \
      NCCL_PXN_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,BOOTSTRAP \
      TORCH_NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_RANKS_PER_ROOT=1048576 ${EXTRA_ENV:-} \
      timeout "${STEP_TIMEOUT:-150}" python3 "$here/bootstrap_torch_driver.py" --world-size "$n" --rank "$r" \
      --store-port $((port + 2)) --tp 8 --max-groups "${maxg:-0}" "${client[@]}" "${coll[@]}" > "$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  wall=$(awk "BEGIN {printf \"%.2f\", $EPOCHREALTIME - $t0}")
  # prismd counts the job complete a moment after the last destroy: wait for it (up to 3 s).
  for _ in $(seq 30); do
    curl -s "127.0.0.1:$((port + 1))/metrics" | grep -E "^prism_(bootstrap|plugin)" > "$dir/metrics.txt"
    [[ $rc != 0 ]] || grep -qE 'kind="jobs_completed"} [1-9]' "$dir/metrics.txt" && break
    sleep 0.1
  done
  kill -TERM $pd 2>/dev/null; wait $pd 2>/dev/null
  say "== $label: exit $rc, wall ${wall}s"
  for r in ${reals//,/ }; do
    grep -hE "^(init_process_group|new_group|all_reduce|broadcast|all_gather|reduce_scatter|tp all_reduce|send/recv|destroy)" "$dir/rank$r.log" | sed "s/^/  rank $r: /" | tee -a "$summary"
    grep -c "via NET/Prism" "$dir/rank$r.log" | sed "s/^/  rank $r 'via NET\/Prism' lines: /" | tee -a "$summary"
    [[ $rc != 0 ]] && tail -n 8 "$dir/rank$r.log" | sed "s/^/  rank $r| /" | tee -a "$summary"
  done
  grep -E "divergen|error|WARN|fail" "$dir/prismd.log" | head -5 | sed 's/^/  prismd| /' | tee -a "$summary"
  grep -E "kind=\"(divergences|comms_initialized|jobs_completed|transport_setups)\"" "$dir/metrics.txt" | sed 's/^/  /' | tee -a "$summary"
done
