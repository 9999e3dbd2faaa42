#!/bin/bash
# The CUDA checks, as one script for a machine with an NVIDIA GPU (docs/CUDA.md): run
# from the repository root there, with the test and bench binaries built here and packed
# with the shared libraries they load into .gpu/bundle.tar.xz (bin/, lib/, plugins/: the
# Halide autoscheduler plugins; tools/gpu-bundle.sh packs it after this build):
#   ninja -C build device_tests e2e_tests lower_tests runtime_tests braze_bench_gpu braze-fuzz
# then bin/ holds build/test/{device,e2e,lower,runtime}_tests, build/bench/braze_bench_gpu,
# build/tools/braze-fuzz and build/braze-opencl-probe (the OpenCL probe, found beside the
# tests), and lib/ what `ldd` lists for them but glibc, libstdc++,
# libgcc, libcuda and the CUDA toolkit's own (the GPU machine has those). braze_bench_gpu
# is braze_bench without the CPU peers, whose libraries would not fit a 64 MiB bundle.
# Writes at most 7 files into $OUT (default /tmp/out; the device tool returns 8): log.txt,
# cuda.json (the CUDA benchmarks, Google Benchmark JSON), torch.json (bench/peers_cuda.py:
# PyTorch eager and torch.compile on the same workloads, where the machine's python3 has
# PyTorch), plot.png (both, drawn by tools/braze-plot), results.tgz (the gtest XML
# results, results/*.xml), chain8.sass (Chain8's fused kernel as the GPU's machine code,
# where the machine has ptxas and cuobjdump; not in QUICK mode) and, with TUNE=1,
# tune.tgz (below). Everything else (the unpacked bundle, the shards' logs, each
# benchmark group's JSON) stays in GPU_CHECK_DIR.
#
#   tools/gpu-check.sh          # about 10 minutes on a 16-core H100 or H200 machine
#   NCU=1 tools/gpu-check.sh    # also profiles Chain8's fused kernel
#   QUICK=1 tools/gpu-check.sh  # at most QUICK_BUDGET (160) s: see "QUICK mode" below
#   TUNE=1 ...                  # then the GPU schedule tuning and its A/B: "TUNE" below
#
# QUICK mode, for a short device run: device_tests; runtime_tests' CUDA cases (8 shards);
# lower_tests' cases GPU_TESTS (default '*Cuda*': every op's CUDA cases, attention's
# among them, i.e. lower_attention_tests' too; 8 shards); braze_bench_gpu's BENCH_FILTER
# (default 'cuda': all) with 3 repetitions of BENCH_MIN_TIME (0.05) s;
# bench/peers_cuda.py on the same workloads; the plot; a jit:cuda fuzz campaign of
# FUZZ_BUDGET (25) s; with E2E_TESTS, those e2e_tests cases; BENCH_LIMIT (45) s for the
# benchmarks (for each of BENCH_GROUPS, space-separated filters run one after another, when
# set), PEER_LIMIT (30) s for PyTorch's. Not e2e_tests otherwise, the SASS count or the profile, nor runtime_tests'
# OpenCL cases unless RUNTIME_OPENCL=1. Each step's time limit is cut to what is left of
# QUICK_BUDGET, counted from the start; a step with under 3 s left is not run, and that
# is a failure ("not run").
# The same failure accounting and outputs as the full run.
#
# TUNE=1 (the bundle packed with TUNE=1: braze-tune), after the checks above, in TUNE_TIME
# (default 300) s of its own, counted from its start (docs/CUDA.md, "GPU schedule
# tuning"): braze_bench_gpu's TUNE_FILTER workloads run once with their clusters dumped;
# braze-tune --device=jit:cuda tunes them for what is left of TUNE_TIME after the
# A/B's limits (at most TUNE_BUDGET, if set), --runs=5, writing its
# entries to a fresh directory; then the same benchmarks as an A/B, untuned
# (--stored_schedules=false) and tuned (--schedule_dirs=<the entries>), TUNE_AB_ROUNDS (2)
# rounds alternating, 3 repetitions each, in TUNE_AB_LIMIT (40) s a run. All of it goes back
# as one archive, $OUT/tune.tgz: tune.log (braze-tune's output: its first line names the
# device, "... device=sm_90"), schedules/ (the entries, with their `measured:` lines) and
# ab-untuned-N.json, ab-tuned-N.json. A failed step is a failure as above.
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
QUICK=${QUICK:-0}
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
# Where the bundle is unpacked and the shards' logs are written (GPU_CHECK_DIR: a dry run
# on a shared machine picks its own).
G=${GPU_CHECK_DIR:-/tmp/g}
mkdir -p "$G" && tar -xJf .gpu/bundle.tar.xz -C "$G" || die "unpacking .gpu/bundle.tar.xz"
rm -f "$G/lib/libmvec.so.1"  # the machine's glibc brings its own
cub=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
  find / -xdev -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
echo "cublasLt: $cub"
# (No cuBLASLt found: no directory for it; dirname "" would add the current one.)
export LD_LIBRARY_PATH=$G/lib${cub:+:$(dirname "$cub")} BRAZE_HALIDE_PLUGIN_DIR=$G/plugins
B=$G/bin

# The time limit of a step asked for `$1` s: in QUICK mode, no more than what is left of
# QUICK_BUDGET; 0 (not to be run) when under 3 s are left.
DEADLINE=$((T0 + ${QUICK_BUDGET:-160}))
limit() {
  local want=$1 left
  if [ "$QUICK" = 1 ]; then
    left=$((DEADLINE - SECONDS))
    ((left < want)) && want=$left
    ((want < 3)) && want=0
  fi
  echo "$want"
}

# One command under a time limit, with its status and time; a non-zero status (124: the
# limit) is recorded as a failure.
t() {
  local lim s=$SECONDS rc=0
  lim=$(limit "$1")
  shift
  echo "== $*"
  if ((lim == 0)); then
    echo "== not run: QUICK_BUDGET spent"
    FAILED+=("not run (QUICK_BUDGET spent): $*")
    return
  fi
  timeout "$lim" "$@" || rc=$?
  echo "== rc=$rc $((SECONDS - s))s (total $((SECONDS - T0))s)"
  ((rc == 0)) || FAILED+=("rc=$rc: $*")
}

# A backtrace of one gtest case of $B/$1 ($2) that crashed, run again alone under a
# debugger (gdb, else CUDA's cuda-gdb, which runs programs without GPU code too), where
# the machine has one and time is left. Informational: the crash is already a failure.
backtrace() {
  local bin=$1 test=$2 gdb lim
  gdb=$(command -v gdb || command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null | head -1)
  if [ -z "$gdb" ]; then
    echo "== no gdb or cuda-gdb: no backtrace of $test"
    return
  fi
  lim=$(limit 90)
  ((lim > 0)) || { echo "== no time left for a backtrace of $test"; return; }
  echo "== backtrace: $test, run alone under $gdb"
  # The stack, then which C++ runtime, LLVM and OpenCL libraries the process had loaded.
  BRAZE_CACHE_DIR=off timeout "$lim" "$gdb" -batch -ex run -ex bt -ex "info sharedlibrary" \
    --args "$B/$bin" --gtest_filter="$test" 2>&1 |
    grep -v "^\[New Thread\|^\[Thread .* exited\|^\[Detaching\|^0x[0-9a-f]* *0x[0-9a-f]* *Yes.*/\(libabsl\|libicu\|libz\|libevent\|libopen-\)" |
    head -150
}

# The gtest case a log of a non-brief run was running when it ended: the last
# "[ RUN      ]" line with no "[       OK ]", "[  FAILED  ]" or "[  SKIPPED ]" after it.
running_test() {
  awk '/^\[ RUN      \]/{t=$4} /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/{t=""} END{print t}' "$1"
}

# gtest XML results of the test binaries: every file named here is expected at the end
# (tools/test-summary.py fails on a missing one: a binary that crashed or timed out). They
# go back as one archive ($OUT/results.tgz): the device tool returns at most 8 files.
R=$G/results
rm -rf "$R" && mkdir -p "$R"
RESULTS=()

# A gtest binary's filtered tests in 8 shards at once (one GPU, 16 cores), not brief, so
# that a shard that crashes or runs out of time names the case it was running (and gets
# a backtrace). Waits for the shards one pid at a time (a bare `wait` would also wait for
# the tee above, forever), recording each shard's status. `$4` names the results files
# (default: the binary's name).
shards() {
  local lim bin=$2 filter=$3 name=${4:-$2} s=$SECONDS pids=() i rc test crashed=()
  lim=$(limit "$1")
  echo "== $bin $filter (8 shards)"
  if ((lim == 0)); then
    echo "== not run: QUICK_BUDGET spent"
    FAILED+=("not run (QUICK_BUDGET spent): $bin $filter")
    return
  fi
  for i in 0 1 2 3 4 5 6 7; do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i BRAZE_CACHE_DIR=off \
      timeout "$lim" "$B/$bin" --gtest_filter="$filter" \
      --gtest_output="xml:$R/$name-shard$i.xml" >"$G/shard$i.log" 2>&1 &
    pids+=($!)
    RESULTS+=("$R/$name-shard$i.xml")
  done
  for i in 0 1 2 3 4 5 6 7; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    ((rc == 0)) && continue
    test=$(running_test "$G/shard$i.log")
    if [ -n "$test" ]; then
      FAILED+=("rc=$rc: $bin, shard $i of 8, ended while running $test")
      ((rc > 128 && rc != 137)) && crashed+=("$test")
      echo "== shard $i ended (rc=$rc) while running $test; the end of its log:"
      tail -25 "$G/shard$i.log"
    else
      FAILED+=("rc=$rc: $bin $filter, shard $i of 8")
    fi
  done
  # The shards' logs but the lines of the cases that passed.
  cat "$G"/shard[0-7].log |
    grep -v "^Running main\|^\[==========\]\|^\[----------\]\|^\[ RUN      \]\|^\[       OK \]\|^$"
  echo "== $((SECONDS - s))s (total $((SECONDS - T0))s)"
  # One backtrace per crashed case, for the first two.
  local seen=() n=0
  for test in "${crashed[@]}"; do
    [[ " ${seen[*]} " == *" $test "* ]] && continue
    seen+=("$test")
    ((n++ < 2)) && backtrace "$bin" "$test"
  done
}

# runtime_tests' cases of the filter $1 with (`$2` opencl) or without (cuda) OpenCL in
# their names, as one gtest filter: the two run in separate processes, so that one
# aborting (NVIDIA's OpenCL driver aborted runtime_tests in every run to 2026-11-29)
# does not hide the other's results.
runtime_cases() {
  "$B/runtime_tests" --gtest_list_tests --gtest_filter="$1" 2>/dev/null |
    awk '/^[^ ]/{suite=$1} /^  [^ ]/{print suite $1}' |
    if [ "$2" = opencl ]; then grep -E 'OpenC[Ll]'; else grep -vE 'OpenC[Ll]'; fi | paste -sd: -
}

RESULTS+=("$R/device_tests.xml")
t $([ "$QUICK" = 1 ] && echo 20 || echo 60) "$B/device_tests" \
  --gtest_output="xml:$R/device_tests.xml"
# Device, CUDA and memory tests, the whole GPU training steps (Cuda/GpuWorkloads) among them.
# (Not ShippedSchedulesTest: no GPU entry ships yet, and its CPU entries' children would
# take a QUICK shard's whole limit; docs/CUDA.md's second call runs it on tuned entries.)
RT_FILTER='*Device*:*Cuda*:*Memory*'
rt_cuda=$(runtime_cases "$RT_FILTER" cuda)
# (An empty filter would run every case.)
[ -n "$rt_cuda" ] || FAILED+=("runtime_tests lists no CUDA case for $RT_FILTER")
rt_cuda=${rt_cuda:-NoCudaCaseListed.*}
if [ "$QUICK" = 1 ]; then
  shards 40 runtime_tests "$rt_cuda" runtime_tests-cuda
  # With RUNTIME_OPENCL=1, its OpenCL cases too (on NVIDIA's OpenCL driver, which aborted
  # them in every run to 2026-11-29; the probe now runs their use in a child first).
  if [ "${RUNTIME_OPENCL:-0}" = 1 ]; then
    rt_opencl=$(runtime_cases "$RT_FILTER" opencl)
    [ -z "$rt_opencl" ] || shards 40 runtime_tests "$rt_opencl" runtime_tests-opencl
  fi
  # Each op twice: CompilesAndAssembles (one shape, ptxas) and MatchesReferenceOnGpu.
  shards 60 lower_tests "${GPU_TESTS:-*Cuda*}"
  # With E2E_TESTS, those of e2e_tests' cases (whole programs on cuda:0).
  [ -z "${E2E_TESTS:-}" ] || shards 60 e2e_tests "$E2E_TESTS"
else
  shards 120 e2e_tests '*Cuda*'
  shards 180 lower_tests "${GPU_TESTS:-*Cuda*}"
  shards 120 runtime_tests "$rt_cuda" runtime_tests-cuda
  rt_opencl=$(runtime_cases "$RT_FILTER" opencl)
  [ -z "$rt_opencl" ] || shards 120 runtime_tests "$rt_opencl" runtime_tests-opencl
fi
# What ran, failed and was skipped (a missing results file: a binary that crashed). On a
# GPU the cases that run on it must not skip (MatchesReferenceOnGpu, or a skip that says
# CUDA is missing).
echo "== tools/test-summary.py --results (${#RESULTS[@]} files in $R)"
rc=0
summary=$(timeout 30 env -u LD_LIBRARY_PATH python3 tools/test-summary.py --results "${RESULTS[@]}" 2>&1) || rc=$?
echo "$summary"
((rc == 0)) || FAILED+=("rc=$rc: tools/test-summary.py (a failed case or a missing results file)")
if grep -q "^  SKIPPED .*\(OnGpu\|CUDA is not available\|no CUDA device\)" <<<"$summary"; then
  FAILED+=("GPU test cases skipped on a GPU machine (see the summary above)")
fi
# Every *_cuda benchmark: issue 39's workloads, the ResNet block, attention and the
# transformer block step included (their first runs checked against the reference kernels).
BENCH_FILTER=${BENCH_FILTER:-cuda}
# BENCH_GROUPS: filters run one after another, each its own process with its own limit
# (BENCH_LIMIT in QUICK mode) and JSON, merged into cuda.json: a case that runs long costs
# its group only, not the cases after it (on 2026-11-30 one 50 s run was cut inside the
# ResNet block and measured nothing after it). Without it, BENCH_FILTER is one group.
read -r -a bench_groups <<<"${BENCH_GROUPS:-$BENCH_FILTER}"
bench_time=()
[ "$QUICK" = 1 ] && bench_time=(--benchmark_min_time="${BENCH_MIN_TIME:-0.05}")
bench_jsons=()
for i in "${!bench_groups[@]}"; do
  bench_jsons+=("$G/cuda-$i.json")
  OMP_WAIT_POLICY=passive t $([ "$QUICK" = 1 ] && echo "${BENCH_LIMIT:-45}" || echo 300) \
    "$B/braze_bench_gpu" --benchmark_filter="${bench_groups[$i]}" --benchmark_repetitions=3 \
    "${bench_time[@]}" --benchmark_report_aggregates_only=true \
    --benchmark_out="$G/cuda-$i.json" --benchmark_out_format=json
done
# One JSON of every group's cases; a group cut by its limit keeps its whole cases (Google
# Benchmark writes each case as it ends: the file is closed after the last whole one).
timeout 30 env -u LD_LIBRARY_PATH python3 - "$OUT/cuda.json" "${bench_jsons[@]}" <<'PY' || FAILED+=("merging the benchmark JSON")
import json, sys
out, merged = sys.argv[1], None
for path in sys.argv[2:]:
    try:
        text = open(path).read().rstrip()
    except OSError:
        continue
    try:
        doc = json.loads(text)
    except ValueError:  # cut: keep the cases written whole
        cut = text.rfind("\n    }")
        doc = json.loads(text[:cut + 6] + "\n  ]\n}") if cut > 0 else {"benchmarks": []}
        doc.setdefault("context", {})["cut"] = path
        print(f"{path}: cut by its limit; {len(doc.get('benchmarks', []))} entries kept")
    if merged is None:
        merged = doc
    else:
        merged["benchmarks"] += doc.get("benchmarks", [])
json.dump(merged or {"benchmarks": []}, open(out, "w"), indent=1)
PY
# A benchmark that could not run or failed its first run's check against the reference
# is a SkipWithError, after which Google Benchmark still exits 0: read the JSON for them.
# Records a failure when the benchmark JSON $1 is unreadable or holds an error.
bench_errors() {
  echo "== benchmarks with an error in $1"
  if ! timeout 30 env -u LD_LIBRARY_PATH python3 - "$1" <<'PY'; then
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
    FAILED+=("braze_bench_gpu: benchmarks with an error in $1 (listed above)")
  fi
}
bench_errors "$OUT/cuda.json"
# The peer on the same GPU, right after Braze's run (PyTorch's own libraries, not the bundle's).
if env -u LD_LIBRARY_PATH python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  t $([ "$QUICK" = 1 ] && echo "${PEER_LIMIT:-30}" || echo 360) env -u LD_LIBRARY_PATH python3 -u \
    bench/peers_cuda.py "$OUT/torch.json" --filter="$(IFS='|'; echo "${bench_groups[*]}")"
else
  echo "== no PyTorch with CUDA: no peer"
fi
# Both runs as one plot (Braze's alone when PyTorch wrote nothing).
jsons=("$OUT/cuda.json")
[ -s "$OUT/torch.json" ] && jsons+=("$OUT/torch.json")
t $([ "$QUICK" = 1 ] && echo 10 || echo 60) env -u LD_LIBRARY_PATH python3 tools/braze-plot "${jsons[@]}" -o "$OUT/plot.png" \
  --title "Braze vs PyTorch on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
# In QUICK mode the campaign's budget is cut to what is left (the fuzzer stops starting
# programs at its budget and then finishes the running ones: 15 s are kept for that).
FUZZ_BUDGET=${FUZZ_BUDGET:-$([ "$QUICK" = 1 ] && echo 25 || echo 60)}
if [ "$QUICK" = 1 ] && ((DEADLINE - SECONDS - 15 < FUZZ_BUDGET)); then
  FUZZ_BUDGET=$((DEADLINE - SECONDS - 15))
  ((FUZZ_BUDGET >= 5)) || FUZZ_BUDGET=0
  echo "== QUICK: the fuzz campaign's budget cut to ${FUZZ_BUDGET}s"
fi
BRAZE_CACHE_DIR=off t $((FUZZ_BUDGET > 0 ? FUZZ_BUDGET + 15 : 0)) "$B/braze-fuzz" \
  --seeds=${FUZZ_SEEDS:-1:1000000} --jobs=12 --budget="$FUZZ_BUDGET" \
  --jit_device=jit:cuda --specials=0.2 --dynamic=0.2
# Chain8's machine code (the CI proxy counts PTX): its kernel dumped as PTX, assembled for
# the GPU with the machine's ptxas and disassembled with cuobjdump; instructions per
# element (the kernel takes 4 elements per thread) and the MUFU operations among them.
# Informational: a missing tool is said, not failed.
sass() {
  local d=$G/chain8_dump ptxas cuobjdump ptx
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
if [ "$QUICK" = 1 ]; then
  echo "== QUICK: no SASS count"
else
  sass
fi
# Where Chain8's fused kernel spends its time (Nsight Compute, where the image has it): the
# kernel of the first timed iteration, after the warm-up run's compile.
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "${NCU:-0}" = 1 ] && [ -n "$ncu" ] && [ "$QUICK" != 1 ]; then
  BRAZE_CACHE_DIR=off t 120 "$ncu" --launch-skip 1 --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
    "$B/braze_bench_gpu" --benchmark_filter='BM_Chain8_cuda/variant:0' --benchmark_min_time=0.01
else
  echo "== no profile (NCU unset or no ncu)"
fi
tar -czf "$OUT/results.tgz" -C "$G" results || FAILED+=("packing $OUT/results.tgz")

# The GPU schedule tuning (TUNE=1; see the top): its own time, TUNE_TIME s from here.
tune() {
  local T=$G/tune filter=${TUNE_FILTER:-'BM_(Chain8|Softmax|LayerNorm|MatMulBiasRelu|TrainStep|MlpStep)_cuda'}
  local budget round ab fl left
  # Every step's limit cut to what is left of TUNE_TIME, as QUICK's are (limit()).
  local QUICK=1 DEADLINE=$((SECONDS + ${TUNE_TIME:-300}))
  rm -rf "$T" && mkdir -p "$T/dump" "$T/schedules"
  [ -x "$B/braze-tune" ] || { FAILED+=("TUNE=1: no braze-tune in the bundle (pack it with TUNE=1)"); return; }
  echo "== TUNE: the workloads' clusters, dumped"
  BRAZE_CACHE_DIR=off BRAZE_FLAGS=--dump_to=$T/dump t 60 "$B/braze_bench_gpu" \
    --benchmark_filter="$filter" --benchmark_min_time=0.01
  local clusters
  clusters=$(find "$T/dump" -name '*.cluster' | wc -l)
  echo "== TUNE: $clusters clusters dumped"
  ((clusters > 0)) || { FAILED+=("TUNE: no cluster of $filter dumped"); return; }
  # braze-tune's budget: what is left of TUNE_TIME after the A/B's limits and 30 s for
  # the candidate running at the budget (braze-tune stops starting candidates at its
  # budget, then finishes that one), at most TUNE_BUDGET.
  left=$((DEADLINE - SECONDS - ${TUNE_AB_ROUNDS:-2} * 2 * ${TUNE_AB_LIMIT:-40} - 30))
  budget=${TUNE_BUDGET:-$left}
  ((budget > left)) && budget=$left
  if ((budget < 20)); then
    FAILED+=("TUNE: ${budget}s left for braze-tune: raise TUNE_TIME")
    return
  fi
  echo "== TUNE: braze-tune's budget ${budget}s"
  BRAZE_CACHE_DIR=off t $((budget + 30)) "$B/braze-tune" --device=jit:cuda --budget="$budget" \
    --runs=5 --out="$T/schedules" "$T/dump" >"$T/tune.log" 2>&1
  # Its first lines (the device) and its closing table, not every progress line.
  if (($(wc -l <"$T/tune.log") > 45)); then
    head -3 "$T/tune.log" && echo "..." && tail -40 "$T/tune.log"
  else
    cat "$T/tune.log"
  fi
  echo "== TUNE: $(find "$T/schedules" -name '*.schedule' | wc -l) entries stored"
  # The A/B, alternating: a drift of the machine shows as a difference between rounds.
  for round in $(seq 1 "${TUNE_AB_ROUNDS:-2}"); do
    for ab in untuned tuned; do
      fl=--stored_schedules=false
      [ "$ab" = tuned ] && fl=--schedule_dirs=$T/schedules
      BRAZE_CACHE_DIR=off BRAZE_FLAGS=$fl OMP_WAIT_POLICY=passive t "${TUNE_AB_LIMIT:-40}" \
        "$B/braze_bench_gpu" --benchmark_filter="$filter" --benchmark_repetitions=3 \
        --benchmark_min_time="${BENCH_MIN_TIME:-0.05}" --benchmark_report_aggregates_only=true \
        --benchmark_out="$T/ab-$ab-$round.json" --benchmark_out_format=json
      # (A step not run or cut before any JSON is already a failure: not counted twice.)
      [ -s "$T/ab-$ab-$round.json" ] && bench_errors "$T/ab-$ab-$round.json"
    done
  done
}
if [ "${TUNE:-0}" = 1 ]; then
  tune
  # What it made, whatever failed: one archive (the device tool returns 8 files).
  rm -rf "$G/tune/dump"
  tar -czf "$OUT/tune.tgz" -C "$G/tune" . || FAILED+=("packing $OUT/tune.tgz")
fi

# A campaign that ran no program on the GPU (every one skipped: no CUDA) checked nothing.
if grep -q "^braze-fuzz: 0 passed, 0 failed" "$OUT/log.txt"; then
  FAILED+=("braze-fuzz: no program ran on the GPU (every one skipped)")
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
