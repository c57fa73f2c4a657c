#!/usr/bin/env bash
# A study as a Slurm job array: array task i of n trains shard i/n of the study into one
# folder on a shared filesystem; a last job, started when the array has ended, collects
# the shards into results.json and report.html. A requeued or rerun task skips the
# members that are complete, so a failed shard is fixed by submitting it again.
#
#   scripts/slurm_study.sh CONFIG OUT SHARDS [sbatch options ...]
#   scripts/slurm_study.sh configs/reference.json runs/reference 6 --partition=cpu
#   COPYTASK=$PWD/build-cuda/copytask scripts/slurm_study.sh configs/copy-family.json runs/cf 4 \
#     --partition=gpu --gres=gpu:1
#
# Run from the repository root after scripts/build.sh (build/copytask must exist on
# every node, e.g. on the shared filesystem); COPYTASK=/path/to/copytask names another binary.
# GPU nodes: an sbatch option that asks for GPUs (--gres=gpu..., --gpus..., --gpus-per-task...)
# makes each array task train its shard with train.device=cuda on the GPU Slurm gave it (Slurm
# sets CUDA_VISIBLE_DEVICES), with a CUDA build's binary (COPYTASK: scripts/cuda_build.sh's
# build-cuda/copytask, or a bundle's `run copytask`; docs/gpu.md). The collecting job needs no GPU.
#SBATCH --job-name=copytask
#SBATCH --cpus-per-task=2
#SBATCH --time=24:00:00
set -euo pipefail

if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
  # Submitting: the array, then the collection after it.
  if [ $# -lt 3 ]; then
    echo "usage: $0 CONFIG OUT SHARDS [sbatch options ...]" >&2
    exit 2
  fi
  config=$1 out=$2 shards=$3
  shift 3
  binary="${COPYTASK:-$(pwd)/build/copytask}"
  [ -x "$binary" ] || { echo "$binary is missing: run scripts/build.sh first" >&2; exit 2; }
  # GPUs asked for: the array's tasks train on them; the collecting job gets the other options.
  device=cpu
  report_options=()
  for option in "$@"; do
    case "$option" in
      --gres=gpu*|--gres=*,gpu*|--gpus=*|--gpus-per-task=*|--gpus-per-node=*|--gpus-per-socket=*) device=cuda ;;
      *) report_options+=("$option") ;;
    esac
  done
  # Checks the config once, before anything is queued (here: the submitting node may have no GPU).
  "$binary" compare --config "$config" --print-config > /dev/null
  array=$(sbatch --parsable --array="1-$shards" --export="ALL,COPYTASK_TRAIN_DEVICE=$device,COPYTASK=$binary" "$@" \
          "$0" "$config" "$out" "$shards")
  collect=$(sbatch --parsable --dependency="afterany:$array" --job-name=copytask-report "${report_options[@]}" \
            --wrap "\"$binary\" report --run \"$out\"")
  echo "submitted: array $array ($shards shards into $out, train.device=$device), report $collect"
  exit 0
fi

# One array task: shard SLURM_ARRAY_TASK_ID of n, with the CPUs Slurm gave it, on the GPU it
# gave it where the array asked for one.
config=$1 out=$2 shards=$3
on_gpu=()
[ "${COPYTASK_TRAIN_DEVICE:-cpu}" != cuda ] || on_gpu=(train.device=cuda)
exec "${COPYTASK:-build/copytask}" compare --config "$config" --out "$out" --shard "$SLURM_ARRAY_TASK_ID/$shards" \
  "train.threads=${SLURM_CPUS_PER_TASK:-0}" "${on_gpu[@]}"
