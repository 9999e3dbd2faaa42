// Braze's CUDA driver wrapper and host<->device copies (device/cuda_backend.cc) against
// a stand-in driver (fake_libcuda.cc, found first through LD_LIBRARY_PATH), so that the
// pinned copies' logic runs on machines without a GPU: the entry points resolved, a
// staging block per copy in flight, given back once the copy's event is done and reused
// by every later copy of its class (whatever tensor), the cap on pinned bytes in use,
// the wait for an upload into memory being freed, the pageable fallback with its
// one-time warnings, and the driver's errors as Statuses. The real copies run on a GPU in
// runtime_tests
// (`Cuda*PinnedCopies*`, tools/gpu-check.sh).
//
// Two ctest entries run this binary: fake_cuda_tests (the complete driver) and
// fake_cuda_lacking_tests (a driver without cuMemHostAlloc: FAKE_CUDA_LACKING=1).
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "braze/device.h"
#include "braze/host_tensor.h"
#include "braze/logging.h"
#include "device/device_tensor.h"
#include "device/features.h"
#include "ir/timeline.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

long Calls(const char* name) {
  using Fn = long (*)(const char*);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "fake_cuda_calls"));
  return fn == nullptr ? -1 : fn(name);
}

bool Lacking() { return std::getenv("FAKE_CUDA_LACKING") != nullptr; }

// The warnings logged while alive.
class Warnings {
 public:
  Warnings() {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      std::lock_guard<std::mutex> lock(mu_);
      if (severity == LogSeverity::kWarning) lines_.emplace_back(text);
    });
  }
  ~Warnings() { SetLogSink(nullptr); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CheckCudaAvailable().ok()) << CheckCudaAvailable();
    ASSERT_GE(Calls("cuInit"), 1) << "libcuda.so.1 is not the fake driver: run through ctest";
    SetCudaPinnedCopies(true);
  }
  static std::unique_ptr<DeviceTensor> Allocate(std::vector<int64_t> shape) {
    auto t = DeviceTensor::Allocate(TensorType{DType::kF32, shape});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  }
  static void ExpectRoundTrip(DeviceTensor& t, uint64_t seed) {
    HostTensor in = HostTensor::RandomNormal(DType::kF32, t.type().shape, seed, 0, 1);
    ASSERT_TRUE(t.CopyFromHost(in).ok());
    HostTensor out;
    ASSERT_TRUE(t.CopyToHost(&out).ok());
    ASSERT_EQ(out.type(), in.type());
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      ASSERT_EQ(out.data<float>()[i], in.data<float>()[i]) << "element " << i;
    }
  }
};

// Stored GPU schedules are keyed by the device's compute capability, read from the
// driver (the stand-in reports 8 for every attribute: sm_88), and by the target's GPU
// features without the host's CPU features (docs/SCHEDULES.md, "GPU clusters").
TEST_F(FakeCuda, StoredSchedulesAreKeyedByTheComputeCapability) {
  const long before = Calls("cuDeviceGetAttribute");
  absl::StatusOr<std::string> target = device::ScheduleTargetString(Device{Device::Kind::kCuda, 0});
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_THAT(*target, ::testing::EndsWith("-cuda-cuda_capability_86 device=sm_88"));
  EXPECT_THAT(*target, ::testing::Not(HasSubstr("avx")));
  EXPECT_EQ(Calls("cuDeviceGetAttribute"), before + 2);  // major, minor
  absl::StatusOr<std::string> host = device::ScheduleTargetString(Device{});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(*host, *device::JitTargetString(Device{}));  // the CPU's: unchanged
}

TEST_F(FakeCuda, CopiesGoThroughPinnedBlocksGivenBackOnceDone) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  const CudaCopyStats before = GetCudaCopyStats();
  const long host_allocs = Calls("cuMemHostAlloc");
  auto t = Allocate({7, 13});  // 364 bytes: one 4 KiB block
  ASSERT_NE(t, nullptr);
  ExpectRoundTrip(*t, 1);
  EXPECT_EQ(Calls("cuMemHostAlloc"), host_allocs + 1);
  EXPECT_EQ(Calls("cuMemcpyHtoD"), 0) << "Halide's pageable copy was used";
  EXPECT_EQ(Calls("cuMemcpyDtoH"), 0);
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0) << "a block outlived its copy";
  const long syncs = Calls("cuEventSynchronize");
  const long dtoh_syncs = Calls("cuStreamSynchronize");
  // More uploads: each takes the block the last one gave back once its event was done;
  // none waits (no event or stream synchronization).
  HostTensor in = HostTensor::RandomNormal(DType::kF32, {7, 13}, 2, 0, 1);
  ASSERT_TRUE(t->CopyFromHost(in).ok());
  ASSERT_TRUE(t->CopyFromHost(in).ok());
  EXPECT_EQ(Calls("cuEventSynchronize"), syncs);
  EXPECT_EQ(Calls("cuStreamSynchronize"), dtoh_syncs) << "an upload synchronized the stream";
  EXPECT_EQ(Calls("cuMemHostAlloc"), host_allocs + 1) << "the block was not reused";
  const CudaCopyStats after = GetCudaCopyStats();
  EXPECT_EQ(after.pinned_to_device - before.pinned_to_device, 3);
  EXPECT_EQ(after.pinned_to_host - before.pinned_to_host, 1);
  EXPECT_EQ(after.pageable_to_device, before.pageable_to_device);
}

// The review's risk: a block per live tensor pinned as much host memory as the model's
// variables. Now 40 live tensors of one class, each uploaded and read back, share one
// block.
TEST_F(FakeCuda, LiveTensorsHoldNoPinnedMemory) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  const long host_allocs = Calls("cuMemHostAlloc");
  const int64_t reused = GetCudaCopyStats().pinned_blocks_reused;
  std::vector<std::unique_ptr<DeviceTensor>> live;
  for (int i = 0; i < 40; ++i) {
    live.push_back(Allocate({128, 1000}));  // 512000 bytes: the 512 KiB class
    ASSERT_NE(live.back(), nullptr);
    ExpectRoundTrip(*live.back(), 100 + i);
  }
  EXPECT_LE(Calls("cuMemHostAlloc"), host_allocs + 1) << "a block per tensor";
  EXPECT_GE(GetCudaCopyStats().pinned_blocks_reused, reused + 79);
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0);
  // A larger class needs its own block.
  auto b = Allocate({300, 437});  // 524400 bytes: 1 MiB
  ASSERT_NE(b, nullptr);
  const long allocs = Calls("cuMemHostAlloc");
  ExpectRoundTrip(*b, 5);
  EXPECT_EQ(Calls("cuMemHostAlloc"), allocs + 1);
}

// Uploads the device has not done yet keep their blocks: a later upload takes another
// block, and a synchronization gives them all back.
TEST_F(FakeCuda, AnUploadInFlightKeepsItsBlockUntilItsEventIsDone) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  ASSERT_TRUE(CudaSynchronize().ok());
  auto a = Allocate({1000});  // 4000 bytes: the 4 KiB class
  auto b = Allocate({1000});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  HostTensor in = HostTensor::RandomNormal(DType::kF32, {1000}, 14, 0, 1);
  setenv("FAKE_CUDA_EVENTS_PENDING", "1", 1);
  ASSERT_TRUE(a->CopyFromHost(in).ok());
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 4096);
  ASSERT_TRUE(b->CopyFromHost(in).ok());
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 8192) << "a block in flight was reused";
  unsetenv("FAKE_CUDA_EVENTS_PENDING");
  ASSERT_TRUE(CudaSynchronize().ok());
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0);
  // A copy back waits for the stream: the uploads before it give their blocks back.
  setenv("FAKE_CUDA_EVENTS_PENDING", "1", 1);
  ASSERT_TRUE(a->CopyFromHost(in).ok());
  HostTensor out;
  ASSERT_TRUE(a->CopyToHost(&out).ok());
  unsetenv("FAKE_CUDA_EVENTS_PENDING");
  EXPECT_EQ(out.data<float>()[999], in.data<float>()[999]);
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0);
}

// A tensor freed while an upload into it is in flight: the upload is waited for before
// its device memory goes (Halide's device_free), and its block is given back.
TEST_F(FakeCuda, FreeingATensorWaitsForTheUploadIntoIt) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  ASSERT_TRUE(CudaSynchronize().ok());
  auto other = Allocate({50});
  ASSERT_NE(other, nullptr);
  setenv("FAKE_CUDA_EVENTS_PENDING", "1", 1);
  {
    auto t = Allocate({1000});
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->CopyFromHost(HostTensor::Filled(DType::kF32, {1000}, 2.5)).ok());
    ASSERT_TRUE(other->CopyFromHost(HostTensor::Filled(DType::kF32, {50}, 1)).ok());
    const long syncs = Calls("cuEventSynchronize");
    t.reset();
    EXPECT_EQ(Calls("cuEventSynchronize"), syncs + 1);
  }
  // Only t's upload (and those before it) were waited for: other's is still out.
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 4096);
  unsetenv("FAKE_CUDA_EVENTS_PENDING");
  ASSERT_TRUE(CudaSynchronize().ok());
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0);
}

// Over the cap on pinned bytes in use, a copy takes the pageable path: counted, with one
// warning naming the cap; a copy back first waits for the stream (it would anyway), so
// only one larger than the cap itself is pageable.
TEST_F(FakeCuda, CopiesOverThePinnedCapArePageableCountedAndWarned) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  Warnings warnings;
  ASSERT_TRUE(CudaSynchronize().ok());
  SetCudaPinnedBytesInUseLimit(3 * 16384);
  const CudaCopyStats before = GetCudaCopyStats();
  std::vector<std::unique_ptr<DeviceTensor>> t;
  setenv("FAKE_CUDA_EVENTS_PENDING", "1", 1);
  for (int i = 0; i < 4; ++i) {
    t.push_back(Allocate({4000}));  // 16000 bytes: the 16 KiB class
    ASSERT_NE(t.back(), nullptr);
    HostTensor in = HostTensor::RandomNormal(DType::kF32, {4000}, 20 + i, 0, 1);
    ASSERT_TRUE(t.back()->CopyFromHost(in).ok());
  }
  CudaCopyStats after = GetCudaCopyStats();
  EXPECT_EQ(after.pinned_to_device - before.pinned_to_device, 3);
  EXPECT_EQ(after.pageable_to_device - before.pageable_to_device, 1);
  EXPECT_EQ(after.pageable_over_cap - before.pageable_over_cap, 1);
  EXPECT_EQ(after.pinned_bytes_in_use, 3 * 16384);
  // The copy back: pinned, after waiting for the stream, which gave the blocks back.
  HostTensor out;
  ASSERT_TRUE(t[0]->CopyToHost(&out).ok());
  EXPECT_EQ(GetCudaCopyStats().pinned_to_host - after.pinned_to_host, 1);
  EXPECT_EQ(GetCudaCopyStats().pinned_bytes_in_use, 0);
  unsetenv("FAKE_CUDA_EVENTS_PENDING");
  // Larger than the cap: pageable both ways, exact.
  auto big = Allocate({13000});  // 52000 bytes: the 64 KiB class
  ASSERT_NE(big, nullptr);
  ExpectRoundTrip(*big, 30);
  after = GetCudaCopyStats();
  EXPECT_EQ(after.pageable_over_cap - before.pageable_over_cap, 3);
  SetCudaPinnedBytesInUseLimit(size_t{256} << 20);
  ASSERT_EQ(warnings.lines().size(), 1u) << "one warning per process, not per copy";
  EXPECT_THAT(warnings.lines()[0], HasSubstr("pinned staging in use is capped"));
  EXPECT_THAT(warnings.lines()[0], HasSubstr("a copy of 16000 bytes would put the pinned "
                                             "bytes in use (49152"));
  EXPECT_THAT(warnings.lines()[0], HasSubstr("over the cap of 49152 bytes"));
  ExpectRoundTrip(*big, 31);  // under the default cap: pinned again
  EXPECT_EQ(GetCudaCopyStats().pageable_over_cap, after.pageable_over_cap);
}

TEST_F(FakeCuda, AFailedPinFallsBackToPageableCopiesWithOneWarning) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  Warnings warnings;
  setenv("FAKE_CUDA_FAIL_HOST_ALLOC", "1", 1);
  const CudaCopyStats before = GetCudaCopyStats();
  auto a = Allocate({1 << 21});  // 8 MiB: a class no earlier test left in the pool
  auto b = Allocate({1 << 21});
  ASSERT_NE(a, nullptr);
  ExpectRoundTrip(*a, 6);
  ExpectRoundTrip(*b, 7);
  unsetenv("FAKE_CUDA_FAIL_HOST_ALLOC");
  const CudaCopyStats after = GetCudaCopyStats();
  EXPECT_EQ(after.pageable_to_device - before.pageable_to_device, 2);
  EXPECT_EQ(after.pageable_to_host - before.pageable_to_host, 2);
  EXPECT_EQ(after.pinned_to_device, before.pinned_to_device);
  EXPECT_GE(Calls("cuMemcpyHtoD"), 2) << "Halide's copy carried the data";
  ASSERT_EQ(warnings.lines().size(), 1u) << "one warning per process, not per copy";
  EXPECT_THAT(warnings.lines()[0], HasSubstr("pageable"));
  EXPECT_THAT(warnings.lines()[0], HasSubstr("cuMemHostAlloc of 8388608 bytes failed: "
                                             "CUDA_ERROR_OUT_OF_MEMORY (2)"));
  // Pinning works again: the next tensor's copies are pinned.
  auto c = Allocate({5});
  ASSERT_NE(c, nullptr);
  ExpectRoundTrip(*c, 8);
  EXPECT_EQ(GetCudaCopyStats().pinned_to_device, after.pinned_to_device + 1);
}

TEST_F(FakeCuda, ADriverErrorInACopyIsAStatusNamingTheCall) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  auto t = Allocate({3, 5});
  ASSERT_NE(t, nullptr);
  setenv("FAKE_CUDA_FAIL_HTOD_ASYNC", "700", 1);
  absl::Status s = t->CopyFromHost(HostTensor::Filled(DType::kF32, {3, 5}, 1.5));
  unsetenv("FAKE_CUDA_FAIL_HTOD_ASYNC");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cuMemcpyHtoDAsync of 60 bytes failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  ExpectRoundTrip(*t, 9);  // the tensor is usable after the failed copy
}

TEST_F(FakeCuda, PinnedCopiesTurnedOffUsePageableCopiesWithoutAWarning) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  Warnings warnings;
  SetCudaPinnedCopies(false);
  const CudaCopyStats before = GetCudaCopyStats();
  auto t = Allocate({11});
  ASSERT_NE(t, nullptr);
  ExpectRoundTrip(*t, 10);
  SetCudaPinnedCopies(true);
  const CudaCopyStats after = GetCudaCopyStats();
  EXPECT_EQ(after.pageable_to_device - before.pageable_to_device, 1);
  EXPECT_EQ(after.pinned_to_device, before.pinned_to_device);
  EXPECT_TRUE(warnings.lines().empty()) << warnings.lines()[0];
}

TEST_F(FakeCuda, ADriverWithoutThePinnedEntryPointsCopiesThroughHalideAndSaysWhy) {
  if (!Lacking()) GTEST_SKIP() << "fake_cuda_lacking_tests' case";
  Warnings warnings;
  auto t = Allocate({4, 4});
  ASSERT_NE(t, nullptr);
  ExpectRoundTrip(*t, 11);
  ExpectRoundTrip(*t, 12);
  EXPECT_EQ(GetCudaCopyStats().pinned_to_device, 0);
  EXPECT_EQ(GetCudaCopyStats().pageable_to_device, 2);
  EXPECT_EQ(Calls("cuMemcpyHtoD"), 2);
  ASSERT_EQ(warnings.lines().size(), 1u);
  EXPECT_THAT(warnings.lines()[0], HasSubstr("lacks an entry point of the pinned copies"));
}

// Copies with a timeline active: each also gets a bar on the device's row, timed by the
// driver's events (the fake's elapsed time is always 0.5 ms).
std::string TraceOfARoundTrip(const char* name) {
  const std::string path = ::testing::TempDir() + "braze_fake_cuda_" + name + ".json";
  EXPECT_TRUE(Timeline::Start(path).ok());
  auto t = DeviceTensor::Allocate(TensorType{DType::kF32, {9}});
  EXPECT_TRUE(t.ok());
  HostTensor in = HostTensor::Filled(DType::kF32, {9}, 2), out;
  EXPECT_TRUE((*t)->CopyFromHost(in).ok());
  EXPECT_TRUE((*t)->CopyToHost(&out).ok());
  EXPECT_TRUE(Timeline::Stop().ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(FakeCuda, CopiesGetDeviceTimeBarsOnTheDevicesRow) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  const long elapsed = Calls("cuEventElapsedTime");
  const std::string trace = TraceOfARoundTrip("device_time");
  EXPECT_EQ(Occurrences(trace, R"x("args":{"name":"cuda:0 (device time)"})x"), 1) << trace;
  // Each copy: a bar of 500 us (the fake's 0.5 ms) on the device row; the copy to the
  // host synchronized, so both were written before the timeline stopped.
  EXPECT_EQ(Occurrences(trace, R"x("dur":500.000)x"), 2) << trace;
  EXPECT_EQ(Occurrences(trace, R"x("name":"copy host -> device","cat":"copy")x"), 1) << trace;
  EXPECT_EQ(Occurrences(trace, R"x("name":"copy device -> host","cat":"copy")x"), 1) << trace;
  EXPECT_EQ(Occurrences(trace, R"x("bytes":36)x"), 2) << trace;
  EXPECT_EQ(Calls("cuEventElapsedTime"), elapsed + 4);  // from the anchor, and the length
}

TEST_F(FakeCuda, NoDeviceRowWithoutATimeline) {
  if (Lacking()) GTEST_SKIP() << "the complete driver's case";
  const long elapsed = Calls("cuEventElapsedTime");
  const long created = Calls("cuEventCreate");
  auto t = Allocate({9});
  ASSERT_NE(t, nullptr);
  ExpectRoundTrip(*t, 13);
  EXPECT_EQ(Calls("cuEventElapsedTime"), elapsed);
  EXPECT_LE(Calls("cuEventCreate"), created + 1);  // at most the upload's event
}

TEST_F(FakeCuda, ADriverWithoutThePinnedEntryPointsHasNoDeviceRow) {
  if (!Lacking()) GTEST_SKIP() << "fake_cuda_lacking_tests' case";
  const std::string trace = TraceOfARoundTrip("lacking");
  EXPECT_EQ(Occurrences(trace, "device time"), 0) << trace;
  EXPECT_EQ(Calls("cuEventElapsedTime"), 0);
}

}  // namespace
}  // namespace braze
