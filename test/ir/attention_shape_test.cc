// Shape inference of the attention ops: their shapes (leading dims of any rank, Tq != Tk,
// Dv != D, -1 sequence lengths carried through) and every bad operand or attribute a
// build error naming the node (docs/BAD_INPUT.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

const DType f32 = DType::kF32;

TEST(AttentionShapes, OutputsOfEveryOp) {
  Graph g;
  Tensor q = Placeholder(g, f32, {2, 3, -1, 8});
  Tensor k = Placeholder(g, f32, {2, 3, 11, 8});
  Tensor v = Placeholder(g, f32, {2, 3, 11, 5});
  EXPECT_EQ(ScaledDotProductAttention(q, k, v).shape(), (Shape{2, 3, -1, 5}));
  AttentionOptions unfused;
  unfused.fused = false;
  unfused.causal = true;
  EXPECT_EQ(ScaledDotProductAttention(q, k, v, unfused).shape(), (Shape{2, 3, -1, 5}));
  AttentionAttrs a;
  EXPECT_EQ(AttentionLogSumExp(q, k, a).shape(), (Shape{2, 3, -1}));
  Tensor dout = Placeholder(g, f32, {2, 3, -1, 5});
  Tensor lse = Placeholder(g, f32, {2, 3, -1});
  EXPECT_EQ(AttentionGrad(OpKind::kAttentionGradQ, q, k, v, dout, lse, lse, a).shape(), q.shape());
  EXPECT_EQ(AttentionGrad(OpKind::kAttentionGradK, q, k, v, dout, lse, lse, a).shape(), k.shape());
  EXPECT_EQ(AttentionGrad(OpKind::kAttentionGradV, q, k, v, dout, lse, lse, a).shape(), v.shape());
  Tensor q2 = Placeholder(g, DType::kF64, {7, 4});
  EXPECT_EQ(ScaledDotProductAttention(q2, q2, q2).shape(), (Shape{7, 4}));
  EXPECT_TRUE(g.status().ok()) << g.status();
}

TEST(AttentionShapes, DropoutWithoutAStepNamesTheQuery) {
  Graph g;
  Tensor q = Placeholder(g, f32, {3, 4}, "q");
  AttentionOptions o;
  o.dropout = 0.1;
  EXPECT_FALSE(ScaledDotProductAttention(q, q, q, o).valid());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'q': dropout 0.1 needs a step"));
}

struct ErrorCase {
  const char* name;
  std::function<void(Graph&)> build;
  const char* message;
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
};
void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class AttentionBuildErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(AttentionBuildErrors, NamesTheNode) {
  Graph g;
  GetParam().build(g);
  ASSERT_FALSE(g.status().ok());
  EXPECT_EQ(g.status().code(), GetParam().code) << g.status();
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("(Attention"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(GetParam().message));
}

Tensor P(Graph& g, Shape s, DType dt = f32) { return Placeholder(g, dt, std::move(s)); }

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionBuildErrors,
    ::testing::Values(
        ErrorCase{"RankOne",
                  [](Graph& g) { ScaledDotProductAttention(P(g, {4}), P(g, {4}), P(g, {4})); },
                  "q must be [..., T, D]"},
        ErrorCase{"IntegerQ",
                  [](Graph& g) {
                    Tensor x = P(g, {3, 4}, DType::kI32);
                    ScaledDotProductAttention(x, x, x);
                  },
                  "does not support dtype i32"},
        ErrorCase{
            "MixedDtypes",
            [](Graph& g) {
              ScaledDotProductAttention(P(g, {3, 4}), P(g, {3, 4}, DType::kF64), P(g, {3, 4}));
            },
            "k is f64[3,4]"},
        ErrorCase{"WidthsDiffer",
                  [](Graph& g) {
                    ScaledDotProductAttention(P(g, {3, 4}), P(g, {5, 3}), P(g, {5, 2}));
                  },
                  "differ in D"},
        ErrorCase{"KeysAndValuesDiffer",
                  [](Graph& g) {
                    ScaledDotProductAttention(P(g, {3, 4}), P(g, {5, 4}), P(g, {6, 4}));
                  },
                  "differ in T"},
        ErrorCase{"LeadingDimsDiffer",
                  [](Graph& g) {
                    ScaledDotProductAttention(P(g, {2, 3, 4}), P(g, {3, 3, 4}), P(g, {3, 3, 4}));
                  },
                  "differ in leading dim 0"},
        ErrorCase{"RanksDiffer",
                  [](Graph& g) {
                    ScaledDotProductAttention(P(g, {2, 3, 4}), P(g, {3, 4}), P(g, {3, 4}));
                  },
                  "must have rank 3"},
        ErrorCase{"UnknownWidthNoScale",
                  [](Graph& g) {
                    ScaledDotProductAttention(P(g, {3, -1}), P(g, {3, -1}), P(g, {3, 2}));
                  },
                  "scale must be finite"},
        ErrorCase{"InfiniteScale",
                  [](Graph& g) {
                    AttentionOptions o;
                    o.scale = std::numeric_limits<double>::infinity();
                    ScaledDotProductAttention(P(g, {3, 4}), P(g, {3, 4}), P(g, {3, 4}), o);
                  },
                  "scale must be finite"},
        ErrorCase{"DropoutOutOfRange",
                  [](Graph& g) {
                    AttentionOptions o;
                    o.dropout = 1;
                    ScaledDotProductAttention(P(g, {3, 4}), P(g, {3, 4}), P(g, {3, 4}), o);
                  },
                  "dropout rate must be in [0, 1)"},
        ErrorCase{"DropoutWithoutAStep",
                  [](Graph& g) {
                    AttentionAttrs a;
                    a.dropout = 0.5;
                    Attention(P(g, {3, 4}), P(g, {3, 4}), P(g, {3, 4}), a);
                  },
                  "expects 4 inputs (the last the dropout's step), got 3"},
        ErrorCase{"DropoutStepNotAnI32Scalar",
                  [](Graph& g) {
                    AttentionAttrs a;
                    a.dropout = 0.5;
                    Attention(P(g, {3, 4}), P(g, {3, 4}), P(g, {3, 4}), a, P(g, {2}, DType::kI32));
                  },
                  "dropout step must be an i32 scalar, got i32[2]"},
        ErrorCase{"GradientOfTheWrongDout",
                  [](Graph& g) {
                    Tensor x = P(g, {3, 4});
                    AttentionGrad(OpKind::kAttentionGradQ, x, x, x, P(g, {3, 5}), P(g, {3}),
                                  P(g, {3}), AttentionAttrs());
                  },
                  "differ in D"},
        ErrorCase{"GradientOfTheWrongLse",
                  [](Graph& g) {
                    Tensor x = P(g, {3, 4});
                    AttentionGrad(OpKind::kAttentionGradK, x, x, x, x, P(g, {4}), P(g, {3}),
                                  AttentionAttrs());
                  },
                  "lse f32[4] and q f32[3,4] differ in T"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace braze
