// braze-fuzz as a process: seeds that pass, and --seed_timeout reporting a seed that
// runs too long as a hang (with the command that reproduces it) and going on with the
// next seeds instead of waiting for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/run_command.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

// Runs the tool, without the disk cache (a kernel loaded from it could let a seed finish
// within the timeout); returns its exit status and stdout + stderr.
int RunFuzz(const std::string& args, std::string* output) {
  return testing_util::RunCommand(
      "BRAZE_CACHE_DIR=off " + std::string(BRAZE_FUZZ_PATH) + " " + args, output);
}

TEST(BrazeFuzz, SeedsPass) {
  std::string out;
  EXPECT_EQ(RunFuzz("--seeds=100:103", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("braze-fuzz: 3 passed, 0 failed")) << out;
}

// The log names every setting: the options (--threads, --gemm), the disk cache as set and
// as resolved, BRAZE_FLAGS; at the start and again in the summary.
TEST(BrazeFuzz, TheLogNamesItsSettings) {
  std::string out;
  EXPECT_EQ(RunFuzz("--seeds=104:106 --threads=1 --gemm=0.5 --specials=0.25", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("braze-fuzz: settings: seeds=104:106 jobs=1 ")) << out;
  for (const char* setting : {" threads=1 ", " gemm=0.5 ", " specials=0.25 ", " large=0 ",
                              " BRAZE_CACHE_DIR=off cache=off ", " BRAZE_FLAGS="}) {
    EXPECT_THAT(out, HasSubstr(setting)) << out;
  }
  EXPECT_NE(out.find("braze-fuzz: settings: "), out.rfind("braze-fuzz: settings: ")) << out;
  EXPECT_THAT(out, HasSubstr("braze-fuzz: 2 passed, 0 failed")) << out;
  EXPECT_EQ(RunFuzz("--seeds=104 --threads=-1", &out), 2) << out;
}

// A flag it cannot take is refused by name, before any seed runs: a switch given a value
// (--coverage=false read as on), a range of three fields, a negative or infinite budget,
// an empty range.
TEST(BrazeFuzz, BadFlagsAreRefusedByName) {
  std::string out;
  for (const char* bad : {"--coverage=false", "--verbose=0", "--seeds=1:3:9", "--budget=-600",
                          "--budget=inf", "--seed_timeout=nan", "--jobs=0", "--frobnicate"}) {
    EXPECT_EQ(RunFuzz(absl::StrCat("--seeds=1:2 ", bad), &out), 2) << bad << "\n" << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("braze-fuzz: bad argument: ", bad))) << out;
  }
  EXPECT_EQ(RunFuzz("--seeds=5:5", &out), 2) << out;
  EXPECT_THAT(out, HasSubstr("--seeds: the range 5:5 is empty")) << out;
}

// --coverage runs nothing and prints the table; --all_families turns every family on
// (the settings line says so) and a hang's reproduce line repeats it first.
TEST(BrazeFuzz, CoverageOfAllFamilies) {
  std::string out;
  EXPECT_EQ(RunFuzz("--coverage --all_families --seeds=1:41", &out), 0) << out;
  for (const char* line : {"coverage of 40 programs", "op/Conv2D ", "cast/i32 -> bf16 ",
                           "op/AllReduce ", " edges=1 family_share=0.333333 ", " max_ops=24 "}) {
    EXPECT_THAT(out, HasSubstr(line)) << out;
  }
  EXPECT_THAT(out, ::testing::Not(HasSubstr("graphs run"))) << out;
  EXPECT_EQ(RunFuzz("--seeds=1 --all_families --attention=0 --seed_timeout=0.01", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("reproduce: braze-fuzz --seeds=1 --scheduler=random --verbose "
                             "--all_families --max_ops=24 "))
      << out;
  EXPECT_THAT(out, HasSubstr(" --attention=0 ")) << out;
}

// A timeout far below a seed's compile time: every seed is killed and reported, with the
// CPU time its shard used in it and the load (to tell a starved seed from a deadlock),
// and the run still ends, with exit status 1.
TEST(BrazeFuzz, ASeedRunningPastTheTimeoutIsReportedAsAHang) {
  std::string out;
  EXPECT_EQ(RunFuzz("--seeds=101:103 --seed_timeout=0.05", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("==== seed 101: hang, the shard running it was killed after "
                             "--seed_timeout=0.05 s, "))
      << out;
  EXPECT_THAT(out, ::testing::ContainsRegex(
                       "seed 101: hang, .* [0-9.]+ s of CPU in it \\(every thread\\), load average "
                       "[0-9.]+\n"))
      << out;
  EXPECT_THAT(out, HasSubstr("reproduce: braze-fuzz --seeds=101 ")) << out;
  EXPECT_THAT(out, HasSubstr("==== seed 102: hang")) << out;
  EXPECT_THAT(out, HasSubstr("braze-fuzz: 0 passed, 2 failed")) << out;
}

}  // namespace
}  // namespace braze
