// What a session keeps per plan while running it, apart from the plan itself (which
// BuildPlan made and nobody changes): per step, the kernel and buffers for the last
// input signature and whether the step fell back; per value, its copies in other
// memory spaces. The executor writes only here.
#ifndef BRAZE_RUNTIME_PLAN_STATE_H_
#define BRAZE_RUNTIME_PLAN_STATE_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "braze/host_tensor.h"
#include "compile/compile_cache.h"
#include "compile/kernel_source.h"
#include "device/cublas_gemm.h"
#include "device/device_tensor.h"
#include "runtime/plan.h"

namespace braze {

struct ControlFlowRuntime;  // cf (issue 40): runtime/step_control_flow.cc

// Memoized per input signature, so a plan run again with the same shapes neither looks
// anything up nor allocates.
struct StepState {
  std::vector<TensorType> input_types;
  GemmShape gemm;  // kGemm: sizes for input_types, epilogue from the plan
  std::shared_ptr<SharedKernel> kernel;
  std::vector<TensorType> output_types;  // the kernel's outputs for input_types
  std::vector<HostTensor> buffers;       // one per output; reused across runs (host spaces)
  std::vector<std::shared_ptr<DeviceTensor>> device_buffers;  // the same, on CUDA
  // The step's compile, a run of its kernel or its library call failed: its
  // Step::fallback runs from now on, with these states (one per fallback step).
  bool fell_back = false;
  bool verified = false;  // verify mode checked the kernel for input_types
  // Where the step's kernels come from (compile/kernel_source.h): it holds the compile
  // policies' and the recompile guard's state for the step. Made at the first use.
  std::unique_ptr<KernelSource> source;
  // A fallback step run in place of its uncompiled parent: never compiles, runs its
  // own fallback (the reference kernel).
  bool no_compile = false;
  std::vector<StepState> fallback;
  // kControlFlow: the bodies' sessions, each planned once (runtime/step_control_flow.cc).
  std::shared_ptr<ControlFlowRuntime> control_flow;
};

// A value's copy in another space, kept across runs so copies reuse their memory.
struct Mirror {
  HostTensor host;                       // kHost, kJitCpu
  std::shared_ptr<DeviceTensor> device;  // kDevice
  const HostTensor* constant = nullptr;  // a Const's value already copied here
};

struct PlanState {
  explicit PlanState(const Plan& plan) : steps(plan.steps.size()) {}
  std::vector<StepState> steps;  // parallel to Plan::steps
  // (node id, output, space) -> the value's copy there, for steps in that space.
  std::map<std::tuple<int, int, Space>, Mirror> mirrors;
};

}  // namespace braze

#endif  // BRAZE_RUNTIME_PLAN_STATE_H_
