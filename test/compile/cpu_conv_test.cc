// oneDNN's convolution inside Halide pipelines (device/cpu_conv.h): which Conv2D nodes
// call it, the bias and ReLU it takes, and that every call matches the reference
// kernels: both formats, strides, dilations, every padding, groups and depthwise, odd
// and prime extents, computed inputs, a batch of one, NaN kept by the ReLU. Skipped
// (with the reason) where oneDNN is not installed; CI installs it (tools/setup.sh).
#include "device/cpu_conv.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "device/cpu_gemm.h"
#include "gtest/gtest.h"
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
