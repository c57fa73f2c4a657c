#!/usr/bin/env bash
# Installs what is missing, builds copytask and its tests, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

# Headless Chromium and Selenium for the browser test of the HTML report; PyTorch for the
# checkpoint snippet; pandas for the results.csv snippet; GNU parallel and a Slurm (munge,
# slurmctld, slurmd, its client) for the shard scripts' tests, which start their own
# single-node cluster.
scripts/setup.sh chromium chromium-driver python3-selenium python3-pil python3-torch python3-pandas parallel \
  munge slurmctld slurmd slurm-client
scripts/build.sh
cd build
# The tests on every core at once (each test's own OpenMP threads wait passively:
# tests/CMakeLists.txt).
ctest --output-on-failure --timeout 600 -j "$(nproc 2>/dev/null || echo 2)"
