// Shared pieces of the lowering: how a tensor is represented as a Halide Func, and the
// helpers every op lowering uses.
//
// A tensor of rank r is a Func of max(r, 1) pure vars. Halide's dim 0 is the innermost
// (contiguous) one, which is our LAST dim, so every index is reversed between the two
// orders; At() and Define() do that in one place so op lowerings speak row-major
// indices only. Rank-0 tensors get one var of extent 1: outputs, inputs and the
// autoschedulers never see a 0-dimensional Func.
//
// Internal header: includes Halide.h; only src/lower and src/compile .cc files use it.
#ifndef BRAZE_LOWER_LOWER_UTIL_H_
#define BRAZE_LOWER_LOWER_UTIL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "absl/status/status.h"
#include "braze/dtype.h"
#include "braze/host_tensor.h"
#include "device/halide_util.h"
#include "schedule/pipeline_info.h"

namespace braze {
namespace lower {

using Body = std::function<Halide::Expr(const std::vector<Halide::Expr>& index)>;

// Exactly one of func, param, constant and inline_body is defined. Inputs, constants
// and the cheap finishing step of a reduction (a cast, Mean's division) are read
// directly rather than through a Func: every Func is one more stage for the
// autoschedulers to search over, and Adams2019's search time grows quickly with stages
// (Add of a 17x33x65 tensor and a row: 1.3 s with copy Funcs for inputs and output,
// 1.3 ms without).
struct Value {
  Halide::Func func;         // a computed value
  Halide::ImageParam param;  // a cluster input
  Halide::Expr constant;     // a value equal everywhere (or a tensor with no elements)
  Body inline_body;          // a value computed where it is read, from a row-major index
  DType dtype = DType::kF32;
  Shape shape;  // row-major order, fully defined (a symbolic dim: its estimate)
  // Symbolic shapes: per row-major dim, the symbol class of a symbolic dim, or -1;
  // empty: every dim is concrete. LoweringContext::Extent gives a dim's extent.
  std::vector<int> sym;
  // A multi-element Const's data (the graph's, alive while lowering), for a consumer that
  // takes whole buffers (the library GEMM): it gets its own copy, not the Func's reads.
  const HostTensor* const_value = nullptr;
  // Every element is >= 0, -0, +inf or NaN (an Exp, a Square, ...: NonNegative in
  // lowering.cc): a sum of such terms cannot cancel (lower_reduce.cc groups them in f32).
  bool nonnegative = false;
};

// The class of `v`'s row-major dim d, or -1 when it is concrete.
inline int SymbolOf(const Value& v, size_t d) { return d < v.sym.size() ? v.sym[d] : -1; }

// Per-dim symbolic flags in Halide order (reversed; rank 0 -> {false}), for schedules.
schedule::Symbolic HalideSymbolic(const std::vector<int>& sym, size_t rank);

using device::CatchHalideErrors;
using device::HalideType;

// A constant of `dtype` converted with Cast's rules: bool is v != 0, i32 truncates toward
// zero and saturates, NaN -> 0.
Halide::Expr TypedConst(DType dtype, double v);

// x is NaN, tested on its bits with integer ops: immune to LLVM's no-NaNs flag, and no
// is_nan call (which, in a vectorized guarded update, trips a Halide 14 miscompile; see
// schedule/schedule_check.h). Floating x only.
Halide::Expr IsNanBits(const Halide::Expr& x);

// A float's bits (u32 or u64) with the sign bit cleared: |x|'s bits.
Halide::Expr AbsBits(const Halide::Expr& bits);

// numpy's maximum/minimum: NaN-propagating for floats, plain for integers.
Halide::Expr NanMax(const Halide::Expr& a, const Halide::Expr& b);

// a + b, a - b, a * b that wrap like the reference's two's complement ints. Halide takes
// signed overflow as impossible and simplified Greater(x + 1, x) to true at INT32_MAX;
// for Int(32) these compute in UInt(32), where overflow wraps, and reinterpret back (the
// same instructions). Other types: the plain op.
Halide::Expr WrapAdd(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr WrapSub(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr WrapMul(const Halide::Expr& a, const Halide::Expr& b);
Halide::Expr NanMin(const Halide::Expr& a, const Halide::Expr& b);

// Extents in Halide order (reversed), rank 0 -> {1}.
schedule::Extents HalideExtents(const Shape& shape);

// The pure vars of a Func holding a tensor of `rank`, in Halide order.
std::vector<Halide::Var> HalideVars(int rank);

// Reads `v` at a row-major index (one Expr per dim; empty for rank 0).
Halide::Expr At(const Value& v, const std::vector<Halide::Expr>& index);

// Index of an input of shape `in` when the broadcast result of shape `out` is read at
// `index` (numpy rules: right-aligned; size-1 dims read element 0).
std::vector<Halide::Expr> BroadcastIndex(const Shape& in, const Shape& out,
                                         const std::vector<Halide::Expr>& index);

// Per-cluster lowering state: unique Func names and the Funcs with update definitions,
// which the safe default schedule must place.
class LoweringContext {
 public:
  // LowerOptions' library GEMM settings (lowering.h).
  int64_t library_gemm_min_work = -1;
  int64_t library_conv_min_work = -1;
  int library_gemm_threads = 0;
  bool library_gemm_bf16 = false;
  bool gpu = false;              // LowerOptions::gpu
  bool cuda = false;             // LowerOptions::cuda
  bool calls_library = false;    // some MatMul became a library call
  bool block_long_sums = false;  // LowerOptions::block_long_sums
  bool long_sums = false;        // some f32 sum is long (long_sums.h), blocked or not
  // The f32 Funcs that 16-bit ops compute in, each read through its rounding
  // (lower_float16.h): no graph value holds them, yet they are what the safe default
  // may store once (shared_values.h) or break an inline chain at (inline_budget.h).
  std::vector<Value> wide_values;

  std::string UniqueName(const std::string& base);
  std::vector<schedule::Stage>& stages() { return stages_; }
  // Symbolic shapes: the extent of each symbol class (an input buffer's extent).
  std::vector<Halide::Expr>& symbols() { return symbols_; }
  // The extent of `v`'s row-major dim d: a constant, or its class's extent.
  Halide::Expr Extent(const Value& v, size_t d) const;
  // A 0 of `type` that Halide cannot see is 0: a load of a one-element f64 buffer of this
  // pipeline (kOpaqueZeroBuffer, lowering.h; docs/HALIDE14.md, "Loop trimming strips
  // strict_float"). The load is removed again after trimming (codegen_workarounds.h).
  Halide::Expr OpaqueZero(const Halide::Type& type);

 private:
  Halide::Buffer<double> zero_;
  std::vector<Halide::Expr> symbols_;
  std::map<std::string, int> counts_;
  std::vector<schedule::Stage> stages_;
};

// A new pure Func `name` over `shape` with value body(index) cast to `dtype`'s type.
Value Define(LoweringContext& ctx, const std::string& name, DType dtype, const Shape& shape,
             const Body& body);

// A Value computed inline by body(index), cast to `dtype`'s type.
Value Inline(DType dtype, const Shape& shape, Body body);

// `v`, with a constant turned into a Func of its shape. Reductions need that: an RDom
// the update never reads is dropped, and scheduling it then fails.
Value Materialize(LoweringContext& ctx, const std::string& name, const Value& v);

// A value of the given type that is `v` everywhere (no Func). Also stands in for
// tensors with no elements, which nothing ever reads.
Value Fill(DType dtype, const Shape& shape, double v);

}  // namespace lower
}  // namespace braze

#endif  // BRAZE_LOWER_LOWER_UTIL_H_
