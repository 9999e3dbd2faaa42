// Gradients of the sequence ops against f64 central finite differences: Sin, Cos,
// Gather along each axis (repeated and out-of-range ids), UnsortedSegmentSum, a
// gradient's gradient (Gather and UnsortedSegmentSum are each other's, so the pair is
// closed), Iota (positions carry none); and an embedding's training gradients compiled
// into clusters with the reference kernels' values.
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::CheckGradients;
using gradtest::GradCheckOptions;
using gradtest::RunReference;

const DType f64 = DType::kF64;

// Ids in [-2, n + 2): repeats and out-of-range ids at both ends.
HostTensor Ids(const Shape& shape, int64_t n, uint64_t seed) {
  return HostTensor::RandomUniform(DType::kI32, shape, seed, -2, static_cast<double>(n + 2));
}

TEST(SequenceGradTest, SinAndCos) {
  Graph g;
  Tensor x = Placeholder(g, f64, {3, 5}, "x");
  const HostTensor v = HostTensor::RandomUniform(f64, {3, 5}, 1, -7, 7);
  EXPECT_TRUE(CheckGradients(Sin(x), {{x, v}}));
  EXPECT_TRUE(CheckGradients(Cos(x), {{x, v}}));
  EXPECT_TRUE(CheckGradients(Sin(Cos(x) * 3.0), {{x, v}}));
}

TEST(SequenceGradTest, GatherAlongEachAxis) {
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    Graph g;
    const Shape shape = {3, 7, 2};
    Tensor table = Placeholder(g, f64, shape, "table");
    Tensor ids = Placeholder(g, DType::kI32, {2, 5}, "ids");
    GradCheckOptions opt;
    opt.extra_feeds = {{ids, Ids({2, 5}, shape[axis], 2 + axis)}};
    Tensor y = Gather(table, ids, axis);
    EXPECT_TRUE(CheckGradients(Tanh(y), {{table, HostTensor::RandomUniform(f64, shape, 3)}}, opt));
  }
}

TEST(SequenceGradTest, GatherOfOneIdAndRepeatedIds) {
  Graph g;
  Tensor table = Placeholder(g, f64, {5, 3}, "table");
  Tensor one = Placeholder(g, DType::kI32, {}, "one");
  Tensor same = Placeholder(g, DType::kI32, {4}, "same");
  GradCheckOptions opt;
  opt.extra_feeds = {{one, HostTensor::Scalar<int32_t>(4)},
                     {same, HostTensor::Vector<int32_t>({2, 2, 2, -1})}};
  Tensor y = Concat({Reshape(Gather(table, one), {1, 3}), Gather(table, same)}, 0);
  EXPECT_TRUE(CheckGradients(Square(y), {{table, HostTensor::RandomUniform(f64, {5, 3}, 4)}}, opt));
}

TEST(SequenceGradTest, UnsortedSegmentSum) {
  for (int axis = 0; axis < 2; ++axis) {
    SCOPED_TRACE(axis);
    Graph g;
    const Shape shape = {4, 6, 3};
    Tensor data = Placeholder(g, f64, shape, "data");
    Tensor ids = Placeholder(g, DType::kI32, {shape[axis], shape[axis + 1]}, "ids");
    GradCheckOptions opt;
    opt.extra_feeds = {{ids, Ids({shape[axis], shape[axis + 1]}, 5, 5 + axis)}};
    Tensor y = UnsortedSegmentSum(data, ids, 5, axis);
    EXPECT_TRUE(CheckGradients(Sin(y), {{data, HostTensor::RandomUniform(f64, shape, 6)}}, opt));
  }
}

// d/dtable of sum(Gather(table)^2) is a segment sum; its own gradient goes back through
// a Gather: checked against finite differences of the first gradient.
TEST(SequenceGradTest, TheGradientsGradient) {
  Graph g;
  Tensor table = Placeholder(g, f64, {7, 4}, "table");
  Tensor ids = Placeholder(g, DType::kI32, {3, 5}, "ids");
  Tensor e = Gather(table, ids);
  Tensor y = Sum(Square(e) * Sin(e));
  auto dtable = Gradients({y}, {table});
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  EXPECT_EQ((*dtable)[0].node().op(), OpKind::kUnsortedSegmentSum);
  GradCheckOptions opt;
  opt.extra_feeds = {{ids, Ids({3, 5}, 7, 7)}};
  opt.tolerance = 1e-5;
  EXPECT_TRUE(
      CheckGradients((*dtable)[0], {{table, HostTensor::RandomUniform(f64, {7, 4}, 8)}}, opt));
}

// Positions are constant in `like`'s values: x * pos has the gradient pos.
TEST(SequenceGradTest, IotaCarriesNoGradient) {
  Graph g;
  Tensor x = Placeholder(g, f64, {4, 3}, "x");
  Tensor y = x * Reshape(Iota(x, 0, f64), {-1, 1}) + Sin(Iota(x, 1, f64));
  EXPECT_TRUE(CheckGradients(y, {{x, HostTensor::RandomUniform(f64, {4, 3}, 9)}}));
}

TEST(SequenceGradTest, AGatherOfAnUnknownVocabularyHasNoGradientAndSaysWhy) {
  Graph g;
  Tensor table = Placeholder(g, f64, {-1, 3}, "table");
  Tensor ids = Placeholder(g, DType::kI32, {4}, "ids");
  Tensor y = Sum(Gather(table, ids));
  auto grads = Gradients({y}, {table});
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.status().message().find("Gather"), std::string::npos) << grads.status();
}

// An embedding, a positional encoding and a causal mask, differentiated and auto-
// clustered: the compiled gradients are the reference's (the segment sums add in the
// same order, so to within the fused arithmetic around them).
TEST(SequenceGradTest, CompiledEmbeddingGradientsMatchTheReference) {
  Graph g;
  const DType f32 = DType::kF32;
  Tensor ids = Placeholder(g, DType::kI32, {-1, 9}, "ids");
  Tensor table = Variable(g, HostTensor::RandomUniform(f32, {29, 8}, 10, -0.5, 0.5), "table");
  Tensor x = Gather(table, ids);  // [B, 9, 8]
  Tensor pos = Iota(x, 1, f32);
  Tensor h = x + Sin(Reshape(pos, {-1, 1}) * 0.37);
  Tensor scores = BatchMatMul(h, h, false, true);  // [B, 9, 9]
  Tensor p = Iota(scores, 1);
  Tensor mask = Less(Reshape(p, {-1, 1}), Reshape(p, {1, -1}));
  Tensor masked = Select(mask, ScalarConst(g, -1e9), scores);
  Tensor loss = Mean(Square(Softmax(masked)));
  auto grads = Gradients({loss}, {table});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::vector<Tensor> fetches = {loss, (*grads)[0]};
  const Feeds feeds = {{ids, Ids({5, 9}, 29, 11)}};
  std::vector<HostTensor> want = RunReference(g, feeds, fetches);

  SessionOptions options;
  options.global_jit_level = JitLevel::kOn1;
  // The score matmul's gradients in the clusters of the segment sum: this test is about
  // the sequence ops' gradients fusing, not about the one-matmul-per-cluster default.
  options.max_matmuls_per_cluster = 3;
  Session session(g, options);
  absl::StatusOr<std::vector<HostTensor>> got = session.Run(feeds, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < fetches.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*got)[i], want[i], 1e-4, 1e-6, &why)) << fetches[i].name() << why;
  }
  EXPECT_TRUE(session.ClusterOf((*grads)[0]).has_value()) << session.ClusteringDebugString();
}

}  // namespace
}  // namespace braze
