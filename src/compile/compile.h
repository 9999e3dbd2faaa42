// Compiling one cluster into one Halide pipeline, without exposing Halide: the runtime
// and tests see only ClusterSpec -> CompiledKernel. Halide errors (compile or run time)
// come back as absl::Status; no Halide handler may abort the process.
#ifndef BRAZE_COMPILE_COMPILE_H_
#define BRAZE_COMPILE_COMPILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/host_tensor.h"
#include "device/device_tensor.h"
#include "lower/cluster_spec.h"
#include "schedule/scheduler.h"

namespace braze {

struct CompileOptions {
  // CPU kernels: which scheduler starts the chain (schedule/scheduler.h).
  SchedulerKind scheduler = SchedulerKind::kAuto;
  // Halide worker threads while this kernel runs; 0: Halide's default (HL_NUM_THREADS,
  // else all cores). Halide's pool is process-wide: the count is applied before each Run
  // whose kernel asks for a different one than the last Run did.
  int num_threads = 0;
  // Compile for CUDA (the JIT host target plus cuda_capability_86) starting the GPU
  // chain at `gpu_scheduler` (Li2018 or a heuristic plan); the kernel then runs with
  // RunOnDevice on DeviceTensors of device `cuda_ordinal`.
  bool cuda = false;
  int cuda_ordinal = 0;
  SchedulerKind gpu_scheduler = SchedulerKind::kGpuFused;
};

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // inputs/outputs are in ClusterSpec order; outputs are preallocated with
  // output_types(). Thread-compatible: one Run at a time per kernel.
  virtual absl::Status Run(absl::Span<const HostTensor* const> inputs,
                           absl::Span<HostTensor* const> outputs) = 0;
  // CUDA kernels (CompileOptions::cuda): the same on tensors in device memory; inputs
  // and outputs stay there. Asynchronous: queued on the device's default stream.
  // Unimplemented for CPU kernels.
  virtual absl::Status RunOnDevice(absl::Span<DeviceTensor* const> inputs,
                                   absl::Span<DeviceTensor* const> outputs) {
    return absl::UnimplementedError("this kernel runs on the host (Run), not on a device");
  }
  virtual bool on_device() const { return false; }
  virtual const std::vector<TensorType>& output_types() const = 0;
  // The scheduler that actually produced the schedule (after fall-through).
  virtual SchedulerKind scheduler_used() const = 0;
  // Why each scheduler tried before scheduler_used() failed, in order, one entry each:
  // "<Scheduler>: <Halide's message>". Empty when the chosen scheduler worked.
  virtual const std::vector<std::string>& scheduler_failures() const = 0;
  virtual double compile_ms() const = 0;
  // Lowered statement / schedule text, for dumps.
  virtual std::string schedule_text() const = 0;
  // Halide's lowered statement of the scheduled pipeline (loop nest after scheduling),
  // produced on request: it lowers the pipeline again, so only dumps ask for it.
  virtual std::string lowered_stmt() const { return ""; }
};

// Lowers, schedules (falling through the scheduler chain on failure) and JIT-compiles.
absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options);

// The Halide target CompileCluster compiles for ("x86-64-linux-avx-avx2-...-jit"):
// HL_JIT_TARGET or the host, minus CPU features the host lacks, plus
// cuda-cuda_capability_86 when `cuda`. Part of any key for caching compiled kernels.
// InvalidArgument if HL_JIT_TARGET does not parse.
absl::StatusOr<std::string> JitTargetString(bool cuda = false);

// Which ops have a lowering: OpIsCompilable (braze/graph.h, from op_list.def).

}  // namespace braze

#endif  // BRAZE_COMPILE_COMPILE_H_
