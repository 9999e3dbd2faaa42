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
                               MakeVars make_vars, BuildLoss build_loss,
                               DType precision = DType::kF32) {
  TrainStep step;
  step.graph = std::make_unique<Graph>();
  Graph& g = *step.graph;
  Tensor x = Placeholder(g, DType::kF32, {batch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {batch}, "labels");
  const std::vector<Tensor> vars = make_vars(g);
  {
    std::optional<JitScope> scope;
    if (fused) scope.emplace(g);
    PrecisionScope policy(g, precision);  // kF32: none
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

absl::StatusOr<TrainStep> MakeMlpTrainStep(int64_t batch, bool fused, DType precision) {
  return Make(
      // Loss scaling builds nothing but under f16. It starts at 2^10, not 2^16: at 2^16 the
      // first step's f16 gradients overflow and it is skipped (as GradScaler's first
      // steps often are), which the checked losses would count as a mismatch.
      batch, fused, Optimizer::Adam(kMlpLr).WithLossScaling({.initial_scale = 1024}),
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
      },
      precision);
}

// ---- Convolutional models ----

HostTensor CnnImages(int64_t batch) {
  return TrainImages(batch).Reshaped({batch, kCnnSide, kCnnSide, 1});
}

HostTensor CnnInitialFilter(int layer) {
  const int64_t in = layer == 0 ? 1 : 32, out = layer == 0 ? 32 : 64;
  return HostTensor::RandomNormal(DType::kF32, {3, 3, in, out}, 21 + layer, 0,
                                  std::sqrt(2.0 / (9 * in)));
}

HostTensor CnnInitialDense() {
  const int64_t in = 7 * 7 * 64;
  return HostTensor::RandomNormal(DType::kF32, {in, kClasses}, 23, 0, std::sqrt(1.0 / in));
}

HostTensor BlockInput() {
  return HostTensor::RandomUniform(
      DType::kF32, {kBlockBatch, kBlockSide, kBlockSide, kBlockChannels}, 11, -1, 1);
}
HostTensor BlockTarget() {
  return HostTensor::RandomUniform(DType::kF32,
                                   {kBlockBatch, kBlockSide, kBlockSide, kBlockChannels}, 12, 0, 1);
}
HostTensor BlockFilter(int conv) {
  return HostTensor::RandomNormal(DType::kF32, {3, 3, kBlockChannels, kBlockChannels}, 13 + conv, 0,
                                  std::sqrt(2.0 / (9 * kBlockChannels)));
}
BnParams BlockBn(int bn) {
  const uint64_t seed = 30 + 4 * bn;
  const Shape c = {kBlockChannels};
  return {HostTensor::RandomUniform(DType::kF32, c, seed, 0.5, 1.5),
          HostTensor::RandomUniform(DType::kF32, c, seed + 1, -0.1, 0.1),
          HostTensor::RandomUniform(DType::kF32, c, seed + 2, -0.1, 0.1),
          HostTensor::RandomUniform(DType::kF32, c, seed + 3, 0.5, 1.5)};
}
HostTensor ConvBias() {
  return HostTensor::RandomUniform(DType::kF32, {kBlockChannels}, 15, -0.1, 0.1);
}

namespace {

// conv 3x3 SAME (stride 1, NHWC), no bias.
Tensor Conv3x3(Tensor x, Tensor filter) { return Conv2D(x, filter, {1, 1}, Padding::kSame); }

// The parameters of one BN: gamma, beta, moving mean, moving variance.
BatchNormOutput Bn(Tensor x, const Tensor* p, bool training) {
  return BatchNorm(x, p[0], p[1], p[2], p[3], training, kBnMomentum, kBnEpsilon);
}

// The ResNet basic block; p: w1, gamma1, beta1, mean1, variance1, w2, gamma2, ... (10).
Tensor ResNetBlock(Tensor x, const std::vector<Tensor>& p, bool training,
                   std::vector<Tensor>* updates) {
  BatchNormOutput bn1 = Bn(Conv3x3(x, p[0]), &p[1], training);
  BatchNormOutput bn2 = Bn(Conv3x3(Relu(bn1.y), p[5]), &p[6], training);
  if (updates != nullptr) {
    for (const BatchNormOutput* bn : {&bn1, &bn2}) {
      updates->insert(updates->end(), bn->updates.begin(), bn->updates.end());
    }
  }
  return Relu(bn2.y + x);
}

// The block's parameters in ResNetBlock's order, made by `make` (Const or Variable).
template <typename Make>
std::vector<Tensor> BlockParams(Make make) {
  std::vector<Tensor> p;
  for (int i = 0; i < 2; ++i) {
    BnParams bn = BlockBn(i);
    p.push_back(make(BlockFilter(i)));
    for (HostTensor* t : {&bn.gamma, &bn.beta, &bn.mean, &bn.variance}) {
      p.push_back(make(std::move(*t)));
    }
  }
  return p;
}

Shape BlockShape() { return {kBlockBatch, kBlockSide, kBlockSide, kBlockChannels}; }

}  // namespace

Forward MakeConvBiasRelu(bool fused) {
  Forward f;
  f.graph = std::make_unique<Graph>();
  Graph& g = *f.graph;
  Tensor x = Placeholder(g, DType::kF32, BlockShape(), "x");
  Tensor filter = Const(g, BlockFilter(0));
  Tensor bias = Const(g, ConvBias());
  std::optional<JitScope> scope;
  if (fused) scope.emplace(g);
  f.out = Relu(Conv3x3(x, filter) + bias);
  f.feeds = {{x, BlockInput()}};
  return f;
}

Forward MakeResNetBlock(bool fused, bool variable_input) {
  Forward f;
  f.graph = std::make_unique<Graph>();
  Graph& g = *f.graph;
  Tensor x = variable_input ? Variable(g, BlockInput(), "x")
                            : Placeholder(g, DType::kF32, BlockShape(), "x");
  const std::vector<Tensor> p = BlockParams([&](HostTensor t) { return Const(g, std::move(t)); });
  std::optional<JitScope> scope;
  if (fused) scope.emplace(g);
  f.out = ResNetBlock(x, p, /*training=*/false, nullptr);
  if (!variable_input) f.feeds = {{x, BlockInput()}};
  return f;
}

absl::StatusOr<TrainStep> MakeResNetBlockStep(bool fused) {
  TrainStep step;
  step.graph = std::make_unique<Graph>();
  Graph& g = *step.graph;
  Tensor x = Placeholder(g, DType::kF32, BlockShape(), "x");
  Tensor target = Placeholder(g, DType::kF32, BlockShape(), "target");
  const std::vector<Tensor> p =
      BlockParams([&](HostTensor t) { return Variable(g, std::move(t)); });
  // The trained ones: filters, gammas and betas (not the moving statistics).
  const std::vector<Tensor> trained = {p[0], p[1], p[2], p[5], p[6], p[7]};
  {
    std::optional<JitScope> scope;
    if (fused) scope.emplace(g);
    std::vector<Tensor> bn_updates;
    step.loss = Mean(Square(ResNetBlock(x, p, /*training=*/true, &bn_updates) - target));
    BRAZE_ASSIGN_OR_RETURN(step.train, Minimize(Optimizer::Sgd(kResNetLr), step.loss, trained));
    step.train.insert(step.train.end(), bn_updates.begin(), bn_updates.end());
  }
  step.feeds = {{x, BlockInput()}, {target, BlockTarget()}};
  return step;
}

absl::StatusOr<TrainStep> MakeCnnStep(int64_t batch, bool fused) {
  TrainStep step;
  step.graph = std::make_unique<Graph>();
  Graph& g = *step.graph;
  Tensor pixels = Placeholder(g, DType::kF32, {batch, kPixels}, "x");
  Tensor labels = Placeholder(g, DType::kI32, {batch}, "labels");
  // w1, gamma1, beta1, w2, gamma2, beta2, dense w, dense b; then the moving statistics.
  std::vector<Tensor> vars;
  std::vector<Tensor> moving;
  for (int layer = 0; layer < 2; ++layer) {
    const int64_t c = layer == 0 ? 32 : 64;
    vars.push_back(Variable(g, CnnInitialFilter(layer)));
    vars.push_back(Variable(g, HostTensor::Filled(DType::kF32, {c}, 1)));
    vars.push_back(Variable(g, HostTensor(DType::kF32, {c})));
    moving.push_back(Variable(g, HostTensor(DType::kF32, {c})));
    moving.push_back(Variable(g, HostTensor::Filled(DType::kF32, {c}, 1)));
  }
  vars.push_back(Variable(g, CnnInitialDense()));
  vars.push_back(Variable(g, HostTensor(DType::kF32, {kClasses})));
  {
    std::optional<JitScope> scope;
    if (fused) scope.emplace(g);
    std::vector<Tensor> bn_updates;
    Tensor h = Reshape(pixels, {-1, kCnnSide, kCnnSide, 1});
    for (int layer = 0; layer < 2; ++layer) {
      const Tensor* v = &vars[3 * layer];
      BatchNormOutput bn =
          BatchNorm(Conv3x3(h, v[0]), v[1], v[2], moving[2 * layer], moving[2 * layer + 1],
                    /*training=*/true, kCnnBnMomentum, kBnEpsilon);
      bn_updates.insert(bn_updates.end(), bn.updates.begin(), bn.updates.end());
      h = MaxPool(Relu(bn.y), {2, 2}, {2, 2});
    }
    Tensor logits = Dense(Flatten(h), vars[6], vars[7]);
    step.loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels, kClasses)));
    BRAZE_ASSIGN_OR_RETURN(step.train, Minimize(Optimizer::Adam(kCnnLr), step.loss, vars));
    step.train.insert(step.train.end(), bn_updates.begin(), bn_updates.end());
  }
  step.feeds = {{pixels, TrainImages(batch)}, {labels, TrainLabels(batch)}};
  return step;
}

}  // namespace braze::bench
