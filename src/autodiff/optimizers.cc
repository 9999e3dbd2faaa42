// SGD, Momentum and Adam as graph ops (see braze/optimizers.h for the update rules).
#include "braze/optimizers.h"

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
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
  switch (o.kind) {
    case Optimizer::Kind::kSgd:
      break;
    case Optimizer::Kind::kMomentum:
      if (!std::isfinite(o.momentum) || o.momentum < 0) return bad("momentum", o.momentum);
      break;
    case Optimizer::Kind::kAdam:
      if (!(o.beta1 >= 0 && o.beta1 < 1)) return bad("beta1", o.beta1);
      if (!(o.beta2 >= 0 && o.beta2 < 1)) return bad("beta2", o.beta2);
      if (!std::isfinite(o.epsilon) || o.epsilon < 0) return bad("epsilon", o.epsilon);
      break;
  }
  return absl::OkStatus();
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

// Builds the update ops in the current name scope; the arguments are checked.
absl::StatusOr<std::vector<Tensor>> BuildUpdates(
    const Optimizer& optimizer, const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars) {
  Graph& g = *grads_and_vars[0].second.graph();
  std::vector<Tensor> updates;
  // Adam's bias correction lr * sqrt(1 - b2^t) / (1 - b1^t), in f64 for all variables.
  Tensor adam_lr;
  if (optimizer.kind == Optimizer::Kind::kAdam) {
    Tensor step = Variable(g, HostTensor::Scalar(0.0), "step");
    Tensor t = step + 1.0;
    updates.push_back(Assign(step, t));
    auto power = [&](double beta) { return Pow(ScalarConst(g, beta, DType::kF64), t); };
    adam_lr = optimizer.learning_rate * Sqrt(1.0 - power(optimizer.beta2)) /
              (1.0 - power(optimizer.beta1));
  }
  for (const auto& [grad, var] : grads_and_vars) {
    const std::string slot_prefix = absl::StrCat(var.name(), "/");
    switch (optimizer.kind) {
      case Optimizer::Kind::kSgd:
        updates.push_back(Assign(var, var - grad * optimizer.learning_rate));
        break;
      case Optimizer::Kind::kMomentum: {
        Tensor accum = Zeros(g, var, slot_prefix + "momentum");
        Tensor accum_new = accum * optimizer.momentum + grad;
        updates.push_back(Assign(accum, accum_new));
        Tensor direction = optimizer.nesterov ? grad + accum_new * optimizer.momentum : accum_new;
        updates.push_back(Assign(var, var - direction * optimizer.learning_rate));
        break;
      }
      case Optimizer::Kind::kAdam: {
        Tensor m = Zeros(g, var, slot_prefix + "m");
        Tensor v = Zeros(g, var, slot_prefix + "v");
        Tensor m_new = m * optimizer.beta1 + grad * (1.0 - optimizer.beta1);
        Tensor v_new = v * optimizer.beta2 + Square(grad) * (1.0 - optimizer.beta2);
        updates.push_back(Assign(m, m_new));
        updates.push_back(Assign(v, v_new));
        Tensor lr = var.dtype() == DType::kF64 ? adam_lr : Cast(adam_lr, var.dtype());
        updates.push_back(Assign(var, var - lr * m_new / (Sqrt(v_new) + optimizer.epsilon)));
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

const char* Optimizer::DefaultName() const {
  switch (kind) {
    case Kind::kSgd:
      return "SGD";
    case Kind::kMomentum:
      return "Momentum";
    case Kind::kAdam:
      return "Adam";
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
  NameScope scope(g, name.empty() ? std::string_view(optimizer.DefaultName()) : name);
  return BuildUpdates(optimizer, here);
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
  // One name scope for the whole step: "Adam/gradients/...", "Adam/w/m", ...
  NameScope scope(g, name.empty() ? std::string_view(optimizer.DefaultName()) : name);
  BRAZE_ASSIGN_OR_RETURN(std::vector<Tensor> grads, Gradients({loss}, vars, {}, "gradients"));
  std::vector<std::pair<Tensor, Tensor>> grads_and_vars;
  for (size_t i = 0; i < vars.size(); ++i) grads_and_vars.emplace_back(grads[i], vars[i]);
  BRAZE_RETURN_IF_ERROR(CheckGradsAndVars(grads_and_vars));
  return BuildUpdates(optimizer, grads_and_vars);
}

}  // namespace braze
