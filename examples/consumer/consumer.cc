// A fused softmax from an installed Braze: one cluster, one launch, checked against a
// plain loop. Exit status 0 when the result matches.
#include <cmath>
#include <cstdio>

#include "braze/braze.h"
#include "braze/jit_scope.h"

int main() {
  using namespace braze;
  constexpr int kRows = 37, kCols = 101;  // odd and prime: tails in every dim
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, kCols}, "x");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(x);
  }
  Session session(g);
  const HostTensor input = HostTensor::RandomUniform(DType::kF32, {kRows, kCols}, /*seed=*/7);
  absl::StatusOr<std::vector<HostTensor>> out = session.Run({{x, input}}, {y});
  if (!out.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(out.status().message()).c_str());
    return 1;
  }
  const float* in = input.data<float>();
  const float* got = (*out)[0].data<float>();
  double worst = 0;
  for (int r = 0; r < kRows; ++r) {
    double max = in[r * kCols], sum = 0;
    for (int c = 0; c < kCols; ++c) max = std::fmax(max, in[r * kCols + c]);
    for (int c = 0; c < kCols; ++c) sum += std::exp(in[r * kCols + c] - max);
    for (int c = 0; c < kCols; ++c) {
      const double want = std::exp(in[r * kCols + c] - max) / sum;
      worst = std::fmax(worst, std::fabs(want - got[r * kCols + c]));
    }
  }
  const SessionStats stats = session.stats();
  std::printf("consumer: softmax %dx%d, %lld cluster launch(es), max abs error %.3g\n", kRows,
              kCols, static_cast<long long>(stats.cluster_launches), worst);
  return worst < 1e-5 && stats.cluster_launches == 1 ? 0 : 1;
}
