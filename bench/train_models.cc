#include "train_models.h"

#include <cmath>
#include <optional>
#include <utility>

#include "braze/jit_scope.h"

namespace braze::bench {

HostTensor TrainImages(int64_t batch) {
  return HostTensor::RandomUniform(DType::kF32, {batch, kPixels}, 4, 0, 1);
}

HostTensor TrainLabels(int64_t batch) {
  HostTensor ys(DType::kI32, {batch});
  for (int64_t i = 0; i < batch; ++i) ys.SetDouble(i, static_cast<double>((i * 7) % kClasses));
  return ys;
}

HostTensor MlpInitialWeight(int layer) {
  const int64_t in = layer == 0 ? kPixels : kHidden;
  const int64_t out = layer == 2 ? kClasses : kHidden;
  return HostTensor::RandomNormal(DType::kF32, {in, out}, layer + 1, 0, std::sqrt(2.0 / in));
}

namespace {

// Variables first (outside the scope, as train_bench.cc has always built them), then
// loss and updates, under a JitScope when fused.
template <typename MakeVars, typename BuildLoss>
absl::StatusOr<TrainStep> Make(int64_t batch, bool fused, const Optimizer& optimizer,
                               MakeVars make_vars, BuildLoss build_loss) {
  TrainStep step;
  step.graph = std::make_unique<Graph>();
  Graph& g = *step.graph;
  Tensor x = Placeholder(g, DType::kF32, {batch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {batch}, "labels");
  const std::vector<Tensor> vars = make_vars(g);
  {
    std::optional<JitScope> scope;
    if (fused) scope.emplace(g);
    step.loss = build_loss(x, labels, vars);
    BRAZE_ASSIGN_OR_RETURN(step.train, Minimize(optimizer, step.loss, vars));
  }
  step.feeds = {{x, TrainImages(batch)}, {labels, TrainLabels(batch)}};
  return step;
}

}  // namespace

absl::StatusOr<TrainStep> MakeSoftmaxTrainStep(int64_t batch, bool fused) {
  return Make(
      batch, fused, Optimizer::Sgd(kSoftmaxLr),
      [](Graph& g) {
        return std::vector<Tensor>{Variable(g, HostTensor(DType::kF32, {kPixels, kClasses}), "W"),
                                   Variable(g, HostTensor(DType::kF32, {kClasses}), "b")};
      },
      [](Tensor x, Tensor labels, const std::vector<Tensor>& v) {
        return Mean(
            SoftmaxCrossEntropyWithLogits(MatMul(x, v[0]) + v[1], OneHot(labels, kClasses)));
      });
}

absl::StatusOr<TrainStep> MakeMlpTrainStep(int64_t batch, bool fused) {
  return Make(
      batch, fused, Optimizer::Adam(kMlpLr),
      [](Graph& g) {
        std::vector<Tensor> vars;  // w1, b1, w2, b2, w3, b3
        for (int layer = 0; layer < 3; ++layer) {
          HostTensor w = MlpInitialWeight(layer);
          const int64_t out = w.dim(1);
          vars.push_back(Variable(g, std::move(w)));
          vars.push_back(Variable(g, HostTensor(DType::kF32, {out})));
        }
        return vars;
      },
      [](Tensor x, Tensor labels, const std::vector<Tensor>& v) {
        Tensor h1 = Dense(x, v[0], v[1], Activation::kRelu);
        Tensor h2 = Dense(h1, v[2], v[3], Activation::kRelu);
        return Mean(SoftmaxCrossEntropyWithLogits(Dense(h2, v[4], v[5]), OneHot(labels, kClasses)));
      });
}

}  // namespace braze::bench
