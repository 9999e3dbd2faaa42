// DeviceScope (braze/device.h): placement as tf.device.
#include "braze/device.h"

namespace braze {

DeviceScope::DeviceScope(Graph& graph, const std::string& device)
    : graph_(graph), previous_(graph.device()) {
  auto parsed = ParseDevice(device);
  if (!parsed.ok()) {
    graph_.RecordError(parsed.status());
    return;
  }
  graph_.set_device(*parsed);
}

DeviceScope::DeviceScope(Graph& graph, const Device& device)
    : graph_(graph), previous_(graph.device()) {
  graph_.set_device(device);
}

DeviceScope::~DeviceScope() { graph_.set_device(previous_); }

}  // namespace braze
