#!/usr/bin/env bash
# Resumes an example from chosen checkpoints of an uninterrupted run (docs/CHECKPOINTS.md):
#
#   resume_from.sh WORK_DIR "STEP STEP..." EXAMPLE [flags...]
#
# Runs EXAMPLE once uninterrupted, keeping every checkpoint; then, for each STEP, copies
# that run's checkpoint of STEP alone into a new directory and runs the same command
# there. Each must resume at STEP, and its per-step losses and its final checkpoint must
# equal the uninterrupted run's bit for bit. With a batch that makes epochs a few steps
# long, the steps can be chosen at an epoch boundary and inside a later epoch: the data
# position (the replayed shuffles) is what is checked. kill_resume.sh kills a real run.
set -euo pipefail

work="$1"
steps="$2"
shift 2
cmd=("$@" --print_losses --keep_checkpoints 0)

fail() {
  echo "resume_from: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
"${cmd[@]}" --checkpoint_dir "$work/ref" >"$work/ref.log" 2>&1 || {
  cat "$work/ref.log" >&2
  fail "the uninterrupted run failed"
}
last="$(ls "$work/ref" | tail -n 1)"
for step in $steps; do
  name="$(printf 'ckpt-%012d' "$step")"
  [[ -d "$work/ref/$name" ]] || fail "the uninterrupted run wrote no $name"
  mkdir -p "$work/from_$step"
  cp -r "$work/ref/$name" "$work/from_$step/"
  "${cmd[@]}" --checkpoint_dir "$work/from_$step" >"$work/from_$step.log" 2>&1 || {
    cat "$work/from_$step.log" >&2
    fail "the run resumed at step $step failed"
  }
  grep -q " resumed from .*/$name at step $step " "$work/from_$step.log" ||
    fail "the run did not resume at step $step"
  awk -v s="$step" '$1 == "step_loss" && $2 > s' "$work/ref.log" >"$work/ref_after_$step.losses"
  grep '^step_loss' "$work/from_$step.log" >"$work/from_$step.losses" || true
  [[ -s "$work/ref_after_$step.losses" ]] || fail "nothing left to train after step $step"
  diff "$work/ref_after_$step.losses" "$work/from_$step.losses" >&2 ||
    fail "the losses after resuming at step $step differ from the uninterrupted run's"
  cmp "$work/ref/$last/model.safetensors" "$work/from_$step/$last/model.safetensors" ||
    fail "the final checkpoint after resuming at step $step differs"
  echo "resume_from: resumed at step $step: $(wc -l <"$work/from_$step.losses") losses and" \
    "$last identical to the uninterrupted run"
done
