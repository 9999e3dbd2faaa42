// bf16 matmuls on oneDNN's bf16 matmul inside the fused kernel (device/cpu_gemm.h,
// docs/MIXED_PRECISION.md, docs/CPU_GEMM.md): which matmuls take the bf16 call, and
// that every result is within the documented tolerance of the reference kernels.
//
// The reference rounds a bf16 MatMul once, from the f32 product of the bf16 operands,
// and a bias Add and ReLU each round again; the call accumulates in f32 in its own order
// and rounds once, after the bias and ReLU it takes. So an element may differ from the
// reference by one bf16 ulp (of either result), plus the f32 accumulation-order
// difference (bounded here by k * 2^-23 * sum |a_ip b_pj|, the products themselves
// being exact in f32), plus, where the bias went into the call, half a bf16 ulp of the
// product (the rounding the reference makes before the Add). NaN and infinities must
// match exactly. Skipped (with the reason) where oneDNN is not installed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "HalideRuntime.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "device/cpu_gemm.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// One bf16 ulp at |x| (2^-133, the smallest subnormal step, at and below the normals').
double UlpBF16(double x) {
  x = std::fabs(x);
  if (x == 0 || !std::isfinite(x)) return std::ldexp(1.0, -133);
  return std::ldexp(1.0, std::max(std::ilogb(x), -126) - 7);
}

// A matmul of the case's inputs, as the test computes its bound: exact products summed
// in double (p) and the sum of their magnitudes (mag), over [batch..., m, n].
struct Product {
  std::vector<double> p, mag;
  int64_t k = 0;
};

Product Multiply(const HostTensor& a, const HostTensor& b, bool ta, bool tb) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const size_t r = sa.size();
  const int64_t m = ta ? sa[r - 1] : sa[r - 2], k = ta ? sa[r - 2] : sa[r - 1];
  const int64_t n = tb ? sb[r - 2] : sb[r - 1];
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= sa[d];
  Product out;
  out.k = k;
  out.p.assign(batch * m * n, 0.0);
  out.mag.assign(batch * m * n, 0.0);
  for (int64_t q = 0; q < batch; ++q) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < k; ++l) {
          const double x = a.GetDouble(q * m * k + (ta ? l * m + i : i * k + l));
          const double y = b.GetDouble(q * k * n + (tb ? j * k + l : l * n + j));
          sum += x * y;
          mag += std::fabs(x * y);
        }
        out.p[(q * m + i) * n + j] = sum;
        out.mag[(q * m + i) * n + j] = mag;
      }
    }
  }
  return out;
}

// `got` (the compiled bf16 result) against `want` (the reference's) within the bound
// above, plus `product_ulps` bf16 ulps of the product (half of one where the bias went
// into the call; a whole one where both round the product before adding a bias, as
// their accumulation orders may round it apart).
::testing::AssertionResult WithinBound(const HostTensor& got, const HostTensor& want,
                                       const Product& prod, double product_ulps) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << TypeString(got.type()) << " vs " << TypeString(want.type());
  }
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.GetDouble(i), w = want.GetDouble(i);
    if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w)) {
      if ((std::isnan(g) && std::isnan(w)) || g == w) continue;
      return ::testing::AssertionFailure() << "element " << i << ": " << g << ", want " << w;
    }
    const double p = prod.p[i % prod.p.size()];
    double bound = UlpBF16(std::max(std::fabs(g), std::fabs(w))) +
                   prod.k * std::ldexp(prod.mag[i % prod.mag.size()], -23);
    bound += product_ulps * UlpBF16(p);
    if (!(std::fabs(g - w) <= bound)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << g << ", want " << w
                                           << " (product " << p << ", bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Every f32 or bf16 matmul on the library, however small (what braze-fuzz runs under).
CompileOptions Options(Scheduler scheduler = Scheduler::kSafeDefault, int64_t min_work = 0) {
  CompileOptions options;
  options.scheduler = scheduler;
  if (min_work > 0) options.cpu_gemm_min_work = min_work;
  return options;
}

// The call's operand and product types, as the safe default's schedule text names them.
bool CallsBF16(const CompiledKernel& kernel) {
  return absl::StrContains(kernel.schedule_text(), "(the CPU GEMM library: bf16 x bf16 -> bf16)");
}

bool CallsLibrary(const CompiledKernel& kernel) {
  return absl::StrContains(kernel.schedule_text(), kCpuGemmF32Symbol) ||
         absl::StrContains(kernel.schedule_text(), kCpuGemmBiasF32Symbol);
}

// One matmul output of a case: the inputs it multiplies (case input indices), its
// transposes, and whether a bias was added by the call.
struct Checked {
  int a, b;
  bool ta = false, tb = false, bias_folded = false;
};

// Compiles `c` with `options`, runs it, and checks each output against the reference
// within the bound for `checks[i]`: the safe default (the scheduler that made the
// kernel, whichever was asked for) calls oneDNN's bf16 matmul and takes the bias; the
// autoschedulers plan Halide loops on widened operands, which round as the reference.
// `text` (optional) receives the schedule text.
void CompileAndCheck(const Case& c, const std::vector<Checked>& checks,
                     const CompileOptions& options, std::string* text = nullptr) {
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  if (text != nullptr) *text = (*kernel)->schedule_text();
  const bool library = (*kernel)->scheduler_used() == Scheduler::kSafeDefault;
  EXPECT_EQ(CallsBF16(**kernel), library) << (*kernel)->schedule_text();
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << (*kernel)->schedule_text();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(actual->size(), checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    const Checked& k = checks[i];
    const Product prod = Multiply(c.values[k.a], c.values[k.b], k.ta, k.tb);
    EXPECT_TRUE(WithinBound((*actual)[i], (*expected)[i], prod, k.bias_folded && library ? 0.5 : 0))
        << "output " << i << " under " << SchedulerName((*kernel)->scheduler_used()) << "\n"
        << (*kernel)->schedule_text();
  }
}

class CpuGemmBF16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status available = CpuGemmAvailable();
    if (!available.ok()) GTEST_SKIP() << available.message();
    if (!CpuGemmTakesBF16()) {
      GTEST_SKIP() << "oneDNN runs no bf16 matmul on this CPU (AVX2): bf16 matmuls are f32 "
                      "calls of widened operands (CpuGemmBF16Widened.*)";
    }
  }
};

// Where oneDNN runs no bf16 matmul (an AVX2 CPU: its bf16 kernels need AVX512), a bf16
// matmul is the f32 call on widened operands, rounded once, as an f16 one is: the bf16
// call failed every run there (code -3; strict mode failed the Run, the default ran the
// op on the reference kernels). The bias and ReLU are ops of their own, each rounding as
// the reference does. Forced here (AllowCpuGemmBF16ForTesting) on every CPU.
TEST(CpuGemmBF16Widened, WhereTheLibraryRunsNoBF16TheMatMulIsAnF32CallOfWidenedOperands) {
  const absl::Status available = CpuGemmAvailable();
  if (!available.ok()) GTEST_SKIP() << available.message();
  AllowCpuGemmBF16ForTesting(false);
  struct Restore {
    ~Restore() { AllowCpuGemmBF16ForTesting(true); }
  } restore;
  EXPECT_FALSE(CpuGemmTakesBF16());
  const int64_t m = 61, n = 127, k = 139;  // 1.1M multiply-adds: over the minimum
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(absl::StrCat(ta, tb));
      Case c;
      Tensor a = c.Input(DType::kBF16, ta ? Shape{k, m} : Shape{m, k}, 21);
      Tensor b = c.Input(DType::kBF16, tb ? Shape{n, k} : Shape{k, n}, 22);
      Tensor bias = c.Input(DType::kBF16, {n}, 23, -4, 4);
      c.outputs = {MatMul(a, b, ta, tb), Relu(MatMul(a, b, ta, tb) + bias)};
      auto kernel =
          CompileCluster(SpecOf(c), Options(Scheduler::kSafeDefault, kLibraryGemmMinWork));
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_TRUE(CallsLibrary(**kernel)) << (*kernel)->schedule_text();
      EXPECT_FALSE(CallsBF16(**kernel)) << (*kernel)->schedule_text();
      auto actual = RunKernel(**kernel, c.values);
      ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << (*kernel)->schedule_text();
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      const Product prod = Multiply(c.values[0], c.values[1], ta, tb);
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(WithinBound((*actual)[i], (*expected)[i], prod, i == 0 ? 0 : 1))
            << "output " << i << "\n"
            << (*kernel)->schedule_text();
      }
    }
  }
}

TEST_F(CpuGemmBF16Test, PrimeExtentsEveryTransposeCallTheBF16Matmul) {
  // 131 x 127 x 257: 4.3M multiply-adds, over the library's minimum.
  const int64_t m = 131, n = 127, k = 257;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(absl::StrCat(ta, tb));
      Case c;
      Tensor a = c.Input(DType::kBF16, ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = c.Input(DType::kBF16, tb ? Shape{n, k} : Shape{k, n}, 2);
      c.outputs = {MatMul(a, b, ta, tb)};
      CompileAndCheck(c, {{0, 1, ta, tb}}, Options());
    }
  }
}

// Relu(MatMul(a, b) + bias[n]) in bf16 is one call: oneDNN adds the bias and applies the
// NaN-keeping ReLU before its one rounding. Every transpose, the bias on either side.
TEST_F(CpuGemmBF16Test, BiasAndReluGoIntoTheBF16Call) {
  const int64_t m = 67, n = 131, k = 257;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool relu : {false, true}) {
        const bool bias_first = ta != tb;
        SCOPED_TRACE(absl::StrCat(ta, tb, relu));
        Case c;
        Tensor a = c.Input(DType::kBF16, ta ? Shape{k, m} : Shape{m, k}, 1);
        Tensor b = c.Input(DType::kBF16, tb ? Shape{n, k} : Shape{k, n}, 2);
        Tensor bias = c.Input(DType::kBF16, {n}, 3, -4, 4);
        Tensor mm = MatMul(a, b, ta, tb);
        Tensor y = bias_first ? bias + mm : mm + bias;
        c.outputs = {relu ? Relu(y) : y};
        std::string text;
        CompileAndCheck(c, {{0, 1, ta, tb, true}}, Options(), &text);
        EXPECT_TRUE(absl::StrContains(text, kCpuGemmBiasF32Symbol)) << text;
        EXPECT_EQ(absl::StrContains(text, "_bias_relu"), relu) << text;
      }
    }
  }
}

// A bf16 GEMM of few rows on three threads is cut by columns (docs/CPU_GEMM.md, "One
// pool"): each part adds its own columns of the bias, applies the ReLU and rounds once;
// also where the consumer reads columns [17, n - 17) only (a region past column 0).
TEST_F(CpuGemmBF16Test, ACutByColumnsTakesEachPartsColumnsOfTheBias) {
  const int64_t m = 7, n = 257, k = 509, c0 = 17;
  for (bool sliced : {false, true}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat("sliced ", sliced, " relu ", relu));
      Case c;
      Tensor a = c.Input(DType::kBF16, {m, k}, 11);
      Tensor b = c.Input(DType::kBF16, {k, n}, 12);
      Tensor bias = c.Input(DType::kBF16, {n}, 13, -4, 4);
      Tensor y = MatMul(a, b) + bias;
      if (relu) y = Relu(y);
      c.outputs = {sliced ? Slice(y, {0, c0}, {m, n - 2 * c0}) : y};
      CompileOptions options = Options(Scheduler::kSafeDefault, /*min_work=*/1);
      options.num_threads = 3;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_TRUE(CallsBF16(**kernel)) << (*kernel)->schedule_text();
      const int64_t splits = CpuGemmSplitCalls();
      auto actual = RunKernel(**kernel, c.values);
      ASSERT_TRUE(actual.ok()) << actual.status();
      EXPECT_EQ(CpuGemmSplitCalls() - splits, 1);
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      // The bound's product over the columns the output holds.
      const Product whole = Multiply(c.values[0], c.values[1], false, false);
      Product prod;
      prod.k = k;
      const int64_t first = sliced ? c0 : 0, cols = sliced ? n - 2 * c0 : n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = first; j < first + cols; ++j) {
          prod.p.push_back(whole.p[i * n + j]);
          prod.mag.push_back(whole.mag[i * n + j]);
        }
      }
      EXPECT_TRUE(WithinBound((*actual)[0], (*expected)[0], prod, /*bias folded*/ 0.5))
          << (*kernel)->schedule_text();
    }
  }
}

// NaN and infinities from the operands (whole rows) and from the bias (whole columns):
// the ReLU keeps NaN and makes -inf a 0, as braze::Relu does, in bf16 too.
TEST_F(CpuGemmBF16Test, SpecialsKeepTheReferenceNaNSemantics) {
  const int64_t m = 37, n = 53, k = 1201;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu);
    Case c;
    HostTensor av = HostTensor::RandomUniform(DType::kBF16, {m, k}, 7);
    HostTensor bv = HostTensor::RandomUniform(DType::kBF16, {k, n}, 8, 0.5, 1.0);  // positive
    HostTensor biasv = HostTensor::RandomUniform(DType::kBF16, {n}, 9);
    av.SetDouble(0, nan);           // row 0: NaN
    av.SetDouble(1 * k + 4, inf);   // row 1: +inf
    av.SetDouble(2 * k + 9, -inf);  // row 2: -inf (0 after the ReLU)
    const double specials[] = {nan, inf, -inf, -0.0, 1e-40, -1e-40, 3e38, -3e38};
    for (int i = 0; i < 8; ++i) biasv.SetDouble(5 * i + 1, specials[i]);
    Tensor a = c.Input(av), b = c.Input(bv), bias = c.Input(biasv);
    Tensor y = MatMul(a, b) + bias;
    c.outputs = {relu ? Relu(y) : y};
    CompileAndCheck(c, {{0, 1, false, false, true}}, Options());
  }
}

// Where oneDNN's ReLU post-ops are not confirmed, the call applies the ReLU to the bf16
// product itself (a negative becomes 0, NaN stays): a batch with NaN and -inf, shapes of
// their own (new configurations, prepared with the post-ops turned off).
TEST_F(CpuGemmBF16Test, TheCallsOwnReluLoopOnABF16Product) {
  AllowCpuGemmReluPostOpsForTesting(false);
  const int64_t m = 43, n = 61, k = 1033;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Case c;
  HostTensor av = HostTensor::RandomUniform(DType::kBF16, {2, m, k}, 51);
  HostTensor biasv = HostTensor::RandomUniform(DType::kBF16, {n}, 52);
  av.SetDouble(3, nan);
  av.SetDouble(m * k + 5 * k, -inf);
  biasv.SetDouble(2, -inf);
  biasv.SetDouble(7, nan);
  Tensor a = c.Input(av);
  Tensor b = c.Input(DType::kBF16, {2, k, n}, 53);
  Tensor bias = c.Input(biasv);
  c.outputs = {Relu(BatchMatMul(a, b) + bias)};
  CompileAndCheck(c, {{0, 1, false, false, true}}, Options());
  AllowCpuGemmReluPostOpsForTesting(true);
}

// Tiny, odd and prime extents, batches and transposes with every matmul on the library
// (a minimum of one multiply-add), under every CPU scheduler: the safe default calls
// oneDNN's bf16 matmul, the autoschedulers plan their own loops on widened operands.
TEST_F(CpuGemmBF16Test, TinyOddAndBatchedUnderEveryScheduler) {
  // {batch..., m, k, n}
  const std::vector<Shape> shapes = {{1, 1, 1}, {7, 3, 5}, {2, 1, 1, 1}, {3, 7, 3, 5}, {13, 17, 2}};
  for (Scheduler scheduler : AllSchedulers()) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(absl::StrCat(SchedulerName(scheduler), " ", ShapeString(s)));
      const size_t r = s.size();
      const Shape batch(s.begin(), s.end() - 3);
      auto shape = [&](int64_t rows, int64_t cols) {
        Shape out = batch;
        out.push_back(rows);
        out.push_back(cols);
        return out;
      };
      const int64_t m = s[r - 3], k = s[r - 2], n = s[r - 1];
      auto mm = batch.empty() ? MatMul : BatchMatMul;
      Case c;
      Tensor a = c.Input(DType::kBF16, shape(m, k), 81);
      Tensor b = c.Input(DType::kBF16, shape(k, n), 82);
      Tensor at = c.Input(DType::kBF16, shape(k, m), 83);
      Tensor bt = c.Input(DType::kBF16, shape(n, k), 84);
      Tensor bias = c.Input(DType::kBF16, {n}, 85);
      c.outputs = {mm(a, b, false, false), mm(at, b, true, false), mm(a, bt, false, true),
                   Relu(mm(at, bt, true, true) + bias)};
      CompileAndCheck(c, {{0, 1}, {2, 1, true}, {0, 3, false, true}, {2, 3, true, true, true}},
                      Options(scheduler, 1));
    }
  }
}

// A constant bf16 b (inference weights) is packed once into oneDNN's layout and read
// packed at every later call; the product matches over two runs.
TEST_F(CpuGemmBF16Test, ConstantBF16WeightsArePackedOnce) {
  const int64_t m = 131, n = 1031, k = 509;
  Case c;
  Tensor a = c.Input(DType::kBF16, {m, k}, 11);
  HostTensor wv = HostTensor::RandomUniform(DType::kBF16, {k, n}, 12);
  Tensor w = Const(*c.graph, wv);
  Tensor bias = c.Input(DType::kBF16, {n}, 13);
  c.outputs = {Relu(MatMul(a, w) + bias)};
  auto kernel = CompileCluster(SpecOf(c), Options());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(CallsBF16(**kernel)) << (*kernel)->schedule_text();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const Product prod = Multiply(c.values[0], wv, false, false);
  const int64_t packs = CpuGemmWeightPacks();
  for (int run = 0; run < 2; ++run) {
    auto actual = RunKernel(**kernel, c.values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_TRUE(WithinBound((*actual)[0], (*expected)[0], prod, 0.5)) << "run " << run;
  }
  EXPECT_LE(CpuGemmWeightPacks() - packs, 1);  // 0 where oneDNN's layout is b's own
}

// A backward pass's matmuls in bf16: dx = (dy * mask) W^T and dW = x^T (dy * mask), the
// masked gradient a computed bf16 operand the schedule stores before the call.
TEST_F(CpuGemmBF16Test, GradientTransposesWithAComputedOperand) {
  const int64_t batch = 97, in = 211, out = 113;
  Case c;
  Tensor x = c.Input(DType::kBF16, {batch, in}, 21);
  Tensor w = c.Input(DType::kBF16, {in, out}, 22);
  Tensor dy = c.Input(DType::kBF16, {batch, out}, 23);
  Tensor h = c.Input(DType::kBF16, {batch, out}, 24);
  Tensor g = dy * Sign(Relu(h));  // dy where h > 0, else 0: a ReLU's gradient
  c.outputs = {MatMul(g, w, false, true), MatMul(x, g, true, false)};
  auto kernel = CompileCluster(SpecOf(c), Options());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(CallsBF16(**kernel)) << (*kernel)->schedule_text();
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  // The masked gradient, as the reference computes it.
  HostTensor gv = c.values[2];
  for (int64_t i = 0; i < gv.num_elements(); ++i) {
    if (!(c.values[3].GetDouble(i) > 0)) gv.SetDouble(i, 0.0);
  }
  EXPECT_TRUE(WithinBound((*actual)[0], (*expected)[0], Multiply(gv, c.values[1], false, true), 0));
  EXPECT_TRUE(WithinBound((*actual)[1], (*expected)[1], Multiply(c.values[0], gv, true, false), 0));
}

// The policy's forward layer: the f32 master's bf16 copy is both the call's operand and
// a cluster output (the backward matmul reads it). One stored Func: the output's copy
// reads the operand's store, bit for bit the reference's cast; the product within the
// bound. Under every scheduler (the autoschedulers inline it where they like).
TEST_F(CpuGemmBF16Test, AWeightCopyThatIsAlsoAnOutputIsComputedOnce) {
  const int64_t batch = 37, in = 211, out = 263;
  for (Scheduler scheduler : {Scheduler::kSafeDefault, Scheduler::kAdams2019}) {
    SCOPED_TRACE(SchedulerName(scheduler));
    Case c;
    Tensor x = c.Input(DType::kBF16, {batch, in}, 31);
    Tensor w = c.Input(DType::kF32, {in, out}, 32);
    Tensor w16 = Cast(w, DType::kBF16);
    c.outputs = {w16, MatMul(x, w16)};
    auto kernel = CompileCluster(SpecOf(c), Options(scheduler, /*min_work=*/1));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const std::string text = (*kernel)->schedule_text();
    if ((*kernel)->scheduler_used() == Scheduler::kSafeDefault) {
      EXPECT_TRUE(CallsBF16(**kernel)) << text;
      // The shared Func (named Cast_shared, or Cast_shared$N in a process that made
      // others) is the call's operand.
      const size_t at = text.find("Cast_shared");
      ASSERT_NE(at, std::string::npos) << text;
      const std::string line = text.substr(at, text.find('\n', at) - at);
      EXPECT_TRUE(absl::StrContains(line, ": library matmul operand")) << text;
    }
    auto actual = RunKernel(**kernel, c.values);
    ASSERT_TRUE(actual.ok()) << actual.status() << "\n" << text;
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_EQ((*actual)[0].num_bytes(), (*expected)[0].num_bytes());
    EXPECT_EQ(
        std::memcmp((*actual)[0].raw_data(), (*expected)[0].raw_data(), (*expected)[0].num_bytes()),
        0);
    EXPECT_TRUE(WithinBound((*actual)[1], (*expected)[1],
                            Multiply(c.values[0], (*expected)[0], false, false), 0))
        << text;
  }
}

// f16: oneDNN 2.6 has no f16 matmul on a CPU without AVX512-FP16, so an f16 matmul is
// the f32 call on widened copies (the schedule text says f32 x f32 -> f32), rounded
// once after; the library turned off, every 16-bit matmul is Halide loops.
TEST_F(CpuGemmBF16Test, F16WidensAndTheLibraryOffIsHalideLoops) {
  const int64_t m = 131, n = 127, k = 257;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (bool library : {true, false}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), library));
      Case c;
      Tensor a = c.Input(dtype, {m, k}, 31);
      Tensor b = c.Input(dtype, {k, n}, 32);
      c.outputs = {MatMul(a, b)};
      CompileOptions options = Options();
      options.cpu_gemm_library = library;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_EQ(CallsLibrary(**kernel), library) << (*kernel)->schedule_text();
      EXPECT_EQ(CallsBF16(**kernel), library && dtype == DType::kBF16);
      if (library && dtype == DType::kF16) {
        EXPECT_TRUE(absl::StrContains((*kernel)->schedule_text(), "f32 x f32 -> f32"));
      }
      auto actual = RunKernel(**kernel, c.values);
      ASSERT_TRUE(actual.ok()) << actual.status();
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::string why;
      // One ulp of the type (2^-7 or 2^-10 relative) plus accumulation order.
      const double ulp = dtype == DType::kF16 ? 0x1p-10 : 0x1p-7;
      EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], ulp, 1e-4, &why)) << why;
    }
  }
}

// The extern refuses element types it does not run (f32 operands with a bf16 product,
// mixed operands) with -2, never reading them as something else; on every CPU.
TEST(CpuGemmBF16Widened, TheCallRefusesOtherTypeCombinations) {
  const absl::Status available = CpuGemmAvailable();
  if (!available.ok()) GTEST_SKIP() << available.message();
  using GemmFn = int (*)(halide_buffer_t*, halide_buffer_t*, int32_t, int32_t, int32_t, int32_t,
                         uint64_t, halide_buffer_t*);
  auto gemm = reinterpret_cast<GemmFn>(CpuGemmF32Address());
  constexpr int kN = 4;
  std::vector<uint32_t> storage(3 * kN * kN, 0);
  halide_dimension_t dims[3][2];
  halide_buffer_t bufs[3] = {};
  auto make = [&](int i, halide_type_code_t code, int bits) {
    dims[i][0] = {0, kN, 1, 0};
    dims[i][1] = {0, kN, kN, 0};
    bufs[i].host = reinterpret_cast<uint8_t*>(storage.data() + i * kN * kN);
    bufs[i].type = halide_type_t(code, bits, 1);
    bufs[i].dimensions = 2;
    bufs[i].dim = dims[i];
  };
  struct Types {
    halide_type_code_t code;
    int bits;
  };
  const Types f32{halide_type_float, 32}, bf16{halide_type_bfloat, 16}, f16{halide_type_float, 16};
  // a, b and the product: f32 x f32 -> bf16, bf16 x f32 -> f32, f16 x f16 -> f32.
  const Types refused[3][3] = {{f32, f32, bf16}, {bf16, f32, f32}, {f16, f16, f32}};
  for (const auto& types : refused) {
    for (int i = 0; i < 3; ++i) make(i, types[i].code, types[i].bits);
    EXPECT_EQ(gemm(&bufs[0], &bufs[1], 0, 0, kN, 1, 0, &bufs[2]), -2);
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
