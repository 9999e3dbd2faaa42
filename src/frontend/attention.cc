// Attention builders: the fused ops (one node each) and ScaledDotProductAttention, which
// builds either the fused op or the unfused composite of primitives (docs/ATTENTION.md).
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "braze/random.h"

namespace braze {
namespace {

Graph* GraphOf(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts) {
    if (t.valid()) return t.graph();
  }
  return nullptr;
}

AttentionAttrs AttrsOf(const Tensor& q, const AttentionOptions& o) {
  AttentionAttrs a;
  a.causal = o.causal;
  a.dropout = o.dropout;
  a.seed = o.seed;
  a.op_key = o.op_key.value_or(RandomOpKeyOf(q.name()));
  if (o.scale.has_value()) {
    a.scale = *o.scale;
  } else {
    const int64_t d = q.rank() >= 1 ? q.shape().back() : -1;
    // An unknown D leaves no default: NaN, which shape inference reports on the node.
    a.scale =
        d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : std::numeric_limits<double>::quiet_NaN();
  }
  return a;
}

// [..., T, T'] mask of the hidden (query, key) pairs: key j after query i + (Tk - Tq).
// Positions count from the end of each sequence (max(pos) - pos), so the offset needs no
// sequence length at build time: j hidden iff Tk-1-j < Tq-1-i.
Tensor CausalHidden(Tensor q, Tensor k) {
  const int axis = q.rank() - 2;
  Tensor qpos = Iota(q, axis);
  Tensor kpos = Iota(k, axis);
  Tensor qrev = Max(qpos, {0}, true) - qpos;
  Tensor krev = Max(kpos, {0}, true) - kpos;
  return Less(Reshape(krev, {1, -1}), Reshape(qrev, {-1, 1}));
}

// Dropout's rule (ops.h) with the fused op's stream: the same uniforms, so the same mask.
Tensor DropWeights(Tensor weights, const AttentionAttrs& a, Tensor step) {
  Graph& g = *weights.graph();
  const Tensor u = RandomUniform(
      weights, step, a.seed, weights.dtype() == DType::kF64 ? DType::kF64 : DType::kF32, a.op_key);
  const Tensor drop = Less(u, ScalarConst(g, a.dropout, u.dtype()));
  return Select(drop, ScalarConst(g, 0, weights.dtype()), weights * (1.0 / (1.0 - a.dropout)));
}

Tensor Unfused(Tensor q, Tensor k, Tensor v, const AttentionAttrs& a, Tensor step) {
  Graph& g = *q.graph();
  NameScope scope(g, "AttentionUnfused");
  const bool batched = q.rank() >= 3;
  Tensor scores = batched ? BatchMatMul(q, k, false, true) : MatMul(q, k, false, true);
  scores = scores * a.scale;
  Tensor weights;
  if (a.causal) {
    Tensor hidden = CausalHidden(q, k);
    Tensor masked = Select(hidden, ScalarConst(g, -1e30, q.dtype()), scores);
    // A query that sees no key gets 0, as the fused op's (its softmax would be uniform).
    weights = Select(hidden, ScalarConst(g, 0.0, q.dtype()), Softmax(masked, -1));
  } else {
    weights = Softmax(scores, -1);
  }
  if (a.dropout != 0) weights = DropWeights(weights, a, step);
  return batched ? BatchMatMul(weights, v) : MatMul(weights, v);
}

// What the fused op's shape inference would refuse (a scale that is not finite, the
// default's 1 / sqrt(D) with D unknown included; a dropout rate outside [0, 1)), as an
// error naming q.
absl::Status CheckUnfusedAttrs(const Tensor& q, const AttentionAttrs& a) {
  if (!std::isfinite(a.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScaledDotProductAttention of '", q.name(), "' (unfused): scale ", a.scale,
                     " is not finite (the default 1 / sqrt(D) needs q's D known: q is ",
                     TypeString(q.type()), ")"));
  }
  if (!(a.dropout >= 0 && a.dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("ScaledDotProductAttention of '", q.name(),
                                                   "' (unfused): dropout rate ", a.dropout,
                                                   " is outside [0, 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

Tensor Attention(Tensor q, Tensor k, Tensor v, const AttentionAttrs& attrs, Tensor step) {
  Graph* g = GraphOf({q, k, v});
  if (g == nullptr) return Tensor();
  std::vector<Tensor> in = {q, k, v};
  if (step.valid()) in.push_back(step);
  return g->AddNode(OpKind::kAttention, std::move(in), attrs);
}

Tensor AttentionLogSumExp(Tensor q, Tensor k, const AttentionAttrs& attrs) {
  Graph* g = GraphOf({q, k});
  if (g == nullptr) return Tensor();
  return g->AddNode(OpKind::kAttentionLogSumExp, {q, k}, attrs);
}

Tensor AttentionGrad(OpKind op, Tensor q, Tensor k, Tensor v, Tensor dout, Tensor lse, Tensor delta,
                     const AttentionAttrs& attrs, Tensor step) {
  Graph* g = GraphOf({q, k, v, dout, lse, delta});
  if (g == nullptr) return Tensor();
  std::vector<Tensor> in = {q, k, v, dout, lse, delta};
  if (step.valid()) in.push_back(step);
  return g->AddNode(op, std::move(in), attrs);
}

Tensor ScaledDotProductAttention(Tensor q, Tensor k, Tensor v, const AttentionOptions& options) {
  if (!q.valid() || !k.valid() || !v.valid()) return Tensor();
  const AttentionAttrs attrs = AttrsOf(q, options);
  // A rate outside [0, 1) is the op's error (shape inference names the node).
  if (attrs.dropout > 0 && attrs.dropout < 1 && !options.step.valid()) {
    q.graph()->RecordError(absl::InvalidArgumentError(
        absl::StrCat("ScaledDotProductAttention of '", q.name(), "': dropout ", attrs.dropout,
                     " needs a step (AttentionOptions::step)")));
    return Tensor();
  }
  const Tensor step = attrs.dropout != 0 ? options.step : Tensor();
  if (options.fused) return Attention(q, k, v, attrs, step);
  // The fused op's shape inference checks these; the unfused composite has no node that
  // would: a NaN scale (D unknown) made every output NaN, and a rate outside [0, 1)
  // scaled the weights by 1 / (1 - rate) (-0.5: by 2/3; 1.5: all zeros), silently.
  const absl::Status bad = CheckUnfusedAttrs(q, attrs);
  if (!bad.ok()) {
    q.graph()->RecordError(bad);
    return Tensor();
  }
  return Unfused(q, k, v, attrs, step);
}

}  // namespace braze
