// Dynamic loss scaling: TF's LossScaleOptimizer / torch's GradScaler as graph ops.
#include "autodiff/loss_scale.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_util.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "frontend/eager_body.h"
#include "ir/logging.h"

namespace braze::autodiff {

bool LossScalingApplies(const Optimizer& optimizer, const Graph& g) {
  return optimizer.loss_scaling.has_value() &&
         (optimizer.loss_scaling->always || g.compute_dtype() == DType::kF16);
}

absl::Status CheckLossScaling(const LossScaling& s) {
  auto bad = [](const char* what, double v) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: bad loss scaling ", what, " ", v));
  };
  if (!std::isfinite(s.initial_scale) || s.initial_scale <= 0) {
    return bad("initial_scale", s.initial_scale);
  }
  if (!std::isfinite(s.growth_factor) || s.growth_factor < 1) {
    return bad("growth_factor", s.growth_factor);
  }
  if (!(s.backoff_factor > 0 && s.backoff_factor <= 1)) {
    return bad("backoff_factor", s.backoff_factor);
  }
  if (s.growth_interval < 1 || s.growth_interval > std::numeric_limits<int32_t>::max()) {
    return bad("growth_interval", static_cast<double>(s.growth_interval));
  }
  return absl::OkStatus();
}

LossScale MakeLossScale(Graph& g, const LossScaling& settings) {
  NameScope scope(g, "loss_scale");
  LossScale ls;
  ls.settings = settings;
  ls.scale = Variable(g, HostTensor::Scalar(static_cast<float>(settings.initial_scale)), "scale");
  ls.good_steps = Variable(g, HostTensor::Scalar<int32_t>(0), "good_steps");
  return ls;
}

namespace {

// Under a compiling JitScope, ops built while it lives get a scope id of their own
// ("<scope>_loss_scale"): they cluster together and never with the gradients. Outside
// any scope (auto-clustering) it changes nothing.
class BookkeepingScope {
 public:
  explicit BookkeepingScope(Graph& g) {
    if (g.jit_frames().empty()) return;
    JitScopeFrame frame = g.jit_frames().back();
    frame.scope = absl::StrCat(frame.scope, "_loss_scale");
    frame.separate_compiled_gradients = false;
    pushed_.emplace(g, std::move(frame));
  }

 private:
  std::optional<autodiff_internal::ScopedJitFrame> pushed_;
};

// The log line of a step that changed the scale (none for the others).
HostFunction ScaleLog(double growth_interval) {
  return [growth_interval](
             absl::Span<const HostTensor> in) -> absl::StatusOr<std::vector<HostTensor>> {
    const bool finite = in[0].GetDouble(0) != 0;
    const double before = in[1].GetDouble(0);
    const double after = in[2].GetDouble(0);
    if (!finite) {
      LogInfo(0, absl::StrCat("loss scale: inf or NaN in the gradients, step skipped; scale ",
                              before, " -> ", after));
    } else if (after != before) {
      LogInfo(0, absl::StrCat("loss scale: ", growth_interval, " finite steps in a row; scale ",
                              before, " -> ", after));
    }
    return std::vector<HostTensor>{HostTensor::Scalar(static_cast<float>(after))};
  };
}

}  // namespace

Tensor UnscaleAndCheck(const LossScale& ls, std::vector<Tensor>* grads,
                       std::vector<Tensor>* updates) {
  Graph& g = *ls.scale.graph();
  NameScope scope(g, "loss_scale");
  const LossScaling& s = ls.settings;
  // Max(|g|) over every gradient: inf for an inf, and Max and Maximum carry a NaN
  // through (docs/MIXED_PRECISION.md); the comparison with +inf is false for both. Both
  // compile under strict_float, so LLVM's fast-math cannot assume them away.
  //
  // Clustering merges a node with its readers, so a scalar shared by the gradients'
  // clusters joins one of them and orders the others around it: the backward pass's
  // clusters then run in another order than its own, and an activation stays live
  // across the ones moved ahead (the f16 MLP step's dW1 cluster ran before dW2's). So
  // each gradient has its own 1 / scale (a scalar op on a Variable, as Adam's scalars
  // are built per variable) and its max |g| computed in its cluster, and the rest (the
  // max over them, the finite test, the scale's update) is built in a scope of its own
  // (BookkeepingScope), a small cluster after every gradient's.
  std::vector<Tensor> maxima;
  for (Tensor& grad : *grads) {
    Tensor inv = Reciprocal(ls.scale);
    // A 16-bit gradient is unscaled in f32 and rounded once: 1 / scale cast to f16 is 0
    // for a scale past 2^24, which zeroed every gradient (a "finite" step that changed
    // nothing, and the scale kept growing).
    if (Is16BitFloat(grad.dtype())) {
      grad = Cast(Cast(grad, DType::kF32) * inv, grad.dtype());
    } else {
      grad = grad * (grad.dtype() == DType::kF32 ? inv : Cast(inv, grad.dtype()));
    }
    maxima.push_back(Cast(Max(Abs(grad)), DType::kF32));
  }
  BookkeepingScope own_cluster(g);
  Tensor largest = maxima.empty() ? ScalarConst(g, 0) : maxima[0];  // no gradient: finite
  for (size_t i = 1; i < maxima.size(); ++i) largest = Maximum(largest, maxima[i]);
  Tensor finite = Less(largest, ScalarConst(g, std::numeric_limits<double>::infinity()));
  // good_steps + 1 reaching the interval grows the scale and restarts the count; a
  // step that is not finite backs off and restarts it.
  Tensor next = ls.good_steps + ScalarConst(g, 1, DType::kI32);
  Tensor grow =
      Greater(next, ScalarConst(g, static_cast<double>(s.growth_interval - 1), DType::kI32));
  Tensor zero = ScalarConst(g, 0, DType::kI32);
  // A growth past f32's range is not taken (as torch's GradScaler): an infinite scale
  // made every later gradient inf, and every step was skipped for good.
  Tensor grown = ls.scale * s.growth_factor;
  Tensor grown_finite = Less(grown, ScalarConst(g, std::numeric_limits<double>::infinity()));
  Tensor new_scale = Select(finite, Select(grow, Select(grown_finite, grown, ls.scale), ls.scale),
                            ls.scale * s.backoff_factor);
  Tensor new_good = Select(finite, Select(grow, zero, next), zero);
  updates->push_back(Assign(ls.scale, new_scale));
  updates->push_back(Assign(ls.good_steps, new_good));
  {
    // Braze's scope, not the body's: under RunFunctionsEagerly it fails no call.
    frontend::LibraryJitScopeGuard library_scope;
    JitScope host(g, false);  // a HostCall never compiles, in strict Functions too
    std::vector<Tensor> log =
        HostCall(g, "log", {finite, ls.scale, new_scale}, {TensorSpec{DType::kF32, {}}},
                 ScaleLog(static_cast<double>(s.growth_interval)));
    if (!log.empty()) updates->push_back(log[0]);
  }
  return finite;
}

}  // namespace braze::autodiff
