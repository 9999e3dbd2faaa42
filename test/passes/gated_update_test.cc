// The gated update match (passes/gated_update.h) is graph logic: which Assign(v,
// Select(p, x, v)) the runtime may commit by p instead of computing the Select.
#include "passes/gated_update.h"

#include <gtest/gtest.h>

#include "braze/ops.h"

namespace braze {
namespace {

std::vector<bool> All(const Graph& g) { return std::vector<bool>(g.num_nodes(), true); }

struct Gated {
  Graph g;
  Tensor v, p, x, select, assign;
  Gated() {
    v = Variable(g, HostTensor::RandomUniform(DType::kF32, {5, 3}, 1, -1, 1), "v");
    p = Placeholder(g, DType::kBool, {}, "p");
    x = v * 2.0;
    select = Select(p, x, v);
    assign = Assign(v, select);
  }
};

TEST(GatedUpdate, MatchesASelectOfTheValueOrTheVariable) {
  Gated t;
  auto m = MatchGatedUpdates(t.g, All(t.g), {});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].select, t.select.node_id());
  EXPECT_EQ(m[0].assign, t.assign.node_id());
  EXPECT_EQ(m[0].gate, t.p);
  EXPECT_EQ(m[0].value, t.x);
  EXPECT_EQ(m[0].variable, t.v);
  EXPECT_TRUE(MatchGatedUpdate(t.g, t.assign.node_id()).has_value());
  EXPECT_FALSE(MatchGatedUpdate(t.g, t.select.node_id()).has_value());  // not an Assign
}

TEST(GatedUpdate, NotWhenTheSelectIsReadOrFetchedOrTheVariableUpdatedTwice) {
  {
    Gated t;
    Tensor other = Exp(t.select);
    EXPECT_TRUE(MatchGatedUpdates(t.g, All(t.g), {}).empty());
    std::vector<bool> needed = All(t.g);
    needed[other.node_id()] = false;  // the reader not needed: a match
    EXPECT_EQ(MatchGatedUpdates(t.g, needed, {}).size(), 1u);
  }
  {
    Gated t;
    EXPECT_TRUE(MatchGatedUpdates(t.g, All(t.g), {{t.select.node_id(), 0}}).empty());
  }
  {
    Gated t;
    AssignAdd(t.v, t.x);
    EXPECT_TRUE(MatchGatedUpdates(t.g, All(t.g), {}).empty());
  }
}

TEST(GatedUpdate, NotForOtherShapesOfTheSelect) {
  Graph g;
  Tensor v = Variable(g, HostTensor::RandomUniform(DType::kF32, {4, 3}, 1, -1, 1), "v");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {4, 3}, 2, -1, 1), "w");
  Tensor p = Placeholder(g, DType::kBool, {}, "p");
  Tensor mask = Placeholder(g, DType::kBool, {4, 3}, "mask");
  Tensor row = Placeholder(g, DType::kF32, {3}, "row");
  Tensor x = v + 1.0;
  const Tensor assigns[] = {
      Assign(v, Select(mask, x, v)),  // an elementwise predicate
      Assign(v, Select(p, v, x)),     // the variable is the taken branch
      Assign(v, Select(p, x, w)),     // another variable kept
      Assign(v, Select(p, row, v)),   // a broadcast value
  };
  for (const Tensor& a : assigns) {
    EXPECT_FALSE(MatchGatedUpdate(g, a.node_id()).has_value()) << a.name();
  }
  EXPECT_FALSE(MatchGatedUpdate(g, AssignAdd(v, Select(p, x, v)).node_id()).has_value());
}

}  // namespace
}  // namespace braze
