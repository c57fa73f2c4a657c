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

tiny=tests/scripts/tiny_study.json  # 3 schemes x 2 seeds, a few seconds
check_study() {  # folder, what ran it
  /usr/bin/python3 tests/scripts/check_sharded_study.py "$1" "$2"
}

# GNU parallel, 2 shards at a time on this machine.
scripts/parallel_study.sh "$tiny" "$work/parallel" 3 2 > "$work/parallel.log" 2>&1 || { cat "$work/parallel.log"; exit 1; }
grep -q "6 of 6 members complete" "$work/parallel.log" || { cat "$work/parallel.log"; exit 1; }
check_study "$work/parallel" "parallel_study.sh"
# Rerunning the same line trains nothing.
scripts/parallel_study.sh "$tiny" "$work/parallel" 3 2 > "$work/again.log" 2>&1
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
PATH="$work/bin:$PATH" scripts/slurm_study.sh "$tiny" "$work/slurm-study" 3 > "$work/submit.log" 2>&1 \
  || { cat "$work/submit.log"; exit 1; }
grep -q "submitted: array 1 (3 shards" "$work/submit.log" || { cat "$work/submit.log"; exit 1; }
check_study "$work/slurm-study" "slurm_study.sh"
grep -q "6 of 6 members complete" "$SBATCH_LOG.report"
