#!/usr/bin/env bash
# Builds and runs the sanitized test subsets (docs/SANITIZERS.md):
#
#   tools/sanitize.sh [asan|tsan|all]      # default: all
#
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer) over the tests
#       of ir, data, reference, passes, runtime and api (braze::Function), in build-asan/.
# tsan: ThreadSanitizer over every concurrency test (threads sharing sessions, the
#       compile cache, the log, the timeline and Halide's output capture), in
#       build-tsan/, with tools/sanitizers/tsan.supp.
# Each binary runs in gtest shards, one process per CPU at a time (BRAZE_SANITIZE_JOBS).
# Halide's JIT-compiled kernels and libHalide are not instrumented. A report fails the
# run (exit status 1), and so does a binary (or a binary and its --gtest_filter) that
# selects no test: a filter that matches nothing would otherwise pass silently.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-all}"

# Fails the run unless `$1` with the gtest arguments after it (a --gtest_filter) selects
# at least one test; prints how many it selects.
require_tests() {
  local bin=$1 list count
  shift
  # No leak check on a listing (LeakSanitizer's tracer crash below is not a finding).
  local asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  if ! list="$(ASAN_OPTIONS="$asan" "$bin" --gtest_list_tests "$@")"; then
    echo "sanitize.sh: FAILED: could not list the tests of $bin $*" >&2
    exit 1
  fi
  count="$(grep -c '^  ' <<<"$list" || true)"
  if ((count == 0)); then
    echo "sanitize.sh: FAILED: $bin $* selects no test" >&2
    exit 1
  fi
  echo "== $bin${*:+ $*}: $count tests selected"
}

# How many test processes run at once: each binary is split into this many gtest shards
# (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX), since a test process spends most of its time in
# Halide's single-threaded compiles. BRAZE_SANITIZE_JOBS overrides.
jobs="${BRAZE_SANITIZE_JOBS:-$(nproc)}"

# LeakSanitizer's stop-the-world tracer sometimes crashes ("Tracer caught signal 11")
# before any leak is examined: a known, intermittent fault of the sanitizer runtime. The
# test binaries run the check after their last test rather than at exit, where CI saw it
# (test/common/leak_check_at_end.cc, docs/SANITIZERS.md). Should it still crash, that, and
# only that, is not a finding: the shard is run once more and must then pass. Any
# report, failed test or second crash still fails.
tracer_crash_only() {
  grep -q "Tracer caught signal" "$1" && grep -q "LeakSanitizer has encountered a fatal error" "$1" &&
    ! grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:\|\[  FAILED  \]" "$1"
}

# Runs shard $2 of $3 of the gtest command after them, its output kept until it ends and
# then printed whole (shards run side by side); fails on a report or a failed test. $1 is
# the label.
run_shard() {
  local label=$1 index=$2 total=$3 log rc=0
  shift 3
  log="$(mktemp)"
  GTEST_TOTAL_SHARDS=$total GTEST_SHARD_INDEX=$index "$@" >"$log" 2>&1 || rc=$?
  if ((rc != 0)) && [[ $label == ASan* ]] && tracer_crash_only "$log"; then
    echo "sanitize.sh: LeakSanitizer's tracer crashed (not a finding); running shard" \
      "$((index + 1))/$total of $1 again" >>"$log"
    rc=0
    GTEST_TOTAL_SHARDS=$total GTEST_SHARD_INDEX=$index "$@" >>"$log" 2>&1 || rc=$?
  fi
  echo "== $label: shard $((index + 1))/$total of $*"
  cat "$log"
  rm -f "$log"
  if ((rc != 0)); then
    echo "sanitize.sh: FAILED (exit $rc): shard $((index + 1))/$total of $*" >&2
    return 1
  fi
}

# After a failed shard: ends the shards still running (their test processes too) and the
# run.
stop_all() {
  local p
  for p in $(jobs -p); do
    pkill -P "$p" 2>/dev/null || true
    kill "$p" 2>/dev/null || true
  done
  exit 1
}

# Runs every binary named after the label (with the gtest arguments in the array
# `gtest_args`), each in $jobs shards, $jobs shards at a time; the first failure stops
# the others and fails the run.
run_all_sharded() {
  local label=$1 bin i
  shift
  local -a pending=()
  for bin in "$@"; do
    require_tests "$bin" "${gtest_args[@]}"
    for ((i = 0; i < jobs; i++)); do pending+=("$bin $i"); done
  done
  local running=0 job
  for job in "${pending[@]}"; do
    if ((running >= jobs)); then
      wait -n || stop_all
      running=$((running - 1))
    fi
    read -r bin i <<<"$job"
    run_shard "$label" "$i" "$jobs" "$bin" --gtest_brief=1 "${gtest_args[@]}" &
    running=$((running + 1))
  done
  while ((running > 0)); do
    wait -n || stop_all
    running=$((running - 1))
  done
}

run_asan() {
  BRAZE_SANITIZE=address,undefined "$root/tools/build.sh" ir_tests data_tests reference_tests \
    passes_tests runtime_tests api_tests
  # allocator_may_return_null: the bad-input tests ask for more memory than exists and
  # expect ResourceExhausted, not ASan's abort.
  # No LeakSanitizer suppression: every leak is a finding (docs/SANITIZERS.md).
  export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:abort_on_error=0
  # The disk cache tests use directories of their own; nothing else writes one.
  export BRAZE_CACHE_DIR=off
  # As under ctest: tests that read the checkout (tools/braze-dump) find it here, not
  # through __FILE__, which ccache's base_dir makes relative to the build directory.
  export BRAZE_SOURCE_DIR="$root"
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  local -a gtest_args=()
  # The longest first, so that the shorter ones fill in beside it.
  run_all_sharded "ASan+UBSan" "$root"/build-asan/test/{runtime,api,reference,ir,passes,data}_tests
}

run_tsan() {
  # concurrency_tests: the files of the tests below alone (test/CMakeLists.txt).
  BRAZE_SANITIZE=thread "$root/tools/build.sh" concurrency_tests
  export BRAZE_CACHE_DIR=off
  export BRAZE_SOURCE_DIR="$root"
  export TSAN_OPTIONS="suppressions=$root/tools/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
  local -a gtest_args=(--gtest_filter='*Concurren*:*ThreadCounts*:*SinkSwaps*:*ThreadPool*')
  run_all_sharded "TSan" "$root/build-tsan/test/concurrency_tests"
}

case "$mode" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all)
    run_asan
    run_tsan
    ;;
  *)
    echo "usage: tools/sanitize.sh [asan|tsan|all]" >&2
    exit 2
    ;;
esac
echo "sanitize.sh: $mode clean"
