#include "lib/run_checkpoints.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/braze.h"

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

namespace {

// Data parallel: the ranks resume at one step or not at all. Each reads the directory on
// its own; a rank that saw another newest checkpoint (a directory per machine, a stale
// listing) trained other weights at another step and data position without a word, and
// a rank whose resume failed left the others waiting at their first collective until the
// timeout. One all-gather of every rank's step (-1: its resume failed) makes them agree,
// or fail alike.
absl::StatusOr<int64_t> SameStepOnEveryRank(const absl::StatusOr<int64_t>& mine) {
  braze::Graph g;
  braze::Tensor step = braze::Placeholder(g, braze::DType::kF64, {1}, "resume_step");
  braze::Tensor all = braze::AllGather(step);
  braze::SessionOptions options;
  options.device = "cpu";
  braze::Session session(g, options);
  const double value = mine.ok() ? static_cast<double>(*mine) : -1;
  auto out = session.Run({{step, braze::HostTensor::From<double>({value}, {1})}}, {all});
  if (!out.ok()) return out.status();
  const braze::HostTensor& steps = (*out)[0];
  bool agree = true;
  std::string each;
  for (int64_t r = 0; r < steps.num_elements(); ++r) {
    agree = agree && steps.GetDouble(r) == steps.GetDouble(0);
    absl::StrAppend(&each, r == 0 ? "" : ", ", "rank ", r, ": ",
                    static_cast<int64_t>(steps.GetDouble(r)));
  }
  if (!mine.ok()) return mine.status();
  if (agree && steps.GetDouble(0) >= 0) return mine;
  return absl::FailedPreconditionError(absl::StrCat(
      "the ranks did not resume at one step (", each, "; -1: that rank's resume failed): ",
      "every rank must read the same checkpoints (one --checkpoint_dir they all see)"));
}

}  // namespace

absl::StatusOr<int64_t> RunCheckpoints::Resume(braze::VariableSet vars) {
  if (!manager_) return 0;
  absl::StatusOr<int64_t> mine = ResumeHere(std::move(vars));
  return braze::WorldSize() > 1 ? SameStepOnEveryRank(mine) : mine;
}

absl::StatusOr<int64_t> RunCheckpoints::ResumeHere(braze::VariableSet vars) {
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
