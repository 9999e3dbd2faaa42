// Compile policies (SessionOptions::compile_policy): eager compiles before the first
// run, lazy after lazy_compile_threshold - 1 runs op by op, async in the background
// while runs go op by op. Every run's result is checked, compiled or not.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "compile/compile_cache.h"

namespace braze {
namespace {

struct Model {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 7}, "x");
  Tensor y;
  explicit Model(double scale) {
    JitScope scope(g);
    y = Sum(Tanh(x * scale + 0.5) * x, {1});
  }
  Feeds feed(int64_t rows, uint64_t seed) const {
    return {{x, HostTensor::RandomUniform(DType::kF32, {rows, 7}, seed)}};
  }
  static void Check(const Feeds& feeds, const HostTensor& out, double scale) {
    const HostTensor& in = feeds[0].second;
    for (int64_t r = 0; r < in.dim(0); ++r) {
      double want = 0;
      for (int64_t c = 0; c < 7; ++c) {
        const double v = in.GetDouble(r * 7 + c);
        want += std::tanh(v * scale + 0.5) * v;
      }
      ASSERT_NEAR(out.GetDouble(r), want, 1e-4) << "row " << r;
    }
  }
};

// Each test uses its own scale, so no kernel is in the process-wide cache already.
TEST(CompilePolicyTest, EagerCompilesBeforeTheFirstRun) {
  Model m(1.25);
  Session session(m.g);
  const Feeds feeds = m.feed(5, 1);
  auto out = session.Run(feeds, {m.y});
  ASSERT_TRUE(out.ok()) << out.status();
  Model::Check(feeds, (*out)[0], 1.25);
  EXPECT_EQ(session.stats().compiles, 1);
  EXPECT_EQ(session.stats().cluster_launches, 1);
  EXPECT_EQ(session.stats().reference_launches, 0);
}

TEST(CompilePolicyTest, LazyRunsOpByOpUntilTheThresholdThenCompiles) {
  Model m(1.5);
  SessionOptions options;
  options.compile_policy = CompilePolicy::kLazy;
  options.lazy_compile_threshold = 3;
  Session session(m.g, options);
  for (int run = 1; run <= 4; ++run) {
    const Feeds feeds = m.feed(5, run);
    auto out = session.Run(feeds, {m.y});
    ASSERT_TRUE(out.ok()) << out.status();
    Model::Check(feeds, (*out)[0], 1.5);
    const SessionStats s = session.stats();
    if (run < 3) {
      EXPECT_EQ(s.compiles, 0) << run;
      EXPECT_EQ(s.cluster_launches, 0) << run;
      EXPECT_GT(s.reference_launches, 0) << run;
    } else {
      EXPECT_EQ(s.compiles, 1) << run;
      EXPECT_EQ(s.cluster_launches, run - 2) << run;
    }
  }
  // A new signature counts its own runs.
  const int64_t launches = session.stats().cluster_launches;
  ASSERT_TRUE(session.Run(m.feed(6, 9), {m.y}).ok());
  EXPECT_EQ(session.stats().cluster_launches, launches);
}

TEST(CompilePolicyTest, AsyncNeverBlocksARunAndSwitchesWhenReady) {
  Model m(1.75);
  SessionOptions options;
  options.compile_policy = CompilePolicy::kAsync;
  Session session(m.g, options);
  const Feeds first = m.feed(11, 1);
  auto out = session.Run(first, {m.y});
  ASSERT_TRUE(out.ok()) << out.status();
  Model::Check(first, (*out)[0], 1.75);
  EXPECT_EQ(session.stats().cluster_launches, 0);  // the first run did not wait
  EXPECT_GT(session.stats().reference_launches, 0);
  // Keep running until the kernel is in (bounded: a compile here takes well under 60 s).
  int runs = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (session.stats().cluster_launches == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const Feeds feeds = m.feed(11, ++runs);
    out = session.Run(feeds, {m.y});
    ASSERT_TRUE(out.ok()) << out.status();
    Model::Check(feeds, (*out)[0], 1.75);
  }
  EXPECT_EQ(session.stats().cluster_launches, 1);
  EXPECT_EQ(session.stats().compiles, 1);
}

TEST(CompilePolicyTest, StrictAndExplicitCompilesAreEager) {
  Model m(2.25);
  SessionOptions options;
  options.compile_policy = CompilePolicy::kAsync;
  options.strict = true;
  Session strict(m.g, options);
  ASSERT_TRUE(strict.Run(m.feed(3, 1), {m.y}).ok());
  EXPECT_EQ(strict.stats().cluster_launches, 1);

  Model lazy_model(2.5);
  options.strict = false;
  options.compile_policy = CompilePolicy::kLazy;
  Session lazy(lazy_model.g, options);
  ASSERT_TRUE(lazy.Compile(lazy_model.feed(3, 1), {lazy_model.y}).ok());
  EXPECT_EQ(lazy.stats().compiles, 1);
  ASSERT_TRUE(lazy.Run(lazy_model.feed(3, 2), {lazy_model.y}).ok());
  EXPECT_EQ(lazy.stats().cluster_launches, 1);
}

// A session destroyed, and its graph grown, while a background compile is under way:
// the compile reads a copy of the cluster, and the session waits for it when destroyed.
TEST(CompilePolicyTest, ConcurrentAsyncCompileWithGraphGrowthAndTeardown) {
  for (int i = 0; i < 3; ++i) {
    Model m(3.0 + i);
    SessionOptions options;
    options.compile_policy = CompilePolicy::kAsync;
    {
      Session session(m.g, options);
      const Feeds feeds = m.feed(4, i);
      auto out = session.Run(feeds, {m.y});
      ASSERT_TRUE(out.ok()) << out.status();
      Model::Check(feeds, (*out)[0], 3.0 + i);
      for (int k = 0; k < 200; ++k) Exp(m.x + static_cast<double>(k));  // the graph grows
    }
  }
}

}  // namespace
}  // namespace braze
