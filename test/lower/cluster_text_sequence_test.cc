// The text form and cache key of the sequence ops (Gather, UnsortedSegmentSum, Iota, Sin,
// Cos): every attribute round-trips to the same text and key, every field changes the
// key, a rebuilt cluster computes the same, and a bad attribute names the line and what.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
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

Case EverySequenceOp() {
  Case c;
  Tensor table = c.Input(DType::kF32, {11, 4}, 1);
  Tensor ids = c.Input(DType::kI32, {3, 5}, 2, -1, 12);
  Tensor data = c.Input(DType::kF64, {2, 3, 5}, 3);
  Tensor g = Gather(table, ids, 0);
  Tensor s = UnsortedSegmentSum(data, ids, 7, 1);
  Tensor p = Iota(data, 2, DType::kF64);
  c.outputs = {Sin(g), Cos(s), Sin(p), Iota(g, 1), Iota(data, 0, DType::kF64)};
  return c;
}

std::string Text(const ClusterSpec& spec) {
  absl::StatusOr<std::string> text = ClusterToText(spec);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

TEST(ClusterTextSequence, AttrsRoundTripToTheSameTextAndKey) {
  Case c = EverySequenceOp();
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const ClusterSpec spec = SpecOf(c, "seq");
  const std::string text = Text(spec);
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, "seq.cluster");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status() << "\n" << text;
  EXPECT_EQ(Text(rebuilt->spec), text);
  EXPECT_EQ(ClusterKey(rebuilt->spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const Node& a = spec.graph->node(spec.nodes[k]);
    const Node& b = rebuilt->graph->node(rebuilt->spec.nodes[k]);
    ASSERT_EQ(a.op(), b.op());
    EXPECT_EQ(a.outputs(), b.outputs()) << a.name();
  }
  EXPECT_THAT(text, HasSubstr(" Gather axis=0 in=a0,a1 "));
  EXPECT_THAT(text, HasSubstr(" UnsortedSegmentSum axis=1 num_segments=7 in=a2,a1 "));
  EXPECT_THAT(text, HasSubstr(" Iota axis=2 dtype=f64 in=a2 "));
  EXPECT_THAT(text, HasSubstr(" Sin in="));
  EXPECT_THAT(text, HasSubstr(" Cos in="));
}

TEST(ClusterTextSequence, RebuiltClusterComputesTheSame) {
  Case c = EverySequenceOp();
  const std::string text = Text(SpecOf(c));
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, "seq.cluster");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  auto want = lowertest::ReferenceOutputs(SpecOf(c), c.values);
  auto got = lowertest::ReferenceOutputs(rebuilt->spec, c.values);
  ASSERT_TRUE(want.ok() && got.ok());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 0, 0)) << i;
  }
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  auto kernel = CompileCluster(rebuilt->spec, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto run = lowertest::RunKernel(**kernel, c.values);
  ASSERT_TRUE(run.ok()) << run.status();
  for (size_t i = 0; i < want->size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*run)[i], (*want)[i], 1e-6, 1e-6, &why)) << i << ": " << why;
  }
}

// Two clusters that differ in one attribute must not share a kernel.
TEST(ClusterTextSequence, EveryFieldChangesTheKey) {
  auto key = [](int which) {
    Case c;
    Tensor table = c.Input(DType::kF32, {6, 6}, 1);
    Tensor ids = c.Input(DType::kI32, {6}, 2, 0, 6);
    switch (which) {
      case 0:
        c.outputs = {Gather(table, ids, 0)};
        break;
      case 1:
        c.outputs = {Gather(table, ids, 1)};
        break;
      case 2:
        c.outputs = {UnsortedSegmentSum(table, ids, 6, 0)};
        break;
      case 3:
        c.outputs = {UnsortedSegmentSum(table, ids, 6, 1)};
        break;
      case 4:
        c.outputs = {UnsortedSegmentSum(table, ids, 7, 0)};
        break;
      case 5:
        c.outputs = {Iota(table, 0)};
        break;
      case 6:
        c.outputs = {Iota(table, 1)};
        break;
      case 7:
        c.outputs = {Iota(table, 0, DType::kF32)};
        break;
      case 8:
        c.outputs = {Sin(table)};
        break;
      default:
        c.outputs = {Cos(table)};
        break;
    }
    EXPECT_TRUE(c.graph->status().ok()) << c.graph->status();
    return ClusterKey(SpecOf(c), CompileOptions{});
  };
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back(key(i));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
  }
}

TEST(ClusterTextSequence, BadAttrsNameWhat) {
  const std::string text = Text(SpecOf(EverySequenceOp()));
  for (const auto& [from, to, what] : std::vector<std::array<std::string, 3>>{
           {"num_segments=7", "num_segments=x", "num_segments"},
           {"num_segments=7 ", "", "num_segments"},
           {"Iota axis=2 dtype=f64", "Iota axis=2 dtype=f8", "dtype"},
           {"Gather axis=0", "Gather axis=q", "axis"},
           {"Gather axis=0", "Gather axis=9", "Gather axis 9 out of range"}}) {
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
