#!/usr/bin/env bash
# TorchTitan (its own train.py, Llama 3 debug model) under Prism on a GPU host, with no job
# file and no graph of the program (docs/capture.md, "TorchTitan"):
#   0. smoke (STAGES has it): two real ranks on the GPU without Prism (plain NCCL, one host id
#      per rank), to see TorchTitan, its shims and the mode start at all;
#   1. capture: prism capture --world N --ranks SLICE (prismd --follow) of
#      examples/torchtitan/prism_titan.py: each real rank's steady step, what prismd followed,
#      the capture's per-rank lines, the extrapolation;
#   1.k refine (STAGES has it, REFINE=K): prism capture --graph of the previous round's graph,
#      until the first real rank's steady step changes by less than 0.5%;
#   2. simulate: prismd --simulate of the last graph (mean of iterations 1..3);
#   3. check: prism run --graph captured.graph --ranks OTHER (a rank the slice did not include):
#      exit status, steps seen, steady step, prismd's divergences; and simulate vs hybrid.
#   Each run's prismd recording (capture/sessions.rec, refine-K/sessions.rec, and the check's
#   check-logs/sessions.rec) is kept as an ops-only copy beside it (sessions.ops.rec, what a
#   replay reads, no per-message events; prism-session-capture --ops-only): the real rank's
#   per-op starts and ends, for bench/hybrid_gap.py or hybrid_explain against --simulate on
#   any machine (docs/capture.md, "TorchTitan").
#
# Usage: scripts/gpu/run-titan.sh BUNDLE_DIR TITAN_DIR [N [MODE [SLICE [OTHER]]]]   (from the repository root)
#   BUNDLE_DIR: scripts/bundle-runtime.sh output (prismd, libnccl-net-prism.so, prism-graphgen,
#     prism-session-capture); TITAN_DIR: scripts/titan-source.sh output (TorchTitan v0.2.2).
#   N: world size (default 8); MODE: fsdp (FSDP2 over all N ranks, default) or fsdp_tp (FSDP2
#   over N/TP ranks x TP); SLICE: the capture's real ranks (default 0: every rank has one role;
#   on 2026-12-02 the slices 0,4 and 0 of 8 hung in their first step, see docs/capture.md);
#   OTHER: the check run's real rank (default 5; must not be in SLICE).
# Env: OUT (default /tmp/prism-titan-<time>): summary.txt as the steps go, and at the end the
#   tails of up to 7 logs and graphs.tgz (the captured graphs, the ops-only recordings and the
#   rank recordings, when under 15 MiB; a GPU lease's $OUT returns 8 files, so with the smoke
#   stage's log one of them stays behind); KEEP (default
#   /tmp/prism-titan-work-<time>): the runs' files (capture, logs); give a folder that outlives
#   the command, e.g. out/t8192 in the repository, to run "check" in a later command; STAGES
#   (default "capture simulate check"; "smoke" adds step 0, "refine" the rounds; "check" alone
#   reuses KEEP's capture and refine rounds), REFINE (rounds, default 0), REFINE_FROM (the first round to
#   run, default 1: a later one starts from KEEP's previous round, so rounds can span commands), ITERS (TorchTitan steps, 10), TP (fsdp_tp's degree: 8, or
#   N/2 below 16), GPN (gpus per node of the world graph: 1), GBPS (10) and LAT_US (10): the
#   world's NIC and the plugin's link shape, STEP_TIMEOUT (s per Prism run; 240), PYTHON,
#   NO_MPS=1, TITAN_ARGS (more TorchTitan options, e.g. "--training.seq_len 1024"), ENTRY_ARGS (prism_titan.py's
#   own options, e.g. "--mesh-split-group"), PRISMD_ARGS
#   (more prismd options for every stage's prismd and the simulate, e.g. "--nic-model interleave").
# Expected at N=1024 on one H200: capture and check about 2-3 minutes each (mostly start-up).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu/stage_reap.sh
source "$repo/scripts/gpu/stage_reap.sh"
# shellcheck source=scripts/gpu/results_pack.sh
source "$repo/scripts/gpu/results_pack.sh"
usage="usage: run-titan.sh BUNDLE_DIR TITAN_DIR [N [MODE [SLICE [OTHER]]]]"
bundle="$(cd "${1:?$usage}" && pwd)"; titan="$(cd "${2:?$usage}" && pwd)"
n="${3:-8}"; mode="${4:-fsdp}"; slice="${5:-0}"; other="${6:-5}"
OUT="${OUT:-/tmp/prism-titan-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT"
work="${KEEP:-/tmp/prism-titan-work-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$work"; work="$(cd "$work" && pwd)"
STAGES="${STAGES-capture simulate check}"; ITERS="${ITERS:-10}"; GPN="${GPN:-1}"
GBPS="${GBPS:-10}"; LAT_US="${LAT_US:-10}"; py="${PYTHON:-python3}"; timeout_s="${STEP_TIMEOUT:-240}"
summary="$OUT/summary.txt"
mport=$((29700 + RANDOM % 200))   # prismd's /status and /metrics
say() { echo "$@" | tee -a "$summary"; }
# OUT gets summary.txt, the tails of at most 7 logs and graphs.tgz (a GPU lease returns 8 files);
# everything else stays in KEEP.
tails() {
  local first="${slice%%,*}" src dst
  for pair in "smoke-rank0.log:smoke.log" "capture.log:cap.log" "capture-logs/prismd.log:cap-prismd.log" \
      "capture-logs/rank$first.log:cap-rank$first.log" "check.log:chk.log" "check-logs/prismd.log:chk-prismd.log" \
      "check-logs/rank$other.log:chk-rank$other.log"; do
    src="$work/${pair%%:*}"; dst="$OUT/${pair##*:}"
    [[ -f $src && $src != "$dst" ]] && tail -c 300000 "$src" > "$dst"
  done
  # The graphs and the ops-only recordings, for --simulate, hybrid_explain or hybrid_gap.py on any
  # machine after the lease (one archive; left out when over 15 MiB, what a lease returns per file).
  pack_results "$work" "$OUT/graphs.tgz" 3 captured.graph sessions.ops.rec '*.capture.jsonl' > /dev/null
}

for f in prismd libnccl-net-prism.so prism-graphgen prism-session-capture; do
  [[ -e $bundle/$f ]] || { echo "run-titan: $bundle lacks $f (scripts/bundle-runtime.sh makes it)" >&2; exit 1; }
done
[[ -d $titan/torchtitan ]] || { echo "run-titan: $titan has no torchtitan/ (scripts/titan-source.sh makes it)" >&2; exit 1; }
[[ ",$slice," == *",$other,"* ]] && { echo "run-titan: the check rank $other is in the slice $slice" >&2; exit 1; }
titan_args=(--job.config_file "$repo/examples/torchtitan/llama3_debug.toml" --training.steps "$ITERS")
case $mode in
  fsdp) ;;
  fsdp_tp)
    tp="${TP:-$([[ $n -ge 16 ]] && echo 8 || echo $((n / 2)))}"
    (( tp >= 2 && n % tp == 0 )) || { echo "run-titan: TP $tp does not divide N $n" >&2; exit 1; }
    titan_args+=(--parallelism.tensor_parallel_degree "$tp") ;;
  *) echo "run-titan: MODE is fsdp or fsdp_tp, not $mode" >&2; exit 1 ;;
esac
# shellcheck disable=SC2206
titan_args+=(${TITAN_ARGS:-})
# shellcheck disable=SC2206
entry_args=(${ENTRY_ARGS:-})
program=("$py" "$repo/examples/torchtitan/prism_titan.py" --titan "$titan" "${entry_args[@]}" -- "${titan_args[@]}")
export NCCL_NVLS_ENABLE=0

mps=0
if [[ "${NO_MPS:-0}" != 1 ]] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="/tmp/prism-titan-mps-$$/pipe" CUDA_MPS_LOG_DIRECTORY="/tmp/prism-titan-mps-$$/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && mps=1
fi
cleanup() { tails; [[ $mps == 1 ]] && echo quit | nvidia-cuda-mps-control; }
trap cleanup EXIT
# after_stage TAG RC: nothing the stage started may hold the GPU for the next one (stage_reap.sh):
# its processes ended and waited for; after a failed stage, MPS restarted.
after_stage() {
  reap_stage "$1" | tee -a "$summary"
  [[ $2 != 0 && $mps == 1 ]] && { restart_mps || mps=0; }
  return 0
}

common=(PYTHONUNBUFFERED=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}" NCCL_ALGO="${NCCL_ALGO:-Ring}" PRISM_LINK_GBPS="$GBPS" PRISM_LINK_LATENCY_US="$LAT_US"
  PRISM_NIC_SPEED_MBPS=$((GBPS * 1000)) PRISM_TITAN_DUMP="$work/titan-dump")
# shellcheck disable=SC2206
prismd_extra=(${PRISMD_ARGS:-})
tools=(--plugin "$bundle/libnccl-net-prism.so" --prismd "$bundle/prismd" --graphgen "$bundle/prism-graphgen"
  --metrics-port "$mport")
for a in "${prismd_extra[@]}"; do tools+=(--prismd-arg="$a"); done

# steps LOG: "<count> <steady>": prism_titan.py's step lines, mean of steps 2.. ("-" without)
steps() {
  "$py" - "$1" <<'PY'
import json, sys
t = []
try:
    lines = open(sys.argv[1], errors="replace").readlines()
except OSError:
    lines = []
for line in lines:
    if '{"titan": "iteration"' in line:
        try:
            t.append(json.loads(line[line.index('{"titan"'):])["time_s"])
        except ValueError:
            pass
s = t[1:] or t
print(len(t), f"{sum(s) / len(s):.4f}" if s else "-")
PY
}
# simulate GRAPH: prismd --simulate, mean of iterations 1..3 (s)
simulate() {
  "$bundle/prismd" --graph "$1" --simulate --iterations 4 --json --metrics-address none \
    --nccl-algo "${NCCL_ALGO:-Ring}" "${prismd_extra[@]}" 2> "$work/simulate.err" |
    "$py" -c "import json,sys; t=json.load(sys.stdin)['iteration_times_s'][1:]; print(f'{sum(t)/len(t):.4f}')" 2>&1 | tail -1
}
# poll_status FILE: prismd's last /status (it stops with the run) into FILE every 2 s, in the
# background; status_line FILE: what it said last (state, iterations, anything about waits)
poll_status() {
  ( while :; do curl -s -m 1 "127.0.0.1:$mport/status" > "$1.tmp" 2> /dev/null && [[ -s $1.tmp ]] && mv "$1.tmp" "$1"
      sleep 2; done ) > /dev/null 2>&1 &
  poller=$!
}
status_line() {
  [[ -s $1 ]] || { echo "no /status"; return; }
  "$py" - "$1" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except ValueError:
    print("unreadable /status"); sys.exit()
keep = {k: v for k, v in s.items() if not isinstance(v, (dict, list)) or k in ("waits", "stalls", "recent_divergences")}
print(json.dumps(keep)[:900])
PY
}
# last_error LOG: the last lines that say why a run failed (not NCCL's INFO lines: with
# NCCL_DEBUG=INFO the plugin's own INFO lines name NET/Prism too)
last_error() {
  grep -aE "Error|error|refus|Traceback|FAILED|diverg|NCCL WARN|NET/Prism|held|stall" "$1" 2> /dev/null |
    grep -av -e "frame #" -e " NCCL INFO " |
    tail -4 | sed 's/^/    | /'
}

say "== run-titan: N=$n mode=$mode slice=$slice other=$other iters=$ITERS gpn=$GPN nic=${GBPS}Gbps/${LAT_US}us" \
  "torchtitan $(cat "$titan/COMMIT" 2> /dev/null || echo '?') torch $("$py" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)"
say "   program: ${program[*]}"

if [[ " $STAGES " == *" smoke "* ]]; then
  say "== 0. smoke: 2 real ranks, no Prism (NCCL over sockets, one host id per rank)"
  port=$((29600 + RANDOM % 300)); pids=()
  smoke_args=("${program[@]}")   # fsdp_tp: TP over both ranks
  [[ $mode == fsdp_tp ]] && smoke_args+=(--parallelism.tensor_parallel_degree 2)
  start=$(date +%s)
  for r in 0 1; do
    env "${common[@]}" "$(stage_env "titan-$$-smoke")" RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      NCCL_HOSTID="titan-smoke-$r" NCCL_SOCKET_IFNAME=lo timeout 180 "${smoke_args[@]}" > "$work/smoke-rank$r.log" 2>&1 &
    pids+=($!)
  done
  rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  after_stage "titan-$$-smoke" "$rc"
  read -r cnt st <<< "$(steps "$work/smoke-rank0.log")"
  say "  exit $rc in $(( $(date +%s) - start )) s; rank 0: $cnt steps, steady $st s"
  [[ $rc == 0 ]] || last_error "$work/smoke-rank0.log" | tee -a "$summary"
fi

captured="$work/capture/captured.graph"
if [[ " $STAGES " == *" capture "* ]]; then
  say "== 1. prism capture --world $n --ranks $slice (prismd --follow, no graph)"
  rm -rf "$work/capture" "$work/capture-logs"; mkdir -p "$work/capture-logs"
  start=$(date +%s); rc=0; poll_status "$work/capture-status.json"
  env "${common[@]}" "$(stage_env "titan-$$-capture")" timeout "$timeout_s" "$py" "$repo/scripts/prism" capture --world "$n" --ranks "$slice" \
    --gpus-per-node "$GPN" --nic-gbps "$GBPS" --nic-latency-us "$LAT_US" --out "$work/capture" \
    --session-capture "$bundle/prism-session-capture" "${tools[@]}" --log-dir "$work/capture-logs" \
    -- "${program[@]}" > "$work/capture.log" 2>&1 || rc=$?
  kill "$poller" 2> /dev/null; wait "$poller" 2> /dev/null
  say "  exit $rc in $(( $(date +%s) - start )) s (log capture.log, capture-logs/)"
  after_stage "titan-$$-capture" "$rc"
  ops_only "$bundle" "$work/capture" | tee -a "$summary"
  [[ $rc == 0 ]] || say "  prismd's last /status: $(status_line "$work/capture-status.json")"
  grep -aE "^rank [0-9]+:|^step cost, rank|^measured:|^role-|captured graph|wrote .*graph|refus" "$work/capture.log" | sed 's/^/  /' | tee -a "$summary"
  say "  groups prismd followed: $(grep -ac 'follow: world split' "$work/capture-logs/prismd.log" 2> /dev/null || true)" \
    "; splits seen: $(grep -acE 'split #' "$work/capture-logs/prismd.log" 2> /dev/null || true)"
  for r in ${slice//,/ }; do
    read -r cnt st <<< "$(steps "$work/capture-logs/rank$r.log")"
    say "  real rank $r: $cnt steps, steady step $st s"
  done
  if [[ $rc != 0 ]]; then
    last_error "$work/capture-logs/prismd.log" | tee -a "$summary"
    for r in ${slice//,/ }; do
      say "  rank $r's last warnings and errors:"; last_error "$work/capture-logs/rank$r.log" | tee -a "$summary"
    done
  fi
fi

# REFINE=K (stage refine): up to K rounds of prism capture --graph <the previous graph> (the
# compute measured on the slice against the graph's operations, docs/capture.md), until the first
# real rank's steady step changes by less than 0.5%; simulate and check then use the last graph.
first="${slice%%,*}"
if [[ " $STAGES " == *" refine "* && -f $captured && ${REFINE:-0} -gt 0 ]]; then
  prev_graph="$captured"; prev=$(steps "$work/capture-logs/rank$first.log" | cut -d' ' -f2)
  from="${REFINE_FROM:-1}"
  if (( from > 1 )); then
    prev_graph="$work/refine-$((from - 1))/captured.graph"
    [[ -f $prev_graph ]] || { say "REFINE_FROM=$from: no round $((from - 1)) in $work to start from"; exit 1; }
    prev=$(steps "$work/refine-$((from - 1))-logs/rank$first.log" | cut -d' ' -f2)
  fi
  for ((k = from; k <= REFINE; k++)); do
    dir="$work/refine-$k"
    say "== 1.$k refine round $k: prism capture --graph $(basename "$(dirname "$prev_graph")")/captured.graph --ranks $slice"
    rm -rf "$dir" "$dir-logs"; mkdir -p "$dir-logs"
    start=$(date +%s); rc=0
    env "${common[@]}" "$(stage_env "titan-$$-refine-$k")" timeout "$timeout_s" "$py" "$repo/scripts/prism" capture --graph "$prev_graph" --ranks "$slice" \
      --out "$dir" --session-capture "$bundle/prism-session-capture" "${tools[@]}" --log-dir "$dir-logs" \
      --prismd-arg=--iterations --prismd-arg="$ITERS" -- "${program[@]}" > "$dir.log" 2>&1 || rc=$?
    after_stage "titan-$$-refine-$k" "$rc"
    ops_only "$bundle" "$dir" | tee -a "$summary"
    now=$(steps "$dir-logs/rank$first.log" | cut -d' ' -f2)
    change=$("$py" -c "a, b = '$prev', '$now'
try:
    print(f'{abs(float(b) / float(a) - 1) * 100:.2f}')
except ValueError:
    print('?')")
    say "  exit $rc in $(( $(date +%s) - start )) s; rank $first steady $prev s -> $now s, change $change%"
    grep -aE "^rank [0-9]+:.*compute|^step cost, rank|^measured:" "$dir.log" | sed 's/^/  /' | tee -a "$summary"
    [[ -f $dir/captured.graph ]] || { say "  round $k captured nothing; stopping"; last_error "$dir.log" | tee -a "$summary"; break; }
    prev_graph="$dir/captured.graph"; prev=$now
    [[ $change != "?" ]] && "$py" -c "import sys; sys.exit(0 if $change < 0.5 else 1)" && { say "  stable (< 0.5%)"; break; }
  done
fi
# The graph simulate and check use: the last refine round's, else the capture's.
graph_used="$captured"
for ((k = 1; k <= 20; k++)); do [[ -f $work/refine-$k/captured.graph ]] && graph_used="$work/refine-$k/captured.graph"; done
graph_name="${graph_used#"$work"/}"

sim="-"
if [[ " $STAGES " == *" simulate "* && -f $graph_used ]]; then
  say "== 2. prismd --simulate of $graph_name"
  "$bundle/prism-graphgen" inspect "$graph_used" > "$work/captured-inspect.txt" 2>&1 || true
  grep -aE "^communicators:|groups of size|^  program|bytes/iteration|compute " "$work/captured-inspect.txt" |
    head -12 | sed 's/^/  inspect| /' | tee -a "$summary"
  sim=$(simulate "$graph_used")
  say "  simulate: $sim s per iteration"
  [[ $sim =~ ^[0-9.]+$ ]] || tail -3 "$work/simulate.err" | sed 's/^/    | /' | tee -a "$summary"
  [[ $graph_used != "$captured" ]] && say "  (the first capture's graph: $(simulate "$captured") s)"
fi

if [[ " $STAGES " == *" check "* ]]; then
  if [[ ! -f $graph_used ]]; then
    say "== 3. check skipped: no $graph_used"
  else
    say "== 3. prism run --graph $graph_name --ranks $other (a rank the slice did not include)"
    rm -rf "$work/check-logs"; mkdir -p "$work/check-logs"
    start=$(date +%s); rc=0; poll_status "$work/check-status.json"
    env "${common[@]}" "$(stage_env "titan-$$-check")" timeout "$timeout_s" "$py" "$repo/scripts/prism" run --graph "$graph_used" --ranks "$other" \
      "${tools[@]}" --log-dir "$work/check-logs" --prismd-arg=--iterations --prismd-arg="$ITERS" \
      --prismd-arg=--record-sessions --prismd-arg="$work/check-logs/sessions.rec" \
      -- "${program[@]}" > "$work/check.log" 2>&1 || rc=$?
    kill "$poller" 2> /dev/null; wait "$poller" 2> /dev/null
    after_stage "titan-$$-check" "$rc"
    ops_only "$bundle" "$work/check-logs" | tee -a "$summary"
    [[ $rc == 0 ]] || say "  prismd's last /status: $(status_line "$work/check-status.json")"
    read -r cnt st <<< "$(steps "$work/check-logs/rank$other.log")"
    say "  exit $rc in $(( $(date +%s) - start )) s; rank $other: $cnt steps, steady step $st s"
    say "  $(grep -a 'prismd: hybrid:' "$work/check-logs/prismd.log" 2> /dev/null | tail -1)"
    grep -a "NCCL took" "$work/check-logs/prismd.log" 2> /dev/null | sed 's/^/  /' | tee -a "$summary"
    say "  prismd.log lines naming a divergence: $(grep -aci 'divergence:' "$work/check-logs/prismd.log" 2> /dev/null || true)"
    grep -ai "divergence:" "$work/check-logs/prismd.log" 2> /dev/null | tail -3 | sed 's/^/  prismd| /' | tee -a "$summary"
    [[ $rc == 0 ]] || { last_error "$work/check.log" | tee -a "$summary"; last_error "$work/check-logs/rank$other.log" | tee -a "$summary"; }
    [[ $sim == "-" ]] && sim=$(simulate "$graph_used")
    say "  simulate $sim s vs hybrid steady $st s: $("$py" -c "a, b = '$sim', '$st'
try:
    print(f'{(float(a) / float(b) - 1) * 100:+.2f}%')
except ValueError:
    print('?')")"
  fi
fi
say "results in $OUT (runs in $work)"
