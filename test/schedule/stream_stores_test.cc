// The streaming-stores rewrite on small pipelines built here: a loop of consecutive
// whole vectors becomes a tile and one copy call, with the same results; loops of any
// other form keep their stores.
#include "schedule/stream_stores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace braze {
namespace schedule {
namespace {

std::atomic<int> copies{0};
std::atomic<int> fences{0};
thread_local int unfenced = 0;  // this thread's copies since its last fence
std::mutex seen_mu;
std::vector<int> seen;  // at each fence, the copies it fenced on its thread

// The test's copy: a plain memcpy that counts its calls.
extern "C" int test_stream_copy(void* dst, int64_t dst_offset, const void* src, int64_t src_offset,
                                int64_t bytes) {
  ++copies;
  ++unfenced;
  std::memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
              static_cast<size_t>(bytes));
  return 0;
}

extern "C" int test_stream_fence() {
  ++fences;
  std::lock_guard<std::mutex> lock(seen_mu);
  seen.push_back(unfenced);
  unfenced = 0;
  return 0;
}

void ResetCounts() {
  copies = 0;
  fences = 0;
  unfenced = 0;
  std::lock_guard<std::mutex> lock(seen_mu);
  seen.clear();
}

std::map<std::string, Halide::JITExtern> TestExterns() {
  const Halide::Type ptr = Halide::type_of<void*>();
  return {{"test_stream_copy", Halide::JITExtern(Halide::ExternCFunction(
                                   reinterpret_cast<void*>(&test_stream_copy),
                                   Halide::ExternSignature(Halide::Int(32), false,
                                                           {ptr, Halide::Int(64), ptr,
                                                            Halide::Int(64), Halide::Int(64)})))},
          {"test_stream_fence", Halide::JITExtern(Halide::ExternCFunction(
                                    reinterpret_cast<void*>(&test_stream_fence),
                                    Halide::ExternSignature(Halide::Int(32), false, {})))}};
}

// out(x) = in(x) * 2 + x over `n` elements, scheduled by `schedule`, with the pass for
// out: returns the loops rewritten; every element is checked, `*calls` receives the
// copies made and `*fenced` (when given) the fences.
int RunStreamed(int n, void (*schedule)(Halide::Func&, Halide::Var), int* calls,
                int* fenced = nullptr) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Var x("x");
  Halide::Func out("out");
  out(x) = in(x)*2.0f + Halide::cast<float>(x);
  schedule(out, x);
  Halide::Pipeline p(out);
  auto rewritten = std::make_shared<int>(0);
  AddStreamStoresPass(p, {out.name()}, "test_stream_copy", "test_stream_fence", rewritten);
  p.set_jit_externs(TestExterns());
  Halide::Buffer<float> input(n), output(n);
  for (int i = 0; i < n; ++i) input(i) = 0.5f * static_cast<float>(i % 97) - 7.0f;
  output.fill(-1.0f);
  in.set(input);
  ResetCounts();
  p.realize(output);
  *calls = copies;
  if (fenced != nullptr) *fenced = fences;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(output(i), input(i) * 2.0f + static_cast<float>(i)) << "element " << i;
    if (output(i) != input(i) * 2.0f + static_cast<float>(i)) break;
  }
  return *rewritten;
}

TEST(StreamStores, RewritesTilesOfConsecutiveVectors) {
  int calls = 0, fenced = 0;
  // 1027 = 16 tiles of 64 and a last tile shifted inwards over the one before it.
  EXPECT_EQ(RunStreamed(
                1027,
                [](Halide::Func& f, Halide::Var x) {
                  Halide::Var t("t"), v("v");
                  f.split(x, t, v, 64, Halide::TailStrategy::ShiftInwards)
                      .vectorize(v, 8, Halide::TailStrategy::ShiftInwards);
                },
                &calls, &fenced),
            1);
  EXPECT_EQ(calls, 17);
  EXPECT_EQ(fenced, 1);  // once, before the pipeline returns: the copies do not fence
}

TEST(StreamStores, EachParallelTaskFencesOnceAfterItsCopies) {
  int calls = 0, fenced = 0;
  // 6 parallel tasks of 512 elements (the last shifted inwards), each 8 tiles of 64:
  // 48 copies, a fence at the end of each task and one at the end of the pipeline.
  EXPECT_EQ(RunStreamed(
                3001,
                [](Halide::Func& f, Halide::Var x) {
                  Halide::Var task("task"), xi("xi"), t("t"), v("v");
                  f.split(x, task, xi, 512, Halide::TailStrategy::ShiftInwards)
                      .parallel(task)
                      .split(xi, t, v, 64, Halide::TailStrategy::ShiftInwards)
                      .vectorize(v, 8, Halide::TailStrategy::ShiftInwards);
                },
                &calls, &fenced),
            1);
  EXPECT_EQ(calls, 48);
  EXPECT_EQ(fenced, 7);
  // Each task's fence comes after its own 8 copies, on its thread; the last one, on the
  // calling thread after every task, has nothing left of its own to fence.
  std::vector<int> want(6, 8);
  want.push_back(0);
  std::sort(seen.begin(), seen.end(), std::greater<int>());
  EXPECT_EQ(seen, want);
}

// A stage streamed outside any parallel loop, then a parallel stage reading it: the
// copies are fenced before the parallel loop starts (its workers read them).
TEST(StreamStores, SerialCopiesAreFencedBeforeAParallelLoop) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Var x("x"), t("t"), v("v"), task("task"), xi("xi");
  Halide::Func first("first"), second("second");
  first(x) = in(x)*2.0f;
  second(x) = first(x) + 1.0f;
  first.compute_root()
      .split(x, t, v, 64, Halide::TailStrategy::ShiftInwards)
      .vectorize(v, 8, Halide::TailStrategy::ShiftInwards);
  second.split(x, task, xi, 256, Halide::TailStrategy::ShiftInwards).parallel(task);
  Halide::Pipeline p({first, second});
  auto rewritten = std::make_shared<int>(0);
  AddStreamStoresPass(p, {first.name()}, "test_stream_copy", "test_stream_fence", rewritten);
  p.set_jit_externs(TestExterns());
  const int n = 1024;
  Halide::Buffer<float> input(n), a(n), b(n);
  for (int i = 0; i < n; ++i) input(i) = static_cast<float>(i % 13) - 6.0f;
  in.set(input);
  ResetCounts();
  p.realize({a, b});
  EXPECT_EQ(*rewritten, 1);
  EXPECT_EQ(copies.load(), 16);
  // One fence before `second`'s parallel loop (all 16 copies), one at the end (none).
  EXPECT_EQ(seen, (std::vector<int>{16, 0}));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(b(i), input(i) * 2.0f + 1.0f) << i;
  }
}

TEST(StreamStores, LeavesOtherLoopsAlone) {
  int calls = 0, fenced = 0;
  // A vector loop over the whole extent, its last vector shifted inwards: its first
  // element is min(8v, n - 8), not linear in v.
  EXPECT_EQ(RunStreamed(
                1027,
                [](Halide::Func& f, Halide::Var x) {
                  f.vectorize(x, 8, Halide::TailStrategy::ShiftInwards);
                },
                &calls, &fenced),
            0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(fenced, 0);
  // Scalar stores: no vector loop at all.
  EXPECT_EQ(RunStreamed(
                100, [](Halide::Func&, Halide::Var) {}, &calls),
            0);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace schedule
}  // namespace braze
