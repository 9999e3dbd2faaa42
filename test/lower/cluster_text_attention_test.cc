// The text form and cache key of the attention ops: every attribute (causal, scale,
// dropout, seed, op key) round-trips to the same text and key, each changes the key,
// and a bad attribute names what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "braze/ops.h"
#include "compile/cluster_key.h"
#include "lower/cluster_text.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace {

using lowertest::Case;
using lowertest::SpecOf;
using ::testing::HasSubstr;

Case EveryAttentionOp(const AttentionAttrs& a) {
  Case c;
  Tensor q = c.Input(DType::kF32, {2, 5, 4}, 1), k = c.Input(DType::kF32, {2, 7, 4}, 2),
         v = c.Input(DType::kF32, {2, 7, 3}, 3), dout = c.Input(DType::kF32, {2, 5, 3}, 4);
  Tensor step = a.dropout != 0 ? c.Input(HostTensor::Scalar<int32_t>(1)) : Tensor();
  Tensor lse = AttentionLogSumExp(q, k, a);
  Tensor delta = Sum(dout * Attention(q, k, v, a, step), {-1});
  c.outputs = {AttentionGrad(OpKind::kAttentionGradQ, q, k, v, dout, lse, delta, a, step),
               AttentionGrad(OpKind::kAttentionGradK, q, k, v, dout, lse, delta, a, step),
               AttentionGrad(OpKind::kAttentionGradV, q, k, v, dout, lse, delta, a, step)};
  return c;
}

std::string Text(const ClusterSpec& spec) {
  absl::StatusOr<std::string> text = ClusterToText(spec);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

AttentionAttrs Base() {
  AttentionAttrs a;
  a.causal = true;
  a.scale = 0.3;
  a.dropout = 0.25;
  a.seed = 12345678901234ull;
  a.op_key = 98765432109876ull;
  return a;
}

TEST(ClusterTextAttention, AttrsRoundTripToTheSameTextAndKey) {
  Case c = EveryAttentionOp(Base());
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "att");
  const std::string text = Text(spec);
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, "att.cluster");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status() << "\n" << text;
  EXPECT_EQ(Text(rebuilt->spec), text);
  EXPECT_EQ(ClusterKey(rebuilt->spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  EXPECT_THAT(text, HasSubstr(" Attention causal=1 "));
  EXPECT_THAT(text, HasSubstr("seed=12345678901234 op_key=98765432109876"));
}

TEST(ClusterTextAttention, EveryAttributeChangesTheKey) {
  const std::string base = ClusterKey(SpecOf(EveryAttentionOp(Base()), "att"), CompileOptions{});
  const std::vector<std::function<void(AttentionAttrs&)>> changes = {
      [](AttentionAttrs& a) { a.causal = false; },
      [](AttentionAttrs& a) { a.scale = 0.30000000000000004; },
      [](AttentionAttrs& a) { a.dropout = 0.5; }, [](AttentionAttrs& a) { a.seed += 1; },
      [](AttentionAttrs& a) { a.op_key += 1; }};
  for (size_t i = 0; i < changes.size(); ++i) {
    AttentionAttrs a = Base();
    changes[i](a);
    EXPECT_NE(ClusterKey(SpecOf(EveryAttentionOp(a), "att"), CompileOptions{}), base) << i;
  }
}

TEST(ClusterTextAttention, BadAttrsNameWhat) {
  const std::string text = Text(SpecOf(EveryAttentionOp(Base()), "att"));
  const std::string bad = absl::StrReplaceAll(text, {{"op_key=98765432109876", "op_key=x"}});
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(bad, "bad.cluster");
  ASSERT_FALSE(rebuilt.ok());
  EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("bad.cluster"));
  EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("op_key"));
}

}  // namespace
}  // namespace braze
