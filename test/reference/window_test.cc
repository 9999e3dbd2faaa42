// Reference kernels of the window ops (src/reference/window.cc): Conv2D and its gradient
// ops, MaxPool, AvgPool and theirs.
//
// The oracles here are written apart from ir/window_geometry and the kernels: TF's output
// sizes and padding computed again below (TfDim), a convolution as im2col + matmul in
// double, pools as plain loops over explicit windows, hand-derived tiny cases, and the
// adjoint identities that tie each gradient op to its forward op
// (<Conv2D(x, f), dy> = <x, Conv2DBackpropInput(f, dy)> = <f, Conv2DBackpropFilter(x, dy)>,
// <AvgPool(x), dy> = <x, AvgPoolGrad(dy)>, <MaxPoolGrad(x, dy), g> = <dy, MaxPoolGradGrad(x, g)>).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "ir/window_geometry.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalNear;
using reftest::Evaluate;
using reftest::TensorNear;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }

// 1, 2, ... n in row-major order (never all zeros).
HostTensor Iota(Shape shape, double start = 1, DType dtype = DType::kF32) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, start + static_cast<double>(i));
  return t;
}

// Uniform in [-1, 1) with |v| >= 0.1: never zero, so no test passes on zeros.
HostTensor Random(Shape shape, uint64_t seed, DType dtype = DType::kF32) {
  HostTensor t = HostTensor::RandomUniform(dtype, std::move(shape), seed, -1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = t.GetDouble(i);
    if (std::abs(v) < 0.1) t.SetDouble(i, v < 0 ? v - 0.1 : v + 0.1);
  }
  return t;
}

HostTensor Eval(const Tensor& t) {
  absl::StatusOr<HostTensor> r = Evaluate(t);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : HostTensor();
}

// NHWC <-> NCHW on the host.
HostTensor ToNCHW(const HostTensor& t) {
  const Shape& s = t.shape();
  HostTensor out(t.dtype(), {s[0], s[3], s[1], s[2]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t w = 0; w < s[2]; ++w)
        for (int64_t c = 0; c < s[3]; ++c)
          out.SetDouble(((n * s[3] + c) * s[1] + h) * s[2] + w,
                        t.GetDouble(((n * s[1] + h) * s[2] + w) * s[3] + c));
  return out;
}
HostTensor ToNHWC(const HostTensor& t) {
  const Shape& s = t.shape();
  HostTensor out(t.dtype(), {s[0], s[2], s[3], s[1]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          out.SetDouble(((n * s[2] + h) * s[3] + w) * s[1] + c,
                        t.GetDouble(((n * s[1] + c) * s[2] + h) * s[3] + w));
  return out;
}

double Dot(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double s = 0;
  for (int64_t i = 0; i < std::min(a.num_elements(), b.num_elements()); ++i) {
    s += a.GetDouble(i) * b.GetDouble(i);
  }
  return s;
}

// TF's output size and leading padding of one spatial dim (tensorflow/core/framework/
// kernel_shape_util.cc, GetWindowedOutputSizeVerbose), written out again.
struct Dim {
  int64_t out = 0;
  int64_t before = 0;
};
Dim TfDim(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding padding,
          int64_t pad_before = 0, int64_t pad_after = 0) {
  const int64_t effective = (k - 1) * dilation + 1;
  switch (padding) {
    case Padding::kValid:
      return {(in - effective + stride) / stride, 0};
    case Padding::kSame: {
      const int64_t out = (in + stride - 1) / stride;
      const int64_t needed = std::max<int64_t>(0, (out - 1) * stride + effective - in);
      return {out, needed / 2};
    }
    case Padding::kExplicit:
      return {(in + pad_before + pad_after - effective) / stride + 1, pad_before};
  }
  return {};
}

struct ConvCase {
  std::string name;
  int64_t n, h, w, c_in;
  int64_t kh, kw, c_out;
  int64_t groups;
  Window2D window;
};

Window2D MakeWindow(int sh, int sw, Padding p, int dh = 1, int dw = 1,
                    std::array<int64_t, 4> pads = {0, 0, 0, 0}) {
  Window2D w;
  w.stride_h = sh;
  w.stride_w = sw;
  w.dilation_h = dh;
  w.dilation_w = dw;
  w.padding = p;
  w.pad_top = pads[0];
  w.pad_bottom = pads[1];
  w.pad_left = pads[2];
  w.pad_right = pads[3];
  return w;
}

// Conv2D of NHWC x and HWIO f as im2col + matmul, in double: each output position's
// patch (KH * KW * C_in values, 0 for padding) times the group's slice of the filter.
HostTensor Im2ColConv(const HostTensor& x, const HostTensor& f, const Window2D& win) {
  const Shape& xs = x.shape();
  const Shape& fs = f.shape();
  const int64_t n = xs[0], h = xs[1], w = xs[2], c = xs[3];
  const int64_t kh = fs[0], kw = fs[1], cg = fs[2], c_out = fs[3];
  const int64_t groups = c / cg, og = c_out / groups;
  const Dim dh =
      TfDim(h, kh, win.stride_h, win.dilation_h, win.padding, win.pad_top, win.pad_bottom);
  const Dim dw =
      TfDim(w, kw, win.stride_w, win.dilation_w, win.padding, win.pad_left, win.pad_right);
  HostTensor y(DType::kF64, {n, dh.out, dw.out, c_out});
  std::vector<double> patch(kh * kw * c);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oh = 0; oh < dh.out; ++oh) {
      for (int64_t ow = 0; ow < dw.out; ++ow) {
        // im2col: the patch row.
        for (int64_t i = 0; i < kh; ++i) {
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t ih = oh * win.stride_h + i * win.dilation_h - dh.before;
            const int64_t iw = ow * win.stride_w + j * win.dilation_w - dw.before;
            const bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
            for (int64_t ch = 0; ch < c; ++ch) {
              patch[(i * kw + j) * c + ch] =
                  inside ? x.GetDouble(((b * h + ih) * w + iw) * c + ch) : 0.0;
            }
          }
        }
        // The matmul: patch [1, KH*KW*C] (the group's channels) x filter [KH*KW*cg, og].
        for (int64_t co = 0; co < c_out; ++co) {
          const int64_t group = co / og;
          double s = 0;
          for (int64_t k = 0; k < kh * kw; ++k) {
            for (int64_t ci = 0; ci < cg; ++ci) {
              s += patch[k * c + group * cg + ci] * f.GetDouble((k * cg + ci) * c_out + co);
            }
          }
          y.SetDouble(((b * dh.out + oh) * dw.out + ow) * c_out + co, s);
        }
      }
    }
  }
  return y;
}

HostTensor AsType(const HostTensor& t, DType dtype) {
  HostTensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.SetDouble(i, t.GetDouble(i));
  return out;
}

std::vector<ConvCase> ConvCases() {
  std::vector<ConvCase> cases = {
      {"Valid3x3", 2, 7, 5, 3, 3, 3, 4, 1, MakeWindow(1, 1, Padding::kValid)},
      {"ValidStride2x3", 1, 11, 13, 2, 3, 2, 3, 1, MakeWindow(2, 3, Padding::kValid)},
      {"SameOddStride2", 2, 7, 6, 3, 3, 3, 2, 1, MakeWindow(2, 2, Padding::kSame)},
      {"SameEvenKernel", 1, 5, 7, 2, 2, 4, 3, 1, MakeWindow(1, 1, Padding::kSame)},
      {"SameStride3Uneven", 1, 13, 11, 1, 5, 4, 2, 1, MakeWindow(3, 2, Padding::kSame)},
      {"SameStrideLargerThanKernel", 1, 7, 11, 2, 1, 2, 2, 1, MakeWindow(3, 4, Padding::kSame)},
      {"SameTinyInputBigKernel", 1, 1, 2, 3, 3, 5, 2, 1, MakeWindow(1, 1, Padding::kSame)},
      {"ValidDilated", 1, 9, 8, 2, 3, 2, 3, 1, MakeWindow(1, 1, Padding::kValid, 2, 3)},
      {"SameDilatedStrided", 2, 9, 10, 2, 3, 3, 2, 1, MakeWindow(2, 1, Padding::kSame, 2, 2)},
      {"Explicit", 1, 5, 6, 2, 3, 3, 3, 1,
       MakeWindow(1, 1, Padding::kExplicit, 1, 1, {1, 2, 0, 3})},
      {"ExplicitStridedDilated", 2, 7, 5, 3, 2, 3, 2, 1,
       MakeWindow(2, 3, Padding::kExplicit, 2, 1, {3, 0, 2, 1})},
      {"ExplicitPadLargerThanKernel", 1, 3, 3, 1, 2, 2, 1, 1,
       MakeWindow(1, 2, Padding::kExplicit, 1, 1, {4, 3, 0, 5})},
      {"Groups2", 2, 5, 6, 4, 3, 2, 6, 2, MakeWindow(1, 2, Padding::kSame)},
      {"Groups3Valid", 1, 7, 7, 6, 2, 3, 3, 3, MakeWindow(2, 1, Padding::kValid)},
      {"Depthwise", 2, 6, 5, 3, 3, 3, 3, 3, MakeWindow(1, 1, Padding::kSame)},
      {"DepthwiseMultiplier2", 1, 7, 5, 3, 3, 2, 6, 3, MakeWindow(2, 2, Padding::kValid, 1, 2)},
      {"OnePixel1x1", 3, 1, 1, 5, 1, 1, 7, 1, MakeWindow(1, 1, Padding::kValid)},
      {"KernelCoversInput", 1, 4, 3, 2, 4, 3, 2, 1, MakeWindow(1, 1, Padding::kValid)},
      {"PrimeEverything", 1, 13, 11, 5, 5, 3, 7, 1, MakeWindow(3, 5, Padding::kSame, 1, 2)},
  };
  return cases;
}

class WindowConvTest : public ::testing::TestWithParam<ConvCase> {};

// Conv2D against im2col + matmul, f32 and f64, NHWC and NCHW (which must be NHWC's result
// transposed).
TEST_P(WindowConvTest, MatchesIm2ColMatmulInBothFormats) {
  const ConvCase& c = GetParam();
  for (DType dt : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dt));
    const HostTensor x = Random({c.n, c.h, c.w, c.c_in}, 11, dt);
    const HostTensor f = Random({c.kh, c.kw, c.c_in / c.groups, c.c_out}, 12, dt);
    const HostTensor want = AsType(Im2ColConv(x, f, c.window), dt);
    const double tol = dt == DType::kF32 ? 2e-6 : 1e-13;
    Graph g;
    Tensor nhwc = Conv2D(Const(g, x), Const(g, f), c.window);
    Window2D nchw_window = c.window;
    nchw_window.format = DataFormat::kNCHW;
    Tensor nchw = Conv2D(Const(g, ToNCHW(x)), Const(g, f), nchw_window);
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_EQ(nhwc.shape(), want.shape());
    EXPECT_TRUE(EvalNear(nhwc, want, tol));
    EXPECT_EQ(nchw.shape(), ToNCHW(want).shape());
    HostTensor got_nchw = Eval(nchw);
    EXPECT_TRUE(TensorNear(got_nchw, ToNCHW(want), tol));
  }
}

// The gradient ops are Conv2D's adjoints: <Conv2D(x, f), dy> = <x, BackpropInput(f, dy)>
// = <f, BackpropFilter(x, dy)>, for every x, f and dy.
TEST_P(WindowConvTest, GradientOpsAreTheAdjoints) {
  const ConvCase& c = GetParam();
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    SCOPED_TRACE(FormatName(format));
    Window2D win = c.window;
    win.format = format;
    const HostTensor x0 = Random({c.n, c.h, c.w, c.c_in}, 21, DType::kF64);
    const HostTensor x = format == DataFormat::kNHWC ? x0 : ToNCHW(x0);
    const HostTensor f = Random({c.kh, c.kw, c.c_in / c.groups, c.c_out}, 22, DType::kF64);
    Graph g;
    Tensor y = Conv2D(Const(g, x), Const(g, f), win);
    ASSERT_TRUE(g.status().ok()) << g.status();
    const HostTensor dy = Random(y.shape(), 23, DType::kF64);
    Tensor dx = Conv2DBackpropInput(x.shape(), Const(g, f), Const(g, dy), win);
    Tensor df = Conv2DBackpropFilter(Const(g, x), f.shape(), Const(g, dy), win);
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_EQ(dx.shape(), x.shape());
    EXPECT_EQ(df.shape(), f.shape());
    const double ydy = Dot(Eval(y), dy);
    EXPECT_NEAR(Dot(x, Eval(dx)), ydy, 1e-10 * (1 + std::abs(ydy)));
    EXPECT_NEAR(Dot(f, Eval(df)), ydy, 1e-10 * (1 + std::abs(ydy)));
  }
}

INSTANTIATE_TEST_SUITE_P(Window, WindowConvTest, ::testing::ValuesIn(ConvCases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) {
                           return info.param.name;
                         });

// ---- Conv2D: tiny cases derived by hand ----

TEST(WindowConv2D, Valid2x2On3x3) {
  // x = [[1,2,3],[4,5,6],[7,8,9]], f = [[1,2],[3,4]]: 1+4+12+20 = 37, 2+6+15+24 = 47,
  // 4+10+21+32 = 67, 5+12+24+36 = 77 (TensorFlow's tf.nn.conv2d gives the same).
  Graph g;
  Tensor y = Conv2D(Const(g, Iota({1, 3, 3, 1})), Const(g, F32({1, 2, 3, 4}, {2, 2, 1, 1})));
  EXPECT_TRUE(EvalNear(y, F32({37, 47, 67, 77}, {1, 2, 2, 1})));
}

TEST(WindowConv2D, SameStride2PadsAfter) {
  // x 4x4 = 1..16, a 3x3 box filter, SAME stride 2: out 2x2, padding 1 in all, 0 before
  // and 1 after (TF puts the odd one after): the windows are rows/cols {0,1,2} and
  // {2,3,pad}. 1+2+3+5+6+7+9+10+11 = 54, 3+4+7+8+11+12 = 45, 9+10+11+13+14+15 = 72,
  // 11+12+15+16 = 54.
  Graph g;
  Tensor y =
      Conv2D(Const(g, Iota({1, 4, 4, 1})),
             Const(g, HostTensor::Filled(DType::kF32, {3, 3, 1, 1}, 1)), {2, 2}, Padding::kSame);
  EXPECT_TRUE(EvalNear(y, F32({54, 45, 72, 54}, {1, 2, 2, 1})));
  // 5x5 (1..25), SAME stride 2: out 3x3, padding 2: one before, one after.
  // out[0][0] = 1+2+6+7 = 16; out[1][1] = 7+8+9+12+13+14+17+18+19 = 117;
  // out[2][2] = 19+20+24+25 = 88.
  Tensor y5 =
      Conv2D(Const(g, Iota({1, 5, 5, 1})),
             Const(g, HostTensor::Filled(DType::kF32, {3, 3, 1, 1}, 1)), {2, 2}, Padding::kSame);
  HostTensor got = Eval(y5);
  ASSERT_EQ(got.shape(), (Shape{1, 3, 3, 1}));
  EXPECT_EQ(got.GetDouble(0), 16);
  EXPECT_EQ(got.GetDouble(4), 117);
  EXPECT_EQ(got.GetDouble(8), 88);
}

TEST(WindowConv2D, DilatedValid) {
  // x[i][j] = 5i + j on 5x5, a 2x2 ones filter dilated by 2 (extent 3): out 3x3 with
  // out[i][j] = x[i][j] + x[i][j+2] + x[i+2][j] + x[i+2][j+2] = 20i + 4j + 24.
  Graph g;
  Tensor y = Conv2D(Const(g, Iota({1, 5, 5, 1}, 0)),
                    Const(g, HostTensor::Filled(DType::kF32, {2, 2, 1, 1}, 1)), {1, 1},
                    Padding::kValid, DataFormat::kNHWC, {2, 2});
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(20 * i + 4 * j + 24);
  EXPECT_TRUE(EvalNear(y, HostTensor::From<float>(want, {1, 3, 3, 1})));
}

TEST(WindowConv2D, ExplicitPaddingIsZeros) {
  // [[1,2],[3,4]] times 2, one row of padding on top and two columns on the right.
  Graph g;
  Tensor y = Conv2D(Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1})), Const(g, F32({2}, {1, 1, 1, 1})),
                    MakeWindow(1, 1, Padding::kExplicit, 1, 1, {1, 0, 0, 2}));
  EXPECT_TRUE(EvalNear(y, F32({0, 0, 0, 0, 2, 4, 0, 0, 6, 8, 0, 0}, {1, 3, 4, 1})));
}

TEST(WindowConv2D, PaddingTapsAreNotZeroTimesTheFilter) {
  // An inf in the filter that meets only padding leaves the result finite.
  Graph g;
  Tensor y =
      Conv2D(Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1})), Const(g, F32({kInf, 1}, {1, 2, 1, 1})),
             MakeWindow(1, 1, Padding::kExplicit, 1, 1, {0, 0, 1, 0}));
  // out[i][0] = inf * pad + x[i][0]; out[i][1] = inf * x[i][0] + x[i][1].
  EXPECT_TRUE(EvalNear(y, F32({1, kInf, 3, kInf}, {1, 2, 2, 1})));
}

TEST(WindowConv2D, GroupsAndDepthwise) {
  // Channels [1,2,3,4], two groups: output 0 reads channels 0-1, output 1 channels 2-3.
  // f[ci][co] = [[1,10],[100,1000]]: 1 + 200 = 201, 30 + 4000 = 4030.
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3, 4}, {1, 1, 1, 4}));
  EXPECT_TRUE(EvalNear(Conv2D(x, Const(g, F32({1, 10, 100, 1000}, {1, 1, 2, 2}))),
                       F32({201, 4030}, {1, 1, 1, 2})));
  // Depthwise (groups = C): each channel scaled by its own filter.
  Tensor x3 = Const(g, F32({1, 2, 3}, {1, 1, 1, 3}));
  EXPECT_TRUE(
      EvalNear(Conv2D(x3, Const(g, F32({2, 3, 4}, {1, 1, 1, 3}))), F32({2, 6, 12}, {1, 1, 1, 3})));
  // Channel multiplier 2: outputs 2c and 2c+1 read channel c (TF's depthwise_conv2d
  // order).
  EXPECT_TRUE(EvalNear(Conv2D(x3, Const(g, F32({1, 10, 2, 20, 3, 30}, {1, 1, 1, 6}))),
                       F32({1, 10, 4, 40, 9, 90}, {1, 1, 1, 6})));
  // NCHW: the same numbers.
  Tensor xn = Const(g, F32({1, 2, 3, 4}, {1, 4, 1, 1}));
  EXPECT_TRUE(EvalNear(Conv2D(xn, Const(g, F32({1, 10, 100, 1000}, {1, 1, 2, 2})), {1, 1},
                              Padding::kValid, DataFormat::kNCHW),
                       F32({201, 4030}, {1, 2, 1, 1})));
}

TEST(WindowConv2D, NchwIsNhwcTransposed) {
  // 2 images, 3 channels, a 2x2 filter to 2 outputs; NCHW's result is NHWC's transposed.
  Graph g;
  const HostTensor x = Iota({2, 3, 4, 3});
  const HostTensor f = Iota({2, 2, 3, 2}, -5);
  Tensor a = Conv2D(Const(g, x), Const(g, f), {1, 2}, Padding::kSame);
  Tensor b = Conv2D(Const(g, ToNCHW(x)), Const(g, f), {1, 2}, Padding::kSame, DataFormat::kNCHW);
  HostTensor ya = Eval(a), yb = Eval(b);
  EXPECT_TRUE(TensorNear(yb, ToNCHW(ya)));
  EXPECT_TRUE(TensorNear(ToNHWC(yb), ya));
}

TEST(WindowConv2D, GradientOpsByHand) {
  // Conv2D([[1,2,3],[4,5,6],[7,8,9]], [[1,2],[3,4]]) VALID; dy = [[1,0],[0,0]] routes the
  // filter back onto the top-left 2x2 of dx; dfilter(x, dy = ones) sums each filter
  // tap's 2x2 of x: [[1+2+4+5, 2+3+5+6], [4+5+7+8, 5+6+8+9]] = [[12,16],[24,28]].
  Graph g;
  Tensor f = Const(g, F32({1, 2, 3, 4}, {2, 2, 1, 1}));
  Tensor dx =
      Conv2DBackpropInput({1, 3, 3, 1}, f, Const(g, F32({1, 0, 0, 0}, {1, 2, 2, 1})), Window2D{});
  EXPECT_TRUE(EvalNear(dx, F32({1, 2, 0, 3, 4, 0, 0, 0, 0}, {1, 3, 3, 1})));
  // dy = ones: each x element gets the sum of the filter taps that read it.
  Tensor dx1 = Conv2DBackpropInput(
      {1, 3, 3, 1}, f, Const(g, HostTensor::Filled(DType::kF32, {1, 2, 2, 1}, 1)), Window2D{});
  EXPECT_TRUE(EvalNear(dx1, F32({1, 3, 2, 4, 10, 6, 3, 7, 4}, {1, 3, 3, 1})));
  Tensor df =
      Conv2DBackpropFilter(Const(g, Iota({1, 3, 3, 1})), {2, 2, 1, 1},
                           Const(g, HostTensor::Filled(DType::kF32, {1, 2, 2, 1}, 1)), Window2D{});
  EXPECT_TRUE(EvalNear(df, F32({12, 16, 24, 28}, {2, 2, 1, 1})));
  // Stride 2 on 3x3 with a 1x1 filter: dx is dy scattered on the even positions.
  Tensor dxs = Conv2DBackpropInput({1, 3, 3, 1}, Const(g, F32({3}, {1, 1, 1, 1})),
                                   Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1})),
                                   MakeWindow(2, 2, Padding::kValid));
  EXPECT_TRUE(EvalNear(dxs, F32({3, 0, 6, 0, 0, 0, 9, 0, 12}, {1, 3, 3, 1})));
}

// ---- Pools: an independent formulation ----

struct PoolCase {
  std::string name;
  int64_t n, h, w, c;
  int64_t kh, kw;
  Window2D window;
};

// The pool of NHWC x in double: max (NaN first, -0 < +0) or the mean of the taps inside
// x; `argmax` gets each window's first NaN, else first maximum (row-major), as a flat
// index of x.
HostTensor NaivePool(const HostTensor& x, const PoolCase& c, bool max,
                     std::vector<int64_t>* argmax = nullptr) {
  const Window2D& win = c.window;
  const Dim dh = TfDim(c.h, c.kh, win.stride_h, 1, win.padding, win.pad_top, win.pad_bottom);
  const Dim dw = TfDim(c.w, c.kw, win.stride_w, 1, win.padding, win.pad_left, win.pad_right);
  HostTensor y(DType::kF64, {c.n, dh.out, dw.out, c.c});
  if (argmax) argmax->assign(y.num_elements(), -1);
  for (int64_t b = 0; b < c.n; ++b) {
    for (int64_t oh = 0; oh < dh.out; ++oh) {
      for (int64_t ow = 0; ow < dw.out; ++ow) {
        for (int64_t ch = 0; ch < c.c; ++ch) {
          const int64_t o = ((b * dh.out + oh) * dw.out + ow) * c.c + ch;
          double best = -kInf, sum = 0;
          int64_t at = -1, count = 0;
          for (int64_t i = oh * win.stride_h - dh.before; i < oh * win.stride_h - dh.before + c.kh;
               ++i) {
            for (int64_t j = ow * win.stride_w - dw.before;
                 j < ow * win.stride_w - dw.before + c.kw; ++j) {
              if (i < 0 || i >= c.h || j < 0 || j >= c.w) continue;
              const int64_t xi = ((b * c.h + i) * c.w + j) * c.c + ch;
              const double v = x.GetDouble(xi);
              sum += v;
              ++count;
              if (at >= 0 && std::isnan(best)) continue;
              if (at < 0 || std::isnan(v) || v > best) at = xi;
              if (std::isnan(v) || v > best || (v == 0 && best == 0 && !std::signbit(v))) {
                best = v;
              }
            }
          }
          y.SetDouble(o, max ? best : sum / static_cast<double>(count));
          if (argmax) (*argmax)[o] = at;
        }
      }
    }
  }
  return y;
}

std::vector<PoolCase> PoolCases() {
  return {
      {"Valid3x3Stride2Overlapping", 2, 7, 9, 3, 3, 3, MakeWindow(2, 2, Padding::kValid)},
      {"Same3x3Stride2Overlapping", 1, 8, 7, 2, 3, 3, MakeWindow(2, 2, Padding::kSame)},
      {"SameUneven2x2Stride2", 2, 5, 7, 2, 2, 2, MakeWindow(2, 2, Padding::kSame)},
      {"SameUneven3x2Stride3x1", 1, 7, 6, 3, 3, 2, MakeWindow(3, 1, Padding::kSame)},
      {"SameStride1Big", 1, 5, 4, 2, 4, 5, MakeWindow(1, 1, Padding::kSame)},
      {"ValidStrideLargerThanWindow", 1, 11, 13, 1, 2, 3, MakeWindow(4, 5, Padding::kValid)},
      {"Explicit", 2, 5, 6, 2, 3, 3, MakeWindow(2, 1, Padding::kExplicit, 1, 1, {2, 1, 0, 2})},
      {"ExplicitOneSided", 1, 4, 7, 3, 2, 4,
       MakeWindow(1, 3, Padding::kExplicit, 1, 1, {1, 0, 3, 3})},
      {"WindowIsInput", 1, 3, 5, 4, 3, 5, MakeWindow(1, 1, Padding::kValid)},
      {"OnePixel", 2, 1, 1, 3, 1, 1, MakeWindow(1, 1, Padding::kValid)},
      {"OnePixelSame3x3", 1, 1, 1, 2, 3, 3, MakeWindow(2, 2, Padding::kSame)},
      {"Primes", 1, 13, 11, 5, 5, 3, MakeWindow(3, 2, Padding::kSame)},
  };
}

class WindowPoolTest : public ::testing::TestWithParam<PoolCase> {};

Pool2DAttrs PoolAttrsOf(const PoolCase& c, DataFormat format) {
  Pool2DAttrs a;
  a.size_h = c.kh;
  a.size_w = c.kw;
  a.window = c.window;
  a.window.format = format;
  return a;
}

TEST_P(WindowPoolTest, MatchNaiveLoopsInBothFormats) {
  const PoolCase& c = GetParam();
  for (DType dt : {DType::kF32, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dt));
    const HostTensor x = Random({c.n, c.h, c.w, c.c}, 31, dt);
    const double tol = dt == DType::kF32 ? 1e-6 : 1e-14;
    const HostTensor want_max = AsType(NaivePool(x, c, true), dt);
    const HostTensor want_avg = AsType(NaivePool(x, c, false), dt);
    Graph g;
    Tensor xn = Const(g, x), xc = Const(g, ToNCHW(x));
    const Pool2DAttrs nhwc = PoolAttrsOf(c, DataFormat::kNHWC);
    const Pool2DAttrs nchw = PoolAttrsOf(c, DataFormat::kNCHW);
    Tensor max_nhwc = MaxPool(xn, nhwc), avg_nhwc = AvgPool(xn, nhwc);
    Tensor max_nchw = MaxPool(xc, nchw), avg_nchw = AvgPool(xc, nchw);
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_TRUE(EvalNear(max_nhwc, want_max));  // a max is exact
    EXPECT_TRUE(EvalNear(max_nchw, ToNCHW(want_max)));
    EXPECT_TRUE(EvalNear(avg_nhwc, want_avg, tol));
    EXPECT_TRUE(EvalNear(avg_nchw, ToNCHW(want_avg), tol));
  }
}

TEST_P(WindowPoolTest, GradientOpsMatchNaiveRoutingAndAreAdjoints) {
  const PoolCase& c = GetParam();
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    SCOPED_TRACE(FormatName(format));
    const bool nhwc = format == DataFormat::kNHWC;
    // Values on a coarse grid: ties within windows, which MaxPoolGrad sends to the first.
    HostTensor x = HostTensor::RandomUniform(DType::kI32, {c.n, c.h, c.w, c.c}, 41, -3, 3);
    x = AsType(x, DType::kF64);
    std::vector<int64_t> argmax;
    const HostTensor y = NaivePool(x, c, true, &argmax);
    const HostTensor dy = Random(y.shape(), 42, DType::kF64);
    const HostTensor gx = Random(x.shape(), 43, DType::kF64);
    HostTensor want_dx(DType::kF64, x.shape());
    HostTensor want_gg(DType::kF64, y.shape());
    for (size_t o = 0; o < argmax.size(); ++o) {
      ASSERT_GE(argmax[o], 0);
      want_dx.SetDouble(argmax[o], want_dx.GetDouble(argmax[o]) + dy.GetDouble(o));
      want_gg.SetDouble(o, gx.GetDouble(argmax[o]));
    }
    Graph g;
    const Pool2DAttrs a = PoolAttrsOf(c, format);
    auto in = [&](const HostTensor& t) { return Const(g, nhwc ? t : ToNCHW(t)); };
    auto out = [&](const HostTensor& t) { return nhwc ? t : ToNCHW(t); };
    Tensor dx = MaxPoolGrad(in(x), in(dy), a);
    Tensor gg = MaxPoolGradGrad(in(x), in(gx), a);
    Tensor avg_dx = AvgPoolGrad(out(x).shape(), in(dy), a);
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_TRUE(EvalNear(dx, out(want_dx), 1e-15));
    EXPECT_TRUE(EvalNear(gg, out(want_gg)));
    // <AvgPool(gx), dy> = <gx, AvgPoolGrad(dy)>; <MaxPoolGrad(x, dy), gx> = <dy, GradGrad>.
    const double lhs = Dot(out(NaivePool(gx, c, false)), out(dy));
    EXPECT_NEAR(Dot(out(gx), Eval(avg_dx)), lhs, 1e-12 * (1 + std::abs(lhs)));
    EXPECT_NEAR(Dot(Eval(dx), out(gx)), Dot(out(dy), Eval(gg)), 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Window, WindowPoolTest, ::testing::ValuesIn(PoolCases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return info.param.name;
                         });

// ---- Pools: tiny cases derived by hand ----

TEST(WindowPool, MaxPool3x3Stride2Overlapping) {
  // x[i][j] = 5i + j on 5x5: the windows {0..2} and {2..4} overlap on row/col 2; each
  // maximum is its window's bottom-right: 12, 14, 22, 24.
  Graph g;
  Tensor y = MaxPool(Const(g, Iota({1, 5, 5, 1}, 0)), {3, 3}, {2, 2});
  EXPECT_TRUE(EvalNear(y, F32({12, 14, 22, 24}, {1, 2, 2, 1})));
  // MaxPoolGrad with dy = [1, 2, 3, 4]: each maximum is in one window only.
  Tensor dx =
      MaxPoolGrad(Const(g, Iota({1, 5, 5, 1}, 0)), Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1})),
                  y.node().attrs_as<Pool2DAttrs>());
  HostTensor want(DType::kF32, {1, 5, 5, 1});
  want.SetDouble(12, 1), want.SetDouble(14, 2), want.SetDouble(22, 3), want.SetDouble(24, 4);
  EXPECT_TRUE(EvalNear(dx, want));
  // A maximum shared by all four windows (the centre) gets all of dy.
  HostTensor x = HostTensor::Filled(DType::kF32, {1, 5, 5, 1}, 0);
  x.SetDouble(12, 9);
  Tensor dxc = MaxPoolGrad(Const(g, x), Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1})),
                           y.node().attrs_as<Pool2DAttrs>());
  HostTensor want_c(DType::kF32, {1, 5, 5, 1});
  want_c.SetDouble(12, 10);
  EXPECT_TRUE(EvalNear(dxc, want_c));
}

TEST(WindowPool, SameWithUnevenPadding) {
  // x[i][j] = 3i + j on 3x3, 2x2 windows, SAME stride 2: out 2x2, one row/col of padding
  // after. Max: 4, 5, 7, 8. Avg over the taps inside x only: (0+1+3+4)/4 = 2,
  // (2+5)/2 = 3.5, (6+7)/2 = 6.5, 8 (TF's avg_pool SAME gives the same).
  Graph g;
  Tensor x = Const(g, Iota({1, 3, 3, 1}, 0));
  EXPECT_TRUE(
      EvalNear(MaxPool(x, {2, 2}, {2, 2}, Padding::kSame), F32({4, 5, 7, 8}, {1, 2, 2, 1})));
  EXPECT_TRUE(
      EvalNear(AvgPool(x, {2, 2}, {2, 2}, Padding::kSame), F32({2, 3.5, 6.5, 8}, {1, 2, 2, 1})));
  // 3x3 windows, SAME stride 1: one before and one after. Corners average 4 taps, edges
  // 6, the centre 9: [2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6] (TF: the same).
  EXPECT_TRUE(EvalNear(AvgPool(x, {3, 3}, {1, 1}, Padding::kSame),
                       F32({2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6}, {1, 3, 3, 1})));
  // AvgPoolGrad of the 2x2 SAME stride 2: each dy divided by its window's count.
  Pool2DAttrs a = MaxPool(x, {2, 2}, {2, 2}, Padding::kSame).node().attrs_as<Pool2DAttrs>();
  Tensor dx = AvgPoolGrad({1, 3, 3, 1}, Const(g, F32({4, 2, 2, 1}, {1, 2, 2, 1})), a);
  EXPECT_TRUE(EvalNear(dx, F32({1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 3, 1})));
}

TEST(WindowPool, ExplicitPaddingCountsOnlyTapsInsideX) {
  // [[1,2],[3,4]], 2x2 windows, stride 1, one row on top and one column on the left:
  // out 2x2 over windows with rows {-1,0},{0,1} and cols {-1,0},{0,1}.
  Graph g;
  Pool2DAttrs a;
  a.size_h = a.size_w = 2;
  a.window = MakeWindow(1, 1, Padding::kExplicit, 1, 1, {1, 0, 1, 0});
  Tensor x = Const(g, F32({1, 2, 3, 4}, {1, 2, 2, 1}));
  EXPECT_TRUE(EvalNear(AvgPool(x, a), F32({1, 1.5, 2, 2.5}, {1, 2, 2, 1})));
  EXPECT_TRUE(EvalNear(MaxPool(x, a), F32({1, 2, 3, 4}, {1, 2, 2, 1})));
  // MaxPool pads with -inf: a window of negative values keeps its maximum.
  Tensor xn = Const(g, F32({-1, -2, -3, -4}, {1, 2, 2, 1}));
  EXPECT_TRUE(EvalNear(MaxPool(xn, a), F32({-1, -1, -1, -1}, {1, 2, 2, 1})));
}

TEST(WindowPool, MaxPoolPropagatesNaNAndOrdersSignedZeros) {
  Graph g;
  // One 1x4 window per row (VALID 1x4).
  const HostTensor x = HostTensor::From<float>(
      {1,     kNaN,  5,  2,     // NaN after a smaller value, before a larger one
       kNaN,  7,     8,  9,     // NaN first
       3,     4,     5,  kNaN,  // NaN last
       -0.0f, 0.0f,  -1, -2,    // -0 then +0
       0.0f,  -0.0f, -1, -2,    // +0 then -0
       -0.0f, -0.0f, -3, -kInf, -kInf, -kInf, -kInf, -kInf},
      {1, 7, 4, 1});
  Tensor y = MaxPool(Const(g, x), {1, 4}, {1, 1});
  HostTensor got = Eval(y);
  ASSERT_EQ(got.shape(), (Shape{1, 7, 1, 1}));
  EXPECT_TRUE(std::isnan(got.GetDouble(0)));
  EXPECT_TRUE(std::isnan(got.GetDouble(1)));
  EXPECT_TRUE(std::isnan(got.GetDouble(2)));
  EXPECT_EQ(got.GetDouble(3), 0);
  EXPECT_FALSE(std::signbit(got.GetDouble(3)));  // -0 < +0
  EXPECT_FALSE(std::signbit(got.GetDouble(4)));
  EXPECT_EQ(got.GetDouble(5), 0);
  EXPECT_TRUE(std::signbit(got.GetDouble(5)));  // only -0s
  EXPECT_EQ(got.GetDouble(6), -kInf);
  // f64 too.
  Tensor y64 = MaxPool(Const(g, AsType(x, DType::kF64)), {1, 4}, {1, 1});
  HostTensor got64 = Eval(y64);
  for (int i = 0; i < 7; ++i) {
    if (std::isnan(got.GetDouble(i))) {
      EXPECT_TRUE(std::isnan(got64.GetDouble(i))) << i;
    } else {
      EXPECT_EQ(got64.GetDouble(i), got.GetDouble(i)) << i;
      EXPECT_EQ(std::signbit(got64.GetDouble(i)), std::signbit(got.GetDouble(i))) << i;
    }
  }
}

TEST(WindowPool, MaxPoolGradRoutesToTheFirstMaximumOrNaN) {
  Graph g;
  // Rows of 4, windows 1x2 stride 2 along W (two windows per row) and a 2x2 pass below.
  const HostTensor x = HostTensor::From<float>(
      {3, 3, 1, 2,                // a tie: the first of the two; 2 > 1
       kNaN, 5, 4, kNaN,          // NaN wins wherever it is
       kNaN, kNaN, -0.0f, 0.0f},  // two NaNs: the first; -0 and +0 tie (first, as ArgMax)
      {1, 3, 4, 1});
  Pool2DAttrs a;
  a.size_h = 1;
  a.size_w = 2;
  a.window = MakeWindow(1, 2, Padding::kValid);
  Tensor dy = Const(g, F32({1, 2, 3, 4, 5, 6}, {1, 3, 2, 1}));
  Tensor dx = MaxPoolGrad(Const(g, x), dy, a);
  EXPECT_TRUE(EvalNear(dx, F32({1, 0, 0, 2, 3, 0, 0, 4, 5, 0, 6, 0}, {1, 3, 4, 1})));
  // MaxPoolGradGrad reads g at the same places.
  Tensor gg = MaxPoolGradGrad(Const(g, x), Const(g, Iota({1, 3, 4, 1}, 10)), a);
  EXPECT_TRUE(EvalNear(gg, F32({10, 13, 14, 17, 18, 20}, {1, 3, 2, 1})));
  // 2x2 windows: ties in row-major (h, then w) order; [[1,7],[7,7]] -> (0,1).
  Pool2DAttrs b;
  b.size_h = b.size_w = 2;
  b.window = MakeWindow(2, 2, Padding::kValid);
  Tensor dx2 =
      MaxPoolGrad(Const(g, F32({1, 7, 7, 7}, {1, 2, 2, 1})), Const(g, F32({5}, {1, 1, 1, 1})), b);
  EXPECT_TRUE(EvalNear(dx2, F32({0, 5, 0, 0}, {1, 2, 2, 1})));
  // NCHW: the first maximum is still row-major over (h, w) of each channel.
  Tensor dx3 = MaxPoolGrad(Const(g, F32({1, 7, 7, 7, 9, 2, 9, 9}, {1, 2, 2, 2})),
                           Const(g, F32({5, 6}, {1, 2, 1, 1})), [&] {
                             Pool2DAttrs c = b;
                             c.window.format = DataFormat::kNCHW;
                             return c;
                           }());
  EXPECT_TRUE(EvalNear(dx3, F32({0, 5, 0, 0, 6, 0, 0, 0}, {1, 2, 2, 2})));
}

TEST(WindowPool, AvgPoolGradByHand) {
  // 3x3 windows stride 2 on 5x5 VALID (9 taps each), dy = [9, 18, 27, 36]: each window
  // adds dy / 9 to its taps; the shared row/col 2 gets two or four shares.
  Graph g;
  Pool2DAttrs a;
  a.size_h = a.size_w = 3;
  a.window = MakeWindow(2, 2, Padding::kValid);
  Tensor dx = AvgPoolGrad({1, 5, 5, 1}, Const(g, F32({9, 18, 27, 36}, {1, 2, 2, 1})), a);
  HostTensor got = Eval(dx);
  ASSERT_EQ(got.shape(), (Shape{1, 5, 5, 1}));
  auto at = [&](int i, int j) { return got.GetDouble(i * 5 + j); };
  EXPECT_EQ(at(0, 0), 1);
  EXPECT_EQ(at(0, 4), 2);
  EXPECT_EQ(at(4, 0), 3);
  EXPECT_EQ(at(4, 4), 4);
  EXPECT_EQ(at(0, 2), 3);   // windows 0 and 1
  EXPECT_EQ(at(2, 0), 4);   // windows 0 and 2
  EXPECT_EQ(at(2, 2), 10);  // all four
  EXPECT_EQ(at(2, 4), 6);   // windows 1 and 3
}

// A gradient op of a -1 batch takes the batch from dy at run time.
TEST(WindowPool, GradientOpsTakeTheirBatchFromDy) {
  Graph g;
  Pool2DAttrs a;
  a.size_h = a.size_w = 2;
  a.window = MakeWindow(2, 2, Padding::kSame);
  Tensor dy = Placeholder(g, DType::kF32, {-1, 2, 2, 1}, "dy");
  Tensor dx = AvgPoolGrad({-1, 3, 3, 1}, dy, a);
  Tensor f = Const(g, F32({2}, {1, 1, 1, 1}));
  Tensor cx = Conv2DBackpropInput({-1, 3, 3, 1}, f, dy, MakeWindow(2, 2, Padding::kValid));
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(dx.shape(), (Shape{-1, 3, 3, 1}));
  EXPECT_EQ(cx.shape(), (Shape{-1, 3, 3, 1}));
  const HostTensor dyv = F32({4, 2, 2, 1, 8, 4, 4, 2}, {2, 2, 2, 1});
  EXPECT_TRUE(EvalNear(dx,
                       F32({1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2}, {2, 3, 3, 1}), 0,
                       {{dy, dyv}}));
  EXPECT_TRUE(EvalNear(cx,
                       F32({8, 0, 4, 0, 0, 0, 4, 0, 2, 16, 0, 8, 0, 0, 0, 8, 0, 4}, {2, 3, 3, 1}),
                       0, {{dy, dyv}}));
}

// Tensors with no elements: an empty batch or channel dim, or an empty spatial dim under
// SAME, give an empty result; VALID needs the window inside x.
TEST(WindowPool, EmptyTensors) {
  Graph g;
  Tensor x0 = Const(g, HostTensor(DType::kF32, {0, 5, 4, 2}));
  Tensor f = Const(g, Random({3, 3, 2, 3}, 1));
  EXPECT_TRUE(
      EvalNear(Conv2D(x0, f, {2, 1}, Padding::kSame), HostTensor(DType::kF32, {0, 3, 4, 3})));
  EXPECT_TRUE(EvalNear(MaxPool(x0, {2, 2}, {2, 2}), HostTensor(DType::kF32, {0, 2, 2, 2})));
  Tensor h0 = Const(g, HostTensor(DType::kF32, {1, 0, 4, 2}));
  EXPECT_TRUE(
      EvalNear(Conv2D(h0, f, {1, 1}, Padding::kSame), HostTensor(DType::kF32, {1, 0, 4, 3})));
  EXPECT_TRUE(
      EvalNear(AvgPool(h0, {2, 2}, {1, 1}, Padding::kSame), HostTensor(DType::kF32, {1, 0, 4, 2})));
  Tensor c0 = Const(g, HostTensor(DType::kF32, {1, 4, 4, 0}));
  EXPECT_TRUE(EvalNear(MaxPool(c0, {2, 2}, {2, 2}), HostTensor(DType::kF32, {1, 2, 2, 0})));
  EXPECT_TRUE(EvalNear(MaxPoolGrad(c0, Const(g, HostTensor(DType::kF32, {1, 2, 2, 0})),
                                   MaxPool(c0, {2, 2}, {2, 2}).node().attrs_as<Pool2DAttrs>()),
                       HostTensor(DType::kF32, {1, 4, 4, 0})));
}

// Explicit padding on an empty spatial dim would make windows of padding only (a max of
// nothing, a mean of nothing): an error, as VALID's window outside x is.
TEST(WindowPool, ExplicitPaddingOfAnEmptyDimIsAnError) {
  Graph g;
  Pool2DAttrs a;
  a.size_h = a.size_w = 2;
  a.window = MakeWindow(1, 1, Padding::kExplicit, 1, 1, {1, 1, 0, 0});
  Tensor y = MaxPool(Const(g, HostTensor(DType::kF32, {1, 0, 3, 1})), a);
  EXPECT_FALSE(g.status().ok());
  EXPECT_NE(std::string(g.status().message()).find("windows of padding only"), std::string::npos)
      << g.status();
  // Fed at run time: the same error from the run-time shape inference.
  Graph g2;
  Tensor x = Placeholder(g2, DType::kF32, {1, -1, 3, 1}, "x");
  Tensor avg = AvgPool(x, a);
  ASSERT_TRUE(g2.status().ok()) << g2.status();
  EXPECT_TRUE(reftest::EvalFails(avg, absl::StatusCode::kInvalidArgument, "windows of padding only",
                                 {{x, HostTensor(DType::kF32, {1, 0, 3, 1})}}));
  EXPECT_TRUE(EvalNear(avg, F32({1.5, 2.5, 1.5, 2.5}, {1, 2, 2, 1}), 0,
                       {{x, F32({1, 2, 3}, {1, 1, 3, 1})}}));
  (void)y;
}

// Random geometries: every padding, stride, dilation and group count on small extents,
// against im2col (convs) and the naive loops (pools), with the adjoint identities of the
// gradient ops. A window that does not fit (VALID, EXPLICIT) must be a build error
// exactly when TfDim says the input is shorter than the dilated window.
TEST(WindowSweep, RandomGeometries) {
  std::mt19937 rng(20261128);
  auto pick = [&](int lo, int hi) { return static_cast<int>(lo + rng() % (hi - lo + 1)); };
  int convs = 0, pools = 0, errors = 0;
  for (int iter = 0; iter < 400; ++iter) {
    SCOPED_TRACE(iter);
    const Padding padding = static_cast<Padding>(pick(0, 2));
    const bool pool = iter % 2 == 1;
    const int64_t h = pick(1, 9), w = pick(1, 9), n = pick(1, 2);
    const int64_t kh = pick(1, 4), kw = pick(1, 4);
    const int dh = pool ? 1 : pick(1, 3), dw = pool ? 1 : pick(1, 3);
    std::array<int64_t, 4> pads = {0, 0, 0, 0};
    if (padding == Padding::kExplicit) {
      for (int i = 0; i < 4; ++i)
        pads[i] = pick(0, pool ? static_cast<int>((i < 2 ? kh : kw) - 1) : 4);
    }
    const Window2D win = MakeWindow(pick(1, 4), pick(1, 4), padding, dh, dw, pads);
    const int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
    const bool fits =
        padding == Padding::kSame || (h + pads[0] + pads[1] >= eh && w + pads[2] + pads[3] >= ew);
    Graph g;
    if (!pool) {
      const int64_t groups = pick(1, 3), cg = pick(1, 2), og = pick(1, 2);
      const HostTensor x = Random({n, h, w, groups * cg}, iter);
      const HostTensor f = Random({kh, kw, cg, groups * og}, iter + 1000);
      Tensor y = Conv2D(Const(g, x), Const(g, f), win);
      if (!fits) {
        EXPECT_FALSE(g.status().ok());
        ++errors;
        continue;
      }
      ASSERT_TRUE(g.status().ok()) << g.status();
      const HostTensor want = Im2ColConv(x, f, win);
      ASSERT_TRUE(EvalNear(y, AsType(want, DType::kF32), 2e-6));
      const HostTensor dy = Random(want.shape(), iter + 2000, DType::kF32);
      Tensor dx = Conv2DBackpropInput(x.shape(), Const(g, f), Const(g, dy), win);
      Tensor df = Conv2DBackpropFilter(Const(g, x), f.shape(), Const(g, dy), win);
      const double ydy = Dot(want, dy);
      EXPECT_NEAR(Dot(x, Eval(dx)), ydy, 1e-5 * (1 + std::abs(ydy)));
      EXPECT_NEAR(Dot(f, Eval(df)), ydy, 1e-5 * (1 + std::abs(ydy)));
      ++convs;
    } else {
      PoolCase c{"random", n, h, w, pick(1, 3), kh, kw, win};
      const HostTensor x = Random({c.n, c.h, c.w, c.c}, iter, DType::kF64);
      const Pool2DAttrs a = PoolAttrsOf(c, DataFormat::kNHWC);
      Tensor mp = MaxPool(Const(g, x), a);
      Tensor ap = AvgPool(Const(g, x), a);
      if (!fits) {
        EXPECT_FALSE(g.status().ok());
        ++errors;
        continue;
      }
      ASSERT_TRUE(g.status().ok()) << g.status();
      std::vector<int64_t> argmax;
      const HostTensor want_max = NaivePool(x, c, true, &argmax);
      ASSERT_TRUE(EvalNear(mp, want_max));
      ASSERT_TRUE(EvalNear(ap, NaivePool(x, c, false), 1e-14));
      const HostTensor dy = Random(want_max.shape(), iter + 2000, DType::kF64);
      HostTensor want_dx(DType::kF64, x.shape());
      for (size_t o = 0; o < argmax.size(); ++o) {
        want_dx.SetDouble(argmax[o], want_dx.GetDouble(argmax[o]) + dy.GetDouble(o));
      }
      EXPECT_TRUE(EvalNear(MaxPoolGrad(Const(g, x), Const(g, dy), a), want_dx, 1e-15));
      const double lhs = Dot(NaivePool(x, c, false), dy);
      EXPECT_NEAR(Dot(x, Eval(AvgPoolGrad(x.shape(), Const(g, dy), a))), lhs,
                  1e-12 * (1 + std::abs(lhs)));
      ++pools;
    }
  }
  // The sweep reaches every branch.
  EXPECT_GT(convs, 100);
  EXPECT_GT(pools, 100);
  EXPECT_GT(errors, 10);
}

}  // namespace
}  // namespace braze
