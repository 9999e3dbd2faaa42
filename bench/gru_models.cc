#include "gru_models.h"

#include <cmath>
#include <memory>
#include <optional>

#include "peers_common.h"

namespace braze::bench {

braze_examples::GruInit GruInitialValues() {
  return braze_examples::GruInitialValues(kGruRow, kGruHidden, /*seed=*/0);
}

HostTensor GruHeadInitialWeight() {
  return HostTensor::RandomNormal(DType::kF32, {kGruHidden, kClasses}, 10, 0,
                                  std::sqrt(1.0 / kGruHidden));
}

absl::StatusOr<TrainStep> MakeGruStep(bool scan, bool fused) {
  TrainStep step;
  step.graph = std::make_unique<Graph>();
  Graph& g = *step.graph;
  const Tensor x = Placeholder(g, DType::kF32, {kGruBatch, kPixels}, "x");
  const Tensor labels = Placeholder(g, DType::kI32, {kGruBatch}, "labels");
  const braze_examples::GruWeights gru = braze_examples::MakeGru(g, GruInitialValues(), "gru");
  const Tensor w_out = Variable(g, GruHeadInitialWeight(), "logits/w");
  const Tensor b_out = Variable(g, HostTensor(DType::kF32, {kClasses}), "logits/b");
  std::vector<Tensor> vars = gru.variables();
  vars.push_back(w_out);
  vars.push_back(b_out);
  {
    std::optional<JitScope> scope;
    if (fused) scope.emplace(g);
    const Tensor last = scan ? braze_examples::GruScan(gru, x, kGruSteps)
                             : braze_examples::GruUnrolled(gru, x, kGruSteps);
    const Tensor logits = Dense(last, w_out, b_out);
    step.loss = Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels, kClasses)));
    BRAZE_ASSIGN_OR_RETURN(step.train, Minimize(Optimizer::Adam(kGruLr), step.loss, vars));
  }
  step.feeds = {{x, TrainImages(kGruBatch)}, {labels, TrainLabels(kGruBatch)}};
  return step;
}

const std::vector<float>& GruStepReferenceLosses() {
  static const std::vector<float> losses =
      ReferenceLosses(MakeGruStep(/*scan=*/false, /*fused=*/false));
  return losses;
}

}  // namespace braze::bench
