// Reference kernels: unary ops, Cast, broadcasting binary ops and Select.
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
HostTensor Bool(std::initializer_list<bool> v, Shape s) { return HostTensor::From<bool>(v, s); }

// ---- Unary ----

TEST(UnaryTest, NegAbsOnFloatAndInt) {
  Graph g;
  Tensor f = Const(g, F32({-1.5f, 0.f, 2.f}, {3}));
  Tensor i = Const(g, I32({3, -4, 0}, {3}));
  EXPECT_TRUE(EvalNear(Neg(f), F32({1.5f, 0.f, -2.f}, {3})));
  EXPECT_TRUE(EvalNear(Neg(i), I32({-3, 4, 0}, {3})));
  EXPECT_TRUE(EvalNear(Abs(f), F32({1.5f, 0.f, 2.f}, {3})));
  EXPECT_TRUE(EvalNear(Abs(i), I32({3, 4, 0}, {3})));
}

TEST(UnaryTest, IntNegAndAbsOfMinWrap) {
  // Two's complement, as compiled code behaves, rather than undefined behaviour.
  Graph g;
  Tensor i = Const(g, I32({kI32Min}, {1}));
  EXPECT_TRUE(EvalNear(Neg(i), I32({kI32Min}, {1})));
  EXPECT_TRUE(EvalNear(Abs(i), I32({kI32Min}, {1})));
}

TEST(UnaryTest, ReluSquareSign) {
  Graph g;
  Tensor f = Const(g, F32({-1.f, 0.f, 2.5f, -3.f}, {2, 2}));
  Tensor d = Const(g, F64({-0.5, 3.0}, {2}));
  Tensor i = Const(g, I32({-7, 0, 9}, {3}));
  EXPECT_TRUE(EvalNear(Relu(f), F32({0.f, 0.f, 2.5f, 0.f}, {2, 2})));
  EXPECT_TRUE(EvalNear(Relu(i), I32({0, 0, 9}, {3})));
  EXPECT_TRUE(EvalNear(Square(f), F32({1.f, 0.f, 6.25f, 9.f}, {2, 2})));
  EXPECT_TRUE(EvalNear(Square(d), F64({0.25, 9.0}, {2})));
  EXPECT_TRUE(EvalNear(Square(i), I32({49, 0, 81}, {3})));
  EXPECT_TRUE(EvalNear(Sign(f), F32({-1.f, 0.f, 1.f, -1.f}, {2, 2})));
  EXPECT_TRUE(EvalNear(Sign(d), F64({-1.0, 1.0}, {2})));
  EXPECT_TRUE(EvalNear(Sign(i), I32({-1, 0, 1}, {3})));
}

TEST(UnaryTest, NanPropagatesThroughReluAndSign) {
  Graph g;
  Tensor f = Const(g, F32({kNan}, {1}));
  EXPECT_TRUE(EvalNear(Relu(f), F32({kNan}, {1})));
  EXPECT_TRUE(EvalNear(Sign(f), F32({kNan}, {1})));
}

TEST(UnaryTest, FloatingMath) {
  Graph g;
  const float e = static_cast<float>(M_E);
  Tensor x = Const(g, F32({0.f, 1.f, -1.f}, {3}));
  EXPECT_TRUE(EvalNear(Exp(x), F32({1.f, e, 1.f / e}, {3}), 1e-6));
  EXPECT_TRUE(EvalNear(Log(Const(g, F32({1.f, e, 0.f}, {3}))), F32({0.f, 1.f, -kInf}, {3}), 1e-6));
  EXPECT_TRUE(EvalNear(Sqrt(Const(g, F32({0.f, 4.f, 2.25f}, {3}))), F32({0.f, 2.f, 1.5f}, {3})));
  EXPECT_TRUE(EvalNear(Rsqrt(Const(g, F32({4.f, 0.25f}, {2}))), F32({0.5f, 2.f}, {2})));
  EXPECT_TRUE(EvalNear(Tanh(x), F32({0.f, 0.76159415595576f, -0.76159415595576f}, {3}), 1e-6));
  EXPECT_TRUE(EvalNear(Sigmoid(Const(g, F32({0.f, 2.f, -2.f}, {3}))),
                       F32({0.5f, 0.88079707797788f, 0.11920292202212f}, {3}), 1e-6));
  EXPECT_TRUE(
      EvalNear(Reciprocal(Const(g, F32({2.f, -0.25f, 0.f}, {3}))), F32({0.5f, -4.f, kInf}, {3})));
  EXPECT_TRUE(EvalNear(Floor(Const(g, F32({1.5f, -1.5f, -2.f, 0.2f}, {4}))),
                       F32({1.f, -2.f, -2.f, 0.f}, {4})));
  EXPECT_TRUE(EvalNear(Erf(Const(g, F32({0.f, 1.f, -0.5f}, {3}))),
                       F32({0.f, 0.84270079294971f, -0.52049987781305f}, {3}), 1e-6));
}

TEST(UnaryTest, FloatingMathInDouble) {
  Graph g;
  Tensor x = Const(g, F64({1.0, -2.0}, {2}));
  EXPECT_TRUE(EvalNear(Exp(x), F64({2.718281828459045, 0.1353352832366127}, {2}), 1e-15));
  EXPECT_TRUE(EvalNear(Sigmoid(x), F64({0.7310585786300049, 0.11920292202211755}, {2}), 1e-15));
  EXPECT_TRUE(EvalNear(Erf(x), F64({0.8427007929497149, -0.9953222650189527}, {2}), 1e-15));
}

// Far in the negative tail sigmoid(v) is exp(v): 1 / (1 + exp(-v)) was 0 once exp(-v)
// overflowed (v < -88.7 in f32, -709.8 in f64), where the true value is still a normal
// or subnormal number. Compared with long double within a relative 1e-6 of the result
// (plus half the smallest subnormal), never with an absolute tolerance that 0 passes.
TEST(UnaryTest, SigmoidTailsKeepTheirSmallValues) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    const bool f64 = dt == DType::kF64;
    const std::vector<double> v =
        f64 ? std::vector<double>{-700, -709, -720, -744, -746, 720}
            : std::vector<double>{-87, -88.5, -90, -100, -103.5, -120, 90};
    Graph g;
    HostTensor t(dt, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
    absl::StatusOr<HostTensor> got = reftest::Evaluate(Sigmoid(Const(g, t)));
    ASSERT_TRUE(got.ok()) << got.status();
    const double half_denorm = f64 ? 2.5e-324 : 7.1e-46;
    for (size_t i = 0; i < v.size(); ++i) {
      const long double x = v[i];
      const double want = static_cast<double>(1.0L / (1.0L + std::exp(-x)));
      const double rounded = f64 ? want : static_cast<double>(static_cast<float>(want));
      EXPECT_NEAR(got->GetDouble(static_cast<int64_t>(i)), rounded,
                  1e-6 * std::fabs(rounded) + half_denorm)
          << DTypeName(dt) << " sigmoid(" << v[i] << ")";
    }
  }
}

TEST(UnaryTest, ZeroSizeTensors) {
  Graph g;
  Tensor f = Const(g, HostTensor(DType::kF32, {0, 3}));
  Tensor i = Const(g, HostTensor(DType::kI32, {2, 0}));
  EXPECT_TRUE(EvalNear(Exp(f), HostTensor(DType::kF32, {0, 3})));
  EXPECT_TRUE(EvalNear(Neg(i), HostTensor(DType::kI32, {2, 0})));
  EXPECT_TRUE(EvalNear(Cast(f, DType::kBool), HostTensor(DType::kBool, {0, 3})));
}

TEST(UnaryTest, FloatingOnlyOpsRejectInt) {
  Graph g;
  Tensor i = Const(g, I32({1}, {1}));
  EXPECT_TRUE(EvalFails(Exp(i), absl::StatusCode::kInvalidArgument, "Exp"));
}

TEST(UnaryTest, KernelChecksOutputType) {
  // Called directly with an output type that contradicts the input: an error, not a
  // buffer overrun.
  Graph g;
  Tensor x = Const(g, F32({1.f, 2.f}, {2}));
  Tensor y = Neg(x);
  HostTensor in = F32({1.f, 2.f}, {2});
  auto r = RunReferenceKernel(y.node(), {&in, 1}, {TensorType{DType::kF32, {3}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Cast ----

TEST(CastTest, FloatToIntTruncatesSaturatesAndMapsNanToZero) {
  Graph g;
  Tensor x = Const(g, F32({1.9f, -1.9f, 3e9f, -3e9f, kNan, kInf}, {6}));
  EXPECT_TRUE(EvalNear(Cast(x, DType::kI32), I32({1, -1, kI32Max, kI32Min, 0, kI32Max}, {6})));
  Tensor d = Const(g, F64({2147483647.5, -2147483648.9, -0.5}, {3}));
  EXPECT_TRUE(EvalNear(Cast(d, DType::kI32), I32({kI32Max, kI32Min, 0}, {3})));
}

TEST(CastTest, ToAndFromBool) {
  Graph g;
  Tensor f = Const(g, F32({0.f, -0.5f, 2.f, kNan}, {4}));
  EXPECT_TRUE(EvalNear(Cast(f, DType::kBool), Bool({false, true, true, true}, {4})));
  Tensor i = Const(g, I32({0, 5, -1}, {3}));
  EXPECT_TRUE(EvalNear(Cast(i, DType::kBool), Bool({false, true, true}, {3})));
  Tensor b = Const(g, Bool({true, false}, {2}));
  EXPECT_TRUE(EvalNear(Cast(b, DType::kF32), F32({1.f, 0.f}, {2})));
  EXPECT_TRUE(EvalNear(Cast(b, DType::kI32), I32({1, 0}, {2})));
  EXPECT_TRUE(EvalNear(Cast(b, DType::kBool), Bool({true, false}, {2})));
}

TEST(CastTest, BetweenNumbers) {
  Graph g;
  EXPECT_TRUE(EvalNear(Cast(Const(g, I32({7, -3}, {2})), DType::kF64), F64({7.0, -3.0}, {2})));
  EXPECT_TRUE(
      EvalNear(Cast(Const(g, F64({0.1, 1e300}, {2})), DType::kF32), F32({0.1f, kInf}, {2})));
  EXPECT_TRUE(
      EvalNear(Cast(Const(g, F32({0.1f}, {})), DType::kF64), F64({static_cast<double>(0.1f)}, {})));
}

// ---- Binary ----

TEST(BinaryTest, AddBroadcastsRowVector) {
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor b = Const(g, F32({10, 20, 30}, {3}));
  EXPECT_TRUE(EvalNear(Add(a, b), F32({11, 22, 33, 14, 25, 36}, {2, 3})));
  EXPECT_TRUE(EvalNear(Add(b, a), F32({11, 22, 33, 14, 25, 36}, {2, 3})));
}

TEST(BinaryTest, OuterBroadcast) {
  Graph g;
  Tensor col = Const(g, F32({1, 2}, {2, 1}));
  Tensor row = Const(g, F32({10, 20, 30}, {1, 3}));
  EXPECT_TRUE(EvalNear(Add(col, row), F32({11, 21, 31, 12, 22, 32}, {2, 3})));
  EXPECT_TRUE(EvalNear(Mul(col, row), F32({10, 20, 30, 20, 40, 60}, {2, 3})));
  EXPECT_TRUE(EvalNear(Sub(row, col), F32({9, 19, 29, 8, 18, 28}, {2, 3})));
}

TEST(BinaryTest, ScalarBroadcast) {
  Graph g;
  Tensor a = Const(g, F64({1, 2, 3, 4}, {2, 2}));
  Tensor s = Const(g, F64({0.5}, {}));
  EXPECT_TRUE(EvalNear(Mul(a, s), F64({0.5, 1, 1.5, 2}, {2, 2})));
  EXPECT_TRUE(EvalNear(Sub(s, a), F64({-0.5, -1.5, -2.5, -3.5}, {2, 2})));
  EXPECT_TRUE(EvalNear(Add(s, s), F64({1.0}, {})));
}

TEST(BinaryTest, Rank3Broadcast) {
  // [2,1,2] + [2,1] -> [2,2,2]: out[i][j][k] = a[i][0][k] + b[j][0].
  Graph g;
  Tensor a = Const(g, I32({1, 2, 3, 4}, {2, 1, 2}));
  Tensor b = Const(g, I32({10, 20}, {2, 1}));
  EXPECT_TRUE(EvalNear(Add(a, b), I32({11, 12, 21, 22, 13, 14, 23, 24}, {2, 2, 2})));
}

TEST(BinaryTest, ZeroSizeBroadcast) {
  Graph g;
  Tensor a = Const(g, HostTensor(DType::kF32, {0, 3}));
  Tensor b = Const(g, F32({1, 2, 3}, {3}));
  EXPECT_TRUE(EvalNear(Add(a, b), HostTensor(DType::kF32, {0, 3})));
  Tensor c = Const(g, HostTensor(DType::kF32, {2, 0}));
  Tensor d = Const(g, F32({1, 2}, {2, 1}));
  EXPECT_TRUE(EvalNear(Mul(c, d), HostTensor(DType::kF32, {2, 0})));
  // A size-1 dim broadcasts against 0.
  Tensor e = Const(g, F32({5}, {1}));
  EXPECT_TRUE(EvalNear(Greater(c, e), HostTensor(DType::kBool, {2, 0})));
}

TEST(BinaryTest, FloatDivision) {
  Graph g;
  Tensor a = Const(g, F32({1, -1, 0, 3}, {4}));
  Tensor b = Const(g, F32({2, 0, 0, -4}, {4}));
  EXPECT_TRUE(EvalNear(Div(a, b), F32({0.5f, -kInf, kNan, -0.75f}, {4})));
}

TEST(BinaryTest, IntDivisionFloorsAndDividesByZeroToZero) {
  Graph g;
  Tensor a = Const(g, I32({7, -7, 7, -7, 6, -6, 5, 0, kI32Min, kI32Min}, {10}));
  Tensor b = Const(g, I32({2, 2, -2, -2, 3, 3, 0, 3, -1, 1}, {10}));
  EXPECT_TRUE(EvalNear(Div(a, b), I32({3, -4, -4, 3, 2, -2, 0, 0, kI32Min, kI32Min}, {10})));
}

TEST(BinaryTest, IntArithmeticWraps) {
  Graph g;
  Tensor a = Const(g, I32({kI32Max, kI32Min, 65536}, {3}));
  Tensor b = Const(g, I32({1, 1, 65536}, {3}));
  EXPECT_TRUE(EvalNear(Add(a, b), I32({kI32Min, kI32Min + 1, 131072}, {3})));
  EXPECT_TRUE(EvalNear(Sub(a, b), I32({kI32Max - 1, kI32Max, 0}, {3})));
  EXPECT_TRUE(EvalNear(Mul(a, b), I32({kI32Max, kI32Min, 0}, {3})));
}

TEST(BinaryTest, MaximumMinimum) {
  Graph g;
  Tensor a = Const(g, F32({1, 5, kNan, 2}, {4}));
  Tensor b = Const(g, F32({3, 4, 1, kNan}, {4}));
  EXPECT_TRUE(EvalNear(Maximum(a, b), F32({3, 5, kNan, kNan}, {4})));
  EXPECT_TRUE(EvalNear(Minimum(a, b), F32({1, 4, kNan, kNan}, {4})));
  Tensor i = Const(g, I32({-1, 2, 3}, {3}));
  Tensor zero = Const(g, I32({0}, {}));
  EXPECT_TRUE(EvalNear(Maximum(i, zero), I32({0, 2, 3}, {3})));
  EXPECT_TRUE(EvalNear(Minimum(i, zero), I32({-1, 0, 0}, {3})));
}

TEST(BinaryTest, Pow) {
  Graph g;
  Tensor a = Const(g, F32({2, 4, 9, 2}, {4}));
  Tensor b = Const(g, F32({3, 0.5f, 0.5f, -1}, {4}));
  EXPECT_TRUE(EvalNear(Pow(a, b), F32({8, 2, 3, 0.5f}, {4}), 1e-6));
  Tensor c = Const(g, F64({2, 3}, {2, 1}));
  Tensor d = Const(g, F64({0, 1, 2}, {3}));
  EXPECT_TRUE(EvalNear(Pow(c, d), F64({1, 2, 4, 1, 3, 9}, {2, 3})));
  Tensor i = Const(g, I32({2}, {1}));
  EXPECT_TRUE(EvalFails(Pow(i, i), absl::StatusCode::kInvalidArgument, "Pow"));
}

TEST(BinaryTest, ComparisonsGiveBool) {
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor b = Const(g, F32({2, 2, 7}, {3}));
  EXPECT_TRUE(EvalNear(Greater(a, b), Bool({0, 0, 0, 1, 1, 0}, {2, 3})));
  EXPECT_TRUE(EvalNear(Less(a, b), Bool({1, 0, 1, 0, 0, 1}, {2, 3})));
  EXPECT_TRUE(EvalNear(Equal(a, b), Bool({0, 1, 0, 0, 0, 0}, {2, 3})));
  Tensor i = Const(g, I32({-1, 0, 1}, {3}));
  Tensor z = Const(g, I32({0}, {}));
  EXPECT_TRUE(EvalNear(Greater(i, z), Bool({0, 0, 1}, {3})));
  Tensor n = Const(g, F32({kNan}, {}));
  EXPECT_TRUE(EvalNear(Equal(n, n), Bool({false}, {})));
}

TEST(BinaryTest, EqualOnBool) {
  Graph g;
  Tensor a = Const(g, Bool({true, true, false, false}, {4}));
  Tensor b = Const(g, Bool({true, false, true, false}, {4}));
  EXPECT_TRUE(EvalNear(Equal(a, b), Bool({true, false, false, true}, {4})));
}

TEST(BinaryTest, MixedDTypesAreRejected) {
  Graph g;
  Tensor a = Const(g, F32({1}, {1}));
  Tensor b = Const(g, I32({1}, {1}));
  EXPECT_TRUE(EvalFails(Add(a, b), absl::StatusCode::kInvalidArgument, "dtype"));
  // The kernel checks too when called directly with mismatched inputs.
  Tensor c = Add(a, a);
  HostTensor ins[] = {F32({1}, {1}), I32({1}, {1})};
  auto r = RunReferenceKernel(c.node(), ins, {TensorType{DType::kF32, {1}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BinaryTest, KernelRejectsShapesThatDoNotBroadcastToOutput) {
  Graph g;
  Tensor a = Const(g, F32({1, 2, 3}, {3}));
  Tensor c = Add(a, a);
  HostTensor ins[] = {F32({1, 2, 3}, {3}), F32({1, 2}, {2})};
  auto r = RunReferenceKernel(c.node(), ins, {TensorType{DType::kF32, {3}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("broadcast"), std::string::npos) << r.status();
}

// ---- Select ----

TEST(SelectTest, BroadcastsAllThree) {
  Graph g;
  Tensor cond = Const(g, Bool({true, false}, {2, 1}));
  Tensor a = Const(g, F32({1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor b = Const(g, F32({-1}, {}));
  EXPECT_TRUE(EvalNear(Select(cond, a, b), F32({1, 2, 3, -1, -1, -1}, {2, 3})));

  Tensor cond2 = Const(g, Bool({true, false, true}, {3}));
  Tensor a2 = Const(g, I32({10, 20}, {2, 1}));
  Tensor b2 = Const(g, I32({0, 1, 2, 3, 4, 5}, {2, 3}));
  EXPECT_TRUE(EvalNear(Select(cond2, a2, b2), I32({10, 1, 10, 20, 4, 20}, {2, 3})));
}

TEST(SelectTest, ZeroSizeAndBoolBranches) {
  Graph g;
  Tensor cond = Const(g, HostTensor(DType::kBool, {0}));
  Tensor a = Const(g, F32({1}, {1}));
  EXPECT_TRUE(EvalNear(Select(cond, a, a), HostTensor(DType::kF32, {0})));
  Tensor c2 = Const(g, Bool({true, false}, {2}));
  Tensor t = Const(g, Bool({false, false}, {2}));
  Tensor f = Const(g, Bool({true, true}, {2}));
  EXPECT_TRUE(EvalNear(Select(c2, t, f), Bool({false, true}, {2})));
}

TEST(SelectTest, ConditionMustBeBool) {
  Graph g;
  Tensor a = Const(g, F32({1}, {1}));
  EXPECT_TRUE(EvalFails(Select(a, a, a), absl::StatusCode::kInvalidArgument, "bool"));
}

}  // namespace
}  // namespace braze
