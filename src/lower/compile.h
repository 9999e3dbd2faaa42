// Compiling one cluster into one Halide pipeline, without exposing Halide: the runtime
// and tests see only ClusterSpec -> CompiledKernel. Halide errors (compile or run time)
// come back as absl::Status; no Halide handler may abort the process.
#ifndef BRAZE_LOWER_COMPILE_H_
#define BRAZE_LOWER_COMPILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "lower/device_tensor.h"

namespace braze {

// A cluster to compile for concrete input types.
struct ClusterSpec {
  const Graph* graph = nullptr;
  std::string name;                     // "cluster_0"; names the pipeline and its errors
  std::vector<int> nodes;               // node ids, topological (increasing id) order
  std::vector<Tensor> inputs;           // external values read by the cluster: arguments
  std::vector<TensorType> input_types;  // concrete (fully defined) types of `inputs`
  std::vector<Tensor> outputs;          // values used outside the cluster: results
};

// kAuto: per cluster, our safe default when the cluster reduces over the innermost
// (contiguous) dim — softmax, layernorm, cross entropy, row sums — or holds a matmul,
// and Adams2019 otherwise. On this project's CPU, Adams2019 vectorizes such reductions
// across rows and runs 2-4x slower than the safe default (bench/RESULTS.md). A lone
// matmul it schedules as well as ours, but a backward matmul fused with a ReLU mask, a
// column sum and Adam's update got a schedule 4x slower than op by op and took seconds
// to search (README, Examples); elementwise clusters are where Adams2019 shines.
enum class SchedulerKind { kAuto, kAdams2019, kMullapudi2016, kLi2018, kSafeDefault };
const char* SchedulerName(SchedulerKind kind);

// GPU schedules (CompileOptions::cuda): Braze's heuristic (src/schedule/gpu_schedule.h)
// has three plans, each the fallback of the one before when Halide rejects a schedule:
// fused (reductions inside their consumer's kernel), separate (reductions in kernels of
// their own, still cooperative) and serial (a thread per reduction output, no rfactor).
// kHeuristic starts with fused; the other two start further down, for tuning and for
// testing the fallbacks.
enum class GpuScheduler {
  kHeuristic,
  kHeuristicSeparate,
  kHeuristicSerial,
  kLi2018,  // Halide's Li2018 autoscheduler; falls through to kHeuristic if it throws
};
const char* GpuSchedulerName(GpuScheduler which);

struct CompileOptions {
  // CPU kernels: which scheduler. Ignored for CUDA kernels.
  SchedulerKind scheduler = SchedulerKind::kAuto;
  // Halide worker threads while this kernel runs; 0: Halide's default (HL_NUM_THREADS,
  // else all cores). Halide's pool is process-wide: the count is applied before each Run
  // whose kernel asks for a different one than the last Run did.
  int num_threads = 0;
  // Compile for CUDA (the JIT host target plus cuda_capability_86) with `gpu_scheduler`;
  // the kernel then runs with RunOnDevice on DeviceTensors of device `cuda_ordinal`.
  bool cuda = false;
  int cuda_ordinal = 0;
  GpuScheduler gpu_scheduler = GpuScheduler::kHeuristic;
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

// The autoscheduler plugin CompileCluster would load for `kind` (not kSafeDefault):
// $BRAZE_HALIDE_PLUGIN_DIR/libautoschedule_<name>.so when that variable is set, else
// the path CMake found at build time. A plugin is loaded at most once per process.
std::string AutoschedulerPluginPath(SchedulerKind kind);

// Which ops have a lowering: HasHalideLowering in passes/mark_for_compilation.h.

}  // namespace braze

#endif  // BRAZE_LOWER_COMPILE_H_
