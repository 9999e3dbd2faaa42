// Batch norm folded into the convolution before it at inference (lower/conv_bn_fold.h):
// which clusters fold (LoweredCluster::folds, the schedule text's "// folded" lines), and
// that every folded kernel matches the reference kernels on the unfolded graph, on
// oneDNN's call and on Braze's Halide convolution, f32 and f64, both formats, groups and
// depthwise filters, strides, dilations, every padding, odd and prime extents, with and
// without the ReLU after it. The fold changes rounding (conv(x, f * s) + (b - m * s)
// against (conv(x, f) - m) * s + b), so kernels are compared within tolerances.
#include "lower/conv_bn_fold.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "device/cpu_gemm.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

namespace braze {
namespace lowertest {
namespace {

struct BnCase {
  DataFormat format;
  int64_t n, h, w, c, o, kh, kw;
  int groups;
  Window2D window;
  bool relu;
};

// The inference graph's pieces: y = Conv2D(x, f), BatchNorm(y) (its Relu) = out.
struct Built {
  Case c;
  Tensor conv, out;
};

// Conv2D then BatchNorm over its channels, every input random and none zero: x and the
// filter in [-1, 1), gamma and beta in [0.25, 1.5) with alternating signs from the seed,
// the moving variance in [0.5, 2). `training`: BatchNorm with the batch's statistics.
// `residual`: a ResNet block's shortcut, an input of the output's shape added before
// the Relu.
Built Build(const BnCase& k, DType dtype, uint64_t seed, bool training = false,
            bool residual = false) {
  Built b;
  Window2D w = k.window;
  w.format = k.format;
  const bool nchw = k.format == DataFormat::kNCHW;
  const Shape xs = nchw ? Shape{k.n, k.c, k.h, k.w} : Shape{k.n, k.h, k.w, k.c};
  Tensor x = b.c.Input(dtype, xs, seed);
  Tensor f = b.c.Input(dtype, {k.kh, k.kw, k.c / k.groups, k.o}, seed + 1);
  Tensor gamma =
      b.c.Input(dtype, {k.o}, seed + 2, seed % 2 == 0 ? 0.25 : -1.5, seed % 2 == 0 ? 1.5 : -0.25);
  Tensor beta = b.c.Input(dtype, {k.o}, seed + 3, 0.25, 1.5);
  Tensor mean = b.c.Input(dtype, {k.o}, seed + 4, -1, 1);
  Tensor variance = b.c.Input(dtype, {k.o}, seed + 5, 0.5, 2);
  b.conv = Conv2D(x, f, w);
  BatchNormOutput bn =
      BatchNorm(b.conv, gamma, beta, mean, variance, training, 0.99, 1e-3, nchw ? 1 : -1);
  Tensor y = bn.y;
  if (residual) y = y + b.c.Input(dtype, b.conv.shape(), seed + 6, -2, 2);
  b.out = k.relu ? Relu(y) : y;
  b.c.outputs = {b.out};
  return b;
}

// SpecOf without BatchNorm's moving-statistic updates (training builds AssignSubs of
// placeholders: not cluster ops).
ClusterSpec ComputeSpec(const Case& c) {
  ClusterSpec spec = SpecOf(c);
  std::vector<int> nodes;
  for (int id : spec.nodes) {
    if (OpCategoryOf(c.graph->node(id).op()) != OpCategory::kState) nodes.push_back(id);
  }
  spec.nodes = nodes;
  return spec;
}

// What the lowering folded for `spec` (the library on when `library`).
std::vector<std::string> Folds(const ClusterSpec& spec, bool library) {
  lower::LowerOptions options;
  options.library_gemm_min_work = library && CpuGemmAvailable().ok() ? 1 : -1;
  absl::StatusOr<lower::LoweredCluster> lowered = lower::LowerCluster(spec, options);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  return lowered.ok() ? lowered->folds : std::vector<std::string>{};
}

CompileOptions Options(bool library) {
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  options.cpu_gemm_library = library;
  options.cpu_gemm_min_work = 1;  // every f32 convolution on oneDNN, however small
  return options;
}

// Compiles `spec`, expects `folds` "// folded" lines in its schedule and the reference's
// values within `tol`.
void CompileAndCompare(const Case& c, const ClusterSpec& spec, bool library, size_t folds,
                       Tolerance tol) {
  auto kernel = CompileCluster(spec, Options(library));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string& text = (*kernel)->schedule_text();
  size_t lines = 0;
  for (size_t at = text.find(lower::kFoldNotePrefix); at != std::string::npos;
       at = text.find(lower::kFoldNotePrefix, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, folds) << text;
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[i], (*expected)[i], tol.rtol, tol.atol, &why))
        << "output " << i << why;
  }
}

// f32 sums of up to 72 products of magnitude <= 1, scaled by up to 2: rounding of 1e-5
// absolute; f64 the same at 1e-14.
Tolerance TolFor(DType dtype) {
  return dtype == DType::kF64 ? Tolerance{1e-10, 1e-10} : Tolerance{1e-4, 1e-4};
}

const std::vector<BnCase>& Cases() {
  static const std::vector<BnCase> cases = [] {
    Window2D explicit_pads = Win(Padding::kExplicit, 2, 1, 1, 2);
    explicit_pads.pad_top = 2, explicit_pads.pad_bottom = 0;
    explicit_pads.pad_left = 1, explicit_pads.pad_right = 3;
    return std::vector<BnCase>{
        {DataFormat::kNHWC, 2, 13, 11, 7, 5, 3, 3, 1, Win(Padding::kSame, 1, 1), true},
        {DataFormat::kNHWC, 3, 17, 10, 6, 9, 3, 2, 3, Win(Padding::kValid, 2, 3), false},
        {DataFormat::kNHWC, 1, 9, 9, 8, 8, 3, 3, 8, Win(Padding::kSame, 2, 2), true},  // depthwise
        {DataFormat::kNHWC, 2, 11, 13, 5, 7, 3, 3, 1, Win(Padding::kSame, 1, 1, 2, 2), false},
        {DataFormat::kNHWC, 2, 12, 9, 4, 6, 2, 3, 2, explicit_pads, true},
        {DataFormat::kNCHW, 2, 13, 11, 7, 5, 3, 3, 1, Win(Padding::kSame, 1, 1), true},
        {DataFormat::kNCHW, 1, 10, 7, 6, 4, 1, 1, 2, Win(Padding::kValid, 1, 2), false},
        {DataFormat::kNCHW, 2, 7, 11, 6, 6, 3, 3, 6, Win(Padding::kSame, 1, 2, 2, 1), true},  // dw
        {DataFormat::kNHWC, 1, 1, 1, 1, 1, 1, 1, 1, Win(Padding::kValid, 1, 1), true},
    };
  }();
  return cases;
}

TEST(ConvBnFoldTest, InferenceFoldsAndMatchesTheReference) {
  const bool library = CpuGemmAvailable().ok();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (size_t i = 0; i < Cases().size(); ++i) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " case ", i));
      const BnCase& k = Cases()[i];
      Built b = Build(k, dtype, 100 + 10 * i);
      const ClusterSpec spec = ComputeSpec(b.c);
      const std::vector<std::string> folds = Folds(spec, library);
      ASSERT_EQ(folds.size(), 1u);
      EXPECT_TRUE(absl::StrContains(folds[0], "into the filter and bias of Conv2D")) << folds[0];
      // oneDNN takes the bias and the ReLU (f32 only); Braze's Halide convolution adds
      // the bias and leaves the Relu a node of its own.
      EXPECT_EQ(absl::StrContains(folds[0], "Relu"), library && k.relu && dtype == DType::kF32)
          << folds[0];
      CompileAndCompare(b.c, spec, /*library=*/false, 1, TolFor(dtype));
      if (library && dtype == DType::kF32) {
        CompileAndCompare(b.c, spec, /*library=*/true, 1, TolFor(dtype));
      }
    }
  }
}

// A residual Add after the batch norm (and the Relu after it) goes into oneDNN's call
// with the folded bias, as its binary_add post-op: f32 on the library, where the
// post-op's check confirms the implementation (a 3x3 NHWC convolution always here);
// the same values as the reference whatever took the add.
TEST(ConvBnFoldTest, ResidualAfterTheFoldGoesIntoTheCall) {
  const bool library = CpuGemmAvailable().ok();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (size_t i = 0; i < Cases().size(); ++i) {
      const BnCase& k = Cases()[i];
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " case ", i));
      Built b = Build(k, dtype, 300 + 10 * i, /*training=*/false, /*residual=*/true);
      const ClusterSpec spec = ComputeSpec(b.c);
      const std::vector<std::string> folds = Folds(spec, library);
      ASSERT_EQ(folds.size(), 1u);
      const bool took = absl::StrContains(folds[0], "and the residual Add");
      if (!library || dtype != DType::kF32) EXPECT_FALSE(took) << folds[0];
      if (library && dtype == DType::kF32 && i == 0) EXPECT_TRUE(took) << folds[0];
      // The Relu reads the residual Add: in the call only with it.
      if (!took) EXPECT_FALSE(absl::StrContains(folds[0], "Relu")) << folds[0];
      if (took) EXPECT_EQ(absl::StrContains(folds[0], "Relu"), k.relu) << folds[0];
      CompileAndCompare(b.c, spec, /*library=*/false, 1, TolFor(dtype));
      if (library && dtype == DType::kF32) {
        CompileAndCompare(b.c, spec, /*library=*/true, 1, TolFor(dtype));
      }
    }
  }
}

TEST(ConvBnFoldTest, TrainingDoesNotFold) {
  // Batch statistics read the convolution's output again (its Mean): nothing folds.
  for (const BnCase& k : {Cases()[0], Cases()[5]}) {
    Built b = Build(k, DType::kF32, 7, /*training=*/true);
    const ClusterSpec spec = ComputeSpec(b.c);
    EXPECT_TRUE(Folds(spec, true).empty());
    EXPECT_TRUE(Folds(spec, false).empty());
    CompileAndCompare(b.c, spec, /*library=*/false, 0, TolFor(DType::kF32));
  }
}

TEST(ConvBnFoldTest, AnotherReaderOrAnOutputKeepsTheConvolution) {
  const BnCase& k = Cases()[0];
  {
    SCOPED_TRACE("the convolution is a cluster output (fetched, or read by another step)");
    Built b = Build(k, DType::kF32, 11);
    b.c.outputs = {b.out, b.conv};
    const ClusterSpec spec = ComputeSpec(b.c);
    EXPECT_TRUE(Folds(spec, true).empty());
    CompileAndCompare(b.c, spec, /*library=*/false, 0, TolFor(DType::kF32));
  }
  {
    SCOPED_TRACE("a second reader of the convolution in the cluster");
    Built b = Build(k, DType::kF32, 12);
    b.c.outputs = {b.out + Sum(b.conv)};
    const ClusterSpec spec = ComputeSpec(b.c);
    EXPECT_TRUE(Folds(spec, true).empty());
    CompileAndCompare(b.c, spec, /*library=*/false, 0, TolFor(DType::kF32));
  }
  {
    SCOPED_TRACE("the normalized value (the Mul) is an output too");
    Built b = Build(k, DType::kF32, 13);
    const Tensor mul = b.out.node().input(0).node().input(0);  // Relu(Add(Mul, beta))
    ASSERT_EQ(mul.node().op(), OpKind::kMul);
    b.c.outputs = {b.out, mul};
    const ClusterSpec spec = ComputeSpec(b.c);
    EXPECT_TRUE(Folds(spec, true).empty());
    CompileAndCompare(b.c, spec, /*library=*/false, 0, TolFor(DType::kF32));
  }
}

TEST(ConvBnFoldTest, OnlyPerChannelOperandsFold) {
  // (conv - m) * s + b with a full-sized m is no per-channel affine: not folded, and
  // still right. The same with [1, 1, 1, C] operands folds: the match is on structure.
  Case c;
  Tensor x = c.Input(DType::kF32, {2, 9, 7, 3}, 1);
  Tensor f = c.Input(DType::kF32, {3, 3, 3, 5}, 2);
  Tensor full = c.Input(DType::kF32, {2, 9, 7, 5}, 3);
  Tensor s = c.Input(DType::kF32, {1, 1, 1, 5}, 4, 0.5, 2);
  Tensor b = c.Input(DType::kF32, {5}, 5);
  Tensor conv = Conv2D(x, f, {1, 1}, Padding::kSame);
  c.outputs = {(conv - full) * s + b};
  EXPECT_TRUE(Folds(SpecOf(c), false).empty());
  CompileAndCompare(c, SpecOf(c), false, 0, TolFor(DType::kF32));
  Case d;
  Tensor dx = d.Input(DType::kF32, {2, 9, 7, 3}, 1);
  Tensor df = d.Input(DType::kF32, {3, 3, 3, 5}, 2);
  Tensor dm = d.Input(DType::kF32, {5}, 3);
  Tensor ds = d.Input(DType::kF32, {1, 1, 1, 5}, 4, 0.5, 2);
  Tensor db = d.Input(DType::kF32, {1, 1, 1, 1}, 5);
  d.outputs = {db + ds * (Conv2D(dx, df, {1, 1}, Padding::kSame) - dm)};
  EXPECT_EQ(Folds(SpecOf(d), false).size(), 1u);
  CompileAndCompare(d, SpecOf(d), false, 1, TolFor(DType::kF32));
}

TEST(ConvBnFoldTest, AnIllTypedBatchNormIsAClearError) {
  // A moving mean of the wrong length: the Sub's shape inference fails, nothing is
  // folded, and the lowering names the node.
  Case c;
  Tensor x = c.Input(DType::kF32, {1, 6, 6, 2}, 1);
  Tensor f = c.Input(DType::kF32, {3, 3, 2, 4}, 2);
  Tensor one = c.Input(DType::kF32, {4}, 3, 0.5, 1);
  Tensor bad_mean = c.Input(DType::kF32, {3}, 4);
  Tensor y = BatchNorm(Conv2D(x, f, {1, 1}, Padding::kSame), one, one, bad_mean, one, false).y;
  c.outputs = {y};
  ASSERT_FALSE(c.graph->status().ok());
  const ClusterSpec spec = SpecOf(c);
  EXPECT_TRUE(lower::FindConvBnFolds(spec).empty());
  absl::StatusOr<lower::LoweredCluster> lowered = lower::LowerCluster(spec, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_TRUE(absl::StrContains(lowered.status().message(), "BatchNorm")) << lowered.status();
  EXPECT_TRUE(
      absl::StrContains(lowered.status().message(), std::string(c.graph->status().message())))
      << lowered.status() << " vs " << c.graph->status();
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
