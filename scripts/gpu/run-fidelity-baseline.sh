#!/usr/bin/env bash
# First fidelity baseline on one GPU: all_reduce time seen by rank 0 when
#  (a) N real ranks (own NCCL_HOSTID each, MPS) talk through the plugin with
#      real-peer links shaped to GBPS / LAT_US   — the ground truth;
#  (b) rank 0 is real and N-1 ranks are virtual (prismd, graph NIC = the same
#      link; the plugin's virtual sends use the same link model).
# Usage: scripts/gpu/run-fidelity-baseline.sh BUNDLE_DIR   (graphs/fid<N>.graph inside)
# Env: N (default 4), GBPS (default 40), LAT_US (default 10), OUT.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle="$(cd "${1:?bundle dir}" && pwd)"
N="${N:-4}"; GBPS="${GBPS:-40}"; LAT_US="${LAT_US:-10}"
OUT="${OUT:-/tmp/prism-fidelity}"; mkdir -p "$OUT"
export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps-log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
common=(PYTHONUNBUFFERED=1 NCCL_NET_PLUGIN="$bundle/libnccl-net-prism.so" NCCL_NET=Prism
  NCCL_NVLS_ENABLE=0 NCCL_RAS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_WIN_ENABLE=0 NCCL_COLLNET_ENABLE=0
  NCCL_PROTO=Simple NCCL_RUNTIME_CONNECT=0 NCCL_PXN_DISABLE=1 NCCL_SOCKET_IFNAME=lo
  TORCH_NCCL_RANKS_PER_ROOT=1048576 PRISM_LINK_GBPS="$GBPS" PRISM_LINK_LATENCY_US="$LAT_US"
  PRISM_NIC_SPEED_MBPS=$((GBPS * 1000)) NCCL_ALGO=Ring)
# (a) ground truth: N real ranks
pids=()
for ((r = 0; r < N; r++)); do
  client=(); [[ $r != 0 ]] && client=(--store-client)
  env "${common[@]}" NCCL_COMM_ID=127.0.0.1:29811 NCCL_HOSTID="truth-$r" \
    timeout 150 python3 "$here/fidelity_allreduce.py" --world-size "$N" --rank "$r" --store-port 29812 \
    "${client[@]}" > "$OUT/truth-rank$r.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
# (b) hybrid: rank 0 real, the rest virtual
"$bundle/prismd" --graph "$bundle/graphs/fid$N.graph" --real-ranks 0 --nccl-comm-id 127.0.0.1:29821 \
  --listen unix:///tmp/prismd-fid.sock --metrics-address none > "$OUT/hybrid-prismd.log" 2>&1 &
pd=$!; sleep 1
env "${common[@]}" NCCL_COMM_ID=127.0.0.1:29821 NCCL_HOSTID=hybrid-0 PRISM_DAEMON=unix:///tmp/prismd-fid.sock \
  timeout 150 python3 "$here/fidelity_allreduce.py" --world-size "$N" --rank 0 --store-port 29822 \
  > "$OUT/hybrid-rank0.log" 2>&1
kill -TERM $pd; wait $pd
echo "N=$N link ${GBPS} Gbit/s ${LAT_US} us; all_reduce mean per op seen by rank 0"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def rows(f):
    return {r["bytes"]: r for r in (json.loads(l) for l in open(os.path.join(out, f)) if l.startswith("{"))}
t, h = rows("truth-rank0.log"), rows("hybrid-rank0.log")
for b in sorted(t):
    if b in h:
        e = 100.0 * (h[b]["mean_us"] - t[b]["mean_us"]) / t[b]["mean_us"]
        print(f"  {b:>10} B  truth {t[b]['mean_us']:>9.1f} us  hybrid {h[b]['mean_us']:>9.1f} us  error {e:+.1f}%")
PY
