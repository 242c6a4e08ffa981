#!/usr/bin/env bash
# The embedded default: generates the full-scale GPT-3 175B execution graph
# (8192 GPUs: TP8 PP16 DP64) and simulates one training iteration with every
# rank virtual. No GPU needed. Run scripts/setup.sh first (the README's first
# command does both).
#   scripts/demo.sh [JOB.yaml]        default examples/gpt3-175b-8192.yaml
# Writes build/demo/<job>.graph, build/demo/<job>.trace.json (Perfetto: one
# rank per pipeline stage, prismd's default) and prints the predicted
# iteration time, throughput and MFU, and its breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/gpt3-175b-8192.yaml}"
name="$(basename "$job" .yaml)"
mkdir -p build/demo
graph="build/demo/$name.graph"
trace="build/demo/$name.trace.json"

echo "== prism-graphgen job $job -o $graph"
build/graphgen/prism-graphgen job "$job" -o "$graph"
build/graphgen/prism-graphgen inspect "$graph" | sed -n 1,12p
echo
echo "== prismd --graph $graph --simulate --trace $trace"
build/daemon/prismd --graph "$graph" --simulate --metrics-address none --trace "$trace"
echo
echo "Trace of one rank per pipeline stage: $trace (open it in ui.perfetto.dev)"
