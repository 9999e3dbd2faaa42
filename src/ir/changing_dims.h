// Which input dims changed across a set of input signatures, in words, for the
// messages that name them: Function's excessive-retracing warning and the runtime's
// recompile guard; and a value's dims as they are, for messages about bad ones.
#ifndef BRAZE_IR_CHANGING_DIMS_H_
#define BRAZE_IR_CHANGING_DIMS_H_

#include <string>
#include <vector>

#include "braze/dtype.h"

namespace braze {

// "input 0 dim 0 (1, 2, 3, ...)" for every dim that takes several values among the
// signatures with the first one's dtypes and ranks (up to 8 values shown, -1 as "?"),
// plus "input dtypes or ranks" when those differ too; `noun` replaces "input".
std::string ChangingDims(const std::vector<std::vector<TensorType>>& signatures,
                         const std::string& noun);

// "[-1,3]": every dim as it is, for a value's shape (a HostTensor's), where -1 is not
// "unknown" but a bad dim: ShapeString showed a fed {-3, 2} as "[?,2]".
std::string DimsString(const Shape& shape);

}  // namespace braze

#endif  // BRAZE_IR_CHANGING_DIMS_H_
