// A kind of plan step (runtime/step_kinds.def lists them): what the plan asks of it
// while planning and what the executor asks of it while running, so that a new kind
// (a collective across processes, a library call) is one file and one line, with no
// branch on kinds anywhere else.
//
// Planning: before clustering, each kind may claim needed nodes for steps of its own
// (a cuBLASLt GEMM claims a MatMul and its epilogue, a gated update its Select and
// Assign); claimed nodes are kept out of clusters. Clusters and the remaining ops become kCluster,
// kSingleOp and kReference steps (runtime/plan.cc). Running: Executor::RunStep resolves the step's
// inputs and calls its kind's Run, which uses the executor's services for step kinds
// (runtime/executor.h).
#ifndef BRAZE_RUNTIME_STEP_KIND_H_
#define BRAZE_RUNTIME_STEP_KIND_H_

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/session.h"
#include "runtime/plan.h"

namespace braze {

class Executor;
struct StepState;
struct Value;

// What a kind's planning sees of the plan being built.
struct PlanView {
  const Graph& g;
  const SessionOptions& options;
  const std::vector<bool>& needed;               // by node id
  const std::set<std::pair<int, int>>& fetched;  // (node id, output)
  const Device& default_device;                  // where unplaced ops run
  std::function<Device(int id)> memory_device;   // where a needed node's values live
  // One step per op of `nodes` (sources skipped): a claimed step's fallback.
  std::function<std::vector<Step>(const std::vector<int>& nodes)> op_by_op;
};

class StepKind {
 public:
  virtual ~StepKind() = default;
  // Steps of this kind made from needed nodes before clustering; their nodes are kept
  // out of clusters. Most kinds claim nothing.
  virtual std::vector<Step> Claim(const PlanView& plan) const { return {}; }
  // Why a claimed node is in no cluster (ClusteringResult's reason for it).
  virtual ExclusionReason claim_reason() const { return ExclusionReason::kLibraryCall; }
  // Runs `step` on `inputs` (their types `types`) with its state; compile_only
  // compiles what it needs and binds stand-ins for its outputs instead.
  virtual absl::Status Run(Executor& ex, const Step& step, StepState& state,
                           const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                           bool compile_only) const = 0;
  // When a step of this kind fails to compile or run: whether strict mode reports it
  // (false where the failure is not the user's, as a library refusing a GEMM), and
  // what runs instead ("running it op by op").
  virtual bool strict_reports_failure() const { return true; }
  // Whether the plan orders a step of this kind as early as it can: the steps it needs
  // first, then it, ahead of the rest; a collective starts on the communication thread
  // and overlaps the steps after it (Order in plan.cc).
  virtual bool run_early() const { return false; }
  virtual const char* instead() const = 0;
  // What runs a step of this kind, for dumps: "fused cluster", "reference kernel", ...
  virtual const char* runs_as() const = 0;
};

#define V(kind, accessor) const StepKind& accessor();
#include "runtime/step_kinds.def"
#undef V

// The kind of `kind` (one case per line of step_kinds.def).
const StepKind& StepKindOf(Step::Kind kind);
// Every kind, in step_kinds.def's order.
const std::vector<const StepKind*>& AllStepKinds();

}  // namespace braze

#endif  // BRAZE_RUNTIME_STEP_KIND_H_
