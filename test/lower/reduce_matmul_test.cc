// Reductions (Sum, Mean, Max, Min over several axis sets, with and without keep_dims),
// SumToShapeOf, ArgMax, MatMul and BatchMatMul with every transpose combination, compiled under
// every scheduler and compared with the reference kernels. Empty inputs check the identities (Sum
// 0, Mean NaN, Max -inf, Min +inf) and K = 0 products.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

constexpr Tolerance kExact{0, 0};

// One cluster, several outputs: the last axis (keep_dims), the first axis, every axis,
// and for rank 3 the outer two axes.
OpTestCase Reduction(std::string name, Tensor (*fn)(Tensor, std::vector<int>, bool), DType dtype,
                     double lo, double hi, Tolerance tol = {}) {
  return {name,
          [=](Case& c, const Shape& s) {
            Tensor x = c.Input(dtype, s, 61, lo, hi);
            c.outputs = {fn(x, {-1}, true), fn(x, {0}, false), fn(x, {}, false)};
            if (s.size() == 3) c.outputs.push_back(fn(x, {0, 1}, false));
          },
          {{1, 1}, {7, 3}, {0, 3}, {7, 0}},
          {{17, 33, 65}},
          tol};
}

OpTestCase ArgMaxCase(std::string name, DType dtype, double lo, double hi) {
  return {name,
          [=](Case& c, const Shape& s) {
            Tensor x = c.Input(dtype, s, 71, lo, hi);
            c.outputs = {ArgMax(x, -1)};
            if (s[0] > 0) c.outputs.push_back(ArgMax(x, 0));  // not over an empty axis
          },
          {{1, 1}, {7, 3}, {0, 3}},
          {{17, 33, 65}},
          kExact};
}

// SumToShapeOf (a broadcast's gradient summed back when the sizes are known): x summed
// to like shapes that keep every dim, set the first to 1, drop the first, are all 1s,
// and keep only the last; like's values are never read.
OpTestCase SumToShapeOfCase(std::string name, DType dtype, double lo, double hi, Tolerance tol) {
  return {name,
          [=](Case& c, const Shape& s) {
            Tensor x = c.Input(dtype, s, 91, lo, hi);
            Shape first_one = s;
            first_one[0] = 1;
            const std::vector<Shape> likes = {s, first_one, Shape(s.begin() + 1, s.end()),
                                              Shape(s.size(), 1), Shape{s.back()}};
            int seed = 92;
            for (const Shape& like : likes) {
              c.outputs.push_back(SumToShapeOf(x, c.Input(DType::kF32, like, seed++)));
            }
          },
          {{1, 1}, {7, 3}, {0, 3}, {7, 0}, {2, 3, 5}},
          {{17, 33, 65}},
          tol};
}

// Shapes are {M, K, N} (with batch dims in front for BatchMatMul); each cluster holds
// all four transpose combinations.
OpTestCase MatMulCase(std::string name, bool batched, DType dtype, Tolerance tol) {
  return {name,
          [=](Case& c, const Shape& s) {
            const size_t r = s.size();
            const Shape batch(s.begin(), s.end() - 3);
            auto shape = [&](int64_t rows, int64_t cols) {
              Shape out = batch;
              out.push_back(rows);
              out.push_back(cols);
              return out;
            };
            const int64_t m = s[r - 3], k = s[r - 2], n = s[r - 1];
            auto mm = batched ? BatchMatMul : MatMul;
            Tensor a = c.Input(dtype, shape(m, k), 81);
            Tensor b = c.Input(dtype, shape(k, n), 82);
            Tensor at = c.Input(dtype, shape(k, m), 83);
            Tensor bt = c.Input(dtype, shape(n, k), 84);
            c.outputs = {mm(a, b, false, false), mm(at, b, true, false), mm(a, bt, false, true),
                         mm(at, bt, true, true)};
          },
          batched ? std::vector<Shape>{{2, 1, 1, 1}, {3, 7, 3, 5}, {2, 3, 0, 4}, {2, 0, 3, 4}}
                  : std::vector<Shape>{{1, 1, 1}, {7, 3, 5}, {3, 0, 4}, {0, 3, 4}},
          batched ? std::vector<Shape>{{2, 17, 33, 65}}
                  : std::vector<Shape>{{17, 33, 65}, {64, 96, 80}},
          tol};
}

std::vector<OpTestCase> Cases() {
  const DType f32 = DType::kF32, f64 = DType::kF64, i32 = DType::kI32;
  return {
      Reduction("Sum", Sum, f32, -1, 1),
      Reduction("SumF64", Sum, f64, -1, 1, {1e-12, 1e-13}),
      Reduction("SumI32", Sum, i32, -100, 100, kExact),
      Reduction("Mean", Mean, f32, -1, 1),
      Reduction("Max", Max, f32, -1, 1, kExact),
      Reduction("MaxI32", Max, i32, -100, 100, kExact),
      Reduction("Min", Min, f32, -1, 1, kExact),
      Reduction("MinI32", Min, i32, -100, 100, kExact),
      // f64 bits shift by 63 in the decoding: LLVM 14's NVPTX backend once made such a
      // mask a 1-bit field (an H200's Min over negatives was the one nearest 0).
      Reduction("MaxF64", Max, f64, -2, 2, kExact),
      Reduction("MinF64", Min, f64, -2, 2, kExact),
      ArgMaxCase("ArgMax", f32, -1, 1),
      ArgMaxCase("ArgMaxI32Ties", i32, -2, 2),  // many ties: the first maximum wins
      SumToShapeOfCase("SumToShapeOf", f32, -1, 1, {}),
      SumToShapeOfCase("SumToShapeOfF64", f64, -1, 1, {1e-12, 1e-13}),
      SumToShapeOfCase("SumToShapeOfI32", i32, -100, 100, kExact),
      MatMulCase("MatMul", false, f32, {1e-4, 1e-5}),
      MatMulCase("MatMulI32", false, i32, kExact),
      MatMulCase("BatchMatMul", true, f32, {1e-4, 1e-5}),
  };
}

// The float cases in bf16 and f16: each op accumulates in f32 (or wider) and rounds
// once, so compiled and reference results are within one ulp of the 16-bit type.
std::vector<OpTestCase> Cases16() {
  std::vector<OpTestCase> cases;
  for (const auto& [f, x, ulp] :
       {std::tuple<DType, std::string, double>{DType::kBF16, "BF16", 0x1p-7},
        {DType::kF16, "F16", 0x1p-10}}) {
    const Tolerance tol{ulp, 1e-5};
    cases.push_back(Reduction("Sum" + x, Sum, f, -1, 1, tol));
    cases.push_back(Reduction("Mean" + x, Mean, f, -1, 1, tol));
    cases.push_back(Reduction("Max" + x, Max, f, -1, 1, kExact));
    cases.push_back(Reduction("Min" + x, Min, f, -1, 1, kExact));
    cases.push_back(ArgMaxCase("ArgMax" + x, f, -1, 1));
    cases.push_back(SumToShapeOfCase("SumToShapeOf" + x, f, -1, 1, tol));
    cases.push_back(MatMulCase("MatMul" + x, false, f, tol));
    cases.push_back(MatMulCase("BatchMatMul" + x, true, f, tol));
  }
  return cases;
}

class ReduceMatMulTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(ReduceMatMulTest, MatchesReference) {
  RunOpTestCase(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceMatMulTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

INSTANTIATE_TEST_SUITE_P(Ops16, ReduceMatMulTest,
                         ::testing::Combine(::testing::ValuesIn(Cases16()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// The same ops as CUDA kernels: compiled for CUDA and assembled with ptxas everywhere;
// run and compared with the reference only on a GPU (skipped without one).
class ReduceMatMulTestCuda : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(ReduceMatMulTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }

TEST_P(ReduceMatMulTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, ReduceMatMulTestCuda, ::testing::ValuesIn(Cases()), CaseName);
// bf16 and f16: what runs on CUDA where cuBLASLt refuses a GEMM or cuda_matmul=halide.
INSTANTIATE_TEST_SUITE_P(Ops16, ReduceMatMulTestCuda, ::testing::ValuesIn(Cases16()), CaseName);

// The same GPU schedules on opencl:0 (POCL on this machine), compared with the reference.
class ReduceMatMulTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};

TEST_P(ReduceMatMulTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ops, ReduceMatMulTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);
INSTANTIATE_TEST_SUITE_P(Ops16, ReduceMatMulTestOpenCL, ::testing::ValuesIn(Cases16()), CaseName);

// braze-fuzz seed 3500676 on jit:opencl: the gradient of a LayerNorm of a broadcast
// scalar behind a Relu and a Select. The GPU heuristic fused five row reductions into
// one output's kernel, each behind a condition (Halide skips stages a select does not
// need), so the kernel had 20 barriers, most inside `if`s; POCL's work-group compiler
// replicates the code after each conditional barrier and ran for over 30 minutes (4
// reductions: 33 s, 3: 2.6 s). On OpenCL an output's kernel now hosts at most two.
TEST(ReduceOpenCL, AKernelHostsAtMostTwoBlockReductions) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  Case c;
  Graph& g = *c.graph;
  Tensor x = c.Input(DType::kF32, {}, 458588556, -2, 2);
  Tensor scale = Const(g, HostTensor::RandomUniform(DType::kF32, {}, 57325, -2, 2));
  Tensor gamma = Const(g, HostTensor::RandomUniform(DType::kF32, {4}, 45453, -2, 2));
  Tensor beta = Const(g, HostTensor::RandomUniform(DType::kF32, {4}, 85507, -2, 2));
  Tensor other = Const(g, HostTensor::RandomUniform(DType::kF32, {}, 94751, -2, 2));
  Tensor b = BroadcastTo(Relu(Sum(x, {}, true) * scale), {4});
  Tensor y = Select(Greater(beta, x), Max(Slice(LayerNorm(b, gamma, beta), {1}, {3}), {0}), other);
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({b, beta, y}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  c.outputs = {b, y, (*grads)[0]};

  CompileOptions options;
  options.device = Device{Device::Kind::kOpenCL, 0};
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string text = (*kernel)->schedule_text();
  // Block reductions log "ACC: row, in OUT's kernel" or "ACC: combine in OUT's kernel"
  // (column reductions, a thread per output, take no barriers and are not counted).
  std::map<std::string, int> hosted;  // block reductions per hosting output
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(": row, in ");
    if (at != std::string::npos) {
      at += 10;
    } else if ((at = line.find(": combine in ")) != std::string::npos) {
      at += 13;
    } else {
      continue;
    }
    const size_t end = line.find("'s kernel", at);
    if (end != std::string::npos) ++hosted[line.substr(at, end - at)];
  }
  ASSERT_FALSE(hosted.empty()) << text;
  // Checked before running: a kernel with more would not finish compiling in the test.
  for (const auto& [name, n] : hosted) ASSERT_LE(n, 2) << name << "\n" << text;
  EXPECT_TRUE(CompileRunCompareOnDevice(c, {1e-4, 1e-5}, options.device, true));
}

// Float Max and Min reduce the values' bits (lower_reduce.cc): rows that mix the
// cases the decoding tells apart, in f32 and f64, as the reference gives them bit for
// bit: signed zeros in either order, negative rows (the Max is the smallest bits),
// NaNs of either sign among values of either sign, infinities, subnormals. Rows of 67
// and 256 and columns, as reductions of their own (one cluster, four outputs) and as
// row pipelines (one output reading the row's Max or Min: the safe default splits a
// row of 256 into lanes whose partial results combine in another order).
template <typename T>
HostTensor SpecialRows(int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T neg_nan = -nan;
  const T tiny = std::numeric_limits<T>::denorm_min();
  Bits ones = ~Bits{0};
  T all_ones_nan;  // the largest bit pattern: a negative NaN
  std::memcpy(&all_ones_nan, &ones, sizeof(T));
  struct Row {
    T base_lo, base_hi;                 // uniform values in [lo, hi] (both 0: a fill)
    std::vector<std::pair<int, T>> at;  // then these, at (position * 13 mod n)
  };
  const std::vector<Row> rows = {
      {T(-0.0), T(-0.0), {}},
      {T(-0.0), T(-0.0), {{7, T(0.0)}}},
      {T(0.0), T(0.0), {{3, T(-0.0)}}},
      {T(-5), T(-1), {{11, T(-0.0)}}},
      {T(-5), T(-1), {{2, nan}}},
      {T(1), T(5), {{9, neg_nan}}},
      {T(-5), T(-1), {{4, neg_nan}}},
      {T(-5), T(5), {{0, all_ones_nan}}},
      {-inf, -inf, {}},
      {inf, inf, {}},
      {-inf, -inf, {{5, inf}}},
      {T(-5), T(-1), {{1, -inf}, {6, inf}}},
      {T(0.0), T(0.0), {{1, tiny}, {2, -tiny}, {3, -tiny * 3}}},
      {T(-0.0), T(-0.0), {{8, -tiny}}},
      {T(-5), T(5), {{10, inf}, {12, neg_nan}}},
      {T(-1e30), T(1e30), {}},
  };
  const int64_t r = static_cast<int64_t>(rows.size());
  HostTensor t(sizeof(T) == 4 ? DType::kF32 : DType::kF64, {r, n});
  T* p = t.data<T>();
  std::mt19937 gen(static_cast<uint32_t>(n));
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < r; ++i) {
    const Row& row = rows[i];
    for (int64_t j = 0; j < n; ++j) {
      p[i * n + j] = row.base_lo == row.base_hi
                         ? row.base_lo
                         : static_cast<T>(row.base_lo + (row.base_hi - row.base_lo) * u(gen));
    }
    for (const auto& [pos, v] : row.at) p[i * n + (pos * 13) % n] = v;
  }
  return t;
}

// The reductions of the special rows: four outputs, or (row_pipeline) the row's Max or
// Min broadcast along the row, or a Softmax and a LogSoftmax of the rows (NaN, +-inf and
// all -inf rows: the row's Max and its sum of exps decide them).
enum class SpecialGraph { kFourOutputs, kRowMax, kRowMin, kSoftmaxes };

Case SpecialRowsCase(const HostTensor& t, SpecialGraph graph) {
  Case c;
  Tensor x = c.Input(t);
  switch (graph) {
    case SpecialGraph::kFourOutputs:
      c.outputs = {Max(x, {1}), Min(x, {1}), Max(x, {0}), Min(x, {0})};
      break;
    case SpecialGraph::kRowMax:
      c.outputs = {BroadcastTo(Max(x, {1}, true), t.shape())};
      break;
    case SpecialGraph::kRowMin:
      c.outputs = {BroadcastTo(Min(x, {1}, true), t.shape())};
      break;
    case SpecialGraph::kSoftmaxes:
      c.outputs = {Softmax(x), LogSoftmax(x)};
      break;
  }
  return c;
}

template <typename T>
void CheckSpecialRows(Scheduler scheduler) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (int64_t n : {67, 256}) {
    const HostTensor t = SpecialRows<T>(n);
    for (SpecialGraph graph :
         {SpecialGraph::kFourOutputs, SpecialGraph::kRowMax, SpecialGraph::kRowMin}) {
      const Case c = SpecialRowsCase(t, graph);
      const std::string what = absl::StrCat(SchedulerName(scheduler), " ", sizeof(T) * 8,
                                            "-bit n=", n, " graph ", static_cast<int>(graph));
      auto want = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(want.ok()) << want.status();
      CompileOptions options;
      options.scheduler = scheduler;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      if (scheduler == Scheduler::kSafeDefault && graph != SpecialGraph::kFourOutputs && n == 256) {
        // The lanes' partial results are what a new order of combining could get wrong.
        EXPECT_NE((*kernel)->schedule_text().find(".rfactor"), std::string::npos)
            << what << "\n"
            << (*kernel)->schedule_text();
      }
      auto got = RunKernel(**kernel, c.values);
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t o = 0; o < c.outputs.size(); ++o) {
        for (int64_t i = 0; i < (*want)[o].num_elements(); ++i) {
          const T g = (*got)[o].data<T>()[i], w = (*want)[o].data<T>()[i];
          Bits gb, wb;
          std::memcpy(&gb, &g, sizeof(T));
          std::memcpy(&wb, &w, sizeof(T));
          if (std::isnan(w)) {
            EXPECT_TRUE(std::isnan(g)) << what << " output " << o << " element " << i << ": " << g;
          } else {
            EXPECT_EQ(gb, wb) << what << " output " << o << " element " << i << ": " << g << " vs "
                              << w;
          }
        }
      }
    }
  }
}

TEST(FloatMaxMin, RowsOfSignedZerosNansInfinitiesAndSubnormalsAreTheReferences) {
  for (Scheduler s : AllSchedulers()) {
    CheckSpecialRows<float>(s);
    CheckSpecialRows<double>(s);
  }
}

// The special rows of length n on a device, with the GPU schedules' block reductions:
// values, NaNs and infinities as the reference's (a zero's sign is not compared), exact
// for Max and Min, within float tolerances for the softmaxes (with `softmaxes`).
void CheckSpecialRowsOnDevice(int64_t n, const Device& device, bool softmaxes) {
  for (const HostTensor& t : {SpecialRows<float>(n), SpecialRows<double>(n)}) {
    for (SpecialGraph graph : {SpecialGraph::kFourOutputs, SpecialGraph::kRowMax,
                               SpecialGraph::kRowMin, SpecialGraph::kSoftmaxes}) {
      if (graph == SpecialGraph::kSoftmaxes && !softmaxes) continue;
      const Tolerance tol = graph == SpecialGraph::kSoftmaxes ? Tolerance{} : kExact;
      EXPECT_TRUE(CompileRunCompareOnDevice(SpecialRowsCase(t, graph), tol, device, true))
          << DTypeName(t.dtype()) << " n=" << n << " graph " << static_cast<int>(graph);
    }
  }
}

// The same rows on opencl:0 (POCL here; the softmaxes at one length: POCL compiles
// slowly).
TEST(FloatMaxMin, RowsOfSpecialsOnOpenCL) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  for (int64_t n : {67, 256})
    CheckSpecialRowsOnDevice(n, Device{Device::Kind::kOpenCL, 0}, n == 67);
}

// And on cuda:0, where rows up to kWarpRow take a warp each and float Max/Min's 32-bit
// accumulators combine by warp shuffles (schedule/gpu_reduce.cc, Cooperative): the f32
// rows shuffle, the f64 ones combine in shared memory. Rows of 1000 split over the lanes.
// Skipped without a CUDA GPU.
TEST(FloatMaxMin, RowsOfSpecialsOnCuda) {
  if (absl::Status s = CheckCudaAvailable(); !s.ok()) {
    GTEST_SKIP() << "needs a CUDA GPU, nothing run or compared: " << s.message();
  }
  for (int64_t n : {67, 1000}) CheckSpecialRowsOnDevice(n, Device{Device::Kind::kCuda, 0}, true);
}

// The online softmax of GPU lowerings (lower/online_softmax.h): a softmax's Max and Sum of
// exps as one pass. On the special rows: the Max's value bit for bit (a zero's sign too,
// which the pass decides from the bits' maximum), the sum NaN exactly where the
// reference's is (a NaN, two +inf, a row of -inf), Softmax and LogSoftmax within float
// tolerances. Rows of 3 (one lane), 67 and 1031 (lanes of unequal length); the
// composites at more lengths (1 to 8192) are RowLengths/CompositeTestOpenCL.
Case OnlineSoftmaxCase(const HostTensor& t) {
  Case c;
  Tensor x = c.Input(t);
  Tensor m = Max(x, {1}, true);
  Tensor e = Exp(x - m);
  Tensor s = Sum(e, {1}, true);
  c.outputs = {m, s, e * Reciprocal(s), (x - m) - Log(s)};
  return c;
}

void CheckOnlineSoftmax(const Case& c, const Device& device, const std::string& what,
                        Scheduler plan = Scheduler::kGpuFused) {
  auto want = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<HostTensor> got;
  std::string schedule;
  ASSERT_TRUE(RunOnDevice(c, device, &got, &schedule, true, plan)) << what;
  EXPECT_NE(schedule.find("_online"), std::string::npos) << what << ": not one pass\n" << schedule;
  for (int64_t i = 0; i < (*want)[0].num_elements(); ++i) {
    const float g = got[0].data<float>()[i], w = (*want)[0].data<float>()[i];
    uint32_t gb, wb;
    std::memcpy(&gb, &g, 4);
    std::memcpy(&wb, &w, 4);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << " max of row " << i << ": " << g;
    } else {
      EXPECT_EQ(gb, wb) << what << " max of row " << i << ": " << g << " vs " << w;
    }
  }
  for (size_t o = 1; o < got.size(); ++o) {
    std::string why;
    EXPECT_TRUE(AllClose(got[o], (*want)[o], 1e-4, 1e-5, &why))
        << what << " output " << o << ": " << why << "\n"
        << schedule;
  }
}

// Rows whose max grows at every element along each lane (the most rescales), in small
// and large steps, falling rows and random ones, as Softmax and LogSoftmax.
HostTensor RisingRows(int64_t n) {
  HostTensor t(DType::kF32, {4, n});
  float* p = t.data<float>();
  std::mt19937 gen(static_cast<uint32_t>(n));
  std::uniform_real_distribution<float> u(-3, 3);
  for (int64_t j = 0; j < n; ++j) {
    p[j] = -2.0f + 1e-3f * static_cast<float>(j);
    p[n + j] = 0.5f * static_cast<float>(j) - 40.0f;
    p[2 * n + j] = 2.0f - 1e-3f * static_cast<float>(j);
    p[3 * n + j] = u(gen);
  }
  return t;
}

void CheckOnlineSoftmaxRows(const Device& device) {
  for (int64_t n : {3, 67, 1031}) {
    CheckOnlineSoftmax(OnlineSoftmaxCase(SpecialRows<float>(n)), device,
                       absl::StrCat("special rows of ", n));
  }
  // 4093: nearly the longest row the pass takes (kOnlineMaxRow), its largest error.
  for (int64_t n : {1024, 4093}) {
    CheckOnlineSoftmax(OnlineSoftmaxCase(RisingRows(n)), device, absl::StrCat("rows of ", n));
  }
  // The other plans: the combines in kernels of their own, each with its copy of the
  // pass (separate), and a thread per row, serial (serial).
  for (Scheduler plan : {Scheduler::kGpuSeparate, Scheduler::kGpuSerial}) {
    CheckOnlineSoftmax(OnlineSoftmaxCase(SpecialRows<float>(67)), device,
                       absl::StrCat(SchedulerName(plan), ", special rows of 67"), plan);
  }
}

TEST(OnlineSoftmax, SpecialAndRisingRowsOnOpenCL) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  CheckOnlineSoftmaxRows(Device{Device::Kind::kOpenCL, 0});
}

TEST(OnlineSoftmax, SpecialAndRisingRowsOnCuda) {
  if (absl::Status s = CheckCudaAvailable(); !s.ok()) {
    GTEST_SKIP() << "needs a CUDA GPU, nothing run or compared: " << s.message();
  }
  CheckOnlineSoftmaxRows(Device{Device::Kind::kCuda, 0});
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
