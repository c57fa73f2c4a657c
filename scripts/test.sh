#!/usr/bin/env bash
# Installs what is missing, builds copytask and its tests, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600
