#!/usr/bin/env bash
# Times copytask's training step beside the plain-PyTorch baseline (scripts/baseline_pytorch.py:
# the same model, trained one model at a time, eager, the way a notebook would), on the same
# configs, the same machine and the same LibTorch (Debian's 1.13 under both), one after the
# other, and prints both and their ratio. Run it on an otherwise idle machine.
#   scripts/bench.sh            # the cases below, then the ratios against the targets
#   STEPS=50 scripts/bench.sh   # more timed steps
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh python3-torch
scripts/build.sh copytask
python=/usr/bin/python3   # Debian's python, the one with python3-torch
steps=${STEPS:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== case 1: reference protocol, full batch of 9000, one member"
build/copytask bench --config configs/reference.json train.seeds=[0] --warmup 2 --steps "$steps" \
  --json "$out/copytask_reference.json"
"$python" scripts/baseline_pytorch.py --members 1 --batch-size 0 --lr 3e-4 --warmup 2 --steps "$steps" \
  --json "$out/baseline_reference.json"

echo "== case 2: quick recipe, batch 128, 18 members (6 schemes x 3 seeds)"
build/copytask bench --compare --config configs/quick.json --warmup 3 --steps "$steps" \
  --json "$out/copytask_quick.json"
"$python" scripts/baseline_pytorch.py --members 18 --positional mixed --batch-size 128 --lr 0.002 \
  --warmup 3 --steps "$steps" --json "$out/baseline_quick.json"

echo "== case 3: the reference study, full batch, 30 members (6 schemes x 5 seeds); fewer steps, each is long"
build/copytask bench --compare --config configs/reference.json --warmup 1 --steps "${STUDY_STEPS:-3}" \
  --json "$out/copytask_study.json"
"$python" scripts/baseline_pytorch.py --members 30 --positional mixed --batch-size 0 --lr 3e-4 \
  --warmup 1 --steps "${STUDY_STEPS:-3}" --json "$out/baseline_study.json"

echo "== case 4: configs/quick.json's whole comparison (18 members, 1200 steps, evaluations and files), build excluded"
start=$(date +%s.%N)
build/copytask compare --config configs/quick.json --out "$out/quick-study" > "$out/quick-study.log" 2>&1
python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)" > "$out/quick_seconds"
tail -n 9 "$out/quick-study.log"

"$python" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)
rows = [("reference, full batch, 1 member", "reference"), ("quick, batch 128, 18 members", "quick"),
        ("reference study, full batch, 30", "study")]
print()
print(f"{'case':34} {'copytask':>16} {'pytorch eager':>16} {'ratio':>7}   {'copytask RSS':>12} {'baseline RSS':>12}   target")
for label, key in rows:
    c, b = load(f"copytask_{key}.json"), load(f"baseline_{key}.json")
    ratio = c["member_steps_per_second"] / b["member_steps_per_second"]
    target = "" if key == "study" else ("  >= 4x: met" if ratio >= 4 else "  >= 4x: NOT met")
    print(f"{label:34} {c['member_steps_per_second']:10.2f} m-s/s {b['member_steps_per_second']:10.2f} m-s/s "
          f"{ratio:6.2f}x   {c['peak_rss_mib']:9.0f} MiB {b['peak_rss_mib']:9.0f} MiB {target}")
with open(os.path.join(out, "quick_seconds")) as f:
    quick_seconds = float(f.read())
print(f"{'configs/quick.json, whole compare':34} {quick_seconds:10.1f} s     "
      f"{'':>16} {'':>7}   {'':>12} {'':>12}   < 60 s: {'met' if quick_seconds < 60 else 'NOT met'}")
print("m-s/s = member-steps per second (one training step of one model); ratio = copytask / baseline")
print(f"LibTorch {load('copytask_quick.json')['libtorch']} / torch {load('baseline_quick.json')['torch']}, "
      f"{load('copytask_quick.json')['threads']} threads, {os.cpu_count()} cores")
PY
