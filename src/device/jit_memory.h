// A buffer cache for Halide JIT pipelines: heap allocations of 64 KiB or more made
// inside them (a fused cluster's intermediates: a matmul's result, a repacked operand)
// are kept for the next run instead of going back to the system. Up to 1 GiB of free
// blocks is kept for the life of the process; a block freed beyond that is released.
//
// Why: glibc serves allocations of a few MiB with fresh mmap'ed pages, so every run of
// a fused cluster page-faulted and zeroed its intermediates again. A MatMul+bias+ReLU
// cluster at 1024^3 ran 30% slower than the same three kernels op by op, whose outputs
// the runtime reuses; with the cache both run at the same speed (bench/RESULTS.md).
// XLA and TF keep such buffers in their own allocators (BFC) for the same reason.
#ifndef BRAZE_DEVICE_JIT_MEMORY_H_
#define BRAZE_DEVICE_JIT_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace Halide {
struct JITHandlers;
}  // namespace Halide

namespace braze {
namespace device {

// Makes `handlers` (a Pipeline's jit_handlers()) allocate through the cache. Set per
// pipeline, never as Halide's process-wide defaults: Halide resets its active default
// handlers field by field (set_default_handlers, creating the CUDA runtime module)
// while other threads copy them into a realize, and could pair our malloc with its
// free. A pipeline's own handlers are copied after the defaults, as a pair.
void UseJitBufferCache(Halide::JITHandlers* handlers);

// The same cache as halide_malloc / halide_free replacements, for ahead-of-time kernels
// (compile/disk_cache.h installs them in their runtime with halide_set_custom_malloc).
void* BufferCacheMalloc(void* user_context, size_t size);
void BufferCacheFree(void* user_context, void* p);

struct JitMemoryStats {
  int64_t allocations = 0;   // cached-size requests (>= kMinCachedBytes)
  int64_t reused = 0;        // of those, served from the cache
  int64_t cached_bytes = 0;  // free blocks held now
};
JitMemoryStats GetJitMemoryStats();

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_JIT_MEMORY_H_
