// A small MLP classifier on synthetic data, shared by the data-parallel tests: the same
// global batch trained by one process and by N ranks of batch / N each must give the same
// per-step losses (test/distributed/mpi_ranks.cc), and by one process with and without
// DataParallel in a world of one (collectives_test.cc).
#ifndef BRAZE_TEST_DISTRIBUTED_DP_MODEL_H_
#define BRAZE_TEST_DISTRIBUTED_DP_MODEL_H_

#include <cstdint>
#include <vector>

#include "braze/braze.h"
#include "braze/distributed.h"

namespace braze::dp_test {

constexpr int64_t kFeatures = 13;  // odd and prime sizes on purpose
constexpr int64_t kHidden = 17;
constexpr int64_t kClasses = 5;

struct Params {
  Tensor w1, b1, w2, b2;
  std::vector<Tensor> all() const { return {w1, b1, w2, b2}; }
};

// Variables initialized from `seed` (the ranks use different seeds, so only
// BroadcastVariables makes them equal).
inline Params MakeParams(Graph& g, uint64_t seed) {
  Params p;
  p.w1 =
      Variable(g, HostTensor::RandomNormal(DType::kF32, {kFeatures, kHidden}, seed, 0, 0.4), "w1");
  p.b1 = Variable(g, HostTensor::RandomUniform(DType::kF32, {kHidden}, seed + 1, -0.1, 0.1), "b1");
  p.w2 = Variable(g, HostTensor::RandomNormal(DType::kF32, {kHidden, kClasses}, seed + 2, 0, 0.4),
                  "w2");
  p.b2 = Variable(g, HostTensor::RandomUniform(DType::kF32, {kClasses}, seed + 3, -0.1, 0.1), "b2");
  return p;
}

// The mean cross entropy of a batch.
inline Tensor Loss(const Params& p, Tensor x, Tensor labels) {
  Tensor h = Dense(x, p.w1, p.b1, Activation::kRelu);
  Tensor logits = Dense(h, p.w2, p.b2);
  return Mean(SoftmaxCrossEntropyWithLogits(logits, OneHot(labels, kClasses)));
}

// Step `step`'s global batch (the same on every rank), and rows [begin, begin + n).
struct Batch {
  HostTensor x, labels;
};
inline Batch GlobalBatch(int64_t rows, int step) {
  Batch b{HostTensor::RandomUniform(DType::kF32, {rows, kFeatures}, 1000 + step),
          HostTensor::RandomUniform(DType::kI32, {rows}, 2000 + step, 0, kClasses)};
  return b;
}
inline Batch Shard(const Batch& b, int64_t begin, int64_t n) {
  Batch s{HostTensor(DType::kF32, {n, kFeatures}), HostTensor(DType::kI32, {n})};
  for (int64_t i = 0; i < n * kFeatures; ++i)
    s.x.SetDouble(i, b.x.GetDouble(begin * kFeatures + i));
  for (int64_t i = 0; i < n; ++i) s.labels.SetDouble(i, b.labels.GetDouble(begin + i));
  return s;
}

}  // namespace braze::dp_test

#endif  // BRAZE_TEST_DISTRIBUTED_DP_MODEL_H_
