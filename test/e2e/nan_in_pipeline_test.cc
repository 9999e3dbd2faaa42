// Non-finite values that are constants of the compiled pipeline (docs/HALIDE14.md,
// "Non-finite constants are poison to LLVM"): a reduction over an empty batch (Mean is
// NaN, Max -inf, Min +inf) read by consumers fused in the same cluster, under every CPU
// scheduler, against the reference. Each test failed without the repair
// (compile/codegen_workarounds.h, "Non-finite constants").
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

const Scheduler kSchedulers[] = {Scheduler::kAuto, Scheduler::kAdams2019, Scheduler::kMullapudi2016,
                                 Scheduler::kLi2018, Scheduler::kSafeDefault};

// Runs `fetches` compiled (strict) under every scheduler at `threads` (on `device`, ""
// for the CPU, with the device's own schedule) and on the reference; NaN and infinities
// must match exactly, finite values to `rtol`.
void ExpectReferenceValues(const Graph& g, const Feeds& feeds, const std::vector<Tensor>& fetches,
                           std::vector<int> threads = {1, 2}, const std::string& device = "",
                           double rtol = 1e-2) {
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  Session ref(g, ref_opts);
  auto want = ref.Run(feeds, fetches);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<Scheduler> schedulers =
      device.empty() ? std::vector<Scheduler>(std::begin(kSchedulers), std::end(kSchedulers))
                     : std::vector<Scheduler>{Scheduler::kAuto};
  for (Scheduler sched : schedulers) {
    for (int n : threads) {
      SessionOptions opts;
      opts.scheduler = sched;
      opts.strict = true;
      opts.num_threads = n;
      if (!device.empty()) opts.device = device;
      Session s(g, opts);
      auto got = s.Run(feeds, fetches);
      ASSERT_TRUE(got.ok()) << SchedulerName(sched) << ": " << got.status();
      EXPECT_GE(s.stats().cluster_launches, 1) << SchedulerName(sched);
      for (size_t f = 0; f < fetches.size(); ++f) {
        const HostTensor &a = (*got)[f], &b = (*want)[f];
        ASSERT_EQ(a.num_elements(), b.num_elements());
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < a.num_elements(); ++i) {
          const double x = a.GetDouble(i), y = b.GetDouble(i);
          const bool ok = std::isnan(y)   ? std::isnan(x)
                          : std::isinf(y) ? x == y
                                          : std::fabs(x - y) <= rtol * (1 + std::fabs(y));
          if (!ok && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0) << SchedulerName(sched) << ", " << n << " thread(s), fetch " << f << ": "
                          << bad << " of " << a.num_elements() << " differ; [" << first << "] got "
                          << (first >= 0 ? a.GetDouble(first) : 0) << ", reference "
                          << (first >= 0 ? b.GetDouble(first) : 0);
      }
    }
  }
}

HostTensor Random(DType dtype, const Shape& shape, uint64_t seed) {
  return HostTensor::RandomUniform(dtype, shape, seed, -2, 2);
}

// A fuzz program reduced: its feeds and fetches in the caller's graph.
struct Program {
  Feeds feeds;
  std::vector<Tensor> fetches;
};

// braze-fuzz seed 62701289 (Li2018 there; every scheduler here): the mean of an empty
// batch, squared and averaged again, cast to bf16 and f16, times an f16 matrix. The
// compiled MatMul was 0 (the NaN's sum was poison, its store deleted), not NaN.
Program EmptyMeanIntoAMatMul(Graph& g) {
  Tensor x = Placeholder(g, DType::kF32, {-1, 16}, "x");
  JitScope scope(g);
  Tensor m = Mean(x, {0}, true);
  Tensor m2 = Mean(Mul(m, m), {-2}, true);
  Tensor h = Cast(Cast(m2, DType::kBF16), DType::kF16);
  return {{{x, Random(DType::kF32, {0, 16}, 1)}},
          {MatMul(h, Const(g, Random(DType::kF16, {16, 6}, 59949)))}};
}

// braze-fuzz seed 62600348 (Mullapudi2016, one thread): an attention of f64 constants
// shifted by Tanh of the mean of an empty batch. The compiled attention was 0: LLVM
// took the whole pipeline for undefined once the NaN was poison, and deleted it.
Program EmptyMeanShiftsAnAttention(Graph& g) {
  Tensor x = Placeholder(g, DType::kF32, {-1, 131}, "x");
  JitScope scope(g);
  Tensor c = Const(g, HostTensor::Scalar<float>(1.77585f));
  Tensor m = Tanh(Mean(Cast(Sub(x, c), DType::kF64)));
  Tensor q = Add(Const(g, Random(DType::kF64, {1, 2}, 74049)), m);
  Tensor k = Add(Const(g, Random(DType::kF64, {3, 2}, 47818)), m);
  Tensor v = Add(Const(g, Random(DType::kF64, {3, 7}, 8993)), m);
  return {{{x, Random(DType::kF32, {0, 131}, 2)}},
          {ScaledDotProductAttention(q, k, v, AttentionOptions())}};
}

// The other empty reductions' values, -inf (Max) and +inf (Min), squared or times an
// empty Sum (0: inf * 0 is NaN), averaged over a row, cast to f16, times a matrix. Both
// were 0 under every scheduler (the infinity, under no-infinities, as poison).
Program EmptyMaxAndMinIntoMatMuls(Graph& g) {
  Tensor x = Placeholder(g, DType::kF32, {-1, 16}, "x");
  JitScope scope(g);
  Tensor w = Const(g, Random(DType::kF16, {16, 6}, 59949));
  Tensor mx = Max(x, {0}, true);
  Tensor mn = Min(x, {0}, true);
  Tensor s = Sum(x, {0}, true);
  return {{{x, Random(DType::kF32, {0, 16}, 3)}},
          {MatMul(Cast(Mean(Mul(mx, mx), {-2}, true), DType::kF16), w),
           MatMul(Cast(Mean(Mul(mn, s), {-2}, true), DType::kF16), w)}};
}

TEST(NanInPipeline, MeanOfAnEmptyBatchThroughCastsIntoAMatMul) {
  Graph g;
  const Program p = EmptyMeanIntoAMatMul(g);
  ExpectReferenceValues(g, p.feeds, p.fetches);
}

TEST(NanInPipeline, AttentionShiftedByTheMeanOfAnEmptyBatch) {
  Graph g;
  const Program p = EmptyMeanShiftsAnAttention(g);
  ExpectReferenceValues(g, p.feeds, p.fetches, {1});
}

TEST(NanInPipeline, MaxAndMinOfAnEmptyBatchThroughMeansIntoMatMuls) {
  Graph g;
  const Program p = EmptyMaxAndMinIntoMatMuls(g);
  ExpectReferenceValues(g, p.feeds, p.fetches, {1});
}

// The same programs under a GPU device's schedule: the constants the kernels read are
// kernel arguments there (compile_tests' GpuPtxCodegen.EmptyBatchConstantsAreKernelArguments
// checks the PTX; before, NVPTX could delete what read a literal).
void ExpectOnDevice(const std::string& device) {
  for (auto* program :
       {&EmptyMeanIntoAMatMul, &EmptyMeanShiftsAnAttention, &EmptyMaxAndMinIntoMatMuls}) {
    Graph g;
    const Program p = (*program)(g);
    ExpectReferenceValues(g, p.feeds, p.fetches, {1}, device);
  }
}

TEST(NanInPipeline, EmptyBatchProgramsOnOpenCL) {
  if (!CheckOpenCLAvailable().ok()) GTEST_SKIP() << CheckOpenCLAvailable().message();
  ExpectOnDevice("jit:opencl");
}

// docs/CUDA.md, "Measurements that remain for a device".
TEST(NanInPipeline, EmptyBatchProgramsOnCuda) {
  if (absl::Status s = CheckCudaAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  ExpectOnDevice("cuda:0");
}

}  // namespace
}  // namespace braze
