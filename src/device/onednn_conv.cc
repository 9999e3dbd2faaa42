// oneDNN's convolution primitives; see onednn_conv.h.
//
// oneDNN describes x as N x C x H x W with any strides, so a Halide buffer of either
// format is handed over in place with its own strides. The filter is HWIO, which oneDNN
// reads as (G x) O x I x KH x KW with HWIO's strides; each primitive is made with the
// filter in the layout it prefers ("any") and a reorder to or from HWIO. An operand
// filter is reordered only when its bits differ from the last reordered one's
// (ReorderFilter: constant inference weights once; training changes the filter at every
// step); a filter gradient is reordered out at every call.
//
// Winograd (WinogradCandidate): oneDNN's F(4x4, 3x3) convolution reads and writes its
// blocked layout (nChw16c), so x and y are staged as the filter is: reordered into a
// buffer of the primitive's own before the call, or out of it after (a forward result by
// the call's own pass, FinishForward, which also scans it and applies the residual add
// and the ReLU, which are then no post-ops of the primitive's). Its transforms mix
// the 6x6 input tile of each 4x4 output tile, so a NaN or an infinity reaches outputs
// whose window does not hold it, and an infinity may become NaN: where the result holds
// any non-finite value the call is recomputed by the direct convolution (the result of
// every other path). A non-finite operand always gives a non-finite Winograd result
// somewhere (each transformed element reaches an output), so the special values are
// the direct convolution's; finite results differ from it by the rounding of the
// transforms (about 1e-6 of the operands' scale measured at 64 channels).
#include "device/onednn_conv.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "device/conv_output_pass.h"
#include "device/thread_pool.h"
#include "ir/logging.h"

namespace braze {
namespace onednn {

namespace {
// Under TSan the pass stays on Braze's pool: libgomp is not instrumented, so its
// barriers would not order the pass's writes for TSan (a false race).
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
std::atomic<bool> winograd_on{true};
std::atomic<int64_t> winograd_recomputes{0};
std::atomic<int64_t> filter_reorders{0};
std::atomic<int64_t> filter_copies{0};
}  // namespace

void SetWinograd(bool on) { winograd_on.store(on, std::memory_order_relaxed); }
bool WinogradOn() { return winograd_on.load(std::memory_order_relaxed); }
int64_t WinogradRecomputes() { return winograd_recomputes.load(std::memory_order_relaxed); }
int64_t FilterReorders() { return filter_reorders.load(std::memory_order_relaxed); }
int64_t FilterCopies() { return filter_copies.load(std::memory_order_relaxed); }

#if BRAZE_HAVE_DNNL
// A tensor the primitive reads or writes in a layout of its own while the caller holds it
// plain: a buffer in the primitive's layout and the reorder into it (an operand) or out
// of it (a result). `mem` null: the primitive uses the plain tensor in place.
struct Staged {
  dnnl_memory_t mem = nullptr;
  dnnl_primitive_t reorder = nullptr;
  std::unique_ptr<void, decltype(&std::free)> bytes{nullptr, &std::free};
};

struct PreparedConv {
  explicit PreparedConv(const Api& api) : api(api) {}
  ~PreparedConv() {
    for (dnnl_memory_t m : {x, w_plain, bias, residual, y, scratch, xs.mem, ws.mem, ys.mem}) {
      if (m != nullptr) api.memory_destroy(m);
    }
    for (dnnl_primitive_t r : {xs.reorder, ws.reorder, ys.reorder}) {
      if (r != nullptr) api.primitive_destroy(r);
    }
    if (stream != nullptr) api.stream_destroy(stream);
    if (primitive != nullptr) api.primitive_destroy(primitive);
  }
  PreparedConv(const PreparedConv&) = delete;
  PreparedConv& operator=(const PreparedConv&) = delete;

  const Api& api;
  int dir = kForward;
  std::mutex mu;  // one call at a time: the memory objects and scratchpad are shared
  dnnl_primitive_t primitive = nullptr;
  // The caller's tensors (plain), and x, the filter and y in the primitive's layouts
  // where they differ: the filter always but for a plain-preferring implementation, x
  // and y for Winograd's blocked layout.
  dnnl_memory_t x = nullptr, w_plain = nullptr, bias = nullptr, residual = nullptr, y = nullptr,
                scratch = nullptr;
  Staged xs, ws, ys;
  dnnl_stream_t stream = nullptr;
  bool relu_post_ops = false;
  std::string impl;  // oneDNN's name of the implementation ("brgconv:avx512_core")
  std::unique_ptr<void, decltype(&std::free)> scratch_bytes{nullptr, &std::free};
  // Winograd's: the direct convolution of the same key, recomputing a non-finite result,
  // and the result's element count.
  std::shared_ptr<PreparedConv> direct;
  int64_t result_elements = 0;
  // A Winograd forward call's own pass (FinishForward): y out of the primitive's blocked
  // layout, the scan for special values, then the residual add and the ReLU of `key`.
  // `blocked16`: y is nChw16c, which the pass reads itself; else oneDNN's reorder first.
  ConvKey key{};
  bool blocked16 = false;
  // The filter (plain HWIO) whose reorder `ws` holds, forward and backward data: a call
  // with the same filter bits (inference weights, a folded batch norm's filter computed
  // again at every run) reads ws as it is (ReorderFilter). Empty: none yet.
  // w_misses: the compares in a row that found another filter (up to kFilterMisses);
  // w_skipped: the reorders since, counted for the retry.
  std::vector<float> w_seen;
  int64_t w_elements = 0;
  int w_misses = 0;
  int64_t w_skipped = 0;
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
  dnnl_memory_desc_t x, y, w_plain, w_any, bias, x_any, y_any;
};

bool MakeDescs(const Api& api, const ConvKey& k, Descs* d) {
  dnnl_dims_t w_dims;
  const int w_rank = FilterDims(k, w_dims);
  const dnnl_dims_t bias_dims = {k.o};
  const dnnl_dims_t x_dims = {k.n, k.c, k.h, k.w}, y_dims = {k.n, k.o, k.oh, k.ow};
  return ActivationDesc(api, &d->x, k.n, k.c, k.h, k.w, k.nchw) &&
         api.memory_desc_init_by_tag(&d->x_any, 4, x_dims, dnnl_f32, dnnl_format_tag_any) ==
             dnnl_success &&
         api.memory_desc_init_by_tag(&d->y_any, 4, y_dims, dnnl_f32, dnnl_format_tag_any) ==
             dnnl_success &&
         ActivationDesc(api, &d->y, k.n, k.o, k.oh, k.ow, k.nchw) &&
         FilterDesc(api, &d->w_plain, k) &&
         api.memory_desc_init_by_tag(&d->w_any, w_rank, w_dims, dnnl_f32, dnnl_format_tag_any) ==
             dnnl_success &&
         api.memory_desc_init_by_tag(&d->bias, 1, bias_dims, dnnl_f32, dnnl_a) == dnnl_success;
}

// The primitive descriptor for `k` (and, for the backward ones, the forward one oneDNN
// takes as a hint), direct on the caller's layouts, or Winograd on the layouts it
// prefers. Null on a refusal; the caller destroys what it gets.
dnnl_primitive_desc_t ConvDesc(const Library& lib, const ConvKey& k, const Descs& d,
                               dnnl_primitive_attr_t attr, bool winograd) {
  const Api& api = lib.api;
  const dnnl_alg_kind_t alg = winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
  const dnnl_memory_desc_t* x = winograd ? &d.x_any : &d.x;
  const dnnl_memory_desc_t* y = winograd ? &d.y_any : &d.y;
  const dnnl_dims_t strides = {k.sh, k.sw}, dilates = {k.dh - 1, k.dw - 1};
  const dnnl_dims_t pad_l = {k.pt, k.pl}, pad_r = {k.pb, k.pr};
  const bool fwd_bias = k.dir == kForward && (k.post & kPostBias) != 0;
  dnnl_convolution_desc_t fwd;
  dnnl_primitive_desc_t fwd_pd = nullptr;
  if (api.conv_forward_desc_init(&fwd,
                                 k.dir == kForward ? dnnl_forward_inference : dnnl_forward_training,
                                 alg, x, &d.w_any, fwd_bias ? &d.bias : nullptr, y, strides,
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
           ? api.conv_backward_data_desc_init(&bwd, alg, x, &d.w_any, y, strides, dilates, pad_l,
                                              pad_r)
           : api.conv_backward_weights_desc_init(&bwd, alg, x, &d.w_any, nullptr, y, strides,
                                                 dilates, pad_l, pad_r)) == dnnl_success &&
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

// Stages a tensor the caller holds as `plain` for a primitive that wants `md`: nothing
// where they are equal, else a buffer of md's layout and the reorder into it (`operand`)
// or out of it. False on an error.
bool Stage(const Library& lib, const dnnl_memory_desc_t* plain, const dnnl_memory_desc_t* md,
           bool operand, Staged* s) {
  const Api& api = lib.api;
  if (md == nullptr) return false;
  if (api.memory_desc_equal(md, plain) != 0) return true;
  dnnl_primitive_desc_t pd = nullptr;
  s->bytes.reset(AlignedAlloc(api.memory_desc_get_size(md)));
  const bool ok =
      s->bytes != nullptr &&
      api.reorder_desc_create(&pd, operand ? plain : md, lib.engine, operand ? md : plain,
                              lib.engine, nullptr) == dnnl_success &&
      api.primitive_create(&s->reorder, pd) == dnnl_success &&
      api.memory_create(&s->mem, md, lib.engine, s->bytes.get()) == dnnl_success;
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  return ok;
}

// Null when oneDNN refuses the configuration. `relu_post_ops`: a kPostRelu key's ReLU
// by the primitive, where the check for its post-ops (ConvReluPostOpsChecked, or with a
// residual ConvResidualPostOpsChecked) accepts its implementation, or `unchecked`: the
// check's own primitive. A residual key's binary_add is always the primitive's: null
// where its check does not accept the implementation. `winograd`: oneDNN's Winograd
// algorithm on its own activation layouts (null where it refuses), else the direct one.
std::shared_ptr<PreparedConv> Prepare(const Library& lib, const ConvKey& k, bool relu_post_ops,
                                      bool unchecked = false, bool winograd = false) {
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
            (pd = ConvDesc(lib, k, d, attr, winograd)) != nullptr;
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
  // Each tensor in the primitive's layout: an operand reordered in, a result out.
  const bool fwd = k.dir == kForward, data = k.dir == kBackwardData;
  auto md = [&](dnnl_query_t what) { return ok ? api.query_md(pd, what, 0) : nullptr; };
  ok = ok &&
       Stage(lib, &d.w_plain, md(fwd || data ? dnnl_query_weights_md : dnnl_query_diff_weights_md),
             fwd || data, &p->ws) &&
       Stage(lib, &d.x, md(data ? dnnl_query_diff_src_md : dnnl_query_src_md), !data, &p->xs) &&
       Stage(lib, &d.y, md(fwd ? dnnl_query_dst_md : dnnl_query_diff_dst_md), !fwd, &p->ys);
  if (ok && winograd && fwd && p->ys.mem != nullptr) {
    // nChw16c (channels padded to 16): FinishForward reads it itself.
    const dnnl_dims_t y_dims = {k.n, k.o, k.oh, k.ow};
    dnnl_memory_desc_t b16;
    p->blocked16 =
        api.memory_desc_init_by_tag(&b16, 4, y_dims, dnnl_f32, dnnl_nChw16c) == dnnl_success &&
        api.memory_desc_equal(md(dnnl_query_dst_md), &b16) != 0;
  }
  p->w_elements = k.kh * k.kw * (k.c / k.g) * k.o;
  p->result_elements = fwd    ? k.n * k.o * k.oh * k.ow
                       : data ? k.n * k.c * k.h * k.w
                              : k.kh * k.kw * (k.c / k.g) * k.o;
  const dnnl_memory_desc_t* scratch = ok ? api.query_md(pd, dnnl_query_scratchpad_md, 0) : nullptr;
  const size_t scratch_size = scratch != nullptr ? api.memory_desc_get_size(scratch) : 0;
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
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  if (attr != nullptr) api.attr_destroy(attr);
  return ok ? p : nullptr;
}

bool Execute(const Api& api, PreparedConv& p, dnnl_primitive_t primitive, int nargs,
             dnnl_exec_arg_t* args) {
  return api.primitive_execute(primitive, p.stream, nargs, args) == dnnl_success;
}

// Reorders a staged tensor between the caller's `plain` memory and the primitive's
// layout: in (before the call) or out (after it). Nothing where it is not staged.
bool Reorder(const Api& api, PreparedConv& p, const Staged& s, dnnl_memory_t plain, bool in) {
  if (s.reorder == nullptr) return true;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, in ? plain : s.mem},
                             {DNNL_ARG_TO, in ? s.mem : plain}};
  return Execute(api, p, s.reorder, 2, args);
}

// Reorders the filter `w` (plain, HWIO) into p's layout unless ws already holds it: the
// same bits as at the last reorder. A comparison reads the filter twice (a few KiB to a
// few MiB, stopping at the first difference); the reorder is a parallel oneDNN call that
// reads and writes it and synchronizes the threads (0.2-0.3 ms at 3x3x64x64 on the
// 2-vCPU VM idle, several ms under load), at every call before. Exact: bits compared,
// no hash. A filter that differed at its last kFilterMisses compares (one trained every
// step) is not copied again but at one call in kFilterRetry, so training pays a copy
// and a compare once in 16 steps, and a filter that stops changing is found again.
constexpr int kFilterMisses = 2;
constexpr int64_t kFilterRetry = 16;

bool ReorderFilter(const Api& api, PreparedConv& p, const float* w) {
  const size_t bytes = static_cast<size_t>(p.w_elements) * sizeof(float);
  if (!p.w_seen.empty()) {
    if (std::memcmp(p.w_seen.data(), w, bytes) == 0) {
      p.w_misses = 0;
      return true;
    }
    p.w_misses = std::min(p.w_misses + 1, kFilterMisses);
  }
  p.w_seen.clear();
  if (!Reorder(api, p, p.ws, p.w_plain, true)) return false;
  filter_reorders.fetch_add(1, std::memory_order_relaxed);
  if (p.w_misses < kFilterMisses || ++p.w_skipped % kFilterRetry == 0) {
    p.w_seen.assign(w, w + p.w_elements);
    filter_copies.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

// `result_out` false: a forward result stays in the primitive's layout (FinishForward).
bool Run(const Api& api, PreparedConv& p, float* x, float* w, const float* bias,
         const float* residual, float* y, bool result_out = true) {
  if (api.set_data_handle(p.x, x) != dnnl_success || api.set_data_handle(p.y, y) != dnnl_success ||
      api.set_data_handle(p.w_plain, w) != dnnl_success ||
      (p.bias != nullptr &&
       api.set_data_handle(p.bias, const_cast<float*>(bias)) != dnnl_success) ||
      (p.residual != nullptr &&
       api.set_data_handle(p.residual, const_cast<float*>(residual)) != dnnl_success)) {
    return false;
  }
  const bool fwd = p.dir == kForward, data = p.dir == kBackwardData;
  const bool filter_ok = p.ws.reorder == nullptr ? true
                         : fwd || data           ? ReorderFilter(api, p, w)
                                                 : true;
  if (!filter_ok || (!data && !Reorder(api, p, p.xs, p.x, true)) ||
      (!fwd && !Reorder(api, p, p.ys, p.y, true))) {
    return false;
  }
  const dnnl_memory_t xm = p.xs.mem != nullptr ? p.xs.mem : p.x;
  const dnnl_memory_t ym = p.ys.mem != nullptr ? p.ys.mem : p.y;
  const dnnl_memory_t weights = p.ws.mem != nullptr ? p.ws.mem : p.w_plain;
  dnnl_exec_arg_t args[6];
  int nargs = 0;
  switch (p.dir) {
    case kForward:
      args[nargs++] = {DNNL_ARG_SRC, xm};
      args[nargs++] = {DNNL_ARG_WEIGHTS, weights};
      args[nargs++] = {DNNL_ARG_DST, ym};
      if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
      // The residual's binary_add is post-op 0 (the ReLU's come after it).
      if (p.residual != nullptr) {
        args[nargs++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p.residual};
      }
      break;
    case kBackwardData:
      args[nargs++] = {DNNL_ARG_DIFF_DST, ym};
      args[nargs++] = {DNNL_ARG_WEIGHTS, weights};
      args[nargs++] = {DNNL_ARG_DIFF_SRC, xm};
      break;
    default:
      args[nargs++] = {DNNL_ARG_SRC, xm};
      args[nargs++] = {DNNL_ARG_DIFF_DST, ym};
      args[nargs++] = {DNNL_ARG_DIFF_WEIGHTS, weights};
      break;
  }
  if (p.scratch != nullptr) args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch};
  if (!Execute(api, p, p.primitive, nargs, args)) return false;
  const bool out_ok = fwd    ? !result_out || Reorder(api, p, p.ys, p.y, false)
                      : data ? Reorder(api, p, p.xs, p.x, false)
                             : Reorder(api, p, p.ws, p.w_plain, false);
  return out_ok && api.stream_wait(p.stream) == dnnl_success;
}

// Whether any of the `n` floats at `v` is NaN or infinite (all exponent bits set), in
// chunks on Braze's pool: a Winograd result is read once more, about a tenth of the time
// the algorithm saves at 64 channels.
bool AnyNonFinite(const float* v, int64_t n) {
  constexpr int64_t kChunk = 1 << 16;
  struct Scan {
    const float* v;
    int64_t n;
    std::atomic<bool> found{false};
  } scan{v, n};
  auto task = [](void*, int i, uint8_t* closure) {
    Scan& s = *reinterpret_cast<Scan*>(closure);
    const int64_t begin = int64_t{i} * kChunk, end = std::min(s.n, begin + kChunk);
    uint32_t all_ones = 0;
    for (int64_t j = begin; j < end; ++j) {
      uint32_t bits;
      std::memcpy(&bits, s.v + j, sizeof(bits));
      all_ones |= (~bits & 0x7f800000u) == 0 ? 1u : 0u;
    }
    if (all_ones != 0) s.found.store(true, std::memory_order_relaxed);
    return 0;
  };
  const int chunks = static_cast<int>((n + kChunk - 1) / kChunk);
  device::ParallelFor(nullptr, task, 0, chunks, reinterpret_cast<uint8_t*>(&scan));
  return scan.found.load();
}

// braze::Relu (x < 0 ? 0 : x: NaN kept) over `n` floats, in place.
void ReluLoop(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

// Finishes a Winograd forward call whose result is still in the primitive's layout
// (Run with result_out false). `special`: conv + bias held a NaN or an infinity.
bool FinishForward(const Api& api, PreparedConv& p, const float* residual, float* y,
                   bool* special) {
  const ConvKey& k = p.key;
  const bool blocked = p.ys.mem != nullptr && p.blocked16;
  if (p.ys.mem != nullptr && !blocked) {
    if (!Reorder(api, p, p.ys, p.y, false) || api.stream_wait(p.stream) != dnnl_success) {
      return false;
    }
  }
  ConvOutputPass pass{blocked ? static_cast<const float*>(p.ys.bytes.get()) : y,
                      blocked,
                      k.nchw,
                      (k.post & kPostRelu) != 0,
                      (k.post & kPostResidual) != 0 ? residual : nullptr,
                      y,
                      k.o,
                      k.oh,
                      k.ow};
  const int rows = static_cast<int>(k.n * k.oh);
  if (api.omp_parallel != nullptr && !kThreadSanitizer) {
    // On oneDNN's OpenMP team, which the primitive just used and which spins for a while
    // after it: the pass on Braze's pool took the cores from those spinning threads (1 ms
    // of a 15 ms call at 56x56x64, batch 32: docs/CONVOLUTIONS.md). Contiguous rows a
    // thread, as the reorder the pass replaces splits them.
    struct Team {
      const Api* api;
      ConvOutputPass* pass;
      int rows;
    } team{&api, &pass, rows};
    api.omp_parallel(
        [](void* data) {
          Team& t = *static_cast<Team*>(data);
          const int n = t.api->omp_num_threads(), i = t.api->omp_thread_num();
          const int per = (t.rows + n - 1) / n;
          for (int r = i * per; r < std::min(t.rows, (i + 1) * per); ++r) {
            t.pass->Row(r / t.pass->oh, r % t.pass->oh);
          }
        },
        &team, 0, 0);
  } else {
    auto task = [](void*, int i, uint8_t* closure) {
      ConvOutputPass& f = *reinterpret_cast<ConvOutputPass*>(closure);
      f.Row(i / f.oh, i % f.oh);
      return 0;
    };
    device::ParallelFor(nullptr, task, 0, rows, reinterpret_cast<uint8_t*>(&pass));
  }
  *special = pass.special.load();
  return true;
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

bool WinogradCandidate(const ConvKey& k) {
  return k.winograd && k.kh == 3 && k.kw == 3 && k.sh == 1 && k.sw == 1 && k.dh == 1 && k.dw == 1 &&
         k.g == 1 && k.c >= 64 && k.o >= 64 && k.pt <= 1 && k.pb <= 1 && k.pl <= 1 && k.pr <= 1;
}

std::shared_ptr<PreparedConv> LookupConv(const Library& lib, const ConvKey& k) {
  constexpr size_t kMaxPrepared = 256;
  static std::mutex mu;
  static auto* cache = new absl::flat_hash_map<ConvKey, std::shared_ptr<PreparedConv>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxPrepared) cache->clear();
  ConvKey direct_key = k;
  direct_key.winograd = false;
  std::shared_ptr<PreparedConv> p;
  if (k.winograd) {
    auto direct = cache->find(direct_key);
    p = direct != cache->end() ? direct->second : nullptr;
  }
  if (p == nullptr) {
    p = Prepare(lib, direct_key, /*relu_post_ops=*/true);
    if (p == nullptr && (k.post & kPostRelu) != 0) {
      p = Prepare(lib, direct_key, /*relu_post_ops=*/false);
    }
    if (p == nullptr) return nullptr;
    cache->emplace(direct_key, p);
  }
  if (WinogradCandidate(k)) {
    // The primitive computes conv + bias; a forward call's residual and ReLU are its own
    // pass's (FinishForward), so that they see the same special values as the direct
    // convolution's post-ops.
    ConvKey primitive_key = k;
    if (k.dir == kForward) primitive_key.post &= kPostBias;
    std::shared_ptr<PreparedConv> wino = Prepare(lib, primitive_key, /*relu_post_ops=*/false,
                                                 /*unchecked=*/false, /*winograd=*/true);
    if (wino != nullptr) {
      wino->key = k;
      wino->relu_post_ops = k.dir == kForward && (k.post & kPostRelu) != 0;
      wino->direct = p;
      p = wino;
    }
  }
  if (k.winograd) cache->emplace(k, p);
  return p;
}

bool RunConv(const Library& lib, PreparedConv& p, float* x, float* w, const float* bias,
             const float* residual, float* y) {
  std::lock_guard<std::mutex> lock(p.mu);
  // A Winograd forward result: out of its layout, scanned, the residual and ReLU applied,
  // in one pass of the call's own.
  const bool own_pass = p.direct != nullptr && p.dir == kForward;
  // The pass writes y before its scan can send the call to the direct convolution, which
  // reads the residual again: a residual in y's memory takes the direct one at once.
  const int64_t n = p.result_elements;
  if (own_pass && residual != nullptr && residual < y + n && y < residual + n) {
    std::lock_guard<std::mutex> direct_lock(p.direct->mu);
    if (!Run(lib.api, *p.direct, x, w, bias, residual, y)) return false;
    if (p.relu_post_ops && !p.direct->relu_post_ops) ReluLoop(y, n);
    return true;
  }
  if (!Run(lib.api, p, x, w, bias, residual, y, /*result_out=*/!own_pass)) return false;
  if (p.direct == nullptr) return true;
  bool special = false;
  if (own_pass) {
    if (!FinishForward(lib.api, p, residual, y, &special)) return false;
  } else {
    const float* result = p.dir == kBackwardData ? x : w;
    special = AnyNonFinite(result, p.result_elements);
  }
  if (!special) return true;
  // Winograd's transforms spread a NaN or an infinity over its tiles: the direct
  // convolution's result instead (onednn_conv.cc's opening comment).
  if (winograd_recomputes.fetch_add(1, std::memory_order_relaxed) == 0) {
    LogInfo(1,
            "oneDNN's Winograd convolution gave a NaN or an infinity: recomputed by its direct "
            "convolution (every such call is)");
  }
  std::lock_guard<std::mutex> direct_lock(p.direct->mu);
  if (!Run(lib.api, *p.direct, x, w, bias, residual, y)) return false;
  // The Winograd call promised the ReLU (ConvAppliesRelu); the direct one may leave it.
  if (p.relu_post_ops && !p.direct->relu_post_ops) ReluLoop(y, p.result_elements);
  return true;
}

bool ConvAppliesRelu(const PreparedConv& p) { return p.relu_post_ops; }

const std::string& ConvImplementation(const PreparedConv& p) { return p.impl; }
#endif

}  // namespace onednn
}  // namespace braze
