// cuBLASLt GEMMs; see cublas_gemm.h.
//
// Row-major tensors through a column-major library: a dense row-major [r, c] matrix is
// the column-major [c, r] matrix with leading dimension c, its transpose. So
// out = op(a) op(b) is computed as out^T = op(b)^T op(a)^T: cuBLAS' A is Braze's b, its B
// is Braze's a, its m and n are Braze's n and m, and its D is out^T, column-major
// [n, m] with ld n. The bias over out's last dim then runs along D's rows, which is what
// cuBLASLt's BIAS epilogues take (a vector of D's row count, broadcast over columns).
//
// bf16 and f16 take their bias through C instead: D = 1 * op(A) op(B) + 1 * C, C the bias
// as a column-major [n, m] matrix with leading dimension 0 (each column the same n
// values; batch stride 0), and the activation alone (RELU, GELU) as the epilogue. On an
// H200 (cuBLASLt 13, 2026-11-30) the BIAS epilogues of bf16 GEMMs added the bias after
// rounding the f32 sum to bf16: two roundings, off by 1-2 bf16 ulps where the bias
// cancels the product (PyTorch reports the same of split-K algorithms, and adds its bias
// through C too). C's value is documented to join the accumulator in the scale
// type (f32) before the one conversion to D's type (CUBLASLT_MATMUL_DESC_SCALE_TYPE), and
// an out-of-place C may have leading dimension 0 "to achieve row or column broadcast"
// (cublasLtMatmul()'s note in the cuBLAS documentation). f16 goes the same way although
// its bias epilogue passed on the H200: how an epilogue adds the bias is not documented,
// the bias type a 16-bit D documents is D's own (so an f32 bias is no way out), and which
// algorithm the heuristic picks varies with shape and library. f32 and f64 keep the
// bias epilogue: their D is the accumulator's type, so there is nothing to round first.
//
// Descriptors, layouts and the heuristic's algorithm are built once per GEMM shape (and
// pointer alignment) and kept for the process; a call then only sets the bias pointer
// (f32, f64; a 16-bit bias is passed as C) and enqueues cublasLtMatmul. One mutex covers the cache
// and the calls: the cached matmul descriptor is mutated per call, and the calls are asynchronous
// anyway.
#include "device/cublas_gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "braze/device.h"

#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define BRAZE_HAVE_CUBLASLT 1
#else
#define BRAZE_HAVE_CUBLASLT 0
#endif

namespace braze {

bool IsCublasGemmDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 ||
         dtype == DType::kF16;
}

bool CublasGemmBiasInC(const GemmShape& s) {
  return s.epilogue != GemmEpilogue::kNone && (s.dtype == DType::kBF16 || s.dtype == DType::kF16);
}

const char* GemmEpilogueName(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone:
      return "none";
    case GemmEpilogue::kBias:
      return "bias";
    case GemmEpilogue::kBiasRelu:
      return "bias+relu";
    case GemmEpilogue::kBiasGelu:
      return "bias+gelu";
  }
  return "unknown";
}

namespace {

std::string ShapeString(const GemmShape& s) {
  return absl::StrCat(DTypeName(s.dtype), " batch ", s.batch, " m ", s.m, " n ", s.n, " k ", s.k,
                      s.transpose_a ? " a^T" : "", s.transpose_b ? " b^T" : "", " epilogue ",
                      GemmEpilogueName(s.epilogue));
}

// Everything that needs no library: dtype, epilogue, sizes, pointers. OK with
// *nothing_to_do set for an empty output.
absl::Status Validate(const std::string& name, const GemmShape& s, uint64_t a, uint64_t b,
                      uint64_t bias, uint64_t out, bool* nothing_to_do) {
  *nothing_to_do = false;
  auto invalid = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", why, " (", ShapeString(s), ")"));
  };
  if (!IsCublasGemmDType(s.dtype)) {
    return invalid(
        absl::StrCat("cuBLAS GEMMs take f32, f64, bf16 and f16, not ", DTypeName(s.dtype)));
  }
  switch (s.epilogue) {
    case GemmEpilogue::kNone:
    case GemmEpilogue::kBias:
    case GemmEpilogue::kBiasRelu:
    case GemmEpilogue::kBiasGelu:
      break;
    default:
      return invalid(absl::StrCat("unknown GEMM epilogue ", static_cast<int>(s.epilogue)));
  }
  if (s.batch < 0 || s.m < 0 || s.n < 0 || s.k < 0) return invalid("negative GEMM dimension");
  if (s.batch == 0 || s.m == 0 || s.n == 0) {
    *nothing_to_do = true;
    return absl::OkStatus();
  }
  if (s.k == 0) {
    // The result is the epilogue applied to zeros (or to the bias): the caller's Halide
    // kernel does that; cuBLASLt rejects k == 0.
    return invalid("k == 0 is not taken by cuBLAS");
  }
  // cuBLASLt layouts take 64-bit rows, columns and strides, but "usually only values that
  // can be expressed as int32_t are supported", and the batch count is an int32_t.
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  if (s.batch > kMaxDim || s.m > kMaxDim || s.n > kMaxDim || s.k > kMaxDim) {
    return invalid("a GEMM dimension exceeds cuBLASLt's 32-bit limit");
  }
  // Each matrix is below 2^62 elements now; its batch must stay within int64 bytes.
  const int64_t max_matrix = std::max({s.m * s.k, s.k * s.n, s.m * s.n});
  const int64_t elem = static_cast<int64_t>(SizeOf(s.dtype));
  if (max_matrix > std::numeric_limits<int64_t>::max() / elem / s.batch) {
    return invalid("the batched operands exceed the 64-bit address range");
  }
  if (a == 0 || b == 0 || out == 0) return invalid("null device pointer for a, b or out");
  if (s.epilogue != GemmEpilogue::kNone && bias == 0) {
    return invalid("the bias epilogue has a null bias pointer");
  }
  // The heuristic is told the bias pointer (or, bias in C, C's alignment), but kernels
  // that assume a 16-byte aligned bias have been seen to fault on less ("misaligned address",
  // PyTorch and Marian reports), and a fault poisons the context for the rest of the process.
  // Braze's own device buffers are cuMemAlloc'd (256-byte aligned), so this only refuses views.
  if (s.epilogue != GemmEpilogue::kNone && bias % 16 != 0) {
    return invalid("the bias is not 16-byte aligned");
  }
  return absl::OkStatus();
}

#if BRAZE_HAVE_CUBLASLT

// The cuBLASLt entry points Braze calls, typed from <cublasLt.h>.
struct CublasLt {
  absl::Status status;
  cublasLtHandle_t handle = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;  // optional
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

std::string StatusName(const CublasLt& lt, cublasStatus_t st) {
  const char* s = lt.status_name != nullptr ? lt.status_name(st) : nullptr;
  return absl::StrCat(s != nullptr ? s : "cuBLAS status", " (", static_cast<int>(st), ")");
}

template <typename F>
bool Resolve(void* lib, const char* symbol, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return *fn != nullptr;
}

absl::Status Load(CublasLt& lt) {
  auto unavailable = [](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("cuBLASLt is not available: ", why));
  };
  // The driver first: no point mapping half a gigabyte of library without a GPU.
  if (absl::Status cuda = CheckCudaAvailable(); !cuda.ok()) return unavailable(cuda.message());
  void* lib = nullptr;
  std::string errors;
  for (const char* path :
       {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13"}) {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", err != nullptr ? err : path);
  }
  if (lib == nullptr)
    return unavailable(absl::StrCat("cannot load libcublasLt.so.13 (", errors, ")"));
  struct Entry {
    const char* symbol;
    bool ok;
  };
  const Entry entries[] = {
      {"cublasLtCreate", Resolve(lib, "cublasLtCreate", &lt.create)},
      {"cublasLtMatmulDescCreate", Resolve(lib, "cublasLtMatmulDescCreate", &lt.desc_create)},
      {"cublasLtMatmulDescDestroy", Resolve(lib, "cublasLtMatmulDescDestroy", &lt.desc_destroy)},
      {"cublasLtMatmulDescSetAttribute",
       Resolve(lib, "cublasLtMatmulDescSetAttribute", &lt.desc_set)},
      {"cublasLtMatrixLayoutCreate", Resolve(lib, "cublasLtMatrixLayoutCreate", &lt.layout_create)},
      {"cublasLtMatrixLayoutDestroy",
       Resolve(lib, "cublasLtMatrixLayoutDestroy", &lt.layout_destroy)},
      {"cublasLtMatrixLayoutSetAttribute",
       Resolve(lib, "cublasLtMatrixLayoutSetAttribute", &lt.layout_set)},
      {"cublasLtMatmulPreferenceCreate",
       Resolve(lib, "cublasLtMatmulPreferenceCreate", &lt.pref_create)},
      {"cublasLtMatmulPreferenceDestroy",
       Resolve(lib, "cublasLtMatmulPreferenceDestroy", &lt.pref_destroy)},
      {"cublasLtMatmulPreferenceSetAttribute",
       Resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &lt.pref_set)},
      {"cublasLtMatmulAlgoGetHeuristic",
       Resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic)},
      {"cublasLtMatmul", Resolve(lib, "cublasLtMatmul", &lt.matmul)},
  };
  for (const Entry& e : entries) {
    if (!e.ok) return unavailable(absl::StrCat("the loaded libcublasLt lacks ", e.symbol));
  }
  Resolve(lib, "cublasLtGetStatusName", &lt.status_name);
  // The handle binds to the current device (the primary context the caller pushed).
  if (cublasStatus_t st = lt.create(&lt.handle); st != CUBLAS_STATUS_SUCCESS) {
    lt.handle = nullptr;
    return unavailable(absl::StrCat("cublasLtCreate failed: ", StatusName(lt, st)));
  }
  return absl::OkStatus();
}

// The process' cuBLASLt, loaded on first use. Never destroyed: tearing down cuBLAS at
// exit, after the driver may be gone, is worse than leaving it to the OS.
const CublasLt& Lt() {
  static CublasLt* lt = new CublasLt();
  static std::once_flag once;
  std::call_once(once, [] { lt->status = Load(*lt); });
  return *lt;
}

// Workspace for the heuristic's algorithms (split-K and the like): 32 MiB, cuBLAS'
// recommendation for Hopper, allocated once from the driver in the current (primary)
// context. Without it (allocation failed) algorithms that need none are chosen.
constexpr uint64_t kWorkspaceBytes = 32ull << 20;

struct Workspace {
  void* ptr = nullptr;
  uint64_t bytes = 0;
};

Workspace AllocateWorkspace() {
  Workspace w;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);  // loaded already
  if (cuda == nullptr) return w;
  using MemAlloc = int (*)(unsigned long long* dptr, size_t bytes);  // cuMemAlloc_v2
  MemAlloc mem_alloc = nullptr;
  if (!Resolve(cuda, "cuMemAlloc_v2", &mem_alloc)) return w;
  unsigned long long dptr = 0;
  if (mem_alloc(&dptr, kWorkspaceBytes) != 0 || dptr == 0) return w;
  w.ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(dptr));
  w.bytes = kWorkspaceBytes;
  return w;
}

// The largest power of two dividing `x`, at most 256 (cuBLASLt's default assumption).
uint32_t Alignment(uint64_t x) {
  if (x == 0) return 256;
  uint64_t low = x & (~x + 1);
  return low >= 256 ? 256u : static_cast<uint32_t>(low);
}

// bias_in_c follows from dtype and epilogue today (CublasGemmBiasInC); it is in the key so
// that a plan with a C of its own (ld 0, beta 1) is never taken for one whose C is D.
struct PlanKey {
  DType dtype;
  int64_t batch, m, n, k;
  bool transpose_a, transpose_b;
  GemmEpilogue epilogue;
  bool bias_in_c;
  uint32_t align_a, align_b, align_out, align_bias;

  bool operator==(const PlanKey& o) const {
    return dtype == o.dtype && batch == o.batch && m == o.m && n == o.n && k == o.k &&
           transpose_a == o.transpose_a && transpose_b == o.transpose_b && epilogue == o.epilogue &&
           bias_in_c == o.bias_in_c && align_a == o.align_a && align_b == o.align_b &&
           align_out == o.align_out && align_bias == o.align_bias;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PlanKey& p) {
    return H::combine(std::move(h), p.dtype, p.batch, p.m, p.n, p.k, p.transpose_a, p.transpose_b,
                      p.epilogue, p.bias_in_c, p.align_a, p.align_b, p.align_out, p.align_bias);
  }
};

// One shape's descriptors and algorithm, in cuBLAS' (column-major, swapped) terms:
// A = Braze's b, B = Braze's a, D = out, and C = D (beta 0, never read) or, with the
// bias in C, the bias broadcast by leading dimension 0 (c set).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;

  void Destroy(const CublasLt& lt) {
    if (desc != nullptr) lt.desc_destroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c, d}) {
      if (l != nullptr) lt.layout_destroy(l);
    }
    desc = nullptr;
    a = b = c = d = nullptr;
  }
};

struct GemmState {
  std::mutex mu;
  bool workspace_tried = false;
  Workspace workspace;
  absl::flat_hash_map<PlanKey, Plan> plans;
};

GemmState& State() {
  static GemmState* state = new GemmState();
  return *state;
}

// With the bias in C the epilogue is the activation alone, applied to the scaled result
// alpha op(A) op(B) + beta C ("scale and quantize", then the point-wise transform).
cublasLtEpilogue_t LtEpilogue(GemmEpilogue e, bool bias_in_c) {
  switch (e) {
    case GemmEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias:
      return bias_in_c ? CUBLASLT_EPILOGUE_DEFAULT : CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kBiasRelu:
      return bias_in_c ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kBiasGelu:
      return bias_in_c ? CUBLASLT_EPILOGUE_GELU : CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// A dtype's cuBLASLt types. f32 accumulates exactly in FP32 (no TF32), f64 in FP64.
// bf16 and f16 operands and outputs accumulate in FP32 too (CUBLAS_COMPUTE_32F, alpha and
// beta f32, the documented combination for 16BF/16F A, B, C and D), and the result is
// rounded once to the 16-bit type after the epilogue: docs/MIXED_PRECISION.md's rule
// (which is why their bias comes through C: see the top of this file).
// Split-K algorithms whose partial sums would be reduced in the output type (INPLACE in
// D, OUTPUT_TYPE in the workspace) would round each partial sum to 16 bits: the
// heuristic is only offered those that reduce in the compute type (f32), or none.
struct LtTypes {
  cudaDataType_t data;
  cudaDataType_t scale;
  cublasComputeType_t compute;
  uint32_t reduction_mask;
};

LtTypes TypesOf(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUBLASLT_REDUCTION_SCHEME_MASK};
    case DType::kBF16:
      return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
    case DType::kF16:
      return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
    default:  // f32 (Validate admits no other)
      return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLASLT_REDUCTION_SCHEME_MASK};
  }
}

// Builds `plan` for `s` (validated), asking the heuristic for one algorithm. The bias
// pointer is set on the descriptor, since the heuristic reads its alignment; with the
// bias in C the heuristic is told C's layout and alignment instead.
absl::Status BuildPlan(const CublasLt& lt, const std::string& name, const GemmShape& s,
                       const PlanKey& key, uint64_t bias, uint64_t workspace_bytes, Plan* plan) {
  auto failed = [&](const char* what, cublasStatus_t st) {
    return absl::InternalError(absl::StrCat(
        name, ": cuBLASLt ", what, " failed: ", StatusName(lt, st), " (", ShapeString(s), ")"));
  };
  const LtTypes types = TypesOf(s.dtype);
  const cudaDataType_t type = types.data;
  cublasStatus_t st = lt.desc_create(&plan->desc, types.compute, types.scale);
  if (st != CUBLAS_STATUS_SUCCESS) {
    plan->desc = nullptr;
    return failed("cublasLtMatmulDescCreate", st);
  }
  // Attribute storage sizes are checked by cuBLASLt: int32_t ops, uint32_t epilogue.
  const int32_t trans_a = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = b
  const int32_t trans_b = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = a
  const uint32_t epilogue = LtEpilogue(s.epilogue, key.bias_in_c);
  const void* bias_ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(bias));
  if ((st = lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a))) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b))) !=
          CUBLAS_STATUS_SUCCESS ||
      (st = lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue))) !=
          CUBLAS_STATUS_SUCCESS) {
    return failed("cublasLtMatmulDescSetAttribute", st);
  }
  if (s.epilogue != GemmEpilogue::kNone && !key.bias_in_c) {
    // f32 and f64: bias data type left at its default, D's type; batch stride 0: shared
    // by the batch.
    st = lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmulDescSetAttribute", st);
  }

  // Stored (pre-op) shapes, column-major: row-major [r, c] is column-major [c, r], ld c.
  // cuBLAS A = b: row-major [k, n] -> [n, k] ld n; transposed, row-major [n, k] -> [k, n].
  // cuBLAS B = a: row-major [m, k] -> [k, m] ld k; transposed, row-major [k, m] -> [m, k].
  // D = out: row-major [m, n] -> [n, m] ld n.
  // C with the bias in it: [n, m] of D's type (cuBLASLt wants C's type, sizes and batch
  // count to be D's), ld 0 and batch stride 0, so every column of every entry reads the
  // same n values.
  struct LayoutSpec {
    cublasLtMatrixLayout_t* layout;
    uint64_t rows, cols;
    int64_t ld;
    int64_t stride;  // elements between batch entries
  };
  const uint64_t n = static_cast<uint64_t>(s.n), m = static_cast<uint64_t>(s.m);
  const uint64_t k = static_cast<uint64_t>(s.k);
  std::vector<LayoutSpec> specs = {
      {&plan->a, s.transpose_b ? k : n, s.transpose_b ? n : k, s.transpose_b ? s.k : s.n,
       s.k * s.n},
      {&plan->b, s.transpose_a ? m : k, s.transpose_a ? k : m, s.transpose_a ? s.m : s.k,
       s.m * s.k},
      {&plan->d, n, m, s.n, s.m * s.n},
  };
  if (key.bias_in_c) specs.push_back({&plan->c, n, m, /*ld=*/0, /*stride=*/0});
  for (const LayoutSpec& l : specs) {
    st = lt.layout_create(l.layout, type, l.rows, l.cols, l.ld);
    if (st != CUBLAS_STATUS_SUCCESS) {
      *l.layout = nullptr;
      return failed("cublasLtMatrixLayoutCreate", st);
    }
    if (s.batch > 1) {
      const int32_t count = static_cast<int32_t>(s.batch);
      const int64_t stride = l.stride;
      if ((st = lt.layout_set(*l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                              sizeof(count))) != CUBLAS_STATUS_SUCCESS ||
          (st = lt.layout_set(*l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                              sizeof(stride))) != CUBLAS_STATUS_SUCCESS) {
        return failed("cublasLtMatrixLayoutSetAttribute", st);
      }
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  if ((st = lt.pref_create(&pref)) != CUBLAS_STATUS_SUCCESS) {
    return failed("cublasLtMatmulPreferenceCreate", st);
  }
  const uint32_t align_lt_a = key.align_b, align_lt_b = key.align_a, align_d = key.align_out;
  const uint32_t align_c = key.bias_in_c ? key.align_bias : key.align_out;
  if ((st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                        sizeof(workspace_bytes))) != CUBLAS_STATUS_SUCCESS ||
      (st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_lt_a,
                        sizeof(align_lt_a))) != CUBLAS_STATUS_SUCCESS ||
      (st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_lt_b,
                        sizeof(align_lt_b))) != CUBLAS_STATUS_SUCCESS ||
      (st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                        sizeof(align_c))) != CUBLAS_STATUS_SUCCESS ||
      (st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                        sizeof(align_d))) != CUBLAS_STATUS_SUCCESS ||
      (types.reduction_mask != CUBLASLT_REDUCTION_SCHEME_MASK &&
       (st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &types.reduction_mask,
                         sizeof(types.reduction_mask))) != CUBLAS_STATUS_SUCCESS)) {
    lt.pref_destroy(pref);
    return failed("cublasLtMatmulPreferenceSetAttribute", st);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasLtMatrixLayout_t c_layout = key.bias_in_c ? plan->c : plan->d;
  st = lt.heuristic(lt.handle, plan->desc, plan->a, plan->b, c_layout, plan->d, pref, 1, &result,
                    &returned);
  lt.pref_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
      (st == CUBLAS_STATUS_SUCCESS && (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS))) {
    // Not a failure of the call: cuBLASLt does not take this configuration. With the bias
    // in C there is no retry through the bias epilogue (its bf16 sum rounds before the
    // bias): the step runs as Halide kernels, with a warning (runtime/step_gemm.cc).
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": cuBLASLt has no algorithm for this GEMM (",
        StatusName(lt, st == CUBLAS_STATUS_SUCCESS && returned > 0 ? result.state : st), "; ",
        ShapeString(s), ")"));
  }
  if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmulAlgoGetHeuristic", st);
  plan->algo = result.algo;
  plan->workspace_bytes = result.workspaceSize;
  return absl::OkStatus();
}

#endif  // BRAZE_HAVE_CUBLASLT

}  // namespace

#if BRAZE_HAVE_CUBLASLT

absl::Status CublasAvailable() { return Lt().status; }

absl::Status CublasGemm(const std::string& name, const GemmShape& shape, uint64_t a, uint64_t b,
                        uint64_t bias, uint64_t out) {
  bool nothing_to_do = false;
  if (absl::Status v = Validate(name, shape, a, b, bias, out, &nothing_to_do); !v.ok()) return v;
  if (nothing_to_do) return absl::OkStatus();
  const CublasLt& lt = Lt();
  if (!lt.status.ok()) {
    return absl::Status(lt.status.code(), absl::StrCat(name, ": ", lt.status.message()));
  }
  if (shape.epilogue == GemmEpilogue::kNone) bias = 0;

  const bool batched = shape.batch > 1;
  const uint64_t elem = SizeOf(shape.dtype);
  // Later batch entries are only as aligned as the batch stride allows.
  auto align = [&](uint64_t ptr, int64_t stride_elems) {
    uint32_t al = Alignment(ptr);
    if (batched) al = std::min(al, Alignment(static_cast<uint64_t>(stride_elems) * elem));
    return al;
  };
  const bool bias_in_c = CublasGemmBiasInC(shape);
  const PlanKey key{shape.dtype,
                    shape.batch,
                    shape.m,
                    shape.n,
                    shape.k,
                    shape.transpose_a,
                    shape.transpose_b,
                    shape.epilogue,
                    bias_in_c,
                    align(a, shape.m * shape.k),
                    align(b, shape.k * shape.n),
                    align(out, shape.m * shape.n),
                    bias != 0 ? Alignment(bias) : 0u};

  GemmState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  if (!state.workspace_tried) {
    // Needs the primary context current, which the caller has pushed.
    state.workspace_tried = true;
    state.workspace = AllocateWorkspace();
  }
  auto it = state.plans.find(key);
  if (it == state.plans.end()) {
    Plan plan;
    absl::Status built = BuildPlan(lt, name, shape, key, bias, state.workspace.bytes, &plan);
    if (!built.ok()) {
      plan.Destroy(lt);
      return built;
    }
    it = state.plans.emplace(key, plan).first;
  }
  Plan& plan = it->second;

  auto failed = [&](const char* what, cublasStatus_t st) {
    return absl::InternalError(absl::StrCat(
        name, ": cuBLASLt ", what, " failed: ", StatusName(lt, st), " (", ShapeString(shape), ")"));
  };
  if (bias != 0 && !bias_in_c) {
    const void* bias_ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(bias));
    cublasStatus_t st =
        lt.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
    if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmulDescSetAttribute", st);
  }
  // alpha and beta of the scale type: f64's for f64, f32's otherwise (bf16 and f16 too).
  // beta 1 adds C, the bias, to the f32 sum; beta 0: C is not read, and is out, as
  // cuBLASLt wants a valid C layout and pointer.
  const float alpha_f = 1.0f, beta_f = bias_in_c ? 1.0f : 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool f64 = shape.dtype == DType::kF64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  auto ptr = [](uint64_t p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  const uint64_t c = bias_in_c ? bias : out;
  cublasStatus_t st = lt.matmul(lt.handle, plan.desc, alpha, ptr(b), plan.a, ptr(a), plan.b, beta,
                                ptr(c), bias_in_c ? plan.c : plan.d, ptr(out), plan.d, &plan.algo,
                                plan.workspace_bytes > 0 ? state.workspace.ptr : nullptr,
                                plan.workspace_bytes, /*stream=*/nullptr);
  if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmul", st);
  return absl::OkStatus();
}

#else  // !BRAZE_HAVE_CUBLASLT

namespace {
constexpr char kNoHeaders[] =
    "cuBLASLt is not available: Braze was built without the CUDA toolkit headers";
}  // namespace

absl::Status CublasAvailable() { return absl::FailedPreconditionError(kNoHeaders); }

absl::Status CublasGemm(const std::string& name, const GemmShape& shape, uint64_t a, uint64_t b,
                        uint64_t bias, uint64_t out) {
  bool nothing_to_do = false;
  if (absl::Status v = Validate(name, shape, a, b, bias, out, &nothing_to_do); !v.ok()) return v;
  if (nothing_to_do) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(name, ": ", kNoHeaders));
}

#endif  // BRAZE_HAVE_CUBLASLT

}  // namespace braze
