// Which input dims changed across a set of input signatures, in words, for the
// messages that name them: Function's excessive-retracing warning and the runtime's
// recompile guard; and what is wrong with a value's shape, for the errors that name it.
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

// "shape [-3,2] has a negative dim or a byte size past int64": what is wrong with a
// value's shape (a HostTensor's: fed, passed to a Function, held by a Const) whose
// num_elements() is negative. Every dim is shown as it is: for a value, -1 is not
// "unknown" but a bad dim (ShapeString showed a fed {-3, 2} as "[?,2]").
std::string BadValueShape(const Shape& shape);

}  // namespace braze

#endif  // BRAZE_IR_CHANGING_DIMS_H_
