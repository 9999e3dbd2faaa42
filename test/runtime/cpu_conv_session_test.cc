// Convolutions on oneDNN from a Session (device/cpu_conv.h): a symbolic batch shares one
// kernel, the training step's three convolutions (forward, input and filter gradients)
// match the reference kernels, with the library and with Braze's Halide loops; batch
// norm folds into the convolution in an inference step only (lower/conv_bn_fold.h); a
// residual add goes into the call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/cpu_conv.h"
#include "device/cpu_gemm.h"
#include "runtime/flags.h"

namespace braze {
namespace {

TEST(CpuConvSessionTest, SymbolicBatchTrainingGradientsMatchTheReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 18, 18, 8}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 3, 8, 16}, 1), "w");
  Tensor bias = Const(g, HostTensor::RandomUniform(DType::kF32, {16}, 2), "bias");
  std::vector<Tensor> fetches;
  {
    JitScope scope(g);
    Tensor y = Relu(Conv2D(x, w, {1, 1}, Padding::kSame) + bias);
    Tensor loss = Mean(Square(y));
    auto grads = Gradients({loss}, {x, w});
    ASSERT_TRUE(grads.ok()) << grads.status();
    fetches = {y, (*grads)[0], (*grads)[1]};
  }
  for (auto matmul : {SessionOptions::CpuMatMul::kLibrary, SessionOptions::CpuMatMul::kHalide}) {
    SessionOptions options;
    options.cpu_matmul = matmul;
    Session session(g, options);
    for (int64_t batch : {20, 17, 3, 20}) {
      SCOPED_TRACE(batch);
      const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {batch, 18, 18, 8}, batch)}};
      auto got = session.Run(feeds, fetches);
      ASSERT_TRUE(got.ok()) << got.status();
      testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
    }
  }
}

// The --log_compiles lines that say a batch norm was folded, for one Run of a fresh
// Session, whose fetches must match the reference's.
int FoldLines(const Graph& g, const Feeds& feeds, const std::vector<Tensor>& fetches,
              const std::vector<Tensor>& targets = {}) {
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
  Session session(g);
  auto got = session.Run(feeds, fetches, targets);
  SetLogSink(nullptr);
  SetBrazeFlagsForTesting(BrazeFlags{});
  EXPECT_TRUE(got.ok()) << got.status();
  if (got.ok() && targets.empty()) testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
  int folds = 0;
  for (const std::string& line : infos)
    folds += line.find("batch norm folded") != std::string::npos;
  return folds;
}

TEST(CpuConvSessionTest, BatchNormFoldsIntoTheConvolutionAtInferenceOnly) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 15, 13, 6}, "x");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {3, 3, 6, 10}, 1), "w");
  auto var = [&](uint64_t seed, double lo, double hi, const char* name) {
    return Variable(g, HostTensor::RandomUniform(DType::kF32, {10}, seed, lo, hi), name);
  };
  Tensor gamma = var(2, 0.5, 1.5, "gamma"), beta = var(3, -1, 1, "beta");
  Tensor mean = var(4, -1, 1, "mean"), variance = var(5, 0.5, 2, "variance");
  Tensor conv, inference, training;
  std::vector<Tensor> updates;
  {
    JitScope scope(g);
    conv = Conv2D(x, w, {1, 1}, Padding::kSame);
    inference = Relu(BatchNorm(conv, gamma, beta, mean, variance, false).y);
    BatchNormOutput bn = BatchNorm(conv, gamma, beta, mean, variance, true);
    training = Relu(bn.y);
    updates = bn.updates;
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 15, 13, 6}, 6)}};
  EXPECT_EQ(FoldLines(g, feeds, {inference}), 1);
  // Fetched, the convolution is needed as it is: no fold.
  EXPECT_EQ(FoldLines(g, feeds, {inference, conv}), 0);
  // Training: the batch statistics read the convolution again.
  EXPECT_EQ(FoldLines(g, feeds, {training}), 0);
  EXPECT_EQ(FoldLines(g, feeds, {training}, updates), 0);
}

// A ResNet-style residual (the block's input added after the convolution and its bias,
// then the ReLU): one oneDNN call with the add as its binary_add post-op, which
// --log_compiles says, over a symbolic batch; the step's gradients match the reference.
TEST(CpuConvSessionTest, ResidualAddGoesIntoTheCallOverASymbolicBatch) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 18, 18, 16}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {3, 3, 16, 16}, 3), "w");
  Tensor bias = Const(g, HostTensor::RandomUniform(DType::kF32, {16}, 4), "bias");
  Tensor y;
  {
    JitScope scope(g);
    y = Relu(Conv2D(x, w, {1, 1}, Padding::kSame) + bias + x);
  }
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
  Session session(g);
  for (int64_t batch : {20, 17, 20}) {
    SCOPED_TRACE(batch);
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {batch, 18, 18, 16}, batch)}};
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
  }
  SetLogSink(nullptr);
  SetBrazeFlagsForTesting(BrazeFlags{});
  int compiles = 0, residual_lines = 0;
  for (const std::string& line : infos) {
    compiles += line.find("compile: ") != std::string::npos;
    residual_lines += line.find("with the residual add in the call") != std::string::npos;
  }
  EXPECT_GE(compiles, 1);
  EXPECT_EQ(residual_lines, compiles);
}

// Inference weights are reordered into oneDNN's layout once, not at every run: a
// constant filter, and a batch norm folded into a variable filter (recomputed by the
// kernel at every run, to the same bits). Assigning the variable reorders once more.
// Every run against the reference kernels; 64 channels: the Winograd forward with its
// bias and ReLU in the call (device/onednn_conv.cc) where oneDNN has it.
TEST(CpuConvSessionTest, InferenceFiltersAreReorderedOncePerContents) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  auto uniform = [](Shape shape, uint64_t seed, double lo, double hi) {
    return HostTensor::RandomUniform(DType::kF32, std::move(shape), seed, lo, hi);
  };
  Tensor x = Placeholder(g, DType::kF32, {-1, 9, 11, 64}, "x");
  Tensor w = Const(g, uniform({3, 3, 64, 64}, 11, -0.1, 0.1), "w");
  Tensor bias = Const(g, uniform({64}, 12, -1, 0.5), "bias");
  Tensor v = Variable(g, uniform({3, 3, 64, 64}, 13, -0.1, 0.1), "v");
  Tensor gamma = Variable(g, uniform({64}, 14, 0.5, 1.5), "gamma");
  Tensor beta = Variable(g, uniform({64}, 15, -1, 1), "beta");
  Tensor mean = Variable(g, uniform({64}, 16, -1, 1), "mean");
  Tensor variance = Variable(g, uniform({64}, 17, 0.5, 2), "variance");
  Tensor folded;
  {
    JitScope scope(g);
    Tensor y = Relu(Conv2D(x, w, {1, 1}, Padding::kSame) + bias);
    folded =
        Relu(BatchNorm(Conv2D(y, v, {1, 1}, Padding::kSame), gamma, beta, mean, variance, false).y);
  }
  Session session(g);
  SessionOptions reference_only;
  reference_only.reference_only = true;
  Session reference(g, reference_only);  // assigned v as the session is
  auto run = [&](uint64_t seed) -> int64_t {
    SCOPED_TRACE(seed);
    const int64_t before = CpuConvFilterReorders();
    const Feeds feeds = {{x, uniform({3, 9, 11, 64}, seed, -1, 1)}};
    auto got = session.Run(feeds, {folded});
    auto want = reference.Run(feeds, {folded});
    EXPECT_TRUE(got.ok() && want.ok());
    if (!got.ok() || !want.ok()) return -1;
    // Two stacked 576-term sums, Winograd's rounding: the benchmarks' f32 tolerances.
    std::string why;
    EXPECT_TRUE(AllClose((*got)[0], (*want)[0], 1e-3, 1e-4, &why)) << why;
    return CpuConvFilterReorders() - before;
  };
  // The first run's reorders: one per convolution, and those of the post-ops' checks
  // once per process (device/onednn_conv.cc) where no test ran them before.
  EXPECT_GE(run(21), 2);
  EXPECT_EQ(run(22), 0);
  EXPECT_EQ(run(23), 0);
  const HostTensor v2 = uniform({3, 3, 64, 64}, 24, -0.1, 0.1);
  ASSERT_TRUE(session.AssignVariable(v, v2).ok());
  ASSERT_TRUE(reference.AssignVariable(v, v2).ok());
  // oneDNN's x86 convolutions of 64 channels read a blocked filter: one reorder, v's.
  EXPECT_EQ(run(25), 1);
  EXPECT_EQ(run(26), 0);
}

}  // namespace
}  // namespace braze
