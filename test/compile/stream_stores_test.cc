// Streaming stores (schedule/stream_stores.h, device/stream_copy.h): outputs the safe
// default writes tile by tile through the non-temporal copy must equal the reference at
// every shape the schedule streams, including extents whose last tile overlaps the one
// before it, rows, several element sizes and NaN, and shapes it must not stream.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "braze/ops.h"
#include "compile/compile.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

// Compiles `c` under the safe default with streaming from `stream_min_mib` MiB (-1: the
// default parameters), runs it on `threads` threads (0: every core) and compares with
// the reference; `streams` is how many outputs the schedule must stream, and its text
// must contain `schedule` when that is given.
::testing::AssertionResult StreamRunCompare(const Case& c, int stream_min_mib, int streams,
                                            Scheduler scheduler = Scheduler::kSafeDefault,
                                            int threads = 0, const std::string& schedule = "") {
  const ClusterSpec spec = SpecOf(c);
  auto expected = ReferenceOutputs(spec, c.values);
  if (!expected.ok()) return ::testing::AssertionFailure() << "reference: " << expected.status();
  CompileOptions options;
  options.scheduler = scheduler;
  options.num_threads = threads;
  if (stream_min_mib >= 0) {
    StoredSchedule stored;
    stored.params.stream_min_mib = stream_min_mib;
    stored.path = "(test)";
    options.stored_schedule = stored;
  }
  auto kernel = CompileCluster(spec, options);
  if (!kernel.ok()) return ::testing::AssertionFailure() << "compile: " << kernel.status();
  const std::string text = (*kernel)->schedule_text();
  int streamed = 0;
  for (size_t at = text.find("streaming stores"); at != std::string::npos;
       at = text.find("streaming stores", at + 1)) {
    ++streamed;
  }
  if (streamed != streams) {
    return ::testing::AssertionFailure()
           << streamed << " outputs streamed, not " << streams << ":\n"
           << text;
  }
  if (!schedule.empty() && !absl::StrContains(text, schedule)) {
    return ::testing::AssertionFailure() << "no '" << schedule << "' in:\n" << text;
  }
  // The rewrite took place: the compile says how many loops call the copy.
  if (streams > 0 && (!absl::StrContains(text, "rewritten to braze_stream_copy") ||
                      absl::StrContains(text, "// 0 tile loop"))) {
    return ::testing::AssertionFailure() << "no loop rewritten to the copy:\n" << text;
  }
  auto actual = RunKernel(**kernel, c.values);
  if (!actual.ok()) return ::testing::AssertionFailure() << "run: " << actual.status();
  for (size_t i = 0; i < actual->size(); ++i) {
    std::string why;
    if (!AllClose((*actual)[i], (*expected)[i], 1e-6, 1e-6, &why)) {
      return ::testing::AssertionFailure() << "output " << i << ": " << why;
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor Chain(Tensor x) {
  Tensor y = (x * 1.5 + 0.25) * x - 0.125;
  const DType t = x.dtype();
  y = Minimum(Maximum(y, ScalarConst(*x.graph(), -2.0, t)), ScalarConst(*x.graph(), 2.0, t));
  return y * 0.5 + 1.0;
}

// One dim: chunks per task cut into tiles; at a prime extent the last chunk and the last
// tile of each chunk shift inwards over their neighbours. On one thread (no chunks: one
// loop of tiles) and on three.
TEST(StreamingStores, OneDimensionAtPrimeExtents) {
  for (int64_t n : {int64_t{262147}, int64_t{1000003}}) {
    for (int threads : {0, 1, 3}) {
      Case c;
      Tensor x = c.Input(DType::kF32, {n}, 1);
      for (int64_t i : {int64_t{0}, int64_t{17}, n / 2, n - 1}) {
        c.values[0].SetDouble(i, std::nan(""));
      }
      c.outputs = {Chain(x)};
      EXPECT_TRUE(StreamRunCompare(c, 1, 1, Scheduler::kSafeDefault, threads))
          << n << " on " << threads << " threads";
    }
  }
}

// f64, i32 and bool outputs (8, 4 and 1 bytes an element, each at least 1 MiB) in one
// cluster.
TEST(StreamingStores, ElementSizes) {
  Case c;
  Tensor x = c.Input(DType::kF64, {1048583}, 2);
  c.outputs = {Chain(x), Cast(x * 1000.0, DType::kI32),
               Greater(x, ScalarConst(*x.graph(), 0.0, DType::kF64))};
  EXPECT_TRUE(StreamRunCompare(c, 1, 3));
}

// Rows: a pointwise output and a softmax (the row pipeline) stream a row at a time;
// rows longer than a tile stream in tiles, the last shifted inwards.
TEST(StreamingStores, Rows) {
  Case c;
  Tensor x = c.Input(DType::kF32, {1021, 512}, 3);
  c.outputs = {Chain(x)};
  EXPECT_TRUE(StreamRunCompare(c, 1, 1));
  Case s;
  Tensor y = s.Input(DType::kF32, {1021, 512}, 4, -5, 5);
  s.outputs = {Softmax(y)};
  EXPECT_TRUE(StreamRunCompare(s, 1, 1));
  // Row pipelines whose rows are longer than a tile stream them a tile at a time: rows of
  // 1024 floats in two tiles of 512, 263 rows (1.05 MiB).
  for (bool layernorm : {false, true}) {
    Case r;
    Tensor z = r.Input(DType::kF32, {263, 1024}, 6, -5, 5);
    Tensor gamma = r.Input(DType::kF32, {1024}, 7);
    Tensor beta = r.Input(DType::kF32, {1024}, 8);
    r.outputs = {layernorm ? LayerNorm(z, gamma, beta) : Softmax(z)};
    EXPECT_TRUE(StreamRunCompare(r, 1, 1, Scheduler::kSafeDefault, 0, "split(512)"))
        << layernorm;
  }
  for (int64_t row : {8192, 9001, 20011}) {
    Case l;
    Tensor z = l.Input(DType::kF32, {67, row}, 5);
    l.outputs = {Chain(z)};
    EXPECT_TRUE(StreamRunCompare(l, 1, 1)) << row;
  }
}

// Not streamed: rows that are not whole vectors or tiles (a second tile would recompute
// most of the first), too small an output, streaming off.
TEST(StreamingStores, NotStreamed) {
  for (int64_t row : {257, 1500}) {
    Case odd;
    Tensor x = odd.Input(DType::kF32, {1021, row}, 5);
    odd.outputs = {Chain(x)};
    EXPECT_TRUE(StreamRunCompare(odd, 1, 0)) << row;
  }
  Case small;
  Tensor y = small.Input(DType::kF32, {1000003}, 6);
  small.outputs = {Chain(y)};
  EXPECT_TRUE(StreamRunCompare(small, 8, 0));
  EXPECT_TRUE(StreamRunCompare(small, 0, 0));
}

// With no stored schedule, Auto picks the safe default for an output of 32 MiB or more
// that it streams (the autoschedulers cannot stream), and leaves one it would not
// stream (rows of 257) to Adams2019.
TEST(StreamingStores, AutoStreamsLargeOutputs) {
  Case c;
  Tensor x = c.Input(DType::kF32, {8388617}, 7);
  c.outputs = {Chain(x)};
  EXPECT_TRUE(StreamRunCompare(c, -1, 1, Scheduler::kAuto));
  Case odd;
  Tensor y = odd.Input(DType::kF32, {32771, 257}, 8);
  odd.outputs = {Chain(y)};
  Scheduler used = Scheduler::kAuto;
  EXPECT_TRUE(CompileRunCompare(odd, Scheduler::kAuto, {}, &used));
  EXPECT_EQ(used, Scheduler::kAdams2019) << SchedulerName(used);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
