// Differential testing: hundreds of seeded random graphs, run auto-clustered and fused
// (each under one of the schedulers) and compared with the reference executor.
#include <gtest/gtest.h>

#include <random>

#include "braze/device.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed) {}

  // Builds ~`num_ops` ops over 1-2 placeholders; returns the fetches.
  std::vector<Tensor> Build(Graph& g, Feeds& feeds, int num_ops) {
    const int inputs = 1 + Uniform(2);
    Shape base = RandomShape();
    for (int i = 0; i < inputs; ++i) {
      Shape s = i == 0 ? base : BroadcastPartner(base);
      Tensor p = Placeholder(g, DType::kF32, s);
      feeds.emplace_back(p, HostTensor::RandomUniform(DType::kF32, s, rng_(), -2, 2));
      pool_.push_back(p);
    }
    for (int i = 0; i < num_ops; ++i) pool_.push_back(AddOp(g));
    // Fetch the last value and one random earlier one (so clusters have 2 outputs).
    return {pool_.back(), pool_[Uniform(static_cast<int>(pool_.size()))]};
  }

 private:
  int Uniform(int n) { return static_cast<int>(rng_() % n); }
  Shape RandomShape() {
    static const int64_t dims[] = {1, 2, 3, 5, 7, 16};
    Shape s(1 + Uniform(3));
    for (auto& d : s) d = dims[Uniform(6)];
    return s;
  }
  // A shape that broadcasts against `s`: a suffix of it with some dims set to 1.
  Shape BroadcastPartner(const Shape& s) {
    Shape p(s.begin() + Uniform(static_cast<int>(s.size())), s.end());
    for (auto& d : p) {
      if (Uniform(3) == 0) d = 1;
    }
    return p;
  }
  Tensor Pick() { return pool_[Uniform(static_cast<int>(pool_.size()))]; }
  Tensor ConstLike(Graph& g, const Shape& s) {
    return Const(g, HostTensor::RandomUniform(DType::kF32, s, rng_(), -1, 1));
  }

  Tensor AddOp(Graph& g) {
    Tensor x = Pick();
    if (x.rank() == 0) x = Reshape(x, {1});  // full reductions give scalars
    switch (Uniform(14)) {
      case 0:
        return Tanh(x);
      case 1:
        return Sigmoid(x) * Relu(x);
      case 2:
        return Sqrt(Abs(x) + 1.0) - Log(Square(x) + 1.0);
      case 3:
        return Exp(Tanh(x)) + Erf(x) + Floor(x) * Sign(x);
      case 4:
        return x + ConstLike(g, BroadcastPartner(x.shape()));
      case 5:
        return Maximum(x, ConstLike(g, BroadcastPartner(x.shape()))) * x;
      case 6:
        return x / (Abs(ConstLike(g, BroadcastPartner(x.shape()))) + 0.5);
      case 7: {
        std::vector<int> axes = {-1 - Uniform(x.rank())};
        switch (Uniform(4)) {
          case 0:
            return Sum(x, axes, Uniform(2));
          case 1:
            return Mean(x, axes, Uniform(2));
          case 2:
            return Max(x, axes, Uniform(2));
          default:
            return Min(x, axes, Uniform(2));
        }
      }
      case 8: {
        Tensor m = x.rank() == 2 ? x : Reshape(x, {-1, x.shape().back()});
        return MatMul(m, ConstLike(g, {m.shape()[1], 1 + Uniform(6)}));
      }
      case 9: {
        std::vector<int> perm(x.rank());
        for (int i = 0; i < x.rank(); ++i) perm[i] = x.rank() - 1 - i;
        return Transpose(x, perm);
      }
      case 10: {
        std::vector<std::pair<int64_t, int64_t>> pads(x.rank(), {0, 0});
        pads.back() = {Uniform(2), Uniform(3)};
        return Pad(x, pads, 0.5);
      }
      case 11: {
        std::vector<int64_t> begin(x.rank(), 0), size(x.rank(), -1);
        begin.back() = x.shape().back() > 1 ? 1 : 0;
        return Slice(x, begin, size) * 2.0;
      }
      case 12:
        return Concat({x, Neg(x)}, Uniform(x.rank()));
      default: {
        Tensor y = ConstLike(g, x.shape());
        return Select(Greater(x, y), x, y * 3.0);
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<Tensor> pool_;
};

// 200 graphs on the CPU (each under one of the four schedulers); on CUDA (skipped
// without a device) the same graphs under the GPU heuristic, cuBLAS for matmuls.
void RunRandomGraphs(const std::string& device, int kGraphs) {
  const Scheduler schedulers[] = {Scheduler::kSafeDefault, Scheduler::kMullapudi2016,
                                  Scheduler::kLi2018, Scheduler::kAdams2019};
  int clusters_run = 0;
  for (int i = 0; i < kGraphs; ++i) {
    SCOPED_TRACE("graph seed " + std::to_string(i));
    Graph g;
    Feeds feeds;
    RandomGraph gen(1000 + i);
    std::vector<Tensor> fetches = gen.Build(g, feeds, 3 + i % 5);
    ASSERT_TRUE(g.status().ok()) << g.status() << "\n" << g.DebugString();

    SessionOptions ref_opts;
    ref_opts.reference_only = true;
    Session ref(g, ref_opts);
    auto want = ref.Run(feeds, fetches);
    ASSERT_TRUE(want.ok()) << want.status();

    SessionOptions opts;
    opts.global_jit_level = JitLevel::kOn1;
    opts.min_cluster_size = 1;
    opts.strict = true;  // a cluster that fails to compile is a test failure here
    opts.scheduler = schedulers[i % 4];
    opts.device = device;
    Session fused(g, opts);
    auto got = fused.Run(feeds, fetches);
    EXPECT_TRUE(got.ok()) << got.status() << "\n" << g.DebugString();
    if (!got.ok()) continue;
    clusters_run += fused.stats().cluster_launches;
    for (size_t f = 0; f < fetches.size(); ++f) {
      std::string why;
      EXPECT_TRUE(AllClose((*got)[f], (*want)[f], 1e-3, 1e-4, &why))
          << "fetch " << f << ": " << why << "\n"
          << g.DebugString();
    }
  }
  EXPECT_GE(clusters_run, kGraphs);  // every graph ran at least one fused cluster
}

TEST(RandomGraphs, FusedMatchesReference) { RunRandomGraphs("cpu", 200); }

TEST(RandomGraphs, CudaFusedMatchesReference) {
  if (!CheckCudaAvailable().ok()) GTEST_SKIP() << CheckCudaAvailable().message();
  RunRandomGraphs("cuda:0", 200);
}

}  // namespace
}  // namespace braze
