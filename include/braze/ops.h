// Op builders. Each primitive adds one node; composites (Softmax, LayerNorm, ...) are
// built from primitives under a name scope so that fusion, not a hand kernel, makes
// them fast. Builders never throw: errors are recorded on the node (see graph.h).
//
// Reduction axes may be negative (counted from the end); an empty axes list reduces
// over every axis.
#ifndef BRAZE_OPS_H_
#define BRAZE_OPS_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "braze/graph.h"

namespace braze {

// ---- Sources and state ----
Tensor Placeholder(Graph& g, DType dtype, Shape shape, std::string_view name = "");
Tensor Const(Graph& g, HostTensor value, std::string_view name = "");
// A scalar constant of `dtype`; i32 truncates toward 0, and is an error outside its range.
Tensor ScalarConst(Graph& g, double value, DType dtype = DType::kF32, std::string_view name = "");
// An initialized variable; it keeps its value across Session::Run calls.
Tensor Variable(Graph& g, HostTensor initial_value, std::string_view name = "");
// An uninitialized variable: reading it before an Assign is an error.
Tensor Variable(Graph& g, DType dtype, Shape shape, std::string_view name = "");
// var must be a Variable's output. The result is the new value. Variable reads in one
// Run see the value the variable had when the Run started. Several updates of one
// variable in a Run apply in the order they were built, each to the one before it (as
// tf.function orders them): AssignAdd(v, 1) then AssignAdd(v, 10) adds 11.
Tensor Assign(Tensor var, Tensor value, std::string_view name = "");
Tensor AssignAdd(Tensor var, Tensor value, std::string_view name = "");
Tensor AssignSub(Tensor var, Tensor value, std::string_view name = "");

// ---- Elementwise unary (floating types unless noted) ----
// IEEE results for NaN, +-inf and zeros (Log(0) = -inf, Sqrt(-0) = -0, Rsqrt(0) = inf,
// Exp overflows to inf, Tanh and Sigmoid saturate to +-1 and 0..1). i32 wraps: Neg and
// Abs of INT32_MIN are INT32_MIN (numpy's).
Tensor Neg(Tensor x);  // f32 f64 i32
Tensor Abs(Tensor x);  // f32 f64 i32
Tensor Exp(Tensor x);
Tensor Log(Tensor x);
Tensor Sqrt(Tensor x);
Tensor Rsqrt(Tensor x);
Tensor Tanh(Tensor x);
Tensor Sigmoid(Tensor x);
Tensor Relu(Tensor x);    // f32 f64 i32
Tensor Square(Tensor x);  // f32 f64 i32
Tensor Reciprocal(Tensor x);
// NaN gives NaN and +-0 gives +-0 (jax.numpy's; numpy's sign(-0.0) is +0).
Tensor Sign(Tensor x);  // f32 f64 i32
Tensor Floor(Tensor x);
Tensor Erf(Tensor x);
Tensor Sin(Tensor x);  // inf and NaN give NaN; Sin keeps -0
Tensor Cos(Tensor x);
// x itself, through which Gradients passes nothing (tf.stop_gradient,
// jax.lax.stop_gradient): any dtype.
Tensor StopGradient(Tensor x);
// float->i32 truncates toward zero; NaN gives 0 and values beyond i32's range saturate
// (XLA's and JAX's rule; numpy's is undefined there). To bool: x != 0 (NaN is true). To
// bf16 and f16: round to nearest even, overflow to inf (from f64 through f32).
Tensor Cast(Tensor x, DType dtype);

// ---- Elementwise binary with numpy broadcasting; operands must share a dtype ----
// Dtypes are never promoted (mixed operands are an error on the node). i32 Add, Sub
// and Mul wrap (two's complement), as numpy's.
Tensor Add(Tensor a, Tensor b);
Tensor Sub(Tensor a, Tensor b);
Tensor Mul(Tensor a, Tensor b);
// i32: floor division (numpy's //: -7 / 2 = -4), x / 0 = 0, INT32_MIN / -1 = INT32_MIN.
// Floating: IEEE (1 / 0 = inf, 0 / 0 = NaN).
Tensor Div(Tensor a, Tensor b);
// NaN propagates (numpy's maximum and minimum, not fmax); of equal operands (-0 and +0
// among them) the result is a.
Tensor Maximum(Tensor a, Tensor b);
Tensor Minimum(Tensor a, Tensor b);
Tensor Pow(Tensor a, Tensor b);  // floating only; IEEE pow (0^0 = 1, (-2)^0.5 = NaN)
// Comparisons with NaN are false (Equal(NaN, NaN) too).
Tensor Greater(Tensor a, Tensor b);  // -> bool
Tensor Less(Tensor a, Tensor b);     // -> bool
Tensor Equal(Tensor a, Tensor b);    // -> bool
// cond (bool) ? a : b, all three broadcast together.
Tensor Select(Tensor cond, Tensor a, Tensor b);

// ---- Reductions ----
// Sum, Max and Min take floating and i32 tensors (an i32 Sum wraps); Mean floating ones
// only: an i32 x is an error on the node (numpy's mean is f64, TensorFlow's truncates:
// Cast it first). Over no elements (an axis of 0) Sum is 0, Mean NaN, Max -inf and Min
// +inf (INT32_MIN and INT32_MAX for i32): JAX's identities, where numpy's max raises.
// Max and Min propagate NaN and take -0 as below +0. Duplicate axes are an error.
// Floating Sum and Mean accumulate in f64 and round once (compiled on the CPU, a sum of
// non-negative f32 terms, exps or squares, adds groups of 4 in f32 first: within 2
// roundings): an f32 Sum of {3e38, 3e38, -3e38} is 3e38, where numpy's and JAX's f32
// accumulation overflow to inf.
Tensor Sum(Tensor x, std::vector<int> axes = {}, bool keep_dims = false);
Tensor Mean(Tensor x, std::vector<int> axes = {}, bool keep_dims = false);
Tensor Max(Tensor x, std::vector<int> axes = {}, bool keep_dims = false);
Tensor Min(Tensor x, std::vector<int> axes = {}, bool keep_dims = false);
// Index (i32) of the first maximum along `axis`; the axis is removed. A NaN counts as
// the maximum (the first NaN's index, numpy's rule); an empty axis is an error.
Tensor ArgMax(Tensor x, int axis);
// x summed down to like's shape as the Run finds it (torch's sum_to_size, the size read
// from `like` at run time): over x's leading dims and every dim where like is 1 and x is
// not. The gradient of a broadcast where a -1 dim may be 1 only at run time. like's
// values are never read (any dtype); its shape must broadcast to x's (InvalidArgument
// naming the node otherwise, when the graph is built or at run time).
Tensor SumToShapeOf(Tensor x, Tensor like);

// ---- Linear algebra ----
// [M,K] x [K,N] -> [M,N], with optional transposes of either operand.
Tensor MatMul(Tensor a, Tensor b, bool transpose_a = false, bool transpose_b = false);
// [..., M, K] x [..., K, N] with equal batch dims (rank >= 3 each).
Tensor BatchMatMul(Tensor a, Tensor b, bool transpose_a = false, bool transpose_b = false);

// ---- Layout ----
Tensor Reshape(Tensor x, Shape shape);  // one dim may be -1
// perm's entries may be negative, counted from the end (numpy's and JAX's rule).
Tensor Transpose(Tensor x, std::vector<int> perm);
// A -1 in `shape` keeps x's dim aligned with it (from the right): [-1, 1] to [-1, 5].
Tensor BroadcastTo(Tensor x, Shape shape);
Tensor Concat(std::vector<Tensor> xs, int axis);
Tensor Slice(Tensor x, std::vector<int64_t> begin, std::vector<int64_t> size);
// `value` (and OneHot's on and off values) converts to the result's dtype as Cast does:
// toward zero for i32 (2.7 pads with 2), value != 0 for bool; NaN or a value out of
// i32's range for an i32 result is an error on the node.
Tensor Pad(Tensor x, std::vector<std::pair<int64_t, int64_t>> paddings, double value = 0);
// An index outside [0, depth), a negative one included, gives a row of off_value (TF's
// and JAX's one_hot).
Tensor OneHot(Tensor indices, int64_t depth, double on_value = 1, double off_value = 0,
              DType dtype = DType::kF32);
// Sequence ops (graph.h's GatherAttrs, SegmentSumAttrs and IotaAttrs say their shapes).
// An embedding lookup is Gather(table, ids): table [V, D], ids [B, T] -> [B, T, D].
// An index outside [0, params.shape[axis]), a negative one included, reads zeros,
// compiled or not (numpy and JAX count a negative index from the end, JAX clamps a large
// one, TensorFlow's CPU kernel fails): UnsortedSegmentSum drops such an id alike.
// `axis` may be negative (counted from the end) in all three.
Tensor Gather(Tensor params, Tensor indices, int axis = 0);
Tensor UnsortedSegmentSum(Tensor data, Tensor segment_ids, int64_t num_segments, int axis = 0);
// Positions 0..n-1 for n = like.shape[axis], known or symbolic: Less(Reshape(Iota(x, 1),
// {-1, 1}), Reshape(Iota(x, 1), {1, -1})) is a causal mask for any sequence length.
Tensor Iota(Tensor like, int axis, DType dtype = DType::kI32);

// ---- Random numbers (docs/RANDOM.md): stateless, counter-based (Philox-4x32-10) ----
// A tensor of like's shape (a -1 dim included; like's values are never read) whose bits
// are a function of (seed, op key, step, element index) alone: the same compiled or not,
// on every device and schedule. `step` is an i32 scalar read at run time (a step
// Variable: a new step needs no recompile). The op key defaults to a fingerprint of the
// node's name, so two random ops of a program differ and re-building the program gives
// the same bits; pass one to share or pin a stream. Uniform: [0, 1), f32 or f64.
Tensor RandomUniform(Tensor like, Tensor step, uint64_t seed, DType dtype = DType::kF32,
                     std::optional<uint64_t> op_key = std::nullopt);
// Mean 0, variance 1, f32 (Box-Muller; |values| below 6.56).
Tensor RandomNormal(Tensor like, Tensor step, uint64_t seed,
                    std::optional<uint64_t> op_key = std::nullopt);

// ---- Convolution and pooling (f32, f64; graph.h's Window2D and Pool2DAttrs) ----
// x is [N, H, W, C] (NHWC) or [N, C, H, W] (NCHW); the filter [KH, KW, C / groups, C_out].
Tensor Conv2D(Tensor x, Tensor filter, const Window2D& window);
// Strides and dilations are {h, w} (an initializer list, so that Conv2D(x, f, {2, 2}) is
// this overload and not a Window2D's; any other length is an error on the graph naming
// x, and the result is invalid).
Tensor Conv2D(Tensor x, Tensor filter, std::initializer_list<int> strides = {1, 1},
              Padding padding = Padding::kValid, DataFormat format = DataFormat::kNHWC,
              std::initializer_list<int> dilations = {1, 1});
// Windows of size[0] x size[1]; MaxPool pads with -inf, AvgPool divides by the number of
// elements of x in the window (TF's SAME).
Tensor MaxPool(Tensor x, std::array<int64_t, 2> size, std::array<int, 2> strides,
               Padding padding = Padding::kValid, DataFormat format = DataFormat::kNHWC);
Tensor AvgPool(Tensor x, std::array<int64_t, 2> size, std::array<int, 2> strides,
               Padding padding = Padding::kValid, DataFormat format = DataFormat::kNHWC);
Tensor MaxPool(Tensor x, const Pool2DAttrs& attrs);  // explicit padding: attrs.window
Tensor AvgPool(Tensor x, const Pool2DAttrs& attrs);
// The gradient ops (gradients.h builds them; they are ops like any other).
// dx of a Conv2D of an x of `input_shape`; dfilter of a filter of `filter_shape`.
Tensor Conv2DBackpropInput(Shape input_shape, Tensor filter, Tensor dy, const Window2D& window);
Tensor Conv2DBackpropFilter(Tensor x, Shape filter_shape, Tensor dy, const Window2D& window);
// dx of MaxPool(x): dy routed to the first maximum of each window (row-major order).
Tensor MaxPoolGrad(Tensor x, Tensor dy, const Pool2DAttrs& attrs);
// The pool's output shape: g (shaped as x) read at each window's first maximum.
Tensor MaxPoolGradGrad(Tensor x, Tensor g, const Pool2DAttrs& attrs);
// dx of AvgPool of an x of `input_shape` (attrs.shape is set from it).
Tensor AvgPoolGrad(Shape input_shape, Tensor dy, Pool2DAttrs attrs);

// ---- Attention (docs/ATTENTION.md; graph.h's AttentionAttrs) ----
// The fused ops; ScaledDotProductAttention builds them (and gradients() their backward).
// `step`: the dropout's i32 scalar step, given exactly when attrs.dropout is nonzero.
Tensor Attention(Tensor q, Tensor k, Tensor v, const AttentionAttrs& attrs, Tensor step = Tensor());
// The per-row log(sum_j exp(scale q_i k_j)) over the visible keys: [..., Tq].
Tensor AttentionLogSumExp(Tensor q, Tensor k, const AttentionAttrs& attrs);
// dq, dk or dv (`op`: kAttentionGradQ, kAttentionGradK, kAttentionGradV) of Attention(q,
// k, v) given dout, its lse and delta = rowsum(dout * out) ([..., Tq] each).
Tensor AttentionGrad(OpKind op, Tensor q, Tensor k, Tensor v, Tensor dout, Tensor lse, Tensor delta,
                     const AttentionAttrs& attrs, Tensor step = Tensor());

// ---- Host calls: never compiled ----
std::vector<Tensor> HostCall(Graph& g, std::string_view name, std::vector<Tensor> inputs,
                             std::vector<TensorSpec> outputs, HostFunction fn);

// ---- Composites ----
// A row of all -inf, or one holding +inf or NaN, is NaN throughout (JAX's and TF's).
Tensor Softmax(Tensor logits, int axis = -1);
Tensor LogSoftmax(Tensor logits, int axis = -1);
// Per-row loss -sum(labels * log_softmax(logits)) over the last axis, computed stably.
Tensor SoftmaxCrossEntropyWithLogits(Tensor logits, Tensor labels);
enum class Activation { kNone, kRelu, kGelu, kSigmoid, kTanh };
// x @ w + b, then the activation (one outside the enum is an error on the graph naming x).
Tensor Dense(Tensor x, Tensor w, Tensor b, Activation activation = Activation::kNone);
// Normalizes over the last axis: (x - mean) * rsqrt(var + eps) * gamma + beta.
Tensor LayerNorm(Tensor x, Tensor gamma, Tensor beta, double epsilon = 1e-5);
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor Gelu(Tensor x);
// Batch normalization (Keras's BatchNormalization) over every axis of x but `axis`, the
// channels (-1: the last, as NHWC and [N, C]; 1 for NCHW); gamma, beta and the moving
// statistics are [C]. Training normalizes with the batch's mean and (biased) variance
// and returns in `updates` the in-place updates of the moving statistics,
//   moving -= (moving - batch) * (1 - momentum),
// to run with the train step; inference normalizes with the moving statistics. An axis
// out of range is an error on the graph naming x (y and updates are then invalid).
struct BatchNormOutput {
  Tensor y;
  std::vector<Tensor> updates;  // AssignSubs of moving_mean and moving_variance (training)
};
BatchNormOutput BatchNorm(Tensor x, Tensor gamma, Tensor beta, Tensor moving_mean,
                          Tensor moving_variance, bool training, double momentum = 0.99,
                          double epsilon = 1e-3, int axis = -1);
// The mean over H and W: [N, C] from NHWC or NCHW. An x of another rank than 4, or a
// format outside the enum, is an error on the graph naming x.
Tensor GlobalAvgPool(Tensor x, DataFormat format = DataFormat::kNHWC);
// [N, d1, d2, ...] -> [N, d1 * d2 * ...]; the dims after the first must be known.
Tensor Flatten(Tensor x);
// softmax(q k^T * scale, causal mask) v: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv]
// -> [..., Tq, Dv]; any T may be -1. Causal: key j is visible to query i iff
// j <= i + (Tk - Tq) (torch's is_causal for Tq == Tk); a query that sees no key gives 0.
// Fused (the default): one Attention op whose kernel never holds the [Tq, Tk] scores.
// Unfused: BatchMatMul, an Iota/Less/Select mask, Softmax and BatchMatMul, which
// materialize them (the fused op's cross-check and benchmark baseline).
// Dropout on the weights (rate `dropout`): Dropout's rule with the uniforms of
// RandomUniform(weights, step, seed, dtype, op_key); `step` an i32 scalar (a new mask
// each step, no recompile); the op key defaults to RandomOpKeyOf(q's node name).
struct AttentionOptions {
  bool causal = false;
  std::optional<double> scale;  // default 1 / sqrt(D) (D must then be known)
  double dropout = 0;
  Tensor step;  // required with dropout
  uint64_t seed = 0;
  std::optional<uint64_t> op_key;
  bool fused = true;
};
Tensor ScaledDotProductAttention(Tensor q, Tensor k, Tensor v,
                                 const AttentionOptions& options = AttentionOptions());
// Inverted dropout (torch's, TF's): each element of x (floating) kept with probability
// 1 - rate and scaled by 1 / (1 - rate), else 0, by a RandomUniform keyed by (seed, step):
// the same mask for the same (seed, step), a new one for another step. Its gradient is
// the same mask times the upstream gradient. rate 0 is x itself; a rate outside [0, 1),
// or an x that is not floating, is an error on the graph naming x.
Tensor Dropout(Tensor x, double rate, Tensor step, uint64_t seed);

// ---- Operators (scalars become constants of the tensor's dtype) ----
// Dtypes are never promoted: a fraction with an i32 tensor (x * 0.5, 2.5 / x) is an
// error on the graph naming the tensor, as TensorFlow's conversion refuses it, where it
// truncated toward zero (x * 0.5 was x * 0); Cast the tensor to a floating dtype first.
Tensor operator+(Tensor a, Tensor b);
Tensor operator-(Tensor a, Tensor b);
Tensor operator*(Tensor a, Tensor b);
Tensor operator/(Tensor a, Tensor b);
Tensor operator-(Tensor a);
Tensor operator+(Tensor a, double b);
Tensor operator-(Tensor a, double b);
Tensor operator*(Tensor a, double b);
Tensor operator/(Tensor a, double b);
Tensor operator+(double a, Tensor b);
Tensor operator-(double a, Tensor b);
Tensor operator*(double a, Tensor b);
Tensor operator/(double a, Tensor b);

}  // namespace braze

#endif  // BRAZE_OPS_H_
