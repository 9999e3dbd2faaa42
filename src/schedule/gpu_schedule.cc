// Braze's GPU schedule heuristic: its steps in order (gpu_heuristic.h lists the files
// that define them); see gpu_schedule.h for the rules and why.
#include "schedule/gpu_schedule.h"

#include <string>

#include "schedule/gpu_attention.h"
#include "schedule/gpu_heuristic.h"

namespace braze {
namespace schedule {
namespace gpu {

std::string GpuHeuristic::Run() {
  Analyze();
  if (plan_ == Scheduler::kGpuFused) ChooseHosts();
  ChooseWarpRows();
  for (size_t j = 0; j < info_.outputs.size(); ++j) ScheduleOutput(static_cast<int>(j));
  for (size_t i = 0; i < info_.stages.size(); ++i) {
    const Stage& s = info_.stages[i];
    if (s.kind == StageKind::kAttention) {
      ScheduleAttention(s, log_, placed_);
    } else if (s.lanes) {
      continue;  // placed with the combines that read it (PlaceLanes)
    } else if (IsTiled(s.kind)) {
      Tiled(s);
    } else {
      ScheduleReduction(s, reductions_[i]);
    }
  }
  for (const Stage& s : info_.stages) {
    if (s.lanes) PlaceLanes(s);
  }
  if (plan_ == Scheduler::kGpuFused) {
    for (size_t j = 0; j < info_.outputs.size(); ++j) StageRows(static_cast<int>(j));
  }
  for (auto& [f, why] : operands_) {
    f.compute_root();
    const Var xi = PointwiseTile(f, f.args(), {}, 1, params_);
    log_ << f.name() << ": " << why << ", compute_root, tile -> " << xi.name() << "\n";
  }
  CheckAllPlaced();
  return log_.str();
}

// docs/HALIDE14.md rule 2, enforced: an unscheduled reduction is recomputed at every use.
void GpuHeuristic::CheckAllPlaced() const {
  for (const auto& [name, fn] : env_) {
    if (fn.has_update_definition() && placed_.count(name) == 0) {
      throw Halide::CompileError("GPU schedule left the reduction " + name + " unscheduled");
    }
  }
}

}  // namespace gpu

std::string ApplyGpuSchedule(const PipelineInfo& info, const Halide::Target& target, Scheduler plan,
                             const GpuScheduleParams& params) {
  if (!IsGpuHeuristic(plan)) {
    throw Halide::CompileError(std::string("ApplyGpuSchedule: ") + SchedulerName(plan) +
                               " is not a plan of the GPU heuristic");
  }
  // The same plan serves CUDA and OpenCL: at most kMaxThreads (256) threads per block
  // and a few KiB of shared (local) memory per kernel, within what OpenCL GPUs and POCL
  // report (CL_DEVICE_MAX_WORK_GROUP_SIZE >= 256, CL_DEVICE_LOCAL_MEM_SIZE >= 32 KiB;
  // device/opencl_driver.cc refuses a device that reports less, naming it). A stored
  // entry's params.block_threads may ask for more: tuned on that device, where a block
  // it cannot launch failed braze-tune's check run and never became an entry.
  if (!target.has_feature(Halide::Target::CUDA) && !target.has_feature(Halide::Target::OpenCL)) {
    throw Halide::CompileError("ApplyGpuSchedule: target " + target.to_string() +
                               " has no GPU feature (CUDA or OpenCL)");
  }
  return gpu::GpuHeuristic(info, plan, target.has_feature(Halide::Target::OpenCL), params).Run();
}

}  // namespace schedule
}  // namespace braze
