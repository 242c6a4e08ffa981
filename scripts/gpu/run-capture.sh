#!/usr/bin/env bash
# prism capture on a GPU host (docs/capture.md): examples/train_gpt.py at N
# ranks with a slice of real ranks (one per pipeline stage), then checks of
# the captured graph:
#   1. prism capture --graph train-gpt-N.graph --ranks SLICE: the run, each real
#      rank's measured compute (prism-session-capture), the extrapolation (and,
#      with REFINE=K, rounds with the captured graph until the iteration is stable);
#   2. the captured graph's operations against the job graph's (prism-graphgen
#      inspect --ops of a few ranks, durations left out): "same ops: yes/no";
#   3. prismd --simulate of the job graph and of the captured graph (steady
#      iteration, mean of iterations 1..3);
#   4. prism run --graph captured.graph --ranks OTHER (a rank the slice did not
#      include): exit status, iterations, steady iteration time, the ops check
#      of train_gpt.py, prismd's divergences; prismd records the run's sessions
#      (OUT/check-logs/sessions.rec) and prism-session-capture --ops-only keeps what a
#      replay reads (check-logs/sessions.ops.rec, ~1 MB): where the real rank's iteration
#      runs longer than --simulate's, per op kind, is then `bench/hybrid_gap.py --graphgen
#      G --step-cost-us US --ring-only captured.graph sessions.ops.rec OTHER` on any machine.
#
# Usage: scripts/gpu/run-capture.sh BUNDLE_DIR [N [SLICE [OTHER]]]   (from the repository root)
#   N: 8, 1024 (default) or 8192; SLICE: real ranks of the capture (default: 0 and the first
#   rank of the second stage, N/2); OTHER: the real rank(s) of the check run (default 5; e.g. 5,517:
#   a rank of each stage, pipeline peers, so that no pipeline send or receive has a virtual peer).
# BUNDLE_DIR: scripts/bundle-runtime.sh output with prismd, libnccl-net-prism.so,
#   prism-graphgen and prism-session-capture, plus graphs/train-gpt-N.graph as for
#   scripts/gpu/run-train-gpt.sh (its header says how to make them).
#
# FOLLOW=1: no job file and no graph of the program (docs/capture.md, prismd --follow):
#   1. prism capture --world N --ranks SLICE (train_gpt.py --device-id: eager communicators,
#      which prismd follows; one node per rank and the NIC of GBPS/LAT_US, as the job file);
#   2. the captured graph's communication (collectives, sends, receives; no compute) against
#      the job graph's, when BUNDLE_DIR/graphs/train-gpt-N.graph exists (it is not needed);
#   3. prismd --simulate of the captured graph (and of the job graph when present);
#   4. as above, prism run --graph captured.graph --ranks OTHER.
#   REFINE=K applies as below, from the captured graph (each round: prism capture --graph of the
#   previous round's graph, cluster the world graph's). At N=1024 on one H200: 2 + K prism runs.
#   The real ranks run with scripts/prism_torch on their path (prism capture's torch trace):
#   DIR/torch/torch-rank-<r>.jsonl.
# Env: OUT (default /tmp/prism-capture-<time>), ITERS (10), GBPS (10), LAT_US (10),
#   STEP_TIMEOUT (s per run; default 150, 300 at 8192), PYTHON (python3), NO_MPS=1,
#   REFINE=K: after 1, up to K rounds of prism capture with the previous round's captured
#   graph, printing each round, until the first real rank's steady iteration changes < 0.5%.
#   TORCH_TRACE=0: prism capture --no-torch-trace. SKIP_CHECK=1: no step 4. PACK=FILE.tar.gz: at exit, whatever exists of the capture's small
#   files (sessions.rec without its schedule lines; of a follow capture also sessions.slim.rec,
#   prism-session-capture --slim's; torch traces, recordings, the captured graphs, the tails of
#   the logs) in one archive, e.g. for test/fixtures.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu/stage_reap.sh
source "$repo/scripts/gpu/stage_reap.sh"
bundle="$(cd "${1:?usage: run-capture.sh BUNDLE_DIR [N [SLICE [OTHER]]]}" && pwd)"
n="${2:-1024}"; slice="${3:-0,$((n / 2))}"; other="${4:-5}"
OUT="${OUT:-/tmp/prism-capture-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT"
ITERS="${ITERS:-10}"; GBPS="${GBPS:-10}"; LAT_US="${LAT_US:-10}"; py="${PYTHON:-python3}"
graph="$bundle/graphs/train-gpt-$n.graph"; gg="$bundle/prism-graphgen"
timeout_s="${STEP_TIMEOUT:-$([[ $n -ge 8192 ]] && echo 300 || echo 150)}"
follow="${FOLLOW:-0}"
needed=(prismd libnccl-net-prism.so prism-graphgen prism-session-capture)
[[ $follow == 1 ]] || needed+=("graphs/train-gpt-$n.graph")
for f in "${needed[@]}"; do
  [[ -e $bundle/$f ]] || { echo "run-capture: $bundle lacks $f (see the header)" >&2; exit 1; }
done
train_args=(--iterations "$ITERS")
[[ $follow == 1 ]] && train_args+=(--device-id)
export NCCL_NVLS_ENABLE=0

mps=0
if [[ "${NO_MPS:-0}" != 1 ]] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && mps=1
fi
# pack: PACK's archive of the small files of every capture folder under OUT
pack() {
  [[ -n ${PACK:-} ]] || return 0
  local d; d=$(mktemp -d)
  for c in "$OUT"/capture "$OUT"/capture-[0-9]*; do
    [[ -d $c && $c != *-logs ]] || continue
    local b; b=$(basename "$c"); mkdir -p "$d/$b"
    [[ -f $c/sessions.rec ]] && grep -av '"schedule"' "$c/sessions.rec" > "$d/$b/sessions.rec"
    # a follow capture's recording as a test fixture holds it (fails quietly for a run with a graph, or an older bundle)
    [[ -f $c/sessions.rec ]] && "$bundle/prism-session-capture" "$c/sessions.rec" --slim "$d/$b/sessions.slim.rec" \
      > /dev/null 2>&1
    for f in torch recordings captured.graph world.graph; do [[ -e $c/$f ]] && cp -r "$c/$f" "$d/$b/"; done
    [[ -f $c.log ]] && tail -n 300 "$c.log" > "$d/$b.log"
    for l in "$c"-logs/*.log; do [[ -f $l ]] && mkdir -p "$d/$b-logs" && tail -n 200 "$l" > "$d/$b-logs/$(basename "$l")"; done
  done
  [[ -f $OUT/check.log ]] && tail -n 300 "$OUT/check.log" > "$d/check.log"
  [[ -f $OUT/check-logs/sessions.ops.rec ]] && cp "$OUT/check-logs/sessions.ops.rec" "$d/check-sessions.ops.rec"
  tar czf "$PACK" -C "$d" . && echo "packed $(du -h "$PACK" | cut -f1) into $PACK"
  rm -rf "$d"
}
cleanup() { pack; [[ $mps == 1 ]] && echo quit | nvidia-cuda-mps-control; }
trap cleanup EXIT
# after_stage TAG RC: nothing the stage started may hold the GPU for the next one (stage_reap.sh):
# its processes ended and waited for; after a failed stage, MPS restarted.
after_stage() {
  reap_stage "$1"
  [[ $2 != 0 && $mps == 1 ]] && { restart_mps || mps=0; }
  return 0
}

# As scripts/gpu/run-train-gpt.sh: the plugin's links shaped like the graphs' NIC, Ring.
common=(PYTHONUNBUFFERED=1 NCCL_ALGO="${NCCL_ALGO:-Ring}" PRISM_LINK_GBPS="$GBPS" PRISM_LINK_LATENCY_US="$LAT_US"
  PRISM_NIC_SPEED_MBPS=$((GBPS * 1000)))
tools=(--plugin "$bundle/libnccl-net-prism.so" --prismd "$bundle/prismd" --graphgen "$gg")
trace=(); [[ ${TORCH_TRACE:-1} == 0 ]] && trace=(--no-torch-trace)

# steady RANKLOG: a real rank's steady iteration time (mean of iterations 1..), "-" without one
steady() {
  "$py" - "$1" <<'PY'
import json, sys
it = []
try:
    lines = open(sys.argv[1], errors="replace").readlines()
except OSError:
    lines = []
for line in lines:
    if '{"train_gpt"' in line:
        try:
            e = json.loads(line[line.index('{"train_gpt"'):])
        except ValueError:
            continue
        if e["train_gpt"] == "iteration":
            it.append(e["time_s"])
s = it[1:] or it
print(f"{sum(s) / len(s):.4f}" if s else "-")
PY
}

# capture_round GRAPH DIR: prism capture with GRAPH into DIR (DIR/captured.graph)
capture_round() {
  local rc=0
  local cluster="$graph"; [[ -f $cluster ]] || cluster="$OUT/capture/world.graph"
  env "${common[@]}" "$(stage_env "capture-$$-$(basename "$2")")" timeout "$timeout_s" "$py" "$repo/scripts/prism" capture --graph "$1" --ranks "$slice" \
    --out "$2" --cluster "$cluster" --session-capture "$bundle/prism-session-capture" "${tools[@]}" "${trace[@]}" \
    --log-dir "$2-logs" --prismd-arg=--iterations --prismd-arg="$ITERS" \
    -- "$py" "$repo/examples/train_gpt.py" "${train_args[@]}" > "$2.log" 2>&1 || rc=$?
  echo "prism capture exit $rc (log $2.log)"
  after_stage "capture-$$-$(basename "$2")" "$rc"
  grep -E "^rank [0-9]+:|^step cost, rank|^measured:|^pp-stage|^role-|captured graph|error" "$2.log" | sed 's/^/  /'
  for r in ${slice//,/ }; do echo "  real rank $r: steady iteration $(steady "$2-logs/rank$r.log") s"; done
}

# capture_follow DIR: prism capture without a graph (prismd --follow) into DIR
capture_follow() {
  local rc=0
  env "${common[@]}" "$(stage_env "capture-$$-$(basename "$1")")" timeout "$timeout_s" "$py" "$repo/scripts/prism" capture --world "$n" --ranks "$slice" \
    --gpus-per-node 1 --nic-gbps "$GBPS" --nic-latency-us "$LAT_US" --out "$1" \
    --session-capture "$bundle/prism-session-capture" "${tools[@]}" "${trace[@]}" --log-dir "$1-logs" \
    -- "$py" "$repo/examples/train_gpt.py" "${train_args[@]}" > "$1.log" 2>&1 || rc=$?
  echo "prism capture (no graph: prismd --follow) exit $rc (log $1.log)"
  after_stage "capture-$$-$(basename "$1")" "$rc"
  grep -E "^rank [0-9]+:|^step cost, rank|^measured:|^role-|captured graph|error|refus" "$1.log" | sed 's/^/  /'
  echo "  groups prismd followed: $(grep -ac 'follow: world split' "$1-logs/prismd.log" 2> /dev/null || true)"
  for r in ${slice//,/ }; do echo "  real rank $r: steady iteration $(steady "$1-logs/rank$r.log") s"; done
}

if [[ $follow == 1 ]]; then
  echo "== 1. prism capture without a graph: train_gpt.py at $n ranks, real ranks $slice"
  capture_follow "$OUT/capture"
else
  echo "== 1. prism capture: train_gpt.py at $n ranks, real ranks $slice"
  capture_round "$graph" "$OUT/capture"
fi
captured="$OUT/capture/captured.graph"
[[ -f $captured ]] || { echo "no captured graph; stopping"; exit 1; }

# REFINE=K: up to K more rounds, each capturing with the previous round's graph,
# until the first real rank's steady iteration changes by less than 0.5%.
first="${slice%%,*}"; prev=$(steady "$OUT/capture-logs/rank$first.log")
for ((k = 1; k <= ${REFINE:-0}; k++)); do
  echo "== 1.$k refine round $k: prism capture with the previous round's graph"
  capture_round "$captured" "$OUT/capture-$k"
  [[ -f $OUT/capture-$k/captured.graph ]] || { echo "round $k captured nothing; stopping"; break; }
  captured="$OUT/capture-$k/captured.graph"
  now=$(steady "$OUT/capture-$k-logs/rank$first.log")
  change=$("$py" -c "a, b = '$prev', '$now'; print(f'{abs(float(b) / float(a) - 1) * 100:.2f}' if '-' not in (a, b) else '?')")
  echo "  round $k: rank $first steady $prev s -> $now s, change $change%"
  prev=$now
  [[ $change != "?" ]] && "$py" -c "import sys; sys.exit(0 if $change < 0.5 else 1)" && { echo "  stable (< 0.5%)"; break; }
done

echo "== 2. the captured graph's operations against the job graph's (durations left out$(
  [[ $follow == 1 ]] && echo "; communication only: a capture without a graph has its own compute ops"))"
if [[ -f $graph ]]; then
  for r in 0 1 $((n / 2)) ${other//,/ } $((n - 1)); do
    "$py" - "$gg" "$graph" "$captured" "$r" "$follow" <<'PY'
import json, subprocess, sys
gg, a, b, r, follow = sys.argv[1:]
def ops(g):
    p = json.loads(subprocess.run([gg, "inspect", g, "--ops", r], capture_output=True, text=True, check=True).stdout)
    if follow != "1":
        return [{k: v for k, v in o.items() if k != "duration_ns"} for o in p["ops"]]
    # communication only, by what a capture records (names, dtypes and labels are the job file's)
    keep = ("type", "kind", "bytes", "comm", "peer", "root")
    return [{k: v for k, v in o.items() if k in keep} for o in p["ops"] if o["type"] in ("collective", "send", "recv")]
x, y = ops(a), ops(b)
print(f"  rank {r}: {len(x)} ops in the job graph, {len(y)} captured; same ops: {'yes' if x == y else 'no'}")
PY
  done
else
  echo "  (no $graph: skipped)"
fi

echo "== 3. prismd --simulate (steady iteration, mean of iterations 1..3)"
for g in "$graph" "$captured"; do
  [[ -f $g ]] || continue
  "$bundle/prismd" --graph "$g" --simulate --iterations 4 --json --metrics-address none \
    --nccl-algo "${NCCL_ALGO:-Ring}" 2> /dev/null |
    "$py" -c "import json,sys; t=json.load(sys.stdin)['iteration_times_s'][1:]; print('  $(basename "$g"):', round(sum(t)/len(t), 4), 's')"
done

[[ ${SKIP_CHECK:-0} == 1 ]] && { echo "== 4. skipped (SKIP_CHECK=1)"; echo "results in $OUT"; exit 0; }
echo "== 4. prism run --graph captured.graph --ranks $other (a rank the slice did not include)"
rc=0
env "${common[@]}" "$(stage_env "capture-$$-check")" timeout "$timeout_s" "$py" "$repo/scripts/prism" run --graph "$captured" --ranks "$other" \
  "${tools[@]}" --log-dir "$OUT/check-logs" --prismd-arg=--iterations --prismd-arg="$ITERS" \
  --prismd-arg=--record-sessions --prismd-arg="$OUT/check-logs/sessions.rec" \
  -- "$py" "$repo/examples/train_gpt.py" "${train_args[@]}" > "$OUT/check.log" 2>&1 || rc=$?
after_stage "capture-$$-check" "$rc"
# what a replay reads of it (no per-message events: ~1 MB of tens): bench/hybrid_gap.py's input
[[ -f $OUT/check-logs/sessions.rec ]] && "$bundle/prism-session-capture" "$OUT/check-logs/sessions.rec" \
  --ops-only "$OUT/check-logs/sessions.ops.rec" 2>&1 | sed 's/^/  /'
for r in ${other//,/ }; do
  echo "  exit $rc; rank $r: steady iteration $(steady "$OUT/check-logs/rank$r.log") s; train_gpt.py ops check:" \
    "$(grep -c '"ops-check".*"match": *true' "$OUT/check-logs/rank$r.log" 2> /dev/null || true) match line(s)"
done
echo "  prismd.log lines about divergences: $(grep -acE "diverg" "$OUT/check-logs/prismd.log" 2> /dev/null || true)"
grep -aE "diverg" "$OUT/check-logs/prismd.log" 2> /dev/null | tail -2 | sed 's/^/  prismd| /'
echo "results in $OUT"
