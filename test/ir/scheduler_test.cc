// The scheduler vocabulary (braze/scheduler.h): one list, its names, parsing.
#include "braze/scheduler.h"

#include <gtest/gtest.h>

#include <string>

namespace braze {
namespace {

TEST(Scheduler, EveryNameParsesBackToItsScheduler) {
  int count = 0;
#define V(kind, name)                                       \
  EXPECT_STREQ(SchedulerName(Scheduler::kind), name);       \
  EXPECT_EQ(ParseScheduler(name), Scheduler::kind) << name; \
  ++count;
#include "braze/schedulers.def"
#undef V
  EXPECT_EQ(count, 8);
}

TEST(Scheduler, ParsingIgnoresCaseAndRefusesUnknownNames) {
  EXPECT_EQ(ParseScheduler("safedefault"), Scheduler::kSafeDefault);
  EXPECT_EQ(ParseScheduler("ADAMS2019"), Scheduler::kAdams2019);
  EXPECT_EQ(ParseScheduler("Heuristic (Serial)"), Scheduler::kGpuSerial);
  EXPECT_FALSE(ParseScheduler("adams").has_value());
  EXPECT_FALSE(ParseScheduler("").has_value());
}

TEST(Scheduler, OnlyTheHeuristicPlansAreGpuOnly) {
  EXPECT_TRUE(IsGpuHeuristic(Scheduler::kGpuFused));
  EXPECT_TRUE(IsGpuHeuristic(Scheduler::kGpuSeparate));
  EXPECT_TRUE(IsGpuHeuristic(Scheduler::kGpuSerial));
  EXPECT_FALSE(IsGpuHeuristic(Scheduler::kLi2018));
  EXPECT_FALSE(IsGpuHeuristic(Scheduler::kAuto));
}

}  // namespace
}  // namespace braze
