// An execution plan for one (fetches, targets, fed tensors) combination: which nodes must
// run, how they are clustered, and an ordered list of steps (cluster launches, compiled
// single-op kernels, library GEMMs, reference kernels) whose order respects every data
// dependency. Built once by BuildPlan and never changed: what the steps need per input
// signature (kernels, buffers, mirrors, which steps fell back) lives in a PlanState
// (runtime/plan_state.h) that the session owns beside it.
//
// The planning stages, in order (BuildPlan calls them in this order, a function of
// plan.cc each, and after each one calls `after_stage` with the stage's name in
// snake_case: "prune", "check_strict", ...; the session passes no hook, and dumps the
// finished plan under BRAZE_FLAGS=--dump_to, runtime/dump.h):
//   1. Prune        nodes the fetches and targets need, stopping at fed tensors
//   2. CheckStrict  strict mode: a needed op marked for compilation must have a lowering
//                   (a HostCall has none)
//   3. Place        every needed op's device resolved and checked (the device must
//                   exist: its backend's CheckAvailable)
//      (ChainUpdates, not a stage: the needed updates of one variable each read the one
//      before it, in program order; the steps and the clustering keep that order)
//   4. Claim        steps that step kinds claim before clustering (step_kind.h): a
//                   MatMul a library runs on CUDA with its folded epilogue
//                   (step_gemm.cc, passes/gemm_match.h), a variable update gated by a
//                   bool scalar (step_gated_update.cc, passes/gated_update.h); claimed
//                   nodes are never clustered
//   5. Cluster      (ClusterOps) mark_for_compilation: clusters of compilable ops
//                   (passes/mark_for_compilation.h), of at most max_cluster_size ops
//   6. Steps        (MakeSteps) one step per cluster, claimed step or remaining op, each
//                   with its fallback computed here (op by op for a cluster or claimed
//                   step, the reference kernel for a single op), so the executor never
//                   plans
//      Remat        (SessionOptions::rematerialize) cluster steps recompute the cheap
//                   elementwise values they read from other clusters instead of reading
//                   them (runtime/remat.h), each step within max_cluster_size +
//                   kMaxRematCone ops; step_of keeps each node's original step
//   7. Order        a topological order of the steps (Kahn's, ties in graph order; with
//                   collectives, what the first collective needs first, then it, then
//                   what the next needs...: each starts early and overlaps what follows)
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
  // The kinds, one line each in runtime/step_kinds.def, each one file
  // (runtime/step_kind.h). kGemm: a MatMul/BatchMatMul on CUDA run by cuBLASLt with the
  // bias Add (and Relu) that follow it folded into its epilogue; nodes = {matmul[, add[,
  // relu]]}.
  enum class Kind {
#define V(kind, accessor) kind,
#include "runtime/step_kinds.def"
#undef V
  };
  Kind kind = Kind::kReference;
  Space space = Space::kHost;   // where it runs (reference steps: always the host)
  Device device;                // the GPU device (CUDA or OpenCL), for kDevice
  std::string name;             // the cluster's or the node's name
  std::vector<int> nodes;       // ascending ids (a topological order)
  std::vector<Tensor> inputs;   // values read from outside the step
  std::vector<Tensor> outputs;  // values the step produces for others
  // kCollective: its input has no reader but this step and is not fetched, so an
  // AllReduce or Broadcast may work in place on the input's buffer when the executor
  // owns it (step_collective.cc).
  bool input_dies = false;
  // kCollective: no step the executor could run meanwhile comes between this one and
  // the first that reads its output (the next step reads it, or only collectives or
  // nothing follow): the executor runs it on its own thread instead of handing it to
  // the communication thread, which would only make it wait (step_collective.cc).
  bool run_here = false;
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
