// CPU convolutions through oneDNN; see cpu_conv.h (the primitives: onednn_conv.h).
#include "device/cpu_conv.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "HalideRuntime.h"
#include "device/onednn_conv.h"

namespace braze {
namespace {

using onednn::Library;
using onednn::Loaded;

bool IsBoundsQuery(const halide_buffer_t* b) { return b->host == nullptr && b->device == 0; }

using Geometry = CpuConvGeometry;

// Halide-order extents of an activation of c x h x w (dims 0-2; dim 3 is the batch).
void ActivationExtents(bool nchw, int32_t c, int32_t h, int32_t w, int32_t* e) {
  if (nchw) {
    e[0] = w, e[1] = h, e[2] = c;
  } else {
    e[0] = c, e[1] = w, e[2] = h;
  }
}

// Sets a query buffer's dims: dims 0-2 (or all, `rank` 1 or 4 without a batch) whole,
// a rank-4 activation's dim 3 [n0, n0 + n).
void Answer(halide_buffer_t* b, const int32_t* extents, bool batch, int64_t n0, int64_t n) {
  for (int d = 0; d < b->dimensions; ++d) {
    const bool is_batch = batch && d == 3;
    b->dim[d].min = is_batch ? static_cast<int32_t>(n0) : 0;
    b->dim[d].extent = is_batch ? static_cast<int32_t>(n) : extents[d];
  }
}

// Dense (each dim right after the one before), whole in every dim but a batch dim 3,
// which holds [n0, n0 + n).
bool Holds(const halide_buffer_t* b, int rank, const int32_t* extents, bool batch, int64_t n0,
           int64_t n) {
  if (b->dimensions != rank || b->host == nullptr) return false;
  int64_t stride = 1;
  for (int d = 0; d < rank; ++d) {
    if (b->dim[d].extent > 1 && b->dim[d].stride != stride) return false;
    if (batch && d == 3) {
      if (b->dim[d].min > n0 || n0 + n > int64_t{b->dim[d].min} + b->dim[d].extent) return false;
    } else if (b->dim[d].min != 0 || b->dim[d].extent != extents[d]) {
      return false;
    }
    stride *= b->dim[d].extent;
  }
  return true;
}

// The first element of batch index n0 (`batch`: dim 3 is a batch), else of the buffer.
float* First(const halide_buffer_t* b, bool batch, int64_t n0) {
  float* p = reinterpret_cast<float*>(b->host);
  return batch ? p + (n0 - b->dim[3].min) * b->dim[3].stride : p;
}

// The filter gradient's NaN elements computed again as the reference kernel computes
// them (src/reference/window.cc: double sums, padding taps skipped). oneDNN's direct
// backward-weights kernel multiplies dy by the zero padding, so an infinite dy next to
// the padding gives NaN where the reference gives the infinity (or a finite sum). Only
// the NaN elements are redone, each a sum over N x OH x OW: a step whose gradients are
// finite pays one scan of the filter. x, dy and dw are dense (Holds).
void RedoNanFilterTaps(const Geometry& g, const float* x, const float* dy, float* dw) {
  const int64_t oh = g.OutH(), ow = g.OutW(), cig = g.c_in / g.groups, cog = g.c_out / g.groups;
  auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w, int64_t channels, int64_t height,
                int64_t width) {
    return g.nchw ? ((n * channels + c) * height + h) * width + w
                  : ((n * height + h) * width + w) * channels + c;
  };
  const int64_t count = int64_t{g.kh} * g.kw * cig * g.c_out;  // HWIO, dense
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isnan(dw[i])) continue;
    const int64_t co = i % g.c_out, ci = (i / g.c_out) % cig + co / cog * cig;
    const int64_t tw = i / (int64_t{g.c_out} * cig) % g.kw,
                  th = i / (int64_t{g.c_out} * cig * g.kw);
    // A sum that is NaN stays NaN: stop there (once training diverges, every tap is NaN
    // and a whole serial backward-weights pass per tap would cost seconds a step).
    auto tap_sum = [&] {
      double sum = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t ih = y * g.sh - g.pt + th * g.dh;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t iw = xo * g.sw - g.pl + tw * g.dw;
            if (iw < 0 || iw >= g.in_w) continue;
            sum += double(x[at(n, ci, ih, iw, g.c_in, g.in_h, g.in_w)]) *
                   double(dy[at(n, co, y, xo, g.c_out, oh, ow)]);
          }
          if (std::isnan(sum)) return sum;
        }
      }
      return sum;
    };
    dw[i] = static_cast<float>(tap_sum());
  }
}

#if BRAZE_HAVE_DNNL
onednn::ConvKey KeyOf(const Geometry& g, int64_t n, int threads) {
  const int post = g.dir == onednn::kForward ? g.post : 0;
  onednn::ConvKey k{n,    g.c_in,   g.in_h, g.in_w, g.c_out, g.OutH(), g.OutW(), g.kh,
                    g.kw, g.groups, g.sh,   g.sw,   g.dh,    g.dw,     g.pt,     g.pb,
                    g.pl, g.pr,     g.nchw, post,   threads, g.dir};
  k.winograd = onednn::WinogradOn();
  return k;
}
#endif

int Conv(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, halide_buffer_t* residual,
         const Geometry& g, int32_t threads, halide_buffer_t* out) {
  int32_t xe[3], ye[3];
  ActivationExtents(g.nchw, g.c_in, g.in_h, g.in_w, xe);
  ActivationExtents(g.nchw, g.c_out, g.OutH(), g.OutW(), ye);
  const int32_t we[4] = {g.c_out, g.c_in / g.groups, g.kw, g.kh};
  // What each operand is, by direction: a and b, and whether out has a batch.
  const bool weights = g.dir == onednn::kBackwardWeights;
  const int32_t* a_ext = g.dir == onednn::kBackwardData ? ye : xe;
  const int32_t* b_ext = weights ? ye : we;
  const int32_t* out_ext = weights ? we : g.dir == onednn::kBackwardData ? xe : ye;
  // The batch range the call computes: out's, or every image for the filter's gradient.
  const int64_t n0 = weights ? 0 : out->dim[3].min;
  const int64_t n = weights ? g.n : out->dim[3].extent;
  const bool forward = g.dir == onednn::kForward;
  const bool has_bias = forward && (g.post & onednn::kPostBias) != 0;
  const bool has_residual = forward && (g.post & onednn::kPostResidual) != 0;
  const bool relu = forward && (g.post & onednn::kPostRelu) != 0;
  if (IsBoundsQuery(a) || IsBoundsQuery(b) || IsBoundsQuery(bias) || IsBoundsQuery(residual) ||
      IsBoundsQuery(out)) {
    if (IsBoundsQuery(a)) Answer(a, a_ext, true, n0, n);
    if (IsBoundsQuery(b)) Answer(b, b_ext, weights, n0, n);
    // Without a bias (or residual) the lowering hands a buffer of one element instead.
    const int32_t one[4] = {1, 1, 1, 1};
    if (IsBoundsQuery(bias)) Answer(bias, has_bias ? &g.c_out : one, false, 0, 0);
    if (IsBoundsQuery(residual)) {
      Answer(residual, has_residual ? ye : one, has_residual, n0, n);
    }
    return 0;
  }
  const Library& lib = Loaded();
  if (!lib.status.ok()) return -1;
#if !BRAZE_HAVE_DNNL
  (void)threads;
  return -1;
#else
  if (n == 0) return 0;
  if (!Holds(a, 4, a_ext, true, n0, n) || !Holds(b, 4, b_ext, weights, n0, n) ||
      !Holds(out, 4, out_ext, !weights, n0, n) ||
      (has_bias && !Holds(bias, 1, &g.c_out, false, 0, 0)) ||
      (has_residual && !Holds(residual, 4, ye, true, n0, n))) {
    return -2;
  }
  std::shared_ptr<onednn::PreparedConv> p = onednn::LookupConv(lib, KeyOf(g, n, threads));
  if (p == nullptr) return -3;
  if (lib.api.set_threads != nullptr && threads > 0) lib.api.set_threads(threads);
  float* x = g.dir == onednn::kBackwardData ? First(out, true, n0) : First(a, true, n0);
  float* w = weights ? First(out, false, 0) : First(b, false, 0);
  float* y = g.dir == onednn::kForward        ? First(out, true, n0)
             : g.dir == onednn::kBackwardData ? First(a, true, n0)
                                              : First(b, true, n0);
  const float* pbias = has_bias ? First(bias, false, 0) : nullptr;
  const float* pres = has_residual ? First(residual, true, n0) : nullptr;
  if (!onednn::RunConv(lib, *p, x, w, pbias, pres, y)) return -3;
  if (weights) RedoNanFilterTaps(g, x, y, w);
  if (relu && !onednn::ConvAppliesRelu(*p)) {
    // braze::Relu (x < 0 ? 0 : x, NaN kept) where the post-ops are not checked.
    const int64_t count = n * g.c_out * g.OutH() * g.OutW();
    for (int64_t i = 0; i < count; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
  }
  return 0;
#endif
}

}  // namespace

extern "C" __attribute__((visibility("hidden"))) int braze_cpu_conv_f32(
    halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, halide_buffer_t* residual,
    int32_t direction, int32_t nchw, int32_t n, int32_t c_in, int32_t in_h, int32_t in_w,
    int32_t c_out, int32_t kh, int32_t kw, int32_t groups, int32_t stride_h, int32_t stride_w,
    int32_t dilation_h, int32_t dilation_w, int32_t pad_top, int32_t pad_bottom, int32_t pad_left,
    int32_t pad_right, int32_t post, int32_t threads, halide_buffer_t* out) {
  if (groups < 1 || c_in % groups != 0 || c_out % groups != 0 || direction < 0 || direction > 2) {
    return -3;
  }
  const Geometry g{direction, nchw != 0,  n,        c_in,      in_h,     in_w,       c_out,
                   kh,        kw,         groups,   stride_h,  stride_w, dilation_h, dilation_w,
                   pad_top,   pad_bottom, pad_left, pad_right, post};
  return Conv(a, b, bias, residual, g, threads, out);
}

bool CpuConvSupported(const CpuConvGeometry& g, int threads) {
  const Library& lib = Loaded();
  if (!lib.status.ok() || g.groups < 1 || g.c_in % g.groups != 0 || g.c_out % g.groups != 0) {
    return false;
  }
#if BRAZE_HAVE_DNNL
  return onednn::LookupConv(lib, KeyOf(g, g.n, threads)) != nullptr;
#else
  (void)threads;
  return false;
#endif
}

std::string CpuConvImplementation(const CpuConvGeometry& g, int threads) {
  const Library& lib = Loaded();
  if (!lib.status.ok() || g.groups < 1 || g.c_in % g.groups != 0 || g.c_out % g.groups != 0) {
    return "";
  }
#if BRAZE_HAVE_DNNL
  std::shared_ptr<onednn::PreparedConv> p = onednn::LookupConv(lib, KeyOf(g, g.n, threads));
  return p != nullptr ? onednn::ConvImplementation(*p) : "";
#else
  (void)threads;
  return "";
#endif
}

void SetCpuConvWinograd(bool on) { onednn::SetWinograd(on); }
int64_t CpuConvWinogradRecomputes() { return onednn::WinogradRecomputes(); }
int64_t CpuConvFilterReorders() { return onednn::FilterReorders(); }
int64_t CpuConvFilterCopies() { return onednn::FilterCopies(); }

void* CpuConvF32Address() { return reinterpret_cast<void*>(&braze_cpu_conv_f32); }

}  // namespace braze
