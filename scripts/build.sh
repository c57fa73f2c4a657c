#!/usr/bin/env bash
# Configures (Release) and builds copytask in build/. Extra arguments are build targets,
# e.g. `scripts/build.sh copytask` builds only the executable.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
fi
if [ $# -gt 0 ]; then
  for target in "$@"; do cmake --build build -j "$jobs" --target "$target"; done
else
  cmake --build build -j "$jobs"
fi
