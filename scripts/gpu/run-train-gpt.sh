#!/usr/bin/env bash
# examples/train_gpt.py on a GPU host: (a) its ground truth, 8 real ranks on
# one GPU, and (b) Prism runs with one or two real ranks among 8, 1024 or 8192.
#
# Usage: scripts/gpu/run-train-gpt.sh BUNDLE_DIR [PART...]     (from the repository root)
#   PART: measure             train_gpt.py --measure: the compute table ($OUT/compute.yaml)
#         truth               8 real ranks (TP2 PP2 DP2), MPS, NCCL_HOSTID per rank, plugin links
#                             shaped to the job files' NIC (GBPS, LAT_US), lazy communicators
#         truth-eager         the same with --device-id
#         prism:N:RANKS[:eager]  prismd + scripts/prism run, RANKS real (e.g. prism:1024:0,
#                             prism:1024:5 = rank 0 virtual, prism:8192:0,1 = two real ranks)
#   default PARTS: measure truth prism:8:0
# Each invocation should stay under ~6 minutes; run the large ones apart:
#   scripts/gpu/run-train-gpt.sh B measure truth prism:8:0
#   scripts/gpu/run-train-gpt.sh B prism:1024:0 prism:1024:5
#   scripts/gpu/run-train-gpt.sh B prism:8192:0
#   scripts/gpu/run-train-gpt.sh B prism:8192:0,1
# BUNDLE_DIR: scripts/bundle-runtime.sh output (prismd, libnccl-net-prism.so, lib/)
#   plus graphs/train-gpt-{8,1024,8192}.graph, made on the build machine with
#     for n in 8 1024 8192; do build/graphgen/prism-graphgen job examples/train-gpt-$n.yaml \
#       -o BUNDLE_DIR/graphs/train-gpt-$n.graph; done
#   With GRAPHGEN=/path/to/prism-graphgen (runnable here) and the measure part,
#   the graphs are regenerated into $OUT/graphs with the measured compute, and with
#   STEP_COST_US=C also with NCCL's step cost C (the job files' cluster.nccl_step_cost_us:
#   the fit a run's prismd prints at exit; docs/network-model.md, "The figure moves with the host").
# Env: OUT (default /tmp/prism-train-gpt-<time>), ITERS (10), GBPS (10), LAT_US (10): must be
#   the job files' cluster.nic (the graphs are regenerated with them when GRAPHGEN is set),
#   STEP_TIMEOUT (s per run; default 150, 300 at 8192), PYTHON (python3), NO_MPS=1,
#   RECORD=0 (prismd records no sessions), PRISMD_ARGS (more prismd flags, e.g. "--spin-us 500"; the
#   --simulate column gets them too, so a model flag such as --step-cost-us times both sides).
# Each prism run records its plugin sessions (sessions.rec; build/bench/hybrid_explain reads it);
# PACK=FILE.tgz at the end puts the rows, logs and the recordings' ops-only copies in one archive.
# Prints a table last: per run, each real rank's first and steady-state iteration time (from
# iteration 1, and from iteration 2: the figure to hold against --simulate), the
# ops check, prismd's --simulate prediction and what prismd's /status said.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="$(cd "${1:?usage: run-train-gpt.sh BUNDLE_DIR [PART...]}" && pwd)"; shift
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(measure truth prism:8:0)
OUT="${OUT:-/tmp/prism-train-gpt-$(date +%Y%m%d-%H%M%S)}"; mkdir -p "$OUT"
ITERS="${ITERS:-10}"; GBPS="${GBPS:-10}"; LAT_US="${LAT_US:-10}"; py="${PYTHON:-python3}"
plugin="$bundle/libnccl-net-prism.so"; graphs="$bundle/graphs"
[[ -f $plugin && -x $bundle/prismd ]] || { echo "run-train-gpt: $bundle lacks prismd or the plugin" >&2; exit 1; }
rows="$OUT/rows.txt"; : > "$rows"
# shellcheck source=scripts/gpu/results_pack.sh
source "$repo/scripts/gpu/results_pack.sh"
export NCCL_NVLS_ENABLE=0   # on every GPU host

mps=0
if [[ "${NO_MPS:-0}" != 1 ]] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && mps=1
fi
pids_to_kill=()
cleanup() {
  for p in "${pids_to_kill[@]}"; do kill "$p" 2> /dev/null; done
  [[ $mps == 1 ]] && echo quit | nvidia-cuda-mps-control
}
trap cleanup EXIT

# The real ranks' NCCL and plugin settings (scripts/prism run sets the same; the
# links of real peers are shaped like the graphs' NIC).
common=(PYTHONUNBUFFERED=1 NCCL_NET_PLUGIN="$plugin" NCCL_NET=Prism NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0
  NCCL_MNNVL_ENABLE=0 NCCL_WIN_ENABLE=0 NCCL_COLLNET_ENABLE=0 NCCL_RUNTIME_CONNECT=0
  NCCL_PXN_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_ALGO="${NCCL_ALGO:-Ring}" TORCH_NCCL_RANKS_PER_ROOT=1048576
  PRISM_LINK_GBPS="$GBPS" PRISM_LINK_LATENCY_US="$LAT_US" PRISM_NIC_SPEED_MBPS=$((GBPS * 1000)))

graph_of() { echo "$graphs/train-gpt-$1.graph"; }

predicted() {  # prismd --simulate's steady iteration time of graph N (mean of iterations 1..3, as "steady" below),
  # with the runs' PRISMD_ARGS (one model for both sides, e.g. --step-cost-us or --nic-model)
  # shellcheck disable=SC2086
  "$bundle/prismd" --graph "$(graph_of "$1")" --simulate --iterations 4 --json --metrics-address none \
    --nccl-algo "${NCCL_ALGO:-Ring}" ${PRISMD_ARGS:-} 2> /dev/null |
    "$py" -c "import json,sys; t=json.load(sys.stdin)['iteration_times_s'][1:]; print(round(sum(t)/len(t), 4))" \
    2> /dev/null || echo "?"
}

# row LABEL N REALS EXIT DIR STATUS: one table row per real rank, from its JSON lines
row() {
  local label=$1 n=$2 reals=$3 rc=$4 dir=$5 status=$6 pred
  pred=$(predicted "$n")
  for r in ${reals//,/ }; do
    "$py" - "$dir/rank$r.log" "$label" "$r" "$rc" "$pred" "$status" >> "$rows" <<'PY'
import json, sys
path, label, rank, rc, pred, status = sys.argv[1:]
ev = []
for line in open(path, errors="replace"):   # a launcher may prefix the rank's lines
    if '{"train_gpt"' in line:
        try:
            ev.append(json.loads(line[line.index('{"train_gpt"'):]))
        except ValueError:
            pass
it = [e["time_s"] for e in ev if e["train_gpt"] == "iteration"]
ok = any(e["train_gpt"] == "ops-check" and e.get("match") for e in ev)
start = next((e for e in ev if e["train_gpt"] == "start"), {})
steady = it[1:] or it
mean = f"{sum(steady) / len(steady):.4f}" if steady else "-"
from2 = f"{sum(it[2:]) / len(it[2:]):.4f}" if len(it) > 2 else "-"
first = f"{it[0]:.3f}" if it else "-"
print(f"{label:<22} {rank:>5} {rc:>4} {len(it):>5} {start.get('init_s', '-')!s:>7} {first:>8} {mean:>9} {from2:>8} "
      f"{pred:>9} {'yes' if ok else 'no':>4}  {status}")
PY
  done
}

part_measure() {
  echo "== measure: one rank's compute (train_gpt.py's defaults, the optimizer shard of 8 ranks)"
  "$py" "$repo/examples/train_gpt.py" --measure --world 8 --measure-out "$OUT/compute.yaml" > "$OUT/measure.log" 2>&1
  cat "$OUT/compute.yaml" 2> /dev/null || tail -5 "$OUT/measure.log"
  if [[ -n "${GRAPHGEN:-}" && -f "$OUT/compute.yaml" ]]; then
    mkdir -p "$OUT/graphs"
    for n in 8 1024 8192; do
      sed -e "s/gbps: 10,/gbps: $GBPS,/" -e "s/latency_us: 10}/latency_us: $LAT_US}/" \
        "$repo/examples/train-gpt-$n.yaml" > "$OUT/graphs/train-gpt-$n.yaml"
      echo "compute_table: ../compute.yaml" >> "$OUT/graphs/train-gpt-$n.yaml"
      [[ -n ${STEP_COST_US:-} ]] && sed -i "/^  gpus_per_node:/a\\  nccl_step_cost_us: $STEP_COST_US" "$OUT/graphs/train-gpt-$n.yaml"
      "$GRAPHGEN" job "$OUT/graphs/train-gpt-$n.yaml" -o "$OUT/graphs/train-gpt-$n.graph" > /dev/null || return
    done
    graphs="$OUT/graphs"; echo "graphs regenerated with the measured compute in $graphs"
  fi
}

part_truth() {  # 8 real ranks, each its own host, links shaped like the graph's NIC
  local label=$1 extra=("${@:2}") dir="$OUT/$1" port=$((29400 + RANDOM % 200)) pids=() rc=0
  mkdir -p "$dir"; echo "== $label: 8 real ranks, ${GBPS} Gbit/s ${LAT_US} us links, ${extra[*]:-lazy}"
  for r in $(seq 0 7); do
    env -u NCCL_COMM_ID "${common[@]}" RANK=$r WORLD_SIZE=8 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      NCCL_HOSTID="truth-$r" timeout "${STEP_TIMEOUT:-150}" "$py" "$repo/examples/train_gpt.py" \
      --iterations "$ITERS" "${extra[@]}" > "$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  row "$label" 8 0,4 "$rc" "$dir" "-"
}

# prism:N:RANKS[:eager]: prismd replays graph N, scripts/prism run starts RANKS
part_prism() {
  local n reals mode; IFS=: read -r _ n reals mode <<< "$1"
  local label="prism-$n-r${reals//,/_}${mode:+-$mode}" dir="$OUT/prism-$n-r${reals//,/_}${mode:+-$mode}"
  local base=$((29000 + 40 * (${#label} % 10) + RANDOM % 20))
  local mport=$((base + 1)) store=$((base + 2)) extra=() rc=0
  [[ $mode == eager ]] && extra=(--device-id)
  local record=(--prismd-arg=--record-sessions --prismd-arg="$dir/sessions.rec")
  [[ ${RECORD:-1} == 0 ]] && record=()
  local a; for a in ${PRISMD_ARGS:-}; do record+=(--prismd-arg="$a"); done
  mkdir -p "$dir"; echo "== $label: scripts/prism run (starts prismd, store mode), real ranks $reals of $n ${mode:-lazy}"
  [[ -f $(graph_of "$n") ]] || { echo "missing $(graph_of "$n") (see the header)"; return; }
  # prism run starts prismd itself (it hosts PyTorch's store and learns every
  # NCCL id from it), so this is exactly what a user types. The poller keeps
  # the last /status, /metrics and page, since prismd stops with the run.
  ( sleep 1; while :; do
      curl -s -m 1 "127.0.0.1:$mport/status" >> "$dir/status.jsonl" || true
      curl -s -m 1 "127.0.0.1:$mport/metrics" > "$dir/metrics.tmp" && [[ -s $dir/metrics.tmp ]] && mv "$dir/metrics.tmp" "$dir/metrics.txt"
      code=$(curl -s -m 1 -o "$dir/page.tmp" -w '%{http_code}' "127.0.0.1:$mport/") && [[ $code == 200 ]] &&
        mv "$dir/page.tmp" "$dir/page.html"
      sleep 2; done ) &
  local poller=$!; pids_to_kill+=("$poller")
  local timeout_s="${STEP_TIMEOUT:-$([[ $n -ge 8192 ]] && echo 300 || echo 150)}"
  env "${common[@]}" timeout "$timeout_s" "$py" "$repo/scripts/prism" run --graph "$(graph_of "$n")" --world "$n" \
    --ranks "$reals" --plugin "$plugin" --prismd "$bundle/prismd" --metrics-port "$mport" --store-port "$store" \
    --log-dir "$dir" --prismd-arg=--iterations --prismd-arg="$ITERS" \
    "${record[@]}" \
    -- "$py" "$repo/examples/train_gpt.py" --iterations "$ITERS" "${extra[@]}" > "$dir/run.log" 2>&1 || rc=$?
  kill "$poller" 2> /dev/null; wait "$poller" 2> /dev/null
  local page=000; [[ -s $dir/page.html ]] && page=200
  touch "$dir/metrics.txt" "$dir/status.jsonl"
  # prism run wrote rank<R>.log (each rank's output) and prismd.log into $dir.
  local status
  status=$("$py" - "$dir/status.jsonl" "$dir/metrics.txt" "$page" <<'PY'
import json, re, sys
last = None
for chunk in open(sys.argv[1], errors="replace").read().replace("}{", "}\n{").splitlines():
    try:
        last = json.loads(chunk)
    except ValueError:
        pass
div = re.search(r'kind="divergences"} (\S+)', open(sys.argv[2], errors="replace").read())
s = "no /status" if last is None else (f"status {last.get('state', '?')[:20]} it {last.get('iterations_done')} "
                                        f"last {last.get('last_iteration_time_s', 0):.4f}s")
print(f"{s}; divergences {div.group(1) if div else '?'}; page {sys.argv[3]}")
PY
)
  row "$label" "$n" "$reals" "$rc" "$dir" "$status"
  grep -aE "error|diverge|hang|waiting" "$dir/prismd.log" | head -3 | sed 's/^/  prismd| /'
  # prismd's exit lines: rings held and forecasts, late receives (steady iterations, by cause), engine lag,
  # and the step cost its real ranks' NCCL took where it is not the one the run played
  grep -aE "rings held|late receives in|engine lag over|NCCL took" "$dir/prismd.log" | sed 's/^/  prismd| /'
}

for part in "${parts[@]}"; do
  case $part in
    measure) part_measure ;;
    truth) part_truth truth-8 ;;
    truth-eager) part_truth truth-8-eager --device-id ;;
    prism:*) part_prism "$part" ;;
    *) echo "unknown part $part" >&2 ;;
  esac
done
echo
echo "results in $OUT; iteration times of the real ranks (s), steady = mean of iterations 1..$((ITERS - 1)),"
echo "from2 = of iterations 2..$((ITERS - 1)) (iteration 1 is still a start-up transient: 0.96-1.01 s against"
echo "1.10-1.12 s at 8192 ranks on 2026-12-02, so the ranks of one run differ in steady, not in from2)"
printf '%-22s %5s %4s %5s %7s %8s %9s %8s %9s %4s  %s\n' run rank exit iters init_s first steady from2 simulate ops prismd
cat "$rows"
# PACK=FILE.tgz: the rows, the compute table, the regenerated job files and, per run, its logs (the last 300 KB),
# metrics and the ops-only copy of its recording in one archive (a GPU lease brings back 8 files of at most 16 MiB).
if [[ -n ${PACK:-} ]]; then
  for d in "$OUT"/prism-*/; do ops_only "$bundle" "${d%/}"; done
  pack_results "$OUT" "$PACK" 2 rows.txt '*.yaml' metrics.txt sessions.ops.rec '*.log'
fi
