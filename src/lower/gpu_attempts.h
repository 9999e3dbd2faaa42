// The ways a cluster is scheduled for CUDA, in the order tried (GpuScheduler picks the
// first): shared by the code generation checks (cuda_codegen.cc) and the CUDA JIT
// (compile.cc). Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_GPU_ATTEMPTS_H_
#define BRAZE_LOWER_GPU_ATTEMPTS_H_

#include <string>
#include <vector>

#include "lower/compile.h"
#include "lower/lowering.h"
#include "schedule/gpu_schedule.h"

namespace braze {
namespace lower {

// One scheduling attempt: Li2018, or Braze's heuristic with a plan.
struct GpuAttempt {
  bool li2018 = false;
  schedule::GpuPlan plan = schedule::GpuPlan::kFused;
  GpuScheduler Scheduler() const;
  std::string Name() const;  // "Li2018", "heuristic (fused)", ...
};

// `which` first, then each fallback after it (Li2018 -> fused -> separate -> serial).
std::vector<GpuAttempt> GpuAttempts(GpuScheduler which);

// Schedules `pipeline` (built from a freshly lowered cluster) for `target`; returns the
// schedule as text. Throws Halide::Error when Halide rejects it.
std::string ApplyGpuAttempt(const GpuAttempt& attempt, const LoweredCluster& lowered,
                            Halide::Pipeline& pipeline, const Halide::Target& target);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_GPU_ATTEMPTS_H_
