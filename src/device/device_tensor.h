// DeviceTensor: a dense tensor in a device's memory (CUDA or OpenCL), owned by Braze and
// shared with Halide's device runtime (a Halide buffer with a device allocation) and,
// on CUDA, with cuBLAS (its CUdeviceptr). The runtime keeps values that live on a GPU in these
// between kernels; copies to and from the host happen only where the runtime asks for them (feeds,
// fetches, HostCall ops, cross-device edges) and each one is a call here.
//
// Every CUDA context Braze touches is the device's primary context (the one the CUDA
// runtime API and so cuBLAS use): Halide's JIT runtime is told to acquire it instead
// of creating its own, so device pointers are valid in Halide kernels and cuBLAS alike.
// All work goes to the legacy default stream, which orders Halide kernels, cuBLAS
// calls and copies without extra synchronization.
//
// No Halide include here; the device backends and the compile layer's launch see the
// Halide buffer through HalideDeviceBuffer() (device/device_tensor_impl.h).
#ifndef BRAZE_DEVICE_DEVICE_TENSOR_H_
#define BRAZE_DEVICE_DEVICE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/device.h"
#include "braze/dtype.h"
#include "braze/host_tensor.h"

namespace braze {

class DeviceTensor {
 public:
  // Allocates device memory for `type` on `device` (CUDA or OpenCL; contents
  // undefined). FailedPrecondition when the device's runtime is unavailable
  // (CheckCudaAvailable's or CheckOpenCLAvailable's reason); Unimplemented when another
  // device of the kind is already in use by this process; InvalidArgument for the host.
  static absl::StatusOr<std::unique_ptr<DeviceTensor>> Allocate(const TensorType& type,
                                                                const Device& device = Device{
                                                                    Device::Kind::kCuda, 0});
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const TensorType& type() const { return type_; }
  int64_t num_elements() const;
  size_t num_bytes() const;
  const Device& device() const { return device_; }
  int ordinal() const { return device_.index; }

  // Host -> device; `src` must have type(). `src` may be changed once it returns; the
  // copy may still be running then (CUDA copies from pinned staging asynchronously,
  // ordered before every kernel launched after it: docs/CUDA.md, "Copies").
  absl::Status CopyFromHost(const HostTensor& src);
  // Device -> host into `dst` (resized to type() if it differs). Waits for pending work.
  absl::Status CopyToHost(HostTensor* dst) const;
  // Device -> device (same device, same type), ordered after pending work.
  absl::Status CopyFrom(const DeviceTensor& src);

  // The device handle of the first element (0 for an empty tensor): the CUdeviceptr on
  // CUDA (for cuBLAS), Halide's cl_mem wrapper on OpenCL.
  uint64_t device_address() const;

  struct Impl;  // the Halide buffer; device/device_tensor_impl.h
  Impl& impl() { return *impl_; }

 private:
  DeviceTensor(TensorType type, Device device, std::unique_ptr<Impl> impl);
  TensorType type_;
  Device device_;
  std::unique_ptr<Impl> impl_;
};

// Runs `fn` with device `ordinal`'s primary context current on this thread, for calls
// into CUDA libraries (cuBLAS) that use the current context.
absl::Status RunInCudaContext(int ordinal, const std::function<absl::Status()>& fn);

// Host<->device copies on CUDA go through pinned staging (docs/CUDA.md, "Copies") unless
// turned off here or by BRAZE_CUDA_PINNED=0 (process-wide: for A/B measurements); off,
// they are Halide's synchronous copies from pageable memory.
void SetCudaPinnedCopies(bool enabled);

// The most pinned staging memory in use at once (copies in flight; 256 MiB by default):
// a copy that would pass it goes through pageable memory instead, counted in
// CudaCopyStats::pageable_over_cap and warned of once. For tests and A/B runs.
void SetCudaPinnedBytesInUseLimit(size_t bytes);

// Counts of CUDA host<->device copies by path, and the pinned memory held, since the
// process started.
struct CudaCopyStats {
  int64_t pinned_to_device = 0, pinned_to_host = 0;
  int64_t pageable_to_device = 0, pageable_to_host = 0;
  int64_t pinned_bytes = 0;          // the staging pool's blocks, free or in use
  int64_t pinned_bytes_in_use = 0;   // of those, held by copies in flight now
  int64_t pinned_blocks_reused = 0;  // blocks served from the pool's free blocks
  // Copies that took the pageable path because the pinned bytes in use would pass the
  // cap (SetCudaPinnedBytesInUseLimit); also counted in pageable_to_*.
  int64_t pageable_over_cap = 0;
};
CudaCopyStats GetCudaCopyStats();

// Waits until all work queued on the CUDA device in use (kernels, cuBLAS, copies) is
// done. OK when no CUDA device was ever used.
absl::Status CudaSynchronize();

}  // namespace braze

#endif  // BRAZE_DEVICE_DEVICE_TENSOR_H_
