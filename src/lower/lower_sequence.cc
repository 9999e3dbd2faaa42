// Lowering of the sequence ops: Gather, UnsortedSegmentSum and Iota (lower_ops.h).
//
// Out-of-range indices (docs/BAD_INPUT.md): a compiled kernel cannot return a Status
// for a value it reads, so Gather reads zeros there and UnsortedSegmentSum drops the
// slice, as the reference kernels do. Gather's load is clamped into the table first:
// Halide's bounds inference then sees every read inside the buffer, and no index, in
// range or not, reads outside it.
#include <string>
#include <vector>

#include "lower/long_sums.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {

using Halide::Expr;

Value LowerGather(LoweringContext& ctx, const std::string& name, const GatherAttrs& attrs,
                  const Value& params, const Value& indices, const TensorType& out) {
  const int axis = attrs.axis;
  const int ids_rank = static_cast<int>(indices.shape.size());
  const Expr n = ctx.Extent(params, axis);
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    const std::vector<Expr> ids_index(index.begin() + axis, index.begin() + axis + ids_rank);
    const Expr i = At(indices, ids_index);
    std::vector<Expr> p_index(index.begin(), index.begin() + axis);
    p_index.push_back(Halide::clamp(i, 0, Halide::max(n - 1, 0)));
    p_index.insert(p_index.end(), index.begin() + axis + ids_rank, index.end());
    const Expr v = At(params, p_index);
    return Halide::select(i >= 0 && i < n, v, Halide::Internal::make_zero(v.type()));
  });
}

Value LowerSegmentSum(LoweringContext& ctx, const std::string& name, const SegmentSumAttrs& attrs,
                      const Value& data_in, const Value& ids_in, const TensorType& out) {
  const int axis = attrs.axis;
  const int ids_rank = static_cast<int>(ids_in.shape.size());
  const int rank = static_cast<int>(out.shape.size());
  const Halide::Type t = HalideType(out.dtype);
  const Expr zero = Halide::Internal::make_zero(t);
  // The data's index for output index `index` (row-major) and ids index `j`.
  auto data_index = [&](const std::vector<Expr>& index, const std::vector<Expr>& j) {
    std::vector<Expr> d(index.begin(), index.begin() + axis);
    d.insert(d.end(), j.begin(), j.end());
    d.insert(d.end(), index.begin() + axis + 1, index.end());
    return d;
  };
  if (ids_rank == 0) {  // one id for all of data: no sum
    return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
      return Halide::select(At(ids_in, {}) == index[axis], At(data_in, data_index(index, {})),
                            zero);
    });
  }
  if (NumElements(ids_in.shape) == 0) return Fill(out.dtype, out.shape, 0);
  // Constant operands become Funcs: an RDom the update does not read is dropped.
  const Value data = Materialize(ctx, name + "_data", data_in);
  const Value ids = Materialize(ctx, name + "_ids", ids_in);

  // Each output element walks every id in row-major order (the RDom's first dim is the
  // ids' last) and adds the slices whose id names its segment: a fixed order, no
  // atomics, the reference's sums. O(segments x ids) work; an embedding's gradient over
  // a small vocabulary (characters, a few thousand tokens) is what it is for.
  Halide::Region region;
  bool symbolic = false;
  for (int d = ids_rank - 1; d >= 0; --d) {
    symbolic = symbolic || SymbolOf(ids, d) >= 0;
    region.push_back({0, ctx.Extent(ids, d)});
  }
  Halide::RDom r(region, ctx.UniqueName(name + "_r"));
  std::vector<Expr> j;  // row-major
  for (int d = ids_rank - 1; d >= 0; --d) j.push_back(r[d]);

  std::vector<Halide::Var> vars = HalideVars(rank);
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) index.push_back(vars[rank - 1 - d]);
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = zero;
  const Expr term = Halide::select(At(ids, j) == index[axis],
                                   Halide::cast(t, At(data, data_index(index, j))), zero);
  // Plus a zero Halide cannot see through, as the Sum reduction (lower_reduce.cc): loop
  // trimming must not decide the term away from a simplification it is wrong about.
  std::vector<int64_t> estimates;
  for (int d = ids_rank - 1; d >= 0; --d) estimates.push_back(ids.shape[d]);
  const SumStages sums =
      DefineSum(ctx, name, acc, vars, r, estimates, HalideExtents(out.shape), term,
                [&ctx, t](const Expr& s, const Expr& u) {
                  return t.is_float() ? s + (u + ctx.OpaqueZero(t)) : WrapAdd(s, u);
                });
  if (sums.partial.acc.defined()) ctx.stages().push_back(sums.partial);

  schedule::Stage stage;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = acc;
  stage.rdom = sums.rdom;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = sums.reduction_extent;
  stage.reduction_symbolic = symbolic;
  // Dim 0 is the slices' innermost dim (or the segment's): contiguous or broadcast
  // loads, never a gather across the RDom.
  stage.reduces_innermost = false;
  ctx.stages().push_back(stage);
  return Inline(out.dtype, out.shape, [acc](const std::vector<Expr>& index) mutable {
    std::vector<Expr> args(index.rbegin(), index.rend());
    return acc(args);
  });
}

Value LowerIota(const TensorType& out) {
  // Computed where it is read (no stage of its own): its extent is the reader's, a
  // symbolic one included.
  return Inline(out.dtype, out.shape, [](const std::vector<Expr>& index) { return index[0]; });
}

}  // namespace lower
}  // namespace braze
