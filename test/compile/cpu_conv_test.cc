// oneDNN's convolution inside Halide pipelines (device/cpu_conv.h): which Conv2D nodes
// call it, the bias and ReLU it takes, and that every call matches the reference
// kernels: both formats, strides, dilations, every padding, groups and depthwise, odd
// and prime extents, computed inputs, a batch of one, NaN kept by the ReLU, a residual
// add in the call (NaN, infinities and signed zeros in the residual). Skipped
// (with the reason) where oneDNN is not installed; CI installs it (tools/setup.sh).
#include "device/cpu_conv.h"

#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "device/cpu_gemm.h"
#include "gtest/gtest.h"
#include "ir/window_geometry.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

bool CallsConv(const CompiledKernel& k) {
  return absl::StrContains(k.schedule_text(), kCpuConvF32Symbol);
}

// Every f32 convolution on the library, however small (braze-fuzz's setting).
CompileOptions Library(bool on = true) {
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  options.cpu_gemm_library = on;
  options.cpu_gemm_min_work = 1;
  return options;
}

void Check(const Case& c, const CompileOptions& options, bool expect_call,
           const std::string& expect_name = "") {
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(CallsConv(**kernel), expect_call) << (*kernel)->schedule_text();
  if (!expect_name.empty()) {
    EXPECT_TRUE(absl::StrContains((*kernel)->schedule_text(), expect_name))
        << (*kernel)->schedule_text();
  }
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[i], (*expected)[i], 1e-4, 1e-4, &why)) << "output " << i << why;
  }
}

// The epilogue suffix of the (first) call's Func: "Conv2D_3_bias_residual$1" ->
// "_bias_residual"; "?" without a call.
std::string CallSuffix(const CompiledKernel& k) {
  const std::string text = k.schedule_text();
  const size_t at = text.find(absl::StrCat(": extern ", kCpuConvF32Symbol));
  if (at == std::string::npos) return "?";
  std::string name = text.substr(0, at);
  name = name.substr(name.rfind('\n') + 1);
  name = name.substr(0, name.find('$'));
  const size_t id_end = name.find_first_not_of("0123456789", name.find("Conv2D_") + 7);
  return id_end == std::string::npos ? "" : name.substr(id_end);
}

class CpuConvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status available = CpuGemmAvailable();
    if (!available.ok()) GTEST_SKIP() << available.message();
  }
};

struct ConvCase {
  DataFormat format;
  int64_t n, h, w, c, o, kh, kw;
  int groups;
  Window2D window;
};

TEST_F(CpuConvTest, EveryGeometryMatchesTheReference) {
  Window2D explicit_pads = Win(Padding::kExplicit, 2, 1, 1, 2);
  explicit_pads.pad_top = 2, explicit_pads.pad_bottom = 0;
  explicit_pads.pad_left = 1, explicit_pads.pad_right = 3;
  const std::vector<ConvCase> cases = {
      {DataFormat::kNHWC, 2, 13, 11, 7, 5, 3, 3, 1, Win(Padding::kSame, 1, 1)},
      {DataFormat::kNHWC, 3, 17, 10, 6, 9, 3, 2, 3, Win(Padding::kValid, 2, 3)},
      {DataFormat::kNHWC, 1, 9, 9, 8, 8, 3, 3, 8, Win(Padding::kSame, 2, 2)},  // depthwise
      {DataFormat::kNHWC, 2, 11, 13, 5, 7, 3, 3, 1, Win(Padding::kSame, 1, 1, 2, 2)},
      {DataFormat::kNHWC, 2, 12, 9, 4, 6, 2, 3, 2, explicit_pads},
      {DataFormat::kNCHW, 2, 13, 11, 7, 5, 3, 3, 1, Win(Padding::kSame, 1, 1)},
      {DataFormat::kNCHW, 1, 10, 7, 6, 4, 1, 1, 2, Win(Padding::kValid, 1, 2)},
      {DataFormat::kNHWC, 1, 1, 1, 1, 1, 1, 1, 1, Win(Padding::kValid, 1, 1)},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const ConvCase& k = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    Case c;
    Window2D w = k.window;
    w.format = k.format;
    const Shape xs =
        k.format == DataFormat::kNHWC ? Shape{k.n, k.h, k.w, k.c} : Shape{k.n, k.c, k.h, k.w};
    Tensor x = c.Input(DType::kF32, xs, 10 + i);
    Tensor f = c.Input(DType::kF32, {k.kh, k.kw, k.c / k.groups, k.o}, 20 + i);
    Tensor y = Conv2D(x, f, w);
    c.outputs = {y};
    Check(c, Library(), /*expect_call=*/true);
    Check(c, Library(false), /*expect_call=*/false);  // Braze's Halide convolution
    // The gradient ops, from a dy of y's shape: oneDNN's backward data and weights.
    Case b;
    Tensor bx = b.Input(DType::kF32, xs, 30 + i);
    Tensor bf = b.Input(DType::kF32, {k.kh, k.kw, k.c / k.groups, k.o}, 40 + i);
    Tensor dy = b.Input(DType::kF32, y.shape(), 50 + i);
    b.outputs = {Conv2DBackpropInput(xs, bf, dy, w), Conv2DBackpropFilter(bx, bf.shape(), dy, w)};
    Check(b, Library(), /*expect_call=*/true);
  }
}

TEST_F(CpuConvTest, BiasAndReluGoIntoTheCallAndKeepNaN) {
  Case c;
  HostTensor bias = HostTensor::RandomUniform(DType::kF32, {6}, 3);
  bias.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  bias.data<float>()[4] = -std::numeric_limits<float>::infinity();
  Tensor x = c.Input(DType::kF32, {2, 9, 7, 5}, 1);
  Tensor f = c.Input(DType::kF32, {3, 3, 5, 6}, 2);
  Tensor b = c.Input(bias);
  c.outputs = {Relu(Conv2D(x, f, {1, 1}, Padding::kSame) + b)};
  Check(c, Library(), /*expect_call=*/true, "_bias_relu");
}

// `v` with NaN, infinities, signed zeros, a subnormal and FLT_MAX at every 7th element.
HostTensor WithSpecials(HostTensor v) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            0.0f,
                            1e-40f,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max()};
  float* p = v.data<float>();
  for (int64_t i = 0; i < v.num_elements(); i += 7) p[i] = specials[(i / 7) % 8];
  return v;
}

// A residual add (of the output's shape) after the convolution, with or without a bias
// before it and a ReLU after it: oneDNN's binary_add post-op, named in the call's Func.
TEST_F(CpuConvTest, ResidualAddGoesIntoTheCallAndKeepsSpecials) {
  struct ResidualCase {
    DataFormat format;
    int64_t n, h, w, c, o, kh, kw;
    int groups;
    bool bias, relu, residual_first;  // residual_first: Add(r, conv)
    std::string name;                 // the call's Func's suffix
    // Whether the residual may stay a Halide add: an implementation the post-op's check
    // (device/onednn_conv.cc) has not met (here: the 1x1 on one pixel, brgconv_1x1).
    bool may_fall_back = false;
  };
  const std::vector<ResidualCase> cases = {
      {DataFormat::kNHWC, 2, 13, 11, 7, 5, 3, 3, 1, true, true, false, "_bias_residual_relu"},
      {DataFormat::kNHWC, 3, 7, 5, 6, 9, 3, 3, 3, true, false, false, "_bias_residual"},
      {DataFormat::kNHWC, 1, 11, 13, 5, 7, 1, 1, 1, false, true, true, "_residual_relu"},
      {DataFormat::kNHWC, 2, 9, 9, 8, 8, 3, 3, 8, false, false, false, "_residual"},  // depthwise
      {DataFormat::kNCHW, 2, 13, 11, 7, 5, 3, 3, 1, false, true, false, "_residual_relu"},
      {DataFormat::kNCHW, 3, 7, 5, 6, 9, 1, 1, 3, false, false, true, "_residual"},
      {DataFormat::kNHWC, 1, 1, 1, 1, 1, 1, 1, 1, true, true, false, "_bias_residual_relu", true},
      // A residual block's channel counts (oneDNN's blocked kernels, no vector tail).
      {DataFormat::kNHWC, 2, 15, 14, 32, 64, 3, 3, 1, true, true, false, "_bias_residual_relu"},
      {DataFormat::kNHWC, 2, 15, 14, 64, 64, 1, 1, 1, true, false, false, "_bias_residual", true},
      {DataFormat::kNCHW, 2, 15, 14, 32, 64, 3, 3, 1, false, true, false, "_residual_relu"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const ResidualCase& k = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    Case c;
    const bool nhwc = k.format == DataFormat::kNHWC;
    Window2D w = Win(Padding::kSame, 1, 1);
    w.format = k.format;
    Tensor x =
        c.Input(DType::kF32, nhwc ? Shape{k.n, k.h, k.w, k.c} : Shape{k.n, k.c, k.h, k.w}, 60 + i);
    Tensor f = c.Input(DType::kF32, {k.kh, k.kw, k.c / k.groups, k.o}, 70 + i);
    const Shape ys = nhwc ? Shape{k.n, k.h, k.w, k.o} : Shape{k.n, k.o, k.h, k.w};
    Tensor r = c.Input(WithSpecials(HostTensor::RandomUniform(DType::kF32, ys, 80 + i, -2, 2)));
    Tensor y = Conv2D(x, f, w);
    if (k.bias) y = y + c.Input(DType::kF32, {k.o}, 90 + i);
    y = k.residual_first ? r + y : y + r;
    if (k.relu) y = Relu(y);
    c.outputs = {y};
    Check(c, Library(), /*expect_call=*/true);
    auto kernel = CompileCluster(SpecOf(c), Library());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const std::string suffix = CallSuffix(**kernel);
    if (!(k.may_fall_back && suffix == (k.bias ? "_bias" : ""))) EXPECT_EQ(suffix, k.name);
  }
}

// The residual is the convolution's own input (one buffer handed twice), and a second
// Add after a residual first stays a Halide add, with the Relu after it.
TEST_F(CpuConvTest, ResidualOfTheInputAndASecondAddAfterIt) {
  Case c;
  Tensor x = c.Input(DType::kF32, {3, 11, 7, 6}, 91);
  Tensor f = c.Input(DType::kF32, {3, 3, 6, 6}, 92);
  Tensor r = c.Input(DType::kF32, {3, 11, 7, 6}, 93);
  c.outputs = {Conv2D(x, f, {1, 1}, Padding::kSame) + x,
               Relu(Conv2D(r, f, {1, 1}, Padding::kSame) + r + x)};
  Check(c, Library(), /*expect_call=*/true);
  auto kernel = CompileCluster(SpecOf(c), Library());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // Both calls take their residual; the second's Relu reads `+ x`, which stays.
  const std::string text = (*kernel)->schedule_text();
  EXPECT_EQ(CallSuffix(**kernel), "_residual") << text;
  EXPECT_FALSE(absl::StrContains(text, "_residual_relu")) << text;
}

// In NCHW a [C]-shaped operand broadcasts along W: no bias, and no residual either.
TEST_F(CpuConvTest, NchwVectorAddIsNoBias) {
  Case c;
  Window2D w = Win(Padding::kSame, 1, 1);
  w.format = DataFormat::kNCHW;
  Tensor x = c.Input(DType::kF32, {2, 5, 9, 7}, 94);
  Tensor f = c.Input(DType::kF32, {3, 3, 5, 7}, 95);
  Tensor v = c.Input(DType::kF32, {7}, 96);  // W == C_out
  c.outputs = {Relu(Conv2D(x, f, w) + v)};
  auto kernel = CompileCluster(SpecOf(c), Library());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(CallSuffix(**kernel), "") << (*kernel)->schedule_text();
  Check(c, Library(), /*expect_call=*/true);
}

// A residual after a strided, dilated or unevenly padded convolution stays a Halide
// add (onednn_conv.cc: the post-op's check covers unit strides and even padding only;
// oneDNN 2.6's brgconv adds the wrong residual elements for the first of these).
TEST_F(CpuConvTest, ResidualOfAStridedPaddedConvolutionStaysHalide) {
  Window2D uneven = Win(Padding::kExplicit, 2, 1, 1, 2);
  uneven.pad_top = 2, uneven.pad_bottom = 0, uneven.pad_left = 1, uneven.pad_right = 3;
  Window2D strided = Win(Padding::kSame, 2, 2);
  Window2D dilated = Win(Padding::kSame, 1, 1, 2, 2);
  for (const Window2D& w : {uneven, strided, dilated}) {
    for (int groups : {1, 2}) {
      SCOPED_TRACE(groups);
      Case c;
      Tensor x = c.Input(DType::kF32, {2, 12, 9, 4}, 101);
      Tensor f = c.Input(DType::kF32, {2, 3, 4 / groups, 6}, 102);
      Tensor y = Conv2D(x, f, w);
      Tensor r = c.Input(DType::kF32, y.shape(), 103, -2, 2);
      c.outputs = {Relu(y + c.Input(DType::kF32, {6}, 104) + r)};
      Check(c, Library(), /*expect_call=*/true);
      auto kernel = CompileCluster(SpecOf(c), Library());
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_EQ(CallSuffix(**kernel), "_bias") << (*kernel)->schedule_text();
    }
  }
}

// A 3x3 convolution of at least 64 channels runs as oneDNN's Winograd algorithm
// (device/onednn_conv.h) in every direction: it matches the reference at odd and prime
// extents, both formats, SAME and VALID; a NaN or an infinity in an operand gives the
// reference's special values (the call is recomputed by the direct convolution); with
// Winograd off the same call is the direct convolution.
TEST_F(CpuConvTest, WinogradMatchesTheReferenceAndKeepsSpecials) {
  struct WinoCase {
    DataFormat format;
    int64_t n, h, w, c, o;
    Padding padding;
    bool specials;
  };
  const WinoCase cases[] = {
      {DataFormat::kNHWC, 3, 13, 7, 64, 80, Padding::kSame, false},
      {DataFormat::kNCHW, 2, 11, 5, 64, 64, Padding::kValid, true},
      {DataFormat::kNHWC, 1, 6, 13, 80, 64, Padding::kSame, true},
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < std::size(cases); ++i) {
    const WinoCase& k = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    const bool nchw = k.format == DataFormat::kNCHW;
    const Shape xs = nchw ? Shape{k.n, k.c, k.h, k.w} : Shape{k.n, k.h, k.w, k.c};
    const int32_t pad = k.padding == Padding::kSame ? 1 : 0;
    // The forward call's geometry: 3x3, unit strides and dilations, no groups, no post-op.
    CpuConvGeometry g{};
    g.nchw = nchw, g.n = int32_t(k.n), g.c_in = int32_t(k.c), g.in_h = int32_t(k.h);
    g.in_w = int32_t(k.w), g.c_out = int32_t(k.o), g.kh = 3, g.kw = 3, g.groups = 1;
    g.sh = g.sw = g.dh = g.dw = 1;
    g.pt = g.pb = g.pl = g.pr = pad;
    // oneDNN 2.6's Winograd is an AVX-512 kernel; elsewhere the call is the direct one.
    const bool wino = absl::StrContains(CpuConvImplementation(g, 1), "wino");
    if (__builtin_cpu_supports("avx512f")) EXPECT_TRUE(wino) << CpuConvImplementation(g, 1);
    Window2D w = Win(k.padding, 1, 1);
    w.format = k.format;
    HostTensor xv = HostTensor::RandomUniform(DType::kF32, xs, 60 + i);
    HostTensor dyv = HostTensor::RandomUniform(
        DType::kF32,
        nchw ? Shape{k.n, k.o, g.OutH(), g.OutW()} : Shape{k.n, g.OutH(), g.OutW(), k.o}, 70 + i);
    if (k.specials) {
      xv.data<float>()[5] = inf;
      xv.data<float>()[xv.num_elements() - 100] = std::numeric_limits<float>::quiet_NaN();
      // dy's infinity away from the padding: oneDNN's direct backward-weights kernel
      // multiplies a border dy by the zero padding (NaN where the reference's -inf).
      const int64_t oh = g.OutH(), ow = g.OutW();
      const int64_t at = nchw ? (1 * oh + 2) * ow + 3 : ((2 * ow) + 3) * k.o + 1;
      dyv.data<float>()[at] = -inf;
    }
    const int64_t recomputes = CpuConvWinogradRecomputes();
    Case c;
    Tensor x = c.Input(xv);
    Tensor f = c.Input(DType::kF32, {3, 3, k.c, k.o}, 80 + i);
    c.outputs = {Conv2D(x, f, w)};
    Check(c, Library(), /*expect_call=*/true);
    Case b;
    Tensor bx = b.Input(xv);
    Tensor bf = b.Input(DType::kF32, {3, 3, k.c, k.o}, 90 + i);
    Tensor dy = b.Input(dyv);
    b.outputs = {Conv2DBackpropInput(xs, bf, dy, w), Conv2DBackpropFilter(bx, bf.shape(), dy, w)};
    Check(b, Library(), /*expect_call=*/true);
    // Each direction's special values came from a recompute (a call per batch range the
    // kernel hands over), and only theirs.
    if (k.specials && wino) {
      EXPECT_GE(CpuConvWinogradRecomputes() - recomputes, 3);
    } else {
      EXPECT_EQ(CpuConvWinogradRecomputes(), recomputes);
    }
    // Off: the direct convolution.
    SetCpuConvWinograd(false);
    EXPECT_FALSE(absl::StrContains(CpuConvImplementation(g, 1), "wino"));
    SetCpuConvWinograd(true);
  }
}

// A 3x3 convolution of at least 64 channels with its bias, residual add and ReLU in the
// call runs as Winograd too: the primitive computes conv + bias, and the call's own pass
// takes the result out of the blocked layout, scans it, adds the residual and applies
// the ReLU. Both formats, 64 and 70 output channels (a channel block with a tail), odd
// extents; NaN and infinities in x recompute the call by the direct convolution with
// the reference's values; the residual's special values never do (its add is exact).
TEST_F(CpuConvTest, WinogradTakesTheBiasResidualAndRelu) {
  struct PostCase {
    DataFormat format;
    int64_t n, h, w, c, o;
    bool bias, residual, relu, specials;
    std::string name;
  };
  // (NCHW: a bias of [C_out, 1, 1] stays a Halide add, docs/CONVOLUTIONS.md; the
  // residual goes into the call without it.)
  const PostCase cases[] = {
      {DataFormat::kNHWC, 2, 9, 7, 64, 64, true, false, true, false, "_bias_relu"},
      {DataFormat::kNHWC, 3, 7, 11, 64, 70, true, true, true, false, "_bias_residual_relu"},
      {DataFormat::kNCHW, 2, 5, 9, 64, 70, false, true, true, true, "_residual_relu"},
      {DataFormat::kNCHW, 1, 11, 6, 64, 64, false, true, false, false, "_residual"},
      {DataFormat::kNHWC, 2, 6, 5, 80, 64, true, true, true, true, "_bias_residual_relu"},
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < std::size(cases); ++i) {
    const PostCase& k = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    const bool nchw = k.format == DataFormat::kNCHW;
    CpuConvGeometry g{};
    g.nchw = nchw, g.n = int32_t(k.n), g.c_in = int32_t(k.c), g.in_h = int32_t(k.h);
    g.in_w = int32_t(k.w), g.c_out = int32_t(k.o), g.kh = 3, g.kw = 3, g.groups = 1;
    g.sh = g.sw = g.dh = g.dw = 1;
    g.pt = g.pb = g.pl = g.pr = 1;
    g.post = (k.bias ? 1 : 0) | (k.residual ? 2 : 0) | (k.relu ? 4 : 0);
    const std::string impl = CpuConvImplementation(g, 1);
    const bool wino = absl::StrContains(impl, "wino");
    if (__builtin_cpu_supports("avx512f")) EXPECT_TRUE(wino) << impl;
    Window2D w = Win(Padding::kSame, 1, 1);
    w.format = k.format;
    const Shape xs = nchw ? Shape{k.n, k.c, k.h, k.w} : Shape{k.n, k.h, k.w, k.c};
    const Shape ys = nchw ? Shape{k.n, k.o, k.h, k.w} : Shape{k.n, k.h, k.w, k.o};
    HostTensor xv = HostTensor::RandomUniform(DType::kF32, xs, 110 + i);
    if (k.specials) {
      xv.data<float>()[7] = inf;
      xv.data<float>()[xv.num_elements() / 2] = -inf;
      xv.data<float>()[xv.num_elements() - 3] = std::numeric_limits<float>::quiet_NaN();
    }
    const int64_t recomputes = CpuConvWinogradRecomputes();
    Case c;
    Tensor x = c.Input(xv);
    Tensor f = c.Input(DType::kF32, {3, 3, k.c, k.o}, 120 + i);
    // Negative biases: many sums below 0 for the ReLU.
    Tensor y = Conv2D(x, f, w);
    if (k.bias) y = y + c.Input(DType::kF32, {k.o}, 130 + i, -2, 1);
    if (k.residual) {
      y = y + c.Input(WithSpecials(HostTensor::RandomUniform(DType::kF32, ys, 140 + i, -2, 2)));
    }
    if (k.relu) y = Relu(y);
    c.outputs = {y};
    Check(c, Library(), /*expect_call=*/true);
    auto kernel = CompileCluster(SpecOf(c), Library());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(CallSuffix(**kernel), k.name) << (*kernel)->schedule_text();
    // Special values of x (not of the residual) sent the call to the direct convolution.
    if (k.specials && wino) {
      EXPECT_GE(CpuConvWinogradRecomputes() - recomputes, 1);
    } else {
      EXPECT_EQ(CpuConvWinogradRecomputes(), recomputes);
    }
  }
}

// The filter is reordered into oneDNN's layout once per contents, not at every call: a
// second call with the same filter (in another buffer) reuses the reordered copy; a
// filter differing in its last element alone is reordered again, and so is the first
// one after it. Forward (with bias and ReLU) and the input gradient; every result
// against the reference.
TEST_F(CpuConvTest, AFilterIsReorderedOncePerContents) {
  for (bool gradient : {false, true}) {
    SCOPED_TRACE(gradient ? "backward data" : "forward");
    Case c;
    const Shape xs = {2, 9, 7, 24};
    Tensor x = c.Input(DType::kF32, gradient ? Shape{2, 9, 7, 40} : xs, 151);
    Tensor f = c.Input(DType::kF32, {3, 3, 24, 40}, 152);
    if (gradient) {
      c.outputs = {Conv2DBackpropInput(xs, f, x, Win(Padding::kSame, 1, 1))};
    } else {
      c.outputs = {Relu(Conv2D(x, f, {1, 1}, Padding::kSame) + c.Input(DType::kF32, {40}, 153))};
    }
    auto kernel = CompileCluster(SpecOf(c), Library());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    ASSERT_TRUE(CallsConv(**kernel)) << (*kernel)->schedule_text();
    // Runs the kernel on c.values; the filter reorders the call did.
    auto run = [&]() -> int64_t {
      const int64_t before = CpuConvFilterReorders();
      auto actual = RunKernel(**kernel, c.values);
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      EXPECT_TRUE(actual.ok() && expected.ok());
      if (!actual.ok() || !expected.ok()) return -1;
      std::string why;
      EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) << why;
      return CpuConvFilterReorders() - before;
    };
    const int64_t first = run();
    if (first == 0) GTEST_SKIP() << "oneDNN reads this filter as it is: nothing to reorder";
    EXPECT_EQ(first, 1);
    c.values[1] = HostTensor(c.values[1]);  // the same contents in another buffer
    EXPECT_EQ(run(), 0);
    HostTensor original = c.values[1];
    HostTensor changed(original);
    changed.data<float>()[changed.num_elements() - 1] += 0.5f;
    c.values[1] = changed;
    EXPECT_EQ(run(), 1);
    EXPECT_EQ(run(), 0);
    c.values[1] = original;
    EXPECT_EQ(run(), 1);
  }
}

// A filter trained every step changes at every call: after two compares that differ
// its bits are no longer copied for the next compare but at one reorder in 16 (a
// copy of the whole filter per call before), and a filter that then stays the same is
// found again within 16 calls.
TEST_F(CpuConvTest, ATrainedFilterIsNotCopiedAtEveryCall) {
  Case c;
  Tensor x = c.Input(DType::kF32, {2, 8, 5, 24}, 161);
  Tensor f = c.Input(DType::kF32, {3, 3, 24, 36}, 162);
  c.outputs = {Conv2D(x, f, {1, 1}, Padding::kSame)};
  auto kernel = CompileCluster(SpecOf(c), Library());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_TRUE(CallsConv(**kernel)) << (*kernel)->schedule_text();
  int64_t reorders = 0, copies = 0;
  auto run = [&] {
    const int64_t r = CpuConvFilterReorders(), k = CpuConvFilterCopies();
    auto actual = RunKernel(**kernel, c.values);
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(actual.ok() && expected.ok());
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) << why;
    reorders = CpuConvFilterReorders() - r;
    copies = CpuConvFilterCopies() - k;
  };
  run();
  if (reorders == 0) GTEST_SKIP() << "oneDNN reads this filter as it is: nothing to reorder";
  int64_t total_copies = 0;
  for (int step = 0; step < 20; ++step) {  // "training": another filter every call
    HostTensor next(c.values[1]);
    next.data<float>()[step % next.num_elements()] += 0.25f;
    c.values[1] = next;
    run();
    EXPECT_EQ(reorders, 1) << "step " << step;
    total_copies += copies;
  }
  EXPECT_LE(total_copies, 4) << "a changing filter copied at most twice and once in 16 after";
  int64_t last = -1;
  for (int i = 0; i < 18; ++i) {  // the filter stops changing
    run();
    last = reorders;
  }
  EXPECT_EQ(last, 0) << "a filter that stopped changing is reordered once more at most";
}

// oneDNN's direct backward-weights kernel multiplies dy by the zero padding: an infinite
// dy at a border output gave NaN in the filter taps that read the padding there, where
// the reference (which skips padding taps) gives a finite sum or the infinity. The call
// computes those NaN elements again as the reference does; a NaN of x stays NaN.
TEST_F(CpuConvTest, FilterGradientKeepsTheReferencesValuesAtThePadding) {
  Window2D strided = Win(Padding::kExplicit, 2, 1);
  strided.pad_top = 2, strided.pad_bottom = 1, strided.pad_left = 1, strided.pad_right = 0;
  struct FilterCase {
    DataFormat format;
    int64_t n, h, w, c, o, groups;
    Window2D window;
  };
  const FilterCase cases[] = {
      {DataFormat::kNHWC, 2, 7, 5, 6, 4, 2, Win(Padding::kSame, 1, 1)},
      {DataFormat::kNCHW, 2, 5, 7, 3, 5, 1, Win(Padding::kSame, 1, 1)},
      {DataFormat::kNHWC, 3, 9, 6, 4, 4, 1, strided},
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < std::size(cases); ++i) {
    const FilterCase& k = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    const bool nchw = k.format == DataFormat::kNCHW;
    Window2D w = k.window;
    w.format = k.format;
    const Shape xs = nchw ? Shape{k.n, k.c, k.h, k.w} : Shape{k.n, k.h, k.w, k.c};
    const Shape fs{3, 3, k.c / k.groups, k.o};
    auto geometry = Conv2DGeometryOf(w, xs, fs);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    const Shape y_shape = geometry->OutputShape();
    HostTensor xv = HostTensor::RandomUniform(DType::kF32, xs, 300 + i);
    HostTensor dyv = HostTensor::RandomUniform(DType::kF32, y_shape, 310 + i);
    // dy infinite at the first image's top-left output, channel 1; x NaN in the last image.
    dyv.data<float>()[nchw ? y_shape[2] * y_shape[3] : 1] = -inf;
    xv.data<float>()[xv.num_elements() - 2] = std::numeric_limits<float>::quiet_NaN();
    Case b;
    Tensor x = b.Input(xv);
    Tensor dy = b.Input(dyv);
    b.outputs = {Conv2DBackpropFilter(x, fs, dy, w)};
    Check(b, Library(), /*expect_call=*/true);
  }
}

TEST_F(CpuConvTest, ComputedInputAndConsumersStayFused) {
  // exp(x) is a stored operand; the conv (also an output) is read by a sum and a
  // residual add: no epilogue, the bias add stays a Halide op.
  Case c;
  Tensor x = c.Input(DType::kF32, {3, 10, 10, 4}, 5);
  Tensor f = c.Input(DType::kF32, {3, 3, 4, 4}, 6);
  Tensor y = Conv2D(Exp(x), f, {1, 1}, Padding::kSame);
  c.outputs = {Relu(y + x), Sum(y, {1, 2}), y};
  Check(c, Library(), /*expect_call=*/true);
}

TEST_F(CpuConvTest, ConstantFiltersWithAndWithoutBias) {
  // Constant filters are buffers of the kernel's own; a call without a bias must not hand
  // the filter's buffer twice (Halide refuses a buffer name seen twice).
  Case c;
  Tensor x = c.Input(DType::kF32, {2, 11, 9, 6}, 14);
  Tensor f1 = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {3, 3, 6, 8}, 15));
  Tensor f2 = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {1, 1, 6, 8}, 16));
  Tensor bias = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {8}, 17));
  c.outputs = {Conv2D(x, f1, {1, 1}, Padding::kSame) * 2.0,
               Relu(Conv2D(x, f2, {1, 1}, Padding::kSame) + bias)};
  CompileOptions options = Library();
  Check(c, options, /*expect_call=*/true);
}

TEST_F(CpuConvTest, SmallWorkStaysHalide) {
  Case c;
  Tensor x = c.Input(DType::kF32, {1, 5, 5, 2}, 7);
  Tensor f = c.Input(DType::kF32, {3, 3, 2, 3}, 8);
  c.outputs = {Conv2D(x, f, {1, 1}, Padding::kSame)};
  Check(c, CompileOptions{}, /*expect_call=*/false);  // 450 MACs: under the default
}

TEST_F(CpuConvTest, DoubleStaysHalide) {
  Case c;
  Tensor x = c.Input(DType::kF64, {2, 12, 12, 8}, 9);
  Tensor f = c.Input(DType::kF64, {3, 3, 8, 8}, 10);
  c.outputs = {Conv2D(x, f, {1, 1}, Padding::kSame)};
  Check(c, Library(), /*expect_call=*/false);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
