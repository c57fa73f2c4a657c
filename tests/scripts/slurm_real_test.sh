#!/usr/bin/env bash
# scripts/slurm_study.sh against a real Slurm: starts a single-node cluster on this
# machine (munged, slurmctld and slurmd from Debian's packages, with their own key,
# config, spool folders and sockets in a temporary folder and their own free ports),
# submits a small study as a job array of 3 shards through the script, waits for the
# collecting job, checks the study equals the same study run in one process, and stops
# the daemons it started, by their process ids.
# Where it cannot start them (not root, the daemons missing, a daemon that does not come
# up) it says why and exits 77, which ctest reports as skipped, not passed.
# Usage: slurm_real_test.sh SOURCE_DIR COPYTASK_BINARY
set -euo pipefail
source_dir=$1
export COPYTASK=$2
skip() { echo "SKIPPED: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "slurmd runs jobs as their user only when started as root; run the tests as root"
for tool in munged munge slurmctld slurmd sbatch squeue sinfo; do
  command -v "$tool" > /dev/null || skip "$tool is missing (Debian: munge slurmctld slurmd slurm-client; scripts/test.sh installs them)"
done

work=$(mktemp -d /tmp/copytask-slurm.XXXXXX)
pids=()
stop_daemons() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null || true
  done
  rm -rf "$work"
}
trap stop_daemons EXIT
chmod 755 "$work"
mkdir -p "$work/munge" "$work/state" "$work/spool" "$work/log" "$work/out"
chmod 755 "$work/munge"

# munge: its own key and socket.
dd if=/dev/urandom of="$work/munge/munge.key" bs=1 count=128 status=none
chmod 400 "$work/munge/munge.key"
munged --force --foreground --socket="$work/munge/socket" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" \
  > "$work/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/socket" ] && break; sleep 0.1; done
munge -S "$work/munge/socket" -n > /dev/null 2>&1 || { cat "$work/log/munged.out"; skip "munged did not start"; }

# Two free TCP ports for slurmctld and slurmd.
read -r ctld_port d_port < <(/usr/bin/python3 -c '
import socket
ports = []
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
    ports.append(s.getsockname()[1])
print(*ports)')
host=$(hostname -s)
cat > "$work/slurm.conf" <<CONF
ClusterName=copytask-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -D -f "$SLURM_CONF" > "$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" > "$work/log/slurmd.out" 2>&1 &
pids+=($!)
up=no
for _ in $(seq 100); do
  if [ "$(sinfo -h -o %T 2> /dev/null)" = idle ]; then up=yes; break; fi
  sleep 0.2
done
if [ $up = no ]; then
  tail -n 5 "$work/log/slurmctld.out" "$work/log/slurmd.out"
  skip "the single-node Slurm did not come up in 20 s (logs above)"
fi
echo "slurm: $(sinfo -h -o '%P %a %D %T %N') (slurmctld port $ctld_port, slurmd port $d_port)"

cd "$source_dir"
tiny=tests/scripts/tiny_study.json  # 3 schemes x 2 seeds, a few seconds

# Through the script, as a user would: 3 array tasks, then the collecting job.
submitted=$(scripts/slurm_study.sh "$tiny" "$work/sharded" 3 --output="$work/out/%x-%A_%a.out")
echo "$submitted"
collect=$(echo "$submitted" | sed -n 's/.*report \([0-9]*\).*/\1/p')
[ -n "$collect" ] || { echo "no report job id in: $submitted"; exit 1; }
for _ in $(seq 600); do
  [ -z "$(squeue -h -j "$collect" 2> /dev/null)" ] && break
  sleep 0.5
done
[ -z "$(squeue -h -j "$collect" 2> /dev/null)" ] || { squeue; echo "the collecting job did not finish in 300 s"; exit 1; }

# The same study in one process, with the same threads as each array task had.
"$COPYTASK" compare --config "$tiny" --out "$work/whole" train.threads=2 > "$work/whole.log" 2>&1 ||
  { cat "$work/whole.log"; exit 1; }

/usr/bin/python3 tests/scripts/check_sharded_study.py "$work/sharded" "slurm_study.sh on a real Slurm"
/usr/bin/python3 - "$work/sharded" "$work/whole" <<'PY'
import json, os, sys
sharded, whole = sys.argv[1], sys.argv[2]
def load(folder, name):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)
# Every member's numbers as in one process: only where and when it ran may differ.
ignored = {"seconds", "finished", "batch_members", "threads"}
def numbers(value):
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items() if k not in ignored}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return value
one = load(whole, "results.json")
results = load(sharded, "results.json")
assert numbers(results["schemes"]) == numbers(one["schemes"]), "the sharded study differs from the one-process study"
print("every member's numbers equal the one-process study's")
PY
ls "$work/out"
