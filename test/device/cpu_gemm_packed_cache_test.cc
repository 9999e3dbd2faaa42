// The cache of packed constant weights behind the CPU GEMM extern (device/cpu_gemm.h,
// docs/CPU_GEMM.md "Constant weights, packed once"), driven through the extern itself:
// a b named by `b_const` is packed into oneDNN's layout at its first call and the copy
// reused; the copies are bounded (1 GiB; here a test budget of a few copies), the least
// recently used evicted first; a constant packed kMaxPacks times is read row-major from
// then on. Each call's product is checked against a double-precision product of the same
// operands. Skipped where oneDNN does not load, or packs nothing for these shapes (its
// packed layout for them is b's own).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "HalideRuntime.h"
#include "absl/strings/str_cat.h"
#include "device/cpu_gemm.h"
#include "gtest/gtest.h"

namespace braze {
namespace {

using GemmFn = int (*)(halide_buffer_t* a, halide_buffer_t* b, int32_t ta, int32_t tb, int32_t k,
                       int32_t threads, uint64_t b_const, halide_buffer_t* out);

// A row-major rows x cols f32 matrix as the extern reads it: Halide dims [cols, rows].
class Matrix {
 public:
  Matrix(int64_t rows, int64_t cols, uint64_t seed) : rows_(rows), cols_(cols), data_(rows * cols) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& v : data_) {  // signed values in [-1, 1)
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      v = static_cast<float>((s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    }
    dims_[0] = {0, static_cast<int32_t>(cols), 1, 0};
    dims_[1] = {0, static_cast<int32_t>(rows), static_cast<int32_t>(cols), 0};
    buf_.host = reinterpret_cast<uint8_t*>(data_.data());
    buf_.type = halide_type_t(halide_type_float, 32, 1);
    buf_.dimensions = 2;
    buf_.dim = dims_;
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;

  halide_buffer_t* buffer() { return &buf_; }
  float at(int64_t r, int64_t c) const { return data_[r * cols_ + c]; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

 private:
  int64_t rows_, cols_;
  std::vector<float> data_;
  halide_dimension_t dims_[2];
  halide_buffer_t buf_{};
};

constexpr int64_t kK = 256, kN = 192;

// One constant weight: its values and the name the lowering would give its contents.
struct Weight {
  std::unique_ptr<Matrix> b;
  uint64_t name;
};

Weight MakeWeight(uint64_t seed) {
  // Names far from any real constant's hash in this process (device_tests compiles no
  // constant matmul, and the cache is reset by each test).
  return Weight{std::make_unique<Matrix>(kK, kN, seed), 0xC0FFEE0000000000ull + seed};
}

// out = a b through the extern with b named `name`, checked against a double-precision
// product (atol 1e-4 of max(1, max|ref|) plus 1e-4 of each element). `why`: the first
// mismatch.
bool MultiplyAndCheck(Matrix& a, Weight& w, int32_t threads, std::string* why) {
  const int64_t m = a.rows();
  Matrix out(m, kN, 0);
  auto gemm = reinterpret_cast<GemmFn>(CpuGemmF32Address());
  const int rc = gemm(a.buffer(), w.b->buffer(), 0, 0, kK, threads, w.name, out.buffer());
  if (rc != 0) {
    *why = absl::StrCat("the extern returned ", rc);
    return false;
  }
  std::vector<double> want(m * kN, 0.0);
  double scale = 1;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < kK; ++p) {
      const double x = a.at(i, p);
      for (int64_t j = 0; j < kN; ++j) want[i * kN + j] += x * w.b->at(p, j);
    }
  }
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      const double g = out.at(i, j), e = want[i * kN + j];
      if (!(std::abs(g - e) <= 1e-4 * scale + 1e-4 * std::abs(e))) {
        *why = absl::StrCat("row ", i, " column ", j, ": ", g, ", want ", e);
        return false;
      }
    }
  }
  return true;
}

class CpuGemmPackedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status available = CpuGemmAvailable();
    if (!available.ok()) GTEST_SKIP() << available.message();
    ResetCpuGemmPackedCacheForTesting();
    SetCpuGemmPackedBudgetForTesting(0);
    // One packed copy's size for these shapes, from a first constant.
    Matrix a(64, kK, 1);
    Weight w = MakeWeight(999);
    const CpuGemmPackedCacheStats before = CpuGemmPackedCacheStatsForTesting();
    std::string why;
    ASSERT_TRUE(MultiplyAndCheck(a, w, 1, &why)) << why;
    const CpuGemmPackedCacheStats after = CpuGemmPackedCacheStatsForTesting();
    if (after.packs == before.packs) {
      GTEST_SKIP() << "oneDNN packs no copy of a " << kK << " x " << kN
                   << " b here (its layout for it is b's own)";
    }
    copy_bytes_ = after.bytes;
    ASSERT_GT(copy_bytes_, 0);
    ResetCpuGemmPackedCacheForTesting();
  }
  void TearDown() override {
    ResetCpuGemmPackedCacheForTesting();
    SetCpuGemmPackedBudgetForTesting(0);
  }

  // Runs a (m rows) times w, checked; returns how many packs the call made.
  int64_t Call(Matrix& a, Weight& w) {
    const int64_t before = CpuGemmPackedCacheStatsForTesting().packs;
    std::string why;
    EXPECT_TRUE(MultiplyAndCheck(a, w, 1, &why)) << why;
    return CpuGemmPackedCacheStatsForTesting().packs - before;
  }

  int64_t copy_bytes_ = 0;
};

TEST_F(CpuGemmPackedCacheTest, AConstantIsPackedOnceAndReusedAcrossCallsAndBatchSizes) {
  Weight w = MakeWeight(1);
  Matrix a64(64, kK, 2), a128(128, kK, 3);
  EXPECT_EQ(Call(a64, w), 1);
  EXPECT_EQ(Call(a64, w), 0);
  // The key has no batch size: another m reuses the copy where oneDNN picks the same
  // packed layout for it, else packs one more (kept beside the first).
  const int64_t second = Call(a128, w);
  EXPECT_LE(second, 1);
  EXPECT_EQ(Call(a128, w), 0);
  EXPECT_EQ(Call(a64, w), 0);
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().copies, 1 + second);
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().evictions, 0);
  // Another constant of the same shape is another copy.
  Weight other = MakeWeight(4);
  EXPECT_EQ(Call(a64, other), 1);
  EXPECT_EQ(Call(a64, w), 0);
}

TEST_F(CpuGemmPackedCacheTest, TheLeastRecentlyUsedCopyIsEvictedFirst) {
  // Room for two copies (each under half the budget).
  SetCpuGemmPackedBudgetForTesting(copy_bytes_ * 5 / 2);
  Weight wa = MakeWeight(11), wb = MakeWeight(12), wc = MakeWeight(13);
  Matrix x(64, kK, 14);
  const int64_t evictions = CpuGemmPackedCacheStatsForTesting().evictions;
  EXPECT_EQ(Call(x, wa), 1);
  EXPECT_EQ(Call(x, wb), 1);
  EXPECT_EQ(Call(x, wa), 0);  // a is now the most recently used
  EXPECT_EQ(Call(x, wc), 1);  // evicts b, the least recently used
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().evictions - evictions, 1);
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().copies, 2);
  EXPECT_LE(CpuGemmPackedCacheStatsForTesting().bytes, copy_bytes_ * 5 / 2);
  EXPECT_EQ(Call(x, wa), 0);  // kept
  EXPECT_EQ(Call(x, wc), 0);  // kept
  EXPECT_EQ(Call(x, wb), 1);  // packed again (evicting a, now the oldest)
  EXPECT_EQ(Call(x, wc), 0);
  EXPECT_EQ(Call(x, wa), 1);
  // Shrinking the budget evicts down to it at once.
  SetCpuGemmPackedBudgetForTesting(copy_bytes_ * 3 / 2 + 1);
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().copies, 1);
}

TEST_F(CpuGemmPackedCacheTest, ACopyOverHalfTheBudgetIsNeverPacked) {
  SetCpuGemmPackedBudgetForTesting(copy_bytes_ * 2 - 1);
  Weight w = MakeWeight(21);
  Matrix x(64, kK, 22);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Call(x, w), 0);
  EXPECT_EQ(CpuGemmPackedCacheStatsForTesting().copies, 0);
}

// Three constants taking turns in a cache with room for two: each call evicts the one
// the next call needs. Each is packed kMaxPacks times and from then on read row-major
// (the products stay right); the pack count stops growing.
TEST_F(CpuGemmPackedCacheTest, AConstantEvictedAgainAndAgainIsReadRowMajor) {
  SetCpuGemmPackedBudgetForTesting(copy_bytes_ * 5 / 2);
  std::vector<Weight> w;
  for (int i = 0; i < 3; ++i) w.push_back(MakeWeight(31 + i));
  Matrix x(64, kK, 35);
  const int max_packs = CpuGemmMaxPacksForTesting();
  ASSERT_GT(max_packs, 0);
  const CpuGemmPackedCacheStats before = CpuGemmPackedCacheStatsForTesting();
  for (int round = 0; round < max_packs; ++round) {
    for (Weight& weight : w) EXPECT_EQ(Call(x, weight), 1) << "round " << round;
  }
  const CpuGemmPackedCacheStats thrashed = CpuGemmPackedCacheStatsForTesting();
  EXPECT_EQ(thrashed.packs - before.packs, 3 * max_packs);
  EXPECT_EQ(thrashed.evictions - before.evictions, 3 * max_packs - 2);
  EXPECT_EQ(thrashed.row_major_reads, before.row_major_reads);
  for (int round = 0; round < 3; ++round) {
    for (Weight& weight : w) EXPECT_EQ(Call(x, weight), 0);
  }
  const CpuGemmPackedCacheStats after = CpuGemmPackedCacheStatsForTesting();
  // The two copies still held were packed kMaxPacks times as well: row-major too.
  EXPECT_EQ(after.row_major_reads - thrashed.row_major_reads, 9);
  EXPECT_EQ(after.evictions, thrashed.evictions);
  // A fresh constant is still packed.
  Weight fresh = MakeWeight(36);
  EXPECT_EQ(Call(x, fresh), 1);
}

// Several threads at once, each with a constant shared by all and one of its own, in a
// cache with room for two copies: copies are packed, reused and evicted under the
// threads' feet (a copy in use stays alive through its caller's reference), and every
// product stays right.
TEST_F(CpuGemmPackedCacheTest, ConcurrentCallsWithSharedAndOwnConstantsUnderEviction) {
  for (int64_t budget : {int64_t{0}, copy_bytes_ * 5 / 2}) {
    SCOPED_TRACE(budget == 0 ? "default budget" : "room for two copies");
    ResetCpuGemmPackedCacheForTesting();
    SetCpuGemmPackedBudgetForTesting(budget);
    constexpr int kThreads = 4, kCalls = 12;
    Weight shared = MakeWeight(41);
    std::vector<Weight> own;
    for (int t = 0; t < kThreads; ++t) own.push_back(MakeWeight(50 + t));
    const CpuGemmPackedCacheStats before = CpuGemmPackedCacheStatsForTesting();
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Matrix x(32 + 16 * (t % 2), kK, 60 + t);  // two batch sizes
        for (int i = 0; i < kCalls && failures[t].empty(); ++i) {
          std::string why;
          if (!MultiplyAndCheck(x, i % 2 == 0 ? shared : own[t], 1 + t % 2, &why)) {
            failures[t] = absl::StrCat("call ", i, ": ", why);
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
    const CpuGemmPackedCacheStats stats = CpuGemmPackedCacheStatsForTesting();
    if (budget == 0) {
      // Each constant packed once per layout its batch sizes get (at most two).
      EXPECT_GE(stats.packs - before.packs, 1 + kThreads);
      EXPECT_LE(stats.packs - before.packs, 2 * (1 + kThreads));
      EXPECT_EQ(stats.evictions - before.evictions, 0);
    }
    EXPECT_LE(stats.bytes, budget == 0 ? int64_t{1} << 30 : budget);
  }
}

}  // namespace
}  // namespace braze
