// The schedule repairs: StoreAtComputeLevels undoes a storage level that lets Halide 14
// slide a window wrongly, on a pipeline shaped like the one Adams2019 scheduled for
// braze-fuzz seed 40455.
#include "schedule/schedule_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace braze {
namespace schedule {
namespace {

using ::testing::ElementsAre;

// out(x, z, y) = square(x, y, 0) = in(x, y)^2 over 9 x 5 x 12: y split by 2 with the
// split's inner loop inside z, x vectorized by 16 with GuardWithIf; the square stored
// at y's outer loop and computed at its inner one, as Adams2019 scheduled Mul_3.
struct SlidingRow {
  Halide::Buffer<float> in{9, 12};
  Halide::Var x{"x"}, xi{"xi"}, y{"y"}, z{"z"}, yo{"yo"}, yi{"yi"};
  Halide::Func square{"square"}, out{"out"};
  SlidingRow() {
    for (int j = 0; j < 12; ++j) {
      for (int i = 0; i < 9; ++i) in(i, j) = 0.25f * i - 0.5f * j + 1;
    }
    square(x, y, z) = in(x, y) * in(x, y);
    out(x, z, y) = square(x, y, 0);
    out.split(y, yo, yi, 2)
        .split(x, x, xi, 16, Halide::TailStrategy::GuardWithIf)
        .vectorize(xi)
        .reorder(xi, x, yi, z, yo);
    square.split(x, x, xi, 16, Halide::TailStrategy::GuardWithIf)
        .vectorize(xi)
        .store_in(Halide::MemoryType::Stack)
        .store_at(out, yo)
        .compute_at(out, yi);
  }
  int Wrong() {
    Halide::Buffer<float> result = out.realize({9, 5, 12});
    int wrong = 0;
    for (int j = 0; j < 12; ++j) {
      for (int k = 0; k < 5; ++k) {
        for (int i = 0; i < 9; ++i) wrong += result(i, k, j) != in(i, j) * in(i, j);
      }
    }
    return wrong;
  }
};

// The bug the repair exists for (Halide 14 as pinned here): square is computed only at
// z == 0, so later z read the last row of the pair for both rows.
TEST(StoreAtComputeLevels, Halide14SlidesThisWindowWrongly) {
  SlidingRow p;
  EXPECT_GT(p.Wrong(), 0);
}

TEST(StoreAtComputeLevels, StoresEachFuncWhereItIsComputed) {
  SlidingRow p;
  const std::string square = p.square.name(), out = p.out.name();  // "square$1" in a rerun
  EXPECT_THAT(StoreAtComputeLevels({p.out}),
              ElementsAre(square + " (" + out + ".yo -> " + out + ".yi)"));
  EXPECT_EQ(p.Wrong(), 0);
  EXPECT_THAT(StoreAtComputeLevels({p.out}), ElementsAre());  // nothing left to change
}

}  // namespace
}  // namespace schedule
}  // namespace braze
