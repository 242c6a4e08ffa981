#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh --all: packages, chromium for the
# status page's browser test, every target) and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --all
ctest --test-dir build --output-on-failure -j "${PRISM_JOBS:-$(nproc)}" --timeout 600
