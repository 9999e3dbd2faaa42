// The CPU GEMM library inside Halide pipelines (device/cpu_gemm.h): which matmuls call
// it, and that every one of them matches the reference kernels: odd and prime extents,
// transposes, batches, computed and constant operands, the ops fused around it, and the
// same cluster with the library turned off. Skipped (with the reason) where oneDNN is
// not installed; CI installs it (tools/setup.sh).
#include "device/cpu_gemm.h"

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "braze/ops.h"
#include "device/thread_pool.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

bool CallsLibrary(const CompiledKernel& kernel) {
  return absl::StrContains(kernel.schedule_text(), kCpuGemmF32Symbol) ||
         absl::StrContains(kernel.schedule_text(), kCpuGemmBiasF32Symbol);
}

// The call with the bias (and maybe ReLU) epilogue.
bool CallsWithBias(const CompiledKernel& kernel) {
  return absl::StrContains(kernel.schedule_text(), kCpuGemmBiasF32Symbol);
}

// `c` compiled by the safe default with the library: that it calls the library, whether
// its call takes the bias (and the ReLU: the call's Func is then named for it), and its
// outputs against the reference kernels.
void CheckEpilogue(const Case& c, bool expect_bias, bool expect_relu = false) {
  auto kernel = CompileCluster(SpecOf(c), CompileOptions{});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(CallsLibrary(**kernel)) << (*kernel)->schedule_text();
  EXPECT_EQ(CallsWithBias(**kernel), expect_bias) << (*kernel)->schedule_text();
  EXPECT_EQ(absl::StrContains((*kernel)->schedule_text(), "_bias_relu"), expect_relu)
      << (*kernel)->schedule_text();
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[i], (*expected)[i], 1e-4, 1e-4, &why)) << "output " << i << why;
  }
}

// Compiles `c` with `options` (the safe default unless they say otherwise), checks
// whether it called the library, and compares its outputs with the reference kernels.
void CheckCompiled(const Case& c, const CompileOptions& options, bool expect_library,
                   double rtol = 1e-4, double atol = 1e-4) {
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(CallsLibrary(**kernel), expect_library) << (*kernel)->schedule_text();
  auto actual = RunKernel(**kernel, c.values);
  ASSERT_TRUE(actual.ok()) << actual.status();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[i], (*expected)[i], rtol, atol, &why)) << "output " << i << why;
  }
}

// The safe default, the library on unless `library` is false.
void CheckCase(const Case& c, bool expect_library, bool library = true) {
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  options.cpu_gemm_library = library;
  CheckCompiled(c, options, expect_library);
}

// Every f32 matmul on the library, however small (what braze-fuzz runs under).
CompileOptions MinimumOfOne() {
  CompileOptions options;
  options.cpu_gemm_min_work = 1;
  return options;
}

class CpuGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status available = CpuGemmAvailable();
    if (!available.ok()) GTEST_SKIP() << available.message();
  }
};

TEST_F(CpuGemmTest, PrimeExtentsEveryTransposeMatchTheReference) {
  // 131 x 127 x 257: 4.3M multiply-adds, over kLibraryGemmMinWork.
  const int64_t m = 131, n = 127, k = 257;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      Case c;
      Tensor a = c.Input(DType::kF32, ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = c.Input(DType::kF32, tb ? Shape{n, k} : Shape{k, n}, 2);
      c.outputs = {MatMul(a, b, ta, tb)};
      CheckCase(c, /*expect_library=*/true);
    }
  }
}

TEST_F(CpuGemmTest, FusedWithComputedOperandsBiasReluAndAConstant) {
  // relu(exp(x) @ W + bias) with W a constant and the matmul also an output: the exp is
  // a stored operand, the constant a buffer of its own, the epilogue fused after it.
  Case c;
  Tensor x = c.Input(DType::kF32, {97, 211}, 3);
  Tensor bias = c.Input(DType::kF32, {113}, 4);
  Tensor w = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {211, 113}, 5));
  Tensor mm = MatMul(Exp(x), w);
  c.outputs = {Relu(mm + bias), mm};
  CheckCase(c, /*expect_library=*/true);
}

TEST_F(CpuGemmTest, AConsumerReadingPartOfTheProduct) {
  // Only rows 5..104 and columns 3..119 are read: the call computes that region, at
  // offsets into its operands.
  Case c;
  Tensor a = c.Input(DType::kF32, {131, 257}, 17);
  Tensor b = c.Input(DType::kF32, {257, 127}, 18);
  c.outputs = {Slice(MatMul(Sigmoid(a), b), {5, 3}, {100, 117})};
  CheckCase(c, /*expect_library=*/true);
}

TEST_F(CpuGemmTest, BatchMatMulOddBatch) {
  Case c;
  Tensor a = c.Input(DType::kF32, {3, 67, 131}, 6);
  Tensor b = c.Input(DType::kF32, {3, 97, 131}, 7);
  c.outputs = {Sum(BatchMatMul(a, b, false, true), {2})};
  CheckCase(c, /*expect_library=*/true);
}

TEST_F(CpuGemmTest, SmallF64AndTurnedOffStayHalideLoops) {
  {
    Case c;  // 16^3 = 4096 multiply-adds: the library's fixed cost would dominate
    Tensor a = c.Input(DType::kF32, {16, 16}, 8);
    c.outputs = {MatMul(a, a)};
    CheckCase(c, /*expect_library=*/false);
  }
  {
    Case c;  // f64: oneDNN has no double GEMM
    Tensor a = c.Input(DType::kF64, {131, 257}, 9);
    Tensor b = c.Input(DType::kF64, {257, 127}, 10);
    c.outputs = {MatMul(a, b)};
    CheckCase(c, /*expect_library=*/false);
  }
  {
    Case c;
    Tensor a = c.Input(DType::kF32, {131, 257}, 11);
    Tensor b = c.Input(DType::kF32, {257, 127}, 12);
    c.outputs = {MatMul(a, b)};
    CheckCase(c, /*expect_library=*/false, /*library=*/false);
  }
}

TEST_F(CpuGemmTest, AutoschedulersPlanTheirOwnLoops) {
  Case c;
  Tensor a = c.Input(DType::kF32, {131, 257}, 13);
  Tensor b = c.Input(DType::kF32, {257, 127}, 14);
  c.outputs = {Tanh(MatMul(a, b))};
  CompileOptions options;
  options.scheduler = Scheduler::kMullapudi2016;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_FALSE(CallsLibrary(**kernel));
}

TEST_F(CpuGemmTest, NewInputsEachRunAndOneThread) {
  Case c;
  Tensor a = c.Input(DType::kF32, {256, 300}, 15);
  Tensor b = c.Input(DType::kF32, {300, 129}, 16);
  c.outputs = {MatMul(a, b) * 2.0f};
  CompileOptions options;
  options.num_threads = 1;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(CallsLibrary(**kernel));
  for (uint64_t seed = 20; seed < 23; ++seed) {
    std::vector<HostTensor> values = {HostTensor::RandomUniform(DType::kF32, {256, 300}, seed),
                                      HostTensor::RandomUniform(DType::kF32, {300, 129}, seed + 9)};
    auto actual = RunKernel(**kernel, values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    auto expected = ReferenceOutputs(SpecOf(c), values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4)) << seed;
  }
}

// A GEMM of one matrix on several threads is cut into one part per thread, each a
// oneDNN call on one OpenMP thread, run as a loop of Braze's pool (docs/CPU_GEMM.md,
// "One pool"): by rows when each part gets 16 rows, else by columns in blocks of 16. Three
// parts (more than this machine's cores: the pool then runs some parts one after
// another) of prime extents, every transpose, with and without the bias and ReLU
// epilogue, and a consumer reading part of the product (a region that starts past row
// and column 0), against the reference kernels.
TEST_F(CpuGemmTest, OneMatrixIsCutAmongThePoolsThreadsByRowsOrColumns) {
  struct Sizes {
    int64_t m, n, k;
    const char* cut;
  };
  for (const Sizes& s : {Sizes{131, 127, 257, "rows"}, Sizes{7, 257, 509, "columns"}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (int epilogue = 0; epilogue < 3; ++epilogue) {
          SCOPED_TRACE(absl::StrCat(s.cut, " ", ta, tb, " epilogue ", epilogue));
          Case c;
          Tensor a = c.Input(DType::kF32, ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, 1);
          Tensor b = c.Input(DType::kF32, tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, 2);
          Tensor y = MatMul(a, b, ta, tb);
          if (epilogue > 0) y = y + c.Input(DType::kF32, {s.n}, 3);
          if (epilogue > 1) y = Relu(y);
          if (epilogue == 0) y = Slice(y, {1, 3}, {s.m - 2, s.n - 5});
          c.outputs = {y};
          CompileOptions options = MinimumOfOne();  // 7 rows: Halide's loops by default
          options.num_threads = 3;
          const int64_t splits = CpuGemmSplitCalls();
          CheckCompiled(c, options, /*expect_library=*/true);
          EXPECT_EQ(CpuGemmSplitCalls() - splits, 1);
        }
      }
    }
  }
}

// One thread, or a GEMM under kSplitMinWork multiply-adds: one call, nothing cut.
TEST_F(CpuGemmTest, OneThreadOrASmallGemmIsNotCut) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    Case c;
    const int64_t m = threads == 1 ? 131 : 40, n = threads == 1 ? 127 : 60, k = 100;
    Tensor a = c.Input(DType::kF32, {m, k}, 1);
    Tensor b = c.Input(DType::kF32, {k, n}, 2);
    c.outputs = {MatMul(a, b)};
    CompileOptions options = MinimumOfOne();
    options.num_threads = threads;
    const int64_t splits = CpuGemmSplitCalls();
    CheckCompiled(c, options, /*expect_library=*/true);
    EXPECT_EQ(CpuGemmSplitCalls() - splits, 0);
  }
}

// cpu_gemm_min_work = 1 (what braze-fuzz runs under): even 1 x 1 x 1 calls the library,
// with a size-1 dim's arbitrary stride and every transpose.
TEST_F(CpuGemmTest, TinyMatmulsWithAMinimumOfOne) {
  for (const Shape& s : {Shape{1, 1}, Shape{1, 3}, Shape{5, 1}, Shape{2, 1, 3}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::PrintToString(s) + std::to_string(ta) + std::to_string(tb));
        Case c;
        Tensor a = c.Input(DType::kF32, s, 30);
        const size_t r = s.size();
        const int64_t k = ta ? s[r - 2] : s[r - 1];
        Shape bs(s.begin(), s.end() - 2);
        bs.push_back(tb ? 2 : k);
        bs.push_back(tb ? k : 2);
        Tensor b = c.Input(DType::kF32, bs, 31);
        c.outputs = {r == 3 ? BatchMatMul(a, b, ta, tb) : MatMul(a, b, ta, tb)};
        CheckCompiled(c, MinimumOfOne(), /*expect_library=*/true, 1e-5, 1e-5);
      }
    }
  }
}

// One library call reading another's product twice (a and b the same Func), of which
// only a few columns are read: the inner product is still realized whole (bounded), so
// the outer call reads no more than its buffer holds.
TEST_F(CpuGemmTest, AProductReadTwiceByAnotherCallIsRealizedWhole) {
  Case c;
  Tensor p = c.Input(DType::kF32, {37, 37}, 40);
  Tensor q = c.Input(DType::kF32, {37, 37}, 41);
  Tensor g = MatMul(p, q);
  c.outputs = {Slice(MatMul(g, g), {0, 0}, {37, 5})};
  CheckCompiled(c, MinimumOfOne(), /*expect_library=*/true, 1e-4, 1e-3);
}

// The primitive of one configuration is cached for the process and used by whichever
// thread runs a kernel: two kernels of the same shape run at once on two threads, many
// times (each primitive has its own scratchpad, so no thread-local state is shared).
TEST_F(CpuGemmTest, ConcurrentRunsOfOneConfigurationOnTwoThreads) {
  std::vector<Case> cases(2);
  std::vector<std::unique_ptr<CompiledKernel>> kernels;
  for (int i = 0; i < 2; ++i) {
    Tensor a = cases[i].Input(DType::kF32, {131, 257}, 50 + i);
    Tensor b = cases[i].Input(DType::kF32, {257, 127}, 60 + i);
    cases[i].outputs = {MatMul(a, b) * (1.0 + i)};
    auto kernel = CompileCluster(SpecOf(cases[i]), CompileOptions{});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    ASSERT_TRUE(CallsLibrary(**kernel));
    kernels.push_back(*std::move(kernel));
  }
  std::vector<int> ok(2, 1);  // not vector<bool>: its bits share a word between threads
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto expected = ReferenceOutputs(SpecOf(cases[i]), cases[i].values);
      for (int run = 0; run < 20 && ok[i]; ++run) {
        auto actual = RunKernel(*kernels[i], cases[i].values);
        ok[i] = expected.ok() && actual.ok() && AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(ok[0]);
  EXPECT_TRUE(ok[1]);
}

// Relu(MatMul(a, b) + bias[n]) is one call: oneDNN adds the bias and applies the ReLU
// (gemm_epilogue.h). Every transpose, the bias on either side of the Add, with and
// without the ReLU, prime extents.
TEST_F(CpuGemmTest, BiasAndReluGoIntoTheCall) {
  const int64_t m = 131, n = 127, k = 257;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool relu : {false, true}) {
        for (bool bias_first : {false, true}) {
          SCOPED_TRACE(absl::StrCat(ta, tb, relu, bias_first));
          Case c;
          Tensor bias = c.Input(DType::kF32, {n}, 3);
          Tensor a = c.Input(DType::kF32, ta ? Shape{k, m} : Shape{m, k}, 1);
          Tensor b = c.Input(DType::kF32, tb ? Shape{n, k} : Shape{k, n}, 2);
          Tensor mm = MatMul(a, b, ta, tb);
          Tensor y = bias_first ? bias + mm : mm + bias;
          c.outputs = {relu ? Relu(y) : y};
          CheckEpilogue(c, /*expect_bias=*/true, /*expect_relu=*/relu);
        }
      }
    }
  }
}

// The ReLU keeps NaN and makes every negative a zero, -inf included, as braze::Relu does
// (oneDNN's own ReLU post-op makes NaN a 0: onednn_matmul.cc). NaN and infinities come from
// the operands (whole rows) and from the bias (whole columns).
TEST_F(CpuGemmTest, TheFoldedReluKeepsNaNAndZeroesNegativeInfinity) {
  const int64_t m = 37, n = 53, k = 1201;  // m * n * k over the library's minimum, 2^21
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Case c;
  HostTensor av = HostTensor::RandomUniform(DType::kF32, {m, k}, 7);
  HostTensor bv = HostTensor::RandomUniform(DType::kF32, {k, n}, 8, 0.5, 1.0);  // positive
  HostTensor biasv = HostTensor::RandomUniform(DType::kF32, {n}, 9);
  av.data<float>()[0] = nan;           // row 0: NaN
  av.data<float>()[1 * k + 4] = inf;   // row 1: +inf
  av.data<float>()[2 * k + 9] = -inf;  // row 2: -inf, 0 after the ReLU
  const float specials[] = {nan, inf, -inf, -0.0f, 1e-40f, -1e-40f, 3e38f, -3e38f};
  for (int i = 0; i < 8; ++i) biasv.data<float>()[5 * i + 1] = specials[i];
  Tensor a = c.Input(av), b = c.Input(bv), bias = c.Input(biasv);
  c.outputs = {Relu(MatMul(a, b) + bias)};
  CheckEpilogue(c, /*expect_bias=*/true, /*expect_relu=*/true);
}

// Where oneDNN's post-ops are not confirmed, the call applies the ReLU itself: special
// values, a batch, and a consumer reading part of the result.
// Turns the ReLU post-ops off for its scope (on again however the test ends).
class NoReluPostOps {
 public:
  NoReluPostOps() { AllowCpuGemmReluPostOpsForTesting(false); }
  ~NoReluPostOps() { AllowCpuGemmReluPostOpsForTesting(true); }
  NoReluPostOps(const NoReluPostOps&) = delete;
  NoReluPostOps& operator=(const NoReluPostOps&) = delete;
};

TEST_F(CpuGemmTest, TheCallsOwnReluLoopWhereThePostOpsAreNotUsed) {
  NoReluPostOps off;
  const int64_t m = 41, n = 59, k = 1031;  // shapes of their own: new configurations
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Case c;
  HostTensor av = HostTensor::RandomUniform(DType::kF32, {2, m, k}, 17);
  HostTensor biasv = HostTensor::RandomUniform(DType::kF32, {n}, 19);
  av.data<float>()[3] = nan;
  av.data<float>()[m * k + 5 * k] = -inf;
  biasv.data<float>()[2] = -inf;
  biasv.data<float>()[7] = nan;
  Tensor a = c.Input(av);
  Tensor b = c.Input(DType::kF32, {2, k, n}, 18);
  Tensor bias = c.Input(biasv);
  c.outputs = {Slice(Relu(BatchMatMul(a, b) + bias), {0, 0, 0}, {2, m, n - 3})};
  CheckEpilogue(c, /*expect_bias=*/true, /*expect_relu=*/true);
}

// A cut by rows with a constant b (packed before the parts run, each reading the packed
// copy, at most once per layout), the bias with NaN and -inf in it, and the ReLU by
// oneDNN's post-ops or by each part's own loop over its rows, either transpose of b.
TEST_F(CpuGemmTest, ACutByRowsReadsAConstantBAndAppliesTheEpiloguePerPart) {
  const int64_t m = 131, n = 127, k = 257;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool post_ops : {true, false}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(absl::StrCat("post-ops ", post_ops, " tb ", tb));
      AllowCpuGemmReluPostOpsForTesting(post_ops);
      Case c;
      HostTensor biasv = HostTensor::RandomUniform(DType::kF32, {n}, 63);
      biasv.data<float>()[4] = nan;
      biasv.data<float>()[n - 2] = -inf;
      Tensor a = c.Input(DType::kF32, {m, k}, 61);
      Tensor w =
          Const(*c.graph, HostTensor::RandomUniform(DType::kF32, tb ? Shape{n, k} : Shape{k, n},
                                                    62 + 2 * tb + post_ops));
      c.outputs = {Relu(MatMul(a, w, false, tb) + c.Input(biasv))};
      CompileOptions options;
      options.num_threads = 3;
      const int64_t splits = CpuGemmSplitCalls(), packs = CpuGemmWeightPacks();
      CheckCompiled(c, options, /*expect_library=*/true);
      EXPECT_EQ(CpuGemmSplitCalls() - splits, 1);
      EXPECT_LE(CpuGemmWeightPacks() - packs, 1) << "b packed once, not per part";
    }
  }
  AllowCpuGemmReluPostOpsForTesting(true);
}

// A batch that collapses into one stride per operand is cut among the pool's threads by
// whole matrices when each part gets as many (or there are four per part or more): six
// on three threads, and three (a part of one matrix is a 2-D primitive), every
// transpose, the bias and the ReLU by post-ops or by each part's own loop over its
// matrices. Five on three stay one batched call on the team.
TEST_F(CpuGemmTest, ABatchIsCutAmongThePoolsThreadsByWholeMatrices) {
  const int64_t m = 37, n = 41, k = 67;
  for (int64_t batch : {6, 3, 5}) {
    for (bool post_ops : {true, false}) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          SCOPED_TRACE(absl::StrCat("batch ", batch, " post-ops ", post_ops, " ", ta, tb));
          AllowCpuGemmReluPostOpsForTesting(post_ops);
          Case c;
          Tensor a = c.Input(DType::kF32, ta ? Shape{batch, k, m} : Shape{batch, m, k}, 81);
          Tensor b = c.Input(DType::kF32, tb ? Shape{batch, n, k} : Shape{batch, k, n}, 82);
          c.outputs = {Relu(BatchMatMul(a, b, ta, tb) + c.Input(DType::kF32, {n}, 83))};
          CompileOptions options;
          options.num_threads = 3;
          const int64_t splits = CpuGemmSplitCalls(), batched = CpuGemmBatchedCalls();
          CheckCompiled(c, options, /*expect_library=*/true);
          EXPECT_EQ(CpuGemmSplitCalls() - splits, batch == 5 ? 0 : 1);
          EXPECT_EQ(CpuGemmBatchedCalls() - batched, 1);
        }
      }
    }
  }
  AllowCpuGemmReluPostOpsForTesting(true);
}

// A task of the pool's that holds it (and its worker) until `release` is set; `started`
// counts the tasks that began.
struct PoolHold {
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
};

int HoldThePool(void*, int, uint8_t* closure) {
  PoolHold& hold = *reinterpret_cast<PoolHold*>(closure);
  hold.started.fetch_add(1);
  while (!hold.release.load()) std::this_thread::yield();
  return 0;
}

// While another thread's loop has the pool, a call chosen for the cut runs uncut on the
// kernel's OpenMP threads, not as its parts one after another on the caller (up to a
// part count times slower), and still matches the reference.
TEST_F(CpuGemmTest, ACallChosenForTheCutRunsUncutWhileThePoolIsBusy) {
  Case c;
  Tensor a = c.Input(DType::kF32, {131, 257}, 71);
  Tensor b = c.Input(DType::kF32, {257, 127}, 72);
  c.outputs = {MatMul(a, b)};
  CompileOptions options;
  options.num_threads = 2;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_TRUE(CallsLibrary(**kernel)) << (*kernel)->schedule_text();
  auto expected = ReferenceOutputs(SpecOf(c), c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(RunKernel(**kernel, c.values).ok());  // the pool exists after a run
  if (device::GetThreadPoolStats().workers == 0) GTEST_SKIP() << "a pool of one thread";
  PoolHold hold;
  std::thread holder(
      [&] { device::ParallelFor(nullptr, HoldThePool, 0, 2, reinterpret_cast<uint8_t*>(&hold)); });
  while (hold.started.load() == 0) std::this_thread::yield();
  const int64_t splits = CpuGemmSplitCalls(), uncut = CpuGemmNotCutCalls();
  auto actual = RunKernel(**kernel, c.values);
  hold.release.store(true);
  holder.join();
  ASSERT_TRUE(actual.ok()) << actual.status();
  std::string why;
  EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) << why;
  EXPECT_EQ(CpuGemmSplitCalls() - splits, 0);
  EXPECT_EQ(CpuGemmNotCutCalls() - uncut, 1);
}

// A bias equal everywhere has no buffer of its own until the call needs one: a
// one-element Const (braze-fuzz seed 1200509 crashed in the schedule on it) and a
// broadcast scalar.
TEST_F(CpuGemmTest, ABiasEqualEverywhereGoesIntoTheCall) {
  for (int64_t n : {1, 29}) {
    SCOPED_TRACE(n);
    Case c;
    Tensor a = c.Input(DType::kF32, {2, 13}, 1);
    Tensor w = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {13, n}, 2));
    Tensor one = Const(*c.graph, HostTensor::RandomUniform(DType::kF32, {1}, 3));
    Tensor bias = n == 1 ? one : BroadcastTo(ScalarConst(*c.graph, -0.25), {n});
    c.outputs = {Relu(MatMul(a, w) + bias)};
    auto kernel = CompileCluster(SpecOf(c), MinimumOfOne());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_TRUE(CallsWithBias(**kernel)) << (*kernel)->schedule_text();
    auto actual = RunKernel(**kernel, c.values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-5, 1e-5));
  }
}

// BatchMatMul with a bias: one call per batch index, the same bias for each.
TEST_F(CpuGemmTest, BatchMatMulWithBiasAndRelu) {
  Case c;
  Tensor a = c.Input(DType::kF32, {3, 67, 131}, 6);
  Tensor b = c.Input(DType::kF32, {3, 97, 131}, 7);
  Tensor bias = c.Input(DType::kF32, {97}, 8);
  c.outputs = {Relu(BatchMatMul(a, b, false, true) + bias)};
  CheckEpilogue(c, /*expect_bias=*/true, /*expect_relu=*/true);
}

// Where the product or the sum is read by anything else, or the bias is not a row
// vector lowered before the matmul, the Add (or the ReLU) stays an op of the pipeline,
// and the results are the same.
TEST_F(CpuGemmTest, EpiloguesReadElsewhereStayOps) {
  const int64_t m = 131, n = 127, k = 257;
  // `outputs` builds the case's outputs from its inputs a [m, k], b [k, n], bias [n].
  auto check =
      [&](const char* what, bool expect_bias, bool expect_relu,
          const std::function<std::vector<Tensor>(Case&, Tensor, Tensor, Tensor)>& outputs) {
        SCOPED_TRACE(what);
        Case c;
        Tensor bias = c.Input(DType::kF32, {n}, 3);
        Tensor a = c.Input(DType::kF32, {m, k}, 1);
        Tensor b = c.Input(DType::kF32, {k, n}, 2);
        c.outputs = outputs(c, a, b, bias);
        CheckEpilogue(c, expect_bias, expect_relu);
      };
  check("the sum is also an output: the bias goes in, the ReLU stays", true, false,
        [](Case&, Tensor a, Tensor b, Tensor bias) {
          Tensor y = MatMul(a, b) + bias;
          return std::vector<Tensor>{Relu(y), y};
        });
  check("the sum is read twice", true, false, [](Case&, Tensor a, Tensor b, Tensor bias) {
    Tensor y = MatMul(a, b) + bias;
    return std::vector<Tensor>{Relu(y) * y};
  });
  check("the product is read twice", false, false, [](Case&, Tensor a, Tensor b, Tensor bias) {
    Tensor mm = MatMul(a, b);
    return std::vector<Tensor>{Relu(mm + bias) - mm};
  });
  check("the product is an output", false, false, [](Case&, Tensor a, Tensor b, Tensor bias) {
    Tensor mm = MatMul(a, b);
    return std::vector<Tensor>{Relu(mm + bias), mm};
  });
  check("a bias computed after the matmul", false, false,
        [](Case&, Tensor a, Tensor b, Tensor bias) {
          Tensor mm = MatMul(a, b);
          return std::vector<Tensor>{Relu(mm + Exp(bias))};
        });
  check("a computed bias lowered before it", true, true,
        [](Case&, Tensor a, Tensor b, Tensor bias) {
          Tensor e = Exp(bias);
          return std::vector<Tensor>{Relu(MatMul(a, b) + e)};
        });
  check("a [1, n] bias, a scalar, a matrix", false, false,
        [&](Case& c, Tensor a, Tensor b, Tensor) {
          Tensor row = c.Input(DType::kF32, {1, n}, 4);
          Tensor full = c.Input(DType::kF32, {m, n}, 5);
          return std::vector<Tensor>{Relu(MatMul(a, b) + row), MatMul(a, b) + 0.5f,
                                     MatMul(a, b) + full};
        });
}

// Compiled kernels with constant weights (packed once, device/cpu_gemm.cc) run at once
// on six threads, a kernel each (a kernel is thread-compatible: one launch at a time):
// three kernels of one constant share its packed copy, two of another, and one has a
// constant of its own with the bias and ReLU epilogue. Every result matches the
// reference kernels on signed inputs, and each distinct constant is packed exactly once
// (the packing of a configuration is serialized by its primitive;
// test/device/cpu_gemm_packed_cache_test.cc has eviction).
TEST_F(CpuGemmTest, ConstantWeightsPackedOnceWhileKernelsRunOnSeveralThreads) {
  const int64_t m = 128, k = 256, n = 192;  // 6.3M multiply-adds: the library
  const HostTensor w1 = HostTensor::RandomUniform(DType::kF32, {k, n}, 71);
  const HostTensor w2 = HostTensor::RandomUniform(DType::kF32, {k, n}, 72);
  const HostTensor w3 = HostTensor::RandomUniform(DType::kF32, {k, n}, 73);
  const std::vector<const HostTensor*> weight_of_kernel = {&w1, &w1, &w2, &w3, &w1, &w2};
  std::vector<Case> cases(weight_of_kernel.size());
  std::vector<std::unique_ptr<CompiledKernel>> kernels;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    Tensor x = c.Input(DType::kF32, {m, k}, 80 + i, -2, 2);
    Tensor product = MatMul(x, Const(*c.graph, *weight_of_kernel[i]));
    if (i == 3) {
      Tensor bias = c.Input(DType::kF32, {n}, 90, -2, 2);
      c.outputs = {Relu(product + bias)};
    } else {
      c.outputs = {product};
    }
    auto kernel = CompileCluster(SpecOf(c), CompileOptions{});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    ASSERT_TRUE(CallsLibrary(**kernel)) << (*kernel)->schedule_text();
    kernels.push_back(*std::move(kernel));
  }
  ResetCpuGemmPackedCacheForTesting();
  const int64_t packs = CpuGemmWeightPacks();
  std::vector<std::string> failures(kernels.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kernels.size(); ++t) {
    threads.emplace_back([&, t] {
      const size_t i = t;
      auto expected = ReferenceOutputs(SpecOf(cases[i]), cases[i].values);
      if (!expected.ok()) {
        failures[t] = std::string(expected.status().message());
        return;
      }
      for (int run = 0; run < 10 && failures[t].empty(); ++run) {
        auto actual = RunKernel(*kernels[i], cases[i].values);
        std::string why;
        if (!actual.ok()) {
          failures[t] = std::string(actual.status().message());
        } else if (!AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) {
          failures[t] = absl::StrCat("run ", run, why);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < failures.size(); ++t) {
    EXPECT_EQ(failures[t], "") << "kernel " << t;
  }
  const int64_t packed = CpuGemmWeightPacks() - packs;
  if (packed == 0) GTEST_SKIP() << "oneDNN packs no copy of this b here (its layout is b's own)";
  EXPECT_EQ(packed, 3) << "one pack per distinct constant";
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
