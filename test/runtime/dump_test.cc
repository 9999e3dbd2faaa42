// --dump_to and --clustering_debug: which files a session writes, what they say, that
// Graphviz renders them, and tools/braze-dump. Flags are set programmatically
// (SetBrazeFlagsForTesting); environment parsing is flags_test's.
#include "runtime/dump.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/temp_files.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using testing_util::FilesIn;
using testing_util::ReadFile;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Exit status of a shell command, or -1 if it did not exit normally.
int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveDot() { return Shell("command -v dot >/dev/null 2>&1") == 0; }

// The checkout: BRAZE_SOURCE_DIR under ctest, else the one this file was built from
// (test/CMakeLists.txt; __FILE__ is relative to the build directory under ccache).
fs::path SourceDir() {
  if (const char* dir = std::getenv("BRAZE_SOURCE_DIR")) return dir;
  return BRAZE_TEST_CHECKOUT;
}

// x -> softmax (one JitScope: a cluster) -> Neg under compile=false -> a HostCall whose
// name needs escaping in DOT. The Neg and the HostCall stay out, for two reasons.
struct DumpGraph {
  DumpGraph() {
    x = Placeholder(g, DType::kF32, {-1, 33}, "x");
    {
      JitScope scope(g);
      y = Softmax(x);
    }
    {
      JitScope off(g, false);
      z = Neg(y);
    }
    out = HostCall(g, "host\"call\\fn", {z}, {TensorSpec{DType::kF32, {-1, 33}}},
                   [](absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
                     return std::vector<HostTensor>{in[0]};
                   })[0];
  }
  Feeds feeds() const { return {{x, HostTensor::RandomUniform(DType::kF32, {7, 33}, 5)}}; }
  Graph g;
  Tensor x, y, z, out;
};

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::path(::testing::TempDir()) /
           ("braze_dump_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    SetBrazeFlagsForTesting(BrazeFlags{});
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void DumpTo(const fs::path& dir) {
    BrazeFlags flags;
    flags.dump_to = dir.string();
    SetBrazeFlagsForTesting(flags);
  }
  fs::path dir_;
};

TEST_F(DumpTest, SessionWritesGraphsBeforeAndAfterClusteringAndKernels) {
  DumpGraph graph;
  DumpTo(dir_);
  Session session(graph.g);
  auto result = session.Run(graph.feeds(), {graph.out});
  ASSERT_TRUE(result.ok()) << result.status();

  const std::vector<std::string> dots = FilesIn(dir_, ".dot");
  ASSERT_EQ(dots.size(), 2u);
  EXPECT_THAT(dots[0], testing::MatchesRegex("session_[0-9]+\\.plan_0\\.after_clustering\\.dot"));
  const std::string session_prefix = dots[0].substr(0, dots[0].find('.'));
  EXPECT_EQ(dots[1], session_prefix + ".plan_0.before_clustering.dot");

  const std::string before = ReadFile(dir_ / dots[1]);
  EXPECT_THAT(before, StartsWith("digraph \""));
  EXPECT_THAT(before, Not(HasSubstr("subgraph cluster_")));
  EXPECT_THAT(before, HasSubstr("compile=false"));          // the Neg's scope
  EXPECT_THAT(before, HasSubstr("[label=\"f32[?,33]\"]"));  // edges carry shapes

  const std::string after = ReadFile(dir_ / dots[0]);
  EXPECT_THAT(after, HasSubstr("subgraph cluster_0 {"));
  const std::string cluster = *session.ClusterOf(graph.y);
  EXPECT_THAT(after, HasSubstr("label=\"" + cluster + "\\njit_scope_"));
  EXPECT_THAT(after, HasSubstr("[marked compile=false]"));
  EXPECT_THAT(after, HasSubstr("[no lowering]"));
  EXPECT_THAT(after, HasSubstr("runs: single-op kernel"));  // the Neg
  EXPECT_THAT(after, HasSubstr("runs: reference kernel"));  // the HostCall
  EXPECT_THAT(after, HasSubstr("[fed]"));                   // x
  EXPECT_THAT(after, HasSubstr("host\\\"call\\\\fn"));      // escaped for DOT
  // The cluster's ops are inside the subgraph, the excluded ones after it.
  const size_t close = after.find("\n  }\n");
  ASSERT_NE(close, std::string::npos);
  EXPECT_LT(after.find(graph.y.name() + "\\n"), close);
  EXPECT_GT(after.find(graph.z.name() + "\\n"), close);

  // One kernel file per compiled step: the cluster and the Neg's single-op kernel.
  const std::vector<std::string> txts = FilesIn(dir_, ".txt");
  ASSERT_EQ(txts.size(), 2u);
  const std::string cluster_txt = session_prefix + "." + cluster + ".f32_7x33.txt";
  ASSERT_TRUE(fs::exists(dir_ / cluster_txt)) << cluster_txt;
  const std::string text = ReadFile(dir_ / cluster_txt);
  EXPECT_THAT(text, HasSubstr("(fused cluster)"));
  EXPECT_THAT(text, HasSubstr("// inputs: f32[7,33]"));
  EXPECT_THAT(text, HasSubstr("// outputs: f32[?,33]"));  // x's -1 batch: a symbolic kernel
  EXPECT_THAT(text, HasSubstr("// scheduler: "));
  // The lowered statement: the scheduled loop nest, with the cluster's output in it.
  EXPECT_THAT(text, HasSubstr("// Lowered Halide statement"));
  EXPECT_THAT(text, HasSubstr("produce "));
  // The lowered statement follows the header.
  const size_t body = text.find("\n\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_GT(text.size() - body, 40u) << text;
  EXPECT_THAT(txts, testing::Contains(session_prefix + "." + graph.z.name() + ".f32_7x33.txt"));
}

// A device kernel's generated code lands beside its statement: OpenCL C on jit:opencl
// (POCL here), and CPU kernels write none.
TEST_F(DumpTest, DeviceKernelsWriteTheirOpenCLSource) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {5, 9}, "x");
  Tensor y;
  {
    DeviceScope on(g, "jit:opencl");
    y = Softmax(Tanh(x));
  }
  DumpTo(dir_);
  Session session(g);
  ASSERT_TRUE(session.Run({{x, HostTensor::RandomUniform(DType::kF32, {5, 9}, 3)}}, {y}).ok());
  const std::vector<std::string> cls = FilesIn(dir_, ".cl");
  ASSERT_EQ(cls.size(), 1u);
  EXPECT_EQ(FilesIn(dir_, ".txt").size(), 1u);
  const std::string source = ReadFile(dir_ / cls[0]);
  EXPECT_THAT(source, HasSubstr("__kernel"));
  EXPECT_THAT(source, HasSubstr("gpu_source_kernels"));
}

TEST_F(DumpTest, EachPlanAndSessionIsNumberedApart) {
  DumpGraph graph;
  DumpTo(dir_);
  Session first(graph.g), second(graph.g);
  ASSERT_TRUE(first.Run(graph.feeds(), {graph.y}).ok());
  ASSERT_TRUE(first.Run(graph.feeds(), {graph.y}).ok());  // same plan: no new files
  ASSERT_TRUE(first.Run(graph.feeds(), {graph.z}).ok());  // a second plan
  ASSERT_TRUE(second.Run(graph.feeds(), {graph.y}).ok());
  const std::vector<std::string> dots = FilesIn(dir_, ".dot");
  ASSERT_EQ(dots.size(), 6u);
  std::set<std::string> sessions, plans;
  for (const std::string& name : dots) {
    sessions.insert(name.substr(0, name.find('.')));
    plans.insert(name.substr(0, name.find('.', name.find('.') + 1)));
  }
  EXPECT_EQ(sessions.size(), 2u);
  EXPECT_EQ(plans.size(), 3u);
}

TEST_F(DumpTest, ClusteringDebugGoesToStderrWithoutFiles) {
  DumpGraph graph;
  BrazeFlags flags;
  flags.clustering_debug = true;
  SetBrazeFlagsForTesting(flags);
  Session session(graph.g);
  testing::internal::CaptureStderr();
  auto result = session.Run(graph.feeds(), {graph.out});
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(err, HasSubstr(".plan_0 clustering:\nmark_for_compilation: 1 cluster(s)"));
  EXPECT_THAT(err, HasSubstr("not clustered [marked compile=false]"));
  EXPECT_FALSE(fs::exists(dir_));
  // Printed once per plan, not per Run.
  testing::internal::CaptureStderr();
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.out}).ok());
  EXPECT_THAT(testing::internal::GetCapturedStderr(), Not(HasSubstr("mark_for_compilation")));
}

TEST_F(DumpTest, UnwritableDirectoryFailsTheRunUntilFixed) {
  DumpGraph graph;
  fs::create_directories(dir_);
  std::ofstream(dir_ / "a_file") << "x";
  DumpTo(dir_ / "a_file" / "dumps");
  Session session(graph.g);
  absl::Status s = session.Run(graph.feeds(), {graph.y}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("--dump_to=" + (dir_ / "a_file").string()));
  // The failed plan is not kept: once the directory is usable, it is built and dumped.
  DumpTo(dir_ / "dumps");
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.y}).ok());
  EXPECT_EQ(FilesIn(dir_ / "dumps", ".dot").size(), 2u);
}

TEST(DumpSignature, NamesTypesReadablyOrByStableHash) {
  EXPECT_EQ(SignatureFileName({{DType::kF32, {7, 33}}, {DType::kI32, {}}}), "f32_7x33__i32_scalar");
  EXPECT_EQ(SignatureFileName({}), "no_inputs");
  std::vector<TensorType> many(12, TensorType{DType::kF64, {128, 256, 3}});
  const std::string hashed = SignatureFileName(many);
  EXPECT_THAT(hashed, testing::MatchesRegex("sig_[0-9a-f]{16}"));
  EXPECT_EQ(SignatureFileName(many), hashed);
  many.back().shape[0] = 129;
  EXPECT_NE(SignatureFileName(many), hashed);
}

TEST_F(DumpTest, DumpedDotFilesRenderWithGraphviz) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz (dot) is not installed";
  DumpGraph graph;
  DumpTo(dir_);
  Session session(graph.g);
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.out}).ok());
  const std::vector<std::string> dots = FilesIn(dir_, ".dot");
  ASSERT_EQ(dots.size(), 2u);
  for (const std::string& name : dots) {
    const fs::path png = dir_ / (name + ".png");
    const std::string command = "dot -Tpng '" + (dir_ / name).string() + "' -o '" + png.string() +
                                "' 2>'" + (dir_ / "dot.err").string() + "'";
    EXPECT_EQ(Shell(command), 0) << name << ": " << ReadFile(dir_ / "dot.err");
    EXPECT_EQ(ReadFile(dir_ / "dot.err"), "") << name;  // no warnings either
    EXPECT_THAT(ReadFile(png), StartsWith("\x89PNG")) << name;
  }
}

TEST_F(DumpTest, BrazeDumpToolRendersTheDirectory) {
  if (!HaveDot()) GTEST_SKIP() << "Graphviz (dot) is not installed";
  DumpGraph graph;
  DumpTo(dir_);
  Session session(graph.g);
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.out}).ok());
  const fs::path tool = SourceDir() / "tools" / "braze-dump";
  ASSERT_TRUE(fs::exists(tool)) << tool;
  EXPECT_EQ(Shell("/bin/bash '" + tool.string() + "' '" + dir_.string() + "' >/dev/null"), 0);
  const std::vector<std::string> pngs = FilesIn(dir_, ".png");
  ASSERT_EQ(pngs.size(), 2u);
  for (const std::string& name : pngs) {
    EXPECT_THAT(ReadFile(dir_ / name), StartsWith("\x89PNG")) << name;
  }
  EXPECT_EQ(Shell("/bin/bash '" + tool.string() + "' --help >/dev/null"), 0);
  // A directory with nothing to render is an error, not silence.
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(
      Shell("/bin/bash '" + tool.string() + "' '" + (dir_ / "empty").string() + "' 2>/dev/null"),
      1);
}

TEST_F(DumpTest, BrazeDumpToolExplainsMissingGraphviz) {
  const fs::path tool = SourceDir() / "tools" / "braze-dump";
  ASSERT_TRUE(fs::exists(tool)) << tool;
  fs::create_directories(dir_);
  const fs::path err = dir_ / "err.txt";
  // An empty PATH hides `dot` (the script needs nothing else but bash built-ins).
  EXPECT_EQ(Shell("PATH=/nonexistent /bin/bash '" + tool.string() + "' '" + dir_.string() +
                  "' 2>'" + err.string() + "'"),
            3);
  EXPECT_THAT(ReadFile(err), HasSubstr("Graphviz is not installed"));
}

}  // namespace
}  // namespace braze
