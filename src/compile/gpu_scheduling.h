// Scheduling a lowered cluster for a GPU target with one scheduler of the GPU chain
// (schedule/scheduler.h: Li2018, then the heuristic's fused, separate and serial
// plans): shared by the code generation checks (cuda_codegen.cc) and the GPU JIT
// (compile.cc). Internal header: includes Halide.h.
#ifndef BRAZE_COMPILE_GPU_SCHEDULING_H_
#define BRAZE_COMPILE_GPU_SCHEDULING_H_

#include <string>

#include "lower/lowering.h"
#include "schedule/scheduler.h"

namespace braze {
namespace compile {

// Schedules `pipeline` (built from a freshly lowered cluster) for `target` with `kind`;
// returns the schedule as text. Throws Halide::Error when Halide rejects it.
std::string ApplyGpuScheduler(Scheduler kind, const lower::LoweredCluster& lowered,
                              Halide::Pipeline& pipeline, const Halide::Target& target);

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_GPU_SCHEDULING_H_
