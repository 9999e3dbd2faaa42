// Random programs, the window ops: Conv2D (strides, dilations, every padding, groups and
// depthwise filters, both formats), MaxPool and AvgPool, in the company a network gives
// them (a bias add, ReLU, a residual add, BatchNorm, a pooling or a reduction after),
// and the gradient ops drawn as ops of their own (a transposed convolution is a
// Conv2DBackpropInput). random_program.cc's Generator calls DrawWindowOp through the
// Drawer interface (random_program_internal.h), from a random stream of its own.
//
// MaxPool routes its gradient to the first maximum of each window, a discontinuous
// function of its input, so it reads only values both implementations compute bit for
// bit (as ArgMax, Floor and comparisons do; see ExactOp in random_program.cc). Values
// on the grid (multiples of 1/8: ProgramInput::grid, constants drawn on it) make a
// convolution exact too (internal::Grid), so the network's conv -> ReLU -> MaxPool
// chain qualifies, with many exact ties among 33 distinct input values: the gradient
// comparison tests the tie rule instead of being ill-conditioned.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

// Most reference convolutions stay under 2^22 multiply-adds (plain loops).
constexpr int64_t kMaxConvWork = int64_t{1} << 22;

struct Axes {
  int n, h, w, c;
};
Axes AxesFor(DataFormat format) {
  return format == DataFormat::kNHWC ? Axes{0, 1, 2, 3} : Axes{0, 2, 3, 1};
}
const char* FormatCode(DataFormat format) {
  return format == DataFormat::kNHWC ? "DataFormat::kNHWC" : "DataFormat::kNCHW";
}
const char* PaddingCode(Padding padding) {
  switch (padding) {
    case Padding::kValid:
      return "Padding::kValid";
    case Padding::kSame:
      return "Padding::kSame";
    case Padding::kExplicit:
      return "Padding::kExplicit";
  }
  return "?";
}

std::string WindowCode(const Window2D& w) {
  return absl::StrCat("Window2D{", w.stride_h, ", ", w.stride_w, ", ", w.dilation_h, ", ",
                      w.dilation_w, ", ", PaddingCode(w.padding), ", ", w.pad_top, ", ",
                      w.pad_bottom, ", ", w.pad_left, ", ", w.pad_right, ", ", FormatCode(w.format),
                      "}");
}
std::string PoolCode(const Pool2DAttrs& a) {
  return absl::StrCat("Pool2DAttrs{", a.size_h, ", ", a.size_w, ", ", WindowCode(a.window),
                      ", {}}");
}

// The output extent of one spatial dim (window_geometry.h's rule), 0 when the window does
// not fit.
int64_t OutExtent(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding padding,
                  int64_t before, int64_t after) {
  const int64_t e = (k - 1) * dilation + 1;
  switch (padding) {
    case Padding::kValid:
      return in >= e ? (in - e) / stride + 1 : 0;
    case Padding::kSame:
      return (in + stride - 1) / stride;
    case Padding::kExplicit:
      return in + before + after >= e ? (in + before + after - e) / stride + 1 : 0;
  }
  return 0;
}

// A rank-4 float value whose H, W and C are known and not 0 (N may be -1), read in
// `format`.
bool IsImage(const Tensor& t) {
  if (!IsFloating(t.dtype()) || t.rank() != 4) return false;
  for (int d = 1; d < 4; ++d) {
    if (t.shape()[d] <= 0) return false;
  }
  return t.shape()[0] != 0;
}
// N of the largest feed: a dynamic batch runs up to its first size + 37 (fuzz_runner.cc).
int64_t Batch(const Tensor& t) { return t.shape()[0] < 0 ? 40 : t.shape()[0]; }

int Pick(Drawer& d, const std::vector<int>& from) {
  return from[d.Uniform(static_cast<int>(from.size()))];
}

// Strides, dilations (convolutions only) and padding over an h x w input for a k_h x k_w
// window, drawn so that the output is not empty (a padding that does not fit becomes
// SAME). Pools' explicit pads are smaller than their window (window_geometry.h).
Window2D DrawWindow(Drawer& d, DataFormat format, int64_t h, int64_t w, int64_t kh, int64_t kw,
                    bool conv) {
  Window2D win;
  win.format = format;
  win.stride_h = Pick(d, {1, 1, 1, 2, 2, 3});
  win.stride_w = d.Chance(0.7) ? win.stride_h : Pick(d, {1, 1, 2, 3});
  if (conv) {
    win.dilation_h = Pick(d, {1, 1, 1, 1, 2, 2, 3});
    win.dilation_w = d.Chance(0.7) ? win.dilation_h : Pick(d, {1, 1, 2});
  }
  const int r = d.Uniform(20);
  win.padding = r < 7 ? Padding::kValid : r < 15 ? Padding::kSame : Padding::kExplicit;
  if (win.padding == Padding::kExplicit) {
    auto pad = [&](int64_t k) {
      return conv ? static_cast<int64_t>(d.Uniform(3)) : static_cast<int64_t>(d.Uniform(k));
    };
    win.pad_top = pad(kh);
    win.pad_bottom = pad(kh);
    win.pad_left = pad(kw);
    win.pad_right = pad(kw);
  }
  if (OutExtent(h, kh, win.stride_h, win.dilation_h, win.padding, win.pad_top, win.pad_bottom) <
          1 ||
      OutExtent(w, kw, win.stride_w, win.dilation_w, win.padding, win.pad_left, win.pad_right) <
          1) {
    win.padding = Padding::kSame;
    win.pad_top = win.pad_bottom = win.pad_left = win.pad_right = 0;
  }
  return win;
}

// A shape that broadcasts along the channels of `format`: [C] (NHWC) or [C, 1, 1].
Shape ChannelShape(DataFormat format, int64_t c) {
  return format == DataFormat::kNHWC ? Shape{c} : Shape{c, 1, 1};
}

DataFormat FormatFor(Drawer& d, const WindowContext& context) {
  if (context.image && d.Chance(0.8)) return context.format;
  return d.Chance(0.5) ? DataFormat::kNHWC : DataFormat::kNCHW;
}

struct Conv {
  int x = -1, filter = -1, y = -1;
  Window2D window;
};

// The filter of a convolution of value x: an earlier value of a fitting shape (an input
// shaped as a filter, so the filter's gradient reaches an input), a constant (on the grid
// when x is), Tanh of a constant, or a constant plus the mean of an earlier value (which
// also takes the filter's gradient back to the inputs). -1 when none fits.
int DrawFilter(Drawer& d, int x, DataFormat format, int64_t groups, int64_t kh, int64_t kw) {
  const Tensor xv = d.value(x);
  const Axes a = AxesFor(format);
  const int64_t c = xv.shape()[a.c];
  if (d.Chance(0.4)) {
    const int f = d.Pick([&](const Tensor& t) {
      if (t.dtype() != xv.dtype() || t.rank() != 4 || !IsFullyDefined(t.shape())) return false;
      const Shape& s = t.shape();
      return s[0] >= 1 && s[0] <= 5 && s[1] >= 1 && s[1] <= 5 && s[2] * groups == c && s[3] >= 1 &&
             s[3] <= 16 && s[3] % groups == 0;
    });
    if (f >= 0) return f;
  }
  int64_t c_out;
  if (groups == 1) {
    c_out = Pick(d, {1, 2, 3, 4, 5, 8, static_cast<int>(std::min<int64_t>(c, 16))});
  } else {
    c_out = groups * (1 + d.Uniform(groups == c ? 2 : 3));  // depthwise: multiplier 1-2
  }
  const Shape shape = {kh, kw, c / groups, c_out};
  const int kind = d.Uniform(20);
  if (kind < 13) return d.AddConst(xv.dtype(), shape, d.grid(x).on && d.Chance(0.85));
  const int cst = d.AddConst(xv.dtype(), shape);
  if (kind < 16) {
    return d.Push(
        {cst}, [](Graph&, const std::vector<Tensor>& v) { return Tanh(v[0]); }, "Tanh($0)");
  }
  const int m = d.Pick(
      [&](const Tensor& t) { return t.dtype() == xv.dtype() && NumElements(t.shape()) != 0; });
  if (m < 0) return cst;
  return d.Push(
      {cst, m}, [](Graph&, const std::vector<Tensor>& v) { return v[0] + Mean(v[1]); },
      "$0 + Mean($1)");
}

// A Conv2D of value x (rank 4, float). Its result -1 when the draw does not fit.
Conv DrawConv(Drawer& d, int x, DataFormat format) {
  Conv conv;
  const Tensor xv = d.value(x);
  const Axes a = AxesFor(format);
  const int64_t h = xv.shape()[a.h], w = xv.shape()[a.w], c = xv.shape()[a.c];
  int64_t groups = 1;
  const int r = d.Uniform(10);
  if (r >= 6 && r < 8) {
    groups = c;  // depthwise
  } else if (r >= 8) {
    std::vector<int> divisors;
    for (int64_t g = 2; g < c; ++g) {
      if (c % g == 0) divisors.push_back(static_cast<int>(g));
    }
    if (!divisors.empty()) groups = Pick(d, divisors);
  }
  int64_t kh = Pick(d, {1, 2, 3, 3, 3, 5});
  int64_t kw = d.Chance(0.7) ? kh : Pick(d, {1, 2, 3});
  conv.filter = DrawFilter(d, x, format, groups, kh, kw);
  if (conv.filter < 0) return conv;
  const Tensor fv = d.value(conv.filter);
  kh = fv.shape()[0];
  kw = fv.shape()[1];
  const int64_t c_out = fv.shape()[3];
  conv.window = DrawWindow(d, format, h, w, kh, kw, /*conv=*/true);
  const Window2D& win = conv.window;
  const int64_t out_h =
      OutExtent(h, kh, win.stride_h, win.dilation_h, win.padding, win.pad_top, win.pad_bottom);
  const int64_t out_w =
      OutExtent(w, kw, win.stride_w, win.dilation_w, win.padding, win.pad_left, win.pad_right);
  if (Batch(xv) * out_h * out_w * c_out * kh * kw * (c / groups) > kMaxConvWork) return conv;
  Grid grid;
  const Grid gx = d.grid(x), gf = d.grid(conv.filter);
  if (gx.on && gf.on) {
    grid = {true, gx.lsb + gf.lsb, gx.max * gf.max * static_cast<double>(kh * kw * (c / groups))};
  }
  conv.x = x;
  conv.y = d.Push(
      {x, conv.filter},
      [win](Graph&, const std::vector<Tensor>& v) { return Conv2D(v[0], v[1], win); },
      absl::StrCat("Conv2D($0, $1, ", WindowCode(win), ")"), grid);
  return conv;
}

Pool2DAttrs DrawPoolAttrs(Drawer& d, const Tensor& x, DataFormat format) {
  const Axes a = AxesFor(format);
  Pool2DAttrs p;
  p.size_h = Pick(d, {1, 2, 2, 2, 3, 3, 4});
  p.size_w = d.Chance(0.7) ? p.size_h : Pick(d, {1, 2, 3});
  p.window = DrawWindow(d, format, x.shape()[a.h], x.shape()[a.w], p.size_h, p.size_w,
                        /*conv=*/false);
  // The usual pools step by their size.
  if (d.Chance(0.3)) {
    p.window.stride_h = static_cast<int>(p.size_h);
    p.window.stride_w = static_cast<int>(p.size_w);
  }
  return p;
}

// MaxPool (of an exact value: its gradient's routing is discontinuous) or AvgPool.
int DrawPool(Drawer& d, int x, DataFormat format, bool max) {
  const Pool2DAttrs p = DrawPoolAttrs(d, d.value(x), format);
  if (max) {
    return d.Push(
        {x}, [p](Graph&, const std::vector<Tensor>& v) { return MaxPool(v[0], p); },
        absl::StrCat("MaxPool($0, ", PoolCode(p), ")"));
  }
  return d.Push(
      {x}, [p](Graph&, const std::vector<Tensor>& v) { return AvgPool(v[0], p); },
      absl::StrCat("AvgPool($0, ", PoolCode(p), ")"));
}

// A reduction over the spatial dims after a window op: GlobalAvgPool, or a Sum or Max
// over H and W (kept or not).
int DrawSpatialReduction(Drawer& d, int x, DataFormat format) {
  const Axes a = AxesFor(format);
  switch (d.Uniform(3)) {
    case 0:
      return d.Push(
          {x},
          [format](Graph&, const std::vector<Tensor>& v) { return GlobalAvgPool(v[0], format); },
          absl::StrCat("GlobalAvgPool($0, ", FormatCode(format), ")"));
    case 1: {
      const bool keep = d.Chance(0.5);
      const std::vector<int> axes = {a.h, a.w};
      return d.Push(
          {x}, [axes, keep](Graph&, const std::vector<Tensor>& v) { return Sum(v[0], axes, keep); },
          absl::StrCat("Sum($0, ", Ints(axes), ", ", keep ? "true" : "false", ")"));
    }
    default: {
      const bool keep = d.Chance(0.5);
      const std::vector<int> axes = {a.h, a.w};
      return d.Push(
          {x}, [axes, keep](Graph&, const std::vector<Tensor>& v) { return Max(v[0], axes, keep); },
          absl::StrCat("Max($0, ", Ints(axes), ", ", keep ? "true" : "false", ")"));
    }
  }
}

// BatchNorm of a convolution's result over its channels: training (the batch's
// statistics; the moving statistics are variables whose updates nothing runs) or
// inference (constant statistics).
int DrawBatchNorm(Drawer& d, int y, DataFormat format) {
  const Tensor yv = d.value(y);
  const int64_t c = yv.shape()[AxesFor(format).c];
  const int axis = format == DataFormat::kNHWC ? -1 : 1;
  const int gamma = d.AddConst(yv.dtype(), {c});
  const int beta = d.AddConst(yv.dtype(), {c});
  const int mean = d.AddConst(yv.dtype(), {c});
  const int var = d.AddConst(yv.dtype(), {c});
  const bool training = d.Chance(0.6);
  if (training) {
    return d.Push(
        {y, gamma, beta, mean, var},
        [axis](Graph& g, const std::vector<Tensor>& v) {
          return BatchNorm(v[0], v[1], v[2], Variable(g, HostTensor(v[3].dtype(), v[3].shape())),
                           Variable(g, HostTensor(v[4].dtype(), v[4].shape())),
                           /*training=*/true, 0.99, 1e-3, axis)
              .y;
        },
        absl::StrCat("BatchNorm($0, $1, $2, Variable(g, HostTensor($3.dtype(), $3.shape())), ",
                     "Variable(g, HostTensor($4.dtype(), $4.shape())), true, 0.99, 0.001, ", axis,
                     ").y"));
  }
  return d.Push(
      {y, gamma, beta, mean, var},
      [axis](Graph&, const std::vector<Tensor>& v) {
        return BatchNorm(v[0], v[1], v[2], v[3], Abs(v[4]) + 0.5, /*training=*/false, 0.99, 1e-3,
                         axis)
            .y;
      },
      absl::StrCat("BatchNorm($0, $1, $2, $3, Abs($4) + 0.5, false, 0.99, 0.001, ", axis, ").y"));
}

// A convolution with what a network puts around it: a bias (per channel), BatchNorm,
// ReLU, a residual add of its input, then sometimes a pooling or a spatial reduction.
bool DrawConvBlock(Drawer& d, int x, DataFormat format, bool image) {
  const Conv conv = DrawConv(d, x, format);
  if (conv.y < 0) return false;
  int y = conv.y;
  const int64_t c_out = d.value(y).shape()[AxesFor(format).c];
  if (d.Chance(0.5)) {
    const bool grid = d.grid(y).on && d.Chance(0.85);
    const int b = d.AddConst(d.value(y).dtype(), ChannelShape(format, c_out), grid);
    y = d.Push(
        {y, b}, [](Graph&, const std::vector<Tensor>& v) { return Add(v[0], v[1]); },
        "Add($0, $1)");
  } else if (d.Chance(0.25)) {
    y = DrawBatchNorm(d, y, format);
  }
  if (d.Chance(0.6)) {
    y = d.Push(
        {y}, [](Graph&, const std::vector<Tensor>& v) { return Relu(v[0]); }, "Relu($0)");
  }
  if (d.value(y).shape() == d.value(x).shape() && d.Chance(0.5)) {
    y = d.Push(
        {y, x}, [](Graph&, const std::vector<Tensor>& v) { return Add(v[0], v[1]); },
        "Add($0, $1)");
  }
  if (image && d.Chance(0.35)) {
    const bool max = d.exact(y) && d.Chance(0.7);
    y = DrawPool(d, y, format, max);
  }
  if (image && d.Chance(0.2)) DrawSpatialReduction(d, y, format);
  return true;
}

// A gradient op as an op of its own, with a dy computed from x (so the program's own
// gradients differentiate it: MaxPoolGrad's gives MaxPoolGradGrad).
bool DrawGradientOp(Drawer& d, int x, DataFormat format) {
  const Tensor xv = d.value(x);
  auto computed_dy = [&](int of) {
    if (d.Chance(0.5)) return of;
    return d.Push(
        {of}, [](Graph&, const std::vector<Tensor>& v) { return Tanh(v[0]); }, "Tanh($0)");
  };
  switch (d.Uniform(4)) {
    case 0: {  // MaxPoolGrad(x, dy): x must be exact (the routing)
      if (!d.exact(x)) return false;
      const Pool2DAttrs p = DrawPoolAttrs(d, xv, format);
      const int pooled = d.Push(
          {x}, [p](Graph&, const std::vector<Tensor>& v) { return MaxPool(v[0], p); },
          absl::StrCat("MaxPool($0, ", PoolCode(p), ")"));
      const int dy = computed_dy(pooled);
      d.Push(
          {x, dy}, [p](Graph&, const std::vector<Tensor>& v) { return MaxPoolGrad(v[0], v[1], p); },
          absl::StrCat("MaxPoolGrad($0, $1, ", PoolCode(p), ")"));
      return true;
    }
    case 1: {  // AvgPoolGrad(shape of x, dy)
      const Pool2DAttrs p = DrawPoolAttrs(d, xv, format);
      const int pooled = d.Push(
          {x}, [p](Graph&, const std::vector<Tensor>& v) { return AvgPool(v[0], p); },
          absl::StrCat("AvgPool($0, ", PoolCode(p), ")"));
      const int dy = computed_dy(pooled);
      const Shape shape = xv.shape();
      d.Push(
          {dy},
          [shape, p](Graph&, const std::vector<Tensor>& v) { return AvgPoolGrad(shape, v[0], p); },
          absl::StrCat("AvgPoolGrad(", Ints(shape), ", $0, ", PoolCode(p), ")"));
      return true;
    }
    case 2: {  // a transposed convolution: Conv2DBackpropInput(shape of x, filter, dy)
      const Conv conv = DrawConv(d, x, format);
      if (conv.y < 0) return false;
      const int dy = computed_dy(conv.y);
      const Shape shape = xv.shape();
      const Window2D win = conv.window;
      d.Push(
          {conv.filter, dy},
          [shape, win](Graph&, const std::vector<Tensor>& v) {
            return Conv2DBackpropInput(shape, v[0], v[1], win);
          },
          absl::StrCat("Conv2DBackpropInput(", Ints(shape), ", $0, $1, ", WindowCode(win), ")"));
      return true;
    }
    default: {  // Conv2DBackpropFilter(x, filter shape, dy)
      const Conv conv = DrawConv(d, x, format);
      if (conv.y < 0) return false;
      const int dy = computed_dy(conv.y);
      const Shape shape = d.value(conv.filter).shape();
      const Window2D win = conv.window;
      d.Push(
          {x, dy},
          [shape, win](Graph&, const std::vector<Tensor>& v) {
            return Conv2DBackpropFilter(v[0], shape, v[1], win);
          },
          absl::StrCat("Conv2DBackpropFilter($0, ", Ints(shape), ", $1, ", WindowCode(win), ")"));
      return true;
    }
  }
}

}  // namespace

Shape DrawImageShape(Drawer& d, DataFormat format) {
  const int64_t n = Pick(d, {1, 1, 2, 2, 3});
  const int64_t h = Pick(d, {1, 2, 3, 4, 5, 5, 7, 7, 8, 9, 13});
  const int64_t w = d.Chance(0.6) ? h : Pick(d, {1, 2, 3, 4, 5, 7, 8, 9, 13});
  const int64_t c = Pick(d, {1, 2, 3, 3, 4, 5, 6, 8});
  return format == DataFormat::kNHWC ? Shape{n, h, w, c} : Shape{n, c, h, w};
}

Shape DrawFilterShape(Drawer& d, int64_t channels) {
  const int64_t k = Pick(d, {1, 2, 3, 3});
  return {k, d.Chance(0.7) ? k : Pick(d, {1, 2, 3}), channels, Pick(d, {1, 2, 3, 4, 8})};
}

bool DrawWindowOp(Drawer& d, const WindowContext& context) {
  const DataFormat format = FormatFor(d, context);
  const int r = d.Uniform(20);
  // MaxPool and MaxPoolGrad read exact values only; the rest any image.
  const bool needs_exact = r >= 12 && r < 15;
  const int x = d.Pick(IsImage, needs_exact);
  if (x < 0) return false;
  if (r < 12) return DrawConvBlock(d, x, format, context.image);
  if (r < 18) {
    const int y = DrawPool(d, x, format, /*max=*/r < 15);
    if (d.Chance(0.4)) {
      d.Push(
          {y}, [](Graph&, const std::vector<Tensor>& v) { return Relu(v[0]); }, "Relu($0)");
    } else if (context.image && d.Chance(0.3)) {
      DrawSpatialReduction(d, y, format);
    }
    return true;
  }
  return DrawGradientOp(d, x, format);
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
