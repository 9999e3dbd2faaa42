// Random programs, the edges of the op set (GenerateOptions::edges_probability): what
// braze-fuzz --coverage found the other families never or seldom draw, and an outside
// generator building graphs from the public API would (docs/FUZZING.md, "Coverage"):
// casts between every pair of dtypes (i32 and bool to bf16 and f16, the 16-bit types to
// i32 and bool), comparisons of two values of any dtype (bf16 and f16 included) and
// Equal of two different values, Select of every dtype (bool, i32, bf16, f16), Max, Min
// and ArgMax of 16-bit and i32 values and reductions over negative axes, the unary and
// binary ops the 16-bit family leaves out (Log, Rsqrt, Reciprocal, Erf, Floor, Sign,
// Div, Pow, Minimum), OneHot to every dtype, Gather and UnsortedSegmentSum of i32 and
// 16-bit values over negative axes, LogSoftmax and Concat over negative axes, values
// with no elements (a slice of size 0, then a reduction over the empty axis, a matmul of
// an empty inner dim, a concatenation, a pad), values of rank 5 and 6, and
// MaxPoolGradGrad as an op of its own (else only a second-order gradient draws it).
//
// Tolerances: each op is judged as the generic ones are (ProgramOp::f32_rounding,
// half_rounding). A discontinuous op (a cast to i32 or bool, a comparison, ArgMax,
// Floor, Sign) reads exact operands only (Drawer::Pick's exact_only): values both
// implementations compute bit for bit, so its result is exact too. A cast to bf16 or f16
// rounds once to nearest even on both sides: exact from an exact operand (i32 values
// past 2^8 or 2^11 included, which round; i32 to f32 and f64 likewise), an ulp of the
// 16-bit type apart otherwise (rtol_16). The empty values' reductions are what the
// reference defines (0 for Sum, NaN for Mean, -inf and +inf for Max and Min of floats,
// the i32 limits for i32), compared exactly as any exact value.
// random_program.cc's Generator calls DrawEdgeOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

constexpr int64_t kMaxElements = 50000;  // a dynamic dim counted as 40
constexpr DType kAll[] = {DType::kF32,  DType::kF64,  DType::kI32,
                          DType::kBool, DType::kBF16, DType::kF16};

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

bool Known(const Tensor& t) {
  for (int64_t d : t.shape()) {
    if (d < 0) return false;
  }
  return true;
}

bool Numeric(DType d) { return d != DType::kBool; }

// A shape that broadcasts against `s`: a suffix of it with some dims set to 1.
Shape Partner(Drawer& d, const Shape& s) {
  Shape p(s.begin() + d.Uniform(static_cast<int>(s.size()) + 1), s.end());
  for (auto& x : p) {
    if (x < 0 || d.Chance(0.3)) x = 1;
  }
  return p;
}

// A second operand for value `a`: an earlier value of its dtype that broadcasts with it
// (exact when `exact`), or a fresh constant.
int Operand(Drawer& d, int a, bool exact) {
  const Tensor x = d.value(a);
  int b = -1;
  if (Known(x) && d.Chance(0.6)) {
    b = d.Pick(
        [&](const Tensor& t) {
          if (t.dtype() != x.dtype() || !Known(t)) return false;
          const absl::StatusOr<Shape> out = BroadcastShapes(x.shape(), t.shape());
          return out.ok() && Elements(*out) <= std::max<int64_t>(Elements(x.shape()), 4096);
        },
        exact);
  }
  if (b < 0) b = d.AddConst(x.dtype(), Partner(d, x.shape()));
  return b;
}

// A value satisfying `ok` (exact when `exact`), its dtype drawn first, uniformly among
// those at hand: most values are f32, and a plain Pick would seldom give another.
int PickAnyDType(Drawer& d, const std::function<bool(const Tensor&)>& ok, bool exact) {
  std::vector<DType> at_hand;
  for (DType dtype : kAll) {
    if (d.Pick([&](const Tensor& t) { return t.dtype() == dtype && ok(t); }, exact) >= 0) {
      at_hand.push_back(dtype);
    }
  }
  if (at_hand.empty()) return -1;
  const DType dtype = at_hand[d.Uniform(static_cast<int>(at_hand.size()))];
  return d.Pick([&](const Tensor& t) { return t.dtype() == dtype && ok(t); }, exact);
}

// A cast between any two dtypes; to i32 and bool of exact operands only.
bool DrawCast(Drawer& d) {
  const DType to = kAll[d.Uniform(6)];
  const bool discontinuous = to == DType::kI32 || to == DType::kBool;
  const int a = PickAnyDType(
      d, [&](const Tensor& t) { return t.dtype() != to && Elements(t.shape()) <= kMaxElements; },
      discontinuous);
  if (a < 0) return false;
  d.Push(
      {a}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0], to); },
      absl::StrCat("Cast($0, ", DTypeCode(to), ")"));
  return true;
}

// Greater, Less or Equal of two exact values of one dtype (any but bool; Equal of bools).
bool DrawCompare(Drawer& d) {
  const int a = PickAnyDType(
      d, [](const Tensor& t) { return Elements(t.shape()) <= kMaxElements; }, true);
  if (a < 0) return false;
  const bool boolean = d.value(a).dtype() == DType::kBool;
  const int b = Operand(d, a, true);
  if (!d.exact(b)) return false;
  const int op = boolean ? 2 : d.Uniform(3);
  static const char* kNames[] = {"Greater", "Less", "Equal"};
  static Tensor (*const kFns[])(Tensor, Tensor) = {Greater, Less, Equal};
  d.Push(
      {a, b}, [op](Graph&, const std::vector<Tensor>& v) { return kFns[op](v[0], v[1]); },
      absl::StrCat(kNames[op], "($0, $1)"));
  return true;
}

// Select of values of any dtype by an earlier bool value or a fresh bool constant.
bool DrawSelect(Drawer& d) {
  const int a = PickAnyDType(
      d, [](const Tensor& t) { return Known(t) && Elements(t.shape()) <= kMaxElements; }, false);
  if (a < 0) return false;
  const Shape shape = d.value(a).shape();
  const int b = Operand(d, a, false);
  int c = d.Pick([&](const Tensor& t) {
    if (t.dtype() != DType::kBool || !Known(t)) return false;
    const absl::StatusOr<Shape> out = BroadcastShapes(shape, t.shape());
    return out.ok() && Elements(*out) <= std::max<int64_t>(Elements(shape), 4096);
  });
  if (c < 0 || d.Chance(0.3)) c = d.AddConst(DType::kBool, Partner(d, shape));
  d.Push(
      {c, a, b}, [](Graph&, const std::vector<Tensor>& v) { return Select(v[0], v[1], v[2]); },
      "Select($0, $1, $2)");
  return true;
}

// Max, Min, Sum, Mean and ArgMax of any numeric dtype, over axes counted from the end.
bool DrawReduce(Drawer& d) {
  const int which = d.Uniform(5);  // Max, Min, ArgMax, Sum, Mean
  const int a = PickAnyDType(
      d,
      [&](const Tensor& t) {
        return Numeric(t.dtype()) && (which != 4 || t.dtype() != DType::kI32) &&
               (which != 2 || t.rank() > 0);
      },
      which == 2);
  if (a < 0) return false;
  const int rank = d.value(a).rank();
  if (which == 2) {
    const int axis = d.Uniform(rank) - rank;  // negative
    d.Push(
        {a}, [axis](Graph&, const std::vector<Tensor>& v) { return ArgMax(v[0], axis); },
        absl::StrCat("ArgMax($0, ", axis, ")"));
    return true;
  }
  std::vector<int> axes;
  for (int i = 0; i < rank; ++i) {
    if (d.Chance(0.5)) axes.push_back(i - rank);
  }
  const bool keep = d.Chance(0.5);
  // By `which`; 2, ArgMax, is drawn above (its entry is never read).
  static const ReduceKind kReductions[] = {ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kMax,
                                           ReduceKind::kSum, ReduceKind::kMean};
  d.Push({a}, ReductionBuild(kReductions[which], axes, keep),
         ReductionCode(kReductions[which], axes, keep));
  return true;
}

// The unary and binary ops of floats on bf16 and f16 values, and on f32 and f64 ones.
bool DrawFloatOp(Drawer& d) {
  const int k = d.Uniform(11);
  const bool discontinuous = k == 4 || k == 5;  // Floor, Sign
  const int a = PickAnyDType(
      d,
      [](const Tensor& t) { return IsFloating(t.dtype()) && Elements(t.shape()) <= kMaxElements; },
      discontinuous);
  if (a < 0) return false;
  struct U {
    const char* code;
    Tensor (*fn)(Tensor);
  };
  static const U kUnary[] = {
      {"Log(Abs($0) + 1.0)", [](Tensor x) { return Log(Abs(x) + 1.0); }},
      {"Rsqrt(Abs($0) + 1.0)", [](Tensor x) { return Rsqrt(Abs(x) + 1.0); }},
      {"Reciprocal(Abs($0) + 0.5)", [](Tensor x) { return Reciprocal(Abs(x) + 0.5); }},
      {"Erf($0)", [](Tensor x) { return Erf(x); }},
      {"Floor($0)", [](Tensor x) { return Floor(x); }},
      {"Sign($0)", [](Tensor x) { return Sign(x); }},
      {"Exp(Tanh($0))", [](Tensor x) { return Exp(Tanh(x)); }},
      {"Cos($0)", [](Tensor x) { return Cos(x); }},
  };
  if (k < 8) {
    const U& u = kUnary[k];
    auto fn = u.fn;
    d.Push(
        {a}, [fn](Graph&, const std::vector<Tensor>& v) { return fn(v[0]); }, u.code);
    return true;
  }
  const int b = Operand(d, a, false);
  struct B {
    const char* code;
    Tensor (*fn)(Tensor, Tensor);
  };
  static const B kBinary[] = {
      {"Div($0, Abs($1) + 0.5)", [](Tensor x, Tensor y) { return Div(x, Abs(y) + 0.5); }},
      {"Pow(Abs($0) + 0.5, Tanh($1))",
       [](Tensor x, Tensor y) { return Pow(Abs(x) + 0.5, Tanh(y)); }},
      {"Minimum($0, $1)", [](Tensor x, Tensor y) { return Minimum(x, y); }},
  };
  const B& op = kBinary[k - 8];
  auto fn = op.fn;
  d.Push(
      {a, b}, [fn](Graph&, const std::vector<Tensor>& v) { return fn(v[0], v[1]); }, op.code);
  return true;
}

// OneHot of i32 ids (negative and out of range among them) to any dtype.
bool DrawOneHot(Drawer& d) {
  const int a = d.Pick([](const Tensor& t) {
    return t.dtype() == DType::kI32 && t.rank() <= 3 && Elements(t.shape()) <= 4096;
  });
  if (a < 0) return false;
  const DType dtype = kAll[d.Uniform(6)];
  const int64_t depth = 1 + d.Uniform(7);
  const bool boolean = dtype == DType::kBool;
  const double on = boolean ? 1 : ValueOf(dtype, (d.Uniform(9) - 4) * 0.75);
  const double off = boolean ? 0 : d.Uniform(3) - 1;
  d.Push(
      {a},
      [depth, on, off, dtype](Graph&, const std::vector<Tensor>& v) {
        return OneHot(v[0], depth, on, off, dtype);
      },
      absl::StrCat("OneHot($0, ", depth, ", ", on, ", ", off, ", ", DTypeCode(dtype), ")"));
  return true;
}

// Gather or UnsortedSegmentSum of values of any dtype along a negative axis.
bool DrawSequence(Drawer& d) {
  const bool gather = d.Chance(0.6);
  const int a = d.Pick([&](const Tensor& t) {
    if (t.rank() < 1 || !Known(t) || Elements(t.shape()) == 0 || Elements(t.shape()) > 4096) {
      return false;
    }
    return gather || Numeric(t.dtype());
  });
  if (a < 0) return false;
  const Tensor x = d.value(a);
  const int rank = x.rank();
  const int axis = d.Uniform(rank) - rank;
  const int64_t extent = x.shape()[rank + axis];
  if (gather) {
    const Shape ids_shape = {1 + d.Uniform(5)};
    const int ids = d.AddConst(DType::kI32, ids_shape);  // [-3, 4): negative ids read 0
    d.Push(
        {a, ids}, [axis](Graph&, const std::vector<Tensor>& v) { return Gather(v[0], v[1], axis); },
        absl::StrCat("Gather($0, $1, ", axis, ")"));
    return true;
  }
  const int ids = d.AddConst(DType::kI32, {extent});
  const int64_t segments = 1 + d.Uniform(5);
  d.Push(
      {a, ids},
      [segments, axis](Graph&, const std::vector<Tensor>& v) {
        return UnsortedSegmentSum(v[0], v[1], segments, axis);
      },
      absl::StrCat("UnsortedSegmentSum($0, $1, ", segments, ", ", axis, ")"));
  return true;
}

// LogSoftmax or a concatenation over a negative axis.
bool DrawNegativeAxis(Drawer& d) {
  const int a = d.Pick([](const Tensor& t) {
    return t.rank() >= 1 && Known(t) && Elements(t.shape()) > 0 &&
           Elements(t.shape()) <= kMaxElements;
  });
  if (a < 0) return false;
  const Tensor x = d.value(a);
  const int rank = x.rank();
  const int axis = d.Uniform(rank) - rank;
  if (IsFloating(x.dtype()) && d.Chance(0.5)) {
    d.Push(
        {a}, [axis](Graph&, const std::vector<Tensor>& v) { return LogSoftmax(v[0], axis); },
        absl::StrCat("LogSoftmax($0, ", axis, ")"));
    return true;
  }
  Shape s = x.shape();
  s[rank + axis] = 1 + d.Uniform(4);
  const int b = d.AddConst(x.dtype(), s);
  d.Push(
      {a, b},
      [axis](Graph&, const std::vector<Tensor>& v) {
        return Concat({v[0], v[1]}, axis);
      },
      absl::StrCat("Concat({$0, $1}, ", axis, ")"));
  return true;
}

// A value with no elements (a slice of size 0 on one axis) and an op on it: a reduction
// over the empty axis, a matmul of an empty inner dim, a concatenation with a non-empty
// value, a pad, an elementwise op; later ops may read it too.
bool DrawEmpty(Drawer& d) {
  const int what = d.Uniform(6);
  const int a = d.Pick([&](const Tensor& t) {
    return t.rank() >= 1 && Known(t) && Elements(t.shape()) <= kMaxElements &&
           (what != 1 || (t.rank() == 2 && IsFloating(t.dtype())));
  });
  if (a < 0) return false;
  const Tensor x = d.value(a);
  const int rank = x.rank();
  // A matmul's operand is emptied along its inner dim.
  const int axis = what == 1 && rank == 2 ? 1 : d.Uniform(rank);
  std::vector<int64_t> begin(rank, 0), size(x.shape().begin(), x.shape().end());
  begin[axis] = d.Uniform(static_cast<int>(x.shape()[axis]) + 1);
  size[axis] = 0;
  const int e = d.Push(
      {a}, [begin, size](Graph&, const std::vector<Tensor>& v) { return Slice(v[0], begin, size); },
      absl::StrCat("Slice($0, ", Ints(begin), ", ", Ints(size), ")"));
  const DType dtype = x.dtype();
  switch (what) {
    case 0: {  // a reduction over the empty axis (and maybe others)
      if (!Numeric(dtype)) return true;
      const int which = d.Uniform(IsFloating(dtype) ? 4 : 3);
      const bool keep = d.Chance(0.5);
      const std::vector<int> axes = {axis};
      const auto kind = static_cast<ReduceKind>(which);  // in ReduceKind's order
      d.Push({e}, ReductionBuild(kind, axes, keep), ReductionCode(kind, axes, keep));
      return true;
    }
    case 1: {  // [m, 0] x [0, n]: zeros
      if (!IsFloating(dtype) || rank != 2 || axis != 1) return true;
      const int w = d.AddConst(dtype, {0, 1 + d.Uniform(7)});
      d.Push(
          {e, w}, [](Graph&, const std::vector<Tensor>& v) { return MatMul(v[0], v[1]); },
          "MatMul($0, $1)");
      return true;
    }
    case 2:  // x itself, through an empty piece
      d.Push(
          {a, e},
          [axis](Graph&, const std::vector<Tensor>& v) {
            return Concat({v[1], v[0], v[1]}, axis);
          },
          absl::StrCat("Concat({$1, $0, $1}, ", axis, ")"));
      return true;
    case 3: {  // the pad value alone
      std::vector<std::pair<int64_t, int64_t>> pads(rank, {0, 0});
      pads[axis] = {1, d.Uniform(3)};
      std::string code = "{";
      for (int i = 0; i < rank; ++i) {
        absl::StrAppend(&code, i ? ", " : "", "{", pads[i].first, ", ", pads[i].second, "}");
      }
      const double value = ValueOf(x.dtype(), 1.5);
      d.Push(
          {e},
          [pads, value](Graph&, const std::vector<Tensor>& v) { return Pad(v[0], pads, value); },
          absl::StrCat("Pad($0, ", code, "}, ", value, ")"));
      return true;
    }
    case 4:  // elementwise on nothing, broadcasting a scalar
      if (!Numeric(dtype)) return true;
      d.Push(
          {e}, [](Graph&, const std::vector<Tensor>& v) { return Abs(v[0]) * v[0]; },
          "Abs($0) * $0");
      return true;
    default:
      return true;  // the empty value alone; later ops may read it
  }
}

// A value of rank 5 or 6: a reshape that splits dims or inserts ones, then a transpose,
// a reduction or an elementwise op with a broadcast operand on it.
bool DrawHighRank(Drawer& d) {
  const int a = d.Pick([](const Tensor& t) {
    return t.rank() >= 1 && Known(t) && Elements(t.shape()) > 0 &&
           Elements(t.shape()) <= kMaxElements;
  });
  if (a < 0) return false;
  const Tensor x = d.value(a);
  Shape out = x.shape();
  const int rank = 5 + d.Uniform(2);
  while (static_cast<int>(out.size()) < rank) {
    out.insert(out.begin() + d.Uniform(static_cast<int>(out.size()) + 1), 1);
  }
  const int r = d.Push(
      {a}, [out](Graph&, const std::vector<Tensor>& v) { return Reshape(v[0], out); },
      absl::StrCat("Reshape($0, ", Ints(out), ")"));
  switch (d.Uniform(3)) {
    case 0: {
      std::vector<int> perm(rank);
      for (int i = 0; i < rank; ++i) perm[i] = i;
      for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[d.Uniform(i + 1)]);
      d.Push(
          {r}, [perm](Graph&, const std::vector<Tensor>& v) { return Transpose(v[0], perm); },
          absl::StrCat("Transpose($0, ", Ints(perm), ")"));
      return true;
    }
    case 1: {
      if (!Numeric(x.dtype())) return true;
      std::vector<int> axes;
      for (int i = 0; i < rank; ++i) {
        if (d.Chance(0.4)) axes.push_back(i);
      }
      const bool max = d.Chance(0.5);
      d.Push(
          {r},
          [axes, max](Graph&, const std::vector<Tensor>& v) {
            return max ? Max(v[0], axes, true) : Sum(v[0], axes, true);
          },
          absl::StrCat(max ? "Max" : "Sum", "($0, ", Ints(axes), ", true)"));
      return true;
    }
    default: {
      if (!Numeric(x.dtype())) return true;
      const int b = Operand(d, r, false);
      d.Push(
          {r, b}, [](Graph&, const std::vector<Tensor>& v) { return Maximum(v[0], v[1]); },
          "Maximum($0, $1)");
      return true;
    }
  }
}

// MaxPoolGradGrad(x, g): g (shaped as x) read at each pooling window's first maximum of
// x, which is exact (the routing is discontinuous); drawn only as a second-order
// gradient elsewhere (6 of 3,000 programs). Any padding, stride, window and format.
bool DrawMaxPoolGradGrad(Drawer& d) {
  const int x = d.Pick(
      [](const Tensor& t) {
        return (t.dtype() == DType::kF32 || t.dtype() == DType::kF64) && t.rank() == 4 &&
               Known(t) && Elements(t.shape()) > 0 && Elements(t.shape()) <= 20000;
      },
      true);
  if (x < 0) return false;
  const Tensor xv = d.value(x);
  Pool2DAttrs p;
  p.size_h = 1 + d.Uniform(3);
  p.size_w = d.Chance(0.6) ? p.size_h : 1 + d.Uniform(3);
  p.window.stride_h = 1 + d.Uniform(3);
  p.window.stride_w = d.Chance(0.6) ? p.window.stride_h : 1 + d.Uniform(3);
  p.window.format = d.Chance(0.5) ? DataFormat::kNHWC : DataFormat::kNCHW;
  static const Padding kPaddings[] = {Padding::kValid, Padding::kSame, Padding::kExplicit};
  static const char* kPaddingCodes[] = {"Padding::kValid", "Padding::kSame", "Padding::kExplicit"};
  const int padding = d.Uniform(3);
  p.window.padding = kPaddings[padding];
  if (p.window.padding == Padding::kExplicit) {
    p.window.pad_top = d.Uniform(static_cast<int>(p.size_h));
    p.window.pad_bottom = d.Uniform(static_cast<int>(p.size_h));
    p.window.pad_left = d.Uniform(static_cast<int>(p.size_w));
    p.window.pad_right = d.Uniform(static_cast<int>(p.size_w));
  }
  const Window2D& w = p.window;
  const std::string code = absl::StrCat(
      "MaxPoolGradGrad($0, $1, Pool2DAttrs{", p.size_h, ", ", p.size_w, ", Window2D{", w.stride_h,
      ", ", w.stride_w, ", 1, 1, ", kPaddingCodes[padding], ", ", w.pad_top, ", ", w.pad_bottom,
      ", ", w.pad_left, ", ", w.pad_right, ", ",
      w.format == DataFormat::kNHWC ? "DataFormat::kNHWC" : "DataFormat::kNCHW", "}, {}})");
  const int g = d.Chance(0.5) ? d.AddConst(xv.dtype(), xv.shape()) : x;
  d.Push(
      {x, g}, [p](Graph&, const std::vector<Tensor>& v) { return MaxPoolGradGrad(v[0], v[1], p); },
      code);
  return true;
}

// StopGradient (tf.stop_gradient) of a value of any dtype; of a float, read beside the
// value itself, so a gradient program's two paths differ: x * StopGradient(x) has the
// gradient StopGradient(x), not 2x.
bool DrawStopGradient(Drawer& d) {
  const int a = d.Pick([](const Tensor& t) { return Elements(t.shape()) <= kMaxElements; });
  if (a < 0) return false;
  if (!IsFloating(d.value(a).dtype())) {
    d.Push(
        {a}, [](Graph&, const std::vector<Tensor>& v) { return StopGradient(v[0]); },
        "StopGradient($0)");
    return true;
  }
  d.Push(
      {a}, [](Graph&, const std::vector<Tensor>& v) { return v[0] * StopGradient(v[0]); },
      "$0 * StopGradient($0)");
  return true;
}

// SumToShapeOf (the run-time sum of a broadcast's gradient) of a numeric value to the
// shape of a keep-dims Sum of it over random axes, its leading dim dropped half the
// time: the 1s it sums over, -1 dims kept (like's values are never read).
bool DrawSumToShapeOf(Drawer& d) {
  const int a = PickAnyDType(
      d, [](const Tensor& t) { return Numeric(t.dtype()) && t.rank() > 0; }, false);
  if (a < 0) return false;
  const int rank = d.value(a).rank();
  std::vector<int> axes;
  for (int i = 0; i < rank; ++i) {
    if (d.Chance(0.5)) axes.push_back(i);
  }
  const bool drop = rank > 1 && d.Chance(0.5);
  d.Push(
      {a},
      [axes, drop](Graph&, const std::vector<Tensor>& v) {
        Tensor like = Sum(v[0], axes, true);
        return SumToShapeOf(v[0], drop ? Sum(like, {0}, false) : like);
      },
      absl::StrCat("SumToShapeOf($0, Sum($0, {", absl::StrJoin(axes, ", "), "}, true)",
                   drop ? " summed over 0" : "", ")"));
  return true;
}

}  // namespace

bool DrawEdgeOp(Drawer& d) {
  switch (d.Uniform(15)) {
    case 0:
    case 1:
      return DrawCast(d);
    case 2:
      return DrawCompare(d);
    case 3:
      return DrawSelect(d);
    case 4:
      return DrawReduce(d);
    case 5:
      return DrawFloatOp(d);
    case 6:
      return DrawOneHot(d);
    case 7:
      return DrawSequence(d);
    case 8:
      return DrawNegativeAxis(d);
    case 9:
    case 10:
    case 11:
      return DrawEmpty(d);
    case 12:
      return DrawHighRank(d);
    case 13:
      return DrawMaxPoolGradGrad(d);
    default:
      return d.Chance(0.5) ? DrawStopGradient(d) : DrawSumToShapeOf(d);
  }
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
