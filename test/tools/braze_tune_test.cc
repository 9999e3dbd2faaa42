// braze-tune end to end (docs/SCHEDULES.md): a small program dumps its clusters, the
// tool tunes them under a small budget and writes schedules/ entries, a session applies
// them (and still matches the reference kernels); a second run resumes from the
// journal; unreadable input is reported, not crashed on.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/run_command.h"
#include "common/temp_files.h"
#include "lower/cluster_spec.h"
#include "lower/cluster_text.h"
#include "runtime/flags.h"
#include "tools/tune/tuner.h"

namespace braze {
namespace {

using testing_util::FilesIn;
using testing_util::MakeTempDir;
using testing_util::ReadFile;

using ::testing::HasSubstr;
using ::testing::Not;

// Runs the tool; returns its exit status and stdout + stderr.
int RunTool(const std::string& args, std::string* output) {
  return testing_util::RunCommand(std::string(BRAZE_TUNE_PATH) + " " + args, output);
}

// Two clusters: a small dense layer with a ReLU, and a softmax over its rows.
struct Program {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {24, 40}, "x");
  Tensor w = Placeholder(g, DType::kF32, {40, 36}, "w");
  Tensor h, y;
  Program() {
    JitScope scope(g);
    h = Relu(MatMul(x, w) + 0.5);
    y = Softmax(Exp(Neg(Square(h * 0.75 + 0.125))) * 2.0);
  }
  Feeds Feed() const {
    return {{x, HostTensor::RandomUniform(DType::kF32, {24, 40}, 5)},
            {w, HostTensor::RandomUniform(DType::kF32, {40, 36}, 6)}};
  }
};

TEST(BrazeTuneTest, TunesADumpedProgramAndTheSessionAppliesTheWinners) {
  Program p;
  const std::string dump = MakeTempDir("braze_tune_test_"),
                    out = MakeTempDir("braze_tune_test_") + "/schedules";
  {
    BrazeFlags flags;
    flags.dump_to = dump;
    flags.stored_schedules = false;
    SetBrazeFlagsForTesting(flags);
    SessionOptions o;
    o.disk_cache = false;
    o.min_cluster_size = 1;
    Session session(p.g, o);
    auto run = session.Run(p.Feed(), {p.y});
    ASSERT_TRUE(run.ok()) << run.status();
    SetBrazeFlagsForTesting(BrazeFlags{});
  }
  const size_t clusters = FilesIn(dump, ".cluster").size();
  ASSERT_GE(clusters, 1u);

  std::string output;
  ASSERT_EQ(RunTool("--help", &output), 0);
  EXPECT_THAT(output, HasSubstr("--budget=SECONDS"));
  // --min_speedup=0: every cluster's fastest candidate is stored, so the session below
  // has entries to apply whatever this machine measures.
  ASSERT_EQ(RunTool("--budget=30 --runs=2 --min_speedup=0 --out=" + out + " " + dump, &output), 0)
      << output;
  EXPECT_THAT(output, HasSubstr("candidates, "));  // the progress bar
  EXPECT_THAT(output, HasSubstr("ETA"));
  EXPECT_THAT(output, HasSubstr("default ms"));  // the closing table
  EXPECT_THAT(output, HasSubstr("speedup"));
  const std::vector<std::string> entries = FilesIn(out, ".schedule");
  EXPECT_EQ(entries.size(), clusters) << output;
  const std::string journal = ReadFile(out + "/tune.journal");
  EXPECT_EQ(static_cast<size_t>(std::count(journal.begin(), journal.end(), '\n')), clusters);

  // A session that looks in `out` compiles every cluster with its stored schedule, and
  // its results still match the reference kernels.
  std::vector<std::string> lines;
  SetLogSink([&](LogSeverity, int, std::string_view text) { lines.emplace_back(text); });
  BrazeFlags flags;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  SessionOptions o;
  o.disk_cache = false;
  o.min_cluster_size = 1;
  o.schedule_dirs = {out};
  Session tuned(p.g, o);
  auto got = tuned.Run(p.Feed(), {p.y});
  SetBrazeFlagsForTesting(BrazeFlags{});
  SetLogSink(nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  int applied = 0;
  for (const std::string& line : lines) {
    if (line.find("stored schedule " + out) != std::string::npos) ++applied;
    EXPECT_THAT(line, Not(HasSubstr("refused"))) << line;
  }
  EXPECT_EQ(static_cast<size_t>(applied), clusters);
  SessionOptions ref;
  ref.reference_only = true;
  Session reference(p.g, ref);
  auto want = reference.Run(p.Feed(), {p.y});
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t i = 0; i < (*want)[0].num_elements(); ++i) {
    const double w = (*want)[0].GetDouble(i);
    ASSERT_NEAR((*got)[0].GetDouble(i), w, 1e-5 * (1 + std::abs(w))) << "element " << i;
  }

  // Resumable: a second run finds every cluster in the journal and tunes none.
  ASSERT_EQ(RunTool("--budget=30 --out=" + out + " " + dump, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("0 clusters to tune (" + std::to_string(clusters) +
                                " done in an earlier run"));
}

// The store rule: faster by --min_speedup in the medians, and apart from the default in
// every alternated re-timing; --min_speedup=0 stores the fastest always.
TEST(BrazeTuneTest, StoresOnlyAWinnerClearOfTheNoise) {
  tune::ClusterResult r;
  r.baseline.median_ms = 3.6;
  r.best_stored.median_ms = 3.0;
  r.best_stored.stored = true;
  double speedup = 0;
  r.separated = true;
  EXPECT_TRUE(tune::ShouldStoreWinner(r, 1.03, &speedup));
  EXPECT_DOUBLE_EQ(speedup, 1.2);
  r.separated = false;  // 1.2x in the medians, but the timings overlap: noise
  EXPECT_FALSE(tune::ShouldStoreWinner(r, 1.03, &speedup));
  EXPECT_TRUE(tune::ShouldStoreWinner(r, 0, &speedup));
  r.separated = true;
  r.best_stored.median_ms = 3.55;  // 1.014x: below --min_speedup
  EXPECT_FALSE(tune::ShouldStoreWinner(r, 1.03, &speedup));
  r.baseline.error = "compile failed";
  EXPECT_FALSE(tune::ShouldStoreWinner(r, 0, &speedup));
  EXPECT_EQ(speedup, 0);
}

// The GPU heuristic tuned on OpenCL (POCL here: its times are CPU times, which is fine
// for the mechanism): the entry names the device in its target, the session on that
// device applies it and still matches the reference kernels; the same entry with another
// architecture is refused with one warning, and the default schedule used.
TEST(BrazeTuneTest, TunesTheGpuHeuristicOnOpenCLKeyedByTheDevice) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {24, 40}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(Exp(Neg(Square(x * 0.75 + 0.125))) * 2.0);
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {24, 40}, 5)}};
  SessionOptions o;
  o.disk_cache = false;
  o.min_cluster_size = 1;
  o.device = "opencl:0";
  const std::string dump = MakeTempDir("braze_tune_gpu_"),
                    out = MakeTempDir("braze_tune_gpu_") + "/schedules";
  {
    BrazeFlags flags;
    flags.dump_to = dump;
    flags.stored_schedules = false;
    SetBrazeFlagsForTesting(flags);
    Session session(g, o);
    auto run = session.Run(feeds, {y});
    SetBrazeFlagsForTesting(BrazeFlags{});
    ASSERT_TRUE(run.ok()) << run.status();
  }
  ASSERT_EQ(FilesIn(dump, ".cluster").size(), 1u);
  std::string output;
  // A small budget: POCL compiles take seconds, and the entry needs only one candidate
  // besides the heuristic's defaults (--min_speedup=0 stores the fastest).
  ASSERT_EQ(
      RunTool("--device=jit:opencl --budget=8 --runs=2 --min_speedup=0 --out=" + out + " " + dump,
              &output),
      0)
      << output;
  EXPECT_THAT(output, HasSubstr("heuristic (fused) gpu_")) << output;  // the candidates
  const std::vector<std::string> entries = FilesIn(out, ".schedule");
  ASSERT_EQ(entries.size(), 1u) << output;
  const std::string path =
      entries[0].find('/') == std::string::npos ? out + "/" + entries[0] : entries[0];
  std::string text = ReadFile(path);
  const std::string device = "device=" + OpenCLDevices()[0];
  EXPECT_THAT(text, HasSubstr(device));
  EXPECT_THAT(text, HasSubstr("scheduler: heuristic ("));
  EXPECT_THAT(text, HasSubstr("gpu_block_threads: "));

  SessionOptions ref;
  ref.reference_only = true;
  Session reference(g, ref);
  auto want = reference.Run(feeds, {y});
  ASSERT_TRUE(want.ok()) << want.status();
  // Runs a session on opencl:0 that looks in `out`; its log lines.
  auto run_tuned = [&](std::vector<std::string>* lines) {
    SetLogSink([&](LogSeverity, int, std::string_view t) { lines->emplace_back(t); });
    BrazeFlags flags;
    flags.log_compiles = true;
    SetBrazeFlagsForTesting(flags);
    SessionOptions with = o;
    with.schedule_dirs = {out};
    Session tuned(g, with);
    auto got = tuned.Run(feeds, {y});
    SetBrazeFlagsForTesting(BrazeFlags{});
    SetLogSink(nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int64_t i = 0; i < (*want)[0].num_elements(); ++i) {
      const double w = (*want)[0].GetDouble(i);
      ASSERT_NEAR((*got)[0].GetDouble(i), w, 1e-5 * (1 + std::abs(w))) << "element " << i;
    }
  };
  std::vector<std::string> lines;
  run_tuned(&lines);
  int applied = 0;
  for (const std::string& line : lines) {
    if (line.find("stored schedule " + path + ": heuristic (") != std::string::npos) ++applied;
    EXPECT_THAT(line, Not(HasSubstr("refused"))) << line;
  }
  EXPECT_EQ(applied, 1) << testing::PrintToString(lines);

  // Tuned for another architecture: refused, once, naming both.
  const size_t at = text.find(device);
  text.replace(at, device.size(), "device=sm_90");
  std::ofstream(path, std::ios::trunc) << text;
  lines.clear();
  run_tuned(&lines);
  int refused = 0;
  for (const std::string& line : lines) {
    if (line.find("stored schedule " + path + " refused: tuned for target") == std::string::npos) {
      continue;
    }
    ++refused;
    EXPECT_THAT(line, HasSubstr("device=sm_90, this cluster compiles for"));
    EXPECT_THAT(line, HasSubstr(device));
  }
  EXPECT_EQ(refused, 1) << testing::PrintToString(lines);
}

TEST(BrazeTuneTest, BadInputIsReportedNotCrashedOn) {
  const std::string dir = MakeTempDir("braze_tune_test_");
  std::ofstream(dir + "/broken.cluster") << "braze-cluster 1\nname c\ninput 0 f32 [4\n";
  std::string output;
  EXPECT_EQ(RunTool("--budget=5 --out=" + dir + "/out " + dir, &output), 1) << output;
  EXPECT_THAT(output, HasSubstr("skipping " + dir + "/broken.cluster"));
  // Unreadable entries (a folder named like a cluster, a symlink loop) are skipped naming
  // why, not read as an empty cluster text.
  const std::string unreadable = MakeTempDir("braze_tune_test_unreadable_");
  std::filesystem::create_directory(unreadable + "/folder.cluster");
  std::filesystem::create_symlink("loop.cluster", unreadable + "/loop.cluster");
  EXPECT_EQ(RunTool("--budget=5 --out=" + unreadable + "/out " + unreadable, &output), 1)
      << output;
  EXPECT_THAT(output, HasSubstr("folder.cluster: cannot read (Is a directory)"));
  EXPECT_THAT(output, HasSubstr("loop.cluster: cannot read (Too many levels of symbolic links)"));
  EXPECT_EQ(RunTool("--budget=-1 " + dir, &output), 2);
  EXPECT_THAT(output, HasSubstr("bad value in '--budget=-1'"));
  EXPECT_EQ(RunTool("--frobnicate " + dir, &output), 2);
  EXPECT_THAT(output, HasSubstr("unknown flag '--frobnicate'"));
  EXPECT_EQ(RunTool("", &output), 2);
  EXPECT_THAT(output, HasSubstr("no dump directory"));
  EXPECT_EQ(RunTool("--device=tpu " + dir, &output), 2);
  EXPECT_THAT(output, HasSubstr("bad value in '--device=tpu'"));
  // A mistyped path, or a folder without clusters, tunes nothing: an error, not success,
  // and no --out folder made.
  EXPECT_EQ(RunTool("--out=" + dir + "/out2 " + dir + "/no-such-dump", &output), 2);
  EXPECT_THAT(output, HasSubstr(dir + "/no-such-dump: No such file or directory"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out2"));
  const std::string empty = MakeTempDir("braze_tune_test_empty_");
  EXPECT_EQ(RunTool("--out=" + dir + "/out2 " + empty, &output), 2);
  EXPECT_THAT(output, HasSubstr(empty + ": no .cluster file in this directory"));
  EXPECT_EQ(RunTool("--force=maybe " + dir, &output), 2);
  EXPECT_THAT(output, HasSubstr("bad value in '--force=maybe'"));
  EXPECT_EQ(RunTool("--min_speedup=inf " + dir, &output), 2);
  EXPECT_THAT(output, HasSubstr("bad value in '--min_speedup=inf'"));
  if (!CheckCudaAvailable().ok()) {  // a GPU tuning run on a machine without the GPU
    EXPECT_EQ(RunTool("--device=jit:cuda " + dir, &output), 2);
    EXPECT_THAT(output, HasSubstr("--device=cuda:0 is not available: CUDA is not available"));
  }
}

// A cluster file may declare any shape: an input too large for this machine's memory is
// reported, naming the cluster and the input, not an abort from std::bad_alloc.
TEST(BrazeTuneTest, AnInputTooLargeForMemoryIsReportedNotAborted) {
  const Shape huge = {int64_t{1} << 46};  // 256 TiB of f32
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, huge, "x");
  Tensor y = Neg(x);
  ClusterSpec spec;
  spec.graph = &g;
  spec.name = "huge";
  spec.nodes = {y.node_id()};
  spec.inputs = {x};
  spec.input_types = {{DType::kF32, huge}};
  spec.outputs = {y};
  absl::StatusOr<std::string> text = ClusterToText(spec);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string dir = MakeTempDir("braze_tune_test_huge_");
  std::ofstream(dir + "/huge.cluster") << *text;
  std::string output;
  EXPECT_EQ(RunTool("--budget=5 --out=" + dir + "/out " + dir, &output), 1) << output;
  EXPECT_THAT(output, HasSubstr("huge: no memory for input 0 (f32[70368744177664])"));
}

}  // namespace
}  // namespace braze
