// Dropout and the random ops under autodiff and in sessions (docs/RANDOM.md): the
// gradient of Dropout is its mask times the upstream gradient (against finite
// differences at a fixed step), the random ops carry none, Dropout keeps about 1 - rate
// of x scaled by 1 / (1 - rate), the same mask for the same (seed, step) and another for
// another step, and a compiled training step's bits are the reference's.
#include <cmath>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using gradtest::CheckGradients;
using gradtest::RunReference;

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;

TEST(RandomGradTest, DropoutsGradientIsTheMaskTimesUpstream) {
  for (DType dt : {f64, f32}) {
    Graph g;
    Tensor x = Placeholder(g, dt, {5, 7}, "x");
    Tensor step = ScalarConst(g, 4, DType::kI32);
    Tensor y = Tanh(Dropout(x, 0.4, step, 3));
    gradtest::GradCheckOptions opt;
    if (dt == f32) {
      opt.step = 1e-2;
      opt.tolerance = 2e-3;
    }
    EXPECT_TRUE(CheckGradients(y, {{x, HostTensor::RandomUniform(dt, {5, 7}, 9)}}, opt))
        << DTypeName(dt);
  }
}

// A random op is constant in `like`'s values: x * n + u has the gradient n.
TEST(RandomGradTest, RandomOpsCarryNoGradient) {
  Graph g;
  Tensor x = Placeholder(g, f64, {4, 3}, "x");
  Tensor step = ScalarConst(g, 2, DType::kI32);
  Tensor y = x * Cast(RandomNormal(x, step, 1), f64) + RandomUniform(x, step, 2, f64);
  EXPECT_TRUE(CheckGradients(y, {{x, HostTensor::RandomUniform(f64, {4, 3}, 9)}}));
}

struct DropoutRun {
  HostTensor x;
  std::vector<HostTensor> outs;  // per step
};

// Dropout(x, rate) of a 1e5-element x at steps 0, 0 and 1 (a step Variable fed through).
DropoutRun RunDropout(double rate, uint64_t seed, const SessionOptions& options) {
  Graph g;
  const int64_t n = 100000;
  Tensor x = Placeholder(g, f32, {n}, "x");
  Tensor step = Placeholder(g, DType::kI32, {}, "step");
  Tensor y = Dropout(x, rate, step, seed);
  DropoutRun r{HostTensor::RandomUniform(f32, {n}, 5, 0.5, 1.5), {}};
  Session session(g, options);
  for (int32_t s : {0, 0, 1}) {
    auto out = session.Run({{x, r.x}, {step, HostTensor::Scalar<int32_t>(s)}}, {y});
    EXPECT_TRUE(out.ok()) << out.status();
    r.outs.push_back(out.ok() ? (*out)[0] : HostTensor());
  }
  return r;
}

// Kept: x / (1 - rate) exactly as the reference's product; dropped: 0. The fraction
// dropped is rate within 6 standard errors (sqrt(rate (1 - rate) / n) <= 1.6e-3).
TEST(RandomDropout, KeepsOneMinusRateScaledSameMaskPerStep) {
  for (double rate : {0.1, 0.5, 0.9}) {
    SCOPED_TRACE(rate);
    SessionOptions options;
    options.global_jit_level = JitLevel::kOn1;
    const DropoutRun run = RunDropout(rate, 11, options);
    const HostTensor& y = run.outs[0];
    ASSERT_EQ(y.num_elements(), run.x.num_elements());
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    int64_t dropped = 0;
    for (int64_t i = 0; i < y.num_elements(); ++i) {
      const float v = y.data<float>()[i];
      if (v == 0) {
        ++dropped;
      } else {
        ASSERT_EQ(v, run.x.data<float>()[i] * scale) << i;
      }
    }
    const double n = static_cast<double>(y.num_elements());
    EXPECT_NEAR(dropped / n, rate, 6 * std::sqrt(rate * (1 - rate) / n));
    std::string why;
    EXPECT_TRUE(AllClose(run.outs[1], y, 0, 0, &why)) << "the same step: " << why;
    EXPECT_FALSE(AllClose(run.outs[2], y, 0, 0)) << "another step, the same mask";
  }
}

TEST(RandomDropout, CompiledIsTheReferenceBitForBit) {
  SessionOptions jit;
  jit.global_jit_level = JitLevel::kOn1;
  const DropoutRun compiled = RunDropout(0.3, 12, jit);
  const DropoutRun reference = RunDropout(0.3, 12, gradtest::ReferenceOnly());
  for (size_t i = 0; i < compiled.outs.size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose(compiled.outs[i], reference.outs[i], 0, 0, &why)) << i << why;
  }
}

TEST(RandomDropout, RateZeroIsTheIdentityAndABadRateIsAnError) {
  Graph g;
  Tensor x = Placeholder(g, f32, {3}, "x");
  Tensor step = ScalarConst(g, 0, DType::kI32);
  Tensor same = Dropout(x, 0, step, 1);
  EXPECT_EQ(same.node_id(), x.node_id());
  EXPECT_TRUE(g.status().ok());
  for (double bad : {1.0, -0.1, 2.0, std::nan("")}) {
    Graph g2;
    Tensor x2 = Placeholder(g2, f32, {3}, "activations");
    Tensor y = Dropout(x2, bad, ScalarConst(g2, 0, DType::kI32), 1);
    EXPECT_FALSE(y.valid());
    EXPECT_NE(g2.status().message().find("Dropout of 'activations': rate"), std::string::npos)
        << g2.status();
    EXPECT_NE(g2.status().message().find("outside [0, 1)"), std::string::npos) << g2.status();
  }
}

}  // namespace
}  // namespace braze
