#!/usr/bin/env bash
# Where the outputs look at a length never trained: one copy of 10 tokens (context 21)
# through seed 0 of every scheme, with `copytask predict` (output and every attention map),
# each into probes/<scheme>.txt here. tables.py attention reads them.
#   experiments/length-generalization/probe.sh [STUDY]   (default runs/length-generalization)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=${HERE:-experiments/length-generalization}
study=${1:-runs/length-generalization}
binary=${COPYTASK:-build/copytask}
probe="7 1 8 2 5 3 9 4 6 1"
mkdir -p "$here/probes"
python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["scheme_order"]))' "$study/results.json" |
  while read -r scheme; do
    "$binary" predict --run "$study" --member "$scheme/seed-0" "$probe" > "$here/probes/$scheme.txt"
  done
