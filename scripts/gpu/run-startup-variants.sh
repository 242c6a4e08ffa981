#!/usr/bin/env bash
# PyTorch start-up variants under `prism run` on a GPU host (issue 11, items 2
# and 3): an ordinary TP/DP program (startup_tp_dp.py, no Prism code) started
# through env://, store=, tcp:// and torchrun's environment, with and without
# device_id, rank 0 real and rank 0 virtual, at world 8 and 64; prismd plays
# the other ranks. Then a real rank that never starts (prismd must name it
# within 5 s of the first real rank reaching the store), and prismd's store
# against PyTorch's own TCPStore client.
#
# Usage: scripts/gpu/run-startup-variants.sh [BUNDLE_DIR]
#   BUNDLE_DIR: scripts/bundle-runtime.sh output (prismd, libnccl-net-prism.so,
#               prism-graphgen, lib/); default $PRISM_BUNDLE or build/prism-runtime
# Env: OUT (default /tmp/prism-startup-<time>), PYTHON (python3),
#      WORLDS (default "8 64"), ONLY (grep -E over labels, e.g. 'env|store'),
#      BUDGET (s, default 330: variants not started by then are skipped; the
#      never-starts case and the table always run), RUN_TIMEOUT (s per run, default 50).
# Order: all 16 variants at world 8, then world 64 with rank 0 virtual, then
# rank 0 real (the budget cuts the last ones first).
# Writes $OUT/summary.txt (the table) and $OUT/<label>/{run.out,prismd.log,rank<R>.log}.
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
OUT="${OUT:-/tmp/prism-startup-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT"
py="${PYTHON:-python3}"
budget="${BUDGET:-330}"
run_timeout="${RUN_TIMEOUT:-50}"
rows="$OUT/rows.txt"; : > "$rows"
row() { printf '%-14s %-6s %-5s %-8s %-8s %-44s %6s %4s %5s\n' "$@" >> "$rows"; }
port=29800
next_port() { port=$((port + 7)); }

"$graphgen" collective --op allreduce --bytes 1M --ranks 8 --subgroups 4 -o "$OUT/g8.graph" > /dev/null || exit 2
"$graphgen" collective --op allreduce --bytes 1M --ranks 64 --subgroups 8 -o "$OUT/g64.graph" > /dev/null || exit 2
tp_of() { [[ $1 == 8 ]] && echo 4 || echo 8; }
reals_of() {  # world, rank0 real|virtual -> real ranks
  case "$1/$2" in
    8/real) echo 0,5 ;; 8/virtual) echo 5 ;; 64/real) echo 0,13 ;; *) echo 13 ;;
  esac
}

# ---- 1. prismd's store against PyTorch's TCPStore client.
next_port
mkdir -p "$OUT/store-selftest"
"$bundle/prismd" --graph "$OUT/g8.graph" --real-ranks 0 --torch-store "127.0.0.1:$port" \
  --listen "unix://$OUT/store-selftest/prismd.sock" --metrics-address none > "$OUT/store-selftest/prismd.log" 2>&1 &
pd=$!
for _ in $(seq 100); do grep -q "serving gRPC" "$OUT/store-selftest/prismd.log" 2>/dev/null && break; sleep 0.1; done
t0=$EPOCHREALTIME
timeout 30 "$py" "$here/torch_store_selftest.py" "$port" > "$OUT/store-selftest/run.out" 2>&1
rc=$?
kill -TERM $pd 2>/dev/null; wait $pd 2>/dev/null
secs=$(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}")
fails=$(grep -c "FAILED" "$OUT/store-selftest/run.out")
oks=$(grep -c ": ok" "$OUT/store-selftest/run.out")
result="ok ($oks calls)"; [[ $rc != 0 ]] && result="FAIL: $fails of $((oks + fails)) calls (see run.out)"
row "store-selftest" "-" "-" "-" "-" "$result" "$secs" "-" "-"

# ---- 2. The start-up variants.
variants=()
for world in ${WORLDS:-8 64}; do
  r0s="real virtual"; [[ $world != 8 ]] && r0s="virtual real"
  for r0 in $r0s; do
    for init in env store tcp torchrun; do
      for dev in device lazy; do variants+=("$world $init $dev $r0"); done
    done
  done
done
skipped=0
for v in "${variants[@]}"; do
  read -r world init dev r0 <<< "$v"
  graph="$OUT/g$world.graph"; tp=$(tp_of "$world")
  label="$init-$dev-r0$r0-n$world"
  [[ -n "${ONLY:-}" ]] && ! grep -qE "$ONLY" <<< "$label" && continue
  reals=$(reals_of "$world" "$r0")
  if (( SECONDS > budget )); then skipped=$((skipped + 1)); row "$init" "$dev" "$world" "$reals" "$r0" "skipped (BUDGET)" "-" "-" "-"; continue; fi
  next_port
  dir="$OUT/$label"; mkdir -p "$dir"
  prog_init=$init; envs=()
  if [[ $init == torchrun ]]; then  # what torchrun's agent exports besides RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*
    prog_init=env
    envs=(TORCHELASTIC_RUN_ID=prism TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 ROLE_NAME=default
          GROUP_WORLD_SIZE="$world" ROLE_WORLD_SIZE="$world" TORCHELASTIC_USE_AGENT_STORE=True OMP_NUM_THREADS=1)
  fi
  devflag=(); [[ $dev == device ]] && devflag=(--device-id)
  version=2.28.9; [[ ! -e "$OUT/.detected" ]] && version=auto && touch "$OUT/.detected"
  t0=$EPOCHREALTIME
  env "${envs[@]}" timeout -s INT "$run_timeout" "$py" "$prism" run --graph "$graph" --ranks "$reals" \
    --nccl-version "$version" --store-port "$port" --log-dir "$dir" -- \
    "$py" "$here/startup_tp_dp.py" --init "$prog_init" --tp "$tp" --timeout 40 "${devflag[@]}" > "$dir/run.out" 2>&1
  rc=$?
  secs=$(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}")
  nreal=$(tr ',' '\n' <<< "$reals" | wc -l)
  oks=$(grep -c "\] OK rank" "$dir/run.out")
  div=$(grep -c "divergence:" "$dir/prismd.log" 2>/dev/null); div=${div:-0}
  waits=$(grep -c "waiting [0-9]* s:" "$dir/prismd.log" 2>/dev/null); waits=${waits:-0}
  if [[ $rc == 0 && $oks == "$nreal" ]]; then
    result="ok"
  else
    why=$(grep -hE "Error|error:|FAIL|Timeout|timed out" "$dir/run.out" | grep -v "^\[prismd\]" | tail -1 | cut -c1-60)
    [[ $rc == 124 || $rc == 130 ]] && why="timeout ${run_timeout}s; ${why}"
    result="FAIL rc=$rc: ${why:-see run.out}"
  fi
  row "$init" "$dev" "$world" "$reals" "$r0" "${result:0:44}" "$secs" "$div" "$waits"
done

# ---- 3. A real rank that never starts: prismd must name it.
next_port
label="never-starts"; dir="$OUT/$label"; mkdir -p "$dir"
t0=$EPOCHREALTIME
timeout -s INT 25 "$py" "$prism" run --graph "$OUT/g8.graph" --ranks 0,5 --nccl-version 2.28.9 \
  --store-port "$port" --log-dir "$dir" -- bash -c \
  'if [ "$RANK" = 5 ]; then exec sleep 600; fi; exec "$0" "$@"' "$py" "$here/startup_tp_dp.py" --init env \
  --tp 4 --device-id > "$dir/run.out" 2>&1 &
runner=$!  # timeout(1) passes SIGINT on to prism run
named=""
for _ in $(seq 200); do
  named=$(grep -m1 -E "^\[prismd\].*(rank\(s\) 5|rank 5)" "$dir/run.out" 2>/dev/null) && [[ -n $named ]] && break
  sleep 0.1
done
sleep 1; kill -INT "$runner" 2>/dev/null; wait "$runner"; rc=$?
# seconds from rank 0 reaching the store to prismd naming rank 5 (prismd's own clock)
ts() {  # the first timestamped prismd log line matching $1 (prismd's untimestamped "prismd: ..." lines skipped)
  grep -E '^\[[0-9-]+ [0-9:.]+\]' "$dir/prismd.log" | grep -m1 -E "$1" | sed -E 's/^\[([0-9-]+ [0-9:.]+)\].*/\1/'
}
t_conn=$(ts "real rank 0 connected to PyTorch's store"); t_named=$(ts "(rank\(s\) 5|rank 5)")
delay="-"
[[ -n $t_conn && -n $t_named ]] && delay=$("$py" -c "import datetime as d,sys; f='%Y-%m-%d %H:%M:%S.%f'; \
print('%.1f' % (d.datetime.strptime(sys.argv[2], f) - d.datetime.strptime(sys.argv[1], f)).total_seconds())" \
  "$t_conn" "$t_named")
left=$(pgrep -f -- "$dir" | wc -l)
result="named after ${delay}s; exit $rc; $left procs left"; [[ -z $named ]] && result="NOT NAMED; exit $rc"
row "never-starts" "dev" "8" "0,5" "real" "$result" "$(awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $t0}")" \
  "$(grep -c 'divergence:' "$dir/prismd.log" 2>/dev/null)" "$(grep -c 'waiting [0-9]* s:' "$dir/prismd.log" 2>/dev/null)"
echo "$named" > "$dir/named.txt"

# ---- The table.
{
  echo "== prism run start-up variants ($(date -Is), $OUT)"
  printf '%-14s %-6s %-5s %-8s %-8s %-44s %6s %4s %5s\n' variant dev world real rank0 result secs div waits
  cat "$rows"
  echo "never-starts: $(cat "$OUT/never-starts/named.txt")" | cut -c1-200
  (( skipped > 0 )) && echo "($skipped variants skipped: BUDGET=${budget}s reached; rerun with ONLY=...)"
} | tee "$OUT/summary.txt"
