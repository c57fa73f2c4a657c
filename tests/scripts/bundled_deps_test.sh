#!/usr/bin/env bash
# The GPU machine's dependency fallback, rehearsed here: scripts/gpu_bundle.sh copies the
# packages' headers and GoogleTest's sources into a fresh folder, and a small project
# (tests/bundled/) is configured against them only (the installed packages ignored), built
# with this machine's LibTorch, and run. Built unoptimized (no build type): what it checks is
# where the headers and libraries come from, and -O0 compiles it in two thirds of the time.
#   bundled_deps_test.sh REPO_ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$root/scripts/gpu_bundle.sh" "$work/deps" > "$work/bundle.log"
cmake -S "$root/tests/bundled" -B "$work/build" -DCMAKE_BUILD_TYPE= -DCOPYTASK_USE_BUNDLED_DEPS=ON \
  -DCOPYTASK_BUNDLED_DEPS="$work/deps" > "$work/configure.log"
grep "copytask (rehearsal)" "$work/configure.log"
grep -q "bundled copies in $work/deps" "$work/configure.log" || { echo "the packages were used, not the bundle"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
"$work/build/uses_every_dependency" --value 7
"$work/build/bundled_gtest" --gtest_brief=1
echo "the bundled dependencies build and run"
