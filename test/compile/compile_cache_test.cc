// The compile cache on its own: one compile per key under concurrent callers, failures
// remembered, LRU eviction, counters.
#include "compile/compile_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <string>
#include <thread>

namespace braze {
namespace {

class FakeKernel : public CompiledKernel {
 public:
  absl::Status Launch(absl::Span<const KernelArg>, absl::Span<const KernelArg>) override {
    return absl::OkStatus();
  }
  const std::vector<TensorType>& output_types() const override { return types_; }
  Scheduler scheduler_used() const override { return Scheduler::kSafeDefault; }
  const std::vector<std::string>& scheduler_failures() const override { return failures_; }
  double compile_ms() const override { return 0; }
  std::string schedule_text() const override { return ""; }

 private:
  std::vector<TensorType> types_;
  std::vector<std::string> failures_;
};

TEST(CompileCache, ConcurrentCallersShareOneCompile) {
  CompileCache cache;
  std::atomic<int> compiles{0};
  auto compile = [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
    ++compiles;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a slow compile
    return std::unique_ptr<CompiledKernel>(new FakeKernel());
  };
  std::vector<std::thread> threads;
  std::vector<const SharedKernel*> got(8);
  std::atomic<int> hits{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = cache.GetOrCompile("k", compile);
      ASSERT_TRUE(r.kernel.ok());
      got[i] = r.kernel->get();
      hits += r.hit;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(hits.load(), 7);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(got[i], got[0]);
  EXPECT_EQ(cache.counters().misses, 1);
  EXPECT_EQ(cache.counters().hits, 7);
}

// A compile that throws makes its key an error, not an entry others wait for forever:
// the second caller returns (with the error) instead of hanging.
TEST(CompileCache, ACompileThatThrowsIsAnErrorAndItsKeyStaysUsable) {
  CompileCache cache;
  auto throwing = []() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
    throw std::bad_alloc();
  };
  auto first = cache.GetOrCompile("k", throwing);
  ASSERT_FALSE(first.kernel.ok());
  EXPECT_THAT(std::string(first.kernel.status().message()), ::testing::HasSubstr("threw"));
  auto second = cache.GetOrCompile("k", throwing);
  EXPECT_TRUE(second.hit);
  // The remembered error, said to be an earlier compile's (its names are not the caller's).
  EXPECT_EQ(second.kernel.status().code(), first.kernel.status().code());
  EXPECT_THAT(std::string(second.kernel.status().message()),
              ::testing::HasSubstr(std::string("failed to compile earlier (its node names are in "
                                               "the message): ") +
                                   std::string(first.kernel.status().message())));
  auto other = cache.GetOrCompile(
      "j", []() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> { throw 42; });
  EXPECT_FALSE(other.kernel.ok());
}

TEST(CompileCache, FailuresAreRememberedNotRetried) {
  CompileCache cache;
  int calls = 0;
  auto failing = [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
    ++calls;
    return absl::InternalError("Halide said no");
  };
  auto r1 = cache.GetOrCompile("bad", failing);
  auto r2 = cache.GetOrCompile("bad", failing);
  EXPECT_FALSE(r1.kernel.ok());
  EXPECT_FALSE(r2.kernel.ok());
  EXPECT_TRUE(r2.hit);
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(std::string(r2.kernel.status().message()), ::testing::HasSubstr("Halide said no"));
}

TEST(CompileCache, EvictsLeastRecentlyUsed) {
  CompileCache cache(2);
  int calls = 0;
  auto compile = [&]() -> absl::StatusOr<std::unique_ptr<CompiledKernel>> {
    ++calls;
    return std::unique_ptr<CompiledKernel>(new FakeKernel());
  };
  auto a = cache.GetOrCompile("a", compile);
  cache.GetOrCompile("b", compile);
  cache.GetOrCompile("a", compile);  // a is now the most recent
  cache.GetOrCompile("c", compile);  // evicts b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(cache.GetOrCompile("a", compile).hit);
  EXPECT_FALSE(cache.GetOrCompile("b", compile).hit);  // recompiled
  EXPECT_EQ(calls, 4);
  EXPECT_GE(cache.counters().evictions, 2);
  // A kernel in use survives eviction through its shared_ptr.
  EXPECT_NE(a.kernel->get(), nullptr);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace braze
