// StepKindOf and AllStepKinds, generated from runtime/step_kinds.def.
#include "runtime/step_kind.h"

namespace braze {

const StepKind& StepKindOf(Step::Kind kind) {
  switch (kind) {
#define V(k, accessor) \
  case Step::Kind::k:  \
    return accessor();
#include "runtime/step_kinds.def"
#undef V
  }
  return ReferenceStepKind();  // not reached: the switch covers every kind
}

const std::vector<const StepKind*>& AllStepKinds() {
  static const std::vector<const StepKind*> kinds = {
#define V(k, accessor) &accessor(),
#include "runtime/step_kinds.def"
#undef V
  };
  return kinds;
}

}  // namespace braze
