// Runs on a CUDA device: skipped (cleanly, with the reason) where CheckCudaAvailable
// fails, as on the build machines and in CI; required to pass where a GPU exists.
// Every compiled result is compared with the reference kernels on random inputs.
#include <gtest/gtest.h>

#include <cmath>

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
    Tensor dense = Dense(x, w, b, Activation::kRelu);               // GEMM + bias + ReLU epilogue
    Tensor t = MatMul(x, Transpose(x, {1, 0}), false, true) * 0.1;  // transposes
    Tensor a3 = Reshape(x, {3, 11, 65});
    Tensor batched = BatchMatMul(a3, a3, false, true);
    Feeds feeds = {{x, Random({33, 65}, 8)}};
    SessionStats st = ExpectCudaMatchesReference(g, feeds, {dense, t, batched}, matmul);
    if (matmul == SessionOptions::CudaMatMul::kCublas && CublasAvailable().ok()) {
      EXPECT_EQ(st.gemm_launches, 3);
    } else {
      EXPECT_EQ(st.gemm_launches, 0);
    }
  }
}

// cuBLASLt's ReLU epilogue is max(x, 0): NaN becomes 0. By default only the bias is
// folded, so a NaN pre-activation stays NaN as in the reference; with
// cuda_relu_epilogue the ReLU is folded too and the NaN row reads 0.
TEST_F(Cuda, ReluEpilogueIsOptInBecauseItMapsNanToZero) {
  if (absl::Status s = CublasAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 8}, "x");
  Tensor w = Const(g, Random({8, 16}, 11), "w");
  Tensor b = Const(g, Random({16}, 12), "b");
  Tensor y = Relu(MatMul(x, w) + b);
  HostTensor xv = Random({4, 8}, 13);
  xv.SetDouble(2 * 8 + 5, std::nan(""));  // row 2 of the product is NaN
  for (bool fold : {false, true}) {
    SessionOptions opts;
    opts.device = "cuda:0";
    opts.global_jit_level = JitLevel::kOn1;
    opts.min_cluster_size = 1;
    opts.strict = true;
    opts.cuda_relu_epilogue = fold;
    Session s(g, opts);
    auto got = s.Run({{x, xv}}, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(s.stats().gemm_launches, 1);
    EXPECT_EQ(s.stats().cluster_launches, fold ? 0 : 1) << "the Relu kernel";
    for (int j = 0; j < 16; ++j) {
      const double v = (*got)[0].GetDouble(2 * 16 + j);
      if (fold) {
        EXPECT_EQ(v, 0.0) << j;
      } else {
        EXPECT_TRUE(std::isnan(v)) << j << ": " << v;
      }
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
