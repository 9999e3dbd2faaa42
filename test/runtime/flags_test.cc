// BRAZE_FLAGS: parsing, and errors reaching the user through Session::Run. The process
// reads the variable once, so the environment cases run in a child process (a
// "threadsafe" death test re-executes this binary, which then reads BRAZE_FLAGS afresh).
#include "runtime/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "braze/timeline.h"

namespace braze {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(Flags, ParsesEveryFlag) {
  auto flags =
      ParseBrazeFlags("--dump_to=/tmp/braze dump --clustering_debug\t--timeline=/tmp/t.json\n");
  // Whitespace separates flags, so "dump" is a stray token: values cannot hold spaces.
  EXPECT_FALSE(flags.ok());

  flags = ParseBrazeFlags(
      "  --dump_to=/tmp/d --clustering_debug\t--timeline=/tmp/t.json\n --v=2 --verify "
      "--log_compiles");
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->dump_to, "/tmp/d");
  EXPECT_TRUE(flags->clustering_debug);
  EXPECT_EQ(flags->timeline, "/tmp/t.json");
  EXPECT_EQ(flags->v, 2);
  EXPECT_TRUE(flags->verify);
  EXPECT_TRUE(flags->log_compiles);
}

TEST(Flags, EmptyIsDefaults) {
  for (const char* text : {"", "   ", "\t\n"}) {
    auto flags = ParseBrazeFlags(text);
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_EQ(flags->dump_to, "");
    EXPECT_FALSE(flags->clustering_debug);
    EXPECT_EQ(flags->timeline, "");
    EXPECT_FALSE(flags->v.has_value());  // the log verbosity is left alone
  }
}

TEST(Flags, BooleanFormsAndLastValueWins) {
  EXPECT_TRUE(ParseBrazeFlags("--clustering_debug=true")->clustering_debug);
  EXPECT_TRUE(ParseBrazeFlags("--clustering_debug=1")->clustering_debug);
  EXPECT_FALSE(ParseBrazeFlags("--clustering_debug=false")->clustering_debug);
  EXPECT_FALSE(ParseBrazeFlags("--clustering_debug --clustering_debug=0")->clustering_debug);
  EXPECT_EQ(ParseBrazeFlags("--dump_to=a --dump_to=b")->dump_to, "b");
  // '=' inside a value is part of the value.
  EXPECT_EQ(ParseBrazeFlags("--timeline=a=b.json")->timeline, "a=b.json");
  EXPECT_EQ(ParseBrazeFlags("--v=0")->v, 0);
  EXPECT_EQ(ParseBrazeFlags("--v=3 --v=1")->v, 1);
  EXPECT_FALSE(ParseBrazeFlags("--log_compiles --log_compiles=false")->log_compiles);
  EXPECT_TRUE(ParseBrazeFlags("")->cpu_gemm_library);
  EXPECT_FALSE(ParseBrazeFlags("--cpu_gemm_library=false")->cpu_gemm_library);
  EXPECT_FALSE(ParseBrazeFlags("--cpu_gemm_library=maybe").ok());
  EXPECT_TRUE(ParseBrazeFlags("")->cpu_conv_winograd);
  EXPECT_FALSE(ParseBrazeFlags("--cpu_conv_winograd=false")->cpu_conv_winograd);
  EXPECT_FALSE(ParseBrazeFlags("--cpu_conv_winograd=maybe").ok());
  EXPECT_EQ(ParseBrazeFlags("")->cpu_gemm_min_work, -1);
  EXPECT_EQ(ParseBrazeFlags("--cpu_gemm_min_work=1")->cpu_gemm_min_work, 1);
  EXPECT_FALSE(ParseBrazeFlags("--cpu_gemm_min_work=0").ok());
  EXPECT_FALSE(ParseBrazeFlags("--cpu_gemm_min_work").ok());
}

TEST(Flags, UnknownFlagListsTheKnownOnes) {
  auto flags = ParseBrazeFlags("--dump_to=/tmp/d --xla_hlo_profile");
  ASSERT_FALSE(flags.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(flags.status()));
  EXPECT_THAT(std::string(flags.status().message()),
              AllOf(HasSubstr("BRAZE_FLAGS"), HasSubstr("unknown flag '--xla_hlo_profile'"),
                    HasSubstr("--dump_to=DIR"), HasSubstr("--clustering_debug"),
                    HasSubstr("--timeline=FILE"), HasSubstr("--v=N")));
}

TEST(Flags, MalformedFlagsAreErrors) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"--dump_to", "--dump_to needs a value"},
      {"--dump_to=", "--dump_to needs a value"},
      {"--timeline", "--timeline needs a value"},
      {"--clustering_debug=yes", "takes true, false, 1 or 0, not 'yes'"},
      {"--v", "--v needs a value (--v=N)"},
      {"--v=", "--v needs a value (--v=N)"},
      {"--v=-1", "--v takes a non-negative integer, not '-1'"},
      {"--v=two", "--v takes a non-negative integer, not 'two'"},
      {"--v=2x", "--v takes a non-negative integer, not '2x'"},
      {"--verbose=1", "unknown flag '--verbose'"},
      {"dump_to=/tmp", "malformed flag 'dump_to=/tmp'"},
      {"-dump_to=/tmp", "malformed flag '-dump_to=/tmp'"},
      {"--", "malformed flag '--'"},
      {"--=x", "unknown flag '--'"},
  };
  for (const auto& c : cases) {
    auto flags = ParseBrazeFlags(c.text);
    ASSERT_FALSE(flags.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(flags.status())) << c.text;
    EXPECT_THAT(std::string(flags.status().message()),
                AllOf(HasSubstr(c.why), HasSubstr("known flags:")))
        << c.text;
  }
}

// A one-op reference session: it fails only if the flags make it fail.
absl::Status RunTinyGraph() {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {2}, "x");
  Tensor y = Exp(x);
  SessionOptions options;
  options.reference_only = true;
  Session session(g, options);
  return session.Run({{x, HostTensor::RandomUniform(DType::kF32, {2}, 1)}}, {y}).status();
}

TEST(Flags, ErrorSetForTestingComesBackFromEveryRun) {
  SetBrazeFlagsForTesting(absl::InvalidArgumentError("BRAZE_FLAGS: injected"));
  for (int i = 0; i < 2; ++i) {
    absl::Status s = RunTinyGraph();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("injected"));
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
  EXPECT_TRUE(RunTinyGraph().ok());
}

// Runs the tiny graph in a child process whose BRAZE_FLAGS is `value`; the child prints
// the Run's status to stderr and exits 0 when it is InvalidArgument.
class EnvFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (const char* old = std::getenv("BRAZE_FLAGS")) saved_ = old;
  }
  void TearDown() override {
    if (saved_) {
      setenv("BRAZE_FLAGS", saved_->c_str(), 1);
    } else {
      unsetenv("BRAZE_FLAGS");
    }
  }
  static void RunAndExit() {
    absl::Status first = RunTinyGraph();
    absl::Status second = RunTinyGraph();
    std::fprintf(stderr, "first: %s\nsecond: %s\n", first.ToString().c_str(),
                 second.ToString().c_str());
    std::exit(absl::IsInvalidArgument(first) && absl::IsInvalidArgument(second) ? 0 : 1);
  }

 private:
  std::optional<std::string> saved_;
};

TEST_F(EnvFlagsTest, UnknownFlagInEnvironmentFailsEveryRun) {
  setenv("BRAZE_FLAGS", "--clustering_debug --bogus=1", 1);
  EXPECT_EXIT(RunAndExit(), ::testing::ExitedWithCode(0),
              "first: INVALID_ARGUMENT: BRAZE_FLAGS: unknown flag '--bogus'; known flags: "
              "--dump_to=DIR.*\nsecond: INVALID_ARGUMENT: BRAZE_FLAGS: unknown flag");
}

TEST_F(EnvFlagsTest, UnopenableTimelineInEnvironmentFailsRun) {
  setenv("BRAZE_FLAGS", "--timeline=/nonexistent_braze_dir/trace.json", 1);
  EXPECT_EXIT(RunAndExit(), ::testing::ExitedWithCode(0),
              "first: INVALID_ARGUMENT: BRAZE_FLAGS --timeline: cannot open timeline file "
              "'/nonexistent_braze_dir/trace.json'");
}

// A --schedule_dirs entry that is no directory was skipped: its schedules were never used.
TEST_F(EnvFlagsTest, MissingScheduleDirInEnvironmentFailsEveryRun) {
  setenv("BRAZE_FLAGS", "--schedule_dirs=/tmp:/nonexistent_braze_schedules", 1);
  EXPECT_EXIT(RunAndExit(), ::testing::ExitedWithCode(0),
              "first: INVALID_ARGUMENT: BRAZE_FLAGS --schedule_dirs: "
              "'/nonexistent_braze_schedules': No such file or directory.*\n"
              "second: INVALID_ARGUMENT: BRAZE_FLAGS --schedule_dirs");
}

// --v applies when the flags are read (at the first Run), over the program's setting.
TEST_F(EnvFlagsTest, VerbosityFromEnvironment) {
  setenv("BRAZE_FLAGS", "--v=2", 1);
  EXPECT_EXIT(
      {
        SetLogVerbosity(1);
        const int before = LogVerbosity();
        absl::Status s = RunTinyGraph();
        std::fprintf(stderr, "verbosity %d then %d, %s\n", before, LogVerbosity(),
                     s.ToString().c_str());
        std::exit(s.ok() && LogVerbosity() == 2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "verbosity 1 then 2, OK");
  setenv("BRAZE_FLAGS", "--v=-3", 1);  // rejected like any bad flag, verbosity untouched
  EXPECT_EXIT(
      {
        absl::Status s = RunTinyGraph();
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        std::exit(absl::IsInvalidArgument(s) && LogVerbosity() == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "--v takes a non-negative integer, not '-3'");
}

// Under mpirun every rank reads one BRAZE_FLAGS: each writes its own timeline and dumps
// (one file written by all was invalid JSON; each rank's session_0 dumps overwrote the
// others'). Nothing changes in a world of one.
TEST(Flags, EachRankOfAnMpiJobGetsItsOwnTimelineAndDumps) {
  BrazeFlags flags;
  flags.timeline = "/tmp/runs/trace.json";
  flags.dump_to = "/tmp/runs/dumps";
  BrazeFlags one = flags;
  ApplyRankToPaths(0, 1, &one);
  EXPECT_EQ(one.timeline, "/tmp/runs/trace.json");
  EXPECT_EQ(one.dump_to, "/tmp/runs/dumps");
  ApplyRankToPaths(1, 0, &one);  // no launcher
  EXPECT_EQ(one.timeline, "/tmp/runs/trace.json");
  BrazeFlags r1 = flags;
  ApplyRankToPaths(1, 2, &r1);
  EXPECT_EQ(r1.timeline, "/tmp/runs/trace.rank1.json");
  EXPECT_EQ(r1.dump_to, "/tmp/runs/dumps/rank1");
  BrazeFlags r0 = flags;
  r0.timeline = "trace";  // no extension, no folder
  ApplyRankToPaths(0, 4, &r0);
  EXPECT_EQ(r0.timeline, "trace.rank0");
  EXPECT_EQ(r0.dump_to, "/tmp/runs/dumps/rank0");
  BrazeFlags none;
  ApplyRankToPaths(3, 4, &none);
  EXPECT_EQ(none.timeline, "");
  EXPECT_EQ(none.dump_to, "");
}

// The same from the environment: a child that an MPI launcher would have made rank 1 of
// 2 (Open MPI's variables) writes trace.rank1.json and dumps into rank1/.
TEST_F(EnvFlagsTest, RanksOfAnMpiLaunchWriteTheirOwnFiles) {
  // One name for the parent and the child (which runs this body again, in its own pid).
  const std::string dir = ::testing::TempDir() + "braze_flags_ranks";
  std::filesystem::remove_all(dir);
  setenv("BRAZE_FLAGS", ("--timeline=" + dir + "/trace.json --dump_to=" + dir).c_str(), 1);
  EXPECT_EXIT(
      {
        setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
        setenv("OMPI_COMM_WORLD_RANK", "1", 1);
        std::filesystem::create_directories(dir);
        absl::Status s = RunTinyGraph();
        StopTimeline();
        const bool trace = std::filesystem::exists(dir + "/trace.rank1.json");
        const bool dumps = std::filesystem::is_directory(dir + "/rank1") &&
                           !std::filesystem::is_empty(dir + "/rank1");
        std::fprintf(stderr, "%s trace %d dumps %d timeline %s\n", s.ToString().c_str(), trace,
                     dumps, GetBrazeFlags().timeline.c_str());
        std::exit(s.ok() && trace && dumps ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "OK trace 1 dumps 1 timeline .*/trace.rank1.json");
  std::filesystem::remove_all(dir);
}

TEST_F(EnvFlagsTest, GoodEnvironmentRuns) {
  setenv("BRAZE_FLAGS", "--clustering_debug", 1);
  EXPECT_EXIT(
      {
        absl::Status s = RunTinyGraph();
        std::fprintf(stderr, "status: %s\n", s.ToString().c_str());
        std::exit(s.ok() && GetBrazeFlags().clustering_debug ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "clustering:\nmark_for_compilation: .*status: OK");
}

}  // namespace
}  // namespace braze
