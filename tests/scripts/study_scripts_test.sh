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
# --export=ALL,K=V,... sets those variables for the job; every other sbatch option is
# written to $SBATCH_LOG.options (one submission a line) and otherwise ignored.
array="" wrap="" args=() exports=() options=()
while [ $# -gt 0 ]; do
  case "$1" in
    --array=*) array=${1#--array=} ;;
    --wrap) wrap=$2; shift ;;
    --export=*) IFS=, read -ra exports <<< "${1#--export=}" ;;
    --parsable|--dependency=*|--job-name=*) ;;
    --*) options+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
echo "${options[*]}" >> "$SBATCH_LOG.options"
for e in "${exports[@]}"; do [ "$e" = ALL ] || export "$e"; done
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

# GPU nodes, the commands each task would run checked (no GPU here: a stand-in binary records
# its arguments and CUDA_VISIBLE_DEVICES and trains nothing). Slurm: an array asked for GPUs
# trains each shard with train.device=cuda, its collecting job asks for no GPU; on the CPU it
# adds no device.
cat > "$work/bin/copytask-gpu" <<SH
#!/usr/bin/env bash
case "\$1" in compare) [ "\${2:-}" = --config ] && [[ " \$* " == *" --print-config "* ]] && exec "$COPYTASK" "\$@" ;; esac
echo "CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-unset} \$*" >> "$work/gpu-commands"
SH
chmod +x "$work/bin/copytask-gpu"
export SBATCH_LOG="$work/slurm-gpu"
PATH="$work/bin:$PATH" COPYTASK="$work/bin/copytask-gpu" scripts/slurm_study.sh "$tiny" "$work/slurm-gpu-study" 3 \
  --partition=gpu --gres=gpu:1 > "$work/submit-gpu.log" 2>&1 || { cat "$work/submit-gpu.log"; exit 1; }
grep -q "train.device=cuda" "$work/submit-gpu.log" || { cat "$work/submit-gpu.log"; exit 1; }
[ "$(grep -c -- "--shard [123]/3 train.threads=1 train.device=cuda" "$work/gpu-commands")" -eq 3 ] ||
  { echo "slurm_study.sh on GPUs: every array task should train with train.device=cuda"; cat "$work/gpu-commands"; exit 1; }
head -1 "$SBATCH_LOG.options" | grep -q -- "--gres=gpu:1" || { echo "the array lost --gres"; cat "$SBATCH_LOG.options"; exit 1; }
if sed -n 2p "$SBATCH_LOG.options" | grep -q -- "--gres"; then
  echo "the collecting job asked for a GPU"; cat "$SBATCH_LOG.options"; exit 1
fi
sed -n 2p "$SBATCH_LOG.options" | grep -q -- "--partition=gpu" || { cat "$SBATCH_LOG.options"; exit 1; }
grep -q "train.device=cpu" "$work/submit.log" || { echo "a CPU array should train on the CPU"; cat "$work/submit.log"; exit 1; }

# GNU parallel on a node of two GPUs (COPYTASK_GPUS): one shard on each at a time, each with
# its GPU in CUDA_VISIBLE_DEVICES and train.device=cuda; the cores divided between the two.
rm -f "$work/gpu-commands"
COPYTASK_GPUS=0,1 COPYTASK="$work/bin/copytask-gpu" scripts/parallel_study.sh "$tiny" "$work/parallel-gpu" 3 \
  > "$work/parallel-gpu.log" 2>&1 || true  # the report of a study the stand-in never trained fails
[ "$(grep -c "train.device=cuda" "$work/gpu-commands")" -eq 3 ] || { cat "$work/gpu-commands"; exit 1; }
[ "$(grep -cE "^CUDA_VISIBLE_DEVICES=[01] .*--shard [123]/3" "$work/gpu-commands")" -eq 3 ] ||
  { echo "parallel_study.sh: each shard on one of the GPUs 0 and 1"; cat "$work/gpu-commands"; exit 1; }
COPYTASK_GPUS=0,x scripts/parallel_study.sh "$tiny" "$work/parallel-bad" 3 > "$work/bad.log" 2>&1 && exit 1
grep -q "give the GPUs' indices" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
echo "study scripts: parallel and Slurm shards, on CPUs and on GPUs, checked"
