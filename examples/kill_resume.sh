#!/usr/bin/env bash
# Kill-and-resume check of the examples' checkpoints (docs/CHECKPOINTS.md):
#
#   kill_resume.sh WORK_DIR EXAMPLE [flags...]
#
# 1. runs EXAMPLE uninterrupted with --checkpoint_dir WORK_DIR/ref (the reference);
# 2. starts the same command with --checkpoint_dir WORK_DIR/run and kills it with SIGKILL
#    as soon as its first checkpoint is in place;
# 3. runs the same command again, which must resume from the newest checkpoint.
# Then every step's loss the resumed run prints must equal the reference's bit for bit
# (--print_losses prints them as hex floats), as must the final metrics (test accuracy,
# or char_lm's validation loss) and the final checkpoint's files. Pass enough steps that the run is still going when killed.
set -euo pipefail

work="$1"
shift
example="$1"
shift
cmd=("$example" "$@" --print_losses)

fail() {
  echo "kill_resume: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"

"${cmd[@]}" --checkpoint_dir "$work/ref" >"$work/ref.log" 2>&1 || {
  cat "$work/ref.log" >&2
  fail "the reference run failed"
}

"${cmd[@]}" --checkpoint_dir "$work/run" >"$work/killed.log" 2>&1 &
pid=$!
for ((i = 0; i < 30000; ++i)); do # up to 5 minutes
  if compgen -G "$work/run/ckpt-*" >/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || fail "the run ended before writing a checkpoint"
  sleep 0.01
done
kill -KILL "$pid" 2>/dev/null || true
status=0
wait "$pid" || status=$?
[[ $status -eq 137 ]] || fail "the run was not killed (exit status $status): give it more steps"
echo "kill_resume: killed the run (SIGKILL) after $(grep -c '^step_loss' "$work/killed.log" || true) steps;" \
  "checkpoints: $(ls "$work/run" | tr '\n' ' ')"

"${cmd[@]}" --checkpoint_dir "$work/run" >"$work/resumed.log" 2>&1 || {
  cat "$work/resumed.log" >&2
  fail "the resumed run failed"
}
resumed_line="$(grep -m1 ' resumed from ' "$work/resumed.log")" ||
  fail "the second run did not resume from a checkpoint"
echo "kill_resume: $resumed_line"
step="$(sed -E 's/.* at step ([0-9]+) .*/\1/' <<<"$resumed_line")"
[[ "$step" -gt 0 ]] || fail "resumed at step $step"

# The resumed run's losses are the reference's from step+1 on, bit for bit.
grep '^step_loss' "$work/resumed.log" >"$work/resumed.losses"
awk -v s="$step" '$1 == "step_loss" && $2 > s' "$work/ref.log" >"$work/ref.losses"
[[ -s "$work/ref.losses" ]] || fail "nothing was left to train after step $step"
diff "$work/ref.losses" "$work/resumed.losses" >&2 ||
  fail "the resumed run's losses differ from the uninterrupted run's"
# The killed run's complete loss lines agree with the reference too.
grep -E '^step_loss [0-9]+ \S+$' "$work/killed.log" >"$work/killed.losses" || true
awk 'NR == FNR { ref[$2] = $3; next } ($2 in ref) && ref[$2] != $3 { bad = 1 } END { exit bad }' \
  <(grep '^step_loss' "$work/ref.log") "$work/killed.losses" ||
  fail "the killed run's losses differ from the reference's"
# The final metrics: test_accuracy= (the trainer's examples) or val_loss= and
# bits_per_char= (char_lm).
metrics='^(test_accuracy|val_loss|bits_per_char)='
ref_acc="$(grep -E "$metrics" "$work/ref.log" | tr '\n' ' ' || true)"
res_acc="$(grep -E "$metrics" "$work/resumed.log" | tr '\n' ' ' || true)"
[[ -n "$ref_acc" ]] || fail "the uninterrupted run printed no final metric"
[[ "$ref_acc" == "$res_acc" ]] || fail "final $res_acc, uninterrupted $ref_acc"
last="$(ls "$work/ref" | tail -n 1)"
cmp "$work/ref/$last/model.safetensors" "$work/run/$last/model.safetensors" ||
  fail "the final checkpoints ($last) differ"
cmp "$work/ref/$last/manifest.json" "$work/run/$last/manifest.json" ||
  fail "the final manifests ($last) differ"
# A run with another data order may not resume from these checkpoints, and a corrupt
# newest checkpoint is refused, naming its file: the example fails, nothing is trained.
if "${cmd[@]}" --checkpoint_dir "$work/run" --seed 987 >"$work/other_seed.log" 2>&1; then
  fail "a run with another --seed resumed from the checkpoints"
fi
grep -q "has data.seed .*, this run 987" "$work/other_seed.log" ||
  fail "no clear error for another --seed: $(tail -n 1 "$work/other_seed.log")"
printf 'X' | dd of="$work/run/$last/model.safetensors" bs=1 seek=100 conv=notrunc status=none
if "${cmd[@]}" --checkpoint_dir "$work/run" >"$work/corrupt.log" 2>&1; then
  fail "a run resumed from a corrupt checkpoint"
fi
grep -q "$last/model.safetensors: CRC-32 .* (corrupt)" "$work/corrupt.log" ||
  fail "no clear error for a corrupt checkpoint: $(tail -n 1 "$work/corrupt.log")"
echo "kill_resume: refused: $(tail -n 1 "$work/other_seed.log")"
echo "kill_resume: refused: $(tail -n 1 "$work/corrupt.log")"
echo "kill_resume: resumed at step $step; $(wc -l <"$work/resumed.losses") losses, $res_acc and" \
  "the final checkpoint $last identical to the uninterrupted run"
