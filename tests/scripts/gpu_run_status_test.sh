#!/usr/bin/env bash
# scripts/gpu_run.sh's exit status is its worst stage's: in a checkout with no build, the
# test stage fails (and the smoke study after it), the script exits non-zero, and
# summary.json names the failed stages. And every stage's command parses: each is a string
# that gpu_run.sh expands and hands to bash -c on the GPU machine, where a stray quote
# would be found only after the machine's start.
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

# Every stage's command, expanded as gpu_run.sh expands it (its variables set to stand-ins),
# parses as bash.
python3 - "$root/scripts/gpu_run.sh" <<'PY'
import re, subprocess, sys
text = open(sys.argv[1]).read()
stages = re.findall(r'\n\s*(?:[a-z-]+\) )?stage ([a-z-]+) [0-9]+ "((?:[^"\\]|\\.)*)"', text, re.S)
assert len(stages) >= 13, f"found {len(stages)} stages in gpu_run.sh, where there are 13"
for name, body in stages:
    variables = sorted(set(re.findall(r'(?<!\\)\$\{?([A-Za-z_][A-Za-z_0-9]*)', body)))
    assert not re.search(r'(?<!\\)\$\(', body), f"stage {name}: a command substitution gpu_run.sh would run itself"
    script = "".join(f"{v}=stand-in-{v}; " for v in variables) + 'printf "%s" "' + body + '" | bash -n'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, f"stage {name}'s command does not parse: {done.stderr.strip()}"
print(f"the {len(stages)} stages' commands parse: {', '.join(name for name, _ in stages)}")
PY
