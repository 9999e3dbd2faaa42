// Reference kernels: Sum, Mean, Max, Min and ArgMax.
#include <cmath>
#include <cstdint>
#include <limits>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalFails;
using reftest::EvalNear;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }
HostTensor F64(std::initializer_list<double> v, Shape s) { return HostTensor::From<double>(v, s); }
HostTensor I32(std::initializer_list<int32_t> v, Shape s) {
  return HostTensor::From<int32_t>(v, s);
}

// 0..n-1 as f32 of `shape`.
HostTensor Iota(Shape shape) {
  HostTensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

class ReduceTest : public ::testing::Test {
 protected:
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
};

TEST_F(ReduceTest, SumOverAxes) {
  EXPECT_TRUE(EvalNear(Sum(x), F32({21}, {})));
  EXPECT_TRUE(EvalNear(Sum(x, {0}), F32({5, 7, 9}, {3})));
  EXPECT_TRUE(EvalNear(Sum(x, {1}), F32({6, 15}, {2})));
  EXPECT_TRUE(EvalNear(Sum(x, {0, 1}), F32({21}, {})));
}

TEST_F(ReduceTest, NegativeAxesAndKeepDims) {
  EXPECT_TRUE(EvalNear(Sum(x, {-1}, true), F32({6, 15}, {2, 1})));
  EXPECT_TRUE(EvalNear(Sum(x, {-2}), F32({5, 7, 9}, {3})));
  EXPECT_TRUE(EvalNear(Sum(x, {-2}, true), F32({5, 7, 9}, {1, 3})));
  EXPECT_TRUE(EvalNear(Sum(x, {}, true), F32({21}, {1, 1})));
  EXPECT_TRUE(EvalNear(Max(x, {-1}, true), F32({3, 6}, {2, 1})));
}

TEST_F(ReduceTest, MeanMaxMin) {
  EXPECT_TRUE(EvalNear(Mean(x), F32({3.5f}, {})));
  EXPECT_TRUE(EvalNear(Mean(x, {1}), F32({2, 5}, {2})));
  EXPECT_TRUE(EvalNear(Mean(x, {0}, true), F32({2.5f, 3.5f, 4.5f}, {1, 3})));
  EXPECT_TRUE(EvalNear(Max(x, {0}), F32({4, 5, 6}, {3})));
  EXPECT_TRUE(EvalNear(Max(x), F32({6}, {})));
  EXPECT_TRUE(EvalNear(Min(x, {1}, true), F32({1, 4}, {2, 1})));
  EXPECT_TRUE(EvalNear(Min(x), F32({1}, {})));
}

TEST(ReduceRank3Test, MiddleAndOuterAxes) {
  // x[i][j][k] = 6i + 2j + k over [2,3,2].
  Graph g;
  Tensor x = Const(g, Iota({2, 3, 2}));
  EXPECT_TRUE(EvalNear(Sum(x, {1}), F32({6, 9, 24, 27}, {2, 2})));
  EXPECT_TRUE(EvalNear(Sum(x, {0, 2}), F32({14, 22, 30}, {3})));
  EXPECT_TRUE(EvalNear(Max(x, {0, 2}, true), F32({7, 9, 11}, {1, 3, 1})));
  EXPECT_TRUE(EvalNear(Min(x, {0, 1}), F32({0, 1}, {2})));
  EXPECT_TRUE(EvalNear(Mean(x, {-1, -3}), F32({3.5f, 5.5f, 7.5f}, {3})));
}

TEST(ReduceDTypeTest, IntAndDouble) {
  Graph g;
  Tensor i = Const(g, I32({1, -2, 3, 4, 5, -6}, {2, 3}));
  EXPECT_TRUE(EvalNear(Sum(i, {1}), I32({2, 3}, {2})));
  EXPECT_TRUE(EvalNear(Max(i, {0}), I32({4, 5, 3}, {3})));
  EXPECT_TRUE(EvalNear(Min(i), I32({-6}, {})));
  Tensor d = Const(g, F64({0.1, 0.2, 0.3}, {3}));
  EXPECT_TRUE(EvalNear(Sum(d), F64({0.6}, {}), 1e-15));
  EXPECT_TRUE(EvalNear(Mean(d), F64({0.2}, {}), 1e-15));
}

TEST(ReduceDTypeTest, MeanRejectsInt) {
  Graph g;
  Tensor i = Const(g, I32({1, 2}, {2}));
  EXPECT_TRUE(EvalFails(Mean(i), absl::StatusCode::kInvalidArgument, "Mean"));
}

TEST(ReduceAccumulationTest, FloatSumAccumulatesInDouble) {
  // In float, 1e8 + 1 rounds back to 1e8 and the sum would be 0.
  Graph g;
  Tensor x = Const(g, F32({1e8f, 1.f, -1e8f}, {3}));
  EXPECT_TRUE(EvalNear(Sum(x), F32({1.f}, {})));
  EXPECT_TRUE(EvalNear(Mean(x), F32({1.f / 3.f}, {})));
}

TEST(ReduceAccumulationTest, IntSumWraps) {
  Graph g;
  Tensor x = Const(g, I32({kI32Max, 1}, {2}));
  EXPECT_TRUE(EvalNear(Sum(x), I32({kI32Min}, {})));
}

TEST(ReduceEmptyTest, IdentitiesOverEmptyAxes) {
  Graph g;
  Tensor f = Const(g, HostTensor(DType::kF32, {0, 3}));
  EXPECT_TRUE(EvalNear(Sum(f, {0}), F32({0, 0, 0}, {3})));
  EXPECT_TRUE(EvalNear(Mean(f, {0}), F32({kNan, kNan, kNan}, {3})));
  EXPECT_TRUE(EvalNear(Max(f, {0}), F32({-kInf, -kInf, -kInf}, {3})));
  EXPECT_TRUE(EvalNear(Min(f, {0}, true), F32({kInf, kInf, kInf}, {1, 3})));
  EXPECT_TRUE(EvalNear(Sum(f), F32({0}, {})));
  Tensor i = Const(g, HostTensor(DType::kI32, {2, 0}));
  EXPECT_TRUE(EvalNear(Max(i, {1}), I32({kI32Min, kI32Min}, {2})));
  EXPECT_TRUE(EvalNear(Min(i, {1}), I32({kI32Max, kI32Max}, {2})));
  EXPECT_TRUE(EvalNear(Sum(i, {1}), I32({0, 0}, {2})));
}

TEST(ReduceEmptyTest, EmptyOutputs) {
  Graph g;
  Tensor f = Const(g, HostTensor(DType::kF32, {0, 3}));
  EXPECT_TRUE(EvalNear(Sum(f, {1}), HostTensor(DType::kF32, {0})));
  EXPECT_TRUE(EvalNear(Max(f, {1}, true), HostTensor(DType::kF32, {0, 1})));
  EXPECT_TRUE(EvalNear(ArgMax(f, 1), HostTensor(DType::kI32, {0})));
}

TEST(ReduceNanTest, MaxMinPropagateNan) {
  Graph g;
  Tensor x = Const(g, F32({1, kNan, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(EvalNear(Max(x, {1}), F32({kNan, 6}, {2})));
  EXPECT_TRUE(EvalNear(Min(x, {1}), F32({kNan, 4}, {2})));
  EXPECT_TRUE(EvalNear(Sum(x, {1}), F32({kNan, 15}, {2})));
}

TEST(ReduceScalarTest, ReducingNoAxesOfAScalar) {
  Graph g;
  Tensor s = Const(g, F32({2.5f}, {}));
  EXPECT_TRUE(EvalNear(Sum(s), F32({2.5f}, {})));
  EXPECT_TRUE(EvalNear(Max(s), F32({2.5f}, {})));
}

// Over no axes each element is its own sum or mean, -0 included (0 + -0 would be +0), as
// compiled code reads it and as TF's reduction over no axes is the identity; and so is
// SumToShapeOf where nothing is summed.
TEST(ReduceScalarTest, ReducingNoAxesKeepsNegativeZero) {
  Graph g;
  Tensor s = Const(g, F32({-0.0f}, {}));
  Tensor v = Const(g, F32({-0.0f, 2, -0.0f}, {3}));
  for (const Tensor& t : {Sum(s), Mean(s), SumToShapeOf(v, v)}) {
    auto out = reftest::Evaluate(std::vector<Tensor>{t});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < (*out)[0].num_elements(); ++i) {
      EXPECT_EQ(std::signbit((*out)[0].data<float>()[i]), i != 1) << t.name() << " " << i;
    }
  }
}

// ---- ArgMax ----

TEST(ArgMaxTest, FirstMaximumAlongAxis) {
  Graph g;
  Tensor x = Const(g, F32({1, 3, 3, 5, 2, 5}, {2, 3}));
  EXPECT_TRUE(EvalNear(ArgMax(x, 1), I32({1, 0}, {2})));
  EXPECT_TRUE(EvalNear(ArgMax(x, -1), I32({1, 0}, {2})));
  EXPECT_TRUE(EvalNear(ArgMax(x, 0), I32({1, 0, 1}, {3})));
}

TEST(ArgMaxTest, Rank3MiddleAxisAndInt) {
  // x[i][j][k] = 6i + 2j + k except a planted maximum at [1][0][1].
  Graph g;
  HostTensor v = Iota({2, 3, 2});
  v.data<float>()[7] = 100;
  Tensor x = Const(g, v);
  EXPECT_TRUE(EvalNear(ArgMax(x, 1), I32({2, 2, 2, 0}, {2, 2})));
  Tensor i = Const(g, I32({-5, -2, -9}, {3}));
  EXPECT_TRUE(EvalNear(ArgMax(i, 0), I32({1}, {})));
}

TEST(ArgMaxTest, NegativeValuesAndInfinity) {
  Graph g;
  Tensor x = Const(g, F32({-kInf, -kInf, -3, -1, -1}, {5}));
  EXPECT_TRUE(EvalNear(ArgMax(x, 0), I32({3}, {})));
  Tensor y = Const(g, F32({-kInf, -kInf}, {2}));
  EXPECT_TRUE(EvalNear(ArgMax(y, 0), I32({0}, {})));
}

TEST(ArgMaxTest, FirstNanWins) {
  Graph g;
  Tensor x = Const(g, F32({1, kNan, 5, kNan}, {4}));
  EXPECT_TRUE(EvalNear(ArgMax(x, 0), I32({1}, {})));
}

TEST(ArgMaxTest, EmptyAxisIsAnError) {
  Graph g;
  Tensor p = Placeholder(g, DType::kF32, {2, -1});
  Tensor a = ArgMax(p, 1);
  // Through shape inference...
  EXPECT_TRUE(EvalFails(a, absl::StatusCode::kInvalidArgument, "empty",
                        {{p, HostTensor(DType::kF32, {2, 0})}}));
  // ...and the kernel on its own.
  HostTensor in(DType::kF32, {2, 0});
  auto r = RunReferenceKernel(a.node(), {&in, 1}, {TensorType{DType::kI32, {2}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("empty"), std::string::npos) << r.status();
}

TEST(ReduceKernelTest, RejectsOutputTypeThatContradictsAttrs) {
  Graph g;
  Tensor x = Const(g, F32({1, 2, 3, 4}, {2, 2}));
  Tensor s = Sum(x, {1});
  HostTensor in = F32({1, 2, 3, 4}, {2, 2});
  auto r = RunReferenceKernel(s.node(), {&in, 1}, {TensorType{DType::kF32, {2, 1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace braze
