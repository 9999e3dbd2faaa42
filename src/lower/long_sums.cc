// Long f32 sums as two stages; see long_sums.h.
#include "lower/long_sums.h"

#include <cmath>
#include <map>

namespace braze {
namespace lower {
namespace {

using Halide::Expr;

// `r`'s dims with dim d's range replaced by [0, extent): a new domain named `name`
// whose RVars stand for `r`'s, dim d's at `offset + its own`, in `term` and in r's
// predicate. Returns the domain; `*moved` is `term` over it.
Halide::RDom Moved(LoweringContext& ctx, const std::string& name, const Halide::RDom& r, int d,
                   const Expr& extent, const Expr& offset, const Expr& term, Expr* moved) {
  Halide::Region region;
  for (int i = 0; i < r.dimensions(); ++i) {
    region.push_back(i == d ? Halide::Range(0, extent) : Halide::Range(r[i].min(), r[i].extent()));
  }
  Halide::RDom m(region, ctx.UniqueName(name));
  std::map<std::string, Expr> at;
  for (int i = 0; i < r.dimensions(); ++i) {
    at[r[i].name()] = i == d ? Halide::Internal::simplify(offset + m[i]) : Expr(m[i]);
  }
  const Expr predicate = r.domain().predicate();
  if (predicate.defined() && !Halide::Internal::is_const_one(predicate)) {
    m.where(Halide::Internal::substitute(at, predicate));
  }
  *moved = Halide::Internal::substitute(at, term);
  return m;
}

}  // namespace

SumBlocks ChooseBlocks(const std::vector<int64_t>& extents, int64_t outputs) {
  SumBlocks out;
  int64_t terms = 1;
  for (size_t i = 0; i < extents.size(); ++i) {
    terms *= std::max<int64_t>(extents[i], 0);
    if (extents[i] > extents[out.dim]) out.dim = static_cast<int>(i);
  }
  if (terms <= kLongSum) return out;
  const int64_t k = extents[out.dim], other = terms / k;
  // B: a power of two near sqrt(terms) / other, at most half of K, so that a partial
  // sum runs over about sqrt(terms) terms and there are about as many (when K allows).
  const double want = std::sqrt(static_cast<double>(terms)) / static_cast<double>(other);
  int64_t block = 1;
  while (block < want && block * 4 <= k) block *= 2;
  // Fewer, longer blocks past the partials' budget, none over kLongSum terms.
  const int64_t max_blocks = kPartialBudget / std::max<int64_t>(outputs, 1);
  while (k / block > max_blocks && block * 4 <= k && block * 2 * other <= kLongSum) block *= 2;
  out.block = block;
  out.blocks = k / block;
  out.tail = k % block;
  return out;
}

SumStages DefineSum(LoweringContext& ctx, const std::string& name, Halide::Func acc,
                    const std::vector<Halide::Var>& vars, const Halide::RDom& r,
                    const std::vector<int64_t>& estimates, const schedule::Extents& extents,
                    const Expr& term, const AddTerm& add) {
  SumStages out;
  out.rdom = r;
  int64_t terms = 1;
  for (int64_t e : estimates) terms *= std::max<int64_t>(e, 0);
  out.reduction_extent = terms;
  const bool f32 = acc.output_types()[0] == Halide::Float(32);
  if (f32 && terms > kLongSum) ctx.long_sums = true;
  // Only a constant domain is split: its blocks and tail are then known here.
  std::vector<int64_t> exact;
  for (int i = 0; i < r.dimensions(); ++i) {
    if (const int64_t* e = Halide::Internal::as_const_int(r[i].extent())) exact.push_back(*e);
  }
  int64_t outputs = 1;
  for (int64_t e : extents) outputs *= std::max<int64_t>(e, 1);
  const SumBlocks split = ChooseBlocks(exact, outputs);
  if (!f32 || !ctx.block_long_sums || static_cast<int>(exact.size()) != r.dimensions() ||
      split.block == 0) {
    acc(vars) = add(acc(vars), term);
    return out;
  }
  const int d = split.dim, block = static_cast<int>(split.block);
  const Expr min = r[d].min();

  // part(v, b) += term at r_d = min + b * B + rb.
  const Halide::Var b(name + "_block");
  std::vector<Halide::Var> part_vars = vars;
  part_vars.push_back(b);
  Halide::Func part(ctx.UniqueName(name + "_part"));
  part(part_vars) = acc.value();
  Expr part_term;
  const Halide::RDom rb = Moved(ctx, name + "_rb", r, d, block, min + b * block, term, &part_term);
  part(part_vars) = add(part(part_vars), part_term);

  // acc(v) += part(v, rp), then the tail's terms.
  const Halide::RDom rp(0, static_cast<int>(split.blocks), ctx.UniqueName(name + "_rp"));
  std::vector<Expr> part_at(vars.begin(), vars.end());
  part_at.push_back(rp.x);
  acc(vars) = add(acc(vars), part(part_at));
  if (split.tail > 0) {
    Expr tail_term;
    Moved(ctx, name + "_rt", r, d, static_cast<int>(split.tail),
          min + static_cast<int>(split.blocks * split.block), term, &tail_term);
    acc(vars) = add(acc(vars), tail_term);
  }

  out.rdom = rp;
  out.reduction_extent = split.blocks;
  schedule::Stage& stage = out.partial;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = part;
  stage.extents = extents;
  stage.extents.push_back(split.blocks);
  stage.rdom = rb;
  stage.reduction_extent = split.block;
  for (int i = 0; i < r.dimensions(); ++i) {
    if (i != d) stage.reduction_extent *= exact[i];
  }
  stage.reduces_innermost = false;
  return out;
}

}  // namespace lower
}  // namespace braze
