// The host staging pool behind pinned CUDA copies (device/staging_pool.h), with an
// injected allocator: size classes, reuse, the caps on cached blocks and on blocks in
// use, and a failing allocator's error (retried once after freeing the cache).
#include "device/staging_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "absl/status/status.h"

namespace braze {
namespace device {
namespace {

using ::testing::HasSubstr;

// malloc with a count of live blocks and an optional budget, standing in for the driver.
struct FakeHost {
  int64_t live = 0;
  int64_t calls = 0;
  int64_t budget = -1;  // bytes still allowed; -1: no limit
  std::set<void*> blocks;
  StagingPool::Allocator Allocator() {
    return {[this](size_t bytes) -> absl::StatusOr<void*> {
              ++calls;
              if (budget >= 0 && static_cast<int64_t>(bytes) > budget) {
                return absl::ResourceExhaustedError("cuMemHostAlloc: CUDA error 2 (fake)");
              }
              if (budget >= 0) budget -= static_cast<int64_t>(bytes);
              void* p = std::malloc(bytes);
              blocks.insert(p);
              live += static_cast<int64_t>(bytes);
              return p;
            },
            [this](void* p) {
              ASSERT_EQ(blocks.erase(p), 1u) << "freed a block the allocator never gave";
              std::free(p);
            }};
  }
};

TEST(MemoryStagingPool, SizeClassesArePowersOfTwoFromTheMinimum) {
  EXPECT_EQ(StagingPool::SizeClass(0), StagingPool::kMinBlockBytes);
  EXPECT_EQ(StagingPool::SizeClass(1), 4096u);
  EXPECT_EQ(StagingPool::SizeClass(4096), 4096u);
  EXPECT_EQ(StagingPool::SizeClass(4097), 8192u);
  EXPECT_EQ(StagingPool::SizeClass(128 * 784 * 4), 524288u);  // the train step's x
  EXPECT_EQ(StagingPool::SizeClass((size_t{1} << 30) + 3), size_t{1} << 31);
}

TEST(MemoryStagingPool, ReleasedBlocksServeTheSameClass) {
  FakeHost host;
  {
    StagingPool pool(host.Allocator(), 1 << 20);
    absl::StatusOr<StagingBlock> a = pool.Acquire(5000);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->capacity, 8192u);
    void* first = a->data;
    pool.Release(*a);
    EXPECT_EQ(pool.stats().cached_bytes, 8192);
    // 7000 bytes is the same class: the same block, no new allocation.
    absl::StatusOr<StagingBlock> b = pool.Acquire(7000);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->data, first);
    EXPECT_EQ(host.calls, 1);
    // Another class while b is out: a new block.
    absl::StatusOr<StagingBlock> c = pool.Acquire(100);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c->data, first);
    EXPECT_EQ(c->capacity, 4096u);
    EXPECT_EQ(host.calls, 2);
    StagingPool::Stats s = pool.stats();
    EXPECT_EQ(s.acquired, 3);
    EXPECT_EQ(s.reused, 1);
    EXPECT_EQ(s.allocated_bytes, 8192 + 4096);
    EXPECT_EQ(s.cached_bytes, 0);
    pool.Release(*b);
    pool.Release(*c);
  }
  EXPECT_TRUE(host.blocks.empty()) << "the pool's destruction frees its free blocks";
}

TEST(MemoryStagingPool, BlocksBeyondTheCacheCapAreFreedAtOnce) {
  FakeHost host;
  StagingPool pool(host.Allocator(), 8192);
  std::vector<StagingBlock> out;
  for (int i = 0; i < 3; ++i) out.push_back(*pool.Acquire(4096));
  for (const StagingBlock& b : out) pool.Release(b);
  EXPECT_EQ(pool.stats().cached_bytes, 8192);
  EXPECT_EQ(host.blocks.size(), 2u);
  EXPECT_EQ(pool.stats().allocated_bytes, 8192);
  pool.Trim();
  EXPECT_TRUE(host.blocks.empty());
  EXPECT_EQ(pool.stats().allocated_bytes, 0);
}

// The cap on blocks out at once (copies in flight): an Acquire that would pass it is
// refused, naming the cap, without allocating; a release makes room again. A failed
// allocation does not count as out.
TEST(MemoryStagingPool, BlocksInUseAreCappedAndRefusalsCounted) {
  FakeHost host;
  StagingPool pool(host.Allocator(), 1 << 20, 3 * 4096);
  StagingBlock a = *pool.Acquire(4096);
  EXPECT_TRUE(pool.Fits(8192));
  StagingBlock b = *pool.Acquire(5000);  // 8 KiB: exactly at the cap
  EXPECT_EQ(pool.stats().in_use_bytes, 3 * 4096);
  EXPECT_FALSE(pool.Fits(1));
  absl::StatusOr<StagingBlock> over = pool.Acquire(1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("over the cap of 12288 bytes"));
  EXPECT_EQ(host.calls, 2) << "a refused Acquire allocated";
  EXPECT_EQ(pool.stats().refused, 1);
  pool.Release(a);
  EXPECT_EQ(pool.stats().in_use_bytes, 8192);
  absl::StatusOr<StagingBlock> again = pool.Acquire(1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data, a.data) << "the released block serves the request";
  // A request larger than the cap never fits, whatever is out.
  pool.Release(*again);
  pool.Release(b);
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
  EXPECT_FALSE(pool.Fits(16384));
  EXPECT_FALSE(pool.Acquire(16384).ok());
  // A failed allocation leaves nothing counted out.
  host.budget = 0;
  pool.Trim();
  pool.set_max_in_use_bytes(1 << 20);
  EXPECT_FALSE(pool.Acquire(65536).ok());
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
}

TEST(MemoryStagingPool, AFailedAllocationFreesTheCacheRetriesAndNamesTheDriverError) {
  FakeHost host;
  host.budget = 8192 + 4096;
  StagingPool pool(host.Allocator(), 1 << 20);
  StagingBlock small = *pool.Acquire(4096);
  StagingBlock mid = *pool.Acquire(8192);
  pool.Release(small);
  pool.Release(mid);
  // 16 KiB is over the budget left (0): the cache is freed, but the retry fails too.
  absl::StatusOr<StagingBlock> big = pool.Acquire(16384);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("cuMemHostAlloc"));
  EXPECT_TRUE(host.blocks.empty()) << "the cached blocks were freed before the retry";
  // The freed blocks' memory is the budget again (the fake does not refund): a retry
  // that can succeed after trimming is the driver's case, modelled next.
  FakeHost limited;
  int failures = 1;
  StagingPool::Allocator flaky = limited.Allocator();
  auto inner = flaky.allocate;
  flaky.allocate = [&](size_t bytes) -> absl::StatusOr<void*> {
    if (failures-- > 0) return absl::ResourceExhaustedError("locked memory limit");
    return inner(bytes);
  };
  StagingPool retrying(flaky, 1 << 20);
  absl::StatusOr<StagingBlock> ok = retrying.Acquire(100);
  ASSERT_TRUE(ok.ok()) << ok.status();
  retrying.Release(*ok);
}

}  // namespace
}  // namespace device
}  // namespace braze
