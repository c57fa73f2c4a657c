#!/usr/bin/env bash
# Compiles each of copytask's CUDA kernels (src/kernels/*.cu) for the GPU with ptxas's
# report (-Xptxas -v) and fails where a kernel spills registers to local memory, has a stack
# frame (an array that left the registers), or declares static shared memory: every kernel of
# copytask takes its shared memory at its launch (dynamic), sized there from the model's shape
# (kernels/fused_step.h), so static shared memory would come on top of what the launch asks.
# Prints one line per kernel: registers, stack, spills, shared memory, barriers.
#
#   scripts/ptxas_check.sh [ARCH ...]    GPU architectures, default 90 (Hopper: H100, H200)
#
# Needs nvcc (the CUDA toolkit), not a GPU; exits 77 (ctest: skipped) without it.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ ! -x "$nvcc" ]; then
  echo "ptxas_check: no nvcc on PATH nor in /usr/local/cuda/bin: skipped (the CUDA toolkit checks the kernels)"
  exit 77
fi
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(90)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The build's switch header, as a CUDA build writes it (cmake/cuda_switch.h.in).
mkdir -p "$work/include/kernels"
sed 's/@COPYTASK_CUDA_KERNELS_VALUE@/1/' cmake/cuda_switch.h.in > "$work/include/kernels/cuda_switch.h"
failed=0
kernels=0
for source in src/kernels/*.cu; do
  for arch in "${archs[@]}"; do
    report="$work/$(basename "$source").sm_$arch.txt"
    if ! "$nvcc" -std=c++17 -O3 -arch="sm_$arch" -Xptxas -v -I src -I "$work/include" -c "$source" \
        -o "$work/out.o" > "$report" 2>&1; then
      cat "$report"
      echo "ptxas_check: FAILED: $source does not compile for sm_$arch"
      exit 1
    fi
    # ptxas prints, per entry function: "Compiling entry function 'NAME'", "N bytes stack frame,
    # N bytes spill stores, N bytes spill loads", "Used N registers, used N barriers[, N bytes smem]".
    while IFS=$'\t' read -r name stack stores loads registers barriers smem; do
      kernels=$((kernels + 1))
      demangled=$(echo "$name" | c++filt 2>/dev/null | sed 's/(anonymous namespace):://g; s/(.*//; s/.*:://' || echo "$name")
      printf 'ptxas_check: %-28s sm_%s  %3s registers, %s B stack, %s/%s B spilled, %s B static shared, %s barriers\n' \
        "$demangled" "$arch" "$registers" "$stack" "$stores" "$loads" "$smem" "$barriers"
      if [ "$stores" != 0 ] || [ "$loads" != 0 ]; then
        echo "ptxas_check: FAILED: $demangled spills registers (sm_$arch): raise its launch bounds' register budget or keep fewer values live"
        failed=1
      fi
      if [ "$stack" != 0 ]; then
        echo "ptxas_check: FAILED: $demangled has a $stack-byte stack frame (sm_$arch): an array indexed at run time left the registers"
        failed=1
      fi
      if [ "$smem" != 0 ]; then
        echo "ptxas_check: FAILED: $demangled declares $smem bytes of static shared memory (sm_$arch): take it at the launch"
        failed=1
      fi
    done < <(awk '
      /Compiling entry function/ { if (name != "") print_entry(); match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2); stack = stores = loads = registers = barriers = smem = 0 }
      /bytes stack frame/ { for (i = 1; i <= NF; ++i) { if ($(i+1) == "bytes" && $(i+2) == "stack") stack = $i; if ($(i+1) == "bytes" && $(i+3) == "stores,") stores = $i; if ($(i+1) == "bytes" && $(i+3) == "loads") loads = $i } }
      /Used [0-9]+ registers/ { for (i = 1; i <= NF; ++i) { if ($(i+1) ~ /^registers/) registers = $i; if ($(i+1) ~ /^barriers/) barriers = $i; if ($(i+1) == "bytes" && $(i+2) ~ /^smem/) smem = $i } }
      function print_entry() { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, stack, stores, loads, registers, barriers, smem }
      END { if (name != "") print_entry() }' "$report")
  done
done
[ "$kernels" -gt 0 ] || { echo "ptxas_check: FAILED: no kernel found in src/kernels/*.cu"; exit 1; }
[ "$failed" = 0 ] || exit 1
echo "ptxas_check: $kernels kernel(s): no spills, no stack frames, no static shared memory"
