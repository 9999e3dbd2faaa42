// The window ops (Conv2D, its input and filter gradients; MaxPool, AvgPool and their
// gradient ops) compiled and compared with the reference kernels: both data formats,
// VALID, SAME and explicit padding, strides 1-3, dilations 1-2, groups 1, 2 and
// depthwise, odd, prime and tiny extents, fused with elementwise ops, special values
// in max pools, a symbolic batch, and the GPU schedule on OpenCL (POCL).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "ir/window_geometry.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

namespace braze {
namespace lowertest {
namespace {

constexpr DType f32 = DType::kF32;
// f32 accumulations of up to a few hundred products against the reference's f64.
constexpr Tolerance kConvTol{2e-4, 2e-5};
// Filter gradients summing 10^4 products in f32 (as MatMul does): the f32 rounding of
// sums that cancel to near 0 (a sum of magnitude ~100 off by ~1e-5 relative).
constexpr Tolerance kLongSumTol{2e-4, 1e-3};

// Braze's own convolution loops, not the oneDNN call large f32 convolutions take
// (lower_conv_library.cc; test/compile/cpu_conv_test.cc tests that path).
CompileOptions HalideLoops() {
  CompileOptions o;
  o.cpu_gemm_min_work = -1;
  return o;
}

// Compiles and compares c as Braze's loops (HalideLoops).
::testing::AssertionResult CompileRunCompareLoops(const Case& c, Scheduler scheduler,
                                                  Tolerance tol) {
  return CompileRunCompare(c, scheduler, tol, nullptr, HalideLoops());
}

// Random values away from 0 (never zeros: a product that should not count must show).
HostTensor Random(DType dtype, const Shape& shape, uint64_t seed) {
  HostTensor t = HostTensor::RandomUniform(dtype, shape, seed, 0.25, 1.0);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (rng() & 1) t.SetDouble(i, -t.GetDouble(i));
  }
  return t;
}

// One conv geometry: x is N x H x W x C_in (in `window.format`), the filter KH x KW x
// (C_in / groups) x C_out.
struct ConvSpec {
  std::string name;
  int64_t n, h, w, c_in;
  int64_t kh, kw, groups, c_out;
  Window2D window;
};

Shape XShape(const ConvSpec& s) { return MakeShape(s.window.format, s.n, s.h, s.w, s.c_in); }
Shape FilterShape(const ConvSpec& s) { return {s.kh, s.kw, s.c_in / s.groups, s.c_out}; }
Shape YShape(const ConvSpec& s) {
  auto g = Conv2DGeometryOf(s.window, XShape(s), FilterShape(s));
  EXPECT_TRUE(g.ok()) << s.name << ": " << g.status();
  return g.ok() ? g->OutputShape() : Shape{1, 1, 1, 1};
}

// Conv2D, its input gradient and its filter gradient: one cluster.
void BuildConv(Case& c, const ConvSpec& s) {
  Tensor x = c.Input(Random(f32, XShape(s), 11));
  Tensor f = c.Input(Random(f32, FilterShape(s), 12));
  Tensor dy = c.Input(Random(f32, YShape(s), 13));
  c.outputs = {Conv2D(x, f, s.window), Conv2DBackpropInput(XShape(s), f, dy, s.window),
               Conv2DBackpropFilter(x, FilterShape(s), dy, s.window)};
}

Window2D MakeWindow(DataFormat format, Padding padding, int stride, int dilation) {
  Window2D w;
  w.format = format;
  w.padding = padding;
  w.stride_h = stride;
  w.stride_w = stride == 1 ? 1 : stride - 1;  // unequal strides where there are two
  w.dilation_h = dilation;
  w.dilation_w = dilation;
  if (padding == Padding::kExplicit)
    w.pad_top = 1, w.pad_bottom = 0, w.pad_left = 2, w.pad_right = 1;
  return w;
}

// Every format x padding x (stride, dilation), groups cycling through 1, 2 and
// depthwise, on odd extents (7x5 images, a 3x2 filter).
std::vector<ConvSpec> ConvGrid() {
  std::vector<ConvSpec> specs;
  const std::pair<int, int> steps[] = {{1, 1}, {2, 1}, {3, 1}, {1, 2}, {2, 2}};
  int k = 0;
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    for (Padding padding : {Padding::kValid, Padding::kSame, Padding::kExplicit}) {
      for (auto [stride, dilation] : steps) {
        const int kind = k++ % 3;
        ConvSpec s;
        s.window = MakeWindow(format, padding, stride, dilation);
        s.n = 2, s.h = 7, s.w = 6 + dilation, s.kh = 3, s.kw = 2;
        if (kind == 0) s.c_in = 3, s.groups = 1, s.c_out = 5;
        if (kind == 1) s.c_in = 4, s.groups = 2, s.c_out = 6;
        if (kind == 2) s.c_in = 3, s.groups = 3, s.c_out = 6;  // depthwise, multiplier 2
        s.name = absl::StrCat(FormatName(format), "_", PaddingName(padding), "_s", stride, "_d",
                              dilation, "_g", s.groups);
        specs.push_back(s);
      }
    }
  }
  return specs;
}

// Tiny and prime extents, and the CNN example's shapes at a small batch.
std::vector<ConvSpec> ConvEdges() {
  std::vector<ConvSpec> specs;
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const std::string f = FormatName(format);
    specs.push_back({f + "_1x1Image1x1Filter", 1, 1, 1, 1, 1, 1, 1, 1,
                     MakeWindow(format, Padding::kValid, 1, 1)});
    specs.push_back(
        {f + "_1x1ImageSame3x3", 1, 1, 1, 2, 3, 3, 1, 3, MakeWindow(format, Padding::kSame, 1, 1)});
    specs.push_back(
        {f + "_Prime11x13", 3, 11, 13, 3, 5, 3, 1, 7, MakeWindow(format, Padding::kSame, 2, 1)});
    specs.push_back(
        {f + "_OneChannelIn", 2, 9, 9, 1, 3, 3, 1, 32, MakeWindow(format, Padding::kSame, 1, 1)});
    specs.push_back(
        {f + "_Cnn32to64", 2, 14, 14, 32, 3, 3, 1, 64, MakeWindow(format, Padding::kSame, 1, 1)});
    specs.push_back({f + "_DepthwiseMultiplier1", 2, 8, 8, 16, 3, 3, 16, 16,
                     MakeWindow(format, Padding::kSame, 2, 1)});
    // Enough work for a filter gradient in 5 partial sums of a batch of 7: the last
    // step's images past the batch are left out.
    specs.push_back({f + "_PartialSumsOfAnOddBatch", 7, 40, 40, 2, 3, 3, 1, 3,
                     MakeWindow(format, Padding::kSame, 1, 1)});
    // A 1-tap filter dim with padding: its test is on the output's var alone (no tap
    // varies), and Halide 14's simplifier dropped the read's clamp under it; the GPU
    // heuristic's fused block index then required x at the padding row -1 (braze-fuzz
    // seed 48; the rows, then the columns).
    specs.push_back({f + "_OneTapRowsPadded", 13, 9, 4, 1, 1, 3, 1, 3,
                     Window2D{1, 2, 2, 2, Padding::kExplicit, 1, 1, 2, 0, format}});
    specs.push_back({f + "_OneTapColsPadded", 2, 5, 7, 2, 3, 1, 1, 4,
                     Window2D{2, 1, 1, 1, Padding::kExplicit, 1, 0, 1, 2, format}});
  }
  return specs;
}

void PrintTo(const ConvSpec& s, std::ostream* os) { *os << s.name; }

class ConvTest : public ::testing::TestWithParam<ConvSpec> {};

TEST_P(ConvTest, MatchesReferenceUnderTheSafeDefault) {
  Case c;
  BuildConv(c, GetParam());
  const ConvSpec& s = GetParam();
  const bool long_sums = s.n * s.h * s.w > 4096;
  EXPECT_TRUE(
      CompileRunCompareLoops(c, Scheduler::kSafeDefault, long_sums ? kLongSumTol : kConvTol));
}

std::string ConvName(const ::testing::TestParamInfo<ConvSpec>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Grid, ConvTest, ::testing::ValuesIn(ConvGrid()), ConvName);
INSTANTIATE_TEST_SUITE_P(Edges, ConvTest, ::testing::ValuesIn(ConvEdges()), ConvName);

// A few geometries under every scheduler (and kAuto).
class ConvSchedulerTest : public ::testing::TestWithParam<std::tuple<ConvSpec, Scheduler>> {};

TEST_P(ConvSchedulerTest, MatchesReference) {
  Case c;
  BuildConv(c, std::get<0>(GetParam()));
  EXPECT_TRUE(CompileRunCompareLoops(c, std::get<1>(GetParam()), kConvTol));
}

std::vector<ConvSpec> SchedulerSpecs() {
  const std::vector<ConvSpec> grid = ConvGrid();
  return {grid[2], grid[9], grid[21], ConvEdges()[2]};
}

std::string ConvSchedulerName(
    const ::testing::TestParamInfo<std::tuple<ConvSpec, Scheduler>>& info) {
  return std::get<0>(info.param).name + "_" + SchedulerName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Schedulers, ConvSchedulerTest,
                         ::testing::Combine(::testing::ValuesIn(SchedulerSpecs()),
                                            ::testing::Values(Scheduler::kMullapudi2016,
                                                              Scheduler::kLi2018,
                                                              Scheduler::kAuto)),
                         ConvSchedulerName);
// Adams2019 searched about a minute for each cluster of the three conv ops on the
// loaded 2-vCPU machine (kAuto gives convolutions the safe default): one tiny case.
INSTANTIATE_TEST_SUITE_P(Adams2019, ConvSchedulerTest,
                         ::testing::Combine(::testing::Values(ConvEdges()[0]),
                                            ::testing::Values(Scheduler::kAdams2019)),
                         ConvSchedulerName);

// ---- Pools ----

struct PoolSpec {
  std::string name;
  int64_t n, h, w, c;
  Pool2DAttrs attrs;
};

void PrintTo(const PoolSpec& s, std::ostream* os) { *os << s.name; }

Pool2DAttrs MakePool(DataFormat format, Padding padding, int64_t kh, int64_t kw, int sh, int sw) {
  Pool2DAttrs a;
  a.size_h = kh, a.size_w = kw;
  a.window.format = format;
  a.window.padding = padding;
  a.window.stride_h = sh, a.window.stride_w = sw;
  if (padding == Padding::kExplicit) {
    a.window.pad_top = kh > 1 ? 1 : 0, a.window.pad_bottom = 0;
    a.window.pad_left = 0, a.window.pad_right = kw > 1 ? 1 : 0;
  }
  return a;
}

Shape PoolX(const PoolSpec& s) { return MakeShape(s.attrs.window.format, s.n, s.h, s.w, s.c); }

// Every pool op of x in one cluster: MaxPool, AvgPool, MaxPoolGrad, MaxPoolGradGrad and
// AvgPoolGrad. `x` may hold special values.
void BuildPool(Case& c, const PoolSpec& s, HostTensor x_value) {
  auto g = Pool2DGeometryOf(s.attrs, PoolX(s));
  ASSERT_TRUE(g.ok()) << s.name << ": " << g.status();
  const DType dtype = x_value.dtype();
  Tensor x = c.Input(std::move(x_value));
  Tensor dy = c.Input(Random(dtype, g->OutputShape(), 22));
  Tensor gx = c.Input(Random(dtype, PoolX(s), 23));
  c.outputs = {MaxPool(x, s.attrs), AvgPool(x, s.attrs), MaxPoolGrad(x, dy, s.attrs),
               MaxPoolGradGrad(x, gx, s.attrs), AvgPoolGrad(PoolX(s), dy, s.attrs)};
}

std::vector<PoolSpec> PoolGrid() {
  std::vector<PoolSpec> specs;
  const struct {
    int64_t kh, kw;
    int sh, sw;
  } windows[] = {{2, 2, 2, 2}, {3, 3, 1, 1}, {3, 2, 2, 3}, {1, 1, 1, 1}, {2, 3, 3, 1}};
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    for (Padding padding : {Padding::kValid, Padding::kSame, Padding::kExplicit}) {
      for (const auto& w : windows) {
        PoolSpec s;
        s.n = 2, s.h = 7, s.w = 9, s.c = 3;
        s.attrs = MakePool(format, padding, w.kh, w.kw, w.sh, w.sw);
        s.name = absl::StrCat(FormatName(format), "_", PaddingName(padding), "_", w.kh, "x", w.kw,
                              "_s", w.sh, "x", w.sw);
        specs.push_back(s);
      }
    }
  }
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const std::string f = FormatName(format);
    // 1x1 images, one channel, batch 1; prime extents; the CNN's 2x2; windows large
    // enough to reduce over an RDom (7x7 SAME, stride 1: 49 taps and 49 windows per
    // element; a global pool).
    specs.push_back({f + "_1x1Image", 1, 1, 1, 1, MakePool(format, Padding::kSame, 3, 3, 2, 2)});
    specs.push_back(
        {f + "_Prime13x11", 1, 13, 11, 5, MakePool(format, Padding::kSame, 3, 3, 2, 2)});
    specs.push_back({f + "_Cnn2x2", 2, 28, 28, 32, MakePool(format, Padding::kValid, 2, 2, 2, 2)});
    specs.push_back({f + "_7x7Stride1", 2, 9, 8, 3, MakePool(format, Padding::kSame, 7, 7, 1, 1)});
    specs.push_back({f + "_Global", 2, 12, 10, 4, MakePool(format, Padding::kValid, 12, 10, 1, 1)});
  }
  return specs;
}

class PoolTest : public ::testing::TestWithParam<PoolSpec> {};

TEST_P(PoolTest, MatchesReferenceUnderTheSafeDefault) {
  Case c;
  BuildPool(c, GetParam(), Random(f32, PoolX(GetParam()), 21));
  EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol));
}

std::string PoolName(const ::testing::TestParamInfo<PoolSpec>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Grid, PoolTest, ::testing::ValuesIn(PoolGrid()), PoolName);

class PoolSchedulerTest : public ::testing::TestWithParam<std::tuple<PoolSpec, Scheduler>> {};

TEST_P(PoolSchedulerTest, MatchesReference) {
  const PoolSpec& s = std::get<0>(GetParam());
  Case c;
  BuildPool(c, s, Random(f32, PoolX(s), 21));
  EXPECT_TRUE(CompileRunCompareLoops(c, std::get<1>(GetParam()), kConvTol));
}

std::vector<PoolSpec> PoolSchedulerSpecs() {
  const std::vector<PoolSpec> grid = PoolGrid();
  return {grid[1], grid[7], grid[17], grid[33]};
}

INSTANTIATE_TEST_SUITE_P(
    Schedulers, PoolSchedulerTest,
    ::testing::Combine(::testing::ValuesIn(PoolSchedulerSpecs()),
                       ::testing::Values(Scheduler::kAdams2019, Scheduler::kMullapudi2016,
                                         Scheduler::kLi2018, Scheduler::kAuto)),
    [](const ::testing::TestParamInfo<std::tuple<PoolSpec, Scheduler>>& info) {
      return std::get<0>(info.param).name + "_" + SchedulerName(std::get<1>(info.param));
    });

// Windows of NaN, infinities, signed zeros and ties: MaxPool propagates NaN and takes
// +0 over -0; MaxPoolGrad routes to the first NaN, else the first maximum (a tie goes
// to the earlier tap, -0 and +0 tie); MaxPoolGradGrad reads there. In f32 and f64.
TEST(PoolSpecialValues, MaxPoolsOfNanInfinitiesAndSignedZeros) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double values[] = {nan, inf, -inf, -0.0, 0.0, 1.0, 1.0, -1.0, 0.5};
  for (DType dtype : {f32, DType::kF64}) {
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
        PoolSpec s{"special", 2, 8, 7, 9, MakePool(format, Padding::kSame, 3, 3, 1, 2)};
        HostTensor x(dtype, PoolX(s));
        std::mt19937 rng(5);
        for (int64_t i = 0; i < x.num_elements(); ++i) {
          const uint32_t r = rng() % 40;
          x.SetDouble(i, r < 9 ? values[r] : (r % 2 ? -0.0 : 0.0));  // mostly zeros: ties
        }
        Case c;
        BuildPool(c, s, x);
        EXPECT_TRUE(CompileRunCompareLoops(c, scheduler, kConvTol))
            << DTypeName(dtype) << " " << FormatName(format) << " under "
            << SchedulerName(scheduler);
      }
    }
  }
}

// An f64 MaxPool whose unrolled window reaches the padding along H and W: Halide 14's
// simplifier dropped the signed maximum when it started at INT64_MIN, and a window
// decoded its unsigned minimum (seed 13100320: 2 of 9 elements wrong, every scheduler).
TEST(PoolSpecialValues, AnF64MaxPoolOfPaddedWindows) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    for (int64_t c_extent : {1, 3}) {
      PoolSpec s{"f64", 1, 1, 5, c_extent, MakePool(format, Padding::kSame, 2, 2, 2, 2)};
      Case c;
      BuildPool(c, s, Random(DType::kF64, PoolX(s), 24));
      EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol))
          << FormatName(format) << " C=" << c_extent;
    }
  }
}

// Windows of multiples of 1/8 that sum to exactly 0, whose terms divided by the count
// (x / 9, x / 25) round in f64: the average is exactly 0, its Sign 0. The reference once
// summed the rounded quotients and left +-2^-56 (braze-fuzz seed 13000167: a Relu's
// gradient of such an AvgPool taken as 1); 3x3 is the unrolled form, 5x5 the RDom's.
TEST(PoolSpecialValues, AvgPoolOfAWindowSummingToZeroIsZero) {
  const std::vector<std::vector<double>> windows = {
      {-0.375, -1.25, 1.875, -1.875, 1.0, 1.375, -2.0, 1.5, -0.25},
      {0.75, -0.25, -0.25, 1.625, 0.25, -1.875, 1.25, -1.25, -0.25},
      {-1.75, -1.0,  0.25,  1.25,  -0.875, -1.125, 0.375, -0.625, -1.25,
       -0.5,  0.875, -1.25, -1.5,  -1.625, -0.375, 1.875, 1.375,  0.5,
       1.625, 1.625, 0.875, 0.375, -0.125, -0.625, 1.625}};
  for (const std::vector<double>& v : windows) {
    const int64_t k = v.size() == 9 ? 3 : 5;
    for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      HostTensor x(f32, MakeShape(format, 1, k, k, 1));  // one channel: row-major either way
      for (int64_t i = 0; i < x.num_elements(); ++i) x.SetDouble(i, v[i]);
      Case c;
      Tensor y = AvgPool(c.Input(x), MakePool(format, Padding::kValid, k, k, 1, 1));
      c.outputs = {y, Sign(y)};
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_EQ((*expected)[1].GetDouble(0), 0) << "the reference's average is not 0";
      EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol))
          << k << "x" << k << " " << FormatName(format);
    }
  }
}

// The gradient of Mean(MaxPoolGrad(x, MaxPool(x))): MaxPoolGradGrad reads the Mean's
// constant gradient at each window's argmax tap, and the inlined constant drops the
// tap, so its argmax stage had no reader once inlined; Halide 14 left its bounds
// undefined: "Symbol not found: MaxPoolGradGrad_51_argmax$1.s1.dim3.min" (braze-fuzz
// seed 13310041, the safe default). The constant is now stored.
TEST(PoolSpecialValues, AnArgMaxReadAtAConstantGradientIsLowered) {
  for (DataFormat format : {DataFormat::kNCHW, DataFormat::kNHWC}) {
    const Pool2DAttrs pool{3, 3, Window2D{2, 1, 1, 1, Padding::kExplicit, 0, 1, 0, 1, format}, {}};
    Case c;
    Tensor x = c.Input(Random(f32, {1, 5, 5, 2}, 61));
    Tensor dx = MaxPoolGrad(x, MaxPool(x, pool), pool);
    Tensor y = Mean(dx, {1, 2, 3}, true);
    absl::StatusOr<std::vector<Tensor>> grads = Gradients({dx, y}, {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    c.outputs = {dx, y, (*grads)[0]};
    EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol)) << FormatName(format);
  }
}

// MaxPoolGradGrad asks whether its gradient varies over H and W, looking through the
// Funcs it reads (lower_pool.cc). A gradient that is a chain of Funcs each reading the
// last twice (g + g, 40 times) is a DAG of 40 nodes but a tree of 2^40. Walked as a tree
// (inlining each call, to a depth of 32), the two lowerings took 12 s, and the broadcast
// gradient was taken to vary (the walk stopped at the depth and saw the probe's vars in
// the call's args): an argmax stage no read needs, the failure of braze-fuzz seed 510.
// Lowered alone, so the test times the walk, not Halide's compile of 40 stages.
TEST(PoolSpecialValues, AGradientOfDeeplySharedFuncsLowersInLinearTime) {
  for (bool varies : {true, false}) {
    const Pool2DAttrs pool = MakePool(DataFormat::kNHWC, Padding::kSame, 3, 3, 2, 2);
    Case c;
    Tensor x = c.Input(Random(f32, {1, 5, 7, 2}, 81));
    Tensor g = varies ? c.Input(Random(f32, {1, 5, 7, 2}, 82))
                      : BroadcastTo(c.Input(Random(f32, {1, 1, 1, 2}, 83)), {1, 5, 7, 2});
    for (int i = 0; i < 40; ++i) g = g + g;
    c.outputs = {MaxPoolGradGrad(x, g, pool)};
    absl::StatusOr<lower::LoweredCluster> lowered = lower::LowerCluster(SpecOf(c), {});
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    // The argmax stage exists exactly when the gradient varies over the window.
    bool argmax = false;
    for (const schedule::Stage& stage : lowered->info.stages) {
      argmax = argmax || stage.acc.name().find("_argmax") != std::string::npos;
    }
    EXPECT_EQ(argmax, varies);
  }
  // Results at a depth Halide compiles quickly (each level doubles: exact in f32).
  for (bool varies : {true, false}) {
    const Pool2DAttrs pool = MakePool(DataFormat::kNHWC, Padding::kSame, 3, 3, 2, 2);
    Case c;
    Tensor x = c.Input(Random(f32, {1, 5, 7, 2}, 84));
    Tensor g = varies ? c.Input(Random(f32, {1, 5, 7, 2}, 85))
                      : BroadcastTo(c.Input(Random(f32, {1, 1, 1, 2}, 86)), {1, 5, 7, 2});
    for (int i = 0; i < 6; ++i) g = g + g;
    c.outputs = {MaxPoolGradGrad(x, g, pool)};
    EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol)) << varies;
  }
}

// A computed operand read in one column of three (a strided depthwise NCHW conv of a
// 3-wide image): the operand is stored whole, so that its vectorized loop does not shift
// inwards past the input's start (braze-fuzz seed 13100574, before: "can never run").
TEST(ConvOperands, AComputedOperandReadInPartIsStoredWhole) {
  Window2D w;
  w.stride_h = w.stride_w = 3;
  w.dilation_h = w.dilation_w = 3;
  w.format = DataFormat::kNCHW;
  Case c;
  Tensor x = c.Input(f32, {2, 5, 1, 3}, 41);
  Tensor f = c.Input(f32, {1, 1, 1, 5}, 42);
  c.outputs = {Relu(Conv2D(Exp(x) * 2.0, f, w))};
  EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol));
}

// A scalar loop over the batch around a convolution's accumulator, updated once per tap:
// Mullapudi2016 vectorized the update over the batch with GuardWithIf, which
// DevectorizeGuardedUpdates makes serial, and LLVM 14's loop vectorizer (which Halide 14
// runs on every loop) unrolled the taps and vectorized the batch loop by 8 with
// interleaved groups, loading each element before the previous tap's store to it: 24 of
// 126 outputs lost taps in images 0-7 (braze-fuzz seed 13200191: a depthwise NCHW conv of
// a 3x1 image, strides 2x1, SAME). Such pipelines compile without LLVM's loop
// optimizations (schedule::FindStridedReadModifyWriteLoop).
TEST(ConvOperands, AnUpdateSerialOverTheBatchKeepsEveryTap) {
  const Window2D w{2, 1, 1, 1, Padding::kSame, 0, 0, 0, 0, DataFormat::kNCHW};
  Case c;
  Tensor x = c.Input(Random(f32, {21, 3, 3, 1}, 71));
  Tensor f = c.Input(Random(f32, {2, 2, 1, 3}, 72));
  c.outputs = {Conv2D(x, f, w)};
  EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kMullapudi2016, kConvTol));
  // The seed's other convolution, the input gradient, at the same geometry.
  Case d;
  Tensor f2 = d.Input(Random(f32, {2, 2, 1, 3}, 73));
  Tensor dy = d.Input(Random(f32, {21, 3, 2, 1}, 74));
  d.outputs = {Conv2DBackpropInput({21, 3, 3, 1}, f2, dy, w)};
  EXPECT_TRUE(CompileRunCompareLoops(d, Scheduler::kMullapudi2016, kConvTol));
}

// An empty batch (a -1 batch fed 0 rows, compiled for its concrete shapes): the filter
// gradient is 0, the conv and the input gradient have no elements. The filter
// gradient's split into partial sums took a divisor of the batch, 0: a division by zero
// killed the process while compiling (braze-fuzz --all_families seed 62600057). Both
// fixes of the day hold: a convolution of an empty operand lowers to zeros (LowerConv,
// which this takes), and Partials no longer divides by a batch of 0.
TEST(ConvOperands, AnEmptyBatchCompiles) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const Window2D w{2, 1, 1, 1, Padding::kSame, 0, 0, 0, 0, format};
    for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kMullapudi2016}) {
      Case c;
      Tensor x = c.Input(Random(f32, MakeShape(format, 0, 8, 5, 3), 81));
      Tensor f = c.Input(Random(f32, {3, 3, 3, 4}, 82));
      Tensor dy = c.Input(Random(f32, MakeShape(format, 0, 4, 5, 4), 83));
      c.outputs = {Conv2DBackpropFilter(x, {3, 3, 3, 4}, dy, w), Conv2D(x, f, w),
                   Conv2DBackpropInput(MakeShape(format, 0, 8, 5, 3), f, dy, w)};
      EXPECT_TRUE(CompileRunCompareLoops(c, scheduler, kConvTol)) << FormatName(format);
    }
  }
}

// A padded window of a conv with an infinite weight: padding taps contribute nothing
// (not 0 * inf = NaN).
TEST(ConvSpecialValues, PaddingTapsIgnoreInfiniteWeights) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    ConvSpec s{"inf", 1, 4, 5, 2, 3, 3, 1, 3, MakeWindow(format, Padding::kSame, 1, 1)};
    Case c;
    Tensor x = c.Input(Random(f32, XShape(s), 31));
    HostTensor fv = Random(f32, FilterShape(s), 32);
    fv.SetDouble(0, std::numeric_limits<double>::infinity());  // tap (0, 0): the padding
    Tensor f = c.Input(fv);
    HostTensor dyv = Random(f32, YShape(s), 33);
    Tensor dy = c.Input(dyv);
    c.outputs = {Conv2D(x, f, s.window), Conv2DBackpropInput(XShape(s), f, dy, s.window)};
    EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol)) << FormatName(format);
  }
}

// NaN in dy beside taps that do not exist: an NCHW input gradient (strides 2, dilations
// 2, SAME, 3 groups) of a 3-wide image, W tiled and vectorized by 2. Halide 14's
// simplifier wrote an update's two lanes [a, b] as ramp(a, b - a), so lane 1 was
// a + (b - a): NaN where lane 0 was NaN and lane 1 0 (braze-fuzz seed 13310072, the safe
// default: 4 of 27 elements NaN). A custom lowering pass writes the lanes back.
TEST(ConvSpecialValues, NanInOneLaneStaysOutOfTheOther) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DataFormat format : {DataFormat::kNCHW, DataFormat::kNHWC}) {
    for (bool computed : {false, true}) {  // dy an input, or computed (stored as an operand)
      ConvSpec s{"nan", 1, 3, 3, 3,
                 3,     3, 3, 6, Window2D{2, 2, 2, 2, Padding::kSame, 0, 0, 0, 0, format}};
      Case c;
      HostTensor dyv = Random(f32, YShape(s), 81);
      for (int64_t k = 0; k < dyv.num_elements(); k += 3) dyv.SetDouble(k, nan);
      Tensor f = c.Input(Random(f32, FilterShape(s), 82));
      Tensor dy = c.Input(dyv);
      if (computed) dy = Tanh(dy);
      c.outputs = {Conv2DBackpropInput(XShape(s), f, dy, s.window)};
      EXPECT_TRUE(CompileRunCompareLoops(c, Scheduler::kSafeDefault, kConvTol))
          << FormatName(format) << (computed ? ", dy computed" : "");
    }
  }
}

// A constant (plus a scalar) as the input of a strided NCHW conv whose output is padded
// on every axis: Adams2019's loops over H are bounded by lets that Halide 14's bounds
// inference does not cancel, so the bounds check of the constant's buffer required
// element 184 of 160 and failed at every run ("Input buffer Const_11_data is accessed
// at 184", braze-fuzz seed 700061). An embedded buffer's shape is now known to the
// lowered check, which rejects such a schedule at compile time like an input's.
TEST(ConvOperands, AConstantReadPastItsEndIsRejectedAtCompileTime) {
  CompileOptions options = HalideLoops();
  options.num_threads = 2;  // Adams2019's schedule depends on it (that of the seed's run)
  Case c;
  Tensor s = c.Input(Random(f32, {}, 91));
  Tensor x = Const(*c.graph, Random(f32, {2, 2, 8, 5}, 92)) + s;
  Tensor f = Const(*c.graph, Random(f32, {5, 5, 2, 4}, 93));
  Tensor y = Conv2D(x, f, Window2D{2, 2, 1, 1, Padding::kSame, 0, 0, 0, 0, DataFormat::kNCHW});
  c.outputs = {Pad(y, {{1, 2}, {0, 2}, {0, 0}, {2, 0}}, 1.951)};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kAdams2019, kConvTol, nullptr, options));
}

// ---- Fused with elementwise ops ----

// Conv -> bias add -> ReLU -> conv -> residual add -> max pool, with a scale before the
// first conv; and the gradients of a conv whose dy is computed (a ReLU mask).
TEST(WindowFusion, ConvBiasReluResidualPool) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    // Not Adams2019: its search over this many 4-D stages took minutes (kAuto gives
    // convolutions the safe default).
    for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kMullapudi2016}) {
      const Window2D same = MakeWindow(format, Padding::kSame, 1, 1);
      Case c;
      const Shape xs = MakeShape(format, 2, 8, 6, 4);
      Tensor x = c.Input(Random(f32, xs, 41));
      Tensor w1 = c.Input(Random(f32, {3, 3, 4, 4}, 42));
      Tensor w2 = c.Input(Random(f32, {3, 3, 4, 4}, 43));
      Tensor bias =
          c.Input(Random(f32, format == DataFormat::kNHWC ? Shape{4} : Shape{4, 1, 1}, 44));
      Tensor h = Relu(Add(Conv2D(Mul(x, x), w1, same), bias));
      Tensor r = Add(Conv2D(h, w2, same), x);
      Pool2DAttrs pool = MakePool(format, Padding::kValid, 2, 2, 2, 2);
      Tensor dy = Relu(c.Input(Random(f32, xs, 45)));
      c.outputs = {MaxPool(r, pool), Conv2DBackpropInput(xs, w2, Mul(dy, h), same),
                   Conv2DBackpropFilter(h, {3, 3, 4, 4}, Sub(dy, r), same)};
      EXPECT_TRUE(CompileRunCompareLoops(c, scheduler, kConvTol))
          << FormatName(format) << " under " << SchedulerName(scheduler);
    }
  }
}

// ---- A symbolic batch ----

// Compiled once with the batch a symbol class (the estimate 16), run at 16, 17 and 40.
// 32x32 images: the filter gradient sums 4 partials (17 is not a multiple).
TEST(WindowSymbolic, ASymbolicBatchRunsAtEverySize) {
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const Window2D same = MakeWindow(format, Padding::kSame, 2, 1);
    Pool2DAttrs pool = MakePool(format, Padding::kSame, 3, 3, 2, 2);
    auto build = [&](Case& c, int64_t n) {
      Tensor x = c.Input(Random(f32, MakeShape(format, n, 32, 32, 3), 51 + n));
      Tensor f = c.Input(Random(f32, {3, 3, 3, 8}, 52));
      Tensor y = Conv2D(Relu(x), f, same);  // a computed operand, stored once
      Tensor dy = c.Input(Random(f32, MakeShape(format, n, 16, 32, 8), 53 + n));  // stride 2 x 1
      c.outputs = {MaxPool(Relu(y), pool), Conv2DBackpropFilter(x, {3, 3, 3, 8}, dy, same),
                   // The batch of a -1 placeholder: taken from dy's.
                   Conv2DBackpropInput(MakeShape(format, -1, 32, 32, 3), f, dy, same),
                   MaxPoolGrad(y, Relu(y), MakePool(format, Padding::kValid, 1, 1, 1, 1))};
    };
    Case c16;
    build(c16, 16);
    ClusterSpec spec = SpecOf(c16);
    spec.input_symbols = {{0, -1, -1, -1}, {}, {0, -1, -1, -1}};
    CompileOptions options = HalideLoops();
    options.scheduler = Scheduler::kSafeDefault;
    auto kernel = CompileCluster(spec, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ((*kernel)->output_types()[0].shape[0], -1) << "the batch is not symbolic";
    for (int64_t n : {16, 17, 40}) {
      Case c;
      build(c, n);
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      auto run = RunKernelLike(**kernel, c.values, *expected);
      ASSERT_TRUE(run.ok()) << FormatName(format) << " at batch " << n << ": " << run.status();
      const std::vector<HostTensor>& outs = *run;
      for (size_t i = 0; i < outs.size(); ++i) {
        std::string why;
        EXPECT_TRUE(AllClose(outs[i], (*expected)[i], kLongSumTol.rtol, kLongSumTol.atol, &why))
            << FormatName(format) << " at batch " << n << ", output " << i << ": " << why;
      }
    }
  }
}

// A symbolic H is refused, naming the node: the cluster is compiled for its concrete
// sizes instead (the log says why).
TEST(WindowSymbolic, ASymbolicImageSizeIsRefusedNamingTheNode) {
  Case c;
  Tensor x = c.Input(Random(f32, {2, 16, 5, 3}, 61));
  Tensor f = c.Input(Random(f32, {3, 3, 3, 4}, 62));
  c.outputs = {Conv2D(x, f, MakeWindow(DataFormat::kNHWC, Padding::kSame, 1, 1))};
  ClusterSpec spec = SpecOf(c);
  spec.input_symbols = {{-1, 0, -1, -1}, {}};
  auto lowered = lower::LowerCluster(spec, {});
  if (lowered.ok()) GTEST_SKIP() << "the shape probe made H concrete";
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kUnimplemented) << lowered.status();
  EXPECT_NE(lowered.status().message().find("Conv2D"), std::string::npos) << lowered.status();
}

// ---- OpenCL (POCL): the GPU heuristic's schedules, run ----

std::vector<OpTestCase> DeviceCases() {
  std::vector<OpTestCase> cases;
  const std::vector<ConvSpec> grid = ConvGrid();
  for (const ConvSpec& s : {grid[0], grid[6], grid[13], grid[17], grid[25], ConvEdges()[0]}) {
    cases.push_back(
        {"Conv_" + s.name, [s](Case& c, const Shape&) { BuildConv(c, s); }, {{1}}, {}, kConvTol});
  }
  for (const ConvSpec& s : ConvEdges()) {
    if (s.name.find("OneTap") == std::string::npos) continue;
    cases.push_back(
        {"Conv_" + s.name, [s](Case& c, const Shape&) { BuildConv(c, s); }, {{1}}, {}, kConvTol});
  }
  const std::vector<PoolSpec> pools = PoolGrid();
  for (const PoolSpec& s : {pools[0], pools[6], pools[17], pools[33], pools[34]}) {
    cases.push_back({"Pool_" + s.name,
                     [s](Case& c, const Shape&) { BuildPool(c, s, Random(f32, PoolX(s), 21)); },
                     {{1}},
                     {},
                     kConvTol});
  }
  // braze-fuzz seed 195 (the safe default on CUDA), which faulted on an H200
  // (CUDA_ERROR_LAUNCH_FAILED): a depthwise NCHW Conv2D (4 groups of 1 channel), SAME with
  // a 2x2 filter (padding after only), of a filter computed from a scalar's Mean, then
  // ReLU, a residual add and a Slice.
  cases.push_back({"Seed195_DepthwiseSame2x2_NCHW",
                   [](Case& c, const Shape&) {
                     Tensor s = c.Input(Random(f32, {}, 195));
                     Tensor x = c.Input(Random(f32, {3, 4, 5, 4}, 196));
                     Tensor f = Const(*c.graph, Random(f32, {2, 2, 1, 4}, 197)) + Mean(s);
                     Tensor y = Conv2D(x, f, MakeWindow(DataFormat::kNCHW, Padding::kSame, 1, 1));
                     Tensor r = Add(Relu(y), x);
                     c.outputs = {Slice(r, {2, 2, 0, 3}, {1, 2, -1, 1}), r};
                   },
                   {{1}},
                   {},
                   kConvTol});
  // braze-fuzz seed 510 (kAuto on CUDA): pool -> ReLU -> pool -> MaxPoolGrad and the
  // gradients of it all, so a MaxPoolGradGrad, on a [1,13,4,4] NHWC image. Every GPU plan
  // failed to compile: a wrapper of the argmax was read outside its loops ("Symbol not
  // found: MaxPoolGradGrad_20_argmax_global_wrapper$0.s0.dim0.max").
  cases.push_back({"Seed510_MaxPoolGradGrad_NHWC",
                   [](Case& c, const Shape&) {
                     Tensor x = c.Input(Random(f32, {1, 13, 4, 4}, 510));
                     Pool2DAttrs p1 = MakePool(DataFormat::kNHWC, Padding::kSame, 3, 3, 2, 2);
                     Pool2DAttrs p2 = MakePool(DataFormat::kNHWC, Padding::kSame, 3, 3, 3, 3);
                     Tensor h = Relu(MaxPool(x, p1));
                     Tensor y = MaxPoolGrad(h, MaxPool(h, p2), p2);
                     absl::StatusOr<std::vector<Tensor>> grads = Gradients({y}, {x});
                     ASSERT_TRUE(grads.ok()) << grads.status();
                     c.outputs = {y, (*grads)[0]};
                   },
                   {{1}},
                   {},
                   kConvTol});
  return cases;
}

class WindowTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(WindowTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, WindowTestOpenCL, ::testing::ValuesIn(DeviceCases()), CaseName);

// CUDA: compiled with the GPU heuristic and assembled with ptxas (no GPU needed), and
// run where there is one.
class WindowTestCuda : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(WindowTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }
TEST_P(WindowTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, WindowTestCuda, ::testing::ValuesIn(DeviceCases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
