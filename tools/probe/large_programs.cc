#include "tools/probe/large_programs.h"

#include "braze/gradients.h"
#include "braze/ops.h"

namespace braze {
namespace probe {

Tensor ElementwiseChain(Tensor x, int n) {
  Tensor a = x, b = x * 0.5;
  for (int i = 0; i < n; ++i) {
    Tensor next;
    switch (i % 5) {
      case 0:
        next = a + b;
        break;
      case 1:
        next = Tanh(a) * 0.9;
        break;
      case 2:
        next = a * b * 0.5;
        break;
      case 3:
        next = Sigmoid(a) - b;
        break;
      default:
        next = Maximum(a, b) + x;
        break;
    }
    b = a;
    a = next;
  }
  return a;
}

std::vector<Tensor> WideSum(Tensor x, int n) {
  std::vector<Tensor> terms;
  for (int i = 0; i < n; ++i) terms.push_back(Tanh(x * (0.01 * (i + 1))));
  while (terms.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1]);
    if (terms.size() % 2 == 1) next.push_back(terms.back());
    terms = next;
  }
  return {terms[0], Sum(terms[0], {1})};
}

absl::StatusOr<std::vector<Tensor>> ChainAndGradient(Tensor x, int n) {
  Tensor loss = Sum(ElementwiseChain(x, n));
  absl::StatusOr<std::vector<Tensor>> grads = Gradients({loss}, {x});
  if (!grads.ok()) return grads.status();
  return std::vector<Tensor>{loss, (*grads)[0]};
}

}  // namespace probe
}  // namespace braze
