// CompileCluster and CompiledKernel behaviour beyond single ops: multi-output clusters,
// errors at compile and run time as Status, scheduler fall-through, empty tensors,
// concrete re-inference of unknown dims, thread counts and the plugin directory.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "passes/mark_for_compilation.h"

namespace braze {
namespace lowertest {
namespace {

TEST(OpIsCompilableTest, EveryComputeOpAndConstButNoSourceStateOrHostCall) {
  const std::vector<std::pair<OpKind, OpCategory>> ops = {
#define BRAZE_OP(e, name, cat, arity, compiled) {OpKind::e, OpCategory::cat},
#include "braze/op_list.def"
#undef BRAZE_OP
  };
  ASSERT_EQ(static_cast<int>(ops.size()), kNumOps);
  for (const auto& [op, cat] : ops) {
    const bool expected =
        op == OpKind::kConst ||
        (cat != OpCategory::kSource && cat != OpCategory::kState && cat != OpCategory::kHostCall &&
         cat != OpCategory::kCollective &&  // dp (issue 37): collective steps
         cat != OpCategory::kControlFlow);  // cf (issue 40): control-flow steps
    EXPECT_EQ(OpIsCompilable(op), expected) << OpName(op);
  }
}

TEST(SchedulerNameTest, Names) {
  EXPECT_STREQ(SchedulerName(Scheduler::kAdams2019), "Adams2019");
  EXPECT_STREQ(SchedulerName(Scheduler::kMullapudi2016), "Mullapudi2016");
  EXPECT_STREQ(SchedulerName(Scheduler::kLi2018), "Li2018");
  EXPECT_STREQ(SchedulerName(Scheduler::kSafeDefault), "SafeDefault");
}

TEST(JitTargetTest, ParsesAndIsAJitTarget) {
  auto target = JitTargetString();
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_TRUE(absl::StrContains(*target, "jit")) << *target;
}

// A cluster whose outputs include an intermediate that other outputs also read, the
// same value twice, and a reduction: one pipeline, every output checked.
TEST(CompileClusterTest, MultiOutputCluster) {
  for (Scheduler kind : AllSchedulers()) {
    Case c;
    Tensor x = c.Input(DType::kF32, {9, 20}, 1);
    Tensor e = Exp(x - Max(x, {-1}, true));
    Tensor s = Sum(e, {-1}, true);
    Tensor p = e / s;
    c.outputs = {e, s, p, e, ArgMax(p, 1)};
    EXPECT_TRUE(CompileRunCompare(c, kind)) << SchedulerName(kind);
  }
}

// Regression for a Halide 14 miscompile: an update that selects on its own accumulator,
// split with GuardWithIf and vectorized (Li2018 does that for 9 rows split by 8), only
// ever wrote the first vector. Reductions whose extents are not multiples of a vector,
// under every scheduler, must compute every element.
TEST(CompileClusterTest, ReductionTailsAreComputed) {
  for (Scheduler kind : AllSchedulers()) {
    for (const Shape& shape : std::vector<Shape>{{9, 20}, {20, 9}, {17, 33}}) {
      Case c;
      Tensor x = c.Input(DType::kF32, shape, 11);
      Tensor k = c.Input(DType::kI32, shape, 12, -3, 3);
      c.outputs = {Max(x, {0}), Min(x, {1}), ArgMax(x, 0), ArgMax(x, 1), Max(k, {0}), ArgMax(k, 0)};
      EXPECT_TRUE(CompileRunCompare(c, kind)) << SchedulerName(kind) << " " << ShapeString(shape);
    }
  }
}

// Mullapudi2016 splits ArgMax's update over 17 rows by 16 with GuardWithIf and
// vectorizes it, which Halide 14 miscompiles (row 16 kept its initial value): the
// compile runs such stages serially, says so in the schedule text, and is right.
TEST(CompileClusterTest, GuardedVectorizedUpdatesAreRepaired) {
  Case c;
  Tensor x = c.Input(DType::kF32, {17, 33}, 11);
  c.outputs = {ArgMax(x, 1)};
  auto kernel = CompileCluster(SpecOf(c), {Scheduler::kMullapudi2016, 0});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->scheduler_used(), Scheduler::kMullapudi2016);
  EXPECT_TRUE(absl::StrContains((*kernel)->schedule_text(), "Serial instead of vectorized"))
      << (*kernel)->schedule_text();
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kMullapudi2016));
}

// Max, Min, ArgMax, Maximum, Relu and Sign propagate NaN like the reference (numpy).
TEST(CompileClusterTest, NanPropagation) {
  for (Scheduler kind : AllSchedulers()) {
    Case c;
    Tensor x = c.Input(DType::kF32, {9, 20}, 13);
    Tensor y = c.Input(DType::kF32, {9, 20}, 14);
    for (int64_t i : {3, 50, 51, 179}) c.values[0].SetDouble(i, std::nan(""));
    for (int64_t i : {4, 50, 100}) c.values[1].SetDouble(i, std::nan(""));
    c.outputs = {Max(x, {1}),   Min(x, {0}),   ArgMax(x, 1), ArgMax(x, 0),
                 Maximum(x, y), Minimum(x, y), Relu(x),      Sign(x)};
    EXPECT_TRUE(CompileRunCompare(c, kind)) << SchedulerName(kind);
  }
}

// Compiles softmax over [7, 3] and returns the kernel.
std::unique_ptr<CompiledKernel> CompileSoftmax(Case& c, Scheduler kind) {
  c.Input(DType::kF32, {7, 3}, 2);
  c.outputs = {Softmax(c.inputs[0])};
  auto kernel = CompileCluster(SpecOf(c), {kind, 0});
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? std::move(*kernel) : nullptr;
}

TEST(CompileClusterTest, RunTimeHalideErrorsBecomeStatus) {
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileSoftmax(c, Scheduler::kAdams2019);
  ASSERT_NE(kernel, nullptr);
  HostTensor out(DType::kF32, {7, 3});
  std::vector<HostTensor*> outs = {&out};

  HostTensor wrong_shape = HostTensor::RandomUniform(DType::kF32, {7, 4}, 3);
  std::vector<const HostTensor*> in = {&wrong_shape};
  absl::Status s = kernel->Run(in, outs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "Halide run-time error"))
      << std::string(s.message());

  HostTensor wrong_dtype = HostTensor::RandomUniform(DType::kF64, {7, 3}, 3);
  in = {&wrong_dtype};
  s = kernel->Run(in, outs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "type")) << std::string(s.message());

  HostTensor small_out(DType::kF32, {3, 3});
  in = {&c.values[0]};
  std::vector<HostTensor*> bad_outs = {&small_out};
  s = kernel->Run(in, bad_outs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  s = kernel->Run({}, outs);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "0 inputs")) << std::string(s.message());

  // The kernel still works after the errors, writing into the caller's buffer.
  const void* data = out.raw_data();
  ASSERT_TRUE(kernel->Run(in, outs).ok());
  EXPECT_EQ(out.raw_data(), data);
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(AllClose(out, (*expected)[0], 1e-5, 1e-6));
}

TEST(CompileClusterTest, NewInputValuesEachRun) {
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileSoftmax(c, Scheduler::kSafeDefault);
  ASSERT_NE(kernel, nullptr);
  for (uint64_t seed = 10; seed < 13; ++seed) {
    std::vector<HostTensor> values = {HostTensor::RandomUniform(DType::kF32, {7, 3}, seed)};
    auto actual = RunKernel(*kernel, values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    auto expected = ReferenceOutputs(SpecOf(c), values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-5, 1e-6)) << seed;
  }
}

TEST(CompileClusterTest, NoFallThroughWhenTheSchedulerWorks) {
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileSoftmax(c, Scheduler::kAdams2019);
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->scheduler_used(), Scheduler::kAdams2019);
  EXPECT_TRUE(kernel->scheduler_failures().empty());
  EXPECT_TRUE(absl::StartsWith(kernel->schedule_text(), "// Adams2019"));
  EXPECT_GT(kernel->compile_ms(), 0);
}

// Compiles softmax with `kind` after pointing BRAZE_HALIDE_PLUGIN_DIR at `dir`, prints
// the failures and the scheduler used to stderr, and exits 0 if the result is right.
// Run inside EXPECT_EXIT: plugins load once per process, and a threadsafe death test
// re-executes the binary, so each case starts with no plugin loaded.
[[noreturn]] void CompileWithPluginDir(const std::string& dir, Scheduler kind) {
  setenv("BRAZE_HALIDE_PLUGIN_DIR", dir.c_str(), 1);
  Case c;
  std::unique_ptr<CompiledKernel> kernel = CompileSoftmax(c, kind);
  if (kernel == nullptr) std::exit(2);
  for (const std::string& f : kernel->scheduler_failures()) {
    std::fprintf(stderr, "%s\n", f.c_str());
  }
  std::fprintf(stderr, "used %s\n", SchedulerName(kernel->scheduler_used()));
  std::exit(CompileRunCompare(c, kind) ? 0 : 3);
}

std::string PluginDir() {
  unsetenv("BRAZE_HALIDE_PLUGIN_DIR");
  const std::string path = AutoschedulerPluginPath(Scheduler::kAdams2019);
  return path.substr(0, path.rfind('/'));
}

// A scheduler that fails (here: its plugin cannot be loaded) falls through to the next
// one in the chain, and each failure is recorded in order.
TEST(CompileClusterDeathTest, FallThroughIsRecorded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Only Mullapudi2016's plugin: Adams2019 -> Mullapudi2016.
  char tmpl[] = "/tmp/braze_plugins_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string only_mullapudi = tmpl;
  const std::string link = only_mullapudi + "/libautoschedule_mullapudi2016.so";
  const std::string target = PluginDir() + "/libautoschedule_mullapudi2016.so";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EXIT(CompileWithPluginDir(only_mullapudi, Scheduler::kAdams2019),
              ::testing::ExitedWithCode(0), "Adams2019: .*Failed to load.*\nused Mullapudi2016");
  unlink(link.c_str());
  rmdir(only_mullapudi.c_str());
  // No plugins: Adams2019 -> Mullapudi2016 -> SafeDefault, and Li2018 -> SafeDefault.
  EXPECT_EXIT(CompileWithPluginDir("/nonexistent/plugins", Scheduler::kAdams2019),
              ::testing::ExitedWithCode(0),
              "Adams2019: .*Failed to load.*\nMullapudi2016: .*Failed to load.*\nused SafeDefault");
  EXPECT_EXIT(CompileWithPluginDir("/nonexistent/plugins", Scheduler::kLi2018),
              ::testing::ExitedWithCode(0), "Li2018: .*Failed to load.*\nused SafeDefault");
  // The real directory works.
  EXPECT_EXIT(CompileWithPluginDir(PluginDir(), Scheduler::kAdams2019),
              ::testing::ExitedWithCode(0), "used Adams2019");
}

TEST(CompileClusterTest, EmptyOutputsNeedNoHalide) {
  for (Scheduler kind : AllSchedulers()) {
    Case c;
    Tensor x = c.Input(DType::kF32, {0, 5}, 4);
    c.outputs = {Exp(x), Sum(x, {0}), Sum(x, {1})};  // [0,5], [5] zeros, [0]
    EXPECT_TRUE(CompileRunCompare(c, kind)) << SchedulerName(kind);
  }
  Case c;
  Tensor x = c.Input(DType::kF32, {4, 0}, 5);
  c.outputs = {Relu(x)};
  auto kernel = CompileCluster(SpecOf(c), {});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  HostTensor out(DType::kF32, {4, 0});
  std::vector<const HostTensor*> in = {&c.values[0]};
  std::vector<HostTensor*> outs = {&out};
  EXPECT_TRUE((*kernel)->Run(in, outs).ok());
  HostTensor not_empty(DType::kF32, {4, 2});
  in = {&not_empty};
  EXPECT_EQ((*kernel)->Run(in, outs).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompileClusterTest, OutputTypesComeFromTheConcreteInputs) {
  Case c;
  Tensor x = Placeholder(*c.graph, DType::kF32, {-1, 3});
  c.inputs.push_back(x);
  c.values.push_back(HostTensor::RandomUniform(DType::kF32, {5, 3}, 6));
  c.outputs = {Reshape(Tanh(x), {-1}), Sum(x, {0})};
  auto kernel = CompileCluster(SpecOf(c), {});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_EQ((*kernel)->output_types().size(), 2u);
  EXPECT_EQ((*kernel)->output_types()[0], (TensorType{DType::kF32, {15}}));
  EXPECT_EQ((*kernel)->output_types()[1], (TensorType{DType::kF32, {3}}));
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kAdams2019));
}

TEST(CompileClusterTest, ThreadCounts) {
  for (int threads : {1, 2, 0}) {
    Case c;
    Tensor x = c.Input(DType::kF32, {256, 300}, 7);
    c.outputs = {Softmax(x)};
    CompileOptions options;
    options.scheduler = Scheduler::kSafeDefault;
    options.num_threads = threads;
    auto kernel = CompileCluster(SpecOf(c), options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto actual = RunKernel(**kernel, c.values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok());
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-5, 1e-6)) << threads;
  }
  Case c;
  c.outputs = {Exp(c.Input(DType::kF32, {2}, 8))};
  CompileOptions options;
  options.num_threads = -1;
  EXPECT_EQ(CompileCluster(SpecOf(c), options).status().code(), absl::StatusCode::kInvalidArgument);
}

// The runtime's compile cache compiles different clusters on different threads.
TEST(CompileClusterTest, ConcurrentCompilesAndRuns) {
  std::vector<Case> cases(4);
  for (size_t i = 0; i < cases.size(); ++i) {
    Tensor x = cases[i].Input(DType::kF32, {5 + static_cast<int64_t>(i), 12}, 20 + i);
    cases[i].outputs = {i % 2 == 0 ? Softmax(x) : LayerNorm(x, x, x)};
  }
  std::vector<int> ok(cases.size(), 0);  // not vector<bool>: threads write apart
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cases.size(); ++i) {
    threads.emplace_back([&, i] {
      ok[i] = bool(CompileRunCompare(cases[i], AllSchedulers()[i % AllSchedulers().size()]));
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_TRUE(ok[i]) << i;
}

TEST(CompileClusterTest, BadSpecsAreErrorsNamingTheProblem) {
  Case c;
  Tensor x = c.Input(DType::kF32, {3}, 9);
  Tensor y = Exp(x);
  c.outputs = {y};

  ClusterSpec spec = SpecOf(c);
  spec.nodes.insert(spec.nodes.begin(), x.node_id());  // a Placeholder inside the cluster
  auto kernel = CompileCluster(spec, {});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(std::string(kernel.status().message()), "Placeholder"))
      << std::string(kernel.status().message());

  spec = SpecOf(c);
  spec.inputs.clear();
  spec.input_types.clear();  // Exp's input is neither an input nor computed inside
  kernel = CompileCluster(spec, {});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(std::string(kernel.status().message()), y.name()))
      << std::string(kernel.status().message());

  spec = SpecOf(c);
  spec.input_types[0].shape = {-1};
  EXPECT_EQ(CompileCluster(spec, {}).status().code(), absl::StatusCode::kInvalidArgument);

  spec = SpecOf(c);
  spec.input_types[0].dtype = DType::kI32;  // Exp of i32 fails re-inference
  kernel = CompileCluster(spec, {});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(std::string(kernel.status().message()), y.name()))
      << std::string(kernel.status().message());

  spec = SpecOf(c);
  spec.outputs.clear();
  EXPECT_EQ(CompileCluster(spec, {}).status().code(), absl::StatusCode::kInvalidArgument);

  std::vector<Tensor> host =
      HostCall(*c.graph, "host", {x}, {{DType::kF32, {3}}}, [](absl::Span<const HostTensor> in) {
        return absl::StatusOr<std::vector<HostTensor>>(std::vector<HostTensor>{in[0]});
      });
  spec = SpecOf(c);
  spec.outputs = {host[0]};
  kernel = CompileCluster(spec, {});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(std::string(kernel.status().message()), "HostCall"))
      << std::string(kernel.status().message());
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
