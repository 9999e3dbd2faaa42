// Lowering of RandomUniform and RandomNormal (lower_ops.h; docs/RANDOM.md).
//
// The counter of an element is its row-major flat index in the output, computed from
// the element's own coordinates: its bits do not depend on the schedule, the tiling, the
// vector width or the device. The Philox key is derived on the host from the op's seed
// and op key and baked into the kernel (so both are in the cluster key); the step is
// read from the `step` input at run time, so a new step needs no new kernel.
#include <string>
#include <vector>

#include "braze/random.h"
#include "lower/lower_ops.h"
#include "lower/philox.h"

namespace braze {
namespace lower {

using Halide::Expr;

Value LowerRandom(LoweringContext& ctx, const std::string& name, const Node& node,
                  const Value& like, const Value& step, const TensorType& out) {
  const RandomAttrs& attrs = node.attrs_as<RandomAttrs>();
  const PhiloxKey key = RandomKey(attrs.seed, attrs.op_key.value_or(RandomOpKeyOf(node.name())));
  std::vector<Expr> extents;
  for (size_t d = 0; d < out.shape.size(); ++d) extents.push_back(ctx.Extent(like, d));
  const bool normal = node.op() == OpKind::kRandomNormal;
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    // Fewer than 2^31 elements (CheckSpec, lowering.cc): the flat index fits an Int(32).
    Expr flat = 0;
    for (size_t d = 0; d < index.size(); ++d) flat = flat * extents[d] + index[d];
    const PhiloxWords block = PhiloxBlock(key, Halide::cast(Halide::UInt(32), flat), At(step, {}));
    if (normal) return PhiloxToNormalF32(block);
    return out.dtype == DType::kF64 ? PhiloxToUniformF64(block) : PhiloxToUniformF32(block);
  });
}

}  // namespace lower
}  // namespace braze
