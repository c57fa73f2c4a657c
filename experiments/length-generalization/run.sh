#!/usr/bin/env bash
# The length-generalization study (README.md here): configs/length-generalization.json as
# one `copytask compare` (42 members in two batches: 33 at 32 wide, 9 at 64), into
# runs/length-generalization, then its small files (no checkpoints) copied here,
# attention.json gzipped, and probe.sh's long probe through every scheme. Rerunning goes on where it stopped.
#   experiments/length-generalization/run.sh
# COPYTASK=/path/to/copytask runs that binary (e.g. a copy, so that rebuilding build/ while
# the study runs cannot change it halfway); by default build/copytask, built first.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/length-generalization
out=runs/length-generalization
binary=${COPYTASK:-}
if [ -z "$binary" ]; then
  scripts/build.sh copytask
  binary=build/copytask
fi
"$binary" compare --config configs/length-generalization.json --out "$out"
cp "$out"/{config.json,study.json,results.json,positional.json,metrics.jsonl,report.html,run.json} "$here/"
gzip -9 -n -c "$out/attention.json" > "$here/attention.json.gz"
COPYTASK="$binary" "$here/probe.sh" "$out"
