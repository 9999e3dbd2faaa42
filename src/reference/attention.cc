// The attention ops' reference kernels (graph.h's AttentionAttrs): plain and exact, in
// double whatever the dtype, one query row (or key row) at a time over the whole
// [Tq, Tk] score matrix of a batch entry. The compiled kernels never hold that matrix
// (docs/ATTENTION.md); these are what they are checked against.
#include <cmath>
#include <limits>
#include <vector>

#include "braze/random.h"
#include "braze/status.h"
#include "reference/kernel_util.h"

namespace braze {
namespace reference_internal {
namespace {

// The sizes of one call: the leading dims flattened into `batch`; with dropout, its
// Philox key and step (graph.h's AttentionAttrs) and whether the weights are f64.
struct Dims {
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  PhiloxKey key = {0, 0};
  uint64_t step = 0;
  bool f64 = false;
};

Dims DimsOf(const HostTensor& q, const HostTensor& k, const HostTensor* v) {
  const Shape& qs = q.shape();
  const size_t rank = qs.size();
  Dims n;
  for (size_t i = 0; i + 2 < rank; ++i) n.batch *= qs[i];
  n.tq = qs[rank - 2];
  n.d = qs[rank - 1];
  n.tk = k.shape()[rank - 2];
  n.dv = v != nullptr ? v->shape()[rank - 1] : 0;
  return n;
}

// Key j is visible to query i (graph.h's AttentionAttrs).
bool Visible(const AttentionAttrs& a, const Dims& n, int64_t i, int64_t j) {
  return !a.causal || j <= i + (n.tk - n.tq);
}

// Row i's scaled scores against every key of batch entry b (visible ones only: the
// others are left at 0 and never read).
template <typename T>
void Scores(const AttentionAttrs& a, const Dims& n, const T* q, const T* k, int64_t b, int64_t i,
            std::vector<double>& s) {
  s.assign(n.tk, 0.0);
  const T* qi = q + (b * n.tq + i) * n.d;
  for (int64_t j = 0; j < n.tk; ++j) {
    if (!Visible(a, n, i, j)) continue;
    const T* kj = k + (b * n.tk + j) * n.d;
    double dot = 0;
    for (int64_t c = 0; c < n.d; ++c)
      dot += static_cast<double>(qi[c]) * static_cast<double>(kj[c]);
    s[j] = dot * a.scale;
  }
}

// log(sum_j exp(s_j)) over the visible keys; -inf when there are none, NaN when a score
// is NaN (std::max would skip it, or not, by its place in the row) or +inf (exp(inf -
// inf)), -inf when every score is -inf.
double LogSumExp(const AttentionAttrs& a, const Dims& n, int64_t i, const std::vector<double>& s) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n.tk; ++j) {
    if (!Visible(a, n, i, j)) continue;
    if (std::isnan(s[j])) return s[j];
    m = std::max(m, s[j]);
  }
  if (std::isinf(m) && m < 0) return m;
  double l = 0;
  for (int64_t j = 0; j < n.tk; ++j) {
    if (Visible(a, n, i, j)) l += std::exp(s[j] - m);
  }
  return m + std::log(l);
}

// The softmax weight of (i, j) before dropout: exp(s - lse), 0 for a hidden key.
double Weight(const AttentionAttrs& a, const Dims& n, int64_t i, int64_t j,
              const std::vector<double>& s, double lse) {
  return Visible(a, n, i, j) ? std::exp(s[j] - lse) : 0.0;
}

// Dropout's factor for weight (b, i, j): 0 where the weight's uniform (RandomUniform's
// of its row-major index in [batch, Tq, Tk], docs/RANDOM.md) is below the rate, else
// 1 / (1 - rate), as Dropout computes it in the weights' dtype.
double Keep(const AttentionAttrs& a, const Dims& n, int64_t b, int64_t i, int64_t j) {
  if (a.dropout == 0) return 1.0;
  const uint64_t index = static_cast<uint64_t>((b * n.tq + i) * n.tk + j);
  const PhiloxCounter bits =
      Philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(n.step), static_cast<uint32_t>(n.step >> 32)},
                    n.key);
  const double u = n.f64 ? PhiloxToUniformF64(bits) : static_cast<double>(PhiloxToUniformF32(bits));
  if (u < (n.f64 ? a.dropout : static_cast<double>(static_cast<float>(a.dropout)))) return 0.0;
  const double scale = 1.0 / (1.0 - a.dropout);
  return n.f64 ? scale : static_cast<double>(static_cast<float>(scale));
}

template <typename T>
void Forward(const AttentionAttrs& a, const Dims& n, const T* q, const T* k, const T* v, T* o,
             T* lse_out) {
  std::vector<double> s, acc;
  for (int64_t b = 0; b < n.batch; ++b) {
    for (int64_t i = 0; i < n.tq; ++i) {
      Scores(a, n, q, k, b, i, s);
      const double lse = LogSumExp(a, n, i, s);
      if (lse_out != nullptr) lse_out[b * n.tq + i] = static_cast<T>(lse);
      if (o == nullptr) continue;
      acc.assign(n.dv, 0.0);
      for (int64_t j = 0; j < n.tk; ++j) {
        const double p = Weight(a, n, i, j, s, lse) * Keep(a, n, b, i, j);
        if (p == 0) continue;
        const T* vj = v + (b * n.tk + j) * n.dv;
        for (int64_t c = 0; c < n.dv; ++c) acc[c] += p * static_cast<double>(vj[c]);
      }
      for (int64_t c = 0; c < n.dv; ++c) o[(b * n.tq + i) * n.dv + c] = static_cast<T>(acc[c]);
    }
  }
}

// FlashAttention-2's backward, from the given lse and delta (= rowsum(dO * O)):
// P = exp(S - lse), dP = dO v^T (times dropout's factor), dS = P (dP - delta);
// dq = scale dS k, dk = scale dS^T q, dv = (P times dropout's factor)^T dO.
template <typename T>
void Backward(OpKind op, const AttentionAttrs& a, const Dims& n, absl::Span<const HostTensor> in,
              T* out) {
  const T* q = in[0].data<T>();
  const T* k = in[1].data<T>();
  const T* v = in[2].data<T>();
  const T* dout = in[3].data<T>();
  const T* lse = in[4].data<T>();
  const T* delta = in[5].data<T>();
  const int64_t width = op == OpKind::kAttentionGradV ? n.dv : n.d;
  const int64_t rows = op == OpKind::kAttentionGradQ ? n.tq : n.tk;
  std::vector<double> acc(n.batch * rows * width, 0.0), s;
  for (int64_t b = 0; b < n.batch; ++b) {
    for (int64_t i = 0; i < n.tq; ++i) {
      Scores(a, n, q, k, b, i, s);
      const T* doi = dout + (b * n.tq + i) * n.dv;
      for (int64_t j = 0; j < n.tk; ++j) {
        const double p = Weight(a, n, i, j, s, static_cast<double>(lse[b * n.tq + i]));
        if (p == 0) continue;
        const double keep = Keep(a, n, b, i, j);
        if (op == OpKind::kAttentionGradV) {
          double* row = &acc[(b * n.tk + j) * width];
          for (int64_t c = 0; c < n.dv; ++c) row[c] += p * keep * static_cast<double>(doi[c]);
          continue;
        }
        const T* vj = v + (b * n.tk + j) * n.dv;
        double dp = 0;
        for (int64_t c = 0; c < n.dv; ++c)
          dp += static_cast<double>(doi[c]) * static_cast<double>(vj[c]);
        const double ds = p * (dp * keep - static_cast<double>(delta[b * n.tq + i])) * a.scale;
        const T* other =
            op == OpKind::kAttentionGradQ ? k + (b * n.tk + j) * n.d : q + (b * n.tq + i) * n.d;
        double* row = &acc[(b * rows + (op == OpKind::kAttentionGradQ ? i : j)) * width];
        for (int64_t c = 0; c < n.d; ++c) row[c] += ds * static_cast<double>(other[c]);
      }
    }
  }
  for (size_t e = 0; e < acc.size(); ++e) out[e] = static_cast<T>(acc[e]);
}

}  // namespace

Kernel RunAttention(OpKind op, const AttentionAttrs& attrs, absl::Span<const HostTensor> inputs,
                    const TensorType& out_type) {
  HostTensor out(out_type.dtype, out_type.shape);
  Dims n = DimsOf(inputs[0], inputs[1], inputs.size() > 2 ? &inputs[2] : nullptr);
  if (attrs.dropout != 0 && op != OpKind::kAttentionLogSumExp) {
    const HostTensor& step = inputs.back();
    if (step.dtype() != DType::kI32 || step.num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpName(op), " dropout step must be an i32 scalar, got ", TypeString(step.type())));
    }
    n.step = static_cast<uint64_t>(static_cast<int64_t>(step.data<int32_t>()[0]));
    n.key = RandomKey(attrs.seed, attrs.op_key);
    n.f64 = out_type.dtype == DType::kF64;
  }
  BRAZE_RETURN_IF_ERROR(VisitFloating(out_type.dtype, OpName(op), [&](auto tag) {
    using T = decltype(tag);
    const T* q = inputs[0].data<T>();
    const T* k = inputs[1].data<T>();
    switch (op) {
      case OpKind::kAttention:
        Forward<T>(attrs, n, q, k, inputs[2].data<T>(), out.data<T>(), nullptr);
        return absl::OkStatus();
      case OpKind::kAttentionLogSumExp:
        Forward<T>(attrs, n, q, k, nullptr, nullptr, out.data<T>());
        return absl::OkStatus();
      case OpKind::kAttentionGradQ:
      case OpKind::kAttentionGradK:
      case OpKind::kAttentionGradV:
        Backward<T>(op, attrs, n, inputs, out.data<T>());
        return absl::OkStatus();
      default:
        return absl::InternalError(absl::StrCat(OpName(op), " is not an attention op"));
    }
  }));
  return std::vector<HostTensor>{std::move(out)};
}

}  // namespace reference_internal
}  // namespace braze
