// ExpensiveSharedValues (schedule/shared_values.h) on pipelines built here: which pure
// Funcs the safe default stores once because several stored Funcs read them.
#include "schedule/shared_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace braze {
namespace schedule {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

Var x("x"), y("y");

// A long integer hash of the coordinates, as a random draw is: well over
// kExpensiveValueNodes nodes of its own.
Func Expensive(const std::string& name) {
  Expr h = Halide::cast<uint32_t>(x + 131 * y);
  for (int round = 0; round < 40; ++round) {
    h = (h * Halide::cast<uint32_t>(Expr(static_cast<int>(2654435761u & 0x7fffffffu) + round))) ^
        (h >> Halide::cast<uint32_t>(Expr(round % 7 + 3)));
  }
  Func f(name);
  f(x, y) = Halide::cast<float>(h) * 1e-9f;
  return f;
}

PipelineInfo Outputs(const std::vector<Func>& outs) {
  PipelineInfo info;
  for (const Func& f : outs) {
    info.outputs.push_back(f);
    info.output_extents.push_back({16, 4});
  }
  return info;
}

std::vector<std::string> Names(const std::vector<Func>& fs) {
  std::vector<std::string> names;
  for (const Func& f : fs) names.push_back(f.name());
  return names;
}

TEST(SharedValuesTest, ExpensiveValueReadByTwoOutputsIsStored) {
  Func r = Expensive("r");
  ASSERT_GE(OwnDefinitionNodes(r), kExpensiveValueNodes);
  Func mask("mask"), scaled("scaled"), a("a"), b("b");
  mask(x, y) = r(x, y) < 0.5f;  // read through an inlined Func
  a(x, y) = Halide::select(mask(x, y), 1.0f, 0.0f);
  scaled(x, y) = r(x, y) * 2.0f;
  b(x, y) = scaled(x, y) + 1.0f;
  EXPECT_EQ(Names(ExpensiveSharedValues(Outputs({a, b}), {})), std::vector<std::string>{r.name()});
}

TEST(SharedValuesTest, OneReaderOrACheapValueIsLeftInlined) {
  Func r = Expensive("r");
  Func a("a"), b("b"), c("c"), d("d"), cheap("cheap");
  a(x, y) = r(x, y) + 1.0f;
  b(x, y) = Halide::cast<float>(x);
  EXPECT_TRUE(ExpensiveSharedValues(Outputs({a, b}), {}).empty());
  cheap(x, y) = Halide::exp(Halide::cast<float>(x + y));
  ASSERT_LT(OwnDefinitionNodes(cheap), kExpensiveValueNodes);
  c(x, y) = cheap(x, y) * 2.0f;
  d(x, y) = cheap(x, y) - 1.0f;
  EXPECT_TRUE(ExpensiveSharedValues(Outputs({c, d}), {}).empty());
}

// A reduction's accumulator is a stored reader: an output and a row sum make two.
TEST(SharedValuesTest, AReductionAndAnOutputAreTwoReaders) {
  Func r = Expensive("r");
  Func sum("sum"), a("a");
  Halide::RDom k(0, 16);
  sum(y) = 0.0f;
  sum(y) += r(k, y);
  a(x, y) = r(x, y) / sum(y);
  PipelineInfo info = Outputs({a});
  Stage s;
  s.kind = StageKind::kReduction;
  s.acc = sum;
  s.rdom = k;
  s.extents = {4};
  info.stages.push_back(s);
  EXPECT_EQ(Names(ExpensiveSharedValues(info, {})), std::vector<std::string>{r.name()});
  // Already stored (a compared operand, say): not chosen again.
  EXPECT_TRUE(ExpensiveSharedValues(info, {r}).empty());
}

// Read at an index loaded from memory (a gather): Halide could not bound a stored copy.
TEST(SharedValuesTest, ValueReadAtALoadedIndexIsLeftInlined) {
  Func r = Expensive("r");
  Halide::ImageParam ids(Halide::Int(32), 1, "ids");
  Func a("a"), b("b");
  a(x, y) = r(x, Halide::clamp(ids(y), 0, 3));
  b(x, y) = r(x, y) * 3.0f;
  EXPECT_TRUE(ExpensiveSharedValues(Outputs({a, b}), {}).empty());
}

// An attention stage computes its Funcs per key tile; nothing of it is stored whole.
TEST(SharedValuesTest, AttentionPipelinesAreLeftAlone) {
  Func r = Expensive("r");
  Func a("a"), b("b");
  a(x, y) = r(x, y) + 1.0f;
  b(x, y) = r(x, y) * 3.0f;
  PipelineInfo info = Outputs({a, b});
  Stage s;
  s.kind = StageKind::kAttention;
  s.acc = a;
  info.stages.push_back(s);
  EXPECT_TRUE(ExpensiveSharedValues(info, {}).empty());
}

}  // namespace
}  // namespace schedule
}  // namespace braze
