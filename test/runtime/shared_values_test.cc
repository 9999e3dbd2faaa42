// Expensive values that several stored Funcs of a cluster read (a dropout's random draw
// read by the mask, the residual and LayerNorm's two row reductions; GELU's gradient read
// by its output and a column sum) are computed once at root by the safe default
// (schedule/shared_values.h).
// Compiled in strict mode (a compile failure is an error, not a fallback) against the
// reference kernels, which draw the same bits: at prime, odd and tiny extents, on one
// and two threads, with a symbolic batch, and as a whole training step's gradients.
#include <gtest/gtest.h>

#include <vector>

#include "braze/gradients.h"
#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/random.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "common/session_options.h"

namespace braze {
namespace {

struct Block {
  Tensor x, w, b, gamma, beta, step;
  std::vector<Tensor> fetches;
};

// The transformer block's pattern: a projection, dropout, a residual sum and a
// LayerNorm in one cluster (a matmul beside reductions: no row pipeline), with the
// dropout's output, a mask and the row statistics' consumer all outputs.
Block Build(Graph& g, int64_t rows, int64_t k, int64_t n, bool symbolic_rows) {
  Block m;
  m.x = Placeholder(g, DType::kF32, {symbolic_rows ? -1 : rows, k}, "x");
  m.w = Placeholder(g, DType::kF32, {k, n}, "w");
  m.b = Placeholder(g, DType::kF32, {n}, "b");
  m.gamma = Placeholder(g, DType::kF32, {n}, "gamma");
  m.beta = Placeholder(g, DType::kF32, {n}, "beta");
  m.step = Placeholder(g, DType::kI32, {}, "step");
  JitScope scope(g);
  Tensor h = MatMul(m.x, m.w) + m.b;
  Tensor dropped = Dropout(h, 0.3, m.step, 17);
  Tensor u = RandomUniform(h, m.step, 5);
  Tensor kept = Less(u, ScalarConst(g, 0.5, DType::kF32));
  Tensor y = dropped + h;
  Tensor ln = LayerNorm(y, m.gamma, m.beta);
  m.fetches = {dropped, Select(kept, y, ScalarConst(g, 0.0, DType::kF32)), ln,
               Sum(u * y, {1}, true)};
  return m;
}

Feeds FeedsOf(const Block& m, int64_t rows, int64_t k, int64_t n, int step) {
  return {{m.x, HostTensor::RandomNormal(DType::kF32, {rows, k}, 1 + rows)},
          {m.w, HostTensor::RandomNormal(DType::kF32, {k, n}, 2 + n, 0, 0.3)},
          {m.b, HostTensor::RandomNormal(DType::kF32, {n}, 3)},
          {m.gamma, HostTensor::RandomUniform(DType::kF32, {n}, 4, 0.5, 1.5)},
          {m.beta, HostTensor::RandomNormal(DType::kF32, {n}, 5)},
          {m.step, HostTensor::Scalar<int32_t>(step)}};
}

TEST(SharedValuesTest, DropoutReadByManyOutputsMatchesTheReference) {
  struct Case {
    int64_t rows, k, n;
  };
  for (const Case c :
       {Case{37, 13, 131}, Case{5, 7, 29}, Case{64, 16, 256}, Case{1, 3, 1}, Case{3, 2, 17}}) {
    for (int threads : {1, 2}) {
      Graph g;
      const Block m = Build(g, c.rows, c.k, c.n, false);
      const Feeds feeds = FeedsOf(m, c.rows, c.k, c.n, 3 + threads);
      Session session(g, testing_util::StrictSafeDefault(threads));
      auto got = session.Run(feeds, m.fetches);
      ASSERT_TRUE(got.ok()) << c.rows << "x" << c.n << ": " << got.status();
      testing_util::ExpectMatchesReference(g, feeds, m.fetches, *got);
    }
  }
}

// One kernel serves every batch (a symbolic dim).
TEST(SharedValuesTest, SymbolicRowsMatchTheReference) {
  Graph g;
  const Block m = Build(g, -1, 11, 53, true);
  Session session(g, testing_util::StrictSafeDefault(2));
  for (int64_t rows : {19, 40, 16}) {
    const Feeds feeds = FeedsOf(m, rows, 11, 53, 7);
    auto got = session.Run(feeds, m.fetches);
    ASSERT_TRUE(got.ok()) << rows << " rows: " << got.status();
    testing_util::ExpectMatchesReference(g, feeds, m.fetches, *got);
  }
}

// The gradients of a loss through the block: the backward clusters read the masks too.
TEST(SharedValuesTest, GradientsThroughDropoutMatchTheReference) {
  Graph g;
  const Block m = Build(g, 23, 9, 41, false);
  Tensor loss = Mean(Square(m.fetches[2]), {0, 1}, false);
  auto grads = Gradients({loss}, {m.w, m.b, m.gamma});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::vector<Tensor> fetches = {loss};
  fetches.insert(fetches.end(), grads->begin(), grads->end());
  const Feeds feeds = FeedsOf(m, 23, 9, 41, 2);
  Session session(g, testing_util::StrictSafeDefault(2));
  auto got = session.Run(feeds, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  testing_util::ExpectMatchesReference(g, feeds, fetches, *got, 1e-3, 1e-5);
}

// GELU's gradient chain, read by its output (the next matmul's operand) and by the bias
// gradient's column sum: stored once for both (the chain's cost, not one Func's, counts).
TEST(SharedValuesTest, GeluGradientReadByAnOutputAndAColumnSumMatchesTheReference) {
  struct Case {
    int64_t rows, k, n;
  };
  for (const Case c : {Case{37, 13, 131}, Case{5, 7, 29}, Case{64, 16, 96}, Case{2, 3, 1}}) {
    Graph g;
    Tensor x = Placeholder(g, DType::kF32, {c.rows, c.k}, "x");
    Tensor w = Placeholder(g, DType::kF32, {c.k, c.n}, "w");
    Tensor b = Placeholder(g, DType::kF32, {c.n}, "b");
    Tensor w2 = Placeholder(g, DType::kF32, {c.n, 3}, "w2");
    Tensor loss;
    {
      JitScope scope(g);
      loss = Mean(Square(MatMul(Gelu(MatMul(x, w) + b), w2)), {0, 1}, false);
    }
    auto grads = Gradients({loss}, {x, w, b});
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<Tensor> fetches = {loss};
    fetches.insert(fetches.end(), grads->begin(), grads->end());
    const Feeds feeds = {{x, HostTensor::RandomNormal(DType::kF32, {c.rows, c.k}, 11 + c.n)},
                         {w, HostTensor::RandomNormal(DType::kF32, {c.k, c.n}, 12, 0, 0.4)},
                         {b, HostTensor::RandomNormal(DType::kF32, {c.n}, 13)},
                         {w2, HostTensor::RandomNormal(DType::kF32, {c.n, 3}, 14, 0, 0.4)}};
    for (int threads : {1, 2}) {
      Session session(g, testing_util::StrictSafeDefault(threads));
      auto got = session.Run(feeds, fetches);
      ASSERT_TRUE(got.ok()) << c.rows << "x" << c.n << ": " << got.status();
      testing_util::ExpectMatchesReference(g, feeds, fetches, *got, 1e-3, 1e-5);
    }
  }
}

}  // namespace
}  // namespace braze
