#!/usr/bin/env bash
# The test binary in SHARDS processes at once, by GoogleTest's own sharding (each test runs in
# exactly one shard), each with THREADS OpenMP threads and a temporary folder of its own; the
# shards' outputs printed after, in order. Exit 1 when any shard failed. For a machine with
# many cores (the GPU machine's 16: 8 shards of 2 threads), where the suite run whole would
# take minutes of the GPU's time.
#   scripts/sharded_tests.sh SHARDS THREADS COMMAND [ARGS...]
set -uo pipefail
shards=${1:?SHARDS} threads=${2:?THREADS}
shift 2
[ "$shards" -ge 1 ] 2>/dev/null || { echo "sharded_tests: SHARDS must be a number >= 1, not '$shards'" >&2; exit 2; }
root=$(mktemp -d)
pids=()
for ((i = 0; i < shards; i++)); do
  mkdir -p "$root/$i"
  TMPDIR="$root/$i" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=$threads \
    "$@" > "$root/$i.log" 2>&1 &
  pids+=($!)
done
failed=()
for ((i = 0; i < shards; i++)); do
  wait "${pids[$i]}" || failed+=("$i")
done
for ((i = 0; i < shards; i++)); do
  echo "== shard $((i + 1))/$shards"
  cat "$root/$i.log"
done
rm -rf "$root"
if [ ${#failed[@]} -gt 0 ]; then
  echo "sharded_tests: shards ${failed[*]} (0-based) of $shards failed" >&2
  exit 1
fi
echo "sharded_tests: all $shards shards passed"
