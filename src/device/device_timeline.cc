// DeviceSpan: see device_timeline.h. The backend does the timing (Backend::BeginDeviceSpan).
#include "device/device_timeline.h"

#include "device/backend.h"
#include "ir/timeline.h"

namespace braze {
namespace device {

DeviceSpan::DeviceSpan(const Device& device, std::string_view name, const char* category,
                       std::string_view args_json)
    : device_(device), category_(category) {
  if (!Timeline::active()) return;
  span_ = BackendFor(device_).BeginDeviceSpan(device_.index);
  if (span_ == nullptr) return;
  name_ = std::string(name);
  args_ = std::string(args_json);
}

DeviceSpan::~DeviceSpan() {
  if (span_ != nullptr) {
    BackendFor(device_).EndDeviceSpan(span_, std::move(name_), category_, std::move(args_), wait_);
  }
}

}  // namespace device
}  // namespace braze
