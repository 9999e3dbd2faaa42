// The Winograd forward call's own pass (device/conv_output_pass.h) against the plain
// definition: y = relu(src + residual) element by element, the source read out of
// nChw16c blocks; `special` set exactly when a source element of the o channels (not the
// blocks' padding) is NaN or infinite. Channel counts around the 16-lane block (1, 15,
// 16, 17, 70), both formats, with and without the residual and the ReLU; the NHWC rows
// through the CPU's own row (AVX-512 where it has it) and through the portable loop.
#include "device/conv_output_pass.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace braze::onednn {
namespace {

struct Geometry {
  int64_t n, o, oh, ow;
};

// The blocked buffer: channel c of (n, h, w) at ((n * cb + c / 16) * oh + h) * ow * 16 +
// w * 16 + c % 16; the padding lanes of the last block hold NaN (never read as data).
std::vector<float> Blocked(const Geometry& g, const std::vector<float>& nchw_values) {
  const int64_t cb = (g.o + 15) / 16;
  std::vector<float> b(static_cast<size_t>(g.n * cb * 16 * g.oh * g.ow),
                       std::numeric_limits<float>::quiet_NaN());
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.o; ++c)
      for (int64_t h = 0; h < g.oh; ++h)
        for (int64_t w = 0; w < g.ow; ++w) {
          b[((n * cb + c / 16) * g.oh + h) * g.ow * 16 + w * 16 + c % 16] =
              nchw_values[((n * g.o + c) * g.oh + h) * g.ow + w];
        }
  return b;
}

int64_t At(const Geometry& g, bool nchw, int64_t n, int64_t c, int64_t h, int64_t w) {
  return nchw ? ((n * g.o + c) * g.oh + h) * g.ow + w : ((n * g.oh + h) * g.ow + w) * g.o + c;
}

bool SameFloat(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::memcmp(&a, &b, sizeof(a)) == 0;
}

void CheckPass(const Geometry& g, bool nchw, bool blocked, bool residual, bool relu,
               bool specials) {
  SCOPED_TRACE(::testing::Message()
               << "o=" << g.o << " ow=" << g.ow << (nchw ? " NCHW" : " NHWC")
               << (blocked ? " blocked" : " in place") << (residual ? " residual" : "")
               << (relu ? " relu" : "") << (specials ? " specials" : ""));
  const size_t count = static_cast<size_t>(g.n * g.o * g.oh * g.ow);
  std::mt19937 rng(static_cast<uint32_t>(g.o * 131 + g.ow));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> values(count), res(count);  // values: NCHW order
  for (float& v : values) v = u(rng);
  for (float& v : res) v = u(rng);
  values[0] = -0.0f;
  res[count - 1] = -std::numeric_limits<float>::infinity();  // a residual's special: no scan
  if (specials) values[count / 2] = std::numeric_limits<float>::quiet_NaN();
  if (specials && count > 3) values[count - 2] = std::numeric_limits<float>::infinity();
  // In the caller's layout (y's, residual's) from NCHW order.
  std::vector<float> src_layout(count), res_layout(count);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.o; ++c)
      for (int64_t h = 0; h < g.oh; ++h)
        for (int64_t w = 0; w < g.ow; ++w) {
          const size_t from = static_cast<size_t>(((n * g.o + c) * g.oh + h) * g.ow + w);
          src_layout[At(g, nchw, n, c, h, w)] = values[from];
          res_layout[At(g, nchw, n, c, h, w)] = res[from];
        }
  const std::vector<float> blocks = Blocked(g, values);
  std::vector<float> y = blocked ? std::vector<float>(count, 12345.0f) : src_layout;
  ConvOutputPass pass{blocked ? blocks.data() : y.data(),
                      blocked,
                      nchw,
                      relu,
                      residual ? res_layout.data() : nullptr,
                      y.data(),
                      g.o,
                      g.oh,
                      g.ow};
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t h = 0; h < g.oh; ++h) pass.Row(n, h);
  EXPECT_EQ(pass.special.load(), specials);
  int64_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = src_layout[i];
    if (residual) want += res_layout[i];
    if (relu) want = want < 0.0f ? 0.0f : want;
    if (!SameFloat(y[i], want) && bad++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << y[i] << ", want " << want;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(ConvOutputPass, MatchesItsDefinitionAroundTheChannelBlock) {
  for (bool portable : {false, true}) {
    SCOPED_TRACE(portable ? "the portable loop" : "the CPU's own row");
    SetConvOutputPassPortableForTesting(portable);
    for (int64_t o : {1, 15, 16, 17, 70}) {
      for (int64_t ow : {1, 7}) {
        const Geometry g{2, o, 3, ow};
        for (bool nchw : {false, true}) {
          for (bool blocked : {true, false}) {
            for (int flags = 0; flags < 8; ++flags) {
              CheckPass(g, nchw, blocked, (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0);
            }
          }
        }
      }
    }
  }
  SetConvOutputPassPortableForTesting(false);
}

}  // namespace
}  // namespace braze::onednn
