// The collective builders of braze/distributed.h: ops recording the world they were built
// for (ir/world.h), so shape inference, the gradients and the runtime's check all see it.
#include "braze/distributed.h"
#include "braze/ops.h"
#include "ir/world.h"

namespace braze {
namespace {

Tensor Collective(OpKind op, Tensor x, int root) {
  if (!x.valid()) return Tensor();
  const World w = CurrentWorld();
  return x.graph()->AddNode(op, {x}, CollectiveAttrs{w.size, w.rank, root});
}

}  // namespace

int WorldRank() { return CurrentWorld().rank; }
int WorldSize() { return CurrentWorld().size; }

Tensor AllReduce(Tensor x, Reduction reduction) {
  Tensor sum = Collective(OpKind::kAllReduce, x, 0);
  if (reduction == Reduction::kSum || !sum.valid()) return sum;
  // A plain Mul (in x's dtype), so the clusterer fuses it with the kernels after it; an
  // integer mean divides (truncating, as integer Div does).
  const double n = CurrentWorld().size;
  if (!IsFloating(x.dtype())) return sum / ScalarConst(*x.graph(), n, x.dtype());
  return sum * ScalarConst(*x.graph(), 1.0 / n, x.dtype());
}

Tensor Broadcast(Tensor x, int root) { return Collective(OpKind::kBroadcast, x, root); }

Tensor AllGather(Tensor x) { return Collective(OpKind::kAllGather, x, 0); }

}  // namespace braze
