// Dynamic loss scaling's graph pieces (braze/optimizers.h, WithLossScaling): the scale
// and step-count variables, the unscaling and the finiteness check, and the scale's
// update with its log line. optimizers.cc wires them around Gradients and the updates.
#ifndef BRAZE_AUTODIFF_LOSS_SCALE_H_
#define BRAZE_AUTODIFF_LOSS_SCALE_H_

#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/optimizers.h"

namespace braze::autodiff {

// Whether `optimizer`'s loss scaling builds anything for a loss of `g`: set, and the
// graph's compute dtype f16 (braze/precision.h) or LossScaling::always.
bool LossScalingApplies(const Optimizer& optimizer, const Graph& g);

absl::Status CheckLossScaling(const LossScaling& s);

struct LossScale {
  LossScaling settings;
  Tensor scale;       // f32 scalar Variable
  Tensor good_steps;  // i32 scalar Variable: finite steps since the last change
};

// The variables, under the name scope "loss_scale".
LossScale MakeLossScale(Graph& g, const LossScaling& settings);

// Multiplies `grads` (the scaled loss's gradients) by 1 / scale in place and returns the
// bool scalar "every gradient is finite" (a NaN or inf anywhere makes it false). Adds the
// scale's and the count's Assigns, and the HostCall that logs a back-off or a growth,
// to `updates`.
Tensor UnscaleAndCheck(const LossScale& ls, std::vector<Tensor>* grads,
                       std::vector<Tensor>* updates);

}  // namespace braze::autodiff

#endif  // BRAZE_AUTODIFF_LOSS_SCALE_H_
