// The pipeline buffer cache; see jit_memory.h.
#include "device/jit_memory.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "Halide.h"

namespace braze {
namespace device {
namespace {

// Smaller blocks go straight to malloc: glibc's own free lists serve those well.
constexpr size_t kMinCachedBytes = size_t{64} << 10;
// Free blocks kept at most; beyond it a freed block goes back to the system.
constexpr size_t kMaxCachedBytes = size_t{1} << 30;
// Halide asks for 32-byte (64 with AVX-512) aligned memory; a cache line is plenty.
constexpr size_t kAlignment = 128;
constexpr size_t kPage = 4096;

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;      // block size -> block
  std::unordered_map<void*, size_t> block_size;  // every live cached-size block
  size_t cached_bytes = 0;
  int64_t allocations = 0;
  int64_t reused = 0;
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // never destroyed: pipelines may run at exit
  return *cache;
}

void* CachedMalloc(size_t size) {
  if (size < kMinCachedBytes) {
    return std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
  }
  const size_t rounded = (size + kPage - 1) / kPage * kPage;
  Cache& c = TheCache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    ++c.allocations;
    // The smallest free block that fits, if it wastes at most a quarter of itself.
    auto it = c.free_blocks.lower_bound(rounded);
    if (it != c.free_blocks.end() && it->first - rounded <= it->first / 4) {
      void* p = it->second;
      c.cached_bytes -= it->first;
      c.free_blocks.erase(it);
      ++c.reused;
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return nullptr;  // Halide reports the failed allocation
  std::lock_guard<std::mutex> lock(c.mu);
  c.block_size[p] = rounded;
  return p;
}

void CachedFree(void* p) {
  if (p == nullptr) return;
  Cache& c = TheCache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.block_size.find(p);
    if (it != c.block_size.end() && c.cached_bytes + it->second <= kMaxCachedBytes) {
      c.free_blocks.emplace(it->second, p);
      c.cached_bytes += it->second;
      return;
    }
    if (it != c.block_size.end()) c.block_size.erase(it);
  }
  std::free(p);
}

void* Malloc(Halide::JITUserContext*, size_t size) { return CachedMalloc(size); }
void Free(Halide::JITUserContext*, void* p) { CachedFree(p); }

}  // namespace

void* BufferCacheMalloc(void* /*user_context*/, size_t size) { return CachedMalloc(size); }
void BufferCacheFree(void* /*user_context*/, void* p) { CachedFree(p); }

void UseJitBufferCache(Halide::JITHandlers* handlers) {
  handlers->custom_malloc = Malloc;
  handlers->custom_free = Free;
}

JitMemoryStats GetJitMemoryStats() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  JitMemoryStats s;
  s.allocations = c.allocations;
  s.reused = c.reused;
  s.cached_bytes = static_cast<int64_t>(c.cached_bytes);
  return s;
}

}  // namespace device
}  // namespace braze
