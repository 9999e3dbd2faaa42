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

namespace braze {

// A cluster to compile for concrete input types.
struct ClusterSpec {
  const Graph* graph = nullptr;
  std::string name;                 // "cluster_0"; names the pipeline and its errors
  std::vector<int> nodes;           // node ids, topological (increasing id) order
  std::vector<Tensor> inputs;       // external values read by the cluster: arguments
  std::vector<TensorType> input_types;  // concrete (fully defined) types of `inputs`
  std::vector<Tensor> outputs;      // values used outside the cluster: results
};

enum class SchedulerKind { kAdams2019, kMullapudi2016, kLi2018, kSafeDefault };
const char* SchedulerName(SchedulerKind kind);

struct CompileOptions {
  SchedulerKind scheduler = SchedulerKind::kAdams2019;
  int num_threads = 0;  // 0: all cores
};

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // inputs/outputs are in ClusterSpec order; outputs are preallocated with
  // output_types(). Thread-compatible: one Run at a time per kernel.
  virtual absl::Status Run(absl::Span<const HostTensor* const> inputs,
                           absl::Span<HostTensor* const> outputs) = 0;
  virtual const std::vector<TensorType>& output_types() const = 0;
  // The scheduler that actually produced the schedule (after fall-through).
  virtual SchedulerKind scheduler_used() const = 0;
  virtual double compile_ms() const = 0;
  // Lowered statement / schedule text, for dumps.
  virtual std::string schedule_text() const = 0;
};

// Lowers, schedules (falling through the scheduler chain on failure) and JIT-compiles.
absl::StatusOr<std::unique_ptr<CompiledKernel>> CompileCluster(const ClusterSpec& spec,
                                                               const CompileOptions& options);

// True when `op` has a Halide lowering (everything but sources, state and HostCall).
bool HasHalideLowering(OpKind op);

}  // namespace braze

#endif  // BRAZE_LOWER_COMPILE_H_
