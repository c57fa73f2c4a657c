#!/usr/bin/env bash
# scripts/sharded_tests.sh, as the GPU machine runs the suite: GoogleTest's shards run every
# selected test exactly once, each shard's output is printed, a failing shard fails the whole
# (and is named), and a bad shard count is refused.
#   tests/scripts/sharded_tests_test.sh SOURCE_DIR TEST_BINARY
set -uo pipefail
source_dir=$1
tests=$2
script="$source_dir/scripts/sharded_tests.sh"
fail() { echo "sharded_tests_test: FAIL: $*" >&2; exit 1; }

filter='--gtest_filter=Stacked.*:LengthEvaluation.MeansAre*:Config.DefaultsAreTheReferenceProtocol'
whole=$("$tests" "$filter" --gtest_list_tests | grep -c '^  ')
out=$("$script" 2 1 "$tests" "$filter") || fail "the shards of a passing selection failed: $out"
grep -q '^== shard 1/2' <<<"$out" && grep -q '^== shard 2/2' <<<"$out" || fail "a shard's output is missing"
ran=$(grep -c '^\[       OK \]' <<<"$out")
[ "$ran" = "$whole" ] || fail "$ran tests ran in the shards, $whole selected"
grep -q 'all 2 shards passed' <<<"$out" || fail "no verdict: $out"

out=$("$script" 3 1 bash -c 'echo "shard $GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS, $OMP_NUM_THREADS thread"; exit $((GTEST_SHARD_INDEX == 1))' 2>&1)
status=$?
[ "$status" = 1 ] || fail "a failing shard gave exit $status"
grep -q 'shards 1 (0-based) of 3 failed' <<<"$out" || fail "the failing shard is not named: $out"
grep -q 'shard 2 of 3, 1 thread' <<<"$out" || fail "a shard's environment: $out"

"$script" 0 1 true > /dev/null 2>&1
[ $? = 2 ] || fail "0 shards was not refused with exit 2"
echo "sharded_tests_test: $whole tests once each over 2 shards; a failing shard named, exit 1; 0 shards refused"
