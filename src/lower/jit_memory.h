// Halide's JIT default handlers, installed in one place, and the buffer cache they
// bring: heap allocations made inside compiled pipelines (a fused cluster's
// intermediates: a matmul's result, a repacked operand) are kept for the next run
// instead of going back to the system.
//
// Why: glibc serves allocations of a few MiB with fresh mmap'ed pages, so every run of
// a fused cluster page-faulted and zeroed its intermediates again. A MatMul+bias+ReLU
// cluster at 1024^3 ran 30% slower than the same three kernels op by op, whose outputs
// the runtime reuses; with the cache both run at the same speed (bench/RESULTS.md).
// XLA and TF keep such buffers in their own allocators (BFC) for the same reason.
#ifndef BRAZE_LOWER_JIT_MEMORY_H_
#define BRAZE_LOWER_JIT_MEMORY_H_

#include <cstdint>
#include <functional>

namespace Halide {
struct JITHandlers;
}  // namespace Halide

namespace braze {
namespace lower {

// Sets Halide's JIT default handlers: Braze's custom_malloc/custom_free, then whatever
// `extend` adds (the CUDA runtime's context, stream and error handlers). Each call
// keeps what earlier calls added. Thread-safe.
void InstallJitHandlers(const std::function<void(Halide::JITHandlers*)>& extend = nullptr);

struct JitMemoryStats {
  int64_t allocations = 0;  // cached-size requests (>= kMinCachedBytes)
  int64_t reused = 0;       // of those, served from the cache
  int64_t cached_bytes = 0; // free blocks held now
};
JitMemoryStats GetJitMemoryStats();

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_JIT_MEMORY_H_
