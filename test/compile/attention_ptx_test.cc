// The attention ops' CUDA code (docs/ATTENTION.md, schedule/gpu_attention.h): each op a
// single kernel of the GPU heuristic's fused plan (no fallback), at the benchmark's shape
// (B = 8, H = 8, T = 512, D = 64) and an odd one, whose PTX ptxas assembles for sm_90
// without spills, using shared memory and barriers (the per-tile Funcs staged there).
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/ops.h"
#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

struct PtxCase {
  OpKind op;
  Shape q, k;  // v and dO take q's and k's last dim
  bool causal;
  double dropout = 0;  // with its Philox mask computed in the kernel
};
void PrintTo(const PtxCase& c, std::ostream* os) { *os << OpName(c.op); }

std::string CaseName(const ::testing::TestParamInfo<PtxCase>& info) {
  return absl::StrCat(OpName(info.param.op), "_", info.param.q[2], "x", info.param.k[2], "x",
                      info.param.q[3], info.param.causal ? "_Causal" : "",
                      info.param.dropout != 0 ? "_Dropout" : "");
}

void Build(Case& c, const PtxCase& pc) {
  const DType f32 = DType::kF32;
  Tensor q = c.Input(f32, pc.q, 1), k = c.Input(f32, pc.k, 2), v = c.Input(f32, pc.k, 3);
  AttentionAttrs a;
  a.causal = pc.causal;
  a.scale = 0.125;
  a.dropout = pc.dropout;
  a.seed = 5;
  Tensor step = pc.dropout != 0 ? c.Input(HostTensor::Scalar<int32_t>(3)) : Tensor();
  switch (pc.op) {
    case OpKind::kAttention:
      c.outputs = {Attention(q, k, v, a, step)};
      return;
    case OpKind::kAttentionLogSumExp:
      c.outputs = {AttentionLogSumExp(q, k, a)};
      return;
    default: {
      Shape row(pc.q.begin(), pc.q.end() - 1);
      c.outputs = {AttentionGrad(pc.op, q, k, v, c.Input(f32, pc.q, 4), c.Input(f32, row, 5),
                                 c.Input(f32, row, 6), a, step)};
    }
  }
}

std::vector<PtxCase> Cases() {
  std::vector<PtxCase> cases;
  for (OpKind op : {OpKind::kAttention, OpKind::kAttentionLogSumExp, OpKind::kAttentionGradQ,
                    OpKind::kAttentionGradK, OpKind::kAttentionGradV}) {
    cases.push_back({op, {8, 8, 512, 64}, {8, 8, 512, 64}, true});
    cases.push_back({op, {2, 3, 17, 33}, {2, 3, 45, 33}, false});
    cases.push_back({op, {2, 2, 70, 128}, {2, 2, 70, 128}, true});  // wide rows: 16 per block
    if (op != OpKind::kAttentionLogSumExp) {
      cases.push_back({op, {8, 8, 512, 64}, {8, 8, 512, 64}, true, 0.1});
    }
  }
  return cases;
}

class AttentionPtxTest : public ::testing::TestWithParam<PtxCase> {};

TEST_P(AttentionPtxTest, OneKernelThatAssemblesWithoutSpills) {
  Case c;
  Build(c, GetParam());
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  auto code = GenerateCudaCode(SpecOf(c, "gpu_attention"), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  SCOPED_TRACE(absl::StrCat("scheduled by ", code->scheduler, ":\n", code->schedule,
                            "failures: ", absl::StrJoin(code->scheduler_failures, "; ")));
  EXPECT_EQ(code->scheduler_used, Scheduler::kGpuFused);
  EXPECT_TRUE(code->scheduler_failures.empty());
  EXPECT_EQ(code->kernels.size(), 1u);
  EXPECT_EQ(code->host_loops, 0);
  EXPECT_NE(code->ptx.find("bar.sync"), std::string::npos) << "no barrier: nothing staged";
  // Threads across a row as well as across rows (gpu_attention.h), not a thread per row.
  EXPECT_NE(code->ptx.find("%tid.y"), std::string::npos) << "one thread per row";
  if (access(PtxasPath().c_str(), X_OK) != 0) {
    GTEST_SKIP() << "generated, not assembled: ptxas not found at " << PtxasPath();
  }
  auto report = AssemblePtx(code->ptx, "sm_90");
  ASSERT_TRUE(report.ok()) << report.status();
  // Every block fits the register file (else it spills under the runtime's 64 cap).
  EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
  ASSERT_EQ(report->kernels.size(), 1u) << report->log;
  const PtxasKernel& k = report->kernels[0];
  std::cout << "  " << k.registers << " registers, " << k.stack_bytes << " bytes of stack, "
            << k.barriers << " barriers\n";
  EXPECT_EQ(k.spill_store_bytes, 0) << report->log;
  EXPECT_EQ(k.spill_load_bytes, 0) << report->log;
  EXPECT_EQ(k.stack_bytes, 0) << report->log;  // the per-thread boxes stay in registers
  EXPECT_LE(k.registers, 128) << report->log;
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionPtxTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
