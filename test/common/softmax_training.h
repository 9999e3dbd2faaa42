// A small softmax regression trained with SGD on a device, for tests that compare
// devices step by step (loss curves, final weights, copy counts).
#ifndef BRAZE_TEST_COMMON_SOFTMAX_TRAINING_H_
#define BRAZE_TEST_COMMON_SOFTMAX_TRAINING_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braze/braze.h"

namespace braze {
namespace testing_util {

struct Trained {
  std::vector<double> losses;  // one per step
  HostTensor w;                // the weights after the last step
  SessionStats stats;
};

inline Trained TrainSoftmax(const std::string& device, int steps) {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {32, 20}, "x");
  Tensor labels = Placeholder(g, DType::kF32, {32, 5}, "labels");
  Tensor w = Variable(g, HostTensor::RandomNormal(DType::kF32, {20, 5}, 7, 0, 0.1), "w");
  Tensor b = Variable(g, HostTensor::Filled(DType::kF32, {5}, 0), "b");
  Tensor loss = Mean(SoftmaxCrossEntropyWithLogits(MatMul(x, w) + b, labels));
  auto train = Minimize(Optimizer::Sgd(0.5), loss, {w, b});
  EXPECT_TRUE(train.ok()) << train.status();
  SessionOptions opts;
  opts.device = device;
  opts.global_jit_level = JitLevel::kOn1;
  Session s(g, opts);
  Trained result;
  HostTensor xs = HostTensor::RandomUniform(DType::kF32, {32, 20}, 8);
  HostTensor ys(DType::kF32, {32, 5});
  for (int i = 0; i < 32; ++i) ys.SetDouble(i * 5 + (i * 7) % 5, 1.0);
  for (int step = 0; step < steps; ++step) {
    auto out = s.Run({{x, xs}, {labels, ys}}, {loss}, *train);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) break;
    result.losses.push_back((*out)[0].GetDouble(0));
  }
  auto wv = s.VariableValue(w);
  EXPECT_TRUE(wv.ok()) << wv.status();
  if (wv.ok()) result.w = *wv;
  result.stats = s.stats();
  return result;
}

}  // namespace testing_util
}  // namespace braze

#endif  // BRAZE_TEST_COMMON_SOFTMAX_TRAINING_H_
