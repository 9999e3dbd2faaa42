#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

Shape S(const Tensor& t) { return t.shape(); }

std::string Error(const Graph& g) { return std::string(g.status().message()); }

TEST(ShapeInference, Broadcasting) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3});
  Tensor b = Placeholder(g, DType::kF32, {3});
  Tensor c = Placeholder(g, DType::kF32, {2, 1});
  Tensor d = Placeholder(g, DType::kF32, {1, 3});
  Tensor s = ScalarConst(g, 1.0);
  Tensor u = Placeholder(g, DType::kF32, {-1, 3});
  EXPECT_EQ(S(a + b), (Shape{2, 3}));
  EXPECT_EQ(S(c + d), (Shape{2, 3}));
  EXPECT_EQ(S(a * s), (Shape{2, 3}));
  EXPECT_EQ(S(u + b), (Shape{-1, 3}));
  EXPECT_EQ(S(u + a), (Shape{2, 3}));
  EXPECT_EQ(Greater(a, b).dtype(), DType::kBool);
  EXPECT_EQ(S(Select(Greater(c, d), a, s)), (Shape{2, 3}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(ShapeInference, ZeroSizeDimsAreValid) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {0, 3});
  EXPECT_EQ(S(a + 1.0), (Shape{0, 3}));
  EXPECT_EQ(S(Sum(a, {0})), (Shape{3}));
  EXPECT_EQ(S(MatMul(a, Placeholder(g, DType::kF32, {3, 5}))), (Shape{0, 5}));
  EXPECT_EQ(S(Reshape(a, {3, 0})), (Shape{3, 0}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(ShapeInference, ReductionsNegativeAxesAndKeepDims) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3, 4});
  EXPECT_EQ(S(Sum(a)), (Shape{}));
  EXPECT_EQ(S(Sum(a, {-1})), (Shape{2, 3}));
  EXPECT_EQ(S(Mean(a, {0, -1}, true)), (Shape{1, 3, 1}));
  EXPECT_EQ(S(Max(a, {1})), (Shape{2, 4}));
  EXPECT_EQ(S(ArgMax(a, -2)), (Shape{2, 4}));
  EXPECT_EQ(ArgMax(a, 0).dtype(), DType::kI32);
  EXPECT_EQ(Sum(a, {-1, 2}).node().attrs_as<ReduceAttrs>().axes, std::vector<int>{2});
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(ShapeInference, MatMulAndBatchMatMul) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3});
  Tensor b = Placeholder(g, DType::kF32, {4, 3});
  EXPECT_EQ(S(MatMul(a, b, false, true)), (Shape{2, 4}));
  EXPECT_EQ(S(MatMul(a, a, true, false)), (Shape{3, 3}));
  Tensor x = Placeholder(g, DType::kF32, {5, 2, 3});
  Tensor y = Placeholder(g, DType::kF32, {5, 3, 7});
  EXPECT_EQ(S(BatchMatMul(x, y)), (Shape{5, 2, 7}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(ShapeInference, Layout) {
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {2, 3, 4});
  EXPECT_EQ(S(Reshape(a, {-1, 4})), (Shape{6, 4}));
  EXPECT_EQ(S(Reshape(a, {24})), (Shape{24}));
  EXPECT_EQ(S(Transpose(a, {2, 0, 1})), (Shape{4, 2, 3}));
  EXPECT_EQ(S(BroadcastTo(Placeholder(g, DType::kF32, {3, 1}), {2, 3, 5})), (Shape{2, 3, 5}));
  EXPECT_EQ(S(Concat({a, a}, -1)), (Shape{2, 3, 8}));
  EXPECT_EQ(S(Slice(a, {1, 0, 1}, {1, -1, 2})), (Shape{1, 3, 2}));
  EXPECT_EQ(S(Pad(a, {{1, 0}, {0, 0}, {2, 3}})), (Shape{3, 3, 9}));
  Tensor idx = Placeholder(g, DType::kI32, {5});
  EXPECT_EQ(S(OneHot(idx, 10)), (Shape{5, 10}));
  Tensor u = Placeholder(g, DType::kF32, {-1, 4});
  EXPECT_EQ(S(Reshape(u, {-1, 2, 2})), (Shape{-1, 2, 2}));
  // BroadcastTo's -1 keeps the input's dim aligned with it.
  EXPECT_EQ(S(BroadcastTo(Placeholder(g, DType::kF32, {-1, 1}), {-1, 5})), (Shape{-1, 5}));
  EXPECT_EQ(S(BroadcastTo(Placeholder(g, DType::kF32, {3, 1}), {2, -1, 5})), (Shape{2, 3, 5}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(ShapeInference, CompositesKeepShapes) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 10}, "x");
  EXPECT_EQ(S(Softmax(x)), (Shape{-1, 10}));
  EXPECT_EQ(S(LogSoftmax(x)), (Shape{-1, 10}));
  EXPECT_EQ(S(SoftmaxCrossEntropyWithLogits(x, x)), (Shape{-1}));
  EXPECT_EQ(S(Gelu(x)), (Shape{-1, 10}));
  Tensor gamma = Placeholder(g, DType::kF32, {10});
  EXPECT_EQ(S(LayerNorm(x, gamma, gamma)), (Shape{-1, 10}));
  Tensor w = Placeholder(g, DType::kF32, {10, 4});
  Tensor b = Placeholder(g, DType::kF32, {4});
  EXPECT_EQ(S(Dense(x, w, b, Activation::kRelu)), (Shape{-1, 4}));
  EXPECT_EQ(Softmax(x).node().name().rfind("Softmax_1/", 0), 0u);
  EXPECT_TRUE(g.status().ok()) << g.status();
}

// Each build-time error is a Status that names the node.
struct ErrorCase {
  const char* name;
  std::function<void(Graph&)> build;
  const char* node;
  const char* message;
};

class BuildErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(BuildErrors, NamesTheNode) {
  Graph g;
  GetParam().build(g);
  ASSERT_FALSE(g.status().ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Error(g), HasSubstr(GetParam().node));
  EXPECT_THAT(Error(g), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    All, BuildErrors,
    ::testing::Values(
        ErrorCase{"broadcast",
                  [](Graph& g) {
                    Add(Placeholder(g, DType::kF32, {2, 3}), Placeholder(g, DType::kF32, {2}));
                  },
                  "'Add'", "incompatible shapes for broadcasting: [2,3] and [2]"},
        ErrorCase{
            "matmul",
            [](Graph& g) {
              MatMul(Placeholder(g, DType::kF32, {2, 3}), Placeholder(g, DType::kF32, {4, 5}));
            },
            "'MatMul'", "matmul inner dimensions differ"},
        ErrorCase{"axis",
                  [](Graph& g) {
                    Sum(Placeholder(g, DType::kF32, {2, 3}), {2});
                  },
                  "'Sum'", "reduction axis 2 out of range for rank 2"},
        ErrorCase{"negative_axis",
                  [](Graph& g) {
                    Max(Placeholder(g, DType::kF32, {2, 3}), {-3});
                  },
                  "'Max'", "out of range"},
        ErrorCase{"argmax_axis",
                  [](Graph& g) {
                    ArgMax(Placeholder(g, DType::kF32, {2, 3}), 5);
                  },
                  "'ArgMax'", "out of range"},
        ErrorCase{"reshape",
                  [](Graph& g) {
                    Reshape(Placeholder(g, DType::kF32, {2, 3}), {4, 2});
                  },
                  "'Reshape'", "reshape size mismatch"},
        ErrorCase{"reshape_minus_one",
                  [](Graph& g) {
                    Reshape(Placeholder(g, DType::kF32, {2, 3}), {-1, 4});
                  },
                  "'Reshape'", "reshape size mismatch"},
        ErrorCase{"perm",
                  [](Graph& g) {
                    Transpose(Placeholder(g, DType::kF32, {2, 3}), {0, 0});
                  },
                  "'Transpose'", "invalid perm [0,0]"},
        ErrorCase{"dtype",
                  [](Graph& g) {
                    Add(Placeholder(g, DType::kF32, {2}), Placeholder(g, DType::kI32, {2}));
                  },
                  "'Add'", "operand dtypes differ"},
        ErrorCase{"log_int", [](Graph& g) { Log(Placeholder(g, DType::kI32, {2}, "ints")); },
                  "'Log'", "does not support dtype i32"},
        ErrorCase{"slice",
                  [](Graph& g) {
                    Slice(Placeholder(g, DType::kF32, {2, 3}), {1, 0}, {2, 3});
                  },
                  "'Slice'", "out of bounds"},
        ErrorCase{
            "concat",
            [](Graph& g) {
              Concat({Placeholder(g, DType::kF32, {2, 3}), Placeholder(g, DType::kF32, {3, 3})}, 1);
            },
            "'Concat'", "incompatible"},
        ErrorCase{"assign_non_variable",
                  [](Graph& g) {
                    Tensor p = Placeholder(g, DType::kF32, {2}, "p");
                    Assign(p, p);
                  },
                  "'Assign'", "must be a Variable"},
        ErrorCase{"assign_shape",
                  [](Graph& g) {
                    Tensor v = Variable(g, HostTensor(DType::kF32, {2}), "v");
                    Assign(v, Placeholder(g, DType::kF32, {3}));
                  },
                  "'Assign'", "cannot assign f32[3] to a variable of f32[2]"},
        ErrorCase{"select_cond",
                  [](Graph& g) {
                    Tensor a = Placeholder(g, DType::kF32, {2});
                    Select(a, a, a);
                  },
                  "'Select'", "condition must be bool"},
        ErrorCase{"broadcast_to",
                  [](Graph& g) {
                    BroadcastTo(Placeholder(g, DType::kF32, {3}), {2, 4});
                  },
                  "'BroadcastTo'", "cannot broadcast [3] to [2,4]"},
        ErrorCase{"broadcast_to_unknown_lead",
                  [](Graph& g) {
                    BroadcastTo(Placeholder(g, DType::kF32, {3}), {-1, 3});
                  },
                  "'BroadcastTo'", "has -1 at 0, where [3] has no dim to keep"},
        ErrorCase{"onehot", [](Graph& g) { OneHot(Placeholder(g, DType::kF32, {3}), 4); },
                  "'OneHot'", "indices must be i32"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace braze
