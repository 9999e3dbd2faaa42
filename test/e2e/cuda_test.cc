// Runs on a CUDA device: skipped (cleanly, with the reason) where CheckCudaAvailable
// fails, as on the build machines and in CI; required to pass where a GPU exists.
// Every compiled result is compared with the reference kernels on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "braze/braze.h"
#include "common/softmax_training.h"
#include "device/cublas_gemm.h"

namespace braze {
namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CheckCudaAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  }
};

// Runs `fetches` on cuda:0 (strict: a kernel that fails to compile fails the test) and
// compares with the reference executor.
SessionStats ExpectCudaMatchesReference(
    const Graph& g, const Feeds& feeds, const std::vector<Tensor>& fetches,
    SessionOptions::CudaMatMul matmul = SessionOptions::CudaMatMul::kCublas) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  Session ref(g, ref_opts);
  auto want = ref.Run(feeds, fetches);
  EXPECT_TRUE(want.ok()) << want.status();
  SessionOptions opts;
  opts.device = "cuda:0";
  opts.global_jit_level = JitLevel::kOn1;
  opts.min_cluster_size = 1;
  opts.strict = true;
  opts.cuda_matmul = matmul;
  Session s(g, opts);
  auto got = s.Run(feeds, fetches);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok() || !want.ok()) return s.stats();
  for (size_t i = 0; i < fetches.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 1e-4, 1e-4, &why))
        << fetches[i].name() << ": " << why;
  }
  return s.stats();
}

HostTensor Random(Shape shape, uint64_t seed) {
  return HostTensor::RandomUniform(DType::kF32, std::move(shape), seed);
}

TEST_F(Cuda, ElementwiseChainIsOneKernelWithCopiesOnlyAtTheEdges) {
  for (Shape shape : {Shape{1}, Shape{7, 3}, Shape{17, 33, 65}, Shape{1000, 1001}}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, shape, "x");
    Tensor y = Tanh(Exp(x) * 0.5 + 1.0) - Sigmoid(x) * x;
    Feeds feeds = {{x, Random(shape, 1)}};
    SessionStats st = ExpectCudaMatchesReference(g, feeds, {y});
    EXPECT_EQ(st.cluster_launches, 1);
    EXPECT_EQ(st.host_to_device_copies, 1);
    EXPECT_EQ(st.device_to_host_copies, 1);
  }
}

TEST_F(Cuda, RowReductionsAndComposites) {
  for (Shape shape : {Shape{1, 1}, Shape{5, 7}, Shape{33, 1000}, Shape{3, 17, 129}}) {
    Graph g;
    const int64_t cols = shape.back();
    Tensor x = Placeholder(g, DType::kF32, shape, "x");
    Tensor gamma = Const(g, Random({cols}, 2), "gamma");
    Tensor beta = Const(g, Random({cols}, 3), "beta");
    Tensor labels = Softmax(Placeholder(g, DType::kF32, shape, "labels_logits"));
    std::vector<Tensor> fetches = {
        Softmax(x), LogSoftmax(x), LayerNorm(x, gamma, beta),
        Gelu(x),    Sum(x, {-1}),  Mean(x, {0}),
        Max(x),     ArgMax(x, -1), SoftmaxCrossEntropyWithLogits(x, labels)};
    Feeds feeds = {{x, Random(shape, 4)},
                   {g.FindTensor("labels_logits").value(), Random(shape, 5)}};
    ExpectCudaMatchesReference(g, feeds, fetches);
  }
}

TEST_F(Cuda, MatMulsThroughCublasAndHalideMatchReference) {
  for (auto matmul : {SessionOptions::CudaMatMul::kCublas, SessionOptions::CudaMatMul::kHalide}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {33, 65}, "x");
    Tensor w = Const(g, Random({65, 17}, 6), "w");
    Tensor b = Const(g, Random({17}, 7), "b");
    // GEMM + bias epilogue, then the Relu as a Halide kernel (cuda_relu_epilogue is off).
    Tensor dense = Dense(x, w, b, Activation::kRelu);
    // Both transpose flags, one operand made by a Transpose kernel: (x^T)^T (x)^T = x x^T,
    // [33, 33]. This was MatMul(x, Transpose(x), false, true), [33,65] x [65,33]^T, whose
    // inner dimensions differ (65 vs 33): the H200 refused it at shape inference.
    Tensor t = MatMul(Transpose(x, {1, 0}), x, true, true) * 0.1;
    Tensor a3 = Reshape(x, {3, 11, 65});
    Tensor batched = BatchMatMul(a3, a3, false, true);
    Feeds feeds = {{x, Random({33, 65}, 8)}};
    SessionStats st = ExpectCudaMatchesReference(g, feeds, {dense, t, batched}, matmul);
    if (matmul == SessionOptions::CudaMatMul::kCublas && CublasAvailable().ok()) {
      // One per GEMM step (Executor::RunGemm): dense's MatMul+Add, t's MatMul, and the
      // batched product, one strided-batched cuBLASLt call for all 3 batch entries.
      EXPECT_EQ(st.gemm_launches, 3);
    } else {
      EXPECT_EQ(st.gemm_launches, 0);
    }
  }
}

// cuda_relu_epilogue folds a Relu after the bias into cuBLASLt's epilogue (RELU_BIAS);
// by default only the bias is folded and the Relu is a Halide kernel. It is opt-in
// because cuBLASLt does not document what its ReLU does with NaN, while braze::Relu
// keeps NaN. It was assumed to be max(x, 0), mapping NaN to 0, but on an H200 (CUDA 13,
// cuBLASLt 13) the folded epilogue left the NaN row NaN; so the folded NaN row may be
// NaN or 0, and the other rows must match the reference (negative pre-activations
// clamped: the ReLU did run). Unfolded, the NaN row must stay NaN: that depends on
// Halide 14's PTX backend, which compiles every kernel with LLVM's NoNaNsFPMath (and
// UnsafeFPMath), keeping Relu's strict_float(select(v < 0, 0, v)) rather than making it
// max.f32 (which returns 0 for NaN); it held on the H200.
// w and b are fed, not Consts: with min_cluster_size 1 a Const whose only consumer is
// the GEMM becomes a one-op cluster of its own, launched every Run (the H200 counted 3
// cluster launches unfolded, 2 folded), which is not the Relu kernel counted here.
TEST_F(Cuda, ReluEpilogueIsOptIn) {
  if (absl::Status s = CublasAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 8}, "x");
  Tensor w = Placeholder(g, DType::kF32, {8, 16}, "w");
  Tensor b = Placeholder(g, DType::kF32, {16}, "b");
  Tensor y = Relu(MatMul(x, w) + b);
  HostTensor xv = Random({4, 8}, 13);
  xv.SetDouble(2 * 8 + 5, std::nan(""));  // row 2 of the product is NaN
  const Feeds feeds = {{x, xv}, {w, Random({8, 16}, 11)}, {b, Random({16}, 12)}};
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  Session ref(g, ref_opts);
  auto want = ref.Run(feeds, {y});
  ASSERT_TRUE(want.ok()) << want.status();
  int clamped = 0;  // finite rows' zeros: without any, a missing ReLU would go unseen
  for (int i = 0; i < 4 * 16; ++i) clamped += i / 16 != 2 && (*want)[0].GetDouble(i) == 0.0;
  ASSERT_GT(clamped, 0);
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold ? "folded" : "not folded");
    SessionOptions opts;
    opts.device = "cuda:0";
    opts.global_jit_level = JitLevel::kOn1;
    opts.min_cluster_size = 1;
    opts.strict = true;
    opts.cuda_relu_epilogue = fold;
    Session s(g, opts);
    auto got = s.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(s.stats().gemm_launches, 1);
    EXPECT_EQ(s.stats().cluster_launches, fold ? 0 : 1) << "the Relu kernel";
    for (int i = 0; i < 4 * 16; ++i) {
      const double v = (*got)[0].GetDouble(i), r = (*want)[0].GetDouble(i);
      if (i / 16 != 2) {
        EXPECT_NEAR(v, r, 1e-4 + 1e-4 * std::fabs(r)) << i;
      } else if (fold) {
        EXPECT_TRUE(std::isnan(v) || v == 0.0) << i << ": " << v;
      } else {
        EXPECT_TRUE(std::isnan(v)) << i << ": " << v;
      }
    }
  }
}

// bf16 and f16 MatMuls on cuBLASLt (CUDA_R_16BF / CUDA_R_16F, FP32 accumulation) with the
// bias and ReLU epilogue, transposed operands and a batch, against the reference kernels
// within one ulp of the type plus the f32 accumulation order (the reference rounds the
// product, then the sum: one more rounding), and the same graph as Halide kernels.
TEST_F(Cuda, SixteenBitMatMulsThroughCublasMatchReference) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const double ulp = dtype == DType::kBF16 ? 0x1p-7 : 0x1p-10;
    Graph g;
    Tensor x = Placeholder(g, dtype, {33, 65}, "x");
    Tensor w = Placeholder(g, dtype, {17, 65}, "w");
    Tensor b = Placeholder(g, dtype, {17}, "b");
    Tensor dense = Relu(MatMul(x, w, false, true) + b);
    Tensor t = MatMul(x, x, true, false);  // [65, 65], k = 33
    Tensor a3 = Reshape(x, {3, 11, 65});
    Tensor batched = BatchMatMul(a3, a3, false, true);
    const Feeds feeds = {{x, HostTensor::RandomUniform(dtype, {33, 65}, 21)},
                         {w, HostTensor::RandomUniform(dtype, {17, 65}, 22)},
                         {b, HostTensor::RandomUniform(dtype, {17}, 23)}};
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    Session ref(g, ref_opts);
    auto want = ref.Run(feeds, {dense, t, batched});
    ASSERT_TRUE(want.ok()) << want.status();
    for (auto matmul : {SessionOptions::CudaMatMul::kCublas, SessionOptions::CudaMatMul::kHalide}) {
      for (bool fold_relu : {false, true}) {
        SCOPED_TRACE(matmul == SessionOptions::CudaMatMul::kCublas ? "cuBLASLt" : "Halide");
        SCOPED_TRACE(fold_relu ? "relu folded" : "relu a kernel");
        SessionOptions opts;
        opts.device = "cuda:0";
        opts.global_jit_level = JitLevel::kOn1;
        opts.min_cluster_size = 1;
        opts.strict = true;
        opts.cuda_matmul = matmul;
        opts.cuda_relu_epilogue = fold_relu;
        Session s(g, opts);
        auto got = s.Run(feeds, {dense, t, batched});
        ASSERT_TRUE(got.ok()) << got.status();
        for (size_t i = 0; i < got->size(); ++i) {
          EXPECT_EQ((*got)[i].dtype(), dtype);
          std::string why;
          // |a b| < 16 here (sums of at most 65 products of values in [-1, 1), 6 sigma):
          // the reference's rounding of the product before the bias Add is worth half an
          // ulp there, 4 ulps of 1; the f32 accumulation order k * 2^-23 * 65 < 1e-3; and
          // one ulp of the result, twice for room.
          EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 2 * ulp, 4 * ulp + 1e-3, &why))
              << i << ": " << why;
        }
        const bool cublas = matmul == SessionOptions::CudaMatMul::kCublas;
        EXPECT_EQ(s.stats().gemm_launches, cublas ? 3 : 0);
      }
    }
  }
}

// The mixed-precision policy's MLP training step (braze/precision.h: f32 masters, bf16
// or f16 matmuls) on cuda:0: its five MatMuls (two forward with their bias, three
// backward) run on cuBLASLt, and the losses and updated variables match the reference
// kernels' within the policy test's tolerances (test/autodiff/mixed_precision_test.cc).
TEST_F(Cuda, PrecisionPolicyMlpStepRunsItsMatMulsOnCublas) {
  if (absl::Status s = CublasAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  for (auto [dtype, tol] : {std::pair{DType::kBF16, 3e-2}, std::pair{DType::kF16, 5e-3}}) {
    SCOPED_TRACE(DTypeName(dtype));
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {7, 13}, "x");
    Tensor labels = Placeholder(g, DType::kF32, {7, 5}, "labels");
    std::vector<Tensor> vars = {
        Variable(g, HostTensor::RandomNormal(DType::kF32, {13, 17}, 11, 0, 0.4), "w1"),
        Variable(g, HostTensor::RandomUniform(DType::kF32, {17}, 12, -0.1, 0.1), "b1"),
        Variable(g, HostTensor::RandomNormal(DType::kF32, {17, 5}, 13, 0, 0.4), "w2"),
        Variable(g, HostTensor::RandomUniform(DType::kF32, {5}, 14, -0.1, 0.1), "b2")};
    Tensor loss;
    std::vector<Tensor> train;
    {
      JitScope jit(g);
      PrecisionScope policy(g, dtype);
      Tensor logits = Dense(Dense(x, vars[0], vars[1], Activation::kRelu), vars[2], vars[3]);
      loss = Mean(SoftmaxCrossEntropyWithLogits(logits, labels));
      auto t = Minimize(Optimizer::Sgd(0.2), loss, vars);
      ASSERT_TRUE(t.ok()) << t.status();
      train = *t;
    }
    HostTensor ys(DType::kF32, {7, 5});
    for (int i = 0; i < 7; ++i) ys.SetDouble(i * 5 + (i * 3) % 5, 1.0);
    SessionOptions on_gpu;
    on_gpu.device = "cuda:0";
    on_gpu.strict = true;
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    Session gpu(g, on_gpu), ref(g, ref_opts);
    for (int step = 0; step < 2; ++step) {
      const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 13}, 30 + step)},
                           {labels, ys}};
      auto got = gpu.Run(feeds, {loss}, train);
      auto want = ref.Run(feeds, {loss}, train);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      const double l = (*want)[0].GetDouble(0);
      EXPECT_NEAR((*got)[0].GetDouble(0), l, tol * (1 + std::abs(l))) << "step " << step;
    }
    EXPECT_EQ(gpu.stats().gemm_launches, 2 * 5);
    for (const Tensor& v : vars) {
      std::string why;
      EXPECT_TRUE(AllClose(*gpu.VariableValue(v), *ref.VariableValue(v), tol, tol, &why))
          << v.name() << ": " << why;
    }
  }
}

TEST_F(Cuda, SoftmaxTrainingLossCurveMatchesTheCpu) {
  const int kSteps = 30;
  testing_util::Trained cpu = testing_util::TrainSoftmax("cpu", kSteps);
  testing_util::Trained gpu = testing_util::TrainSoftmax("cuda:0", kSteps);
  ASSERT_EQ(gpu.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-4) << "step " << i;
  EXPECT_LT(gpu.losses.back(), 0.7 * gpu.losses.front());
  std::string why;
  EXPECT_TRUE(AllClose(gpu.w, cpu.w, 1e-3, 1e-4, &why)) << why;
  // Per step two feeds go on and the loss comes off; the variables went on once.
  EXPECT_EQ(gpu.stats.device_to_host_copies, kSteps + 1);
  EXPECT_LE(gpu.stats.host_to_device_copies, 2 * kSteps + 12);
}

TEST_F(Cuda, JitCudaDeviceForcesCompilation) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {9, 4}, "x");
  Tensor y;
  {
    JitScope off(g, false);
    DeviceScope on(g, "jit:cuda:0");
    y = Exp(x) + 1.0;
  }
  Session s(g);
  Feeds feeds = {{x, Random({9, 4}, 9)}};
  auto out = s.Run(feeds, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(s.stats().cluster_launches, 1);
  EXPECT_EQ(s.stats().host_to_device_copies, 1);
  EXPECT_EQ(s.stats().device_to_host_copies, 1);
}

}  // namespace
}  // namespace braze
