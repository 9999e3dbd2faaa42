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
  EXPECT_EQ(Sum(a, {-1, 0}).node().attrs_as<ReduceAttrs>().axes, (std::vector<int>{0, 2}));
  EXPECT_TRUE(g.status().ok()) << g.status();
  // One axis named twice (-1 and 2 of rank 3) is an error, as in TensorFlow, NumPy and
  // JAX, not a set.
  Sum(a, {-1, 2});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr("must be unique: 2,2"));
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

// The window ops: each bad shape or attribute is an InvalidArgument naming the node and
// saying what is wrong (docs/BAD_INPUT.md).
Window2D Strided(int sh, int sw, Padding padding = Padding::kValid) {
  Window2D w;
  w.stride_h = sh;
  w.stride_w = sw;
  w.padding = padding;
  return w;
}
Pool2DAttrs Pool(int64_t kh, int64_t kw, int sh, int sw, Padding padding = Padding::kValid) {
  Pool2DAttrs a;
  a.size_h = kh;
  a.size_w = kw;
  a.window = Strided(sh, sw, padding);
  return a;
}
Tensor F32(Graph& g, Shape s) { return Placeholder(g, DType::kF32, std::move(s)); }

INSTANTIATE_TEST_SUITE_P(
    Window, BuildErrors,
    ::testing::Values(
        ErrorCase{"conv_rank",
                  [](Graph& g) {
                    Conv2D(F32(g, {2, 3, 3}), F32(g, {1, 1, 3, 1}));
                  },
                  "'Conv2D'", "the input must have rank 4, got [2,3,3]"},
        ErrorCase{"conv_filter_rank",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 2}), F32(g, {3, 3, 2}));
                  },
                  "'Conv2D'",
                  "the filter [KH, KW, C_in / groups, C_out] must have rank 4, got [3,3,2]"},
        ErrorCase{"conv_groups",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 5}), F32(g, {1, 1, 2, 4}));
                  },
                  "'Conv2D'", "input channels 5 are not a multiple of the filter's 2"},
        ErrorCase{"conv_groups_nchw",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 6, 3, 3}), F32(g, {1, 1, 4, 4}), {1, 1}, Padding::kValid,
                           DataFormat::kNCHW);
                  },
                  "'Conv2D'", "input channels 6 are not a multiple of the filter's 4"},
        ErrorCase{"conv_out_groups",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 4}), F32(g, {1, 1, 2, 3}));
                  },
                  "'Conv2D'", "output channels 3 are not a multiple of the 2 groups"},
        ErrorCase{"conv_stride_0",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 1}), F32(g, {1, 1, 1, 1}), {0, 1}, Padding::kSame);
                  },
                  "'Conv2D'", "stride along H must be in [1, 2^20], got 0"},
        ErrorCase{"conv_dilation_0",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 1}), F32(g, {1, 1, 1, 1}), {1, 1}, Padding::kSame,
                           DataFormat::kNHWC, {1, 0});
                  },
                  "'Conv2D'", "dilation along W must be in [1, 2^20], got 0"},
        ErrorCase{"conv_valid_window_larger",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 2, 5, 1}), F32(g, {3, 3, 1, 1}));
                  },
                  "'Conv2D'", "H is 2, smaller than the window's extent 3"},
        ErrorCase{"conv_valid_dilated_window_larger",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 5, 4, 1}), F32(g, {2, 2, 1, 1}), {1, 1}, Padding::kValid,
                           DataFormat::kNHWC, {1, 4});
                  },
                  "'Conv2D'", "W is 4, smaller than the window's extent 5"},
        ErrorCase{"conv_explicit_negative_pad",
                  [](Graph& g) {
                    Window2D w = Strided(1, 1, Padding::kExplicit);
                    w.pad_left = -1;
                    Conv2D(F32(g, {1, 3, 3, 1}), F32(g, {1, 1, 1, 1}), w);
                  },
                  "'Conv2D'", "explicit padding along W must be in [0, 2^20], got -1 and 0"},
        ErrorCase{"conv_pads_without_explicit",
                  [](Graph& g) {
                    Window2D w = Strided(1, 1, Padding::kSame);
                    w.pad_bottom = 1 << 30;
                    Conv2D(F32(g, {1, 3, 3, 1}), F32(g, {1, 1, 1, 1}), w);
                  },
                  "'Conv2D'",
                  "pads along H are for EXPLICIT padding; SAME takes none, got 0 and 1073741824"},
        ErrorCase{"pool_pads_without_explicit",
                  [](Graph& g) {
                    Pool2DAttrs a = Pool(2, 2, 1, 1);
                    a.window.pad_left = 1;
                    MaxPool(F32(g, {1, 4, 4, 1}), a);
                  },
                  "'MaxPool'",
                  "pads along W are for EXPLICIT padding; VALID takes none, got 1 and 0"},
        ErrorCase{"conv_i32",
                  [](Graph& g) {
                    Conv2D(Placeholder(g, DType::kI32, {1, 3, 3, 1}),
                           Placeholder(g, DType::kI32, {1, 1, 1, 1}));
                  },
                  "'Conv2D'", "Conv2D does not support dtype i32"},
        ErrorCase{"conv_mixed_dtypes",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 1}), Placeholder(g, DType::kF64, {1, 1, 1, 1}));
                  },
                  "'Conv2D'", "operand dtypes differ: f32[1,3,3,1] and f64[1,1,1,1]"},
        ErrorCase{"conv_unknown_filter_window",
                  [](Graph& g) {
                    Conv2D(F32(g, {1, 3, 3, 1}), F32(g, {-1, 1, 1, 1}));
                  },
                  "'Conv2D'", "must have known spatial dims"},
        ErrorCase{"conv_backprop_input_dy",
                  [](Graph& g) {
                    Conv2DBackpropInput({1, 4, 4, 1}, F32(g, {3, 3, 1, 1}), F32(g, {1, 3, 3, 1}),
                                        Window2D{});
                  },
                  "'Conv2DBackpropInput'", "the output gradient is [1,3,3,1]; expected [1,2,2,1]"},
        ErrorCase{"conv_backprop_input_unknown_hw",
                  [](Graph& g) {
                    Conv2DBackpropInput({1, -1, 4, 1}, F32(g, {3, 3, 1, 1}), F32(g, {1, 3, 2, 1}),
                                        Window2D{});
                  },
                  "'Conv2DBackpropInput'",
                  "the input shape [1,?,4,1] must be known but for its batch dim"},
        ErrorCase{"conv_backprop_filter_dy",
                  [](Graph& g) {
                    Conv2DBackpropFilter(F32(g, {2, 5, 5, 3}), {2, 2, 3, 4}, F32(g, {2, 4, 4, 3}),
                                         Window2D{});
                  },
                  "'Conv2DBackpropFilter'", "the output gradient is [2,4,4,3]; expected [2,4,4,4]"},
        ErrorCase{"conv_backprop_filter_unknown_shape",
                  [](Graph& g) {
                    Conv2DBackpropFilter(F32(g, {2, 5, 5, 3}), {2, -1, 3, 4}, F32(g, {2, 4, 4, 4}),
                                         Window2D{});
                  },
                  "'Conv2DBackpropFilter'", "filter shape [2,?,3,4] must be fully defined"},
        ErrorCase{"pool_rank",
                  [](Graph& g) {
                    MaxPool(F32(g, {4, 4, 1}), {2, 2}, {1, 1});
                  },
                  "'MaxPool'", "the input must have rank 4, got [4,4,1]"},
        ErrorCase{"pool_stride_0",
                  [](Graph& g) {
                    AvgPool(F32(g, {1, 4, 4, 1}), {2, 2}, {1, 0});
                  },
                  "'AvgPool'", "stride along W must be in [1, 2^20], got 0"},
        ErrorCase{"pool_window_0",
                  [](Graph& g) {
                    MaxPool(F32(g, {1, 4, 4, 1}), {0, 2}, {1, 1});
                  },
                  "'MaxPool'", "window along H must be in [1, 2^20], got 0"},
        ErrorCase{"pool_window_0_explicit",
                  [](Graph& g) {
                    Pool2DAttrs a = Pool(2, 0, 1, 1, Padding::kExplicit);
                    MaxPool(F32(g, {1, 4, 4, 1}), a);
                  },
                  "'MaxPool'", "window along W must be in [1, 2^20], got 0"},
        ErrorCase{"pool_valid_window_larger",
                  [](Graph& g) {
                    MaxPool(F32(g, {1, 4, 2, 1}), {3, 3}, {1, 1});
                  },
                  "'MaxPool'", "W is 2, smaller than the window's extent 3"},
        ErrorCase{"pool_explicit_pad_not_smaller_than_window",
                  [](Graph& g) {
                    Pool2DAttrs a = Pool(3, 2, 1, 1, Padding::kExplicit);
                    a.window.pad_right = 2;
                    AvgPool(F32(g, {1, 4, 4, 1}), a);
                  },
                  "'AvgPool'",
                  "explicit pooling pads must be smaller than the 3x2 window, got top 0, bottom 0, "
                  "left 0, right 2"},
        ErrorCase{"pool_dilation",
                  [](Graph& g) {
                    Pool2DAttrs a = Pool(2, 2, 1, 1);
                    a.window.dilation_h = 2;
                    MaxPool(F32(g, {1, 4, 4, 1}), a);
                  },
                  "'MaxPool'", "pooling windows take no dilation"},
        ErrorCase{"pool_i32",
                  [](Graph& g) {
                    AvgPool(Placeholder(g, DType::kI32, {1, 4, 4, 1}), {2, 2}, {2, 2});
                  },
                  "'AvgPool'", "AvgPool does not support dtype i32"},
        ErrorCase{"max_pool_grad_dy",
                  [](Graph& g) {
                    MaxPoolGrad(F32(g, {1, 4, 4, 2}), F32(g, {1, 2, 2, 1}), Pool(2, 2, 2, 2));
                  },
                  "'MaxPoolGrad'", "the output gradient is [1,2,2,1]; expected [1,2,2,2]"},
        ErrorCase{"max_pool_grad_grad_g",
                  [](Graph& g) {
                    MaxPoolGradGrad(F32(g, {1, 4, 4, 2}), F32(g, {1, 2, 2, 2}), Pool(2, 2, 2, 2));
                  },
                  "'MaxPoolGradGrad'", "the gradient's gradient is [1,2,2,2]; expected [1,4,4,2]"},
        ErrorCase{"avg_pool_grad_dy",
                  [](Graph& g) {
                    AvgPoolGrad({1, 5, 5, 1}, F32(g, {1, 2, 2, 1}), Pool(3, 3, 1, 1));
                  },
                  "'AvgPoolGrad'", "the output gradient is [1,2,2,1]; expected [1,3,3,1]"},
        ErrorCase{"avg_pool_grad_unknown_hw",
                  [](Graph& g) {
                    AvgPoolGrad({-1, 5, -1, 1}, F32(g, {1, 3, 3, 1}), Pool(3, 3, 1, 1));
                  },
                  "'AvgPoolGrad'", "the input shape [?,5,?,1] must be known but for its batch dim"},
        ErrorCase{"max_pool_grad_i32",
                  [](Graph& g) {
                    MaxPoolGrad(Placeholder(g, DType::kI32, {1, 4, 4, 1}),
                                Placeholder(g, DType::kI32, {1, 2, 2, 1}), Pool(2, 2, 2, 2));
                  },
                  "'MaxPoolGrad'", "MaxPoolGrad does not support dtype i32"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace braze
