// CPU convolutions through oneDNN; see cpu_conv.h.
//
// oneDNN describes x as N x C x H x W with any strides, so a Halide buffer of either
// format is handed over in place with its own strides. The filter is HWIO, which oneDNN
// reads as (G x) O x I x KH x KW with HWIO's strides; the primitive is made with
// weights in the layout it prefers ("any") and the filter reordered into it at every
// call (training changes it at every step; it is a few KiB to a few MiB).
#include "device/cpu_conv.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "device/onednn_matmul.h"
#include "ir/logging.h"

namespace braze {
namespace {

using onednn::Library;
using onednn::Loaded;

bool IsBoundsQuery(const halide_buffer_t* b) { return b->host == nullptr && b->device == 0; }

// Every dim of b: its min and extent.
void Whole(halide_buffer_t* b, const int32_t* extents) {
  for (int d = 0; d < b->dimensions; ++d) {
    b->dim[d].min = 0;
    b->dim[d].extent = extents[d];
  }
}

#if BRAZE_HAVE_DNNL
struct ConvKey {
  int64_t n, c, h, w, o, oh, ow, kh, kw, g;
  int32_t sh, sw, dh, dw, pt, pb, pl, pr;
  bool nchw;
  int bias_relu, threads;
  auto Tie() const {
    return std::make_tuple(n, c, h, w, o, oh, ow, kh, kw, g, sh, sw, dh, dw, pt, pb, pl, pr, nchw,
                           bias_relu, threads);
  }
  bool operator==(const ConvKey& k) const { return Tie() == k.Tie(); }
  template <typename H>
  friend H AbslHashValue(H h, const ConvKey& k) {
    return H::combine(std::move(h), k.Tie());
  }
};

struct PreparedConv {
  explicit PreparedConv(const onednn::Api& api) : api(api) {}
  ~PreparedConv() {
    for (dnnl_memory_t m : {x, w_plain, w, bias, y, scratch}) {
      if (m != nullptr) api.memory_destroy(m);
    }
    if (reorder != nullptr) api.primitive_destroy(reorder);
    if (stream != nullptr) api.stream_destroy(stream);
    if (primitive != nullptr) api.primitive_destroy(primitive);
  }
  PreparedConv(const PreparedConv&) = delete;
  PreparedConv& operator=(const PreparedConv&) = delete;

  const onednn::Api& api;
  std::mutex mu;  // one call at a time: the memory objects and scratchpad are shared
  dnnl_primitive_t primitive = nullptr;
  dnnl_primitive_t reorder = nullptr;  // HWIO into the primitive's layout; null: the same
  dnnl_memory_t x = nullptr, w_plain = nullptr, w = nullptr, bias = nullptr, y = nullptr,
                scratch = nullptr;
  dnnl_stream_t stream = nullptr;
  bool relu_post_ops = false;
  std::string impl;  // oneDNN's name of the implementation ("brgconv:avx512_core")
  std::unique_ptr<void, decltype(&std::free)> w_bytes{nullptr, &std::free};
  std::unique_ptr<void, decltype(&std::free)> scratch_bytes{nullptr, &std::free};
};

void* AlignedAlloc(size_t bytes) {
  constexpr size_t kAlign = 4096;  // oneDNN places aligned sub-buffers at offsets
  return std::aligned_alloc(kAlign, (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign);
}

// x (or y) as N x C x H x W in `k`'s format, dense.
bool ActivationDesc(const onednn::Api& api, dnnl_memory_desc_t* md, int64_t n, int64_t c, int64_t h,
                    int64_t w, bool nchw) {
  const dnnl_dims_t dims = {n, c, h, w};
  const dnnl_dims_t nchw_strides = {c * h * w, h * w, w, 1};
  const dnnl_dims_t nhwc_strides = {h * w * c, 1, w * c, c};
  const dnnl_dim_t* strides = nchw ? nchw_strides : nhwc_strides;
  return api.memory_desc_init(md, 4, dims, dnnl_f32, strides) == dnnl_success;
}

// The HWIO filter [KH, KW, I/G, O] as oneDNN's (G x) O/G x I/G x KH x KW.
bool FilterDesc(const onednn::Api& api, dnnl_memory_desc_t* md, const ConvKey& k) {
  const int64_t ig = k.c / k.g, og = k.o / k.g;
  if (k.g == 1) {
    const dnnl_dims_t dims = {k.o, ig, k.kh, k.kw};
    const dnnl_dims_t strides = {1, k.o, k.kw * ig * k.o, ig * k.o};
    return api.memory_desc_init(md, 4, dims, dnnl_f32, strides) == dnnl_success;
  }
  const dnnl_dims_t dims = {k.g, og, ig, k.kh, k.kw};
  const dnnl_dims_t strides = {og, 1, k.o, k.kw * ig * k.o, ig * k.o};
  return api.memory_desc_init(md, 5, dims, dnnl_f32, strides) == dnnl_success;
}

bool ConvReluPostOpsChecked(const Library& lib, const std::string& impl);
struct PreparedConv;
bool Run(const onednn::Api& api, PreparedConv& p, const float* x, const float* w, const float* bias,
         float* y);

// Null when oneDNN refuses the configuration. `relu_post_ops`: a bias_relu == 2 key's
// ReLU by the primitive, where ConvReluPostOpsChecked accepts its implementation (or
// `unchecked`: the check's own primitive).
std::shared_ptr<PreparedConv> Prepare(const Library& lib, const ConvKey& k, bool relu_post_ops,
                                      bool unchecked = false) {
  const onednn::Api& api = lib.api;
  auto p = std::make_shared<PreparedConv>(api);
  p->relu_post_ops = relu_post_ops && k.bias_relu == 2;
  dnnl_memory_desc_t x, w_plain, w_any, bias, y;
  const dnnl_dims_t bias_dims = {k.o};
  const dnnl_dims_t strides = {k.sh, k.sw}, dilates = {k.dh - 1, k.dw - 1};
  const dnnl_dims_t pad_l = {k.pt, k.pl}, pad_r = {k.pb, k.pr};
  const int w_rank = k.g == 1 ? 4 : 5;
  const int64_t ig = k.c / k.g, og = k.o / k.g;
  const dnnl_dims_t w_dims4 = {k.o, ig, k.kh, k.kw};
  const dnnl_dims_t w_dims5 = {k.g, og, ig, k.kh, k.kw};
  dnnl_convolution_desc_t desc;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  bool ok = ActivationDesc(api, &x, k.n, k.c, k.h, k.w, k.nchw) &&
            ActivationDesc(api, &y, k.n, k.o, k.oh, k.ow, k.nchw) && FilterDesc(api, &w_plain, k) &&
            api.memory_desc_init_by_tag(&w_any, w_rank, k.g == 1 ? w_dims4 : w_dims5, dnnl_f32,
                                        dnnl_format_tag_any) == dnnl_success &&
            api.memory_desc_init_by_tag(&bias, 1, bias_dims, dnnl_f32, dnnl_a) == dnnl_success &&
            api.conv_forward_desc_init(&desc, dnnl_forward_inference, dnnl_convolution_direct, &x,
                                       &w_any, k.bias_relu != 0 ? &bias : nullptr, &y, strides,
                                       dilates, pad_l, pad_r) == dnnl_success &&
            api.attr_create(&attr) == dnnl_success &&
            api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            (!p->relu_post_ops || onednn::AppendRelu(api, attr)) &&
            api.primitive_desc_create(&pd, &desc, attr, lib.engine, nullptr) == dnnl_success;
  const char* impl = nullptr;
  if (ok && api.query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) {
    p->impl = impl;
  }
  if (ok && p->relu_post_ops && !unchecked && !ConvReluPostOpsChecked(lib, p->impl)) {
    ok = false;  // the post-ops are unchecked for this implementation: the caller's loop
  }
  const dnnl_memory_desc_t* weights = ok ? api.query_md(pd, dnnl_query_weights_md, 0) : nullptr;
  const dnnl_memory_desc_t* scratch = ok ? api.query_md(pd, dnnl_query_scratchpad_md, 0) : nullptr;
  const size_t scratch_size = scratch != nullptr ? api.memory_desc_get_size(scratch) : 0;
  const bool reorder = weights != nullptr && api.memory_desc_equal(weights, &w_plain) == 0;
  dnnl_primitive_desc_t reorder_pd = nullptr;
  if (ok && reorder) {
    p->w_bytes.reset(AlignedAlloc(api.memory_desc_get_size(weights)));
    ok = p->w_bytes != nullptr &&
         api.reorder_desc_create(&reorder_pd, &w_plain, lib.engine, weights, lib.engine, nullptr) ==
             dnnl_success &&
         api.primitive_create(&p->reorder, reorder_pd) == dnnl_success &&
         api.memory_create(&p->w, weights, lib.engine, p->w_bytes.get()) == dnnl_success;
  }
  if (ok && scratch_size > 0) {
    p->scratch_bytes.reset(AlignedAlloc(scratch_size));
    ok = p->scratch_bytes != nullptr && api.memory_create(&p->scratch, scratch, lib.engine,
                                                          p->scratch_bytes.get()) == dnnl_success;
  }
  ok = ok && api.primitive_create(&p->primitive, pd) == dnnl_success &&
       api.memory_create(&p->x, &x, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.memory_create(&p->w_plain, &w_plain, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       (k.bias_relu == 0 ||
        api.memory_create(&p->bias, &bias, lib.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
       api.memory_create(&p->y, &y, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.stream_create(&p->stream, lib.engine, dnnl_stream_default_flags) == dnnl_success;
  if (reorder_pd != nullptr) api.primitive_desc_destroy(reorder_pd);
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  if (attr != nullptr) api.attr_destroy(attr);
  return ok ? p : nullptr;
}

// The ReLU post-ops' check (as onednn_relu_check.cc's for the matmul): the convolution
// with them against the same convolution without them and braze::Relu after, on inputs
// and a bias holding NaN, infinities, signed zeros, subnormals and FLT_MAX, 37 output
// channels (a vector tail). Once per process; the implementations that passed are kept.
bool ConvReluPostOpsMatch(const Library& lib, std::string* impl) {
  ConvKey k{2, 5, 7, 7, 37, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false, 2, 1};
  std::shared_ptr<PreparedConv> fused = Prepare(lib, k, true, /*unchecked=*/true);
  k.bias_relu = 1;
  std::shared_ptr<PreparedConv> plain = Prepare(lib, k, false);
  if (fused == nullptr || plain == nullptr || !fused->relu_post_ops) return false;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const float specials[] = {nan, inf, -inf, -3.0f, 3.0f, -0.0f, 0.0f, -1e-40f, 1e-40f, big, -big};
  std::vector<float> x(2 * 7 * 7 * 5), w(3 * 3 * 5 * 37), bias(37), want(2 * 7 * 7 * 37),
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
  if (!Run(lib.api, *plain, x.data(), w.data(), bias.data(), want.data()) ||
      !Run(lib.api, *fused, x.data(), w.data(), bias.data(), got.data())) {
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
  static const std::string* passed = [&lib] {
    auto* name = new std::string;
    if (!ConvReluPostOpsMatch(lib, name)) name->clear();
    return name;
  }();
  if (!passed->empty() && *passed == impl) return true;
  static std::once_flag once;
  std::call_once(once, [&] {
    LogWarning(absl::StrCat("oneDNN's NaN-keeping ReLU post-ops are not confirmed for its '", impl,
                            "' convolution: the ReLU after it runs as a loop of the call's own"));
  });
  return false;
}

// The prepared primitive for `k`, made at its first use and kept (at most 256
// configurations, then the cache starts again; one in use lives on through its caller).
std::shared_ptr<PreparedConv> Lookup(const Library& lib, const ConvKey& k) {
  constexpr size_t kMaxPrepared = 256;
  static std::mutex mu;
  static auto* cache = new absl::flat_hash_map<ConvKey, std::shared_ptr<PreparedConv>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxPrepared) cache->clear();
  std::shared_ptr<PreparedConv> p = Prepare(lib, k, /*relu_post_ops=*/true);
  if (p == nullptr && k.bias_relu == 2) p = Prepare(lib, k, /*relu_post_ops=*/false);
  if (p != nullptr) cache->emplace(k, p);
  return p;
}

bool Run(const onednn::Api& api, PreparedConv& p, const float* x, const float* w, const float* bias,
         float* y) {
  if (api.set_data_handle(p.w_plain, const_cast<float*>(w)) != dnnl_success) return false;
  dnnl_memory_t weights = p.w_plain;
  if (p.reorder != nullptr) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p.w_plain}, {DNNL_ARG_TO, p.w}};
    if (api.primitive_execute(p.reorder, p.stream, 2, args) != dnnl_success) return false;
    weights = p.w;
  }
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p.x}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, p.y}};
  int nargs = 3;
  if (p.scratch != nullptr) args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch};
  if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
  return api.set_data_handle(p.x, const_cast<float*>(x)) == dnnl_success &&
         (p.bias == nullptr ||
          api.set_data_handle(p.bias, const_cast<float*>(bias)) == dnnl_success) &&
         api.set_data_handle(p.y, y) == dnnl_success &&
         api.primitive_execute(p.primitive, p.stream, nargs, args) == dnnl_success &&
         api.stream_wait(p.stream) == dnnl_success;
}
#endif

// The convolution's sizes, as the lowering passes them.
struct Geometry {
  bool nchw;
  int32_t c_in, in_h, in_w, c_out, kh, kw, groups;
  int32_t sh, sw, dh, dw, pt, pb, pl, pr;
  int bias_relu;
};

// Halide-order extents of x for `g` (dims 0-2; dim 3 is the batch).
void XExtents(const Geometry& g, int32_t* e) {
  if (g.nchw) {
    e[0] = g.in_w, e[1] = g.in_h, e[2] = g.c_in;
  } else {
    e[0] = g.c_in, e[1] = g.in_w, e[2] = g.in_h;
  }
}

void WExtents(const Geometry& g, int32_t* e) {
  e[0] = g.c_out, e[1] = g.c_in / g.groups, e[2] = g.kw, e[3] = g.kh;
}

// Every dim dense (dim 0 contiguous, each next one right after), dims 0-2 whole
// (`extents`), and for rank 4 the batch [n0, n0 + n) held.
bool Holds(const halide_buffer_t* b, int rank, const int32_t* extents, int64_t n0, int64_t n) {
  if (b->dimensions != rank || b->host == nullptr) return false;
  int64_t stride = 1;
  for (int d = 0; d < rank; ++d) {
    if (b->dim[d].extent > 1 && b->dim[d].stride != stride) return false;
    const bool batch = rank == 4 && d == 3;
    if (!batch && (b->dim[d].min != 0 || b->dim[d].extent != extents[d])) return false;
    if (batch && (b->dim[d].min > n0 || n0 + n > int64_t{b->dim[d].min} + b->dim[d].extent)) {
      return false;
    }
    stride *= b->dim[d].extent;
  }
  return true;
}

const float* Batch(const halide_buffer_t* b, int64_t n0) {
  return reinterpret_cast<const float*>(b->host) + (n0 - b->dim[3].min) * b->dim[3].stride;
}

int Conv(halide_buffer_t* x, halide_buffer_t* w, halide_buffer_t* bias, const Geometry& g,
         int32_t threads, halide_buffer_t* out) {
  int32_t xe[3], we[4];
  XExtents(g, xe);
  WExtents(g, we);
  if (IsBoundsQuery(x) || IsBoundsQuery(w) || IsBoundsQuery(bias) || IsBoundsQuery(out)) {
    if (IsBoundsQuery(x)) {
      for (int d = 0; d < 3; ++d) x->dim[d].min = 0, x->dim[d].extent = xe[d];
      x->dim[3].min = out->dim[3].min;
      x->dim[3].extent = out->dim[3].extent;
    }
    if (IsBoundsQuery(w)) Whole(w, we);
    // Without a bias the lowering hands the filter again in its place.
    if (IsBoundsQuery(bias)) Whole(bias, g.bias_relu != 0 ? &g.c_out : we);
    return 0;
  }
  const Library& lib = Loaded();
  if (!lib.status.ok()) return -1;
#if !BRAZE_HAVE_DNNL
  (void)threads;
  return -1;
#else
  const int64_t n0 = out->dim[3].min, n = out->dim[3].extent;
  if (n == 0) return 0;
  ConvKey k;
  k.nchw = g.nchw;
  k.n = n, k.c = g.c_in, k.h = g.in_h, k.w = g.in_w, k.o = g.c_out;
  k.oh = out->dim[g.nchw ? 1 : 2].extent;
  k.ow = out->dim[g.nchw ? 0 : 1].extent;
  k.kh = g.kh, k.kw = g.kw, k.g = g.groups;
  k.sh = g.sh, k.sw = g.sw, k.dh = g.dh, k.dw = g.dw;
  k.pt = g.pt, k.pb = g.pb, k.pl = g.pl, k.pr = g.pr;
  k.bias_relu = g.bias_relu;
  k.threads = threads;
  int32_t ye[3];
  if (g.nchw) {
    ye[0] = static_cast<int32_t>(k.ow), ye[1] = static_cast<int32_t>(k.oh), ye[2] = g.c_out;
  } else {
    ye[0] = g.c_out, ye[1] = static_cast<int32_t>(k.ow), ye[2] = static_cast<int32_t>(k.oh);
  }
  if (!Holds(x, 4, xe, n0, n) || !Holds(w, 4, we, 0, 0) || !Holds(out, 4, ye, n0, n) ||
      (g.bias_relu != 0 && !Holds(bias, 1, &g.c_out, 0, 0))) {
    return -2;
  }
  std::shared_ptr<PreparedConv> p = Lookup(lib, k);
  if (p == nullptr) return -3;
  if (lib.api.set_threads != nullptr && threads > 0) lib.api.set_threads(threads);
  std::lock_guard<std::mutex> lock(p->mu);
  float* y = const_cast<float*>(Batch(out, n0));
  const float* pb = g.bias_relu != 0 ? reinterpret_cast<const float*>(bias->host) : nullptr;
  if (!Run(lib.api, *p, Batch(x, n0), reinterpret_cast<const float*>(w->host), pb, y)) return -3;
  if (g.bias_relu == 2 && !p->relu_post_ops) {
    // braze::Relu (x < 0 ? 0 : x, NaN kept) where the post-ops are not checked.
    const int64_t count = n * k.o * k.oh * k.ow;
    for (int64_t i = 0; i < count; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
  }
  return 0;
#endif
}

}  // namespace

extern "C" __attribute__((visibility("hidden"))) int braze_cpu_conv_f32(
    halide_buffer_t* x, halide_buffer_t* w, halide_buffer_t* bias, int32_t nchw, int32_t c_in,
    int32_t in_h, int32_t in_w, int32_t c_out, int32_t kh, int32_t kw, int32_t groups,
    int32_t stride_h, int32_t stride_w, int32_t dilation_h, int32_t dilation_w, int32_t pad_top,
    int32_t pad_bottom, int32_t pad_left, int32_t pad_right, int32_t bias_relu, int32_t threads,
    halide_buffer_t* out) {
  const Geometry g{nchw != 0, c_in,       in_h,     in_w,      c_out,      kh,
                   kw,        groups,     stride_h, stride_w,  dilation_h, dilation_w,
                   pad_top,   pad_bottom, pad_left, pad_right, bias_relu};
  if (groups < 1 || c_in % groups != 0 || c_out % groups != 0) return -3;
  return Conv(x, w, bias, g, threads, out);
}

void* CpuConvF32Address() { return reinterpret_cast<void*>(&braze_cpu_conv_f32); }

}  // namespace braze
