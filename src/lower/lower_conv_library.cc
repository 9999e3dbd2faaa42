// Conv2D as a call of oneDNN's convolution from inside the fused kernel; see lower_ops.h
// and device/cpu_conv.h. The ops around it stay Halide stages of the same pipeline.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "device/cpu_conv.h"
#include "ir/window_geometry.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {
namespace {

// The padding after the input along one dim, as TF's rule gives it (window_geometry.h).
int64_t PadAfter(const SpatialDim& d, Padding padding, int64_t explicit_after) {
  switch (padding) {
    case Padding::kValid:
      return 0;
    case Padding::kExplicit:
      return explicit_after;
    case Padding::kSame: {
      const int64_t extent = (d.window - 1) * d.dilation + 1;
      const int64_t total = std::max<int64_t>((d.out - 1) * d.stride + extent - d.in, 0);
      return total - d.pad_before;
    }
  }
  return 0;
}

// Some dim of v is sized at run time, other than its batch (dim 0) when `batched`.
bool SymbolicBeyondBatch(const Value& v, bool batched) {
  for (size_t d = batched ? 1 : 0; d < v.shape.size(); ++d) {
    if (SymbolOf(v, d) >= 0) return true;
  }
  return false;
}

// What a Conv2D's call adds after the convolution (device/cpu_conv.h's `post`).
struct Post {
  const Value* bias = nullptr;
  const Value* residual = nullptr;
  bool relu = false;
  int32_t Flags() const {
    return (bias != nullptr ? 1 : 0) | (residual != nullptr ? 2 : 0) | (relu ? 4 : 0);
  }
};

// Which of the epilogue's operands the call takes, by shape: the first Add's is a bias
// when it is [C_out] (per channel: NHWC's last dim, or a folded batch norm's) or a
// residual when it is the output's shape; the second Add's only a residual after a
// bias. The Relu goes in when the last Add given does.
Post PostOf(const MatMulEpilogue& e, const Value& x, const TensorType& out, int64_t c_out,
            bool nchw) {
  auto is_bias = [&](const Value* v) {
    return v != nullptr && v->dtype == DType::kF32 && v->shape.size() == 1 &&
           v->shape[0] == c_out && !SymbolicBeyondBatch(*v, false) && (!nchw || e.channel_bias);
  };
  // The output's shape, sized at run time in its batch alone, and that as x's batch.
  auto is_residual = [&](const Value* v) {
    return v != nullptr && v->dtype == DType::kF32 && v->shape == out.shape &&
           !SymbolicBeyondBatch(*v, true) && SymbolOf(*v, 0) == SymbolOf(x, 0);
  };
  Post p;
  if (is_bias(e.bias)) {
    p.bias = e.bias;
    if (is_residual(e.residual)) p.residual = e.residual;
  } else if (is_residual(e.bias)) {
    p.residual = e.bias;
  }
  const bool last_taken =
      e.residual != nullptr ? p.residual == e.residual : p.bias != nullptr || p.residual != nullptr;
  p.relu = e.relu && last_taken;
  return p;
}

// `e` without the residual `p` took (a call oneDNN refuses with it): the bias alone
// where one came first, else nothing; the Relu after the residual stays too.
MatMulEpilogue* WithoutResidual(MatMulEpilogue* e, const Post& p) {
  if (p.residual == e->bias) e->bias = nullptr;
  e->residual = nullptr;
  e->relu = false;
  return e;
}

}  // namespace

std::optional<Value> LowerLibraryConv(LoweringContext& ctx, const std::string& name, OpKind op,
                                      const Conv2DAttrs& attrs, const Value& a, const Value& b,
                                      const TensorType& out, MatMulEpilogue* epilogue) {
  if (ctx.library_gemm_min_work < 0 || ctx.gpu || out.dtype != DType::kF32) return std::nullopt;
  // x and the filter, whichever of the operands and the output they are.
  const Value* x = op == OpKind::kConv2DBackpropInput ? nullptr : &a;
  const Shape x_shape = x != nullptr ? a.shape : out.shape;
  const Shape filter_shape = op == OpKind::kConv2D                ? b.shape
                             : op == OpKind::kConv2DBackpropInput ? a.shape
                                                                  : out.shape;
  const absl::StatusOr<Conv2DGeometry> g = Conv2DGeometryOf(attrs.window, x_shape, filter_shape);
  if (!g.ok()) return std::nullopt;  // shape inference has checked it: not reached
  const int64_t taps = g->h.window * g->w.window * (g->c_in / g->groups);
  const int64_t min_work = std::max(ctx.library_gemm_min_work, ctx.library_conv_min_work);
  if (g->n * g->h.out * g->w.out * g->c_out * taps < min_work) {
    return std::nullopt;
  }
  // The call reads whole images: only the batch may be sized at run time.
  if (SymbolicBeyondBatch(a, op != OpKind::kConv2DBackpropInput) ||
      SymbolicBeyondBatch(b, op != OpKind::kConv2D)) {
    return std::nullopt;
  }
  const bool nchw = attrs.window.format == DataFormat::kNCHW;
  const Post post = op == OpKind::kConv2D && epilogue != nullptr
                        ? PostOf(*epilogue, a, out, g->c_out, nchw)
                        : Post{};
  const int direction = op == OpKind::kConv2D ? 0 : op == OpKind::kConv2DBackpropInput ? 1 : 2;
  const Window2D& w = attrs.window;
  const CpuConvGeometry call{direction,
                             nchw,
                             static_cast<int32_t>(g->n),
                             static_cast<int32_t>(g->c_in),
                             static_cast<int32_t>(g->h.in),
                             static_cast<int32_t>(g->w.in),
                             static_cast<int32_t>(g->c_out),
                             static_cast<int32_t>(g->h.window),
                             static_cast<int32_t>(g->w.window),
                             static_cast<int32_t>(g->groups),
                             w.stride_h,
                             w.stride_w,
                             w.dilation_h,
                             w.dilation_w,
                             static_cast<int32_t>(g->h.pad_before),
                             static_cast<int32_t>(PadAfter(g->h, w.padding, w.pad_bottom)),
                             static_cast<int32_t>(g->w.pad_before),
                             static_cast<int32_t>(PadAfter(g->w, w.padding, w.pad_right)),
                             post.Flags()};
  // A configuration oneDNN refuses is Braze's Halide convolution, not a failing call;
  // a residual add whose post-op oneDNN refuses (or is unchecked) stays a Halide add.
  if (!CpuConvSupported(call, ctx.library_gemm_threads)) {
    if (post.residual == nullptr) return std::nullopt;
    return LowerLibraryConv(ctx, name, op, attrs, a, b, out, WithoutResidual(epilogue, post));
  }
  // The backward ops' operands: (filter, dy) -> (dy, filter); (x, dy) stays.
  const Value& first = op == OpKind::kConv2DBackpropInput ? b : a;
  const Value& second = op == OpKind::kConv2DBackpropInput ? a : b;
  std::vector<schedule::Stage::Operand> operands;
  const Halide::ExternFuncArgument a_arg = LibraryArgument(ctx, first, name + "_a", operands);
  const Halide::ExternFuncArgument b_arg = LibraryArgument(ctx, second, name + "_b", operands);
  // Without a bias (residual) the call reads none: one element of its own stands in
  // (handing b again would pass a constant's buffer twice, which Halide refuses).
  auto unused = [&](const char* what) {
    Halide::Buffer<float> one(std::vector<int>{1}, ctx.UniqueName(name + what));
    one(0) = 0.0f;
    return Halide::ExternFuncArgument(one);
  };
  Halide::ExternFuncArgument bias_arg = unused("_no_bias");
  Halide::ExternFuncArgument residual_arg = unused("_no_residual");
  if (post.bias != nullptr) {
    // A bias equal everywhere (a broadcast scalar) has no buffer yet: the call takes one.
    bias_arg = LibraryArgument(ctx, Materialize(ctx, name + "_bias", *post.bias), name + "_bias",
                               operands);
  }
  if (post.residual != nullptr) {
    residual_arg = LibraryArgument(ctx, Materialize(ctx, name + "_residual", *post.residual),
                                   name + "_residual", operands);
  }
  if (epilogue != nullptr) {
    // The first Add is the bias's, or the residual's where no bias came first.
    epilogue->folded = post.bias != nullptr || post.residual != nullptr;
    epilogue->residual_folded = post.bias != nullptr && post.residual != nullptr;
  }
  auto i32 = [](int64_t v) { return Halide::Expr(static_cast<int32_t>(v)); };
  // The batch: a run-time value when symbolic (the filter's gradient reads every image).
  const Halide::Expr n = Halide::cast<int32_t>(ctx.Extent(first, 0));
  // Named for its epilogue, which dumps and --log_compiles show ("Conv2D_3_bias_residual_relu").
  const std::string suffix =
      absl::StrCat(post.bias != nullptr ? "_bias" : "", post.residual != nullptr ? "_residual" : "",
                   post.relu ? "_relu" : "");
  Halide::Func conv(ctx.UniqueName(name + suffix));
  conv.define_extern(kCpuConvF32Symbol,
                     {a_arg,
                      b_arg,
                      bias_arg,
                      residual_arg,
                      i32(direction),
                      i32(nchw ? 1 : 0),
                      n,
                      i32(call.c_in),
                      i32(call.in_h),
                      i32(call.in_w),
                      i32(call.c_out),
                      i32(call.kh),
                      i32(call.kw),
                      i32(call.groups),
                      i32(call.sh),
                      i32(call.sw),
                      i32(call.dh),
                      i32(call.dw),
                      i32(call.pt),
                      i32(call.pb),
                      i32(call.pl),
                      i32(call.pr),
                      i32(call.post),
                      ctx.library_gemm_threads},
                     Halide::Float(32), 4);
  ctx.calls_library = true;
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kLibraryMatMul;  // a library call: stored whole
  stage.acc = conv;
  stage.result = conv;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = op == OpKind::kConv2DBackpropFilter ? g->n * g->h.out * g->w.out : taps;
  stage.operands = std::move(operands);
  ctx.stages().push_back(stage);
  Value result;
  result.func = conv;
  result.dtype = out.dtype;
  result.shape = out.shape;
  return result;
}

}  // namespace lower
}  // namespace braze
