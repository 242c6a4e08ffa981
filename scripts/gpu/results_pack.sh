# shellcheck shell=bash
# Sourced by scripts/gpu/run-titan.sh, run-mcore.sh and run-train-gpt.sh: what a GPU run keeps
# small enough to bring back (a GPU lease returns at most 8 files of at most 16 MiB).
#
# ops_only BUNDLE DIR: DIR/sessions.rec's ops-only copy, DIR/sessions.ops.rec (each real rank's
#   operations and the schedules, no per-message events: what bench/hybrid_gap.py and
#   hybrid_explain read); nothing when DIR has no recording; prints a line when the copy failed.
# pack_results SRC DEST.tgz MAXDEPTH NAME...: the files under SRC (at most MAXDEPTH folders down)
#   named NAME (shell patterns), the *.log ones as their last 300 KB, into DEST.tgz with their
#   paths; dropped (and said) when the archive is over 15 MiB.
ops_only() {
  [[ -f $2/sessions.rec ]] || return 0
  "$1/prism-session-capture" "$2/sessions.rec" --ops-only "$2/sessions.ops.rec" > /dev/null 2>&1 ||
    echo "  (no ops-only copy of $2/sessions.rec)"
  return 0
}

pack_results() {
  local src=$1 dest=$2 depth=$3 stage f name match=()
  shift 3
  for name in "$@"; do match+=(-o -name "$name"); done
  stage=$(mktemp -d)
  while read -r f; do
    mkdir -p "$stage/$(dirname "$f")"
    if [[ $f == *.log ]]; then tail -c 300000 "$src/$f" > "$stage/$f"; else cp "$src/$f" "$stage/$f"; fi
  done < <(cd "$src" && find . -maxdepth "$depth" -type f \( -false "${match[@]}" \) -print)
  tar czf "$dest" -C "$stage" . && rm -rf "$stage"
  if (( $(stat -c %s "$dest") > 15 * 1024 * 1024 )); then
    rm -f "$dest"; echo "pack: $dest was over 15 MiB; left out"
  else
    echo "packed into $dest ($(du -h "$dest" | cut -f1))"
  fi
}
