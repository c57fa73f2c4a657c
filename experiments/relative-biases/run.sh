#!/usr/bin/env bash
# The relative-biases experiment (README.md here): the screen of every ALiBi variant and
# the learned relative biases on the quick recipe, three grids of evidence (heads, slopes,
# blocks), then the reference protocol for the screen's best, as 15 one-member shards two
# at a time. Each study goes to runs/relative-biases/<part> and its small files (no
# checkpoints) are copied to <part>/ here. Rerunning goes on where it stopped.
#   experiments/relative-biases/run.sh [screen|heads|slopes|blocks|reference ...]   (default: all)
# COPYTASK=/path/to/copytask runs that binary (e.g. a copy, so that rebuilding build/ while
# the hour-long study runs cannot change it halfway); by default build/copytask, built first.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/relative-biases
runs=runs/relative-biases
binary=${COPYTASK:-}
if [ -z "$binary" ]; then
  scripts/build.sh copytask
  binary=build/copytask
fi
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(screen heads slopes blocks reference)
for part in "${parts[@]}"; do
  case "$part" in
    screen) config=configs/relative-biases-quick.json ;;
    heads | slopes | blocks | reference) config=$here/$part.json ;;
    *) echo "unknown part $part: screen, heads, slopes, blocks or reference" >&2; exit 2 ;;
  esac
  if [ "$part" = reference ]; then
    COPYTASK="$binary" scripts/parallel_study.sh "$config" "$runs/$part" 15 "$(nproc)"
  else
    "$binary" compare --config "$config" --out "$runs/$part"
  fi
  mkdir -p "$here/$part"
  cp "$runs/$part"/{config.json,study.json,results.json,attention.json,positional.json,metrics.jsonl,report.html} "$here/$part/"
  if [ -d "$runs/$part/shards" ]; then mkdir -p "$here/$part/shards" && cp "$runs/$part"/shards/*.json "$here/$part/shards/"; fi
  if [ -f "$runs/$part/run.json" ]; then cp "$runs/$part/run.json" "$here/$part/"; fi
done
