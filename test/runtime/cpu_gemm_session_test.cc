// Sessions running matmuls through the CPU GEMM library (docs/CPU_GEMM.md): symbolic
// batch sizes share one kernel, and every result matches the reference executor, with
// the library and without it (SessionOptions::cpu_matmul).
#include <gtest/gtest.h>

#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/cpu_gemm.h"

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

}  // namespace
}  // namespace braze
