#!/usr/bin/env bash
# Data-parallel evaluation (docs/DISTRIBUTED.md): each rank evaluates its shard of the
# test images and the counts are summed over the ranks; the accuracy must be exactly the
# one a single process computes on the whole test set with the same weights.
#
#   sharded_eval.sh WORK_DIR "MPIRUN ARGS" PROGRAM [flags...]
#
# 1. trains under `MPIRUN ARGS PROGRAM --data_parallel flags` with --checkpoint_dir
#    WORK_DIR/ckpt (its last checkpoint holds the final weights) and takes its
#    test_accuracy= line (the sharded evaluation);
# 2. runs `PROGRAM flags` in one process with the same --checkpoint_dir: it resumes at the
#    last step, trains nothing and evaluates every test image;
# and requires the same accuracy, and that rank 0 evaluated fewer images than all.
set -euo pipefail
work="$1"
read -r -a mpirun <<<"$2"
program="$3"
shift 3

fail() {
  echo "sharded_eval: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
"${mpirun[@]}" "$program" --data_parallel "$@" --checkpoint_dir "$work/ckpt" >"$work/ranks.log" 2>&1 || {
  cat "$work/ranks.log" >&2
  fail "the data-parallel run failed"
}
"$program" "$@" --checkpoint_dir "$work/ckpt" >"$work/one.log" 2>&1 || {
  cat "$work/one.log" >&2
  fail "the one-process evaluation failed"
}
grep -q ' resumed from ' "$work/one.log" || fail "the one-process run did not resume"
shard="$(grep -m1 'evaluation sharded over' "$work/ranks.log")" ||
  fail "the data-parallel run did not shard its evaluation"
read -r mine all < <(sed -E 's/.* evaluating ([0-9]+) of the ([0-9]+) .*/\1 \2/' <<<"$shard")
((mine < all)) || fail "rank 0 evaluated $mine of $all test images"
ranks_acc="$(sed -n 's/^test_accuracy=//p' "$work/ranks.log")"
one_acc="$(sed -n 's/^test_accuracy=//p' "$work/one.log")"
[[ -n "$ranks_acc" && "$ranks_acc" == "$one_acc" ]] ||
  fail "sharded test accuracy '$ranks_acc', one process '$one_acc'"
echo "sharded_eval: $shard; test accuracy $ranks_acc sharded and in one process"
