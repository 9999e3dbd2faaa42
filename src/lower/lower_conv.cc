// Lowering of Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter: direct convolutions.
//
// Each is a matmul in disguise (the output's channels against a window of the input's),
// lowered as one: an accumulator Func whose update adds one product per step of an RDom
// over the window and the channels, read by a pure copy, registered as a kConv stage
// (schedule/pipeline_info.h) so every schedule tiles it like a matmul: dim 0 of the
// output vectorized (the output channels in NHWC; W in NCHW), rows unrolled, the
// accumulators of a tile in registers across the RDom. Like MatMul they accumulate in
// the element type, strictly (IEEE's inf and NaN; no fast-math reassociation).
//
// Semantics are src/reference/window.cc's: a padding tap contributes nothing. It is
// left out of the RDom (RDom::where) rather than multiplied as 0 (0 * inf is NaN); a
// condition that varies along the vectorized dim (NCHW's W) selects the product
// instead, so the predicate does not split the vector. Reads are clamped into the
// input: Halide bounds every access by the buffer's extents. For a GPU, a Conv2D (and an
// input gradient at stride 1) clamps inside two views of its operands instead
// (Stage::ConvWindow), which the GPU heuristic stages in shared memory.
//
// The filter gradient reduces over N * OH * OW for few outputs: it is computed as P
// partial sums (batch n goes to partial n % P), a dim the schedules run in parallel,
// added up by a pure Func.
#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "lower/long_sums.h"
#include "lower/lower_ops.h"
#include "lower/lower_window.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;
using schedule::Stage;

// Partials of a filter gradient: at most this many, each summing at least
// kMinPartialWork products per filter element (fewer partials add less at the end).
constexpr int64_t kMaxPartials = 16;
constexpr int64_t kMinPartialWork = 2048;

// The partial sums of a filter gradient reducing `work` products per element over a
// batch of n. A static batch prefers a divisor of n (no test that an image exists)
// unless that halves the partials.
int64_t Partials(int64_t work, int64_t n, bool symbolic) {
  // An empty batch (a -1 batch fed 0 rows): nothing to split, and no divisor of 0 (it
  // divided by zero compiling; braze-fuzz seed 62600057).
  if (!symbolic && n < 1) return 1;
  const int64_t want = std::min(std::clamp<int64_t>(work / kMinPartialWork, 1, kMaxPartials),
                                symbolic ? kMinSymbolicExtent : n);
  if (symbolic) return want;
  int64_t divisor = want;
  while (n % divisor != 0) --divisor;
  return divisor * 2 >= want ? divisor : want;
}

std::vector<Expr> RowMajor(const std::vector<Halide::Var>& vars) {
  return std::vector<Expr>(vars.rbegin(), vars.rend());
}

// What a conv's accumulator is built from.
struct ConvParts {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;              // of the accumulator (row-major)
  Halide::RDom r;           // over the window and channels (and the batch for the filter)
  Expr product;             // the term, in r and the accumulator's vars
  std::vector<Expr> where;  // tests of padding that do not vary along dim 0
  std::vector<Expr> lanes;  // tests that do (NCHW's W): a select
  std::vector<Stage::Operand> operands;
  int64_t reduction_extent = 1;
  bool reduction_symbolic = false;
  Stage::ConvWindow conv;  // a Conv2D for a GPU (pipeline_info.h)
};

// A conv operand as the k loop should read it. One that computes something becomes a
// Func of its own plus a zero Halide cannot see through (lower_reduce.cc's MatMul: an
// operand an autoscheduler inlines into the update would otherwise let loop trimming
// take x - x as 0 for infinite x); `repack` gives it a new layout (a row-major index
// of the result -> the index to read the source at) and `shape`.
Value Operand(LoweringContext& ctx, const std::string& name, const Value& v,
              std::vector<Stage::Operand>& operands, const Shape& shape = {},
              std::function<std::vector<Expr>(const std::vector<Expr>&)> repack = nullptr,
              bool transpose = false) {
  Value m = Materialize(ctx, name, v);
  const bool computes =
      m.inline_body || (m.func.defined() && !schedule::IsPlainLoad(m.func.function()));
  if (computes || repack) {
    const std::vector<int> sym = m.sym;
    Value src = m;
    m = Define(ctx, name, src.dtype, repack ? shape : src.shape, [&](const std::vector<Expr>& i) {
      const Expr e = At(src, repack ? repack(i) : i);
      return computes ? e + ctx.OpaqueZero(e.type()) : e;
    });
    m.sym = repack ? std::vector<int>() : sym;
  }
  if (m.func.defined()) {
    operands.push_back(Stage::Operand{
        m.func, HalideExtents(m.shape), transpose, HalideSymbolic(m.sym, m.shape.size()), {}});
  }
  return m;
}

// A view of v (of `shape`) clamping index d into [0, extents[d]), a dim of extent 0 not
// clamped: the GPU heuristic's tiles may compute it over constant-size boxes past an
// edge (Stage::ConvWindow) without reading outside v; inlined, it is the clamped read.
Halide::Func ClampedView(LoweringContext& ctx, const std::string& name, const Value& v,
                         const Shape& shape, const std::vector<int64_t>& extents) {
  return Define(ctx, name, v.dtype, shape,
                [&](const std::vector<Expr>& i) {
                  std::vector<Expr> at(i.size());
                  for (size_t d = 0; d < i.size(); ++d) {
                    at[d] = extents[d] > 0 ? ClampTo(i[d], extents[d]) : i[d];
                  }
                  return At(v, at);
                })
      .func;
}

// An image's clamping extents in `format`'s order: H, W and C; the batch not clamped.
std::vector<int64_t> ImageExtents(DataFormat format, int64_t h, int64_t w, int64_t c) {
  const LayoutAxes a = AxesOf(format);
  std::vector<int64_t> e(4, 0);
  e[a.h] = h, e[a.w] = w, e[a.c] = c;
  return e;
}

// acc = 0; acc += product over r (where the window is inside the input); the stage,
// and the pure Func reading acc.
Value Accumulate(LoweringContext& ctx, ConvParts parts) {
  const int rank = static_cast<int>(parts.shape.size());
  std::vector<Halide::Var> vars = HalideVars(rank);
  if (Expr w = AllOf(parts.where); w.defined()) parts.r.where(w);
  Expr term = parts.product;
  if (Expr l = AllOf(parts.lanes); l.defined()) {
    term = Halide::select(l, term, Halide::Internal::make_zero(term.type()));
  }
  Halide::Func acc(ctx.UniqueName(parts.name + "_acc"));
  acc(vars) = TypedConst(parts.dtype, 0);
  // Long sums in blocks for the autoschedulers (long_sums.h). A symbolic dim (a batch's
  // steps) is estimated from the stage's estimate of the whole domain.
  std::vector<int64_t> estimates;
  int64_t known = 1;
  for (int i = 0; i < parts.r.dimensions(); ++i) {
    const int64_t* e = Halide::Internal::as_const_int(parts.r[i].extent());
    estimates.push_back(e != nullptr ? *e : -1);
    if (e != nullptr) known *= std::max<int64_t>(*e, 1);
  }
  for (int64_t& e : estimates) {
    if (e < 0) e = std::max<int64_t>(1, parts.reduction_extent / known);
  }
  const SumStages sums =
      DefineSum(ctx, parts.name, acc, vars, parts.r, estimates, HalideExtents(parts.shape), term,
                [](const Expr& s, const Expr& t) { return Halide::strict_float(s + t); });
  if (sums.partial.acc.defined()) ctx.stages().push_back(sums.partial);
  Value acc_value;
  acc_value.func = acc;
  acc_value.dtype = parts.dtype;
  acc_value.shape = parts.shape;
  Value result = Define(ctx, parts.name, parts.dtype, parts.shape,
                        [&](const std::vector<Expr>& i) { return At(acc_value, i); });
  Stage stage;
  stage.kind = schedule::StageKind::kConv;
  stage.acc = acc;
  stage.result = result.func;
  stage.rdom = sums.rdom;
  stage.extents = HalideExtents(parts.shape);
  stage.reduction_extent =
      sums.partial.acc.defined() ? sums.reduction_extent : parts.reduction_extent;
  stage.reduction_symbolic = parts.reduction_symbolic;
  stage.operands = std::move(parts.operands);
  stage.conv = parts.conv;
  ctx.stages().push_back(stage);
  return result;
}

// The padding tests of input index i of dim d (empty when no tap reaches the padding).
void PadTests(const SpatialDim& d, const Expr& i, bool lane, ConvParts& parts) {
  if (!MayPad(d)) return;
  // One unsigned compare in both forms: Halide 14 learns bounds from a two-sided test
  // and drops the read's clamp under it (braze-fuzz seeds 48, 13100574).
  (lane ? parts.lanes : parts.where).push_back(InsideForWhere(i, d.in));
}

// y[n, oh, ow, co] = sum over (ci, kw, kh) of x[n, ih, iw, group's ci] * f[kh, kw, ci, co].
Value ConvForward(LoweringContext& ctx, const std::string& name, const Conv2DGeometry& g,
                  const Value& x_in, const Value& f_in, const TensorType& out) {
  ConvParts p;
  p.name = name;
  p.dtype = out.dtype;
  p.shape = out.shape;
  const Value x = Operand(ctx, name + "_x", x_in, p.operands);
  const Value f = Operand(ctx, name + "_f", f_in, p.operands);
  const int64_t cg = g.c_in / g.groups, og = g.c_out / g.groups;
  p.r = Halide::RDom({{0, static_cast<int>(cg)},
                      {0, static_cast<int>(g.w.window)},
                      {0, static_cast<int>(g.h.window)}},
                     ctx.UniqueName(name + "_r"));
  const Expr ci = p.r.x, tw = p.r.y, th = p.r.z;
  const Nhwc o = Split4(g.format, RowMajor(HalideVars(4)));
  const Expr ih = InputIndex(g.h, o.h, th), iw = InputIndex(g.w, o.w, tw);
  const Expr c = g.groups == 1 ? ci : (o.c / static_cast<int>(og)) * static_cast<int>(cg) + ci;
  Expr xv, fv;
  if (ctx.gpu) {
    // Read through clamping views (Stage::ConvWindow), which the GPU heuristic may stage
    // in shared memory over constant-size boxes; inlined, they are the reads below.
    Stage::ConvWindow& w = p.conv;
    w.x_view =
        ClampedView(ctx, name + "_xv", x, x.shape, ImageExtents(g.format, g.h.in, g.w.in, g.c_in));
    w.f_view = ClampedView(ctx, name + "_fv", f, f.shape, {g.h.window, g.w.window, cg, g.c_out});
    w.nchw = g.format == DataFormat::kNCHW;
    w.kh = g.h.window, w.kw = g.w.window;
    w.stride_h = g.h.stride, w.stride_w = g.w.stride;
    w.dilation_h = g.h.dilation, w.dilation_w = g.w.dilation;
    w.cg = cg, w.og = og, w.groups = g.groups;
    const std::vector<Expr> at = Index4(g.format, {o.n, ih, iw, c});
    xv = w.x_view(std::vector<Expr>(at.rbegin(), at.rend()));
    fv = w.f_view(o.c, ci, tw, th);
  } else {
    xv = At(x, Index4(g.format, {o.n, ClampTo(ih, g.h.in), ClampTo(iw, g.w.in), c}));
    fv = At(f, {th, tw, ci, o.c});
  }
  p.product = xv * fv;
  PadTests(g.h, ih, false, p);
  PadTests(g.w, iw, g.format == DataFormat::kNCHW, p);
  p.reduction_extent = cg * g.h.window * g.w.window;
  return Accumulate(ctx, std::move(p));
}

// dx[n, ih, iw, c] = sum over (j, kw, kh) of dy[n, oh, ow, group's j] * f[kh, kw, c, j]
// for the windows (oh, ow) whose tap (kh, kw) reads (ih, iw): ih + pad - kh * dilation
// must be a multiple of the stride (a test; correct for every stride, not the fastest).
Value ConvBackpropInput(LoweringContext& ctx, const std::string& name, const Conv2DGeometry& g,
                        const Value& f_in, const Value& dy_in, const TensorType& out) {
  ConvParts p;
  p.name = name;
  p.dtype = out.dtype;
  p.shape = out.shape;
  const int64_t cg = g.c_in / g.groups, og = g.c_out / g.groups;
  const int cgi = static_cast<int>(cg), ogi = static_cast<int>(og);
  // The filter repacked as [KH, KW, og, C_in], so that dim 0 of dx (C_in in NHWC) reads
  // it contiguously: element (kh, kw, j, c) is f[kh, kw, c % cg, (c / cg) * og + j].
  const Shape packed{g.h.window, g.w.window, og, g.c_in};
  const Value ft = Operand(
      ctx, name + "_ft", f_in, p.operands, packed,
      [=](const std::vector<Expr>& i) -> std::vector<Expr> {
        if (cgi == g.c_in) return {i[0], i[1], i[3], i[2]};  // one group: a transpose
        return {i[0], i[1], i[3] % cgi, (i[3] / cgi) * ogi + i[2]};
      },
      g.groups == 1);
  const Value dy = Operand(ctx, name + "_dy", dy_in, p.operands);
  p.r =
      Halide::RDom({{0, ogi}, {0, static_cast<int>(g.w.window)}, {0, static_cast<int>(g.h.window)}},
                   ctx.UniqueName(name + "_r"));
  const Expr j = p.r.x, tw = p.r.y, th = p.r.z;
  const Nhwc i = Split4(g.format, RowMajor(HalideVars(4)));
  const bool nchw = g.format == DataFormat::kNCHW;
  // The output index whose tap t reads input i, and the tests that it exists.
  auto source = [&](const SpatialDim& d, const Expr& in, const Expr& t, bool lane) {
    const Expr num = in + static_cast<int>(d.pad_before) - t * static_cast<int>(d.dilation);
    const Expr o = d.stride == 1 ? num : num / static_cast<int>(d.stride);
    std::vector<Expr>& tests = lane ? p.lanes : p.where;
    const int64_t lowest = d.pad_before - (d.window - 1) * d.dilation;
    const bool low = lowest < 0, high = (d.in - 1 + d.pad_before) / d.stride >= d.out;
    if (lane) {
      if (low) tests.push_back(num >= 0);
      if (high) tests.push_back(o < static_cast<int>(d.out));
    } else if (low || high) {
      // 0 <= num and num / stride < out, as one test that keeps o's clamp
      // (InsideForWhere): num < out * stride.
      tests.push_back(
          InsideForWhere(num, high ? d.out * d.stride : std::numeric_limits<int32_t>::max()));
    }
    if (d.stride > 1) tests.push_back(num % static_cast<int>(d.stride) == 0);
    return o;
  };
  const Expr oh = source(g.h, i.h, th, false), ow = source(g.w, i.w, tw, nchw);
  const Expr co = g.groups == 1 ? j : (i.c / cgi) * ogi + j;
  if (ctx.gpu && g.h.stride == 1 && g.w.stride == 1) {
    // At stride 1, a Conv2D of dy over the flipped filter: read through clamping views
    // for the GPU heuristic's tiles, as ConvForward. Its RDom's channels are dy's (og
    // per group), and each group of cg consecutive dx channels reads one group of them.
    Stage::ConvWindow& w = p.conv;
    w.x_view = ClampedView(ctx, name + "_dyv", dy, dy.shape,
                           ImageExtents(g.format, g.h.out, g.w.out, g.c_out));
    w.f_view = ClampedView(ctx, name + "_fv", ft, packed, {g.h.window, g.w.window, og, g.c_in});
    w.nchw = nchw;
    w.kh = g.h.window, w.kw = g.w.window;
    w.dilation_h = g.h.dilation, w.dilation_w = g.w.dilation;
    w.cg = og, w.og = cg, w.groups = g.groups;
    const std::vector<Expr> at = Index4(g.format, {i.n, oh, ow, co});
    p.product = w.x_view(std::vector<Expr>(at.rbegin(), at.rend())) * w.f_view(i.c, j, tw, th);
  } else {
    p.product = At(dy, Index4(g.format, {i.n, ClampTo(oh, g.h.out), ClampTo(ow, g.w.out), co})) *
                At(ft, {th, tw, j, i.c});
  }
  p.reduction_extent = og * g.h.window * g.w.window;
  return Accumulate(ctx, std::move(p));
}

// dw[kh, kw, ci, co] = sum over (ow, oh, n) of x[n, ih, iw, group's ci] * dy[n, oh, ow, co],
// as P partial sums over the batch (n = t * P + partial) added up at the end.
Value ConvBackpropFilter(LoweringContext& ctx, const std::string& name, const Conv2DGeometry& g,
                         const Value& x_in, const Value& dy_in, const TensorType& out) {
  const bool nchw = g.format == DataFormat::kNCHW;
  const bool n_symbolic = SymbolOf(x_in, AxesOf(g.format).n) >= 0;
  const Expr n_extent = ctx.Extent(x_in, AxesOf(g.format).n);
  const int64_t per_image = g.h.out * g.w.out;
  const int64_t partials = Partials(g.n * per_image, g.n, n_symbolic);
  const int pp = static_cast<int>(partials);
  ConvParts p;
  // Short: GPU kernels are named for their loops (POCL writes a file of that name, at
  // most 255 bytes: "_partial" in the name of each of a filter gradient's loops took
  // it to 270).
  p.name = name + (partials > 1 ? "_p" : "");
  p.dtype = out.dtype;
  p.shape = out.shape;
  if (partials > 1) p.shape.insert(p.shape.begin(), partials);
  const Value x = Operand(ctx, name + "_x", x_in, p.operands);
  // NCHW's dy repacked as NHWC: dim 0 of dw (C_out) then reads it contiguously.
  Value dy;
  if (nchw) {
    dy = Operand(ctx, name + "_dyt", dy_in, p.operands,
                 MakeShape(DataFormat::kNHWC, g.n, g.h.out, g.w.out, g.c_out),
                 [](const std::vector<Expr>& i) -> std::vector<Expr> {
                   return {i[0], i[3], i[1], i[2]};
                 });
    dy.sym = dy_in.sym;  // the batch keeps its class
    p.operands.back().symbolic = HalideSymbolic(dy.sym, 4);
  } else {
    dy = Operand(ctx, name + "_dy", dy_in, p.operands);
  }
  const Expr steps = partials == 1 ? n_extent : (n_extent + (pp - 1)) / pp;
  p.r = Halide::RDom({{0, static_cast<int>(g.w.out)}, {0, static_cast<int>(g.h.out)}, {0, steps}},
                     ctx.UniqueName(name + "_r"));
  const Expr ow = p.r.x, oh = p.r.y, t = p.r.z;
  std::vector<Halide::Var> vars = HalideVars(static_cast<int>(p.shape.size()));
  const std::vector<Expr> index = RowMajor(vars);
  const size_t k0 = partials > 1 ? 1 : 0;  // where kh is in the index
  const Expr kh = index[k0], kw = index[k0 + 1], ci = index[k0 + 2], co = index[k0 + 3];
  Expr n = partials > 1 ? t * pp + index[0] : t;
  if (partials > 1 && (n_symbolic || g.n % partials != 0)) {
    // The last step's images past the batch are left out, and their reads clamped:
    // Halide's bounds of x ignore the predicate.
    p.where.push_back(n < n_extent);
    n = Halide::min(n, n_extent - 1);
  }
  const Expr ih = InputIndex(g.h, oh, kh), iw = InputIndex(g.w, ow, kw);
  PadTests(g.h, ih, false, p);
  PadTests(g.w, iw, false, p);
  const int64_t cg = g.c_in / g.groups, og = g.c_out / g.groups;
  const Expr c = g.groups == 1 ? ci : (co / static_cast<int>(og)) * static_cast<int>(cg) + ci;
  const Expr xv = At(x, Index4(g.format, {n, ClampTo(ih, g.h.in), ClampTo(iw, g.w.in), c}));
  p.product = xv * At(dy, {n, oh, ow, co});
  p.reduction_extent = g.n * per_image / partials;
  p.reduction_symbolic = n_symbolic;
  const Value partial = Accumulate(ctx, std::move(p));
  if (partials == 1) return partial;
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& i) {
    std::vector<Expr> at = i;
    at.insert(at.begin(), Expr(0));
    Expr sum = At(partial, at);
    for (int k = 1; k < pp; ++k) {
      at[0] = k;
      sum = sum + At(partial, at);
    }
    return Halide::strict_float(sum);
  });
}

}  // namespace

absl::StatusOr<Value> LowerConv(LoweringContext& ctx, const std::string& name, OpKind op,
                                const Conv2DAttrs& attrs, const std::vector<Value>& in,
                                const TensorType& out) {
  const DataFormat format = attrs.window.format;
  Shape x_shape, f_shape;
  switch (op) {
    case OpKind::kConv2D:
      x_shape = in[0].shape, f_shape = in[1].shape;
      BRAZE_RETURN_IF_ERROR(CheckSymbolicBatchOnly(in[0], format, "the input"));
      break;
    case OpKind::kConv2DBackpropInput:
      x_shape = out.shape, f_shape = in[0].shape;
      BRAZE_RETURN_IF_ERROR(CheckSymbolicBatchOnly(in[1], format, "dy"));
      break;
    default:
      x_shape = in[0].shape, f_shape = out.shape;
      BRAZE_RETURN_IF_ERROR(CheckSymbolicBatchOnly(in[0], format, "the input"));
      BRAZE_RETURN_IF_ERROR(CheckSymbolicBatchOnly(in[1], format, "dy"));
      break;
  }
  const Value& filter = op == OpKind::kConv2D ? in[1] : in[0];
  if (op != OpKind::kConv2DBackpropFilter && !filter.sym.empty()) {
    for (int k : filter.sym) {
      if (k >= 0) return absl::UnimplementedError("the filter has a symbolic dim");
    }
  }
  absl::StatusOr<Conv2DGeometry> g = Conv2DGeometryOf(attrs.window, x_shape, f_shape);
  if (!g.ok()) return g.status();
  // A non-empty result of an empty operand (a filter gradient over a batch of 0, a
  // convolution over 0 input channels) sums nothing: zeros. The schedules' geometry
  // (Partials divides by the batch) assumes something to sum.
  for (const Value& v : in) {
    if (NumElements(v.shape) == 0) return Fill(out.dtype, out.shape, 0);
  }
  switch (op) {
    case OpKind::kConv2D:
      return ConvForward(ctx, name, *g, in[0], in[1], out);
    case OpKind::kConv2DBackpropInput:
      return ConvBackpropInput(ctx, name, *g, in[0], in[1], out);
    default:
      return ConvBackpropFilter(ctx, name, *g, in[0], in[1], out);
  }
}

}  // namespace lower
}  // namespace braze
