// The random ops' CUDA code, checked without a GPU (docs/RANDOM.md): generated with the
// GPU heuristic, assembled by ptxas for sm_90, and free of what would break their bit
// identity with the reference kernels: no approximate instruction (.approx, ex2, lg2,
// sin, cos, rsqrt), no flush-to-zero, no f32 fused multiply-add. (f64 fmas are allowed:
// each fuses a product of two f32 values, exact in f64, so it rounds as the reference's
// separate multiply and add do. Halide 14's PTX back end contracts whatever
// strict_float says; this test is what notices a transform that stops being immune.)
#include <string>
#include <vector>

#include "braze/ops.h"
#include "compile/cuda_codegen.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// Each instruction of `ptx` (the first word of a line inside a function body).
std::vector<std::string> Instructions(const std::string& ptx) {
  std::vector<std::string> ops;
  size_t pos = 0;
  while (pos < ptx.size()) {
    size_t end = ptx.find('\n', pos);
    if (end == std::string::npos) end = ptx.size();
    const std::string line = ptx.substr(pos, end - pos);
    pos = end + 1;
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '/' || line[start] == '.' ||
        line[start] == '{' || line[start] == '}' || line[start] == '$' || line[start] == '@') {
      continue;
    }
    ops.push_back(line.substr(start, line.find_first_of(" \t;", start) - start));
  }
  return ops;
}

struct RandomPtxCase {
  const char* name;
  std::function<void(Case&)> build;
};

class RandomPtxTest : public ::testing::TestWithParam<RandomPtxCase> {};

TEST_P(RandomPtxTest, ExactInstructionsOnly) {
  Case c;
  GetParam().build(c);
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  auto code =
      GenerateCudaCode(SpecOf(c, std::string("gpu_") + GetParam().name), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_FALSE(code->kernels.empty());
  const std::vector<std::string> ops = Instructions(code->ptx);
  ASSERT_FALSE(ops.empty());
  int f64_fmas = 0;
  int wide_muls = 0;
  for (const std::string& op : ops) {
    EXPECT_EQ(op.find(".approx"), std::string::npos) << op;
    EXPECT_EQ(op.find(".ftz"), std::string::npos) << op;
    for (const char* bad : {"ex2.", "lg2.", "sin.", "cos.", "rsqrt.", "rcp."}) {
      EXPECT_NE(op.rfind(bad, 0), 0u) << op;
    }
    if (op.rfind("fma.", 0) == 0) {
      EXPECT_EQ(op, "fma.rn.f64") << "only f64 fmas of exact products";
      ++f64_fmas;
    }
    if (op.rfind("div.", 0) == 0 && op.find(".f") != std::string::npos) {
      EXPECT_EQ(op, "div.rn.f64") << "the log's one division, correctly rounded";
    }
    if (op.rfind("sqrt.", 0) == 0) EXPECT_EQ(op, "sqrt.rn.f64");
    wide_muls += op == "mul.hi.u32" || op == "mul.wide.u32";
    // No 64-bit multiply: Philox's products are 32 x 32 bits (philox.cc's Round).
    EXPECT_NE(op.rfind("mul.lo.s64", 0), 0u) << op;
    EXPECT_NE(op.rfind("mul.lo.u64", 0), 0u) << op;
  }
  // Philox's 32x32 -> 64-bit products: 20 per block, each a mul.hi.u32 (and a
  // mul.lo.s32), at least one block per kernel (the last round's unused words are dead
  // code: 18 at least).
  EXPECT_GE(wide_muls, 18 * static_cast<int>(code->kernels.size())) << code->ptx.substr(0, 4000);
  std::cout << GetParam().name << ": " << ops.size() << " PTX instructions, " << f64_fmas
            << " f64 fmas, " << wide_muls << " wide multiplies\n";
  auto report = AssemblePtx(code->ptx, "sm_90");
  if (report.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "generated and checked, not assembled: " << report.status().message();
  }
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->kernels.empty()) << report->log;
  for (const PtxasKernel& k : report->kernels) {
    EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, RandomPtxTest,
    ::testing::Values(
        RandomPtxCase{"Normal",
                      [](Case& c) {
                        Tensor x = c.Input(DType::kF32, {17, 33, 65}, 1);
                        c.outputs = {RandomNormal(x, c.Input(HostTensor::Scalar<int32_t>(3)), 9)};
                      }},
        RandomPtxCase{"UniformF32AndF64",
                      [](Case& c) {
                        Tensor x = c.Input(DType::kF32, {7, 3}, 2);
                        Tensor s = c.Input(HostTensor::Scalar<int32_t>(3));
                        c.outputs = {RandomUniform(x, s, 9), RandomUniform(x, s, 9, DType::kF64)};
                      }},
        RandomPtxCase{"Dropout",
                      [](Case& c) {
                        Tensor x = c.Input(DType::kF32, {67, 33}, 3);
                        c.outputs = {Dropout(x, 0.1, c.Input(HostTensor::Scalar<int32_t>(3)), 9)};
                      }}),
    [](const ::testing::TestParamInfo<RandomPtxCase>& info) { return info.param.name; });

}  // namespace
}  // namespace lowertest
}  // namespace braze
