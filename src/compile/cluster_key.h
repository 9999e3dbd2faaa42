// The compile-cache key of a cluster: its structure (ops, typed attrs, internal wiring,
// which argument feeds which input, which values are results), the concrete input types,
// and the compile options. Two clusters with equal keys compile to the same kernel, even
// across graphs and sessions. Constants enter by a hash of their bytes.
#ifndef BRAZE_COMPILE_CLUSTER_KEY_H_
#define BRAZE_COMPILE_CLUSTER_KEY_H_

#include <string>

#include "compile/compile.h"

namespace braze {

std::string ClusterKey(const ClusterSpec& spec, const CompileOptions& options);

// What a stored schedule (schedule/stored_schedule.h) for `spec`'s kernels on `device`
// is named and checked by: `hash`, the ScheduleKeyHash of the cluster key under the
// default compile options on that device (threads and the device's index do not enter:
// an entry's factors are per thread), and `target`, device::ScheduleTargetString (a
// GPU's architecture too, which then enters the key as well). The runtime's lookup and
// braze-tune's entries use this one function.
struct StoredScheduleKey {
  std::string hash, target;
};
absl::StatusOr<StoredScheduleKey> StoredScheduleKeyFor(const ClusterSpec& spec,
                                                       const Device& device);

}  // namespace braze

#endif  // BRAZE_COMPILE_CLUSTER_KEY_H_
