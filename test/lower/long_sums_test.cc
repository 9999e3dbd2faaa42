// Long f32 sums under Adams2019 and Mullapudi2016 (lower/long_sums.h): a dot product of
// 8,388,608 terms, which one serial f32 accumulator got 0.8% wrong (braze-fuzz seed
// 61100011), compared with its exact f64 value; prime extents (a tail block), a
// matmul of several outputs, a batch, a segment sum and a padded filter gradient
// against the reference; and the lowering's two stages, for those schedulers only.
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

}  // namespace
}  // namespace lowertest
}  // namespace braze
