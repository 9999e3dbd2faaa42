// The check of oneDNN's NaN-keeping ReLU post-ops; see onednn_matmul.h.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/onednn_matmul.h"
#include "ir/logging.h"

namespace braze {
namespace onednn {

#if BRAZE_HAVE_DNNL
namespace {

// True when oneDNN's results with the ReLU post-ops equal braze::Relu of its results
// without them (NaN where NaN, 0 for every negative and -inf, the value itself
// otherwise) on inputs with NaN, infinities, signed zeros, subnormals and FLT_MAX, at
// extents with vector tails.
bool ReluPostOpsMatch(const Library& lib, int64_t m, int64_t n, int64_t k, std::string* impl) {
  const GemmKey g{m, n, k, k, n, n, false, false, kBiasRelu, 1};
  std::shared_ptr<Prepared> fused = Prepare(lib, g, true), plain = Prepare(lib, g, false);
  if (fused == nullptr || plain == nullptr || !fused->relu_post_ops) return false;
  *impl = fused->impl;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const float specials[] = {nan, inf, -inf, -3.0f, 3.0f, -0.0f, 0.0f, -1e-40f, 1e-40f, big, -big};
  std::vector<float> a(m * k), b(k * n), bias(n), want(m * n), got(m * n);
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
  if (!RunGemm(lib.api, *plain, a.data(), b.data(), bias.data(), want.data()) ||
      !RunGemm(lib.api, *fused, a.data(), b.data(), bias.data(), got.data())) {
    return false;
  }
  for (int64_t i = 0; i < m * n; ++i) {
    const float relu = want[i] < 0.0f ? 0.0f : want[i];
    if (std::isnan(relu) ? !std::isnan(got[i]) : got[i] != relu) return false;
  }
  return true;
}

}  // namespace

// Whether the ReLU post-ops may be used with implementation `impl`: a self-test (once
// per process) runs them on two shapes and keeps the names of the implementations that
// passed. Any other implementation (another ISA, a reference kernel) gets the ReLU from
// the caller, with one warning per process.
bool ReluPostOpsChecked(const Library& lib, const std::string& impl) {
  static const std::set<std::string>* passed = [&lib] {
    auto* names = new std::set<std::string>;
    for (const auto [m, n, k] : {std::array<int64_t, 3>{5, 37, 3}, {33, 70, 17}}) {
      std::string name;
      if (ReluPostOpsMatch(lib, m, n, k, &name)) names->insert(name);
    }
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
