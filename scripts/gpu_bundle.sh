#!/usr/bin/env bash
# Copies what a GPU machine lacks (it has no Debian packages and no network) from this
# machine's Debian packages into .deps/ (ignored by git), so the build there finds it
# (cmake/dependencies.cmake): the headers of CLI11, nlohmann/json, spdlog and fmt, used
# header-only, and GoogleTest's sources, built there. Installs the packages first if
# missing. Safe to run again.
#   scripts/gpu_bundle.sh [FOLDER]     (default: .deps)
set -euo pipefail
cd "$(dirname "$0")/.."
to=${1:-.deps}
scripts/setup.sh googletest > /dev/null
rm -rf "$to"
mkdir -p "$to/include"
for header in CLI nlohmann; do cp -r "/usr/include/$header" "$to/include/"; done
# spdlog and fmt apart: only the logging library (src/util) may see them, never LibTorch's
# headers, which may carry another fmt (cmake/dependencies.cmake).
mkdir -p "$to/logging/include"
for header in spdlog fmt; do cp -r "/usr/include/$header" "$to/logging/include/"; done
cp -r /usr/src/googletest "$to/googletest"
cat > "$to/README" <<TEXT
Copies made by scripts/gpu_bundle.sh on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ) from Debian's packages:
$(dpkg-query -W -f='  ${Package} ${Version}\n' libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev googletest)
TEXT
echo "bundled into $to ($(du -sh "$to" | cut -f1)):"
cat "$to/README"
