// Random programs, the collectives (GenerateOptions::collective_probability;
// docs/DISTRIBUTED.md): AllReduce (sum; the mean of floats, and of i32, which divides
// truncating), Broadcast from any rank and AllGather of earlier values (f32, f64, i32; any
// rank for the reductions and broadcasts, rank >= 1 for the gather; -1 batches too), and
// their values feed later ops. Each records how the reference computes it from every
// rank's copy of its operand (ProgramOp::simulate): the sum of the copies (in rank order,
// as MPI's ring on 2 ranks adds them; more ranks may add in another order, within the f32
// tolerance), the root's copy, their concatenation along dim 0.
// random_program.cc's Generator calls DrawCollectiveOp through the Drawer interface
// (random_program_internal.h), from a random stream of its own.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "braze/distributed.h"
#include "braze/ops.h"
#include "tools/fuzz/random_program_internal.h"

namespace braze {
namespace fuzz {
namespace internal {
namespace {

constexpr int64_t kMaxElements = 50000;  // a dynamic dim counted as 40

int64_t Elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 40 : d;
  return n;
}

bool Reducible(const Tensor& t) {
  return (t.dtype() == DType::kF32 || t.dtype() == DType::kF64 || t.dtype() == DType::kI32) &&
         Elements(t.shape()) <= kMaxElements;
}

Tensor SumOf(const std::vector<Tensor>& copies) {
  Tensor sum = copies[0];
  for (size_t q = 1; q < copies.size(); ++q) sum = sum + copies[q];
  return sum;
}

bool DrawAllReduce(Drawer& d) {
  const int x = d.Pick(Reducible);
  if (x < 0) return false;
  const bool mean = d.Chance(0.3);
  const int v = d.Push(
      {x},
      [mean](Graph&, const std::vector<Tensor>& in) {
        return AllReduce(in[0], mean ? Reduction::kMean : Reduction::kSum);
      },
      mean ? "AllReduce($0, Reduction::kMean)" : "AllReduce($0)");
  // As AllReduce builds its mean (frontend/collectives.cc): a Mul by 1 / N of floats, a
  // truncating Div of integers.
  d.SetSimulate(v, [mean](Graph& g, const std::vector<Tensor>& copies, int) {
    const Tensor sum = SumOf(copies);
    if (!mean) return sum;
    const DType dtype = sum.dtype();
    const double n = static_cast<double>(copies.size());
    return IsFloating(dtype) ? sum * ScalarConst(g, 1.0 / n, dtype)
                             : sum / ScalarConst(g, n, dtype);
  });
  return true;
}

bool DrawBroadcast(Drawer& d) {
  const int x = d.Pick([](const Tensor& t) { return Elements(t.shape()) <= kMaxElements; });
  if (x < 0) return false;
  // The root as drawn, modulo the world's size when built: any world has rank 0, and the
  // last rank of a world of 2 or 3 is often drawn.
  const int drawn = d.Uniform(3);
  const int v = d.Push(
      {x},
      [drawn](Graph&, const std::vector<Tensor>& in) {
        return Broadcast(in[0], drawn % WorldSize());
      },
      absl::StrCat("Broadcast($0, ", drawn, " % WorldSize())"));
  // A node of its own per rank (a one-input Concat, a Reshape of a scalar), not the root's
  // copy itself: each rank's fetch of it is a y of its own in the gradients' sum.
  d.SetSimulate(v, [drawn](Graph&, const std::vector<Tensor>& copies, int) {
    const Tensor root = copies[drawn % copies.size()];
    if (copies.size() == 1) return root;
    return root.rank() == 0 ? Reshape(root, {}) : Concat({root}, 0);
  });
  return true;
}

bool DrawAllGather(Drawer& d) {
  const int x = d.Pick(
      [](const Tensor& t) { return t.rank() >= 1 && Elements(t.shape()) <= kMaxElements / 3; });
  if (x < 0) return false;
  const int v = d.Push(
      {x}, [](Graph&, const std::vector<Tensor>& in) { return AllGather(in[0]); }, "AllGather($0)");
  d.SetSimulate(v, [](Graph&, const std::vector<Tensor>& copies, int) {
    return copies.size() == 1 ? copies[0] : Concat(copies, 0);
  });
  return true;
}

}  // namespace

bool DrawCollectiveOp(Drawer& d) {
  switch (d.Uniform(3)) {
    case 0:
      return DrawAllReduce(d);
    case 1:
      return DrawBroadcast(d);
    default:
      return DrawAllGather(d);
  }
}

}  // namespace internal
}  // namespace fuzz
}  // namespace braze
