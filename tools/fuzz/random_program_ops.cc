// The random-program generator's generic ops (random_program_generator.h): elementwise
// unary and binary ops, comparisons and selects, reductions, matmuls, reshapes,
// transposes, broadcasts, concatenations, slices, pads, casts and one-hots, and the
// composites (softmax, layer norm, dense layers, ...).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_generator.h"

namespace braze {
namespace fuzz {
namespace internal {

bool Generator::Unary() {
  const int a = PickDType({DType::kF32, DType::kF64, DType::kI32});
  if (a < 0) return false;
  const bool integer = values_[a].dtype() == DType::kI32;
  struct U {
    const char* code;
    Tensor (*fn)(Tensor);
  };
  static const U kFloat[] = {
      {"Neg($0)", [](Tensor x) { return Neg(x); }},
      {"Abs($0)", [](Tensor x) { return Abs(x); }},
      {"Exp(Tanh($0))", [](Tensor x) { return Exp(Tanh(x)); }},
      {"Log(Abs($0) + 1.0)", [](Tensor x) { return Log(Abs(x) + 1.0); }},
      {"Sqrt(Abs($0))", [](Tensor x) { return Sqrt(Abs(x)); }},
      {"Rsqrt(Abs($0) + 1.0)", [](Tensor x) { return Rsqrt(Abs(x) + 1.0); }},
      {"Tanh($0)", [](Tensor x) { return Tanh(x); }},
      {"Sigmoid($0)", [](Tensor x) { return Sigmoid(x); }},
      {"Relu($0)", [](Tensor x) { return Relu(x); }},
      {"Square($0)", [](Tensor x) { return Square(x); }},
      {"Reciprocal(Abs($0) + 0.5)", [](Tensor x) { return Reciprocal(Abs(x) + 0.5); }},
      {"Sign($0)", [](Tensor x) { return Sign(x); }},
      {"Floor($0 * 3.0)", [](Tensor x) { return Floor(x * 3.0); }},
      {"Erf($0)", [](Tensor x) { return Erf(x); }},
  };
  static const U kInt[] = {
      {"Neg($0)", [](Tensor x) { return Neg(x); }},
      {"Abs($0)", [](Tensor x) { return Abs(x); }},
      {"Relu($0)", [](Tensor x) { return Relu(x); }},
      {"Square($0)", [](Tensor x) { return Square(x); }},
      {"Sign($0)", [](Tensor x) { return Sign(x); }},
  };
  const U& u = integer ? kInt[Uniform(5)] : kFloat[Uniform(14)];
  const std::string unary_code = u.code;
  if (!integer && !Exact(a) &&
      (unary_code.rfind("Sign", 0) == 0 || unary_code.rfind("Floor", 0) == 0)) {
    return false;  // discontinuous: exact operands only (see ExactOp)
  }
  auto fn = u.fn;
  Push(
      {a}, [fn](Graph&, const std::vector<Tensor>& v) { return fn(v[0]); }, u.code);
  return true;
}

bool Generator::Binary() {
  const int a = PickDType({DType::kF32, DType::kF64, DType::kI32});
  if (a < 0) return false;
  const int b = BroadcastOperand(a);
  const bool integer = values_[a].dtype() == DType::kI32;
  struct B {
    const char* code;
    Tensor (*fn)(Tensor, Tensor);
  };
  static const B kFloat[] = {
      {"Add($0, $1)", [](Tensor x, Tensor y) { return Add(x, y); }},
      {"Sub($0, $1)", [](Tensor x, Tensor y) { return Sub(x, y); }},
      {"Mul($0, $1)", [](Tensor x, Tensor y) { return Mul(x, y); }},
      {"Div($0, Abs($1) + 0.5)", [](Tensor x, Tensor y) { return Div(x, Abs(y) + 0.5); }},
      {"Maximum($0, $1)", [](Tensor x, Tensor y) { return Maximum(x, y); }},
      {"Minimum($0, $1)", [](Tensor x, Tensor y) { return Minimum(x, y); }},
      {"Pow(Abs($0) + 0.5, Tanh($1))",
       [](Tensor x, Tensor y) { return Pow(Abs(x) + 0.5, Tanh(y)); }},
  };
  static const B kInt[] = {
      {"Add($0, $1)", [](Tensor x, Tensor y) { return Add(x, y); }},
      {"Sub($0, $1)", [](Tensor x, Tensor y) { return Sub(x, y); }},
      {"Mul($0, $1)", [](Tensor x, Tensor y) { return Mul(x, y); }},
      {"Div($0, $1)", [](Tensor x, Tensor y) { return Div(x, y); }},
      {"Maximum($0, $1)", [](Tensor x, Tensor y) { return Maximum(x, y); }},
      {"Minimum($0, $1)", [](Tensor x, Tensor y) { return Minimum(x, y); }},
  };
  const B& op = integer ? kInt[Uniform(6)] : kFloat[Uniform(7)];
  auto fn = op.fn;
  Push(
      {a, b}, [fn](Graph&, const std::vector<Tensor>& v) { return fn(v[0], v[1]); }, op.code);
  return true;
}

bool Generator::Compare() {
  need_exact_ = true;  // discontinuous: exact operands only (see ExactOp)
  const int a = PickDType({DType::kF32, DType::kF64, DType::kI32});
  const int b = a < 0 ? -1 : BroadcastOperand(a);
  need_exact_ = false;
  if (a < 0) return false;
  switch (Uniform(3)) {
    case 0:
      Push(
          {a, b}, [](Graph&, const std::vector<Tensor>& v) { return Greater(v[0], v[1]); },
          "Greater($0, $1)");
      break;
    case 1:
      Push(
          {a, b}, [](Graph&, const std::vector<Tensor>& v) { return Less(v[0], v[1]); },
          "Less($0, $1)");
      break;
    default:
      // Equal of a value with itself and with a copy made by other ops.
      Push(
          {a, a}, [](Graph&, const std::vector<Tensor>& v) { return Equal(v[0], Relu(v[1])); },
          "Equal($0, Relu($1))");
  }
  return true;
}

bool Generator::SelectOp() {
  const int a = PickDType({DType::kF32, DType::kF64, DType::kI32});
  if (a < 0) return false;
  const int b = BroadcastOperand(a);
  int c = Pick([&](const Tensor& t) {
    return t.dtype() == DType::kBool && IsFullyDefined(t.shape()) &&
           IsFullyDefined(values_[a].shape()) && SmallBroadcast(values_[a].shape(), t.shape());
  });
  if (c >= 0) {
    Push(
        {c, a, b}, [](Graph&, const std::vector<Tensor>& v) { return Select(v[0], v[1], v[2]); },
        "Select($0, $1, $2)");
  } else {
    if (!Exact(a) || !Exact(b)) return false;  // the comparison needs exact operands
    Push(
        {a, b},
        [](Graph&, const std::vector<Tensor>& v) {
          return Select(Greater(v[0], v[1]), v[0], v[1] * v[1]);
        },
        "Select(Greater($0, $1), $0, $1 * $1)");
  }
  return true;
}

std::vector<int> Generator::RandomAxes(int rank) {
  std::vector<int> axes;
  for (int d = 0; d < rank; ++d) {
    if (Chance(0.5)) axes.push_back(Chance(0.2) ? d - rank : d);  // negative axes too
  }
  return axes;  // empty: every axis
}

bool Generator::Reduce() {
  // Rank 0 too: a scalar's reduction reduces nothing (it crashed the lowering once).
  const int a = PickDType({DType::kF32, DType::kF64, DType::kI32});
  if (a < 0) return false;
  const int rank = values_[a].rank();
  const std::vector<int> axes = RandomAxes(rank);
  const bool keep = Chance(0.4);
  const bool integer = values_[a].dtype() == DType::kI32;
  const int which = Uniform(integer ? 4 : 5);
  if (which == 3) {
    // ArgMax is discontinuous: exact operands only; and it needs an axis.
    if (!Exact(a) || rank == 0) return false;
    const int axis = Uniform(rank);
    Push(
        {a}, [axis](Graph&, const std::vector<Tensor>& v) { return ArgMax(v[0], axis); },
        absl::StrCat("ArgMax($0, ", axis, ")"));
    return true;
  }
  // By `which`; 3, ArgMax, is drawn above (its entry is never read).
  static const ReduceKind kReductions[] = {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin,
                                           ReduceKind::kMax, ReduceKind::kMean};
  Push({a}, ReductionBuild(kReductions[which], axes, keep),
       ReductionCode(kReductions[which], axes, keep));
  return true;
}

// The width n of a matmul with `mk` = batch * m * k and a drawn weight: a small extent,
// or in a matmul-sized program one that makes the work 2^21 to 2^22 multiply-adds (where
// oneDNN takes over). 0 when even n = 1 is past kMaxMatMulWork.
int64_t Generator::Width(int64_t mk) {
  int64_t n = Dim();
  if (gemm_) {
    const int64_t least = (kLibraryWork + mk - 1) / std::max<int64_t>(mk, 1);
    if (least <= 1024) n = least + Uniform(static_cast<int>(least) + 1);
  }
  return std::min(n, kMaxMatMulWork / std::max<int64_t>(mk, 1));
}

bool Generator::MatMulOp() {
  const bool batch = Chance(0.3);
  const int a = Pick([&](const Tensor& t) {
    return IsFloating(t.dtype()) && t.rank() == (batch ? 3 : 2) && IsFullyDefined(t.shape());
  });
  if (a < 0) return false;
  const Shape s = values_[a].shape();
  const DType dtype = values_[a].dtype();
  const bool ta = Chance(0.3);
  bool tb = Chance(0.3);
  const size_t r = s.size();
  const int64_t k = ta ? s[r - 2] : s[r - 1];
  const int64_t mk = NumElements(s);  // batch * m * k
  // The weight: a fresh constant (half the time: what oneDNN packs once), an earlier
  // value of the right shape (a placeholder, or computed: a x a^T, say), or a value
  // computed from a constant (a Func the kernel stores before the call).
  const int kind = Uniform(10);
  int b = -1;
  int64_t n = 0;
  if (kind >= 5 && kind < 8) {
    b = Pick([&](const Tensor& t) {
      if (t.dtype() != dtype || t.rank() != static_cast<int>(r) || !IsFullyDefined(t.shape()))
        return false;
      const Shape& ts = t.shape();
      if (!std::equal(s.begin(), s.end() - 2, ts.begin())) return false;  // batch dims
      // The widest n it could give: the work, and the product's elements, stay bounded
      // (an [m, 1] value times a [1, m] one is m^2 elements).
      const int64_t n =
          std::max<int64_t>({ts[r - 2] == k ? ts[r - 1] : 0, ts[r - 1] == k ? ts[r - 2] : 0, 1});
      return (ts[r - 2] == k || ts[r - 1] == k) && mk * n <= kMaxMatMulWork &&
             mk / std::max<int64_t>(k, 1) * n <= std::max<int64_t>(50000, NumElements(s));
    });
    if (b >= 0) {
      const Shape& bs = values_[b].shape();
      if (bs[r - 2] != k || bs[r - 1] != k) tb = bs[r - 1] == k;
      n = tb ? bs[r - 2] : bs[r - 1];
    }
  }
  if (b < 0) {
    n = Width(mk);
    if (n < 1) return false;
    Shape bs(s.begin(), s.end() - 2);
    bs.push_back(tb ? n : k);
    bs.push_back(tb ? k : n);
    b = kind >= 8 ? ComputedWeight(dtype, bs) : AddConst(dtype, bs);
  }
  next_work_ = mk * n;
  Push(
      {a, b},
      [batch, ta, tb](Graph&, const std::vector<Tensor>& v) {
        return batch ? BatchMatMul(v[0], v[1], ta, tb) : MatMul(v[0], v[1], ta, tb);
      },
      absl::StrCat(batch ? "BatchMatMul" : "MatMul", "($0, $1, ", ta ? "true" : "false", ", ",
                   tb ? "true" : "false", ")"));
  return true;
}

// A weight computed from a fresh constant c of `shape`: c plus an earlier value that
// broadcasts to it (an input, often), else Tanh(c) or Relu(c). Its value index.
int Generator::ComputedWeight(DType dtype, const Shape& shape) {
  const int x = Chance(0.5) ? Pick([&](const Tensor& t) {
    if (t.dtype() != dtype || !IsFullyDefined(t.shape())) return false;
    const absl::StatusOr<Shape> out = BroadcastShapes(shape, t.shape());
    return out.ok() && *out == shape;
  })
                            : -1;
  const int c = AddConst(dtype, shape);
  if (x >= 0) {
    Push(
        {c, x}, [](Graph&, const std::vector<Tensor>& v) { return Add(v[0], v[1]); },
        "Add($0, $1)");
  } else if (Chance(0.5)) {
    Push(
        {c}, [](Graph&, const std::vector<Tensor>& v) { return Tanh(v[0]); }, "Tanh($0)");
  } else {
    Push(
        {c}, [](Graph&, const std::vector<Tensor>& v) { return Relu(v[0]); }, "Relu($0)");
  }
  return static_cast<int>(values_.size()) - 1;
}

bool Generator::ReshapeOp() {
  const int a = Pick([](const Tensor& t) { return IsFullyDefined(t.shape()) && t.rank() >= 0; });
  if (a < 0) return false;
  const Shape s = values_[a].shape();
  const int64_t total = NumElements(s);
  Shape out;
  switch (Uniform(3)) {
    case 0:
      out = {total};
      break;
    case 1: {  // split the total into two factors, one of them -1
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= total; ++d) {
        if (total % d == 0) divisors.push_back(d);
      }
      if (total == 0) {  // no divisors (--edges draws values with no elements)
        out = {0, 1};
        break;
      }
      const int64_t d = divisors[Uniform(static_cast<int>(divisors.size()))];
      out = Chance(0.5) ? Shape{d, -1} : Shape{-1, d};
      break;
    }
    default:  // a leading 1, or rank 0 for one element
      out = total == 1 && Chance(0.5) ? Shape{} : s;
      if (!(total == 1 && out.empty())) out.insert(out.begin(), 1);
  }
  Push(
      {a}, [out](Graph&, const std::vector<Tensor>& v) { return Reshape(v[0], out); },
      absl::StrCat("Reshape($0, ", Ints(out), ")"));
  return true;
}

bool Generator::TransposeOp() {
  const int a = Pick([](const Tensor& t) { return t.rank() >= 2; });
  if (a < 0) return false;
  std::vector<int> perm(values_[a].rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng_);
  Push(
      {a}, [perm](Graph&, const std::vector<Tensor>& v) { return Transpose(v[0], perm); },
      absl::StrCat("Transpose($0, ", Ints(perm), ")"));
  return true;
}

bool Generator::BroadcastToOp() {
  const int a = Pick([](const Tensor& t) { return IsFullyDefined(t.shape()) && t.rank() <= 3; });
  if (a < 0) return false;
  Shape out = values_[a].shape();
  for (auto& d : out) {
    if (d == 1 && Chance(0.7)) d = Dim();
  }
  if (Chance(0.6)) out.insert(out.begin(), 1 + Uniform(4));
  if (NumElements(out) > std::max<int64_t>(50000, value_cap_)) return false;
  Push(
      {a}, [out](Graph&, const std::vector<Tensor>& v) { return BroadcastTo(v[0], out); },
      absl::StrCat("BroadcastTo($0, ", Ints(out), ")"));
  return true;
}

bool Generator::ConcatOp() {
  const int a = Pick([](const Tensor& t) { return t.rank() >= 1 && IsFullyDefined(t.shape()); });
  if (a < 0) return false;
  const Tensor x = values_[a];  // a copy: Push and AddConst grow values_
  const int axis = Uniform(x.rank());
  int b = Pick([&](const Tensor& t) {
    if (t.dtype() != x.dtype() || t.rank() != x.rank() || !IsFullyDefined(t.shape())) return false;
    for (int d = 0; d < x.rank(); ++d) {
      if (d != axis && t.shape()[d] != x.shape()[d]) return false;
    }
    return true;
  });
  if (b < 0) {
    Shape s = x.shape();
    s[axis] = Dim();
    b = AddConst(x.dtype(), s);
  }
  const bool three = Chance(0.3);
  Push(
      {a, b},
      [axis, three](Graph&, const std::vector<Tensor>& v) {
        if (three) return Concat({v[0], v[1], v[0]}, axis);
        return Concat({v[0], v[1]}, axis);
      },
      absl::StrCat("Concat({$0, $1", three ? ", $0" : "", "}, ", axis, ")"));
  return true;
}

bool Generator::SliceOp() {
  const int a = Pick([](const Tensor& t) {
    return t.rank() >= 1 && IsFullyDefined(t.shape()) && NumElements(t.shape()) > 0;
  });
  if (a < 0) return false;
  const Shape s = values_[a].shape();
  std::vector<int64_t> begin, size;
  for (int64_t d : s) {
    const int64_t b = Uniform(static_cast<int>(d));
    begin.push_back(b);
    size.push_back(Chance(0.2) ? -1 : 1 + Uniform(static_cast<int>(d - b)));
  }
  Push(
      {a}, [begin, size](Graph&, const std::vector<Tensor>& v) { return Slice(v[0], begin, size); },
      absl::StrCat("Slice($0, ", Ints(begin), ", ", Ints(size), ")"));
  return true;
}

bool Generator::PadOp() {
  const int a = Pick([](const Tensor& t) { return t.rank() >= 1 && IsFullyDefined(t.shape()); });
  if (a < 0) return false;
  std::vector<std::pair<int64_t, int64_t>> pads;
  std::string code = "{";
  for (int d = 0; d < values_[a].rank(); ++d) {
    pads.emplace_back(Uniform(3), Uniform(3));
    absl::StrAppend(&code, d ? ", " : "", "{", pads.back().first, ", ", pads.back().second, "}");
  }
  code += "}";
  const double value = ValueOf(values_[a].dtype(), Value());
  Push(
      {a}, [pads, value](Graph&, const std::vector<Tensor>& v) { return Pad(v[0], pads, value); },
      absl::StrCat("Pad($0, ", code, ", ", Num(value), ")"));
  return true;
}

bool Generator::CastOrOneHot() {
  const int a = Pick([](const Tensor& t) { return NumElements(t.shape()) != 0; });
  if (a < 0) return false;
  const DType from = values_[a].dtype();
  if (from == DType::kI32 && Chance(0.5)) {
    const int64_t depth = 1 + Uniform(5);
    const double on = Value(), off = Value();
    Push(
        {a},
        [depth, on, off](Graph&, const std::vector<Tensor>& v) {
          return OneHot(v[0], depth, on, off);
        },
        absl::StrCat("OneHot($0, ", depth, ", ", Num(on), ", ", Num(off), ")"));
    return true;
  }
  static const DType kTo[] = {DType::kF32, DType::kF64, DType::kI32, DType::kBool};
  DType to = kTo[Uniform(4)];
  if (to == from) to = from == DType::kF32 ? DType::kI32 : DType::kF32;
  if (IsFloating(from) && !IsFloating(to) && !Exact(a)) return false;  // discontinuous
  if (to == DType::kI32 && IsFloating(from)) {
    // Scale first so the truncation has work to do.
    Push(
        {a}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0] * 3.0, to); },
        absl::StrCat("Cast($0 * 3.0, ", DTypeCode(to), ")"));
    return true;
  }
  Push(
      {a}, [to](Graph&, const std::vector<Tensor>& v) { return Cast(v[0], to); },
      absl::StrCat("Cast($0, ", DTypeCode(to), ")"));
  return true;
}

bool Generator::Composite() {
  const int a = Pick([](const Tensor& t) {
    return IsFloating(t.dtype()) && t.rank() >= 1 && IsFullyDefined(t.shape()) &&
           NumElements(t.shape()) > 0;
  });
  if (a < 0) return false;
  const Tensor x = values_[a];  // a copy: Push and AddConst grow values_
  const int rank = x.rank();
  const int64_t last = x.shape().back();
  switch (Uniform(6)) {
    case 0: {
      const int axis = Uniform(rank) - (Chance(0.5) ? rank : 0);
      Push(
          {a}, [axis](Graph&, const std::vector<Tensor>& v) { return Softmax(v[0], axis); },
          absl::StrCat("Softmax($0, ", axis, ")"));
      return true;
    }
    case 1: {
      const int axis = Uniform(rank);
      Push(
          {a}, [axis](Graph&, const std::vector<Tensor>& v) { return LogSoftmax(v[0], axis); },
          absl::StrCat("LogSoftmax($0, ", axis, ")"));
      return true;
    }
    case 2: {
      const int labels = AddConst(x.dtype(), x.shape());
      Push(
          {a, labels},
          [](Graph&, const std::vector<Tensor>& v) {
            return SoftmaxCrossEntropyWithLogits(v[0], Softmax(v[1]));
          },
          "SoftmaxCrossEntropyWithLogits($0, Softmax($1))");
      return true;
    }
    case 3: {
      const int gamma = AddConst(x.dtype(), {last});
      const int beta = AddConst(x.dtype(), {last});
      Push(
          {a, gamma, beta},
          [](Graph&, const std::vector<Tensor>& v) { return LayerNorm(v[0], v[1], v[2]); },
          "LayerNorm($0, $1, $2)");
      return true;
    }
    case 4:
      Push(
          {a}, [](Graph&, const std::vector<Tensor>& v) { return Gelu(v[0]); }, "Gelu($0)");
      return true;
    default: {
      if (rank != 2) return false;
      const int64_t n = Width(NumElements(x.shape()));
      if (n < 1) return false;
      const int w = AddConst(x.dtype(), {last, n});
      const int b = AddConst(x.dtype(), {n});
      const int act = Uniform(5);
      static const char* kAct[] = {"kNone", "kRelu", "kGelu", "kSigmoid", "kTanh"};
      next_work_ = NumElements(x.shape()) * n;
      Push(
          {a, w, b},
          [act](Graph&, const std::vector<Tensor>& v) {
            return Dense(v[0], v[1], v[2], static_cast<Activation>(act));
          },
          absl::StrCat("Dense($0, $1, $2, Activation::", kAct[act], ")"));
      return true;
    }
  }
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
