// StagingPool: see staging_pool.h.
#include "device/staging_pool.h"

#include "absl/strings/str_cat.h"

namespace braze {
namespace device {

StagingPool::StagingPool(Allocator allocator, size_t max_cached_bytes, size_t max_in_use_bytes)
    : allocator_(std::move(allocator)),
      max_cached_bytes_(max_cached_bytes),
      max_in_use_bytes_(max_in_use_bytes) {}

StagingPool::~StagingPool() { Trim(); }

size_t StagingPool::SizeClass(size_t bytes) {
  size_t c = kMinBlockBytes;
  while (c < bytes) c <<= 1;
  return c;
}

bool StagingPool::FitsLocked(size_t size) const {
  return size <= max_in_use_bytes_ &&
         static_cast<size_t>(stats_.in_use_bytes) <= max_in_use_bytes_ - size;
}

bool StagingPool::Fits(size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FitsLocked(SizeClass(bytes));
}

void StagingPool::set_max_in_use_bytes(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_in_use_bytes_ = bytes;
}

size_t StagingPool::max_in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_in_use_bytes_;
}

absl::StatusOr<StagingBlock> StagingPool::Acquire(size_t bytes) {
  const size_t size = SizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!FitsLocked(size)) {
      ++stats_.refused;
      return absl::ResourceExhaustedError(absl::StrCat(
          "a staging block of ", size, " bytes would put the blocks in use (", stats_.in_use_bytes,
          " bytes) over the cap of ", max_in_use_bytes_, " bytes"));
    }
    // Counted now, so that concurrent callers cannot together pass the cap while one
    // allocates outside the lock.
    stats_.in_use_bytes += static_cast<int64_t>(size);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* data = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(size);
      ++stats_.acquired;
      ++stats_.reused;
      return StagingBlock{data, size};
    }
  }
  // Allocated outside the lock: pinning can take milliseconds.
  absl::StatusOr<void*> data = allocator_.allocate(size);
  if (!data.ok()) {
    Trim();  // locked memory is often capped (RLIMIT_MEMLOCK): make room and retry
    data = allocator_.allocate(size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!data.ok()) {
    stats_.in_use_bytes -= static_cast<int64_t>(size);
    return data.status();
  }
  ++stats_.acquired;
  stats_.allocated_bytes += static_cast<int64_t>(size);
  return StagingBlock{*data, size};
}

void StagingPool::Release(StagingBlock block) {
  if (block.data == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.in_use_bytes -= static_cast<int64_t>(block.capacity);
    if (stats_.cached_bytes + static_cast<int64_t>(block.capacity) <=
        static_cast<int64_t>(max_cached_bytes_)) {
      free_[block.capacity].push_back(block.data);
      stats_.cached_bytes += static_cast<int64_t>(block.capacity);
      return;
    }
    stats_.allocated_bytes -= static_cast<int64_t>(block.capacity);
  }
  allocator_.free(block.data);
}

void StagingPool::FreeAllLocked(std::vector<void*>* out) {
  for (auto& [size, blocks] : free_) {
    stats_.allocated_bytes -= static_cast<int64_t>(size * blocks.size());
    out->insert(out->end(), blocks.begin(), blocks.end());
  }
  free_.clear();
  stats_.cached_bytes = 0;
}

void StagingPool::Trim() {
  std::vector<void*> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    FreeAllLocked(&to_free);
  }
  for (void* p : to_free) allocator_.free(p);
}

StagingPool::Stats StagingPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace device
}  // namespace braze
