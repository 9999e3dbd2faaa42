#!/usr/bin/env bash
# Data-parallel ranks that see different checkpoints must not train apart
# (docs/CHECKPOINTS.md): a 2-rank run writes checkpoints into one directory; then rank 0
# is started on that directory and rank 1 on an empty one (mpirun's MPMD form). Rank 0
# would resume at the last step and rank 1 start at 0; instead both must fail, each
# saying the ranks did not resume at one step, and neither may hang.
#
#   resume_apart.sh WORK_DIR MPIEXEC EXAMPLE [flags...]
set -euo pipefail

work="$1"
mpiexec="$2"
shift 2
launch=("$mpiexec" --oversubscribe --allow-run-as-root)

fail() {
  echo "resume_apart: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work/empty"
"${launch[@]}" -np 2 "$@" --checkpoint_dir "$work/shared" >"$work/first.log" 2>&1 || {
  cat "$work/first.log" >&2
  fail "the first 2-rank run failed"
}
if "${launch[@]}" -np 1 "$@" --checkpoint_dir "$work/shared" : -np 1 "$@" \
  --checkpoint_dir "$work/empty" >"$work/apart.log" 2>&1; then
  cat "$work/apart.log" >&2
  fail "ranks that read different checkpoints ran without an error"
fi
said="$(grep -c 'did not resume at one step (rank 0: [0-9]*, rank 1: 0;' "$work/apart.log" || true)"
if ((said != 2)); then
  cat "$work/apart.log" >&2
  fail "expected both ranks to say they did not resume at one step, $said did"
fi
echo "resume_apart: both ranks refused to train apart"
