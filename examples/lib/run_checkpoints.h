// The examples' checkpoints (--checkpoint_dir, --checkpoint_every, --keep_checkpoints;
// docs/CHECKPOINTS.md), shared by the trainer and char_lm: resume from the newest
// checkpoint of the directory, then save every N steps and at the last one. The data a
// checkpoint was trained on is part of it (`data`: the example, its seed, batch, ...): a
// run with other data refuses to resume (the batches after the checkpoint would not be
// an uninterrupted run's). Data parallel: every rank resumes, rank 0 writes.
#ifndef BRAZE_EXAMPLES_LIB_RUN_CHECKPOINTS_H_
#define BRAZE_EXAMPLES_LIB_RUN_CHECKPOINTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "braze/checkpoint.h"
#include "lib/common_flags.h"

namespace braze_examples {

class RunCheckpoints {
 public:
  // No checkpoints when flags.checkpoint_dir is empty (every call then does nothing).
  RunCheckpoints(const CommonFlags& flags, std::string program, braze::StringMap data, int rank);
  bool enabled() const { return manager_.has_value(); }

  // Restores the newest checkpoint into `vars` (kept for the saves) and returns its step:
  // the number of steps trained, and the data position (the next batch is that step's).
  // 0 when the directory holds none. A checkpoint of other data is FailedPrecondition
  // naming the key ("has data.seed 1, this run 987"); a corrupt or mismatched one is
  // CheckpointManager's error, naming the file or variable; no variable is changed.
  // Data parallel (WorldSize() > 1; a collective, so every rank calls it): the ranks must
  // resume at the same step, else FailedPrecondition on every rank listing each one's.
  absl::StatusOr<int64_t> Resume(braze::VariableSet vars);
  // After `done` steps (1-based): saves when --checkpoint_every divides it or it is the
  // last step, on rank 0, and prints where.
  absl::Status AfterStep(int64_t done);

 private:
  absl::StatusOr<int64_t> ResumeHere(braze::VariableSet vars);  // this rank's

  std::string program_;
  braze::StringMap data_;
  int rank_;
  int64_t every_, steps_;
  std::optional<braze::CheckpointManager> manager_;
  braze::VariableSet vars_;
};

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_RUN_CHECKPOINTS_H_
