// Adams2019's bounded search (schedule/autoschedule.h): greedy by default; with
// BRAZE_ADAMS2019_SEARCH_S a greedy probe decides whether the full search fits; a greedy
// search is said at the top of the schedule text, and computes the same results.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// A softmax then a layer-norm-like chain over [13, 37]: a few stages to search.
std::unique_ptr<CompiledKernel> CompileUnderAdams2019(Case& c) {
  Tensor x = c.Input(DType::kF32, {13, 37}, 5);
  Tensor s = Softmax(x);
  Tensor centered = s - Mean(s, {1}, true);
  c.outputs = {Tanh(centered * Rsqrt(Mean(centered * centered, {1}, true) + 1e-3))};
  auto kernel = CompileCluster(SpecOf(c), {Scheduler::kAdams2019, 2});
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? std::move(*kernel) : nullptr;
}

// A user's HL_BEAM_SIZE decides instead of the bound: Braze's static initializer marks
// the value it set itself.
bool UserSetTheBeam() { return std::getenv("BRAZE_SET_HL_BEAM_SIZE") == nullptr; }

TEST(Adams2019Bound, ANoSecondBudgetSearchesGreedilyAndSaysSo) {
  if (UserSetTheBeam()) GTEST_SKIP() << "HL_BEAM_SIZE is set: it decides, not the bound";
  setenv("BRAZE_ADAMS2019_SEARCH_S", "0", 1);
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileUnderAdams2019(c);
  unsetenv("BRAZE_ADAMS2019_SEARCH_S");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->scheduler_used(), Scheduler::kAdams2019);
  EXPECT_TRUE(absl::StrContains(kernel->schedule_text(), "greedy search (beam 1, one pass)"))
      << kernel->schedule_text();
  // The greedy schedule's results: the reference's.
  auto actual = RunKernel(*kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-5, 1e-6));
}

TEST(Adams2019Bound, TheDefaultIsTheGreedySearch) {
  if (UserSetTheBeam()) GTEST_SKIP() << "HL_BEAM_SIZE is set: it decides, not the bound";
  unsetenv("BRAZE_ADAMS2019_SEARCH_S");
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileUnderAdams2019(c);
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE(absl::StrContains(kernel->schedule_text(), "greedy search (beam 1, one pass)"))
      << kernel->schedule_text();
}

TEST(Adams2019Bound, AnAmpleBudgetRunsTheFullSearch) {
  if (UserSetTheBeam()) GTEST_SKIP() << "HL_BEAM_SIZE is set: it decides, not the bound";
  setenv("BRAZE_ADAMS2019_SEARCH_S", "100000", 1);
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileUnderAdams2019(c);
  unsetenv("BRAZE_ADAMS2019_SEARCH_S");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->scheduler_used(), Scheduler::kAdams2019);
  EXPECT_FALSE(absl::StrContains(kernel->schedule_text(), "greedy search"))
      << kernel->schedule_text();
}

TEST(Adams2019Bound, AMalformedBudgetKeepsTheDefault) {
  setenv("BRAZE_ADAMS2019_SEARCH_S", "soon", 1);
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileUnderAdams2019(c);
  unsetenv("BRAZE_ADAMS2019_SEARCH_S");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->scheduler_used(), Scheduler::kAdams2019);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
