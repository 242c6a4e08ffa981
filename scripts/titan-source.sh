#!/usr/bin/env bash
# A TorchTitan source tree for examples/torchtitan/prism_titan.py (docs/capture.md,
# "TorchTitan"): its torchtitan/ package, the test tokenizer its debug model uses
# (tests/assets/tokenizer) and its LICENSE, at one commit (default v0.2.2 = 73a0e69, the
# release built against PyTorch 2.11's nightlies), plus COMMIT naming it. About 2.6 MiB.
#
# Usage: scripts/titan-source.sh GIT_DIR OUT_DIR [COMMIT]
#   GIT_DIR: a clone (or bare mirror) of TorchTitan's repository; OUT_DIR must not exist.
set -euo pipefail
git_dir="${1:?usage: titan-source.sh GIT_DIR OUT_DIR [COMMIT]}"
out="${2:?usage: titan-source.sh GIT_DIR OUT_DIR [COMMIT]}"
commit="${3:-v0.2.2}"
[[ -e $out ]] && { echo "titan-source: $out exists; give a new folder" >&2; exit 1; }
sha=$(git --git-dir "$git_dir" rev-parse --verify "$commit^{commit}") ||
  { echo "titan-source: $git_dir has no commit $commit" >&2; exit 1; }
mkdir -p "$out/tests/assets/tokenizer"
# Separate archives: only these paths are read (a mirror may lack large test data elsewhere).
git --git-dir "$git_dir" archive "$sha" torchtitan LICENSE | tar -x -C "$out"
git --git-dir "$git_dir" archive "$sha:tests/assets/tokenizer" | tar -x -C "$out/tests/assets/tokenizer"
echo "$sha" > "$out/COMMIT"
echo "TorchTitan $commit ($sha) in $out: $(find "$out" -type f | wc -l) files, $(du -sh "$out" | cut -f1)"
