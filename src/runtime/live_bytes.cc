// Liveness of the step outputs over the plan's step order (runtime/live_bytes.h).
#include "runtime/live_bytes.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace braze {

LiveBytes MeasureLiveBytes(const Plan& plan, Executor& exec) {
  const int n = static_cast<int>(plan.steps.size());
  using Key = std::pair<int, int>;  // node id, output index
  std::map<Key, int> last_read;     // the last step reading each value
  for (int i = 0; i < n; ++i) {
    for (const Tensor& t : plan.steps[i].inputs) last_read[{t.node_id(), t.index()}] = i;
  }
  // freed[i]: bytes whose last reader is step i, released after it.
  std::vector<int64_t> freed(n, 0);
  LiveBytes out;
  int64_t live = 0;
  for (int i = 0; i < n; ++i) {
    for (const Tensor& t : plan.steps[i].outputs) {
      const Value& v = exec.Slot(t);
      if (v.variable >= 0 || !v.defined()) continue;  // a variable's value, or not bound
      absl::StatusOr<TensorType> type = exec.TypeOf(v);
      if (!type.ok()) continue;
      int64_t elements = 1;
      for (int64_t d : type->shape) elements *= std::max<int64_t>(d, 0);
      const int64_t bytes = elements * static_cast<int64_t>(SizeOf(type->dtype));
      out.total += bytes;
      live += bytes;
      const auto it = last_read.find({t.node_id(), t.index()});
      if (it != last_read.end() && it->second > i) freed[it->second] += bytes;
    }
    out.peak = std::max(out.peak, live);
    live -= freed[i];
  }
  return out;
}

}  // namespace braze
