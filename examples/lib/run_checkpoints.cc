#include "lib/run_checkpoints.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace braze_examples {

RunCheckpoints::RunCheckpoints(const CommonFlags& flags, std::string program, braze::StringMap data,
                               int rank)
    : program_(std::move(program)),
      data_(std::move(data)),
      rank_(rank),
      every_(flags.checkpoint_every),
      steps_(flags.steps) {
  if (flags.checkpoint_dir.empty()) return;
  braze::CheckpointOptions options;
  options.keep_last = static_cast<int>(flags.keep_checkpoints);
  manager_.emplace(flags.checkpoint_dir, options);
}

absl::StatusOr<int64_t> RunCheckpoints::Resume(braze::VariableSet vars) {
  if (!manager_) return 0;
  vars_ = std::move(vars);
  BRAZE_ASSIGN_OR_RETURN(std::vector<braze::CheckpointInfo> all, manager_->List());
  if (all.empty()) {
    std::printf("%s: no checkpoint in %s; starting at step 0\n", program_.c_str(),
                manager_->directory().c_str());
    std::fflush(stdout);
    return 0;
  }
  braze::CheckpointInfo found;
  BRAZE_ASSIGN_OR_RETURN(braze::SafetensorsContents contents,
                         manager_->Read(all.back().path, &found));
  for (const auto& [key, value] : data_) {
    auto it = found.metadata.find(key);
    const std::string had = it == found.metadata.end() ? "(none)" : it->second;
    if (had != value) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", found.path, " has ", key, " ", had, ", this run ", value));
    }
  }
  absl::StatusOr<int> loaded = braze::LoadVariables(vars_, contents.tensors);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("checkpoint ", found.path, ": ", loaded.status().message()));
  }
  std::printf("%s: resumed from %s at step %lld (%d variables)\n", program_.c_str(),
              found.path.c_str(), static_cast<long long>(found.step), *loaded);
  std::fflush(stdout);
  return found.step;
}

absl::Status RunCheckpoints::AfterStep(int64_t done) {
  if (!manager_ || rank_ != 0 || (done % every_ != 0 && done != steps_)) return absl::OkStatus();
  BRAZE_ASSIGN_OR_RETURN(braze::CheckpointInfo saved, manager_->Save(vars_, done, data_));
  std::printf("checkpoint of step %lld saved to %s\n", static_cast<long long>(done),
              saved.path.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace braze_examples
