#!/usr/bin/env bash
# The GPU machine's whole work in one command (it has the PyTorch wheel with its LibTorch,
# nvcc, cmake and ninja; no Debian packages and no network). Each stage runs under its own
# time limit; every stage's output goes to one log, summary.json says how each ended.
#
#   scripts/gpu_run.sh [--out DIR] [--prebuilt BUNDLE] [STAGE ...]
#     stages, in this order (default: env configure build test bench):
#       env        the GPU, driver, PyTorch/LibTorch and CUDA versions, the C++ ABI, the tools
#       configure  CMake with the wheel's LibTorch (cmake/dependencies.cmake falls back to .deps/)
#       build      copytask and its tests; ldd of the binary
#       test       the suite, CUDA tests included (without the six that need Debian's
#                  packages or are reports for this side: the browser, the shard scripts,
#                  the bundle rehearsal, Debian's python3 three times), then the GPU smoke
#                  study (configs/gpu-smoke.json: every scheme, option and task kind, evaluated
#                  past the trained lengths, seconds of training) on the GPU and on the CPU,
#                  compared: its results complete, token accuracy and final loss the same
#                  (smoke_token.json, smoke_loss.json)
#       bench      copytask bench on the GPU beside the PyTorch baseline on the same GPU, and the
#                  reference study's step uncaptured too (the CUDA graph's gain), profiled
#                  (its kernels by time, trace.json) -> bench.json, with the step's FLOP rate
#                  as a share of the GPU's FP32 peak; then the PyTorch 2 peers of the quick and
#                  reference-study cases on the same GPU (the members of each scheme as a
#                  torch.func vmap ensemble, and that under torch.compile with CUDA graphs,
#                  mode="reduce-overhead"), each folded into bench.json's peers as it ends
#       study      the reference study (configs/reference.json) on the GPU, timed -> study_results.json
#       fused      the fused GPU step (train.step=fused-gpu; docs/gpu.md): its tests on this GPU (its
#                  kernels against their CPU emulation and against autograd, two runs and the
#                  captured step bit for bit), compute-sanitizer's racecheck, synccheck and
#                  memcheck on its small CUDA test, and the smoke study on it against the CPU
#                  (fused_smoke_token.json, fused_smoke_loss.json)
#       fused-bench  the fused step beside the device step and PyTorch's eager loop, quick and
#                  reference-study cases, its uncaptured step profiled, the reference step
#                  with tiles of 1, 2 and 4 examples, and both cases with the kept activations
#                  in global memory (the reference step so at tiles of 4, 8 and 12), and ncu's
#                  view of one launch of each form -> fused.json (or
#                  bench.json's "fused" after the bench stage in the same call)
#       fused-peers  the compiled torch.func ensemble of the quick and reference-study cases on the
#                  same GPU, for fused-bench's report in the same call (name it before fused-bench)
#       fused-study  the reference study trained on the fused step, timed, compared seed for seed
#                  with the CPU's committed one -> fused_study_results.json, fused_compare.json
#       copy-family  the copy-family study on the GPU, timed, compared with the CPU's (resumed
#                  over calls: the stage's comment says how) -> copy_family_compare.json
#     DIR: where the files go (default $OUT when set, else gpu-out/): summary.json,
#     gpu_run.log, bench.json, trace.json, study_results.json, smoke_token.json,
#     smoke_loss.json (the GPU machine's transfer brings back 8 files at most)
#     BUNDLE: binaries built on a CPU machine (scripts/cuda_build.sh --bundle BUNDLE): no
#     configure or build here; test runs the bundle's test binary, bench and study its copytask.
#     The script's exit status is the worst stage's (0 only when every stage passed).
#
# Before it, on a CPU machine: scripts/gpu_bundle.sh (CLI11, nlohmann/json, spdlog, fmt and
# GoogleTest's sources into .deps/), and take .deps to the GPU machine with the checkout, then
# there: scripts/gpu_run.sh env configure build test bench.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
prebuilt=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --prebuilt) prebuilt=$(cd "$2" && pwd) || { echo "gpu_run: no bundle at $2 (scripts/cuda_build.sh --bundle)" >&2; exit 2; }; shift 2 ;;
    *) break ;;
  esac
done
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(env configure build test bench)
mkdir -p "$out"
build=build-gpu
python=$(command -v python3)
report=scripts/gpu_report.py
summary="$out/summary.json"
log="$out/gpu_run.log"
[ -f "$summary" ] || echo '{"stages": []}' > "$summary"

# stage NAME LIMIT_SECONDS COMMAND: runs it under its limit, its output into the log; the
# worst status so far is the script's.
worst=0
stage() {
  local name=$1 limit=$2 command=$3 start=$SECONDS rc
  echo "== $name (limit ${limit}s)" | tee -a "$log"
  timeout "$limit" bash -c "$command" >> "$log" 2>&1
  rc=$?
  "$python" "$report" stage "$summary" "$name" "$rc" "$((SECONDS - start))"
  echo "== $name: exit $rc after $((SECONDS - start))s" | tee -a "$log"
  [ "$rc" -le "$worst" ] || worst=$rc
  return $rc
}

# The wheel's torch/ folder itself: with torch/share/cmake alone, CMake takes libtorch and
# libc10 from any other LibTorch in the system's folders.
prefix=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
# The binaries: the bundle's, through its run script, or this build's.
if [ -n "$prebuilt" ]; then
  # The test fixtures from this checkout (the bundle leaves them out, to fit the 64 MiB that
  # reach the GPU machine beside the checkout), if they are the ones the bundle was built with.
  [ -d "$prebuilt/source/tests/fixtures" ] || scripts/bundle_fixtures.sh "$prebuilt" || exit 2
  export PYTHON=$python  # the bundle's run script takes torch's libraries from this Python
  copytask="$prebuilt/run copytask"
  tests="$prebuilt/run tests --gtest_brief=1"
else
  copytask=$build/copytask
  tests=""
fi
nvcc=$(command -v nvcc || true)
# The PyTorch baseline's two cases beside copytask's (scripts/baseline_pytorch.py), in every
# stage that runs them: the quick recipe (18 members, batch 128, 3 + 20 steps) and the
# reference study's full batch (30 members; its warm-up and steps per form, a step there
# being long and torch.compile's warm-up longer).
quick_baseline="--members 18 --positional mixed --batch-size 128 --lr 0.002 --warmup 3 --steps 20"
reference_baseline="--members 30 --positional mixed --batch-size 0 --lr 3e-4"
for name in "${stages[@]}"; do
  case "$name" in
    env) stage env 120 "nvidia-smi; '$python' $report env '$summary'" ;;
    configure|build)
      if [ -n "$prebuilt" ]; then echo "== $name: skipped, prebuilt $prebuilt" | tee -a "$log"; continue; fi ;;&
    configure)
      stage configure 300 "cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='$prefix' -DTorch_DIR='$prefix/share/cmake/Torch' \
        -DCOPYTASK_BUNDLED_DEPS='$PWD/.deps' ${nvcc:+-DCMAKE_CUDA_COMPILER=$nvcc}" || break ;;
    build) stage build 600 "cmake --build $build -j \$(nproc) && ldd $build/copytask" || break ;;
    test)
      if [ -n "$prebuilt" ]; then
        # In shards of 2 threads, one per two cores (8 on the GPU machine's 16).
        stage test 600 "scripts/sharded_tests.sh \$(( \$(nproc) / 2 > 0 ? \$(nproc) / 2 : 1 )) 2 $tests"
      else
        stage test 600 "cd $build && ctest --output-on-failure --timeout 300 -j 4 \
          -E '^(report_browser|study_scripts|bundled_dependencies|python_checkpoint_snippet|python_results_csv_snippet|gpu_report|compare_results)\$'"
      fi
      # The smoke study on both devices: the same data and dropout stream, so the same numbers
      # up to float rounding (60 Adam steps of it: token accuracy within 0.02, ten of the
      # test's ~500 output tokens; final loss within 0.01).
      stage smoke 600 "set -e
        rm -rf /tmp/copytask-smoke-gpu /tmp/copytask-smoke-cpu
        $copytask compare --config configs/gpu-smoke.json train.device=cuda --out /tmp/copytask-smoke-gpu
        $copytask compare --config configs/gpu-smoke.json train.device=cpu --out /tmp/copytask-smoke-cpu
        '$python' scripts/compare_results.py /tmp/copytask-smoke-cpu/results.json /tmp/copytask-smoke-gpu/results.json \
          --labels CPU GPU --metric test_token --tolerance 0.02 --strict --json $out/smoke_token.json
        '$python' scripts/compare_results.py /tmp/copytask-smoke-cpu/results.json /tmp/copytask-smoke-gpu/results.json \
          --labels CPU GPU --metric final_loss --tolerance 0.01 --strict --json $out/smoke_loss.json" ;;
    bench)
      # The peers after the cases, bench.json written first and again after each peer (its
      # file folded in and removed, so $out stays within the 8 files the GPU machine's transfer brings
      # back): a peer that fails or runs out of time leaves the rest, shown "not run", and
      # the stage fails. Their cost is torch.compile's: vmap-compile compiles once for each
      # of the 6 schemes' ensembles and records its CUDA graph in the untimed warm-up (2
      # steps, its seconds in bench.json), a minute or more for the 30-member full batch; a
      # timed steps are short beside that, so 5 of them (the eager study's count) are enough
      # there, and the quick case keeps the eager one's 3 + 20.
      stage bench 600 "set -e
        b='$copytask'
        \$b bench --config configs/reference.json train.seeds=[0] train.device=cuda --warmup 3 --steps 20 --json $out/c1.json
        '$python' scripts/baseline_pytorch.py --device cuda --members 1 --batch-size 0 --lr 3e-4 --warmup 3 --steps 20 --json $out/b1.json
        \$b bench --compare --config configs/quick.json train.device=cuda --warmup 3 --steps 20 --json $out/c2.json
        '$python' scripts/baseline_pytorch.py --device cuda $quick_baseline --json $out/b2.json
        \$b bench --compare --config configs/reference.json train.device=cuda --warmup 3 --steps 20 --json $out/c3.json
        '$python' scripts/baseline_pytorch.py --device cuda $reference_baseline --warmup 1 --steps 5 --json $out/b3.json
        \$b bench --compare --config configs/reference.json train.device=cuda train.cuda_graph=false --warmup 3 --steps 20 \\
          --profile $out/trace.json --json $out/c4.json
        '$python' $report bench $out
        failed=0
        peer() {
          local name=\$1
          shift
          '$python' scripts/baseline_pytorch.py --device cuda \"\$@\" --json $out/\$name.json || { echo \"peer \$name failed\"; failed=1; }
          '$python' $report bench $out
        }
        for form in vmap vmap-compile; do
          peer b2-\$form --form \$form $quick_baseline
        done
        for form in vmap vmap-compile; do
          peer b3-\$form --form \$form $reference_baseline --warmup 2 --steps 5
        done
        exit \$failed" ;;
    study)
      stage study 600 "set -e
        rm -rf /tmp/copytask-reference-gpu
        start=\$(date +%s.%N)
        $copytask compare --config configs/reference.json train.device=cuda --out /tmp/copytask-reference-gpu
        seconds=\$('$python' -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' \$start \$(date +%s.%N))
        cp /tmp/copytask-reference-gpu/results.json $out/study_results.json
        '$python' $report study '$summary' /tmp/copytask-reference-gpu/run.json \$seconds" ;;
    fused)
      # The CUDA tests, then the sanitizers on the smallest of them (a few dozen blocks: racecheck
      # and synccheck instrument every shared-memory access), then the smoke study on the fused
      # step: arms whose schemes have no kernel form train on the device step, saying why.
      tests_binary=${prebuilt:+$prebuilt/run tests}
      tests_binary=${tests_binary:-$build/tests/copytask_tests}
      # Only the tests that need the GPU: the kernels' CPU emulation tests (FusedGpu.*) run in
      # every CI run, several minutes of CPU.
      stage fused 420 "set -e
        $tests_binary --gtest_brief=1 --gtest_filter='FusedGpuOnCuda.*:Kernels.*'
        for tool in racecheck synccheck memcheck; do
          echo \"== compute-sanitizer --tool \$tool\"
          compute-sanitizer --tool \$tool --error-exitcode 1 --target-processes all \
            $tests_binary --gtest_brief=1 --gtest_filter='FusedGpuOnCuda.ASmallStepForTheSanitizers'
        done
        rm -rf /tmp/copytask-fused-smoke-gpu /tmp/copytask-fused-smoke-cpu
        $copytask compare --config configs/gpu-smoke.json train.device=cuda train.step=fused-gpu --out /tmp/copytask-fused-smoke-gpu
        $copytask compare --config configs/gpu-smoke.json train.device=cpu --out /tmp/copytask-fused-smoke-cpu
        '$python' scripts/compare_results.py /tmp/copytask-fused-smoke-cpu/results.json /tmp/copytask-fused-smoke-gpu/results.json \
          --labels CPU fused-GPU --metric test_token --tolerance 0.02 --strict --json $out/fused_smoke_token.json
        '$python' scripts/compare_results.py /tmp/copytask-fused-smoke-cpu/results.json /tmp/copytask-fused-smoke-gpu/results.json \
          --labels CPU fused-GPU --metric final_loss --tolerance 0.01 --strict --json $out/fused_smoke_loss.json" ;;
    fused-peers)
      # The compiled peer of the fused step's two cases, on the same GPU in the same call (the
      # bench stage's peers take longer: its own cases and both torch.func forms): the members
      # of each scheme as a torch.func vmap ensemble under torch.compile with CUDA graphs
      # (mode="reduce-overhead"), its compile and graph recording in the untimed warm-up (a
      # minute or more each, its seconds in the file). Run before fused-bench, whose report
      # folds b2-vmap-compile.json and b3-vmap-compile.json into fused.json's cases.
      stage fused-peers 420 "set -e
        '$python' scripts/baseline_pytorch.py --device cuda --form vmap-compile $quick_baseline --json $out/b2-vmap-compile.json
        '$python' scripts/baseline_pytorch.py --device cuda --form vmap-compile $reference_baseline --warmup 2 --steps 5 \\
          --json $out/b3-vmap-compile.json" ;;
    fused-bench)
      # The device step on LibTorch's ops is train.step=autograd (uncaptured: the CUDA graph
      # gains it 1.01x, experiments/gpu), since auto takes the fused step on a GPU.
      stage fused-bench 420 "set -e
        b='$copytask'
        \$b bench --compare --config configs/quick.json train.device=cuda train.step=fused-gpu --warmup 3 --steps 20 --json $out/fq.json
        \$b bench --compare --config configs/quick.json train.device=cuda train.step=autograd --warmup 3 --steps 20 --json $out/dq.json
        '$python' scripts/baseline_pytorch.py --device cuda $quick_baseline --json $out/eq.json
        \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu --warmup 3 --steps 20 --json $out/fr.json
        \$b bench --compare --config configs/reference.json train.device=cuda train.step=autograd --warmup 3 --steps 10 --json $out/dr.json
        '$python' scripts/baseline_pytorch.py --device cuda $reference_baseline --warmup 1 --steps 5 --json $out/er.json
        \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.cuda_graph=false --warmup 3 --steps 10 \\
          --profile $out/fused_trace.json --json $out/fp.json
        # The reference step with smaller tiles (train.gpu_tile_examples: the same numbers, the
        # same blocks a multiprocessor; fr.json has the tile as large as fits): how the step's
        # time grows as a tile's examples shrink says what a tile's fixed costs (its barriers,
        # chains a row long) take against its examples' own work.
        for e in 1 2 4; do
          \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.gpu_tile_examples=\$e \\
            --warmup 3 --steps 10 --json $out/ft\$e.json
        done
        # Both cases with the backward's kept activations in global memory (train.gpu_kept_activations:
        # the same numbers; the tile 12 examples where it is 5 at the reference shape), and the
        # reference step so at tiles of 4 and 8: the sweep past the shared memory's 5.
        \$b bench --compare --config configs/quick.json train.device=cuda train.step=fused-gpu train.gpu_kept_activations=global \\
          --warmup 3 --steps 20 --json $out/fkq.json
        \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.gpu_kept_activations=global \\
          --warmup 3 --steps 10 --json $out/fkr.json
        for e in 4 8; do
          \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.gpu_kept_activations=global \\
            train.gpu_tile_examples=\$e --warmup 3 --steps 10 --json $out/fgt\$e.json
        done
        '$python' $report fused $out
        # Inside the step kernel: ncu's view of one launch of the reference study's (the clocks as
        # found), into the log and fused_ncu.txt: throughput against the chip's limits, occupancy,
        # and what the warps wait on; and, the kernels being built with -lineinfo, the warps'
        # stall samples line by line of the body (fused_source.csv).
        if command -v ncu >/dev/null; then
          # The kernels' line table names the body's headers through the build's layer links,
          # which a prebuilt bundle's machine lacks: made again where the build had them
          # (cuda_bundle.sh's build_dir), pointing into this tree's src/, before ncu imports them.
          if [ -f '$prebuilt/build_dir' ]; then
            built=\$(cat '$prebuilt/build_dir')
            for folder in src/*/; do
              f=\$(basename \$folder)
              [ -e \$built/layers/\$f/\$f ] || { mkdir -p \$built/layers/\$f && ln -s \$PWD/src/\$f \$built/layers/\$f/\$f; } || true
            done
          fi
          ncu --clock-control none -k regex:fused_step_kernel -c 1 --section SpeedOfLight --section Occupancy \\
            --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \\
            --section SourceCounters --import-source yes -f -o /tmp/copytask-fused-ncu \\
            \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.cuda_graph=false \\
            --warmup 1 --steps 1 > $out/fused_ncu.txt 2>&1 || echo 'ncu did not run (see fused_ncu.txt)'
          ncu -i /tmp/copytask-fused-ncu.ncu-rep --page details >> $out/fused_ncu.txt 2>&1 || true
          ncu -i /tmp/copytask-fused-ncu.ncu-rep --page source --csv --print-source cuda > $out/fused_source.csv 2>&1 ||
            echo 'ncu could not print the source page (see fused_source.csv)'
          # The same samples instruction by instruction (SASS): there whatever the source files,
          # gzipped (a large kernel's listing).
          ncu -i /tmp/copytask-fused-ncu.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $out/fused_sass.csv.gz ||
            echo 'ncu could not print the SASS page'
          grep -E 'Duration|Throughput|Occupancy|Registers|Shared Memory|Stall|Warp Cycles|Issued' $out/fused_ncu.txt | head -60 || true
          # The same view of the kernel with its kept activations in global memory (the first
          # launch of that run is its form): fused_kept_ncu.txt and fused_kept_sass.csv.gz
          # (scripts/ncu_lines.py --kernel fused_step_kernelILb1E).
          ncu --clock-control none -k regex:fused_step_kernel -c 1 --section SpeedOfLight --section Occupancy \\
            --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \\
            --section SourceCounters -f -o /tmp/copytask-fused-kept-ncu \\
            \$b bench --compare --config configs/reference.json train.device=cuda train.step=fused-gpu train.cuda_graph=false \\
            train.gpu_kept_activations=global --warmup 1 --steps 1 > $out/fused_kept_ncu.txt 2>&1 ||
            echo 'ncu did not run on the kept form (see fused_kept_ncu.txt)'
          ncu -i /tmp/copytask-fused-kept-ncu.ncu-rep --page details >> $out/fused_kept_ncu.txt 2>&1 || true
          ncu -i /tmp/copytask-fused-kept-ncu.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $out/fused_kept_sass.csv.gz ||
            echo 'ncu could not print the SASS page of the kept form'
          grep -E 'Duration|Throughput|Registers|Shared Memory|Warp Cycles|Issued' $out/fused_kept_ncu.txt | head -30 || true
        fi" ;;
    fused-study)
      stage fused-study 600 "set -e
        rm -rf /tmp/copytask-reference-fused
        start=\$(date +%s.%N)
        $copytask compare --config configs/reference.json train.device=cuda train.step=fused-gpu --out /tmp/copytask-reference-fused
        seconds=\$('$python' -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' \$start \$(date +%s.%N))
        echo \"reference study on the fused GPU step: \$seconds s wall\"
        cp /tmp/copytask-reference-fused/results.json $out/fused_study_results.json
        '$python' scripts/compare_results.py experiments/reference-study/results.json /tmp/copytask-reference-fused/results.json \
          --labels CPU fused-GPU --json $out/fused_compare.json" ;;
    copy-family)
      # The copy-family study (configs/copy-family.json) on the GPU, timed, beside the CPU's
      # 2 h 43 min (experiments/copy-family). One call may not hold it: the stage stops it
      # after COPY_FAMILY_SECONDS (default 480) with SIGINT, as Ctrl-C (the finished batches
      # are kept), and packs the study folder into copy_family_gpu.tgz.part-* (pieces of 15 MB,
      # under the 16 MB a file that comes back from the GPU machine); put them in gpu-carry/ here
      # and take it along, and the next run's stage resumes the study where it stopped. Finished: the study beside the
      # CPU's, seed by seed (copy_family_compare.json), and its results (copy_family_results.json).
      stage copy-family 590 "set -e
        rm -rf /tmp/copytask-copy-family-gpu
        if ls gpu-carry/copy_family_gpu.tgz.part-* >/dev/null 2>&1; then
          cat gpu-carry/copy_family_gpu.tgz.part-* | tar xzf - -C /tmp
          echo 'copy family: resuming the carried study folder'
        fi
        start=\$(date +%s)
        rc=0
        timeout -s INT -k 30 \${COPY_FAMILY_SECONDS:-480} $copytask compare --config configs/copy-family.json \\
          train.device=cuda --out /tmp/copytask-copy-family-gpu || rc=\$?
        echo \"copy family on the GPU: \$(( \$(date +%s) - start )) s in this call, exit \$rc\"
        if [ \$rc = 0 ]; then
          cp /tmp/copytask-copy-family-gpu/results.json $out/copy_family_results.json
          '$python' scripts/compare_results.py experiments/copy-family/results.json.gz \\
            /tmp/copytask-copy-family-gpu/results.json --labels CPU GPU --json $out/copy_family_compare.json
        else
          tar czf - -C /tmp copytask-copy-family-gpu | split -b 15m - $out/copy_family_gpu.tgz.part-
          echo \"copy family: stopped; the study folder in \$(ls $out | grep -c part-) piece(s) to carry back\"
        fi
        exit \$rc" ;;
    *) echo "unknown stage $name: env, configure, build, test, bench, study, fused, fused-peers, fused-bench, fused-study or copy-family" >&2; exit 2 ;;
  esac
done
# The GPU machine's transfer brings back 8 files: where the stages left more, the files beyond the first
# six (summary.json and gpu_run.log, then by name) travel in one archive, extra.tgz (tar xzf
# extra.tgz where they land).
files=$(cd "$out" && ls -1 | grep -vx 'extra.tgz' | grep -v '\.part-')  # pieces stay pieces
if [ "$(echo "$files" | grep -c .)" -gt 8 ]; then
  keep=$( (echo summary.json; echo gpu_run.log; echo "$files" | grep -vx -e summary.json -e gpu_run.log) | head -6)
  pack=$(echo "$files" | grep -vxF "$keep")
  (cd "$out" && tar czf extra.tgz $pack && rm -f $pack) && echo "== packed into $out/extra.tgz: $(echo $pack)"
fi
echo "== summary ($summary):"
"$python" "$report" print "$summary"
exit "$worst"
