// Reverse-mode differentiation over the graph. Node ids are a topological order, so one
// sweep from the highest id down visits every consumer before its producers: by the
// time a node is reached, every contribution to its output's gradient exists and is
// summed, then its gradient function pushes contributions to its inputs.
//
// Only nodes on a path from some x to some y are differentiated, and only inputs that
// lie on such a path (and are floating) get a gradient built, so no dead gradient ops
// are left behind for ordinary calls.
#include "braze/gradients.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_ops.h"
#include "autodiff/grad_util.h"
#include "braze/ops.h"
#include "braze/status.h"

namespace braze {
namespace {

using autodiff_internal::CheckGradientSupported;
using autodiff_internal::ControlFlowGradient;
using autodiff_internal::HasGradient;
using autodiff_internal::OnesLike;
using autodiff_internal::OpGradient;
using autodiff_internal::ZerosLike;

// A handle that names an existing, well-built output of `g`.
absl::Status CheckHandle(const Tensor& t, const Graph& g, const char* what, size_t i) {
  const std::string label = absl::StrCat("Gradients: ", what, "[", i, "]");
  if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat(label, " is not a tensor"));
  if (t.graph() != &g) {
    return absl::InvalidArgumentError(absl::StrCat(label, " comes from another graph than ys[0]"));
  }
  if (!g.HasOutput(t)) {
    return absl::InvalidArgumentError(absl::StrCat(label, " does not name an output of the graph"));
  }
  if (!t.node().status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, " ('", t.name(), "') is invalid: ", t.node().status().message()));
  }
  return absl::OkStatus();
}

bool ShapesCompatible(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (a[d] >= 0 && b[d] >= 0 && a[d] != b[d]) return false;
  }
  return true;
}

// grad_y as the seed of y. The build checked their shapes where both dims are known;
// where either is not, grad_y may broadcast against y at run time (a 1 where y has 4, or
// y's 1 where grad_y has 2). The seed is then what sum(y * grad_y) gives under
// broadcasting: grad_y spread to the common shape (a Select of it on both sides: its
// exact bits, NaN kept) and summed back to y's shape when the Run knows it
// (SumToShapeOf), so every gradient has its x's shape; shapes that do not broadcast fail
// the Run in that Select, naming it.
Tensor SeedOf(const Tensor& grad_y, const Tensor& y) {
  if (IsFullyDefined(grad_y.shape()) && IsFullyDefined(y.shape())) return grad_y;
  return SumToShapeOf(Select(Equal(y, y), grad_y, grad_y), y);
}

absl::Status CheckArguments(const std::vector<Tensor>& ys, const std::vector<Tensor>& xs,
                            const std::vector<Tensor>& grad_ys) {
  if (ys.empty()) return absl::InvalidArgumentError("Gradients: ys is empty");
  if (!ys[0].valid()) return absl::InvalidArgumentError("Gradients: ys[0] is not a tensor");
  const Graph& g = *ys[0].graph();
  for (size_t i = 0; i < ys.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(CheckHandle(ys[i], g, "ys", i));
    if (!IsFloating(ys[i].dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradients: ys[", i, "] ('", ys[i].name(), "') is ",
                       TypeString(ys[i].type()), "; only floating tensors can be differentiated"));
    }
  }
  for (size_t i = 0; i < xs.size(); ++i) BRAZE_RETURN_IF_ERROR(CheckHandle(xs[i], g, "xs", i));
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gradients: ", grad_ys.size(), " grad_ys given for ", ys.size(), " ys"));
  }
  for (size_t i = 0; i < grad_ys.size(); ++i) {
    BRAZE_RETURN_IF_ERROR(CheckHandle(grad_ys[i], g, "grad_ys", i));
    if (grad_ys[i].dtype() != ys[i].dtype() ||
        !ShapesCompatible(grad_ys[i].shape(), ys[i].shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradients: grad_ys[", i, "] is ", TypeString(grad_ys[i].type()), " but ys[",
                       i, "] ('", ys[i].name(), "') is ", TypeString(ys[i].type())));
    }
  }
  return absl::OkStatus();
}

// Pushes, for its lifetime, the JIT frame that the gradient ops of forward op `fwd`
// inherit: its compile decision and scope, or `<scope>_grad_<name>` when the forward op
// asked for separate_compiled_gradients. Forward ops outside any scope push nothing, so
// their gradient ops see whatever scope the caller has active. The frame goes on top of
// the caller's and is removed by token, leaving the caller's stack as it was.
class GradientJitFrame {
 public:
  GradientJitFrame(Graph& g, const Node& fwd, const std::string& name) {
    const JitInfo& jit = fwd.jit();
    if (!jit.compile.has_value()) return;
    JitScopeFrame frame;
    frame.scope =
        jit.separate_compiled_gradients ? absl::StrCat(jit.scope, "_grad_", name) : jit.scope;
    frame.compile = *jit.compile;
    // Carried over so that gradients of these gradients separate again.
    frame.separate_compiled_gradients = jit.separate_compiled_gradients;
    pushed_.emplace(g, std::move(frame));
  }

 private:
  std::optional<autodiff_internal::ScopedJitFrame> pushed_;
};

using TensorKey = std::pair<int, int>;  // (node id, output index)

TensorKey KeyOf(const Tensor& t) { return {t.node_id(), t.index()}; }

// Whether a gradient can flow out of `node`: its one output is floating (a control-flow
// op, cf issue 40: any of its outputs is).
bool HasFloatingOutput(const Node& node) {
  if (OpCategoryOf(node.op()) == OpCategory::kControlFlow) {
    for (const TensorType& t : node.outputs()) {
      if (IsFloating(t.dtype)) return true;
    }
    return false;
  }
  return node.num_outputs() == 1 && IsFloating(node.output(0).dtype);
}

// In a Function's body the xs may be variables of the program's graph: the body's
// graph captures them (Graph::Capture), and gradients are taken for what stands for
// them there.
absl::StatusOr<std::vector<Tensor>> CapturedIn(const std::vector<Tensor>& ys,
                                               const std::vector<Tensor>& xs) {
  if (ys.empty() || !ys[0].valid()) return xs;
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    absl::StatusOr<Tensor> x = ys[0].graph()->Capture(xs[i]);
    if (!x.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradients: xs[", i, "]: ", x.status().message()));
    }
    out.push_back(*x);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Gradients(const std::vector<Tensor>& ys,
                                              const std::vector<Tensor>& xs_given,
                                              const std::vector<Tensor>& grad_ys,
                                              std::string_view name) {
  BRAZE_ASSIGN_OR_RETURN(const std::vector<Tensor> xs, CapturedIn(ys, xs_given));
  BRAZE_RETURN_IF_ERROR(CheckArguments(ys, xs, grad_ys));
  Graph& g = *ys[0].graph();
  const std::string call_name = name.empty() ? "gradients" : std::string(name);
  const int num_forward = g.num_nodes();

  // from_x: the node is an x or a gradient can reach an x from it (through floating
  // tensors and ops that have a gradient); to_y: some y needs it.
  std::vector<bool> from_x(num_forward, false), to_y(num_forward, false);
  for (const Tensor& x : xs) from_x[x.node_id()] = true;
  for (int id = 0; id < num_forward; ++id) {
    const Node& node = g.node(id);
    if (from_x[id] || !HasFloatingOutput(node) || !node.status().ok() || !HasGradient(node)) {
      continue;
    }
    for (const Tensor& in : node.inputs()) {
      if (from_x[in.node_id()] && IsFloating(in.dtype())) from_x[id] = true;
    }
  }
  for (const Tensor& y : ys) to_y[y.node_id()] = true;
  for (int id = num_forward - 1; id >= 0; --id) {
    if (!to_y[id]) continue;
    for (const Tensor& in : g.node(id).inputs()) to_y[in.node_id()] = true;
  }
  auto on_path = [&](int id) { return from_x[id] && to_y[id]; };
  // Which inputs of `node` get a gradient built: those on a path and floating.
  auto needs_of = [&](const Node& node) {
    std::vector<bool> needs(node.num_inputs());
    for (int i = 0; i < node.num_inputs(); ++i) {
      needs[i] = from_x[node.input(i).node_id()] && IsFloating(node.input(i).dtype());
    }
    return needs;
  };
  auto any = [](const std::vector<bool>& v) {
    return std::find(v.begin(), v.end(), true) != v.end();
  };

  // Everything that can fail is checked before the first op is built. (No node with a
  // build error is on a path: AddNode marks every consumer of one as failed too, and the
  // ys were checked.)
  for (int id = 0; id < num_forward; ++id) {
    if (on_path(id) && any(needs_of(g.node(id)))) {
      BRAZE_RETURN_IF_ERROR(CheckGradientSupported(g.node(id)));
    }
  }

  NameScope name_scope(g, call_name);
  std::map<TensorKey, std::vector<Tensor>> pending;
  // Sums the contributions to one tensor (Add, as there is no AddN) and keeps the sum.
  auto aggregate = [&](const TensorKey& key) -> Tensor {
    auto it = pending.find(key);
    if (it == pending.end() || it->second.empty()) return Tensor();
    std::vector<Tensor>& parts = it->second;
    Tensor sum = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) sum = Add(sum, parts[k]);
    parts = {sum};
    return sum;
  };

  for (size_t i = 0; i < ys.size(); ++i) {
    if (!from_x[ys[i].node_id()]) continue;  // depends on no x: its seed would be dead
    // A seed is a gradient op of y's: built in y's gradient scope, it fuses into the
    // gradient ops that consume it.
    GradientJitFrame frame(g, ys[i].node(), call_name);
    pending[KeyOf(ys[i])].push_back(grad_ys.empty() ? OnesLike(ys[i]) : SeedOf(grad_ys[i], ys[i]));
  }

  for (int id = num_forward - 1; id >= 0; --id) {
    const Node& node = g.node(id);
    bool seeded = false;
    for (int o = 0; o < node.num_outputs(); ++o) seeded = seeded || pending.count({id, o});
    if (!on_path(id) || !seeded) continue;
    const std::vector<bool> needs = needs_of(node);
    if (!any(needs)) continue;  // an x that depends on no other x: nothing to pass on
    GradientJitFrame frame(g, node, call_name);
    std::vector<Tensor> dxs;
    if (OpCategoryOf(node.op()) == OpCategory::kControlFlow) {  // cf (issue 40): outputs
      std::vector<Tensor> dys;
      for (int o = 0; o < node.num_outputs(); ++o) dys.push_back(aggregate({id, o}));
      BRAZE_ASSIGN_OR_RETURN(dxs, ControlFlowGradient(g, node, dys, needs));
    } else {
      BRAZE_ASSIGN_OR_RETURN(dxs, OpGradient(g, node, aggregate({id, 0}), needs));
    }
    for (int i = 0; i < node.num_inputs(); ++i) {
      if (dxs[i].valid()) pending[KeyOf(node.input(i))].push_back(dxs[i]);
    }
  }

  std::vector<Tensor> result;
  for (const Tensor& x : xs) {
    Tensor dx;
    if (pending.count(KeyOf(x))) {
      GradientJitFrame frame(g, x.node(), call_name);
      dx = aggregate(KeyOf(x));
    }
    // The unconnected rule (see gradients.h): zeros of x's dtype and shape.
    result.push_back(dx.valid() ? dx : ZerosLike(x));
  }

  // A gradient op that failed to build would poison every later Run of the graph; say
  // so here, naming it, rather than hand back tensors that cannot run.
  for (int id = num_forward; id < g.num_nodes(); ++id) {
    if (!g.node(id).status().ok()) {
      return absl::InternalError(
          absl::StrCat("Gradients built an invalid op: ", g.node(id).status().message()));
    }
  }
  return result;
}

}  // namespace braze
