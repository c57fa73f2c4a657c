#!/usr/bin/env bash
# Configures (Release) and builds copytask in build/. Extra arguments are build targets,
# e.g. `scripts/build.sh copytask` builds only the executable.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
# Ninja where it is installed (scripts/setup.sh installs it): it compiles a layer's files
# while the layer below still compiles, where make waits for each library in turn. A build
# folder keeps the generator it was configured with.
if [ ! -f build/CMakeCache.txt ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
fi
if [ $# -gt 0 ]; then
  for target in "$@"; do cmake --build build -j "$jobs" --target "$target"; done
else
  cmake --build build -j "$jobs"
fi
