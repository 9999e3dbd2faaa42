// The reference step kind (kReference): one op on its plain C++ reference kernel
// (reference/reference.h), on the host. The Assign family runs no kernel: the new value
// is the output, and the variable takes it when the Run commits.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "ir/timeline.h"
#include "reference/reference.h"
#include "runtime/executor.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

// Assign: no kernel, wherever the new value lives. The output is the new value; the
// variable takes it when the Run commits.
absl::Status RunAssign(Executor& ex, const Step& step, const std::vector<Value>& inputs) {
  const Node& node = ex.graph().node(step.nodes.front());
  const TensorType want = node.input(0).type();
  BRAZE_ASSIGN_OR_RETURN(const TensorType got, ex.TypeOf(inputs[1]));
  if (got.dtype != want.dtype || !ShapeMatches(want.shape, got.shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        NodeLabel(node), ": the variable is ", TypeString(want), ", the value ", TypeString(got)));
  }
  ex.Slot(step.outputs[0]) = inputs[1];
  ex.AddUpdate(node.input(0).node_id(), inputs[1]);
  return absl::OkStatus();
}

absl::Status RunReference(Executor& ex, const Step& step, StepState& state,
                          const std::vector<Value>& inputs, const std::vector<TensorType>& types) {
  TimelineEvent trace(step.name, "reference");  // observability: ir/timeline.h
  const Node& node = ex.graph().node(step.nodes.front());
  std::vector<HostTensor> in;
  in.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      in.emplace_back(types[i].dtype, types[i].shape);
      continue;
    }
    BRAZE_ASSIGN_OR_RETURN(Value host, ex.In(step.inputs[i], inputs[i], Space::kHost, Device{}));
    in.push_back(*host.host);
  }
  auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
  if (!out_types.ok()) return Annotate(NodeLabel(node), out_types.status());
  auto outputs = RunReferenceKernel(node, in, *out_types);
  if (!outputs.ok()) return Annotate(NodeLabel(node), outputs.status());
  state.buffers = *std::move(outputs);
  ++ex.stats().reference_launches;
  ex.BindOutputs(step, state);
  if (OpCategoryOf(node.op()) == OpCategory::kState) {
    Value v;
    v.host = &state.buffers[0];
    ex.AddUpdate(node.input(0).node_id(), v);
  }
  return absl::OkStatus();
}

class ReferenceKind : public StepKind {
 public:
  absl::Status Run(Executor& ex, const Step& step, StepState& state,
                   const std::vector<Value>& inputs, const std::vector<TensorType>& types,
                   bool compile_only) const override {
    const Node& node = ex.graph().node(step.nodes.front());
    if (node.op() == OpKind::kAssign) {
      if (!compile_only) return RunAssign(ex, step, inputs);
      ex.StandIn(step, state, {types[1]});
      return absl::OkStatus();
    }
    if (!compile_only) return RunReference(ex, step, state, inputs, types);
    // Compile-only: reference kernels do not run (HostCalls have side effects).
    auto out_types = InferOutputTypes(node.op(), node.attrs(), types);
    if (!out_types.ok()) return Annotate(NodeLabel(node), out_types.status());
    ex.StandIn(step, state, *out_types);
    return absl::OkStatus();
  }
  // A reference step has no fallback: its errors are the user's.
  const char* instead() const override { return "nothing else can run it"; }
  const char* runs_as() const override { return "reference kernel"; }
};

}  // namespace

const StepKind& ReferenceStepKind() {
  static const ReferenceKind kind;
  return kind;
}

}  // namespace braze
