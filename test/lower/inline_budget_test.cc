// Bounded inlining (schedule/inline_budget.h): a cluster too large to inline whole is
// stored in pieces, so that no loop nest inlines more than about the budget, and its
// results stay those of the reference kernels. Before, a loop nest inlined the whole
// cluster and Halide's lowering took time beyond the square of its size (a 442-op chain:
// 155 s). The tests assert the structure (the largest inlined expression), never time.
#include "schedule/inline_budget.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "lower/lowering.h"
#include "lower_test_util.h"
#include "schedule/gpu_schedule.h"
#include "schedule/safe_default.h"
#include "schedule/scheduler.h"
#include "tools/probe/large_programs.h"

namespace braze {
namespace lowertest {
namespace {

// A chain of `n` elementwise ops, each read by the next two (so CSE, not a tree, keeps
// it small), mixing cheap ops with the exp-based Tanh and Sigmoid.
void BuildChain(Case& c, const Shape& shape, int n) {
  c.outputs = {probe::ElementwiseChain(c.Input(DType::kF32, shape, 71), n)};
}

// A sum of `n` terms Tanh(x * c_i), added pairwise: shallow, but one loop nest of all.
void BuildWideSum(Case& c, const Shape& shape, int n) {
  c.outputs = probe::WideSum(c.Input(DType::kF32, shape, 72), n);
}

// The Funcs a schedule stores (not inlined).
std::set<std::string> Stored(const schedule::PipelineInfo& info) {
  std::vector<Halide::Internal::Function> outputs;
  for (const Halide::Func& f : info.outputs) outputs.push_back(f.function());
  std::set<std::string> stored;
  for (const auto& [name, fn] : Halide::Internal::build_environment(outputs)) {
    if (!schedule::LeftInlined(fn)) stored.insert(name);
  }
  return stored;
}

// A loop nest inlines at most its own nodes and its callees' share of the budget each
// (the ops here read at most three values).
constexpr int64_t kBound = 4 * schedule::kMaxInlinedNodes;

// Lowers `c` and returns (the largest inlined expression with nothing stored, the same
// after `schedule` ran on the lowered pipeline).
template <typename Schedule>
std::pair<int64_t, int64_t> Largest(const Case& c, Schedule schedule) {
  auto unscheduled = lower::LowerCluster(SpecOf(c));
  EXPECT_TRUE(unscheduled.ok()) << unscheduled.status();
  auto lowered = lower::LowerCluster(SpecOf(c));
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  if (!unscheduled.ok() || !lowered.ok()) return {0, 0};
  const int64_t before = schedule::LargestInlinedExpression(unscheduled->info, {});
  schedule(lowered->info);
  return {before, schedule::LargestInlinedExpression(lowered->info, Stored(lowered->info))};
}

TEST(InlineBudget, ALongChainIsStoredInPiecesAndMatchesTheReference) {
  for (const Shape& shape : std::vector<Shape>{{7, 3}}) {
    Case c;
    BuildChain(c, shape, 100);  // 220 ops
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault)) << ShapeString(shape);
    const auto [before, after] = Largest(c, [](const schedule::PipelineInfo& info) {
      schedule::ApplySafeDefault(info, Halide::get_host_target(), 2);
    });
    EXPECT_GT(before, 2 * schedule::kMaxInlinedNodes);  // the whole chain in one nest
    EXPECT_LE(after, kBound) << ShapeString(shape);
  }
}

TEST(InlineBudget, AWideSumIsStoredInPiecesAndMatchesTheReference) {
  Case c;
  BuildWideSum(c, {5, 11}, 64);  // 2 x 64 + 63 ops and a reduction
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault));
  const auto [before, after] = Largest(c, [](const schedule::PipelineInfo& info) {
    schedule::ApplySafeDefault(info, Halide::get_host_target(), 2);
  });
  EXPECT_GT(before, 2 * schedule::kMaxInlinedNodes);
  EXPECT_LE(after, kBound);
}

// A small cluster is untouched: nothing is stored for the budget.
TEST(InlineBudget, ASmallClusterStoresNothing) {
  Case c;
  BuildChain(c, {13, 7}, 12);
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(Count((*kernel)->schedule_text(), kInlineBudgetStored), 0);
}

// The GPU heuristic gives each break a kernel of its own (scheduled only: no device).
TEST(InlineBudget, TheGpuHeuristicStoresALongChainInPieces) {
  Case c;
  BuildChain(c, {13, 7}, 100);
  const auto [before, after] = Largest(c, [](const schedule::PipelineInfo& info) {
    schedule::ApplyGpuSchedule(info, Halide::Target("host-cuda-cuda_capability_86"),
                               Scheduler::kGpuFused);
  });
  EXPECT_GT(before, 2 * schedule::kMaxInlinedNodes);
  EXPECT_LE(after, kBound);
}

// The same chain's CUDA code: a kernel per break beside the output's, and ptxas takes it
// (no device needed).
TEST(InlineBudget, ALongChainsCudaCodeAssembles) {
  Case c;
  BuildChain(c, {13, 7}, 100);
  auto code = GenerateCudaCode(SpecOf(c), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  const int breaks = Count(code->schedule, kInlineBudgetStored);
  EXPECT_GE(breaks, 1) << code->schedule;
  EXPECT_GE(static_cast<int>(code->kernels.size()), breaks + 1) << code->schedule;
  if (!std::ifstream(PtxasPath()).good()) GTEST_SKIP() << "ptxas not found at " << PtxasPath();
  auto report = AssemblePtx(code->ptx, "sm_90");
  ASSERT_TRUE(report.ok()) << report.status();
  for (const PtxasKernel& k : report->kernels) {
    EXPECT_EQ(k.spill_store_bytes, 0) << k.name << "\n" << report->log;
  }
}

// After an autoscheduler (scheduler_chain.cc), the Funcs it left inlined get the same
// breaks: here every Func was left inlined, as a scheduler that inlines all would.
TEST(InlineBudget, BreaksAfterAnotherSchedulerBoundWhatItLeftInlined) {
  Case c;
  BuildChain(c, {13, 7}, 100);
  std::string text;
  const auto [before, after] = Largest(c, [&](const schedule::PipelineInfo& info) {
    text = schedule::StoreInlineBreaks(info, Halide::get_host_target(), 2);
  });
  EXPECT_GT(before, 2 * schedule::kMaxInlinedNodes);
  EXPECT_LE(after, kBound);
  EXPECT_GE(Count(text, kInlineBudgetStored), 1) << text;
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
