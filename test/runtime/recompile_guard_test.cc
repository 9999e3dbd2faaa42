// The recompile guard (SessionOptions::max_signatures_per_cluster, XLA's megamorphic
// rule): a cluster fed ever-new shapes stops being compiled, says so once, and still
// computes right.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Churn {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor y;
  Churn() {
    JitScope scope(g);
    y = Tanh(x * 1.5 + 0.25) * x;
  }
  Feeds feed(int64_t rows) const {
    return {{x, HostTensor::RandomUniform(DType::kF32, {rows, 3}, 100 + rows)}};
  }
  static void Check(const HostTensor& in, const HostTensor& out) {
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      const double v = in.GetDouble(i);
      ASSERT_NEAR(out.GetDouble(i), std::tanh(v * 1.5 + 0.25) * v, 1e-5) << i;
    }
  }
};

class RecompileGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      if (severity == LogSeverity::kWarning) warnings_.emplace_back(text);
    });
  }
  void TearDown() override { SetLogSink(nullptr); }
  std::vector<std::string> warnings_;
};

TEST_F(RecompileGuardTest, AClusterMeetingEverNewShapesStopsCompilingAndSaysSo) {
  Churn c;
  SessionOptions options;
  options.max_signatures_per_cluster = 4;
  // Every size of x's -1 dim would share one symbolic kernel: compile per size, so that
  // the sizes churn as the guard's other kind of program does (a dim the program fixed
  // that changes, or symbolic shapes refused).
  options.symbolic_shapes = false;
  Session session(c.g, options);
  for (int64_t rows = 1; rows <= 12; ++rows) {
    const Feeds feeds = c.feed(rows);
    auto out = session.Run(feeds, {c.y});
    ASSERT_TRUE(out.ok()) << out.status();
    Churn::Check(feeds[0].second, (*out)[0]);
  }
  const SessionStats s = session.stats();
  EXPECT_EQ(s.cluster_launches, 4);  // the first four signatures only
  // The other eight ran op by op on compiled single-op kernels, not on the reference
  // kernels, until each op's own guard tripped (symbolic shapes are off here, so every
  // size is a signature of each op too): 4 ops x 4 sizes.
  EXPECT_EQ(s.single_op_launches, 16);
  EXPECT_EQ(s.compiles + s.cache_hits, 4 + 16);
  EXPECT_EQ(s.reference_launches, 16);  // 4 ops x sizes 9-12
  ASSERT_EQ(warnings_.size(), 5u);      // the cluster's, then each op's once
  EXPECT_THAT(warnings_[0], HasSubstr("cluster 'cluster_0' met 5 input signatures in 5 runs"));
  EXPECT_THAT(warnings_[0], HasSubstr("no longer compiled for new signatures, which run op by op "
                                      "on compiled single-op kernels"));
  EXPECT_THAT(warnings_[0], HasSubstr("input 0 dim 0 (1, 2, 3, 4, 5)"));
  for (size_t i = 1; i < warnings_.size(); ++i) {
    EXPECT_THAT(warnings_[i], StartsWith("node '"));
    EXPECT_THAT(warnings_[i], HasSubstr("met 5 input signatures"));
    EXPECT_THAT(warnings_[i], HasSubstr("which run on its reference kernel"));
  }

  // A signature compiled before still runs compiled.
  const int64_t launches = session.stats().cluster_launches;
  auto again = session.Run(c.feed(2), {c.y});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(session.stats().cluster_launches, launches + 1);
}

TEST_F(RecompileGuardTest, ASizeChurnThatSymbolicShapesRefuseStillTripsTheGuard) {
  // Flattening x merges its -1 dim with another: one kernel cannot serve every size
  // (docs/SYMBOLIC_SHAPES.md), so every size compiles, and the guard counts them.
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 3}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Reshape(Tanh(x * 1.5 + 0.25) * x, {-1});
  }
  SessionOptions options;
  options.max_signatures_per_cluster = 4;
  options.disk_cache = false;
  Session session(g, options);
  for (int64_t rows = 1; rows <= 12; ++rows) {
    auto out = session.Run({{x, HostTensor::RandomUniform(DType::kF32, {rows, 3}, rows)}}, {y});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{rows * 3}));
  }
  // After the guard, new sizes run on compiled single-op kernels: the elementwise ops'
  // kernels are symbolic (one serves every size from 16 up, one every size below), so
  // only the Reshape, which flattens the dim as the cluster did, churns and trips its
  // own guard.
  const SessionStats s = session.stats();
  EXPECT_EQ(s.cluster_launches, 4);
  EXPECT_GT(s.single_op_launches, 8 * 4);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_THAT(warnings_[0], HasSubstr("cluster 'cluster_0' met 5 input signatures"));
  EXPECT_THAT(warnings_[1], HasSubstr("(Reshape) met 5 input signatures"));
  EXPECT_EQ(s.reference_launches, 4);  // the Reshape at sizes 9-12
}

TEST_F(RecompileGuardTest, ManyRunsPerSignatureKeepCompiling) {
  Churn c;
  SessionOptions options;
  options.max_signatures_per_cluster = 2;
  Session session(c.g, options);
  for (int64_t rows = 1; rows <= 3; ++rows) {
    for (int rep = 0; rep < 80; ++rep) ASSERT_TRUE(session.Run(c.feed(rows), {c.y}).ok());
  }
  EXPECT_EQ(session.stats().cluster_launches, 240);  // 160 runs >= 50 x 3
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(RecompileGuardTest, StrictModeAndZeroAlwaysCompile) {
  for (bool strict : {true, false}) {
    Churn c;
    SessionOptions options;
    options.strict = strict;
    options.max_signatures_per_cluster = strict ? 2 : 0;
    Session session(c.g, options);
    for (int64_t rows = 1; rows <= 6; ++rows) {
      ASSERT_TRUE(session.Run(c.feed(rows), {c.y}).ok());
    }
    EXPECT_EQ(session.stats().cluster_launches, 6);
  }
  EXPECT_TRUE(warnings_.empty());
}

}  // namespace
}  // namespace braze
