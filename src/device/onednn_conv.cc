// oneDNN's convolution primitives; see onednn_conv.h.
//
// oneDNN describes x as N x C x H x W with any strides, so a Halide buffer of either
// format is handed over in place with its own strides. The filter is HWIO, which oneDNN
// reads as (G x) O x I x KH x KW with HWIO's strides; each primitive is made with the
// filter in the layout it prefers ("any") and a reorder to or from HWIO at every call
// (training changes the filter at every step; it is a few KiB to a few MiB).
#include "device/onednn_conv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/logging.h"

namespace braze {
namespace onednn {

#if BRAZE_HAVE_DNNL
struct PreparedConv {
  explicit PreparedConv(const Api& api) : api(api) {}
  ~PreparedConv() {
    for (dnnl_memory_t m : {x, w_plain, w, bias, residual, y, scratch}) {
      if (m != nullptr) api.memory_destroy(m);
    }
    if (reorder != nullptr) api.primitive_destroy(reorder);
    if (stream != nullptr) api.stream_destroy(stream);
    if (primitive != nullptr) api.primitive_destroy(primitive);
  }
  PreparedConv(const PreparedConv&) = delete;
  PreparedConv& operator=(const PreparedConv&) = delete;

  const Api& api;
  int dir = kForward;
  std::mutex mu;  // one call at a time: the memory objects and scratchpad are shared
  dnnl_primitive_t primitive = nullptr;
  // HWIO into the primitive's layout (forward, data) or back (weights); null: the same.
  dnnl_primitive_t reorder = nullptr;
  dnnl_memory_t x = nullptr, w_plain = nullptr, w = nullptr, bias = nullptr, residual = nullptr,
                y = nullptr, scratch = nullptr;
  dnnl_stream_t stream = nullptr;
  bool relu_post_ops = false;
  std::string impl;  // oneDNN's name of the implementation ("brgconv:avx512_core")
  std::unique_ptr<void, decltype(&std::free)> w_bytes{nullptr, &std::free};
  std::unique_ptr<void, decltype(&std::free)> scratch_bytes{nullptr, &std::free};
};

namespace {

void* AlignedAlloc(size_t bytes) {
  constexpr size_t kAlign = 4096;  // oneDNN places aligned sub-buffers at offsets
  return std::aligned_alloc(kAlign, (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign);
}

// x (or y) as N x C x H x W, dense in its format.
bool ActivationDesc(const Api& api, dnnl_memory_desc_t* md, int64_t n, int64_t c, int64_t h,
                    int64_t w, bool nchw) {
  const dnnl_dims_t dims = {n, c, h, w};
  const dnnl_dims_t nchw_strides = {c * h * w, h * w, w, 1};
  const dnnl_dims_t nhwc_strides = {h * w * c, 1, w * c, c};
  return api.memory_desc_init(md, 4, dims, dnnl_f32, nchw ? nchw_strides : nhwc_strides) ==
         dnnl_success;
}

// The filter's dims as oneDNN names them: (G x) O/G x I/G x KH x KW.
int FilterDims(const ConvKey& k, dnnl_dims_t dims) {
  const int64_t ig = k.c / k.g, og = k.o / k.g;
  if (k.g == 1) {
    dims[0] = k.o, dims[1] = ig, dims[2] = k.kh, dims[3] = k.kw;
    return 4;
  }
  dims[0] = k.g, dims[1] = og, dims[2] = ig, dims[3] = k.kh, dims[4] = k.kw;
  return 5;
}

// The HWIO filter [KH, KW, I/G, O] in FilterDims's dims.
bool FilterDesc(const Api& api, dnnl_memory_desc_t* md, const ConvKey& k) {
  const int64_t ig = k.c / k.g, og = k.o / k.g;
  dnnl_dims_t dims;
  const int rank = FilterDims(k, dims);
  const dnnl_dims_t s4 = {1, k.o, k.kw * ig * k.o, ig * k.o};
  const dnnl_dims_t s5 = {og, 1, k.o, k.kw * ig * k.o, ig * k.o};
  return api.memory_desc_init(md, rank, dims, dnnl_f32, rank == 4 ? s4 : s5) == dnnl_success;
}

struct Descs {
  dnnl_memory_desc_t x, y, w_plain, w_any, bias;
};

bool MakeDescs(const Api& api, const ConvKey& k, Descs* d) {
  dnnl_dims_t w_dims;
  const int w_rank = FilterDims(k, w_dims);
  const dnnl_dims_t bias_dims = {k.o};
  return ActivationDesc(api, &d->x, k.n, k.c, k.h, k.w, k.nchw) &&
         ActivationDesc(api, &d->y, k.n, k.o, k.oh, k.ow, k.nchw) &&
         FilterDesc(api, &d->w_plain, k) &&
         api.memory_desc_init_by_tag(&d->w_any, w_rank, w_dims, dnnl_f32, dnnl_format_tag_any) ==
             dnnl_success &&
         api.memory_desc_init_by_tag(&d->bias, 1, bias_dims, dnnl_f32, dnnl_a) == dnnl_success;
}

// The primitive descriptor for `k` (and, for the backward ones, the forward one oneDNN
// takes as a hint). Null on a refusal; the caller destroys what it gets.
dnnl_primitive_desc_t ConvDesc(const Library& lib, const ConvKey& k, const Descs& d,
                               dnnl_primitive_attr_t attr) {
  const Api& api = lib.api;
  const dnnl_dims_t strides = {k.sh, k.sw}, dilates = {k.dh - 1, k.dw - 1};
  const dnnl_dims_t pad_l = {k.pt, k.pl}, pad_r = {k.pb, k.pr};
  const bool fwd_bias = k.dir == kForward && (k.post & kPostBias) != 0;
  dnnl_convolution_desc_t fwd;
  dnnl_primitive_desc_t fwd_pd = nullptr;
  if (api.conv_forward_desc_init(
          &fwd, k.dir == kForward ? dnnl_forward_inference : dnnl_forward_training,
          dnnl_convolution_direct, &d.x, &d.w_any, fwd_bias ? &d.bias : nullptr, &d.y, strides,
          dilates, pad_l, pad_r) != dnnl_success ||
      api.primitive_desc_create(&fwd_pd, &fwd, k.dir == kForward ? attr : nullptr, lib.engine,
                                nullptr) != dnnl_success) {
    return nullptr;
  }
  if (k.dir == kForward) return fwd_pd;
  dnnl_convolution_desc_t bwd;
  dnnl_primitive_desc_t pd = nullptr;
  const bool ok =
      (k.dir == kBackwardData
           ? api.conv_backward_data_desc_init(&bwd, dnnl_convolution_direct, &d.x, &d.w_any, &d.y,
                                              strides, dilates, pad_l, pad_r)
           : api.conv_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &d.x, &d.w_any,
                                                 nullptr, &d.y, strides, dilates, pad_l, pad_r)) ==
          dnnl_success &&
      api.primitive_desc_create(&pd, &bwd, attr, lib.engine, fwd_pd) == dnnl_success;
  api.primitive_desc_destroy(fwd_pd);
  return ok ? pd : nullptr;
}

bool ConvReluPostOpsChecked(const Library& lib, const std::string& impl);
bool ConvResidualPostOpsChecked(const Library& lib, const std::string& impl, bool relu);

// Whether the residual post-op's check covers `k`'s geometry: unit strides and no
// dilation, the padding the same on both sides, y as large as x (a residual block's
// 3x3 and 1x1 convolutions). oneDNN 2.6's brgconv passes the check and still adds the
// wrong residual elements for a strided convolution with asymmetric padding (measured
// here: cpu_conv_test's ResidualOfAStridedPaddedConvolutionStaysHalide), so the check's
// implementation names do not speak for other geometries.
bool ResidualGeometryChecked(const ConvKey& k) {
  return k.sh == 1 && k.sw == 1 && k.dh == 1 && k.dw == 1 && k.pt == k.pb && k.pl == k.pr &&
         k.oh == k.h && k.ow == k.w;
}

// The post-ops of a forward key: the residual's binary_add (src1 of y's layout), then
// the ReLU's (`relu`). None: the attribute keeps none.
bool SetPostOps(const Api& api, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t* residual,
                bool relu) {
  if (residual == nullptr && !relu) return true;
  dnnl_post_ops_t ops = nullptr;
  const bool ok = api.post_ops_create(&ops) == dnnl_success &&
                  (residual == nullptr ||
                   api.post_ops_append_binary(ops, dnnl_binary_add, residual) == dnnl_success) &&
                  (!relu || AppendReluOps(api, ops)) &&
                  api.attr_set_post_ops(attr, ops) == dnnl_success;
  if (ops != nullptr) api.post_ops_destroy(ops);
  return ok;
}

// Null when oneDNN refuses the configuration. `relu_post_ops`: a kPostRelu key's ReLU
// by the primitive, where the check for its post-ops (ConvReluPostOpsChecked, or with a
// residual ConvResidualPostOpsChecked) accepts its implementation, or `unchecked`: the
// check's own primitive. A residual key's binary_add is always the primitive's: null
// where its check does not accept the implementation.
std::shared_ptr<PreparedConv> Prepare(const Library& lib, const ConvKey& k, bool relu_post_ops,
                                      bool unchecked = false) {
  const Api& api = lib.api;
  auto p = std::make_shared<PreparedConv>(api);
  p->dir = k.dir;
  p->relu_post_ops = relu_post_ops && k.dir == kForward && (k.post & kPostRelu) != 0;
  const bool residual = k.dir == kForward && (k.post & kPostResidual) != 0;
  Descs d;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  bool ok = MakeDescs(api, k, &d) && api.attr_create(&attr) == dnnl_success &&
            api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            SetPostOps(api, attr, residual ? &d.y : nullptr, p->relu_post_ops) &&
            (pd = ConvDesc(lib, k, d, attr)) != nullptr;
  const char* impl = nullptr;
  if (ok && api.query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) {
    p->impl = impl;
  }
  // The post-ops unchecked for this implementation: the caller's loop for the ReLU, the
  // Halide pipeline's add for the residual (the lowering asks first).
  if (ok && !unchecked) {
    if (residual) {
      ok = ResidualGeometryChecked(k) && ConvResidualPostOpsChecked(lib, p->impl, p->relu_post_ops);
    } else if (p->relu_post_ops) {
      ok = ConvReluPostOpsChecked(lib, p->impl);
    }
  }
  const dnnl_query_t weights_query =
      k.dir == kBackwardWeights ? dnnl_query_diff_weights_md : dnnl_query_weights_md;
  const dnnl_memory_desc_t* weights = ok ? api.query_md(pd, weights_query, 0) : nullptr;
  const dnnl_memory_desc_t* scratch = ok ? api.query_md(pd, dnnl_query_scratchpad_md, 0) : nullptr;
  const size_t scratch_size = scratch != nullptr ? api.memory_desc_get_size(scratch) : 0;
  const bool reorder = weights != nullptr && api.memory_desc_equal(weights, &d.w_plain) == 0;
  dnnl_primitive_desc_t reorder_pd = nullptr;
  if (ok && reorder) {
    const bool back = k.dir == kBackwardWeights;  // the primitive's layout into HWIO
    p->w_bytes.reset(AlignedAlloc(api.memory_desc_get_size(weights)));
    ok =
        p->w_bytes != nullptr &&
        api.reorder_desc_create(&reorder_pd, back ? weights : &d.w_plain, lib.engine,
                                back ? &d.w_plain : weights, lib.engine, nullptr) == dnnl_success &&
        api.primitive_create(&p->reorder, reorder_pd) == dnnl_success &&
        api.memory_create(&p->w, weights, lib.engine, p->w_bytes.get()) == dnnl_success;
  }
  if (ok && scratch_size > 0) {
    p->scratch_bytes.reset(AlignedAlloc(scratch_size));
    ok = p->scratch_bytes != nullptr && api.memory_create(&p->scratch, scratch, lib.engine,
                                                          p->scratch_bytes.get()) == dnnl_success;
  }
  const bool bias = k.dir == kForward && (k.post & kPostBias) != 0;
  ok = ok && api.primitive_create(&p->primitive, pd) == dnnl_success &&
       api.memory_create(&p->x, &d.x, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.memory_create(&p->w_plain, &d.w_plain, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       (!bias ||
        api.memory_create(&p->bias, &d.bias, lib.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
       (!residual ||
        api.memory_create(&p->residual, &d.y, lib.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
       api.memory_create(&p->y, &d.y, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.stream_create(&p->stream, lib.engine, dnnl_stream_default_flags) == dnnl_success;
  if (reorder_pd != nullptr) api.primitive_desc_destroy(reorder_pd);
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  if (attr != nullptr) api.attr_destroy(attr);
  return ok ? p : nullptr;
}

bool Execute(const Api& api, PreparedConv& p, dnnl_primitive_t primitive, int nargs,
             dnnl_exec_arg_t* args) {
  return api.primitive_execute(primitive, p.stream, nargs, args) == dnnl_success;
}

bool Run(const Api& api, PreparedConv& p, float* x, float* w, const float* bias,
         const float* residual, float* y) {
  if (api.set_data_handle(p.x, x) != dnnl_success || api.set_data_handle(p.y, y) != dnnl_success ||
      api.set_data_handle(p.w_plain, w) != dnnl_success ||
      (p.bias != nullptr &&
       api.set_data_handle(p.bias, const_cast<float*>(bias)) != dnnl_success) ||
      (p.residual != nullptr &&
       api.set_data_handle(p.residual, const_cast<float*>(residual)) != dnnl_success)) {
    return false;
  }
  const dnnl_memory_t weights = p.reorder != nullptr ? p.w : p.w_plain;
  if (p.reorder != nullptr && p.dir != kBackwardWeights) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p.w_plain}, {DNNL_ARG_TO, p.w}};
    if (!Execute(api, p, p.reorder, 2, args)) return false;
  }
  dnnl_exec_arg_t args[6];
  int nargs = 0;
  switch (p.dir) {
    case kForward:
      args[nargs++] = {DNNL_ARG_SRC, p.x};
      args[nargs++] = {DNNL_ARG_WEIGHTS, weights};
      args[nargs++] = {DNNL_ARG_DST, p.y};
      if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
      // The residual's binary_add is post-op 0 (the ReLU's come after it).
      if (p.residual != nullptr) {
        args[nargs++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p.residual};
      }
      break;
    case kBackwardData:
      args[nargs++] = {DNNL_ARG_DIFF_DST, p.y};
      args[nargs++] = {DNNL_ARG_WEIGHTS, weights};
      args[nargs++] = {DNNL_ARG_DIFF_SRC, p.x};
      break;
    default:
      args[nargs++] = {DNNL_ARG_SRC, p.x};
      args[nargs++] = {DNNL_ARG_DIFF_DST, p.y};
      args[nargs++] = {DNNL_ARG_DIFF_WEIGHTS, weights};
      break;
  }
  if (p.scratch != nullptr) args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch};
  if (!Execute(api, p, p.primitive, nargs, args)) return false;
  if (p.reorder != nullptr && p.dir == kBackwardWeights) {
    dnnl_exec_arg_t back[2] = {{DNNL_ARG_FROM, p.w}, {DNNL_ARG_TO, p.w_plain}};
    if (!Execute(api, p, p.reorder, 2, back)) return false;
  }
  return api.stream_wait(p.stream) == dnnl_success;
}

// The ReLU post-ops' check (as onednn_relu_check.cc's for the matmul): the convolution
// with them against the same convolution without them and braze::Relu after, on inputs
// and a bias holding NaN, infinities, signed zeros, subnormals and FLT_MAX, 37 output
// channels (a vector tail), for a 3x3 and a 1x1 window. Once per process.
bool ConvReluPostOpsMatch(const Library& lib, int64_t window, std::string* impl) {
  const int32_t pad = static_cast<int32_t>(window / 2);
  ConvKey k{2, 5,       7, 7, 37,  7,   7,   window, window, 1,
            1, 1,       1, 1, pad, pad, pad, pad,    false,  kPostBias | kPostRelu,
            1, kForward};
  std::shared_ptr<PreparedConv> fused = Prepare(lib, k, true, /*unchecked=*/true);
  k.post = kPostBias;
  std::shared_ptr<PreparedConv> plain = Prepare(lib, k, false);
  if (fused == nullptr || plain == nullptr || !fused->relu_post_ops) return false;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const float specials[] = {nan, inf, -inf, -3.0f, 3.0f, -0.0f, 0.0f, -1e-40f, 1e-40f, big, -big};
  std::vector<float> x(2 * 7 * 7 * 5), w(window * window * 5 * 37), bias(37), want(2 * 7 * 7 * 37),
      got(want.size());
  uint32_t state = 54321;  // a fixed LCG: values in [-1, 1)
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  };
  for (float& v : x) v = next();
  for (float& v : w) v = next();
  for (size_t j = 0; j < bias.size(); ++j) bias[j] = j % 2 == 0 ? specials[(j / 2) % 11] : next();
  x[0] = nan;
  x[7 * 5 * 3 + 2] = inf;
  x[7 * 7 * 5 + 11] = -inf;
  if (!Run(lib.api, *plain, x.data(), w.data(), bias.data(), nullptr, want.data()) ||
      !Run(lib.api, *fused, x.data(), w.data(), bias.data(), nullptr, got.data())) {
    return false;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const float relu = want[i] < 0.0f ? 0.0f : want[i];
    if (std::isnan(relu) ? !std::isnan(got[i]) : got[i] != relu) return false;
  }
  *impl = fused->impl;
  return true;
}

bool ConvReluPostOpsChecked(const Library& lib, const std::string& impl) {
  // A 3x3 and a 1x1 convolution: oneDNN has implementations of their own for each.
  static const std::set<std::string>* passed = [&lib] {
    auto* names = new std::set<std::string>;
    for (int64_t window : {3, 1}) {
      std::string name;
      if (ConvReluPostOpsMatch(lib, window, &name)) names->insert(name);
    }
    return names;
  }();
  if (passed->count(impl) > 0) return true;
  static std::once_flag once;
  std::call_once(once, [&] {
    LogWarning(absl::StrCat("oneDNN's NaN-keeping ReLU post-ops are not confirmed for its '", impl,
                            "' convolution: the ReLU after it runs as a loop of the call's own"));
  });
  return false;
}

// The residual binary_add post-op's check, as ConvReluPostOpsMatch's: the convolution
// with bias, residual (and `relu`: the ReLU's post-ops after it) against the same
// convolution with the bias alone and the add (and braze::Relu) after it, with NaN,
// infinities, signed zeros, subnormals and +-FLT_MAX in the residual, in `nchw` or
// NHWC, for a `window` square window, `groups` 1 or 37 (depthwise).
bool ConvResidualPostOpsMatch(const Library& lib, int64_t window, int64_t groups, bool nchw,
                              bool relu, std::string* impl) {
  const int64_t c = groups == 1 ? 5 : groups;
  const int32_t pad = static_cast<int32_t>(window / 2);
  ConvKey k{};
  k.n = 2, k.c = c, k.h = 7, k.w = 7, k.o = 37, k.oh = 7, k.ow = 7, k.kh = window, k.kw = window;
  k.g = groups, k.sh = 1, k.sw = 1, k.dh = 1, k.dw = 1, k.pt = pad, k.pb = pad, k.pl = pad;
  k.pr = pad, k.nchw = nchw, k.post = kPostBias | kPostResidual | (relu ? kPostRelu : 0);
  k.threads = 1, k.dir = kForward;
  std::shared_ptr<PreparedConv> fused = Prepare(lib, k, relu, /*unchecked=*/true);
  k.post = kPostBias;
  std::shared_ptr<PreparedConv> plain = Prepare(lib, k, false);
  if (fused == nullptr || plain == nullptr || fused->relu_post_ops != relu) return false;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const float specials[] = {nan, inf, -inf, -3.0f, 3.0f, -0.0f, 0.0f, -1e-40f, 1e-40f, big, -big};
  std::vector<float> x(2 * 7 * 7 * c), w(window * window * (c / groups) * 37), bias(37),
      residual(2 * 7 * 7 * 37), want(residual.size()), got(residual.size());
  uint32_t state = 12345;  // a fixed LCG: values in [-1, 1)
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  };
  for (float& v : x) v = next();
  for (float& v : w) v = next();
  for (float& v : bias) v = next();
  // Every third element special: each meets conv sums of either sign and channels
  // across the vector tail.
  for (size_t i = 0; i < residual.size(); ++i) {
    residual[i] = i % 3 == 0 ? specials[(i / 3) % 11] : next();
  }
  x[3] = nan;  // a NaN sum meeting the residual
  if (!Run(lib.api, *plain, x.data(), w.data(), bias.data(), nullptr, want.data()) ||
      !Run(lib.api, *fused, x.data(), w.data(), bias.data(), residual.data(), got.data())) {
    return false;
  }
  // Non-finite results exactly (NaN kept, infinities and their signs); finite ones to
  // a rounding of the sum's own: an implementation may order the convolution's sum
  // another way with post-ops than without (jit_1x1 does), as it may against the
  // reference kernels.
  for (size_t i = 0; i < want.size(); ++i) {
    float v = want[i] + residual[i];
    if (relu) v = v < 0.0f ? 0.0f : v;
    const float scale = std::fabs(want[i]) + std::fabs(residual[i]) + 1.0f;
    const bool same = std::isnan(v)   ? std::isnan(got[i])
                      : std::isinf(v) ? got[i] == v
                      : relu && v == 0
                          ? got[i] >= 0.0f && got[i] <= 1e-5f * scale
                          : std::isfinite(got[i]) && std::fabs(got[i] - v) <= 1e-5f * scale;
    if (!same) return false;
  }
  *impl = fused->impl;
  return true;
}

bool ConvResidualPostOpsChecked(const Library& lib, const std::string& impl, bool relu) {
  // A 3x3, a 1x1 and a depthwise convolution in both formats (oneDNN picks
  // implementations by them), with and without the ReLU after the add: the
  // (implementation, ReLU) pairs that passed.
  static const std::set<std::pair<std::string, bool>>* passed = [&lib] {
    auto* names = new std::set<std::pair<std::string, bool>>;
    const std::pair<int64_t, int64_t> shapes[] = {{3, 1}, {1, 1}, {3, 37}};  // window, groups
    for (const auto& [window, groups] : shapes) {
      for (bool nchw : {false, true}) {
        for (bool with_relu : {false, true}) {
          std::string name;
          if (ConvResidualPostOpsMatch(lib, window, groups, nchw, with_relu, &name)) {
            names->insert({name, with_relu});
          }
        }
      }
    }
    return names;
  }();
  if (passed->count({impl, relu}) > 0) return true;
  static std::once_flag once;
  std::call_once(once, [&] {
    LogWarning(absl::StrCat("oneDNN's residual binary_add post-op is not confirmed for its '", impl,
                            "' convolution: the add runs in the Halide pipeline"));
  });
  return false;
}

}  // namespace

std::shared_ptr<PreparedConv> LookupConv(const Library& lib, const ConvKey& k) {
  constexpr size_t kMaxPrepared = 256;
  static std::mutex mu;
  static auto* cache = new absl::flat_hash_map<ConvKey, std::shared_ptr<PreparedConv>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxPrepared) cache->clear();
  std::shared_ptr<PreparedConv> p = Prepare(lib, k, /*relu_post_ops=*/true);
  if (p == nullptr && (k.post & kPostRelu) != 0) p = Prepare(lib, k, /*relu_post_ops=*/false);
  if (p != nullptr) cache->emplace(k, p);
  return p;
}

bool RunConv(const Library& lib, PreparedConv& p, float* x, float* w, const float* bias,
             const float* residual, float* y) {
  std::lock_guard<std::mutex> lock(p.mu);
  return Run(lib.api, p, x, w, bias, residual, y);
}

bool ConvAppliesRelu(const PreparedConv& p) { return p.relu_post_ops; }
#endif

}  // namespace onednn
}  // namespace braze
