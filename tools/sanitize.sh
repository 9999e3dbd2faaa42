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
# Halide's JIT-compiled kernels and libHalide are not instrumented. A report fails the
# run (exit status 1), and so does a binary (or a binary and its --gtest_filter) that
# selects no test: a filter that matches nothing would otherwise pass silently.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-all}"

# `set -e` does not apply inside functions called from `&&` lists or `case`, so every
# test binary's status is checked here: a report (or a failed test) ends the run.
run_or_fail() {
  if ! "$@"; then
    echo "sanitize.sh: FAILED: $*" >&2
    exit 1
  fi
}

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
  echo "== $count tests selected"
}

# LeakSanitizer's stop-the-world tracer sometimes crashes ("Tracer caught signal 11")
# before any leak is examined: a known, intermittent fault of the sanitizer runtime. The
# test binaries run the check after their last test rather than at exit, where CI saw it
# (test/common/leak_check_at_end.cc, docs/SANITIZERS.md). Should it still crash, that, and
# only that, is not a finding: the binary is run once more and must then pass. Any
# report, failed test or second crash still fails.
run_asan_binary() {
  local log
  log="$(mktemp)"
  if "$@" 2>&1 | tee "$log"; then
    rm -f "$log"
    return 0
  fi
  if grep -q "Tracer caught signal" "$log" && grep -q "LeakSanitizer has encountered a fatal error" "$log" &&
    ! grep -q "ERROR: \(AddressSanitizer\|LeakSanitizer\)\|runtime error:\|\[  FAILED  \]" "$log"; then
    rm -f "$log"
    echo "sanitize.sh: LeakSanitizer's tracer crashed (not a finding); running $1 again" >&2
    run_or_fail "$@"
    return 0
  fi
  rm -f "$log"
  echo "sanitize.sh: FAILED: $*" >&2
  exit 1
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
  for t in ir data reference passes runtime api; do
    echo "== ASan+UBSan: ${t}_tests"
    require_tests "$root/build-asan/test/${t}_tests"
    run_asan_binary "$root/build-asan/test/${t}_tests" --gtest_brief=1
  done
}

run_tsan() {
  BRAZE_SANITIZE=thread "$root/tools/build.sh" ir_tests device_tests compile_tests runtime_tests \
    api_tests
  export BRAZE_CACHE_DIR=off
  export TSAN_OPTIONS="suppressions=$root/tools/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
  local filter='*Concurren*:*ThreadCounts*:*SinkSwaps*:*ThreadPool*'
  for t in ir device compile runtime api; do
    echo "== TSan: ${t}_tests ($filter)"
    require_tests "$root/build-tsan/test/${t}_tests" --gtest_filter="$filter"
    run_or_fail "$root/build-tsan/test/${t}_tests" --gtest_brief=1 --gtest_filter="$filter"
  done
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
