// A Chrome trace of what Braze runs, for chrome://tracing or https://ui.perfetto.dev:
// one bar per fused cluster launch (named after the cluster), one per single-op or
// reference kernel (named after its node), and the compiles apart (category "compile").
// The same as BRAZE_FLAGS=--timeline=FILE, for programs with their own --timeline flag:
//
//   if (!flag_timeline.empty()) CHECK_OK(braze::StartTimeline(flag_timeline));
//   ... train ...
//   CHECK_OK(braze::StopTimeline());  // also done at process exit if forgotten
//
// One timeline per process at a time; every session's kernels go to it. The host's bars
// show when work was launched; on a CUDA device the launches and copies also get bars of
// the device's own time, on the row "cuda:0 (device time)" (docs/CUDA.md, "Timeline").
#ifndef BRAZE_TIMELINE_H_
#define BRAZE_TIMELINE_H_

#include <string>

#include "absl/status/status.h"

namespace braze {

// Starts writing the trace to `path` (truncating it). FailedPrecondition while a timeline
// (also one from BRAZE_FLAGS) is active; InvalidArgument when the file cannot be opened.
absl::Status StartTimeline(const std::string& path);

// Finishes the file (valid JSON from then on). FailedPrecondition when none is active.
absl::Status StopTimeline();

}  // namespace braze

#endif  // BRAZE_TIMELINE_H_
