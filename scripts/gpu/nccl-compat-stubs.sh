#!/usr/bin/env bash
# Test aid (GPU host), usage: nccl-compat-stubs.sh LIBNCCL OUT.so -- NCCL LIB's missing symbols that PyTorch's libraries reference
# (PyTorch 2.11 links against NCCL 2.28 APIs) as stubs returning ncclInvalidUsage,
# so that `import torch` works with an older libnccl.so.2 preloaded:
#   LD_PRELOAD="LIBNCCL OUT.so" python3 ... (used for the 2.27.7 fixture, docs/bootstrap.md).
set -euo pipefail
lib=$1 out=$2
tl=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__) + '/lib')" 2>/dev/null || echo /opt/torch/.venv/lib/python3.12/site-packages/torch/lib)
nm -D --undefined-only "$tl"/*.so 2>/dev/null | awk '$2 ~ /^nccl/ {sub(/@.*/, "", $2); print $2}' | sort -u > /tmp/need.txt
nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $3); print $3}' | sort -u > /tmp/have.txt
comm -23 /tmp/need.txt /tmp/have.txt > /tmp/missing.txt
echo "missing in $(basename "$lib"): $(tr '\n' ' ' < /tmp/missing.txt)"
{ echo "/* stubs: ncclInvalidUsage (5) */"; while read -r s; do echo "int $s(void) { return 5; }"; done < /tmp/missing.txt; } > /tmp/stub.c
gcc -shared -fPIC -o "$out" /tmp/stub.c
