// Liveness of the step outputs over the plan's step order (runtime/live_bytes.h).
#include "runtime/live_bytes.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "passes/gated_update.h"

namespace braze {

namespace {

using Key = std::pair<int, int>;  // node id, output index

bool IsUpdate(OpKind op) {
  return op == OpKind::kAssign || op == OpKind::kAssignAdd || op == OpKind::kAssignSub;
}

// By node id: computed from a fed value (the node itself fed, or an input that is).
std::vector<bool> FromFeeds(const Graph& g, const std::vector<bool>& fed) {
  std::vector<bool> data(g.num_nodes(), false);
  for (int id = 0; id < g.num_nodes(); ++id) {
    data[id] = id < static_cast<int>(fed.size()) && fed[id];
    for (const Tensor& in : g.node(id).inputs()) data[id] = data[id] || data[in.node_id()];
  }
  return data;
}

// The peak of the values `counted` accepts, live from their step to their last reader.
int64_t Peak(const Plan& plan, Executor& exec, const std::map<Key, int>& last_read,
             const std::function<bool(const Tensor&)>& counted, int64_t* total) {
  const int n = static_cast<int>(plan.steps.size());
  std::vector<int64_t> freed(n, 0);  // bytes whose last reader is step i, freed after it
  int64_t live = 0, peak = 0;
  for (int i = 0; i < n; ++i) {
    for (const Tensor& t : plan.steps[i].outputs) {
      const Value& v = exec.Slot(t);
      if (v.variable >= 0 || !v.defined() || !counted(t)) continue;
      absl::StatusOr<TensorType> type = exec.TypeOf(v);
      if (!type.ok()) continue;
      int64_t elements = 1;
      for (int64_t d : type->shape) elements *= std::max<int64_t>(d, 0);
      const int64_t bytes = elements * static_cast<int64_t>(SizeOf(type->dtype));
      if (total != nullptr) *total += bytes;
      live += bytes;
      const auto it = last_read.find({t.node_id(), t.index()});
      if (it != last_read.end() && it->second > i) freed[it->second] += bytes;
    }
    peak = std::max(peak, live);
    live -= freed[i];
  }
  return peak;
}

}  // namespace

LiveBytes MeasureLiveBytes(const Graph& g, const Plan& plan, const std::vector<bool>& fed,
                           Executor& exec) {
  std::map<Key, int> last_read;  // the last step reading each value
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (const Tensor& t : plan.steps[i].inputs) {
      last_read[{t.node_id(), t.index()}] = static_cast<int>(i);
    }
  }
  // Values an Assign stores (and the Assigns' own are updates too); through a gated
  // update's Select (passes/gated_update.h), the value it commits when its gate is true.
  std::set<Key> updates;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (id < static_cast<int>(plan.needed.size()) && plan.needed[id] && IsUpdate(n.op())) {
      updates.insert({n.input(1).node_id(), n.input(1).index()});
      if (std::optional<GatedUpdate> gated = MatchGatedUpdate(g, id)) {
        updates.insert({gated->value.node_id(), gated->value.index()});
      }
    }
  }
  const std::vector<bool> data = FromFeeds(g, fed);
  LiveBytes out;
  out.peak = Peak(
      plan, exec, last_read, [](const Tensor&) { return true; }, &out.total);
  out.activation_peak = Peak(
      plan, exec, last_read,
      [&](const Tensor& t) {
        return data[t.node_id()] && !IsUpdate(g.node(t.node_id()).op()) &&
               updates.count({t.node_id(), t.index()}) == 0;
      },
      nullptr);
  return out;
}

}  // namespace braze
