// Reference kernels: Gather, UnsortedSegmentSum, Iota, Sin and Cos, with hand-computed
// results; out-of-range indices read zeros (Gather) or are dropped (UnsortedSegmentSum).
#include <cmath>
#include <cstdint>
#include <limits>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalNear;
using reftest::Evaluate;

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }
HostTensor I32(std::initializer_list<int32_t> v, Shape s) {
  return HostTensor::From<int32_t>(v, s);
}

TEST(GatherTest, RowsOfATableAndOutOfRangeZeros) {
  Graph g;
  Tensor table = Const(g, F32({1, 2, 3, 4, 5, 6}, {3, 2}));
  const int32_t big = std::numeric_limits<int32_t>::max();
  Tensor ids = Const(g, I32({2, 0, 2, -1, 3, big}, {2, 3}));
  EXPECT_TRUE(EvalNear(Gather(table, ids), F32({5, 6, 1, 2, 5, 6,  //
                                                0, 0, 0, 0, 0, 0},
                                               {2, 3, 2})));
  // Along axis 1: columns.
  EXPECT_TRUE(EvalNear(Gather(table, Const(g, I32({1, 1, 5}, {3})), 1),
                       F32({2, 2, 0, 4, 4, 0, 6, 6, 0}, {3, 3})));
  // A scalar id drops the axis.
  EXPECT_TRUE(EvalNear(Gather(table, Const(g, I32({1}, {})), 0), F32({3, 4}, {2})));
  // i32 tables.
  EXPECT_TRUE(EvalNear(Gather(Const(g, I32({7, 8, 9}, {3})), Const(g, I32({2, -3}, {2}))),
                       I32({9, 0}, {2})));
}

TEST(UnsortedSegmentSumTest, SumsDropsAndEmptySegments) {
  Graph g;
  Tensor data = Const(g, F32({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  Tensor ids = Const(g, I32({1, 3, 1, -1}, {4}));
  // Segment 0 and 2 are empty (0), 1 sums rows 0 and 2, row 3's id is dropped.
  EXPECT_TRUE(EvalNear(UnsortedSegmentSum(data, ids, 4), F32({0, 0, 6, 8, 0, 0, 3, 4}, {4, 2})));
  // Along axis 1, by [2] ids of [4, 2] data.
  EXPECT_TRUE(EvalNear(UnsortedSegmentSum(data, Const(g, I32({0, 0}, {2})), 1, 1),
                       F32({3, 7, 11, 15}, {4, 1})));
  // Rank-2 ids cover two dims; an i32 sum.
  EXPECT_TRUE(EvalNear(UnsortedSegmentSum(Const(g, I32({1, 2, 3, 4}, {2, 2})),
                                          Const(g, I32({0, 1, 1, 9}, {2, 2})), 2),
                       I32({1, 5}, {2})));
}

// Gather's gradient is UnsortedSegmentSum: <Gather(t, ids), d> = <t, Segsum(d, ids)>
// for any t and d, out-of-range ids included.
TEST(UnsortedSegmentSumTest, IsGathersAdjoint) {
  Graph g;
  Tensor t = Const(g, HostTensor::RandomUniform(DType::kF64, {7, 3}, 1));
  Tensor ids = Const(g, HostTensor::RandomUniform(DType::kI32, {4, 5}, 2, -2, 9));
  Tensor d = Const(g, HostTensor::RandomUniform(DType::kF64, {4, 5, 3}, 3));
  auto lhs = Evaluate(Sum(Gather(t, ids) * d));
  auto rhs = Evaluate(Sum(t * UnsortedSegmentSum(d, ids, 7)));
  ASSERT_TRUE(lhs.ok() && rhs.ok());
  EXPECT_NEAR(lhs->GetDouble(0), rhs->GetDouble(0), 1e-12);
}

TEST(IotaTest, PositionsOfAnAxis) {
  Graph g;
  Tensor x = Const(g, F32({0, 0, 0, 0, 0, 0}, {2, 3}));
  EXPECT_TRUE(EvalNear(Iota(x, 1), I32({0, 1, 2}, {3})));
  EXPECT_TRUE(EvalNear(Iota(x, 0, DType::kF32), F32({0, 1}, {2})));
  // A causal mask from positions.
  Tensor p = Iota(x, 1);
  EXPECT_TRUE(EvalNear(Cast(Less(Reshape(p, {-1, 1}), Reshape(p, {1, -1})), DType::kF32),
                       F32({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3})));
}

TEST(SinCosTest, ValuesAndSpecials) {
  Graph g;
  Tensor x = Const(g, HostTensor::From<double>({0.5, -0.0, 1e6, INFINITY, NAN}, {5}));
  auto s = Evaluate(Sin(x));
  auto c = Evaluate(Cos(x));
  ASSERT_TRUE(s.ok() && c.ok());
  EXPECT_EQ(s->GetDouble(0), std::sin(0.5));
  EXPECT_TRUE(s->GetDouble(1) == 0 && std::signbit(s->GetDouble(1)));
  EXPECT_EQ(s->GetDouble(2), std::sin(1e6));
  EXPECT_EQ(c->GetDouble(1), 1);
  EXPECT_TRUE(std::isnan(s->GetDouble(3)) && std::isnan(c->GetDouble(3)));
  EXPECT_TRUE(std::isnan(s->GetDouble(4)) && std::isnan(c->GetDouble(4)));
}

}  // namespace
}  // namespace braze
