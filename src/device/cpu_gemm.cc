// CPU GEMMs through oneDNN; see cpu_gemm.h.
//
// Halide buffers are column-major in Halide's dim order, which is Braze's row-major:
// dim 0 is a row's contiguous run, dim 1's stride is the leading dimension. So a
// Halide [n, m] buffer is the row-major m x n matrix oneDNN's matmul describes with
// strides {ld, 1}, a transposed operand with {1, ld}, and no operand is swapped
// (cublas_gemm.cc, column-major, has to swap them).
#include "device/cpu_gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "HalideRuntime.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/logging.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define BRAZE_HAVE_DNNL 1
#else
#define BRAZE_HAVE_DNNL 0
#endif

namespace braze {
namespace {

#if BRAZE_HAVE_DNNL
// The oneDNN C functions used, looked up in the dlopen'ed library (the header gives
// their types only).
struct Api {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_set_data_handle) set_data_handle = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_primitive_destroy) primitive_destroy = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_scratchpad_mode) attr_set_scratchpad_mode = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops = nullptr;
  decltype(&dnnl_post_ops_create) post_ops_create = nullptr;
  decltype(&dnnl_post_ops_append_eltwise) post_ops_append_eltwise = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_primitive_desc_query) query = nullptr;
  decltype(&dnnl_primitive_desc_query_md) query_md = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_version) version = nullptr;
  void (*set_threads)(int) = nullptr;  // libgomp's omp_set_num_threads (oneDNN's runtime)
};
#endif

struct Library {
  absl::Status status;
  std::string name;
#if BRAZE_HAVE_DNNL
  Api api;
  dnnl_engine_t engine = nullptr;
#endif
};

#if BRAZE_HAVE_DNNL
template <typename F>
bool Find(void* handle, const char* symbol, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, symbol));
  return *fn != nullptr;
}
#endif

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
        Find(handle, "dnnl_memory_create", &a.memory_create) &&
        Find(handle, "dnnl_memory_set_data_handle", &a.set_data_handle) &&
        Find(handle, "dnnl_matmul_desc_init", &a.matmul_desc_init) &&
        Find(handle, "dnnl_primitive_desc_create", &a.primitive_desc_create) &&
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
        Find(handle, "dnnl_post_ops_destroy", &a.post_ops_destroy) &&
        Find(handle, "dnnl_primitive_desc_query", &a.query) &&
        Find(handle, "dnnl_primitive_desc_query_md", &a.query_md) &&
        Find(handle, "dnnl_memory_desc_get_size", &a.memory_desc_get_size) &&
        Find(handle, "dnnl_memory_destroy", &a.memory_destroy) &&
        Find(handle, "dnnl_stream_destroy", &a.stream_destroy) &&
        Find(handle, "dnnl_version", &a.version);
    Find(handle, "omp_set_num_threads", &a.set_threads);  // absent with oneDNN's TBB build
    if (!found || a.engine_create(&lib->engine, dnnl_cpu, 0) != dnnl_success) {
      lib->status = absl::FailedPreconditionError(
          "libdnnl lacks the matmul C API of oneDNN 2 or has no CPU engine: matmuls compile "
          "as Halide loops");
      return lib;
    }
    const dnnl_version_t* v = a.version();
    lib->name = absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch);
#endif
    return lib;
  }();
  return *library;
}

#if BRAZE_HAVE_DNNL
// What the primitive does after the product (the extern's `bias` and `relu`).
enum Epilogue : int { kNoEpilogue = 0, kBias = 1, kBiasRelu = 2 };

// One GEMM configuration: sizes, leading dimensions, transposes, epilogue and thread
// count (a primitive's partitioning is fixed when it is created).
struct GemmKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;
  int epilogue;
  int threads;
  bool operator==(const GemmKey& o) const {
    return m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           ta == o.ta && tb == o.tb && epilogue == o.epilogue && threads == o.threads;
  }
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& g) {
    return H::combine(std::move(h), g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.ta, g.tb, g.epilogue,
                      g.threads);
  }
};

// A matmul primitive with its memory objects, stream and scratchpad; one call at a time
// (`mu`). The scratchpad is the primitive's own (oneDNN's user mode): in its default
// mode oneDNN keeps a thread-local one, and a primitive must then run on the thread
// that created it, which a process-wide cache used by any session's thread cannot
// promise. oneDNN's matmul primitive: about 5% faster than its dnnl_sgemm at 1024^3 on
// AVX-512 (docs/CPU_GEMM.md), and ready-made after the first call of a configuration.
struct Prepared {
  explicit Prepared(const Api& api) : api(api) {}
  ~Prepared() {
    for (dnnl_memory_t m : {a, b, bias, c, scratch}) {
      if (m != nullptr) api.memory_destroy(m);
    }
    if (stream != nullptr) api.stream_destroy(stream);
    if (primitive != nullptr) api.primitive_destroy(primitive);
  }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;

  const Api& api;
  std::mutex mu;
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, bias = nullptr, c = nullptr, scratch = nullptr;
  dnnl_stream_t stream = nullptr;
  std::string impl;            // oneDNN's name of the implementation ("brg:avx512_core")
  bool relu_post_ops = false;  // the primitive applies the ReLU; else the caller does
  // 4 KiB-aligned, as oneDNN's own scratchpads: its kernels place aligned sub-buffers
  // at offsets from the base.
  std::unique_ptr<void, decltype(&std::free)> scratch_bytes{nullptr, &std::free};
};

// The ReLU as oneDNN post-ops that keep NaN, as braze::Relu does. oneDNN's own ReLU
// (alpha 0) is max(x, 0), which turns NaN into 0, as do its clip and binary max. ELU
// with alpha 0 is x > 0 ? x : 0 * (exp(x) - 1): x itself above 0, -0 for every other
// finite x and for -inf (exp(-inf) - 1 = -1); the linear x * 1 + 0 then makes that -0 a
// 0. NaN stays NaN only through how oneDNN 2.6's x64 exp works: it clamps its argument
// with a min that makes NaN ln(FLT_MAX), whose exp overflows to inf, and 0 * inf is
// NaN. An exp that did not overflow there would give 0. That is why the post-ops are
// used only for the implementations the self-test below has checked
// (ReluPostOpsChecked). Their exp costs about 3% at 1024^3 over oneDNN's ReLU; a
// separate pass over the product cost 5% (docs/CPU_GEMM.md).
bool AppendRelu(const Api& api, dnnl_primitive_attr_t attr) {
  dnnl_post_ops_t ops = nullptr;
  const bool ok =
      api.post_ops_create(&ops) == dnnl_success &&
      api.post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_elu, 0.0f, 0.0f) == dnnl_success &&
      api.post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, 1.0f, 0.0f) == dnnl_success &&
      api.attr_set_post_ops(attr, ops) == dnnl_success;
  if (ops != nullptr) api.post_ops_destroy(ops);
  return ok;
}

// Null when oneDNN refuses the configuration. `relu_post_ops`: a kBiasRelu key's ReLU
// by the primitive (else by the caller).
std::shared_ptr<Prepared> Prepare(const Library& lib, const GemmKey& g, bool relu_post_ops) {
  const Api& api = lib.api;
  dnnl_memory_desc_t a, b, bias, c;
  const dnnl_dims_t a_dims = {g.m, g.k}, b_dims = {g.k, g.n}, c_dims = {g.m, g.n};
  const dnnl_dims_t a_strides = {g.ta ? 1 : g.lda, g.ta ? g.lda : 1};
  const dnnl_dims_t b_strides = {g.tb ? 1 : g.ldb, g.tb ? g.ldb : 1};
  const dnnl_dims_t c_strides = {g.ldc, 1};
  const dnnl_dims_t bias_dims = {1, g.n}, bias_strides = {g.n, 1};
  const bool has_bias = g.epilogue != kNoEpilogue;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  auto p = std::make_shared<Prepared>(api);
  p->relu_post_ops = relu_post_ops && g.epilogue == kBiasRelu;
  bool ok = api.memory_desc_init(&a, 2, a_dims, dnnl_f32, a_strides) == dnnl_success &&
            api.memory_desc_init(&b, 2, b_dims, dnnl_f32, b_strides) == dnnl_success &&
            api.memory_desc_init(&bias, 2, bias_dims, dnnl_f32, bias_strides) == dnnl_success &&
            api.memory_desc_init(&c, 2, c_dims, dnnl_f32, c_strides) == dnnl_success &&
            api.matmul_desc_init(&desc, &a, &b, has_bias ? &bias : nullptr, &c) == dnnl_success &&
            api.attr_create(&attr) == dnnl_success &&
            api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
            (!p->relu_post_ops || AppendRelu(api, attr)) &&
            api.primitive_desc_create(&pd, &desc, attr, lib.engine, nullptr) == dnnl_success;
  const char* impl = nullptr;
  if (ok && api.query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) {
    p->impl = impl;
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
       api.memory_create(&p->b, &b, lib.engine, DNNL_MEMORY_NONE) == dnnl_success &&
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

// c = a b (+ bias) on one matrix each (row-major, leading dimensions in the primitive).
// False on an error. The caller holds p->mu.
bool RunGemm(const Api& api, Prepared& p, const float* a, const float* b, const float* bias,
             float* c) {
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
  int nargs = 3;
  if (p.scratch != nullptr) args[nargs++] = {DNNL_ARG_SCRATCHPAD, p.scratch};
  if (p.bias != nullptr) args[nargs++] = {DNNL_ARG_BIAS, p.bias};
  return api.set_data_handle(p.a, const_cast<float*>(a)) == dnnl_success &&
         api.set_data_handle(p.b, const_cast<float*>(b)) == dnnl_success &&
         (p.bias == nullptr ||
          api.set_data_handle(p.bias, const_cast<float*>(bias)) == dnnl_success) &&
         api.set_data_handle(p.c, c) == dnnl_success &&
         api.primitive_execute(p.primitive, p.stream, nargs, args) == dnnl_success &&
         api.stream_wait(p.stream) == dnnl_success;
}

// braze::Relu (x < 0 ? 0 : x, NaN kept) over rows x cols at c, rows ldc apart: the
// epilogue's ReLU where the primitive does not apply it.
void ReluInPlace(float* c, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
  }
}

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

std::atomic<bool> relu_post_ops_allowed{true};  // AllowCpuGemmReluPostOpsForTesting

// The prepared primitive for `g`, made at its first use. The cache is bounded: past
// kMaxPrepared configurations (symbolic shapes meet many) it starts again; a primitive
// in use stays alive through its caller's reference.
std::shared_ptr<Prepared> Lookup(const Library& lib, const GemmKey& g) {
  constexpr size_t kMaxPrepared = 256;
  static std::mutex mu;
  static auto* cache = new absl::flat_hash_map<GemmKey, std::shared_ptr<Prepared>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(g);
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxPrepared) cache->clear();
  std::shared_ptr<Prepared> p;
  if (g.epilogue == kBiasRelu && relu_post_ops_allowed.load()) {
    p = Prepare(lib, g, /*relu_post_ops=*/true);
    if (p != nullptr && !ReluPostOpsChecked(lib, p->impl)) p = nullptr;
  }
  // No ReLU, or oneDNN refused its post-ops, or they are not confirmed: the call's loop.
  if (p == nullptr) p = Prepare(lib, g, /*relu_post_ops=*/false);
  if (p != nullptr) cache->emplace(g, p);
  return p;
}
#endif

bool IsBoundsQuery(const halide_buffer_t* b) { return b->host == nullptr && b->device == 0; }

// The address of the element at (dims 0 and 1 at their mins, `batch` for dims 2...).
const float* At(const halide_buffer_t* b, int64_t d0, int64_t d1, const int64_t* batch) {
  int64_t offset = (d0 - b->dim[0].min) * b->dim[0].stride;
  offset += (d1 - b->dim[1].min) * static_cast<int64_t>(b->dim[1].stride);
  for (int d = 2; d < b->dimensions; ++d) {
    offset += (batch[d - 2] - b->dim[d].min) * static_cast<int64_t>(b->dim[d].stride);
  }
  return reinterpret_cast<const float*>(b->host) + offset;
}

void SetDim(halide_buffer_t* b, int d, int32_t min, int32_t extent) {
  b->dim[d].min = min;
  b->dim[d].extent = extent;
}

// True when `b` holds [d0, d0 + e0) x [d1, d1 + e1) and out's batch region, with dim 0
// dense and each row of dim 0 apart by at least its length.
bool Covers(const halide_buffer_t* b, int64_t d0, int64_t e0, int64_t d1, int64_t e1,
            const halide_buffer_t* out) {
  auto holds = [](const halide_dimension_t& dim, int64_t min, int64_t extent) {
    return dim.min <= min && min + extent <= int64_t{dim.min} + dim.extent;
  };
  if (b->dimensions != out->dimensions || b->dim[0].stride != 1) return false;
  if (!holds(b->dim[0], d0, e0) || !holds(b->dim[1], d1, e1)) return false;
  if (b->dim[1].extent > 1 && b->dim[1].stride < b->dim[0].extent) return false;
  for (int d = 2; d < b->dimensions; ++d) {
    if (!holds(b->dim[d], out->dim[d].min, out->dim[d].extent)) return false;
  }
  return true;
}

// dim 1's stride: the leading dimension (any value of at least a row holds one row).
int64_t LeadingDim(const halide_buffer_t* b) {
  return std::max<int64_t>(b->dim[1].stride, b->dim[0].extent);
}

// The regions of a, b and bias that out's region needs: every k, out's rows (m),
// columns (n) and batch; the bias's columns.
void AnswerBoundsQuery(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, bool ta,
                       bool tb, int32_t k, const halide_buffer_t* out) {
  const halide_dimension_t& n = out->dim[0];
  const halide_dimension_t& m = out->dim[1];
  if (IsBoundsQuery(a)) {
    SetDim(a, ta ? 1 : 0, 0, k);
    SetDim(a, ta ? 0 : 1, m.min, m.extent);
    for (int d = 2; d < a->dimensions; ++d) SetDim(a, d, out->dim[d].min, out->dim[d].extent);
  }
  if (IsBoundsQuery(b)) {
    SetDim(b, tb ? 0 : 1, 0, k);
    SetDim(b, tb ? 1 : 0, n.min, n.extent);
    for (int d = 2; d < b->dimensions; ++d) SetDim(b, d, out->dim[d].min, out->dim[d].extent);
  }
  if (bias != nullptr && IsBoundsQuery(bias)) SetDim(bias, 0, n.min, n.extent);
}

// out = a b (+ bias, then ReLU when `relu`) for both externs; `bias` null: none.
int Gemm(halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, bool ta, bool tb, int32_t k,
         bool relu, int32_t threads, halide_buffer_t* out) {
  // Halide asks for bounds with query buffers (no memory); an input it already holds
  // may come as itself, so a query is any buffer without memory, out included.
  if (IsBoundsQuery(a) || IsBoundsQuery(b) || IsBoundsQuery(out) ||
      (bias != nullptr && IsBoundsQuery(bias))) {
    AnswerBoundsQuery(a, b, bias, ta, tb, k, out);
    return 0;
  }
  const Library& lib = Loaded();
  if (!lib.status.ok()) return -1;
#if !BRAZE_HAVE_DNNL
  (void)relu;
  (void)threads;
  return -1;
#else
  const int64_t n = out->dim[0].extent, m = out->dim[1].extent;
  if (n == 0 || m == 0) return 0;
  const int64_t n0 = out->dim[0].min, m0 = out->dim[1].min;
  // Every element read must be in its buffer, rows dense: a buffer realized over less
  // than asked for would be read out of bounds, never silently.
  const bool covered = ta ? Covers(a, m0, m, 0, k, out) : Covers(a, 0, k, m0, m, out);
  if (!covered || !(tb ? Covers(b, 0, k, n0, n, out) : Covers(b, n0, n, 0, k, out)) ||
      !Covers(out, n0, n, m0, m, out)) {
    return -2;
  }
  if (bias != nullptr &&
      (bias->dimensions != 1 || bias->dim[0].stride != 1 || bias->dim[0].min > n0 ||
       n0 + n > bias->dim[0].min + bias->dim[0].extent)) {
    return -2;
  }
  const float* pbias = bias == nullptr
                           ? nullptr
                           : reinterpret_cast<const float*>(bias->host) + (n0 - bias->dim[0].min);
  const int epilogue = bias == nullptr ? kNoEpilogue : relu ? kBiasRelu : kBias;
  const GemmKey key{m,  n,  k,        LeadingDim(a), LeadingDim(b), LeadingDim(out),
                    ta, tb, epilogue, threads};
  // Once per call, not per batch index: every batch index has the same configuration.
  if (lib.api.set_threads != nullptr && threads > 0) lib.api.set_threads(threads);
  const std::shared_ptr<Prepared> prepared = Lookup(lib, key);
  if (prepared == nullptr) return -3;
  const bool relu_here = epilogue == kBiasRelu && !prepared->relu_post_ops;
  std::lock_guard<std::mutex> lock(prepared->mu);
  // One GEMM per batch index; `batch` walks out's batch dims like an odometer.
  int64_t batch[8] = {0};
  const int batch_dims = out->dimensions - 2;
  if (batch_dims > 8) return -2;
  for (int d = 0; d < batch_dims; ++d) {
    if (out->dim[d + 2].extent == 0) return 0;
    batch[d] = out->dim[d + 2].min;
  }
  while (true) {
    const float* pa = ta ? At(a, m0, 0, batch) : At(a, 0, m0, batch);
    const float* pb = tb ? At(b, 0, n0, batch) : At(b, n0, 0, batch);
    float* pc = const_cast<float*>(At(out, n0, m0, batch));
    if (!RunGemm(lib.api, *prepared, pa, pb, pbias, pc)) return -3;
    if (relu_here) ReluInPlace(pc, m, n, key.ldc);
    int d = 0;
    for (; d < batch_dims; ++d) {
      const halide_dimension_t& dim = out->dim[d + 2];
      if (++batch[d] < dim.min + dim.extent) break;
      batch[d] = dim.min;
    }
    if (d == batch_dims) return 0;
  }
#endif
}

}  // namespace

absl::Status CpuGemmAvailable() { return Loaded().status; }

std::string CpuGemmLibrary() { return Loaded().status.ok() ? Loaded().name : std::string(); }

// Hidden: kernels reach them by address (JIT) or through the disk cache's runtime, and a
// second copy of Braze in the process must not bind their names to that runtime's jumps.
extern "C" __attribute__((visibility("hidden"))) int braze_cpu_gemm_f32(
    halide_buffer_t* a, halide_buffer_t* b, int32_t transpose_a, int32_t transpose_b, int32_t k,
    int32_t threads, halide_buffer_t* out) {
  return Gemm(a, b, nullptr, transpose_a != 0, transpose_b != 0, k, false, threads, out);
}

extern "C" __attribute__((visibility("hidden"))) int braze_cpu_gemm_bias_f32(
    halide_buffer_t* a, halide_buffer_t* b, halide_buffer_t* bias, int32_t transpose_a,
    int32_t transpose_b, int32_t k, int32_t relu, int32_t threads, halide_buffer_t* out) {
  return Gemm(a, b, bias, transpose_a != 0, transpose_b != 0, k, relu != 0, threads, out);
}

void AllowCpuGemmReluPostOpsForTesting(bool allowed) {
#if BRAZE_HAVE_DNNL
  relu_post_ops_allowed = allowed;
#else
  (void)allowed;
#endif
}

void* CpuGemmF32Address() { return reinterpret_cast<void*>(&braze_cpu_gemm_f32); }

void* CpuGemmBiasF32Address() { return reinterpret_cast<void*>(&braze_cpu_gemm_bias_f32); }

}  // namespace braze
