// An execution plan for one (fetches, targets, fed tensors) combination: which nodes must
// run, how they are clustered, and an ordered list of steps (cluster launches, compiled
// single-op kernels, reference kernels) whose order respects every data dependency.
// Compiled kernels and output buffers are memoized on the steps per input signature, so
// a plan run again with the same shapes neither looks anything up nor allocates.
#ifndef BRAZE_RUNTIME_PLAN_H_
#define BRAZE_RUNTIME_PLAN_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "device/cublas_gemm.h"
#include "device/device_tensor.h"
#include "passes/mark_for_compilation.h"
#include "compile/compile_cache.h"

namespace braze {

// Where a value lives: host memory, jit:cpu's memory (host memory too, but a device of
// its own: values cross its boundary by counted copies, as XLA_CPU's do), or a CUDA
// device (DeviceTensor).
enum class Space { kHost, kJitCpu, kCuda };
const char* SpaceName(Space space);

struct Step {
  // kGemm: a MatMul/BatchMatMul on CUDA run by cuBLASLt, with gemm.epilogue folding the
  // bias Add (and Relu) that follow it; nodes = {matmul[, add[, relu]]}.
  enum class Kind { kCluster, kSingleOp, kReference, kGemm };
  Kind kind = Kind::kReference;
  Space space = Space::kHost;   // where it runs (reference steps: always the host)
  int ordinal = 0;              // the CUDA device, for kCuda
  std::string name;             // the cluster's or the node's name
  std::vector<int> nodes;       // ascending ids (a topological order)
  std::vector<Tensor> inputs;   // values read from outside the step
  std::vector<Tensor> outputs;  // values the step produces for others

  // Memoized per input signature.
  std::vector<TensorType> input_types;
  GemmShape gemm;  // kGemm: the epilogue (from the plan) and sizes for input_types
  std::shared_ptr<SharedKernel> kernel;
  std::vector<HostTensor> buffers;  // one per output; reused across runs (host spaces)
  std::vector<std::shared_ptr<DeviceTensor>> device_buffers;  // the same, on CUDA

  // A cluster (or single op) whose compile failed runs these instead, one op each.
  bool fell_back = false;
  std::vector<Step> fallback;
};

// A value's copy in another space, kept across runs so copies reuse their memory.
struct Mirror {
  HostTensor host;                       // kHost, kJitCpu
  std::shared_ptr<DeviceTensor> device;  // kCuda
  const HostTensor* constant = nullptr;  // a Const's value already copied here
};

struct Plan {
  std::vector<bool> needed;  // by node id
  // (node id, output, space) -> the value's copy there, for steps in that space.
  std::map<std::tuple<int, int, Space>, Mirror> mirrors;
  ClusteringResult clustering;
  std::vector<Step> steps;
};

// Builds the plan. `fed[i]` marks nodes whose (single) output is fed.
absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(const Graph& graph, const SessionOptions& options,
                                                const std::vector<Tensor>& fetches,
                                                const std::vector<Tensor>& targets,
                                                const std::vector<bool>& fed);

// Where ops placed on `device` (canonical device string) run.
Space SpaceOfDevice(const std::string& device, int* ordinal);

// The session's default device, canonical ("cpu", "cuda:0", "jit:cpu"); "auto" is
// "cuda:0" when CUDA is available, else "cpu".
absl::StatusOr<std::string> ResolveDefaultDevice(const SessionOptions& options);

// One step per op of `nodes` (used for a cluster's op-by-op fallback).
std::vector<Step> OpByOpSteps(const Graph& graph, const std::vector<int>& nodes,
                              const SessionOptions& options);

}  // namespace braze

#endif  // BRAZE_RUNTIME_PLAN_H_
