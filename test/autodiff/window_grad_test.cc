// Gradients of the window ops against f64 finite differences (grad_check.h): Conv2D
// (input and filter: paddings, strides, dilations, groups, both formats), its gradient
// ops Conv2DBackpropInput and Conv2DBackpropFilter w.r.t. both inputs (second order),
// MaxPool (inputs without ties), MaxPoolGrad and MaxPoolGradGrad w.r.t. the routed
// values (and x, whose gradient is 0: the routing is piecewise constant), AvgPool and
// AvgPoolGrad; a -1 batch fed with several sizes; gradients the ops cannot give.
#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::AwayFromZero;
using gradtest::CheckGradients;
using gradtest::Distinct;
using gradtest::RunReference;
using ::testing::HasSubstr;

Window2D MakeWindow(int sh, int sw, Padding p, int dh = 1, int dw = 1,
                    std::array<int64_t, 4> pads = {0, 0, 0, 0}) {
  Window2D w;
  w.stride_h = sh;
  w.stride_w = sw;
  w.dilation_h = dh;
  w.dilation_w = dw;
  w.padding = p;
  w.pad_top = pads[0];
  w.pad_bottom = pads[1];
  w.pad_left = pads[2];
  w.pad_right = pads[3];
  return w;
}

// [N, H, W, C] in `format`.
Shape Nhwc(DataFormat format, int64_t n, int64_t h, int64_t w, int64_t c) {
  return format == DataFormat::kNHWC ? Shape{n, h, w, c} : Shape{n, c, h, w};
}

struct ConvCase {
  std::string name;
  int64_t n, h, w, c_in;
  int64_t kh, kw, c_out;
  int64_t groups;
  Window2D window;
};
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

std::vector<ConvCase> ConvCases() {
  std::vector<ConvCase> base = {
      {"Valid", 1, 5, 4, 2, 3, 2, 3, 1, MakeWindow(1, 1, Padding::kValid)},
      {"ValidStrideLeavesRows", 1, 6, 7, 2, 2, 3, 2, 1, MakeWindow(3, 2, Padding::kValid)},
      {"SameStride2", 2, 5, 6, 2, 3, 3, 2, 1, MakeWindow(2, 2, Padding::kSame)},
      {"SameDilated", 1, 6, 5, 2, 2, 3, 2, 1, MakeWindow(1, 1, Padding::kSame, 2, 2)},
      {"ValidDilatedStrided", 1, 7, 6, 1, 2, 2, 2, 1, MakeWindow(2, 1, Padding::kValid, 3, 2)},
      {"Explicit", 1, 5, 5, 3, 3, 2, 2, 1,
       MakeWindow(2, 1, Padding::kExplicit, 1, 1, {1, 2, 0, 1})},
      {"Groups2", 1, 4, 5, 4, 2, 2, 4, 2, MakeWindow(1, 1, Padding::kSame)},
      {"Depthwise", 2, 4, 4, 3, 3, 3, 3, 3, MakeWindow(2, 2, Padding::kSame)},
      {"DepthwiseMultiplier", 1, 4, 5, 2, 2, 2, 4, 2, MakeWindow(1, 1, Padding::kValid, 1, 2)},
  };
  std::vector<ConvCase> cases;
  for (const ConvCase& c : base) {
    for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      ConvCase k = c;
      k.window.format = f;
      k.name += f == DataFormat::kNHWC ? "NHWC" : "NCHW";
      cases.push_back(k);
    }
  }
  return cases;
}

class WindowConvGradTest : public ::testing::TestWithParam<ConvCase> {
 protected:
  Shape XShape() const {
    const ConvCase& c = GetParam();
    return Nhwc(c.window.format, c.n, c.h, c.w, c.c_in);
  }
  Shape FShape() const {
    const ConvCase& c = GetParam();
    return {c.kh, c.kw, c.c_in / c.groups, c.c_out};
  }
};

TEST_P(WindowConvGradTest, Conv2DInputAndFilter) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor f = Placeholder(g, DType::kF64, FShape(), "f");
  Tensor y = Conv2D(x, f, GetParam().window);
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(y, {{x, AwayFromZero(XShape(), 1)}, {f, AwayFromZero(FShape(), 2)}}));
}

// Conv2DBackpropInput(filter, dy) is linear in each: its gradients are a
// Conv2DBackpropFilter (filter) and a Conv2D (dy).
TEST_P(WindowConvGradTest, Conv2DBackpropInputFilterAndDy) {
  Graph g;
  Tensor probe = Conv2D(Placeholder(g, DType::kF64, XShape()),
                        Placeholder(g, DType::kF64, FShape()), GetParam().window);
  ASSERT_TRUE(g.status().ok()) << g.status();
  Tensor f = Placeholder(g, DType::kF64, FShape(), "f");
  Tensor dy = Placeholder(g, DType::kF64, probe.shape(), "dy");
  Tensor dx = Conv2DBackpropInput(XShape(), f, dy, GetParam().window);
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(
      CheckGradients(dx, {{f, AwayFromZero(FShape(), 3)}, {dy, AwayFromZero(probe.shape(), 4)}}));
}

// Conv2DBackpropFilter(x, dy): its gradients are a Conv2DBackpropInput (x) and a Conv2D
// (dy).
TEST_P(WindowConvGradTest, Conv2DBackpropFilterXAndDy) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor probe = Conv2D(x, Placeholder(g, DType::kF64, FShape()), GetParam().window);
  ASSERT_TRUE(g.status().ok()) << g.status();
  Tensor dy = Placeholder(g, DType::kF64, probe.shape(), "dy");
  Tensor df = Conv2DBackpropFilter(x, FShape(), dy, GetParam().window);
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(
      CheckGradients(df, {{x, AwayFromZero(XShape(), 5)}, {dy, AwayFromZero(probe.shape(), 6)}}));
}

INSTANTIATE_TEST_SUITE_P(Window, WindowConvGradTest, ::testing::ValuesIn(ConvCases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) {
                           return info.param.name;
                         });

struct PoolCase {
  std::string name;
  int64_t n, h, w, c;
  int64_t kh, kw;
  Window2D window;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

std::vector<PoolCase> PoolCases() {
  std::vector<PoolCase> base = {
      {"Valid3x3Stride2", 1, 7, 5, 2, 3, 3, MakeWindow(2, 2, Padding::kValid)},
      {"SameUneven2x2Stride2", 2, 5, 3, 2, 2, 2, MakeWindow(2, 2, Padding::kSame)},
      {"Same3x3Stride1", 1, 4, 5, 1, 3, 3, MakeWindow(1, 1, Padding::kSame)},
      {"ValidStrideLargerThanWindow", 1, 7, 8, 1, 2, 2, MakeWindow(3, 3, Padding::kValid)},
      {"Explicit", 1, 5, 4, 2, 3, 2, MakeWindow(2, 1, Padding::kExplicit, 1, 1, {2, 1, 1, 0})},
  };
  std::vector<PoolCase> cases;
  for (const PoolCase& c : base) {
    for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
      PoolCase k = c;
      k.window.format = f;
      k.name += f == DataFormat::kNHWC ? "NHWC" : "NCHW";
      cases.push_back(k);
    }
  }
  return cases;
}

class WindowPoolGradTest : public ::testing::TestWithParam<PoolCase> {
 protected:
  Pool2DAttrs Attrs() const {
    Pool2DAttrs a;
    a.size_h = GetParam().kh;
    a.size_w = GetParam().kw;
    a.window = GetParam().window;
    return a;
  }
  Shape XShape() const {
    const PoolCase& c = GetParam();
    return Nhwc(c.window.format, c.n, c.h, c.w, c.c);
  }
};

TEST_P(WindowPoolGradTest, MaxPoolWithoutTies) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor y = MaxPool(x, Attrs());
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(y, {{x, Distinct(XShape(), 11)}}));
}

TEST_P(WindowPoolGradTest, AvgPool) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor y = AvgPool(x, Attrs());
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(y, {{x, AwayFromZero(XShape(), 12)}}));
}

// MaxPoolGrad(x, dy) is linear in dy (its gradient: MaxPoolGradGrad) and piecewise
// constant in x (0, which finite differences on distinct values also give).
TEST_P(WindowPoolGradTest, MaxPoolGradRoutedValuesAndX) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor probe = MaxPool(x, Attrs());
  Tensor dy = Placeholder(g, DType::kF64, probe.shape(), "dy");
  Tensor dx = MaxPoolGrad(x, dy, Attrs());
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(
      CheckGradients(dx, {{x, Distinct(XShape(), 13)}, {dy, AwayFromZero(probe.shape(), 14)}}));
}

TEST_P(WindowPoolGradTest, MaxPoolGradGradRoutedValuesAndX) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, XShape(), "x");
  Tensor grad = Placeholder(g, DType::kF64, XShape(), "grad");
  Tensor y = MaxPoolGradGrad(x, grad, Attrs());
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(y, {{x, Distinct(XShape(), 15)}, {grad, AwayFromZero(XShape(), 16)}}));
}

TEST_P(WindowPoolGradTest, AvgPoolGrad) {
  Graph g;
  Tensor probe = AvgPool(Placeholder(g, DType::kF64, XShape()), Attrs());
  Tensor dy = Placeholder(g, DType::kF64, probe.shape(), "dy");
  Tensor dx = AvgPoolGrad(XShape(), dy, Attrs());
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_TRUE(CheckGradients(dx, {{dy, AwayFromZero(probe.shape(), 17)}}));
}

INSTANTIATE_TEST_SUITE_P(Window, WindowPoolGradTest, ::testing::ValuesIn(PoolCases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return info.param.name;
                         });

// A small network on a placeholder with a -1 batch: Conv2D -> MaxPool -> Conv2D (NCHW
// in between) -> AvgPool. The gradient ops take their batch from dy at run time.
TEST(WindowGradTest, UnknownBatchIsTakenFromDyAtRunTime) {
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE(batch);
    Graph g;
    Tensor x = Placeholder(g, DType::kF64, {-1, 6, 5, 2}, "x");
    Tensor f1 = Placeholder(g, DType::kF64, {3, 3, 2, 3}, "f1");
    Tensor f2 = Placeholder(g, DType::kF64, {2, 2, 1, 3}, "f2");  // 3 groups
    Tensor h = Conv2D(x, f1, {1, 1}, Padding::kSame);
    h = MaxPool(h, {2, 2}, {2, 1}, Padding::kSame);
    h = Transpose(h, {0, 3, 1, 2});
    h = Conv2D(h, f2, {1, 1}, Padding::kValid, DataFormat::kNCHW);
    Tensor y = AvgPool(h, {2, 2}, {1, 1}, Padding::kSame, DataFormat::kNCHW);
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_EQ(y.shape(), (Shape{-1, 3, 2, 4}));
    EXPECT_TRUE(CheckGradients(y, {{x, AwayFromZero({batch, 6, 5, 2}, 21)},
                                   {f1, AwayFromZero({3, 3, 2, 3}, 22)},
                                   {f2, AwayFromZero({2, 2, 1, 3}, 23)}}));
  }
}

// One gradient graph with a -1 batch, run with several batches in one session; the
// second-order ops too.
TEST(WindowGradTest, OneGraphRunsWithSeveralFedBatches) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF64, {-1, 5, 5, 2}, "x");
  Tensor f = Placeholder(g, DType::kF64, {3, 3, 2, 2}, "f");
  const Window2D w = MakeWindow(2, 2, Padding::kSame);
  Tensor y = Conv2D(x, f, w);
  Tensor pooled = AvgPool(MaxPool(y, {2, 2}, {1, 1}), {2, 2}, {1, 1}, Padding::kSame);
  auto first = Gradients({Sum(Square(pooled))}, {x, f});
  ASSERT_TRUE(first.ok()) << first.status();
  // Second order: the gradient of the filter gradient's norm w.r.t. x and f.
  auto second = Gradients({Sum(Square((*first)[1]))}, {x, f});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ((*first)[0].shape(), (Shape{-1, 5, 5, 2}));
  Session session(g, gradtest::ReferenceOnly());
  for (int64_t batch : {2, 1, 4}) {
    const HostTensor xv = AwayFromZero({batch, 5, 5, 2}, 30 + batch);
    auto out = session.Run({{x, xv}, {f, AwayFromZero({3, 3, 2, 2}, 29)}},
                           {(*first)[0], (*first)[1], (*second)[0], (*second)[1]});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{batch, 5, 5, 2}));
    EXPECT_EQ((*out)[1].shape(), (Shape{3, 3, 2, 2}));
    EXPECT_EQ((*out)[2].shape(), (Shape{batch, 5, 5, 2}));
    EXPECT_EQ((*out)[3].shape(), (Shape{3, 3, 2, 2}));
  }
}

// The gradient ops carry the shape they differentiate: only its batch may be unknown.
TEST(WindowGradTest, UnknownSpatialDimsAreUnimplementedNamingTheNode) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2, -1, -1, 3}, "x");
  Tensor f = Placeholder(g, DType::kF32, {3, 3, 3, 4}, "f");
  Tensor y = Conv2D(x, f, {1, 1}, Padding::kSame, DataFormat::kNHWC, {1, 1});
  ASSERT_TRUE(g.status().ok()) << g.status();
  EXPECT_EQ(y.shape(), (Shape{2, -1, -1, 4}));
  auto grads = Gradients({y}, {f});
  ASSERT_FALSE(grads.ok());
  EXPECT_EQ(grads.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(grads.status().message()), HasSubstr(y.name()));
  EXPECT_THAT(std::string(grads.status().message()),
              HasSubstr("only its batch dim may be unknown"));
  // A pool of unknown H and W, NCHW.
  Tensor xp = Placeholder(g, DType::kF32, {-1, 3, -1, 8}, "xp");
  Tensor p = AvgPool(xp, {2, 2}, {2, 2}, Padding::kValid, DataFormat::kNCHW);
  auto pool_grads = Gradients({p}, {xp});
  ASSERT_FALSE(pool_grads.ok());
  EXPECT_THAT(std::string(pool_grads.status().message()), HasSubstr(p.name()));
}

// dy of the wrong batch at run time: the gradient op's error names it.
TEST(WindowGradTest, DyOfTheWrongShapeAtRunTimeNamesTheNode) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 4, 4, 1}, "x");
  Tensor dy = Placeholder(g, DType::kF32, {-1, 2, 2, 1}, "dy");
  Pool2DAttrs a;
  a.size_h = a.size_w = 2;
  a.window = MakeWindow(2, 2, Padding::kValid);
  Tensor dx = MaxPoolGrad(x, dy, a);
  ASSERT_TRUE(g.status().ok()) << g.status();
  Session session(g, gradtest::ReferenceOnly());
  auto out = session.Run(
      {{x, HostTensor(DType::kF32, {2, 4, 4, 1})}, {dy, HostTensor(DType::kF32, {3, 2, 2, 1})}},
      {dx});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr(dx.name()));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("[3,2,2,1]"));
  // A 3x3 VALID filter on 4x4 makes [*, 2, 2]; a dy of [*, 3, 3] is a build error.
  Graph g2;
  Tensor dy3 = Placeholder(g2, DType::kF32, {-1, 3, 3, 1}, "dy3");
  Tensor bad = Conv2DBackpropInput({-1, 4, 4, 1}, Placeholder(g2, DType::kF32, {3, 3, 1, 1}), dy3,
                                   MakeWindow(1, 1, Padding::kValid));
  EXPECT_FALSE(g2.status().ok());
  EXPECT_THAT(std::string(g2.status().message()), HasSubstr(bad.name()));
  EXPECT_THAT(std::string(g2.status().message()),
              HasSubstr("the output gradient is [?,3,3,1]; expected [?,2,2,1]"));
}

}  // namespace
}  // namespace braze
