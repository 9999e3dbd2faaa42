// The sequence ops (Gather, UnsortedSegmentSum, Iota, Sin, Cos) compiled under every
// scheduler and compared with the reference kernels: odd, prime and tiny extents,
// out-of-range indices (INT32_MIN and INT32_MAX too), fused with elementwise
// neighbours, a symbolic batch, bit-identical segment sums run after run, Sin and Cos
// of the large arguments a positional encoding makes, and the GPU schedule on OpenCL
// (POCL) and as assembled CUDA.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;
const DType i32 = DType::kI32;
constexpr Tolerance kExact{0, 0};
// A segment sum adds in the reference's order on the CPU, but fused arithmetic feeding it
// may be contracted (an FMA), and the GPU heuristic may split a long sum into chunks
// (a fixed order, not the reference's): thousands of f32 terms, some cancelling.
constexpr Tolerance kSumTol{1e-5, 1e-5};

// Base shapes: [vocabulary, width] of a table, [batch, time] of ids.
const std::vector<Shape> kSmall = {{1, 1}, {7, 3}, {13, 5}};
const std::vector<Shape> kLarge = {{67, 33}};

// Ids of `shape` in [-2, n + 2): repeats, and out of range at both ends.
Tensor Ids(Case& c, const Shape& shape, int64_t n, uint64_t seed) {
  return c.Input(i32, shape, seed, -2, static_cast<double>(n + 2));
}

std::vector<OpTestCase> Cases() {
  return {
      {"GatherEmbedding",
       [](Case& c, const Shape& s) {
         // An embedding lookup [V, D] by [B, T] ids, fused with what surrounds it.
         Tensor table = c.Input(f32, s, 1);
         Tensor ids = Ids(c, {5, 3}, s[0], 2);
         c.outputs = {Gather(table, ids), Tanh(Gather(table * 2.0, ids)) + 1.0};
       },
       kSmall,
       kLarge,
       {1e-6, 1e-7}},  // Tanh's rounding; GatherAxes checks exactness
      {"GatherAxes",
       [](Case& c, const Shape& s) {
         // Every axis of a rank-3 table, rank-0, 1 and 2 ids; f64 and i32 tables.
         Tensor t = c.Input(f64, {3, s[0], s[1]}, 3);
         Tensor ti = c.Input(i32, {s[1], 2, s[0]}, 4, -50, 50);
         c.outputs = {Gather(t, Ids(c, {4}, 3, 5), 0), Gather(t, Ids(c, {2, 3}, s[0], 6), 1),
                      Gather(t, Ids(c, {}, s[1], 7), -1), Gather(ti, Ids(c, {3}, s[0], 8), 2)};
       },
       kSmall, kLarge, kExact},
      {"GatherExtremeIds",
       [](Case& c, const Shape& s) {
         // Ids far outside the table read zeros, never memory.
         Tensor table = c.Input(f32, s, 9);
         const int32_t big = std::numeric_limits<int32_t>::max();
         const int32_t small = std::numeric_limits<int32_t>::min();
         Tensor ids = c.Input(HostTensor::From<int32_t>(
             {0, big, small, static_cast<int32_t>(s[0]) - 1, static_cast<int32_t>(s[0]), -1},
             {2, 3}));
         c.outputs = {Gather(table, ids) * 3.0};
       },
       kSmall, kLarge, kExact},
      {"UnsortedSegmentSum",
       [](Case& c, const Shape& s) {
         // An embedding's gradient: [B, T, D] rows summed into [V, D] by [B, T] ids, and
         // along axis 1 of a [2, B, T] tensor; an odd segment count and a single one.
         const Shape bt = {s[0] + 2, s[1]};
         Tensor dy = c.Input(f32, {bt[0], bt[1], 5}, 10);
         Tensor ids = Ids(c, bt, 7, 11);
         Tensor x = c.Input(f32, {2, bt[0], bt[1]}, 12);
         c.outputs = {UnsortedSegmentSum(dy, ids, 7), UnsortedSegmentSum(Exp(dy) * 0.5, ids, 1),
                      UnsortedSegmentSum(x, ids, 7, 1),
                      UnsortedSegmentSum(x, Ids(c, {}, 3, 13), 3, 2)};
       },
       kSmall, kLarge, kSumTol},
      {"UnsortedSegmentSumI32",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(i32, {s[0], s[1]}, 14, -100, 100);
         c.outputs = {UnsortedSegmentSum(x, Ids(c, {s[0]}, 5, 15), 5)};
       },
       kSmall, kLarge, kExact},
      {"IotaMaskAndEncoding",
       [](Case& c, const Shape& s) {
         // A causal mask and a sinusoidal encoding of scores [n, n], n = s[0].
         Tensor scores = c.Input(f32, {s[0], s[0]}, 16);
         Tensor pos = Iota(scores, 0);
         Tensor mask = Less(Reshape(pos, {-1, 1}), Reshape(pos, {1, -1}));
         Tensor enc = Sin(Iota(scores, 1, f32) * 0.37);
         c.outputs = {Select(mask, ScalarConst(*c.graph, -1e9), scores), scores + enc,
                      Iota(scores, 0, f64), pos};
       },
       kSmall,
       kLarge,
       {1e-6, 1e-6}},
      {"SinCos",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(f32, s, 17, -4, 4);
         c.outputs = {Sin(x), Cos(x * 2.0) + 1.0};
       },
       kSmall,
       kLarge,
       {1e-6, 1e-7}},
      {"SinCosF64",
       [](Case& c, const Shape& s) {
         Tensor x = c.Input(f64, s, 18, -4, 4);
         c.outputs = {Sin(x), Cos(x)};
       },
       kSmall,
       kLarge,
       {1e-14, 1e-15}},
      {"SinCosLargeArguments",
       [](Case& c, const Shape& s) {
         // Positions times frequencies reach 1e4 and beyond: the range reduction must
         // hold there (a polynomial without one is off by whole units).
         Tensor x = c.Input(f32, s, 19, -2e4, 2e4);
         Tensor y = c.Input(f64, s, 20, -1e6, 1e6);
         c.outputs = {Sin(x), Cos(x), Sin(y), Cos(y)};
       },
       kSmall,
       kLarge,
       {1e-6, 1e-6}},
  };
}

class SequenceTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(SequenceTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, SequenceTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// inf, -inf and NaN give NaN; -0 stays -0 under Sin (+1 under Cos); the smallest
// subnormal stays itself under Sin.
TEST(SequenceSpecials, SinCosOfSpecialValues) {
  for (DType dt : {f32, f64}) {
    Case c;
    HostTensor v(dt, {6});
    const double values[] = {INFINITY, -INFINITY, NAN, -0.0, 0.0, dt == f32 ? 1.4e-45 : 4.9e-324};
    for (int i = 0; i < 6; ++i) v.SetDouble(i, values[i]);
    Tensor x = c.Input(v);
    c.outputs = {Sin(x), Cos(x)};
    for (Scheduler s : AllSchedulers()) {
      EXPECT_TRUE(CompileRunCompare(c, s, kExact)) << DTypeName(dt);
    }
    auto ref = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_TRUE(std::isnan((*ref)[0].GetDouble(0)) && std::isnan((*ref)[1].GetDouble(2)));
    EXPECT_TRUE(std::signbit((*ref)[0].GetDouble(3)) && (*ref)[0].GetDouble(3) == 0);
    // AllClose does not tell -0 from +0, nor look at a subnormal: the compiled bits do.
    for (Scheduler s : AllSchedulers()) {
      CompileOptions options;
      options.scheduler = s;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto got = RunKernel(**kernel, c.values);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(std::signbit((*got)[0].GetDouble(3)) && (*got)[0].GetDouble(3) == 0)
          << SchedulerName(s) << ": Sin(-0) is " << (*got)[0].GetDouble(3);
      EXPECT_EQ((*got)[0].GetDouble(5), (*ref)[0].GetDouble(5)) << SchedulerName(s);
      EXPECT_EQ((*got)[1].GetDouble(3), 1.0) << SchedulerName(s);
    }
  }
}

// The segment sums are the reference's bit for bit (the same additions in the same
// order) and the same on every run: no atomics, no order left to the threads.
TEST(SequenceDeterminism, SegmentSumsAreBitIdenticalRunAfterRun) {
  Case c;
  Tensor dy = c.Input(f32, {31, 17, 9}, 21, -1e3, 1e3);
  Tensor ids = Ids(c, {31, 17}, 11, 22);
  c.outputs = {UnsortedSegmentSum(dy, ids, 11)};
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (Scheduler s : AllSchedulers()) {
    CompileOptions options;
    options.scheduler = s;
    auto kernel = CompileCluster(spec, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    for (int run = 0; run < 3; ++run) {
      auto actual = RunKernel(**kernel, c.values);
      ASSERT_TRUE(actual.ok()) << actual.status();
      EXPECT_EQ(std::memcmp((*actual)[0].raw_data(), (*expected)[0].raw_data(),
                            (*expected)[0].num_bytes()),
                0)
          << SchedulerName(s) << " run " << run;
    }
  }
}

// Ids with a -1 batch (and positions of a -1 length): one kernel serves every size.
TEST(SequenceSymbolic, ASymbolicBatchRunsAtEverySize) {
  auto build = [](Case& c, int64_t n) {
    Tensor table = c.Input(f32, {13, 6}, 23);
    Tensor ids = Ids(c, {n, 5}, 13, 24 + n);
    Tensor dy = c.Input(f32, {n, 5, 6}, 25 + n);
    Tensor x = c.Input(f32, {n, 3}, 26 + n);
    Tensor pos = Iota(x, 0);
    c.outputs = {Gather(table, ids) + 1.0, UnsortedSegmentSum(dy, ids, 13),
                 Cast(Less(Reshape(pos, {-1, 1}), Reshape(pos, {1, -1})), f32),
                 x + Sin(Reshape(Cast(pos, f32), {-1, 1}))};
  };
  Case c16;
  build(c16, 16);
  ClusterSpec spec = SpecOf(c16);
  spec.input_symbols = {{}, {0, -1}, {0, -1, -1}, {0, -1}};
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  auto kernel = CompileCluster(spec, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->output_types()[0].shape[0], -1) << "the batch is not symbolic";
  EXPECT_EQ((*kernel)->output_types()[2].shape[1], -1) << "the mask's length is not symbolic";
  for (int64_t n : {16, 17, 40}) {
    Case c;
    build(c, n);
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto run = RunKernelLike(**kernel, c.values, *expected);
    ASSERT_TRUE(run.ok()) << "batch " << n << ": " << run.status();
    const std::vector<HostTensor>& outs = *run;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string why;
      EXPECT_TRUE(AllClose(outs[i], (*expected)[i], kSumTol.rtol, kSumTol.atol, &why))
          << "batch " << n << ", output " << i << ": " << why;
    }
  }
}

// ---- GPU schedules: OpenCL (POCL) run, CUDA assembled (run on a GPU) ----

class SequenceTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(SequenceTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Ops, SequenceTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);

class SequenceTestCuda : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(SequenceTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }
TEST_P(SequenceTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Ops, SequenceTestCuda, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
