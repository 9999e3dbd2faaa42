// Every elementwise op (unary, Cast, binary with broadcasting, Select) compiled under
// every scheduler and compared with the reference kernels.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const Shape kTiny{1, 1};
const Shape kSmall{7, 3};
const Shape kBig{17, 33, 65};
const Shape kEmpty{0, 3};

OpTestCase Unary(std::string name, Tensor (*fn)(Tensor), DType dtype, double lo, double hi,
                 Tolerance tol = {}) {
  return {name,
          [=](Case& c, const Shape& s) { c.outputs.push_back(fn(c.Input(dtype, s, 11, lo, hi))); },
          {kTiny, kSmall, kEmpty},
          {kBig},
          tol};
}

// Three broadcasting patterns in one cluster: same shape, a row, and column x row; the
// large shape checks the row pattern only.
OpTestCase Binary(std::string name, Tensor (*fn)(Tensor, Tensor), DType dtype, double lo, double hi,
                  Tolerance tol = {}) {
  return {name,
          [=](Case& c, const Shape& s) {
            Shape col = s;
            col.back() = 1;
            Tensor a = c.Input(dtype, s, 21, lo, hi);
            Tensor row = c.Input(dtype, {s.back()}, 23, lo, hi);
            if (s.size() > 2) {
              // Large shapes: one output (Adams2019 on 3 large outputs takes seconds).
              c.outputs = {fn(a, row)};
              return;
            }
            Tensor b = c.Input(dtype, s, 22, lo, hi);
            Tensor a_col = c.Input(dtype, col, 24, lo, hi);
            c.outputs = {fn(a, b), fn(a, row), fn(a_col, row)};
          },
          {kTiny, kSmall, kEmpty},
          {kBig},
          tol};
}

OpTestCase CastCase(std::string name, DType from, DType to, double lo, double hi) {
  return {
      name,
      [=](Case& c, const Shape& s) { c.outputs.push_back(Cast(c.Input(from, s, 31, lo, hi), to)); },
      {kTiny, kSmall, kEmpty},
      {kBig},
      {}};
}

constexpr Tolerance kExact{0, 0};

// Every float class, each sign: NaN, +-inf, +-0, subnormals, and magnitudes 2^-149 ..
// 2^max in steps of 2^3 (three mantissas each), so exp and pow overflow and underflow,
// log sees subnormals and erf huge arguments. The fuzzer's values stay within +-2.
HostTensor ExtremeValues(DType dtype) {
  const bool f64 = dtype == DType::kF64;
  std::vector<double> v = {NAN,    INFINITY, -INFINITY, 0.0,    -0.0, 88.5, 88.8, -103.5,
                           -104.5, 709.5,    710.5,     -745.5, 0.5,  2,    3};
  for (int e = -149; e <= (f64 ? 1023 : 127); e += f64 ? 11 : 3) {
    for (double m : {1.0, 1.5, 1.9990234375}) {
      v.push_back(std::ldexp(m, e));
      v.push_back(-std::ldexp(m, e));
    }
  }
  HostTensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

// fn over ExtremeValues: IEEE results where the reference (libm) has them. Tolerance:
// relative, with an absolute floor below the smallest normal (subnormal results).
OpTestCase Extreme(std::string name, std::function<Tensor(Tensor)> fn, DType dtype) {
  const Tolerance tol = dtype == DType::kF64 ? Tolerance{1e-12, 1e-300} : Tolerance{2e-5, 1e-37};
  return {name,
          [=](Case& c, const Shape&) { c.outputs.push_back(fn(c.Input(ExtremeValues(dtype)))); },
          {{1}},
          {},
          tol};
}

// fn over the values `v` of `dtype` (one rank-1 input), compared with `tol`.
OpTestCase OnValues(std::string name, DType dtype, std::vector<double> v, Tensor (*fn)(Tensor),
                    Tolerance tol) {
  return {std::move(name),
          [=](Case& c, const Shape&) {
            HostTensor t(dtype, {static_cast<int64_t>(v.size())});
            for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
            c.outputs.push_back(fn(c.Input(t)));
          },
          {{1}},
          {},
          tol};
}

// Sigmoid far out in both tails, compared relatively down to the last subnormal: below
// -87 (f32) and -708 (f64) the compiled kernel returned sigmoid at the clamp (1.6e-38,
// 3.3e-308) and the reference 1 / (1 + exp(-v)) returned 0 once exp overflowed; both
// are now exp(v) / (1 + exp(v)) there (sigmoid(-90) = 8e-40).
OpTestCase SigmoidTails(DType dtype) {
  const bool f64 = dtype == DType::kF64;
  const std::vector<double> v =
      f64 ? std::vector<double>{-700, -708.5, -709, -720, -740,  -744, -745.5,
                                -750, -1e300, 700,  745,  1e300, -0.0}
          : std::vector<double>{-80,    -87.5,  -88,  -88.5, -89,   -90, -95,  -100, -103,
                                -103.9, -104.5, -120, -1e3,  -1e30, 80,  88.5, 1e30, -0.0};
  const Tolerance tol = f64 ? Tolerance{1e-12, 5e-324} : Tolerance{2e-6, 1.5e-45};
  return OnValues(f64 ? "SigmoidTailsF64" : "SigmoidTails", dtype, v, Sigmoid, tol);
}

// Tanh below 0.625, where 1 - 2 / (exp(2x) + 1) cancels: it was 34 ulp off at 0.0443
// (f32) and 28 at 0.0447 (f64). Both sides within an ulp of tanh now, so 2 ulp apart.
OpTestCase TanhNearZero(DType dtype) {
  const bool f64 = dtype == DType::kF64;
  std::vector<double> v = {0.0443000011, 0.04474175, 0.1, 0.3, 0.5, 0.62};
  for (double x = 1e-6; x < 0.62; x *= 1.37) v.push_back(x);
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  const Tolerance tol = f64 ? Tolerance{5e-16, 0} : Tolerance{2.5e-7, 0};
  return OnValues(f64 ? "TanhNearZeroF64" : "TanhNearZero", dtype, v, Tanh, tol);
}

Tensor PowOf(Tensor x, double y) {
  return Pow(x, Const(*x.graph(), HostTensor::Filled(x.dtype(), {}, y)));
}

// Cases with ExtremeValues, each fixed after a mismatch: Exp(1.6e9) was 0 (f32), Log of a
// subnormal -88.03 for -103.28, Erf(1.4e11) NaN, Pow(NaN, 2) inf, Pow(inf, 0.5) 1.8e19,
// Pow(x, x) 0 where it overflows, Cast(NaN) to bool false under Mullapudi2016, and on
// OpenCL Tanh(NaN) and Sigmoid(NaN) 1 in f64.
void AddExtremeCases(std::vector<OpTestCase>* cases) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    const std::string s = dt == DType::kF64 ? "F64" : "";
    for (auto& [name, fn] : std::vector<std::pair<std::string, std::function<Tensor(Tensor)>>>{
             {"Exp", [](Tensor x) { return Exp(x); }},
             {"Log", [](Tensor x) { return Log(x); }},
             {"Erf", [](Tensor x) { return Erf(x); }},
             {"Tanh", [](Tensor x) { return Tanh(x); }},
             {"Sigmoid", [](Tensor x) { return Sigmoid(x); }},
             {"Sqrt", [](Tensor x) { return Sqrt(x); }},
             {"Floor", [](Tensor x) { return Floor(x); }},
             {"Rsqrt", [](Tensor x) { return Rsqrt(x); }},
             {"Reciprocal", [](Tensor x) { return Reciprocal(x); }},
             {"PowSquare", [](Tensor x) { return PowOf(x, 2); }},
             {"PowHalf", [](Tensor x) { return PowOf(x, 0.5); }},
             {"PowCube", [](Tensor x) { return PowOf(x, -3); }},
             {"PowSelf", [](Tensor x) { return Pow(x, x); }},
             {"CastToBool", [](Tensor x) { return Cast(Cast(x, DType::kBool), DType::kI32); }},
             {"MaxWithNaN",
              [](Tensor x) {
                return Max(Reshape(Slice(x, {0}, {12}), {3, 4}), {1});
              }},
         }) {
      cases->push_back(Extreme("Extreme" + name + s, fn, dt));
    }
    cases->push_back(SigmoidTails(dt));
    cases->push_back(TanhNearZero(dt));
  }
}

std::vector<OpTestCase> BasicCases();

std::vector<OpTestCase> Cases() {
  std::vector<OpTestCase> cases = BasicCases();
  AddExtremeCases(&cases);
  return cases;
}

// The tolerance of a 16-bit float result: one ulp of its type (bf16 has 8 significant
// bits, f16 11) relative, on top of the f32 case's. Both sides compute in f32 and round
// once per op (docs/MIXED_PRECISION.md), so they differ only where the f32 values
// straddle a rounding boundary.
Tolerance TolFor(DType dtype, Tolerance f32) {
  if (dtype == DType::kBF16) return {std::max(f32.rtol, 0x1p-7), std::max(f32.atol, 1e-5)};
  if (dtype == DType::kF16) return {std::max(f32.rtol, 0x1p-10), std::max(f32.atol, 1e-5)};
  return f32;
}

// The float cases, for f32 and for each 16-bit float (`f`; names get `suffix`).
std::vector<OpTestCase> FloatCases(DType f, const std::string& x) {
  const DType b = DType::kBool;
  const Tolerance def = TolFor(f, {});
  const Tolerance exact = Is16BitFloat(f) ? TolFor(f, kExact) : kExact;
  return {
      Unary("Neg" + x, Neg, f, -1, 1, def),
      Unary("Abs" + x, Abs, f, -1, 1, def),
      Unary("Exp" + x, Exp, f, -3, 3, def),
      Unary("Log" + x, Log, f, 0.05, 4, def),
      Unary("Sqrt" + x, Sqrt, f, 0.05, 4, def),
      Unary("Rsqrt" + x, Rsqrt, f, 0.05, 4, def),
      Unary("Tanh" + x, Tanh, f, -4, 4, def),
      Unary("TanhSmall" + x, Tanh, f, -0.05, 0.05, def),
      Unary("Sigmoid" + x, Sigmoid, f, -6, 6, def),
      Unary("Relu" + x, Relu, f, -1, 1, def),
      Unary("Square" + x, Square, f, -2, 2, def),
      Unary("Reciprocal" + x, Reciprocal, f, 0.1, 4, def),
      Unary("Sign" + x, Sign, f, -1, 1, kExact),
      Unary("Floor" + x, Floor, f, -5, 5, kExact),
      Unary("StopGradient" + x, StopGradient, f, -5, 5, kExact),
      Unary("Erf" + x, Erf, f, -3, 3, TolFor(f, {1e-5, 1e-6})),
      CastCase("CastF32ToI32" + x, f, DType::kI32, -50, 50),
      CastCase("CastF32ToBool" + x, f, b, -1, 1),
      CastCase("CastBoolToF32" + x, b, f, 0, 1),
      CastCase("CastI32ToF32" + x, DType::kI32, f, -1000, 1000),
      Binary("Add" + x, Add, f, -1, 1, def),
      Binary("Sub" + x, Sub, f, -1, 1, def),
      Binary("Mul" + x, Mul, f, -1, 1, def),
      Binary("Div" + x, Div, f, 0.5, 2, def),
      Binary("Maximum" + x, Maximum, f, -1, 1, def),
      Binary("Minimum" + x, Minimum, f, -1, 1, def),
      Binary("Pow" + x, Pow, f, 0.1, 2, def),
      Binary("Greater" + x, Greater, f, -1, 1, kExact),
      Binary("Less" + x, Less, f, -1, 1, kExact),
      {"Select" + x,
       [=](Case& c, const Shape& s) {
         Tensor cond = c.Input(b, s, 41);
         Tensor v = c.Input(f, s, 42);
         Tensor row = c.Input(f, {s.back()}, 43);
         Tensor cond_row = c.Input(b, {s.back()}, 44);
         c.outputs = {Select(cond, v, row), Select(cond_row, row, v)};
       },
       {kTiny, kSmall, kEmpty},
       {kBig},
       exact},
      {"ChainOfTen" + x,  // a 10-op elementwise chain with scalar constants: one pipeline
       [=](Case& c, const Shape& s) {
         Tensor v = c.Input(f, s, 51);
         Tensor y = Exp(Tanh(v * 2.0 + 1.0) - 0.5);
         c.outputs = {Sqrt(Relu(y * y) + 1.0) / 3.0};
       },
       {kTiny, kSmall, kEmpty},
       {kBig},
       // Ten roundings: an ulp of difference early may grow through Exp.
       Is16BitFloat(f) ? TolFor(f, {f == DType::kBF16 ? 0x1p-6 : 0x1p-9, 1e-5}) : def},
  };
}

std::vector<OpTestCase> BasicCases() {
  const DType f32 = DType::kF32, f64 = DType::kF64, i32 = DType::kI32, b = DType::kBool;
  std::vector<OpTestCase> cases = FloatCases(f32, "");
  std::vector<OpTestCase> more = {
      CastCase("CastF64ToF32", f64, f32, -1, 1),
      CastCase("CastF32ToF64", f32, f64, -1, 1),
      Unary("NegI32", Neg, i32, -100, 100, kExact),
      Unary("AbsI32", Abs, i32, -100, 100, kExact),
      Unary("ExpF64", Exp, f64, -3, 3, {1e-12, 1e-14}),
      Unary("TanhF64", Tanh, f64, -4, 4, {1e-12, 1e-14}),
      Unary("ReluI32", Relu, i32, -100, 100, kExact),
      Unary("SquareI32", Square, i32, -100, 100, kExact),
      Unary("SignI32", Sign, i32, -3, 3, kExact),
      Unary("ErfF64", Erf, f64, -3, 3, {1e-12, 1e-14}),
      CastCase("CastI32ToBool", i32, b, -2, 2),
      CastCase("CastBoolToI32", b, i32, 0, 1),
      CastCase("CastF64ToI32", f64, i32, -50, 50),
      Binary("AddI32", Add, i32, -100, 100, kExact),
      Binary("MulI32", Mul, i32, -100, 100, kExact),
      Binary("DivI32", Div, i32, -10, 10, kExact),  // floor division, negatives and x/0
      Binary("MinimumI32", Minimum, i32, -5, 5, kExact),
      Binary("PowF64", Pow, f64, 0.1, 2, {1e-12, 1e-14}),
      Binary("LessI32", Less, i32, -3, 3, kExact),
      Binary("EqualI32", Equal, i32, -2, 2, kExact),
      Binary("EqualBool", Equal, b, 0, 1, kExact),
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

// NaN, infinities, signed zeros, f32 subnormals, f16 subnormals and their underflow,
// f16's largest value and its overflow, bf16 and f16 ties, f64 past f32's range.
const std::vector<double> kSpecials16 = {
    NAN,        INFINITY,    -INFINITY,       0.0,    -0.0,  1e-40, -1e-40, 6e-8,
    3e-8,       1e-45,       65504,           65520,  70000, 3e38,  -3e38,  1.00390625,
    1.01171875, 1 + 0x1p-11, 1 + 3 * 0x1p-11, 1e-300, 1e300};

// The float cases in bf16 and f16, the casts between every pair of float types, and
// every class of special value (NaN, infinities, signed zeros, subnormals, overflow on
// narrowing) through a cast each way: compiled rounding is bit-exact with the
// reference's (Eigen's) conversions.
std::vector<OpTestCase> Cases16() {
  std::vector<OpTestCase> cases = FloatCases(DType::kBF16, "BF16");
  std::vector<OpTestCase> f16 = FloatCases(DType::kF16, "F16");
  cases.insert(cases.end(), f16.begin(), f16.end());
  const std::vector<std::pair<DType, std::string>> floats = {
      {DType::kF32, "F32"}, {DType::kF64, "F64"}, {DType::kBF16, "BF16"}, {DType::kF16, "F16"}};
  for (const auto& [from, fs] : floats) {
    for (const auto& [to, ts] : floats) {
      if (from == to || (!Is16BitFloat(from) && !Is16BitFloat(to))) continue;
      cases.push_back(CastCase("Cast" + fs + "To" + ts, from, to, -3, 3));
      cases.back().tol = kExact;
      cases.push_back({"ExtremeCast" + fs + "To" + ts,
                       [from = from, to = to](Case& c, const Shape&) {
                         HostTensor t(from, {static_cast<int64_t>(kSpecials16.size())});
                         for (size_t i = 0; i < kSpecials16.size(); ++i) {
                           t.SetDouble(static_cast<int64_t>(i), kSpecials16[i]);
                         }
                         c.outputs.push_back(Cast(c.Input(t), to));
                       },
                       {{1}},
                       {},
                       kExact});
    }
  }
  return cases;
}

class ElementwiseTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(ElementwiseTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

INSTANTIATE_TEST_SUITE_P(Ops16, ElementwiseTest,
                         ::testing::Combine(::testing::ValuesIn(Cases16()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// The same ops as CUDA kernels: compiled for CUDA and assembled with ptxas everywhere;
// run and compared with the reference only on a GPU (skipped without one).
class ElementwiseTestCuda : public ::testing::TestWithParam<OpTestCase> {};

// Near saturation tanh rounds to +-0.99999994 in f32 for |x| in 8.3 .. 9; computed as
// 1 - 2 / (exp(2x) + 1) at a negative x it came out exactly -1, and Gelu's 1 + tanh(...)
// 0 instead of 6e-8 (the gradient of Sqrt(Abs(Gelu(x))) then NaN: braze-fuzz seed
// 901243). Both signs must round as std::tanh does there.
TEST(TanhTest, SaturatesSymmetricallyAsTheReference) {
  Case c;
  Tensor x = c.Input(DType::kF32, {2, 64}, 5, 8.35, 8.6);
  c.outputs = {Tanh(x), Tanh(-x)};
  auto kernel = CompileCluster(SpecOf(c), {Scheduler::kSafeDefault, 0});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto got = RunKernel(**kernel, c.values);
  ASSERT_TRUE(got.ok()) << got.status();
  const HostTensor& in = c.values[0];
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    const float v = in.data<float>()[i];
    EXPECT_EQ((*got)[0].data<float>()[i], std::tanh(v)) << v;
    EXPECT_EQ((*got)[1].data<float>()[i], std::tanh(-v)) << -v;
    EXPECT_GT((*got)[1].data<float>()[i], -1.0f) << -v;
  }
}

TEST_P(ElementwiseTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }

TEST_P(ElementwiseTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTestCuda, ::testing::ValuesIn(Cases()), CaseName);
// The 16-bit cases as CUDA kernels (bf16 converted on its bits: lower_float16.cc).
INSTANTIATE_TEST_SUITE_P(Ops16, ElementwiseTestCuda, ::testing::ValuesIn(Cases16()), CaseName);

// The same GPU schedules on opencl:0 (POCL on this machine), compared with the reference.
class ElementwiseTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(ElementwiseTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);
// The 16-bit cases on OpenCL: bf16 (and f16 without cl_khr_fp16, as on POCL) stored as
// their bits in the kernels (compile/float16_bits.h), the casts bit-exact.
INSTANTIATE_TEST_SUITE_P(Ops16, ElementwiseTestOpenCL, ::testing::ValuesIn(Cases16()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
