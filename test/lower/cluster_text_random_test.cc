// The text form and cache key of the random ops: seed, op key and dtype round-trip to
// the same text, key and bits; each changes the key (the derived Philox key is baked
// into the kernel); a bad attribute names the line and what.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
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

Case EveryRandomOp() {
  Case c;
  Tensor x = c.Input(DType::kF32, {5, 3}, 1);
  Tensor step = c.Input(HostTensor::Scalar<int32_t>(4));
  c.outputs = {RandomUniform(x, step, 18446744073709551615ull, DType::kF32, 12345),
               RandomUniform(x, step, 2, DType::kF64), RandomNormal(x, step, 3),
               Dropout(x, 0.25, step, 4)};
  return c;
}

std::string Text(const ClusterSpec& spec) {
  absl::StatusOr<std::string> text = ClusterToText(spec);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

TEST(ClusterTextRandom, AttrsRoundTripToTheSameTextKeyAndBits) {
  Case c = EveryRandomOp();
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "rnd");
  const std::string text = Text(spec);
  EXPECT_THAT(text, HasSubstr(" RandomUniform seed=18446744073709551615 op_key=12345 dtype=f32 "));
  EXPECT_THAT(text, HasSubstr(" RandomNormal seed=3 op_key="));
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, "rnd.cluster");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status() << "\n" << text;
  EXPECT_EQ(Text(rebuilt->spec), text);
  EXPECT_EQ(ClusterKey(rebuilt->spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  auto want = lowertest::ReferenceOutputs(spec, c.values);
  auto got = lowertest::ReferenceOutputs(rebuilt->spec, c.values);
  ASSERT_TRUE(want.ok() && got.ok());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ(std::memcmp((*got)[i].raw_data(), (*want)[i].raw_data(), (*want)[i].num_bytes()), 0)
        << i;
  }
}

TEST(ClusterTextRandom, SeedOpKeyDtypeAndOpChangeTheKey) {
  auto key = [](int which) {
    Case c;
    Tensor x = c.Input(DType::kF32, {6, 6}, 1);
    Tensor step = c.Input(HostTensor::Scalar<int32_t>(1));
    switch (which) {
      case 0:
        c.outputs = {RandomUniform(x, step, 1, DType::kF32, 5)};
        break;
      case 1:
        c.outputs = {RandomUniform(x, step, 2, DType::kF32, 5)};
        break;
      case 2:
        c.outputs = {RandomUniform(x, step, 1, DType::kF32, 6)};
        break;
      case 3:
        c.outputs = {RandomUniform(x, step, 1, DType::kF64, 5)};
        break;
      default:
        c.outputs = {RandomNormal(x, step, 1, 5)};
        break;
    }
    EXPECT_TRUE(c.graph->status().ok()) << c.graph->status();
    return ClusterKey(SpecOf(c), CompileOptions{});
  };
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(key(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
  }
}

TEST(ClusterTextRandom, BadAttrsNameWhat) {
  const std::string text = Text(SpecOf(EveryRandomOp()));
  for (const auto& [from, to, what] : std::vector<std::array<std::string, 3>>{
           {"seed=3 ", "seed=x ", "seed"},
           {"seed=3 ", "seed=-3 ", "seed"},
           {"op_key=12345", "op_key=", "op_key"},
           {"op_key=12345 dtype=f32", "op_key=12345 dtype=i32", "does not support dtype i32"},
           {"seed=3 ", "", "seed"}}) {
    std::string bad = absl::StrReplaceAll(text, {{from, to}});
    ASSERT_NE(bad, text) << from;
    absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(bad, "bad.cluster");
    ASSERT_FALSE(rebuilt.ok()) << from;
    EXPECT_EQ(rebuilt.status().code(), absl::StatusCode::kInvalidArgument) << from;
    EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr("bad.cluster:")) << from;
    EXPECT_THAT(std::string(rebuilt.status().message()), HasSubstr(what)) << from;
  }
}

}  // namespace
}  // namespace braze
