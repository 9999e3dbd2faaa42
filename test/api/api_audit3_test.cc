// The public API probed a third time as a user writing behaviour tests would (apiaudit3,
// 2026-11-30: the newer op families' arguments, operators, precision, devices, files):
// each test failed (a silently wrong result or an error naming what the caller never
// wrote) before the fix it names.
#include <functional>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace braze
