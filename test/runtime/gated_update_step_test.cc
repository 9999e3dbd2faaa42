// The gated update step (runtime/step_gated_update.cc): Assign(v, Select(p, x, v)) with
// p a bool scalar commits x or nothing by p, the Select computed nowhere; x is computed
// in the cluster of its inputs, which no longer waits for p. Against the reference
// kernels, with p true and false, the Assign's value fetched.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "device/features.h"
#include "runtime/plan.h"

namespace braze {
namespace {

// v [7, 5] (odd, prime) and the loss-scaling shape of a step: g = x * v, the new value
// v - 0.25 g, committed only if every |g| is finite (a reduction over g).
struct GatedStep {
  Graph g;
  Tensor x, v, grad, value, finite, select, assign;
  GatedStep() {
    x = Placeholder(g, DType::kF32, {7, 5}, "x");
    v = Variable(g, HostTensor::RandomUniform(DType::kF32, {7, 5}, 3, -1, 1), "v");
    JitScope jit(g);
    grad = x * v;
    value = v - grad * 0.25;
    finite = Less(Max(Abs(grad)), ScalarConst(g, std::numeric_limits<double>::infinity()));
    select = Select(finite, value, v);
    assign = Assign(v, select);
  }
};

HostTensor Input(double bad) {
  HostTensor x = HostTensor::RandomUniform(DType::kF32, {7, 5}, 4, -2, 2);
  if (bad != 0) x.SetDouble(12, bad);
  return x;
}

TEST(GatedUpdateStep, ClaimsTheSelectAndTheAssign) {
  GatedStep t;
  SessionOptions o;
  o.device = "cpu";
  absl::StatusOr<Device> device = device::ResolveSessionDevice(o.device);
  ASSERT_TRUE(device.ok()) << device.status();
  auto plan = BuildPlan(t.g, o, *device, {}, {t.assign}, std::vector<bool>(t.g.num_nodes(), false));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Plan& p = **plan;
  EXPECT_EQ(p.clustering.ReasonOf(t.select.node_id()), ExclusionReason::kGatedUpdate);
  int gated = 0;
  for (const Step& s : p.steps) {
    if (s.kind != Step::Kind::kGatedUpdate) continue;
    ++gated;
    EXPECT_EQ(s.nodes, (std::vector<int>{t.select.node_id(), t.assign.node_id()}));
    EXPECT_EQ(s.inputs, (std::vector<Tensor>{t.finite, t.value, t.v}));
    EXPECT_EQ(s.fallback.size(), 2u);
  }
  EXPECT_EQ(gated, 1);
  // The new value and the gate are computed in one cluster, as outputs.
  const int c = p.clustering.ClusterOf(t.value.node_id());
  EXPECT_GE(c, 0);
  EXPECT_EQ(p.clustering.ClusterOf(t.finite.node_id()), c);
}

// Compiled and reference sessions agree: v takes the new value when g is finite, and
// keeps its value (bit for bit) when an inf or a NaN reaches g; the Assign's value
// fetched is the variable's value after the Run.
TEST(GatedUpdateStep, CommitsTheValueOnlyWhenTheGateIsTrue) {
  for (double bad : {0.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    SCOPED_TRACE(bad);
    GatedStep t;
    SessionOptions ref_options;
    ref_options.reference_only = true;
    Session compiled(t.g), reference(t.g, ref_options);
    const HostTensor before = *compiled.VariableValue(t.v);
    auto got = compiled.Run({{t.x, Input(bad)}}, {t.assign});
    auto want = reference.Run({{t.x, Input(bad)}}, {t.assign});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    const HostTensor after = *compiled.VariableValue(t.v);
    std::string why;
    EXPECT_TRUE(AllClose(after, *reference.VariableValue(t.v), 1e-6, 1e-6, &why)) << why;
    EXPECT_TRUE(AllClose((*got)[0], after, 0, 0, &why)) << why;
    EXPECT_TRUE(AllClose((*want)[0], after, 1e-6, 1e-6, &why)) << why;
    EXPECT_EQ(AllClose(after, before, 0, 0), bad != 0);
    EXPECT_GT(compiled.stats().cluster_launches, 0);
  }
}

// Several Runs: a skipped step between two committed ones (the step's buffers swap
// with the variable's storage at each commit).
TEST(GatedUpdateStep, ASkippedRunBetweenCommittedOnes) {
  GatedStep t;
  SessionOptions ref_options;
  ref_options.reference_only = true;
  Session compiled(t.g), reference(t.g, ref_options);
  for (double bad : {0.0, std::numeric_limits<double>::infinity(), 0.0, 0.0}) {
    ASSERT_TRUE(compiled.Run({{t.x, Input(bad)}}, {}, {t.assign}).ok());
    ASSERT_TRUE(reference.Run({{t.x, Input(bad)}}, {}, {t.assign}).ok());
    std::string why;
    EXPECT_TRUE(
        AllClose(*compiled.VariableValue(t.v), *reference.VariableValue(t.v), 1e-6, 1e-6, &why))
        << bad << ": " << why;
  }
}

}  // namespace
}  // namespace braze
