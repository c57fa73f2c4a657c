#!/usr/bin/env bash
# scripts/gpu_report.py's bench and fused verbs, rehearsed on the CPU so that a short run on a GPU
# machine does not find a broken report: the real producers (copytask bench and the PyTorch
# baseline, tiny and on the CPU) write the case files under the names gpu_run.sh gives them,
# then bench.json must hold every case, the ratios, the CUDA graph's gain and the share of
# the device's FP32 peak computed from the step's FLOP rate, and the case files be gone.
# Then the PyTorch 2 peers, folded in one at a time as gpu_run.sh does (tiny, on the CPU, on
# the PyTorch 2.11 that scripts/cuda_build.sh keeps in its cache, when it is there; never
# fetched here): vmap for both cases and vmap-compile for the quick one (torch.compile's
# default mode: CUDA graphs need a GPU); the study's vmap-compile is left out (a second
# compile, 15 to 40 s on 2 cores), so its row must say "not run". Without that PyTorch only
# the eager rows are checked, and every other row must say "not run".
#   tests/scripts/gpu_report_test.sh SOURCE_DIR COPYTASK
set -euo pipefail
source_dir=$1
copytask=$2
python=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$source_dir"
tiny="task.examples=400 model.embed=8 model.hidden=16 train.batch_size=32 train.seeds=[0] train.device=cpu"
for key in 1 2 3 4; do
  "$copytask" bench $tiny --warmup 0 --steps 2 --json "$dir/c$key.json" > /dev/null
done
for key in 1 2 3; do
  OMP_NUM_THREADS=2 "$python" scripts/baseline_pytorch.py --members 1 --batch-size 32 --train-examples 360 --embed 8 \
    --hidden 16 --warmup 0 --steps 2 --json "$dir/b$key.json" > /dev/null
done
# What copytask bench adds on a GPU (its name, from the CUDA libraries), for the peak's lookup.
"$python" - "$dir/c3.json" <<'PY'
import json, sys
case = json.load(open(sys.argv[1]))
case["gpu"] = {"name": "NVIDIA H100 80GB HBM3", "cuda_runtime": "13.0", "cuda_driver": "13.0"}
json.dump(case, open(sys.argv[1], "w"))
PY
# What copytask bench --profile adds to the uncaptured case on a GPU (train/step_profile.h).
"$python" - "$dir/c4.json" <<'PY'
import json, sys
case = json.load(open(sys.argv[1]))
case["profile"] = {"trace": "trace.json", "steps": 3, "kernel_seconds_per_step": 0.1, "kernels_named": 2,
                   "kernels": [{"name": "gemm", "calls_per_step": 9.0, "seconds_per_step": 0.06, "share": 0.6},
                               {"name": "layer_norm", "calls_per_step": 5.0, "seconds_per_step": 0.04, "share": 0.4}]}
json.dump(case, open(sys.argv[1], "w"))
PY
"$python" scripts/gpu_report.py bench "$dir"
cache=${COPYTASK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/copytask}
torch2=$cache/torch-2.11.0-cu130/bin/python3
if [ -x "$torch2" ] && "$torch2" -c 'import torch.func' 2> /dev/null; then
  peer() {
    local name=$1
    shift
    OMP_NUM_THREADS=2 "$torch2" scripts/baseline_pytorch.py --members 2 --batch-size 32 --train-examples 360 --embed 8 \
      --hidden 16 --warmup 0 --steps 2 "$@" --json "$dir/$name.json" > "$dir/log-$name" 2>&1 || { cat "$dir/log-$name"; exit 1; }
    "$python" scripts/gpu_report.py bench "$dir" > /dev/null
  }
  peer b2-vmap --form vmap
  peer b3-vmap --form vmap
  peer b2-vmap-compile --form vmap-compile
  peers="b2-vmap b3-vmap b2-vmap-compile"
else
  echo "gpu_report: no PyTorch 2 at $torch2 (scripts/cuda_build.sh --wheel-only): the vmap peers not rehearsed"
  peers=""
fi
"$python" - "$dir" "$peers" <<'PY'
import json, os, sys
out, ran = sys.argv[1], sys.argv[2].split()
bench = json.load(open(os.path.join(out, "bench.json")))
assert bench["device"] == "NVIDIA H100 80GB HBM3", bench["device"]
assert len(bench["cases"]) == 4, len(bench["cases"])
for case in bench["cases"]:
    c, b = case["copytask"], case["baseline"]
    assert abs(case["ratio"] - c["member_steps_per_second"] / b["member_steps_per_second"]) < 1e-9 * case["ratio"]
    assert c["flops_per_second"] > 0
study, uncaptured = bench["cases"][2]["copytask"], bench["cases"][3]["copytask"]
assert abs(bench["reference_study_seconds_estimate"] - 2000 * study["members"] / study["member_steps_per_second"]) < 1e-6
assert abs(bench["cuda_graph_gain"] - study["member_steps_per_second"] / uncaptured["member_steps_per_second"]) < 1e-9
assert bench["fp32_peak_flops_per_second"] == 66.9e12
assert abs(bench["fraction_of_fp32_peak"] - study["flops_per_second"] / 66.9e12) < 1e-15
assert bench["profile"]["kernels"][0]["name"] == "gemm", bench.get("profile")
# The peers: eager is each case's own baseline; the rest as far as they ran, else "not run".
peers = bench["peers"]
assert [(p["case"], p["form"]) for p in peers] == [(bench["cases"][i]["case"], form) for i in (1, 2)
                                                   for form in ("eager", "vmap", "vmap-compile")], peers
for p in peers:
    index = 1 if p["case"] == bench["cases"][1]["case"] else 2
    key = "b%d-%s" % (index + 1, p["form"])
    assert p["goal"] == {"eager": 30.0, "vmap-compile": 3.0}.get(p["form"]), p
    if p["form"] != "eager" and key not in ran:
        assert p["status"] == "not run" and p["ratio"] is None, p
        continue
    assert p["status"] == "ok", p
    copytask = bench["cases"][index]["copytask"]["member_steps_per_second"]
    assert p["copytask_member_steps_per_second"] == copytask
    assert abs(p["ratio"] - copytask / p["member_steps_per_second"]) < 1e-9 * p["ratio"], p
    assert p["goal_met"] == (p["ratio"] >= p["goal"] if p["goal"] else None), p
    assert p["baseline"]["form"] == p["form"] and p["warmup_seconds"] == p["baseline"]["warmup_seconds"], p
    if p["form"] == "eager":
        assert p["baseline"] == bench["cases"][index]["baseline"]
        assert abs(p["ratio"] - bench["cases"][index]["ratio"]) < 1e-12 * p["ratio"]
    assert p["compile_mode"] == ("default" if p["form"] == "vmap-compile" else None), p
    if p["form"] == "vmap-compile":
        assert p["warmup_seconds"] > 1, p  # torch.compile's compilation, outside the timed steps
left = sorted(f for f in os.listdir(out) if f[0] in "bc" and f != "bench.json")
assert not left, left
print("gpu_report bench: 4 cases, the graph's gain, the FP32 share as computed and the profile carried; "
      "peers: eager, %s as run, the rest not run" % (", ".join(ran) or "none other"))
PY

# The fused verb (gpu_run.sh's fused-peers then fused-bench stages) in a folder of its own: the
# fused step's, the device step's and eager's files of both cases, the profiled step, and the
# compiled peer of the reference case alone (a baseline file in its place: the report reads its
# rate), so the reference case's ratio to it is computed and the quick case's is none; two
# of the tile sweep's files (ft<E>.json), folded beside the reference case's own step; and the
# reference case with its kept activations in global memory (fkr.json, the quick case's absent),
# and so at a tile of 4 (fgt4.json), folded beside fkr.json.
fused_dir="$dir/fused"
mkdir -p "$fused_dir"
for file in fq dq fr dr fp ft1 ft2 fkr fgt4; do
  "$copytask" bench $tiny --warmup 0 --steps 2 --json "$fused_dir/$file.json" > /dev/null
done
for file in eq er b3-vmap-compile; do
  OMP_NUM_THREADS=2 "$python" scripts/baseline_pytorch.py --members 1 --batch-size 32 --train-examples 360 --embed 8 \
    --hidden 16 --warmup 0 --steps 2 --json "$fused_dir/$file.json" > /dev/null
done
"$python" - "$fused_dir" <<'PY'
import json, sys
# What copytask bench --profile adds on a GPU, as above.
path = sys.argv[1] + "/fp.json"
case = json.load(open(path))
case["profile"] = {"trace": "fused_trace.json", "steps": 3, "kernel_seconds_per_step": 0.1, "kernels_named": 1,
                   "kernels": [{"name": "fused_step_kernel", "calls_per_step": 1.0, "seconds_per_step": 0.1, "share": 1.0}]}
json.dump(case, open(path, "w"))
PY
compiled_rate=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["member_steps_per_second"])' \
  "$fused_dir/b3-vmap-compile.json")
"$python" scripts/gpu_report.py fused "$fused_dir" > /dev/null
"$python" - "$fused_dir" "$compiled_rate" <<'PY'
import json, os, sys
out, compiled_rate = sys.argv[1], float(sys.argv[2])
fused = json.load(open(os.path.join(out, "fused.json")))
quick, study = fused["cases"]
assert quick["vmap_compile"] is None and quick["over_vmap_compile"] is None, quick
assert study["vmap_compile"]["member_steps_per_second"] == compiled_rate, study["vmap_compile"]
rate = study["fused"]["member_steps_per_second"]
assert abs(study["over_vmap_compile"] - rate / compiled_rate) < 1e-12 * study["over_vmap_compile"], study
assert abs(study["over_eager"] - rate / study["eager"]["member_steps_per_second"]) < 1e-12 * study["over_eager"]
assert fused["profile"]["kernels"][0]["name"] == "fused_step_kernel", fused.get("profile")
sweep = fused["tile_sweep"]
assert [(row["kept_activations"], row["most_examples_a_tile"]) for row in sweep] == [
    ("shared", 1), ("shared", 2), ("shared", 0), ("global", 4), ("global", 0)], sweep
for row in sweep:
    assert abs(row["step_seconds"] - row["bench"]["members"] / row["bench"]["member_steps_per_second"]) < 1e-12, row
assert sweep[2]["step_seconds"] == study["step_seconds"], sweep[2]
# The kept activations in global memory: the reference case's file folded beside its step, the
# quick case's (absent) left out.
kept = fused["kept_global"]
assert [row["case"] for row in kept] == [study["case"]], kept
seconds = kept[0]["bench"]["members"] / kept[0]["bench"]["member_steps_per_second"]
assert abs(kept[0]["step_seconds"] - seconds) < 1e-12 and abs(kept[0]["over_kept_in_shared_memory"] - study["step_seconds"] / seconds) < 1e-9, kept
assert sweep[-1]["step_seconds"] == kept[0]["step_seconds"], sweep[-1]
assert sorted(os.listdir(out)) == ["fused.json"], os.listdir(out)
print("gpu_report fused: both cases, the compiled peer folded where its file was, none where not; the tile sweep; "
      "the kept activations in global memory; the files gone")
PY
