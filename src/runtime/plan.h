// An execution plan for one (fetches, targets, fed tensors) combination: which nodes must
// run, how they are clustered, and an ordered list of steps (cluster launches, compiled
// single-op kernels, library GEMMs, reference kernels) whose order respects every data
// dependency. Built once by BuildPlan and never changed: what the steps need per input
// signature (kernels, buffers, mirrors, which steps fell back) lives in a PlanState
// (runtime/plan_state.h) that the session owns beside it.
//
// The planning stages, in order (BuildPlan: each is a function in plan.cc, called by
// name in this order, and `after_stage` is called after each one; the session logs
// them at --v=2 and dumps the finished plan under BRAZE_FLAGS=--dump_to, runtime/dump.h):
//   1. Prune        nodes the fetches and targets need, stopping at fed tensors
//   2. CheckStrict  strict mode: a needed op marked for compilation must have a lowering
//   3. Place        every needed op's device resolved and checked (the device must
//                   exist: its backend's CheckAvailable)
//   4. MatchGemms   MatMuls a library runs (devices whose backend has a library GEMM:
//                   cuBLASLt on CUDA), with their folded epilogues
//                   (passes/gemm_match.h); never clustered
//   5. Cluster      mark_for_compilation: clusters of compilable ops
//                   (passes/mark_for_compilation.h)
//   6. Steps        one step per cluster, GEMM or remaining op, each with its fallback
//                   computed here (op by op for a cluster or GEMM, the reference kernel
//                   for a single op), so the executor never plans
//   7. Order        a topological order of the steps (Kahn's, ties in graph order)
#ifndef BRAZE_RUNTIME_PLAN_H_
#define BRAZE_RUNTIME_PLAN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/device.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "passes/mark_for_compilation.h"

namespace braze {

// Where a value lives: host memory, jit:cpu's memory (host memory too, but a device of
// its own: values cross its boundary by counted copies, as XLA_CPU's do), or a GPU
// device's memory (DeviceTensor; CUDA or OpenCL, which device is the step's `device`).
enum class Space { kHost, kJitCpu, kDevice };
const char* SpaceName(Space space);

struct Step {
  // kGemm: a MatMul/BatchMatMul on CUDA run by cuBLASLt with the bias Add (and Relu)
  // that follow it folded into its epilogue; nodes = {matmul[, add[, relu]]}.
  enum class Kind { kCluster, kSingleOp, kReference, kGemm };
  Kind kind = Kind::kReference;
  Space space = Space::kHost;   // where it runs (reference steps: always the host)
  Device device;                // the GPU device (CUDA or OpenCL), for kDevice
  std::string name;             // the cluster's or the node's name
  std::vector<int> nodes;       // ascending ids (a topological order)
  std::vector<Tensor> inputs;   // values read from outside the step
  std::vector<Tensor> outputs;  // values the step produces for others
  // What runs instead when this step's compile (or a run of its kernel, or the
  // library call) fails: op by op for clusters and GEMMs, the reference kernel for a
  // single op. Empty for reference steps (their errors are the user's).
  std::vector<Step> fallback;
};

struct Plan {
  std::vector<bool> needed;  // by node id
  ClusteringResult clustering;
  std::vector<Step> steps;
};

// Called after each planning stage with its name ("prune", ..., "order") and the plan
// as far as it is built.
using PlanStageHook = std::function<void(const char* stage, const Plan& plan)>;

// Builds the plan. `default_device` is the device of ops with no placement
// (SessionOptions::device, resolved once when the session started:
// device::ResolveSessionDevice). `fed[i]` marks nodes whose (single) output is fed.
absl::StatusOr<std::unique_ptr<const Plan>> BuildPlan(
    const Graph& graph, const SessionOptions& options, const Device& default_device,
    const std::vector<Tensor>& fetches, const std::vector<Tensor>& targets,
    const std::vector<bool>& fed, const PlanStageHook& after_stage = {});

}  // namespace braze

#endif  // BRAZE_RUNTIME_PLAN_H_
