#!/usr/bin/env bash
# What the GPU machine needs to run copytask with no build there, from a CUDA build
# (scripts/cuda_build.sh --bundle DIR calls this):
#   DIR/bin/copytask, DIR/bin/copytask_tests   linked against the wheel's LibTorch, stripped
#   DIR/lib/                                   any Debian library they need that a machine
#                                              with only PyTorch may lack (zlib)
#   DIR/source/                                the configs and the files the tests read
#                                              (README.md, docs/*.md, the experiments'
#                                              configs, pilots' too); not the test fixtures
#                                              (8 MB): the GPU machine's transfer carries the checkout
#                                              beside the bundle, within 64 MiB in all, and
#                                              gpu_run.sh copies the checkout's fixtures in
#                                              once DIR/fixtures.sha256 says they are the
#                                              bundle's commit's
#   DIR/build_dir                              BUILD's absolute path (the kernels' line table
#                                              names their headers under it)
#   DIR/run copytask|tests ARGS...             runs one of them with the torch installation of
#                                              `python3` (or $PYTHON) on the library path
# and checks that, with that library path, every library the binaries load comes from DIR,
# the torch installation (torch/lib, the nvidia-* wheels beside it) or the C and C++
# runtimes.
#   scripts/cuda_bundle.sh BUILD DIR PYTHON
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 dir=$2 python=$3
fail() { echo "cuda_bundle: FAILED: $*" >&2; exit 1; }
command -v patchelf >/dev/null || fail "patchelf is missing (scripts/setup.sh patchelf)"

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/source/tests" "$dir/source/docs"
for binary in "$build/copytask" "$build/tests/copytask_tests"; do
  cp "$binary" "$dir/bin/"
  strip --strip-unneeded "$dir/bin/$(basename "$binary")"
  # The build's library path names this machine's folders: $ORIGIN/../lib instead, the rest
  # through the library path that DIR/run sets.
  patchelf --set-rpath '$ORIGIN/../lib' "$dir/bin/$(basename "$binary")"
done
# The kernels' line table (-lineinfo) names their headers through the build's layer links
# (BUILD/layers/<folder>/<folder> -> src/<folder>, CMakeLists.txt), absolute paths of this
# machine: gpu_run.sh makes the links again there so that ncu finds the kernels' source.
(cd "$build" && pwd) > "$dir/build_dir"
cp -r configs "$dir/source/"
(cd tests && find fixtures -type f | LC_ALL=C sort | xargs sha256sum) > "$dir/fixtures.sha256"
cp README.md "$dir/source/"
cp docs/*.md "$dir/source/docs/"
for file in $(find experiments -name '*.json'); do
  case "$(basename "$file")" in config.json|study.json|results.json|attention.json|positional.json|run.json) continue ;; esac
  mkdir -p "$dir/source/$(dirname "$file")"
  cp "$file" "$dir/source/$file"
done

cat > "$dir/run" <<'RUN'
#!/usr/bin/env bash
# Runs the bundle's copytask or its tests with the torch installation of $PYTHON (default
# python3) on the library path: torch/lib and the nvidia-* wheels' libraries beside it.
#   run copytask ARGS...    run tests ARGS... (GoogleTest's options, e.g. --gtest_filter=Cuda*)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
library_path=$("$python" -W ignore - <<'PY'
import glob, os, torch
root = os.path.dirname(torch.__file__)
site = os.path.dirname(root)
folders = [os.path.join(root, "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")) +
                                              glob.glob(os.path.join(site, "nvidia", "*", "*", "lib")))
print(":".join(f for f in folders if os.path.isdir(f)))
PY
) || { echo "run: $python cannot import torch: set PYTHON to a python3 with PyTorch 2.11 (CUDA 13)" >&2; exit 2; }
export LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export COPYTASK_SOURCE_DIR="$here/source" COPYTASK_BINARY="$here/bin/copytask"
what=${1:-}
shift || true
case "$what" in
  copytask) exec "$here/bin/copytask" "$@" ;;
  tests) exec "$here/bin/copytask_tests" "$@" ;;
  ldd) for binary in "$here"/bin/*; do echo "== $binary"; ldd "$binary"; done ;;
  *) echo "run: copytask ARGS..., tests ARGS... or ldd" >&2; exit 2 ;;
esac
RUN
chmod +x "$dir/run"

# Every library from DIR, the torch installation or the C and C++ runtimes; a library from
# anywhere else (a Debian package, the CUDA toolkit here) would be missing there.
torch_site=$("$python" -W ignore -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
dir_abs=$(cd "$dir" && pwd)
runtimes='^(linux-vdso|libc|libm|libdl|librt|libpthread|libutil|libresolv|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so'
outside_libraries() {
  PYTHON="$python" "$dir/run" ldd | grep '=>' | awk '{print $1, $3}' | while read -r name path; do
    if [ "$path" = "not" ]; then echo "$name (not found)"; continue; fi
    case "$path" in "$dir_abs"/*|"$torch_site"/torch/*|"$torch_site"/nvidia/*) continue ;; esac
    grep -qE "$runtimes" <<<"$name" || echo "$name ($path)"
  done | sort -u
}
# A Debian library the binaries link (zlib, for the gzipped study files) travels in DIR/lib,
# found there through the binaries' $ORIGIN/../lib; anything else outside (the CUDA
# toolkit's libraries here) stays a failure: the torch installation must provide it.
outside_libraries | while read -r name path; do
  case "$path" in "(/lib/"*|"(/usr/lib/"*) cp -L "${path:1:-1}" "$dir/lib/$name" ;; esac
done
outside=$(outside_libraries)
[ -z "$outside" ] || fail "the bundle's binaries load libraries the GPU machine lacks: $(echo $outside)"
# The GPU machine's transfer carries the checkout's tracked files with the bundle, 64 MiB in all.
size=$(du -sm "$dir" | cut -f1)
checkout=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print int(s / 1048576 + 1)}')
[ $((size + checkout)) -lt 64 ] ||
  fail "the bundle ($size MiB) and the checkout's tracked files ($checkout MiB) are over the 64 MiB the GPU machine's transfer carries"
cat > "$dir/README" <<TEXT
copytask $(git describe --always --dirty 2>/dev/null || echo unknown), bundled $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/cuda_bundle.sh from $(basename "$build")/
against PyTorch $("$python" -W ignore -c 'import torch; print(torch.__version__)') (LibTorch, CUDA $("$python" -W ignore -c 'import torch; print(torch.version.cuda)'))
for the GPU architectures $(grep -m1 'TORCH_CUDA_ARCH_LIST:' "$build/CMakeCache.txt" | cut -d= -f2).
Run: DIR/run tests | DIR/run copytask ... (scripts/gpu_run.sh --prebuilt DIR; docs/gpu.md).
TEXT
echo "cuda_bundle: $dir ($size MiB, with the checkout's $checkout MiB): every library from the bundle, the torch installation or the C/C++ runtimes"
