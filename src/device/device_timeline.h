// Device time in the timeline (ir/timeline.h): the host's bars show when work was
// queued; while a timeline is active, a DeviceSpan also brackets the device work queued
// in its lifetime (a kernel launch, a library GEMM, a copy) with device events, and once
// the device has run it, a bar of the device's own start and duration goes on the
// device's row ("cuda:0 (device time)"). Backends without device events (the host,
// OpenCL) record nothing here. CUDA: cuda_backend.cc; docs/CUDA.md, "Timeline".
//
// Halide-free: the runtime's steps use it beside their TimelineEvent.
#ifndef BRAZE_DEVICE_DEVICE_TIMELINE_H_
#define BRAZE_DEVICE_DEVICE_TIMELINE_H_

#include <string>
#include <string_view>

#include "braze/device.h"

namespace braze {
namespace device {

class DeviceSpan {
 public:
  // `name` and `category` as the host bar's; `args_json` the members of its "args".
  // Copied only while a timeline is active.
  DeviceSpan(const Device& device, std::string_view name, const char* category,
             std::string_view args_json = {});
  ~DeviceSpan();
  DeviceSpan(const DeviceSpan&) = delete;
  // For work the host waits for anyway (a copy to the host): the span's end waits for
  // the device too, so its bar is written at once, not left for a later wait (and lost
  // if the timeline stops first).
  void WaitAtEnd() { wait_ = true; }
  DeviceSpan& operator=(const DeviceSpan&) = delete;

 private:
  const Device device_;
  void* span_ = nullptr;  // the backend's, while timing
  std::string name_;
  const char* category_;
  std::string args_;
  bool wait_ = false;
};

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_DEVICE_TIMELINE_H_
