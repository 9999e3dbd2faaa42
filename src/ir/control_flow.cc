// Shape inference and checks of Cond, While and Scan (ir/control_flow.h).
#include "ir/control_flow.h"

#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "braze/status.h"

namespace braze {
namespace ir {
namespace {

using Types = std::vector<TensorType>;

absl::Status Invalid(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// `a` and `b` merged: a dim known in either is kept (they are compatible).
Shape Merge(const Shape& a, const Shape& b) {
  Shape out = a;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0) out[i] = b[i];
  }
  return out;
}

absl::Status CheckBody(const Body& body) {
  if (body.graph == nullptr) return Invalid(absl::StrCat(body.name, " has no graph"));
  const Graph& g = *body.graph;
  if (!g.status().ok()) return Invalid(absl::StrCat(body.name, ": ", g.status().message()));
  for (size_t i = 0; i < body.results.size(); ++i) {
    const Tensor& r = body.results[i];
    if (!r.valid()) {
      return Invalid(
          absl::StrCat(body.name, " result ", i, " is not a tensor", internal::kNotATensorHint));
    }
    if (r.graph() != &g) {
      return Invalid(
          absl::StrCat(body.name, " result ", i, " ('", r.name(), "') comes from another graph"));
    }
    if (!g.HasOutput(r)) {
      return Invalid(absl::StrCat(body.name, " result ", i,
                                  " names no output of its graph (node id ", r.node_id(),
                                  ", output ", r.index(), ")"));
    }
  }
  return absl::OkStatus();
}

// The carried values' types stay as they were: `what` is "carried value" or "loop variable".
absl::Status CheckCarried(const Body& body, absl::Span<const TensorType> before,
                          absl::Span<const TensorType> after, const char* what) {
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].dtype != after[i].dtype || !ShapesCompatible(before[i].shape, after[i].shape)) {
      return Invalid(absl::StrCat(body.name, " changes ", what, " ", i, " from ",
                                  TypeString(before[i]), " to ", TypeString(after[i]),
                                  " (a carried value keeps its dtype and shape)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Types> CondTypes(const ControlFlowAttrs& a, absl::Span<const TensorType> in) {
  if (in.empty() || in[0].dtype != DType::kBool || !in[0].shape.empty()) {
    return Invalid(absl::StrCat("Cond's predicate must be a scalar bool, got ",
                                in.empty() ? std::string("nothing") : TypeString(in[0])));
  }
  if (a.bodies.size() != 2) return Invalid("Cond needs a then and an else branch");
  const Body& then_b = *a.bodies[0];
  const Body& else_b = *a.bodies[1];
  BRAZE_ASSIGN_OR_RETURN(Types then_t, InferBodyTypes(then_b, in.subspan(1)));
  BRAZE_ASSIGN_OR_RETURN(Types else_t, InferBodyTypes(else_b, in.subspan(1)));
  if (then_t.size() != else_t.size()) {
    return Invalid(absl::StrCat("the ", then_b.name, " branch returns ", then_t.size(),
                                " tensors, the ", else_b.name, " branch ", else_t.size()));
  }
  Types out;
  for (size_t i = 0; i < then_t.size(); ++i) {
    if (then_t[i].dtype != else_t[i].dtype || !ShapesCompatible(then_t[i].shape, else_t[i].shape)) {
      return Invalid(absl::StrCat("output ", i, ": the ", then_b.name, " branch gives ",
                                  TypeString(then_t[i]), ", the ", else_b.name, " branch ",
                                  TypeString(else_t[i])));
    }
    out.push_back({then_t[i].dtype, Merge(then_t[i].shape, else_t[i].shape)});
  }
  return out;
}

absl::StatusOr<Types> ScanTypes(const ControlFlowAttrs& a, absl::Span<const TensorType> in) {
  const size_t nc = a.num_carried, ne = a.num_elems;
  if (a.bodies.size() != 1) return Invalid("Scan needs one body");
  if (ne < 1) return Invalid("Scan needs at least one sequence to scan (elems)");
  if (in.size() < nc + ne) return Invalid("Scan has fewer inputs than its carry and elems");
  int64_t length = -1;
  Types params(in.begin(), in.end());
  for (size_t e = nc; e < nc + ne; ++e) {
    if (in[e].shape.empty()) {
      return Invalid(absl::StrCat("Scan's elems ", e - nc, " is a scalar (", TypeString(in[e]),
                                  "): a sequence has a leading axis"));
    }
    const int64_t n = in[e].shape[0];
    if (n >= 0 && length >= 0 && n != length) {
      return Invalid(absl::StrCat("Scan's elems have different lengths: ", length, " and ", n,
                                  " (elems ", e - nc, " is ", TypeString(in[e]), ")"));
    }
    if (n >= 0) length = n;
    params[e].shape.erase(params[e].shape.begin());
  }
  const Body& fn = *a.bodies[0];
  BRAZE_ASSIGN_OR_RETURN(Types results, InferBodyTypes(fn, params));
  if (results.size() < nc) {
    return Invalid(
        absl::StrCat(fn.name, " returns ", results.size(), " carried values; Scan carries ", nc));
  }
  BRAZE_RETURN_IF_ERROR(CheckCarried(fn, in.subspan(0, nc), results, "carried value"));
  Types out(in.begin(), in.begin() + nc);
  for (size_t i = 0; i < nc; ++i) out[i].shape = Merge(in[i].shape, results[i].shape);
  for (size_t j = nc; j < results.size(); ++j) {
    Shape s = results[j].shape;
    s.insert(s.begin(), length);
    out.push_back({results[j].dtype, s});
  }
  for (size_t i = 0; i < nc; ++i) {
    Shape s = out[i].shape;
    s.insert(s.begin(), length);
    out.push_back({out[i].dtype, s});
  }
  return out;
}

absl::StatusOr<Types> WhileTypes(const ControlFlowAttrs& a, absl::Span<const TensorType> in) {
  const size_t nv = a.num_carried;
  if (a.bodies.size() != 2) return Invalid("While needs a cond and a body");
  if (in.size() < nv) return Invalid("While has fewer inputs than loop variables");
  if (a.max_iterations < -1) {
    return Invalid(absl::StrCat("While's max_iterations must be >= 0 or -1 (no bound), got ",
                                a.max_iterations));
  }
  const Body& cond = *a.bodies[0];
  const Body& body = *a.bodies[1];
  BRAZE_ASSIGN_OR_RETURN(Types c, InferBodyTypes(cond, in));
  if (c.size() != 1 || c[0].dtype != DType::kBool || !c[0].shape.empty()) {
    return Invalid(absl::StrCat(cond.name, " must return one scalar bool, got ", c.size(),
                                " tensors",
                                c.empty() ? "" : absl::StrCat(", the first ", TypeString(c[0]))));
  }
  BRAZE_ASSIGN_OR_RETURN(Types b, InferBodyTypes(body, in));
  if (b.size() != nv) {
    return Invalid(
        absl::StrCat(body.name, " returns ", b.size(), " loop variables, While has ", nv));
  }
  BRAZE_RETURN_IF_ERROR(CheckCarried(body, in.subspan(0, nv), b, "loop variable"));
  Types out(in.begin(), in.begin() + nv);
  for (size_t i = 0; i < nv; ++i) out[i].shape = Merge(in[i].shape, b[i].shape);
  return out;
}

}  // namespace

bool ShapesCompatible(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  }
  return true;
}

int ScanNumStepOutputs(const ControlFlowAttrs& a) {
  return static_cast<int>(a.bodies[0]->results.size()) - a.num_carried;
}

absl::StatusOr<Types> InferBodyTypes(const Body& body, absl::Span<const TensorType> params) {
  BRAZE_RETURN_IF_ERROR(CheckBody(body));
  if (params.size() != body.params.size()) {
    return Invalid(
        absl::StrCat(body.name, " takes ", body.params.size(), " values, given ", params.size()));
  }
  bool declared = true;
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorType& want = body.params[i].type();
    if (params[i].dtype != want.dtype || !ShapesCompatible(want.shape, params[i].shape)) {
      return Invalid(absl::StrCat(body.name, " parameter ", i, " was traced as ", TypeString(want),
                                  ", given ", TypeString(params[i])));
    }
    declared = declared && params[i] == want;
  }
  Types out;
  if (declared) {
    for (const Tensor& r : body.results) out.push_back(r.type());
    return out;
  }
  const Graph& g = *body.graph;
  std::unordered_map<int, size_t> param_of;
  for (size_t i = 0; i < body.params.size(); ++i) param_of[body.params[i].node_id()] = i;
  const std::vector<bool> needed = BodyNodesNeeded(body);
  std::vector<Types> types(g.num_nodes());
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!needed[id]) continue;
    const Node& n = g.node(id);
    if (auto it = param_of.find(id); it != param_of.end()) {
      types[id] = {params[it->second]};
      continue;
    }
    Types ins;
    for (const Tensor& in : n.inputs()) ins.push_back(types[in.node_id()][in.index()]);
    auto t = InferOutputTypes(n.op(), n.attrs(), ins);
    if (!t.ok()) {
      return Invalid(absl::StrCat(body.name, ": node '", n.name(), "' (", n.op_name(),
                                  "): ", t.status().message()));
    }
    types[id] = *std::move(t);
  }
  for (const Tensor& r : body.results) out.push_back(types[r.node_id()][r.index()]);
  return out;
}

absl::StatusOr<Types> ControlFlowTypes(OpKind op, const ControlFlowAttrs& a,
                                       absl::Span<const TensorType> in) {
  for (const auto& b : a.bodies) {
    if (b == nullptr) return Invalid(absl::StrCat(OpName(op), " has a missing body"));
  }
  if (op == OpKind::kCond) return CondTypes(a, in);
  if (op == OpKind::kScan) return ScanTypes(a, in);
  if (op == OpKind::kWhile) return WhileTypes(a, in);
  return absl::InternalError(absl::StrCat(OpName(op), " is not a control-flow op"));
}

std::vector<bool> BodyNodesNeeded(const Body& body) {
  const Graph& g = *body.graph;
  std::vector<bool> needed(g.num_nodes(), false);
  std::vector<int> stack;
  for (const Tensor& r : body.results) stack.push_back(r.node_id());
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    for (const Tensor& in : g.node(id).inputs()) stack.push_back(in.node_id());
  }
  return needed;
}

}  // namespace ir
}  // namespace braze
