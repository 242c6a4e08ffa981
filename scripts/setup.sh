#!/usr/bin/env bash
# Installs the Debian 12 packages Prism needs (when missing) and builds
# Release into build/. Idempotent: a second run only rebuilds what changed.
#   scripts/setup.sh            what the demo needs: prismd and prism-graphgen
#   scripts/setup.sh --all      everything: also the NCCL plugin (for prism
#                               run), the tests and benchmarks, and
#                               chromium for the status page's browser test
#                               (daemon.status_page_browser); scripts/test.sh
#                               runs this
#   PRISM_SKIP_APT=1 scripts/setup.sh [--all]   build only
# Other arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
if [ "${1:-}" = "--all" ]; then
  all=1
  shift
fi

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev catch2 prometheus-cpp-dev libcli11-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libbenchmark-dev
  libcurl4-openssl-dev zlib1g-dev libcivetweb-dev
  patchelf binutils
  python3
)
# Only for tests (scripts/setup.sh --all): chromium for the status page's
# browser test, python3-protobuf for the Chakra reader test, python3-yaml
# for bench/fidelity/prepare.sh (the acceptance runner's test).
TEST_PACKAGES=(chromium fonts-liberation python3-protobuf python3-yaml)
[ "$all" = 1 ] && PACKAGES+=("${TEST_PACKAGES[@]}")

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
if [ "$all" = 1 ]; then
  cmake --build build -j "$jobs"
  echo "setup: built everything into build/"
else
  # The demo's tools first (a fraction of the build); tests and benchmarks
  # come with scripts/test.sh (scripts/setup.sh --all).
  cmake --build build -j "$jobs" --target prismd prism-graphgen
  echo "setup: built prismd and prism-graphgen into build/ (scripts/setup.sh --all builds the plugin and the tests)"
fi
