// The GPU heuristic's tunable sizes (GpuScheduleParams, schedule/stored_schedule.h),
// checked without a GPU: a stored entry at the default sizes compiles exactly the
// kernels the heuristic makes without one (the same PTX; on OpenCL the same OpenCL C),
// and each size a stored entry changes changes the generated PTX as it says (threads
// per block, vector loads, warp shuffles, the matmul tile), which ptxas assembles for
// sm_90.
#include <unistd.h>

#include <cctype>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/ops.h"
#include "compile/compile.h"
#include "compile/cuda_codegen.h"
#include "compile/ptx_registers.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// Three clusters covering the heuristic's kinds of kernel.
void Pointwise(Case& c) {
  Tensor y = c.Input(DType::kF32, {64, 256}, 1, -2, 2);
  for (int i = 0; i < 3; ++i) y = Tanh(y * 0.9 + 0.1);
  c.outputs = {y};
}
void SoftmaxRows(Case& c) { c.outputs = {Softmax(c.Input(DType::kF32, {256, 1024}, 1, -2, 2))}; }
// A matmul alone: its result is the output, one tiled kernel.
void Dense(Case& c) {
  c.outputs = {MatMul(c.Input(DType::kF32, {64, 48}, 1), c.Input(DType::kF32, {48, 40}, 2))};
}

struct Built {
  Case c;
  ClusterSpec spec;
};

void Build(Built& b, void (*make)(Case&), const std::string& name) {
  make(b.c);
  b.spec = SpecOf(b.c, name);
}

// The stored entry of `params` as the runtime would pass it.
StoredSchedule Entry(const GpuScheduleParams& params) {
  StoredSchedule e;
  e.path = "(test entry)";
  e.params.scheduler = Scheduler::kGpuFused;
  e.params.gpu = params;
  return e;
}

// `code` without comments and with the numbers inside names dropped: each lowering of a
// cluster may name its Funcs "MatMul_2", "MatMul_2$2" or "MatMul_2__2" (in a kernel's
// name, "MatMul_2_2"), so two compiles of one cluster differ in names only. Every
// instruction and every number that is not part of a name (sizes, offsets, constants)
// is kept.
std::string Canonical(const std::string& code) {
  std::string out = std::regex_replace(code, std::regex("//[^\n]*"), "");
  bool in_name = false;
  for (char& ch : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(ch)) || ch == '_' || ch == '$';
    const bool digit = std::isdigit(static_cast<unsigned char>(ch));
    if (in_name && digit) ch = '#';
    in_name = alpha || (in_name && (digit || ch == '#'));
  }
  return std::regex_replace(out, std::regex(R"([_$]+#+)"), "");
}

// The kernel's device code compiled for `device` with `entry` (none: the heuristic's
// own schedule), and its schedule note.
std::string DeviceCode(const ClusterSpec& spec, const Device& device,
                       const std::optional<StoredSchedule>& entry, std::string* note = nullptr) {
  CompileOptions options;
  options.device = device;
  options.stored_schedule = entry;
  auto kernel = CompileCluster(spec, options);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return "";
  if (note) *note = (*kernel)->schedule_note();
  return (*kernel)->device_source().text;
}

// A default entry is no change: the same kernels, through the whole stored-entry path
// (compile driver, GPU chain, heuristic). On CUDA (compiling needs no GPU) and on OpenCL
// where it is available.
TEST(GpuTunedParams, ADefaultEntryCompilesTheSameKernels) {
  std::vector<Device> devices = {Device{Device::Kind::kCuda, 0}};
  if (CheckOpenCLAvailable().ok()) devices.push_back(Device{Device::Kind::kOpenCL, 0});
  for (void (*make)(Case&) : {Pointwise, SoftmaxRows, Dense}) {
    Built b;
    Build(b, make, "cluster_default");
    for (const Device& d : devices) {
      SCOPED_TRACE(d.ToString());
      const std::string plain = DeviceCode(b.spec, d, std::nullopt);
      std::string note;
      const std::string stored = DeviceCode(b.spec, d, Entry(GpuScheduleParams()), &note);
      EXPECT_EQ(note, "stored schedule (test entry): heuristic (fused)");
      ASSERT_FALSE(plain.empty());
      EXPECT_EQ(Canonical(stored), Canonical(plain));
      if (make != Pointwise) continue;
      // And the comparison sees a change: an entry with another size compiles other code.
      GpuScheduleParams other;
      other.block_threads = 128;
      EXPECT_NE(Canonical(DeviceCode(b.spec, d, Entry(other))), Canonical(plain));
    }
  }
}

// Assembles `code` for sm_90 (when ptxas is installed): no spills, registers within a block.
void Assemble(const CudaKernelCode& code) {
  if (!HavePtxas()) return;
  auto report = AssemblePtx(code.ptx, "sm_90");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(CheckRegistersPerBlock(code, *report), "") << report->log;
  for (const PtxasKernel& k : report->kernels) {
    EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.name;
  }
}

CudaKernelCode Generate(const ClusterSpec& spec, const GpuScheduleParams& params) {
  auto code = GenerateCudaCode(spec, Scheduler::kGpuFused, params);
  EXPECT_TRUE(code.ok()) << code.status();
  if (!code.ok()) return {};
  EXPECT_EQ(code->scheduler_used, Scheduler::kGpuFused) << code->schedule;
  Assemble(*code);
  return *code;
}

TEST(GpuTunedParams, PointwiseThreadsTileAndVectorsFollowTheEntry) {
  Built b;
  Build(b, Pointwise, "pointwise");
  GpuScheduleParams p;
  CudaKernelCode code = Generate(b.spec, p);
  // 64 rows of 256 in vectors of 4: 32 x 8 threads, one 16-byte load per thread.
  EXPECT_EQ(code.max_threads_per_block, 256);
  EXPECT_EQ(Count(code.ptx, "ld.global.nc.v4.f32"), 1);
  p.block_threads = 128;  // 32 x 4
  EXPECT_EQ(Generate(b.spec, p).max_threads_per_block, 128);
  p = GpuScheduleParams();
  p.tile_x = 16;  // 16 x 16 threads: the same block, another shape
  code = Generate(b.spec, p);
  EXPECT_EQ(code.max_threads_per_block, 256);
  EXPECT_NE(code.ptx, Generate(b.spec, GpuScheduleParams()).ptx);
  p = GpuScheduleParams();
  p.vector = 2;  // two adjacent elements per thread (the row's address is not known
                 // 8-byte aligned to Halide: two scalar loads)
  code = Generate(b.spec, p);
  EXPECT_EQ(Count(code.ptx, "ld.global.nc.v"), 0);
  EXPECT_EQ(Count(code.ptx, "ld.global.nc.f32"), 2);
  p.vector = 1;  // one element per thread
  code = Generate(b.spec, p);
  EXPECT_EQ(Count(code.ptx, "ld.global.nc.v"), 0);
  EXPECT_EQ(Count(code.ptx, "ld.global.nc.f32"), 1);
}

TEST(GpuTunedParams, RowThreadsAndWarpRowsFollowTheEntry) {
  Built b;
  Build(b, SoftmaxRows, "softmax");
  GpuScheduleParams p;
  CudaKernelCode code = Generate(b.spec, p);
  // Rows of 1024 <= warp_row: a warp per row, combined by shuffles.
  EXPECT_NE(code.schedule.find("32 threads over dim 0"), std::string::npos) << code.schedule;
  EXPECT_GT(Count(code.ptx, "shfl.sync"), 0);
  p.warp_row = 512;  // rows of 1024 are longer: a block per row, 1024 / 16 threads
  code = Generate(b.spec, p);
  EXPECT_EQ(Count(code.ptx, "shfl.sync"), 0);
  EXPECT_NE(code.schedule.find("64 threads over dim 0"), std::string::npos) << code.schedule;
  p.row_elements = 4;  // 256 threads of 4 elements
  code = Generate(b.spec, p);
  EXPECT_NE(code.schedule.find("256 threads over dim 0"), std::string::npos) << code.schedule;
  EXPECT_EQ(code.max_threads_per_block, 256);
  p.block_threads = 128;  // capped
  code = Generate(b.spec, p);
  EXPECT_NE(code.schedule.find("128 threads over dim 0"), std::string::npos) << code.schedule;
  EXPECT_EQ(code.max_threads_per_block, 128);
}

TEST(GpuTunedParams, MatMulTileFollowsTheEntry) {
  Built b;
  Build(b, Dense, "dense");
  GpuScheduleParams p;
  EXPECT_EQ(Generate(b.spec, p).max_threads_per_block, 256);  // 16 x 16
  p.matmul_tile = 8;
  CudaKernelCode code = Generate(b.spec, p);
  EXPECT_EQ(code.max_threads_per_block, 64);
  EXPECT_NE(code.schedule.find("8x8 tiles"), std::string::npos) << code.schedule;
  p.matmul_tile = 32;  // 1024 threads: CUDA's most
  EXPECT_EQ(Generate(b.spec, p).max_threads_per_block, 1024);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
