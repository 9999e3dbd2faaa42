// Random programs, control flow (GenerateOptions::control_flow_probability; cf, issue 40;
// docs/CONTROL_FLOW.md): Conds, Scans and bounded Whiles around random bodies (a chain of
// one to three bounded elementwise steps mixing the carried value with the step's slice
// and a captured constant), on float values of any rank >= 1, a -1 leading length
// included (a Scan over a dynamic batch), reversed Scans too. A Cond's predicate is
// computed from values both implementations compute bit for bit (a Max, a range or a
// majority count of exact values), or is a constant, so compiled and reference runs always
// take the same branch. A While either counts its iterations or runs while an integer
// state its body computes from an exact value stays under a limit (a data-dependent trip
// count: integer arithmetic is exact, so both sides stop at the same iteration); the
// bound, static, sometimes cuts it.
// random_program.cc's Generator calls DrawControlFlowOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/control_flow.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

constexpr int64_t kMaxElements = 20000;  // a dynamic dim counted as 40

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

// One step of a random body: t (the carried value) and x (same shape) -> a new t, kept
// bounded so that loops of any length stay finite.
constexpr int kNumSteps = 6;
Tensor ApplyStep(int step, Graph& g, Tensor t, Tensor x, Tensor k) {
  switch (step) {
    case 0:
      return Tanh(t + x);
    case 1:
      return Sin(t * k + x);
    case 2:
      return Sigmoid(t - x) * k;
    case 3:
      return Maximum(t, x) * ScalarConst(g, 0.5, t.dtype());
    case 4:
      return Tanh(t * x + k);
    default:
      return t * ScalarConst(g, 0.75, t.dtype()) + Cos(x) * ScalarConst(g, 0.25, t.dtype());
  }
}
std::string StepCode(int step, const std::string& t, const std::string& x, const std::string& k,
                     const std::string& dtype) {
  switch (step) {
    case 0:
      return absl::StrCat("Tanh(", t, " + ", x, ")");
    case 1:
      return absl::StrCat("Sin(", t, " * ", k, " + ", x, ")");
    case 2:
      return absl::StrCat("Sigmoid(", t, " - ", x, ") * ", k);
    case 3:
      return absl::StrCat("Maximum(", t, ", ", x, ") * ScalarConst(b, 0.5, ", dtype, ")");
    case 4:
      return absl::StrCat("Tanh(", t, " * ", x, " + ", k, ")");
    default:
      return absl::StrCat("(", t, " * ScalarConst(b, 0.75, ", dtype, ") + Cos(", x,
                          ") * ScalarConst(b, 0.25, ", dtype, "))");
  }
}

// A random body: its steps, applied in order.
struct RandomBody {
  std::vector<int> steps;
  Tensor Build(Graph& g, Tensor t, Tensor x, Tensor k) const {
    for (int s : steps) t = ApplyStep(s, g, t, x, k);
    return t;
  }
  std::string Code(const std::string& t, const std::string& x, const std::string& k,
                   const std::string& dtype) const {
    std::string c = t;
    for (int s : steps) c = StepCode(s, c, x, k, dtype);
    return c;
  }
};
RandomBody DrawBody(Drawer& d) {
  RandomBody b;
  const int n = 1 + d.Uniform(3);
  for (int i = 0; i < n; ++i) b.steps.push_back(d.Uniform(kNumSteps));
  return b;
}

int PickFloat(Drawer& d, int min_rank) {
  return d.Pick([min_rank](const Tensor& t) {
    return (t.dtype() == DType::kF32 || t.dtype() == DType::kF64) && t.rank() >= min_rank &&
           Elements(t.shape()) <= kMaxElements;
  });
}

// Scan over the leading axis of a float value: the carry starts at a quarter of the
// value's sum over that axis; each step's output is the new carry (stacked: the value's
// shape). The captured constant k is a scalar of the value's dtype.
bool DrawScan(Drawer& d) {
  const int x = PickFloat(d, 1);
  if (x < 0) return false;
  const RandomBody body = DrawBody(d);
  const bool reverse = d.Chance(0.3);
  const bool square = d.Chance(0.3);  // a second step output
  const double kv = d.Chance(0.5) ? 0.5 : -1.25;
  const DType dt = d.value(x).dtype();
  const std::string dtype = DTypeCode(dt);
  d.Push(
      {x},
      [=](Graph& g, const std::vector<Tensor>& v) {
        const Tensor k = ScalarConst(g, kv, dt);
        ScanOptions o;
        o.reverse = reverse;
        ScanResult r = Scan(
            [&](Graph& b, const std::vector<Tensor>& c, const std::vector<Tensor>& s) {
              Tensor h = body.Build(b, c[0], s[0], k);
              return ScanStep{{h},
                              square ? std::vector<Tensor>{h, Square(h)} : std::vector<Tensor>{h}};
            },
            {Sum(v[0], {0}) * ScalarConst(g, 0.25, dt)}, {v[0]}, o);
        return square ? r.stacked[0] + r.stacked[1] : r.stacked[0];
      },
      absl::StrCat("[&] { Tensor k = ScalarConst(g, ", kv, ", ", dtype,
                   "); ScanResult r = Scan([&](Graph& b, const std::vector<Tensor>& c, "
                   "const std::vector<Tensor>& s) { Tensor h = ",
                   body.Code("c[0]", "s[0]", "k", dtype), "; return ScanStep{{h}, {h",
                   square ? ", Square(h)" : "", "}}; }, {Sum($0, {0}) * ScalarConst(g, 0.25, ",
                   dtype, ")}, {$0}, ScanOptions{", reverse ? "true" : "false", "}); return ",
                   square ? "r.stacked[0] + r.stacked[1]" : "r.stacked[0]", "; }()"));
  return true;
}

int PickExact(Drawer& d) {
  return d.Pick(
      [](const Tensor& t) {
        return t.dtype() != DType::kBool && !Is16BitFloat(t.dtype()) && t.rank() >= 1 &&
               Elements(t.shape()) <= kMaxElements;
      },
      /*exact_only=*/true);
}

// A predicate on an exact value e (any dtype but bool and 16-bit, compared in f64): kind 0,
// Max(e) > th; 1, more elements above th than below it (integer counts); 2, the range
// Max(e) - Min(e) > th. Every step is exact, so both implementations take the same branch.
constexpr int kNumPredicates = 3;
Tensor Predicate(int kind, Graph& g, Tensor e, double th) {
  const Tensor t = ScalarConst(g, th, DType::kF64);
  switch (kind) {
    case 0:
      return Greater(Cast(Max(e), DType::kF64), t);
    case 1: {
      const Tensor f = Cast(e, DType::kF64);
      return Greater(Sum(Cast(Greater(f, t), DType::kI32)), Sum(Cast(Less(f, t), DType::kI32)));
    }
    default:
      return Greater(Cast(Max(e), DType::kF64) - Cast(Min(e), DType::kF64), t);
  }
}
std::string PredicateCode(int kind, const std::string& e, double th) {
  const std::string t = absl::StrCat("ScalarConst(g, ", th, ", DType::kF64)");
  switch (kind) {
    case 0:
      return absl::StrCat("Greater(Cast(Max(", e, "), DType::kF64), ", t, ")");
    case 1:
      return absl::StrCat("[&] { Tensor f = Cast(", e, ", DType::kF64); return Greater(Sum(Cast(",
                          "Greater(f, ", t, "), DType::kI32)), Sum(Cast(Less(f, ", t,
                          "), DType::kI32))); }()");
    default:
      return absl::StrCat("Greater(Cast(Max(", e, "), DType::kF64) - Cast(Min(", e,
                          "), DType::kF64), ", t, ")");
  }
}

// Cond on a predicate both implementations agree on, computed from an exact value (else
// a constant). Each branch is a random body of the operand.
bool DrawCond(Drawer& d) {
  const int x = PickFloat(d, 0);
  if (x < 0) return false;
  std::vector<int> operands = {x};
  const int exact = PickExact(d);
  const double threshold = d.Chance(0.5) ? 0.0 : 0.5;
  const int kind = d.Uniform(kNumPredicates);
  const bool constant = exact < 0;
  const bool constant_value = d.Chance(0.5);
  if (!constant) operands.push_back(exact);
  const RandomBody then_b = DrawBody(d), else_b = DrawBody(d);
  const DType dt = d.value(x).dtype();
  const std::string dtype = DTypeCode(dt);
  const std::string pred =
      constant ? absl::StrCat("Const(g, HostTensor::Scalar<bool>(", constant_value, "))")
               : PredicateCode(kind, "$1", threshold);
  d.Push(
      operands,
      [=](Graph& g, const std::vector<Tensor>& v) {
        const Tensor p = constant ? Const(g, HostTensor::Scalar<bool>(constant_value))
                                  : Predicate(kind, g, v[1], threshold);
        const Tensor k = ScalarConst(g, 0.5, dt);
        return Cond(
            p,
            [&](Graph& b, const std::vector<Tensor>& a) {
              return std::vector<Tensor>{then_b.Build(b, a[0], a[0], k)};
            },
            [&](Graph& b, const std::vector<Tensor>& a) {
              return std::vector<Tensor>{else_b.Build(b, a[0], Neg(a[0]), k)};
            },
            {v[0]})[0];
      },
      absl::StrCat("[&] { Tensor k = ScalarConst(g, 0.5, ", dtype, "); return Cond(", pred,
                   ", [&](Graph& b, const std::vector<Tensor>& a) { return "
                   "std::vector<Tensor>{",
                   then_b.Code("a[0]", "a[0]", "k", dtype),
                   "}; }, [&](Graph& b, const std::vector<Tensor>& a) { return "
                   "std::vector<Tensor>{",
                   else_b.Code("a[0]", "Neg(a[0])", "k", dtype), "}; }, {$0})[0]; }()"));
  return true;
}

// A While bounded statically, counting its iterations (it runs min(count, bound) times),
// or one whose trip count depends on data (DrawDataWhile).
bool DrawDataWhile(Drawer& d, int x, int e);
bool DrawWhile(Drawer& d) {
  const int x = PickFloat(d, 0);
  if (x < 0) return false;
  if (d.Chance(0.6)) {
    const int e = PickExact(d);
    if (e >= 0) return DrawDataWhile(d, x, e);
  }
  const RandomBody body = DrawBody(d);
  const int count = d.Uniform(6);
  const int bound = 1 + d.Uniform(5);
  const DType dt = d.value(x).dtype();
  const std::string dtype = DTypeCode(dt);
  d.Push(
      {x},
      [=](Graph& g, const std::vector<Tensor>& v) {
        const Tensor k = ScalarConst(g, 0.5, dt);
        return While(
            [&](Graph& b, const std::vector<Tensor>& s) {
              return Less(s[1], ScalarConst(b, count, DType::kI32));
            },
            [&](Graph& b, const std::vector<Tensor>& s) {
              return std::vector<Tensor>{body.Build(b, s[0], v[0], k),
                                         s[1] + ScalarConst(b, 1, DType::kI32)};
            },
            {v[0], ScalarConst(g, 0, DType::kI32)}, bound)[0];
      },
      absl::StrCat("[&] { Tensor k = ScalarConst(g, 0.5, ", dtype,
                   "); return While([&](Graph& b, const std::vector<Tensor>& s) { return "
                   "Less(s[1], ScalarConst(b, ",
                   count,
                   ", DType::kI32)); }, [&](Graph& b, const std::vector<Tensor>& s) { return "
                   "std::vector<Tensor>{",
                   body.Code("s[0]", "$0", "k", dtype),
                   ", s[1] + ScalarConst(b, 1, DType::kI32)}; }, {$0, ScalarConst(g, 0, "
                   "DType::kI32)}, ",
                   bound, ")[0]; }()"));
  return true;
}

// A While with a data-dependent trip count. Its carry: the float value t, and an i32
// state n of an exact value e's shape, starting at [e > a] (0 or 1 per element). Each
// iteration doubles n and adds [e > b] (computed outside, captured), and t takes a random
// body step plus 0.25 when Sum(n) passed half the limit; the loop runs while Sum(n) <
// limit, bounded statically. n stays below 2^9 per element (at most 8 iterations), so the
// integer sums never overflow, and both implementations count the same trips.
bool DrawDataWhile(Drawer& d, int x, int e) {
  const RandomBody body = DrawBody(d);
  const double a = d.Chance(0.5) ? 0.0 : 0.5, b = d.Chance(0.5) ? 0.0 : -0.5;
  static constexpr int kLimits[] = {1, 3, 10, 40, 200};
  const int limit = kLimits[d.Uniform(5)];
  const int bound = 1 + d.Uniform(8);
  const DType dt = d.value(x).dtype();
  const std::string dtype = DTypeCode(dt);
  d.Push(
      {x, e},
      [=](Graph& g, const std::vector<Tensor>& v) {
        const Tensor k = ScalarConst(g, 0.5, dt);
        const Tensor e64 = Cast(v[1], DType::kF64);
        const Tensor n0 = Cast(Greater(e64, ScalarConst(g, a, DType::kF64)), DType::kI32);
        // Built here, captured by the body: an op of enclosing tensors only is the
        // enclosing graph's.
        const Tensor up = Cast(Greater(e64, ScalarConst(g, b, DType::kF64)), DType::kI32);
        return While(
            [&](Graph& g2, const std::vector<Tensor>& s) {
              return Less(Sum(s[1]), ScalarConst(g2, limit, DType::kI32));
            },
            [&](Graph& g2, const std::vector<Tensor>& s) {
              const Tensor n1 = s[1] * ScalarConst(g2, 2, DType::kI32) + up;
              const Tensor passed =
                  Cast(Greater(Sum(n1), ScalarConst(g2, limit / 2, DType::kI32)), dt);
              return std::vector<Tensor>{
                  body.Build(g2, s[0], v[0], k) + passed * ScalarConst(g2, 0.25, dt), n1};
            },
            {v[0], n0}, bound)[0];
      },
      absl::StrCat(
          "[&] { Tensor k = ScalarConst(g, 0.5, ", dtype,
          "); Tensor e64 = Cast($1, DType::kF64); Tensor n0 = Cast(Greater(e64, ScalarConst(g, ", a,
          ", DType::kF64)), DType::kI32); Tensor up = Cast(Greater(e64, ScalarConst(g, ", b,
          ", DType::kF64)), DType::kI32); return While([&](Graph& b, const std::vector<Tensor>& "
          "s) { return Less(Sum(s[1]), ScalarConst(b, ",
          limit,
          ", DType::kI32)); }, [&](Graph& b, const std::vector<Tensor>& s) { Tensor n1 = s[1] * "
          "ScalarConst(b, 2, DType::kI32) + up; Tensor passed = Cast(Greater(Sum(n1), "
          "ScalarConst(b, ",
          limit / 2, ", DType::kI32)), ", dtype, "); return std::vector<Tensor>{",
          body.Code("s[0]", "$0", "k", dtype), " + passed * ScalarConst(b, 0.25, ", dtype,
          "), n1}; }, {$0, n0}, ", bound, ")[0]; }()"));
  return true;
}

}  // namespace

bool DrawControlFlowOp(Drawer& d) {
  switch (d.Uniform(3)) {
    case 0:
      return DrawScan(d);
    case 1:
      return DrawCond(d);
    default:
      return DrawWhile(d);
  }
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
