// Lowering of the window ops (in progress).
#include "absl/strings/str_cat.h"
#include "lower/lower_ops.h"

namespace braze {
namespace lower {

absl::StatusOr<Value> LowerConv(LoweringContext&, const std::string& name, OpKind op,
                                const Conv2DAttrs&, const std::vector<Value>&, const TensorType&) {
  return absl::UnimplementedError(absl::StrCat(name, ": ", OpName(op), " has no lowering yet"));
}

absl::StatusOr<Value> LowerPool(LoweringContext&, const std::string& name, OpKind op,
                                const Pool2DAttrs&, const std::vector<Value>&, const TensorType&) {
  return absl::UnimplementedError(absl::StrCat(name, ": ", OpName(op), " has no lowering yet"));
}

}  // namespace lower
}  // namespace braze
