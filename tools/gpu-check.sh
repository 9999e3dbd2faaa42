#!/bin/bash
# The CUDA checks, as one script for a machine with an NVIDIA GPU (docs/CUDA.md): run
# from the repository root there, with the test and bench binaries built here and packed
# with the shared libraries they load into .gpu/bundle.tar.xz (bin/, lib/, plugins/: the
# Halide autoscheduler plugins; tools/gpu-bundle.sh packs it after this build):
#   ninja -C build device_tests e2e_tests lower_tests runtime_tests braze_bench_gpu braze-fuzz
# then bin/ holds build/test/{device,e2e,lower,runtime}_tests, build/bench/braze_bench_gpu
# and build/tools/braze-fuzz, and lib/ what `ldd` lists for them but glibc, libstdc++,
# libgcc, libcuda and the CUDA toolkit's own (the GPU machine has those). braze_bench_gpu
# is braze_bench without the CPU peers, whose libraries would not fit a 64 MiB bundle. Writes into $OUT (default /tmp/out): log.txt, cuda.json
# (the CUDA benchmarks, Google Benchmark JSON), torch.json (bench/peers_cuda.py: PyTorch
# eager and torch.compile on the same workloads, where the machine's python3 has
# PyTorch), plot.png (both, drawn by tools/braze-plot) and chain8.sass (Chain8's fused
# kernel as the GPU's machine code, where the machine has ptxas and cuobjdump).
#
#   tools/gpu-check.sh          # about 7 minutes on a 16-core H100 or H200 machine
#   NCU=1 tools/gpu-check.sh    # also profiles Chain8's fused kernel
#
# The first run (2026-11-26, H200) found the bugs listed in docs/CUDA.md.
#
# Every step runs even when one before it failed (a GPU run is rare: it should report all
# it can), and the script exits 1 at the end when any failed: a test, a time limit, the
# benchmark (or one of its cases, which errs on a result that disagrees with the
# reference kernels), a MISMATCH of PyTorch's, the fuzzer, the plot, a shard that wrote no gtest results, or a GPU test
# skipped on this machine (MatchesReferenceOnGpu, or any test skipped for want of CUDA). Without a GPU or the bundle it stops
# at once. The failures are listed last in the log ("gpu-check: FAILED ...").
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$SECONDS
FAILED=()
die() {
  echo "gpu-check: FAILED: $*"
  exit 1
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader ||
  die "nvidia-smi (no GPU?)"
nproc
mkdir -p /tmp/g && tar -xJf .gpu/bundle.tar.xz -C /tmp/g || die "unpacking .gpu/bundle.tar.xz"
rm -f /tmp/g/lib/libmvec.so.1  # the machine's glibc brings its own
cub=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
  find / -xdev -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
echo "cublasLt: $cub"
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "$cub") BRAZE_HALIDE_PLUGIN_DIR=/tmp/g/plugins
B=/tmp/g/bin

# One command under a time limit, with its status and time; a non-zero status (124: the
# limit) is recorded as a failure.
t() {
  local lim=$1 s=$SECONDS rc=0
  shift
  echo "== $*"
  timeout "$lim" "$@" || rc=$?
  echo "== rc=$rc $((SECONDS - s))s (total $((SECONDS - T0))s)"
  ((rc == 0)) || FAILED+=("rc=$rc: $*")
}

# gtest XML results of the test binaries: every file named here is expected at the end
# (tools/test-summary.py fails on a missing one: a binary that crashed or timed out).
R=$OUT/results
rm -rf "$R" && mkdir -p "$R"
RESULTS=()

# A gtest binary's filtered tests in 8 shards at once (one GPU, 16 cores). Waits for the
# shards one pid at a time (a bare `wait` would also wait for the tee above, forever),
# recording each shard's status.
shards() {
  local lim=$1 bin=$2 filter=$3 s=$SECONDS pids=() i rc
  echo "== $bin $filter (8 shards)"
  for i in 0 1 2 3 4 5 6 7; do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i BRAZE_CACHE_DIR=off \
      timeout "$lim" "$B/$bin" --gtest_brief=1 --gtest_filter="$filter" \
      --gtest_output="xml:$R/$bin-shard$i.xml" >"/tmp/shard$i.log" 2>&1 &
    pids+=($!)
    RESULTS+=("$R/$bin-shard$i.xml")
  done
  for i in 0 1 2 3 4 5 6 7; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    ((rc == 0)) || FAILED+=("rc=$rc: $bin $filter, shard $i of 8")
  done
  cat /tmp/shard[0-7].log | grep -v "^Running main\|^\[==========\]\|^$"
  echo "== $((SECONDS - s))s (total $((SECONDS - T0))s)"
}

RESULTS+=("$R/device_tests.xml")
t 60 "$B/device_tests" --gtest_brief=1 --gtest_output="xml:$R/device_tests.xml"
shards 120 e2e_tests '*Cuda*'
# Each op twice: CompilesAndAssembles (one shape, ptxas) and MatchesReferenceOnGpu.
shards 180 lower_tests '*Cuda*'
RESULTS+=("$R/runtime_tests.xml")
# Device, CUDA and memory tests, the whole GPU training steps (Cuda/GpuWorkloads) among them.
t 120 "$B/runtime_tests" --gtest_brief=1 --gtest_filter='*Device*:*Cuda*:*Memory*' \
  --gtest_output="xml:$R/runtime_tests.xml"
# What ran, failed and was skipped (a missing results file: a binary that crashed). On a
# GPU the cases that run on it must not skip (MatchesReferenceOnGpu, or a skip that says
# CUDA is missing).
echo "== tools/test-summary.py --results (${#RESULTS[@]} files in $R)"
rc=0
summary=$(timeout 30 python3 tools/test-summary.py --results "${RESULTS[@]}" 2>&1) || rc=$?
echo "$summary"
((rc == 0)) || FAILED+=("rc=$rc: tools/test-summary.py (a failed case or a missing results file)")
if grep -q "^  SKIPPED .*\(OnGpu\|CUDA is not available\|no CUDA device\)" <<<"$summary"; then
  FAILED+=("GPU test cases skipped on a GPU machine (see the summary above)")
fi
# Every *_cuda benchmark: issue 39's workloads, the ResNet block, attention and the
# transformer block step included (their first runs checked against the reference kernels).
OMP_WAIT_POLICY=passive t 300 "$B/braze_bench_gpu" --benchmark_filter=cuda --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT/cuda.json" \
  --benchmark_out_format=json
# A benchmark that could not run or failed its first run's check against the reference
# is a SkipWithError, after which Google Benchmark still exits 0: read the JSON for them.
echo "== benchmarks with an error in $OUT/cuda.json"
if ! timeout 30 python3 - "$OUT/cuda.json" <<'PY'; then
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"unreadable: {e}")
bad = list(dict.fromkeys(f"{b['name']}: {b.get('error_message', '')}"  # once per repetition
                         for b in doc.get("benchmarks", []) if b.get("error_occurred")))
print("\n".join(bad) or "none")
sys.exit(1 if bad else 0)
PY
  FAILED+=("braze_bench_gpu: benchmarks with an error (listed above)")
fi
# The peer on the same GPU, right after Braze's run (PyTorch's own libraries, not the bundle's).
if env -u LD_LIBRARY_PATH python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  t 360 env -u LD_LIBRARY_PATH python3 -u bench/peers_cuda.py "$OUT/torch.json"
else
  echo "== no PyTorch with CUDA: no peer"
fi
# Both runs as one plot (Braze's alone when PyTorch wrote nothing).
jsons=("$OUT/cuda.json")
[ -s "$OUT/torch.json" ] && jsons+=("$OUT/torch.json")
t 60 env -u LD_LIBRARY_PATH python3 tools/braze-plot "${jsons[@]}" -o "$OUT/plot.png" \
  --title "Braze vs PyTorch on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
BRAZE_CACHE_DIR=off t 75 "$B/braze-fuzz" --seeds=${FUZZ_SEEDS:-1:1000000} --jobs=12 --budget=${FUZZ_BUDGET:-60} \
  --jit_device=jit:cuda --specials=0.2 --dynamic=0.2
# Chain8's machine code (the CI proxy counts PTX): its kernel dumped as PTX, assembled for
# the GPU with the machine's ptxas and disassembled with cuobjdump; instructions per
# element (the kernel takes 4 elements per thread) and the MUFU operations among them.
# Informational: a missing tool is said, not failed.
sass() {
  local d=/tmp/chain8_dump ptxas cuobjdump ptx
  ptxas=$(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null | head -1)
  cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
  if [ -z "$ptxas" ] || [ -z "$cuobjdump" ]; then
    echo "== no ptxas or cuobjdump: no SASS count"
    return
  fi
  rm -rf "$d" && mkdir -p "$d"
  BRAZE_CACHE_DIR=off BRAZE_FLAGS=--dump_to=$d timeout 60 "$B/braze_bench_gpu" \
    --benchmark_filter='BM_Chain8_cuda/variant:0' --benchmark_min_time=0.01 >/dev/null 2>&1
  ptx=$(ls "$d"/*.ptx 2>/dev/null | head -1)
  [ -n "$ptx" ] || { echo "== no Chain8 PTX dumped"; return; }
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  "$ptxas" -arch=sm_$cc "$ptx" -o "$d/chain8.cubin" && "$cuobjdump" -sass "$d/chain8.cubin" >"$OUT/chain8.sass"
  echo "== Chain8 SASS (sm_$cc): $(grep -cE '^ +/\*[0-9a-f]{4}\*/' "$OUT/chain8.sass") instructions," \
    "$(grep -cE 'MUFU' "$OUT/chain8.sass") MUFU, for 4 elements"
}
sass
# Where Chain8's fused kernel spends its time (Nsight Compute, where the image has it): the
# kernel of the first timed iteration, after the warm-up run's compile.
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "${NCU:-0}" = 1 ] && [ -n "$ncu" ]; then
  BRAZE_CACHE_DIR=off t 120 "$ncu" --launch-skip 1 --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
    "$B/braze_bench_gpu" --benchmark_filter='BM_Chain8_cuda/variant:0' --benchmark_min_time=0.01
else
  echo "== no profile (NCU unset or no ncu)"
fi
# bench/peers_cuda.py prints MISMATCH where torch.compile disagrees with eager.
if grep -q "^MISMATCH" "$OUT/log.txt"; then
  FAILED+=("bench/peers_cuda.py: $(grep -c "^MISMATCH" "$OUT/log.txt") MISMATCH lines")
fi
echo "done in $((SECONDS - T0))s"
if ((${#FAILED[@]} > 0)); then
  for f in "${FAILED[@]}"; do echo "gpu-check: FAILED: $f"; done
  exit 1
fi
echo "gpu-check: passed"
