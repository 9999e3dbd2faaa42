// The safe default stores an expensive value that inlining would evaluate at several
// places per element once, at root (schedule/shared_values.h), and leaves cheap ones
// inlined; results stay those of the reference kernels.
#include "schedule/shared_values.h"

#include <string>
#include <thread>

#include "braze/gradients.h"
#include "lower_test_util.h"
#include "schedule/scheduler.h"

namespace braze {
namespace lowertest {
namespace {

// The schedule text of `c` compiled by the safe default.
std::string SafeDefaultText(const Case& c) {
  CompileOptions options;
  options.scheduler = Scheduler::kSafeDefault;
  auto kernel = CompileCluster(SpecOf(c), options);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? (*kernel)->schedule_text() : "";
}

int StoredOnce(const std::string& text) {
  int n = 0;
  for (size_t at = text.find(kSharedValueStoredOnce); at != std::string::npos;
       at = text.find(kSharedValueStoredOnce, at + 1)) {
    ++n;
  }
  return n;
}

TEST(SharedValues, ASigmoidReadByTwoOutputsIsStoredOnce) {
  for (const Shape& shape : std::vector<Shape>{{13, 7}, {1, 1}, {3, 17}, {2, 31}}) {
    Case c;
    Tensor x = c.Input(DType::kF32, shape, 11, -4, 4);
    Tensor y = c.Input(DType::kF32, shape, 12, -4, 4);
    Tensor a = Sigmoid(x * y);
    c.outputs = {a * 2.0 + x, Sum(a, {0})};
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault)) << ShapeString(shape);
    const std::string text = SafeDefaultText(c);
    EXPECT_EQ(StoredOnce(text), 1) << ShapeString(shape) << "\n" << text;
  }
}

// A 16-bit op computes in an f32 Func and is read through its rounding
// (lower_float16.h): that Func is no graph value, and it was never stored, so the bf16
// GRU step recomputed its gates in every reader (152 ms a step against f32's 22 on the
// 2-core VM). Stored, the readers round the one stored f32 value: the same bits.
TEST(SharedValues, A16BitSigmoidReadByTwoOutputsIsStoredOnce) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (const Shape& shape : std::vector<Shape>{{13, 7}, {1, 1}, {2, 31}}) {
      Case c;
      Tensor x = c.Input(dtype, shape, 61, -4, 4);
      Tensor y = c.Input(dtype, shape, 62, -4, 4);
      Tensor a = Sigmoid(x * y);
      c.outputs = {a * 2.0 + x, Sum(a, {0})};
      EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault))
          << DTypeName(dtype) << " " << ShapeString(shape);
      const std::string text = SafeDefaultText(c);
      EXPECT_EQ(StoredOnce(text), 1) << DTypeName(dtype) << " " << ShapeString(shape) << "\n"
                                     << text;
    }
  }
}

TEST(SharedValues, ACheapValueReadTwiceStaysInlined) {
  Case c;
  Tensor x = c.Input(DType::kF32, {13, 7}, 21);
  Tensor y = c.Input(DType::kF32, {13, 7}, 22);
  Tensor a = x * y + 1.0;
  c.outputs = {a * 2.0, Sum(a, {0})};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault));
  const std::string text = SafeDefaultText(c);
  EXPECT_EQ(StoredOnce(text), 0) << text;
}

TEST(SharedValues, AValueReadOnceStaysInlined) {
  Case c;
  Tensor x = c.Input(DType::kF32, {13, 7}, 31);
  c.outputs = {Tanh(Sigmoid(x) * 3.0)};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault));
  EXPECT_EQ(StoredOnce(SafeDefaultText(c)), 0);
}

// A sigmoid read by three terms of one output (GELU's gradient has this shape) is
// evaluated once per element there: the terms are inlined into one loop nest, where
// CSE computes it once, so storing it would only add a write and a read of the tensor.
// Read by that output and by a column sum (two loop nests), it is stored.
TEST(SharedValues, AValueReadByInlinedReadersOfOneOutputStaysInlined) {
  for (const Shape& shape : std::vector<Shape>{{13, 7}, {1, 1}, {3, 17}, {2, 31}}) {
    for (bool with_sum : {false, true}) {
      Case c;
      Tensor x = c.Input(DType::kF32, shape, 51, -4, 4);
      Tensor y = c.Input(DType::kF32, shape, 52, -4, 4);
      Tensor s = Sigmoid(x * y);
      Tensor g = s * x + s * (1.0 - s) * y + Exp(s) * 0.5;
      c.outputs = {g};
      if (with_sum) c.outputs.push_back(Sum(g, {0}));
      EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-5, 1e-5}))
          << ShapeString(shape);
      const std::string text = SafeDefaultText(c);
      EXPECT_EQ(StoredOnce(text), with_sum ? 1 : 0) << ShapeString(shape) << "\n" << text;
    }
  }
}

// The GRU cell's gradient (examples/lib/gru.h's cell, issue 40): its gates are read by
// several gradient terms, each a Pad of a Slice's gradient summed over the gates' width.
TEST(SharedValues, GruCellGradientMatchesTheReference) {
  struct Size {
    int64_t batch, input, hidden;
  };
  for (const Size& s : std::vector<Size>{{13, 7, 5}, {1, 1, 1}, {4, 3, 17}}) {
    Case c;
    const int64_t H = s.hidden;
    Tensor x = c.Input(DType::kF32, {s.batch, s.input}, 41);
    Tensor h = c.Input(DType::kF32, {s.batch, H}, 42);
    Tensor w_i = c.Input(DType::kF32, {s.input, 3 * H}, 43);
    Tensor w_h = c.Input(DType::kF32, {H, 3 * H}, 44);
    Tensor b_i = c.Input(DType::kF32, {3 * H}, 45);
    Tensor b_h = c.Input(DType::kF32, {3 * H}, 46);
    Tensor up = c.Input(DType::kF32, {s.batch, H}, 47);
    Tensor gi = MatMul(x, w_i) + b_i;
    Tensor gh = MatMul(h, w_h) + b_h;
    auto gate = [H](Tensor t, int64_t k) { return Slice(t, {0, k * H}, {-1, H}); };
    Tensor r = Sigmoid(gate(gi, 0) + gate(gh, 0));
    Tensor z = Sigmoid(gate(gi, 1) + gate(gh, 1));
    Tensor n = Tanh(gate(gi, 2) + r * gate(gh, 2));
    Tensor h1 = n + z * (h - n);
    auto grads = Gradients({Sum(h1 * up)}, {h, w_h, b_i, b_h});
    ASSERT_TRUE(grads.ok()) << grads.status();
    c.outputs = {h1, (*grads)[0], (*grads)[2], (*grads)[3]};
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-4, 1e-5}))
        << s.batch << "x" << s.input << "x" << s.hidden;
    EXPECT_GE(StoredOnce(SafeDefaultText(c)), 2);
  }
}

// A ReLU that a MaxPoolGrad's argmax and the ReLU's own gradient both read (a CNN's
// BN - ReLU - max pool, backward) is stored once at root (extremum_operands.h). It is a
// whole activation: stored by a vectorized loop nest, parallel where the work is large
// enough (the CNN example's step stored 3.2M elements from one thread).
TEST(SharedValues, AComparedOperandIsStoredVectorizedAndParallel) {
  for (const Shape& shape : std::vector<Shape>{{3, 17, 22, 32}, {3, 13, 10, 19}, {1, 2, 2, 1}}) {
    Case c;
    const int64_t channels = shape.back();
    Tensor x = c.Input(DType::kF32, shape, 61, -2, 2);
    Tensor scale = c.Input(DType::kF32, {channels}, 62, 0.5, 2);
    Tensor shift = c.Input(DType::kF32, {channels}, 63, -1, 1);
    Tensor pooled = MaxPool(Relu(x * scale + shift), {2, 2}, {2, 2});
    Tensor up = c.Input(DType::kF32, pooled.shape(), 64);
    auto grads = Gradients({Sum(pooled * up)}, {x, scale});
    ASSERT_TRUE(grads.ok()) << grads.status();
    c.outputs = {(*grads)[0], (*grads)[1]};
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-4, 1e-5})) << ShapeString(shape);
    const std::string text = SafeDefaultText(c);
    const size_t at = text.find(": compute_root (read by a reduction and a comparison)");
    ASSERT_NE(at, std::string::npos) << ShapeString(shape) << "\n" << text;
    const std::string name = text.substr(text.rfind('\n', at) + 1, at - text.rfind('\n', at) - 1);
    const size_t line = text.find("\n" + name + ": vectorize(", at);
    if (channels == 1) continue;  // a vector of one lane: nothing to vectorize
    ASSERT_NE(line, std::string::npos) << ShapeString(shape) << "\n" << text;
    const std::string schedule = text.substr(line + 1, text.find('\n', line + 1) - line - 1);
    // Parallel above min_parallel_work (2^15 elements), on a machine of several cores.
    const bool parallel = channels == 32 && std::thread::hardware_concurrency() > 1;
    EXPECT_EQ(schedule.find("parallel(") != std::string::npos, parallel) << schedule;
  }
}

// The same backward pass over an activation of more than kSharedValueCacheBytes: its
// routed gradient and the products of it (cost 65-99, each read by a column sum and by
// the input's gradient) are recomputed in both loop nests rather than written and read
// back through DRAM (the CNN example's BN1 backward ran 17% faster so); over a small
// one they are stored once. An expensive value over the same activation (a tanh of a
// sigmoid, read by an output and a column sum) is stored at either size.
TEST(SharedValues, CheapValuesOverAnActivationAreRecomputed) {
  for (const Shape& shape : std::vector<Shape>{{8, 29, 31, 37}, {3, 13, 10, 19}}) {
    const bool large = NumElements(shape) * 4 > schedule::kSharedValueCacheBytes;
    Case c;
    const int64_t channels = shape.back();
    Tensor x = c.Input(DType::kF32, shape, 71, -2, 2);
    Tensor scale = c.Input(DType::kF32, {channels}, 72, 0.5, 2);
    Tensor shift = c.Input(DType::kF32, {channels}, 73, -1, 1);
    Tensor pooled = MaxPool(Relu(x * scale + shift), {2, 2}, {2, 2});
    Tensor up = c.Input(DType::kF32, pooled.shape(), 74);
    auto grads = Gradients({Sum(pooled * up)}, {x, scale, shift});
    ASSERT_TRUE(grads.ok()) << grads.status();
    c.outputs = {(*grads)[0], (*grads)[1], (*grads)[2]};
    EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-4, 1e-5})) << ShapeString(shape);
    const std::string text = SafeDefaultText(c);
    if (large) {
      EXPECT_EQ(StoredOnce(text), 0) << ShapeString(shape) << "\n" << text;
    } else {
      EXPECT_GE(StoredOnce(text), 1) << ShapeString(shape) << "\n" << text;
    }

    Case e;
    Tensor a = e.Input(DType::kF32, shape, 75, -2, 2);
    Tensor b = e.Input(DType::kF32, shape, 76, -2, 2);
    Tensor t = Tanh(Sigmoid(a * b) * 3.0) * Sigmoid(a - b);
    e.outputs = {t * a, Sum(t, {0, 1, 2})};
    EXPECT_TRUE(CompileRunCompare(e, Scheduler::kSafeDefault, {1e-4, 1e-5})) << ShapeString(shape);
    EXPECT_EQ(StoredOnce(SafeDefaultText(e)), 1) << ShapeString(shape);
  }
}

// A stencil chain over more than kSharedValueCacheBytes: each level averages four
// diagonal neighbours of the one below (a Pad read by four Slices). With everything
// inlined the output's loop nest reads more distinct elements than SharedExpensiveValues
// follows in one nest (kMaxCallsPerNest), so the top levels' counts saturate before
// their Pads' second reads are counted. A saturated value is stored whatever its size:
// inlined, its evaluations (and the compile time) grow without bound with the depth.
// Every level's Pad is stored (before the fix the top one, counted 0 or 1 time per
// element there, stayed inlined); results stay the reference's.
TEST(SharedValues, ASaturatedStencilChainOverALargeValueIsStored) {
  constexpr int kLevels = 7;
  const Shape shape{521, 509};  // 1.01 MiB of f32
  ASSERT_GT(NumElements(shape) * 4, schedule::kSharedValueCacheBytes);
  Case c;
  Tensor x = c.Input(DType::kF32, shape, 81, -2, 2);
  Tensor s = Sigmoid(x * 1.5);
  for (int level = 0; level < kLevels; ++level) {
    Tensor p = Pad(s, {{1, 1}, {1, 1}});
    auto at = [&](int64_t i, int64_t j) { return Slice(p, {i, j}, {shape[0], shape[1]}); };
    s = (at(0, 0) + at(0, 2) + at(2, 0) + at(2, 2)) * 0.25;
  }
  c.outputs = {s};
  EXPECT_TRUE(CompileRunCompare(c, Scheduler::kSafeDefault, {1e-4, 1e-5}));
  const std::string text = SafeDefaultText(c);
  EXPECT_GE(StoredOnce(text), kLevels) << text;
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
