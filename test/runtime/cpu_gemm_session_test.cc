// Sessions running matmuls through the CPU GEMM library (docs/CPU_GEMM.md): symbolic
// batch sizes share one kernel, and every result matches the reference executor, with
// the library and without it (SessionOptions::cpu_matmul).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/cpu_gemm.h"
#include "runtime/flags.h"

namespace braze {
namespace {

TEST(CpuGemmSessionTest, SymbolicRowsShareOneKernelAndMatchTheReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 257}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {257, 127}, 1), "w");
  Tensor bias = Const(g, HostTensor::RandomUniform(DType::kF32, {127}, 2), "bias");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(Relu(MatMul(x, w) + bias));
  }
  for (auto matmul : {SessionOptions::CpuMatMul::kLibrary, SessionOptions::CpuMatMul::kHalide}) {
    SessionOptions options;
    options.cpu_matmul = matmul;
    Session session(g, options);
    for (int64_t rows : {300, 129, 1, 7, 300}) {
      SCOPED_TRACE(rows);
      const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 257}, rows)}};
      auto got = session.Run(feeds, {y});
      ASSERT_TRUE(got.ok()) << got.status();
      testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
    }
    // One kernel for sizes >= 16 and one for sizes 1 to 15 (docs/SYMBOLIC_SHAPES.md).
    EXPECT_EQ(session.stats().compiles, 2);
    EXPECT_EQ(session.stats().cluster_launches, 5);
  }
}

// BRAZE_FLAGS=--cpu_gemm_library=false turns the library off in every session: the
// kernel is keyed apart (compiled again) and still matches.
TEST(CpuGemmSessionTest, TheFlagTurnsTheLibraryOff) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {131, 257}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {257, 127}, 3), "w");
  Tensor y;
  {
    JitScope scope(g);
    y = Tanh(MatMul(x, w));
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {131, 257}, 4)}};
  for (bool library : {true, false}) {
    BrazeFlags flags;
    flags.cpu_gemm_library = library;
    SetBrazeFlagsForTesting(flags);
    Session session(g);
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
    EXPECT_EQ(session.stats().compiles, 1) << library;
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
}

// --cpu_gemm_min_work=1 sends even a 3 x 1 x 2 matmul to oneDNN (what braze-fuzz uses to
// check the library on small, odd shapes): still the reference's result.
TEST(CpuGemmSessionTest, AMinimumOfOneSendsTinyMatmulsToTheLibrary) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  BrazeFlags flags;
  flags.cpu_gemm_min_work = 1;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
  for (const Shape& a_shape : {Shape{3, 2}, Shape{1, 1}, Shape{2, 5, 7}}) {
    Graph g;
    Tensor a = Placeholder(g, DType::kF32, a_shape, "a");
    Shape b_shape = a_shape;  // b^T: [.., n, k] with n = 1
    b_shape[b_shape.size() - 2] = 1;
    Tensor b = Placeholder(g, DType::kF32, b_shape, "b");
    Tensor y;
    {
      JitScope scope(g);
      y = Exp(a_shape.size() == 3 ? BatchMatMul(a, b, false, true) : MatMul(a, b, false, true));
    }
    const Feeds feeds = {{a, HostTensor::RandomUniform(DType::kF32, a_shape, 5)},
                         {b, HostTensor::RandomUniform(DType::kF32, b_shape, 6)}};
    Session session(g);
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
  }
  SetLogSink(nullptr);
  SetBrazeFlagsForTesting(BrazeFlags{});
  int library = 0;
  for (const std::string& line : infos)
    library += line.find("matmul by oneDNN") != std::string::npos;
  EXPECT_EQ(library, 3) << infos.size() << " log lines";
}

}  // namespace
}  // namespace braze
