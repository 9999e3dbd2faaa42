// What launching a compiled cluster needs besides its code, whoever compiled it (the
// JIT, or ahead of time into a shared library that the disk cache keeps): the argument
// layout every launch is checked against and wrapped by (compile/launch.h), and what
// dumps and logs say of the kernel. The disk cache writes it to an entry's .meta file.
//
// Plain data and no Halide, so that the disk cache's header can include it.
#ifndef BRAZE_COMPILE_KERNEL_LAYOUT_H_
#define BRAZE_COMPILE_KERNEL_LAYOUT_H_

#include <string>
#include <vector>

#include "braze/dtype.h"
#include "schedule/scheduler.h"

namespace braze {
namespace compile {

struct KernelLayout {
  // Per spec input: it had no elements at compile time, so it is no argument of the
  // compiled function (and must have none at launch).
  std::vector<bool> input_elided;
  // Per spec output: its index among the pipeline's outputs; -1 when it has no
  // elements (nothing computes it).
  std::vector<int> pipeline_output;
  // Per spec output: dtype and shape (-1 dims: symbolic, any size at launch).
  std::vector<TensorType> output_types;
  Scheduler scheduler = Scheduler::kSafeDefault;  // after fall-through
  std::vector<std::string> failures;              // schedulers refused first, "<Scheduler>: <why>"
  std::string schedule;                           // the schedule as text, for dumps
};

}  // namespace compile
}  // namespace braze

#endif  // BRAZE_COMPILE_KERNEL_LAYOUT_H_
