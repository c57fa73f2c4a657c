#!/usr/bin/env bash
# scripts/gpu_run.sh's exit status is its worst stage's: in a checkout with no build, the
# test stage fails (and the smoke study after it), the script exits non-zero, and
# summary.json names the failed stages.
#   gpu_run_status_test.sh REPO_ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/checkout/scripts"
cp "$root/scripts/gpu_run.sh" "$root/scripts/gpu_report.py" "$work/checkout/scripts/"
set +e
"$work/checkout/scripts/gpu_run.sh" --out "$work/out" test > "$work/log" 2>&1
status=$?
set -e
cat "$work/log"
[ "$status" -ne 0 ] || { echo "FAIL: gpu_run.sh exited 0 although its test stage failed"; exit 1; }
python3 - "$work/out/summary.json" <<'PY'
import json, sys
stages = json.load(open(sys.argv[1]))["stages"]
failed = [s["stage"] for s in stages if s["status"] == "failed"]
# the suite first; the smoke study after it, with no binary, fails too
assert failed[:1] == ["test"], f"summary.json: failed stages {failed}, expected the test stage first"
PY
echo "gpu_run.sh exited $status; summary.json names the failed stage: test"
