#!/usr/bin/env bash
# The fidelity acceptance runs on a GPU host, in groups that each fit in
# ten minutes of one H200 (about 25 s a 16-rank truth, 15 s a hybrid):
# every layout's ground truth TRUTHS times (pooled by compare.py), its
# hybrids with one and two real ranks, the late and the slow rank, and
# the PAT sweeps; then compare.py's tables for the group.
#
# Usage:
#   bench/fidelity/acceptance.sh prepare DATA          (build host: prepare.sh for every spec below,
#                                                       with the GPU host's TRUTH_HOST)
#   bench/fidelity/acceptance.sh run BUNDLE DATA GROUP[,GROUP...]
#                                                      (GPU host: one group, OUT as run-gpu.sh's; several,
#                                                       one after the other, each in OUT/GROUP, e.g.
#                                                       vlate,kinds,pat in one ten-minute command)
# GROUP:
#   dp    step-n16-dp8-2g5, step-n16-dp4-2g5: TRUTHS truths, hybrid1, hybrid2 each
#   pp    step-n16-pp4-2g5 and -slow: the same; pp4's late rank (TRUTHS truth-late, hybrid1-late)
#   tp    step-n16-tp4-2g5, step-n8-2g5: TRUTHS truths, hybrid1, hybrid2 each
#   vlate step-n16-pp4-2g5 with rank 4 late (LATE_RANK=4): TRUTHS truth-late, hybrid1-late (rank 4 is
#         virtual there: prismd --late); the model says a later stage absorbs the delay
#   pat   sweep-n8-pat-2g5, sweep-n16-pat-2g5: TRUTHS truths and hybrid1 each (NCCL_ALGO=PAT)
#   kinds one group with OP_TIMING=nccl: TRUTHS truths and hybrid1 of dp8, pp4 and pp4-slow, for the
#         per-kind tables against the pool (NCCL's kernel stamps; one truth's DP medians moved by 5% from
#         run to run; compare its iterations with the dp group's before trusting them; pp4-slow's say
#         where the truth absorbs the slow rank that the model passes on)
#   cal   step-n16-tp4-2g5, step-n16-dp4-2g5, step-n16-pp4-2g5 with the hybrids calibrated (PRISMD_FLAGS
#         --calibration, prismd's default, which the packed host's MODEL_FLAGS turn off: truth_host.py):
#         TRUTHS truths, hybrid1, hybrid2 each, against the tp, dp and pp groups' hybrids
#   rr    step-n16-tp4-2g5, step-n16-dp4-2g5, step-n16-pp4-2g5 with every rank's NICs sending their
#         connections' messages in turn (EXTRA_ENV PRISM_LINK_ORDER=round-robin, docs/plugin.md "Link
#         shaping") and the hybrids' prismd on --nic-model turns: TRUTHS truths, hybrid1, hybrid2
#         each, against the tp, dp and pp groups' (NICs in posting order): the truths' spread and
#         the model's fit under each order
# Env: TRUTHS (default 3, at least 3 to pool), RUN_TIMEOUT (default 60), DRY=1 (print the run-gpu.sh
#      command line instead of running it), OUT, and everything run-gpu.sh reads; for prepare,
#      TRUTH_HOST (default one-h200: the model of each spec gets that host's step turnaround for its
#      rank count, truth_host.py; docs/network-model.md, "A packed host's step turnaround") and
#      PRISMD_FLAGS (more model flags). Both reach the hybrids through meta.env's MODEL_FLAGS.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export TRUTH_HOST="${TRUTH_HOST:-one-h200}"
export RUN_TIMEOUT="${RUN_TIMEOUT:-60}"
TRUTHS="${TRUTHS:-3}"

STEP_SPECS=(step-n16-dp8-2g5 step-n16-dp4-2g5 step-n16-pp4-2g5 step-n16-pp4-2g5-slow step-n16-tp4-2g5 step-n8-2g5)
SWEEP_SPECS=(sweep-n8-pat-2g5 sweep-n16-pat-2g5)

usage() { sed -n '2,38p' "$0" >&2; exit 2; }

truths() {  # SPEC KIND: KIND, KIND-again, KIND-again2, ... TRUTHS runs in all
  local spec="$1" kind="$2" i
  echo "$spec:$kind"
  for ((i = 1; i < TRUTHS; i++)); do
    if ((i == 1)); then echo "$spec:$kind-again"; else echo "$spec:$kind-again$i"; fi
  done
}

step_runs() {  # SPEC...: the truths with the hybrids between them (a hybrid never runs on a cold host first)
  local s
  for s in "$@"; do
    mapfile -t t < <(truths "$s" truth)
    echo "${t[0]}"; echo "$s:hybrid1"; echo "${t[1]}"; echo "$s:hybrid2"; printf '%s\n' "${t[@]:2}"
  done
}

group_env() {  # GROUP: exports what the group's runs need; fails for an unknown group
  case "$1" in
    dp|pp|tp|pat) ;;
    vlate) export LATE_RANK=4 ;;
    kinds) export OP_TIMING=nccl ;;
    cal) export PRISMD_FLAGS="${PRISMD_FLAGS:+$PRISMD_FLAGS }--calibration" ;;
    rr) export EXTRA_ENV="${EXTRA_ENV:+$EXTRA_ENV }PRISM_LINK_ORDER=round-robin"
        export PRISMD_FLAGS="${PRISMD_FLAGS:+$PRISMD_FLAGS }--nic-model turns" ;;
    *) echo "acceptance: unknown group $1 (dp, pp, tp, vlate, pat, kinds, cal, rr)" >&2; return 1 ;;
  esac
}

group_runs() {  # GROUP: its runs, one per line
  local s t
  case "$1" in
    dp) step_runs step-n16-dp8-2g5 step-n16-dp4-2g5 ;;
    pp) step_runs step-n16-pp4-2g5 step-n16-pp4-2g5-slow; truths step-n16-pp4-2g5 truth-late
        echo step-n16-pp4-2g5:hybrid1-late ;;
    tp) step_runs step-n16-tp4-2g5 step-n8-2g5 ;;
    vlate) truths step-n16-pp4-2g5 truth-late; echo step-n16-pp4-2g5:hybrid1-late ;;
    pat) for s in "${SWEEP_SPECS[@]}"; do truths "$s" truth; echo "$s:hybrid1"; done ;;
    cal|rr) step_runs step-n16-tp4-2g5 step-n16-dp4-2g5 step-n16-pp4-2g5 ;;
    kinds) for s in step-n16-dp8-2g5 step-n16-pp4-2g5 step-n16-pp4-2g5-slow; do
             mapfile -t t < <(truths "$s" truth)
             echo "${t[0]}"; echo "$s:hybrid1"; printf '%s\n' "${t[@]:1}"
           done ;;
  esac
}

case "${1:-}" in
  prepare)
    data="${2:?DATA}"
    (( TRUTHS >= 3 )) || { echo "acceptance: TRUTHS=$TRUTHS: three or more are needed to pool" >&2; exit 2; }
    specs=(); for s in "${STEP_SPECS[@]}" "${SWEEP_SPECS[@]}"; do specs+=("$here/specs/$s.yaml"); done
    "$here/prepare.sh" "$data" "${specs[@]}" || exit 1
    # The ground truths run ITERATIONS after WARMUP: 12 after 3 keeps a 16-rank truth near 25 s.
    for s in "${STEP_SPECS[@]}"; do sed -i 's/^ITERATIONS=.*/ITERATIONS=15/; s/^WARMUP=.*/WARMUP=3/' "$data/$s/meta.env"; done
    echo "acceptance: prepared ${#STEP_SPECS[@]} step specs and ${#SWEEP_SPECS[@]} sweeps in $data"
    ;;
  run)
    bundle="${2:?BUNDLE}"; data="${3:?DATA}"; groups="${4:?GROUP}"
    (( TRUTHS >= 3 )) || { echo "acceptance: TRUTHS=$TRUTHS: three or more are needed to pool" >&2; exit 2; }
    IFS=, read -r -a list <<< "$groups"
    for group in "${list[@]}"; do ( group_env "$group" ) > /dev/null || usage; done  # checked, nothing exported
    out="${OUT:-/tmp/prism-fidelity}"; rc=0
    for group in "${list[@]}"; do
      (  # each group in its own environment (LATE_RANK, OP_TIMING) and, with several, its own OUT
        group_env "$group"
        mapfile -t runs < <(group_runs "$group")
        (( ${#list[@]} > 1 )) && export OUT="$out/$group"
        echo "acceptance: group $group: ${#runs[@]} runs${OUT:+ (OUT $OUT)}${LATE_RANK:+ LATE_RANK=$LATE_RANK}${OP_TIMING:+ OP_TIMING=$OP_TIMING}${PRISMD_FLAGS:+ PRISMD_FLAGS=$PRISMD_FLAGS}${EXTRA_ENV:+ EXTRA_ENV=$EXTRA_ENV}"
        if [[ "${DRY:-0}" == 1 ]]; then echo "$here/run-gpu.sh $bundle $data ${runs[*]}"; exit 0; fi
        "$here/run-gpu.sh" "$bundle" "$data" "${runs[@]}"
      ) || rc=1
    done
    exit "$rc"
    ;;
  *) usage ;;
esac
