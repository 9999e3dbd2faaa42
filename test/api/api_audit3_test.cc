// The public API probed a third time as a user writing behaviour tests would (apiaudit3,
// 2026-11-30: the newer op families' arguments, precision, devices, files):
// each test failed (a silently wrong result or an error naming what the caller never
// wrote) before the fix it names.
#include <string>

#include "absl/strings/str_cat.h"
#include "braze/braze.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// The unfused ScaledDotProductAttention (AttentionOptions::fused = false) checked nothing
// the fused op's shape inference checks: with q's D unknown the default scale 1 / sqrt(D)
// was NaN and every output NaN; a dropout rate of -0.5 scaled the weights by 2/3, and 1.5
// made them all 0, silently. Each is now an error naming q.
TEST(ApiAudit3, UnfusedAttentionChecksItsScaleAndDropoutRateNamingQ) {
  AttentionOptions unfused;
  unfused.fused = false;
  {
    Graph g;
    Tensor q = Placeholder(g, DType::kF32, {3, -1}, "q");
    Tensor v = Placeholder(g, DType::kF32, {3, 2}, "v");
    EXPECT_FALSE(ScaledDotProductAttention(q, q, v, unfused).valid());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        Message(g.status()),
        HasSubstr("ScaledDotProductAttention of 'q' (unfused): scale nan is not finite (the "
                  "default 1 / sqrt(D) needs q's D known: q is f32[3,?])"));
  }
  for (double rate : {-0.5, 1.5}) {
    Graph g;
    Tensor q = Placeholder(g, DType::kF32, {3, 4}, "q");
    AttentionOptions o = unfused;
    o.dropout = rate;
    o.step = Placeholder(g, DType::kI32, {}, "step");
    EXPECT_FALSE(ScaledDotProductAttention(q, q, q, o).valid()) << rate;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << rate;
    EXPECT_THAT(Message(g.status()), HasSubstr(absl::StrCat("'q' (unfused): dropout rate ", rate,
                                                            " is outside [0, 1)")));
  }
  // An explicit scale with D unknown, and a rate in range, build and run as the fused op.
  Graph g;
  Tensor q = Placeholder(g, DType::kF32, {3, -1}, "q");
  AttentionOptions scaled = unfused;
  scaled.scale = 0.5;
  AttentionOptions fused_scaled = scaled;
  fused_scaled.fused = true;
  Tensor a = ScaledDotProductAttention(q, q, q, scaled);
  Tensor b = ScaledDotProductAttention(q, q, q, fused_scaled);
  ASSERT_TRUE(g.status().ok()) << g.status();
  const HostTensor qv = HostTensor::From<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto r = Session(g).Run({{q, qv}}, {a, b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(AllClose(r->at(0), r->at(1), 1e-5, 1e-6));
}

// Conv2D's strides or dilations of another length than 2 were read as a 0, and the error
// named it: TensorFlow's strides {1, 2, 2, 1} were "stride along H must be in [1, 2^20],
// got 0". The error now names the list the caller wrote and what Conv2D takes.
TEST(ApiAudit3, Conv2DStridesOfTheWrongLengthAreNamedAsWritten) {
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {1, 5, 5, 1}, "x");
    Tensor f = Placeholder(g, DType::kF32, {3, 3, 1, 1}, "f");
    EXPECT_FALSE(Conv2D(x, f, {1, 2, 2, 1}).valid());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(g.status()),
                HasSubstr("Conv2D of 'x': strides {1, 2, 2, 1}: Conv2D takes 2 ({h, w}), not 4"));
    EXPECT_THAT(Message(g.status()), Not(HasSubstr("got 0")));
  }
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {1, 5, 5, 1}, "x");
    Tensor f = Placeholder(g, DType::kF32, {3, 3, 1, 1}, "f");
    EXPECT_FALSE(Conv2D(x, f, {1, 1}, Padding::kValid, DataFormat::kNHWC, {2}).valid());
    EXPECT_THAT(Message(g.status()),
                HasSubstr("Conv2D of 'x': dilations {2}: Conv2D takes 2 ({h, w}), not 1"));
  }
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {1, 5, 5, 1}, "x");
  Tensor f = Placeholder(g, DType::kF32, {3, 3, 1, 1}, "f");
  EXPECT_EQ(Conv2D(x, f, {2, 2}).shape(), (Shape{1, 2, 2, 1}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

// A Padding or DataFormat outside its enum (an int cast to one, as a DType's was in the
// first audit): the padding's switch matched no case and left the output's H and W 0, a
// valid empty result; any format but NHWC was read as NCHW. Both are build errors now.
TEST(ApiAudit3, WindowPaddingAndFormatOutsideTheirEnumsAreErrors) {
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {1, 5, 5, 1}, "x");
    Tensor f = Placeholder(g, DType::kF32, {3, 3, 1, 1}, "f");
    Window2D w;
    w.padding = static_cast<Padding>(3);
    Conv2D(x, f, w);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(g.status()), HasSubstr("(Conv2D): unknown padding 3 (not a "
                                               "braze::Padding: VALID, SAME or EXPLICIT)"));
  }
  {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {1, 4, 4, 4}, "x");
    Pool2DAttrs p;
    p.size_h = p.size_w = 2;
    p.window.stride_h = p.window.stride_w = 2;
    p.window.format = static_cast<DataFormat>(2);
    MaxPool(x, p);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        Message(g.status()),
        HasSubstr("(MaxPool): unknown data format 2 (not a braze::DataFormat: NHWC or NCHW)"));
  }
}

}  // namespace
}  // namespace braze
