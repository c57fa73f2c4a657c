#!/usr/bin/env python3
"""The JSON side of scripts/gpu_run.sh (plain Python and the wheel's torch, nothing else).

    gpu_report.py stage SUMMARY NAME EXIT_CODE SECONDS   append a stage's outcome
    gpu_report.py env SUMMARY                             the machine: GPU, driver, versions, ABI
    gpu_report.py bench OUT                               bench.json from copytask's and the baseline's JSON,
                                                          and the PyTorch 2 peers' folded in (again after each)
    gpu_report.py fused OUT                               the fused GPU step's cases beside the device step
                                                          and PyTorch's (fused.json, or bench.json's "fused")
    gpu_report.py study SUMMARY RUN_JSON SECONDS          the reference study's run.json and wall time
    gpu_report.py print SUMMARY                           one line per stage
"""
import json
import os
import platform
import subprocess
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def first_line(command, last=False):
    try:
        lines = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        return (lines[-1] if last else lines[0]) if lines else ""
    except (OSError, subprocess.SubprocessError) as error:
        return "not found (%s)" % error


def env(summary):
    import torch
    info = {
        "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "cmake_prefix_path": torch.utils.cmake_prefix_path,
        "python": platform.python_version(), "gpu_available": torch.cuda.is_available(),
        "driver": first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "nvcc": first_line(["nvcc", "--version"], last=True), "cmake": first_line(["cmake", "--version"]),
        "ninja": first_line(["ninja", "--version"]), "gxx": first_line(["g++", "--version"]),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update({"gpu": p.name, "gpu_memory_gib": round(p.total_memory / 2**30, 1),
                     "compute_capability": "%d.%d" % (p.major, p.minor), "multiprocessors": p.multi_processor_count})
    data = load(summary)
    data["env"] = info
    save(summary, data)
    print(json.dumps(info, indent=2))


# FP32 (non-tensor-core) peaks from NVIDIA's datasheets, FLOP/s, by a part of the name the
# driver reports; the first that matches. copytask's matrix products run in FP32 (LibTorch
# leaves TF32 off for them), so this is the ceiling its FLOP rate is measured against.
FP32_PEAKS = (("H100 PCIe", 51.2e12), ("H100 NVL", 60.0e12), ("H200 NVL", 60.0e12), ("H100", 66.9e12),
              ("H200", 66.9e12))


def fp32_peak(name):
    for part, peak in FP32_PEAKS:
        if name and part in name:
            return peak
    return None


# The PyTorch 2 peers of cases 2 and 3, each form of scripts/baseline_pytorch.py against the
# same copytask case: eager is the case's own baseline (b2.json, b3.json); the others come as
# b2-FORM.json and b3-FORM.json. The goals: copytask at least 30 times eager (one model after
# another) and 3 times the torch.func ensemble under torch.compile with CUDA graphs
# (mode="reduce-overhead", what the baseline picks on a CUDA device).
PEER_CASES = ((1, "2"), (2, "3"))  # index in cases, the baseline's file key
PEER_FORMS = ("eager", "vmap", "vmap-compile")
PEER_GOALS = {"eager": 30.0, "vmap-compile": 3.0}


def peer_row(case, form, baseline):
    row = {"case": case["case"], "form": form, "goal": PEER_GOALS.get(form)}
    if baseline is None:
        row.update({"status": "not run", "ratio": None, "goal_met": None})
        return row
    ratio = case["copytask"]["member_steps_per_second"] / baseline["member_steps_per_second"]
    row.update({"status": "ok", "compile_mode": baseline.get("compile_mode"), "torch": baseline.get("torch"),
                "member_steps_per_second": baseline["member_steps_per_second"],
                "warmup_seconds": baseline.get("warmup_seconds"),  # compile and CUDA graph recording included
                "cudagraph_skips": baseline.get("cudagraph_skips"),
                "copytask_member_steps_per_second": case["copytask"]["member_steps_per_second"],
                "ratio": ratio, "goal_met": ratio >= row["goal"] if row["goal"] else None,
                "baseline": baseline})
    return row


def fold_peers(out, record):
    """The peers' rows into record["peers"], from the files there are (each then removed) or
    from an earlier fold; a form with neither is "not run"."""
    earlier = {(p["case"], p["form"]): p for p in record.get("peers", [])}
    peers, folded = [], []
    for index, key in PEER_CASES:
        case = record["cases"][index]
        for form in PEER_FORMS:
            path = os.path.join(out, "b%s-%s.json" % (key, form))
            if form == "eager":
                baseline = case["baseline"]
            elif os.path.exists(path):
                baseline = load(path)
                folded.append(path)
            else:
                baseline = earlier.get((case["case"], form), {}).get("baseline")
            peers.append(peer_row(case, form, baseline))
    record["peers"] = peers
    print("%-40s %-13s %-16s %16s %10s %8s   goal" % ("PyTorch peer", "form", "compile mode", "peer", "warm-up",
                                                       "copytask"))
    for p in peers:
        if p["status"] != "ok":
            print("%-40s %-13s %-16s %16s" % (p["case"], p["form"], "", "not run"))
            continue
        warmup = "%9.1fs" % p["warmup_seconds"] if p["warmup_seconds"] is not None else "%10s" % "?"
        goal = (">= %gx: %s" % (p["goal"], "met" if p["goal_met"] else "NOT met")) if p["goal"] else ""
        print("%-40s %-13s %-16s %10.2f m-s/s %s %7.2fx   %s" % (p["case"], p["form"], p["compile_mode"] or "-",
                                                               p["member_steps_per_second"], warmup, p["ratio"], goal))
    return folded


def bench(out):
    """bench.json from the case files (c1-c4, b1-b3), then the peers' files folded in. Without the
    case files (gpu_run.sh calls it again after each peer), the peers are folded into the
    bench.json there is."""
    path = os.path.join(out, "bench.json")
    if not os.path.exists(os.path.join(out, "c1.json")):
        if not os.path.exists(path):
            sys.exit("gpu_report bench: neither the case files (c1.json ...) nor bench.json in " + out)
        record = load(path)
        done = fold_peers(out, record)
        save(path, record)
        for name in done:
            os.remove(name)
        return
    cases = []
    # Case 4 is case 3 with the CUDA graph off: the same baseline, and the graph's own gain.
    for key, base, label in (("1", "1", "reference, full batch, 1 member"), ("2", "2", "quick, batch 128, 18 members"),
                             ("3", "3", "reference study, full batch, 30 members"),
                             ("4", "3", "reference study, 30 members, uncaptured (train.cuda_graph=false)")):
        c, b = load(os.path.join(out, "c%s.json" % key)), load(os.path.join(out, "b%s.json" % base))
        ratio = c["member_steps_per_second"] / b["member_steps_per_second"]
        cases.append({"case": label, "copytask": c, "baseline": b, "ratio": ratio})
        print("%-40s copytask %9.2f m-s/s (%s, %.1f GFLOP/s), PyTorch %9.2f m-s/s: %.2fx" %
              (label, c["member_steps_per_second"], c["training_step"], c["flops_per_second"] / 1e9,
               b["member_steps_per_second"], ratio))
    study = cases[2]["copytask"]
    seconds = 2000 * study["members"] / study["member_steps_per_second"]
    gpu = study.get("gpu", {}).get("name") or study.get("device")
    peak = fp32_peak(gpu)
    record = {"device": gpu, "reference_study_seconds_estimate": seconds,
              "reference_study_ratio_estimate": cases[2]["ratio"],
              "cuda_graph_gain": cases[2]["copytask"]["member_steps_per_second"] /
                                 cases[3]["copytask"]["member_steps_per_second"],
              "reference_step_flops_per_second": study["flops_per_second"],
              "fp32_peak_flops_per_second": peak,
              "fraction_of_fp32_peak": study["flops_per_second"] / peak if peak else None,
              "cases": cases}
    print("reference study: %.1f s estimated (2000 steps), %.1fx the baseline, CUDA graph %.2fx, %s of the FP32 peak" %
          (seconds, cases[2]["ratio"], record["cuda_graph_gain"],
           "%.1f%%" % (100 * record["fraction_of_fp32_peak"]) if peak else "unknown share"))
    # The uncaptured step under LibTorch's profiler (copytask bench --profile): where its time goes.
    profile = cases[3]["copytask"].get("profile")
    if profile:
        record["profile"] = profile
        print("uncaptured step's kernels: %.2f ms a step; the longest (trace: %s):" %
              (1e3 * profile["kernel_seconds_per_step"], profile["trace"]))
        for kernel in profile["kernels"][:10]:
            print("  %5.1f%% %8.3f ms %5.1f calls  %.110s" % (100 * kernel["share"], 1e3 * kernel["seconds_per_step"],
                                                          kernel["calls_per_step"], kernel["name"]))
    done = fold_peers(out, record)
    save(path, record)
    for name in done:
        os.remove(name)
    for key in "1234":
        os.remove(os.path.join(out, "c%s.json" % key))
    for key in "123":
        os.remove(os.path.join(out, "b%s.json" % key))


# The fused GPU step's cases (gpu_run.sh's fused-bench stage): each beside the device step of
# the same case on the same GPU and PyTorch's eager loop; the peers under torch.compile come
# from the fused-peers stage's files (b2-vmap-compile.json, b3-vmap-compile.json) or from
# bench.json's peers when the bench stage ran in the same call.
FUSED_CASES = (("q", "quick, batch 128, 18 members", "2"), ("r", "reference study, full batch, 30 members", "3"))


EXAMPLES_PAST_ANY_TILE = 1000  # sorts "as many as fit" (0) after every tile of the sweep


def fused(out):
    """fused.json (or bench.json's "fused", when the bench stage's bench.json is there) from
    the fused-bench stage's files: f<key>.json (fused step), d<key>.json (device step),
    e<key>.json (PyTorch eager), fp.json (the fused step uncaptured, profiled), and the
    fused-peers stage's b<peer key>-vmap-compile.json where it ran, ft<E>.json and
    fgt<E>.json (the reference study's fused step at most E examples a tile, its kept
    activations in shared or global memory) where the stage swept the tile, and fk<key>.json
    (the fused step with its kept activations in global memory) where it ran."""
    bench_path = os.path.join(out, "bench.json")
    peers = load(bench_path).get("peers", []) if os.path.exists(bench_path) else []
    cases, used = [], []
    for key, label, peer_key in FUSED_CASES:
        f, d, e = (load(os.path.join(out, "%s%s.json" % (kind, key))) for kind in "fde")
        used += [os.path.join(out, "%s%s.json" % (kind, key)) for kind in "fde"]
        rate = f["member_steps_per_second"]
        case = {"case": label, "fused": f, "device_step": d, "eager": e,
                "step_seconds": f["members"] / rate,
                "over_device_step": rate / d["member_steps_per_second"],
                "over_eager": rate / e["member_steps_per_second"]}
        compiled_path = os.path.join(out, "b%s-vmap-compile.json" % peer_key)
        if os.path.exists(compiled_path):
            compiled = load(compiled_path)
            used.append(compiled_path)
        else:
            compiled = next((p["baseline"] for p in peers
                             if p["case"] == label and p["form"] == "vmap-compile" and p["status"] == "ok"), None)
        case["vmap_compile"] = compiled
        case["over_vmap_compile"] = rate / compiled["member_steps_per_second"] if compiled else None
        cases.append(case)
        print("%-40s fused %9.2f m-s/s (%s, %.2f ms a step, %.1f GFLOP/s): %.2fx the device step, %.2fx eager%s" %
              (label, rate, f["training_step"], 1e3 * case["step_seconds"], f["flops_per_second"] / 1e9,
               case["over_device_step"], case["over_eager"],
               ", %.2fx vmap+compile" % case["over_vmap_compile"] if case["over_vmap_compile"] else ""))
    study = cases[1]["fused"]
    gpu = study.get("gpu", {}).get("name") or study.get("device")
    peak = fp32_peak(gpu)
    record = {"device": gpu, "cases": cases,
              "reference_study_seconds_estimate": 2000 * study["members"] / study["member_steps_per_second"],
              "fraction_of_fp32_peak": study["flops_per_second"] / peak if peak else None,
              "goals": {"reference_study_seconds": 10.0, "over_eager": 30.0, "over_vmap_compile": 3.0,
                        "fraction_of_fp32_peak": 0.35}}
    profiled = os.path.join(out, "fp.json")
    if os.path.exists(profiled):
        profile = load(profiled).get("profile")
        used.append(profiled)
        if profile:
            record["profile"] = profile
            print("fused step uncaptured: %.3f ms of kernels a step; the longest:" % (1e3 * profile["kernel_seconds_per_step"]))
            for kernel in profile["kernels"][:8]:
                print("  %5.1f%% %8.3f ms %5.1f calls  %.100s" % (100 * kernel["share"], 1e3 * kernel["seconds_per_step"],
                                                              kernel["calls_per_step"], kernel["name"]))
    # The tile sweep (ft<E>.json: the reference study's step with at most E examples a tile,
    # train.gpu_tile_examples; the same numbers and occupancy; fgt<E>.json the same with the
    # kept activations in global memory, train.gpu_kept_activations=global, whose tile holds
    # more): what a tile's fixed costs take.
    # The cases with the kept activations in global memory (fk<key>.json, below), read once:
    # the reference case's is also the global sweep's tile as large as fits.
    kept_runs = {}
    for key, _, _ in FUSED_CASES:
        path = os.path.join(out, "fk%s.json" % key)
        if os.path.exists(path):
            kept_runs[key] = load(path)
            used.append(path)
    sweep = []
    for prefix, kept_where, whole in (("ft", "shared", study), ("fgt", "global", kept_runs.get("r"))):
        rows = []
        for name in os.listdir(out):
            if not (name.startswith(prefix) and name.endswith(".json") and name[len(prefix):-5].isdigit()):
                continue
            path = os.path.join(out, name)
            used.append(path)
            rows.append((int(name[len(prefix):-5]), load(path)))
        if rows and whole is not None:
            rows.append((0, whole))  # last: 0 = as many as fit
        sweep += [{"most_examples_a_tile": e, "kept_activations": kept_where, "bench": run,
                   "step_seconds": run["members"] / run["member_steps_per_second"]}
                  for e, run in sorted(rows, key=lambda row: row[0] or EXAMPLES_PAST_ANY_TILE)]
    if sweep:
        record["tile_sweep"] = sweep
        for row in sweep:
            print("reference step, kept in %s memory, %s: %.2f ms" % (
                row["kept_activations"], "at most %d examples a tile" % row["most_examples_a_tile"]
                if row["most_examples_a_tile"] else "tiles as large as fit", 1e3 * row["step_seconds"]))
    # The kept activations in global memory (fk<key>.json, train.gpu_kept_activations=global;
    # the same numbers, a tile of more examples) beside each case's step with them in shared memory.
    kept = []
    for key, label, _ in FUSED_CASES:
        if key not in kept_runs:
            continue
        run = kept_runs[key]
        case = next(c for c in cases if c["case"] == label)
        seconds = run["members"] / run["member_steps_per_second"]
        kept.append({"case": label, "bench": run, "step_seconds": seconds,
                     "over_kept_in_shared_memory": case["step_seconds"] / seconds})
        print("%-40s kept activations in global memory: %.2f ms a step, %.2fx the step with them in shared memory" %
              (label, 1e3 * seconds, case["step_seconds"] / seconds))
    if kept:
        record["kept_global"] = kept
    print("reference study on the fused step: %.1f s estimated (goal 10 s), %s of the FP32 peak (goal 35%%)" %
          (record["reference_study_seconds_estimate"],
           "%.1f%%" % (100 * record["fraction_of_fp32_peak"]) if peak else "an unknown share"))
    if os.path.exists(bench_path):
        data = load(bench_path)
        data["fused"] = record
        save(bench_path, data)
    else:
        save(os.path.join(out, "fused.json"), record)
    for name in used:
        os.remove(name)


def main():
    verb = sys.argv[1]
    if verb == "stage":
        summary, name, rc, seconds = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
        data = load(summary)
        data["stages"].append({"stage": name, "exit_code": rc, "seconds": round(seconds, 1),
                               "status": "ok" if rc == 0 else ("timed out" if rc == 124 else "failed")})
        save(summary, data)
    elif verb == "env":
        env(sys.argv[2])
    elif verb == "bench":
        bench(sys.argv[2])
    elif verb == "fused":
        fused(sys.argv[2])
    elif verb == "study":
        data = load(sys.argv[2])
        data["study"] = {"run": load(sys.argv[3]), "wall_seconds": float(sys.argv[4])}
        save(sys.argv[2], data)
    elif verb == "print":
        for s in load(sys.argv[2])["stages"]:
            print("%-10s %-10s %7.1f s" % (s["stage"], s["status"], s["seconds"]))
    else:
        sys.exit("unknown verb " + verb)


if __name__ == "__main__":
    main()
