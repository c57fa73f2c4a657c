#!/usr/bin/env bash
# The past-2N study (README.md here): configs/past-2N.json (N = 5, 78 arms x 5 seeds),
# configs/past-2N-n10.json (N = 10, 2 arms x 5 seeds) and configs/past-2N-causal.json (4
# placeholder arms under the causal mask, added after the first results), each one
# `copytask compare` into runs/, then their small files (no checkpoints) copied here (n10/,
# causal/) with the large JSON gzipped
# (results, attention, positional, metrics: `copytask report` and tables.py read them so),
# and the report written from those files (report.html, derived and large: ignored by git).
# Rerunning goes on where it stopped.
#   experiments/past-2N/run.sh
# COPYTASK=/path/to/copytask trains with that binary (e.g. a copy, so that rebuilding build/
# while the study runs cannot change it halfway); by default build/copytask. The report is
# written by build/copytask (built first), which reads the gzipped files.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=experiments/past-2N
scripts/build.sh copytask
binary=${COPYTASK:-build/copytask}

# collect RUN_FOLDER DEST: the study's files into DEST, the large ones gzipped.
collect() {
  mkdir -p "$2"
  cp "$1"/{config.json,study.json,run.json} "$2/"
  for file in results.json attention.json positional.json metrics.jsonl; do
    gzip -9 -n -c "$1/$file" > "$2/$file.gz"
  done
  build/copytask report --run "$2" > /dev/null
}

"$binary" compare --config configs/past-2N.json --out runs/past-2N
"$binary" compare --config configs/past-2N-n10.json --out runs/past-2N-n10
"$binary" compare --config configs/past-2N-causal.json --out runs/past-2N-causal
collect runs/past-2N "$here"
collect runs/past-2N-n10 "$here/n10"
collect runs/past-2N-causal "$here/causal"
python3 "$here/tables.py" > "$here/tables.md"
