// Verify mode: a compiled kernel's first run per signature against the reference
// kernels; an injected miscompile fails the Run with a Status that names it.
#include "runtime/verify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

struct Softmaxed {
  Graph g;
  Tensor x, y;
  Softmaxed() {
    x = Placeholder(g, DType::kF32, {-1, 13}, "x");
    JitScope scope(g);
    y = Softmax(x * 1.5);
  }
};

HostTensor Input(int64_t rows) { return HostTensor::RandomUniform(DType::kF32, {rows, 13}, 3); }

TEST(Verify, AnInjectedMiscompileFailsTheRunNamingTheCluster) {
  Softmaxed m;
  SessionOptions o;
  o.verify = true;
  o.scheduler = Scheduler::kSafeDefault;
  o.inject_wrong_result = [](const std::string& step) { return step.rfind("cluster", 0) == 0; };
  Session s(m.g, o);
  auto r = s.Run({{m.x, Input(7)}}, {m.y});
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status().message());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(msg, HasSubstr("verify: cluster 'cluster_0'"));
  EXPECT_THAT(msg, HasSubstr("Max, "));  // the ops
  EXPECT_THAT(msg, HasSubstr("scheduler SafeDefault"));
  EXPECT_THAT(msg, HasSubstr("worst [0]"));
  const size_t at = msg.find("dumped to ");
  ASSERT_NE(at, std::string::npos);
  std::ifstream dump(msg.substr(at + 10));
  EXPECT_TRUE(dump.good()) << msg;
  EXPECT_EQ(s.stats().verified_kernels, 0);
}

TEST(Verify, WithoutVerifyTheInjectedErrorReachesTheUser) {
  // The hook works: this is the wrong value verify mode catches.
  Softmaxed m;
  SessionOptions o;
  o.inject_wrong_result = [](const std::string& step) { return step.rfind("cluster", 0) == 0; };
  SessionOptions ref;
  ref.reference_only = true;
  auto got = Session(m.g, o).Run({{m.x, Input(7)}}, {m.y});
  auto want = Session(m.g, ref).Run({{m.x, Input(7)}}, {m.y});
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_NEAR((*got)[0].GetDouble(0), (*want)[0].GetDouble(0) + 1, 1e-5);
}

TEST(Verify, CorrectKernelsPassOncePerSignature) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 13}, "x");
  Tensor i = Placeholder(g, DType::kI32, {7}, "i");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {13, 5}, 9), "w");
  std::vector<Tensor> fetches;
  Tensor step;
  {
    JitScope scope(g);
    Tensor logits = MatMul(x, w);
    Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, Softmax(logits * 0.5)));
    fetches = {loss, Sum(Cast(Greater(logits, logits * 0.9), DType::kF32), {1}), Max(i * 3, {0}),
               ArgMax(logits, 1)};
    step = Assign(w, w - 0.1 * w);
  }
  SessionOptions o;
  o.verify = true;
  Session s(g, o);
  for (int64_t rows : {7, 7, 3}) {
    auto r = s.Run({{x, Input(rows)}, {i, HostTensor::RandomUniform(DType::kI32, {7}, 1, -5, 5)}},
                   fetches, {step});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // Two signatures (7 and 3 rows); the second run with 7 rows checks nothing again.
  const int64_t per_signature = s.stats().verified_kernels / 2;
  EXPECT_GE(per_signature, 1);
  EXPECT_EQ(s.stats().verified_kernels % 2, 0);
}

// A 16-bit output is compared to within an ulp of its type: oneDNN's bf16 matmul sums in
// another order than the reference kernels, and a product next to a rounding boundary
// rounds to the neighbouring bf16 (verify mode failed the bf16 MLP step's first layer on
// one element of 131072 before).
TEST(Verify, SixteenBitOutputsMayDifferByAnUlpOfTheirType) {
  EXPECT_EQ(OutputRtol(DType::kBF16, 2e-3), 0x1p-7);
  EXPECT_EQ(OutputRtol(DType::kF16, 1e-4), 0x1p-10);
  EXPECT_EQ(OutputRtol(DType::kF16, 2e-3), 2e-3);
  EXPECT_EQ(OutputRtol(DType::kF32, 2e-3), 2e-3);
  Graph g;
  Tensor x = Placeholder(g, DType::kBF16, {-1, 1024}, "x");
  Tensor w = Placeholder(g, DType::kBF16, {1024, 1024}, "w");
  Tensor y;
  {
    JitScope scope(g);
    y = Relu(MatMul(x, w));
  }
  SessionOptions o;
  o.verify = true;
  Session s(g, o);
  const HostTensor wv = HostTensor::RandomUniform(DType::kBF16, {1024, 1024}, 5, -0.05, 0.05);
  for (int64_t rows : {512, 509}) {
    auto r =
        s.Run({{x, HostTensor::RandomUniform(DType::kBF16, {rows, 1024}, rows)}, {w, wv}}, {y});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(s.stats().verified_kernels, 2);
}

TEST(Verify, TheFlagTurnsItOnForEverySession) {
  BrazeFlags flags;
  flags.verify = true;
  SetBrazeFlagsForTesting(flags);
  Softmaxed m;
  SessionOptions o;
  o.inject_wrong_result = [](const std::string& step) { return step.rfind("cluster", 0) == 0; };
  auto r = Session(m.g, o).Run({{m.x, Input(5)}}, {m.y});
  SetBrazeFlagsForTesting(BrazeFlags{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("verify: cluster"));
  EXPECT_TRUE(ParseBrazeFlags("--verify").value().verify);
  EXPECT_FALSE(ParseBrazeFlags("--verify=0").value().verify);
  EXPECT_FALSE(ParseBrazeFlags("--verify=maybe").ok());
}

TEST(Verify, AFailedVerifyChangesNoVariable) {
  Graph g;
  Tensor v = Variable(g, HostTensor::From<float>({1, 2, 3}, {3}), "v");
  Tensor out;
  Tensor update;
  {
    JitScope scope(g);
    out = Exp(v) * 2.0;
    update = Assign(v, v + 1.0);
  }
  SessionOptions o;
  o.verify = true;
  o.inject_wrong_result = [](const std::string& step) { return step.rfind("cluster", 0) == 0; };
  Session s(g, o);
  ASSERT_FALSE(s.Run({}, {out}, {update}).ok());
  EXPECT_EQ(s.VariableValue(v)->ToVector<float>(), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace braze
