#!/usr/bin/env bash
# Prepares fidelity experiments for the GPU host (bench/fidelity/README.md):
# for each spec, the graph, its communicators and every rank's program as
# JSON (what driver.py executes; for very large worlds only RANKS), and the
# model's per-op times from `prismd --simulate` (the ground truth's check).
# Usage: bench/fidelity/prepare.sh OUTDIR SPEC.yaml...   Env: BUILD_DIR, RANKS (default: all, up to 64),
#   TRUTH_HOST (the host the ground truths run on: one-h200, two-h200 or cluster; unset: cluster): the model gets
#     what that host adds to a ring step for the spec's rank count (truth_host.py: one-h200, 16 ranks,
#     --step-turnaround-us 140),
#   PRISMD_FLAGS (more flags for the model's prismd --simulate, e.g. --launch-order false),
#   both written into meta.env as MODEL_FLAGS, which run-gpu.sh's hybrids run with,
#   LATE_ITER, LATE_MS (run-gpu.sh's late rank, default 10 and 20: a step spec's model-late-rR.json, for
#   R = 0 and its SECOND_REAL, is prismd --simulate --late R:LATE_ITER:LATE_MS, what the model makes of
#   that rank's delay, for compare.py's late table)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
out="${1:?outdir}"; shift
gg="$build/graphgen/prism-graphgen"; pd="$build/daemon/prismd"
for spec in "$@"; do
  name="$(basename "$spec" .yaml)"
  d="$out/$name"; mkdir -p "$d"
  cp "$spec" "$d/spec.yaml"
  "$gg" fidelity "$spec" -o "$d/graph" >/dev/null
  "$gg" inspect "$d/graph" --json > "$d/comms.json"
  n="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranks"])' "$d/comms.json")"
  ranks="${RANKS:-}"
  if [[ -z "$ranks" ]]; then
    (( n <= 64 )) || { echo "prepare: $name has $n ranks: set RANKS (e.g. RANKS='0 64')" >&2; exit 2; }
    ranks="$(seq 0 $((n - 1)))"
  fi
  for r in $ranks; do "$gg" inspect "$d/graph" --ops "$r" > "$d/ops$r.json"; done
  host_flags=""
  if [[ -n "${TRUTH_HOST:-}" ]]; then host_flags="$(python3 "$repo/bench/fidelity/truth_host.py" "$TRUTH_HOST" "$n")" || exit 2; fi
  model_flags="$(echo $host_flags ${PRISMD_FLAGS:-})"
  python3 - "$spec" "$d/meta.env" "$n" "$model_flags" <<'PY'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1])); n = int(sys.argv[3])
it, wu = int(s.get("iterations", 20)), int(s.get("warmup", 5))
link = s.get("link", {})
mode = s["kind"]
with open(sys.argv[2], "w") as f:
    f.write(f"N={n}\nMODE={mode}\nWARMUP={wu}\n")
    f.write(f"ITERATIONS={it + wu if mode == 'step' else 1}\n")
    f.write(f"GBPS={link.get('gbps', 10)}\nLAT_US={link.get('latency_us', 10)}\n")
    # The NCCL_ALGO every rank runs with (run-gpu.sh): the spec's algorithm.
    f.write(f"NCCL_ALGO_SPEC={ {'ring': 'Ring', 'tree': 'Tree', 'pat': 'PAT'}[s.get('algorithm', 'ring')] }\n")
    if mode == "step":
        # The first rank of the next stage, or (pp 1) of the next DP replica.
        l = s["layout"]; f.write(f"SECOND_REAL={l['tp'] * l['dp'] if l['pp'] > 1 else l['tp']}\n")
    else:
        f.write("SECOND_REAL=1\n")
    if s.get("straggler"):  # compare.py's slow-rank table
        f.write(f"STRAGGLER_RANK={s['straggler']['rank']}\nSTRAGGLER_SCALE={s['straggler']['compute_scale']}\n")
    # The flags the model ran with (the truth's host, PRISMD_FLAGS): run-gpu.sh's hybrids take the same.
    f.write(f"MODEL_FLAGS=\"{sys.argv[4]}\"\n")
PY
  # The host the model was prepared for: run-gpu.sh says so when the GPU it finds is another.
  if [[ -n "${TRUTH_HOST:-}" ]]; then echo "TRUTH_HOST=$TRUTH_HOST" >> "$d/meta.env"; fi
  # The real ranks' modelled ops (compare.py's model columns): a trace of rank 0 and hybrid2's
  # second real rank, small at any world.
  second="$(sed -n 's/^SECOND_REAL=//p' "$d/meta.env")"
  (( second < n )) || second=0
  trace=(--trace "$d/model-trace.json" --trace-ranks "0,$second")
  # shellcheck disable=SC2086
  "$pd" --graph "$d/graph" --simulate --json "${trace[@]}" --metrics-address none $model_flags > "$d/model.json"
  if grep -q '^MODE=step' "$d/meta.env"; then
    late_iter="${LATE_ITER:-10}"; its="$(sed -n 's/^ITERATIONS=//p' "$d/meta.env")"
    (( its > late_iter + 4 )) || its=$(( late_iter + 5 ))
    for late_rank in 0 "$second"; do
      # shellcheck disable=SC2086
      "$pd" --graph "$d/graph" --simulate --json --metrics-address none --iterations "$its" \
        --late "$late_rank:$late_iter:${LATE_MS:-20}" $model_flags > "$d/model-late-r$late_rank.json"
    done
  fi
  echo "prepare: $name: $n ranks -> $d${model_flags:+ (model: $model_flags)}"
done
