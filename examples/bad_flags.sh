#!/usr/bin/env bash
# Bad flags are refused before anything runs, naming the flag (exit 2): numbers that are
# not finite (a NaN accuracy bar would pass every run; an infinite rate trains to NaN),
# trailing garbage, unknown flags; and char_lm's --batch past the windows of its text
# (exit 1, after the corpus loads: a large one was an abort from std::bad_alloc); and a
# model option of another example (mnist_softmax has no dropout, mlp no unrolled
# recurrence), which would otherwise be accepted and do nothing.
#
#   bad_flags.sh MLP CHAR_LM MNIST_SOFTMAX
set -uo pipefail
mlp="$1" char_lm="$2" softmax="$3"
failed=0

# expect STATUS TEXT COMMAND...: the command exits with STATUS and prints TEXT.
expect() {
  local status="$1" text="$2" out rc
  shift 2
  out="$("$@" 2>&1)"
  rc=$?
  if [[ $rc -ne $status || $out != *"$text"* ]]; then
    echo "FAILED: $* exited $rc (want $status) and printed:" >&2
    echo "$out" | head -5 >&2
    echo "(wanted it to say: $text)" >&2
    failed=1
  else
    echo "ok: $* -> $rc: $text"
  fi
}

expect 2 "bad value for --min_test_accuracy: nan" "$mlp" --min_test_accuracy=nan
expect 2 "bad value for --lr: inf" "$mlp" --lr=inf
expect 2 "bad value for --dropout: nan" "$mlp" --dropout=nan
expect 2 "bad value for --steps: 10abc" "$mlp" --steps=10abc
expect 2 "unknown flag --frobnicate" "$mlp" --frobnicate=1
expect 2 "bad value for --temperature: inf" "$char_lm" --temperature=inf
expect 2 "bad value for --max_val_loss: nan" "$char_lm" --max_val_loss=nan
expect 2 "flag --dropout does not apply to mnist_softmax" "$softmax" --dropout=0.5
expect 2 "flag --unroll does not apply to mlp" "$mlp" --unroll
expect 1 "--batch 1000000000000 exceeds the" "$char_lm" --batch=1000000000000 --steps=1
exit "$failed"
