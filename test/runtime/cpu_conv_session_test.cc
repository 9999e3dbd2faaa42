// Convolutions on oneDNN from a Session (device/cpu_conv.h): a symbolic batch shares one
// kernel, the training step's three convolutions (forward, input and filter gradients)
// match the reference kernels, with the library and with Braze's Halide loops.
#include <gtest/gtest.h>

#include <vector>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/cpu_gemm.h"

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

}  // namespace
}  // namespace braze
