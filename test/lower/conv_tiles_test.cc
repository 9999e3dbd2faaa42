// The GPU heuristic's shared-memory tiles for Conv2D and Conv2DBackpropInput at stride 1
// (schedule/gpu_conv_tiles.h), run on
// OpenCL (POCL: on the CPU here, so correctness only, never speed) and compared with the
// reference: both data formats, odd and prime extents, strides, dilations, groups and
// depthwise, input channels in several chunks (one not a multiple of the chunk), fused
// producers and consumers. Each case also says whether the schedule log must show the
// tiles, or the fallback to a thread per output (a dilation whose patch cannot fit).
#include <memory>
#include <string>
#include <vector>

#include "braze/ops.h"
#include "compile/ptx_registers.h"
#include "gtest/gtest.h"
#include "ir/window_geometry.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

constexpr DType f32 = DType::kF32;
constexpr Tolerance kConvTol{2e-4, 2e-5};

struct TileCase {
  std::string name;
  DataFormat format;
  int64_t n, h, w, c_in, kh, kw, groups, c_out;
  Window2D window;  // its format is set from `format`
  // Empty: the log must show the tiles; else the fallback, for this reason.
  std::string fallback;
  bool fused = false;  // relu(x * 0.5 + 0.1) in, + bias then relu out
  int chunks = 0;      // > 0: the log must show this many chunks of input channels
  DType dtype = f32;
  // Conv2DBackpropInput (stride 1: a Conv2D of dy) of this geometry instead: dy has
  // c_out channels, the chunks split them.
  bool backprop = false;
};

void PrintTo(const TileCase& c, std::ostream* os) { *os << c.name; }

Window2D Win(int stride_h, int stride_w, int dil_h, int dil_w, Padding padding) {
  Window2D w;
  w.stride_h = stride_h, w.stride_w = stride_w;
  w.dilation_h = dil_h, w.dilation_w = dil_w;
  w.padding = padding;
  if (padding == Padding::kExplicit)
    w.pad_top = 2, w.pad_bottom = 0, w.pad_left = 1, w.pad_right = 3;
  return w;
}

std::vector<TileCase> Cases() {
  const Padding same = Padding::kSame, valid = Padding::kValid, expl = Padding::kExplicit;
  // Strided windows over few channels reuse each staged element under twice (a 3x3
  // window at stride 2 reads each input at most 9 / 4 times, less its halo): the fallback.
  const std::string reuse = "fewer than 2 multiply-adds";
  std::vector<TileCase> cases;
  for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const bool nchw = f == DataFormat::kNCHW;
    const std::string p = nchw ? "NCHW_" : "NHWC_";
    // 37 input channels against 64 outputs (NHWC) or a 30x20 image (NCHW): several chunks,
    // the last one shorter.
    cases.push_back({p + "Chunks37to64", f, 2, 20, 30, 37, 3, 3, 1, 64, Win(1, 1, 1, 1, same)});
    cases.push_back({p + "Prime11x13Stride2", f, 3, 11, 13, 5, 3, 3, 1, 7, Win(2, 2, 1, 1, same),
                     nchw ? reuse : ""});
    cases.push_back(
        {p + "Stride2Prime127x131", f, 1, 127, 131, 3, 3, 3, 1, 4, Win(2, 2, 1, 1, same)});
    cases.push_back({p + "Stride3x2Valid", f, 1, 17, 19, 6, 3, 2, 1, 9, Win(3, 2, 1, 1, valid),
                     nchw ? reuse : ""});
    cases.push_back({p + "Dilation2Explicit", f, 2, 15, 14, 4, 3, 3, 1, 8, Win(1, 1, 2, 2, expl)});
    cases.push_back({p + "Groups3", f, 2, 12, 10, 9, 3, 3, 3, 12, Win(1, 1, 1, 1, same)});
    cases.push_back({p + "Groups2Stride2", f, 1, 13, 11, 8, 3, 3, 2, 6, Win(2, 1, 1, 1, same)});
    cases.push_back(
        {p + "DepthwiseMultiplier1", f, 2, 13, 17, 8, 3, 3, 8, 8, Win(1, 1, 1, 1, same)});
    cases.push_back(
        {p + "DepthwiseMultiplier2", f, 2, 14, 14, 16, 3, 3, 16, 32, Win(1, 1, 1, 1, same)});
    cases.push_back(
        {p + "DepthwiseStride2", f, 2, 16, 15, 24, 3, 3, 24, 24, Win(2, 2, 1, 1, same), reuse});
    cases.push_back({p + "OddEverything5x7", f, 1, 5, 7, 3, 5, 3, 1, 5, Win(1, 1, 1, 1, same)});
    TileCase fused{p + "FusedProducerConsumer", f, 2, 12, 13, 17, 3, 3, 1, 24,
                   Win(1, 1, 1, 1, same)};
    fused.fused = true;
    cases.push_back(fused);
    // A dilation whose patch cannot fit in shared memory even for one channel: the old
    // thread-per-output schedule, said so in the log.
    cases.push_back({p + "HugeDilationFallsBack", f, 1, 10, 10, 2, 3, 3, 1, 4,
                     Win(1, 1, 60, 60, same), "one input channel's patch"});
  }
  // Conv2DBackpropInput at stride 1: dy's 37 channels in chunks, groups, a dilation with
  // explicit padding, fused.
  for (DataFormat f : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    const std::string p = f == DataFormat::kNCHW ? "NCHW_" : "NHWC_";
    std::vector<TileCase> dx = {
        {p + "DxChunks", f, 2, 20, 30, 64, 3, 3, 1, 37, Win(1, 1, 1, 1, same)},
        {p + "DxGroups3", f, 2, 12, 10, 9, 3, 3, 3, 12, Win(1, 1, 1, 1, same)},
        {p + "DxDilation2Explicit", f, 2, 15, 14, 8, 3, 3, 1, 4, Win(1, 1, 2, 2, expl)},
        {p + "DxValidFused", f, 1, 13, 11, 6, 2, 3, 1, 10, Win(1, 1, 1, 1, valid)}};
    dx.back().fused = true;
    for (TileCase& c : dx) c.backprop = true;
    cases.insert(cases.end(), dx.begin(), dx.end());
  }
  // f64: 8-byte elements halve the channels a chunk holds (5 of 37 here, 8 chunks).
  for (const std::string name : {"NHWC_Chunks37to64", "NCHW_Chunks37to64"}) {
    TileCase f64;
    for (const TileCase& c : cases) {
      if (c.name == name) f64 = c;
    }
    f64.name += "_F64";
    f64.dtype = DType::kF64;
    cases.push_back(f64);
  }
  // NHWC, tiles of 64 outputs x 16 W: 11 of the 37 channels fit (a 54-element patch and
  // 576 filter elements each, next to 1024 accumulators), so 4 chunks of 10, the last 7.
  cases[0].chunks = 4;
  return cases;
}

class ConvTilesOpenCL : public ::testing::TestWithParam<TileCase> {};

TEST_P(ConvTilesOpenCL, MatchesReference) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  const TileCase& tc = GetParam();
  Window2D window = tc.window;
  window.format = tc.format;
  Case c;
  const Shape x_shape = MakeShape(tc.format, tc.n, tc.h, tc.w, tc.c_in);
  const Shape f_shape = {tc.kh, tc.kw, tc.c_in / tc.groups, tc.c_out};
  Tensor y;
  int64_t channels = tc.c_out;  // of the output
  if (tc.backprop) {
    auto g = Conv2DGeometryOf(window, x_shape, f_shape);
    ASSERT_TRUE(g.ok()) << g.status();
    Tensor f = c.Input(tc.dtype, f_shape, 12, -1, 1);
    Tensor dy = c.Input(tc.dtype, g->OutputShape(), 14, -1, 1);
    if (tc.fused) dy = Relu(dy * 0.5 + 0.1);
    y = Conv2DBackpropInput(x_shape, f, dy, window);
    channels = tc.c_in;
  } else {
    Tensor x = c.Input(tc.dtype, x_shape, 11, -1, 1);
    Tensor f = c.Input(tc.dtype, f_shape, 12, -1, 1);
    if (tc.fused) x = Relu(x * 0.5 + 0.1);
    y = Conv2D(x, f, window);
  }
  if (tc.fused) {
    Tensor b = c.Input(tc.dtype, {channels}, 13, -1, 1);
    y = Relu(tc.format == DataFormat::kNHWC ? y + b : y + Reshape(b, {1, channels, 1, 1}));
  }
  c.outputs = {y};
  ASSERT_TRUE(c.graph->status().ok()) << c.graph->status();
  const Device device{Device::Kind::kOpenCL, 0};
  CompileOptions options;
  options.device = device;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string log = (*kernel)->schedule_text();
  SCOPED_TRACE("schedule:\n" + log);
  EXPECT_EQ((*kernel)->scheduler_used(), Scheduler::kGpuFused);
  if (tc.fallback.empty()) {
    EXPECT_NE(log.find("conv, shared-memory tiles"), std::string::npos);
    // Both views (x's or dy's patch, the filter's slice); named for the conv.
    EXPECT_NE(log.find(tc.backprop ? "_dyv" : "_xv"), std::string::npos);
    EXPECT_NE(log.find("_fv"), std::string::npos);
    EXPECT_EQ(Count(log, "staged in shared memory per chunk"), 2);
  } else {
    EXPECT_NE(log.find("conv, no shared-memory tiles: "), std::string::npos);
    EXPECT_NE(log.find(tc.fallback), std::string::npos);
    EXPECT_EQ(log.find("staged in shared memory"), std::string::npos);
  }
  if (tc.chunks > 0) {
    EXPECT_NE(log.find(" " + std::to_string(tc.chunks) + " chunks of "), std::string::npos);
  }
  EXPECT_TRUE(CompileRunCompareOnDevice(c, kConvTol, device, true));
}

INSTANTIATE_TEST_SUITE_P(Conv, ConvTilesOpenCL, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<TileCase>& info) {
                           return info.param.name;
                         });

// Compiled once with the batch a symbol class (the estimate 16), run on OpenCL at 16, 17
// and 40: each block holds one image, so the tiles hold for every batch.
TEST(ConvTilesSymbolicOpenCL, ASymbolicBatchRunsAtEverySize) {
  if (absl::Status s = CheckOpenCLAvailable(); !s.ok()) GTEST_SKIP() << s.message();
  const Device device{Device::Kind::kOpenCL, 0};
  for (DataFormat format : {DataFormat::kNHWC, DataFormat::kNCHW}) {
    Window2D same = Win(1, 1, 1, 1, Padding::kSame);
    same.format = format;
    auto build = [&](Case& c, int64_t n) {
      Tensor x = c.Input(f32, MakeShape(format, n, 9, 11, 13), 31 + n, -1, 1);
      Tensor f = c.Input(f32, {3, 3, 13, 16}, 32, -1, 1);
      c.outputs = {Conv2D(Relu(x), f, same)};
    };
    Case c16;
    build(c16, 16);
    ClusterSpec spec = SpecOf(c16);
    spec.input_symbols = {{0, -1, -1, -1}, {}};
    CompileOptions options;
    options.device = device;
    auto kernel = CompileCluster(spec, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const std::string log = (*kernel)->schedule_text();
    EXPECT_NE(log.find("conv, shared-memory tiles"), std::string::npos) << log;
    EXPECT_EQ((*kernel)->output_types()[0].shape[0], -1) << "the batch is not symbolic";
    for (int64_t n : {16, 17, 40}) {
      Case c;
      build(c, n);
      auto expected = ReferenceOutputs(SpecOf(c), c.values);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::vector<std::unique_ptr<DeviceTensor>> ins;
      std::vector<DeviceTensor*> in_ptrs;
      for (const HostTensor& v : c.values) {
        auto d = DeviceTensor::Allocate(v.type(), device);
        ASSERT_TRUE(d.ok()) << d.status();
        ASSERT_TRUE((*d)->CopyFromHost(v).ok());
        in_ptrs.push_back(d->get());
        ins.push_back(*std::move(d));
      }
      auto out = DeviceTensor::Allocate((*expected)[0].type(), device);
      ASSERT_TRUE(out.ok()) << out.status();
      DeviceTensor* out_ptr = out->get();
      absl::Status run = (*kernel)->RunOnDevice(in_ptrs, {&out_ptr, 1});
      ASSERT_TRUE(run.ok()) << run << " at batch " << n << "\n" << log;
      HostTensor got;
      ASSERT_TRUE((*out)->CopyToHost(&got).ok());
      std::string why;
      EXPECT_TRUE(AllClose(got, (*expected)[0], kConvTol.rtol, kConvTol.atol, &why))
          << (format == DataFormat::kNCHW ? "NCHW" : "NHWC") << " at batch " << n << ": " << why;
    }
  }
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
