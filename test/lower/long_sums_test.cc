// Long f32 sums under Adams2019 and Mullapudi2016 (lower/long_sums.h): a dot product of
// 8,388,608 terms, which one serial f32 accumulator got 0.8% wrong (braze-fuzz seed
// 61100011), compared with its exact f64 value; prime extents (a tail block), a
// matmul of several outputs, a batch, a segment sum and a padded filter gradient
// against the reference; the lowering's two stages, for those schedulers only; and the
// choice of blocks (ChooseBlocks) on tiny, odd, prime, multi-dim and many-output sums.
#include "lower/long_sums.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "lower/lowering.h"

namespace braze {
namespace lowertest {
namespace {

const DType f32 = DType::kF32;

const Scheduler kBlocked[] = {Scheduler::kAdams2019, Scheduler::kMullapudi2016};

// Compiles `c` (one f32 output of one element) under `scheduler` and returns the
// relative error of its result against `exact`.
double RelativeError(const Case& c, Scheduler scheduler, double exact) {
  CompileOptions options;
  options.scheduler = scheduler;
  auto kernel = CompileCluster(SpecOf(c), options);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return INFINITY;
  EXPECT_EQ((*kernel)->scheduler_used(), scheduler) << (*kernel)->schedule_text();
  auto out = RunKernel(**kernel, c.values);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return INFINITY;
  return std::fabs((*out)[0].GetDouble(0) - exact) / std::fabs(exact);
}

// x . x over n terms of x in [0.9, 1.5): every term positive, so a serial f32 sum's
// roundings all go one way once it passes 2^23 (about 6e6 terms).
TEST(LongSums, ADotProductOf8MTermsIsWithinRoundingOfTheExactSum) {
  // 2^23 (blocks only) and a prime (a tail of 9 terms after 2,048 blocks of 4,096).
  for (int64_t n : {int64_t{8388608}, int64_t{8388617}}) {
    Case c;
    Tensor x = c.Input(f32, {n}, 61100011, 0.9, 1.5);
    Tensor row = BroadcastTo(x, {1, n});
    c.outputs = {MatMul(row, row, false, true)};
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = c.values[0].GetDouble(i);
      exact += v * v;
    }
    for (Scheduler scheduler : kBlocked) {
      // Blocks of 4,096: each partial within about sqrt(4096) roundings of 2^-24.
      EXPECT_LT(RelativeError(c, scheduler, exact), 1e-5)
          << SchedulerName(scheduler) << ", n = " << n;
    }
  }
}

// Several outputs, a batch, and k just past the bound: prime, so the tail is not empty.
TEST(LongSums, MatMulsPastTheBoundMatchTheReference) {
  for (Scheduler scheduler : kBlocked) {
    Case c;
    const int64_t k = 16411;  // prime
    Tensor a = c.Input(f32, {3, k}, 1);
    Tensor b = c.Input(f32, {k, 5}, 2);
    Tensor ba = c.Input(f32, {2, 3, k}, 3);
    Tensor bb = c.Input(f32, {2, 7, k}, 4);
    c.outputs = {MatMul(a, b), BatchMatMul(ba, bb, false, true)};
    EXPECT_TRUE(CompileRunCompare(c, scheduler, {1e-4, 1e-4})) << SchedulerName(scheduler);
  }
}

// A segment sum over 20,011 ids (prime) and a filter gradient summing 161 x 161 taps
// of a SAME-padded window (the domain's predicate moves into both stages).
TEST(LongSums, SegmentSumsAndFilterGradientsPastTheBoundMatchTheReference) {
  for (Scheduler scheduler : kBlocked) {
    Case c;
    const int64_t n = 20011;
    Tensor data = c.Input(f32, {n, 3}, 5);
    Tensor ids = c.Input(DType::kI32, {n}, 6, -1, 5);
    Tensor x = c.Input(f32, {1, 161, 161, 1}, 7);
    Tensor dy = c.Input(f32, {1, 161, 161, 2}, 8);
    Window2D w;
    w.padding = Padding::kSame;
    c.outputs = {UnsortedSegmentSum(data, ids, 4), Conv2DBackpropFilter(x, {3, 3, 1, 2}, dy, w)};
    EXPECT_TRUE(CompileRunCompare(c, scheduler, {1e-4, 1e-4})) << SchedulerName(scheduler);
  }
}

// A filter gradient whose blocked dim is the padded one, with a tail: SAME padding over
// a 2 x 9001 image, a domain of (9001, 2, 1) taps per filter element: 70 blocks of 128
// and a tail of 41, each under the window's predicate.
TEST(LongSums, APaddedFilterGradientWithATailMatchesTheReference) {
  const lower::SumBlocks split = lower::ChooseBlocks({9001, 2, 1}, 3 * 3 * 1 * 2);
  EXPECT_EQ(split.dim, 0);
  EXPECT_EQ(split.block, 128);
  EXPECT_EQ(split.blocks, 70);
  EXPECT_EQ(split.tail, 41);
  for (Scheduler scheduler : kBlocked) {
    Case c;
    Tensor x = c.Input(f32, {1, 2, 9001, 1}, 13);
    Tensor dy = c.Input(f32, {1, 2, 9001, 2}, 14);
    Window2D w;
    w.padding = Padding::kSame;
    c.outputs = {Conv2DBackpropFilter(x, {3, 3, 1, 2}, dy, w)};
    EXPECT_TRUE(CompileRunCompare(c, scheduler, {1e-4, 1e-4})) << SchedulerName(scheduler);
  }
}

// A bf16 matmul is lowered as an f32 one (then rounded): blocked past the bound too.
// Both sides round the same sum to bf16, so they may differ by one of its ulps (2^-7).
TEST(LongSums, ABf16MatMulPastTheBoundMatchesTheReference) {
  Case c;
  const int64_t k = 16411;  // prime: a tail
  Tensor a = c.Input(DType::kBF16, {3, k}, 15);
  Tensor b = c.Input(DType::kBF16, {k, 5}, 16);
  c.outputs = {MatMul(a, b)};
  lower::LowerOptions options;
  options.block_long_sums = true;
  auto lowered = lower::LowerCluster(SpecOf(c), options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(lowered->info.stages.size(), 2u);
  for (Scheduler scheduler : kBlocked) {
    EXPECT_TRUE(CompileRunCompare(c, scheduler, {0x1p-6, 1e-2})) << SchedulerName(scheduler);
  }
}

// The blocks of a sum: none for a short one; about sqrt(terms) of about sqrt(terms)
// terms; B = 1 when the other dims outnumber K; fewer, longer blocks when the partials
// of many outputs would pass the budget, but none over kLongSum terms.
TEST(LongSums, ChooseBlocksSplitsTheLongestDimWithinTheBudget) {
  struct Want {
    std::vector<int64_t> extents;
    int64_t outputs;
    int dim;
    int64_t block, blocks, tail;
  };
  const Want wants[] = {
      {{}, 1, 0, 0, 0, 0},                         // a sum of one term
      {{1}, 7, 0, 0, 0, 0},                        // tiny
      {{16384}, 1, 0, 0, 0, 0},                    // exactly kLongSum: one stage
      {{128, 128}, 1, 0, 0, 0, 0},                 // the same in two dims
      {{16385}, 1, 0, 256, 64, 1},                 // odd, just past the bound
      {{16411}, 15, 0, 256, 64, 27},               // prime
      {{8388608}, 1, 0, 4096, 2048, 0},            // seed 61100011's dot product
      {{8388617}, 1, 0, 4096, 2048, 9},            // prime
      {{9001, 2, 1}, 18, 0, 128, 70, 41},          // the padded filter gradient's domain
      {{3, 20011}, 12, 1, 128, 156, 43},           // a segment sum of 3-wide slices
      {{100, 101, 103}, 5, 2, 1, 103, 0},          // other dims (10,100) outnumber K: B = 1
      {{20000}, 1, 0, 256, 78, 32},                // a dot product: the budget never bites
      {{20000}, 1 << 20, 0, 4096, 4, 3616},        // [1024,20000]x[20000,1024]: 4 blocks
      {{20000}, 1 << 23, 0, 8192, 2, 3616},        // past the budget even with 2 blocks
      {{1000003}, 1 << 20, 0, 16384, 61, 579},     // capped at kLongSum-term blocks
      {{7, 1000003}, 1 << 20, 1, 2048, 488, 579},  // the same with 7 terms per row
  };
  for (const Want& w : wants) {
    const lower::SumBlocks s = lower::ChooseBlocks(w.extents, w.outputs);
    const std::string what =
        ::testing::PrintToString(w.extents) + " x " + std::to_string(w.outputs) + " outputs";
    EXPECT_EQ(s.block, w.block) << what;
    if (w.block == 0) continue;
    EXPECT_EQ(s.dim, w.dim) << what;
    EXPECT_EQ(s.blocks, w.blocks) << what;
    EXPECT_EQ(s.tail, w.tail) << what;
    // The invariants behind the numbers.
    int64_t terms = 1;
    for (int64_t e : w.extents) terms *= e;
    const int64_t k = w.extents[s.dim], other = terms / k;
    EXPECT_EQ(s.blocks * s.block + s.tail, k) << what;
    EXPECT_GE(s.blocks, 2) << what;
    EXPECT_LT(s.tail, s.block) << what;
    EXPECT_EQ(s.block & (s.block - 1), 0) << what;  // a power of two
    EXPECT_LE(s.block * other, std::max(lower::kLongSum, other)) << what;
    const double partials = static_cast<double>(w.outputs) * static_cast<double>(s.blocks);
    EXPECT_LE(partials, std::max({static_cast<double>(lower::kPartialBudget),
                                  3.0 * static_cast<double>(w.outputs),
                                  2.0 * static_cast<double>(w.outputs) *
                                      static_cast<double>(terms) / lower::kLongSum}))
        << what;
  }
}

// The two stages are the lowering's for those schedulers only: the safe default's and
// the GPU heuristic's lowering keeps one accumulator (they split it themselves).
TEST(LongSums, OnlyTheBlockingLoweringAddsThePartialSums) {
  Case c;
  Tensor a = c.Input(f32, {2, 20000}, 9);
  Tensor b = c.Input(f32, {20000, 3}, 10);
  c.outputs = {MatMul(a, b)};
  for (bool block : {false, true}) {
    lower::LowerOptions options;
    options.block_long_sums = block;
    auto lowered = lower::LowerCluster(SpecOf(c), options);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_TRUE(lowered->long_sums);
    EXPECT_EQ(lowered->info.stages.size(), block ? 2u : 1u);
  }
  Case short_sum;
  Tensor s = short_sum.Input(f32, {2, 4096}, 11);
  Tensor t = short_sum.Input(f32, {4096, 3}, 12);
  short_sum.outputs = {MatMul(s, t)};
  lower::LowerOptions options;
  options.block_long_sums = true;
  auto lowered = lower::LowerCluster(SpecOf(short_sum), options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_FALSE(lowered->long_sums);
  EXPECT_EQ(lowered->info.stages.size(), 1u);
}

// Many outputs: [1024,20000]x[20000,1024]'s partial sums are 4 blocks of 4,096 (16 MiB),
// not 78 of 256 (327 MB). Lowered only: its inputs need no values.
TEST(LongSums, ThePartialSumsOfManyOutputsStayWithinTheBudget) {
  Case c;
  Tensor a = Placeholder(*c.graph, f32, {1024, 20000});
  Tensor b = Placeholder(*c.graph, f32, {20000, 1024});
  c.inputs = {a, b};
  c.outputs = {MatMul(a, b)};
  ClusterSpec spec = SpecOf(c);
  spec.input_types = {{f32, {1024, 20000}}, {f32, {20000, 1024}}};
  lower::LowerOptions options;
  options.block_long_sums = true;
  auto lowered = lower::LowerCluster(spec, options);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->info.stages.size(), 2u);
  const std::vector<int64_t> partial = {1024, 1024, 4};
  EXPECT_EQ(lowered->info.stages[0].extents, partial);
  EXPECT_EQ(lowered->info.stages[0].reduction_extent, 4096);
  EXPECT_EQ(lowered->info.stages[1].reduction_extent, 4);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
