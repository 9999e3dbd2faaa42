// The online softmax of GPU lowerings; see online_softmax.h.
#include "lower/online_softmax.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "braze/graph.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;

// Whether `node` reduces only the last axis of its one input.
bool ReducesLastAxis(const Node& node) {
  if (node.num_inputs() != 1) return false;
  const int rank = static_cast<int>(node.inputs()[0].shape().size());
  if (rank == 0) return false;
  std::set<int> axes;
  for (int a : node.attrs_as<ReduceAttrs>().axes) axes.insert(a < 0 ? a + rank : a);
  return axes == std::set<int>{rank - 1};
}

bool Same(const Tensor& a, const Tensor& b) {
  return a.node_id() == b.node_id() && a.index() == b.index();
}

Expr U32(uint64_t v) { return Halide::Internal::make_const(Halide::UInt(32), v); }

}  // namespace

std::map<int, int> FindOnlineSoftmaxes(const ClusterSpec& spec, bool gpu) {
  std::map<int, int> pairs;
  if (!gpu) return pairs;
  std::map<std::pair<int, int>, std::vector<int>> consumers;  // value -> cluster nodes
  for (int id : spec.nodes) {
    for (const Tensor& t : spec.graph->node(id).inputs()) {
      consumers[{t.node_id(), t.index()}].push_back(id);
    }
  }
  auto users = [&](int id, OpKind op) {
    std::vector<int> found;
    auto it = consumers.find({id, 0});
    if (it == consumers.end()) return found;
    for (int c : it->second) {
      if (spec.graph->node(c).op() == op) found.push_back(c);
    }
    return found;
  };
  std::set<int> claimed;
  for (int id : spec.nodes) {
    const Node& max = spec.graph->node(id);
    if (max.op() != OpKind::kMax || !ReducesLastAxis(max) ||
        !max.attrs_as<ReduceAttrs>().keep_dims || max.inputs()[0].dtype() != DType::kF32) {
      continue;
    }
    const Tensor& x = max.inputs()[0];
    for (int sub : users(id, OpKind::kSub)) {
      const Node& d = spec.graph->node(sub);
      if (!Same(d.inputs()[0], x) || d.inputs()[1].node_id() != id) continue;
      for (int exp : users(sub, OpKind::kExp)) {
        for (int sum : users(exp, OpKind::kSum)) {
          if (pairs.count(id) > 0 || claimed.count(sum) > 0 ||
              !ReducesLastAxis(spec.graph->node(sum))) {
            continue;
          }
          pairs[id] = sum;
          claimed.insert(sum);
        }
      }
    }
  }
  return pairs;
}

std::optional<std::pair<Value, Value>> LowerOnlineSoftmax(LoweringContext& ctx,
                                                          const std::string& name,
                                                          const Value& input,
                                                          const TensorType& max_out,
                                                          const TensorType& sum_out) {
  const int rank = static_cast<int>(input.shape.size());
  if (rank == 0 || input.dtype != DType::kF32 || !input.sym.empty()) return std::nullopt;
  const int64_t len = input.shape.back();
  if (len <= 0 || len > kOnlineMaxRow || max_out.shape.size() != input.shape.size()) {
    return std::nullopt;
  }
  const Value x = Materialize(ctx, name + "_in", input);
  const Halide::Type f32 = Halide::Float(32), f64 = Halide::Float(64);
  const Halide::Type i32 = Halide::Int(32), u32 = Halide::UInt(32);
  // Rows of up to 16 are one lane (a thread per row takes them whole); else a warp's.
  const int lanes = len <= 16 ? 1 : kOnlineLanes;
  const int64_t steps = (len + lanes - 1) / lanes;
  const Expr lowest = Halide::Internal::make_const(f32, -std::numeric_limits<float>::max());
  const uint64_t lowest_bits = 0xff7fffff, inf_bits = 0x7f800000;
  const bool cuda = ctx.cuda;

  // The pass: lane u's (running max, sum of exps below it, max of the bits as i32, max
  // of |bits|), over x[u + k lanes] of each row. Halide order: (u, row dims...).
  std::vector<Halide::Var> vars = HalideVars(rank);
  const Halide::Var u = vars[0];
  Halide::RDom k(0, static_cast<int>(steps), ctx.UniqueName(name + "_k"));
  std::vector<Expr> in_index;
  for (int d = 0; d + 1 < rank; ++d) in_index.push_back(vars[rank - 1 - d]);
  const Expr at = u + k.x * lanes;
  // Past the row's end a lane reads -inf, which changes none of its state but the
  // maximum of |bits| (an infinity, which decides nothing): bounds inference does not
  // take an RDom predicate on u, and the read stays in the row.
  const bool ragged = len % lanes != 0;
  in_index.push_back(ragged ? Halide::min(at, static_cast<int>(len - 1)) : at);
  Halide::Func pass(ctx.UniqueName(name + "_online"));
  pass(vars) = Halide::Tuple(lowest, Halide::Internal::make_zero(f64),
                             Halide::Internal::make_const(i32, -1), U32(0));
  {
    const Expr m = pass(vars)[0], s = pass(vars)[1];
    Expr v = At(x, in_index);
    if (ragged) {
      v = Halide::select(
          at < static_cast<int>(len), v,
          Halide::Internal::make_const(f32, -std::numeric_limits<float>::infinity()));
    }
    // Under strict_float: a NaN or infinite v must take the compare's IEEE answer (a NaN
    // leaves m alone) and give NaN or 0 terms, not what LLVM's no-NaNs, no-infinities
    // flags would let it assume. A NaN, or a second +inf, may leave s anything: the
    // row's results are decided by the bits' maxima below.
    const Expr gt = v > m;
    const Expr d = v - m;
    // exp(-|v - m|): exp(m - v) rescales s where v is the new max, exp(v - m) is v's
    // term otherwise. The opaque zero: lower_reduce.cc's sums (Halide 14's loop trimming).
    // -|d| with the sign bit set (one integer op: a NaN stays NaN, +0 becomes -0).
    const Expr minus_abs = Halide::reinterpret(f32, Halide::reinterpret(u32, d) | U32(0x80000000));
    const Expr t = Halide::cast(f64, GpuExpF32(minus_abs, cuda)) + ctx.OpaqueZero(f64);
    const Expr bits = Halide::reinterpret(u32, v);
    pass(vars) = Halide::Tuple(
        Halide::strict_float(Halide::select(gt, v, m)),
        Halide::strict_float(Halide::select(gt, s * t + Halide::Internal::make_one(f64), s + t)),
        Halide::max(pass(vars)[2], Halide::reinterpret(i32, bits)),
        Halide::max(pass(vars)[3], bits & U32(0x7fffffff)));
  }
  Shape pass_shape = input.shape;
  pass_shape.back() = lanes;
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = pass;
  stage.rdom = k;
  stage.extents = HalideExtents(pass_shape);
  stage.reduction_extent = steps;
  stage.reduces_innermost = true;
  stage.lanes = true;
  stage.row_length = len;
  ctx.stages().push_back(stage);

  // The lanes combined: the max of the maxima (and of the bits' maxima), then the sum of
  // the lanes' sums rescaled to it. Halide order: (1, row dims...), the Max's keep_dims.
  std::vector<Halide::Var> out_vars = HalideVars(rank);
  Halide::RDom r(0, lanes, ctx.UniqueName(name + "_lane"));
  std::vector<Expr> lane_at(out_vars.begin(), out_vars.end());
  lane_at[0] = r.x;
  Halide::Func top(ctx.UniqueName(name + "_top"));
  top(out_vars) = Halide::Tuple(lowest, Halide::Internal::make_const(i32, -1), U32(0));
  top(out_vars) = Halide::Tuple(Halide::max(top(out_vars)[0], pass(lane_at)[0]),
                                Halide::max(top(out_vars)[1], pass(lane_at)[2]),
                                Halide::max(top(out_vars)[2], pass(lane_at)[3]));
  Halide::Func sum(ctx.UniqueName(name + "_sum"));
  sum(out_vars) = Halide::Internal::make_zero(f64);
  const Expr rescale =
      Halide::cast(f64, GpuExpF32(Halide::strict_float(pass(lane_at)[0] - top(out_vars)[0]), cuda));
  sum(out_vars) = sum(out_vars) + (pass(lane_at)[1] * rescale + ctx.OpaqueZero(f64));
  for (const Halide::Func& f : {top, sum}) {
    schedule::Stage s;
    s.kind = schedule::StageKind::kReduction;
    s.acc = f;
    s.rdom = r;
    s.extents = HalideExtents(max_out.shape);
    s.reduction_extent = lanes;
    s.reduces_innermost = true;
    ctx.stages().push_back(s);
  }

  // The reference's values from the combined state, with integer selects on bits (no
  // fast-math flag folds them). `args`: Halide-order (1, row dims...).
  auto max_bits = [=](const std::vector<Expr>& args) {
    const Expr mb = Halide::reinterpret(u32, top(args)[0]);
    const Expr nan = top(args)[2] > U32(inf_bits);  // a NaN of either sign
    const Expr none = mb == U32(lowest_bits) &&
                      Expr(sum(args)) == Halide::Internal::make_zero(f64);  // every element -inf
    const Expr zero = (mb & U32(0x7fffffff)) == U32(0);
    // A zero max is +0 where the row holds a value with a clear sign bit (+0), else -0.
    const Expr signed_zero = Halide::select(top(args)[1] >= 0, U32(0), U32(0x80000000));
    return Halide::select(nan, U32(0x7fc00000), none, U32(0xff800000), zero, signed_zero, mb);
  };
  auto halide_args = [](const std::vector<Expr>& index, size_t rank) {
    std::vector<Expr> args(index.rbegin(), index.rend());
    if (args.size() + 1 == rank) args.insert(args.begin(), Expr(0));  // no keep_dims
    return args;
  };
  Value m = Inline(max_out.dtype, max_out.shape, [=](const std::vector<Expr>& index) {
    return Halide::reinterpret(f32, max_bits(halide_args(index, rank)));
  });
  Value s = Inline(sum_out.dtype, sum_out.shape, [=](const std::vector<Expr>& index) {
    const std::vector<Expr> args = halide_args(index, rank);
    const Expr finite = (max_bits(args) & U32(0x7fffffff)) < U32(inf_bits);
    return Halide::select(
        finite, sum(args),
        Halide::Internal::make_const(f64, std::numeric_limits<double>::quiet_NaN()));
  });
  s.nonnegative = true;
  return std::make_pair(m, s);
}

}  // namespace lower
}  // namespace braze
