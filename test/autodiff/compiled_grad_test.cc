// Gradients are ordinary ops: with auto-clustering they compile into fused clusters and
// give the reference kernels' values.
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

TEST(CompiledGradTest, SoftmaxRegressionGradientsMatchTheReference) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 6}, "x");
  Tensor labels = Placeholder(g, DType::kF32, {-1, 3}, "labels");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {6, 3}, 1, -0.5, 0.5), "w");
  Tensor b = Variable(g, HostTensor::RandomUniform(DType::kF32, {3}, 2, -0.5, 0.5), "b");
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + b, labels));
  auto grads = Gradients({loss}, {w, b});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::vector<Tensor> fetches = {loss, (*grads)[0], (*grads)[1]};

  HostTensor labels_value(DType::kF32, {5, 3});
  for (int r = 0; r < 5; ++r) labels_value.SetDouble(r * 3 + r % 3, 1);
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {5, 6}, 3, -2, 2)},
                       {labels, labels_value}};
  std::vector<HostTensor> want = gradtest::RunReference(g, feeds, fetches);

  SessionOptions options;
  options.global_jit_level = JitLevel::kOn1;
  // Forward and backward matmuls in one cluster: this test is about gradients fusing,
  // not about the one-matmul-per-cluster default.
  options.max_matmuls_per_cluster = 2;
  Session session(g, options);
  absl::StatusOr<std::vector<HostTensor>> got = session.Run(feeds, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < fetches.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*got)[i], want[i], 1e-4, 1e-5, &why)) << fetches[i].name() << why;
  }
  EXPECT_GE(session.stats().cluster_launches, 1) << session.ClusteringDebugString();
  // The gradient ops were clustered, not left to single-op kernels.
  EXPECT_TRUE(session.ClusterOf((*grads)[0]).has_value()) << session.ClusteringDebugString();
}

}  // namespace
}  // namespace braze
