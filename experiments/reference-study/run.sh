#!/usr/bin/env bash
# The reference study (configs/reference.json: 6 schemes x 5 seeds, full batch, 2000 steps)
# on the CPU, one shard of 5 members after another into one folder, so every finished shard
# is kept whatever happens later; rerun it to go on where it stopped. Then the study's small
# files (no checkpoints) are copied here.
#   experiments/reference-study/run.sh [STUDY_DIR]     (default: runs/reference-study)
set -euo pipefail
cd "$(dirname "$0")/../.."
study=${1:-runs/reference-study}
here=experiments/reference-study
scripts/build.sh copytask
for i in 1 2 3 4 5 6; do
  build/copytask compare --config configs/reference.json train.device=cpu --out "$study" --shard "$i/6"
done
build/copytask report "$study"
cp "$study"/{config.json,study.json,results.json,attention.json,positional.json,metrics.jsonl,report.html} "$here/"
mkdir -p "$here/shards" && cp "$study"/shards/*.json "$here/shards/"
