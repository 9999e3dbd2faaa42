// The gated update step kind (kGatedUpdate): `Assign(v, Select(p, x, v))` with p a bool
// scalar (passes/gated_update.h) as one step that computes nothing: v takes x when the
// Run commits if p is true, and keeps its value if not. So x is computed in its
// inputs' cluster without waiting for p (loss scaling's "every gradient finite": the
// update fuses with its gradient), and the Select is never evaluated. It claims the
// Select and the Assign before clustering; its fallback is the two ops, one by one.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "passes/gated_update.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

// inputs: p, x, v (the step's inputs in that order); outputs: the Assign's value.
absl::Status RunGatedUpdate(Executor& ex, const Step& step, StepState& state,
                            const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                            bool compile_only) {
  const Node& assign = ex.graph().node(step.nodes.back());
  const TensorType want = assign.input(0).type();
  if (types[1].dtype != want.dtype || !ShapeMatches(want.shape, types[1].shape)) {
    return absl::InvalidArgumentError(absl::StrCat(NodeLabel(assign), ": the variable is ",
                                                   TypeString(want), ", the value ",
                                                   TypeString(types[1])));
  }
  if (compile_only) {
    ex.StandIn(step, state, {types[1]});
    return absl::OkStatus();
  }
  BRAZE_ASSIGN_OR_RETURN(Value gate, ex.In(step.inputs[0], inputs[0], Space::kHost, Device{}));
  const bool take = gate.host->GetDouble(0) != 0;
  ex.Slot(step.outputs[0]) = take ? inputs[1] : inputs[2];
  if (take) ex.AddUpdate(assign.input(0).node_id(), inputs[1]);
  return absl::OkStatus();
}

class GatedUpdateKind : public StepKind {
 public:
  std::vector<Step> Claim(const PlanView& p) const override {
    if (p.options.reference_only) return {};
    std::vector<Step> steps;
    for (const GatedUpdate& m : MatchGatedUpdates(p.g, p.needed, p.fetched)) {
      Step s;
      s.kind = Step::Kind::kGatedUpdate;
      s.name = p.g.node(m.assign).name();
      s.nodes = {m.select, m.assign};
      s.inputs = {m.gate, m.value, m.variable};
      s.outputs = {Tensor(const_cast<Graph*>(&p.g), m.assign, 0)};
      s.fallback = p.op_by_op(s.nodes);
      steps.push_back(std::move(s));
    }
    return steps;
  }
  ExclusionReason claim_reason() const override { return ExclusionReason::kGatedUpdate; }
  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    return RunGatedUpdate(ex, step, state, inputs, types, compile_only);
  }
  const char* instead() const override { return "running the Select and the Assign"; }
  const char* runs_as() const override { return "gated variable update"; }
};

}  // namespace

const StepKind& GatedUpdateStepKind() {
  static const GatedUpdateKind kind;
  return kind;
}

}  // namespace braze
