// Long f32 sums as two stages for the autoschedulers (XLA's tree reduction rewriter).
//
// Adams2019 and Mullapudi2016 schedule a reduction's update as it is written: a
// MatMul's k loop (or a convolution's window, a segment sum's ids) runs serially into
// one f32 accumulator per output element, vectorized or parallel over the outputs only.
// A running f32 sum of n terms rounds each add at the sum's magnitude: past 2^24 times
// a term, every term loses its low bits, up to n * 2^-24 of the sum in all (braze-fuzz
// seed 61100011: a dot product of 8,388,608 terms of about 1.33, 0.8% off, every term
// rounded to 1 once the sum passed 2^23). The safe default and the GPU heuristic split
// long reductions themselves (rfactor), Li2018 too; Sum and Mean accumulate in f64.
//
// With LowerOptions::block_long_sums (the lowering for those two autoschedulers), an
// f32 sum over more than kLongSum terms is written as two:
//
//   part(v, b) = 0;  part(v, b) += term(r with r_d = b * B + rb)     rb in [0, B)
//   acc(v) = 0;      acc(v) += part(v, rp)                           rp in [0, K / B)
//                    acc(v) += term(r with r_d = (K / B) * B + rt)   rt in [0, K % B)
//
// d is the reduction domain's longest dim (extent K, a constant: the CPU autoschedulers
// are only given static shapes, and a sum over a symbolic domain stays one stage), B a
// power of two near sqrt(terms) / (terms / K), at most K / 2, so that the longest accumulator
// runs over max(B * terms / K, K / B + the tail's terms) terms: about 2 sqrt(terms) when K
// is at least sqrt(terms) (8,388,608 terms: 2,048 partial sums of 4,096), but terms / K
// (B = 1) when the other dims multiply to more than K. The last update is the tail of a
// K that B does not divide (an odd or prime K). The partial sums hold outputs x K / B
// values, so B grows past sqrt(terms) where that would pass kPartialBudget (ChooseBlocks).
// The autoscheduler sees the partial sums as a Func with one more pure dim, which it may
// vectorize or run in parallel (a dot product's one output had nothing to parallelize
// before).
//
// Internal header: includes Halide.h.
#ifndef BRAZE_LOWER_LONG_SUMS_H_
#define BRAZE_LOWER_LONG_SUMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lower/lower_util.h"

namespace braze {
namespace lower {

// Sums over more terms than this are split (with block_long_sums). A serial f32 sum of
// 2^14 terms is within 2^-10 of exact even when every add rounds the same way; the
// bench's matmuls (k up to 4,096) stay one stage.
inline constexpr int64_t kLongSum = int64_t{1} << 14;

// The partial sums' size cap, in elements (16 MiB of f32): Mullapudi2016 may compute
// them at root, beside the cluster's own buffers, and a matmul of many outputs would
// otherwise store ~sqrt(K) times its output ([1024,20000]x[20000,1024]: 327 MB). Past
// it, fewer and longer blocks (precision (B + K / B) * 2^-24, still far below K * 2^-24),
// but never a block whose partial runs over more than kLongSum terms: many outputs are
// what make the budget bite, and each output's own sum must stay as precise as a short
// one. So the partials hold at most max(kPartialBudget, about outputs x terms / kLongSum)
// elements (within 3x: B is a power of two, and there are 2 blocks or more): beyond
// the budget, a few values per 2^14 terms that the kernel adds anyway.
inline constexpr int64_t kPartialBudget = int64_t{1} << 22;

// How a sum is split: dim `dim` of its domain in `blocks` blocks of `block` terms, then
// `tail` terms. block == 0: one stage (a sum of at most kLongSum terms).
struct SumBlocks {
  int dim = 0;
  int64_t block = 0;
  int64_t blocks = 0;
  int64_t tail = 0;
};

// The split of a sum over a domain of `extents` (innermost first, constants) into
// `outputs` accumulators, as above; block == 0 when the sum has at most kLongSum terms.
SumBlocks ChooseBlocks(const std::vector<int64_t>& extents, int64_t outputs);

// An accumulator's update: the new value from the old one and a term.
using AddTerm = std::function<Halide::Expr(const Halide::Expr& acc, const Halide::Expr& term)>;

// What DefineSum made: the partial sums' stage (a kReduction over acc's dims and the
// blocks; its acc undefined when the sum is one stage), to register beside acc's own,
// and the domain of acc's first update (`r`, or the partial sums').
struct SumStages {
  schedule::Stage partial;
  Halide::RDom rdom;
  int64_t reduction_extent = 1;  // of acc's first update (an estimate when symbolic)
};

// Defines acc(vars)'s update(s) summing `term` (an Expr in `r`'s RVars and `vars`;
// `r`'s predicate, if any, kept) with `add`, after its pure definition (0) and before
// any other update. `extents`: acc's (Halide order). `estimates`: each dim of `r`'s
// extent (innermost first; the estimate of a symbolic one). Blocks it as above when
// ctx.block_long_sums, the accumulator is f32 and every extent of `r` is a constant;
// notes a long f32 sum in ctx either way (LoweredCluster::long_sums).
SumStages DefineSum(LoweringContext& ctx, const std::string& name, Halide::Func acc,
                    const std::vector<Halide::Var>& vars, const Halide::RDom& r,
                    const std::vector<int64_t>& estimates, const schedule::Extents& extents,
                    const Halide::Expr& term, const AddTerm& add);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LONG_SUMS_H_
