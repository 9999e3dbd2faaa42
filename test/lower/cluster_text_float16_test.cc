// The text form and cache key of 16-bit clusters: bf16 and f16 inputs, constants (their
// bits) and casts round-trip to the same text and key; the dtype changes the key; an
// unknown dtype names the line and the accepted ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
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

Case Mixed(DType d) {
  Case c;
  Tensor x = c.Input(d, {5, 3}, 1);
  Tensor w = Const(*c.graph, HostTensor::RandomUniform(d, {3, 4}, 2));
  c.outputs = {Cast(MatMul(x, w) * 0.5, DType::kF32), Sum(Cast(x, DType::kF64), {0})};
  return c;
}

TEST(ClusterTextFloat16, RoundTripsToTheSameTextAndKey) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    const Case c = Mixed(d);
    const ClusterSpec spec = SpecOf(c);
    absl::StatusOr<std::string> text = ClusterToText(spec);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("input 0 ", DTypeName(d), " [5,3]")));
    absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(*text, "f16.cluster");
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
    absl::StatusOr<std::string> again = ClusterToText(rebuilt->spec);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *text);
    EXPECT_EQ(ClusterKey(rebuilt->spec, {}), ClusterKey(spec, {}));
  }
  EXPECT_NE(ClusterKey(SpecOf(Mixed(DType::kBF16)), {}),
            ClusterKey(SpecOf(Mixed(DType::kF16)), {}));
  EXPECT_NE(ClusterKey(SpecOf(Mixed(DType::kBF16)), {}),
            ClusterKey(SpecOf(Mixed(DType::kF32)), {}));
}

TEST(ClusterTextFloat16, AnUnknownDtypeNamesTheLineAndTheAcceptedOnes) {
  absl::StatusOr<std::string> text = ClusterToText(SpecOf(Mixed(DType::kBF16)));
  ASSERT_TRUE(text.ok());
  const std::string bad = absl::StrReplaceAll(*text, {{"input 0 bf16 ", "input 0 bf17 "}});
  ASSERT_NE(bad, *text);
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(bad, "bad.cluster");
  ASSERT_FALSE(rebuilt.ok());
  EXPECT_EQ(rebuilt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("bad.cluster:"));
  EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("unknown dtype 'bf17'"));
  EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("bf16, f16"));
}

}  // namespace
}  // namespace braze
