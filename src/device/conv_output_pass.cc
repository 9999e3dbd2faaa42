// ConvOutputPass; see conv_output_pass.h.
//
// Speed: the pass replaces oneDNN's reorder out of the blocked layout, so it must be as
// fast. The portable loop below (what GCC makes of it for plain x86-64: SSE2, a lambda
// per element) took 12-15 ms of one core's time for 32x56x56x64 floats, twice oneDNN's
// AVX-512 reorder (5.6-7.1 ms); the AVX-512 row, one 16-lane block per load and store,
// takes what the reorder takes (5.9-6.7 ms, same harness; docs/CONVOLUTIONS.md). The library is
// built for plain x86-64, so the row is compiled for AVX-512 alone and picked at run time
// (as stream_copy.cc's copies are).
#include "device/conv_output_pass.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace braze {
namespace onednn {
namespace {

std::atomic<bool> portable_for_testing{false};

// Whether the f32 bits are NaN or an infinity (all exponent bits set), as 0 or 1:
// branch-free, so that the loops below vectorize.
inline uint32_t NonFiniteBit(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return ((bits & 0x7f800000u) + 0x00800000u) >> 31;
}

// One row of an NHWC y from nChw16c blocks: `block0` is the row's first channel block,
// the next ones `block_stride` floats apart; y and residual point at the row. Returns
// whether an element (of the o channels, not the block's padding) is non-finite.
using RowFn = bool (*)(const float* block0, int64_t block_stride, const float* residual, float* y,
                       int64_t o, int64_t ow, bool relu);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) bool NhwcRowFromBlocks512(const float* block0,
                                                             int64_t block_stride,
                                                             const float* residual, float* y,
                                                             int64_t o, int64_t ow, bool relu) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __m512 zero = _mm512_setzero_ps();
  const int64_t cb = (o + 15) / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (o - (cb - 1) * 16)) - 1u);
  __mmask16 bad = 0;
  for (int64_t w = 0; w < ow; ++w) {
    for (int64_t b = 0; b < cb; ++b) {
      const __mmask16 lanes = b + 1 < cb ? static_cast<__mmask16>(0xffff) : tail;
      const int64_t at = w * o + b * 16;
      __m512 v = _mm512_maskz_loadu_ps(lanes, block0 + b * block_stride + w * 16);
      bad |= _mm512_mask_cmpeq_epi32_mask(lanes, _mm512_and_si512(_mm512_castps_si512(v), exponent),
                                          exponent);
      if (residual != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, residual + at));
      // x < 0 ? 0 : x, ordered: a NaN compares false and is kept, as is -0.
      if (relu) v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);
      _mm512_mask_storeu_ps(y + at, lanes, v);
    }
  }
  return bad != 0;
}

RowFn PickNhwcRowFromBlocks() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? NhwcRowFromBlocks512 : nullptr;
}
#endif

}  // namespace

void ConvOutputPass::Row(int64_t n, int64_t h) {
  const int64_t cb = (o + 15) / 16;
  // The blocked source of channel block b of this row.
  auto block = [&](int64_t b) { return src + ((n * cb + b) * oh + h) * ow * 16; };
#if defined(__x86_64__)
  static const RowFn nhwc_row_from_blocks = PickNhwcRowFromBlocks();
  if (blocked && !nchw && nhwc_row_from_blocks != nullptr &&
      !portable_for_testing.load(std::memory_order_relaxed)) {
    const int64_t row = (n * oh + h) * ow * o;
    if (nhwc_row_from_blocks(block(0), oh * ow * 16, residual != nullptr ? residual + row : nullptr,
                             y + row, o, ow, relu)) {
      special.store(true, std::memory_order_relaxed);
    }
    return;
  }
#endif
  uint32_t bad = 0;
  auto put = [&](float v, int64_t at) {
    bad |= NonFiniteBit(v);
    if (residual != nullptr) v += residual[at];
    y[at] = relu && v < 0.0f ? 0.0f : v;
  };
  if (!nchw) {
    const int64_t row = (n * oh + h) * ow * o;
    for (int64_t w = 0; w < ow; ++w) {
      const int64_t at = row + w * o;
      if (!blocked) {
        for (int64_t c = 0; c < o; ++c) put(src[at + c], at + c);
        continue;
      }
      for (int64_t b = 0; b < cb; ++b) {
        const float* s = block(b) + w * 16;
        const int64_t lanes = std::min<int64_t>(16, o - b * 16);
        for (int64_t l = 0; l < lanes; ++l) put(s[l], at + b * 16 + l);
      }
    }
  } else {
    for (int64_t c = 0; c < o; ++c) {
      const int64_t at = ((n * o + c) * oh + h) * ow;
      const float* s = blocked ? block(c / 16) + c % 16 : src + at;
      const int64_t step = blocked ? 16 : 1;
      for (int64_t w = 0; w < ow; ++w) put(s[w * step], at + w);
    }
  }
  if (bad != 0) special.store(true, std::memory_order_relaxed);
}

void SetConvOutputPassPortableForTesting(bool portable) {
  portable_for_testing.store(portable, std::memory_order_relaxed);
}

}  // namespace onednn
}  // namespace braze
