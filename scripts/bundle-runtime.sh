#!/usr/bin/env bash
# Gathers the NCCL net plugin, prismd (if built) and the shared libraries they
# need into one folder that can be copied to a GPU host lacking gRPC/protobuf/
# Abseil:
#   OUTDIR/libnccl-net-prism.so   (DT_RPATH $ORIGIN/lib)
#   OUTDIR/prismd                 (DT_RPATH $ORIGIN/lib), when built
#   OUTDIR/prism-graphgen         (DT_RPATH $ORIGIN/lib), when built (prism graph/inspect)
#   OUTDIR/prism-session-capture  (DT_RPATH $ORIGIN/lib), when built (prism capture)
#   OUTDIR/libprism-yield-sleep.so  when built (bench/fidelity/run-gpu.sh YIELD_SLEEP_US)
#   OUTDIR/prism-cpu-stalls         when built (bench/fidelity/run-gpu.sh CPU_STALLS)
#   OUTDIR/plugin_ring_bench      when built (scripts/gpu/run-plugin-speed.sh; needs only libc/libstdc++)
#   OUTDIR/lib/*.so*              the ldd closure, minus the C/C++ runtime
#                                 (libc, libstdc++, libgcc_s, ld-linux, libm,
#                                 libpthread, libdl, librt) and libcuda
# Usage: scripts/bundle-runtime.sh [OUTDIR]
# Env: BUILD_DIR (default: <repo>/build; falls back to build-plugin when the
#      plugin is not there), PLUGIN (path of the .so), PRISMD (path of prismd).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/build/prism-runtime}"
build="${BUILD_DIR:-$repo/build}"

find_first() {  # prints the first existing path among the arguments
  for p in "$@"; do [[ -n "$p" && -f "$p" ]] && { echo "$p"; return 0; }; done
  return 1
}

plugin="$(find_first "${PLUGIN:-}" "$build/plugin/libnccl-net-prism.so" \
  "$repo/build-plugin/plugin/libnccl-net-prism.so")" || {
  echo "bundle-runtime: libnccl-net-prism.so not found; build it first" \
       "(ninja -C $build nccl-net-prism) or set PLUGIN=/path/to/libnccl-net-prism.so" >&2
  exit 1
}
prismd="$(find_first "${PRISMD:-}" "$build/daemon/prismd" "$build/prismd" || true)"

mkdir -p "$out/lib"
install -m 0755 "$plugin" "$out/libnccl-net-prism.so"
bins=("$out/libnccl-net-prism.so")
if [[ -n "$prismd" ]]; then
  install -m 0755 "$prismd" "$out/prismd"
  bins+=("$out/prismd")
else
  echo "bundle-runtime: prismd not built; bundling the plugin only" >&2
fi
yield_shim="$(find_first "$build/bench/libprism-yield-sleep.so" || true)"
[[ -n "$yield_shim" ]] && install -m 0755 "$yield_shim" "$out/libprism-yield-sleep.so"
cpu_stalls="$(find_first "$build/bench/prism-cpu-stalls" || true)"
[[ -n "$cpu_stalls" ]] && install -m 0755 "$cpu_stalls" "$out/prism-cpu-stalls"
ring_bench="$(find_first "$build/bench/plugin_ring_bench" || true)"
[[ -n "$ring_bench" ]] && install -m 0755 "$ring_bench" "$out/plugin_ring_bench"
graphgen="$(find_first "${GRAPHGEN:-}" "$build/graphgen/prism-graphgen" || true)"
if [[ -n "$graphgen" ]]; then
  install -m 0755 "$graphgen" "$out/prism-graphgen"
  bins+=("$out/prism-graphgen")
fi
session_capture="$(find_first "$build/daemon/hybrid/prism-session-capture" || true)"
if [[ -n "$session_capture" ]]; then
  install -m 0755 "$session_capture" "$out/prism-session-capture"
  bins+=("$out/prism-session-capture")
fi

skip='^(linux-vdso|libc\.so|libstdc\+\+\.so|libgcc_s\.so|ld-linux|libm\.so|libpthread\.so|libdl\.so|librt\.so|libcuda\.so)'
count=0
for bin in "${bins[@]}"; do
  # ldd prints the whole transitive closure: "name => /path (addr)".
  while read -r name _ path _; do
    [[ "$path" == /* ]] || continue
    if [[ "$name" =~ $skip ]]; then continue; fi
    if [[ ! -f "$out/lib/$name" ]]; then
      cp -L "$path" "$out/lib/$name"
      count=$((count + 1))
    fi
  done < <(ldd "$bin" | grep '=>')
done

# Old-style DT_RPATH $ORIGIN/lib: also serves the bundled libraries' own
# dependencies (DT_RUNPATH would not).
for bin in "${bins[@]}"; do
  if readelf -d "$bin" | grep -q 'RPATH.*\$ORIGIN/lib'; then continue; fi
  if command -v patchelf > /dev/null; then
    patchelf --force-rpath --set-rpath '$ORIGIN/lib' "$bin"
  else
    echo "bundle-runtime: $bin has no DT_RPATH \$ORIGIN/lib and patchelf is missing;" \
         "run it with LD_LIBRARY_PATH=$out/lib (or apt-get install patchelf)" >&2
  fi
done

size="$(du -sh "$out" | cut -f1)"
echo "bundle-runtime: $out ($count libraries, $size)"
for bin in "${bins[@]}"; do
  missing="$(LD_LIBRARY_PATH= ldd "$bin" | grep 'not found' || true)"
  [[ -z "$missing" ]] || { echo "bundle-runtime: unresolved in $bin:" >&2; echo "$missing" >&2; exit 1; }
done
