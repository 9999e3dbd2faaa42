// bf16 and f16 through a Session (docs/MIXED_PRECISION.md), and their rows of
// docs/BAD_INPUT.md: a feed of another float dtype, mixed dtypes in one op, a 16-bit
// random op; each an error naming the node, in every mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

std::vector<SessionOptions> AllModes() {
  SessionOptions reference, fused, strict;
  reference.reference_only = true;
  strict.strict = true;
  return {reference, fused, strict};
}

// A small 16-bit network (matmul, bias, ReLU, softmax, a mean loss) and its gradient
// give the same values compiled (strict: every op compiles) as on the reference kernels.
TEST(Float16Session, TrainingStepMatchesTheReferenceInEveryMode) {
  for (DType d : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(d));
    Graph g;
    Tensor x = Placeholder(g, d, {-1, 13}, "x");
    Tensor w = Const(g, HostTensor::RandomUniform(d, {13, 7}, 1, -0.5, 0.5), "w");
    Tensor b = Const(g, HostTensor::RandomUniform(d, {7}, 2), "b");
    Tensor y, loss, dw;
    {
      JitScope scope(g);
      y = Softmax(Relu(MatMul(x, w) + b));
      loss = Mean(Cast(y, DType::kF32) * Cast(y, DType::kF32));
      auto grads = Gradients({loss}, {w});
      ASSERT_TRUE(grads.ok()) << grads.status();
      dw = (*grads)[0];
    }
    ASSERT_TRUE(g.status().ok()) << g.status();
    EXPECT_EQ(y.dtype(), d);
    EXPECT_EQ(dw.dtype(), d);
    const HostTensor feed = HostTensor::RandomUniform(d, {9, 13}, 3);
    std::vector<HostTensor> want;
    for (const SessionOptions& o : AllModes()) {
      Session s(g, o);
      auto r = s.Run({{x, feed}}, {y, loss, dw});
      ASSERT_TRUE(r.ok()) << r.status();
      if (want.empty()) {
        want = *r;
        continue;
      }
      const double ulp = d == DType::kBF16 ? 0x1p-7 : 0x1p-10;
      for (size_t i = 0; i < want.size(); ++i) {
        std::string why;
        // A gradient chains several roundings: a few ulps.
        EXPECT_TRUE(AllClose((*r)[i], want[i], 4 * ulp, 1e-4, &why)) << i << ": " << why;
      }
    }
  }
}

TEST(Float16BadInput, AFeedOfAnotherFloatTypeNamesThePlaceholder) {
  Graph g;
  Tensor x = Placeholder(g, DType::kBF16, {-1, 3}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(x) * 2.0;
  }
  for (const SessionOptions& o : AllModes()) {
    Session s(g, o);
    for (const HostTensor& bad :
         {HostTensor(DType::kF32, {4, 3}), HostTensor(DType::kF16, {4, 3})}) {
      auto r = s.Run({{x, bad}}, {y});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'x'"));
    }
    EXPECT_TRUE(s.Run({{x, HostTensor(DType::kBF16, {4, 3})}}, {y}).ok());
  }
}

TEST(Float16BadInput, MixedFloatTypesAndSixteenBitRandomOpsAreBuildErrorsNamingTheNode) {
  {
    Graph g;
    Tensor a = Placeholder(g, DType::kBF16, {3}, "a");
    Tensor b = Placeholder(g, DType::kF32, {3}, "b");
    Add(a, b);
    EXPECT_FALSE(g.status().ok());
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("node 'Add'"));
  }
  {
    Graph g;
    Tensor a = Placeholder(g, DType::kF16, {3}, "a");
    Tensor w = Placeholder(g, DType::kBF16, {3, 2}, "w");
    MatMul(Reshape(a, {1, 3}), w);
    EXPECT_FALSE(g.status().ok());
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("MatMul"));
  }
  for (DType d : {DType::kBF16, DType::kF16}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    RandomUniform(x, ScalarConst(g, 0, DType::kI32), 1, d);
    EXPECT_FALSE(g.status().ok());
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("does not support dtype"));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(DTypeName(d)));
  }
}

}  // namespace
}  // namespace braze
