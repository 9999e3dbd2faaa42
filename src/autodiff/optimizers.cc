// SGD, Momentum, Adam and AdamW as graph ops, gradient clipping by global norm and the
// warmup + cosine learning-rate schedule (see braze/optimizers.h for the rules).
#include "braze/optimizers.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "autodiff/loss_scale.h"
#include "braze/gradients.h"
#include "braze/ops.h"
#include "braze/status.h"

namespace braze {
namespace {

absl::Status CheckHyperparameters(const Optimizer& o) {
  auto bad = [](const char* what, double v) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: bad ", what, " ", v));
  };
  if (!std::isfinite(o.learning_rate) || o.learning_rate < 0) {
    return bad("learning_rate", o.learning_rate);
  }
  if (!std::isfinite(o.global_clip_norm) || o.global_clip_norm < 0) {
    return bad("global_clip_norm", o.global_clip_norm);
  }
  if (o.data_parallel_bucket_bytes < (o.data_parallel ? 1 : 0)) {
    return bad("data_parallel_bucket_bytes", static_cast<double>(o.data_parallel_bucket_bytes));
  }
  switch (o.kind) {
    case Optimizer::Kind::kSgd:
      break;
    case Optimizer::Kind::kMomentum:
      if (!std::isfinite(o.momentum) || o.momentum < 0) return bad("momentum", o.momentum);
      break;
    case Optimizer::Kind::kAdamW:
      if (!std::isfinite(o.weight_decay) || o.weight_decay < 0) {
        return bad("weight_decay", o.weight_decay);
      }
      [[fallthrough]];
    case Optimizer::Kind::kAdam:
      if (!(o.beta1 >= 0 && o.beta1 < 1)) return bad("beta1", o.beta1);
      if (!(o.beta2 >= 0 && o.beta2 < 1)) return bad("beta2", o.beta2);
      if (!std::isfinite(o.epsilon) || o.epsilon < 0) return bad("epsilon", o.epsilon);
      break;
  }
  if (o.loss_scaling) return autodiff::CheckLossScaling(*o.loss_scaling);
  return absl::OkStatus();
}

// A learning_rate_tensor must be a floating scalar of the variables' graph; in a
// Function's body, a program's Variable or Const is captured as the variables are.
absl::StatusOr<Optimizer> WithLearningRateHere(const Optimizer& o, Graph& g) {
  if (!o.learning_rate_tensor.valid()) return o;
  Optimizer here = o;
  absl::StatusOr<Tensor> lr = g.Capture(o.learning_rate_tensor);
  if (!lr.ok() || lr->graph() != &g) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: learning_rate_tensor comes from another graph than the variables",
                     lr.ok() ? "" : ": ", lr.ok() ? "" : lr.status().message()));
  }
  here.learning_rate_tensor = *lr;
  if (!lr->node().status().ok() || !IsFloating(lr->dtype()) || lr->rank() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: learning_rate_tensor '", lr->name(),
                                                   "' is ", TypeString(lr->type()),
                                                   ", not a floating scalar"));
  }
  return here;
}

// In a Function's body the variables may be the program's: the body's graph captures
// them (Graph::Capture), and the updates assign what stands for them there.
absl::StatusOr<Tensor> CapturedVariable(Graph& g, const Tensor& var) {
  absl::StatusOr<Tensor> here = g.Capture(var);
  if (!here.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: ", here.status().message()));
  }
  return *here;
}

// The variables must be distinct floating Variables of one graph.
absl::Status CheckVariables(const std::vector<Tensor>& vars, const Graph* graph) {
  if (vars.empty()) return absl::InvalidArgumentError("optimizer: no variables to update");
  std::set<int> seen;
  for (size_t i = 0; i < vars.size(); ++i) {
    const Tensor& v = vars[i];
    if (!v.valid() || v.graph() != graph) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer: variable ", i, v.valid() ? " comes from another graph" : " is not a tensor"));
    }
    if (v.node().op() != OpKind::kVariable || !v.node().status().ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: '", v.name(), "' is not a Variable"));
    }
    if (!IsFloating(v.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: variable '", v.name(), "' is ",
                                                     TypeString(v.type()), ", not floating"));
    }
    if (!seen.insert(v.node_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer: variable '", v.name(), "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

// Assign(var, value), or with loss scaling's `finite` gate Assign(var, finite ? value :
// var): a step whose gradients hold an inf or a NaN changes nothing.
Tensor Update(const Tensor& var, const Tensor& value, const Tensor& finite) {
  return Assign(var, finite.valid() ? Select(finite, value, var) : value);
}

Tensor Zeros(Graph& g, const Tensor& like, const std::string& name) {
  return Variable(g, HostTensor(like.dtype(), like.shape()), name);
}

absl::Status CheckGradsAndVars(const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars) {
  std::vector<Tensor> vars;
  for (const auto& gv : grads_and_vars) vars.push_back(gv.second);
  const Graph* graph = vars.empty() ? nullptr : vars[0].graph();
  BRAZE_RETURN_IF_ERROR(CheckVariables(vars, graph));
  for (const auto& [grad, var] : grads_and_vars) {
    if (!grad.valid() || grad.graph() != graph || !grad.node().status().ok() ||
        grad.dtype() != var.dtype() || grad.rank() != var.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: the gradient for '", var.name(),
                                                     "' is not a valid tensor of ",
                                                     TypeString(var.type())));
    }
    for (int d = 0; d < var.rank(); ++d) {
      if (grad.shape()[d] >= 0 && grad.shape()[d] != var.shape()[d]) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer: the gradient for '", var.name(),
                                                       "' is ", TypeString(grad.type()),
                                                       ", expected ", TypeString(var.type())));
      }
    }
  }
  return absl::OkStatus();
}

// The learning rate as a scalar of `dtype`: the optimizer's tensor, or its constant.
Tensor LearningRate(Graph& g, const Optimizer& o, DType dtype) {
  const Tensor& lr = o.learning_rate_tensor;
  if (!lr.valid()) return ScalarConst(g, o.learning_rate, dtype);
  return lr.dtype() == dtype ? lr : Cast(lr, dtype);
}

Tensor As(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : Cast(x, dtype); }

// The f64 scalars of Adam and AdamW, from the step t (see the header).
struct AdamScalars {
  Tensor adam_lr;       // Adam: lr * sqrt(1 - b2^t) / (1 - b1^t)
  Tensor step_size;     // AdamW: lr / (1 - b1^t)
  Tensor bc2_sqrt;      // AdamW: sqrt(1 - b2^t)
  Tensor decay_factor;  // AdamW with weight_decay > 0: 1 - lr * wd
  Tensor t;             // step + 1
};

// The scalars from t = step + 1, built once per variable: a few scalar ops, where one
// set shared by every variable's update would put all the updates in one fused cluster
// (clustering merges a node with its consumers, and the shared scalars have them all),
// away from the clusters computing their gradients. Each update then leaves its
// gradient's cluster as m, v and sqrt(v) + eps, weight-sized values written and read
// back for nothing (policy, issue 38: the MLP step's largest intermediates). The step's
// own Assign takes the first variable's t, so it is computed in that update's cluster.
AdamScalars BuildAdamScalars(Graph& g, const Optimizer& o, const Tensor& step) {
  Tensor t = step + 1.0;
  auto power = [&](double beta) { return Pow(ScalarConst(g, beta, DType::kF64), t); };
  AdamScalars out;
  out.t = t;
  if (o.kind == Optimizer::Kind::kAdam && !o.learning_rate_tensor.valid()) {
    out.adam_lr = o.learning_rate * Sqrt(1.0 - power(o.beta2)) / (1.0 - power(o.beta1));
    return out;
  }
  Tensor lr = LearningRate(g, o, DType::kF64);
  if (o.kind == Optimizer::Kind::kAdam) {
    out.adam_lr = lr * Sqrt(1.0 - power(o.beta2)) / (1.0 - power(o.beta1));
    return out;
  }
  out.step_size = lr / (1.0 - power(o.beta1));
  out.bc2_sqrt = Sqrt(1.0 - power(o.beta2));
  if (o.weight_decay > 0) out.decay_factor = 1.0 - lr * o.weight_decay;
  return out;
}

// One variable's Adam or AdamW update: the m and v Assigns, then the variable's.
void BuildAdamUpdate(Graph& g, const Optimizer& o, const AdamScalars& scalars, const Tensor& grad,
                     const Tensor& var, const Tensor& finite, std::vector<Tensor>* updates) {
  const std::string slot_prefix = absl::StrCat(var.name(), "/");
  const DType dtype = var.dtype();
  Tensor m = Zeros(g, var, slot_prefix + "m");
  Tensor v = Zeros(g, var, slot_prefix + "v");
  Tensor m_new = m * o.beta1 + grad * (1.0 - o.beta1);
  Tensor v_new = v * o.beta2 + Square(grad) * (1.0 - o.beta2);
  updates->push_back(Update(m, m_new, finite));
  updates->push_back(Update(v, v_new, finite));
  // A 16-bit variable's step m / (sqrt(v) + eps) is computed in f32 and rounded once:
  // eps = 1e-8 is 0 in f16, and an element whose gradients were all 0 became 0 / 0 = NaN
  // (torch.optim.Adam on f16 parameters has the same trap).
  const bool wide = Is16BitFloat(dtype);
  const DType cd = wide ? DType::kF32 : dtype;
  auto in_cd = [&](const Tensor& t) { return wide ? Cast(t, cd) : t; };
  auto to_var = [&](const Tensor& t) { return wide ? Cast(t, dtype) : t; };
  if (o.kind == Optimizer::Kind::kAdam) {
    Tensor lr = As(scalars.adam_lr, cd);
    Tensor step = to_var(lr * in_cd(m_new) / (Sqrt(in_cd(v_new)) + o.epsilon));
    updates->push_back(Update(var, var - step, finite));
    return;
  }
  // AdamW: the decay multiplies the old value; the Adam step is subtracted after it.
  const bool decays = scalars.decay_factor.valid() && (!o.decay_filter || o.decay_filter(var));
  Tensor decayed = decays ? var * As(scalars.decay_factor, dtype) : var;
  Tensor denom = Sqrt(in_cd(v_new)) / As(scalars.bc2_sqrt, cd) + o.epsilon;
  Tensor step = to_var(As(scalars.step_size, cd) * in_cd(m_new) / denom);
  updates->push_back(Update(var, decayed - step, finite));
}

// Builds the update ops in the current name scope; the arguments are checked. With a
// loss scale (valid `loss_scale->scale`), the gradients are of the scaled loss.
absl::StatusOr<std::vector<Tensor>> BuildUpdates(
    const Optimizer& optimizer, const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars,
    const autodiff::LossScale* loss_scale = nullptr) {
  Graph& g = *grads_and_vars[0].second.graph();
  std::vector<Tensor> updates;
  std::vector<std::pair<Tensor, Tensor>> clipped = grads_and_vars;
  if (optimizer.data_parallel_bucket_bytes > 0) {  // dp (issue 37): before clipping
    std::vector<Tensor> grads;
    for (const auto& gv : grads_and_vars) grads.push_back(gv.first);
    BRAZE_ASSIGN_OR_RETURN(grads, AverageGradients(grads, optimizer.data_parallel_bucket_bytes));
    for (size_t i = 0; i < clipped.size(); ++i) clipped[i].first = grads[i];
  }
  // Loss scaling (policy, issue 38): unscaled after the ranks' average, so that every
  // rank sees the same inf or NaN and skips the same steps; checked before clipping.
  Tensor finite;
  if (loss_scale != nullptr) {
    std::vector<Tensor> grads;
    for (const auto& gv : clipped) grads.push_back(gv.first);
    finite = autodiff::UnscaleAndCheck(*loss_scale, &grads, &updates);
    for (size_t i = 0; i < clipped.size(); ++i) clipped[i].first = grads[i];
  }
  if (optimizer.global_clip_norm > 0) {
    std::vector<Tensor> grads;
    for (const auto& gv : clipped) grads.push_back(gv.first);
    BRAZE_ASSIGN_OR_RETURN(ClippedGradients c,
                           ClipByGlobalNorm(grads, optimizer.global_clip_norm, "clip"));
    for (size_t i = 0; i < clipped.size(); ++i) clipped[i].first = c.grads[i];
  }
  Tensor adam_step;  // Adam's step count, a Variable
  const bool is_adam =
      optimizer.kind == Optimizer::Kind::kAdam || optimizer.kind == Optimizer::Kind::kAdamW;
  if (is_adam) adam_step = Variable(g, HostTensor::Scalar(0.0), "step");
  bool step_updated = false;
  for (const auto& [grad, var] : clipped) {
    const std::string slot_prefix = absl::StrCat(var.name(), "/");
    switch (optimizer.kind) {
      case Optimizer::Kind::kSgd:
        updates.push_back(
            Update(var, var - grad * LearningRate(g, optimizer, var.dtype()), finite));
        break;
      case Optimizer::Kind::kMomentum: {
        Tensor accum = Zeros(g, var, slot_prefix + "momentum");
        Tensor accum_new = accum * optimizer.momentum + grad;
        updates.push_back(Update(accum, accum_new, finite));
        Tensor direction = optimizer.nesterov ? grad + accum_new * optimizer.momentum : accum_new;
        updates.push_back(
            Update(var, var - direction * LearningRate(g, optimizer, var.dtype()), finite));
        break;
      }
      case Optimizer::Kind::kAdam:
      case Optimizer::Kind::kAdamW: {
        const AdamScalars scalars = BuildAdamScalars(g, optimizer, adam_step);
        if (!step_updated) updates.push_back(Update(adam_step, scalars.t, finite));
        step_updated = true;
        BuildAdamUpdate(g, optimizer, scalars, grad, var, finite, &updates);
        break;
      }
    }
  }
  for (const Tensor& u : updates) {
    if (!u.node().status().ok()) return u.node().status();
  }
  return updates;
}

}  // namespace

Optimizer Optimizer::Sgd(double learning_rate) {
  Optimizer o;
  o.kind = Kind::kSgd;
  o.learning_rate = learning_rate;
  return o;
}

Optimizer Optimizer::Momentum(double learning_rate, double momentum, bool nesterov) {
  Optimizer o;
  o.kind = Kind::kMomentum;
  o.learning_rate = learning_rate;
  o.momentum = momentum;
  o.nesterov = nesterov;
  return o;
}

Optimizer Optimizer::Adam(double learning_rate, double beta1, double beta2, double epsilon) {
  Optimizer o;
  o.kind = Kind::kAdam;
  o.learning_rate = learning_rate;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.epsilon = epsilon;
  return o;
}

Optimizer Optimizer::AdamW(double learning_rate, double beta1, double beta2, double epsilon,
                           double weight_decay) {
  Optimizer o = Adam(learning_rate, beta1, beta2, epsilon);
  o.kind = Kind::kAdamW;
  o.weight_decay = weight_decay;
  return o;
}

Optimizer Optimizer::WithLearningRate(Tensor learning_rate) const {
  Optimizer o = *this;
  o.learning_rate_tensor = learning_rate;
  return o;
}

Optimizer Optimizer::WithDataParallel(int64_t bucket_bytes) const {
  Optimizer o = *this;
  o.data_parallel_bucket_bytes = bucket_bytes;
  o.data_parallel = true;
  return o;
}

Optimizer Optimizer::WithLossScaling(LossScaling scaling) const {
  Optimizer o = *this;
  o.loss_scaling = scaling;
  return o;
}

Optimizer Optimizer::WithGlobalClipNorm(double clip_norm) const {
  Optimizer o = *this;
  o.global_clip_norm = clip_norm;
  return o;
}

Optimizer Optimizer::WithDecayFilter(std::function<bool(const Tensor& variable)> filter) const {
  Optimizer o = *this;
  o.decay_filter = std::move(filter);
  return o;
}

bool RankAtLeast2(const Tensor& variable) { return variable.rank() >= 2; }

const char* Optimizer::DefaultName() const {
  switch (kind) {
    case Kind::kSgd:
      return "SGD";
    case Kind::kMomentum:
      return "Momentum";
    case Kind::kAdam:
      return "Adam";
    case Kind::kAdamW:
      return "AdamW";
  }
  return "Optimizer";
}

absl::StatusOr<std::vector<Tensor>> ApplyGradients(
    const Optimizer& optimizer, const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars,
    std::string_view name) {
  BRAZE_RETURN_IF_ERROR(CheckHyperparameters(optimizer));
  std::vector<std::pair<Tensor, Tensor>> here = grads_and_vars;
  if (!here.empty() && here[0].first.valid()) {
    for (auto& [grad, var] : here) {
      BRAZE_ASSIGN_OR_RETURN(var, CapturedVariable(*here[0].first.graph(), var));
    }
  }
  BRAZE_RETURN_IF_ERROR(CheckGradsAndVars(here));
  Graph& g = *here[0].second.graph();
  if (autodiff::LossScalingApplies(optimizer, g)) {
    return absl::InvalidArgumentError(
        "ApplyGradients: loss scaling needs the loss to scale; use Minimize");
  }
  BRAZE_ASSIGN_OR_RETURN(Optimizer opt, WithLearningRateHere(optimizer, g));
  NameScope scope(g, name.empty() ? std::string_view(opt.DefaultName()) : name);
  return BuildUpdates(opt, here);
}

absl::StatusOr<std::vector<Tensor>> Minimize(const Optimizer& optimizer, Tensor loss,
                                             const std::vector<Tensor>& vars_given,
                                             std::string_view name) {
  BRAZE_RETURN_IF_ERROR(CheckHyperparameters(optimizer));
  if (!loss.valid()) return absl::InvalidArgumentError("Minimize: loss is not a tensor");
  std::vector<Tensor> vars_here;
  for (const Tensor& v : vars_given) {
    BRAZE_ASSIGN_OR_RETURN(Tensor here, CapturedVariable(*loss.graph(), v));
    vars_here.push_back(here);
  }
  const std::vector<Tensor>& vars = vars_here;
  BRAZE_RETURN_IF_ERROR(CheckVariables(vars, loss.graph()));
  Graph& g = *loss.graph();
  BRAZE_ASSIGN_OR_RETURN(Optimizer opt, WithLearningRateHere(optimizer, g));
  // One name scope for the whole step: "Adam/gradients/...", "Adam/w/m", ...
  NameScope scope(g, name.empty() ? std::string_view(opt.DefaultName()) : name);
  // Loss scaling: the gradients are of loss * scale (loss's dtype), unscaled in BuildUpdates.
  std::optional<autodiff::LossScale> loss_scale;
  Tensor scaled_loss = loss;
  if (autodiff::LossScalingApplies(opt, g)) {
    loss_scale = autodiff::MakeLossScale(g, *opt.loss_scaling);
    scaled_loss = loss * As(loss_scale->scale, loss.dtype());
  }
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> grads,
                         Gradients({scaled_loss}, vars, {}, "gradients"));
  std::vector<std::pair<Tensor, Tensor>> grads_and_vars;
  for (size_t i = 0; i < vars.size(); ++i) grads_and_vars.emplace_back(grads[i], vars[i]);
  BRAZE_RETURN_IF_ERROR(CheckGradsAndVars(grads_and_vars));
  return BuildUpdates(opt, grads_and_vars, loss_scale ? &*loss_scale : nullptr);
}

absl::StatusOr<ClippedGradients> ClipByGlobalNorm(const std::vector<Tensor>& grads, double max_norm,
                                                  std::string_view name) {
  if (grads.empty()) return absl::InvalidArgumentError("ClipByGlobalNorm: no gradients");
  if (!std::isfinite(max_norm) || max_norm <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClipByGlobalNorm: bad max_norm ", max_norm, " (must be finite and > 0)"));
  }
  Graph* graph = grads[0].graph();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& grad = grads[i];
    if (!grad.valid() || grad.graph() != graph || !grad.node().status().ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ClipByGlobalNorm: gradient ", i, " is not a valid tensor of the first one's graph"));
    }
    if (!IsFloating(grad.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("ClipByGlobalNorm: gradient ", i, " '",
                                                     grad.name(), "' is ", TypeString(grad.type()),
                                                     ", not floating"));
    }
  }
  NameScope scope(*graph, name);
  Tensor sum_of_squares;
  for (const Tensor& grad : grads) {
    Tensor part = As(Sum(Square(grad)), DType::kF64);
    sum_of_squares = sum_of_squares.valid() ? sum_of_squares + part : part;
  }
  ClippedGradients out;
  out.global_norm = Sqrt(sum_of_squares);
  // torch's clip_grad_norm_: the coefficient max_norm / (norm + 1e-6), clamped to 1.
  Tensor scale = Minimum(max_norm / (out.global_norm + 1e-6), ScalarConst(*graph, 1, DType::kF64));
  for (const Tensor& grad : grads) out.grads.push_back(grad * As(scale, grad.dtype()));
  for (const Tensor& t : out.grads) {
    if (!t.node().status().ok()) return t.node().status();
  }
  return out;
}

absl::StatusOr<Tensor> WarmupCosineSchedule(Tensor step, double peak, int64_t warmup_steps,
                                            int64_t total_steps, double min_lr,
                                            std::string_view name) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("WarmupCosineSchedule: ", what));
  };
  if (!step.valid() || !step.node().status().ok() || step.rank() != 0 ||
      step.dtype() == DType::kBool) {
    return bad(step.valid() ? absl::StrCat("step '", step.name(), "' is ", TypeString(step.type()),
                                           ", not a numeric scalar")
                            : std::string("step is not a tensor"));
  }
  if (!std::isfinite(peak) || peak < 0) return bad(absl::StrCat("bad peak ", peak));
  if (!std::isfinite(min_lr) || min_lr < 0 || min_lr > peak) {
    return bad(absl::StrCat("bad min_lr ", min_lr, " (must be in [0, peak = ", peak, "])"));
  }
  if (warmup_steps < 0) return bad(absl::StrCat("bad warmup_steps ", warmup_steps));
  if (total_steps < 1 || total_steps < warmup_steps) {
    return bad(absl::StrCat("bad total_steps ", total_steps, " (must be >= 1 and >= warmup_steps ",
                            warmup_steps, ")"));
  }
  Graph& g = *step.graph();
  NameScope scope(g, name);
  const double w = static_cast<double>(warmup_steps), n = static_cast<double>(total_steps);
  Tensor s = As(step, DType::kF64);
  Tensor floor_lr = ScalarConst(g, min_lr, DType::kF64);
  // After the warmup: cosine from peak at s = W to min_lr at s = N, then min_lr. W = N
  // has no cosine phase (and no 0 / 0 to build).
  Tensor after_warmup = floor_lr;
  if (total_steps > warmup_steps) {
    const double kPi = std::acos(-1.0);
    Tensor coeff = 0.5 * (1.0 + Cos((s - w) * (kPi / (n - w))));
    Tensor cosine = min_lr + coeff * (peak - min_lr);
    after_warmup = Select(Greater(s, ScalarConst(g, n, DType::kF64)), floor_lr, cosine);
  }
  Tensor lr = after_warmup;
  if (warmup_steps > 0) {
    Tensor warm = s * (peak / w);
    lr = Select(Greater(s, ScalarConst(g, w, DType::kF64)), after_warmup, warm);
  }
  if (!lr.node().status().ok()) return lr.node().status();
  return lr;
}

}  // namespace braze
