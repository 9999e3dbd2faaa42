// A stand-in for NVIDIA's libcublasLt.so.13, for testing Braze's cuBLASLt GEMMs
// (device/cublas_gemm.cc) on machines without a GPU (cublas_gemm_fake_test.cc). With the
// stand-in libcuda, "device memory" is host memory, so cublasLtMatmul computes on the host:
//
//   D = epilogue(alpha op(A) op(B) + beta C [+ bias]), rounded once to D's type,
//
// accumulating in the compute type (f32 or f64) in k order, C widened to the scale type,
// as cublasLt.h documents. One thing is modelled on what a GPU did rather than on the
// documentation: a BIAS epilogue (BIAS, RELU_BIAS, GELU_BIAS) of a 16-bit D rounds the
// sum to D's type before adding the bias, as cuBLASLt 13's bf16 kernels did on an H200
// (2026-11-30: 1-2 bf16 ulps off where the bias cancels the product); f16 too, which
// passed there, since nothing documents where an epilogue adds its bias. A caller that
// wants one rounding must not use those epilogues in 16 bits.
//
// The documented argument rules are checked (INVALID_VALUE or NOT_SUPPORTED otherwise):
// A, B and D's leading dimensions at least their rows; an in-place C (C == D) described
// as D; an out-of-place C of D's type, rows, columns and batch count, with a leading
// dimension of 0 ("row or column broadcast", cublasLtMatmul's note) or at least its rows;
// a bias pointer for a BIAS epilogue; only the attributes Braze sets.
// FAKE_CUBLASLT_NO_BROADCAST_C=1 makes the heuristic offer no algorithm for a C of
// leading dimension 0 (a library that does not take it).
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "fake_cuda/fake_cublaslt.h"

struct cublasLtContext {
  int token;
};

namespace {

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
};

struct Pref {
  uint32_t align_c = 256;
};

std::mutex mu;
FakeLtCalls calls;
cublasLtContext context;

Desc* D(cublasLtMatmulDesc_t d) { return reinterpret_cast<Desc*>(d); }
FakeLtLayout* L(cublasLtMatrixLayout_t l) { return reinterpret_cast<FakeLtLayout*>(l); }
Pref* P(cublasLtMatmulPreference_t p) { return reinterpret_cast<Pref*>(p); }

bool HasBias(uint32_t epilogue) { return (epilogue & CUBLASLT_EPILOGUE_BIAS) != 0; }

bool Is16Bit(int type) { return type == CUDA_R_16BF || type == CUDA_R_16F; }

// Round to nearest even, as the GPU's conversions do.
uint16_t ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float FromBF16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double Get(int type, const void* base, int64_t i) {
  switch (type) {
    case CUDA_R_16BF:
      return FromBF16(static_cast<const uint16_t*>(base)[i]);
    case CUDA_R_16F:
      return static_cast<float>(static_cast<const _Float16*>(base)[i]);
    case CUDA_R_32F:
      return static_cast<const float*>(base)[i];
    default:
      return static_cast<const double*>(base)[i];
  }
}

template <typename S>
void Put(int type, void* base, int64_t i, S v) {
  switch (type) {
    case CUDA_R_16BF:
      static_cast<uint16_t*>(base)[i] = ToBF16(static_cast<float>(v));
      return;
    case CUDA_R_16F:
      static_cast<_Float16*>(base)[i] = static_cast<_Float16>(static_cast<float>(v));
      return;
    case CUDA_R_32F:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    default:
      static_cast<double*>(base)[i] = static_cast<double>(v);
  }
}

// Rounds `v` to a 16-bit `type` and back.
template <typename S>
S Round16(int type, S v) {
  float f = static_cast<float>(v);
  return type == CUDA_R_16BF ? FromBF16(ToBF16(f)) : static_cast<float>(static_cast<_Float16>(f));
}

bool SameShape(const FakeLtLayout& x, const FakeLtLayout& y) {
  return x.type == y.type && x.rows == y.rows && x.cols == y.cols && x.batch == y.batch;
}
bool SameLayout(const FakeLtLayout& x, const FakeLtLayout& y) {
  return SameShape(x, y) && x.ld == y.ld && x.stride == y.stride;
}

// The documented rules; `in_place` when C is D (pointers at the matmul, descriptors at
// the heuristic).
cublasStatus_t Check(const Desc& desc, const FakeLtLayout& a, const FakeLtLayout& b,
                     const FakeLtLayout& c, const FakeLtLayout& d, bool in_place) {
  const bool f64 = desc.compute == CUBLAS_COMPUTE_64F;
  if (f64 ? (desc.scale != CUDA_R_64F || d.type != CUDA_R_64F)
          : (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F ||
             (d.type != CUDA_R_32F && !Is16Bit(d.type)))) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (a.type != d.type || b.type != d.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (desc.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (HasBias(desc.epilogue) && desc.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t m = d.rows, n = d.cols;
  // op(A) is m x k, op(B) k x n.
  const uint64_t a_m = desc.trans_a == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t k = desc.trans_a == CUBLAS_OP_N ? a.cols : a.rows;
  if (a_m != m) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t b_k = desc.trans_b == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t b_n = desc.trans_b == CUBLAS_OP_N ? b.cols : b.rows;
  if (b_k != k || b_n != n) return CUBLAS_STATUS_INVALID_VALUE;
  for (const FakeLtLayout* l : {&a, &b, &d}) {
    if (l->ld < static_cast<int64_t>(l->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (a.batch != d.batch || b.batch != d.batch) return CUBLAS_STATUS_INVALID_VALUE;
  if (in_place ? !SameLayout(c, d)
               : !SameShape(c, d) || (c.ld != 0 && c.ld < static_cast<int64_t>(c.rows))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

template <typename S>
void Run(const Desc& desc, S alpha, const void* a, const FakeLtLayout& la, const void* b,
         const FakeLtLayout& lb, S beta, const void* c, const FakeLtLayout& lc, void* d,
         const FakeLtLayout& ld) {
  const int64_t m = static_cast<int64_t>(ld.rows), n = static_cast<int64_t>(ld.cols);
  const int64_t k = static_cast<int64_t>(desc.trans_a == CUBLAS_OP_N ? la.cols : la.rows);
  // Element (r, col) of the stored matrix of batch entry p.
  auto at = [](const FakeLtLayout& l, int64_t p, int64_t r, int64_t col) {
    return p * l.stride + col * l.ld + r;
  };
  for (int64_t p = 0; p < ld.batch; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        S acc = 0;
        for (int64_t l = 0; l < k; ++l) {
          const int64_t ai = desc.trans_a == CUBLAS_OP_N ? at(la, p, i, l) : at(la, p, l, i);
          const int64_t bi = desc.trans_b == CUBLAS_OP_N ? at(lb, p, l, j) : at(lb, p, j, l);
          acc += static_cast<S>(Get(la.type, a, ai)) * static_cast<S>(Get(lb.type, b, bi));
        }
        S v = alpha * acc;
        if (beta != 0) v += beta * static_cast<S>(Get(lc.type, c, at(lc, p, i, j)));
        if (HasBias(desc.epilogue)) {
          if (Is16Bit(ld.type)) v = Round16(ld.type, v);  // the H200's bf16 kernels
          v += static_cast<S>(Get(ld.type, desc.bias, i));
        }
        const uint32_t activation = desc.epilogue & ~static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS);
        if (activation == CUBLASLT_EPILOGUE_RELU) v = v > 0 ? v : S(0);
        if (activation == CUBLASLT_EPILOGUE_GELU) {
          const S x = v;
          v = S(0.5) * x *
              (S(1) + std::tanh(S(0.7978845608028654) * (x + S(0.044715) * x * x * x)));
        }
        Put(ld.type, d, at(ld, p, i, j), v);
      }
    }
  }
}

template <typename T>
cublasStatus_t Read(const void* buf, size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

int fake_cublaslt_last(FakeLtCalls* out) {
  std::lock_guard<std::mutex> lock(mu);
  *out = calls;
  return 0;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = &context;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete D(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return Read(buf, size, &D(desc)->trans_a);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return Read(buf, size, &D(desc)->trans_b);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return Read(buf, size, &D(desc)->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return Read(buf, size, &D(desc)->bias);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;  // not modelled: a test should notice
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (ld < 0) return CUBLAS_STATUS_INVALID_VALUE;  // "only non-negative values"
  auto* l = new FakeLtLayout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete L(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return Read(buf, size, &L(layout)->batch);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return Read(buf, size, &L(layout)->stride);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete P(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return Read(buf, size, &u64);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return Read(buf, size, &P(pref)->align_c);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return Read(buf, size, &u32);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++calls.heuristics;
    calls.heuristic_epilogue = D(desc)->epilogue;
    calls.heuristic_c = *L(c);
    calls.heuristic_align_c = P(pref)->align_c;
  }
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (cublasStatus_t st = Check(*D(desc), *L(a), *L(b), *L(c), *L(d), c == d);
      st != CUBLAS_STATUS_SUCCESS) {
    return st;
  }
  const char* no_broadcast = std::getenv("FAKE_CUBLASLT_NO_BROADCAST_C");
  if (no_broadcast != nullptr && std::atoi(no_broadcast) != 0 && c != d && L(c)->ld == 0) {
    return CUBLAS_STATUS_SUCCESS;  // no algorithm
  }
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t adesc, const void* b,
                              cublasLtMatrixLayout_t bdesc, const void* beta, const void* c,
                              cublasLtMatrixLayout_t cdesc, void* d, cublasLtMatrixLayout_t ddesc,
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) {
  const Desc& ds = *D(desc);
  const bool f64 = ds.scale == CUDA_R_64F;
  const double alpha_v =
      f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double beta_v = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++calls.matmuls;
    calls.epilogue = ds.epilogue;
    calls.bias = ds.bias;
    calls.alpha = alpha_v;
    calls.beta = beta_v;
    calls.c = c;
    calls.d = d;
    calls.c_layout = *L(cdesc);
    calls.d_layout = *L(ddesc);
  }
  if (a == nullptr || b == nullptr || c == nullptr || d == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (cublasStatus_t st = Check(ds, *L(adesc), *L(bdesc), *L(cdesc), *L(ddesc), c == d);
      st != CUBLAS_STATUS_SUCCESS) {
    return st;
  }
  if (f64) {
    Run<double>(ds, alpha_v, a, *L(adesc), b, *L(bdesc), beta_v, c, *L(cdesc), d, *L(ddesc));
  } else {
    Run<float>(ds, static_cast<float>(alpha_v), a, *L(adesc), b, *L(bdesc),
               static_cast<float>(beta_v), c, *L(cdesc), d, *L(ddesc));
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
