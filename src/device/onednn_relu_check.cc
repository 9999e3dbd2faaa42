// The check of oneDNN's NaN-keeping ReLU post-ops; see onednn_matmul.h.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/dtype.h"
#include "device/onednn_matmul.h"
#include "ir/logging.h"

namespace braze {
namespace onednn {

#if BRAZE_HAVE_DNNL
namespace {

// `values` in the storage of type `t` (f32, or bf16 rounded to nearest even).
std::vector<uint8_t> Stored(const std::vector<float>& values, dnnl_data_type_t t) {
  const size_t size = t == dnnl_bf16 ? 2 : 4;
  std::vector<uint8_t> out(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == dnnl_bf16) {
      const uint16_t bits = FloatToBF16Bits(values[i]);
      std::memcpy(out.data() + 2 * i, &bits, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    }
  }
  return out;
}

// Element i of storage of type `t`, as a float.
float Load(const std::vector<uint8_t>& stored, dnnl_data_type_t t, size_t i) {
  if (t == dnnl_bf16) {
    uint16_t bits;
    std::memcpy(&bits, stored.data() + 2 * i, 2);
    return BF16BitsToFloat(bits);
  }
  float v;
  std::memcpy(&v, stored.data() + 4 * i, 4);
  return v;
}

// True when oneDNN's results with the ReLU post-ops equal braze::Relu of its results
// without them (NaN where NaN, 0 for every negative and -inf, the value itself
// otherwise) on inputs with NaN, infinities, signed zeros, subnormals and FLT_MAX, at
// extents with vector tails; operands, bias and product of type `t` (f32 or bf16: a
// bf16 product is rounded after the post-ops, and the ReLU commutes with that rounding).
bool ReluPostOpsMatch(const Library& lib, int64_t m, int64_t n, int64_t k, dnnl_data_type_t t,
                      std::string* impl) {
  GemmKey g{m, n, k, k, n, n, false, false, kBiasRelu, 1};
  g.ab = g.c = t;
  std::shared_ptr<Prepared> fused = Prepare(lib, g, true), plain = Prepare(lib, g, false);
  if (fused == nullptr || plain == nullptr || !fused->relu_post_ops) return false;
  *impl = fused->impl;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const float specials[] = {nan, inf, -inf, -3.0f, 3.0f, -0.0f, 0.0f, -1e-40f, 1e-40f, big, -big};
  std::vector<float> a(m * k), b(k * n), bias(n);
  uint32_t state = 12345;  // a fixed LCG: values in [-1, 1)
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  };
  for (float& x : a) x = next();
  for (float& x : b) x = next();
  for (int64_t j = 0; j < n; ++j) bias[j] = j % 2 == 0 ? specials[(j / 2) % 11] : next();
  a[0] = nan;                    // row 0 NaN
  a[k + (k > 1 ? 1 : 0)] = inf;  // row 1 +-inf or NaN
  if (m > 2) a[2 * k] = -inf;    // row 2
  const std::vector<uint8_t> sa = Stored(a, t), sb = Stored(b, t), sbias = Stored(bias, t);
  std::vector<uint8_t> want = Stored(std::vector<float>(m * n), t), got = want;
  if (!RunGemm(lib.api, *plain, sa.data(), sb.data(), sbias.data(), want.data()) ||
      !RunGemm(lib.api, *fused, sa.data(), sb.data(), sbias.data(), got.data())) {
    return false;
  }
  for (int64_t i = 0; i < m * n; ++i) {
    const float w = Load(want, t, i), x = Load(got, t, i);
    const float relu = w < 0.0f ? 0.0f : w;
    if (std::isnan(relu) ? !std::isnan(x) : x != relu) return false;
  }
  return true;
}

}  // namespace

// Whether the ReLU post-ops may be used with implementation `impl`: a self-test (once
// per process) runs them on two shapes, in f32 and in bf16, and keeps the names of the
// implementations that passed every check they ran (an implementation that failed one
// is not trusted with the others). Any other implementation (another ISA, a reference kernel) gets
// the ReLU from the caller, with one warning per process.
bool ReluPostOpsChecked(const Library& lib, const std::string& impl) {
  static const std::set<std::string>* passed = [&lib] {
    auto* names = new std::set<std::string>;
    std::set<std::string> failed;
    for (const dnnl_data_type_t t : {dnnl_f32, dnnl_bf16}) {
      for (const auto [m, n, k] : {std::array<int64_t, 3>{5, 37, 3}, {33, 70, 17}}) {
        std::string name;
        (ReluPostOpsMatch(lib, m, n, k, t, &name) ? *names : failed).insert(name);
      }
    }
    for (const std::string& name : failed) names->erase(name);
    return names;
  }();
  if (passed->count(impl) > 0) return true;
  static std::once_flag once;
  std::call_once(once, [&] {
    LogWarning(absl::StrCat("oneDNN's NaN-keeping ReLU post-ops are not confirmed for its '", impl,
                            "' matmul: the ReLU after such a matmul runs as a loop of its own"));
  });
  return false;
}
#endif

}  // namespace onednn
}  // namespace braze
