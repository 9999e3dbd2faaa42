// The Halide side of DeviceTensor, for src/lower only (includes Halide.h).
#ifndef BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_
#define BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_

#include "Halide.h"
#include "device/device_tensor.h"

namespace braze {

struct DeviceTensor::Impl {
  // Dims reversed (Halide's dim 0 is our last), rank 0 as one element of a 1-D buffer,
  // as the pipelines see tensors. It has a host mirror, used only while copying through
  // Halide (the default copy path, device/backend.h).
  Halide::Buffer<> buffer;
};

namespace device {

// The message Halide's runtime reported on this thread since the last call, if any
// (device calls made outside a pipeline have no other way to report one).
std::string TakeRuntimeError();
// The JIT error handler that records those messages (instead of Halide's abort).
void RecordRuntimeError(Halide::JITUserContext*, const char* msg);
// Adds a device backend's handlers (`use` sets them, as its InstallHandlers does for a
// pipeline) to Halide's JIT default handlers, which also record errors (instead of
// Halide's abort), for the device calls Braze makes outside pipelines. Every backend's
// additions so far stay in place. Called when a device backend first initializes.
void InstallDefaultDeviceHandlers(void (*use)(Halide::JITHandlers* handlers));

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_DEVICE_TENSOR_IMPL_H_
