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

SumStages DefineSum(LoweringContext& ctx, const std::string& name, Halide::Func acc,
                    const std::vector<Halide::Var>& vars, const Halide::RDom& r,
                    const std::vector<int64_t>& estimates, const schedule::Extents& extents,
                    const schedule::Symbolic& symbolic, const Expr& term, const AddTerm& add) {
  SumStages out;
  out.rdom = r;
  int64_t terms = 1;
  int d = 0;  // the longest dim
  for (size_t i = 0; i < estimates.size(); ++i) {
    terms *= std::max<int64_t>(estimates[i], 0);
    if (estimates[i] > estimates[d]) d = static_cast<int>(i);
  }
  out.reduction_extent = terms;
  const bool f32 = acc.output_types()[0] == Halide::Float(32);
  if (f32 && terms > kLongSum) ctx.long_sums = true;
  if (!f32 || terms <= kLongSum || !ctx.block_long_sums) {
    acc(vars) = add(acc(vars), term);
    return out;
  }
  // B: a power of two near sqrt(terms) / (the other dims' terms), at most half of K, so
  // that a partial sum runs over about sqrt(terms) terms and there are about as many.
  const int64_t k = estimates[d];
  const double want = std::sqrt(static_cast<double>(terms)) / static_cast<double>(terms / k);
  int64_t block = 1;
  while (block < want && block * 4 <= k) block *= 2;
  const Expr extent = r[d].extent(), min = r[d].min();
  const Expr blocks = Halide::Internal::simplify(extent / static_cast<int>(block));

  // part(v, b) += term at r_d = min + b * B + rb.
  const Halide::Var b(name + "_block");
  std::vector<Halide::Var> part_vars = vars;
  part_vars.push_back(b);
  Halide::Func part(ctx.UniqueName(name + "_part"));
  part(part_vars) = acc.value();
  Expr part_term;
  const Halide::RDom rb = Moved(ctx, name + "_rb", r, d, static_cast<int>(block),
                                min + b * static_cast<int>(block), term, &part_term);
  part(part_vars) = add(part(part_vars), part_term);

  // acc(v) += part(v, rp), then the tail's terms.
  const Halide::RDom rp(0, blocks, ctx.UniqueName(name + "_rp"));
  std::vector<Expr> part_at(vars.begin(), vars.end());
  part_at.push_back(rp.x);
  acc(vars) = Halide::strict_float(acc(vars) + part(part_at));
  const Expr tail = Halide::Internal::simplify(extent - blocks * static_cast<int>(block));
  if (!Halide::Internal::is_const_zero(tail)) {
    Expr tail_term;
    Moved(ctx, name + "_rt", r, d, tail, min + blocks * static_cast<int>(block), term, &tail_term);
    acc(vars) = add(acc(vars), tail_term);
  }

  out.rdom = rp;
  out.reduction_extent = k / block;
  schedule::Stage& stage = out.partial;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = part;
  stage.extents = extents;
  stage.extents.push_back(k / block);
  stage.symbolic = symbolic;
  if (!stage.symbolic.empty()) stage.symbolic.push_back(!Halide::Internal::is_const(extent));
  stage.rdom = rb;
  stage.reduction_extent = terms / k * block;
  stage.reduction_symbolic = !Halide::Internal::is_const(extent);
  stage.reduces_innermost = false;
  return out;
}

}  // namespace lower
}  // namespace braze
