// cf (issue 40): the gradients of Cond, Scan and bounded While (docs/CONTROL_FLOW.md).
//
// Each gradient body is a graph of its own: the forward body cloned into it (its params
// bound to Placeholders), then Gradients taken there, so a body's gradient is built by
// the same rules as any graph's (and a control-flow op nested in a body differentiates
// recursively). Every forward input a gradient body reads is passed to it explicitly.
//   Cond(p, a..)          -> Cond(p, a.., dy..) over the branches' gradients: the taken
//                            branch's gradient runs; the other's would give zeros
//   Scan(c0, xs, k)       -> Scan(reverse, init {dc_T, 0 for each k}, elems {xs, the
//                            forward's carries per step, dys, the kept carries' dys
//                            in a second-order gradient}, captures k): each step
//                            turns dc_{t+1} into dc_t, adds the step's dk and stacks dx_t
//   While(v, bound N)     -> replayed as a Scan over N steps carrying (v, active), where
//                            active = active && cond(v), v = active ? body(v) : v, and
//                            that Scan's gradient taken (the forward values are recomputed
//                            once; an unbounded While has no gradient: Unimplemented)
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_ops.h"
#include "autodiff/grad_util.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "braze/status.h"
#include "ir/control_flow.h"

namespace braze {
namespace autodiff_internal {
namespace {

using Types = std::vector<TensorType>;

std::string Label(const Node& n) {
  return absl::StrCat("node '", n.name(), "' (", n.op_name(), ")");
}

// The tensors of `body`'s results rebuilt in `dst` with its params bound to `params`: the
// nodes the results need, in order, with their attributes and JIT marks.
absl::StatusOr<std::vector<Tensor>> CloneBody(Graph& dst, const Body& body,
                                              const std::vector<Tensor>& params) {
  const Graph& src = *body.graph;
  const std::vector<bool> needed = ir::BodyNodesNeeded(body);
  std::vector<std::vector<Tensor>> map(src.num_nodes());
  for (size_t i = 0; i < body.params.size(); ++i) map[body.params[i].node_id()] = {params[i]};
  for (int id = 0; id < src.num_nodes(); ++id) {
    if (!needed[id] || !map[id].empty()) continue;
    const Node& n = src.node(id);
    std::vector<Tensor> ins;
    for (const Tensor& in : n.inputs()) ins.push_back(map[in.node_id()][in.index()]);
    Tensor t = dst.AddNode(n.op(), std::move(ins), n.attrs(), n.name());
    dst.mutable_node(t.node_id()).mutable_jit() = n.jit();
    if (!t.node().status().ok()) return t.node().status();
    map[id] = dst.Outputs(t);
  }
  std::vector<Tensor> out;
  for (const Tensor& r : body.results) out.push_back(map[r.node_id()][r.index()]);
  return out;
}

std::vector<Tensor> PlaceholdersFor(Graph& g, const Types& types, const char* name) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < types.size(); ++i) {
    out.push_back(Placeholder(g, types[i].dtype, types[i].shape, absl::StrCat(name, "_", i)));
  }
  return out;
}

// Gradients of `ys` (seeded with `dys`; a y that is not floating or has no dy is left
// out) for each of `xs` (zeros where unconnected or not floating).
absl::StatusOr<std::vector<Tensor>> BodyGradients(const std::vector<Tensor>& ys,
                                                  const std::vector<Tensor>& dys,
                                                  const std::vector<Tensor>& xs) {
  std::vector<Tensor> fy, fdy;
  for (size_t j = 0; j < ys.size(); ++j) {
    if (dys[j].valid() && IsFloating(ys[j].dtype())) fy.push_back(ys[j]), fdy.push_back(dys[j]);
  }
  if (fy.empty()) {
    std::vector<Tensor> zeros;
    for (const Tensor& x : xs) zeros.push_back(ZerosLike(x));
    return zeros;
  }
  return Gradients(fy, xs, fdy, "gradients");
}

std::shared_ptr<const Body> MakeBody(std::shared_ptr<Graph> g, std::vector<Tensor> params,
                                     std::vector<Tensor> results, std::string name) {
  auto b = std::make_shared<Body>();
  b->graph = std::move(g);
  b->params = std::move(params);
  b->results = std::move(results);
  b->name = std::move(name);
  return b;
}

// A gradient body's graph: on the forward body's device, under the JIT frames of the
// graph its op is built in (the cloned ops keep their own marks).
std::shared_ptr<Graph> NewBodyGraph(const Graph& outer, const Body& fwd) {
  auto g = std::make_shared<Graph>();
  g->mutable_jit_frames() = outer.jit_frames();
  g->set_device(fwd.graph->device());
  return g;
}

Types TypesOf(const std::vector<Tensor>& ts) {
  Types out;
  for (const Tensor& t : ts) out.push_back(t.type());
  return out;
}

absl::StatusOr<std::vector<Tensor>> CondGradient(Graph& g, const Node& node,
                                                 const std::vector<Tensor>& dys,
                                                 const std::vector<bool>& needs) {
  const auto& a = node.attrs_as<ControlFlowAttrs>();
  std::vector<Tensor> args(node.inputs().begin() + 1, node.inputs().end());
  std::vector<int> wanted;  // input indices whose gradient the new Cond returns
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (needs[i]) wanted.push_back(i);
  }
  std::vector<Tensor> seeds;  // the dys that exist, and for which outputs
  std::vector<int> seeded;
  for (size_t j = 0; j < dys.size(); ++j) {
    if (dys[j].valid()) seeds.push_back(dys[j]), seeded.push_back(static_cast<int>(j));
  }
  std::vector<std::shared_ptr<const Body>> bodies;
  for (const auto& fwd : a.bodies) {
    std::shared_ptr<Graph> bg = NewBodyGraph(g, *fwd);
    std::vector<Tensor> params = PlaceholdersFor(*bg, TypesOf(args), "arg");
    std::vector<Tensor> dy_params = PlaceholdersFor(*bg, TypesOf(seeds), "dy");
    BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> ys, CloneBody(*bg, *fwd, params));
    std::vector<Tensor> seeded_ys, xs;
    for (int j : seeded) seeded_ys.push_back(ys[j]);
    for (int i : wanted) xs.push_back(params[i - 1]);
    BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> dxs, BodyGradients(seeded_ys, dy_params, xs));
    params.insert(params.end(), dy_params.begin(), dy_params.end());
    bodies.push_back(MakeBody(bg, std::move(params), std::move(dxs), fwd->name + "_grad"));
  }
  ControlFlowAttrs ga;
  ga.bodies = std::move(bodies);
  ga.num_carried = static_cast<int>(args.size() + seeds.size());
  std::vector<Tensor> ins = {node.input(0)};
  ins.insert(ins.end(), args.begin(), args.end());
  ins.insert(ins.end(), seeds.begin(), seeds.end());
  Tensor t = g.AddNode(OpKind::kCond, std::move(ins), std::move(ga), node.name() + "_grad");
  if (!t.node().status().ok()) return t.node().status();
  std::vector<Tensor> dx(node.num_inputs());
  for (size_t k = 0; k < wanted.size(); ++k)
    dx[wanted[k]] = Tensor(&g, t.node_id(), static_cast<int>(k));
  return dx;
}

// The gradient of a Scan node's inputs given its outputs' gradients (`dys`, parallel to
// its outputs: the final carries, the stacked outputs, the kept carries). A kept carry
// (the carry before each step, which this very gradient reads) has a gradient in a
// second-order one: its row t adds to the gradient of the carry before step t. It was
// ignored, and second-order gradients through a Scan or a bounded While were silently
// wrong.
absl::StatusOr<std::vector<Tensor>> ScanGradient(Graph& g, const Node& node,
                                                 const std::vector<Tensor>& dys,
                                                 const std::vector<bool>& needs) {
  const auto& a = node.attrs_as<ControlFlowAttrs>();
  const Body& fwd = *a.bodies[0];
  const int nc = a.num_carried, ne = a.num_elems;
  const int ns = node.num_outputs() - 2 * nc;
  const int nk = node.num_inputs() - nc - ne;
  std::vector<Tensor> init(node.inputs().begin(), node.inputs().begin() + nc);
  std::vector<Tensor> elems(node.inputs().begin() + nc, node.inputs().begin() + nc + ne);
  std::vector<Tensor> caps(node.inputs().begin() + nc + ne, node.inputs().end());
  std::vector<Tensor> outs = g.Outputs(Tensor(&g, node.id(), 0));
  std::vector<int> kc;  // captures whose gradient is accumulated
  for (int k = 0; k < nk; ++k) {
    if (needs[nc + ne + k]) kc.push_back(k);
  }
  // The backward scan's sequences: the forward's elems, its carry before each step and
  // the stacked outputs' gradients (zeros where none came).
  std::vector<Tensor> dstack;
  for (int j = 0; j < ns; ++j) {
    dstack.push_back(dys[nc + j].valid() ? dys[nc + j] : ZerosLike(outs[nc + j]));
  }
  std::vector<int> kept;  // kept carries with a gradient
  std::vector<Tensor> dkept;
  for (int j = 0; j < nc; ++j) {
    if (dys[nc + ns + j].valid() && IsFloating(outs[nc + ns + j].dtype())) {
      kept.push_back(j);
      dkept.push_back(dys[nc + ns + j]);
    }
  }
  std::shared_ptr<Graph> bg = NewBodyGraph(g, fwd);
  Types carry_types = TypesOf(init), acc_types;
  for (int k : kc) acc_types.push_back(caps[k].type());
  auto slices = [](const std::vector<Tensor>& seqs) {
    Types t = TypesOf(seqs);
    for (TensorType& s : t) s.shape.erase(s.shape.begin());
    return t;
  };
  std::vector<Tensor> dc = PlaceholdersFor(*bg, carry_types, "dcarry");
  std::vector<Tensor> acc = PlaceholdersFor(*bg, acc_types, "dcapture");
  std::vector<Tensor> x = PlaceholdersFor(*bg, slices(elems), "elem");
  std::vector<Tensor> c =
      PlaceholdersFor(*bg, slices({outs.begin() + nc + ns, outs.end()}), "carry");
  std::vector<Tensor> dy = PlaceholdersFor(*bg, slices(dstack), "dy");
  std::vector<Tensor> dk = PlaceholdersFor(*bg, slices(dkept), "dkept");
  std::vector<Tensor> k_params = PlaceholdersFor(*bg, TypesOf(caps), "capture");
  std::vector<Tensor> fparams = c;
  fparams.insert(fparams.end(), x.begin(), x.end());
  fparams.insert(fparams.end(), k_params.begin(), k_params.end());
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> ys, CloneBody(*bg, fwd, fparams));
  std::vector<Tensor> seeds = dc;
  seeds.insert(seeds.end(), dy.begin(), dy.end());
  std::vector<Tensor> xs = c;
  xs.insert(xs.end(), x.begin(), x.end());
  for (int k : kc) xs.push_back(k_params[k]);
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> grads, BodyGradients(ys, seeds, xs));
  std::vector<Tensor> results(grads.begin(), grads.begin() + nc);  // dc_t
  for (size_t i = 0; i < kept.size(); ++i) results[kept[i]] = Add(results[kept[i]], dk[i]);
  for (size_t i = 0; i < kc.size(); ++i) results.push_back(Add(acc[i], grads[nc + ne + i]));
  results.insert(results.end(), grads.begin() + nc, grads.begin() + nc + ne);  // dx_t
  std::vector<Tensor> params = dc;
  for (const auto* group : {&acc, &x, &c, &dy, &dk, &k_params}) {
    params.insert(params.end(), group->begin(), group->end());
  }
  ControlFlowAttrs ga;
  ga.bodies = {MakeBody(bg, std::move(params), std::move(results), "fn_grad")};
  ga.num_carried = nc + static_cast<int>(kc.size());
  ga.num_elems = ne + nc + ns + static_cast<int>(kept.size());
  ga.reverse = !a.reverse;
  std::vector<Tensor> ins;
  for (int i = 0; i < nc; ++i) ins.push_back(dys[i].valid() ? dys[i] : ZerosLike(outs[i]));
  for (int k : kc) ins.push_back(ZerosLike(caps[k]));
  ins.insert(ins.end(), elems.begin(), elems.end());
  ins.insert(ins.end(), outs.begin() + nc + ns, outs.end());
  ins.insert(ins.end(), dstack.begin(), dstack.end());
  ins.insert(ins.end(), dkept.begin(), dkept.end());
  ins.insert(ins.end(), caps.begin(), caps.end());
  Tensor t = g.AddNode(OpKind::kScan, std::move(ins), std::move(ga), node.name() + "_grad");
  if (!t.node().status().ok()) return t.node().status();
  std::vector<Tensor> back = g.Outputs(t);
  std::vector<Tensor> dx(node.num_inputs());
  for (int i = 0; i < nc; ++i) dx[i] = back[i];
  for (size_t i = 0; i < kc.size(); ++i) dx[nc + ne + kc[i]] = back[nc + i];
  const int first_dx = nc + static_cast<int>(kc.size());
  for (int e = 0; e < ne; ++e) dx[nc + e] = back[first_dx + e];
  return dx;
}

// A bounded While replayed as a Scan over max_iterations steps carrying (vars, active),
// and that Scan's gradient. Steps after the loop stopped keep the vars (Select), so their
// gradient passes straight through.
absl::StatusOr<std::vector<Tensor>> WhileGradient(Graph& g, const Node& node,
                                                  const std::vector<Tensor>& dys,
                                                  const std::vector<bool>& needs) {
  const auto& a = node.attrs_as<ControlFlowAttrs>();
  const int nv = a.num_carried;
  std::vector<Tensor> vars_in(node.inputs().begin(), node.inputs().begin() + nv);
  std::vector<Tensor> caps(node.inputs().begin() + nv, node.inputs().end());
  std::shared_ptr<Graph> rg = NewBodyGraph(g, *a.bodies[1]);
  std::vector<Tensor> vars = PlaceholdersFor(*rg, TypesOf(vars_in), "var");
  Tensor active = Placeholder(*rg, DType::kBool, {}, "active");
  Tensor tick = Placeholder(*rg, DType::kF32, {}, "step");
  std::vector<Tensor> k = PlaceholdersFor(*rg, TypesOf(caps), "capture");
  std::vector<Tensor> args = vars;
  args.insert(args.end(), k.begin(), k.end());
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> c, CloneBody(*rg, *a.bodies[0], args));
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> b, CloneBody(*rg, *a.bodies[1], args));
  const Tensor go = Select(active, c[0], active);
  std::vector<Tensor> results;
  for (int i = 0; i < nv; ++i) results.push_back(Select(go, b[i], vars[i]));
  results.push_back(go);
  std::vector<Tensor> params = vars;
  params.push_back(active);
  params.push_back(tick);
  params.insert(params.end(), k.begin(), k.end());
  ControlFlowAttrs ra;
  ra.bodies = {MakeBody(rg, std::move(params), std::move(results), "replay")};
  ra.num_carried = nv + 1;
  ra.num_elems = 1;
  std::vector<Tensor> ins = vars_in;
  ins.push_back(Const(g, HostTensor::Scalar<bool>(true)));
  // The replay's length only: a broadcast scalar, not a Const holding max_iterations
  // zeros (a bound of 2^40 threw std::bad_alloc from Gradients; 10^9 built a 4 GB graph).
  ins.push_back(BroadcastTo(ScalarConst(g, 0.0), {a.max_iterations}));
  ins.insert(ins.end(), caps.begin(), caps.end());
  Tensor replay = g.AddNode(OpKind::kScan, std::move(ins), std::move(ra), node.name() + "_replay");
  if (!replay.node().status().ok()) return replay.node().status();
  std::vector<Tensor> rdys(replay.node().num_outputs());
  for (int i = 0; i < nv; ++i) rdys[i] = dys[i];
  std::vector<bool> rneeds(replay.node().num_inputs(), false);
  for (int i = 0; i < nv; ++i) rneeds[i] = needs[i];
  for (size_t j = 0; j < caps.size(); ++j) rneeds[nv + 2 + j] = needs[nv + j];
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> rd, ScanGradient(g, replay.node(), rdys, rneeds));
  std::vector<Tensor> dx(node.num_inputs());
  for (int i = 0; i < nv; ++i) dx[i] = rd[i];
  for (size_t j = 0; j < caps.size(); ++j) dx[nv + j] = rd[nv + 2 + j];
  return dx;
}

}  // namespace

absl::Status CheckControlFlowGradient(const Node& node) {
  if (node.op() == OpKind::kWhile && node.attrs_as<ControlFlowAttrs>().max_iterations < 0) {
    return absl::UnimplementedError(absl::StrCat(
        "Gradients: ", Label(node),
        " is a While with no bound: give max_iterations (its gradient replays that many steps)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> ControlFlowGradient(Graph& g, const Node& node,
                                                        const std::vector<Tensor>& dys,
                                                        const std::vector<bool>& needs) {
  if (node.op() == OpKind::kCond) return CondGradient(g, node, dys, needs);
  if (node.op() == OpKind::kScan) return ScanGradient(g, node, dys, needs);
  BRAZE_RETURN_IF_ERROR(CheckControlFlowGradient(node));
  return WhileGradient(g, node, dys, needs);
}

}  // namespace autodiff_internal
}  // namespace braze
