// Optimizers as graph ops (TF1's tf.train optimizers): the update math is ordinary ops
// ending in Assign/AssignSub, so it is clustered and fused with the rest of the step.
//
//   Tensor loss = ...;
//   absl::StatusOr<std::vector<Tensor>> train = Minimize(Optimizer::Adam(1e-3), loss, {w, b});
//   for (...) session.Run(feeds, {loss}, *train);   // one training step per Run
//
// Minimize returns the update ops, to be passed as Session::Run targets; running them
// all is one step. Within a Run every variable read sees the value it had when the Run
// started (see braze/session.h), and each update is computed from those values and the
// freshly computed slot values, so the order in which the Assigns execute does not
// matter. Running only some of them is allowed but is not a step of the algorithm.
//
// Update rules (TensorFlow's, per variable w with gradient g):
//   SGD:      w -= lr * g
//   Momentum: a = momentum * a + g;  w -= lr * a            (a: the "momentum" slot)
//             nesterov: w -= lr * (g + momentum * a)        (with the new a)
//   Adam:     t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
// Slots are Variables initialized to zeros, named `<name>/<variable name>/<slot>`. Adam's
// step t is one f64 Variable `<name>/step` shared by the Minimize call's variables
// (starting at 0, so the first update uses t = 1); the bias correction is computed in f64
// and cast to each variable's dtype.
#ifndef BRAZE_OPTIMIZERS_H_
#define BRAZE_OPTIMIZERS_H_

#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

struct Optimizer {
  enum class Kind { kSgd, kMomentum, kAdam };

  static Optimizer Sgd(double learning_rate);
  static Optimizer Momentum(double learning_rate, double momentum, bool nesterov = false);
  static Optimizer Adam(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                        double epsilon = 1e-8);

  // "SGD", "Momentum", "Adam": the default name scope of the ops Minimize builds.
  const char* DefaultName() const;

  Kind kind = Kind::kSgd;
  double learning_rate = 0.01;
  double momentum = 0;    // Momentum
  bool nesterov = false;  // Momentum
  double beta1 = 0.9;     // Adam
  double beta2 = 0.999;   // Adam
  double epsilon = 1e-8;  // Adam
};

// Builds one step of `optimizer` for the given (gradient, variable) pairs, under the
// name scope `name` (empty: optimizer.DefaultName()). Returns the update ops (Run
// targets): for each variable its slot Assigns and its AssignSub, and for Adam the
// step's Assign. Errors (InvalidArgument, nothing built): no pairs, a variable that is
// not a Variable's output or not floating, the same variable twice, a gradient whose
// dtype or shape does not match its variable, tensors from different graphs, or
// hyperparameters out of range (learning_rate and epsilon must be finite and >= 0,
// momentum >= 0, betas in [0, 1)).
absl::StatusOr<std::vector<Tensor>> ApplyGradients(
    const Optimizer& optimizer, const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars,
    std::string_view name = "");

// Gradients(loss, vars) (built under `<name>/gradients`) followed by ApplyGradients. The
// loss must be floating; a non-scalar loss is summed, as in Gradients. A variable the
// loss does not depend on gets a zero gradient (the rule of braze/gradients.h).
absl::StatusOr<std::vector<Tensor>> Minimize(const Optimizer& optimizer, Tensor loss,
                                             const std::vector<Tensor>& vars,
                                             std::string_view name = "");

}  // namespace braze

#endif  // BRAZE_OPTIMIZERS_H_
