// --dump_to writes each kernel's cluster as text (session_S.<step>.<signature>.cluster),
// and that file alone rebuilds the cluster: the same cluster key, and a kernel compiled
// from it computes what the session did.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/temp_files.h"
#include "compile/cluster_key.h"
#include "lower/cluster_text.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using testing_util::FilesIn;
using testing_util::ReadFile;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ClusterDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::path(::testing::TempDir()) / ("braze_cluster_dump_test_" + std::to_string(getpid()) +
                                             "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    BrazeFlags flags;
    flags.dump_to = dir_.string();
    SetBrazeFlagsForTesting(flags);
  }
  void TearDown() override {
    SetBrazeFlagsForTesting(BrazeFlags{});
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(ClusterDumpTest, EachKernelsClusterIsWrittenAndRebuildsToTheSameKey) {
  // x -> a cluster (scaled softmax with a constant and a pad) -> Neg under compile=false
  // (a single-op kernel).
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 10}, "x");
  Tensor y;
  {
    JitScope scope(g);
    Tensor k = Const(g, HostTensor::From<float>({0.5f, -1, 2, 0.1f, 3, 4, 5, 6, 7, 8}, {10}));
    y = Pad(Softmax(x * k), {{0, 0}, {1, 1}}, 0.1);
  }
  Tensor z;
  {
    JitScope off(g, false);
    z = Neg(y);
  }
  const HostTensor feed = HostTensor::RandomUniform(DType::kF32, {5, 10}, 3);
  Session session(g);
  auto result = session.Run({{x, feed}}, {y, z});
  ASSERT_TRUE(result.ok()) << result.status();

  const std::vector<std::string> files = FilesIn(dir_, ".cluster");
  ASSERT_EQ(files.size(), 2u);  // the cluster's and the Neg's, beside their .txt
  for (const std::string& name : files) {
    EXPECT_TRUE(fs::exists(dir_ / (name.substr(0, name.size() - 8) + ".txt"))) << name;
  }
  const std::string cluster = *session.ClusterOf(y);
  auto it = std::find_if(files.begin(), files.end(), [&](const std::string& f) {
    return f.find("." + cluster + ".f32_5x10.cluster") != std::string::npos;
  });
  ASSERT_NE(it, files.end());
  const std::string text = ReadFile(dir_ / *it);
  // x's batch is -1: the kernel is symbolic, the one for sizes 1 to 15, compiled (and
  // written) at its estimate, 15 rows (docs/SYMBOLIC_SHAPES.md).
  EXPECT_THAT(text, HasSubstr("input 0 f32 [15,10] symbols [0,-1]\n"));
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(text, (dir_ / *it).string());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->spec.name, cluster);

  // The cluster as the session built it: every node made in the scope, x in, y out.
  ClusterSpec spec{&g, cluster, {}, {x}, {TensorType{DType::kF32, {15, 10}}}, {y}, {}, {{0, -1}}};
  for (int id = x.node_id() + 1; id <= y.node_id(); ++id) spec.nodes.push_back(id);
  EXPECT_EQ(ClusterKey(rebuilt->spec, CompileOptions{}), ClusterKey(spec, CompileOptions{}));

  // What braze-tune does with it: compile and run, the session's result.
  auto kernel = CompileCluster(rebuilt->spec, CompileOptions{});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  HostTensor out((*result)[0].dtype(), (*result)[0].shape());  // the kernel's has a -1
  const HostTensor* in[] = {&feed};
  HostTensor* outs[] = {&out};
  ASSERT_TRUE((*kernel)->Run(in, outs).ok());
  std::string why;
  EXPECT_TRUE(AllClose(out, (*result)[0], 1e-6, 1e-6, &why)) << why;

  // The single-op kernel's file rebuilds too.
  const std::string neg = files[0] == *it ? files[1] : files[0];
  rebuilt = ClusterFromText(ReadFile(dir_ / neg), neg);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  ASSERT_EQ(rebuilt->spec.nodes.size(), 1u);
  EXPECT_EQ(rebuilt->graph->node(rebuilt->spec.nodes[0]).op(), OpKind::kNeg);
  EXPECT_EQ(rebuilt->spec.input_types, (std::vector<TensorType>{{DType::kF32, {15, 12}}}));

  // Another signature, another file; the same one again writes nothing new.
  ASSERT_TRUE(session.Run({{x, HostTensor::RandomUniform(DType::kF32, {3, 10}, 4)}}, {y}).ok());
  ASSERT_TRUE(session.Run({{x, feed}}, {y}).ok());
  EXPECT_EQ(FilesIn(dir_, ".cluster").size(), 3u);
}

}  // namespace
}  // namespace braze
