// Reductions that share a pass over their input (lower/sibling_reductions.h): sibling
// column Sums and Means as one Tuple reduction, and a batch norm's mean and variance in
// one pass (the sums of x, x - k and (x - k)^2). Against the reference kernels at odd,
// prime and tiny extents, under the safe default and Adams2019; the variance also
// against a double-precision variance of values far from 0 (an offset of 1e4, where
// E[x^2] - E[x]^2 in f32 would lose every digit), and with NaN and infinities. The
// schedule text shows which Funcs the lowering made.
#include <cmath>
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

const std::vector<Shape> kShapes = {{32, 7, 5, 64}, {3, 5, 7, 13}, {1, 1, 1, 3}, {2, 3, 17}};

std::vector<int> AllButLast(const Shape& s) {
  std::vector<int> axes;
  for (size_t d = 0; d + 1 < s.size(); ++d) axes.push_back(static_cast<int>(d));
  return axes;
}

std::string ScheduleOf(const Case& c, Scheduler scheduler) {
  CompileOptions options;
  options.scheduler = scheduler;
  auto kernel = CompileCluster(SpecOf(c), options);
  if (!kernel.ok()) return kernel.status().ToString();
  return (*kernel)->schedule_text();
}

// A batch norm's backward sums: of dy, of dy * x, of -(dy * gamma) (siblings), a Mean
// of x * x without keep_dims (a sibling too), and a Sum that reads the first one's
// result (not a sibling: it must come after).
Case BackwardSums(const Shape& s, bool keep) {
  Case c;
  Tensor x = c.Input(DType::kF32, s, 71, -2, 2);
  Tensor dy = c.Input(DType::kF32, s, 73, -1, 1);
  Shape per_channel(s.size(), 1);
  per_channel.back() = s.back();
  Tensor gamma = c.Input(DType::kF32, per_channel, 79, 0.5, 1.5);
  const std::vector<int> axes = AllButLast(s);
  Tensor s0 = Sum(dy, axes, true);
  c.outputs = {s0, Sum(dy * x, axes, keep), Sum(Neg(dy * gamma), axes, keep),
               Mean(x * x, axes, false), Sum(dy * s0, axes, keep)};
  return c;
}

TEST(SiblingReductionsTest, SiblingSumsAreOnePass) {
  for (const Shape& s : kShapes) {
    for (bool keep : {true, false}) {
      const Case c = BackwardSums(s, keep);
      const std::string what = absl::StrCat(s.size(), "-D ", s.back(), " keep ", keep);
      for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
        EXPECT_TRUE(CompileRunCompare(c, scheduler, {1e-5, 1e-6})) << what;
      }
      const std::string text = ScheduleOf(c, Scheduler::kSafeDefault);
      EXPECT_NE(text.find("_siblings_acc"), std::string::npos) << what << "\n" << text;
    }
  }
}

// A row reduction (the innermost dim reduced) stays a reduction of its own: the row
// pipeline reads each row once already.
TEST(SiblingReductionsTest, RowSumsAreNotGrouped) {
  Case c;
  Tensor x = c.Input(DType::kF32, {9, 33}, 83, -1, 1);
  Tensor y = c.Input(DType::kF32, {9, 33}, 89, -1, 1);
  c.outputs = {Sum(x, {1}, true), Sum(x * y, {1}, true)};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault));
  EXPECT_EQ(ScheduleOf(c, Scheduler::kSafeDefault).find("_siblings"), std::string::npos);
}

// The batch norm statistics, as BatchNorm builds them, and the normalized values.
Case Statistics(const Shape& s, double offset, bool specials, bool var_keep) {
  Case c;
  HostTensor xv = HostTensor::RandomUniform(DType::kF32, s, 97, offset - 1, offset + 1);
  if (specials && xv.num_elements() >= 8) {
    float* p = xv.data<float>();
    const int64_t channels = s.back();
    p[0] = std::numeric_limits<float>::infinity();  // channel 0's shift k itself
    if (channels > 1) p[channels + 1] = std::numeric_limits<float>::quiet_NaN();  // channel 1
    if (channels > 2) p[2 * channels + 2] = -std::numeric_limits<float>::infinity();
  }
  Tensor x = c.Input(std::move(xv));
  const std::vector<int> axes = AllButLast(s);
  Tensor mean = Mean(x, axes, true);
  Tensor var = Mean(Square(x - mean), axes, var_keep);
  Tensor var_b = var_keep ? var : Reshape(var, [&] {
    Shape k(s.size(), 1);
    k.back() = s.back();
    return k;
  }());
  c.outputs = {mean, var, (x - mean) * Rsqrt(var_b + 1e-3f)};
  return c;
}

TEST(SiblingReductionsTest, MomentsMatchTheReference) {
  for (const Shape& s : kShapes) {
    for (bool specials : {false, true}) {
      {  // each reader of the accumulator (keep_dims or not), each kind of input
        const bool var_keep = !specials;
        const Case c = Statistics(s, 0.5, specials, var_keep);
        const std::string what = absl::StrCat(s.size(), "-D ", s.back(),
                                              specials ? " specials" : "", " keep ", var_keep);
        for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
          EXPECT_TRUE(CompileRunCompare(c, scheduler, {1e-4, 1e-5})) << what;
        }
        const std::string text = ScheduleOf(c, Scheduler::kSafeDefault);
        EXPECT_NE(text.find("_moments"), std::string::npos) << what << "\n" << text;
      }
    }
  }
}

// Values at 1e4 +- 1: the variance (about 1/3) against the double-precision one of the
// same f32 values, to 1e-5 relative.
TEST(SiblingReductionsTest, VarianceOfLargeOffsetsMatchesDoubles) {
  for (const Shape& s : {Shape{32, 7, 5, 64}, Shape{3, 5, 7, 13}}) {
    const Case c = Statistics(s, 1e4, false, true);
    CompileOptions options;
    options.scheduler = Scheduler::kSafeDefault;
    auto kernel = CompileCluster(SpecOf(c), options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto got = RunKernel(**kernel, c.values);
    ASSERT_TRUE(got.ok()) << got.status();
    const int64_t channels = s.back();
    const int64_t n = c.values[0].num_elements() / channels;
    const float* x = c.values[0].data<float>();
    for (int64_t ch = 0; ch < channels; ++ch) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += x[i * channels + ch];
      const double mean = sum / n;
      double sq = 0;
      for (int64_t i = 0; i < n; ++i)
        sq += (x[i * channels + ch] - mean) * (x[i * channels + ch] - mean);
      const double var = sq / n;
      EXPECT_NEAR((*got)[0].data<float>()[ch], mean, 1e-7 * std::abs(mean) + 1e-6) << ch;
      EXPECT_NEAR((*got)[1].data<float>()[ch], var, 1e-5 * var) << ch;
    }
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
