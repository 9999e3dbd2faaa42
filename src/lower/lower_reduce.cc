// Lowering of reductions (Sum, Mean, Max, Min over axes; ArgMax) and MatMul/BatchMatMul.
//
// Each becomes an accumulator Func with an update over an RDom, plus a pure Func that
// reads it; the accumulator is registered as a schedule::Stage so the safe default can
// compute_root/compute_at it (docs/HALIDE14.md rule 2). The RDom lists reduced dims
// innermost first, so its inner loop walks the input's contiguous dim.
//
// Semantics follow src/reference/reduce.cc and matmul.cc: floating Sum/Mean accumulate
// in double (long rows stay accurate; on the CPU a sum of non-negative f32 terms first
// adds groups of 4 in f32, within 2 roundings of the f64 sum: GroupsTerms); Max/Min
// propagate NaN; empty reductions give Sum 0, Mean NaN, Max -inf / INT32_MIN, Min +inf /
// INT32_MAX; ArgMax returns the first maximum (or the first NaN). MatMul accumulates in
// the element type: with the register-tiled schedules that is what keeps it fast.
//
// Updates keep selects, comparisons and NaN tests out where they can (float Max/Min
// reduce the values' bits with integer max and min): Halide 14 miscompiles vectorized
// GuardWithIf updates containing them, and schedule/schedule_check.h serializes such
// stages. ArgMax's index update needs a comparison, so it is the one that may run
// serially.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "device/cpu_gemm.h"
#include "lower/long_sums.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {
namespace {

using Halide::Expr;

double Identity(OpKind op, DType dtype) {
  const bool is_int = dtype == DType::kI32;
  switch (op) {
    case OpKind::kMax:
      return is_int ? std::numeric_limits<int32_t>::min()
                    : -std::numeric_limits<double>::infinity();
    case OpKind::kMin:
      return is_int ? std::numeric_limits<int32_t>::max() : std::numeric_limits<double>::infinity();
    case OpKind::kMean:
      return std::numeric_limits<double>::quiet_NaN();  // 0 / 0
    default:
      return 0;  // Sum
  }
}

// Our-order index Exprs for a Func's Halide-order vars.
std::vector<Expr> RowMajor(const std::vector<Halide::Var>& vars, int rank) {
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) index.push_back(vars[rank - 1 - d]);
  return index;
}

// Floating sums accumulate in f64 (the reference's rule). A sum of non-negative f32
// terms (Value::nonnegative: exps, squares, ...) first adds its terms in groups of 4
// in f32 on the CPU, then those in f64: with no cancellation each group's sum is
// within 2 f32 roundings (2^-23 relative) of its exact value, so the whole is too. A
// Sum's group overflows to inf only when the whole sum does (its f32 result is then inf
// too); a Mean's would also where the mean is finite (16 squares of 1.5e19), so a Mean
// adds its terms scaled by 1 / group (exact but for subnormal terms, which then lose at
// most 2^-150 each) and multiplies the f64 sum back. It saves the widening of 3 terms in
// 4, the costliest part of the reduction: LayerNorm's variance and softmax's sum of exps
// (measured in bench/RESULTS.md). The group is strict: Halide's simplifier would move a
// Mean's scale out of the adds.
constexpr int kSumGroup = 4;

// Whether a row of n non-negative terms is read in groups: only rows whose grouped loop
// still fills two accumulators of 32 lanes. Grouping the softmax regression step's rows
// of 10 (in pairs, a scalar loop either way) made its batch-1024 step 10.7 -> 12.9 ms
// (its exps are largely subnormal); with rows from 256 only, 8.0-8.2.
bool GroupsTerms(int64_t n) { return n % kSumGroup == 0 && n >= 256; }

}  // namespace

Value LowerReduce(LoweringContext& ctx, const std::string& name, OpKind op,
                  const ReduceAttrs& attrs, const Value& input, const TensorType& out) {
  if (attrs.axes.empty()) {
    // Nothing to reduce (a scalar's reduction, over all of its zero axes): each element
    // is its own sum, mean, max or min. An RDom over no dims is not a loop Halide builds.
    return Inline(out.dtype, out.shape,
                  [input](const std::vector<Expr>& index) { return At(input, index); });
  }
  const Value x = Materialize(ctx, name + "_in", input);
  const int rank = static_cast<int>(x.shape.size());
  std::vector<bool> reduced(rank, false);
  int64_t count = 1;
  Expr count_expr = 1;  // count, or its symbolic value
  bool symbolic = false;
  for (int axis : attrs.axes) {
    reduced[axis] = true;
    count *= x.shape[axis];
    count_expr = Halide::Internal::simplify(count_expr * ctx.Extent(x, axis));
    symbolic |= SymbolOf(x, axis) >= 0;
  }
  if (count == 0) return Fill(out.dtype, out.shape, Identity(op, out.dtype));

  const bool is_sum = op == OpKind::kSum || op == OpKind::kMean;
  const bool is_float = IsFloating(x.dtype);
  // The innermost reduced dim, read kSumGroup elements a step when `grouped`.
  int inner = rank - 1;
  while (!reduced[inner]) --inner;
  const bool grouped = is_sum && x.dtype == DType::kF32 && input.nonnegative && !ctx.gpu &&
                       SymbolOf(x, inner) < 0 && GroupsTerms(x.shape[inner]);

  // Reduced dims, innermost first.
  Halide::Region region;
  std::vector<int> rdom_dim(rank, -1);
  for (int d = rank - 1; d >= 0; --d) {
    if (!reduced[d]) continue;
    rdom_dim[d] = static_cast<int>(region.size());
    region.emplace_back(0, d == inner && grouped ? Expr(x.shape[d] / kSumGroup) : ctx.Extent(x, d));
  }
  Halide::RDom r(region, ctx.UniqueName(name + "_r"));

  const int out_rank = static_cast<int>(out.shape.size());
  std::vector<Halide::Var> vars = HalideVars(out_rank);
  const std::vector<Expr> out_index = RowMajor(vars, out_rank);
  std::vector<Expr> in_index(rank);
  for (int d = 0, p = 0; d < rank; ++d) {
    if (reduced[d]) {
      in_index[d] = r[rdom_dim[d]];
      if (attrs.keep_dims) ++p;
    } else {
      in_index[d] = out_index[p++];
    }
  }
  Expr v = At(x, in_index);
  if (grouped) {
    // The group's 4 terms, a quarter of the row apart, added as a tree in f32.
    Expr t[kSumGroup];
    for (int j = 0; j < kSumGroup; ++j) {
      std::vector<Expr> at = in_index;
      at[inner] = at[inner] + static_cast<int>(j * (x.shape[inner] / kSumGroup));
      t[j] = At(x, at);
      if (op == OpKind::kMean) t[j] = t[j] * (1.0f / kSumGroup);
    }
    v = Halide::strict_float((t[0] + t[1]) + (t[2] + t[3]));
  }
  const DType acc_dtype = is_sum && is_float ? DType::kF64 : x.dtype;
  // An i32 sum wraps like the reference's: it accumulates in u32 (Halide takes signed
  // overflow as impossible; unsigned wraps), a plain add that rfactor still proves
  // associative, and the result is reinterpreted back.
  const bool wrapping_sum = is_sum && x.dtype == DType::kI32;
  // An i32 Max or Min reduces the values with their sign bit flipped, as u32 (the same
  // order), starting at 0 or UINT32_MAX. Halide 14's loop trimming otherwise solved
  // `max(acc, v) != acc` for the loop variable when v was affine in it (an Iota), as
  // `r > acc - ...`: from INT32_MIN, the identity rfactor gives a GPU schedule's
  // partials, that subtraction overflowed, the loop ran no iteration and Max(Iota) of 66
  // positions was 64 on OpenCL (braze-fuzz seed 14600004's causal mask). The solver
  // cannot see through the xor, and unsigned arithmetic wraps.
  const bool flipped_extremum = !is_sum && x.dtype == DType::kI32;
  const Expr sign_flip = Halide::Internal::make_const(Halide::UInt(32), 0x80000000u);
  const Halide::Type acc_type =
      wrapping_sum || flipped_extremum ? Halide::UInt(32) : HalideType(acc_dtype);
  Expr identity = wrapping_sum
                      ? Halide::Internal::make_zero(acc_type)
                      : TypedConst(acc_dtype, Identity(is_sum ? OpKind::kSum : op, x.dtype));
  if (flipped_extremum) {
    identity = op == OpKind::kMax ? Halide::Internal::make_zero(acc_type) : acc_type.max();
  }
  // Float Max/Min reduce the values' bits with three integer accumulators and no other
  // operation per element: hi = signed max, lo = unsigned min, top = unsigned max.
  // Non-negative floats order as their bits and above every negative one as signed
  // integers, so a row's Max is hi when that is non-negative (+0 above -0); else every
  // value is negative and the Max, the one nearest zero, has the smallest bits: lo.
  // Likewise its Min is top when some value is negative (the largest magnitude, -0
  // below +0), else lo. A positive NaN shows as hi above infinity's bits, a negative one
  // as top above -infinity's; both are decided after the reduction. Max and Min of
  // {-0, +0} are then +0 and -0 in whatever order lanes and threads combine (the
  // reference's rule), and the update has no select, comparison or NaN test (each can
  // trip a Halide 14 miscompile of vectorized GuardWithIf updates, see
  // schedule/schedule_check.h), and no float compare for LLVM's no-NaNs flag to fold.
  // (Ordered keys with a separate |bits| maximum took three more operations per element.)
  const bool nan_flag = is_float && !is_sum;
  const int fbits = x.dtype == DType::kF64 ? 64 : 32;
  const Halide::Type ut = Halide::UInt(fbits);
  const Halide::Type st = Halide::Int(fbits);
  const uint64_t inf_bits = fbits == 64 ? 0x7ff0000000000000 : 0x7f800000;
  const uint64_t sign_bit = fbits == 64 ? 0x8000000000000000 : 0x80000000;
  const uint64_t qnan_bits = fbits == 64 ? 0x7ff8000000000000 : 0x7fc00000;
  auto u_const = [ut](uint64_t v) { return Halide::Internal::make_const(ut, v); };
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  if (nan_flag) {
    // lo starts at the empty reduction's value (-inf for Max, +inf for Min), which no
    // value it must keep is above: an empty row decodes to it.
    const uint64_t empty_bits = op == OpKind::kMax ? inf_bits | sign_bit : inf_bits;
    // hi starts at -1, not at the sign bit: any negative start serves (hi is decoded
    // only when non-negative), and Halide 14's simplifier, seeing max(INT64_MIN, ...)
    // unrolled, took the max as always negative and dropped it (lower_pool.cc, seed
    // 13100320).
    acc(vars) =
        Halide::Tuple(Halide::Internal::make_const(st, -1), u_const(empty_bits), u_const(0));
  } else {
    acc(vars) = identity;
  }
  switch (op) {
    case OpKind::kSum:
    case OpKind::kMean: {
      // Each term plus a zero Halide cannot see through (exact: x + 0 is x, -0 aside,
      // and the sum starts at +0). Halide 14's loop trimming decides whether
      // `acc = acc + t` does anything with strict_float stripped from t, and proved
      // x - x, x * 0 and select(x == x, 0, 1) zero for infinite or NaN x: it deleted
      // the loop and Sum(x - x) was 0, not NaN (braze-fuzz seed 1212572). Integer sums
      // of float comparisons (a NaN count) are exposed the same way. With the zero,
      // what it proves is at most "zero == 0", which it cannot decide; the addition is
      // taken out again after trimming (compile/codegen_workarounds.h). Not
      // strict_float: that would make the whole term strict (no FMA in an exp).
      const Expr term = wrapping_sum ? Halide::reinterpret(acc_type, v) : Halide::cast(acc_type, v);
      acc(vars) = acc(vars) + (term + ctx.OpaqueZero(acc_type));
    } break;
    case OpKind::kMax:
    case OpKind::kMin: {
      auto pick = [&](const Expr& a, const Expr& b) {
        return op == OpKind::kMax ? Halide::max(a, b) : Halide::min(a, b);
      };
      if (nan_flag) {
        acc(vars) = Halide::Tuple(Halide::max(acc(vars)[0], Halide::reinterpret(st, v)),
                                  Halide::min(acc(vars)[1], Halide::reinterpret(ut, v)),
                                  Halide::max(acc(vars)[2], Halide::reinterpret(ut, v)));
      } else if (flipped_extremum) {
        acc(vars) = pick(acc(vars), Halide::reinterpret(acc_type, v) ^ sign_flip);
      } else {
        acc(vars) = pick(acc(vars), v);
      }
      break;
    }
    default:
      throw Halide::InternalError(std::string("LowerReduce: not a reduction: ") + OpName(op));
  }
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = acc;
  stage.rdom = r;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = count;
  stage.reduction_symbolic = symbolic;
  stage.reduces_innermost = reduced[rank - 1];
  ctx.stages().push_back(stage);

  const DType in_dtype = x.dtype;
  return Inline(out.dtype, out.shape, [=](const std::vector<Expr>& index) mutable -> Expr {
    std::vector<Expr> args(index.rbegin(), index.rend());
    if (args.empty()) args.push_back(0);
    if (nan_flag) {
      // Integer ops only, no select: this is often inlined into another update. `neg`
      // is all ones where the picked accumulator is negative. Adding the mantissa mask
      // carries into the sign bit exactly when hi is above +inf's bits (a positive NaN),
      // and out of the top bit exactly when top is above -inf's (a negative NaN).
      const Expr hi = Halide::reinterpret(ut, acc(args)[0]);
      const Expr lo = acc(args)[1];
      const Expr top = acc(args)[2];
      const Expr shift = u_const(fbits - 1);
      const Expr man = u_const((uint64_t{1} << (fbits == 64 ? 52 : 23)) - 1);
      Expr bits;
      if (op == OpKind::kMax) {
        const Expr neg = u_const(0) - (hi >> shift);
        bits = (hi & ~neg) | (lo & neg);
      } else {
        const Expr neg = u_const(0) - (top >> shift);
        bits = (top & neg) | (lo & ~neg);
      }
      const Expr positive_nan = (~hi & (hi + man)) >> shift;
      const Expr negative_nan = (top & ~(top + man)) >> shift;
      const Expr mask = (positive_nan | negative_nan) * u_const(qnan_bits);
      return Halide::reinterpret(HalideType(in_dtype), bits | mask);
    }
    Expr a = acc(args);
    if (wrapping_sum) a = Halide::reinterpret(Halide::Int(32), a);
    if (flipped_extremum) a = Halide::reinterpret(Halide::Int(32), a ^ sign_flip);
    // A Mean's groups added their terms divided by kSumGroup (exact: a power of two).
    if (op == OpKind::kMean && grouped)
      a = Halide::strict_float(a * Halide::Internal::make_const(acc_type, kSumGroup));
    if (op == OpKind::kMean) a = a / Halide::cast(acc_type, count_expr);
    return a;  // Inline casts to the output type
  });
}

namespace {

// The loops of a column reduction of `x` over `attrs.axes` (static extents): the
// output's pure vars, the RDom over the reduced dims (innermost first) and x's index
// in them (keep_dims: the reduced dims of the output are 1).
struct ReductionLoops {
  std::vector<Halide::Var> vars;  // Halide order, over the keep_dims output
  Halide::RDom r;
  std::vector<Expr> in_index;     // x's row-major index
  std::vector<Expr> first_index;  // the same, at the reduced domain's first element
  int64_t count = 1;
};

ReductionLoops ColumnLoops(LoweringContext& ctx, const std::string& name, const Value& x,
                           const ReduceAttrs& attrs) {
  ReductionLoops loops;
  const int rank = static_cast<int>(x.shape.size());
  std::vector<bool> reduced(rank, false);
  for (int axis : attrs.axes) reduced[axis < 0 ? axis + rank : axis] = true;
  Halide::Region region;
  std::vector<int> rdom_dim(rank, -1);
  for (int d = rank - 1; d >= 0; --d) {
    if (!reduced[d]) continue;
    rdom_dim[d] = static_cast<int>(region.size());
    region.emplace_back(0, static_cast<int>(x.shape[d]));
    loops.count *= x.shape[d];
  }
  loops.r = Halide::RDom(region, ctx.UniqueName(name + "_r"));
  loops.vars = HalideVars(rank);
  const std::vector<Expr> out_index = RowMajor(loops.vars, rank);
  for (int d = 0; d < rank; ++d) {
    loops.in_index.push_back(reduced[d] ? Expr(loops.r[rdom_dim[d]]) : out_index[d]);
    loops.first_index.push_back(reduced[d] ? Expr(0) : out_index[d]);
  }
  return loops;
}

// The stage of a column reduction's Tuple accumulator.
void AddColumnStage(LoweringContext& ctx, const Halide::Func& acc, const ReductionLoops& loops,
                    const Shape& keep_shape) {
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kReduction;
  stage.acc = acc;
  stage.rdom = loops.r;
  stage.extents = HalideExtents(keep_shape);
  stage.reduction_extent = loops.count;
  stage.reduces_innermost = false;
  ctx.stages().push_back(stage);
}

// A reader of element `k` of `acc` (over the keep_dims shape) as a value of type `out`:
// without keep_dims, the reduced dims are read at 0.
Value ReadAcc(const Halide::Func& acc, const TensorType& out, const Shape& keep_shape,
              const std::vector<bool>& reduced, std::function<Expr(Expr)> finish, int k) {
  return Inline(out.dtype, out.shape, [=](const std::vector<Expr>& index) {
    const bool kept = index.size() == keep_shape.size();
    std::vector<Expr> full;
    for (size_t d = 0, p = 0; d < keep_shape.size(); ++d) {
      full.push_back(kept || !reduced[d] ? index[p++] : Expr(0));
    }
    std::vector<Expr> args(full.rbegin(), full.rend());
    return finish(acc(args)[k]);
  });
}

std::vector<bool> ReducedDims(int rank, const ReduceAttrs& attrs) {
  std::vector<bool> reduced(rank, false);
  for (int axis : attrs.axes) reduced[axis < 0 ? axis + rank : axis] = true;
  return reduced;
}

Shape KeepShape(const Shape& x, const std::vector<bool>& reduced) {
  Shape keep = x;
  for (size_t d = 0; d < keep.size(); ++d) {
    if (reduced[d]) keep[d] = 1;
  }
  return keep;
}

}  // namespace

std::vector<Value> LowerSiblingSums(LoweringContext& ctx, const std::string& name,
                                    const std::vector<OpKind>& ops, const ReduceAttrs& attrs,
                                    const std::vector<Value>& inputs,
                                    const std::vector<TensorType>& outs) {
  std::vector<Value> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    xs.push_back(Materialize(ctx, absl::StrCat(name, "_in", i), inputs[i]));
  }
  const ReductionLoops loops = ColumnLoops(ctx, name, xs[0], attrs);
  const Halide::Type f64 = Halide::Float(64);
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  std::vector<Expr> init(xs.size(), Halide::Internal::make_zero(f64)), update;
  acc(loops.vars) = Halide::Tuple(init);
  for (size_t i = 0; i < xs.size(); ++i) {
    // The opaque zero of LowerReduce's sums (Halide 14's loop trimming).
    update.push_back(acc(loops.vars)[i] +
                     (Halide::cast(f64, At(xs[i], loops.in_index)) + ctx.OpaqueZero(f64)));
  }
  acc(loops.vars) = Halide::Tuple(update);
  const std::vector<bool> reduced = ReducedDims(static_cast<int>(xs[0].shape.size()), attrs);
  const Shape keep = KeepShape(xs[0].shape, reduced);
  AddColumnStage(ctx, acc, loops, keep);
  std::vector<Value> values;
  const Expr count = Halide::cast(f64, Expr(static_cast<double>(loops.count)));
  for (size_t i = 0; i < xs.size(); ++i) {
    const bool mean = ops[i] == OpKind::kMean;
    values.push_back(ReadAcc(
        acc, outs[i], keep, reduced, [=](Expr a) { return mean ? a / count : a; },
        static_cast<int>(i)));
  }
  return values;
}

std::pair<Value, Value> LowerMoments(LoweringContext& ctx, const std::string& name,
                                     const ReduceAttrs& attrs, const Value& input,
                                     const TensorType& mean_out, const TensorType& var_out) {
  const Value x = Materialize(ctx, name + "_in", input);
  const ReductionLoops loops = ColumnLoops(ctx, name, x, attrs);
  const Halide::Type f64 = Halide::Float(64);
  // Sums of x (the mean, as Mean sums it), of d = x - k and of d^2, k the reduced
  // domain's first element: var = E[d^2] - E[d]^2 is the variance about the mean, and
  // with k a value of the same distribution |E[d]| is of the order of the standard
  // deviation, so the f64 subtraction loses nothing an f32 result would show, however
  // far the values are from 0 (an offset of 1e4 with variance 1).
  Halide::Func acc(ctx.UniqueName(name + "_moments"));
  const Expr zero = Halide::Internal::make_zero(f64);
  acc(loops.vars) = Halide::Tuple(zero, zero, zero);
  const Expr v = Halide::cast(f64, At(x, loops.in_index));
  const Expr d = v - Halide::cast(f64, At(x, loops.first_index));
  acc(loops.vars) = Halide::Tuple(acc(loops.vars)[0] + (v + ctx.OpaqueZero(f64)),
                                  acc(loops.vars)[1] + (d + ctx.OpaqueZero(f64)),
                                  acc(loops.vars)[2] + (d * d + ctx.OpaqueZero(f64)));
  const std::vector<bool> reduced = ReducedDims(static_cast<int>(x.shape.size()), attrs);
  const Shape keep = KeepShape(x.shape, reduced);
  AddColumnStage(ctx, acc, loops, keep);
  const Expr n = Halide::cast(f64, Expr(static_cast<double>(loops.count)));
  const Value mean = ReadAcc(
      acc, mean_out, keep, reduced, [=](Expr a) { return a / n; }, 0);
  // E[d^2] - E[d]^2, negative only by rounding when the variance is far below (m - k)^2
  // (then 0). The test is on the bits, integer compares (LLVM's no-NaNs flag would turn a
  // float select into a max that drops a NaN): sign set, not NaN.
  Value var = Inline(var_out.dtype, var_out.shape, [=](const std::vector<Expr>& index) {
    const bool kept = index.size() == keep.size();
    std::vector<Expr> full;
    for (size_t dim = 0, p = 0; dim < keep.size(); ++dim) {
      full.push_back(kept || !reduced[dim] ? index[p++] : Expr(0));
    }
    std::vector<Expr> args(full.rbegin(), full.rend());
    const Expr mean_d = acc(args)[1] / n;
    const Expr s = acc(args)[2] / n - mean_d * mean_d;
    const Halide::Type u64 = Halide::UInt(64);
    const Expr bits = Halide::reinterpret(u64, s);
    const Expr sign = Halide::Internal::make_const(u64, uint64_t{0x8000000000000000});
    const Expr inf = Halide::Internal::make_const(u64, uint64_t{0x7ff0000000000000});
    const Expr negative = bits > sign && (bits & ~sign) <= inf;
    return Halide::select(negative, zero, s);
  });
  return {mean, var};
}

Value LowerSumToShapeOf(LoweringContext& ctx, const std::string& name, const Value& x,
                        const Value& like, const TensorType& out) {
  const int rank = static_cast<int>(x.shape.size());
  const int lead = rank - static_cast<int>(like.shape.size());
  // First like's 1s, keeping the dims (x's rank, each reduced dim concrete 1)...
  ReduceAttrs ones{{}, /*keep_dims=*/true};
  for (int d = lead; d < rank; ++d) {
    if (like.shape[d - lead] == 1 && SymbolOf(like, d - lead) < 0 && x.shape[d] != 1) {
      ones.axes.push_back(d);
    }
  }
  if (ones.axes.empty() && lead == 0) {  // nothing to sum: x read where it is read
    return Inline(out.dtype, out.shape,
                  [x](const std::vector<Expr>& index) { return At(x, index); });
  }
  Value kept = x;
  if (!ones.axes.empty()) {
    Shape kept_shape = x.shape;
    for (int axis : ones.axes) kept_shape[axis] = 1;
    kept = LowerReduce(ctx, lead > 0 ? name + "_ones" : name, OpKind::kSum, ones, x,
                       TensorType{out.dtype, kept_shape});
    kept.sym = x.sym;
    for (int axis : ones.axes) {
      if (static_cast<size_t>(axis) < kept.sym.size()) kept.sym[axis] = -1;
    }
  }
  if (lead == 0) return kept;
  // ...then the leading dims, dropped.
  ReduceAttrs leading{{}, /*keep_dims=*/false};
  for (int d = 0; d < lead; ++d) leading.axes.push_back(d);
  return LowerReduce(ctx, name, OpKind::kSum, leading, kept, out);
}

Value LowerArgMax(LoweringContext& ctx, const std::string& name, const ArgMaxAttrs& attrs,
                  const Value& input, const TensorType& out) {
  // Two reductions: the row maximum (NaN when the row has one), then the smallest index
  // holding it (or holding a NaN), as min(acc, n - hit * (n - r)) with no select.
  const Value x = Materialize(ctx, name + "_in", input);
  const int rank = static_cast<int>(x.shape.size());
  const int axis = attrs.axis;
  const Expr n = ctx.Extent(x, axis);
  const Value m = LowerReduce(ctx, name + "_max", OpKind::kMax, ReduceAttrs{{axis}, false}, x,
                              TensorType{x.dtype, out.shape});

  Halide::RDom r(0, n, ctx.UniqueName(name + "_r"));
  const int out_rank = static_cast<int>(out.shape.size());
  std::vector<Halide::Var> vars = HalideVars(out_rank);
  const std::vector<Expr> out_index = RowMajor(vars, out_rank);
  std::vector<Expr> in_index;
  for (int d = 0, p = 0; d < rank; ++d) in_index.push_back(d == axis ? Expr(r.x) : out_index[p++]);
  const Expr v = At(x, in_index);
  const Expr best = At(m, out_index);
  Expr hit = v == best;
  if (IsFloating(x.dtype)) {
    // A NaN maximum means "the row has a NaN": the hit is the first NaN. NaN tests on
    // bits, and no select (see schedule/schedule_check.h).
    const Expr best_nan = IsNanBits(best);
    hit = (best_nan && IsNanBits(v)) || (!best_nan && hit);
  }
  // min(acc, hit ? r : n) without a select (see schedule_check.h).
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = n;
  acc(vars) = Halide::min(acc(vars), n - Halide::cast(Halide::Int(32), hit) * (n - r.x));

  schedule::Stage stage;
  stage.kind = schedule::StageKind::kArgMax;
  stage.acc = acc;
  stage.rdom = r;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = x.shape[axis];
  stage.reduction_symbolic = SymbolOf(x, axis) >= 0;
  stage.reduces_innermost = axis == rank - 1;
  ctx.stages().push_back(stage);

  Value acc_value;
  acc_value.func = acc;
  acc_value.dtype = DType::kI32;
  acc_value.shape = out.shape;
  return Inline(DType::kI32, out.shape,
                [acc_value](const std::vector<Expr>& index) { return At(acc_value, index); });
}

namespace {

// splitmix64's finalizer: a bijection of 64 bits in which every input bit flips each
// output bit with probability about 1/2.
uint64_t Mix64(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// A name for a constant's contents, the same in every process (a kernel from the disk
// cache carries it), never 0: h = Mix64(h ^ word) over its type, shape and 8-byte words.
// Each step is a bijection with full avalanche, so two contents that differ anywhere
// (a sign flipped in two elements, say) get names that agree with probability about
// 2^-64. The GEMM call keeps a packed copy of a constant b under this name (cpu_gemm.h).
uint64_t ContentName(const HostTensor& c) {
  uint64_t h = 0x6a09e667f3bcc909ull;
  auto mix = [&h](uint64_t word) { h = Mix64(h ^ word); };
  mix(static_cast<uint64_t>(c.dtype()));
  for (int64_t d : c.shape()) mix(static_cast<uint64_t>(d));
  const char* bytes = static_cast<const char*>(c.raw_data());
  const size_t n = c.num_bytes();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    mix(word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes + i, n - i);
  mix(tail);
  mix(static_cast<uint64_t>(n));
  return h == 0 ? 1 : h;
}

// v's Const value when the call can take it as a buffer of its own (v is that constant,
// not a cluster input or a view of it), else null.
const HostTensor* WholeConst(const Value& v) {
  const HostTensor* c = v.const_value;
  const bool whole =
      !v.param.defined() && c != nullptr && c->shape() == v.shape && c->dtype() == v.dtype;
  return whole ? c : nullptr;
}

}  // namespace

// What an extern library call reads for `v`: a cluster input in place, a Const as a
// dense buffer of its own, anything else as a Func the schedule stores (added to
// `operands`).
Halide::ExternFuncArgument LibraryArgument(LoweringContext& ctx, Value v, const std::string& name,
                                           std::vector<schedule::Stage::Operand>& operands) {
  if (v.param.defined()) return v.param;
  if (const HostTensor* c = WholeConst(v)) {
    // A Const: a dense buffer of its own, in Halide's dim order, rather than a copy
    // computed from the flat one at every run.
    std::vector<int> extents;
    for (auto d = v.shape.rbegin(); d != v.shape.rend(); ++d) {
      extents.push_back(static_cast<int>(*d));
    }
    Halide::Buffer<> buffer(HalideType(v.dtype), extents, ctx.UniqueName(name));
    std::memcpy(buffer.data(), c->raw_data(), c->num_bytes());
    buffer.set_host_dirty(true);
    return buffer;
  }
  if (v.inline_body) {
    const std::vector<int> sym = v.sym;
    v = Define(ctx, name, v.dtype, v.shape,
               [src = v](const std::vector<Expr>& i) { return At(src, i); });
    v.sym = sym;
  }
  std::vector<Expr> extents;
  for (size_t d = v.shape.size(); d-- > 0;) extents.push_back(ctx.Extent(v, d));
  operands.push_back(
      {v.func, HalideExtents(v.shape), false, HalideSymbolic(v.sym, v.shape.size()), extents});
  return v.func;
}

namespace {

// The matmul as an extern stage calling the CPU GEMM library (device/cpu_gemm.h), which
// reads each operand as a stored buffer: a cluster input is handed over in place, any
// other operand is a Func the schedule stores (Stage::operands).
// With `epilogue`, out = relu(a b + bias) in the same call.
Value LowerLibraryMatMul(LoweringContext& ctx, const std::string& name, const MatMulAttrs& attrs,
                         const Value& a, const Value& b, const TensorType& out, const Expr& k_size,
                         int64_t k_extent, const MatMulEpilogue* epilogue) {
  std::vector<schedule::Stage::Operand> operands;
  auto argument = [&](const Value& v, const std::string& suffix) {
    return LibraryArgument(ctx, v, name + suffix, operands);
  };
  const int rank = static_cast<int>(out.shape.size());
  // Named for its epilogue, which dumps and logs then show ("MatMul_3_bias_relu: extern").
  const char* suffix = epilogue == nullptr ? "" : epilogue->relu ? "_bias_relu" : "_bias";
  Halide::Func gemm(ctx.UniqueName(name + suffix));
  const Expr ta = attrs.transpose_a ? 1 : 0, tb = attrs.transpose_b ? 1 : 0;
  const Expr k = Halide::cast<int32_t>(k_size), threads = ctx.library_gemm_threads;
  const Halide::ExternFuncArgument a_arg = argument(a, "_a"), b_arg = argument(b, "_b");
  const HostTensor* b_const = WholeConst(b);
  const Expr b_name(b_const != nullptr ? ContentName(*b_const) : uint64_t{0});
  if (epilogue == nullptr) {
    gemm.define_extern(kCpuGemmF32Symbol, {a_arg, b_arg, ta, tb, k, threads, b_name},
                       HalideType(out.dtype), rank);
  } else {
    gemm.define_extern(kCpuGemmBiasF32Symbol,
                       {a_arg, b_arg, argument(*epilogue->bias, "_bias"), ta, tb, k,
                        Expr(epilogue->relu ? 1 : 0), threads, b_name},
                       HalideType(out.dtype), rank);
  }
  ctx.calls_library = true;
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kLibraryMatMul;
  stage.acc = gemm;
  stage.result = gemm;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = k_extent;
  stage.operands = std::move(operands);
  ctx.stages().push_back(stage);
  Value result;
  result.func = gemm;
  result.dtype = out.dtype;
  result.shape = out.shape;
  return result;
}

// A bias the call can add: [n] of the product's type (f32, or bf16), n the product's
// columns (b's last dim, or its second-to-last when transposed), of the same symbolic
// class when run-time sized.
bool IsRowBias(const Value& bias, const TensorType& out, const Value& b, bool transpose_b) {
  if (bias.dtype != out.dtype || bias.shape.size() != 1 || out.shape.empty() ||
      bias.shape[0] != out.shape.back()) {
    return false;
  }
  const size_t n_dim = b.shape.size() - (transpose_b ? 2 : 1);
  return SymbolOf(bias, 0) == SymbolOf(b, n_dim);
}

// LowerOptions::library_gemm_min_work: an f32 product (or a bf16 one, of bf16 operands:
// LibraryTakesBF16, where the library runs bf16), and enough work to pay for the call.
bool UseLibrary(const LoweringContext& ctx, const TensorType& out, int64_t k_extent) {
  if (ctx.library_gemm_min_work < 0) return false;
  if (out.dtype != DType::kF32 && !(out.dtype == DType::kBF16 && ctx.library_gemm_bf16)) {
    return false;
  }
  return NumElements(out.shape) * k_extent >= ctx.library_gemm_min_work;
}

}  // namespace

bool LibraryTakesBF16(const LoweringContext& ctx, const MatMulAttrs& attrs, const Value& a,
                      const Value& b, const TensorType& out) {
  if (a.dtype != DType::kBF16 || b.dtype != DType::kBF16 || out.dtype != DType::kBF16) {
    return false;
  }
  const int rank = static_cast<int>(a.shape.size());
  const int64_t k_extent = a.shape[attrs.transpose_a ? rank - 2 : rank - 1];
  return k_extent > 0 && UseLibrary(ctx, out, k_extent);
}

Value LowerMatMul(LoweringContext& ctx, const std::string& name, const MatMulAttrs& attrs,
                  const Value& a_in, const Value& b_in, const TensorType& out,
                  MatMulEpilogue* epilogue) {
  Value a = Materialize(ctx, name + "_a", a_in);
  Value b = Materialize(ctx, name + "_b", b_in);
  const int rank = static_cast<int>(a.shape.size());
  const int k_dim = attrs.transpose_a ? rank - 2 : rank - 1;
  const int64_t k_extent = a.shape[k_dim];
  if (k_extent == 0) return Fill(out.dtype, out.shape, 0);
  const Expr k_size = ctx.Extent(a, k_dim);
  const bool k_symbolic = SymbolOf(a, k_dim) >= 0;
  if (UseLibrary(ctx, out, k_extent)) {
    if (epilogue != nullptr && epilogue->bias != nullptr &&
        IsRowBias(*epilogue->bias, out, b, attrs.transpose_b)) {
      // A bias equal everywhere (a 1-element Const, a broadcast scalar) has no Func or
      // buffer yet: the call takes buffers.
      MatMulEpilogue stored = *epilogue;
      const Value bias = Materialize(ctx, name + "_bias", *epilogue->bias);
      stored.bias = &bias;
      epilogue->folded = true;
      return LowerLibraryMatMul(ctx, name, attrs, a, b, out, k_size, k_extent, &stored);
    }
    return LowerLibraryMatMul(ctx, name, attrs, a, b, out, k_size, k_extent, nullptr);
  }

  // The k loop reads every operand element n (or m) times. An operand that computes
  // something (a ReLU mask, a scale) becomes a Func of its own, so a schedule can
  // compute it once (compute_root) instead of at every read. A transposed b is repacked
  // as [..., k, n]: the schedules vectorize over n, and reading b^T in place would be a
  // gather with stride k (a backward dy * W^T).
  std::vector<schedule::Stage::Operand> operands;
  auto operand = [](const Value& v, bool transposed) {
    return schedule::Stage::Operand{v.func, HalideExtents(v.shape), transposed,
                                    HalideSymbolic(v.sym, v.shape.size())};
  };
  //
  // An operand that computes something also adds a zero Halide cannot see through
  // (exact): where a schedule inlines it into the k loop, Halide 14's loop trimming would
  // otherwise take strict_float off (x - x) * w, prove it 0 and delete the loop for an
  // infinite x (Mullapudi2016; docs/HALIDE14.md, "Loop trimming strips strict_float").
  auto plus_zero = [&](const Expr& e) { return e + ctx.OpaqueZero(e.type()); };
  auto computes = [](const Value& v) {
    return v.inline_body || (v.func.defined() && !schedule::IsPlainLoad(v.func.function()));
  };
  if (computes(a)) {
    const std::vector<int> sym = a.sym;
    a = Define(ctx, name + "_a", a.dtype, a.shape,
               [src = a, &plus_zero](const std::vector<Expr>& i) { return plus_zero(At(src, i)); });
    a.sym = sym;
  }
  if (a.func.defined()) operands.push_back(operand(a, false));
  bool transpose_b = attrs.transpose_b;
  if (b.func.defined() && !transpose_b && !computes(b)) operands.push_back(operand(b, false));
  if (!b.constant.defined() && (transpose_b || computes(b))) {
    Shape packed = b.shape;
    std::vector<int> sym = b.sym;
    if (transpose_b) {
      std::swap(packed[rank - 2], packed[rank - 1]);
      if (sym.size() == packed.size()) std::swap(sym[rank - 2], sym[rank - 1]);
    }
    const bool add_zero = computes(b);
    b = Define(ctx, name + (transpose_b ? "_bt" : "_b"), b.dtype, packed,
               [src = b, transpose_b, rank, add_zero, &plus_zero](const std::vector<Expr>& i) {
                 std::vector<Expr> j = i;
                 if (transpose_b) std::swap(j[rank - 2], j[rank - 1]);
                 return add_zero ? plus_zero(At(src, j)) : At(src, j);
               });
    b.sym = sym;
    operands.push_back(operand(b, transpose_b));
    transpose_b = false;
  }

  Halide::RDom k(0, k_size, ctx.UniqueName(name + "_k"));
  std::vector<Halide::Var> vars = HalideVars(rank);
  const std::vector<Expr> index = RowMajor(vars, rank);  // [batch..., m, n]
  std::vector<Expr> ai(index.begin(), index.end() - 2);
  std::vector<Expr> bi = ai;
  const Expr m = index[rank - 2], n = index[rank - 1];
  if (attrs.transpose_a) {
    ai.insert(ai.end(), {Expr(k.x), m});
  } else {
    ai.insert(ai.end(), {m, Expr(k.x)});
  }
  if (transpose_b) {
    bi.insert(bi.end(), {n, Expr(k.x)});
  } else {
    bi.insert(bi.end(), {Expr(k.x), n});
  }
  Halide::Func acc(ctx.UniqueName(name + "_acc"));
  acc(vars) = TypedConst(out.dtype, 0);
  // The update is strict (no fast math: no FMA contraction, no reassociation, no
  // no-infinities assumption): a matmul of a broadcast x = inf with a column of both
  // signs gave inf under Halide's fast math where IEEE and the reference give NaN
  // (braze-fuzz seed 10600905, the safe default, Auto and Li2018). A strict product
  // alone kept the inf. Large f32 matmuls call the GEMM library instead (UseLibrary).
  // Long sums in blocks for the autoschedulers (long_sums.h).
  const SumStages sums = DefineSum(
      ctx, name + "_k", acc, vars, k, {k_extent}, HalideExtents(out.shape), At(a, ai) * At(b, bi),
      [](const Expr& s, const Expr& t) { return Halide::strict_float(s + t); });
  if (sums.partial.acc.defined()) ctx.stages().push_back(sums.partial);

  Value acc_value;
  acc_value.func = acc;
  acc_value.dtype = out.dtype;
  acc_value.shape = out.shape;
  Value result = Define(ctx, name, out.dtype, out.shape,
                        [&](const std::vector<Expr>& i) { return At(acc_value, i); });
  schedule::Stage stage;
  stage.kind = schedule::StageKind::kMatMul;
  stage.acc = acc;
  stage.result = result.func;
  stage.rdom = sums.rdom;
  stage.extents = HalideExtents(out.shape);
  stage.reduction_extent = sums.reduction_extent;
  stage.reduction_symbolic = k_symbolic;
  stage.operands = std::move(operands);
  ctx.stages().push_back(stage);
  return result;
}

}  // namespace lower
}  // namespace braze
