// The mixed-precision policy's per-op rule: by op category (a closed set, so an op added
// to op_list.def gets its category's rule), with the exceptions torch.autocast makes.
#include "ir/autocast.h"

namespace braze::ir {
namespace {

bool Usable(const Graph& g, const Tensor& t) {
  return t.valid() && t.graph() == &g && t.node_id() >= 0 && t.node_id() < g.num_nodes() &&
         t.index() < g.node(t.node_id()).num_outputs() && t.node().status().ok();
}

Tensor CastTo(Graph& g, const Tensor& t, DType dtype) {
  return g.AddNode(OpKind::kCast, {t}, CastAttrs{dtype}, "autocast");
}

}  // namespace

AutocastRule AutocastRuleOf(OpKind op) {
  switch (op) {
    // Range and accuracy: exp overflows f16 past 11, log and pow lose the bits a loss
    // needs; sums and means accumulate (and so are kept) in f32 (torch's fp32 list).
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kPow:
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kUnsortedSegmentSum:
      return AutocastRule::kWiden;
    // The attention gradients take q's dtype for every floating input: delta (a Sum,
    // so f32 by the rule above) and dO meet 16-bit q, k, v (each computes in f32 anyway).
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV:
      return AutocastRule::kMatchFirst;
    // The matmul-like ops outside the kMatMul category.
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter:
    case OpKind::kAttention:
      return AutocastRule::kLower;
    case OpKind::kCast:
    case OpKind::kArgMax:
    case OpKind::kSumToShapeOf:  // a gradient keeps its dtype; 16-bit sums add in f32
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kIota:
    case OpKind::kOneHot:
      return AutocastRule::kKeep;
    default:
      break;
  }
  switch (OpCategoryOf(op)) {
    case OpCategory::kMatMul:
      return AutocastRule::kLower;
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kSelect:
    case OpCategory::kLayout:
    case OpCategory::kWindow:  // pools follow their input
      return AutocastRule::kFollow;
    case OpCategory::kReduce:
      return AutocastRule::kWiden;
    case OpCategory::kState:
      return AutocastRule::kAssign;
    case OpCategory::kSource:
    case OpCategory::kAttention:
    case OpCategory::kRandom:
    case OpCategory::kCollective:
    case OpCategory::kHostCall:
    // Cond, While, Scan: their operands are the bodies' parameters, whose dtypes the
    // bodies were traced for; the bodies themselves are traced under the enclosing
    // graph's policy (frontend/control_flow.cc), so their own ops follow these rules.
    case OpCategory::kControlFlow:
      return AutocastRule::kKeep;
  }
  return AutocastRule::kKeep;
}

void AutocastInputs(Graph& g, OpKind op, DType compute, std::vector<Tensor>* inputs) {
  std::vector<Tensor>& in = *inputs;
  for (const Tensor& t : in) {
    if (!Usable(g, t)) return;  // AddNode reports it, on the node as the user built it
  }
  switch (AutocastRuleOf(op)) {
    case AutocastRule::kKeep:
      return;
    case AutocastRule::kAssign:
      // Assign(f32 master, 16-bit value): the update is the master's dtype.
      if (in.size() == 2 && IsFloating(in[0].dtype()) && IsFloating(in[1].dtype()) &&
          in[0].dtype() != in[1].dtype()) {
        in[1] = CastTo(g, in[1], in[0].dtype());
      }
      return;
    case AutocastRule::kMatchFirst:
      for (Tensor& t : in) {
        if (IsFloating(t.dtype()) && IsFloating(in[0].dtype()) && t.dtype() != in[0].dtype()) {
          t = CastTo(g, t, in[0].dtype());
        }
      }
      return;
    case AutocastRule::kWiden:
      for (Tensor& t : in) {
        if (Is16BitFloat(t.dtype())) t = CastTo(g, t, DType::kF32);
      }
      return;
    case AutocastRule::kFollow: {
      bool any16 = false;
      for (const Tensor& t : in) any16 = any16 || Is16BitFloat(t.dtype());
      if (!any16) return;
      // The inputs' 16-bit dtype (the compute dtype, or another a program cast to).
      DType narrow = compute;
      for (const Tensor& t : in) {
        if (Is16BitFloat(t.dtype())) narrow = t.dtype();
      }
      for (Tensor& t : in) {
        if (t.dtype() == DType::kF32) t = CastTo(g, t, narrow);
      }
      return;
    }
    case AutocastRule::kLower:
      for (Tensor& t : in) {
        if (t.dtype() == DType::kF32) t = CastTo(g, t, compute);
      }
      return;
  }
}

}  // namespace braze::ir
