#!/usr/bin/env bash
# Runs an example twice as two processes sharing a fresh disk cache (docs/DISK_CACHE.md):
# the second must compile nothing (every kernel loaded, the MLP's oneDNN GEMM kernels
# included, whose extern stage they reach through the stored runtime) and print the
# same test accuracy as the first.
#
#   disk_cache_reload.sh CACHE_DIR PROGRAM [FLAGS...]
set -euo pipefail
dir="$1" program="$2"
shift 2
rm -rf "$dir"
export BRAZE_CACHE_DIR="$dir"
first="$("$program" "$@" | tee /dev/stderr)"
second="$("$program" "$@" | tee /dev/stderr)"
grep -q ', [1-9][0-9]* compiles' <<<"$first"
grep -q ', 0 compiles (0 ms)' <<<"$second"
acc_first="$(sed -n 's/^test_accuracy=//p' <<<"$first")"
acc_second="$(sed -n 's/^test_accuracy=//p' <<<"$second")"
echo "test accuracy: $acc_first compiled, $acc_second loaded"
[[ -n "$acc_first" && "$acc_first" == "$acc_second" ]]
