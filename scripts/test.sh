#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "${PRISM_JOBS:-$(nproc)}" --timeout 600
