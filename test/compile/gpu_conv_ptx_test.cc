// The CUDA code of a Conv2D with the GPU heuristic's shared-memory tiles
// (schedule/gpu_conv_tiles.h), checked without a GPU: the schedule says it tiles, the
// PTX declares shared memory and loads both operands from it between barriers, and it
// assembles with ptxas for sm_90 without spills. A geometry the tiles cannot hold (a huge
// dilation) keeps the thread-per-output kernel, with no shared memory at all. Nothing
// here runs or times a kernel: test/lower/conv_tiles_test.cc runs them on OpenCL.
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
  std::string name;
  Shape x, f;
  Window2D window;
  bool tiled;
  bool backprop = false;  // Conv2DBackpropInput of x's shape (f, dy = the Conv2D's shape)
  DType dtype = DType::kF32;
};

void PrintTo(const PtxCase& c, std::ostream* os) { *os << c.name; }

Window2D Same(DataFormat format, int stride = 1, int dilation = 1) {
  Window2D w;
  w.format = format;
  w.padding = Padding::kSame;
  w.stride_h = w.stride_w = stride;
  w.dilation_h = w.dilation_w = dilation;
  return w;
}

class GpuConvPtx : public ::testing::TestWithParam<PtxCase> {};

TEST_P(GpuConvPtx, SharedMemoryTilesAssemble) {
  const PtxCase& pc = GetParam();
  Case c;
  Tensor f = c.Input(pc.dtype, pc.f, 2);
  if (pc.backprop) {
    Graph probe;
    const Shape y =
        Conv2D(Placeholder(probe, pc.dtype, pc.x), Placeholder(probe, pc.dtype, pc.f), pc.window)
            .shape();
    Tensor dy = c.Input(pc.dtype, y, 1);
    c.outputs = {Relu(Conv2DBackpropInput(pc.x, f, Relu(dy), pc.window))};
  } else {
    Tensor x = c.Input(pc.dtype, pc.x, 1);
    c.outputs = {Relu(Conv2D(Relu(x), f, pc.window))};  // a fused producer and consumer
  }
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  auto code = GenerateCudaCode(SpecOf(c, "conv_" + pc.name), Scheduler::kGpuFused);
  ASSERT_TRUE(code.ok()) << code.status();
  SCOPED_TRACE(pc.name + ":\n" + code->schedule);
  EXPECT_EQ(code->scheduler_used, Scheduler::kGpuFused)
      << absl::StrJoin(code->scheduler_failures, "; ");
  EXPECT_EQ(code->host_loops, 0);
  // Every kernel can launch: Halide's CUDA runtime never opts in to more than 48 KiB of
  // dynamic shared memory (schedule/gpu_launch_check.h).
  std::cout << "[conv launch] " << pc.name << ": at most " << code->max_threads_per_block
            << " threads and " << code->max_shared_bytes << " shared bytes per block\n";
  EXPECT_LE(code->max_threads_per_block, 1024);
  EXPECT_LE(code->max_shared_bytes, 48 * 1024);
  const bool tiles = code->schedule.find("conv, shared-memory tiles") != std::string::npos;
  EXPECT_EQ(tiles, pc.tiled);
  // Halide's shared memory is dynamic (sized at the launch), so the PTX declares no
  // .shared array: the conv kernel's ld.shared / st.shared and barriers show it.
  // The conv kernel: the one with the most shared loads (the other kernels compute the
  // operand and the output's ReLU, pointwise; kernel names vary with the Funcs' names).
  std::string conv;
  for (size_t at = code->ptx.find(".entry"); at != std::string::npos;) {
    const size_t next = code->ptx.find(".entry", at + 1);
    const std::string kernel = code->ptx.substr(at, next == std::string::npos ? next : next - at);
    if (conv.empty() || Count(kernel, "ld.shared.") > Count(conv, "ld.shared.")) conv = kernel;
    at = next;
  }
  const int shared_loads = Count(conv, "ld.shared.");
  std::cout << "[conv PTX] " << pc.name << ": " << code->kernels.size() << " kernels, "
            << "conv kernel: " << shared_loads << " ld.shared, " << Count(conv, "st.shared.")
            << " st.shared, " << Count(conv, "bar.sync") << " bar.sync, "
            << Count(conv, "ld.global.") << " ld.global\n";
  if (pc.tiled) {
    EXPECT_GT(shared_loads, 0);
    EXPECT_GT(Count(conv, "st.shared."), 0);
    EXPECT_GT(Count(conv, "bar.sync"), 0);
  } else {
    EXPECT_NE(code->schedule.find("conv, no shared-memory tiles"), std::string::npos);
    EXPECT_EQ(code->ptx.find("shared."), std::string::npos);
  }
  if (!HavePtxas()) GTEST_SKIP() << "ptxas not found at " << PtxasPath();
  auto report = AssemblePtx(code->ptx, "sm_90");
  ASSERT_TRUE(report.ok()) << report.status();
  // Every block fits the register file (else it spills under the runtime's 64 cap).
  EXPECT_EQ(CheckRegistersPerBlock(*code, *report), "") << report->log;
  ASSERT_EQ(report->kernels.size(), code->kernels.size()) << report->log;
  for (const PtxasKernel& k : report->kernels) {
    std::cout << "[ptxas sm_90] " << pc.name << " " << k.name << ": " << k.registers
              << " registers, spills " << k.spill_store_bytes << "/" << k.spill_load_bytes
              << ", stack " << k.stack_bytes << "\n";
    EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
  }
}

const PtxCase kCases[] = {
    // The CNN example's second layer (3x3 SAME, 32 -> 64 channels) at a small batch.
    {"NHWC_2x14x14x32to64", {2, 14, 14, 32}, {3, 3, 32, 64}, Same(DataFormat::kNHWC), true},
    {"NCHW_2x32x30x28to16", {2, 32, 30, 28}, {3, 3, 32, 16}, Same(DataFormat::kNCHW), true},
    {"NHWC_Depthwise_1x17x19x24", {1, 17, 19, 24}, {3, 3, 1, 24}, Same(DataFormat::kNHWC), true},
    {"NCHW_Stride2_1x3x63x65", {1, 3, 63, 65}, {3, 3, 3, 8}, Same(DataFormat::kNCHW, 2), true},
    {"Dx_NHWC_2x14x14x32to64",
     {2, 14, 14, 32},
     {3, 3, 32, 64},
     Same(DataFormat::kNHWC),
     true,
     true},
    {"Dx_NCHW_2x32x30x28to16",
     {2, 32, 30, 28},
     {3, 3, 32, 16},
     Same(DataFormat::kNCHW),
     true,
     true},
    // bench/cuda_bench.cc's ResNet block (failed to launch on an H200) and braze-fuzz
    // seed 69's f64 convolution (stride 2 along H).
    {"NHWC_ResNet_32x56x56x64", {32, 56, 56, 64}, {3, 3, 64, 64}, Same(DataFormat::kNHWC), true},
    {"Dx_NHWC_ResNet_32x56x56x64",
     {32, 56, 56, 64},
     {3, 3, 64, 64},
     Same(DataFormat::kNHWC),
     true,
     true},
    {"NCHW_F64_Seed69_2x5x61x67",
     {2, 5, 61, 67},
     {3, 3, 5, 8},
     Window2D{1, 2, 1, 1, Padding::kValid, 0, 0, 0, 0, DataFormat::kNCHW},
     true,
     false,
     DType::kF64},
    {"NHWC_Dilation60_FallsBack",
     {1, 10, 10, 2},
     {3, 3, 2, 4},
     Same(DataFormat::kNHWC, 1, 60),
     false},
};

INSTANTIATE_TEST_SUITE_P(Cuda, GpuConvPtx, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<PtxCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace lowertest
}  // namespace braze
