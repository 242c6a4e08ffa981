#!/usr/bin/env bash
# examples/megatron/train_mcore.py (Megatron-core, unmodified: Gloo groups on)
# under `prism run` on a GPU host: issue 23's acceptance runs.
#
# Usage: scripts/gpu/run-mcore.sh BUNDLE_DIR PART...     (from the repository root)
#   PART: graphs                 prism-graphgen job examples/megatron/gpt-{8,1024,8192}.yaml
#                                -> $OUT/graphs/mcore-N.graph (roofline compute)
#         prism:N:RANKS[:eager]  scripts/prism run (starts prismd, hosts PyTorch's store) of
#                                mcore-N.graph with RANKS real (e.g. prism:1024:0, prism:1024:512,
#                                prism:1024:0,512); eager = train_mcore.py --device-id
#         capture:N:RANKS        scripts/prism capture --graph mcore-N.graph (the compute measured on
#                                the real ranks), then prismd --simulate of the captured graph: the
#                                2% comparison (the run's own steady iteration against the prediction)
#                                (eager-nogloo: --device-id --no-gloo on a graph with gloo_groups: false)
#         check:N:RANKS          scripts/prism run of the graph the newest capture:N part of this OUT wrote
#                                (or CAPTURED=path) with RANKS real, e.g. check:1024:5 check:1024:517,
#                                against prismd --simulate of that graph
#         simulate:N             prismd --simulate of mcore-N.graph (roofline compute)
#         truth:8[:eager]        8 real processes on this host's GPU, no Prism (TP2 PP2 DP2, NCCL over
#                                shared memory): does the program itself get through (eager: with
#                                --device-id, where c10d makes every rank outside a Gloo-only group
#                                split the world's NCCL communicator while its members do not)
# The command a user types is what each prism part runs: no --iterations for prismd (a hybrid
# run replays until the program stops), no Megatron flag.
# BUNDLE_DIR: scripts/bundle-runtime.sh output (prismd, libnccl-net-prism.so, prism-graphgen,
#   prism-session-capture, lib/).
# Env: MLM (Megatron-LM source, its megatron/ on PYTHONPATH; required for prism/capture parts),
#   OUT (default /tmp/prism-mcore-<time>), ITERS (12), STEP_TIMEOUT (s per run, default 280),
#   PYTHON (python3), TRUTH_TIMEOUT (s, 150), RECORD: what prismd records of each run's control
#   plane into the run's folder: sessions (default: sessions.rec, the plugin sessions' operations and
#   the schedules prismd sent, replayable in CI by daemon/hybrid/session_replay.h), all (also wire/,
#   the NCCL bootstrap's bytes, --record-wire: hundreds of MB for an eager start-up), 0 (none).
# Output, as each run ends: $OUT/rows.txt (one row per real rank), $OUT/<run>/ (prism run's
# rank<R>.log, prismd.log, run.log, the recordings gzipped, their ops-only copy sessions.ops.rec);
# PACK=FILE.tgz at the end: the rows, logs, captured graphs and ops-only recordings in one archive.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="$(cd "${1:?usage: run-mcore.sh BUNDLE_DIR PART...}" && pwd)"; shift
(($# > 0)) || { echo "usage: run-mcore.sh BUNDLE_DIR PART... (see the header)" >&2; exit 2; }
OUT="${OUT:-/tmp/prism-mcore-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT/graphs"
ITERS="${ITERS:-12}"; py="${PYTHON:-python3}"; graphgen="${GRAPHGEN:-$bundle/prism-graphgen}"
rows="$OUT/rows.txt"; touch "$rows"
export NCCL_NVLS_ENABLE=0 PRISM_HOME="$bundle" PYTHONUNBUFFERED=1
t0=$SECONDS
# shellcheck source=scripts/gpu/results_pack.sh
source "$repo/scripts/gpu/results_pack.sh"

graph_of() { echo "$OUT/graphs/mcore-$1.graph"; }   # N or N-nogloo
need_graph() {
  [[ -f $(graph_of "$1") ]] && return 0
  local n=${1%-nogloo} job="$repo/examples/megatron/gpt-${1%-nogloo}.yaml"
  if [[ $1 == *-nogloo ]]; then
    sed 's/gloo_groups: true/gloo_groups: false/' "$job" > "$OUT/graphs/gpt-$n-nogloo.yaml"; job="$OUT/graphs/gpt-$n-nogloo.yaml"
  fi
  "$graphgen" job "$job" -o "$(graph_of "$1")" > /dev/null
}
need_mlm() {
  [[ -d ${MLM:-}/megatron/core ]] && return 0
  echo "MLM=${MLM:-} is not a Megatron-LM source directory (MLM/megatron/core)" | tee -a "$rows"; return 1
}

# steady GRAPH: prismd --simulate's mean iteration time over iterations 1..3 (iteration 0 holds the start)
steady() {
  "$bundle/prismd" --graph "$1" --simulate --iterations 4 --json --metrics-address none 2> /dev/null |
    "$py" -c "import json,sys; t=json.load(sys.stdin)['iteration_times_s'][1:]; print(f'{sum(t)/len(t):.4f}')" \
    2> /dev/null || echo "?"
}

# row LABEL DIR REALS EXIT SECONDS PREDICTED: one row per real rank, from its JSON lines and prismd.log
row() {
  local label=$1 dir=$2 reals=$3 rc=$4 secs=$5 pred=$6
  for r in ${reals//,/ }; do
    "$py" - "$dir/rank$r.log" "$dir/prismd.log" "$label" "$r" "$rc" "$secs" "$pred" >> "$rows" <<'PY'
import json, re, sys
path, prismd, label, rank, rc, secs, pred = sys.argv[1:]
ev = []
try:
    for line in open(path, errors="replace"):
        if '{"train_mcore"' in line:
            try:
                ev.append(json.loads(line[line.index('{"train_mcore"'):]))
            except ValueError:
                pass
except OSError:
    pass
it = [e["time_s"] for e in ev if e["train_mcore"] == "iteration"]
start = next((e for e in ev if e["train_mcore"] == "start"), {})
done = any(e["train_mcore"] == "done" for e in ev)
steady = it[1:] or it
mean = sum(steady) / len(steady) if steady else None
try:
    log = open(prismd, errors="replace").read()
except OSError:
    log = ""
m = re.search(r"hybrid: (\d+) real-rank operations matched, (\d+) unmatched.*?(\d+) divergences", log)
ops = f"{m.group(1)}/{m.group(2)}/{m.group(3)}" if m else "-"
why = re.search(r"the run diverged from the graph: (.{0,160})", log) or re.search(r"prismd: (real rank \d+ waits.{0,120})", log)
gap = f"{100 * (mean / float(pred) - 1):+.2f}%" if mean and pred not in ("?", "-") else "-"
print(f"{label:<26} {rank:>5} {rc:>4} {secs:>5} {len(it):>3}{'+done' if done else '     '} "
      f"{start.get('init_s', '-')!s:>7} {it[0] if it else '-'!s:>9} {f'{mean:.4f}' if mean else '-':>8} "
      f"{pred:>8} {gap:>7} {ops:>12}  {why.group(1) if why else ''}")
PY
  done
}

free_port() { "$py" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }

# progress PORT FILE: every 5 s, prismd's start-up and iteration counters (an eager start-up's split rate)
progress() {
  local t=0
  while sleep 5; do
    t=$((t + 5))
    curl -s -m 2 "127.0.0.1:$1/metrics" | "$py" -c "
import re, sys
m = sys.stdin.read()
def v(k):
    x = re.search(r'^prism_bootstrap_events_total\{kind=\"' + k + r'\"\} (\S+)', m, re.M)
    return x.group(1).split('.')[0] if x else '-'
import glob
cpu = 0.0  # the real ranks' own CPU time (train_mcore.py processes), s
for stat in glob.glob('/proc/[0-9]*/cmdline'):
    try:
        argv = open(stat, 'rb').read().split(b'\\0')
        if len(argv) > 1 and argv[1].endswith(b'train_mcore.py'):  # python3 .../train_mcore.py
            f = open(stat[:-7] + 'stat').read().rsplit(')', 1)[1].split()
            cpu += (int(f[11]) + int(f[12])) / 100.0
    except OSError:
        pass
print('$t s: bootstrap all-gathers', v('allgathers'), 'communicators', v('comms_initialized'),
      'divergences', v('divergences'), 'real ranks CPU %.1f s' % cpu)" >> "$2" 2> /dev/null
  done
}

record_args() {  # DIR: prismd's control-plane recordings for this run
  case ${RECORD:-sessions} in
    0) ;;
    all) echo "--prismd-arg=--record-sessions=$1/sessions.rec --prismd-arg=--record-wire=$1/wire" ;;
    *) echo "--prismd-arg=--record-sessions=$1/sessions.rec" ;;
  esac
}

pack_recordings() {  # DIR
  ops_only "$bundle" "$1"
  [[ -f $1/sessions.rec ]] && gzip -f "$1/sessions.rec"
  [[ -d $1/wire ]] && tar -C "$1" -czf "$1/wire.tgz" wire && rm -rf "$1/wire"
}

part_graphs() {
  for n in 8 1024 8192; do
    local s=$SECONDS
    rm -f "$(graph_of $n)"; need_graph $n || { echo "graphgen $n failed" | tee -a "$rows"; continue; }
    echo "graph mcore-$n: $((SECONDS - s)) s, $("$graphgen" inspect "$(graph_of $n)" | grep -E '^(communicators|PyTorch)' | tr '\n' ' ')"
  done
}

# run_prism LABEL GRAPH REALS PREDICTED [train_mcore.py flag...]: scripts/prism run of GRAPH with REALS real
run_prism() {
  local label=$1 graph=$2 reals=$3 pred=$4; shift 4
  local dir="$OUT/$label" rc=0 s=$SECONDS
  rm -rf "$dir"; mkdir -p "$dir"; chmod 700 "$dir"
  echo "== $label at $((SECONDS - t0)) s: prism run of $(basename "$graph"), real ranks $reals, $ITERS iterations"
  local mport; mport=$(free_port)
  progress "$mport" "$dir/progress.txt" & local poller=$!
  # shellcheck disable=SC2046
  timeout -k 15 "${STEP_TIMEOUT:-280}" "$py" "$repo/scripts/prism" run --graph "$graph" --ranks "$reals" \
    --log-dir "$dir" --metrics-port "$mport" $(record_args "$dir") -- \
    env PYTHONPATH="$MLM" "$py" "$repo/examples/megatron/train_mcore.py" --iterations "$ITERS" "$@" \
    > "$dir/run.log" 2>&1 || rc=$?
  kill "$poller" 2> /dev/null; wait "$poller" 2> /dev/null
  tail -n 1 "$dir/progress.txt" 2> /dev/null | sed 's/^/  last progress: /'
  row "$label" "$dir" "$reals" "$rc" "$((SECONDS - s))" "$pred"
  tail -n "$(tr ',' '\n' <<< "$reals" | wc -l)" "$rows"
  grep -aE "diverged|waits|stall|error" "$dir/prismd.log" 2> /dev/null | head -n 3 | sed 's/^/  prismd| /'
  grep -aE "forecasts|late receives in|NCCL took" "$dir/prismd.log" 2> /dev/null | tail -n 3 | sed 's/^/  prismd| /'
  pack_recordings "$dir"
}

# prism:N:RANKS[:eager]
part_prism() {
  local n reals mode; IFS=: read -r _ n reals mode <<< "$1"
  local extra=() g=$n
  [[ $mode == eager* ]] && extra=(--device-id)
  [[ $mode == *nogloo ]] && extra+=(--no-gloo) && g=$n-nogloo
  need_mlm || return; need_graph "$g" || return
  run_prism "mcore-$n-r${reals//,/_}-${mode:-lazy}" "$(graph_of "$g")" "$reals" "${PRED[$n]:--}" "${extra[@]}"
}

# check:N:RANKS: prism run of the graph a capture:N part of this OUT wrote (the newest; or CAPTURED=path)
# with RANKS real, against prismd --simulate of that graph: the 2% check
part_check() {
  local n reals graph; IFS=: read -r _ n reals <<< "$1"
  graph=${CAPTURED:-$(ls -t "$OUT"/capture-"$n"-r*/captured.graph 2> /dev/null | head -n 1)}
  if [[ ! -f $graph ]]; then
    echo "check:$n:$reals: no captured graph in $OUT (run capture:$n:RANKS first, or set CAPTURED=path)" | tee -a "$rows"
    return
  fi
  need_mlm || return
  run_prism "check-$n-r${reals//,/_}" "$graph" "$reals" "$(steady "$graph")"
}

# capture:N:RANKS: the compute measured on the real ranks, the graph's operations (docs/capture.md)
part_capture() {
  local n reals; IFS=: read -r _ n reals <<< "$1"
  local label="capture-$n-r${reals//,/_}"; local dir="$OUT/$label" rc=0 s=$SECONDS
  need_mlm || return; need_graph "$n" || return
  rm -rf "$dir" "$dir-logs"; mkdir -p "$dir-logs"; chmod 700 "$dir-logs"
  echo "== $label at $((SECONDS - t0)) s: prism capture --graph mcore-$n.graph, real ranks $reals"
  timeout -k 15 "${STEP_TIMEOUT:-280}" "$py" "$repo/scripts/prism" capture --graph "$(graph_of "$n")" \
    --ranks "$reals" --out "$dir" --log-dir "$dir-logs" -- \
    env PYTHONPATH="$MLM" "$py" "$repo/examples/megatron/train_mcore.py" --iterations "$ITERS" \
    > "$dir-logs/run.log" 2>&1 || rc=$?
  local pred="?"
  [[ -f $dir/captured.graph ]] && pred=$(steady "$dir/captured.graph")
  row "$label" "$dir-logs" "$reals" "$rc" "$((SECONDS - s))" "$pred"
  tail -n "$(tr ',' '\n' <<< "$reals" | wc -l)" "$rows"
  ops_only "$bundle" "$dir"
  [[ -f $dir/sessions.rec ]] && gzip -f "$dir/sessions.rec"
}

# truth:8[:eager]: train_mcore.py's 8 ranks as 8 processes on GPU 0, env:// as torchrun sets it
part_truth() {
  local mode; IFS=: read -r _ _ mode <<< "$1"
  local label="truth-8-${mode:-lazy}"; local dir="$OUT/$label" extra=() pids=() rc=0 s=$SECONDS
  local port; port=$(free_port)
  need_mlm || return
  [[ $mode == eager ]] && extra=(--device-id)
  rm -rf "$dir"; mkdir -p "$dir"
  echo "== $label at $((SECONDS - t0)) s: 8 processes, no Prism, ${mode:-lazy}"
  for r in $(seq 0 7); do
    env RANK=$r WORLD_SIZE=8 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      PYTHONPATH="$MLM" timeout -k 10 "${TRUTH_TIMEOUT:-150}" "$py" "$repo/examples/megatron/train_mcore.py" \
      --iterations "$ITERS" "${extra[@]}" > "$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  row "$label" "$dir" 0,4 "$rc" "$((SECONDS - s))" "-"
  tail -n 2 "$rows"
}

declare -A PRED
part_simulate() {
  local n=${1#simulate:}; need_graph "$n" || return
  PRED[$n]=$(steady "$(graph_of "$n")")
  echo "simulate mcore-$n (roofline compute): steady iteration ${PRED[$n]} s" | tee -a "$rows"
}

for part in "$@"; do
  case $part in
    graphs) part_graphs ;;
    prism:*) part_prism "$part" ;;
    capture:*) part_capture "$part" ;;
    check:*) part_check "$part" ;;
    simulate:*) part_simulate "$part" ;;
    truth:8*) part_truth "$part" ;;
    *) echo "unknown part $part (see the header)" >&2 ;;
  esac
done
echo
echo "results in $OUT after $((SECONDS - t0)) s; per real rank: exit status, seconds, iterations (+done: clean end),"
echo "init_s, first and steady (mean of 1..) iteration time (s), the prediction, ops matched/unmatched/divergences"
printf '%-26s %5s %4s %5s %8s %7s %9s %8s %8s %7s %12s  %s\n' run rank exit secs iters init_s first steady \
  predict gap ops/un/div "prismd's reason"
cat "$rows"
# PACK=FILE.tgz: the rows, the runs' logs (their last 300 KB), the captured graphs and the ops-only recordings in one
# archive (what a GPU lease can return: it brings back 8 files of at most 16 MiB), for --simulate, hybrid_explain or
# bench/hybrid_gap.py on any machine later.
[[ -n ${PACK:-} ]] && pack_results "$OUT" "$PACK" 2 rows.txt captured.graph sessions.ops.rec '*.log'
