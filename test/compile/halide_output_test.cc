// What Halide prints while scheduling and compiling (Adams2019's passes, lowering's
// "has not been scheduled" warnings) stays off stderr and reaches the log as info at
// verbosity 2 (device::HalideOutputCapture, wrapped around every compile); scheduler
// fall-through is logged at verbosity 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "ir/logging.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// The softmax of a classifier with its prediction and a column sum. With an even
// number of rows the safe default leaves updates of these reductions unscheduled, which
// lowering warns about (with some odd counts it does not: the choice is the shape's).
void BuildSoftmaxArgMax(Case& c, int64_t rows) {
  Tensor x = c.Input(DType::kF32, {rows, 10}, 3);
  Tensor p = Softmax(x);
  c.outputs = {p, ArgMax(p, 1), Sum(p, {0})};
}

// Records what reaches the log; restores the default sink and verbosity afterwards.
class HalideOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // With Halide's debug output asked for, nothing is captured, by design.
    for (const char* name : {"HL_DEBUG_CODEGEN", "HL_DEBUG_AUTOSCHEDULE"}) {
      const char* value = std::getenv(name);
      if (value != nullptr && std::atoi(value) > 0) GTEST_SKIP() << name << " is set";
    }
    SetLogSink([this](LogSeverity severity, int verbosity, std::string_view text) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(text);
      if (severity != LogSeverity::kInfo || verbosity != 2) ++not_info_2_;
    });
  }
  void TearDown() override {
    SetLogSink(nullptr);
    SetLogVerbosity(0);
  }

  // Compiles the case under `kind` and asks for its lowered statement (which lowers,
  // and so warns, again); the kernel's scheduler must be `kind`.
  void Compile(const Case& c, Scheduler kind) {
    auto kernel = CompileCluster(SpecOf(c), {kind, 0});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ((*kernel)->scheduler_used(), kind);
    EXPECT_THAT((*kernel)->lowered_stmt(), HasSubstr("produce"));
  }

  int Count(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const std::string& line : lines_) n += absl::StrContains(line, needle);
    return n;
  }

  std::mutex mu_;
  std::vector<std::string> lines_;
  int not_info_2_ = 0;
};

TEST_F(HalideOutputTest, NothingFromHalideAtTheDefaultVerbosity) {
  for (Scheduler kind : {Scheduler::kAdams2019, Scheduler::kSafeDefault}) {
    for (bool with_sink : {true, false}) {
      if (!with_sink) SetLogSink(nullptr);  // the default sink: stderr
      Case c;
      BuildSoftmaxArgMax(c, with_sink ? 30 : 32);
      testing::internal::CaptureStderr();
      Compile(c, kind);
      EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty()) << SchedulerName(kind);
    }
  }
  EXPECT_THAT(lines_, IsEmpty());
}

TEST_F(HalideOutputTest, VerbosityTwoSendsTheChatterToTheSink) {
  SetLogVerbosity(2);
  Case c;
  BuildSoftmaxArgMax(c, 33);
  testing::internal::CaptureStderr();
  Compile(c, Scheduler::kAdams2019);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  EXPECT_THAT(lines_, Contains(StartsWith("halide: generate_schedule for target=")));
  EXPECT_THAT(lines_, Contains(StartsWith("halide: Pass 0 of ")));
  EXPECT_THAT(lines_, Contains(StartsWith("halide: Cache (block) hits: ")));
  EXPECT_EQ(not_info_2_, 0);
  for (const std::string& line : lines_) EXPECT_THAT(line, StartsWith("halide: ")) << line;

  lines_.clear();
  Case d;
  BuildSoftmaxArgMax(d, 34);
  testing::internal::CaptureStderr();
  Compile(d, Scheduler::kSafeDefault);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  EXPECT_THAT(lines_, Contains(AllOf(StartsWith("halide: Warning: Update definition 0 of function"),
                                     HasSubstr("has not been scheduled"))));
  EXPECT_EQ(Count("generate_schedule"), 0);
  EXPECT_EQ(not_info_2_, 0);
}

TEST_F(HalideOutputTest, VerbosityOneIsNotEnough) {
  SetLogVerbosity(1);
  Case c;
  BuildSoftmaxArgMax(c, 36);
  testing::internal::CaptureStderr();
  Compile(c, Scheduler::kAdams2019);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  EXPECT_THAT(lines_, IsEmpty());
}

// Compiles on several threads at once share one capture of std::cerr: every compile's
// lines arrive, nothing reaches stderr, and std::cerr has its own buffer back after.
TEST_F(HalideOutputTest, ConcurrentCompilesShareTheCapture) {
  SetLogVerbosity(2);
  std::streambuf* const cerr_buffer = std::cerr.rdbuf();
  constexpr int kThreads = 4;
  std::vector<Case> cases(kThreads);
  for (int i = 0; i < kThreads; ++i) BuildSoftmaxArgMax(cases[i], 40 + 2 * i);
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Compile(cases[i], i % 2 == 0 ? Scheduler::kAdams2019 : Scheduler::kSafeDefault);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(testing::internal::GetCapturedStderr(), IsEmpty());
  EXPECT_EQ(Count("halide: generate_schedule for target="), kThreads / 2);
  EXPECT_EQ(Count("halide: Best cost: "), kThreads / 2);
  EXPECT_GE(Count("has not been scheduled"), kThreads / 2);
  EXPECT_EQ(std::cerr.rdbuf(), cerr_buffer);
  testing::internal::CaptureStderr();
  std::cerr << "after the compiles" << std::endl;
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "after the compiles\n");
}

// In a child process (plugins load once per process): with no autoscheduler plugins,
// Adams2019 -> Mullapudi2016 -> SafeDefault. Exits with the number of fall-through
// messages the log delivered, having printed them.
[[noreturn]] void CompileWithoutPlugins(int verbosity) {
  setenv("BRAZE_HALIDE_PLUGIN_DIR", "/nonexistent/plugins", 1);
  SetLogVerbosity(verbosity);
  int fall_throughs = 0;
  SetLogSink([&](LogSeverity severity, int v, std::string_view text) {
    if (severity == LogSeverity::kInfo && v == 1 &&
        text.find("falling through") != std::string_view::npos) {
      std::cerr << "[" << text << "]\n";
      ++fall_throughs;
    }
  });
  Case c;
  BuildSoftmaxArgMax(c, 5);
  auto kernel = CompileCluster(SpecOf(c), {Scheduler::kAdams2019, 0});
  if (!kernel.ok() || (*kernel)->scheduler_used() != Scheduler::kSafeDefault) std::exit(100);
  std::exit(fall_throughs);
}

TEST(HalideOutputDeathTest, SchedulerFallThroughIsLoggedAtVerbosityOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CompileWithoutPlugins(1), ::testing::ExitedWithCode(2),
              "\\[cluster_test: Adams2019: .*Failed to load.*; falling through to the next "
              "scheduler\\]\n\\[cluster_test: Mullapudi2016: .*falling through");
  EXPECT_EXIT(CompileWithoutPlugins(0), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
