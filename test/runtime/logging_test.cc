// The runtime's messages go through the log (braze/logging.h): a cluster's compile
// fallback is a warning a program's sink receives, with the reason; --clustering_debug's
// summary is info at level 0; BRAZE_FLAGS --v sets the verbosity (flags_test has the
// environment cases).
#include "braze/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "compile/compile_cache.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

struct Message {
  LogSeverity severity;
  int verbosity;
  std::string text;
};

class RuntimeLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogVerbosity(0);
    SetLogSink([this](LogSeverity severity, int verbosity, std::string_view text) {
      messages_.push_back({severity, verbosity, std::string(text)});
    });
  }
  void TearDown() override {
    SetLogSink(nullptr);
    SetLogVerbosity(0);
    SetBrazeFlagsForTesting(BrazeFlags{});
  }

  std::vector<Message> messages_;  // sessions here run on this thread only
};

// A layer norm under one scope: one cluster, "cluster_0".
struct ScopedLayerNorm {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {6, 5}, "x");
  Tensor y;
  ScopedLayerNorm() {
    JitScope scope(g);
    y = LayerNorm(x, Const(g, HostTensor::RandomUniform(DType::kF32, {5}, 3)),
                  Const(g, HostTensor::RandomUniform(DType::kF32, {5}, 4)));
  }
  Feeds feeds() const { return {{x, HostTensor::RandomUniform(DType::kF32, {6, 5}, 5)}}; }
};

SessionOptions FailingClusters() {
  SessionOptions options;
  options.inject_compile_failure = [](const std::string& name) {
    return name.rfind("cluster_", 0) == 0;
  };
  return options;
}

TEST_F(RuntimeLogTest, CompileFallbackIsAWarningWithTheReason) {
  ScopedLayerNorm model;
  Session session(model.g, FailingClusters());
  testing::internal::CaptureStderr();
  auto out = session.Run(model.feeds(), {model.y});
  // The sink took the warning instead of stderr, and Halide said nothing.
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(session.stats().single_op_launches, 3);  // it did run op by op
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_EQ(messages_[0].severity, LogSeverity::kWarning);
  EXPECT_EQ(messages_[0].verbosity, 0);
  EXPECT_EQ(messages_[0].text,
            "cluster 'cluster_0' failed to compile: injected compile failure; running it op "
            "by op");

  // The plan keeps the fallback: no second warning on the next Run.
  ASSERT_TRUE(session.Run(model.feeds(), {model.y}).ok());
  EXPECT_EQ(messages_.size(), 1u);

  // Without a sink, the same warning is a line on stderr.
  SetLogSink(nullptr);
  Session another(model.g, FailingClusters());
  testing::internal::CaptureStderr();
  ASSERT_TRUE(another.Run(model.feeds(), {model.y}).ok());
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "braze: warning: cluster 'cluster_0' failed to compile: injected compile "
            "failure; running it op by op\n");
}

// --log_compiles: a line per kernel a session prepares, naming the scheduler that made
// it and each one that refused first (Li2018's CPU schedule of a layer norm has atomic
// stores Halide 14 cannot lower), then a cache hit for the second session.
TEST_F(RuntimeLogTest, LogCompilesNamesTheSchedulerAndEachRefusal) {
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {7, 13}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = LayerNorm(Sigmoid(x), Const(g, HostTensor::RandomUniform(DType::kF32, {13}, 3)),
                  Const(g, HostTensor::RandomUniform(DType::kF32, {13}, 4)));
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {7, 13}, 5)}};
  SessionOptions options;
  options.scheduler = Scheduler::kLi2018;
  for (int round = 0; round < 2; ++round) {
    Session session(g, options);
    ASSERT_TRUE(session.Run(feeds, {y}).ok());
  }
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_EQ(messages_[0].severity, LogSeverity::kInfo);
  EXPECT_THAT(messages_[0].text, AllOf(StartsWith("compile: cluster 'cluster_0' ("),
                                       HasSubstr(" ops) for (f32[7,13]): first use; "),
                                       HasSubstr(" ms\n  refused first: Li2018: ")));
  EXPECT_THAT(messages_[1].text, HasSubstr(", cache hit\n  refused first: Li2018: "));

  // Off by default.
  SetBrazeFlagsForTesting(BrazeFlags{});
  Session quiet(g, options);
  ASSERT_TRUE(quiet.Run(feeds, {y}).ok());
  EXPECT_EQ(messages_.size(), 2u);
}

// Each compile line says why the kernel was needed and what the cache had (as JAX's
// explain_cache_misses): first use, a new signature with the dims that changed, a key
// evicted from the compile cache.
TEST_F(RuntimeLogTest, LogCompilesSaysWhyTheCacheMissed) {
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 6}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Tanh(Exp(x) * 0.75 + 1.0);
  }
  auto feed = [&](int64_t rows) {
    return Feeds{{x, HostTensor::RandomUniform(DType::kF32, {rows, 6}, rows)}};
  };
  SessionOptions options;
  options.symbolic_shapes = false;  // a kernel per size (symbolic_shapes_test.cc: one)
  Session session(g, options);
  ASSERT_TRUE(session.Run(feed(128), {y}).ok());
  ASSERT_TRUE(session.Run(feed(100), {y}).ok());
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_THAT(messages_[0].text,
              HasSubstr("for (f32[128,6]): first use; not in the compile cache"));
  EXPECT_THAT(messages_[1].text,
              HasSubstr("for (f32[100,6]): new signature: input 0 dim 0 was 128, now 100; not in "
                        "the compile cache"));
  // Back to 128: found in the cache.
  ASSERT_TRUE(session.Run(feed(128), {y}).ok());
  ASSERT_EQ(messages_.size(), 3u);
  EXPECT_THAT(messages_[2].text, HasSubstr("new signature: input 0 dim 0 was 100, now 128; "));
  EXPECT_THAT(messages_[2].text, HasSubstr(", cache hit"));
}

TEST_F(RuntimeLogTest, LogCompilesSaysAKernelWasEvicted) {
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {3, 5}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Sigmoid(x * 1.2345 + 0.5);
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {3, 5}, 1)}};
  {
    Session first(g);
    ASSERT_TRUE(first.Run(feeds, {y}).ok());
  }
  CompileCache::Global().set_capacity(0);  // evicts everything ready
  CompileCache::Global().set_capacity(4096);
  Session second(g);
  ASSERT_TRUE(second.Run(feeds, {y}).ok());
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_THAT(messages_[1].text, HasSubstr("first use; evicted from the compile cache earlier; "));
}

TEST_F(RuntimeLogTest, ClusteringDebugIsInfoAtLevelZero) {
  BrazeFlags flags;
  flags.clustering_debug = true;
  SetBrazeFlagsForTesting(flags);
  ScopedLayerNorm model;
  Session session(model.g);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(session.Run(model.feeds(), {model.y}).ok());
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_EQ(messages_[0].severity, LogSeverity::kInfo);
  EXPECT_EQ(messages_[0].verbosity, 0);
  EXPECT_THAT(messages_[0].text, AllOf(StartsWith("session_"),
                                       HasSubstr(".plan_0 clustering:\nmark_for_compilation: ")));
}

TEST_F(RuntimeLogTest, VerbosityFlagSetsTheLogVerbosityOnlyWhenGiven) {
  BrazeFlags flags;
  flags.v = 2;
  SetBrazeFlagsForTesting(flags);
  EXPECT_EQ(LogVerbosity(), 2);
  SetLogVerbosity(1);
  SetBrazeFlagsForTesting(BrazeFlags{});  // no --v: the program's setting stays
  EXPECT_EQ(LogVerbosity(), 1);
}

// At --v=2 a session's compile sends Adams2019's passes to the sink (compile_tests has
// the details of the capture).
TEST_F(RuntimeLogTest, HalideOutputAtVerbosityTwo) {
  SetLogVerbosity(2);
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {8, 13}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Exp(x) * 2.5 + 1.25;  // elementwise: Auto picks Adams2019; a shape no test compiles
  }
  Session session(g);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(session.Run({{x, HostTensor::RandomUniform(DType::kF32, {8, 13}, 6)}}, {y}).ok());
  EXPECT_EQ(session.stats().compiles, 1);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  int halide_lines = 0;
  for (const Message& m : messages_) {
    if (m.text.rfind("halide: Pass 0 of ", 0) == 0) ++halide_lines;
    EXPECT_EQ(m.severity, LogSeverity::kInfo) << m.text;
  }
  EXPECT_EQ(halide_lines, 1);
}

}  // namespace
}  // namespace braze
