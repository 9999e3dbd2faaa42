// oneDNN's matmul primitive as cpu_gemm.cc uses it: the library loaded at run time, a
// primitive per GEMM configuration with its memory objects and scratchpad, and the
// once-per-process check of the NaN-keeping ReLU post-ops (onednn_relu_check.cc).
//
// Internal header: includes oneDNN's C header where the build has it.
#ifndef BRAZE_DEVICE_ONEDNN_MATMUL_H_
#define BRAZE_DEVICE_ONEDNN_MATMUL_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define BRAZE_HAVE_DNNL 1
#else
#define BRAZE_HAVE_DNNL 0
#endif

namespace braze {
namespace onednn {

#if BRAZE_HAVE_DNNL
// The oneDNN C functions used, looked up in the dlopen'ed library (the header gives
// their types only).
struct Api {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init = nullptr;
  decltype(&dnnl_memory_desc_init_by_tag) memory_desc_init_by_tag = nullptr;
  decltype(&dnnl_memory_desc_equal) memory_desc_equal = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_set_data_handle) set_data_handle = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_reorder_primitive_desc_create) reorder_desc_create = nullptr;
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
  decltype(&dnnl_post_ops_append_binary) post_ops_append_binary = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_primitive_desc_query) query = nullptr;
  decltype(&dnnl_primitive_desc_query_md) query_md = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_version) version = nullptr;
  decltype(&dnnl_dilated_convolution_forward_desc_init) conv_forward_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_data_desc_init) conv_backward_data_desc_init =
      nullptr;
  decltype(&dnnl_dilated_convolution_backward_weights_desc_init) conv_backward_weights_desc_init =
      nullptr;
  void (*set_threads)(int) = nullptr;  // libgomp's omp_set_num_threads (oneDNN's runtime)
  int (*get_threads)() = nullptr;      // and its omp_get_max_threads: both, or neither
  // libgomp's entry for a parallel region (what `#pragma omp parallel` compiles to:
  // fn(data) on every thread of the team, the caller included, 0 threads: the count
  // set_threads gave) and its thread queries: a pass of Braze's own between oneDNN calls
  // runs on the threads oneDNN just used and leaves spinning, not beside them
  // (onednn_conv.cc, FinishForward). Absent with oneDNN's TBB build.
  void (*omp_parallel)(void (*fn)(void*), void* data, unsigned threads, unsigned flags) = nullptr;
  int (*omp_thread_num)() = nullptr;
  int (*omp_num_threads)() = nullptr;
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

// oneDNN, loaded once per process (dlopen); its status says what is missing.
const Library& Loaded();

#if BRAZE_HAVE_DNNL
// What the primitive does after the product (the extern's `bias` and `relu`).
enum Epilogue : int { kNoEpilogue = 0, kBias = 1, kBiasRelu = 2 };

// One GEMM configuration: sizes, leading dimensions, transposes, epilogue, thread
// count (a primitive's partitioning is fixed when it is created) and element types: `ab`
// of both operands (f32, or bf16 with f32 accumulation), `c` of the product and of the
// bias (f32, or bf16 rounded once from the f32 result: docs/MIXED_PRECISION.md).
struct GemmKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;
  int epilogue;
  int threads;
  dnnl_data_type_t ab = dnnl_f32, c = dnnl_f32;
  // A batch of `batch` matrices in one primitive (oneDNN's 3-D matmul), each operand's
  // matrices `batch_a`, `batch_b` and `batch_c` elements apart; 1: one matrix.
  int64_t batch = 1, batch_a = 0, batch_b = 0, batch_c = 0;
  // Which part of a GEMM cut among the pool's threads (cpu_gemm.cc, SplitGemm): parts of
  // one configuration run at once, each on a primitive (and scratchpad) of its own.
  int part = 0;
  bool operator==(const GemmKey& o) const {
    return m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           ta == o.ta && tb == o.tb && epilogue == o.epilogue && threads == o.threads &&
           ab == o.ab && c == o.c && batch == o.batch && batch_a == o.batch_a &&
           batch_b == o.batch_b && batch_c == o.batch_c && part == o.part;
  }
  template <typename H>
  friend H AbslHashValue(H h, const GemmKey& g) {
    return H::combine(std::move(h), g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.ta, g.tb, g.epilogue,
                      g.threads, static_cast<int>(g.ab), static_cast<int>(g.c), g.batch, g.batch_a,
                      g.batch_b, g.batch_c, g.part);
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
  std::string impl;              // oneDNN's name of the implementation ("brg:avx512_core")
  bool relu_post_ops = false;    // the primitive applies the ReLU; else the caller does
  dnnl_memory_desc_t plain_b{};  // b row-major (or transposed), as the caller holds it
  // With packed_b_bytes > 0 the primitive reads b in oneDNN's own layout (PackWeights),
  // which packed_b describes, not row-major.
  dnnl_memory_desc_t packed_b{};
  size_t packed_b_bytes = 0;
  // 4 KiB-aligned, as oneDNN's own scratchpads: its kernels place aligned sub-buffers
  // at offsets from the base.
  std::unique_ptr<void, decltype(&std::free)> scratch_bytes{nullptr, &std::free};
};

// Null when oneDNN refuses the configuration. `relu_post_ops`: a kBiasRelu key's ReLU
// by the primitive (else by the caller). `pack_weights`: b in the layout oneDNN prefers
// (its "any" format); null as well when that is b's own row-major layout.
std::shared_ptr<Prepared> Prepare(const Library& lib, const GemmKey& g, bool relu_post_ops,
                                  bool pack_weights = false);

// b (a k x n matrix, as `plain_b` describes it) in p's packed layout, in memory of its
// own, or null on an error. The caller holds p.mu.
std::shared_ptr<void> PackWeights(const Library& lib, Prepared& p, const void* b);

// c = a b (+ bias) on one matrix each, or on the key's batch of them (row-major, leading
// dimensions and batch strides in the primitive; elements of the key's types). False on an error.
// The caller holds p->mu.
bool RunGemm(const Api& api, Prepared& p, const void* a, const void* b, const void* bias, void* c);

// Appends the NaN-keeping ReLU post-ops (ELU alpha 0, then x * 1 + 0) to `attr`; only
// for implementations ReluPostOpsChecked accepts.
bool AppendRelu(const Api& api, dnnl_primitive_attr_t attr);
// The same two post-ops appended to `ops` (after others: a convolution's residual add).
bool AppendReluOps(const Api& api, dnnl_post_ops_t ops);

// Whether the ReLU post-ops may be used with implementation `impl`: a self-test (once
// per process) runs them on two shapes, in f32 and in bf16 (operands, bias and product),
// and keeps the names of the implementations that passed. Any other implementation (another ISA, a
// reference kernel) gets the ReLU from the caller, with one warning per process.
bool ReluPostOpsChecked(const Library& lib, const std::string& impl);
#endif

}  // namespace onednn
}  // namespace braze

#endif  // BRAZE_DEVICE_ONEDNN_MATMUL_H_
