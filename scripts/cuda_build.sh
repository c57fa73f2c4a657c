#!/usr/bin/env bash
# The CUDA build, on a machine with the CUDA toolkit (nvcc) and no GPU: copytask and its
# tests compiled and linked into build-cuda/ against the LibTorch of PyTorch's wheel for
# CUDA 13.0 (the version the GPU machine has), then the CPU test suite on that build (the
# CUDA tests skip, saying why; the tests that are the same in every build are left to
# scripts/test.sh).
#
#   scripts/cuda_build.sh                 fetch (once), configure, build, check, test
#   scripts/cuda_build.sh --bundle DIR    the same, then DIR: what the GPU machine needs to run
#                                         with no build there (DIR/run; docs/gpu.md)
#   scripts/cuda_build.sh --no-test ...   skip the test suite
#   scripts/cuda_build.sh --wheel-only    only fetch the wheel (once) and print its python's path
#                                         last: scripts/bench.sh's PyTorch 2.11 (CPU) peers
#
# The wheel is fetched with pip into a virtual environment outside the repository,
# ${COPYTASK_CACHE:-~/.cache/copytask}/torch-2.11.0-cu130 (about 4.6 GB installed), once: a
# second run downloads nothing. Fails, in one line, where PyPI cannot be reached: it never
# reports a build it did not check. Installs the Debian packages it needs (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

torch_version=2.11.0
cuda_version=13.0
bundle=""
run_tests=1
wheel_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
    --no-test) run_tests=0; shift ;;
    --wheel-only) wheel_only=1; shift ;;
    *) echo "cuda_build: unknown argument '$1' (--bundle DIR, --no-test, --wheel-only)" >&2; exit 2 ;;
  esac
done

say() { echo "cuda_build: $*"; }
fail() { echo "cuda_build: FAILED: $*" >&2; exit 1; }

if [ "$wheel_only" = 0 ]; then
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
    fail "nvcc is not on PATH nor in /usr/local/cuda/bin: the CUDA build needs the CUDA 13 toolkit"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

  # Debian's packages the build and the suite use (CLI11, nlohmann/json, spdlog, GoogleTest,
  # the suite's browser, Python, pandas and Slurm), patchelf for the bundle; only what is missing.
  scripts/setup.sh patchelf chromium chromium-driver python3-selenium python3-pil python3-torch python3-pandas \
    parallel munge slurmctld slurmd slurm-client > /dev/null
else
  scripts/setup.sh python3-venv > /dev/null
fi

# 1. The wheel, in its cache.
cache=${COPYTASK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/copytask}
venv="$cache/torch-$torch_version-cu${cuda_version/./}"
python="$venv/bin/python3"
wheel_ok() {
  [ -x "$python" ] && "$python" - "$torch_version" "$cuda_version" <<'PY' 2>/dev/null
import sys, torch
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] and torch.version.cuda == sys.argv[2] else 1)
PY
}
if wheel_ok; then
  say "PyTorch $torch_version (CUDA $cuda_version) from the cache: $venv"
else
  say "fetching PyTorch $torch_version with pip into $venv (once; about 4.6 GB installed)"
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv" || fail "python3 -m venv did not make $venv (install python3-venv)"
  start=$SECONDS
  if ! "$venv/bin/pip" install --no-cache-dir --disable-pip-version-check -q "torch==$torch_version" \
      > "$cache/pip.log" 2>&1; then
    rm -rf "$venv"
    fail "pip could not fetch torch==$torch_version from PyPI ($(grep -m1 -iE 'error|could not' "$cache/pip.log" || tail -1 "$cache/pip.log")); the CUDA build was not checked"
  fi
  wheel_ok || fail "pip installed a torch that is not $torch_version for CUDA $cuda_version: $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda)')"
  say "fetched in $((SECONDS - start)) s: $(du -sh "$venv" | cut -f1) installed"
fi
if [ "$wheel_only" = 1 ]; then echo "$python"; exit 0; fi
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
abi=$("$python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)
[ "$abi" = 1 ] || fail "this wheel uses the old C++ ABI; copytask's dependencies (Debian's) use the new one"

# 2. Configure and build. CMAKE_PREFIX_PATH is the wheel's torch/ folder itself, so that
# libtorch and libc10 come from its lib/ and not from Debian's LibTorch in /usr/lib.
build=build-cuda
generator=()
command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && generator=(-G Ninja)
mkdir -p "$build"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_dir" -DTorch_DIR="$torch_dir/share/cmake/Torch" \
  -DCMAKE_CUDA_COMPILER="$nvcc" > "$build/configure.log" 2>&1 ||
  { tail -30 "$build/configure.log"; fail "CMake could not configure $build (log: $build/configure.log)"; }
grep "copytask: LibTorch" "$build/configure.log"
grep -q "copytask's CUDA kernels: ON" "$build/configure.log" ||
  fail "CMake did not turn copytask's CUDA kernels on (log: $build/configure.log)"
say "building $build (copytask, its tests and the CUDA kernels) on $(nproc) cores"
start=$SECONDS
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 ||
  { grep -E -m20 "error|Error" "$build/build.log"; tail -20 "$build/build.log"; fail "the build failed (log: $build/build.log)"; }
say "built in $((SECONDS - start)) s"

# The GPU architectures: the kernel's object holds code for those of TORCH_CUDA_ARCH_LIST
# (CMakeLists.txt sets 9.0 unless told otherwise) and no other.
arch_list=$(sed -n 's/^TORCH_CUDA_ARCH_LIST:STRING=//p' "$build/CMakeCache.txt")
[ -n "$arch_list" ] || arch_list=${TORCH_CUDA_ARCH_LIST:-}
expected=$(tr ' ;' '\n\n' <<<"$arch_list" | sed -n 's/^\([0-9]*\)\.\([0-9]*\).*/sm_\1\2/p' | sort -u | xargs)
# Every .cu of src/kernels/ has its object (the one rule of CMakeLists.txt compiled it).
for source in src/kernels/*.cu; do
  kernel_object=$(find "$build" -name "$(basename "$source").o" | head -1)
  [ -n "$kernel_object" ] || fail "no object of $source in $build: copytask's CUDA kernels were not compiled"
  # (Its images are compressed, so their names are no text: scripts/fatbin_archs.py reads
  # each image's header.)
  compiled=$(python3 scripts/fatbin_archs.py "$kernel_object" | xargs) ||
    fail "the GPU code of $kernel_object could not be read"
  [ -n "$expected" ] && [ "$compiled" = "$expected" ] ||
    fail "$source was compiled for '$compiled', not for TORCH_CUDA_ARCH_LIST '$arch_list' ($expected)"
  say "$source compiled for $compiled (TORCH_CUDA_ARCH_LIST $arch_list)"
done

# 3. The libraries: LibTorch's CUDA half linked, every libtorch*/libc10* from the wheel, and
# the C++ runtime named before LibTorch (CMakeLists.txt, copytask_runtime_first).
for binary in "$build/copytask" "$build/tests/copytask_tests"; do
  listed=$(ldd "$binary")
  grep -q "libtorch_cuda.so => $torch_dir/lib/" <<<"$listed" || fail "$binary does not link the wheel's libtorch_cuda.so"
  foreign=$(grep -E '^\s*lib(torch|c10)[^ ]* =>' <<<"$listed" | grep -v "=> $torch_dir/lib/" || true)
  [ -z "$foreign" ] || fail "$binary takes LibTorch libraries from outside the wheel: $foreign"
  needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  first_torch=$(grep -n -m1 -E '^lib(torch|c10)' <<<"$needed" | cut -d: -f1)
  runtime=$(grep -n -m1 '^libstdc++' <<<"$needed" | cut -d: -f1)
  [ -n "$runtime" ] && [ "$runtime" -lt "$first_torch" ] ||
    fail "$binary names LibTorch before the C++ runtime: $(echo $needed)"
done
say "libraries: libtorch_cuda.so and every libtorch*/libc10* from $torch_dir/lib; libstdc++ before LibTorch"

# 4. The suite (CUDA tests skipped: no GPU here), but the tests labelled same_in_every_build
# (scripts, Python and ptxas on the sources: they use neither this build nor its LibTorch, and
# scripts/test.sh runs them in the CPU build).
if [ "$run_tests" = 1 ]; then
  say "the test suite on $build (without the tests that are the same in every build)"
  (cd "$build" && ctest --output-on-failure --timeout 600 -j "$(nproc)" -LE same_in_every_build) ||
    fail "tests failed on the CUDA build"
fi

# 5. The bundle for the GPU machine.
# Rehearsed here: the bundle's test binary runs the CPU suite from DIR, in a fresh folder,
# with the checkout's test fixtures checked and copied in as gpu_run.sh does there (and
# taken out again: the bundle travels without them).
if [ -n "$bundle" ]; then
  scripts/cuda_bundle.sh "$build" "$bundle" "$python"
  if [ "$run_tests" = 1 ]; then
    say "the bundle's suite, from $bundle in a fresh folder"
    bundle_abs=$(cd "$bundle" && pwd)
    scripts/bundle_fixtures.sh "$bundle_abs" || fail "the bundle's fixtures.sha256"
    (cd "$(mktemp -d)" && OMP_NUM_THREADS=2 PYTHON="$python" "$bundle_abs/run" tests --gtest_brief=1) ||
      fail "the bundle's suite failed"
    rm -rf "$bundle_abs/source/tests/fixtures"
  fi
fi
say "done"
