// Bad input to the random ops (rows of docs/BAD_INPUT.md): a step that is not an i32
// scalar, an unsupported dtype and a Dropout rate outside [0, 1) are build errors naming
// the node (or Dropout's input), returned by every Run in every mode; and the modes
// (reference, fused, strict) draw the same bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

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

TEST(RandomBadInput, BadStepDtypeAndRateAreErrorsNamingTheNodeInEveryMode) {
  struct BadCase {
    const char* what;
    std::function<Tensor(Graph&, Tensor)> build;
    const char* message;
  };
  const std::vector<BadCase> cases = {
      {"f32 step", [](Graph& g, Tensor x) { return RandomUniform(x, ScalarConst(g, 1.0), 1); },
       "step must be an i32 scalar"},
      {"vector step",
       [](Graph& g, Tensor x) { return RandomNormal(x, Placeholder(g, DType::kI32, {2}), 1); },
       "RandomNormal step must be an i32 scalar"},
      {"i32 uniform",
       [](Graph& g, Tensor x) {
         return x +
                Cast(RandomUniform(x, ScalarConst(g, 0, DType::kI32), 1, DType::kI32), DType::kF32);
       },
       "does not support dtype i32"},
      {"rate 1",
       [](Graph& g, Tensor x) { return Dropout(x, 1.0, ScalarConst(g, 0, DType::kI32), 1); },
       "Dropout of 'x': rate 1 is outside [0, 1)"},
  };
  for (const BadCase& bc : cases) {
    SCOPED_TRACE(bc.what);
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
    Tensor y;
    {
      JitScope scope(g);
      y = bc.build(g, x);
    }
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(bc.message)) << g.status();
    for (const SessionOptions& o : AllModes()) {
      Session s(g, o);
      auto r = s.Run({{x, HostTensor(DType::kF32, {2, 3})}}, {x});
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(bc.message));
    }
  }
}

// A -1 batch, a run-time step: reference, fused and strict draw the same bits.
TEST(RandomBadInput, EveryModeDrawsTheSameBits) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 7}, "x");
  Tensor step = Placeholder(g, DType::kI32, {}, "step");
  Tensor a, b;
  {
    JitScope scope(g);
    a = RandomNormal(x, step, 3) * 2.0;
    b = Dropout(x, 0.5, step, 3);
  }
  std::vector<std::vector<HostTensor>> results;
  for (const SessionOptions& o : AllModes()) {
    Session s(g, o);
    for (int32_t st : {0, 9}) {
      auto r = s.Run({{x, HostTensor::RandomUniform(DType::kF32, {5, 7}, 2)},
                      {step, HostTensor::Scalar<int32_t>(st)}},
                     {a, b});
      ASSERT_TRUE(r.ok()) << r.status();
      results.push_back(*std::move(r));
    }
  }
  for (size_t m = 2; m < results.size(); ++m) {
    for (size_t k = 0; k < 2; ++k) {
      const HostTensor& want = results[m % 2][k];
      EXPECT_EQ(std::memcmp(results[m][k].raw_data(), want.raw_data(), want.num_bytes()), 0)
          << m << " " << k;
    }
  }
}

}  // namespace
}  // namespace braze
