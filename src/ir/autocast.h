// The mixed-precision policy's rule (braze/precision.h; the table is in
// docs/MIXED_PRECISION.md, "The policy"): which inputs of an op being built get a Cast
// to the compute dtype or back to f32. Graph::AddNode calls it while a PrecisionScope
// is open, before it creates the node.
#ifndef BRAZE_IR_AUTOCAST_H_
#define BRAZE_IR_AUTOCAST_H_

#include <vector>

#include "braze/graph.h"

namespace braze::ir {

// What the policy does with an op's floating inputs.
enum class AutocastRule {
  kLower,       // compute in 16 bits: every f32 input is cast down (MatMul, Conv2D, ...)
  kFollow,      // 16 bits if any floating input is: the f32 ones are cast down (elementwise)
  kWiden,       // compute in f32: every 16-bit input is cast up (Sum, Mean, Exp, Log, ...)
  kMatchFirst,  // every floating input cast to input 0's dtype (the attention gradients)
  kAssign,      // an update: the value is cast to the variable's dtype
  kKeep,        // untouched (sources, Cast, selections, random ops, collectives, HostCall)
};

AutocastRule AutocastRuleOf(OpKind op);

// Rewrites `inputs` of an `op` about to be built on `g` under compute dtype `compute`
// (kBF16 or kF16), adding the Casts the rule asks for. Invalid inputs, inputs of other
// graphs and inputs with errors are left for AddNode to report.
void AutocastInputs(Graph& g, OpKind op, DType compute, std::vector<Tensor>* inputs);

}  // namespace braze::ir

#endif  // BRAZE_IR_AUTOCAST_H_
