// The GPU launch limits (schedule/gpu_launch_check.h) on small pipelines built here:
// each per-dimension limit of a block and a grid, counts with and without a constant
// bound, and the register rule. OpenCL C modules (quick to generate); one CUDA module.
#include "schedule/gpu_launch_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace braze {
namespace schedule {
namespace {

using ::testing::HasSubstr;

Halide::Target GpuTarget(bool cuda = false) {
  return Halide::get_host_target().with_feature(cuda ? Halide::Target::CUDA
                                                     : Halide::Target::OpenCL);
}

// out(x, y, z) = x + y + z, its extents fixed (`fixed`) or left to the run, scheduled by
// `schedule`; the module's launch problem, "" when none.
template <typename Schedule>
std::string LaunchProblem(const int (&extents)[3], bool fixed, Schedule schedule,
                          const std::map<std::string, int64_t>& known = {}, bool cuda = false) {
  Halide::Var x("x"), y("y"), z("z");
  Halide::Func out("launch_out");
  out(x, y, z) = x + y + z;
  if (fixed) {
    for (int d = 0; d < 3; ++d) out.output_buffer().dim(d).set_bounds(0, extents[d]);
  }
  schedule(out, x, y, z);
  Halide::Module m = Halide::Pipeline(out).compile_to_module({}, "launch", GpuTarget(cuda));
  // `known` names the output buffer's fields ("extent.1"), as the compile driver does.
  std::map<std::string, int64_t> fields;
  for (const auto& [field, value] : known) {
    fields[out.output_buffer().parameter().name() + "." + field] = value;
  }
  return CheckGpuLaunchLimits(m, fields);
}

TEST(GpuLaunchCheck, BlockDimsAreLimitedPerDimension) {
  Halide::Var xo, yo, zo, xi, yi, zi;
  // 8 x 2 x 64 = 1024 threads, z at its limit: launches.
  EXPECT_EQ(LaunchProblem({8, 2, 64}, true,
                          [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                            f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 8, 2, 64);
                          }),
            "");
  // 4 x 2 x 128 = 1024 threads, but blockDim.z is at most 64.
  EXPECT_THAT(LaunchProblem({4, 2, 128}, true,
                            [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                              f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 4, 2, 128);
                            }),
              HasSubstr("GPU kernel"));
  EXPECT_THAT(LaunchProblem({4, 2, 128}, true,
                            [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                              f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 4, 2, 128);
                            }),
              HasSubstr("would fail to launch: blockDim.z is 128 (at most 64)"));
  // 2048 threads along x alone.
  EXPECT_THAT(LaunchProblem({2048, 1, 1}, true,
                            [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                              f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 2048, 1, 1);
                            }),
              HasSubstr("blockDim.x is 2048 (at most 1024)"));
  // 32 x 32 x 2: each dim within its limit, 2048 in all.
  EXPECT_THAT(LaunchProblem({32, 32, 2}, true,
                            [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                              f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 32, 32, 2);
                            }),
              HasSubstr("threads per block is 2048 (at most 1024)"));
}

// A block per element: the grid is the output's extents.
void BlockPerElement(Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
  f.gpu_blocks(x, y, z);
}

TEST(GpuLaunchCheck, GridDimsAreLimitedPerDimension) {
  EXPECT_EQ(LaunchProblem({70000, 2, 1}, true, BlockPerElement), "");  // x may be large
  EXPECT_EQ(LaunchProblem({2, 65535, 2}, true, BlockPerElement), "");
  EXPECT_THAT(LaunchProblem({2, 65536, 3}, true, BlockPerElement),
              HasSubstr("would fail to launch: gridDim.y is 65536 (at most 65535)"));
  EXPECT_THAT(LaunchProblem({2, 3, 70000}, true, BlockPerElement),
              HasSubstr("gridDim.z is 70000 (at most 65535)"));
  // Extents known only as the cluster's buffer fields, as the compile driver passes them.
  EXPECT_THAT(LaunchProblem({0, 0, 0}, false, BlockPerElement,
                            {{"extent.0", 5}, {"extent.1", 100000}, {"extent.2", 1}}),
              HasSubstr("gridDim.y is 100000"));
  EXPECT_EQ(LaunchProblem({0, 0, 0}, false, BlockPerElement,
                          {{"extent.0", 5}, {"extent.1", 1000}, {"extent.2", 1}}),
            "");
}

// A run-time extent (a symbolic shape) may make a count anything: rejected where a run
// could pass the limit, with the reason; the grid's x count never can.
TEST(GpuLaunchCheck, CountsWithoutAConstantBoundAreJudgedByWhatARunCouldMakeThem) {
  Halide::Var xo, xi, b, b2;
  // Tiles of 256 threads, every block in grid x: launches at any extent.
  EXPECT_EQ(LaunchProblem({0, 0, 0}, false,
                          [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                            f.split(x, xo, xi, 256).fuse(xo, y, b).fuse(b, z, b2);
                            f.gpu_blocks(b2).gpu_threads(xi);
                          }),
            "");
  // A thread per element of a run-time row.
  EXPECT_THAT(LaunchProblem({0, 0, 0}, false,
                            [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                              f.fuse(y, z, b).gpu_blocks(b).gpu_threads(x);
                            }),
              HasSubstr("would fail to launch at some run-time extents: blockDim.x has no "
                        "constant bound"));
  // A run-time extent in grid y.
  EXPECT_THAT(LaunchProblem({0, 0, 0}, false, BlockPerElement),
              HasSubstr("would fail to launch at some run-time extents: gridDim.y has no "
                        "constant bound"));
  // A guarded tile: 64 threads whatever the extent.
  EXPECT_EQ(LaunchProblem({0, 0, 0}, false,
                          [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
                            f.split(x, xo, xi, 64, Halide::TailStrategy::GuardWithIf)
                                .fuse(xo, y, b)
                                .fuse(b, z, b2)
                                .gpu_blocks(b2)
                                .gpu_threads(xi);
                          }),
            "");
}

TEST(GpuLaunchCheck, ACudaModulesLaunchesAreCheckedAlike) {
  Halide::Var xo, yo, zo, xi, yi, zi;
  const std::string problem = LaunchProblem(
      {4, 2, 128}, true,
      [&](Halide::Func f, Halide::Var x, Halide::Var y, Halide::Var z) {
        f.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, 4, 2, 128);
      },
      {}, /*cuda=*/true);
  EXPECT_THAT(problem, HasSubstr("blockDim.z is 128 (at most 64)"));
  EXPECT_THAT(problem, HasSubstr("GPU kernel _kernel_launch_out")) << problem;
}

// What a failed launch's Status lists (Halide's runtime names no kernel): each kernel
// with its grid, block and shared memory, symbolic counts as "?".
TEST(GpuLaunchCheck, DescribesEachLaunchForAFailedLaunchsStatus) {
  Halide::Var x("x"), y("y"), xo, xi, yo, yi;
  Halide::Func out("launch_out");
  out(x, y) = x + y;
  out.output_buffer().dim(0).set_bounds(0, 100);
  out.gpu_tile(x, y, xo, yo, xi, yi, 32, 4, Halide::TailStrategy::GuardWithIf);
  Halide::Module m = Halide::Pipeline(out).compile_to_module({}, "describe", GpuTarget(true));
  const std::string text = DescribeGpuLaunches(m);
  EXPECT_THAT(text, HasSubstr("kernel _kernel_launch_out"));
  EXPECT_THAT(text, HasSubstr(": grid 4 x ? x 1 blocks of 32 x 4 x 1 threads, 0 bytes of shared "
                              "memory\n"));
}

// Registers are allocated per warp in units of 256: a 1024-thread block launches with
// up to 64 registers a thread, not 65; 256 threads with up to 255 (ptxas' maximum).
TEST(GpuLaunchCheck, RegistersPerBlockRoundPerWarp) {
  EXPECT_EQ(RegistersPerBlock(64, 1024), 65536);
  EXPECT_GT(RegistersPerBlock(65, 1024), kMaxGpuRegistersPerBlock);
  EXPECT_EQ(RegistersPerBlock(56, 1024), 57344);
  EXPECT_EQ(RegistersPerBlock(255, 256), 65536);
  EXPECT_EQ(RegistersPerBlock(1, 1), 256);    // one warp's unit
  EXPECT_EQ(RegistersPerBlock(9, 33), 1024);  // 9 -> 288 -> 512 a warp, 2 warps
}

}  // namespace
}  // namespace schedule
}  // namespace braze
