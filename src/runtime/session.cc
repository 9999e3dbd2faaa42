// Session::Run: validates feeds and fetches, finds the nodes that must run, and executes
// them in id order (ids are a topological order: inputs always precede their users).
#include "braze/session.h"

#include <mutex>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/reference.h"

namespace braze {
namespace {

std::string Label(const Node& n) { return absl::StrCat("node '", n.name(), "' (", n.op_name(), ")"); }

absl::Status Annotate(const Node& n, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(Label(n), ": ", s.message()));
}

}  // namespace

struct Session::State {
  std::mutex mu;
  // Variable values by node id; absent = not yet initialized from its attr (or never
  // initialized, for variables without an initial value).
  std::unordered_map<int, HostTensor> variables;
};

Session::Session(const Graph& graph, SessionOptions options)
    : graph_(graph), options_(std::move(options)), state_(std::make_unique<State>()) {}

Session::~Session() = default;

absl::StatusOr<HostTensor> Session::VariableValue(const Tensor& variable) const {
  if (variable.graph() != &graph_ || variable.node().op() != OpKind::kVariable) {
    return absl::InvalidArgumentError("VariableValue needs a Variable of this session's graph");
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->variables.find(variable.node_id());
  if (it != state_->variables.end()) return it->second;
  const auto& attrs = variable.node().attrs_as<VariableAttrs>();
  if (attrs.initial_value) return *attrs.initial_value;
  return absl::FailedPreconditionError(
      absl::StrCat("variable '", variable.name(), "' is uninitialized"));
}

absl::StatusOr<std::vector<HostTensor>> Session::Run(const Feeds& feeds,
                                                     const std::vector<Tensor>& fetches,
                                                     const std::vector<Tensor>& targets) {
  BRAZE_RETURN_IF_ERROR(graph_.status());
  const int num_nodes = graph_.num_nodes();
  auto check_tensor = [&](const Tensor& t, const char* what, size_t i) -> absl::Status {
    if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " is not a tensor"));
    if (t.graph() != &graph_) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " ('", t.name(),
                                                     "') comes from another graph"));
    }
    return absl::OkStatus();
  };

  // Fed values, by (node, output).
  std::vector<std::vector<std::optional<HostTensor>>> values(num_nodes);
  for (int id = 0; id < num_nodes; ++id) values[id].resize(graph_.node(id).num_outputs());
  std::vector<bool> fed_node(num_nodes, false);
  for (size_t i = 0; i < feeds.size(); ++i) {
    const auto& [t, value] = feeds[i];
    BRAZE_RETURN_IF_ERROR(check_tensor(t, "feed", i));
    const TensorType& want = t.type();
    if (value.dtype() != want.dtype || !ShapeMatches(want.shape, value.shape())) {
      return absl::InvalidArgumentError(absl::StrCat("feed for ", Label(t.node()), ": expected ",
                                                     TypeString(want), ", got ",
                                                     TypeString(value.type())));
    }
    values[t.node_id()][t.index()] = value;
    fed_node[t.node_id()] = t.node().num_outputs() == 1;
  }
  for (size_t i = 0; i < fetches.size(); ++i) BRAZE_RETURN_IF_ERROR(check_tensor(fetches[i], "fetch", i));
  for (size_t i = 0; i < targets.size(); ++i) BRAZE_RETURN_IF_ERROR(check_tensor(targets[i], "target", i));

  // Nodes that must run: everything reachable backwards from fetches and targets,
  // stopping at fed values.
  std::vector<bool> needed(num_nodes, false);
  std::vector<int> stack;
  for (const auto* list : {&fetches, &targets}) {
    for (const Tensor& t : *list) {
      if (!values[t.node_id()][t.index()].has_value() || list == &targets) stack.push_back(t.node_id());
    }
  }
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (needed[id] || fed_node[id]) continue;
    needed[id] = true;
    for (const Tensor& in : graph_.node(id).inputs()) {
      if (!values[in.node_id()][in.index()].has_value()) stack.push_back(in.node_id());
    }
  }

  std::lock_guard<std::mutex> lock(state_->mu);
  for (int id = 0; id < num_nodes; ++id) {
    if (!needed[id]) continue;
    const Node& node = graph_.node(id);
    if (node.op() == OpKind::kPlaceholder) {
      return absl::InvalidArgumentError(absl::StrCat("missing feed for ", Label(node)));
    }
    if (node.op() == OpKind::kVariable) {
      auto it = state_->variables.find(id);
      const auto& attrs = node.attrs_as<VariableAttrs>();
      if (it != state_->variables.end()) {
        values[id][0] = it->second;
      } else if (attrs.initial_value) {
        values[id][0] = *attrs.initial_value;
      }
      continue;  // an uninitialized variable fails only when something reads it
    }
    std::vector<HostTensor> inputs;
    std::vector<TensorType> input_types;
    inputs.reserve(node.num_inputs());
    for (int i = 0; i < node.num_inputs(); ++i) {
      const Tensor& in = node.input(i);
      const std::optional<HostTensor>& v = values[in.node_id()][in.index()];
      if (!v.has_value()) {
        const bool assign_target = i == 0 && node.op() == OpKind::kAssign;
        if (in.node().op() == OpKind::kVariable && assign_target) {
          // Assign overwrites the variable: its old value is never read.
          inputs.emplace_back(in.dtype(), in.shape());
          input_types.push_back(in.type());
          continue;
        }
        if (in.node().op() == OpKind::kVariable) {
          return absl::FailedPreconditionError(absl::StrCat(
              "reading uninitialized variable '", in.name(), "' (by ", Label(node), ")"));
        }
        return absl::InternalError(absl::StrCat(Label(node), ": input ", i, " was not computed"));
      }
      inputs.push_back(*v);
      input_types.push_back(v->type());
    }
    auto types = InferOutputTypes(node.op(), node.attrs(), input_types);
    if (!types.ok()) return Annotate(node, types.status());
    auto outputs = RunReferenceKernel(node, inputs, *types);
    if (!outputs.ok()) return Annotate(node, outputs.status());
    if (OpCategoryOf(node.op()) == OpCategory::kState) {
      state_->variables.insert_or_assign(node.input(0).node_id(), (*outputs)[0]);
    }
    for (int o = 0; o < node.num_outputs(); ++o) values[id][o] = std::move((*outputs)[o]);
  }

  std::vector<HostTensor> results;
  results.reserve(fetches.size());
  for (const Tensor& t : fetches) {
    std::optional<HostTensor>& v = values[t.node_id()][t.index()];
    if (!v.has_value()) {
      if (t.node().op() == OpKind::kVariable) {
        return absl::FailedPreconditionError(
            absl::StrCat("reading uninitialized variable '", t.name(), "' (fetched)"));
      }
      return absl::InternalError(absl::StrCat("fetch '", t.name(), "' was not computed"));
    }
    results.push_back(*v);
  }
  return results;
}

}  // namespace braze
