#!/usr/bin/env bash
# Runs an example on two devices with the same flags (so the same seed and batches) and
# requires the same final test accuracy, within a tolerance:
#
#   same_accuracy.sh TOLERANCE DEVICE_A DEVICE_B PROGRAM [FLAGS...]
set -euo pipefail
tolerance="$1" a="$2" b="$3" program="$4"
shift 4
accuracy() {
  "$program" --device="$1" "${@:2}" | tee /dev/stderr | sed -n 's/^test_accuracy=//p'
}
acc_a="$(accuracy "$a" "$@")"
acc_b="$(accuracy "$b" "$@")"
echo "test accuracy: $acc_a on $a, $acc_b on $b (tolerance $tolerance)"
awk -v x="$acc_a" -v y="$acc_b" -v t="$tolerance" \
  'BEGIN { d = x - y; if (d < 0) d = -d; exit !(x != "" && y != "" && d <= t) }'
