// The Halide side of DeviceTensor, for src/lower only (includes Halide.h).
#ifndef BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_
#define BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_

#include "Halide.h"
#include "device/device_tensor.h"

namespace braze {

struct DeviceTensor::Impl {
  // Dims reversed (Halide's dim 0 is our last), rank 0 as one element of a 1-D buffer,
  // as the pipelines see tensors. It has a host mirror, used only while copying.
  Halide::Buffer<> buffer;
};

namespace device {

// The JIT target of CUDA kernels: the sanitized host target plus CUDA at capability
// 8.6, the highest Halide 14 knows (its PTX runs on sm_90).
Halide::Target CudaJitTarget();

// Halide's CUDA device interface in the JIT runtime, with Braze's handlers installed
// (primary context, default stream, errors recorded instead of abort). Status when CUDA
// is unavailable or `ordinal` is not the device this process uses.
absl::StatusOr<const halide_device_interface_t*> CudaInterface(int ordinal);

// Sets Braze's CUDA context (the device's primary) and stream (the legacy default)
// handlers in `handlers`: every CUDA pipeline's jit_handlers() get them, so no realize
// can see Halide's own context handler while Halide resets its defaults.
void UseCudaHandlers(Halide::JITHandlers* handlers);

// The message Halide's runtime reported on this thread since the last call, if any
// (device calls made outside a pipeline have no other way to report one).
std::string TakeRuntimeError();
// The JIT error handler that records those messages (instead of Halide's abort).
void RecordRuntimeError(Halide::JITUserContext*, const char* msg);
// Sets Halide's JIT default handlers for every device backend at once (errors recorded,
// CUDA's primary context and stream, the OpenCL loader), for the device calls Braze
// makes outside pipelines. Called when a device backend first initializes.
void InstallDefaultDeviceHandlers();

// The JIT target of OpenCL kernels: the sanitized host target plus OpenCL with doubles
// (cl_khr_fp64; POCL has it, and a device without it fails f64 kernels' builds with a
// Status).
Halide::Target OpenCLJitTarget();
// Halide's OpenCL device interface in the JIT runtime, with the isolated loader
// (device/opencl_driver.h) and Braze's error handler installed. Status when OpenCL is
// unavailable or `ordinal` is not 0 (Halide's runtime uses one device per process: the
// first device of the first platform, OpenCLDevices()[0]).
absl::StatusOr<const halide_device_interface_t*> OpenCLInterface(int ordinal);
// Sets the isolated loader's handlers in `handlers` (a pipeline's jit_handlers()).
void UseOpenCLHandlers(Halide::JITHandlers* handlers);

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_
