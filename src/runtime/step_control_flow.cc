// The control-flow step kind (kControlFlow; cf, issue 40): a Cond, While or Scan node
// (op_list.def's kControlFlow ops) runs as a step of its own, never inside a fused
// kernel. The plan claims every needed control-flow node before clustering.
//
// Running: each body is a graph of its own, planned ONCE at the step's first run with
// the enclosing session's options (device, scheduler, JIT level, strict mode, compile
// policy...): its clusters formed by the body's JitScope marks and the JIT level,
// compiled through the process-wide compile cache like any other cluster, for the
// session's device. Every iteration runs that plan on an executor of its own, directly:
// the parameters (carry, the elems' rows, captures) are bound by reference, and the
// body's compiled host steps write its results in place into the loop's buffers of the
// iteration before, which the loop then swaps with the carry (no Session::Run per
// iteration: no feeds copied and checked, no plan key, no fetch copies; the parameters'
// types are checked once per Run, each result's every iteration). What the loop does
// (which branch, how many iterations, slices and stacks) is reference/control_flow.h's
// RunControlFlow, the same code the reference kernel runs, so the two cannot disagree
// on semantics. The bodies' counters (compiles, launches, copies, body_runs,
// body_copied_bytes) are added to the enclosing session's.
//
// Values cross into a body on the host: on OpenCL or CUDA each iteration copies its
// inputs to the device and its results back (counted). A loop compiled into one kernel
// is not done (docs/CONTROL_FLOW.md).
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "device/features.h"
#include "ir/logging.h"
#include "ir/timeline.h"
#include "reference/control_flow.h"
#include "runtime/dump.h"
#include "runtime/executor.h"
#include "runtime/flags.h"
#include "runtime/step_kind.h"

namespace braze {

// A body's plan, built once at the step's first run with the enclosing session's
// options and kept in the step's state across Runs: what a Session would keep for it,
// without a Session's per-Run work (feeds copied and checked, the plan looked up by
// key, fetches copied out, live bytes measured), which each iteration paid.
struct BodyPlan {
  SessionOptions options;
  std::unique_ptr<const Plan> plan;
  std::unique_ptr<PlanState> state;
  std::unordered_map<int, VariableSlot> variables;  // none: a body holds no Variable
  SessionStats stats;                               // added to the enclosing session's
  SessionDumper dumper;                             // BRAZE_FLAGS --dump_to, as a session's
  std::vector<int> consts;                          // the needed Consts' node ids
};

struct ControlFlowRuntime {
  std::vector<std::unique_ptr<BodyPlan>> bodies;
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
  to.body_runs += s.body_runs;
  to.body_copied_bytes += s.body_copied_bytes;
}

// Plans `body` as a Session would for feeds of its parameters and fetches of its results.
absl::StatusOr<std::unique_ptr<BodyPlan>> PlanBody(const Body& body,
                                                   const SessionOptions& options) {
  auto b = std::make_unique<BodyPlan>();
  b->options = options;
  const Graph& g = *body.graph;
  BRAZE_RETURN_IF_ERROR(g.status());
  BRAZE_ASSIGN_OR_RETURN(const Device device, device::ResolveSessionDevice(options.device));
  std::vector<bool> fed(g.num_nodes(), false);
  for (const Tensor& p : body.params) fed[p.node_id()] = true;  // a Placeholder: one output
  BRAZE_ASSIGN_OR_RETURN(b->plan, BuildPlan(g, b->options, device, body.results, {}, fed));
  BRAZE_RETURN_IF_ERROR(b->dumper.OnPlanBuilt(g, *b->plan));
  b->state = std::make_unique<PlanState>(*b->plan);
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!b->plan->needed[id]) continue;
    const OpKind op = g.node(id).op();
    if (op == OpKind::kConst) b->consts.push_back(id);
    if (op == OpKind::kPlaceholder && !fed[id]) {
      return absl::InternalError(absl::StrCat(body.name, ": ", NodeLabel(g.node(id)),
                                              " is not one of the body's parameters"));
    }
  }
  return b;
}

// --log_compiles: how a control-flow node runs, said once when its bodies are planned:
// each body's plan (its compiled kernels and the ops left to reference kernels), run per
// iteration. A loop is never compiled into one kernel of its own: the GRU's Scan step,
// run per iteration, is level with the same cell unrolled into one graph
// (docs/CONTROL_FLOW.md), so there was no time to win for the whole-loop kernel.
std::string BodiesLine(const Node& node, const ControlFlowAttrs& attrs,
                       const std::vector<std::unique_ptr<BodyPlan>>& bodies) {
  std::string line = absl::StrCat("control flow: ", NodeLabel(node), ":");
  for (size_t i = 0; i < bodies.size(); ++i) {
    int kernels = 0, reference = 0, other = 0;
    for (const Step& s : bodies[i]->plan->steps) {
      const bool compiled = s.kind == Step::Kind::kCluster || s.kind == Step::Kind::kSingleOp ||
                            s.kind == Step::Kind::kGemm;
      (compiled ? kernels : s.kind == Step::Kind::kReference ? reference : other) += 1;
    }
    absl::StrAppend(&line, i > 0 ? ";" : "", " body '", attrs.bodies[i]->name, "' planned once (",
                    kernels, " compiled kernels, ", reference, " reference ops");
    if (other > 0) absl::StrAppend(&line, ", ", other, " other steps");
    absl::StrAppend(&line, ")");
  }
  absl::StrAppend(&line,
                  "; each iteration runs the plan on the loop's buffers, not one loop kernel");
  return line;
}

// The parameters' types against the body's Placeholders, once per Run of the step (a
// carry keeps its type from step to step: RunControlFlow checks every result).
absl::Status CheckParams(const Body& body, absl::Span<const HostTensor* const> params) {
  if (params.size() != body.params.size()) {
    return absl::InternalError(
        absl::StrCat(body.name, " takes ", body.params.size(), " parameters, got ", params.size()));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const TensorType& want = body.params[k].type();
    if (params[k]->dtype() != want.dtype || !ShapeMatches(want.shape, params[k]->shape())) {
      return absl::InvalidArgumentError(absl::StrCat(body.name, " parameter ", k, ": expected ",
                                                     TypeString(want), ", got ",
                                                     TypeString(params[k]->type())));
    }
  }
  return absl::OkStatus();
}

// One iteration: the body's plan run on the parameters in place (bound by reference),
// its compiled host steps writing the results straight into `results` where the types
// agree (the buffers of the iteration before); a result left elsewhere is copied
// there (counted in body_copied_bytes).
absl::Status RunBody(BodyPlan& b, const Body& body, absl::Span<const HostTensor* const> params,
                     std::vector<HostTensor>* results) {
  const Graph& g = *body.graph;
  Executor ex(g, b.options, b.stats, *b.state, b.variables);
  ex.set_dumper(&b.dumper);
  for (size_t k = 0; k < params.size(); ++k) ex.BindHost(body.params[k], params[k]);
  for (int id : b.consts) {
    ex.BindHost(Tensor(const_cast<Graph*>(&g), id, 0),
                g.node(id).attrs_as<ConstAttrs>().value.get());
  }
  results->resize(body.results.size());
  for (size_t j = 0; j < body.results.size(); ++j) {
    ex.SetDestination(body.results[j], &(*results)[j]);
  }
  const Plan& plan = *b.plan;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(ex.RunStep(plan.steps[i], b.state->steps[i], /*compile_only=*/false));
  }
  BRAZE_RETURN_IF_ERROR(ex.WaitCollectives());
  for (size_t j = 0; j < body.results.size(); ++j) {
    HostTensor* out = &(*results)[j];
    const bool in_place = ex.Slot(body.results[j]).host == out;
    BRAZE_RETURN_IF_ERROR(ex.Fetch(body.results[j], out));
    if (!in_place) b.stats.body_copied_bytes += static_cast<int64_t>(out->num_bytes());
  }
  ++b.stats.runs;
  return ex.CommitUpdates();  // nothing: bodies may not assign
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
    // The inputs as host tensors, once per Run of the step: the iterations read these in
    // place (a capture, a weight, is not copied per iteration).
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
        auto planned = PlanBody(*body, ex.options());
        if (!planned.ok()) return Annotate(NodeLabel(node), Annotate(body->name, planned.status()));
        rt->bodies.push_back(*std::move(planned));
      }
      if (GetBrazeFlags().log_compiles) LogInfo(0, BodiesLine(node, attrs, rt->bodies));
      state.control_flow = std::move(rt);
    }
    ControlFlowRuntime& rt = *state.control_flow;
    std::vector<bool> checked(attrs.bodies.size(), false);
    auto run = [&](int i, absl::Span<const HostTensor* const> params,
                   std::vector<HostTensor>* results) -> absl::Status {
      const Body& body = *attrs.bodies[i];
      if (!checked[i]) {
        BRAZE_RETURN_IF_ERROR(CheckParams(body, params));
        checked[i] = true;
      }
      absl::Status s = RunBody(*rt.bodies[i], body, params, results);
      return s.ok() ? s : Annotate(body.name, s);
    };
    LoopCounters counters;
    auto results = RunControlFlow(node, in, *out_types, run, &counters);
    ex.stats().body_runs += counters.body_runs;
    ex.stats().body_copied_bytes += counters.copied_bytes;
    for (const auto& body : rt.bodies) {
      AddStats(ex.stats(), body->stats);
      body->stats = SessionStats{};
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
