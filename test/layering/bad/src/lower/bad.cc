// Fixture for the layering test (test/layering/run_checker.cmake): lower reaches into
// runtime, above it. Never compiled; only read by cmake/check_layers.cmake.
#include "lower/lower.h"

#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "device/device_tensor.h"
#include "ir/graph_util.h"
#include "schedule/scheduler.h"
#include "runtime/plan.h"

namespace braze {
int UsesThePlan();
}  // namespace braze

#include "runtime/plan.h"
