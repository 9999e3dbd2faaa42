// The pipeline buffer cache (src/device/jit_memory.h): intermediates are reused across
// runs, results stay right, and a concurrent reset of Halide's default handlers (as
// CUDA initialization does) cannot pair the cache's malloc with Halide's free.
#include "device/jit_memory.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "Halide.h"
#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// A cluster with two heap intermediates over 64 KiB: the repacked b^T (130x170 f32)
// and the matmul's result (150x170 f32).
Case MatMulCase() {
  Case c;
  Tensor a = c.Input(DType::kF32, {150, 130}, 21);
  Tensor b = c.Input(DType::kF32, {170, 130}, 22);
  c.outputs = {Relu(MatMul(a, b, false, true) * 0.5)};
  return c;
}

TEST(JitMemoryTest, IntermediatesReuseCachedMemory) {
  const Case c = MatMulCase();
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  CompileOptions options{Scheduler::kSafeDefault, 0};
  options.cpu_gemm_library = false;  // Halide's loops, with their two intermediates
  auto kernel = CompileCluster(spec, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  int64_t reused_before = 0;
  for (int run = 0; run < 3; ++run) {
    if (run == 1) reused_before = device::GetJitMemoryStats().reused;
    auto actual = RunKernel(**kernel, c.values);
    ASSERT_TRUE(actual.ok()) << actual.status();
    std::string why;
    EXPECT_TRUE(AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) << "run " << run << why;
  }
  EXPECT_GE(device::GetJitMemoryStats().reused - reused_before, 4) << "2 buffers x 2 runs";
}

// Halide resets its active default handlers field by field whenever they are set (and
// when it creates the CUDA runtime). With the cache installed as a default, a realize
// racing with that could take our malloc and Halide's free and crash within a second.
TEST(JitMemoryTest, SurvivesConcurrentDefaultHandlerResets) {
  const Case c = MatMulCase();
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  ASSERT_TRUE(expected.ok()) << expected.status();
  // One kernel per runner: a kernel runs one Run at a time.
  std::vector<std::unique_ptr<CompiledKernel>> kernels;
  for (int t = 0; t < 2; ++t) {
    auto kernel = CompileCluster(spec, {Scheduler::kSafeDefault, 1});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    kernels.push_back(std::move(*kernel));
  }
  // Whatever the defaults are (CUDA's, where a GPU test ran first), they are kept.
  const Halide::JITHandlers current =
      Halide::Internal::JITSharedRuntime::set_default_handlers(Halide::JITHandlers());
  Halide::Internal::JITSharedRuntime::set_default_handlers(current);

  std::atomic<bool> stop{false};
  std::thread resetter([&] {
    while (!stop.load()) Halide::Internal::JITSharedRuntime::set_default_handlers(current);
  });
  std::atomic<int> bad{0};
  std::vector<std::thread> runners;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (int t = 0; t < 2; ++t) {
    runners.emplace_back([&, t] {
      while (std::chrono::steady_clock::now() < until) {
        auto actual = RunKernel(*kernels[t], c.values);
        std::string why;
        if (!actual.ok() || !AllClose((*actual)[0], (*expected)[0], 1e-4, 1e-4, &why)) ++bad;
      }
    });
  }
  for (std::thread& r : runners) r.join();
  stop = true;
  resetter.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
