// Fixture for the layering test: every include here is allowed for lower (its own
// folder, schedule and device from its DEPS, ir through them, the public API, outside
// libraries). Never compiled; only read by cmake/check_layers.cmake.
#include "lower/good.h"
#include "good.h"

#include <vector>

#include "Halide.h"
#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "device/device_tensor.h"
#include "ir/graph_util.h"
#include "schedule/scheduler.h"
#include "../lower/good.h"

// #include "runtime/plan.h"  (a comment: not an include)
/* A string that mentions one: */ const char* kText = "#include \"runtime/plan.h\"";
