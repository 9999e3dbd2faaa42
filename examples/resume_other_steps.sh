#!/usr/bin/env bash
# A model whose learning rate decays over --steps (mnist_softmax, cnn: 1 - step / steps)
# records them in its checkpoints, and a run with other --steps refuses to resume from
# them, naming the key (docs/CHECKPOINTS.md): its remaining steps would train at other
# rates than the run that wrote the checkpoint, silently. The same --steps resumes.
#
#   resume_other_steps.sh WORK_DIR EXAMPLE [flags...]
set -euo pipefail
work="$1"
shift
cmd=("$@")

fail() {
  echo "resume_other_steps: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
"${cmd[@]}" --steps 2 --checkpoint_every 2 --checkpoint_dir "$work/ckpt" >"$work/first.log" 2>&1 ||
  { cat "$work/first.log" >&2; fail "the first run failed"; }
if "${cmd[@]}" --steps 4 --checkpoint_dir "$work/ckpt" >"$work/longer.log" 2>&1; then
  fail "a run with --steps 4 resumed from a checkpoint of a run of 2 steps"
fi
grep -q "has train.steps 2, this run 4" "$work/longer.log" ||
  fail "no clear error for another --steps: $(tail -n 1 "$work/longer.log")"
"${cmd[@]}" --steps 2 --checkpoint_dir "$work/ckpt" >"$work/same.log" 2>&1 ||
  { cat "$work/same.log" >&2; fail "the run with the same --steps failed"; }
grep -q " resumed from .* at step 2 " "$work/same.log" || fail "the same --steps did not resume"
echo "resume_other_steps: refused: $(tail -n 1 "$work/longer.log")"
