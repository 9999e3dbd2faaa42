// BuildPlan (runtime/plan.h) on its own, with no Session: the steps it makes (a cluster
// is one step, a compilable op outside every cluster a single-op step, a HostCall a
// reference step, a CUDA MatMul with its bias a GEMM step), their fallbacks, their
// memory spaces, their topological order, the stages it reports, and the errors it
// returns for bad input. Every test places its ops explicitly ("cpu" unless it says
// otherwise), so no driver is asked which devices exist.
#include "runtime/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/optimizers.h"
#include "braze/precision.h"
#include "device/features.h"
#include "runtime/step_kind.h"

namespace braze {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SessionOptions CpuOptions() {
  SessionOptions o;
  o.device = "cpu";
  return o;
}

// BuildPlan with nothing fed.
absl::StatusOr<std::unique_ptr<const Plan>> Build(const Graph& g, const SessionOptions& options,
                                                  const std::vector<Tensor>& fetches,
                                                  const std::vector<Tensor>& targets = {}) {
  // SessionOptions::device is parsed once, where the session starts (as Session does).
  absl::StatusOr<Device> device = device::ResolveSessionDevice(options.device);
  if (!device.ok()) return device.status();
  return BuildPlan(g, options, *device, fetches, targets, std::vector<bool>(g.num_nodes(), false));
}

// A HostCall that returns its input: never compiled.
Tensor Identity(Graph& g, Tensor x, const std::string& name) {
  return HostCall(g, name, {x}, {{x.dtype(), x.shape()}},
                  [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                    return std::vector<HostTensor>{in[0]};
                  })[0];
}

std::vector<Step::Kind> Kinds(const std::vector<Step>& steps) {
  std::vector<Step::Kind> kinds;
  for (const Step& s : steps) kinds.push_back(s.kind);
  return kinds;
}

// The op-by-op fallback of a compiled cluster or GEMM: a single-op step per op (a Const
// is bound, not run), each falling back in turn to its reference kernel, which has no
// fallback.
void ExpectOpByOpFallback(const Graph& g, const Step& step) {
  std::vector<int> ops;
  for (int id : step.nodes) {
    if (g.node(id).op() != OpKind::kConst) ops.push_back(id);
  }
  std::vector<int> nodes;
  for (const Step& f : step.fallback) {
    EXPECT_EQ(f.kind, Step::Kind::kSingleOp) << f.name;
    EXPECT_EQ(f.space, step.space) << f.name;
    ASSERT_EQ(f.nodes.size(), 1u);
    nodes.push_back(f.nodes[0]);
    ASSERT_EQ(f.fallback.size(), 1u) << f.name;
    const Step& ref = f.fallback[0];
    EXPECT_EQ(ref.kind, Step::Kind::kReference);
    EXPECT_EQ(ref.space, Space::kHost);
    EXPECT_EQ(ref.nodes, f.nodes);
    EXPECT_EQ(ref.inputs, f.inputs);
    EXPECT_EQ(ref.outputs, f.outputs);
    EXPECT_TRUE(ref.fallback.empty());
  }
  EXPECT_EQ(nodes, ops) << step.name;
}

TEST(BuildPlanTest, AFusedClusterIsOneStepWithAnOpByOpFallback) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {4, 8}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Tanh(Exp(x) * 2.0);  // Exp, Const, Mul, Tanh
  }
  auto plan = Build(g, CpuOptions(), {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Plan& p = **plan;
  ASSERT_EQ(p.clustering.clusters.size(), 1u);
  ASSERT_EQ(p.steps.size(), 1u);
  const Step& s = p.steps[0];
  EXPECT_EQ(s.kind, Step::Kind::kCluster);
  EXPECT_EQ(s.name, p.clustering.clusters[0].name);
  EXPECT_EQ(s.nodes, p.clustering.clusters[0].nodes);
  EXPECT_EQ(s.space, Space::kHost);
  EXPECT_THAT(s.inputs, ElementsAre(x));
  EXPECT_THAT(s.outputs, ElementsAre(y));
  // Exp, Mul, Tanh: the Const is a source, bound by the executor, never a step.
  EXPECT_EQ(s.fallback.size(), 3u);
  ExpectOpByOpFallback(g, s);
  // Needed: every node the fetch reads, nothing else.
  EXPECT_EQ(p.needed, std::vector<bool>(g.num_nodes(), true));
}

TEST(BuildPlanTest, AnOpOutsideEveryClusterIsASingleOpStepFallingBackToItsReference) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y = Exp(x);  // no scope, jit level off: not clustered
  auto plan = Build(g, CpuOptions(), {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ((*plan)->steps.size(), 1u);
  const Step& s = (*plan)->steps[0];
  EXPECT_EQ(s.kind, Step::Kind::kSingleOp);
  EXPECT_EQ(s.name, "Exp");
  EXPECT_THAT(s.nodes, ElementsAre(y.node_id()));
  EXPECT_THAT(s.inputs, ElementsAre(x));
  EXPECT_THAT(s.outputs, ElementsAre(y));
  ASSERT_EQ(s.fallback.size(), 1u);
  EXPECT_EQ(s.fallback[0].kind, Step::Kind::kReference);
  EXPECT_EQ(s.fallback[0].nodes, s.nodes);
  EXPECT_TRUE(s.fallback[0].fallback.empty());
}

TEST(BuildPlanTest, AHostCallIsAReferenceStepWithNoFallback) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor h;
  {
    JitScope scope(g);  // asks for compilation, which a HostCall never gets
    h = Identity(g, x, "user_fn");
  }
  auto plan = Build(g, CpuOptions(), {h});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ((*plan)->steps.size(), 1u);
  const Step& s = (*plan)->steps[0];
  EXPECT_EQ(s.kind, Step::Kind::kReference);
  EXPECT_EQ(s.space, Space::kHost);
  EXPECT_EQ(s.name, "user_fn");
  EXPECT_THAT(s.outputs, ElementsAre(h));
  EXPECT_TRUE(s.fallback.empty());
  EXPECT_EQ((*plan)->clustering.ClusterOf(h.node_id()), -1);
}

TEST(BuildPlanTest, ReferenceOnlyPlansEveryOpAsAReferenceStep) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Sqrt(Exp(x));
  }
  SessionOptions o = CpuOptions();
  o.reference_only = true;
  auto plan = Build(g, o, {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE((*plan)->clustering.clusters.empty());
  EXPECT_THAT(Kinds((*plan)->steps), ElementsAre(Step::Kind::kReference, Step::Kind::kReference));
  for (const Step& s : (*plan)->steps) EXPECT_TRUE(s.fallback.empty());
}

TEST(BuildPlanTest, StepsAreInTopologicalOrderNotNodeOrder) {
  // The cluster {a, d} starts at a node before the HostCall h, but d reads h: the
  // HostCall's step runs first. (Steps are made in the order of their first node.)
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor a, h, d;
  {
    JitScope scope(g);
    a = Exp(x);
    h = Identity(g, x, "h");
    d = a + h;
  }
  ASSERT_LT(a.node_id(), h.node_id());
  auto plan = Build(g, CpuOptions(), {d});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Plan& p = **plan;
  ASSERT_THAT(Kinds(p.steps), ElementsAre(Step::Kind::kReference, Step::Kind::kCluster));
  EXPECT_EQ(p.steps[0].name, "h");
  EXPECT_THAT(p.steps[1].nodes, ElementsAre(a.node_id(), d.node_id()));
  EXPECT_THAT(p.steps[1].inputs, ElementsAre(x, h));
  ExpectOpByOpFallback(g, p.steps[1]);
}

TEST(BuildPlanTest, IndependentStepsKeepGraphOrder) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor b = Identity(g, x, "b");
  Tensor a = Exp(x);
  Tensor c = Identity(g, x, "c");
  auto plan = Build(g, CpuOptions(), {c, a, b});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> names;
  for (const Step& s : (*plan)->steps) names.push_back(s.name);
  EXPECT_THAT(names, ElementsAre("b", "Exp", "c"));
}

TEST(BuildPlanTest, FedTensorsAndUnfetchedNodesArePruned) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor e = Exp(x);
  Tensor y = Sqrt(e);
  Tensor unused = Tanh(x);
  std::vector<bool> fed(g.num_nodes(), false);
  fed[e.node_id()] = true;  // e is fed: x and Exp need not run
  auto plan = BuildPlan(g, CpuOptions(), Device{}, {y}, {}, fed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Plan& p = **plan;
  EXPECT_FALSE(p.needed[x.node_id()]);
  EXPECT_FALSE(p.needed[e.node_id()]);
  EXPECT_TRUE(p.needed[y.node_id()]);
  EXPECT_FALSE(p.needed[unused.node_id()]);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].name, "Sqrt");
  EXPECT_THAT(p.steps[0].inputs, ElementsAre(e));
}

TEST(BuildPlanTest, UpdatesOfOneVariableAreChainedInProgramOrder) {
  Graph g;
  Tensor v = Variable(g, DType::kF32, {2}, "v");
  Tensor one = ScalarConst(g, 1.0);
  Tensor first = AssignAdd(v, BroadcastTo(one, {2}), "first");
  Tensor second = AssignAdd(v, BroadcastTo(one, {2}), "second");
  auto plan = Build(g, CpuOptions(), {}, {second, first});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Step* s1 = nullptr;
  const Step* s2 = nullptr;
  for (const Step& s : (*plan)->steps) {
    if (s.name == "first") s1 = &s;
    if (s.name == "second") s2 = &s;
  }
  ASSERT_NE(s1, nullptr);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(s1->inputs[0], v);
  EXPECT_EQ(s2->inputs[0], first);  // updates the value the first update left
  EXPECT_LT(s1 - (*plan)->steps.data(), s2 - (*plan)->steps.data());
}

TEST(BuildPlanTest, SpacesFollowTheDevice) {
  for (const char* device : {"cpu", "jit:cpu"}) {
    SCOPED_TRACE(device);
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    Tensor c;
    {
      JitScope scope(g);
      c = Exp(x) + 1.0;
    }
    Tensor single = Sqrt(x);  // no scope, and no edge to the cluster
    Tensor ref =
        HostCall(g, "ref", {c, single}, {{DType::kF32, {3}}},
                 [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                   return std::vector<HostTensor>{in[0]};
                 })[0];
    SessionOptions o = CpuOptions();
    o.device = device;
    auto plan = Build(g, o, {ref});
    ASSERT_TRUE(plan.ok()) << plan.status();
    const bool jit = std::string(device) == "jit:cpu";
    if (!jit) {
      EXPECT_THAT(Kinds((*plan)->steps),
                  ElementsAre(Step::Kind::kCluster, Step::Kind::kSingleOp, Step::Kind::kReference));
    }
    const Space compiled = jit ? Space::kJitCpu : Space::kHost;
    for (const Step& s : (*plan)->steps) {
      SCOPED_TRACE(s.name);
      if (s.kind == Step::Kind::kReference) {
        EXPECT_EQ(s.space, Space::kHost);
      } else {
        EXPECT_EQ(s.space, compiled);
        EXPECT_FALSE(s.device.force_compile);  // the memory's device, not "jit:"
        if (s.kind == Step::Kind::kCluster) {
          ExpectOpByOpFallback(g, s);
        } else {
          ASSERT_EQ(s.fallback.size(), 1u);
          EXPECT_EQ(s.fallback[0].kind, Step::Kind::kReference);
        }
      }
    }
    EXPECT_EQ((*plan)->steps.back().name, "ref");
  }
  EXPECT_STREQ(SpaceName(Space::kHost), "host");
  EXPECT_STREQ(SpaceName(Space::kJitCpu), "jit:cpu");
  EXPECT_STREQ(SpaceName(Space::kDevice), "device");
}

TEST(BuildPlanTest, OnTheCpuAMatMulWithItsBiasIsClusteredNotALibraryStep) {
  // Library GEMM steps are CUDA's (cuBLASLt); the CPU's GEMM library is an extern stage
  // inside the cluster's pipeline, so the plan has no kGemm step on the host.
  Graph g;
  Tensor a = Placeholder(g, DType::kF32, {4, 8}, "a");
  Tensor w = Placeholder(g, DType::kF32, {8, 16}, "w");
  Tensor bias = Placeholder(g, DType::kF32, {16}, "bias");
  Tensor y;
  {
    JitScope scope(g);
    y = Relu(MatMul(a, w) + bias);
  }
  SessionOptions o = CpuOptions();
  o.cuda_matmul = SessionOptions::CudaMatMul::kCublas;
  auto plan = Build(g, o, {y});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Kinds((*plan)->steps), ElementsAre(Step::Kind::kCluster));
}

TEST(BuildPlanTest, OnCudaAMatMulWithItsBiasIsOneGemmStep) {
  if (!CheckCudaAvailable().ok()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Graph g;
    Tensor a = Placeholder(g, dtype, {4, 8}, "a");
    Tensor w = Placeholder(g, dtype, {8, 16}, "w");
    Tensor bias = Placeholder(g, dtype, {16}, "bias");
    Tensor m = MatMul(a, w);
    Tensor y = m + bias;
    Tensor z = Exp(y);
    SessionOptions o = CpuOptions();
    o.device = "cuda:0";
    auto plan = Build(g, o, {z});
    ASSERT_TRUE(plan.ok()) << plan.status();
    const Plan& p = **plan;
    ASSERT_THAT(Kinds(p.steps), ElementsAre(Step::Kind::kGemm, Step::Kind::kSingleOp));
    const Step& gemm = p.steps[0];
    EXPECT_EQ(gemm.space, Space::kDevice);
    EXPECT_EQ(gemm.device.ToString(), "cuda:0");
    EXPECT_THAT(gemm.nodes, ElementsAre(m.node_id(), y.node_id()));
    EXPECT_THAT(gemm.inputs, ElementsAre(a, w, bias));
    EXPECT_THAT(gemm.outputs, ElementsAre(y));
    ExpectOpByOpFallback(g, gemm);  // cuBLAS refused or missing: Halide CUDA kernels
    // With the library off, the MatMul is a Halide kernel like any op.
    o.cuda_matmul = SessionOptions::CudaMatMul::kHalide;
    auto halide = Build(g, o, {z});
    ASSERT_TRUE(halide.ok()) << halide.status();
    for (const Step& s : (*halide)->steps) EXPECT_NE(s.kind, Step::Kind::kGemm);
  }
}

// The GEMM step kind's claim on a plan whose ops live on cuda:0, asked without a GPU
// (BuildPlan's Place stage needs the device; the claim needs only placements).
std::vector<Step> ClaimGemms(const Graph& g, const SessionOptions& options) {
  const std::vector<bool> needed(g.num_nodes(), true);
  const std::set<std::pair<int, int>> fetched;
  const Device cuda{Device::Kind::kCuda, 0};
  const PlanView view{g,
                      options,
                      needed,
                      fetched,
                      cuda,
                      [&](int) { return cuda; },
                      [](const std::vector<int>&) { return std::vector<Step>{}; }};
  return StepKindOf(Step::Kind::kGemm).Claim(view);
}

// bf16 and f16 MatMuls on cuda:0 are cuBLASLt GEMM steps with their bias epilogue, as
// f32's are; with the library off they are not.
TEST(BuildPlanTest, On16BitCudaMatMulsTheGemmStepClaimsWithoutAGpu) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Graph g;
    Tensor a = Placeholder(g, dtype, {5, 7}, "a");
    Tensor w = Placeholder(g, dtype, {11, 7}, "w");
    Tensor bias = Placeholder(g, dtype, {11}, "bias");
    Tensor m = MatMul(a, w, false, true);
    Tensor y = Exp(m + bias);
    SessionOptions o;
    o.cuda_matmul = SessionOptions::CudaMatMul::kCublas;
    std::vector<Step> steps = ClaimGemms(g, o);
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].kind, Step::Kind::kGemm);
    EXPECT_EQ(steps[0].space, Space::kDevice);
    EXPECT_EQ(steps[0].device.ToString(), "cuda:0");
    EXPECT_THAT(steps[0].nodes, ElementsAre(m.node_id(), y.node().input(0).node_id()));
    EXPECT_THAT(steps[0].inputs, ElementsAre(a, w, bias));
    o.cuda_matmul = SessionOptions::CudaMatMul::kHalide;
    EXPECT_TRUE(ClaimGemms(g, o).empty());
  }
}

// The mixed-precision policy's MLP training step (bf16 and f16 compute, f32 masters) on
// cuda:0: every MatMul, forward and backward, is 16-bit and a cuBLASLt GEMM step, the
// forward ones with the (cast-down) bias folded in; ReLU folded where asked.
TEST(BuildPlanTest, ThePolicysMlpStepRunsItsMatMulsOnCublas) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (bool fold_relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), fold_relu ? " relu folded" : ""));
      Graph g;
      Tensor x = Placeholder(g, DType::kF32, {7, 13}, "x");
      Tensor labels = Placeholder(g, DType::kF32, {7, 5}, "labels");
      Tensor w1 = Variable(g, HostTensor::RandomNormal(DType::kF32, {13, 17}, 1), "w1");
      Tensor b1 = Variable(g, HostTensor::RandomNormal(DType::kF32, {17}, 2), "b1");
      Tensor w2 = Variable(g, HostTensor::RandomNormal(DType::kF32, {17, 5}, 3), "w2");
      Tensor b2 = Variable(g, HostTensor::RandomNormal(DType::kF32, {5}, 4), "b2");
      {
        JitScope jit(g);
        PrecisionScope policy(g, dtype);
        Tensor logits = Dense(Dense(x, w1, b1, Activation::kRelu), w2, b2);
        Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(logits, labels));
        ASSERT_TRUE(Minimize(Optimizer::Sgd(0.1), loss, {w1, b1, w2, b2}).ok());
      }
      ASSERT_TRUE(g.status().ok()) << g.status();
      SessionOptions o;
      o.cuda_relu_epilogue = fold_relu;
      std::vector<Step> steps = ClaimGemms(g, o);
      int matmuls = 0;
      for (int id = 0; id < g.num_nodes(); ++id) {
        if (g.node(id).op() != OpKind::kMatMul) continue;
        ++matmuls;
        EXPECT_EQ(g.node(id).output(0).dtype, dtype) << g.node(id).name();
      }
      EXPECT_EQ(matmuls, 5);  // forward 2; backward dW2, dh1 and dW1 (x is no variable)
      ASSERT_EQ(static_cast<int>(steps.size()), matmuls);
      int with_bias = 0, with_relu = 0;
      for (const Step& s : steps) {
        EXPECT_EQ(s.kind, Step::Kind::kGemm);
        with_bias += s.nodes.size() >= 2;
        with_relu += s.nodes.size() == 3;
      }
      EXPECT_EQ(with_bias, 2) << "both forward layers' bias";
      EXPECT_EQ(with_relu, fold_relu ? 1 : 0);
    }
  }
}

TEST(BuildPlanTest, TheHookSeesEveryStageInOrder) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y = Exp(x);
  std::vector<std::string> stages;
  std::vector<size_t> steps;
  auto plan = BuildPlan(g, CpuOptions(), Device{}, {y}, {}, std::vector<bool>(g.num_nodes(), false),
                        [&](const char* stage, const Plan& p) {
                          stages.push_back(stage);
                          steps.push_back(p.steps.size());
                        });
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The stages plan.h lists, in its order ("remat" under SessionOptions::rematerialize,
  // the default).
  EXPECT_THAT(stages, ElementsAre("prune", "check_strict", "place", "claim", "cluster", "steps",
                                  "remat", "order"));
  EXPECT_THAT(steps, ElementsAre(0, 0, 0, 0, 0, 1, 1, 1));
}

TEST(BuildPlanTest, BadInputIsAnErrorNamingIt) {
  {
    Graph g;
    Tensor y = Exp(Placeholder(g, DType::kF32, {3}, "x"));
    SessionOptions o = CpuOptions();
    o.device = "tpu:0";
    auto plan = Build(g, o, {y});
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr("tpu:0"));
  }
  {
    // Strict mode: a HostCall marked for compilation has no lowering.
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    Tensor h;
    {
      JitScope scope(g);
      h = Identity(g, x, "user_fn");
    }
    SessionOptions o = CpuOptions();
    o.strict = true;
    auto plan = Build(g, o, {h});
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()),
                HasSubstr("node 'user_fn' (HostCall) is marked for compilation"));
    o.strict = false;
    EXPECT_TRUE(Build(g, o, {h}).ok());
  }
  if (!CheckCudaAvailable().ok()) {
    // A CUDA placement on a machine without CUDA names the node and the device.
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {3}, "x");
    g.set_device(Device{Device::Kind::kCuda, 0, false});
    Tensor y = Exp(x);
    auto plan = Build(g, CpuOptions(), {y});
    EXPECT_FALSE(plan.ok());
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr("node 'Exp' is placed on cuda:0"));
  }
}

TEST(BuildPlanTest, AGpuHeuristicPlanAsTheSchedulerOfCpuKernelsIsAnError) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(x) + 1.0;
  }
  SessionOptions o = CpuOptions();
  o.scheduler = Scheduler::kGpuSerial;
  auto plan = Build(g, o, {y});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("SessionOptions::scheduler is heuristic (serial), a GPU heuristic plan, "
                        "but 'cluster_0' compiles for the CPU"));
  o.reference_only = true;  // nothing compiles: nothing to schedule
  EXPECT_TRUE(Build(g, o, {y}).ok());
  o.reference_only = false;
  o.scheduler = Scheduler::kLi2018;  // a CPU scheduler too
  EXPECT_TRUE(Build(g, o, {y}).ok());
}

}  // namespace
}  // namespace braze
