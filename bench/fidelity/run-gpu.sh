#!/usr/bin/env bash
# Fidelity experiments on a GPU host (bench/fidelity/README.md): the ground
# truth (every rank real, each its own NCCL_HOSTID, under MPS, real-peer links
# shaped to the spec's link), then hybrid runs (1 or 2 real ranks, the rest
# played by prismd from the same graph), then the comparison tables.
#
# Usage: bench/fidelity/run-gpu.sh BUNDLE DATA RUN...
#   BUNDLE  scripts/bundle-runtime.sh output (plugin, prismd)
#   DATA    bench/fidelity/prepare.sh output (graphs, programs, model times)
#   RUN     NAME:KIND   KIND = truth | hybrid1 | hybrid2 | truth-late | hybrid1-late | hybrid1-run | hybrid2-run
#           | truth-again | truth-late-again (the truth once more, judged against the first as a hybrid
#           is: the truth's own run-to-run spread, the floor under any hybrid's error)
#           | truth-againN | truth-late-againN (N = 2, 3, ...: more repeats; with three truths or more
#           compare.py also pools them and holds the hybrids and each truth against the pool)
#           (hybrid1-run: rank 0 (RUN_RANK) started by `scripts/prism run` as an ordinary program:
#           env://, the store prismd hosts, lazy communicators -- for worlds of thousands, where one
#           eager world-wide split per group would take minutes; hybrid2-run: ranks 0 and SECOND_REAL so)
#           (NAME = a prepared spec, e.g. step-n8:truth step-n8:hybrid1)
# Env: OUT (default /tmp/prism-fidelity), GPUS (GPUs to spread truth ranks on, default 1),
#      LATE_ITER (default 10), LATE_MS (default 20), LATE_RANK (default 0: the rank that is late in
#      truth-late and hybrid1-late; a rank the hybrid plays virtually is made late by prismd --late, rank 0
#      by its own program), RUN_TIMEOUT (s, default 300),
#      RUN_RANK (hybrid1-run's real rank, default 0; prepare the spec with it in RANKS),
#      EXTRA_ENV (extra VAR=value words for every rank), PRISMD_FLAGS (more flags for the hybrids' prismd,
#      after the spec's MODEL_FLAGS in DATA's meta.env: those its model ran with, prepare.sh),
#      NCCL_CHOOSES=1 (NCCL picks algorithm and protocol: no NCCL_ALGO/NCCL_PROTO set; else every
#      rank runs NCCL_PROTO=Simple and the spec's algorithm: NCCL_ALGO=Ring, Tree or PAT),
#      YIELD_SLEEP_US=N (default 20; 0: off): every rank preloads BUNDLE/libprism-yield-sleep.so, so
#      sched_yield sleeps N us and NCCL's spinning proxy threads leave cores to the ranks packed
#      beside them (README.md, "A ground truth that holds its links"),
#      YIELD_FIFO=1 (with the shim: the threads that yield run SCHED_FIFO 1, so a poller with work
#      takes a core at once; root only),
#      PIN_CORES=1 (rank r runs on its own nproc/N cores, truth and hybrid alike: taskset),
#      OP_TIMING=compute|all|comm|none|nccl (driver.py --op-timing, default compute: which ops of a
#      measured iteration get CUDA timing events; the per-kind tables need all, comm or nccl, and
#      events around communication change what a truth does: README.md; nccl times communication
#      by NCCL's own kernel stamps through the plugin's PRISM_OP_TIMES, lines in RUN/op-times/),
#      GC_MODE=python|freeze|off (driver.py --gc, default python: Python's garbage collector in the
#      measured loop; every rank's r<rank>.json records its collections and host waits either way),
#      CPU_STALLS=1 (beside each run, BUNDLE/prism-cpu-stalls: how late each CPU woke a fair and a
#      SCHED_FIFO sleeper, and the CPUs' steal time, in the run's cpu-stalls.txt; cpu_stalls.py),
#      RETRY_HUNG=N (default 1): a truth whose every rank ran into RUN_TIMEOUT before its result is
#      kept as OUT/TAG.hungK (its logs, stacks and FAILED, which compare.py reports but does not
#      compare) and run again, up to N times; 0: never,
#      THREAD_CPU=1 (each run's threads.txt: the ranks' CPU by thread name, thread_cpu.py),
#      NEIGHBOUR_GBPS=R (beside each run, gpu_neighbour.py moves R GB/s each way between pinned host
#      memory and the GPU under the run's MPS: what a second real rank on the GPU costs a run through
#      the GPU's host link alone; its rate in the run's neighbour.txt).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
B="$(cd "${1:?bundle}" && pwd)"; D="$(cd "${2:?data}" && pwd)"; shift 2
OUT="${OUT:-/tmp/prism-fidelity}"; mkdir -p "$OUT"
GPUS="${GPUS:-1}"; LATE_ITER="${LATE_ITER:-10}"; LATE_MS="${LATE_MS:-20}"; LATE_RANK="${LATE_RANK:-0}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
DRIVER="${FIDELITY_DRIVER:-$here/driver.py}"  # tests stand a script of their own in for driver.py
export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps-log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
port=29700

# A client killed mid-run (a timeout) can leave MPS refusing new clients
# ("CUDA-capable device(s) is/are busy or unavailable"): a fresh server per run.
restart_mps() {
  echo quit | nvidia-cuda-mps-control; sleep 1
  pkill -f "$DRIVER" 2>/dev/null; sleep 0.2
  nvidia-cuda-mps-control -d
}

rank_env() {  # NAME TAG: the environment every rank of a run gets
  local tag="$2" forced="NCCL_PROTO=Simple NCCL_ALGO=${NCCL_ALGO_SPEC:-Ring}" yield="" subsys="INIT,ALLOC"
  # NCCL's choice per collective is in its TUNING log lines (nccl-choices.txt after the run).
  [[ "${NCCL_CHOOSES:-0}" == 1 ]] && forced="" && subsys="INIT,ALLOC,TUNING"
  [[ "${YIELD_SLEEP_US:-20}" != 0 ]] && yield="LD_PRELOAD=$B/libprism-yield-sleep.so PRISM_YIELD_SLEEP_US=${YIELD_SLEEP_US:-20} PRISM_YIELD_FIFO=${YIELD_FIFO:-0}"
  echo PYTHONUNBUFFERED=1 NCCL_NET_PLUGIN="$B/libnccl-net-prism.so" NCCL_PROFILER_PLUGIN="$B/libnccl-net-prism.so" \
    NCCL_NET=Prism NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_WIN_ENABLE=0 \
    NCCL_COLLNET_ENABLE=0 $forced NCCL_RUNTIME_CONNECT=0 NCCL_PXN_DISABLE=1 \
    NCCL_NET_SHARED_COMMS=0 NCCL_SET_THREAD_NAME=1 \
    NCCL_SOCKET_IFNAME=lo TORCH_NCCL_RANKS_PER_ROOT=1048576 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    NVSHMEM_DISABLE_NVLS=1 PRISM_LINK_GBPS="$GBPS" PRISM_LINK_LATENCY_US="$LAT_US" PRISM_LINK_REPORT=1 \
    PRISM_NIC_SPEED_MBPS="$(python3 -c "print(int(float('$GBPS') * 1000))")" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=$subsys NCCL_DEBUG_FILE="$OUT/$tag/nccl.%h.%p.log" $yield ${EXTRA_ENV:-}
}

driver() {  # NAME TAG RANK EXTRA-ARGS...: one rank in the background
  local name="$1" tag="$2" r="$3"; shift 3
  local master=(); [[ "$r" == 0 ]] && master=(--store-master)
  local pin=()
  if [[ "${PIN_CORES:-0}" == 1 ]]; then
    local cores; cores=$(nproc); local per=$(( cores / N )); (( per < 1 )) && per=1
    local lo=$(( (r * per) % cores )); pin=(taskset -c "$lo-$(( lo + per - 1 ))")
  fi
  env $(rank_env "$name" "$tag") NCCL_HOSTID="$tag-$r" "${RANK_ENV[@]}" \
    timeout "$RUN_TIMEOUT" "${pin[@]}" python3 "$DRIVER" --rank "$r" --world "$N" --ops "$D/$name/ops$r.json" \
      --comms "$D/$name/comms.json" --iterations "$ITERATIONS" --warmup "$WARMUP" --mode "$MODE" \
      --store-port "$store" "${master[@]}" --gpu $((r % GPUS)) --out "$OUT/$tag/r$r.json" \
      --op-timing "${OP_TIMING:-compute}" --gc "${GC_MODE:-python}" "$@" \
      > "$OUT/$tag/r$r.log" 2>&1 &
}

run_truth() {  # NAME TAG LATE
  local name="$1" tag="$2" late="$3" pids=()
  RANK_ENV=(NCCL_COMM_ID=127.0.0.1:$((port + 1)))
  for ((r = 0; r < N; r++)); do
    local extra=(); [[ "$late" == 1 && "$r" == "$LATE_RANK" ]] && extra=(--late-iteration "$LATE_ITER" --late-ms "$LATE_MS")
    driver "$name" "$tag" "$r" "${extra[@]}"; pids+=($!)
  done
  hang_watch "$tag" "$(seq -s ' ' 0 $((N - 1)))" "${pids[@]}" & local watch=$!
  wait_ranks "$tag" "$(seq -s ' ' 0 $((N - 1)))" "${pids[@]}"
  kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null
}

# Shortly before RUN_TIMEOUT (10 s, or half of it when shorter than 20 s),
# every rank still running leaves its Python stacks in its log (SIGUSR1:
# driver.py's faulthandler) and its threads' names, states, wait channels and
# syscalls in hang-threads.txt (a "# rank R pid P at: ..." line before each
# rank's, with the op driver.py noted last in r<R>.at: whereabouts.py),
# so that a hung run says where it waits; as root also each main thread's
# kernel stack (hang-kernel-stacks.txt); and the MPS server log's last 200
# lines (mps-server-tail.log). Every rank is signalled first and
# /proc is read with shell builtins: a `cat` per file (16 ranks of ~90
# threads) took seconds on the GPU host, and the last ranks were read while
# RUN_TIMEOUT was already killing them (2026-12-06: their threads gone but
# one, their stacks never written).
hang_watch() {  # TAG "RANK..." PID... (the ranks' `timeout` processes, one per rank, same order)
  local tag="$1" rank_of=($2); shift 2
  sleep $(( RUN_TIMEOUT >= 20 ? RUN_TIMEOUT - 10 : RUN_TIMEOUT / 2 ))
  local p py t r at i=0 pys=() ranks=()
  for p in "$@"; do
    for py in $(pgrep -P "$p"); do pys+=("$py"); ranks+=("${rank_of[$i]}"); done
    i=$((i + 1))
  done
  for py in "${pys[@]}"; do kill -USR1 "$py" 2>/dev/null; done
  for ((r = 0; r < ${#pys[@]}; r++)); do
    py=${pys[$r]}
    [[ -d /proc/$py/task ]] || continue
    at=""; read -r at < "$OUT/$tag/r${ranks[$r]}.at" 2>/dev/null || true   # driver.py's whereabouts.py
    echo "# rank ${ranks[$r]} pid $py${at:+ at: $at}"
    for t in /proc/"$py"/task/*; do thread_line "$py" "$t"; done
  done > "$OUT/$tag/hang-threads.txt" 2>/dev/null
  [[ -s "$OUT/$tag/hang-threads.txt" ]] || rm -f "$OUT/$tag/hang-threads.txt"
  # Where in the kernel each main thread is (readable as root: a driver
  # ioctl, a futex), and what the MPS server said lately (its log is
  # otherwise left out of the results).
  for ((r = 0; r < ${#pys[@]}; r++)); do
    py=${pys[$r]}
    [[ -r /proc/$py/task/$py/stack ]] || continue
    echo "# rank ${ranks[$r]} pid $py: its main thread's kernel stack"
    while read -r line; do echo "$line"; done < /proc/"$py"/task/"$py"/stack
  done > "$OUT/$tag/hang-kernel-stacks.txt" 2>/dev/null
  [[ -s "$OUT/$tag/hang-kernel-stacks.txt" ]] || rm -f "$OUT/$tag/hang-kernel-stacks.txt"
  [[ -f "${CUDA_MPS_LOG_DIRECTORY:-}/server.log" ]] && tail -n 200 "$CUDA_MPS_LOG_DIRECTORY/server.log" > "$OUT/$tag/mps-server-tail.log"
  return 0
}

thread_line() {  # PID /proc/PID/task/TID: "pid tid [name] wchan syscall=N state=S", builtins only
  local comm="" wchan="" sc="" stat=""
  read -r comm < "$2/comm" || true
  read -r wchan < "$2/wchan" || true   # no newline at its end: read fails but fills it
  read -r sc _ < "$2/syscall" || true
  read -r stat < "$2/stat" || true
  stat=${stat##*) }   # after the name, which may hold spaces: the state letter first
  echo "$1 ${2##*/} [$comm] $wchan syscall=$sc state=${stat%% *}"
}

# Waits for a run's ranks; a rank that failed or timed out is named, and its
# run gets a FAILED file, so that the run's NCCL logs are kept
# (failed-nccl-logs.tgz).
wait_ranks() {  # TAG "RANK..." PID... (one pid per rank, same order)
  local tag="$1" ranks=($2) i=0 rc; shift 2
  for p in "$@"; do
    wait "$p"; rc=$?
    if (( rc != 0 )); then
      echo "run-gpu: $tag: rank ${ranks[$i]} exited with status $rc (124: RUN_TIMEOUT)" | tee -a "$OUT/$tag/FAILED"
    fi
    i=$((i + 1))
  done
}

run_hybrid() {  # NAME TAG REAL-RANKS LATE
  local name="$1" tag="$2" reals="$3" late="$4" pids=() late_flag=()
  local sock="/tmp/prism-fid-$tag.sock" metrics="127.0.0.1:$((port + 2))"
  # A late rank the hybrid plays virtually: prismd makes it late (--late).
  [[ "$late" == 1 && ",$reals," != *",$LATE_RANK,"* ]] && late_flag=(--late "$LATE_RANK:$LATE_ITER:$LATE_MS")
  "$B/prismd" --graph "$D/$name/graph" --real-ranks "$reals" --nccl-comm-id "127.0.0.1:$((port + 1))" \
    --listen "unix://$sock" --metrics-address "$metrics" --record-sessions "$OUT/$tag/sessions.rec" \
    "${late_flag[@]}" ${MODEL_FLAGS:-} ${PRISMD_FLAGS:-} > "$OUT/$tag/prismd.log" 2>&1 &
  local pd=$!
  for _ in $(seq 100); do [[ -S "$sock" ]] && break; sleep 0.1; done
  RANK_ENV=(NCCL_COMM_ID=127.0.0.1:$((port + 1)) PRISM_DAEMON="unix://$sock")
  for r in ${reals//,/ }; do
    local extra=(); [[ "$late" == 1 && "$r" == "$LATE_RANK" ]] && extra=(--late-iteration "$LATE_ITER" --late-ms "$LATE_MS")
    driver "$name" "$tag" "$r" "${extra[@]}"; pids+=($!)
  done
  hang_watch "$tag" "${reals//,/ }" "${pids[@]}" & local watch=$!
  wait_ranks "$tag" "${reals//,/ }" "${pids[@]}"
  kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null
  python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://$metrics/metrics',timeout=5).read().decode())" \
    > "$OUT/$tag/metrics.txt" 2>/dev/null || true
  python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://$metrics/status',timeout=5).read().decode())" \
    > "$OUT/$tag/status.json" 2>/dev/null || true
  kill -TERM "$pd"; wait "$pd"
}

run_launcher() {  # NAME TAG REAL-RANKS: the driver as an ordinary program under `prism run`
  local name="$1" tag="$2" reals="$3" f pd_args=()
  for f in ${MODEL_FLAGS:-} ${PRISMD_FLAGS:-}; do pd_args+=(--prismd-arg="$f"); done
  env $(rank_env "$name" "$tag") timeout "$RUN_TIMEOUT" python3 "$here/../../scripts/prism" run \
    --graph "$D/$name/graph" --ranks "$reals" --plugin "$B/libnccl-net-prism.so" --prismd "$B/prismd" \
    --metrics-port $((port + 2)) --store-port $((port + 3)) --log-dir "$OUT/$tag" \
    --prismd-arg=--record-sessions --prismd-arg="$OUT/$tag/sessions.rec" "${pd_args[@]}" \
    -- python3 "$here/driver.py" --env-init --ops "$D/$name/ops{rank}.json" --comms "$D/$name/comms.json" \
      --iterations "$ITERATIONS" --warmup "$WARMUP" --mode "$MODE" --out "$OUT/$tag/r{rank}.json" \
      --op-timing "${OP_TIMING:-compute}" --gc "${GC_MODE:-python}" \
    > "$OUT/$tag/run.log" 2>&1
}

nccl_choices() {  # RUNDIR: what NCCL chose per collective and size, all ranks' TUNING lines counted
  local lines
  lines=$(cat "$1"/nccl.*.log 2>/dev/null | grep -ho '[A-Za-z]*: [0-9]* Bytes -> Algo [A-Z_]* proto [A-Z0-9_]*') || return 0
  sort <<<"$lines" | uniq -c | awk '{sub(":", "", $2); print $2, $3, $7, $9, $1}' | sort -k1,1 -k2,2n > "$1/nccl-choices.txt"
}

# The GPU this host has, beside the one each spec's model was prepared for (meta.env's TRUTH_HOST,
# truth_host.py): a figure measured on another GPU is said, at the run and in summary.txt.
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1)"
host_notes=()
host_note() {  # TAG: one line when meta.env's TRUTH_HOST is not this GPU's
  local why
  [[ -n "${TRUTH_HOST:-}" && -n "$gpu_name" ]] || return 0
  why="$(python3 "$here/truth_host.py" --gpu "$TRUTH_HOST" "$gpu_name")" && return 0
  [[ -n "$why" ]] || return 0
  echo "run-gpu: $1: $why"
  [[ " ${host_notes[*]} " == *" $TRUTH_HOST "* ]] || host_notes+=("$TRUTH_HOST")
}

# One run of NAME as KIND into OUT/TAG, with the samplers the env asks for beside it; 1 for an
# unknown kind.
one_run() {  # NAME KIND TAG
  local name="$1" kind="$2" tag="$3"
  mkdir -p "$OUT/$tag"; port=$((port + 10)); store=$port
  restart_mps
  local sampler="" stalls="" neighbour=""
  if [[ "${THREAD_CPU:-0}" == 1 ]]; then
    python3 "$here/thread_cpu.py" "$DRIVER" "$OUT/$tag/threads.txt" 0.5 & sampler=$!
  fi
  if [[ "${CPU_STALLS:-0}" == 1 ]]; then
    if [[ -x "$B/prism-cpu-stalls" ]]; then
      "$B/prism-cpu-stalls" --out "$OUT/$tag/cpu-stalls.txt" & stalls=$!
    else
      echo "run-gpu: CPU_STALLS=1 but $B/prism-cpu-stalls is missing (rebuild the bundle: scripts/bundle-runtime.sh)" >&2
    fi
  fi
  if [[ -n "${NEIGHBOUR_GBPS:-}" ]]; then
    python3 "$here/gpu_neighbour.py" "$NEIGHBOUR_GBPS" > "$OUT/$tag/neighbour.txt" 2>&1 & neighbour=$!
  fi
  case "$kind" in
    truth) run_truth "$name" "$tag" 0 ;;
    truth-late) run_truth "$name" "$tag" 1 ;;
    truth-again|truth-again[0-9]*) run_truth "$name" "$tag" 0 ;;
    truth-late-again|truth-late-again[0-9]*) run_truth "$name" "$tag" 1 ;;
    hybrid1) run_hybrid "$name" "$tag" 0 0 ;;
    hybrid1-late) run_hybrid "$name" "$tag" 0 1 ;;
    hybrid2) run_hybrid "$name" "$tag" "0,$SECOND_REAL" 0 ;;
    hybrid1-run) run_launcher "$name" "$tag" "${RUN_RANK:-0}" ;;
    hybrid2-run) run_launcher "$name" "$tag" "0,$SECOND_REAL" ;;
    *) echo "run-gpu: unknown run kind $kind" >&2; return 1 ;;
  esac
  [[ -n "$sampler" ]] && { kill -TERM "$sampler"; wait "$sampler"; }
  [[ -n "$neighbour" ]] && { kill -TERM "$neighbour"; wait "$neighbour"; }
  [[ -n "$stalls" ]] && { kill -TERM "$stalls"; wait "$stalls"; }
  nccl_choices "$OUT/$tag"
}

# A truth whose every rank ran into RUN_TIMEOUT before its result: the rare hang of a 16-rank truth
# in its first point-to-point connections (README.md, "16-rank truths sometimes hang").
hung_truth() {  # KIND TAG
  [[ "$1" == truth* && -f "$OUT/$2/FAILED" && ! -f "$OUT/$2/r0.json" ]] && ! grep -qv "status 124" "$OUT/$2/FAILED"
}

for run in "$@"; do
  name="${run%%:*}"; kind="${run#*:}"
  MODEL_FLAGS=""  # data prepared before meta.env carried it: the hybrid gets PRISMD_FLAGS alone
  TRUTH_HOST=""   # likewise: no host to check the GPU against
  # shellcheck disable=SC1090
  source "$D/$name/meta.env"
  host_note "$name-$kind"
  tag="$name-$kind"; t0=$(date +%s.%N)
  for ((attempt = 1; ; attempt++)); do
    one_run "$name" "$kind" "$tag" || continue 2
    hung_truth "$kind" "$tag" && (( attempt <= ${RETRY_HUNG:-1} )) || break
    rm -rf "$OUT/$tag.hung$attempt"; mv "$OUT/$tag" "$OUT/$tag.hung$attempt"
    echo "run-gpu: $tag: every rank ran into RUN_TIMEOUT; kept as $tag.hung$attempt, run again (RETRY_HUNG)"
  done
  echo "run-gpu: $tag done in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
done
python3 "$here/compare.py" "$OUT" "$D" | tee "$OUT/summary.txt"
for h in "${host_notes[@]}"; do
  echo "run-gpu: $(python3 "$here/truth_host.py" --gpu "$h" "$gpu_name")" | tee -a "$OUT/summary.txt"
done
tar -C "$OUT" -czf "$OUT/results.tgz" --exclude='nccl.*.log' --exclude='mps-*' --exclude='op-times' $(cd "$OUT" && ls -d */ 2>/dev/null) 2>/dev/null
tar -C "$OUT" -czf "$OUT/nccl-logs.tgz" $(cd "$OUT" && find . -name 'nccl.*.log' | head -64) 2>/dev/null || true
failed=$(cd "$OUT" && for f in */FAILED; do [[ -f "$f" ]] && dirname "$f"; done)
if [[ -n "$failed" ]]; then
  tar -C "$OUT" -czf "$OUT/failed-nccl-logs.tgz" $(cd "$OUT" && for d in $failed; do ls "$d"/nccl.*.log 2>/dev/null; done) 2>/dev/null || true
  echo "run-gpu: failed runs: $failed (their NCCL logs: $OUT/failed-nccl-logs.tgz)"
fi
