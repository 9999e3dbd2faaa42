// Scheduling a lowered cluster for a GPU target with one scheduler of the GPU chain
// (schedule/scheduler.h: Li2018, then the heuristic's fused, separate and serial
// plans): shared by the code generation checks (cuda_codegen.cc) and the GPU JIT
// (compile.cc). Internal header: includes Halide.h.
#ifndef BRAZE_COMPILE_GPU_SCHEDULING_H_
#define BRAZE_COMPILE_GPU_SCHEDULING_H_

#include <string>

#include "lower/lowering.h"
#include "schedule/scheduler.h"
#include "schedule/stored_schedule.h"

namespace braze {
namespace compile {

// Schedules `pipeline` (built from a freshly lowered cluster) for `target` with `kind`;
// returns the schedule as text. Throws Halide::Error when Halide rejects it. `params`:
// the heuristic's sizes (a stored entry's; Li2018 has none).
std::string ApplyGpuScheduler(Scheduler kind, const lower::LoweredCluster& lowered,
                              Halide::Pipeline& pipeline, const Halide::Target& target,
                              const GpuScheduleParams& params = {});

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_GPU_SCHEDULING_H_
