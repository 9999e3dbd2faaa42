// Gradient checking for the autodiff tests: Gradients' result against central finite
// differences, in double, on the reference kernels (reference-only sessions, so no
// Halide compile is involved and the check is about the gradient formulas alone).
#ifndef BRAZE_TEST_AUTODIFF_GRAD_CHECK_H_
#define BRAZE_TEST_AUTODIFF_GRAD_CHECK_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace gradtest {

inline SessionOptions ReferenceOnly() {
  SessionOptions o;
  o.reference_only = true;
  return o;
}

// Uniform values in [lo, hi) whose magnitude is at least `min_abs`: keeps inputs away
// from kinks at 0 (Abs, Relu, Sign) so finite differences do not straddle them.
inline HostTensor AwayFromZero(Shape shape, uint64_t seed, double lo = -2, double hi = 2,
                               double min_abs = 0.2, DType dtype = DType::kF64) {
  HostTensor t = HostTensor::RandomUniform(dtype, std::move(shape), seed, lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = t.GetDouble(i);
    if (std::abs(v) < min_abs) t.SetDouble(i, v < 0 ? v - min_abs : v + min_abs);
  }
  return t;
}

// Values on the grid offset + 0.5 * k, k in [-4, 4): two tensors with offsets that
// differ by 0.25 never tie, which keeps Maximum/Minimum and Max/Min off their kinks.
inline HostTensor Grid(Shape shape, uint64_t seed, double offset, DType dtype = DType::kF64) {
  HostTensor t = HostTensor::RandomUniform(DType::kI32, std::move(shape), seed, -4, 4);
  HostTensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.SetDouble(i, offset + 0.5 * t.GetDouble(i));
  return out;
}

// Distinct values (a shuffled 0.25-spaced ramp), for Max/Min reductions without ties.
inline HostTensor Distinct(Shape shape, uint64_t seed) {
  HostTensor t(DType::kF64, std::move(shape));
  std::vector<double> v(t.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * static_cast<double>(i) - 1.0;
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(i, v[i]);
  return t;
}

struct GradCheckOptions {
  double step = 1e-6;       // finite-difference step
  double tolerance = 1e-6;  // |analytic - numeric| <= tolerance * (1 + |numeric|)
  uint64_t seed = 7;        // for the output weights
  Feeds extra_feeds;        // fed, not differentiated (labels, conditions, ...)
};

// Checks Gradients({y}, xs) for f(xs) = sum(w * y), with w a fixed random weight of y's
// shape passed as grad_ys, so every entry of the Jacobian takes part (not only its
// column sums). `inputs` pairs placeholders (the xs) with the values to check at.
inline ::testing::AssertionResult CheckGradients(const Tensor& y, const Feeds& inputs,
                                                 const GradCheckOptions& opt = {}) {
  Graph& g = *y.graph();
  Tensor weight = Placeholder(g, y.dtype(), y.shape(), "grad_check_weight");
  std::vector<Tensor> xs;
  for (const auto& in : inputs) xs.push_back(in.first);
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({y}, xs, {weight});
  if (!grads.ok()) return ::testing::AssertionFailure() << "Gradients: " << grads.status();
  if (!g.status().ok()) return ::testing::AssertionFailure() << "graph: " << g.status();

  Session session(g, ReferenceOnly());
  auto feeds_with = [&](const Feeds& ins) {
    Feeds f = ins;
    f.insert(f.end(), opt.extra_feeds.begin(), opt.extra_feeds.end());
    return f;
  };
  absl::StatusOr<std::vector<HostTensor>> y0 = session.Run(feeds_with(inputs), {y});
  if (!y0.ok()) return ::testing::AssertionFailure() << "forward: " << y0.status();
  const HostTensor w = HostTensor::RandomUniform(y.dtype(), (*y0)[0].shape(), opt.seed, 0.5, 1.5);
  Feeds feeds = feeds_with(inputs);
  feeds.emplace_back(weight, w);
  absl::StatusOr<std::vector<HostTensor>> analytic = session.Run(feeds, *grads);
  if (!analytic.ok()) return ::testing::AssertionFailure() << "gradients: " << analytic.status();

  // f at the given inputs, through the same session.
  auto objective = [&](const Feeds& ins) -> absl::StatusOr<double> {
    absl::StatusOr<std::vector<HostTensor>> out = session.Run(feeds_with(ins), {y});
    if (!out.ok()) return out.status();
    double f = 0;
    for (int64_t i = 0; i < w.num_elements(); ++i) f += w.GetDouble(i) * (*out)[0].GetDouble(i);
    return f;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const HostTensor& value = inputs[k].second;
    const HostTensor& got = (*analytic)[k];
    if (got.type() != value.type()) {
      return ::testing::AssertionFailure() << "gradient " << k << " is " << TypeString(got.type())
                                           << ", input is " << TypeString(value.type());
    }
    for (int64_t i = 0; i < value.num_elements(); ++i) {
      Feeds plus = inputs, minus = inputs;
      plus[k].second.SetDouble(i, value.GetDouble(i) + opt.step);
      minus[k].second.SetDouble(i, value.GetDouble(i) - opt.step);
      absl::StatusOr<double> fp = objective(plus), fm = objective(minus);
      if (!fp.ok() || !fm.ok()) {
        return ::testing::AssertionFailure() << "perturbed run: " << (fp.ok() ? fm : fp).status();
      }
      const double numeric = (*fp - *fm) / (2 * opt.step);
      const double a = got.GetDouble(i);
      if (!(std::abs(a - numeric) <= opt.tolerance * (1 + std::abs(numeric)))) {
        return ::testing::AssertionFailure()
               << "d/d(" << inputs[k].first.name() << ")[" << i << "]: analytic " << a
               << " vs numeric " << numeric << "\n  input: " << value.DebugString(32)
               << "\n  gradient: " << got.DebugString(32);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs `fetches` on a reference-only session; fails the test on error.
inline std::vector<HostTensor> RunReference(const Graph& g, const Feeds& feeds,
                                            const std::vector<Tensor>& fetches) {
  Session session(g, ReferenceOnly());
  absl::StatusOr<std::vector<HostTensor>> out = session.Run(feeds, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : std::vector<HostTensor>(fetches.size());
}

}  // namespace gradtest
}  // namespace braze

#endif  // BRAZE_TEST_AUTODIFF_GRAD_CHECK_H_
