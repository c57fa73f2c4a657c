#!/usr/bin/env bash
# Times copytask's training step beside the plain-PyTorch baseline (scripts/baseline_pytorch.py:
# the same model, trained one model at a time, eager, the way a notebook would), on the same
# configs, the same machine and the same LibTorch (Debian's 1.13 under both), one after the
# other, and prints both and their ratio. On the quick recipe and the reference study it also
# times the forms a PyTorch 2 user would write, on PyTorch 2.11 from PyPI (the wheel
# scripts/cuda_build.sh fetches, once, into its cache; on the CPU here): one model after
# another (eager), the members of each scheme as a torch.func ensemble (vmap), and that
# ensemble under torch.compile; and prints copytask's ratio to each (TORCH2=0 skips them).
# Run it on an otherwise idle machine.
#   scripts/bench.sh            # the cases below, then the ratios against the targets
#   STEPS=50 scripts/bench.sh   # more timed steps
#   BEFORE=/tmp/old/copytask scripts/bench.sh
#                               # also times another copytask binary (e.g. the previous
#                               # commit's build) on cases 1-3, 5 and 6, alternating with this one,
#                               # and prints this build's speed relative to it; case 7 then
#                               # times this build with its AVX2 kernels forced
#                               # (COPYTASK_CPU_KERNEL=x86-64-v3) beside BEFORE, and with its
#                               # AVX-512 ones (x86-64-v4) where the CPU has them
#                               # case 8 times each kind of position IDs beside sequential (this build)
#   CASES="3 7" scripts/bench.sh
#                               # only these cases (default: all)
# Every copytask row also says which CPU kernels ran (x86-64-v4, x86-64-v3, generic) and the
# share of this CPU's FMA peak its step reached: of the peak measured here (an in-register
# FMA loop) and of the nominal one (copytask bench prints how it got each).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh python3-torch
scripts/build.sh copytask
python=/usr/bin/python3   # Debian's python, the one with python3-torch
steps=${STEPS:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

before=${BEFORE:-}
cases=${CASES:-1 2 3 4 5 6 7 8}
want() { [[ " $cases " == *" $1 "* ]]; }
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

if want 1; then
echo "== case 1: reference protocol, full batch of 9000, one member"
copytask_case reference --config configs/reference.json train.seeds=[0] --warmup 2 --steps "$steps"
"$python" scripts/baseline_pytorch.py --members 1 --batch-size 0 --lr 3e-4 --warmup 2 --steps "$steps" \
  --json "$out/baseline_reference.json"
fi

if want 2; then
echo "== case 2: quick recipe, batch 128, 18 members (6 schemes x 3 seeds)"
copytask_case quick --compare --config configs/quick.json --warmup 3 --steps "$steps"
"$python" scripts/baseline_pytorch.py --members 18 --positional mixed --batch-size 128 --lr 0.002 \
  --warmup 3 --steps "$steps" --json "$out/baseline_quick.json"
fi

if want 3; then
echo "== case 3: the reference study, full batch, 30 members (6 schemes x 5 seeds); fewer steps, each is long"
copytask_case study --compare --config configs/reference.json --warmup 1 --steps "${STUDY_STEPS:-3}"
"$python" scripts/baseline_pytorch.py --members 30 --positional mixed --batch-size 0 --lr 3e-4 \
  --warmup 1 --steps "${STUDY_STEPS:-3}" --json "$out/baseline_study.json"
fi

# PyTorch 2.11's peers of cases 2 and 3, in the same run.
torch2=""
if [ "${TORCH2:-1}" != 0 ] && { want 2 || want 3; }; then
  if torch2=$(scripts/cuda_build.sh --wheel-only 2> "$out/torch2.err" | tail -1) && [ -x "$torch2" ]; then
    echo "== PyTorch 2.11 peers ($torch2)"
  else
    echo "== PyTorch 2.11 peers skipped: $(tail -1 "$out/torch2.err")"
    torch2=""
  fi
fi
if [ -n "$torch2" ]; then
  # A peer that fails (the vmap forms of the full-batch study hold about 20 GB) is said and
  # left out of the table; the rest of the bench goes on. PyTorch's warnings are dropped.
  peer() {
    "$torch2" scripts/baseline_pytorch.py "$@" 2>&1 || echo "  this peer failed (exit $?): left out"
  }
  for form in eager vmap vmap-compile; do
    if want 2; then
      peer --form "$form" --members 18 --positional mixed --batch-size 128 --lr 0.002 --warmup 3 --steps "$steps" \
        --json "$out/torch2_${form}_quick.json" | { grep -v -i "warn\|_conversion" || true; }
    fi
    if want 3; then
      peer --form "$form" --members 30 --positional mixed --batch-size 0 --lr 3e-4 --warmup 1 \
        --steps "${STUDY_STEPS:-3}" --json "$out/torch2_${form}_study.json" | { grep -v -i "warn\|_conversion" || true; }
    fi
  done
fi

if want 4; then
echo "== case 4: configs/quick.json's whole comparison (18 members, 1200 steps, evaluations and files), build excluded"
start=$(date +%s.%N)
build/copytask compare --config configs/quick.json --out "$out/quick-study" > "$out/quick-study.log" 2>&1
python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)" > "$out/quick_seconds"
tail -n 9 "$out/quick-study.log"
fi

if want 5; then
echo "== case 5: the relative biases on the fused step: configs/relative-biases-quick.json (ALiBi variants, t5, dynamic, kerple, fire; batch 128)"
copytask_case relative --compare --config configs/relative-biases-quick.json --warmup 3 --steps "$steps"
fi

# Each scheme on its own, the quick recipe's 3 seeds at batch 128: the nine schemes that were
# there before the hooks, then the schemes and options that read the content or scale
# attention (each beside BEFORE when given).
old_schemes=(none sinusoidal learned rope alibi t5 dynamic kerple fire)
new_schemes=("xpos model.causal=true" cope "cope model.causal=true" fox "fox model.causal=true"
             "alibi model.dape=true" "t5 model.dape=true" "rope model.length_scale=true"
             "alibi model.causal=true model.length_scale=true")
# A step of 3 members takes milliseconds: 5 times the steps, so each timing lasts long enough.
if want 6; then
echo "== case 6: each scheme alone, quick recipe (3 seeds, batch 128)"
for scheme in "${old_schemes[@]}"; do
  copytask_case "scheme_$scheme" --config configs/quick.json model.positional=$scheme --warmup 10 --steps $((5 * steps)) \
    > "$out/scheme_$scheme.log"
done
for i in "${!new_schemes[@]}"; do
  set -- ${new_schemes[$i]}
  name=$1
  shift
  copytask_case "new_$i" --config configs/quick.json model.positional=$name "$@" --warmup 10 --steps $((5 * steps)) \
    > "$out/new_$i.log"
  echo "${new_schemes[$i]}" > "$out/new_$i.name"
done
fi

# Position IDs (model.position_ids): each kind beside sequential, this build only (BEFORE may
# not know the key), alternating in two rounds, the better median kept for each: rope on the
# quick recipe's batches and on the reference protocol's full batch of one member.
if want 8; then
echo "== case 8: position IDs, each kind beside sequential (rope; quick recipe, and the full batch of one member)"
for round in 1 2; do
  for kind in sequential random offset coupled; do
    build/copytask bench --config configs/quick.json model.positional=rope model.position_ids=$kind --warmup 10 \
      --steps $((5 * steps)) --json "$out/ids_quick_${kind}_$round.json" > "$out/ids_quick_${kind}_$round.log"
    build/copytask bench --config configs/reference.json model.positional=rope model.position_ids=$kind train.seeds=[0] \
      --warmup 2 --steps "$steps" --json "$out/ids_full_${kind}_$round.json" > "$out/ids_full_${kind}_$round.log"
  done
done
fi

# AVX2-only machines must not get slower: this build with its x86-64-v3 kernels forced, beside
# BEFORE (which ignores the variable), on the reference study's and the quick recipe's batches;
# and where the CPU has AVX-512, the study with the x86-64-v4 kernels forced.
if want 7 && [ -n "$before" ]; then
echo "== case 7: this build's AVX2 kernels forced (COPYTASK_CPU_KERNEL=x86-64-v3) beside BEFORE"
COPYTASK_CPU_KERNEL=x86-64-v3 copytask_case study_v3 --compare --config configs/reference.json --warmup 1 \
  --steps "${STUDY_STEPS:-3}"
COPYTASK_CPU_KERNEL=x86-64-v3 copytask_case quick_v3 --compare --config configs/quick.json --warmup 3 --steps "$steps"
if COPYTASK_CPU_KERNEL=x86-64-v4 build/copytask keys > /dev/null 2>&1; then
  echo "== case 7: this build's AVX-512 kernels forced (COPYTASK_CPU_KERNEL=x86-64-v4) beside BEFORE"
  COPYTASK_CPU_KERNEL=x86-64-v4 copytask_case study_v4 --compare --config configs/reference.json --warmup 1 \
    --steps "${STUDY_STEPS:-3}"
else
  echo "== case 7: no AVX-512 on this CPU: the x86-64-v4 kernels are not timed"
fi
fi

"$python" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def have(name):
    return os.path.exists(os.path.join(out, name))
def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)
def kernel(c):
    peak = c.get("cpu_peak")
    if not peak:
        share = "peak unknown"
    else:
        # The share of what this machine's cores do (an in-register FMA loop, measured by
        # copytask bench), and of the nominal peak (cores x reported clock x FLOP/cycle).
        share = f"{100 * peak['measured_share']:.1f}% of the measured peak"
        if peak.get("share") is not None:
            share += f" ({100 * peak['share']:.1f}% of nominal)"
    return f"{c.get('cpu_kernel') or c['training_step']}, {c['flops_per_second'] / 1e9:.1f} GFLOP/s, {share}"
rows = [("reference, full batch, 1 member", "reference"), ("quick, batch 128, 18 members", "quick"),
        ("reference study, full batch, 30", "study")]
print()
print(f"{'case':34} {'copytask':>16} {'pytorch eager':>16} {'ratio':>7}   {'copytask RSS':>12} {'baseline RSS':>12}   target")
for label, key in rows:
    if not have(f"copytask_{key}.json"):
        continue
    c, b = load(f"copytask_{key}.json"), load(f"baseline_{key}.json")
    ratio = c["member_steps_per_second"] / b["member_steps_per_second"]
    target = "" if key == "study" else ("  >= 4x: met" if ratio >= 4 else "  >= 4x: NOT met")
    print(f"{label:34} {c['member_steps_per_second']:10.2f} m-s/s {b['member_steps_per_second']:10.2f} m-s/s "
          f"{ratio:6.2f}x   {c['peak_rss_mib']:9.0f} MiB {b['peak_rss_mib']:9.0f} MiB {target}")
    print(f"{'':34} CPU kernels {kernel(c)}")
torch2_forms = [("eager", "one model after another"), ("vmap", "torch.func vmap, per scheme"),
                ("vmap-compile", "the same under torch.compile")]
if any(have(f"torch2_{form}_{key}.json") for form, _ in torch2_forms for key in ("quick", "study")):
    print()
    print(f"{'PyTorch 2.11 peer':34} {'case':>16} {'peer':>16} {'copytask':>16} {'ratio':>7}   target")
    for key, case in (("quick", "quick, 18"), ("study", "study, 30")):
        if not have(f"copytask_{key}.json"):
            continue
        c = load(f"copytask_{key}.json")
        for form, label in torch2_forms:
            if not have(f"torch2_{form}_{key}.json"):
                continue
            p = load(f"torch2_{form}_{key}.json")
            ratio = c["member_steps_per_second"] / p["member_steps_per_second"]
            # The compiled ensemble is what a PyTorch user would pick to train many small models.
            target = f">= 10x: {'met' if ratio >= 10 else 'NOT met'}" if form == "vmap-compile" else ""
            print(f"{label:34} {case:>16} {p['member_steps_per_second']:10.2f} m-s/s "
                  f"{c['member_steps_per_second']:10.2f} m-s/s {ratio:6.2f}x   {target}")
if have("copytask_relative.json"):
    relative = load("copytask_relative.json")
    print(f"{'relative biases, batch 128, ' + str(relative['members']):34} {relative['member_steps_per_second']:10.2f} m-s/s "
          f"{'(no baseline)':>16} {'':>7}   {relative['peak_rss_mib']:9.0f} MiB {'':>12}   step: {relative['training_step']}")
    print(f"{'':34} CPU kernels {kernel(relative)}")
old_schemes = ["none", "sinusoidal", "learned", "rope", "alibi", "t5", "dynamic", "kerple", "fire"]
new_names = []  # case 6's schemes and options after the hooks, as timed: copytask_new_<i>.json
while have(f"copytask_new_{len(new_names)}.json"):
    with open(os.path.join(out, f"new_{len(new_names)}.name")) as f:
        new_names.append(f.read().strip())
if have("copytask_scheme_none.json"):
    print()
    print(f"{'scheme alone, quick recipe, 3 seeds':34} {'this build':>16}   step")
    for name in old_schemes:
        c = load(f"copytask_scheme_{name}.json")
        print(f"{name:34} {c['member_steps_per_second']:10.2f} m-s/s   {kernel(c)}")
    for i, name in enumerate(new_names):
        c = load(f"copytask_new_{i}.json")
        print(f"{name:34} {c['member_steps_per_second']:10.2f} m-s/s   {kernel(c)}")
compared = [(label, key) for label, key in rows + [("relative biases, batch 128", "relative")]
            + [(name + " alone", "scheme_" + name) for name in old_schemes]
            + [(name + " alone", f"new_{i}") for i, name in enumerate(new_names)]
            + [("reference study, 30, forced v3", "study_v3"), ("quick, 18, forced v3", "quick_v3"),
               ("reference study, 30, forced v4", "study_v4")]
            if have(f"before_{key}.json")]
if compared:
    print()
    print(f"{'case':34} {'this build':>16} {'BEFORE':>16} {'ratio':>7}   target")
    for label, key in compared:
        c, b = load(f"copytask_{key}.json"), load(f"before_{key}.json")
        ratio = c["member_steps_per_second"] / b["member_steps_per_second"]
        if key in ("study", "study_v4"):
            # Not slower, and the step's share of the FMA peak measured on this machine.
            target = f">= 0.95x (not slower): {'met' if ratio >= 0.95 else 'NOT met'}"
            share = (c.get("cpu_peak") or {}).get("measured_share")
            if share is not None:
                target += f"; >= 35% of the measured FMA peak ({100 * share:.1f}%): {'met' if share >= 0.35 else 'NOT met'}"
        elif key == "quick" or key.startswith("new_"):
            target = f"faster: {'met' if ratio > 1 else 'NOT met'}"
        else:
            target = f">= 0.95x (not slower): {'met' if ratio >= 0.95 else 'NOT met'}"
        print(f"{label:34} {c['member_steps_per_second']:10.2f} m-s/s {b['member_steps_per_second']:10.2f} m-s/s "
              f"{ratio:6.3f}x   {target}")
if have("ids_quick_sequential_1.json"):
    print()
    print(f"{'position IDs (rope)':34} {'this build':>16} {'sequential':>16} {'ratio':>7}   target")
    for recipe, label in (("quick", "quick, 3 seeds, batch 128"), ("full", "full batch, 1 member")):
        def best(kind):
            return max(load(f"ids_{recipe}_{kind}_{r}.json")["member_steps_per_second"] for r in (1, 2))
        base = best("sequential")
        for kind in ("random", "offset", "coupled"):
            ratio = best(kind) / base
            print(f"{kind + ', ' + label:34} {best(kind):10.2f} m-s/s {base:10.2f} m-s/s {ratio:6.3f}x   "
                  f">= 0.90x: {'met' if ratio >= 0.90 else 'NOT met'}")
if have("quick_seconds"):
    with open(os.path.join(out, "quick_seconds")) as f:
        quick_seconds = float(f.read())
    print(f"{'configs/quick.json, whole compare':34} {quick_seconds:10.1f} s     "
          f"{'':>16} {'':>7}   {'':>12} {'':>12}   < 60 s: {'met' if quick_seconds < 60 else 'NOT met'}")
print("m-s/s = member-steps per second (one training step of one model); ratio = copytask / baseline")
any_run = next((load(n) for n in sorted(os.listdir(out)) if n.startswith("copytask_") and n.endswith(".json")), None)
if any_run:
    print(f"LibTorch {any_run['libtorch']}, {any_run['threads']} threads, {os.cpu_count()} cores")
PY
