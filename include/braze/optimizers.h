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
// Update rules (TensorFlow's for SGD, Momentum and Adam; torch.optim.AdamW's for AdamW),
// per variable w with gradient g and learning rate lr:
//   SGD:      w -= lr * g
//   Momentum: a = momentum * a + g;  w -= lr * a            (a: the "momentum" slot)
//             nesterov: w -= lr * (g + momentum * a)        (with the new a)
//   Adam:     t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
//   AdamW:    t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//             w = w * (1 - lr * wd)                                  (decoupled decay)
//             w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//             in that order, as torch.optim.AdamW does it: the decay multiplies the old
//             w, then the Adam step (computed from g, which the decay does not touch) is
//             subtracted, so w_new = w (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps) with
//             m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t). Note eps: AdamW adds it to
//             sqrt(v_hat) (torch), Adam to sqrt(v) (TensorFlow's "epsilon hat"). A
//             variable the decay filter rejects gets wd = 0 (plain torch Adam).
// Slots are Variables initialized to zeros, named `<name>/<variable name>/<slot>`. The
// Adam/AdamW step t is one f64 Variable `<name>/step` shared by the call's variables
// (starting at 0, so the first update uses t = 1); the bias corrections and the scalar
// factors are computed in f64 and cast to each variable's dtype (f32 for bf16 and f16
// variables, whose Adam step m / (sqrt(v) + eps) is computed in f32 and rounded once:
// eps = 1e-8 is 0 in f16, and 0 / 0 was NaN where the gradients had all been 0).
//
// Training-loop pieces (the GPT-2 / nanoGPT recipe):
//   Tensor done = Variable(g, HostTensor::Scalar(0.0), "train_step");  // steps done
//   Tensor s = done + 1.0;                                               // this step
//   Tensor lr = *WarmupCosineSchedule(s, 1e-3, 100, 1000, 1e-4);
//   Optimizer opt = Optimizer::AdamW(1e-3, 0.9, 0.99, 1e-8, 0.1)
//                       .WithLearningRate(lr)            // a graph scalar: no recompiles
//                       .WithGlobalClipNorm(1.0)         // torch's clip_grad_norm_
//                       .WithDecayFilter(RankAtLeast2);  // no decay on biases, LayerNorm
//   auto train = Minimize(opt, loss, params);
//   train->push_back(Assign(done, s));  // s is computed in the step's kernel
// or, with the gradients in hand: Gradients -> ClipByGlobalNorm -> ApplyGradients.
//
// Data parallelism (dp, issue 37; braze/distributed.h, docs/DISTRIBUTED.md), as PyTorch's
// DistributedDataParallel: every rank runs the same step on its own shard of the batch,
// and the gradients are averaged over the ranks before the update, so every rank applies
// the same update to the same weights:
//   CHECK_OK(InitDistributed());                      // under mpirun -np N
//   ... build the model ...
//   auto sync = BroadcastVariables(params);           // rank 0's initial values
//   auto train = Minimize(Optimizer::Adam(1e-3).WithDataParallel(), loss, params);
//   session.Run({}, {}, *sync);                       // once, before training
// With equal shards, averaging the ranks' mean-loss gradients gives the gradient of the
// mean loss over the global batch: N ranks of batch B train as one process of batch N B.)
//
// Dynamic loss scaling (policy, issue 38; docs/MIXED_PRECISION.md), as TF's
// LossScaleOptimizer and torch's GradScaler: under an f16 policy (braze/precision.h)
//   auto train = Minimize(Optimizer::Adam(1e-3).WithLossScaling(), loss, params);
// differentiates loss * scale, multiplies the gradients by 1 / scale (after
// WithDataParallel's average, before clipping), and when any gradient holds an inf or a
// NaN skips the step (no variable, slot or Adam step changes) and halves the scale;
// after growth_interval finite steps in a row it doubles. The scale (f32) and the count
// of finite steps (i32) are Variables `<name>/loss_scale/scale` and `.../good_steps`, so
// checkpoints keep them; each back-off and growth is an info line of the log
// (braze/logging.h, verbosity 0). Under a bf16 or f32 policy it builds nothing (bf16 has
// f32's exponent range), unless LossScaling::always.
#ifndef BRAZE_OPTIMIZERS_H_
#define BRAZE_OPTIMIZERS_H_

#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"

namespace braze {

// True for variables of rank >= 2 (weight matrices, embeddings, filters): the usual
// decay filter, which leaves biases and LayerNorm's gamma and beta undecayed.
bool RankAtLeast2(const Tensor& variable);

// Dynamic loss scaling's settings (torch GradScaler's names and defaults).
struct LossScaling {
  double initial_scale = 65536;  // 2^16
  double growth_factor = 2;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows
  // true: scale whatever the graph's compute dtype; false: only under an f16 policy.
  bool always = false;
};

struct Optimizer {
  enum class Kind { kSgd, kMomentum, kAdam, kAdamW };

  static Optimizer Sgd(double learning_rate);
  static Optimizer Momentum(double learning_rate, double momentum, bool nesterov = false);
  static Optimizer Adam(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                        double epsilon = 1e-8);
  // torch.optim.AdamW's defaults.
  static Optimizer AdamW(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                         double epsilon = 1e-8, double weight_decay = 0.01);

  // Copies with one setting changed (see the fields).
  Optimizer WithLearningRate(Tensor learning_rate) const;
  Optimizer WithGlobalClipNorm(double clip_norm) const;
  Optimizer WithDecayFilter(std::function<bool(const Tensor& variable)> filter) const;
  // Data parallel: average the gradients over the job's ranks (AverageGradients) before
  // clipping and updating, in buckets of about `bucket_bytes`.
  Optimizer WithDataParallel(int64_t bucket_bytes = kDefaultBucketBytes) const;
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;  // PyTorch DDP's 25 MB
  // Dynamic loss scaling (above); Minimize only: ApplyGradients has no loss to scale.
  Optimizer WithLossScaling(LossScaling scaling = {}) const;

  // "SGD", "Momentum", "Adam", "AdamW": the default name scope of the ops Minimize builds.
  const char* DefaultName() const;

  Kind kind = Kind::kSgd;
  double learning_rate = 0.01;
  // A scalar f32 or f64 tensor of the variables' graph (a WarmupCosineSchedule, a
  // placeholder fed each step, ...). When valid it is the learning rate and
  // `learning_rate` is ignored: the rate changes from step to step without a new graph
  // or a recompile, since it is a kernel input rather than a constant folded into it.
  // Its value is not checked at run time (a negative rate is the caller's choice). In a
  // Function's body, a program's Variable or Const is captured (braze/function.h).
  Tensor learning_rate_tensor;
  double momentum = 0;      // Momentum
  bool nesterov = false;    // Momentum
  double beta1 = 0.9;       // Adam, AdamW
  double beta2 = 0.999;     // Adam, AdamW
  double epsilon = 1e-8;    // Adam, AdamW
  double weight_decay = 0;  // AdamW: decoupled, multiplied by the learning rate
  // AdamW: the variables weight decay applies to; empty: all of them.
  std::function<bool(const Tensor& variable)> decay_filter;
  // > 0: before the update, ApplyGradients and Minimize clip the gradients by their
  // global norm (ClipByGlobalNorm below, under `<name>/clip`; to fetch the norm, call
  // Gradients, ClipByGlobalNorm and ApplyGradients yourself). 0: no clipping.
  double global_clip_norm = 0;
  // > 0: data parallel with buckets of this many bytes (WithDataParallel); 0: off.
  int64_t data_parallel_bucket_bytes = 0;
  // Set by WithDataParallel: data parallel whatever the bucket size says, so that a
  // bucket size < 1 given there is an error (InvalidArgument naming it), not "off" (each
  // rank would silently train alone).
  bool data_parallel = false;
  // Set: dynamic loss scaling (WithLossScaling).
  std::optional<LossScaling> loss_scaling;
};

// The mean over the job's ranks of each gradient, as DDP computes it: the gradients, in
// reverse order (the backward pass computes the last layers' first), are packed into
// buckets of consecutive gradients of one dtype, each up to `bucket_bytes` (one larger
// gradient is a bucket of its own), flattened and concatenated; each bucket is one
// AllReduce (braze/distributed.h) then one Mul by 1 / WorldSize(), and is sliced back
// into its gradients. A bucket's all-reduce starts as soon as its last gradient is
// computed and overlaps the rest of the backward pass (the runtime runs collectives on a
// communication thread). Built under the current name scope + `name`; returns the
// averaged gradients in the order given. InvalidArgument: no gradients, an invalid or
// non-floating one, one with an unknown dim, bucket_bytes < 1.
absl::StatusOr<std::vector<Tensor>> AverageGradients(
    const std::vector<Tensor>& grads, int64_t bucket_bytes = Optimizer::kDefaultBucketBytes,
    std::string_view name = "average_gradients");

// One Assign per variable to rank `root`'s value (a Broadcast): run them once after the
// variables are initialized, so every rank starts from the same weights.
absl::StatusOr<std::vector<Tensor>> BroadcastVariables(const std::vector<Tensor>& vars,
                                                       int root = 0,
                                                       std::string_view name = "broadcast");

// Builds one step of `optimizer` for the given (gradient, variable) pairs, under the
// name scope `name` (empty: optimizer.DefaultName()). Returns the update ops (Run
// targets): for each variable its slot Assigns and its AssignSub, and for Adam the
// step's Assign. Errors (InvalidArgument, nothing built): no pairs, a variable that is
// not a Variable's output or not floating, the same variable twice, a gradient whose
// dtype or shape does not match its variable, tensors from different graphs, or
// hyperparameters out of range (learning_rate, epsilon, weight_decay and
// global_clip_norm must be finite and >= 0, momentum >= 0, betas in [0, 1), a
// learning_rate_tensor a floating scalar of the variables' graph; loss scaling's
// initial_scale finite and > 0, growth_factor >= 1, backoff_factor in (0, 1],
// growth_interval in [1, 2^31 - 1]; WithDataParallel's bucket_bytes >= 1), or loss
// scaling that would scale (it needs Minimize's loss).
absl::StatusOr<std::vector<Tensor>> ApplyGradients(
    const Optimizer& optimizer, const std::vector<std::pair<Tensor, Tensor>>& grads_and_vars,
    std::string_view name = "");

// Gradients(loss, vars) (built under `<name>/gradients`) followed by ApplyGradients. The
// loss must be floating; a non-scalar loss is summed, as in Gradients. A variable the
// loss does not depend on gets a zero gradient (the rule of braze/gradients.h).
absl::StatusOr<std::vector<Tensor>> Minimize(const Optimizer& optimizer, Tensor loss,
                                             const std::vector<Tensor>& vars,
                                             std::string_view name = "");

// Clipping by global norm, torch.nn.utils.clip_grad_norm_'s rule (max_norm / (norm +
// 1e-6), clamped to 1; not TensorFlow's max_norm / max(norm, max_norm), which differs
// only in that 1e-6):
//   global_norm = sqrt(sum over all grads of sum(g^2))
//   scale       = min(1, max_norm / (global_norm + 1e-6))
//   clipped g   = g * scale
// Each grad's sum of squares is taken in its dtype and the total, the norm and the scale
// in f64 (the scale cast back to each grad's dtype), so f32 and f64 grads can be mixed.
// Below the threshold the scale is max_norm / (norm + 1e-6) > 1 clamped to 1: the grads
// come back multiplied by exactly 1. Built under the current name scope + `name`. Use between
// Gradients and ApplyGradients (the clipped grads keep their order). Errors (InvalidArgument): no
// grads, a grad that is not a valid floating tensor of one graph, max_norm not finite and > 0.
struct ClippedGradients {
  std::vector<Tensor> grads;
  Tensor global_norm;  // f64 scalar, before clipping
};
absl::StatusOr<ClippedGradients> ClipByGlobalNorm(const std::vector<Tensor>& grads, double max_norm,
                                                  std::string_view name = "clip");

// The learning rate of step s (s counting from 1: the first update is s = 1) as an f64
// scalar tensor, from the scalar numeric tensor `step` (any dtype; cast to f64), with
// W = warmup_steps and N = total_steps (nanoGPT's get_lr with lr_decay_iters = N):
//   s <= W:      peak * s / W                                       (linear warmup)
//   W < s <= N:  min_lr + 0.5 (1 + cos(pi (s - W) / (N - W))) (peak - min_lr)
//   s > N:       min_lr
// So the rate reaches peak at s = W, and min_lr at s = N. W = 0 has no warmup; W = N no
// cosine. `step` is often `s = done + 1.0` for a Variable `done` counting the steps
// done, with Assign(done, s) among the step's targets (within a Run a variable read sees its
// value from the Run's start). Built under the current name scope + `name`. Errors
// (InvalidArgument): step not a valid numeric scalar, peak or min_lr not finite, min_lr
// < 0 or > peak, warmup_steps < 0, total_steps < warmup_steps or < 1.
absl::StatusOr<Tensor> WarmupCosineSchedule(Tensor step, double peak, int64_t warmup_steps,
                                            int64_t total_steps, double min_lr = 0,
                                            std::string_view name = "lr_schedule");

}  // namespace braze

#endif  // BRAZE_OPTIMIZERS_H_
