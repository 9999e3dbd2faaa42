// The copy behind streaming stores (schedule/stream_stores.h): a kernel that writes a
// large output computes each tile into a small buffer that stays in L1, then calls
// this to write the tile to the output with non-temporal stores. A plain store first
// reads the output's cache line from memory (read for ownership) and later writes it
// back: 3 bytes of memory traffic per byte written where the output is far bigger than
// the caches. Non-temporal stores write whole lines without reading them: 2. Halide 14
// emits no non-temporal stores, hence a call per tile (docs/STREAMING_STORES.md).
#ifndef BRAZE_DEVICE_STREAM_COPY_H_
#define BRAZE_DEVICE_STREAM_COPY_H_

#include <cstdint>

namespace braze {

// The C symbol kernels call. Its signature:
//   int braze_stream_copy(void* dst, int64_t dst_offset, const void* src,
//                         int64_t src_offset, int64_t bytes)
// Copies `bytes` bytes from src + src_offset to dst + dst_offset (byte offsets: Halide
// IR has no pointer arithmetic), with non-temporal stores on x86-64 for the 64-byte
// aligned lines of the destination. Returns 0. The stores are weakly ordered and not
// fenced here (a fence per tile cost more than small tiles save): the kernel calls
// braze_stream_fence before another thread may read what it copied.
inline constexpr char kStreamCopySymbol[] = "braze_stream_copy";

// int braze_stream_fence(): a store fence (sfence on x86-64), after which the
// calling thread's non-temporal stores are visible to any thread that later
// synchronizes with it. Returns 0.
inline constexpr char kStreamFenceSymbol[] = "braze_stream_fence";

// The two functions' addresses, for a JIT pipeline's externs (Pipeline::set_jit_externs).
void* StreamCopyAddress();
void* StreamFenceAddress();

}  // namespace braze

#endif  // BRAZE_DEVICE_STREAM_COPY_H_
