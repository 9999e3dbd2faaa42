// The safe default's sibling outputs (SafeScheduler::FuseSiblingOutputs): outputs of the
// same static extents, each parallel over its rows and none reading another, computed in
// one loop nest (compute_with at the row loop), as an optimizer's three updates of one
// variable. Checked against the reference kernels on random values, with rows that the
// task size does not divide, and the schedule text says which outputs were fused.
#include <string>

#include "braze/ops.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"

namespace braze {
namespace lowertest {
namespace {

CompileOptions FourThreads() {
  CompileOptions o;
  o.scheduler = Scheduler::kSafeDefault;
  o.num_threads = 4;  // the row-parallel schedule on any machine
  return o;
}

// Adam's three updates of a [rows, cols] variable from its gradient, m and v.
Case AdamUpdates(int64_t rows, int64_t cols, DType grad_dtype) {
  Case c;
  const Shape s = {rows, cols};
  Tensor g = c.Input(grad_dtype, s, 1);
  Tensor m = c.Input(DType::kF32, s, 2);
  Tensor v = c.Input(DType::kF32, s, 3, 0, 1);
  Tensor w = c.Input(DType::kF32, s, 4);
  Tensor g32 = grad_dtype == DType::kF32 ? g : Cast(g, DType::kF32);
  Tensor m_new = m * 0.9 + g32 * 0.1;
  Tensor v_new = v * 0.999 + Square(g32) * 0.001;
  c.outputs = {m_new, v_new, w - m_new * 1e-3 / (Sqrt(v_new) + 1e-8)};
  return c;
}

std::string ScheduleOf(const Case& c) {
  absl::StatusOr<std::unique_ptr<CompiledKernel>> kernel = CompileCluster(SpecOf(c), FourThreads());
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? (*kernel)->schedule_text() : "";
}

TEST(SiblingOutputsTest, AnOptimizersUpdatesShareOneLoopNest) {
  for (DType grad : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(grad));
    // 131 rows in tasks of 131 / (4 threads * 4 tasks) = 8: the last task shifted inwards.
    Case c = AdamUpdates(131, 523, grad);
    EXPECT_TRUE(
        CompileRunCompare(c, Scheduler::kSafeDefault, {1e-5, 1e-6}, nullptr, FourThreads()));
    const std::string text = ScheduleOf(c);
    EXPECT_NE(text.find("compute_with("), std::string::npos) << text;
  }
}

// Too few rows for the row-parallel form, or one output of another shape: nothing to
// fuse, or only the outputs that match, and the same values.
TEST(SiblingOutputsTest, OtherShapesAndTinyExtents) {
  for (const Shape& s : {Shape{1, 7}, Shape{3, 5}, Shape{2, 1031}}) {
    Case c = AdamUpdates(s[0], s[1], DType::kF32);
    EXPECT_TRUE(
        CompileRunCompare(c, Scheduler::kSafeDefault, {1e-5, 1e-6}, nullptr, FourThreads()));
  }
  Case c;
  Tensor a = c.Input(DType::kF32, {67, 129}, 5);
  Tensor b = c.Input(DType::kF32, {67, 129}, 6);
  Tensor row = c.Input(DType::kF32, {129}, 7);
  c.outputs = {a * b, Exp(a) - b, Sum(a, {0}) + row, a + row};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-5, 1e-6}, nullptr, FourThreads()));
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
