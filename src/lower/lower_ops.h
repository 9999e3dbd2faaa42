// Per-op lowerings: each turns one node's input Values into its output Value. The
// dispatch (a switch over OpKind) is in lowering.cc; the op families live in
// lower_elementwise.cc, lower_reduce.cc, lower_layout.cc, lower_conv.cc and lower_pool.cc.
//
// Inputs and output types are concrete and already checked by InferOutputTypes, so
// these only build Halide IR; Halide may throw Halide::Error, which the caller catches.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_LOWER_OPS_H_
#define BRAZE_LOWER_LOWER_OPS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braze/graph.h"
#include "lower/lower_util.h"

namespace braze {
namespace lower {

// lower_elementwise.cc
// f32 exp(x) for a GPU kernel, x <= 0 or -inf (NaN: some NaN): on CUDA PTX's ex2.approx
// corrected to about 2 ulp (subnormal results kept), else Halide's exp, clamped (0 below
// FLT_MIN). Not the Exp op's special values for +inf: callers take no +inf.
Halide::Expr GpuExpF32(const Halide::Expr& x, bool cuda);
Value LowerUnary(LoweringContext& ctx, const std::string& name, OpKind op, const Value& x);
Value LowerCast(LoweringContext& ctx, const std::string& name, const Value& x, DType to);
Value LowerBinary(LoweringContext& ctx, const std::string& name, OpKind op, const Value& a,
                  const Value& b, const TensorType& out);
Value LowerSelect(LoweringContext& ctx, const std::string& name, const Value& cond, const Value& a,
                  const Value& b, const TensorType& out);

// lower_reduce.cc
Value LowerReduce(LoweringContext& ctx, const std::string& name, OpKind op,
                  const ReduceAttrs& attrs, const Value& x, const TensorType& out);
// SumToShapeOf(x, like): Sums over x's leading dims and like's 1s, decided from the
// shapes this kernel is compiled for (a symbolic dim of like is never 1: its estimate
// is not, and x's dim there is of its class).
Value LowerSumToShapeOf(LoweringContext& ctx, const std::string& name, const Value& x,
                        const Value& like, const TensorType& out);
Value LowerArgMax(LoweringContext& ctx, const std::string& name, const ArgMaxAttrs& attrs,
                  const Value& x, const TensorType& out);
// Sibling Sums and Means (lower/sibling_reductions.h) of inputs of one static shape over
// the same axes, none of the innermost dim: one pass, a Tuple of f64 sums. The values
// in `inputs`' order, of types `outs`.
std::vector<Value> LowerSiblingSums(LoweringContext& ctx, const std::string& name,
                                    const std::vector<OpKind>& ops, const ReduceAttrs& attrs,
                                    const std::vector<Value>& inputs,
                                    const std::vector<TensorType>& outs);
// A batch norm's mean (Mean(x, axes, keep_dims)) and variance (Mean(Square(x - mean),
// axes)) in one pass over x (sibling_reductions.h); same conditions.
std::pair<Value, Value> LowerMoments(LoweringContext& ctx, const std::string& name,
                                     const ReduceAttrs& attrs, const Value& x,
                                     const TensorType& mean_out, const TensorType& var_out);
// A bias Add, and the ReLU after it, that a matmul may take into its library call
// (gemm_epilogue.h finds them). LowerMatMul sets `folded` when it did: its result is
// then the Add's (or the Relu's) value.
//
// A Conv2D's may also hold a residual: the second Add's other operand (gemm_epilogue.h),
// with `relu` then the Relu after that Add; the first Add's operand may be a residual
// too (then `folded` says it was taken and the second Add stays). The Relu folds when
// the last Add given does: `residual` ? residual_folded : folded.
struct MatMulEpilogue {
  const Value* bias = nullptr;      // the Add's other operand
  const Value* residual = nullptr;  // a Conv2D's second Add's other operand
  bool relu = false;                // a Relu reads the last Add given
  // A [C_out] bias is per output channel in NCHW too (a folded batch norm's); else an
  // NCHW convolution's [C] operand broadcasts along W and is no bias.
  bool channel_bias = false;
  bool folded = false;           // the first Add is the call's
  bool residual_folded = false;  // the second Add is the call's
  bool ReluFolded() const { return relu && (residual != nullptr ? residual_folded : folded); }
};
Value LowerMatMul(LoweringContext& ctx, const std::string& name, const MatMulAttrs& attrs,
                  const Value& a, const Value& b, const TensorType& out,
                  MatMulEpilogue* epilogue = nullptr);
// Whether a MatMul/BatchMatMul of bf16 operands (and product) calls the CPU GEMM
// library on them as they are: oneDNN's bf16 matmul, accumulating in f32 and rounding
// its result once to bf16, instead of the f32 call on widened copies. LowerMatMul is
// then given the bf16 Values themselves (docs/MIXED_PRECISION.md).
bool LibraryTakesBF16(const LoweringContext& ctx, const MatMulAttrs& attrs, const Value& a,
                      const Value& b, const TensorType& out);

// What an extern library call reads for `v` (lower_reduce.cc): a cluster input in
// place, a Const as a dense buffer of its own, anything else as a Func the schedule
// stores (appended to `operands`).
Halide::ExternFuncArgument LibraryArgument(LoweringContext& ctx, Value v, const std::string& name,
                                           std::vector<schedule::Stage::Operand>& operands);

// lower_conv_library.cc: Conv2D, Conv2DBackpropInput or Conv2DBackpropFilter (`op`, of
// operands a and b) as a call of oneDNN's convolution (device/cpu_conv.h); a Conv2D
// with the bias Add and ReLU after it when `epilogue` has them (as LowerMatMul). Null
// when the call does not apply (not f32, too little work, a symbolic H, W or C, the
// library off for this lowering): the caller lowers it as Halide loops.
std::optional<Value> LowerLibraryConv(LoweringContext& ctx, const std::string& name, OpKind op,
                                      const Conv2DAttrs& attrs, const Value& a, const Value& b,
                                      const TensorType& out, MatMulEpilogue* epilogue);

// lower_conv_fold.cc: Conv2D(x, f) with the per-channel affine after it folded into its
// filter and bias (conv_bn_fold.h): `in` is {x, f, mean, scale, shift}, `out` the
// convolution's type. `after`: the residual Add's operand and the Relu after the
// fold's Add (its `bias` unused), as for LowerLibraryConv; set as there: `folded` (the
// bias), `residual_folded` and ReluFolded() say what the result already holds.
absl::StatusOr<Value> LowerFoldedConv(LoweringContext& ctx, const std::string& name,
                                      const Conv2DAttrs& attrs, const std::vector<Value>& in,
                                      const TensorType& out, MatMulEpilogue* after);

// lower_layout.cc
Value LowerConst(LoweringContext& ctx, const std::string& name, const HostTensor& value);
Value LowerReshape(LoweringContext& ctx, const std::string& name, const Value& x,
                   const TensorType& out);
// True when a Reshape of `x` to `out_shape` maps every symbolic dim straight onto one
// output dim of its class (`out_sym`), which LowerReshape then indexes without its size.
bool ReshapeKeepsSymbols(const Value& x, const Shape& out_shape, const std::vector<int>& out_sym);
Value LowerTranspose(LoweringContext& ctx, const std::string& name, const TransposeAttrs& attrs,
                     const Value& x, const TensorType& out);
Value LowerBroadcastTo(LoweringContext& ctx, const std::string& name, const Value& x,
                       const TensorType& out);
Value LowerConcat(LoweringContext& ctx, const std::string& name, const ConcatAttrs& attrs,
                  const std::vector<Value>& xs, const TensorType& out);
Value LowerSlice(LoweringContext& ctx, const std::string& name, const SliceAttrs& attrs,
                 const Value& x, const TensorType& out);
Value LowerPad(LoweringContext& ctx, const std::string& name, const PadAttrs& attrs, const Value& x,
               const TensorType& out);
Value LowerOneHot(LoweringContext& ctx, const std::string& name, const OneHotAttrs& attrs,
                  const Value& indices, const TensorType& out);

// lower_sequence.cc: Gather (an out-of-range index reads zeros, never memory),
// UnsortedSegmentSum (each segment adds its slices in the ids' row-major order, the
// reference's) and Iota.
Value LowerGather(LoweringContext& ctx, const std::string& name, const GatherAttrs& attrs,
                  const Value& params, const Value& indices, const TensorType& out);
Value LowerSegmentSum(LoweringContext& ctx, const std::string& name, const SegmentSumAttrs& attrs,
                      const Value& data, const Value& ids, const TensorType& out);
Value LowerIota(const TensorType& out);

// lower_random.cc: RandomUniform and RandomNormal (philox.h says the bits).
Value LowerRandom(LoweringContext& ctx, const std::string& name, const Node& node,
                  const Value& like, const Value& step, const TensorType& out);

// lower_conv.cc: Conv2D and its gradient ops; lower_pool.cc: the pools and theirs.
absl::StatusOr<Value> LowerConv(LoweringContext& ctx, const std::string& name, OpKind op,
                                const Conv2DAttrs& attrs, const std::vector<Value>& in,
                                const TensorType& out);
absl::StatusOr<Value> LowerPool(LoweringContext& ctx, const std::string& name, OpKind op,
                                const Pool2DAttrs& attrs, const std::vector<Value>& in,
                                const TensorType& out);

// lower_attention.cc: Attention, AttentionLogSumExp and the gradient ops (`op`), fused
// over tiles of the other sequence (a kAttention stage; docs/ATTENTION.md).
absl::StatusOr<Value> LowerAttention(LoweringContext& ctx, const std::string& name, OpKind op,
                                     const AttentionAttrs& attrs, const std::vector<Value>& in,
                                     const TensorType& out);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWER_OPS_H_
