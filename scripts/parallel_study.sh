#!/usr/bin/env bash
# A study in shards with GNU parallel: on this machine (JOBS shards at a time, the cores
# shared between them), or on several machines that share the folder (--sshloginfile).
# Then the shards are collected into results.json and report.html.
#
#   scripts/parallel_study.sh CONFIG OUT SHARDS [JOBS] [parallel options ...]
#   scripts/parallel_study.sh configs/quick.json runs/quick-sharded 6 2
#   scripts/parallel_study.sh configs/reference.json /shared/reference 12 12 --sshloginfile nodes.txt
#   COPYTASK_GPUS=0,1,2,3 COPYTASK=$PWD/build-cuda/copytask scripts/parallel_study.sh configs/copy-family.json runs/cf 8
#
# Rerunning the same line trains only the members that are not complete yet.
# COPYTASK_GPUS: the GPUs of this node, comma-separated; one shard runs on each at a time
# (CUDA_VISIBLE_DEVICES set to it, train.device=cuda), JOBS their number, the cores divided
# between them; with a CUDA build's binary (COPYTASK; docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  echo "usage: $0 CONFIG OUT SHARDS [JOBS] [parallel options ...]" >&2
  exit 2
fi
config=$1 out=$2 shards=$3 jobs=${4:-1}
shift $(( $# < 4 ? $# : 4 ))
gpus=${COPYTASK_GPUS:-}
on_gpu=""
if [ -n "$gpus" ]; then
  [[ "$gpus" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "COPYTASK_GPUS=$gpus: give the GPUs' indices, e.g. 0,1,2,3" >&2; exit 2; }
  jobs=$(tr ',' '\n' <<< "$gpus" | wc -l)
  on_gpu=" train.device=cuda"
fi
command -v parallel > /dev/null || { echo "GNU parallel is missing: apt-get install parallel" >&2; exit 2; }
binary="${COPYTASK:-$(pwd)/build/copytask}"  # COPYTASK=/path/to/copytask names another binary
[ -x "$binary" ] || { echo "$binary is missing: run scripts/build.sh first" >&2; exit 2; }

# Threads per shard: the cores divided between the shards that run at once (OpenMP
# threads that outnumber the cores spin against each other and run many times slower).
threads=$(( $(nproc) / jobs ))
[ "$threads" -ge 1 ] || threads=1
status=0
# On GPUs: the job's slot ({%}, 1..JOBS, never two running jobs at once) picks its GPU.
gpu_of_slot=""
[ -z "$gpus" ] || gpu_of_slot="CUDA_VISIBLE_DEVICES=\$(echo $gpus | cut -d, -f{%}) "
seq 1 "$shards" | parallel --jobs "$jobs" --line-buffer --tagstring "[shard {}/$shards]" "$@" \
  "$gpu_of_slot\"$binary\" compare --config \"$config\" --out \"$out\" --shard {}/$shards train.threads=$threads$on_gpu" \
  || status=$?
"$binary" report --run "$out"
exit "$status"
