#!/usr/bin/env bash
# Runs an example in f32 and under a mixed-precision policy with the same flags (so the
# same seed and batches) and requires the policy's final test accuracy to be within
# MARGIN of f32's (docs/MIXED_PRECISION.md, "Examples"):
#
#   precision_accuracy.sh MARGIN PRECISION PROGRAM [FLAGS...]
set -euo pipefail
margin="$1" precision="$2" program="$3"
shift 3
accuracy() {
  "$program" --precision="$1" "${@:2}" | tee /dev/stderr | sed -n 's/^test_accuracy=//p'
}
acc_f32="$(accuracy f32 "$@")"
acc_p="$(accuracy "$precision" "$@")"
echo "test accuracy: $acc_f32 in f32, $acc_p in $precision (margin $margin)"
awk -v x="$acc_f32" -v y="$acc_p" -v t="$margin" \
  'BEGIN { d = x - y; if (d < 0) d = -d; exit !(x != "" && y != "" && d <= t) }'
