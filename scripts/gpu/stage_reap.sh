# shellcheck shell=bash
# Sourced by scripts/gpu/run-titan.sh and run-capture.sh: what a stage (a prism run or prism
# capture under `timeout`) leaves running must not hold the GPU when the next stage starts.
# The launcher runs each real rank in a session of its own, out of reach of the stage's process
# group, and `timeout` signals only the launcher: a stage that stalls or fails can leave ranks
# (or their children) behind. On 2026-12-02 a TorchTitan refine round that prismd stopped after a
# stall did, and the next stage's rank got "CUDA-capable device(s) is/are busy or unavailable".
#
# stage_env TAG: the environment word that marks a stage's processes (every process the stage
#   starts inherits it: the launcher, prismd, the ranks and their children).
# reap_stage TAG: ends every process still marked TAG (SIGTERM, REAP_GRACE_S (10) s, SIGKILL), waits up to 60 s
#   for them to be gone, and prints one line when it found any (nothing otherwise).
# restart_mps: quits the MPS control daemon (and its server) and starts it again (after a failed
#   stage: a client killed with a kernel in flight can leave the server refusing new clients);
#   needs CUDA_MPS_PIPE_DIRECTORY set, as the scripts set it.
stage_env() { echo "PRISM_STAGE_TAG=$1"; }
stage_pids() {
  "${py:-python3}" - "PRISM_STAGE_TAG=$1" "$$" <<'PY'
import os, sys
tag, me = sys.argv[1].encode(), {sys.argv[2], str(os.getpid()), str(os.getppid())}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid in me:
        continue
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if tag in f.read().split(b"\0"):
                print(pid)
    except OSError:
        pass
PY
}
reap_stage() {
  local pids left end
  pids=$(stage_pids "$1" | tr '\n' ' ')
  [[ -z ${pids// } ]] && return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2> /dev/null
  end=$((SECONDS + ${REAP_GRACE_S:-10}))
  while left=$(stage_pids "$1" | tr '\n' ' '); [[ -n ${left// } && $SECONDS -lt $end ]]; do sleep 0.2; done
  # shellcheck disable=SC2086
  [[ -n ${left// } ]] && kill -KILL $left 2> /dev/null
  end=$((SECONDS + 60))
  while left=$(stage_pids "$1" | tr '\n' ' '); [[ -n ${left// } && $SECONDS -lt $end ]]; do sleep 0.2; done
  echo "  stage left processes behind: ended ${pids}${left:+; still there after 60 s: $left}"
}
restart_mps() {
  local i
  echo quit | nvidia-cuda-mps-control > /dev/null 2>&1
  for ((i = 0; i < 100; i++)); do pgrep -x nvidia-cuda-mps-server > /dev/null || break; sleep 0.1; done
  nvidia-cuda-mps-control -d
}
