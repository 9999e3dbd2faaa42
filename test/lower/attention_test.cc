// The attention ops (Attention, AttentionLogSumExp, AttentionGradQ/K/V) compiled under
// every scheduler and compared with the reference kernels: causal and not, Tq != Tk,
// odd, prime and tiny sequence lengths and widths, no leading dims and several; one
// kernel per op; no buffer of Tq x Tk elements; a symbolic sequence length; the unfused
// composite as a second opinion; and the GPU schedule on OpenCL (POCL) and as assembled
// CUDA.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "braze/ops.h"
#include "device/jit_memory.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

const DType f32 = DType::kF32;
const DType f64 = DType::kF64;

// Base shapes {Tq, Tk, D}: tiny, odd and prime, one past a tile of 64 keys.
const std::vector<Shape> kSmall = {{1, 1, 1}, {3, 5, 3}, {17, 13, 17}};
const std::vector<Shape> kLarge = {{33, 67, 64}};
constexpr Tolerance kTol{2e-4, 2e-5};
// Gradients sum Tq (or Tk) products of differences: looser.
constexpr Tolerance kGradTol{1e-3, 1e-4};

AttentionAttrs Attrs(bool causal, int64_t d) {
  AttentionAttrs a;
  a.causal = causal;
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return a;
}

// q [2, 3, Tq, D], k [2, 3, Tk, D], v [2, 3, Tk, D + 2] (Dv != D), from `seed`.
struct Qkv {
  Tensor q, k, v;
};
Qkv Inputs(Case& c, const Shape& s, uint64_t seed, Shape lead = {2, 3}, DType dt = f32) {
  auto shape = [&](int64_t t, int64_t d) {
    Shape r = lead;
    r.push_back(t);
    r.push_back(d);
    return r;
  };
  return {c.Input(dt, shape(s[0], s[2]), seed, -2, 2),
          c.Input(dt, shape(s[1], s[2]), seed + 1, -2, 2),
          c.Input(dt, shape(s[1], s[2] + 2), seed + 2)};
}

std::vector<OpTestCase> Cases() {
  return {
      {"Forward",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 1);
         c.outputs = {Attention(in.q, in.k, in.v, Attrs(false, s[2])),
                      Attention(in.q, in.k, in.v, Attrs(true, s[2]))};
       },
       kSmall, kLarge, kTol},
      {"ForwardF64NoBatch",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 4, {}, f64);
         c.outputs = {Attention(in.q, in.k, in.v, Attrs(true, s[2]))};
       },
       kSmall,
       {},
       {1e-12, 1e-13}},
      {"LogSumExp",
       [](Case& c, const Shape& s) {
         Qkv in = Inputs(c, s, 7, {3});
         c.outputs = {AttentionLogSumExp(in.q, in.k, Attrs(false, s[2])),
                      AttentionLogSumExp(in.q, in.k, Attrs(true, s[2]))};
       },
       kSmall, kLarge, kTol},
      {"Gradients",
       [](Case& c, const Shape& s) {
         // The backward cluster as gradients() builds it: the logsumexp, delta and the
         // three gradient ops, from a random dO.
         Qkv in = Inputs(c, s, 10);
         const AttentionAttrs a = Attrs(true, s[2]);
         Shape oshape = {2, 3, s[0], s[2] + 2};
         Tensor dout = c.Input(f32, oshape, 13);
         Tensor out = c.Input(f32, oshape, 14);
         Tensor lse = AttentionLogSumExp(in.q, in.k, a);
         Tensor delta = Sum(dout * out, {-1});
         c.outputs = {
             AttentionGrad(OpKind::kAttentionGradQ, in.q, in.k, in.v, dout, lse, delta, a),
             AttentionGrad(OpKind::kAttentionGradK, in.q, in.k, in.v, dout, lse, delta, a),
             AttentionGrad(OpKind::kAttentionGradV, in.q, in.k, in.v, dout, lse, delta, a)};
       },
       kSmall, kLarge, kGradTol},
      {"Dropout",
       [](Case& c, const Shape& s) {
         // Dropout on the weights, forward and backward (the gradients' mask is the
         // forward's: the same step), causal, with the reference's mask bit for bit.
         Qkv in = Inputs(c, s, 50);
         AttentionAttrs a = Attrs(true, s[2]);
         a.dropout = 0.3;
         a.seed = 7;
         a.op_key = 11;
         Tensor step = c.Input(HostTensor::Scalar<int32_t>(5));
         Shape oshape = {2, 3, s[0], s[2] + 2};
         Tensor dout = c.Input(f32, oshape, 53), out = c.Input(f32, oshape, 54);
         Tensor lse = AttentionLogSumExp(in.q, in.k, a);
         Tensor delta = Sum(dout * out, {-1});
         c.outputs = {
             Attention(in.q, in.k, in.v, a, step),
             AttentionGrad(OpKind::kAttentionGradQ, in.q, in.k, in.v, dout, lse, delta, a, step),
             AttentionGrad(OpKind::kAttentionGradK, in.q, in.k, in.v, dout, lse, delta, a, step),
             AttentionGrad(OpKind::kAttentionGradV, in.q, in.k, in.v, dout, lse, delta, a, step)};
       },
       kSmall, kLarge, kGradTol},
  };
}

class AttentionTest : public ::testing::TestWithParam<OpParam> {};

// The safe default (the scheduler kAuto picks for attention) runs every shape; the
// autoschedulers the two smallest (Adams2019 searched 2-3 minutes per case on 2 busy
// cores over the per-tile Funcs).
TEST_P(AttentionTest, MatchesReference) {
  const OpTestCase& tc = std::get<0>(GetParam());
  const Scheduler kind = std::get<1>(GetParam());
  std::vector<Shape> shapes = tc.small_shapes;
  if (kind == Scheduler::kSafeDefault) {
    shapes.insert(shapes.end(), tc.large_shapes.begin(), tc.large_shapes.end());
  } else {
    shapes.resize(std::min<size_t>(shapes.size(), 2));  // {1,1,1} and {3,5,3}
  }
  for (const Shape& shape : shapes) {
    Case c;
    tc.build(c, shape);
    EXPECT_TRUE(CompileRunCompare(c, kind, tc.tol)) << tc.name << " at " << ShapeString(shape);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::ValuesIn(AllSchedulers())),
                         OpParamName);

// Mullapudi2016 at q, k [3, 1, 1] gave -inf logsumexps with 2 threads (0 with LLVM's loop
// optimizations forced on at 1): it inlines the tile's exps into the tile's sum, a scalar
// loop LLVM 14 vectorizes, and LLVM's vector exp of a hidden score's -1e30 exponent was
// NaN or garbage. Exponents are now raised to a floor first (lower_attention.cc, Exp);
// Mullapudi2016 schedules attention again, at 1 and 2 threads (docs/ATTENTION.md).
TEST(AttentionTestMullapudi2016, LogSumExpOfOneKeyAtOneAndTwoThreads) {
  for (int threads : {1, 2}) {
    for (bool causal : {false, true}) {
      Case c;
      Qkv in = Inputs(c, {1, 1, 1}, 7, {3});
      c.outputs = {AttentionLogSumExp(in.q, in.k, Attrs(causal, 1)),
                   Attention(in.q, in.k, in.v, Attrs(causal, 1))};
      CompileOptions base;
      base.num_threads = threads;
      EXPECT_TRUE(CompileRunCompare(c, Scheduler::kMullapudi2016, kTol, nullptr, base))
          << threads << " threads, causal " << causal;
    }
  }
}

// The fused op beside the unfused composite in one cluster: both against the reference,
// and against each other (with dropout: the same mask).
TEST(AttentionTestUnfused, TheCompositeAgrees) {
  for (double dropout : {0.0, 0.4}) {
    for (bool causal : {false, true}) {
      Case c;
      Qkv in = Inputs(c, {19, 23, 8}, 20);
      AttentionOptions o;
      o.causal = causal;
      o.dropout = dropout;
      o.seed = 3;
      o.step = c.Input(HostTensor::Scalar<int32_t>(9));
      Tensor fused = ScaledDotProductAttention(in.q, in.k, in.v, o);
      o.fused = false;
      Tensor unfused = ScaledDotProductAttention(in.q, in.k, in.v, o);
      c.outputs = {fused, unfused};
      EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, kTol));
      CompileOptions options;
      auto kernel = CompileCluster(SpecOf(c), options);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto got = RunKernel(**kernel, c.values);
      ASSERT_TRUE(got.ok()) << got.status();
      std::string why;
      EXPECT_TRUE(AllClose((*got)[0], (*got)[1], 1e-4, 1e-5, &why)) << why;
    }
  }
}

// The heap blocks of 64 KiB or more a compiled kernel takes in one run (Halide's heap
// allocations go through Braze's JIT buffer cache, device/jit_memory.h, which counts
// them); smaller buffers do not count (nor do the stack's).
int64_t LargeAllocationsOfOneRun(CompiledKernel& kernel, const std::vector<HostTensor>& in) {
  const int64_t before = device::GetJitMemoryStats().allocations;
  auto out = RunKernel(kernel, in);
  EXPECT_TRUE(out.ok()) << out.status();
  return device::GetJitMemoryStats().allocations - before;
}

// The point of the fused ops: no buffer of Tq x Tk elements (256 KiB here), nor any
// buffer of 64 KiB, in the forward, the logsumexp or the backward cluster under the
// safe default (the scheduler kAuto picks for them); the unfused composite, compiled
// the same way, does allocate them (the check can fail).
TEST(AttentionMemory, NoBufferOfTqByTkElements) {
  const int64_t t = 256;
  Case c;
  Qkv in = Inputs(c, {t, t, 16}, 30, {1, 2});
  const AttentionAttrs a = Attrs(true, 16);
  Tensor dout = c.Input(f32, {1, 2, t, 18}, 33), out = c.Input(f32, {1, 2, t, 18}, 34);
  Tensor lse = AttentionLogSumExp(in.q, in.k, a);
  Tensor delta = Sum(dout * out, {-1});
  c.outputs = {Attention(in.q, in.k, in.v, a),
               AttentionGrad(OpKind::kAttentionGradQ, in.q, in.k, in.v, dout, lse, delta, a),
               AttentionGrad(OpKind::kAttentionGradK, in.q, in.k, in.v, dout, lse, delta, a),
               AttentionGrad(OpKind::kAttentionGradV, in.q, in.k, in.v, dout, lse, delta, a)};
  CompileOptions options;
  auto kernel = CompileCluster(SpecOf(c), options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->scheduler_used(), Scheduler::kSafeDefault);
  EXPECT_EQ(LargeAllocationsOfOneRun(**kernel, c.values), 0) << (*kernel)->lowered_stmt();
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, kGradTol));

  Case u;
  Qkv uin = Inputs(u, {t, t, 16}, 30, {1, 2});
  AttentionOptions o;
  o.causal = true;
  o.fused = false;
  u.outputs = {ScaledDotProductAttention(uin.q, uin.k, uin.v, o)};
  auto unfused = CompileCluster(SpecOf(u), options);
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_GT(LargeAllocationsOfOneRun(**unfused, u.values), 0);
}

// The backward cluster at D = 64 (the benchmark's width; Dv = 66) with an odd, prime
// length: its delta = Sum(dO * O) makes the compile driver turn LLVM's loop
// optimizations off for the whole cluster (docs/HALIDE14.md), and the attention
// schedule unrolls its vector loops itself (docs/ATTENTION.md, "The backward's
// speed"); the results still match the reference.
TEST(AttentionBackward, UnrolledWithLlvmLoopOptimizationsOff) {
  const int64_t t = 37;
  Case c;
  Qkv in = Inputs(c, {t, t, 64}, 60, {2});
  const AttentionAttrs a = Attrs(true, 64);
  Tensor dout = c.Input(f32, {2, t, 66}, 63), out = c.Input(f32, {2, t, 66}, 64);
  Tensor lse = AttentionLogSumExp(in.q, in.k, a);
  Tensor delta = Sum(dout * out, {-1});
  c.outputs = {AttentionGrad(OpKind::kAttentionGradQ, in.q, in.k, in.v, dout, lse, delta, a),
               AttentionGrad(OpKind::kAttentionGradK, in.q, in.k, in.v, dout, lse, delta, a),
               AttentionGrad(OpKind::kAttentionGradV, in.q, in.k, in.v, dout, lse, delta, a)};
  auto kernel = CompileCluster(SpecOf(c), CompileOptions());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string& text = (*kernel)->schedule_text();
  EXPECT_NE(text.find("LLVM's loop optimizations off"), std::string::npos) << text;
  EXPECT_NE(text.find("(vectors unrolled)"), std::string::npos) << text;
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, kGradTol));
}

// One kernel serves every sequence length: Tq and Tk symbolic (two classes), causal.
TEST(AttentionSymbolic, ASymbolicSequenceRunsAtEveryLength) {
  auto build = [](Case& c, int64_t tq, int64_t tk) {
    Qkv in = Inputs(c, {tq, tk, 8}, 40 + tq + tk);
    const AttentionAttrs a = Attrs(true, 8);
    c.outputs = {Attention(in.q, in.k, in.v, a), AttentionLogSumExp(in.q, in.k, a)};
  };
  Case c0;
  build(c0, 16, 20);
  ClusterSpec spec = SpecOf(c0);
  spec.input_symbols = {{-1, -1, 0, -1}, {-1, -1, 1, -1}, {-1, -1, 1, -1}};
  CompileOptions options;
  auto kernel = CompileCluster(spec, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->output_types()[0].shape[2], -1) << "Tq is not symbolic";
  for (auto [tq, tk] : std::vector<std::pair<int64_t, int64_t>>{{16, 20}, {17, 16}, {41, 97}}) {
    Case c;
    build(c, tq, tk);
    auto expected = ReferenceOutputs(SpecOf(c), c.values);
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto run = RunKernelLike(**kernel, c.values, *expected);
    ASSERT_TRUE(run.ok()) << tq << "x" << tk << ": " << run.status();
    for (size_t i = 0; i < run->size(); ++i) {
      std::string why;
      EXPECT_TRUE(AllClose((*run)[i], (*expected)[i], kTol.rtol, kTol.atol, &why))
          << tq << "x" << tk << ", output " << i << ": " << why;
    }
  }
}

// ---- GPU schedules: OpenCL (POCL) run, CUDA assembled (run on a GPU) ----

class AttentionTestOpenCL : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(AttentionTestOpenCL, MatchesReference) { RunOpTestCaseOpenCL(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Ops, AttentionTestOpenCL, ::testing::ValuesIn(Cases()), CaseName);

class AttentionTestCuda : public ::testing::TestWithParam<OpTestCase> {};
TEST_P(AttentionTestCuda, CompilesAndAssembles) { RunOpTestCaseCudaCompile(GetParam()); }
TEST_P(AttentionTestCuda, MatchesReferenceOnGpu) { RunOpTestCaseCudaOnGpu(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Ops, AttentionTestCuda, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace lowertest
}  // namespace braze
