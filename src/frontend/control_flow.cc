// Builders of Cond, While and Scan (braze/control_flow.h): each body is traced once into
// a Graph of its own. Tensors of other graphs that a body uses are captured, as TF's
// functional ops capture them: the enclosing graph's tensor becomes an input of the
// control-flow op and a Placeholder of the body. Every body of one op takes the same
// parameters (operands or carried values, then every capture of any of its bodies), so
// the op has one input list. Everything wrong is left for the node's shape inference
// (ir/control_flow.h) to report, naming the node, so builders never fail half way.
#include "braze/control_flow.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "ir/tracing.h"

namespace braze {
namespace {

// The graph the op is built in: that of its first valid operand, or the innermost body
// being traced that another operand belongs to (a Cond in a Scan's body on a captured
// predicate), or the graph a Function is tracing into when the operand is a program's
// graph (as AddNode does).
Graph* EnclosingGraph(const std::vector<Tensor>& ts) {
  Graph* g = nullptr;
  std::vector<const Graph*> graphs;
  for (const Tensor& t : ts) {
    if (!t.valid()) continue;
    if (g == nullptr) g = t.graph();
    graphs.push_back(t.graph());
  }
  if (g == nullptr) return nullptr;
  if (Graph* body = ir::InnermostTracedBody(g, graphs)) return body;
  Graph* traced = ir::TracingGraph();
  if (traced != nullptr && traced != g && g->id() < ir::TracingFirstNewGraphId()) return traced;
  return g;
}

using TensorKey = std::tuple<const Graph*, int, int>;
TensorKey KeyOf(const Tensor& t) { return {t.graph(), t.node_id(), t.index()}; }

// One body being traced, and what it captured from the enclosing graph.
struct Trace {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  std::vector<Tensor> params;
  std::vector<Tensor> results;
  std::map<TensorKey, Tensor> captured;  // enclosing graph's tensor -> its Placeholder
  std::vector<Tensor> capture_order;     // enclosing graph's tensors, first use first
};

using TraceFn = std::function<std::vector<Tensor>(Graph& g, const std::vector<Tensor>& params)>;

// A tensor of the enclosing graph `outer` standing for `t` (t itself, or what `outer`'s
// own capture makes of it: a Function's variable, a parent body's parameter).
absl::StatusOr<Tensor> InEnclosing(Graph& outer, const Tensor& t, const std::string& op_name) {
  absl::StatusOr<Tensor> o = outer.Capture(t);
  if (!o.ok()) return o.status();
  if (!o->valid() || o->graph() != &outer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", t.name(), "' comes from another graph than the one '", op_name,
        "' is built in (a body may use tensors of its op's graph, which become the op's inputs)"));
  }
  return *o;
}

// Bodies may not hold state: a Variable or an Assign would run per iteration, and its
// value would commit nowhere (docs/CONTROL_FLOW.md).
void RefuseState(Graph& g, const std::string& body_name) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op() == OpKind::kVariable || OpCategoryOf(n.op()) == OpCategory::kState) {
      g.RecordError(absl::InvalidArgumentError(absl::StrCat(
          body_name, ": node '", n.name(), "' (", n.op_name(),
          "): a control-flow body may not create or assign a Variable (assign the op's "
          "result after it)")));
      return;
    }
  }
}

Trace TraceBody(Graph& outer, const std::string& op_name, const std::string& body_name,
                const std::vector<TensorType>& param_types,
                const std::vector<std::string>& param_names, const TraceFn& fn) {
  Trace tr;
  Graph& g = *tr.graph;
  // The scopes around the op apply to its body: its ops compile (or not) as the op's
  // neighbours would, on the same device.
  g.mutable_jit_frames() = outer.jit_frames();
  g.set_device(outer.device());
  // So does the mixed-precision policy (PrecisionScope, FunctionOptions::precision): a
  // body's matmuls compute in 16 bits like the enclosing graph's (ir/autocast.h).
  g.set_compute_dtype(outer.compute_dtype());
  for (size_t i = 0; i < param_types.size(); ++i) {
    tr.params.push_back(Placeholder(g, param_types[i].dtype, param_types[i].shape, param_names[i]));
  }
  Trace* self = &tr;
  g.set_capture([self, &outer, &g, op_name](const Tensor& t) -> absl::StatusOr<Tensor> {
    absl::StatusOr<Tensor> o = InEnclosing(outer, t, op_name);
    if (!o.ok()) return o.status();
    auto it = self->captured.find(KeyOf(*o));
    if (it != self->captured.end()) return it->second;
    Tensor ph = Placeholder(g, o->dtype(), o->shape(),
                            absl::StrCat("capture_", self->capture_order.size()));
    self->captured[KeyOf(*o)] = ph;
    self->capture_order.push_back(*o);
    return ph;
  });
  try {
    ir::BodyTracingScope tracing(&g);
    tr.results = fn(g, tr.params);
  } catch (const std::exception& e) {
    g.RecordError(absl::InvalidArgumentError(absl::StrCat(body_name, " threw: ", e.what())));
  } catch (...) {
    g.RecordError(absl::InvalidArgumentError(absl::StrCat(body_name, " threw an exception")));
  }
  for (Tensor& r : tr.results) {  // a result of the enclosing graph is a capture too
    if (!r.valid() || r.graph() == &g) continue;
    absl::StatusOr<Tensor> c = g.Capture(r);
    if (c.ok()) {
      r = *c;
    } else {
      g.RecordError(
          absl::InvalidArgumentError(absl::StrCat(body_name, " result: ", c.status().message())));
    }
  }
  g.set_capture(nullptr);
  g.set_compute_dtype(DType::kF32);  // the Casts below, and later clones, are as written
  RefuseState(g, body_name);
  return tr;
}

// Whether `a` and `b` are the pair of dtypes a precision policy swaps (f32 and the 16-bit
// compute dtype), one either way.
bool PolicyPair(DType a, DType b) {
  return (a == DType::kF32 && Is16BitFloat(b)) || (b == DType::kF32 && Is16BitFloat(a));
}

// Under a precision policy, a carried value the body computed in 16 bits (a matmul's
// result, and the elementwise ops that follow it) goes back to the carried dtype, as the
// policy's ops leave f32 values f32 across an assignment: the carry keeps its dtype.
// Without a policy a changed dtype stays an error (the node's shape inference names it).
void CastCarriedBack(Graph& outer, Trace& tr, size_t num_carried) {
  if (outer.compute_dtype() == DType::kF32) return;
  Graph& g = *tr.graph;
  for (size_t i = 0; i < num_carried && i < tr.results.size() && i < tr.params.size(); ++i) {
    Tensor& r = tr.results[i];
    if (!r.valid() || r.graph() != &g || !r.node().status().ok()) continue;
    const DType want = tr.params[i].dtype();
    if (PolicyPair(r.dtype(), want)) r = Cast(r, want);
  }
}

// Under a precision policy, the branches of a Cond may differ only where one computed in
// 16 bits and the other did not: the 16-bit result is widened (exactly) to f32 so both
// return the same dtype.
void AgreeBranches(Graph& outer, Trace& then_t, Trace& else_t) {
  if (outer.compute_dtype() == DType::kF32) return;
  const size_t n = std::min(then_t.results.size(), else_t.results.size());
  for (size_t i = 0; i < n; ++i) {
    Tensor& a = then_t.results[i];
    Tensor& b = else_t.results[i];
    if (!a.valid() || !b.valid() || a.graph() != then_t.graph.get() ||
        b.graph() != else_t.graph.get() || !a.node().status().ok() || !b.node().status().ok() ||
        !PolicyPair(a.dtype(), b.dtype())) {
      continue;
    }
    Tensor& narrow = Is16BitFloat(a.dtype()) ? a : b;
    narrow = Cast(narrow, DType::kF32);
  }
}

// Every capture of `traces` in first-use order; each body gets a parameter for each (a
// Placeholder it does not read, for another body's capture).
std::vector<Tensor> UnifyCaptures(std::vector<Trace*> traces) {
  std::vector<Tensor> all;
  std::map<TensorKey, bool> seen;
  for (Trace* tr : traces) {
    for (const Tensor& o : tr->capture_order) {
      if (seen.emplace(KeyOf(o), true).second) all.push_back(o);
    }
  }
  for (Trace* tr : traces) {
    for (const Tensor& o : all) {
      auto it = tr->captured.find(KeyOf(o));
      tr->params.push_back(it != tr->captured.end()
                               ? it->second
                               : Placeholder(*tr->graph, o.dtype(), o.shape(), "unused_capture"));
    }
  }
  return all;
}

std::shared_ptr<const Body> MakeBody(Trace& tr, std::string name) {
  auto b = std::make_shared<Body>();
  b->graph = tr.graph;
  b->params = tr.params;
  b->results = tr.results;
  b->name = std::move(name);
  return b;
}

std::vector<TensorType> TypesOf(const std::vector<Tensor>& ts) {
  std::vector<TensorType> out;
  for (const Tensor& t : ts) out.push_back(t.valid() ? t.type() : TensorType{DType::kF32, {}});
  return out;
}

std::vector<std::string> Names(const char* base, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(absl::StrCat(base, "_", i));
  return out;
}

// The node's outputs; `count` handles to its (one) output when it has an error, so the
// caller can index them (every use then reports the node's error).
std::vector<Tensor> OutputsOf(Graph& g, const Tensor& t, size_t count) {
  if (t.node().status().ok()) return g.Outputs(t);
  return std::vector<Tensor>(std::max<size_t>(count, 1), t);
}

}  // namespace

std::vector<Tensor> Cond(Tensor pred, BranchFn then_fn, BranchFn else_fn,
                         std::vector<Tensor> operands, const std::string& name) {
  std::vector<Tensor> all = {pred};
  all.insert(all.end(), operands.begin(), operands.end());
  Graph* g = EnclosingGraph(all);
  // No tensor among pred and the operands leaves no graph to record the error on (as for
  // While): invalid Tensors that every use reports, at least one, so that result[0] is
  // safe to read (the result was empty).
  if (g == nullptr) return std::vector<Tensor>(std::max<size_t>(operands.size(), 1));
  const std::vector<TensorType> types = TypesOf(operands);
  const auto names = Names("operand", operands.size());
  Trace then_t = TraceBody(*g, name, "then", types, names, then_fn);
  Trace else_t = TraceBody(*g, name, "else", types, names, else_fn);
  AgreeBranches(*g, then_t, else_t);
  const std::vector<Tensor> captures = UnifyCaptures({&then_t, &else_t});
  ControlFlowAttrs a;
  a.bodies = {MakeBody(then_t, "then"), MakeBody(else_t, "else")};
  a.num_carried = static_cast<int>(operands.size());
  all.insert(all.end(), captures.begin(), captures.end());
  Tensor t = g->AddNode(OpKind::kCond, std::move(all), std::move(a), name);
  return OutputsOf(*g, t, std::max(then_t.results.size(), else_t.results.size()));
}

ScanResult Scan(ScanFn fn, std::vector<Tensor> init, std::vector<Tensor> elems,
                const ScanOptions& options) {
  std::vector<Tensor> all = init;
  all.insert(all.end(), elems.begin(), elems.end());
  Graph* g = EnclosingGraph(all);
  if (g == nullptr) {  // as in Cond: invalid Tensors, one per carry and one stacked output
    ScanResult r;
    r.carry.resize(init.size());
    r.stacked.resize(1);
    return r;
  }
  std::vector<TensorType> types = TypesOf(init);
  std::vector<std::string> names = Names("carry", init.size());
  for (size_t e = 0; e < elems.size(); ++e) {
    TensorType slice = TypesOf({elems[e]})[0];
    if (!slice.shape.empty()) slice.shape.erase(slice.shape.begin());
    types.push_back(slice);
    names.push_back(absl::StrCat("elem_", e));
  }
  const size_t nc = init.size();
  size_t num_outputs = 0;
  // Nothing to scan (no elems, or a scalar one) is the node's error, which its shape
  // inference names; fn is not called then: handed no slices, or a slice of a scalar, a
  // body reading slices[0] crashed the program.
  const bool scannable =
      !elems.empty() && std::none_of(elems.begin(), elems.end(),
                                     [](const Tensor& e) { return e.valid() && e.rank() == 0; });
  Trace tr = TraceBody(*g, options.name, "fn", types, names,
                       [&](Graph& body, const std::vector<Tensor>& params) {
                         if (!scannable) return std::vector<Tensor>{};
                         std::vector<Tensor> carry(params.begin(), params.begin() + nc);
                         std::vector<Tensor> slices(params.begin() + nc, params.end());
                         ScanStep step = fn(body, carry, slices);
                         num_outputs = step.outputs.size();
                         std::vector<Tensor> results = std::move(step.carry);
                         results.insert(results.end(), step.outputs.begin(), step.outputs.end());
                         return results;
                       });
  CastCarriedBack(*g, tr, nc);
  const std::vector<Tensor> captures = UnifyCaptures({&tr});
  ControlFlowAttrs a;
  a.bodies = {MakeBody(tr, "fn")};
  a.num_carried = static_cast<int>(nc);
  a.num_elems = static_cast<int>(elems.size());
  a.reverse = options.reverse;
  all.insert(all.end(), captures.begin(), captures.end());
  Tensor t = g->AddNode(OpKind::kScan, std::move(all), std::move(a), options.name);
  const std::vector<Tensor> outs = OutputsOf(*g, t, 2 * nc + num_outputs);
  ScanResult r;
  r.carry.assign(outs.begin(), outs.begin() + nc);
  r.stacked.assign(outs.begin() + nc, outs.begin() + nc + num_outputs);
  return r;
}

std::vector<Tensor> While(WhileCondFn cond_fn, WhileBodyFn body_fn, std::vector<Tensor> loop_vars,
                          int64_t max_iterations, const std::string& name) {
  Graph* g = EnclosingGraph(loop_vars);
  // No loop variable that is a tensor (none at all: tf.while_loop refuses them too) leaves
  // no graph to record the error on. The result was empty, with no error, and a caller
  // reading result[0] read past it: now it is an invalid Tensor per loop variable (one
  // for none), which every use reports ("... is not a tensor").
  if (g == nullptr) return std::vector<Tensor>(std::max<size_t>(loop_vars.size(), 1));
  const std::vector<TensorType> types = TypesOf(loop_vars);
  const auto names = Names("var", loop_vars.size());
  Trace cond_t =
      TraceBody(*g, name, "cond", types, names, [&](Graph& body, const std::vector<Tensor>& vars) {
        return std::vector<Tensor>{cond_fn(body, vars)};
      });
  Trace body_t = TraceBody(*g, name, "body", types, names, body_fn);
  CastCarriedBack(*g, body_t, loop_vars.size());
  const std::vector<Tensor> captures = UnifyCaptures({&cond_t, &body_t});
  ControlFlowAttrs a;
  a.bodies = {MakeBody(cond_t, "cond"), MakeBody(body_t, "body")};
  a.num_carried = static_cast<int>(loop_vars.size());
  a.max_iterations = max_iterations;
  std::vector<Tensor> all = loop_vars;
  all.insert(all.end(), captures.begin(), captures.end());
  Tensor t = g->AddNode(OpKind::kWhile, std::move(all), std::move(a), name);
  return OutputsOf(*g, t, loop_vars.size());
}

}  // namespace braze
