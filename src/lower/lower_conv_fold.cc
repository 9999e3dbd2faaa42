// A Conv2D with the batch norm after it folded into its filter and bias (conv_bn_fold.h
// finds them): y = Conv2D(x, f * scale) + (shift - mean * scale), per output channel.
// The filter and bias are small Funcs computed at every run; the convolution is
// oneDNN's call with the bias (and the ReLU) in it where the library takes it, else
// Braze's Halide convolution with the bias added to its result.
#include "braze/status.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;

// `v`, one value per output channel broadcast against an output of `out_shape` whose
// channels are dim `axis`, as a [channels] vector (read inline: a few loads).
Value ChannelVector(const Value& v, const Shape& out_shape, int axis, int64_t channels) {
  return Inline(v.dtype, {channels}, [=](const std::vector<Expr>& i) {
    std::vector<Expr> index(out_shape.size(), Expr(0));
    index[axis] = i[0];
    return At(v, BroadcastIndex(v.shape, out_shape, index));
  });
}

}  // namespace

absl::StatusOr<Value> LowerFoldedConv(LoweringContext& ctx, const std::string& name,
                                      const Conv2DAttrs& attrs, const std::vector<Value>& in,
                                      const TensorType& out, MatMulEpilogue* after) {
  const Value &x = in[0], &f = in[1];
  const bool nchw = attrs.window.format == DataFormat::kNCHW;
  const int axis = nchw ? 1 : 3;
  const int64_t channels = f.shape[3];  // HWIO, grouped or depthwise too
  const DType dtype = out.dtype;
  const TensorType vector{dtype, {channels}};
  const Value mean = ChannelVector(in[2], out.shape, axis, channels);
  const Value scale = ChannelVector(in[3], out.shape, axis, channels);
  const Value shift = ChannelVector(in[4], out.shape, axis, channels);
  // The products the unfolded form computes per element, once per filter element and
  // channel here: f * scale, and the bias shift - mean * scale.
  const Value filter = LowerBinary(ctx, name + "_filter", OpKind::kMul, f, scale, {dtype, f.shape});
  const Value bias = LowerBinary(
      ctx, name + "_bias", OpKind::kSub, shift,
      LowerBinary(ctx, name + "_mean_scale", OpKind::kMul, mean, scale, vector), vector);
  MatMulEpilogue epilogue = *after;  // the residual and Relu
  epilogue.bias = &bias;
  epilogue.channel_bias = true;  // [C] per channel in NCHW too
  std::optional<Value> call =
      LowerLibraryConv(ctx, name, OpKind::kConv2D, attrs, x, filter, out, &epilogue);
  *after = epilogue;
  after->bias = nullptr;  // this function's own
  if (!call.has_value()) after->folded = after->residual_folded = false;
  if (call.has_value() && epilogue.folded) return *std::move(call);
  after->residual_folded = false;
  Value conv;
  if (call.has_value()) {
    conv = *std::move(call);
  } else {
    BRAZE_ASSIGN_OR_RETURN(conv, LowerConv(ctx, name, OpKind::kConv2D, attrs, {x, filter}, out));
  }
  // The bias broadcast along the channel dim: [C] in NHWC, [C, 1, 1] in NCHW.
  const Shape per_channel = nchw ? Shape{channels, 1, 1} : Shape{channels};
  const Value b =
      Inline(dtype, per_channel, [=](const std::vector<Expr>& i) { return At(bias, {i[0]}); });
  return LowerBinary(ctx, name + "_add_bias", OpKind::kAdd, conv, b, out);
}

}  // namespace lower
}  // namespace braze
