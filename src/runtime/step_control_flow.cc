// The control-flow step kind (kControlFlow; cf, issue 40): a Cond, While or Scan node
// (op_list.def's kControlFlow ops) runs as a step of its own, never inside a fused
// kernel. The plan claims every needed control-flow node before clustering.
//
// Running: each body is a graph of its own, run by a Session of its own made at the
// step's first run with the enclosing session's options (device, scheduler, JIT level,
// strict mode, compile policy...). That session plans the body ONCE (clusters formed by
// the body's JitScope marks and the JIT level, compiled through the process-wide compile
// cache like any other cluster, for the session's device) and every iteration runs that
// plan again without replanning. What the loop does (which branch, how many iterations,
// slices and stacks) is reference/control_flow.h's RunControlFlow, the same code the
// reference kernel runs, so the two cannot disagree on semantics. The bodies' counters
// (compiles, launches, copies) are added to the enclosing session's.
//
// Values cross into a body on the host: on OpenCL or CUDA each iteration copies its
// inputs to the device and its results back (counted). A loop compiled into one kernel
// is not done (docs/CONTROL_FLOW.md).
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "ir/timeline.h"
#include "reference/control_flow.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {

// One session per body of the step's node, kept in the step's state across Runs.
struct ControlFlowRuntime {
  std::vector<std::unique_ptr<Session>> bodies;
};

namespace {

void AddStats(SessionStats& to, const SessionStats& s) {
  to.compiles += s.compiles;
  to.cache_hits += s.cache_hits;
  to.disk_cache_hits += s.disk_cache_hits;
  to.cluster_launches += s.cluster_launches;
  to.single_op_launches += s.single_op_launches;
  to.reference_launches += s.reference_launches;
  to.gemm_launches += s.gemm_launches;
  to.verified_kernels += s.verified_kernels;
  to.compile_ms += s.compile_ms;
  to.host_to_device_copies += s.host_to_device_copies;
  to.device_to_host_copies += s.device_to_host_copies;
  to.copied_bytes += s.copied_bytes;
}

class ControlFlowKind : public StepKind {
 public:
  std::vector<Step> Claim(const PlanView& plan) const override {
    std::vector<Step> steps;
    if (plan.options.reference_only) return steps;  // the reference kernel runs it
    for (int id = 0; id < plan.g.num_nodes(); ++id) {
      const Node& n = plan.g.node(id);
      if (!plan.needed[id] || OpCategoryOf(n.op()) != OpCategory::kControlFlow) continue;
      Step s;
      s.kind = Step::Kind::kControlFlow;
      s.space = Space::kHost;
      s.name = n.name();
      s.nodes = {id};
      s.inputs = n.inputs();
      for (int o = 0; o < n.num_outputs(); ++o) {
        s.outputs.push_back(Tensor(const_cast<Graph*>(&plan.g), id, o));
      }
      s.fallback = plan.op_by_op({id});  // its reference kernel: the bodies op by op
      steps.push_back(std::move(s));
    }
    return steps;
  }

  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    const Node& node = ex.graph().node(step.nodes.front());
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return Annotate(NodeLabel(node), out_types.status());
    if (compile_only) {  // bodies compile at their first run (their shapes may vary)
      ex.StandIn(step, state, *out_types);
      return absl::OkStatus();
    }
    TimelineEvent trace(step.name, "control flow");
    std::vector<HostTensor> in;
    in.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      BRAZE_ASSIGN_OR_RETURN(Value host, ex.In(step.inputs[i], inputs[i], Space::kHost, Device{}));
      in.push_back(*host.host);
    }
    const auto& attrs = node.attrs_as<ControlFlowAttrs>();
    if (state.control_flow == nullptr) {
      auto rt = std::make_shared<ControlFlowRuntime>();
      for (const auto& body : attrs.bodies) {
        rt->bodies.push_back(std::make_unique<Session>(*body->graph, ex.options()));
      }
      state.control_flow = std::move(rt);
    }
    ControlFlowRuntime& rt = *state.control_flow;
    auto run = [&](int i,
                   std::vector<HostTensor> params) -> absl::StatusOr<std::vector<HostTensor>> {
      const Body& body = *attrs.bodies[i];
      Feeds feeds;
      feeds.reserve(params.size());
      for (size_t k = 0; k < params.size(); ++k)
        feeds.emplace_back(body.params[k], std::move(params[k]));
      auto out = rt.bodies[i]->Run(feeds, body.results);
      if (!out.ok()) return Annotate(body.name, out.status());
      return out;
    };
    auto results = RunControlFlow(node, in, *out_types, run);
    for (const auto& session : rt.bodies) {
      AddStats(ex.stats(), session->stats());
      session->ResetStats();
    }
    if (!results.ok()) return Annotate(NodeLabel(node), results.status());
    state.buffers = *std::move(results);
    ex.BindOutputs(step, state);
    return absl::OkStatus();
  }

  const char* instead() const override {
    return "running its bodies op by op on reference kernels";
  }
  const char* runs_as() const override { return "control flow"; }
};

}  // namespace

const StepKind& ControlFlowStepKind() {
  static const ControlFlowKind kind;
  return kind;
}

}  // namespace braze
