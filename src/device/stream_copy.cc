// braze_stream_copy; see stream_copy.h.
#include "device/stream_copy.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

#if defined(__x86_64__)
// Copies `lines` whole 64-byte lines to a 64-byte aligned `d` with non-temporal stores,
// as wide as the CPU has: one 64-byte store per line ran Chain8's tiles 15% faster than
// four 16-byte ones on a Sapphire Rapids VM (docs/STREAMING_STORES.md).
__attribute__((target("avx512f"))) void StreamLines512(char* d, const char* s, int64_t lines) {
  for (int64_t i = 0; i < lines * 64; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(s + i)));
  }
}

__attribute__((target("avx"))) void StreamLines256(char* d, const char* s, int64_t lines) {
  for (int64_t i = 0; i < lines * 64; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
  }
}

void StreamLines128(char* d, const char* s, int64_t lines) {  // SSE2: every x86-64
  for (int64_t i = 0; i < lines * 64; i += 64) {
    for (int k = 0; k < 64; k += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + k)));
    }
  }
}

using StreamLinesFn = void (*)(char*, const char*, int64_t);

StreamLinesFn PickStreamLines() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return StreamLines512;
  if (__builtin_cpu_supports("avx")) return StreamLines256;
  return StreamLines128;
}
#endif

}  // namespace

// Hidden, as braze_cpu_gemm_f32 (cpu_gemm.cc) is.
extern "C" __attribute__((visibility("hidden"))) int braze_stream_copy(
    void* dst, int64_t dst_offset, const void* src, int64_t src_offset, int64_t bytes) {
  char* d = static_cast<char*>(dst) + dst_offset;
  const char* s = static_cast<const char*>(src) + src_offset;
#if defined(__x86_64__)
  // A head up to the first 64-byte line of the destination and a tail after the last
  // whole line take plain copies; the lines in between are written whole.
  static const StreamLinesFn stream_lines = PickStreamLines();
  const int64_t head = std::min<int64_t>(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, static_cast<size_t>(head));
  const int64_t lines = (bytes - head) / 64;
  stream_lines(d + head, s + head, lines);
  const int64_t done = head + lines * 64;
  std::memcpy(d + done, s + done, static_cast<size_t>(bytes - done));
#else
  std::memcpy(d, s, static_cast<size_t>(bytes));
#endif
  return 0;
}

// The fence the kernel calls once per parallel task and once before it returns.
extern "C" __attribute__((visibility("hidden"))) int braze_stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
  return 0;
}

namespace braze {

void* StreamCopyAddress() { return reinterpret_cast<void*>(&braze_stream_copy); }
void* StreamFenceAddress() { return reinterpret_cast<void*>(&braze_stream_fence); }

}  // namespace braze
