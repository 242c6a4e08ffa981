#!/usr/bin/env bash
# Installs the Debian 12 packages Prism needs (when missing; chromium is for
# the status page's browser test, daemon.status_page_browser) and builds
# Release into build/. Idempotent: a second run only rebuilds what changed.
#   scripts/setup.sh            install + configure + build
#   PRISM_SKIP_APT=1 scripts/setup.sh   build only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev catch2 prometheus-cpp-dev libcli11-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libbenchmark-dev
  libcurl4-openssl-dev zlib1g-dev libcivetweb-dev
  patchelf binutils
  python3
  chromium fonts-liberation
)

missing=()
if [ "${PRISM_SKIP_APT:-0}" != 1 ]; then
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  echo "setup: note: /usr/local/cuda/include/nccl.h not found; the plugin uses its own ABI header and does not need it"
fi

jobs=${PRISM_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
echo "setup: built into build/"
