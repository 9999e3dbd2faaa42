// Reductions with few outputs under the safe default: of a whole tensor to one element
// (a loss's Mean), or over the outer dims to a few columns (a batch norm's per-channel
// sums). The update is rfactored into partial sums per chunk of the outermost RVar, run
// in parallel, and per vector lane of the innermost or with the columns innermost
// (SafeScheduler::SmallOutputRfactor, safe_default_stages.cc). The shapes reach each
// form: a batch-like outer dim taken whole (32 chunks), one split into at most 64
// (100 = 50 x 2), a prime outer dim, an innermost dim no lane count divides (prime
// 131: chunks only), a 1-D input split in chunks and lanes, columns in whole vectors
// and a prime number of them, and cases the schedule leaves alone (a 1-D prime input,
// too little work, a reduction over inner and outer dims to several outputs). Sums,
// means, max and min of f32 and i32, NaN and infinities, against the reference
// kernels; the result must not depend on the thread count (the chunks follow from the
// extents).
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

struct ScalarCase {
  Shape shape;
  std::vector<int> axes;  // empty: all
  bool rfactored;         // the schedule takes SmallOutputRfactor's path
  bool checked;           // also run with NaN and infinities, and at 1 and 3 threads
};

const std::vector<ScalarCase> kShapes = {
    {{32, 7, 5, 64}, {}, true, true},     {{100, 41, 3}, {}, true, false},
    {{3, 131, 67}, {}, true, false},      {{70000}, {}, true, false},
    {{65537}, {}, false, false},          {{1, 4099, 8}, {}, true, false},
    {{7, 11, 13}, {}, false, false},      {{32, 13, 11, 64}, {0, 1, 2}, true, true},
    {{50, 97, 24}, {0, 1}, true, false},  {{31, 137, 67}, {0, 1}, true, true},
    {{70000, 3}, {0}, true, false},       {{9, 11, 8}, {0, 1}, false, false},
    {{6, 10, 700}, {0, 2}, false, false},
};

std::string ShapeName(const Shape& s) {
  std::string name;
  for (int64_t d : s) absl::StrAppend(&name, name.empty() ? "" : "x", d);
  return name;
}

// The loss of the ResNet block step, mean((y - t)^2), beside a plain Sum, Max and Min of
// the same values (several outputs), and an i32 Sum that wraps.
Case LossCase(const Shape& shape, std::vector<int> all, bool specials) {
  Case c;
  HostTensor yv = HostTensor::RandomUniform(DType::kF32, shape, 31, -3, 3);
  if (specials) {
    yv.data<float>()[NumElements(shape) / 3] = std::numeric_limits<float>::infinity();
    yv.data<float>()[NumElements(shape) - 5] = std::numeric_limits<float>::quiet_NaN();
  }
  Tensor y = c.Input(std::move(yv));
  Tensor t = c.Input(DType::kF32, shape, 37, -1, 1);
  Tensor i = c.Input(DType::kI32, shape, 41, -2e9, 2e9);
  if (all.empty()) {
    for (size_t d = 0; d < shape.size(); ++d) all.push_back(static_cast<int>(d));
  }
  c.outputs = {Mean(Square(y - t), all), Sum(y, all), Max(y, all),
               Min(y * t, all, /*keep_dims=*/true), Sum(i, all)};
  return c;
}

TEST(ScalarReductionTest, MatchesTheReferenceAtEveryThreadCount) {
  for (const ScalarCase& sc : kShapes) {
    for (bool specials : {false, true}) {
      if (specials && !sc.checked) continue;
      const Case c = LossCase(sc.shape, sc.axes, specials);
      const std::string what =
          absl::StrCat(ShapeName(sc.shape), " axes ", sc.axes.size(), specials ? " specials" : "");
      auto want = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<std::vector<HostTensor>> runs;
      for (int threads : {2, 1, 3}) {
        if (threads != 2 && !sc.checked) continue;
        CompileOptions options;
        options.scheduler = Scheduler::kSafeDefault;
        options.num_threads = threads;
        auto kernel = CompileCluster(SpecOf(c), options);
        ASSERT_TRUE(kernel.ok()) << what << ": " << kernel.status();
        ASSERT_EQ((*kernel)->scheduler_used(), Scheduler::kSafeDefault)
            << what << ": " << (*kernel)->scheduler_failures()[0];
        const std::string text = (*kernel)->schedule_text();
        EXPECT_EQ(text.find(" rfactor(") != std::string::npos, sc.rfactored) << what << "\n"
                                                                             << text;
        auto got = RunKernel(**kernel, c.values);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status();
        for (size_t o = 0; o < got->size(); ++o) {
          std::string why;
          EXPECT_TRUE(AllClose((*got)[o], (*want)[o], 1e-5, 1e-6, &why))
              << what << " threads " << threads << " output " << o << ": " << why << "\n"
              << text;
        }
        runs.push_back(*std::move(got));
      }
      // The same bits whatever the thread count.
      for (size_t r = 1; r < runs.size(); ++r) {
        for (size_t o = 0; o < runs[0].size(); ++o) {
          EXPECT_EQ(
              std::memcmp(runs[r][o].raw_data(), runs[0][o].raw_data(), runs[0][o].num_bytes()), 0)
              << what << " output " << o << " run " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
