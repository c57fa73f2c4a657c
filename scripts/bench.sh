#!/usr/bin/env bash
# Times copytask's training step beside the plain-PyTorch baseline (scripts/baseline_pytorch.py:
# the same model, trained one model at a time, eager, the way a notebook would), on the same
# configs, the same machine and the same LibTorch (Debian's 1.13 under both), one after the
# other, and prints both and their ratio. Run it on an otherwise idle machine.
#   scripts/bench.sh            # the cases below, then the ratios against the targets
#   STEPS=50 scripts/bench.sh   # more timed steps
#   BEFORE=/tmp/old/copytask scripts/bench.sh
#                               # also times another copytask binary (e.g. the previous
#                               # commit's build) on cases 1-3, 5 and 6, alternating with this one,
#                               # and prints this build's speed relative to it
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh python3-torch
scripts/build.sh copytask
python=/usr/bin/python3   # Debian's python, the one with python3-torch
steps=${STEPS:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

before=${BEFORE:-}
# copytask_case KEY bench-arguments...: times this build (and the BEFORE binary, the two
# alternating, twice each, the better median kept for each) into $out/copytask_KEY.json.
copytask_case() {
  local key=$1
  shift
  if [ -z "$before" ]; then
    build/copytask bench "$@" --json "$out/copytask_$key.json"
    return
  fi
  for round in 1 2; do
    "$before" bench "$@" --json "$out/before_${key}_$round.json" > "$out/before_${key}_$round.log"
    build/copytask bench "$@" --json "$out/copytask_${key}_$round.json"
  done
  "$python" - "$out" "$key" <<'PY'
import json, os, shutil, sys
out, key = sys.argv[1], sys.argv[2]
def best(prefix):
    runs = [json.load(open(os.path.join(out, f"{prefix}_{key}_{r}.json"))) for r in (1, 2)]
    return max(runs, key=lambda run: run["member_steps_per_second"])
now, then = best("copytask"), best("before")
json.dump(now, open(os.path.join(out, f"copytask_{key}.json"), "w"))
json.dump(then, open(os.path.join(out, f"before_{key}.json"), "w"))
print(f"  this build {now['member_steps_per_second']:.2f} m-s/s, before {then['member_steps_per_second']:.2f}: "
      f"{now['member_steps_per_second'] / then['member_steps_per_second']:.3f}x")
PY
}

echo "== case 1: reference protocol, full batch of 9000, one member"
copytask_case reference --config configs/reference.json train.seeds=[0] --warmup 2 --steps "$steps"
"$python" scripts/baseline_pytorch.py --members 1 --batch-size 0 --lr 3e-4 --warmup 2 --steps "$steps" \
  --json "$out/baseline_reference.json"

echo "== case 2: quick recipe, batch 128, 18 members (6 schemes x 3 seeds)"
copytask_case quick --compare --config configs/quick.json --warmup 3 --steps "$steps"
"$python" scripts/baseline_pytorch.py --members 18 --positional mixed --batch-size 128 --lr 0.002 \
  --warmup 3 --steps "$steps" --json "$out/baseline_quick.json"

echo "== case 3: the reference study, full batch, 30 members (6 schemes x 5 seeds); fewer steps, each is long"
copytask_case study --compare --config configs/reference.json --warmup 1 --steps "${STUDY_STEPS:-3}"
"$python" scripts/baseline_pytorch.py --members 30 --positional mixed --batch-size 0 --lr 3e-4 \
  --warmup 1 --steps "${STUDY_STEPS:-3}" --json "$out/baseline_study.json"

echo "== case 4: configs/quick.json's whole comparison (18 members, 1200 steps, evaluations and files), build excluded"
start=$(date +%s.%N)
build/copytask compare --config configs/quick.json --out "$out/quick-study" > "$out/quick-study.log" 2>&1
python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)" > "$out/quick_seconds"
tail -n 9 "$out/quick-study.log"

echo "== case 5: the relative biases on the fused step: configs/relative-biases-quick.json (ALiBi variants, t5, dynamic, kerple, fire; batch 128)"
copytask_case relative --compare --config configs/relative-biases-quick.json --warmup 3 --steps "$steps"

# Each scheme on its own, the quick recipe's 3 seeds at batch 128: the nine schemes that were
# there before the hooks (beside BEFORE when given), then the schemes and options that read
# the content or scale attention (this build only).
old_schemes=(none sinusoidal learned rope alibi t5 dynamic kerple fire)
new_schemes=("xpos model.causal=true" cope "cope model.causal=true" fox "fox model.causal=true"
             "alibi model.dape=true" "t5 model.dape=true" "rope model.length_scale=true"
             "alibi model.causal=true model.length_scale=true")
# A step of 3 members takes milliseconds: 5 times the steps, so each timing lasts long enough.
echo "== case 6: each scheme alone, quick recipe (3 seeds, batch 128)"
for scheme in "${old_schemes[@]}"; do
  copytask_case "scheme_$scheme" --config configs/quick.json model.positional=$scheme --warmup 10 --steps $((5 * steps)) \
    > "$out/scheme_$scheme.log"
done
for i in "${!new_schemes[@]}"; do
  set -- ${new_schemes[$i]}
  name=$1
  shift
  build/copytask bench --config configs/quick.json model.positional=$name "$@" --warmup 10 --steps $((5 * steps)) \
    --json "$out/copytask_new_$i.json" > "$out/new_$i.log"
  echo "${new_schemes[$i]}" > "$out/new_$i.name"
done

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
relative = load("copytask_relative.json")
print(f"{'relative biases, batch 128, ' + str(relative['members']):34} {relative['member_steps_per_second']:10.2f} m-s/s "
      f"{'(no baseline)':>16} {'':>7}   {relative['peak_rss_mib']:9.0f} MiB {'':>12}   step: {relative['training_step']}")
old_schemes = ["none", "sinusoidal", "learned", "rope", "alibi", "t5", "dynamic", "kerple", "fire"]
print()
print(f"{'scheme alone, quick recipe, 3 seeds':34} {'this build':>16}   step")
for name in old_schemes:
    c = load(f"copytask_scheme_{name}.json")
    print(f"{name:34} {c['member_steps_per_second']:10.2f} m-s/s   {c['training_step']}")
i = 0
while os.path.exists(os.path.join(out, f"copytask_new_{i}.json")):
    c = load(f"copytask_new_{i}.json")
    with open(os.path.join(out, f"new_{i}.name")) as f:
        name = f.read().strip()
    print(f"{name:34} {c['member_steps_per_second']:10.2f} m-s/s   {c['training_step']}")
    i += 1
if os.path.exists(os.path.join(out, "before_quick.json")):
    print()
    print(f"{'case':34} {'this build':>16} {'BEFORE':>16} {'ratio':>7}   target")
    rows += [("relative biases, batch 128", "relative")] + [(name + " alone", "scheme_" + name) for name in old_schemes]
    for label, key in rows:
        c, b = load(f"copytask_{key}.json"), load(f"before_{key}.json")
        ratio = c["member_steps_per_second"] / b["member_steps_per_second"]
        print(f"{label:34} {c['member_steps_per_second']:10.2f} m-s/s {b['member_steps_per_second']:10.2f} m-s/s "
              f"{ratio:6.3f}x   >= 0.95x (within 5%): {'met' if ratio >= 0.95 else 'NOT met'}")
with open(os.path.join(out, "quick_seconds")) as f:
    quick_seconds = float(f.read())
print(f"{'configs/quick.json, whole compare':34} {quick_seconds:10.1f} s     "
      f"{'':>16} {'':>7}   {'':>12} {'':>12}   < 60 s: {'met' if quick_seconds < 60 else 'NOT met'}")
print("m-s/s = member-steps per second (one training step of one model); ratio = copytask / baseline")
print(f"LibTorch {load('copytask_quick.json')['libtorch']} / torch {load('baseline_quick.json')['torch']}, "
      f"{load('copytask_quick.json')['threads']} threads, {os.cpu_count()} cores")
PY
