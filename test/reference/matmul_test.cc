// Reference kernels: MatMul and BatchMatMul.
#include <cstdint>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "reference/eval_graph.h"

namespace braze {
namespace {

using reftest::EvalFails;
using reftest::EvalNear;

HostTensor F32(std::initializer_list<float> v, Shape s) { return HostTensor::From<float>(v, s); }
HostTensor F64(std::initializer_list<double> v, Shape s) { return HostTensor::From<double>(v, s); }
HostTensor I32(std::initializer_list<int32_t> v, Shape s) {
  return HostTensor::From<int32_t>(v, s);
}

// [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]].
class MatMulTest : public ::testing::Test {
 protected:
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor b = Const(g, F32({7, 8, 9, 10, 11, 12}, {3, 2}));
  Tensor a_t = Const(g, F32({1, 4, 2, 5, 3, 6}, {3, 2}));     // a transposed
  Tensor b_t = Const(g, F32({7, 9, 11, 8, 10, 12}, {2, 3}));  // b transposed
  HostTensor want = F32({58, 64, 139, 154}, {2, 2});
};

TEST_F(MatMulTest, Plain) { EXPECT_TRUE(EvalNear(MatMul(a, b), want)); }

TEST_F(MatMulTest, TransposeA) { EXPECT_TRUE(EvalNear(MatMul(a_t, b, true, false), want)); }

TEST_F(MatMulTest, TransposeB) { EXPECT_TRUE(EvalNear(MatMul(a, b_t, false, true), want)); }

TEST_F(MatMulTest, TransposeBoth) { EXPECT_TRUE(EvalNear(MatMul(a_t, b_t, true, true), want)); }

TEST_F(MatMulTest, OtherOrder) {
  // b x a: [3,2] x [2,3] -> [3,3].
  EXPECT_TRUE(EvalNear(MatMul(b, a), F32({39, 54, 69, 49, 68, 87, 59, 82, 105}, {3, 3})));
  // a^T x a^T^T = a^T a: [3,3], symmetric.
  EXPECT_TRUE(
      EvalNear(MatMul(a, a, true, false), F32({17, 22, 27, 22, 29, 36, 27, 36, 45}, {3, 3})));
  // a a^T: [2,2].
  EXPECT_TRUE(EvalNear(MatMul(a, a, false, true), F32({14, 32, 32, 77}, {2, 2})));
}

TEST(MatMulDTypeTest, IntAndDouble) {
  Graph g;
  Tensor a = Const(g, I32({1, -2, 3, 4}, {2, 2}));
  Tensor b = Const(g, I32({5, 6, 7, 8}, {2, 2}));
  EXPECT_TRUE(EvalNear(MatMul(a, b), I32({-9, -10, 43, 50}, {2, 2})));
  Tensor c = Const(g, F64({0.5, 0.25}, {1, 2}));
  Tensor d = Const(g, F64({2, 4}, {2, 1}));
  EXPECT_TRUE(EvalNear(MatMul(c, d), F64({2.0}, {1, 1})));
  EXPECT_TRUE(EvalNear(MatMul(d, c), F64({1, 0.5, 2, 1}, {2, 2})));
}

TEST(MatMulAccumulationTest, AccumulatesInDouble) {
  Graph g;
  Tensor a = Const(g, F32({1e8f, 1.f, -1e8f}, {1, 3}));
  Tensor b = Const(g, F32({1, 1, 1}, {3, 1}));
  EXPECT_TRUE(EvalNear(MatMul(a, b), F32({1.f}, {1, 1})));
}

TEST(MatMulZeroSizeTest, EmptyInnerAndOuterDims) {
  Graph g;
  Tensor a = Const(g, HostTensor(DType::kF32, {2, 0}));
  Tensor b = Const(g, HostTensor(DType::kF32, {0, 3}));
  // An empty inner dim sums nothing: zeros.
  EXPECT_TRUE(EvalNear(MatMul(a, b), HostTensor(DType::kF32, {2, 3})));
  Tensor c = Const(g, HostTensor(DType::kF32, {0, 3}));
  Tensor d = Const(g, F32({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_TRUE(EvalNear(MatMul(c, d), HostTensor(DType::kF32, {0, 2})));
  EXPECT_TRUE(EvalNear(MatMul(d, c, true, true), HostTensor(DType::kF32, {2, 0})));
}

TEST(MatMulErrorTest, InnerDimsMustMatch) {
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(EvalFails(MatMul(a, a), absl::StatusCode::kInvalidArgument, "inner"));
  // The kernel itself checks when handed inconsistent operands.
  Tensor ok = MatMul(a, a, false, true);
  HostTensor ins[] = {F32({1, 2, 3, 4, 5, 6}, {2, 3}), F32({1, 2, 3, 4}, {2, 2})};
  auto r = RunReferenceKernel(ok.node(), ins, {TensorType{DType::kF32, {2, 2}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- BatchMatMul ----

// Batch 0: [[1,2],[3,4]], batch 1: [[5,6],[7,8]].
class BatchMatMulTest : public ::testing::Test {
 protected:
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
};

TEST_F(BatchMatMulTest, PerBatchProducts) {
  Tensor b = Const(g, F32({1, 1, 1, -1}, {2, 2, 1}));  // [1,1]^T and [1,-1]^T
  EXPECT_TRUE(EvalNear(BatchMatMul(a, b), F32({3, 7, -1, -1}, {2, 2, 1})));
}

TEST_F(BatchMatMulTest, Transposes) {
  Tensor b = Const(g, F32({1, 1, 1, -1}, {2, 2, 1}));
  // a^T per batch: [[1,3],[2,4]] and [[5,7],[6,8]].
  EXPECT_TRUE(EvalNear(BatchMatMul(a, b, true, false), F32({4, 6, -2, -2}, {2, 2, 1})));
  Tensor b_t = Const(g, F32({1, 1, 1, -1}, {2, 1, 2}));
  EXPECT_TRUE(EvalNear(BatchMatMul(a, b_t, false, true), F32({3, 7, -1, -1}, {2, 2, 1})));
  EXPECT_TRUE(EvalNear(BatchMatMul(b_t, a, false, false), F32({4, 6, -2, -2}, {2, 1, 2})));
  // a a^T per batch: [[5,11],[11,25]] and [[61,83],[83,113]].
  EXPECT_TRUE(
      EvalNear(BatchMatMul(a, a, false, true), F32({5, 11, 11, 25, 61, 83, 83, 113}, {2, 2, 2})));
}

TEST_F(BatchMatMulTest, Rank4AndZeroBatch) {
  Tensor a4 = Const(g, F32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 1, 2, 2}));
  Tensor eye = Const(g, F32({1, 0, 0, 1, 0, 1, 1, 0}, {2, 1, 2, 2}));  // I and swap
  EXPECT_TRUE(EvalNear(BatchMatMul(a4, eye), F32({1, 2, 3, 4, 6, 5, 8, 7}, {2, 1, 2, 2})));
  Tensor z = Const(g, HostTensor(DType::kF32, {0, 2, 3}));
  Tensor w = Const(g, HostTensor(DType::kF32, {0, 3, 4}));
  EXPECT_TRUE(EvalNear(BatchMatMul(z, w), HostTensor(DType::kF32, {0, 2, 4})));
}

TEST_F(BatchMatMulTest, BatchDimsMustMatch) {
  Tensor b = Const(g, HostTensor(DType::kF32, {3, 2, 2}));
  EXPECT_TRUE(EvalFails(BatchMatMul(a, b), absl::StatusCode::kInvalidArgument, "batch"));
}

}  // namespace
}  // namespace braze
