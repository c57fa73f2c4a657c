#!/usr/bin/env bash
# The reference study (configs/reference.json: 6 schemes x 5 seeds, full batch, 2000 steps)
# on the CPU: 30 shards of one member each, as many at a time as there are cores, each with
# one thread (separate one-thread processes beat one process with all the threads, and a
# member that has finished is kept whatever happens later). Rerun it to go on where it
# stopped. Then the study is collected and its small files (no checkpoints) copied here.
#   experiments/reference-study/run.sh [STUDY_DIR]     (default: runs/reference-study)
set -euo pipefail
cd "$(dirname "$0")/../.."
study=${1:-runs/reference-study}
here=experiments/reference-study
scripts/build.sh copytask
COPYTASK=build/copytask scripts/parallel_study.sh configs/reference.json "$study" 30 "$(nproc)"
cp "$study"/{config.json,study.json,results.json,attention.json,positional.json,metrics.jsonl,report.html} "$here/"
mkdir -p "$here/shards" && cp "$study"/shards/*.json "$here/shards/"
