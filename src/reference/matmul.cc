// MatMul and BatchMatMul reference kernels. Floating products accumulate in double;
// i32 ones in uint64 so overflow wraps (mod 2^32 in the end) instead of being undefined.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

// One [M,K] x [K,N] product. a(i,k) = a[i * a_si + k * a_sk] and likewise for b, which
// is how the transpose flags are applied without copying.
struct Gemm {
  int64_t m, n, k;
  int64_t a_si, a_sk, b_sk, b_sj;
};

template <typename T>
void RunGemm(const Gemm& g, const T* a, const T* b, T* out) {
  using A = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  std::vector<A> acc(g.n);
  for (int64_t i = 0; i < g.m; ++i) {
    std::fill(acc.begin(), acc.end(), A(0));
    // i-k-j order: the inner loop runs along a row of b (contiguous unless transposed).
    for (int64_t kk = 0; kk < g.k; ++kk) {
      const T a_ik = a[i * g.a_si + kk * g.a_sk];
      const T* b_k = b + kk * g.b_sk;
      for (int64_t j = 0; j < g.n; ++j) {
        if constexpr (kIsFloat<T>) {
          acc[j] += static_cast<double>(a_ik) * static_cast<double>(b_k[j * g.b_sj]);
        } else {
          acc[j] += static_cast<uint64_t>(int64_t{a_ik} * int64_t{b_k[j * g.b_sj]});
        }
      }
    }
    for (int64_t j = 0; j < g.n; ++j) {
      if constexpr (kIsFloat<T>) {
        out[i * g.n + j] = static_cast<T>(acc[j]);
      } else {
        out[i * g.n + j] = WrapToI32(static_cast<int64_t>(acc[j]));
      }
    }
  }
}

}  // namespace

Kernel RunMatMul(const MatMulAttrs& attrs, const HostTensor& a, const HostTensor& b,
                 const TensorType& out_type, bool batched) {
  const char* what = batched ? "BatchMatMul" : "MatMul";
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " operands differ in dtype: ", DTypeName(a.dtype()), " vs ", DTypeName(b.dtype())));
  }
  const int rank = a.rank();
  const bool rank_ok = batched ? rank >= 3 : rank == 2;
  if (!rank_ok || b.rank() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " needs ", batched ? "equal ranks >= 3" : "rank-2 operands", ", got ",
                     ShapeString(a.shape()), " and ", ShapeString(b.shape())));
  }
  const int64_t a_rows = a.dim(rank - 2), a_cols = a.dim(rank - 1);
  const int64_t b_rows = b.dim(rank - 2), b_cols = b.dim(rank - 1);
  Gemm g;
  g.m = attrs.transpose_a ? a_cols : a_rows;
  g.k = attrs.transpose_a ? a_rows : a_cols;
  const int64_t b_k = attrs.transpose_b ? b_cols : b_rows;
  g.n = attrs.transpose_b ? b_rows : b_cols;
  g.a_si = attrs.transpose_a ? 1 : a_cols;
  g.a_sk = attrs.transpose_a ? a_cols : 1;
  g.b_sk = attrs.transpose_b ? 1 : b_cols;
  g.b_sj = attrs.transpose_b ? b_cols : 1;

  Shape expected_shape(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  if (g.k != b_k || expected_shape != b_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " shapes do not match: ", ShapeString(a.shape()), attrs.transpose_a ? "^T" : "",
        " x ", ShapeString(b.shape()), attrs.transpose_b ? "^T" : ""));
  }
  expected_shape.push_back(g.m);
  expected_shape.push_back(g.n);
  const TensorType expected{a.dtype(), expected_shape};
  if (out_type != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " gives ", TypeString(expected), ", not ", TypeString(out_type)));
  }
  int64_t batch = 1;
  for (int d = 0; d < rank - 2; ++d) batch *= a.dim(d);

  HostTensor out(out_type.dtype, out_type.shape);
  BRAZE_RETURN_IF_ERROR(VisitNumeric(a.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint8_t>) {
      return absl::InternalError("unreachable: bool");
    } else {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* o = out.data<T>();
      for (int64_t s = 0; s < batch; ++s) {
        RunGemm<T>(g, pa + s * a_rows * a_cols, pb + s * b_rows * b_cols, o + s * g.m * g.n);
      }
      return absl::OkStatus();
    }
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
