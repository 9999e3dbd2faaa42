// The online (one-pass) softmax of GPU lowerings: a row's Max m and its Sum of exp(x - m)
// from one pass over the row (issue 39 item 2; docs/CUDA.md, "Online softmax").
//
// Softmax, LogSoftmax and cross entropy are composites (frontend/ops.cc):
//
//   m = Max(x, {last}, keep_dims)   s = Sum(Exp(x - m), {last})   (Sub and Exp between)
//
// lowered node by node that is two row reductions: the max, then the sum of exps, which
// must wait for it. On a GPU, where a row is a block (or a warp) of threads, each is a
// pass over the row and a combine across the threads. Here the pair is one pass:
//
//   pass    lane u of L (32) walks x[u], x[u + L], ... keeping the running max mu and
//           su = sum of exp(x - mu), rescaled by exp(mu_old - mu_new) when mu grows: one
//           exp per element, exp(-|x - mu|), serial per lane (no rfactor: Halide 14
//           proves no such update associative, so the lanes are a pure dim of their own)
//   top     M' = max over the lanes of mu, with two integer maxima of the bits (for
//           NaN, and the sign of a zero maximum): a combine of 32-bit values (warp
//           shuffles on CUDA)
//   sum     S' = sum over the lanes of su * exp(mu - M'), in f64: one exp per lane
//
// and then the reference's m and s exactly where the reference is exact: m is the Max's
// value bit for bit (NaN where the row has one, -inf for a row of -inf, +0 above -0),
// and s is NaN wherever m is not finite (a NaN, two +inf, a row of -inf: the reference's
// exp(x - m) has a NaN term there). Within a lane the running max starts at -FLT_MAX,
// not -inf, so a -inf element adds exp(-inf) = 0 and never exp(-inf - -inf) = NaN.
//
// Accuracy: the sum is the reference's f64 sum of terms rounded once in f32 (each
// exp's own error, ~2 ulp), times at most len / L + 1 rescale factors, each rounded in
// f32 too: a term's relative error is within (len / L + 2) x 2^-22 (about 3e-5 for rows
// of 4096, under the 1e-4 the reference's tolerances allow), and only rows whose max
// keeps growing along a lane get near it (a random row rescales about log(len / L) times).
//
// CPU lowerings keep the two reductions: the safe default's row pipeline reads each row
// once from cache already, and its exps are vectorized.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_ONLINE_SOFTMAX_H_
#define BRAZE_LOWER_ONLINE_SOFTMAX_H_

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "lower/cluster_spec.h"
#include "lower/lower_util.h"

namespace braze {
namespace lower {

// The softmax pairs of a cluster lowered for a GPU: a Max's id -> the id of the Sum of
// Exp(x - Max) over the same last axis, both keep_dims where the Max's is (the Sum any),
// every node in the cluster, x a static f32 tensor. Empty when `gpu` is false.
std::map<int, int> FindOnlineSoftmaxes(const ClusterSpec& spec, bool gpu);

// The Max's and the Sum's values of one pair (m of type `max_out`, s of `sum_out`),
// from one pass over `x`; nothing when x's row is symbolic, not f32, empty or longer
// than kOnlineMaxRow (the two reductions are lowered then).
std::optional<std::pair<Value, Value>> LowerOnlineSoftmax(LoweringContext& ctx,
                                                          const std::string& name, const Value& x,
                                                          const TensorType& max_out,
                                                          const TensorType& sum_out);

// Lanes of the pass (a warp), and the longest row it takes: a lane then walks at most
// 128 elements, and the rescale's error stays within the bound above, 3.1e-5 (at 16384
// it would be 1.2e-4: over the reference's 1e-4 for a row rising along every lane).
inline constexpr int kOnlineLanes = 32;
inline constexpr int64_t kOnlineMaxRow = 4096;

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_ONLINE_SOFTMAX_H_
