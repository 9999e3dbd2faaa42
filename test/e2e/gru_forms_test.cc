// examples/lib/gru.h's GRU layer: its last state against a plain C++ GRU (torch's
// equations), and the Scan and hand-unrolled forms, compiled, against the reference
// kernels, forward and gradients, on random inputs of odd, prime and tiny sizes.
#include <cmath>
#include <optional>
#include <vector>

#include "braze/braze.h"
#include "gtest/gtest.h"
#include "lib/gru.h"

namespace braze {
namespace {

using braze_examples::GruInit;
using braze_examples::GruWeights;

struct Sizes {
  int64_t batch, steps, input, hidden;
};

// The last state of a GRU over x [B, steps * input], in double.
std::vector<double> PlainGru(const GruInit& w, const HostTensor& x, const Sizes& s) {
  const int64_t H = s.hidden;
  std::vector<double> h(s.batch * H, 0.0), next(h.size());
  for (int64_t t = 0; t < s.steps; ++t) {
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        double gi[3], gh[3];
        for (int k = 0; k < 3; ++k) {
          const int64_t col = k * H + j;
          gi[k] = w.b_i.GetDouble(col);
          gh[k] = w.b_h.GetDouble(col);
          for (int64_t i = 0; i < s.input; ++i) {
            gi[k] += x.GetDouble(b * s.steps * s.input + t * s.input + i) *
                     w.w_i.GetDouble(i * 3 * H + col);
          }
          for (int64_t i = 0; i < H; ++i) gh[k] += h[b * H + i] * w.w_h.GetDouble(i * 3 * H + col);
        }
        const double r = 1 / (1 + std::exp(-(gi[0] + gh[0])));
        const double z = 1 / (1 + std::exp(-(gi[1] + gh[1])));
        const double n = std::tanh(gi[2] + r * gh[2]);
        next[b * H + j] = (1 - z) * n + z * h[b * H + j];
      }
    }
    h = next;
  }
  return h;
}

// The last state and the gradients of Sum(h * probe) for the weights, in one session.
std::vector<HostTensor> RunForm(const Sizes& s, const GruInit& init, const HostTensor& x,
                                const HostTensor& probe, bool scan, bool compiled) {
  Graph g;
  const Tensor xs = Placeholder(g, DType::kF32, {s.batch, s.steps * s.input}, "x");
  const GruWeights w = braze_examples::MakeGru(g, init, "gru");
  std::vector<Tensor> fetches;
  {
    std::optional<JitScope> scope;
    if (compiled) scope.emplace(g);
    const Tensor h = scan ? braze_examples::GruScan(w, xs, s.steps)
                          : braze_examples::GruUnrolled(w, xs, s.steps);
    auto grads = Gradients({Sum(h * Const(g, probe))}, w.variables());
    EXPECT_TRUE(grads.ok()) << grads.status();
    if (!grads.ok()) return {};
    fetches = {h};
    fetches.insert(fetches.end(), grads->begin(), grads->end());
  }
  SessionOptions options;
  options.reference_only = !compiled;
  Session session(g, options);
  auto out = session.Run({{xs, x}}, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<HostTensor>{};
}

void ExpectNear(const HostTensor& got, const HostTensor& want, double tol, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_NEAR(got.GetDouble(i), want.GetDouble(i), tol * (1 + std::abs(want.GetDouble(i))))
        << what << " element " << i;
  }
}

class GruFormsTest : public ::testing::TestWithParam<Sizes> {};

TEST_P(GruFormsTest, ScanAndUnrolledMatchThePlainGruAndTheReferenceGradients) {
  const Sizes s = GetParam();
  const GruInit init = braze_examples::GruInitialValues(s.input, s.hidden, 7);
  const HostTensor x =
      HostTensor::RandomUniform(DType::kF32, {s.batch, s.steps * s.input}, 11, -1, 1);
  const HostTensor probe = HostTensor::RandomUniform(DType::kF32, {s.batch, s.hidden}, 12, -1, 1);
  const std::vector<double> plain = PlainGru(init, x, s);
  const std::vector<HostTensor> want = RunForm(s, init, x, probe, /*scan=*/false, false);
  ASSERT_EQ(want.size(), 5u);
  for (int64_t i = 0; i < want[0].num_elements(); ++i) {
    ASSERT_NEAR(want[0].GetDouble(i), plain[i], 1e-5) << "reference last state " << i;
  }
  const char* names[] = {"h", "d w_i", "d w_h", "d b_i", "d b_h"};
  for (const bool scan : {false, true}) {
    for (const bool compiled : {false, true}) {
      if (!scan && !compiled) continue;  // that is `want`
      SCOPED_TRACE(::testing::Message()
                   << (scan ? "Scan" : "unrolled") << (compiled ? ", compiled" : ", reference"));
      const std::vector<HostTensor> got = RunForm(s, init, x, probe, scan, compiled);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) ExpectNear(got[k], want[k], 1e-4, names[k]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, GruFormsTest,
                         ::testing::Values(Sizes{3, 5, 2, 13},  // odd and prime
                                           Sizes{1, 1, 1, 1}));

}  // namespace
}  // namespace braze
