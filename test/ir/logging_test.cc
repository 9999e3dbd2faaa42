// The log (braze/logging.h, ir/logging.h): what reaches a sink and with which severity
// and level, verbosity gating, the default stderr sink, and sink swaps while other
// threads log.
#include "ir/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace braze {
namespace {

using ::testing::ElementsAre;

struct Message {
  LogSeverity severity;
  int verbosity;
  std::string text;
};

// Installs a sink recording every message; restores the default sink and verbosity 0 at
// the end, so no test leaks its setup into the next.
class LogTest : public ::testing::Test {
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
  }

  std::vector<Message> messages_;  // the sink is never called twice at once
};

TEST_F(LogTest, SinkGetsWarningsAndErrorsWithTheirSeverity) {
  LogWarning("cluster 'c' failed to compile");
  LogError("timeline: disk full\n");  // a trailing newline is not the sink's business
  LogInfo(0, "summary\nsecond line");
  ASSERT_EQ(messages_.size(), 3u);
  EXPECT_EQ(messages_[0].severity, LogSeverity::kWarning);
  EXPECT_EQ(messages_[0].verbosity, 0);
  EXPECT_EQ(messages_[0].text, "cluster 'c' failed to compile");
  EXPECT_EQ(messages_[1].severity, LogSeverity::kError);
  EXPECT_EQ(messages_[1].text, "timeline: disk full");
  EXPECT_EQ(messages_[2].severity, LogSeverity::kInfo);
  EXPECT_EQ(messages_[2].text, "summary\nsecond line");
}

TEST_F(LogTest, VerbosityGatesInfoButNeverWarnings) {
  EXPECT_EQ(LogVerbosity(), 0);
  EXPECT_TRUE(VLogIsOn(0));
  EXPECT_FALSE(VLogIsOn(1));
  LogInfo(1, "hidden at 0");
  LogInfo(2, "hidden at 0");
  LogInfo(0, "shown at 0");

  SetLogVerbosity(2);
  EXPECT_EQ(LogVerbosity(), 2);
  EXPECT_TRUE(VLogIsOn(2));
  EXPECT_FALSE(VLogIsOn(3));
  LogInfo(2, "shown at 2");
  LogInfo(3, "hidden at 2");

  SetLogVerbosity(-1);  // no info at all, warnings still
  EXPECT_FALSE(VLogIsOn(0));
  LogInfo(0, "hidden at -1");
  LogWarning("warning at -1");

  std::vector<std::string> texts;
  for (const Message& m : messages_) texts.push_back(m.text);
  EXPECT_THAT(texts, ElementsAre("shown at 0", "shown at 2", "warning at -1"));
  EXPECT_EQ(messages_[1].verbosity, 2);  // the sink learns the message's level
}

TEST_F(LogTest, EmptySinkRestoresTheStderrDefault) {
  SetLogSink(nullptr);
  testing::internal::CaptureStderr();
  LogWarning("to stderr");
  LogError("bad");
  LogInfo(0, "two\nlines\n");
  LogInfo(1, "hidden");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "braze: warning: to stderr\nbraze: error: bad\nbraze: info: two\nlines\n");
  EXPECT_TRUE(messages_.empty());

  // A default-constructed sink is empty too; a real one takes over again.
  std::vector<std::string> seen;
  SetLogSink([&](LogSeverity, int, std::string_view text) { seen.emplace_back(text); });
  SetLogSink(LogSink());
  testing::internal::CaptureStderr();
  LogWarning("again");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "braze: warning: again\n");
  EXPECT_TRUE(seen.empty());
}

TEST(LogSeverityNameTest, Names) {
  EXPECT_STREQ(LogSeverityName(LogSeverity::kInfo), "info");
  EXPECT_STREQ(LogSeverityName(LogSeverity::kWarning), "warning");
  EXPECT_STREQ(LogSeverityName(LogSeverity::kError), "error");
}

// Threads log while the main thread keeps swapping sinks: every message reaches exactly
// one sink, exactly once, and no sink is ever running twice at once.
TEST(LogConcurrencyTest, SinkSwapsWhileThreadsLog) {
  constexpr int kThreads = 4;
  constexpr int kMessagesPerThread = 2000;
  std::atomic<int> in_sink{0};
  std::atomic<bool> overlapped{false};
  auto make_sink = [&](std::atomic<int>* count) {
    return [&, count](LogSeverity severity, int, std::string_view text) {
      if (in_sink.fetch_add(1) != 0) overlapped = true;
      if (severity == LogSeverity::kWarning && text == "w") count->fetch_add(1);
      in_sink.fetch_sub(1);
    };
  };
  std::atomic<int> a{0}, b{0};
  SetLogSink(make_sink(&a));
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kMessagesPerThread; ++i) LogWarning("w");
      running.fetch_sub(1);
    });
  }
  for (int swaps = 0; running.load() > 0; ++swaps) SetLogSink(make_sink(swaps % 2 ? &a : &b));
  for (std::thread& t : threads) t.join();
  SetLogSink(nullptr);
  EXPECT_EQ(a.load() + b.load(), kThreads * kMessagesPerThread);
  EXPECT_FALSE(overlapped.load());
}

}  // namespace
}  // namespace braze
