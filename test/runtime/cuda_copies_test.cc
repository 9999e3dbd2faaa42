// Sessions on a real CUDA device with pinned copies (docs/CUDA.md, "Copies"): a training
// step's losses and variables equal with pinned copies and with Halide's pageable ones,
// and close to the reference; and device time in the timeline ("Timeline"). The copies
// themselves: device_tests' CudaPinnedCopies.
// Skipped without a GPU; tools/gpu-check.sh runs them (its runtime_tests filter '*Cuda*').
// The same logic runs without a GPU against a stand-in driver (test/fake_cuda).
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "braze/braze.h"
#include "device/device_tensor.h"
#include "gtest/gtest.h"
#include "ir/timeline.h"

namespace braze {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!CheckCudaAvailable().ok()) GTEST_SKIP() << CheckCudaAvailable().message()

// The softmax regression step of bench/cuda_bench.cc (BM_TrainStep_cuda) at odd sizes:
// three steps with pinned copies, three with Halide's pageable copies (the same kernels:
// the same results), both against the reference executor.
TEST(CudaPinnedCopies, TrainStepsEqualPageableAndMatchTheReference) {
  SKIP_WITHOUT_CUDA();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {37, 29}, "x");
  Tensor labels = Placeholder(g, DType::kF32, {37, 7}, "labels");
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {29, 7}, 9, 0, 0.1), "w");
  Tensor bias = Variable(g, HostTensor::RandomNormal(DType::kF32, {7}, 10, 0, 0.1), "b");
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + bias, labels));
  auto train = Minimize(Optimizer::Sgd(0.1), loss, {w, bias});
  ASSERT_TRUE(train.ok()) << train.status();
  HostTensor ys(DType::kF32, {37, 7});
  for (int i = 0; i < 37; ++i) ys.SetDouble(i * 7 + (i * 5) % 7, 1.0);
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {37, 29}, 11, -1, 1)},
                       {labels, ys}};
  auto run = [&](const SessionOptions& options, bool pinned) {
    SetCudaPinnedCopies(pinned);
    Session s(g, options);
    std::vector<double> values;
    for (int step = 0; step < 3; ++step) {
      std::vector<HostTensor> out;
      absl::Status st = s.RunInto(feeds, {loss}, &out, *train);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) return values;
      values.push_back(out[0].GetDouble(0));
    }
    auto vars = s.Run({}, {w, bias});
    EXPECT_TRUE(vars.ok()) << vars.status();
    if (!vars.ok()) return values;
    for (const HostTensor& v : *vars) {
      for (int64_t i = 0; i < v.num_elements(); ++i) values.push_back(v.GetDouble(i));
    }
    return values;
  };
  SessionOptions cuda;
  cuda.device = "cuda:0";
  cuda.strict = true;
  SessionOptions reference;
  reference.reference_only = true;
  const CudaCopyStats before = GetCudaCopyStats();
  const std::vector<double> pinned = run(cuda, true);
  const CudaCopyStats mid = GetCudaCopyStats();
  const std::vector<double> pageable = run(cuda, false);
  const CudaCopyStats after = GetCudaCopyStats();
  SetCudaPinnedCopies(true);
  const std::vector<double> want = run(reference, true);
  ASSERT_EQ(pinned.size(), want.size());
  ASSERT_EQ(pageable.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    // The same kernels on the same data: equal but for a library GEMM's reduction order.
    EXPECT_NEAR(pinned[i], pageable[i], 1e-6 * (1 + std::abs(pageable[i])))
        << "value " << i << " (losses first, then w and b)";
    EXPECT_NEAR(pinned[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "value " << i;
  }
  // Each step feeds x and labels and fetches the loss.
  EXPECT_GE(mid.pinned_to_device - before.pinned_to_device, 6);
  EXPECT_GE(mid.pinned_to_host - before.pinned_to_host, 3);
  EXPECT_EQ(mid.pageable_to_device, before.pageable_to_device);
  EXPECT_GE(after.pageable_to_device - mid.pageable_to_device, 6);
  EXPECT_EQ(after.pinned_to_device, mid.pinned_to_device);
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// With a timeline active, every kernel launch and copy on cuda:0 also gets a bar of
// device time on the row "cuda:0 (device time)" (docs/CUDA.md, "Timeline"): as many
// cluster bars there as on the host's row, all written by the time the fetch returns.
TEST(CudaTimeline, LaunchesAndCopiesGetDeviceTimeBars) {
  SKIP_WITHOUT_CUDA();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {257, 129}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(Tanh(x) * 3.0f);
  }
  SessionOptions options;
  options.device = "cuda:0";
  options.strict = true;
  Session s(g, options);
  const Feeds feeds = {{x, HostTensor::RandomNormal(DType::kF32, {257, 129}, 5, 0, 1)}};
  ASSERT_TRUE(s.Run(feeds, {y}).ok());  // compiled before the trace
  const std::string path = ::testing::TempDir() + "braze_cuda_timeline.json";
  ASSERT_TRUE(Timeline::Start(path).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Run(feeds, {y}).ok());
  ASSERT_TRUE(Timeline::Stop().ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string trace = text.str();
  ASSERT_EQ(Occurrences(trace, R"x("args":{"name":"cuda:0 (device time)"})x"), 1) << trace;
  // Bars per (row, category), the device's row told apart by its tid.
  std::string device_tid;
  std::map<std::pair<bool, std::string>, int> bars;  // (on the device row, category)
  std::istringstream lines(trace);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("cuda:0 (device time)") != std::string::npos) {
      const size_t at = line.find("\"tid\":");
      device_tid = line.substr(at, line.find(',', at) - at);
      continue;
    }
    if (line.find(R"x("ph":"X")x") == std::string::npos) continue;
    // "tid":N ends the event's numbers: a comma (its args follow) or the closing brace.
    const bool on_device =
        !device_tid.empty() && (line.find(device_tid + ",") != std::string::npos ||
                                line.find(device_tid + "}") != std::string::npos);
    for (const char* cat : {"cluster", "copy"}) {
      if (line.find(std::string("\"cat\":\"") + cat + "\"") != std::string::npos) {
        ++bars[{on_device, cat}];
      }
    }
  }
  // Each run: its cluster launch(es), the feed's copy and the fetch's, on both rows.
  const int host_clusters = bars[std::make_pair(false, "cluster")];
  const int device_clusters = bars[std::make_pair(true, "cluster")];
  const int host_copies = bars[std::make_pair(false, "copy")];
  const int device_copies = bars[std::make_pair(true, "copy")];
  EXPECT_GE(host_clusters, 3) << trace;
  EXPECT_EQ(device_clusters, host_clusters) << trace;
  EXPECT_EQ(host_copies, 6) << trace;
  EXPECT_EQ(device_copies, 6) << trace;
}

}  // namespace
}  // namespace braze
