// The memory a Run's intermediates need (SessionStats::peak_live_bytes and
// step_output_bytes; policy, issue 38, which measures a mixed-precision step's
// activations with it).
//
// The values counted are the outputs of the plan's steps: what a cluster writes for
// other steps or for the fetches, a single op's result, a library GEMM's product. Those
// are the tensors that reach memory; what a kernel computes and consumes inside itself
// never does. In a training step they are the forward pass's activations the backward
// pass reads, the gradients and the updated values. Feeds, constants and variables are
// not intermediates and are not counted. Each value is live from the step that writes
// it to the last step that reads it, or to the end of the Run when no later step does
// (a fetch, an update committed at the end). The peak is the most bytes live at once
// over the plan's step order: what a runtime freeing each buffer after its last reader
// would hold; Braze's plan state keeps every step's buffers between Runs (a loop reuses
// them), which is the total. The activation peak is the same liveness over the values
// computed from the Run's feeds (the batch: activations, their gradients, a loss) that
// are not variable updates: it leaves out what depends on the variables and constants
// alone (a 16-bit copy of a weight, a learning rate) and the new values of variables
// and slots, which a step holds whatever its batch (a gated update's value too,
// passes/gated_update.h, which the variable takes when its gate is true). All from the types the
// Run bound, so they are exact and do not depend on timing.
#ifndef BRAZE_RUNTIME_LIVE_BYTES_H_
#define BRAZE_RUNTIME_LIVE_BYTES_H_

#include <cstdint>
#include <vector>

#include "runtime/executor.h"
#include "runtime/plan.h"

namespace braze {

struct LiveBytes {
  int64_t peak = 0;             // the most bytes of step outputs live at once
  int64_t total = 0;            // every step output's bytes
  int64_t activation_peak = 0;  // the peak of the feeds' values that are not updates
};

// After the plan's steps ran in `exec` (their outputs still bound); `fed[id]`: node id's
// output was fed.
LiveBytes MeasureLiveBytes(const Graph& g, const Plan& plan, const std::vector<bool>& fed,
                           Executor& exec);

}  // namespace braze

#endif  // BRAZE_RUNTIME_LIVE_BYTES_H_
