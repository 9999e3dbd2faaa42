// Random programs, control flow (GenerateOptions::control_flow_probability; cf, issue 40;
// docs/CONTROL_FLOW.md): Conds, Scans and bounded Whiles around random bodies (a chain of
// one to three bounded elementwise steps mixing the carried value with the step's slice
// and a captured constant), on float values of any rank >= 1, a -1 leading length
// included (a Scan over a dynamic batch), reversed Scans too. A Cond's predicate is
// computed from a value both implementations compute bit for bit (a Max of an exact
// value), or is a constant, so compiled and reference runs always take the same branch;
// a While's condition counts its iterations (the bound, static, sometimes cuts it).
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

// Cond on a predicate both implementations agree on: Max of an exact value against a
// constant, else a constant. Each branch is a random body of the operand.
bool DrawCond(Drawer& d) {
  const int x = PickFloat(d, 0);
  if (x < 0) return false;
  std::vector<int> operands = {x};
  const int exact = d.Pick(
      [](const Tensor& t) {
        return t.dtype() != DType::kBool && !Is16BitFloat(t.dtype()) && t.rank() >= 1 &&
               Elements(t.shape()) <= kMaxElements;
      },
      /*exact_only=*/true);
  const double threshold = d.Chance(0.5) ? 0.0 : 0.5;
  const bool constant = exact < 0;
  const bool constant_value = d.Chance(0.5);
  if (!constant) operands.push_back(exact);
  const RandomBody then_b = DrawBody(d), else_b = DrawBody(d);
  const DType dt = d.value(x).dtype();
  const std::string dtype = DTypeCode(dt);
  const std::string pred =
      constant ? absl::StrCat("Const(g, HostTensor::Scalar<bool>(", constant_value, "))")
               : absl::StrCat("Greater(Cast(Max($1), DType::kF64), ScalarConst(g, ", threshold,
                              ", DType::kF64))");
  d.Push(
      operands,
      [=](Graph& g, const std::vector<Tensor>& v) {
        const Tensor p = constant ? Const(g, HostTensor::Scalar<bool>(constant_value))
                                  : Greater(Cast(Max(v[1]), DType::kF64),
                                            ScalarConst(g, threshold, DType::kF64));
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

// A While bounded statically, counting its iterations: it runs min(count, bound) times.
bool DrawWhile(Drawer& d) {
  const int x = PickFloat(d, 0);
  if (x < 0) return false;
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
