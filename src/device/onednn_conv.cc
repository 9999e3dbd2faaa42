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
    for (dnnl_memory_t m : {x, w_plain, w, bias, y, scratch}) {
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
  dnnl_memory_t x = nullptr, w_plain = nullptr, w = nullptr, bias = nullptr, y = nullptr,
                scratch = nullptr;
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
  const bool fwd_bias = k.dir == kForward && k.bias_relu != 0;
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

// Null when oneDNN refuses the configuration. `relu_post_ops`: a bias_relu == 2 key's
// ReLU by the primitive, where ConvReluPostOpsChecked accepts its implementation (or
// `unchecked`: the check's own primitive).
std::shared_ptr<PreparedConv> Prepare(const Library& lib, const ConvKey& k, bool relu_post_ops,
                                      bool unchecked = false) {
  const Api& api = lib.api;
  auto p = std::make_shared<PreparedConv>(api);
  p->dir = k.dir;
  p->relu_post_ops = relu_post_ops && k.dir == kForward && k.bias_relu == 2;
  Descs d;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  bool ok = MakeDescs(api, k, &d) && api.attr_create(&attr) == dnnl_success &&
            api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            (!p->relu_post_ops || AppendRelu(api, attr)) &&
            (pd = ConvDesc(lib, k, d, attr)) != nullptr;
  const char* impl = nullptr;
  if (ok && api.query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) {
    p->impl = impl;
  }
  // The post-ops unchecked for this implementation: the caller's loop instead.
  if (ok && p->relu_post_ops && !unchecked && !ConvReluPostOpsChecked(lib, p->impl)) ok = false;
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
  const bool bias = k.dir == kForward && k.bias_relu != 0;
  ok = ok && api.primitive_create(&p->primitive, pd) == dnnl_success &&
       api.memory_create(&p->x, &d.x, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.memory_create(&p->w_plain, &d.w_plain, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       (!bias ||
        api.memory_create(&p->bias, &d.bias, lib.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
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

bool Run(const Api& api, PreparedConv& p, float* x, float* w, const float* bias, float* y) {
  if (api.set_data_handle(p.x, x) != dnnl_success || api.set_data_handle(p.y, y) != dnnl_success ||
      api.set_data_handle(p.w_plain, w) != dnnl_success ||
      (p.bias != nullptr &&
       api.set_data_handle(p.bias, const_cast<float*>(bias)) != dnnl_success)) {
    return false;
  }
  const dnnl_memory_t weights = p.reorder != nullptr ? p.w : p.w_plain;
  if (p.reorder != nullptr && p.dir != kBackwardWeights) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, p.w_plain}, {DNNL_ARG_TO, p.w}};
    if (!Execute(api, p, p.reorder, 2, args)) return false;
  }
  dnnl_exec_arg_t args[5];
  int nargs = 0;
  switch (p.dir) {
    case kForward:
      args[nargs++] = {DNNL_ARG_SRC, p.x};
      args[nargs++] = {DNNL_ARG_WEIGHTS, weights};
      args[nargs++] = {DNNL_ARG_DST, p.y};
      if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
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
  ConvKey k{2, 5, 7, 7,   37,  7,   7,   window, window, 1, 1,
            1, 1, 1, pad, pad, pad, pad, false,  2,      1, kForward};
  std::shared_ptr<PreparedConv> fused = Prepare(lib, k, true, /*unchecked=*/true);
  k.bias_relu = 1;
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
  if (p == nullptr && k.bias_relu == 2) p = Prepare(lib, k, /*relu_post_ops=*/false);
  if (p != nullptr) cache->emplace(k, p);
  return p;
}

bool RunConv(const Library& lib, PreparedConv& p, float* x, float* w, const float* bias, float* y) {
  std::lock_guard<std::mutex> lock(p.mu);
  return Run(lib.api, p, x, w, bias, y);
}

bool ConvAppliesRelu(const PreparedConv& p) { return p.relu_post_ops; }
#endif

}  // namespace onednn
}  // namespace braze
