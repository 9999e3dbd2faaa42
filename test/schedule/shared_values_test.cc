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

// The outputs, every Func of the pipeline given static extents {16, 4} as the lowering
// gives its values'.
PipelineInfo Outputs(const std::vector<Func>& outs) {
  PipelineInfo info;
  for (const Func& f : outs) {
    info.outputs.push_back(f);
    info.output_extents.push_back({16, 4});
    for (const auto& [name, unused] : Halide::Internal::find_transitive_calls(f.function())) {
      info.value_extents[name] = {16, 4};
    }
  }
  return info;
}

std::vector<std::string> Names(const std::vector<SharedValue>& vs) {
  std::vector<std::string> names;
  for (const SharedValue& v : vs) names.push_back(v.func.name());
  return names;
}

TEST(SharedValuesTest, ExpensiveValueReadByTwoOutputsIsStored) {
  Func r = Expensive("r");
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

// The cost counts what a value inlines: a cheap product of an expensive value is stored
// whole when two stored Funcs read the product, and the value then has one reader.
TEST(SharedValuesTest, TheOutermostSharedChainIsStored) {
  Func r = Expensive("r");
  Func g("g"), a("a"), b("b");
  g(x, y) = r(x, y) * 2.0f + 1.0f;
  a(x, y) = g(x, y) - 3.0f;
  b(x, y) = g(x, y) * g(x, y);
  const std::vector<SharedValue> chosen = ExpensiveSharedValues(Outputs({a, b}), {});
  EXPECT_EQ(Names(chosen), std::vector<std::string>{g.name()});
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_GE(chosen[0].nodes, kExpensiveValueNodes);
}

// Two readers of the value itself besides the chain: both it and the chain are stored,
// the chain first (the costlier), then the value (still read by a and the chain).
TEST(SharedValuesTest, AValueReadBesideItsSharedChainIsStoredToo) {
  Func r = Expensive("r");
  Func g("g"), a("a"), b("b"), c("c");
  g(x, y) = r(x, y) * 2.0f + 1.0f;
  a(x, y) = g(x, y) - 3.0f;
  b(x, y) = g(x, y) * g(x, y);
  c(x, y) = r(x, y) + 5.0f;
  EXPECT_EQ(Names(ExpensiveSharedValues(Outputs({a, b, c}), {})),
            (std::vector<std::string>{g.name(), r.name()}));
}

// A value the lowering gave no static extents (a symbolic dim) is left inlined: it
// could not be stored whole.
TEST(SharedValuesTest, AValueWithoutStaticExtentsIsLeftInlined) {
  Func r = Expensive("r");
  Func a("a"), b("b");
  a(x, y) = r(x, y) + 1.0f;
  b(x, y) = r(x, y) * 3.0f;
  PipelineInfo info = Outputs({a, b});
  ASSERT_EQ(Names(ExpensiveSharedValues(info, {})), std::vector<std::string>{r.name()});
  EXPECT_EQ(ExpensiveSharedValues(info, {})[0].extents, (Extents{16, 4}));
  info.value_extents.erase(r.name());
  EXPECT_TRUE(ExpensiveSharedValues(info, {}).empty());
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
