#!/usr/bin/env bash
# The main job: installs what is missing, builds copytask, and runs the quick comparison
# (configs/quick.json: 6 schemes x 3 seeds) on the CPU. Extra arguments are passed to
# `copytask compare`, e.g. `scripts/run.sh --out runs/mine train.steps=500`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh copytask
exec build/copytask compare --config configs/quick.json train.device=cpu "$@"
