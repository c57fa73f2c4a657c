#!/usr/bin/env bash
# scripts/parallel_study.sh and scripts/slurm_study.sh run a small study in 3 shards each
# and collect it: every member complete, one record per shard, the report written. Slurm
# is not installed here: a stand-in sbatch runs each array task in turn, then the report.
# Usage: study_scripts_test.sh SOURCE_DIR COPYTASK_BINARY
set -euo pipefail
source_dir=$1
export COPYTASK=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$source_dir"

cat > "$work/tiny.json" <<'JSON'
{"task": {"examples": 400}, "model": {"embed": 8, "hidden": 16},
 "train": {"steps": 30, "batch_size": 32, "eval_every": 10, "lr": 0.003, "seeds": [0, 1], "device": "cpu"},
 "compare": {"schemes": [{"name": "sin", "model.positional": "sinusoidal"},
                         {"name": "rope", "model.positional": "rope"},
                         {"name": "alibi+causal", "model.positional": "alibi", "model.causal": true}]}}
JSON

check_study() {  # folder, what ran it
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, os, sys
folder, what = sys.argv[1], sys.argv[2]
results = json.load(open(os.path.join(folder, "results.json")))
assert results["complete"] == {"runs": 6, "expected": 6, "missing": []}, (what, results["complete"])
shards = sorted(os.listdir(os.path.join(folder, "shards")))
assert shards == ["1-of-3.json", "2-of-3.json", "3-of-3.json"], (what, shards)
for name in shards:
    record = json.load(open(os.path.join(folder, "shards", name)))
    assert record["status"] == "ok" and len(record["members_trained"]) == 2, (what, name, record)
assert os.path.getsize(os.path.join(folder, "report.html")) > 10000, what
print("%s: 3 shards, 6 of 6 members, report written" % what)
PY
}

# GNU parallel, 2 shards at a time on this machine.
scripts/parallel_study.sh "$work/tiny.json" "$work/parallel" 3 2 > "$work/parallel.log" 2>&1 || { cat "$work/parallel.log"; exit 1; }
grep -q "6 of 6 members complete" "$work/parallel.log" || { cat "$work/parallel.log"; exit 1; }
check_study "$work/parallel" "parallel_study.sh"
# Rerunning the same line trains nothing.
scripts/parallel_study.sh "$work/tiny.json" "$work/parallel" 3 2 > "$work/again.log" 2>&1
[ "$(grep -c "already complete" "$work/again.log")" -eq 3 ] || { cat "$work/again.log"; exit 1; }

# Slurm, with a stand-in sbatch: --array=1-N runs the script once per task id; --wrap
# runs the command; each prints a job id as --parsable does.
mkdir -p "$work/bin"
cat > "$work/bin/sbatch" <<'SH'
#!/usr/bin/env bash
array="" wrap="" args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --array=*) array=${1#--array=} ;;
    --wrap) wrap=$2; shift ;;
    --parsable|--dependency=*|--job-name=*) ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ -n "$wrap" ]; then sh -c "$wrap" > "$SBATCH_LOG.report" 2>&1; echo 2; exit 0; fi
last=${array#1-}
for i in $(seq 1 "$last"); do
  SLURM_ARRAY_TASK_ID=$i SLURM_CPUS_PER_TASK=1 bash "${args[@]}" > "$SBATCH_LOG.$i" 2>&1
done
echo 1
SH
chmod +x "$work/bin/sbatch"
export SBATCH_LOG="$work/slurm"
PATH="$work/bin:$PATH" scripts/slurm_study.sh "$work/tiny.json" "$work/slurm-study" 3 > "$work/submit.log" 2>&1 \
  || { cat "$work/submit.log"; exit 1; }
grep -q "submitted: array 1 (3 shards" "$work/submit.log" || { cat "$work/submit.log"; exit 1; }
check_study "$work/slurm-study" "slurm_study.sh"
grep -q "6 of 6 members complete" "$SBATCH_LOG.report"
