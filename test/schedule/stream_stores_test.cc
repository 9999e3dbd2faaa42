// The streaming-stores rewrite on small pipelines built here: a loop of consecutive
// whole vectors becomes a tile and one copy call, with the same results; loops of any
// other form keep their stores.
#include "schedule/stream_stores.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace braze {
namespace schedule {
namespace {

int copies = 0;

// The test's copy: a plain memcpy that counts its calls.
extern "C" int test_stream_copy(void* dst, int64_t dst_offset, const void* src, int64_t src_offset,
                                int64_t bytes) {
  ++copies;
  std::memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
              static_cast<size_t>(bytes));
  return 0;
}

// out(x) = in(x) * 2 + x over `n` elements, scheduled by `schedule`, with the pass for
// out: returns the loops rewritten; every element is checked and `*calls` receives
// the copies made.
int RunStreamed(int n, void (*schedule)(Halide::Func&, Halide::Var), int* calls) {
  Halide::ImageParam in(Halide::Float(32), 1, "in");
  Halide::Var x("x");
  Halide::Func out("out");
  out(x) = in(x)*2.0f + Halide::cast<float>(x);
  schedule(out, x);
  Halide::Pipeline p(out);
  auto rewritten = std::make_shared<int>(0);
  AddStreamStoresPass(p, {out.name()}, "test_stream_copy", rewritten);
  const Halide::Type ptr = Halide::type_of<void*>();
  p.set_jit_externs(
      {{"test_stream_copy", Halide::JITExtern(Halide::ExternCFunction(
                                reinterpret_cast<void*>(&test_stream_copy),
                                Halide::ExternSignature(Halide::Int(32), false,
                                                        {ptr, Halide::Int(64), ptr, Halide::Int(64),
                                                         Halide::Int(64)})))}});
  Halide::Buffer<float> input(n), output(n);
  for (int i = 0; i < n; ++i) input(i) = 0.5f * static_cast<float>(i % 97) - 7.0f;
  output.fill(-1.0f);
  in.set(input);
  copies = 0;
  p.realize(output);
  *calls = copies;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(output(i), input(i) * 2.0f + static_cast<float>(i)) << "element " << i;
    if (output(i) != input(i) * 2.0f + static_cast<float>(i)) break;
  }
  return *rewritten;
}

TEST(StreamStores, RewritesTilesOfConsecutiveVectors) {
  int calls = 0;
  // 1027 = 16 tiles of 64 and a last tile shifted inwards over the one before it.
  EXPECT_EQ(RunStreamed(
                1027,
                [](Halide::Func& f, Halide::Var x) {
                  Halide::Var t("t"), v("v");
                  f.split(x, t, v, 64, Halide::TailStrategy::ShiftInwards)
                      .vectorize(v, 8, Halide::TailStrategy::ShiftInwards);
                },
                &calls),
            1);
  EXPECT_EQ(calls, 17);
}

TEST(StreamStores, LeavesOtherLoopsAlone) {
  int calls = 0;
  // A vector loop over the whole extent, its last vector shifted inwards: its first
  // element is min(8v, n - 8), not linear in v.
  EXPECT_EQ(RunStreamed(
                1027,
                [](Halide::Func& f, Halide::Var x) {
                  f.vectorize(x, 8, Halide::TailStrategy::ShiftInwards);
                },
                &calls),
            0);
  EXPECT_EQ(calls, 0);
  // Scalar stores: no vector loop at all.
  EXPECT_EQ(RunStreamed(
                100, [](Halide::Func&, Halide::Var) {}, &calls),
            0);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace schedule
}  // namespace braze
