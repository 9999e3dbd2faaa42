// A pool of host staging buffers for copies between the host and a GPU: page-locked
// ("pinned") memory on CUDA (cuda_backend.cc), which the driver's DMA engine reads and
// writes directly. A copy from pageable memory goes through the driver's own small
// pinned buffers instead, a chunk at a time, and cuMemcpyHtoD from pageable memory first
// waits for all work queued on the stream; from pinned memory an async copy returns at
// once and runs in order with the kernels. Pinning is slow (a system call that locks
// pages, tens of microseconds and more per MiB), so blocks are kept and reused.
//
// Blocks come in power-of-two size classes of at least kMinBlockBytes, so a copy of any
// size takes a block of its class and a released block serves every later request of
// the same class. A block is out only while a copy uses it (the CUDA backend releases it
// once the copy is done), so the pinned memory follows the copies in flight, not the
// tensors alive. Two caps bound it: at most `max_in_use_bytes` out at once (beyond that
// Acquire refuses, and the caller copies from pageable memory: Fits() says so first),
// and up to `max_cached_bytes` of free blocks kept; a block released beyond that is
// freed at once, and Trim() (or the pool's destruction) frees them all.
// The memory itself comes from an injected Allocator: the CUDA driver on a GPU, plain
// malloc in tests. Thread-safe.
//
// No CUDA, Halide or device header here: the CUDA backend owns one pool, the tests their
// own.
#ifndef BRAZE_DEVICE_STAGING_POOL_H_
#define BRAZE_DEVICE_STAGING_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace braze {
namespace device {

struct StagingBlock {
  void* data = nullptr;
  size_t capacity = 0;  // the size class: at least the bytes asked for
};

class StagingPool {
 public:
  static constexpr size_t kMinBlockBytes = 4096;

  struct Allocator {
    // Returns `bytes` of host memory or the reason it could not (the driver's error).
    std::function<absl::StatusOr<void*>(size_t bytes)> allocate;
    std::function<void(void* data)> free;
  };
  struct Stats {
    int64_t acquired = 0;         // Acquire calls that returned a block
    int64_t reused = 0;           // of those, served from a free block
    int64_t allocated_bytes = 0;  // held by the pool's blocks, free or in use
    int64_t cached_bytes = 0;     // free blocks held now
    int64_t in_use_bytes = 0;     // blocks out now (allocated_bytes - cached_bytes)
    int64_t refused = 0;          // Acquire calls refused by the in-use cap
  };

  StagingPool(Allocator allocator, size_t max_cached_bytes, size_t max_in_use_bytes = SIZE_MAX);
  ~StagingPool();  // frees the free blocks; blocks still out are the holders' to return
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // The size class of a request: the next power of two, at least kMinBlockBytes.
  static size_t SizeClass(size_t bytes);

  // A block of at least `bytes` bytes: a free one of its class, else a new allocation.
  // ResourceExhausted naming the cap when the blocks out would exceed max_in_use_bytes;
  // the allocator's error when it fails (after freeing the cached blocks and trying
  // again, since a failed pin is often a limit on locked memory).
  absl::StatusOr<StagingBlock> Acquire(size_t bytes);
  // Whether a block for `bytes` would be within the in-use cap now.
  bool Fits(size_t bytes) const;
  // The in-use cap, changed for tests and A/B runs; blocks out above a lowered cap stay
  // out until released.
  void set_max_in_use_bytes(size_t bytes);
  size_t max_in_use_bytes() const;
  // Gives `block` (from Acquire, no longer read or written by any copy) back.
  void Release(StagingBlock block);
  // Frees every free block.
  void Trim();
  Stats stats() const;

 private:
  void FreeAllLocked(std::vector<void*>* out);

  bool FitsLocked(size_t size) const;

  Allocator allocator_;
  const size_t max_cached_bytes_;
  size_t max_in_use_bytes_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> free blocks
  Stats stats_;
};

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_STAGING_POOL_H_
