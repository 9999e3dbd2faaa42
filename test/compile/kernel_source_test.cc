// The compile front door (compile/kernel_source.h) on its own, with no Session: the
// eager, lazy and async policies, the recompile guard, symbolic kernels, compile
// failures and where each kernel came from.
#include "compile/kernel_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braze/logging.h"
#include "braze/ops.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using State = KernelAnswer::State;
using Wait = KernelAnswer::Wait;
using Origin = KernelAnswer::Origin;

// y = tanh(x * s + 0.25) * x with x a placeholder of `shape` (-1 dims allowed); `s`
// makes each test's cluster its own, so the process-wide compile cache does not carry
// kernels from one test into another.
struct Program {
  Graph g;
  Tensor x, y;
  Program(Shape shape, double s) {
    x = Placeholder(g, DType::kF32, std::move(shape), "x");
    y = Tanh(x * s + 0.25) * x;
  }
  // Every node but the placeholder, as one cluster reading x and producing y.
  ClusterSpec Cluster() const {
    ClusterSpec spec;
    spec.graph = &g;
    spec.name = "cluster_0";
    for (int id = 0; id < g.num_nodes(); ++id) {
      if (id != x.node_id()) spec.nodes.push_back(id);
    }
    spec.inputs = {x};
    spec.outputs = {y};
    return spec;
  }
  // The nodes' types for x of `rows` x 3 (what the runtime infers before asking).
  std::vector<TensorType> NodeTypes(int64_t rows) const {
    std::map<int, TensorType> type{{x.node_id(), TensorType{DType::kF32, {rows, 3}}}};
    std::vector<TensorType> out;
    for (int id = 0; id < g.num_nodes(); ++id) {
      if (id == x.node_id()) continue;
      const Node& n = g.node(id);
      std::vector<TensorType> in;
      for (int i = 0; i < n.num_inputs(); ++i) in.push_back(type.at(n.input(i).node_id()));
      auto t = InferOutputTypes(n.op(), n.attrs(), in);
      EXPECT_TRUE(t.ok()) << t.status();
      type[id] = (*t)[0];
      out.push_back((*t)[0]);
    }
    return out;
  }
  static std::vector<TensorType> Types(int64_t rows) { return {{DType::kF32, {rows, 3}}}; }
};

KernelSourceOptions Options(CompilePolicy policy = CompilePolicy::kEager) {
  KernelSourceOptions o;
  o.compile.scheduler = Scheduler::kSafeDefault;  // fast to compile
  o.policy = policy;
  o.what = "cluster 'cluster_0'";
  return o;
}

KernelAnswer Ask(KernelSource& source, const Program& p, int64_t rows, bool ahead = false) {
  source.CountRun();
  return source.Get(Program::Types(rows), p.NodeTypes(rows), ahead);
}

// The kernel computes y for random x: it is a real kernel, not a stand-in.
void ExpectComputes(const KernelAnswer& a, int64_t rows, double s) {
  ASSERT_EQ(a.state, State::kReady) << a.error;
  ASSERT_EQ(a.output_types.size(), 1u);
  EXPECT_EQ(a.output_types[0], (TensorType{DType::kF32, {rows, 3}}));
  HostTensor in = HostTensor::RandomUniform(DType::kF32, {rows, 3}, 7);
  HostTensor out(DType::kF32, {rows, 3});
  ASSERT_TRUE(a.kernel->kernel->Run({&in}, {&out}).ok());
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    const double v = in.GetDouble(i);
    ASSERT_NEAR(out.GetDouble(i), std::tanh(v * s + 0.25) * v, 1e-5) << i;
  }
}

class KernelSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      if (severity == LogSeverity::kWarning) warnings_.emplace_back(text);
    });
  }
  void TearDown() override { SetLogSink(nullptr); }
  std::vector<std::string> warnings_;
};

TEST_F(KernelSourceTest, EagerCompilesAtOnceThenTheMemoryCacheAnswers) {
  Program p({5, 3}, 1.25);
  KernelSource source(p.Cluster(), Options());
  KernelAnswer first = Ask(source, p, 5);
  EXPECT_EQ(first.origin, Origin::kCompiled);
  EXPECT_GT(first.compile_ms, 0);
  ExpectComputes(first, 5, 1.25);
  // Another step of the same cluster (another session, say) shares the kernel.
  KernelSource other(p.Cluster(), Options());
  KernelAnswer second = Ask(other, p, 5);
  EXPECT_EQ(second.origin, Origin::kMemoryCache);
  EXPECT_EQ(second.kernel, first.kernel);
}

TEST_F(KernelSourceTest, LazyWaitsForTheThresholdPerSignature) {
  Program p({7, 3}, 1.5);
  KernelSourceOptions o = Options(CompilePolicy::kLazy);
  o.lazy_compile_threshold = 3;
  KernelSource source(p.Cluster(), o);
  for (int run = 1; run < 3; ++run) {
    KernelAnswer a = Ask(source, p, 7);
    EXPECT_EQ(a.state, State::kNotReady) << run;
    EXPECT_EQ(a.wait, Wait::kLazy);
    EXPECT_EQ(a.kernel, nullptr);
    EXPECT_EQ(a.origin, Origin::kNone);
  }
  ExpectComputes(Ask(source, p, 7), 7, 1.5);  // the third run of this signature
}

TEST_F(KernelSourceTest, LazyDoesNotWaitAheadOfTimeOrWhenTheCallerCannot) {
  Program p({7, 3}, 1.75);
  KernelSourceOptions o = Options(CompilePolicy::kLazy);
  o.lazy_compile_threshold = 5;
  KernelSource ahead(p.Cluster(), o);
  ExpectComputes(Ask(ahead, p, 7, /*ahead=*/true), 7, 1.75);  // Session::Compile
  o.can_wait = false;  // strict mode, or no op-by-op fallback
  KernelSource strict(p.Cluster(), o);
  ExpectComputes(Ask(strict, p, 7), 7, 1.75);
}

TEST_F(KernelSourceTest, AsyncCompilesInTheBackgroundOnASnapshot) {
  auto p = std::make_unique<Program>(Shape{11, 3}, 2.0);
  KernelSource source(p->Cluster(), Options(CompilePolicy::kAsync));
  KernelAnswer a = Ask(source, *p, 11);
  EXPECT_EQ(a.state, State::kNotReady);
  EXPECT_EQ(a.wait, Wait::kAsync);
  // The program goes on building its graph meanwhile: the compile reads a copy.
  for (int i = 0; i < 50; ++i) Exp(p->x);
  source.WaitForBackgroundCompiles();
  KernelAnswer ready = Ask(source, *p, 11);
  EXPECT_EQ(ready.origin, Origin::kCompiled);
  ExpectComputes(ready, 11, 2.0);
}

TEST_F(KernelSourceTest, AsyncAnswersNotReadyUntilTheCompileEnds) {
  Program p({13, 3}, 2.25);
  KernelSource source(p.Cluster(), Options(CompilePolicy::kAsync));
  int not_ready = 0;
  KernelAnswer a;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  do {
    a = Ask(source, p, 13);
    if (a.state == State::kNotReady) {
      ++not_ready;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } while (a.state == State::kNotReady && std::chrono::steady_clock::now() < deadline);
  EXPECT_GE(not_ready, 1);
  ExpectComputes(a, 13, 2.25);
}

TEST_F(KernelSourceTest, TheGuardStopsCompilingNewSignaturesAndSaysSoOnce) {
  Program p({-1, 3}, 2.5);
  KernelSourceOptions o = Options();
  o.max_signatures = 2;
  o.symbolic_shapes = false;  // every size is a signature of its own
  KernelSource source(p.Cluster(), o);
  ExpectComputes(Ask(source, p, 2), 2, 2.5);
  ExpectComputes(Ask(source, p, 3), 3, 2.5);
  EXPECT_TRUE(warnings_.empty());
  KernelAnswer third = Ask(source, p, 4);
  EXPECT_EQ(third.state, State::kNotReady);
  EXPECT_EQ(third.wait, Wait::kMegamorphic);
  EXPECT_TRUE(source.megamorphic());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("cluster 'cluster_0' met 3 input signatures in 3 runs"));
  EXPECT_THAT(warnings_[0], HasSubstr("input 0 dim 0"));
  EXPECT_EQ(Ask(source, p, 5).wait, Wait::kMegamorphic);
  EXPECT_EQ(warnings_.size(), 1u);  // once
  // Signatures it met before still get their kernels.
  ExpectComputes(Ask(source, p, 3), 3, 2.5);
}

TEST_F(KernelSourceTest, TheGuardLetsAStepWithManyRunsPerSignatureCompile) {
  Program p({-1, 3}, 2.75);
  KernelSourceOptions o = Options();
  o.max_signatures = 2;
  o.symbolic_shapes = false;
  KernelSource source(p.Cluster(), o);
  ExpectComputes(Ask(source, p, 2), 2, 2.75);
  ExpectComputes(Ask(source, p, 3), 3, 2.75);
  for (int64_t i = 0; i < 3 * kRunsPerSignature; ++i) source.CountRun();
  ExpectComputes(Ask(source, p, 4), 4, 2.75);
  EXPECT_FALSE(source.megamorphic());
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(KernelSourceTest, TheGuardIsOffWhenTheCallerCannotWait) {
  Program p({-1, 3}, 3.0);
  KernelSourceOptions o = Options();
  o.max_signatures = 1;
  o.symbolic_shapes = false;
  o.can_wait = false;
  KernelSource source(p.Cluster(), o);
  for (int64_t rows = 1; rows <= 4; ++rows) ExpectComputes(Ask(source, p, rows), rows, 3.0);
  EXPECT_FALSE(source.megamorphic());
}

TEST_F(KernelSourceTest, SymbolicDimsShareOneKernelAndOneGuardSignature) {
  Program p({-1, 3}, 3.25);
  KernelSourceOptions o = Options();
  o.symbolic_shapes = true;
  o.max_signatures = 1;
  KernelSource source(p.Cluster(), o);
  EXPECT_EQ(source.InputSymbols(Program::Types(20)), (std::vector<std::vector<int>>{{0, -1}}));
  KernelAnswer a = Ask(source, p, 20);
  ExpectComputes(a, 20, 3.25);
  EXPECT_EQ(a.input_symbols, (std::vector<std::vector<int>>{{0, -1}}));
  KernelAnswer b = Ask(source, p, 37);
  ExpectComputes(b, 37, 3.25);
  EXPECT_EQ(b.kernel, a.kernel);  // one kernel for every size >= kMinSymbolicExtent
  EXPECT_EQ(b.origin, Origin::kMemoryCache);
  EXPECT_FALSE(source.megamorphic());  // one signature as kernels see it
  // Sizes below kMinSymbolicExtent get the small-size kernel, one for all of them.
  KernelAnswer small = Ask(source, p, 3);
  ExpectComputes(small, 3, 3.25);
  EXPECT_NE(small.kernel, a.kernel);
}

TEST_F(KernelSourceTest, SymbolicShapesOffOrAFixedDimCompileConcreteKernels) {
  Program p({-1, 3}, 3.5);
  KernelSourceOptions o = Options();
  o.symbolic_shapes = false;
  KernelSource off(p.Cluster(), o);
  EXPECT_TRUE(off.InputSymbols(Program::Types(20)).empty());
  Program fixed({20, 3}, 3.5);
  o.symbolic_shapes = true;
  KernelSource concrete(fixed.Cluster(), o);
  EXPECT_TRUE(concrete.InputSymbols(Program::Types(20)).empty());
  o.compile.scheduler = Scheduler::kMullapudi2016;  // an autoscheduler: no symbols
  KernelSource autoscheduled(p.Cluster(), o);
  EXPECT_TRUE(autoscheduled.InputSymbols(Program::Types(20)).empty());
}

TEST_F(KernelSourceTest, AFailedCompileIsAnAnswerWithItsReason) {
  Program p({5, 3}, 3.75);
  KernelSourceOptions o = Options();
  o.inject_failure = [](const std::string& name) { return name == "cluster_0"; };
  KernelSource source(p.Cluster(), o);
  KernelAnswer a = Ask(source, p, 5);
  EXPECT_EQ(a.state, State::kFailed);
  EXPECT_THAT(a.error.message(), HasSubstr("injected compile failure"));
  EXPECT_EQ(a.kernel, nullptr);
  o.policy = CompilePolicy::kAsync;  // the background path fails the same way
  KernelSource async(p.Cluster(), o);
  EXPECT_EQ(Ask(async, p, 5).wait, Wait::kAsync);
  async.WaitForBackgroundCompiles();
  EXPECT_EQ(Ask(async, p, 5).state, State::kFailed);
}

TEST_F(KernelSourceTest, TheCompileLogSaysWhyAndWhatTheCacheHad) {
  Program p({-1, 3}, 4.0);
  std::vector<std::string> lines;
  SetLogSink([&](LogSeverity severity, int, std::string_view text) {
    if (severity == LogSeverity::kInfo) lines.emplace_back(text);
  });
  KernelSourceOptions o = Options();
  o.log_compiles = true;
  o.symbolic_shapes = false;
  KernelSource source(p.Cluster(), o);
  Ask(source, p, 6);
  Ask(source, p, 9);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("compile: cluster 'cluster_0' ("));
  EXPECT_THAT(lines[0], HasSubstr("for (f32[6,3]): first use; not in the compile cache"));
  EXPECT_THAT(lines[1], HasSubstr("new signature: input 0 dim 0 was 6, now 9"));
}

}  // namespace
}  // namespace braze
