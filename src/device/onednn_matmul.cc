// oneDNN's matmul primitive; see onednn_matmul.h.
#include "device/onednn_matmul.h"

#include <dlfcn.h>

#include <array>

#include "absl/strings/str_cat.h"
#include "device/openmp_wait.h"
#include "ir/logging.h"

namespace braze {
namespace onednn {
namespace {

#if BRAZE_HAVE_DNNL
template <typename F>
bool Find(void* handle, const char* symbol, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, symbol));
  return *fn != nullptr;
}

#endif

}  // namespace

const Library& Loaded() {
  static const Library* library = [] {
    auto* lib = new Library;
#if !BRAZE_HAVE_DNNL
    lib->status = absl::FailedPreconditionError(
        "this build of Braze has no oneDNN headers (Debian's libdnnl-dev): matmuls compile as "
        "Halide loops");
#else
    void* handle = nullptr;
    for (const char* so : {"libdnnl.so.2", "libdnnl.so"}) {
      handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
    }
    if (handle == nullptr) {
      lib->status = absl::FailedPreconditionError(
          "oneDNN is not installed (no libdnnl.so.2: Debian's libdnnl2): matmuls compile as "
          "Halide loops");
      return lib;
    }
    Api& a = lib->api;
    const bool found =
        Find(handle, "dnnl_engine_create", &a.engine_create) &&
        Find(handle, "dnnl_stream_create", &a.stream_create) &&
        Find(handle, "dnnl_stream_wait", &a.stream_wait) &&
        Find(handle, "dnnl_memory_desc_init_by_strides", &a.memory_desc_init) &&
        Find(handle, "dnnl_memory_desc_init_by_tag", &a.memory_desc_init_by_tag) &&
        Find(handle, "dnnl_memory_desc_equal", &a.memory_desc_equal) &&
        Find(handle, "dnnl_memory_create", &a.memory_create) &&
        Find(handle, "dnnl_memory_set_data_handle", &a.set_data_handle) &&
        Find(handle, "dnnl_matmul_desc_init", &a.matmul_desc_init) &&
        Find(handle, "dnnl_primitive_desc_create", &a.primitive_desc_create) &&
        Find(handle, "dnnl_reorder_primitive_desc_create", &a.reorder_desc_create) &&
        Find(handle, "dnnl_primitive_desc_destroy", &a.primitive_desc_destroy) &&
        Find(handle, "dnnl_primitive_create", &a.primitive_create) &&
        Find(handle, "dnnl_primitive_execute", &a.primitive_execute) &&
        Find(handle, "dnnl_primitive_destroy", &a.primitive_destroy) &&
        Find(handle, "dnnl_primitive_attr_create", &a.attr_create) &&
        Find(handle, "dnnl_primitive_attr_destroy", &a.attr_destroy) &&
        Find(handle, "dnnl_primitive_attr_set_scratchpad_mode", &a.attr_set_scratchpad_mode) &&
        Find(handle, "dnnl_primitive_attr_set_post_ops", &a.attr_set_post_ops) &&
        Find(handle, "dnnl_post_ops_create", &a.post_ops_create) &&
        Find(handle, "dnnl_post_ops_append_eltwise", &a.post_ops_append_eltwise) &&
        Find(handle, "dnnl_post_ops_append_binary", &a.post_ops_append_binary) &&
        Find(handle, "dnnl_post_ops_destroy", &a.post_ops_destroy) &&
        Find(handle, "dnnl_primitive_desc_query", &a.query) &&
        Find(handle, "dnnl_primitive_desc_query_md", &a.query_md) &&
        Find(handle, "dnnl_memory_desc_get_size", &a.memory_desc_get_size) &&
        Find(handle, "dnnl_memory_destroy", &a.memory_destroy) &&
        Find(handle, "dnnl_stream_destroy", &a.stream_destroy) &&
        Find(handle, "dnnl_version", &a.version) &&
        Find(handle, "dnnl_dilated_convolution_forward_desc_init", &a.conv_forward_desc_init) &&
        Find(handle, "dnnl_dilated_convolution_backward_data_desc_init",
             &a.conv_backward_data_desc_init) &&
        Find(handle, "dnnl_dilated_convolution_backward_weights_desc_init",
             &a.conv_backward_weights_desc_init);
    // Absent with oneDNN's TBB build.
    if (!Find(handle, "omp_set_num_threads", &a.set_threads) ||
        !Find(handle, "omp_get_max_threads", &a.get_threads)) {
      a.set_threads = nullptr;
      a.get_threads = nullptr;
    }
    if (!Find(handle, "GOMP_parallel", &a.omp_parallel) ||
        !Find(handle, "omp_get_thread_num", &a.omp_thread_num) ||
        !Find(handle, "omp_get_num_threads", &a.omp_num_threads)) {
      a.omp_parallel = nullptr;  // all three or none
    }
    if (!found || a.engine_create(&lib->engine, dnnl_cpu, 0) != dnnl_success) {
      lib->status = absl::FailedPreconditionError(
          "libdnnl lacks the matmul C API of oneDNN 2 or has no CPU engine: matmuls compile "
          "as Halide loops");
      return lib;
    }
    const dnnl_version_t* v = a.version();
    lib->name = absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch);
    // libgomp came with oneDNN, configured by what openmp_wait.cc decided before main.
    const std::string wait_warning = OpenMpWaitWarning(ProcessOpenMpWait());
    if (!wait_warning.empty()) LogWarning(wait_warning);
#endif
    return lib;
  }();
  return *library;
}

#if BRAZE_HAVE_DNNL
// The ReLU as oneDNN post-ops that keep NaN, as braze::Relu does. oneDNN's own ReLU
// (alpha 0) is max(x, 0), which turns NaN into 0, as do its clip and binary max. ELU
// with alpha 0 is x > 0 ? x : 0 * (exp(x) - 1): x itself above 0, -0 for every other
// finite x and for -inf (exp(-inf) - 1 = -1); the linear x * 1 + 0 then makes that -0 a
// 0. NaN stays NaN only through how oneDNN 2.6's x64 exp works: it clamps its argument
// with a min that makes NaN ln(FLT_MAX), whose exp overflows to inf, and 0 * inf is
// NaN. An exp that did not overflow there would give 0. That is why the post-ops are
// used only for the implementations the self-test (onednn_relu_check.cc) has checked
// (ReluPostOpsChecked). Their exp costs about 3% at 1024^3 over oneDNN's ReLU; a
// separate pass over the product cost 5% (docs/CPU_GEMM.md).
bool AppendReluOps(const Api& api, dnnl_post_ops_t ops) {
  return api.post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_elu, 0.0f, 0.0f) == dnnl_success &&
         api.post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, 1.0f, 0.0f) == dnnl_success;
}

bool AppendRelu(const Api& api, dnnl_primitive_attr_t attr) {
  dnnl_post_ops_t ops = nullptr;
  const bool ok = api.post_ops_create(&ops) == dnnl_success && AppendReluOps(api, ops) &&
                  api.attr_set_post_ops(attr, ops) == dnnl_success;
  if (ops != nullptr) api.post_ops_destroy(ops);
  return ok;
}

// Null when oneDNN refuses the configuration. `relu_post_ops`: a kBiasRelu key's ReLU
// by the primitive (else by the caller). `pack_weights`: b in the layout oneDNN prefers
// (its "any" format); null as well when that is b's own row-major layout.
std::shared_ptr<Prepared> Prepare(const Library& lib, const GemmKey& g, bool relu_post_ops,
                                  bool pack_weights) {
  const Api& api = lib.api;
  dnnl_memory_desc_t a, b, b_any, bias, c;
  // One matrix: 2-D descriptors; a batch: 3-D ones, the batch outermost with its strides
  // (the bias broadcast over it). Packing is for one matrix only.
  const bool batched = g.batch > 1 && !pack_weights;
  const int nd = batched ? 3 : 2;
  auto dims = [&](int64_t rows, int64_t cols) {
    std::array<int64_t, DNNL_MAX_NDIMS> d{};
    if (batched) {
      d[0] = g.batch;
      d[1] = rows;
      d[2] = cols;
    } else {
      d[0] = rows;
      d[1] = cols;
    }
    return d;
  };
  auto strides = [&](int64_t batch_stride, int64_t row, int64_t col) {
    return batched ? std::array<int64_t, DNNL_MAX_NDIMS>{batch_stride, row, col}
                   : std::array<int64_t, DNNL_MAX_NDIMS>{row, col};
  };
  const auto a_dims = dims(g.m, g.k), b_dims = dims(g.k, g.n), c_dims = dims(g.m, g.n);
  const auto a_strides = strides(g.batch_a, g.ta ? 1 : g.lda, g.ta ? g.lda : 1);
  const auto b_strides = strides(g.batch_b, g.tb ? 1 : g.ldb, g.tb ? g.ldb : 1);
  const auto c_strides = strides(g.batch_c, g.ldc, 1);
  const auto bias_dims = batched ? std::array<int64_t, DNNL_MAX_NDIMS>{1, 1, g.n}
                                 : std::array<int64_t, DNNL_MAX_NDIMS>{1, g.n};
  const auto bias_strides = batched ? std::array<int64_t, DNNL_MAX_NDIMS>{g.n, g.n, 1}
                                    : std::array<int64_t, DNNL_MAX_NDIMS>{g.n, 1};
  const bool has_bias = g.epilogue != kNoEpilogue;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  auto p = std::make_shared<Prepared>(api);
  p->relu_post_ops = relu_post_ops && g.epilogue == kBiasRelu;
  bool ok =
      api.memory_desc_init(&a, nd, a_dims.data(), g.ab, a_strides.data()) == dnnl_success &&
      api.memory_desc_init(&b, nd, b_dims.data(), g.ab, b_strides.data()) == dnnl_success &&
      api.memory_desc_init(&bias, nd, bias_dims.data(), g.c, bias_strides.data()) == dnnl_success &&
      api.memory_desc_init(&c, nd, c_dims.data(), g.c, c_strides.data()) == dnnl_success &&
      (!pack_weights || api.memory_desc_init_by_tag(&b_any, nd, b_dims.data(), g.ab,
                                                    dnnl_format_tag_any) == dnnl_success) &&
      api.matmul_desc_init(&desc, &a, pack_weights ? &b_any : &b, has_bias ? &bias : nullptr, &c) ==
          dnnl_success &&
      api.attr_create(&attr) == dnnl_success &&
      api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
      (!p->relu_post_ops || AppendRelu(api, attr)) &&
      api.primitive_desc_create(&pd, &desc, attr, lib.engine, nullptr) == dnnl_success;
  const char* impl = nullptr;
  if (ok && api.query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) {
    p->impl = impl;
  }
  p->plain_b = b;
  // The layout oneDNN chose for b: the packed one, or b's own (nothing to pack).
  const dnnl_memory_desc_t* weights = ok ? api.query_md(pd, dnnl_query_weights_md, 0) : nullptr;
  if (pack_weights) {
    ok = ok && weights != nullptr && api.memory_desc_equal(weights, &b) == 0;
    p->packed_b_bytes = ok ? api.memory_desc_get_size(weights) : 0;
    if (ok) p->packed_b = *weights;
  }
  const dnnl_memory_desc_t* scratch = ok ? api.query_md(pd, dnnl_query_scratchpad_md, 0) : nullptr;
  const size_t scratch_size = scratch != nullptr ? api.memory_desc_get_size(scratch) : 0;
  if (scratch_size > 0) {
    constexpr size_t kAlign = 4096;
    p->scratch_bytes.reset(
        std::aligned_alloc(kAlign, (scratch_size + kAlign - 1) / kAlign * kAlign));
    ok = ok && p->scratch_bytes != nullptr;
  }
  ok = ok && api.primitive_create(&p->primitive, pd) == dnnl_success &&
       api.memory_create(&p->a, &a, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       api.memory_create(&p->b, pack_weights ? weights : &b, lib.engine, DNNL_MEMORY_NONE) ==
           dnnl_success &&
       (!has_bias ||
        api.memory_create(&p->bias, &bias, lib.engine, DNNL_MEMORY_NONE) == dnnl_success) &&
       api.memory_create(&p->c, &c, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
       (scratch_size == 0 || api.memory_create(&p->scratch, scratch, lib.engine,
                                               p->scratch_bytes.get()) == dnnl_success) &&
       api.stream_create(&p->stream, lib.engine, dnnl_stream_default_flags) == dnnl_success;
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  if (attr != nullptr) api.attr_destroy(attr);
  return ok ? p : nullptr;
}

// A reorder primitive made, run and destroyed here: packing is once per constant, and a
// primitive made on this thread may run on it with oneDNN's own scratchpad.
std::shared_ptr<void> PackWeights(const Library& lib, Prepared& p, const void* b) {
  const Api& api = lib.api;
  constexpr size_t kAlign = 4096;
  std::shared_ptr<void> packed(
      std::aligned_alloc(kAlign, (p.packed_b_bytes + kAlign - 1) / kAlign * kAlign), &std::free);
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t reorder = nullptr;
  dnnl_memory_t from = nullptr;
  bool ok =
      p.packed_b_bytes > 0 && packed != nullptr &&
      api.memory_create(&from, &p.plain_b, lib.engine, const_cast<void*>(b)) == dnnl_success &&
      api.set_data_handle(p.b, packed.get()) == dnnl_success &&
      api.reorder_desc_create(&pd, &p.plain_b, lib.engine, &p.packed_b, lib.engine, nullptr) ==
          dnnl_success &&
      api.primitive_create(&reorder, pd) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, p.b}};
    ok = api.primitive_execute(reorder, p.stream, 2, args) == dnnl_success &&
         api.stream_wait(p.stream) == dnnl_success;
  }
  if (reorder != nullptr) api.primitive_destroy(reorder);
  if (pd != nullptr) api.primitive_desc_destroy(pd);
  if (from != nullptr) api.memory_destroy(from);
  return ok ? packed : nullptr;
}

// c = a b (+ bias) on one matrix each (row-major, leading dimensions in the primitive;
// elements of the key's types). False on an error. The caller holds p->mu.
bool RunGemm(const Api& api, Prepared& p, const void* a, const void* b, const void* bias, void* c) {
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
  int nargs = 3;
  if (p.scratch != nullptr) args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch};
  if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
  return api.set_data_handle(p.a, const_cast<void*>(a)) == dnnl_success &&
         api.set_data_handle(p.b, const_cast<void*>(b)) == dnnl_success &&
         (p.bias == nullptr ||
          api.set_data_handle(p.bias, const_cast<void*>(bias)) == dnnl_success) &&
         api.set_data_handle(p.c, c) == dnnl_success &&
         api.primitive_execute(p.primitive, p.stream, nargs, args) == dnnl_success &&
         api.stream_wait(p.stream) == dnnl_success;
}
#endif

}  // namespace onednn
}  // namespace braze
