// Host<->device copies on a real CUDA device through pinned staging (docs/CUDA.md,
// "Copies"): exact round trips at odd sizes, and the staging block not written again
// before the async copy from it has read it. Skipped without a GPU; tools/gpu-check.sh
// runs device_tests whole. The same logic runs without a GPU against a stand-in driver
// (test/fake_cuda); whole sessions with pinned copies: runtime_tests' CudaPinnedCopies.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "braze/device.h"
#include "braze/host_tensor.h"
#include "device/device_tensor.h"

namespace braze {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!CheckCudaAvailable().ok()) GTEST_SKIP() << CheckCudaAvailable().message()

std::unique_ptr<DeviceTensor> Allocate(std::vector<int64_t> shape) {
  auto t = DeviceTensor::Allocate(TensorType{DType::kF32, std::move(shape)});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

void ExpectEqual(const HostTensor& got, const HostTensor& want, const char* what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << what << " element " << i;
  }
}

TEST(CudaPinnedCopies, RoundTripOddSizesExactly) {
  SKIP_WITHOUT_CUDA();
  SetCudaPinnedCopies(true);
  const CudaCopyStats before = GetCudaCopyStats();
  int copies = 0;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1023}, int64_t{4097}, int64_t{128 * 784},
                    (int64_t{1} << 20) + 3}) {
    auto t = Allocate({n});
    ASSERT_NE(t, nullptr);
    HostTensor in = HostTensor::RandomNormal(DType::kF32, {n}, 100 + n, 0, 1), out;
    ASSERT_TRUE(t->CopyFromHost(in).ok());
    ASSERT_TRUE(t->CopyToHost(&out).ok());
    ExpectEqual(out, in, "round trip");
    ++copies;
  }
  const CudaCopyStats after = GetCudaCopyStats();
  EXPECT_EQ(after.pinned_to_device - before.pinned_to_device, copies);
  EXPECT_EQ(after.pinned_to_host - before.pinned_to_host, copies);
  EXPECT_EQ(after.pageable_to_device, before.pageable_to_device);
}

// An upload returns before the device has read the staging block: a second upload into
// the same tensor must wait before writing the block, or the first copy (and the device
// copy queued after it) would see the second's data.
TEST(CudaPinnedCopies, ASecondUploadDoesNotOverwriteAnInFlightOne) {
  SKIP_WITHOUT_CUDA();
  SetCudaPinnedCopies(true);
  const int64_t n = (int64_t{1} << 22) + 1;  // 16 MiB: the copy is still running
  auto t = Allocate({n});
  auto snapshot = Allocate({n});
  ASSERT_NE(t, nullptr);
  ASSERT_NE(snapshot, nullptr);
  HostTensor a = HostTensor::RandomNormal(DType::kF32, {n}, 1, 0, 1);
  HostTensor b = HostTensor::RandomUniform(DType::kF32, {n}, 2, 5, 6);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t->CopyFromHost(a).ok());
    ASSERT_TRUE(snapshot->CopyFrom(*t).ok());  // queued after the upload of a
    ASSERT_TRUE(t->CopyFromHost(b).ok());
    HostTensor got_snapshot, got_t;
    ASSERT_TRUE(snapshot->CopyToHost(&got_snapshot).ok());
    ASSERT_TRUE(t->CopyToHost(&got_t).ok());
    ExpectEqual(got_snapshot, a, "the device copy of the first upload");
    ExpectEqual(got_t, b, "the second upload");
  }
}

// Blocks follow the copies, not the tensors: 48 live tensors of 4 MiB each, uploaded
// back to back, hold no pinned memory once the device is done, and the pool never holds
// more than its two caps (256 MiB in use, 256 MiB free) however many tensors live.
TEST(CudaPinnedCopies, LiveTensorsHoldNoPinnedMemoryOnceTheirCopiesAreDone) {
  SKIP_WITHOUT_CUDA();
  SetCudaPinnedCopies(true);
  const int64_t n = int64_t{1} << 20;
  std::vector<std::unique_ptr<DeviceTensor>> live;
  std::vector<HostTensor> values;
  for (int i = 0; i < 48; ++i) {
    live.push_back(Allocate({n}));
    ASSERT_NE(live.back(), nullptr);
    values.push_back(HostTensor::RandomNormal(DType::kF32, {n}, 300 + i, 0, 1));
    ASSERT_TRUE(live.back()->CopyFromHost(values.back()).ok());
  }
  EXPECT_LE(GetCudaCopyStats().pinned_bytes_in_use, int64_t{256} << 20);
  ASSERT_TRUE(CudaSynchronize().ok());
  const CudaCopyStats stats = GetCudaCopyStats();
  EXPECT_EQ(stats.pinned_bytes_in_use, 0);
  EXPECT_LE(stats.pinned_bytes, int64_t{512} << 20);
  for (size_t i = 0; i < live.size(); i += 7) {
    HostTensor out;
    ASSERT_TRUE(live[i]->CopyToHost(&out).ok());
    ExpectEqual(out, values[i], "a live tensor's upload");
  }
}

}  // namespace
}  // namespace braze
