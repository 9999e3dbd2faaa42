// Reductions over the innermost dim in clusters that are no row pipeline (several
// outputs, or a matmul beside them): the safe default rfactors their updates into
// vector partials when a lane count divides the static extent
// (SafeScheduler::InnermostRfactor, safe_default_stages.cc; float Max and Min too), and
// leaves them scalar otherwise. Compiled in strict mode (a compile failure is an error, not a
// fallback), against the reference kernels, at extents that take each path (rows of 96, 128, 64 and
// the prime 37 and 131), with NaN and infinities in the rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "common/session_options.h"

namespace braze {
namespace {

HostTensor Rows(const Shape& shape, uint64_t seed, bool specials) {
  HostTensor x = HostTensor::RandomNormal(DType::kF32, shape, seed, 0, 3);
  if (specials && x.num_elements() > 7) {
    float* p = x.data<float>();
    p[1] = std::numeric_limits<float>::quiet_NaN();
    p[5] = std::numeric_limits<float>::infinity();
    p[x.num_elements() - 2] = -std::numeric_limits<float>::infinity();
  }
  return x;
}

// A softmax whose exp, max and sum are all outputs (several outputs: no row pipeline),
// plus a mean of squares (LayerNorm's variance) and a min.
TEST(InnermostReductionTest, MultiOutputSoftmaxMatchesTheReference) {
  for (int64_t row : {96, 128, 64, 37, 131, 8}) {
    for (bool specials : {false, true}) {
      for (int threads : {1, 2}) {
        Graph g;
        Tensor x = Placeholder(g, DType::kF32, {3, 5, row}, "x");
        std::vector<Tensor> fetches;
        {
          JitScope scope(g);
          Tensor m = Max(x, {2}, true);
          Tensor e = Exp(x - m);
          Tensor s = Sum(e, {2}, true);
          fetches = {
              m,           e, s, e * Reciprocal(s), Mean(Square(x), {2}, false), Min(x, {2}, true),
              ArgMax(x, 2)};
        }
        const Feeds feeds = {{x, Rows({3, 5, row}, 40 + row, specials)}};
        Session session(g, testing_util::StrictSafeDefault(threads));
        auto got = session.Run(feeds, fetches);
        ASSERT_TRUE(got.ok()) << "row " << row << ": " << got.status();
        testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
      }
    }
  }
}

// Rows of tied maxima: ArgMax gives the first index of the maximum, whatever the lanes.
TEST(InnermostReductionTest, ArgMaxOfTiedRowsIsTheFirstIndex) {
  for (int64_t row : {64, 96}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {4, row}, "x");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      fetches = {ArgMax(x, 1), Max(x, {1}, true), Sum(x, {1}, true)};
    }
    HostTensor v(DType::kF32, {4, row});
    float* p = v.data<float>();
    for (int64_t i = 0; i < 4 * row; ++i) p[i] = static_cast<float>(i % 7 == 3 ? 2 : (i % 5));
    const Feeds feeds = {{x, v}};
    Session session(g, testing_util::StrictSafeDefault(2));
    auto got = session.Run(feeds, fetches);
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
  }
}

// Float Max and Min fold their lanes too (three integer accumulators of the bits, each
// exact): rows of signed zeros, all-negative rows and rows with one large value give
// the reference's bits, +0 for Max and -0 for Min of {-0, +0} whatever the lanes.
TEST(InnermostReductionTest, MaxAndMinFoldLanesToTheReferenceBits) {
  for (int64_t row : {64, 128, 96}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {6, row}, "x");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      Tensor m = Max(x, {1}, true);
      // Two outputs and a reader of the max: no row pipeline.
      fetches = {m, Min(x, {1}, true), Exp(x - m)};
    }
    HostTensor v = HostTensor::RandomNormal(DType::kF32, {6, row}, 90 + row);
    float* p = v.data<float>();
    for (int64_t j = 0; j < row; ++j) {
      p[0 * row + j] = (j % 3 == 0) ? -0.0f : 0.0f;         // signed zeros
      p[1 * row + j] = -1.0f - static_cast<float>(j % 11);  // all negative
      p[2 * row + j] = (j % 2 == 0) ? -0.0f : -2.0f;        // max is -0
      p[3 * row + j] = (j == row - 1) ? 1e30f : -1e30f;
    }
    const Feeds feeds = {{x, v}};
    Session session(g, testing_util::StrictSafeDefault(2));
    auto got = session.Run(feeds, fetches);
    ASSERT_TRUE(got.ok()) << "row " << row << ": " << got.status();
    testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    Session ref(g, ref_opts);
    auto want = ref.Run(feeds, fetches);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int f = 0; f < 2; ++f) {
      for (int64_t r = 0; r < 6; ++r) {
        const float a = (*got)[f].data<float>()[r], b = (*want)[f].data<float>()[r];
        EXPECT_EQ(std::signbit(a), std::signbit(b)) << "fetch " << f << " row " << r;
        EXPECT_EQ(a, b) << "fetch " << f << " row " << r;
      }
    }
  }
}

// The attention pattern: a batched matmul's rows softmaxed in the same cluster, its
// row sums and the probabilities both outputs.
TEST(InnermostReductionTest, MatMulThenRowSumsMatchTheReference) {
  for (int64_t t : {64, 96, 37}) {
    Graph g;
    Tensor q = Placeholder(g, DType::kF32, {2, 3, t, 16}, "q");
    Tensor k = Placeholder(g, DType::kF32, {2, 3, t, 16}, "k");
    std::vector<Tensor> fetches;
    {
      JitScope scope(g);
      Tensor scores = BatchMatMul(q, k, false, true) * 0.25;
      Tensor e = Exp(scores - Max(scores, {3}, true));
      Tensor s = Sum(e, {3}, true);
      fetches = {e, s, e / s};
    }
    const Feeds feeds = {{q, Rows({2, 3, t, 16}, 7, false)}, {k, Rows({2, 3, t, 16}, 8, false)}};
    Session session(g, testing_util::StrictSafeDefault(2));
    auto got = session.Run(feeds, fetches);
    ASSERT_TRUE(got.ok()) << "T " << t << ": " << got.status();
    testing_util::ExpectMatchesReference(g, feeds, fetches, *got);
  }
}

}  // namespace
}  // namespace braze
