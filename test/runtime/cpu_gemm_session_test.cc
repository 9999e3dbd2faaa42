// Sessions running matmuls through the CPU GEMM library (docs/CPU_GEMM.md): symbolic
// batch sizes share one kernel, and every result matches the reference executor, with
// the library and without it (SessionOptions::cpu_matmul).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/reference_check.h"
#include "device/cpu_gemm.h"
#include "runtime/flags.h"

namespace braze {
namespace {

TEST(CpuGemmSessionTest, SymbolicRowsShareOneKernelAndMatchTheReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 257}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {257, 127}, 1), "w");
  Tensor bias = Const(g, HostTensor::RandomUniform(DType::kF32, {127}, 2), "bias");
  Tensor y;
  {
    JitScope scope(g);
    y = Softmax(Relu(MatMul(x, w) + bias));
  }
  for (auto matmul : {SessionOptions::CpuMatMul::kLibrary, SessionOptions::CpuMatMul::kHalide}) {
    SessionOptions options;
    options.cpu_matmul = matmul;
    Session session(g, options);
    for (int64_t rows : {300, 129, 1, 7, 300}) {
      SCOPED_TRACE(rows);
      const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {rows, 257}, rows)}};
      auto got = session.Run(feeds, {y});
      ASSERT_TRUE(got.ok()) << got.status();
      testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
    }
    // One kernel for sizes >= 16 and one for sizes 1 to 15 (docs/SYMBOLIC_SHAPES.md).
    EXPECT_EQ(session.stats().compiles, 2);
    EXPECT_EQ(session.stats().cluster_launches, 5);
  }
}

// BRAZE_FLAGS=--cpu_gemm_library=false turns the library off in every session: the
// kernel is keyed apart (compiled again) and still matches.
TEST(CpuGemmSessionTest, TheFlagTurnsTheLibraryOff) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {131, 257}, "x");
  Tensor w = Const(g, HostTensor::RandomUniform(DType::kF32, {257, 127}, 3), "w");
  Tensor y;
  {
    JitScope scope(g);
    y = Tanh(MatMul(x, w));
  }
  const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {131, 257}, 4)}};
  for (bool library : {true, false}) {
    BrazeFlags flags;
    flags.cpu_gemm_library = library;
    SetBrazeFlagsForTesting(flags);
    Session session(g);
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
    EXPECT_EQ(session.stats().compiles, 1) << library;
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
}

// --cpu_gemm_min_work=1 sends even a 3 x 1 x 2 matmul to oneDNN (what braze-fuzz uses to
// check the library on small, odd shapes): still the reference's result.
TEST(CpuGemmSessionTest, AMinimumOfOneSendsTinyMatmulsToTheLibrary) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  BrazeFlags flags;
  flags.cpu_gemm_min_work = 1;
  flags.log_compiles = true;
  SetBrazeFlagsForTesting(flags);
  std::vector<std::string> infos;
  SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
  for (const Shape& a_shape : {Shape{3, 2}, Shape{1, 1}, Shape{2, 5, 7}}) {
    Graph g;
    Tensor a = Placeholder(g, DType::kF32, a_shape, "a");
    Shape b_shape = a_shape;  // b^T: [.., n, k] with n = 1
    b_shape[b_shape.size() - 2] = 1;
    Tensor b = Placeholder(g, DType::kF32, b_shape, "b");
    Tensor y;
    {
      JitScope scope(g);
      y = Exp(a_shape.size() == 3 ? BatchMatMul(a, b, false, true) : MatMul(a, b, false, true));
    }
    const Feeds feeds = {{a, HostTensor::RandomUniform(DType::kF32, a_shape, 5)},
                         {b, HostTensor::RandomUniform(DType::kF32, b_shape, 6)}};
    Session session(g);
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got);
  }
  SetLogSink(nullptr);
  SetBrazeFlagsForTesting(BrazeFlags{});
  int library = 0;
  for (const std::string& line : infos)
    library += line.find("matmul by oneDNN") != std::string::npos;
  EXPECT_EQ(library, 3) << infos.size() << " log lines";
}

// A BatchMatMul whose batch dims collapse into one stride (every dense operand's do)
// runs as one batched oneDNN call: at batch shapes of one, two and three dims, a batch of
// one (a single matrix: not batched), odd and tiny matrices, each transpose, with a
// bias and ReLU after it, and at 1 and 2 threads; the reference's results.
TEST(CpuGemmSessionTest, BatchesRunAsOneBatchedCallAndMatchTheReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  BrazeFlags flags;
  flags.cpu_gemm_min_work = 1;
  SetBrazeFlagsForTesting(flags);
  struct Case {
    Shape batch;
    int64_t m, k, n;
  };
  for (const Case& c : std::vector<Case>{
           {{3}, 7, 5, 3}, {{2, 3}, 17, 13, 11}, {{2, 1, 5}, 1, 1, 1}, {{1}, 4, 3, 2}}) {
    auto shape = [&](int64_t rows, int64_t cols) {
      Shape s = c.batch;
      s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    Graph g;
    Tensor a = Placeholder(g, DType::kF32, shape(c.m, c.k), "a");
    Tensor b = Placeholder(g, DType::kF32, shape(c.k, c.n), "b");
    Tensor at = Placeholder(g, DType::kF32, shape(c.k, c.m), "at");
    Tensor bt = Placeholder(g, DType::kF32, shape(c.n, c.k), "bt");
    Tensor bias = Placeholder(g, DType::kF32, {c.n}, "bias");
    std::vector<Tensor> ys;
    {
      JitScope scope(g);
      ys = {BatchMatMul(a, b), BatchMatMul(at, b, true, false), BatchMatMul(a, bt, false, true),
            BatchMatMul(at, bt, true, true), Relu(BatchMatMul(a, b) * 2.0 + bias)};
    }
    Feeds feeds;
    uint64_t seed = 7;
    for (const Tensor& t : {a, b, at, bt, bias}) {
      feeds.push_back({t, HostTensor::RandomUniform(DType::kF32, t.shape(), seed++, -2, 2)});
    }
    int64_t matrices = 1;
    for (int64_t d : c.batch) matrices *= d;
    for (int threads : {1, 2}) {
      SessionOptions options;
      options.num_threads = threads;
      Session session(g, options);
      const int64_t before = CpuGemmBatchedCalls();
      auto got = session.Run(feeds, ys);
      ASSERT_TRUE(got.ok()) << got.status();
      testing_util::ExpectMatchesReference(g, feeds, ys, *got);
      EXPECT_EQ(CpuGemmBatchedCalls() - before, matrices > 1 ? 5 : 0)
          << "batch dims " << c.batch.size() << " m " << c.m << " threads " << threads;
    }
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
}

// oneDNN 2.6's AVX-512 matmul (brgemm) reads weights in a blocked layout of its own and
// repacks a row-major b at every call; with these ISA extensions it chooses such a
// layout for the shapes below, so packing a constant b must happen.
bool PacksWeights() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

// A Const b is packed once, at its first call, and the packed copy is reused by later
// runs and by another session with an equal constant; a different constant of the same
// shape gets its own, as does one differing in two signs only (a stale copy would give
// the first constant's product). Every result matches the reference: plain,
// transposed, with and without the bias and ReLU.
TEST(CpuGemmSessionTest, ConstantWeightsArePackedOnceAndMatchTheReference) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  constexpr int64_t kK = 1031, kN = 509;  // primes: vector and block tails
  // Sums of 1031 products of magnitude up to 1, in another order than the reference's:
  // f32 rounding of about 1e-7 x 1031 x 0.25 where a result cancels to near 0.
  constexpr double kAtol = 1e-4;
  auto build = [](Graph& g, uint64_t seed, bool transpose, bool epilogue, bool flip) {
    Tensor x = Placeholder(g, DType::kF32, {131, kK}, "x");
    const Shape w_shape = transpose ? Shape{kN, kK} : Shape{kK, kN};
    HostTensor w_value = HostTensor::RandomUniform(DType::kF32, w_shape, seed);
    if (flip) {
      w_value.data<float>()[1] = -w_value.data<float>()[1];
      w_value.data<float>()[3] = -w_value.data<float>()[3];
    }
    Tensor w = Const(g, w_value, "w");
    Tensor bias = Const(g, HostTensor::RandomUniform(DType::kF32, {kN}, seed + 1), "bias");
    JitScope scope(g);
    Tensor p = MatMul(x, w, false, transpose);
    return std::make_pair(x, epilogue ? Relu(p + bias) : p);
  };
  int seed = 9100;
  for (bool transpose : {false, true}) {
    for (bool epilogue : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "transpose " << transpose << " epilogue " << epilogue);
      seed += 10;
      const int64_t before = CpuGemmWeightPacks();
      // Two graphs with the same constant (one packing), a third with another, a fourth
      // with the first's values but two elements of odd index negated (a weak hash of
      // 8-byte words would not tell them apart).
      for (int variant = 0; variant < 4; ++variant) {
        const uint64_t w_seed = variant == 2 ? seed + 5 : seed;
        Graph g;
        auto [x, y] = build(g, w_seed, transpose, epilogue, variant == 3);
        Session session(g);
        for (int run = 0; run < 2; ++run) {
          const Feeds feeds = {
              {x, HostTensor::RandomUniform(DType::kF32, {131, kK}, 40 + run + w_seed)}};
          auto got = session.Run(feeds, {y});
          ASSERT_TRUE(got.ok()) << got.status();
          testing_util::ExpectMatchesReference(g, feeds, {y}, *got, 1e-4, kAtol);
        }
      }
      if (PacksWeights()) {
        EXPECT_EQ(CpuGemmWeightPacks() - before, 3);
      } else {
        std::printf("no AVX-512: oneDNN's layout may be row-major, packings not counted\n");
      }
    }
  }
}

// A Variable's value changes between runs: it is never packed, and the product follows
// every assignment.
TEST(CpuGemmSessionTest, VariableWeightsAreNotPacked) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {67, 1031}, "x");
  Tensor w = Variable(g, HostTensor::RandomUniform(DType::kF32, {1031, 257}, 11), "w");
  Tensor w_new = Placeholder(g, DType::kF32, {1031, 257}, "w_new");
  Tensor y;
  {
    JitScope scope(g);
    y = Relu(MatMul(x, w));
  }
  Tensor assign = Assign(w, w_new);
  Session session(g);
  const int64_t before = CpuGemmWeightPacks();
  for (int step = 0; step < 3; ++step) {
    const Feeds feeds = {{x, HostTensor::RandomUniform(DType::kF32, {67, 1031}, 20 + step)}};
    auto got = session.Run(feeds, {y});
    ASSERT_TRUE(got.ok()) << got.status();
    auto w_now = session.Run({}, {w});
    ASSERT_TRUE(w_now.ok()) << w_now.status();
    // The reference with w's current value as a constant.
    Graph ref;
    Tensor rx = Placeholder(ref, DType::kF32, {67, 1031}, "x");
    Tensor ry = Relu(MatMul(rx, Const(ref, (*w_now)[0], "w")));
    // Tolerance as in the test above (k = 1031).
    testing_util::ExpectMatchesReference(ref, {{rx, feeds[0].second}}, {ry}, *got, 1e-4, 1e-4);
    auto assigned = session.Run(
        {{w_new, HostTensor::RandomUniform(DType::kF32, {1031, 257}, 30 + step)}}, {assign});
    ASSERT_TRUE(assigned.ok()) << assigned.status();
  }
  EXPECT_EQ(CpuGemmWeightPacks(), before);
}

// --log_compiles says which path a 16-bit matmul took: oneDNN's bf16 matmul on the bf16
// operands ("(bf16 x bf16 -> bf16)"), the f32 call on widened f16 copies ("(f32 x f32 ->
// f32)": oneDNN 2.6 has no f16 matmul without AVX512-FP16), or Braze's Halide loops with
// the library off. Each result matches the reference: k = 1031 products of magnitude up
// to 1 reach about 32, where half a bf16 ulp (the rounding the reference makes before the
// bias Add, which the call adds before its one rounding) is 0.0625.
TEST(CpuGemmSessionTest, TheLogSaysWhichPathA16BitMatMulTook) {
  if (!CpuGemmAvailable().ok()) GTEST_SKIP() << CpuGemmAvailable().message();
  struct Path {
    DType dtype;
    bool library;
    const char* logged;
  };
  // Where oneDNN runs no bf16 matmul (AVX2), bf16 takes the f16 path.
  const char* bf16_call = CpuGemmTakesBF16() ? "(bf16 x bf16 -> bf16)" : "(f32 x f32 -> f32)";
  for (const Path& path :
       {Path{DType::kBF16, true, bf16_call}, Path{DType::kF16, true, "(f32 x f32 -> f32)"},
        Path{DType::kBF16, false, "matmul in Braze's Halide loops"}}) {
    SCOPED_TRACE(path.logged);
    BrazeFlags flags;
    flags.log_compiles = true;
    flags.cpu_gemm_library = path.library;
    SetBrazeFlagsForTesting(flags);
    std::vector<std::string> infos;
    SetLogSink([&](LogSeverity, int, std::string_view text) { infos.emplace_back(text); });
    Graph g;
    Tensor x = Placeholder(g, path.dtype, {67, 1031}, "x");
    Tensor w = Const(g, HostTensor::RandomUniform(path.dtype, {1031, 257}, 41), "w");
    Tensor bias = Const(g, HostTensor::RandomUniform(path.dtype, {257}, 42), "bias");
    Tensor y;
    {
      JitScope scope(g);
      y = Relu(MatMul(x, w) + bias);
    }
    const Feeds feeds = {{x, HostTensor::RandomUniform(path.dtype, {67, 1031}, 43)}};
    Session session(g);
    auto got = session.Run(feeds, {y});
    SetLogSink(nullptr);
    SetBrazeFlagsForTesting(BrazeFlags{});
    ASSERT_TRUE(got.ok()) << got.status();
    testing_util::ExpectMatchesReference(g, feeds, {y}, *got, 0x1p-7, 0.07);
    int logged = 0;
    for (const std::string& line : infos) logged += line.find(path.logged) != std::string::npos;
    EXPECT_EQ(logged, 1) << infos.size() << " log lines";
  }
}

}  // namespace
}  // namespace braze
