// Row pipelines under the safe default: reductions over the innermost dim read back by
// the output at the same row are computed per output row, their updates vectorized by
// rfactor over an exact split of the row. These shapes reach every branch of that
// schedule (row lengths with 32, 16, 8 and 4 lanes, too short for any, rank 3 rows,
// serial and parallel rows), NaN rows, and row pipelines it must not take (the reduced
// value read at a transposed row, or after dropping the reduced dim).
#include <limits>
#include <string>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const std::vector<Shape> kRowShapes = {{64, 1024}, {3, 96}, {5, 40}, {9, 12}, {2, 3, 48},
                                       {4, 4},     {1, 64}, {33, 1}, {7, 8},  {7, 9},
                                       {5, 16},    {5, 17}, {3, 2}};

OpTestCase RowCase(std::string name, std::function<Tensor(Case&, Tensor, const Shape&)> fn,
                   std::vector<Shape> shapes = kRowShapes, double lo = -2, double hi = 2) {
  return {name,
          [=](Case& c, const Shape& s) {
            c.outputs = {fn(c, c.Input(DType::kF32, s, 201, lo, hi), s)};
          },
          shapes,
          {},
          {}};
}

int Last(const Shape& s) { return static_cast<int>(s.size()) - 1; }

std::vector<OpTestCase> Cases() {
  return {
      RowCase("Softmax", [](Case&, Tensor x, const Shape&) { return Softmax(x); }),
      RowCase("LogSoftmax", [](Case&, Tensor x, const Shape&) { return LogSoftmax(x); }),
      RowCase("LayerNorm",
              [](Case& c, Tensor x, const Shape& s) {
                Tensor gamma = c.Input(DType::kF32, {s.back()}, 203, 0.5, 1.5);
                Tensor beta = c.Input(DType::kF32, {s.back()}, 204);
                return LayerNorm(x, gamma, beta);
              }),
      // Log of negative values: some rows hold NaNs, which Max must propagate.
      RowCase(
          "SoftmaxOfLogWithNaN", [](Case&, Tensor x, const Shape&) { return Softmax(Log(x)); },
          kRowShapes, -0.05, 2),
      RowCase("MaxMinusSumNoKeepDims",
              [](Case&, Tensor x, const Shape& s) {
                Shape kept = s;
                kept.back() = 1;
                Tensor m = Reshape(Max(x, {Last(s)}), kept);
                Tensor t = Reshape(Sum(x, {Last(s)}), kept);
                return Sub(Sub(x, m), t);
              }),
      // out[i][j] = x[i][j] / sum(x[j][:]): the sum is read at a transposed row.
      RowCase(
          "DivByTransposedRowSum",
          [](Case&, Tensor x, const Shape& s) {
            return Div(x, Transpose(Sum(x, {1}, true), {1, 0}));
          },
          {{32, 32}, {64, 64}, {3, 3}}, 0.5, 2),
  };
}

class RowPipelineTest : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(RowPipelineTest, MatchesReference) { RunOpTestCase(GetParam(), Scheduler::kSafeDefault); }

INSTANTIATE_TEST_SUITE_P(Ops, RowPipelineTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OpTestCase>& info) {
                           return info.param.name;
                         });

// A row's shared values (softmax's exp) prefetch the next row of the input they read
// where a stored schedule says so (the default, row_prefetch 0, never does; 1 only
// while the pipeline's data stays in the caches (its
// output below stream_min_mib): 37 rows of 1024 with streaming from 1 MiB (148 KiB:
// prefetched), 300 rows (1.2 MiB: streamed, not prefetched), and a symbolic batch (size
// unknown: not prefetched; its schedule only)). row_prefetch 2 prefetches the streamed
// rows too (never a symbolic batch), 0 not even the cached ones, and neither does a
// schedule that says nothing. The last row's
// prefetch reads past the input; x86 prefetches never fault. Results equal the
// reference, NaN rows too.
TEST(RowPrefetch, CacheResidentRowsOrAsTheScheduleSaysPrefetchTheNextRow) {
  struct Want {
    int64_t rows;
    bool symbolic;
    int row_prefetch;
    bool prefetch;
  };
  for (const Want& w :
       {Want{37, false, 1, true}, Want{300, false, 1, false}, Want{37, true, 1, false},
        Want{300, false, 2, true}, Want{37, true, 2, false}, Want{37, false, 0, false},
        Want{37, false, -1, false}}) {
    Case c;
    HostTensor v = HostTensor::RandomUniform(DType::kF32, {w.rows, 1024}, 7, -30, 30);
    v.data<float>()[5 * 1024 + 77] = std::numeric_limits<float>::quiet_NaN();
    Tensor x = c.Input(v);
    c.outputs = {Softmax(x)};
    ClusterSpec spec = SpecOf(c);
    if (w.symbolic) spec.input_symbols = {{0, -1}};  // rows: a symbolic dim
    auto expected = ReferenceOutputs(spec, c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    CompileOptions options;
    options.scheduler = Scheduler::kSafeDefault;
    if (w.row_prefetch >= 0) {  // -1: no stored schedule, the defaults
      StoredSchedule stored;
      stored.params.stream_min_mib = 1;
      stored.params.row_prefetch = w.row_prefetch;
      stored.path = "(test)";
      options.stored_schedule = stored;
    }
    auto kernel = CompileCluster(spec, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const std::string text = (*kernel)->schedule_text();
    EXPECT_EQ(text.find("prefetch(") != std::string::npos, w.prefetch)
        << w.rows << " rows, row_prefetch " << w.row_prefetch << ":\n"
        << text;
    if (w.symbolic) continue;  // RunKernel sizes outputs from the kernel's static types
    auto got = RunKernel(**kernel, c.values);
    ASSERT_TRUE(got.ok()) << got.status();
    std::string why;
    EXPECT_TRUE(AllClose((*got)[0], (*expected)[0], 1e-5, 1e-6, &why)) << w.rows << ": " << why;
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
