// Gradients of reductions (axes, keep_dims, negative axes, ties), MatMul/BatchMatMul
// with every transpose combination, and the layout ops.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::AwayFromZero;
using gradtest::CheckGradients;
using gradtest::Distinct;
using gradtest::RunReference;

struct ReduceCase {
  std::string name;
  OpKind op;
  std::vector<int> axes;
  bool keep_dims;
};
void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

class ReduceGradTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceGradTest, MatchesFiniteDifferences) {
  const ReduceCase& c = GetParam();
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3, 4}, "x");
  Tensor y;
  switch (c.op) {
    case OpKind::kSum:
      y = Sum(x, c.axes, c.keep_dims);
      break;
    case OpKind::kMean:
      y = Mean(x, c.axes, c.keep_dims);
      break;
    case OpKind::kMax:
      y = Max(x, c.axes, c.keep_dims);
      break;
    default:
      y = Min(x, c.axes, c.keep_dims);
      break;
  }
  // Distinct values 0.25 apart: no ties, so Max/Min are differentiable here.
  EXPECT_TRUE(CheckGradients(Square(y), {{x, Distinct({2, 3, 4}, 9)}}));
}

std::vector<ReduceCase> ReduceCases() {
  std::vector<ReduceCase> cases;
  const std::vector<std::pair<std::string, OpKind>> ops = {
      {"Sum", OpKind::kSum}, {"Mean", OpKind::kMean}, {"Max", OpKind::kMax}, {"Min", OpKind::kMin}};
  const std::vector<std::pair<std::string, std::vector<int>>> axes = {
      {"All", {}},        {"Axis0", {0}},
      {"Axis1", {1}},     {"LastNegative", {-1}},
      {"Axes02", {0, 2}}, {"Axes12Negative", {-2, -1}}};
  for (const auto& [op_name, op] : ops) {
    for (const auto& [axes_name, a] : axes) {
      for (bool keep : {false, true}) {
        cases.push_back({op_name + axes_name + (keep ? "Keep" : ""), op, a, keep});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllReductions, ReduceGradTest, ::testing::ValuesIn(ReduceCases()),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) {
                           return info.param.name;
                         });

// Ties split the gradient evenly, as TF.
TEST(ReduceGradTest, MaxAndMinSplitTheGradientAmongTies) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3}, "x");
  auto grads = Gradients({Max(x, {1}), Min(x, {0}, true)}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  HostTensor dx =
      RunReference(g, {{x, HostTensor::From<double>({1, 3, 3, 1, 0, 2}, {2, 3})}}, *grads)[0];
  // x = [[1, 3, 3], [1, 0, 2]]. Max of rows: [0, .5, .5] (a tie) and [0, 0, 1]; Min of
  // columns: [.5, .5] (a tie), [0, 1], [0, 1].
  EXPECT_EQ(dx.ToVector<double>(), (std::vector<double>{0.5, 0.5, 0.5, 0.5, 1, 2}));
}

TEST(ReduceGradTest, ArgMaxGivesNoGradient) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3}, "x");
  Tensor index = Cast(ArgMax(x, 1), DType::kF64);
  auto only_argmax = Gradients({index}, {x});
  auto with_sum = Gradients({Sum(index) + Sum(x)}, {x});
  ASSERT_TRUE(only_argmax.ok() && with_sum.ok());
  auto out = RunReference(g, {{x, Distinct({2, 3}, 1)}}, {(*only_argmax)[0], (*with_sum)[0]});
  EXPECT_EQ(out[0].ToVector<double>(), std::vector<double>(6, 0));
  EXPECT_EQ(out[1].ToVector<double>(), std::vector<double>(6, 1));
}

struct MatMulCase {
  bool batch, ta, tb;
};
void PrintTo(const MatMulCase& c, std::ostream* os) {
  *os << (c.batch ? "BatchMatMul" : "MatMul") << " ta=" << c.ta << " tb=" << c.tb;
}

class MatMulGradTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulGradTest, MatchesFiniteDifferences) {
  const MatMulCase& c = GetParam();
  Graph g;
  // op(a) is [3, 4], op(b) is [4, 2]; batched: a leading batch of 2.
  Shape as = c.ta ? Shape{4, 3} : Shape{3, 4};
  Shape bs = c.tb ? Shape{2, 4} : Shape{4, 2};
  if (c.batch) {
    as.insert(as.begin(), 2);
    bs.insert(bs.begin(), 2);
  }
  Tensor a = Placeholder(g, DType::kF64, as, "a");
  Tensor b = Placeholder(g, DType::kF64, bs, "b");
  Tensor y = c.batch ? BatchMatMul(a, b, c.ta, c.tb) : MatMul(a, b, c.ta, c.tb);
  EXPECT_TRUE(CheckGradients(y, {{a, AwayFromZero(as, 1)}, {b, AwayFromZero(bs, 2)}}));
}

INSTANTIATE_TEST_SUITE_P(
    AllTransposes, MatMulGradTest,
    ::testing::Values(MatMulCase{false, false, false}, MatMulCase{false, false, true},
                      MatMulCase{false, true, false}, MatMulCase{false, true, true},
                      MatMulCase{true, false, false}, MatMulCase{true, false, true},
                      MatMulCase{true, true, false}, MatMulCase{true, true, true}),
    [](const ::testing::TestParamInfo<MatMulCase>& info) {
      return std::string(info.param.batch ? "Batch" : "") + (info.param.ta ? "TA" : "A") +
             (info.param.tb ? "TB" : "B");
    });

TEST(MatMulGradTest, OnlyTheRequestedOperandIsDifferentiated) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF64, {3, 4}, "a");
  Tensor b = Placeholder(g, DType::kF64, {4, 2}, "b");
  Tensor y = MatMul(a, b);
  const int before = g.num_nodes();
  auto grads = Gradients({y}, {a});
  ASSERT_TRUE(grads.ok()) << grads.status();
  int matmuls = 0;
  for (int id = before; id < g.num_nodes(); ++id) matmuls += g.node(id).op() == OpKind::kMatMul;
  EXPECT_EQ(matmuls, 1);  // dA only; dB would be dead code
}

struct LayoutCase {
  std::string name;
  Shape x_shape;
  std::function<Tensor(Tensor)> fn;
};
void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.name; }

class LayoutGradTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutGradTest, MatchesFiniteDifferences) {
  const LayoutCase& c = GetParam();
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, c.x_shape, "x");
  // Squaring makes the weight of each output element depend on its value, so a gradient
  // routed to the wrong position is caught.
  EXPECT_TRUE(CheckGradients(Square(c.fn(x)), {{x, AwayFromZero(c.x_shape, 3)}}));
}

INSTANTIATE_TEST_SUITE_P(
    AllLayout, LayoutGradTest,
    ::testing::Values(LayoutCase{"Reshape",
                                 {2, 3, 2},
                                 [](Tensor x) {
                                   return Reshape(x, {3, -1});
                                 }},
                      LayoutCase{"Transpose",
                                 {2, 3, 4},
                                 [](Tensor x) {
                                   return Transpose(x, {2, 0, 1});
                                 }},
                      LayoutCase{"BroadcastRow",
                                 {3},
                                 [](Tensor x) {
                                   return BroadcastTo(x, {2, 3});
                                 }},
                      LayoutCase{"BroadcastCol",
                                 {2, 1},
                                 [](Tensor x) {
                                   return BroadcastTo(x, {4, 2, 3});
                                 }},
                      LayoutCase{"BroadcastScalar",
                                 {},
                                 [](Tensor x) {
                                   return BroadcastTo(x, {2, 2});
                                 }},
                      LayoutCase{"ConcatAxis0",
                                 {2, 3},
                                 [](Tensor x) {
                                   return Concat({x, Exp(x), x * 2.0}, 0);
                                 }},
                      LayoutCase{"ConcatAxis1",
                                 {2, 3},
                                 [](Tensor x) {
                                   return Concat({Slice(x, {0, 0}, {2, 1}), x}, -1);
                                 }},
                      LayoutCase{"Slice",
                                 {3, 4},
                                 [](Tensor x) {
                                   return Slice(x, {1, 1}, {2, 2});
                                 }},
                      LayoutCase{"SliceToEnd",
                                 {3, 4},
                                 [](Tensor x) {
                                   return Slice(x, {1, 2}, {-1, -1});
                                 }},
                      LayoutCase{"Pad",
                                 {2, 3},
                                 [](Tensor x) {
                                   return Pad(x, {{1, 0}, {2, 1}}, 5.0);
                                 }},
                      LayoutCase{"PadSliceRoundTrip",
                                 {3, 3},
                                 [](Tensor x) {
                                   return Slice(Pad(x, {{1, 1}, {0, 2}}), {0, 1}, {4, 3});
                                 }}),
    [](const ::testing::TestParamInfo<LayoutCase>& info) { return info.param.name; });

TEST(NonDifferentiableTest, ComparisonsOneHotAndHostCallGiveNoGradient) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {2, 3}, "x");
  Tensor zero = ScalarConst(g, 0, DType::kF64);
  Tensor cmp = Cast(Greater(x, zero), DType::kF64) + Cast(Less(x, zero), DType::kF64) +
               Cast(Equal(x, zero), DType::kF64);
  Tensor onehot = Sum(OneHot(Cast(x, DType::kI32), 4, 1, 0, DType::kF64), {-1});
  HostFunction twice =
      [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
    HostTensor out = in[0];
    for (int64_t i = 0; i < out.num_elements(); ++i) out.SetDouble(i, 2 * in[0].GetDouble(i));
    return std::vector<HostTensor>{out};
  };
  Tensor host = HostCall(g, "twice", {x}, {TensorSpec{DType::kF64, {2, 3}}}, twice)[0];
  for (const Tensor& y : {cmp, onehot, host}) {
    const int before = g.num_nodes();
    auto grads = Gradients({y}, {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    // Nothing but the zeros of the unconnected rule is built.
    for (int id = before; id < g.num_nodes(); ++id) {
      const OpKind op = g.node(id).op();
      EXPECT_TRUE(op == OpKind::kConst || op == OpKind::kBroadcastTo) << g.node(id).name();
    }
    HostTensor dx = RunReference(g, {}, *grads)[0];
    EXPECT_EQ(dx.ToVector<double>(), std::vector<double>(6, 0));
  }
}

}  // namespace
}  // namespace braze
