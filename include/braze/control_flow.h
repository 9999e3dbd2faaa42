// Control flow in graphs and Functions (cf, issue 40): TensorFlow's tf.cond,
// tf.while_loop and tf.scan. Each body is a C++ lambda traced ONCE into a sub-graph of
// its own (as a Function body is), whose Placeholders stand for what the op hands it; the
// op runs the body at run time as many times as the data says.
//
//   // An RNN over the leading (time) axis of xs [T, B, D]; T may be -1.
//   ScanResult r = Scan(
//       [&](Graph& g, const std::vector<Tensor>& h, const std::vector<Tensor>& x) {
//         Tensor h1 = Tanh(MatMul(x[0], wx) + MatMul(h[0], wh));  // wx, wh: captured
//         return ScanStep{{h1}, {h1}};                           // new carry, step output
//       },
//       {h0}, {xs});
//   // r.carry[0]: the last h [B, H]; r.stacked[0]: every h [T, B, H]
//
// Semantics (docs/CONTROL_FLOW.md says more):
// - Cond(pred, then_fn, else_fn, operands): pred is a scalar bool tensor (anything else is
//   InvalidArgument naming the node); one branch runs. Both branches take the operands and
//   must return as many tensors, of equal dtypes and shapes (a Status naming both
//   branches and the output otherwise; a -1 dim matches any).
// - Scan(fn, init, elems): fn(carry, slices) -> {new carry, step outputs}, once per row
//   of the elems' leading axis (all elems share it; it may be -1). The carry keeps its
//   dtype and shape (a body changing it is a Status naming the node and the value); the
//   step outputs are stacked along a new leading axis. A length of 0 runs fn never: the
//   carry is init and each stacked output has a leading dim of 0 (its other dims are what
//   the trace inferred; a -1 there is an error at run time, naming the node).
//   reverse = true goes from the last row to the first (stacked outputs stay in row order).
// - While(cond_fn, body_fn, loop_vars, max_iterations): while cond_fn(vars) (a scalar
//   bool) vars = body_fn(vars); each var keeps its dtype and shape. max_iterations >= 0
//   stops after that many iterations (as tf.while_loop's maximum_iterations); -1: no
//   bound. Only a bounded While has a gradient. With no loop variable that is a tensor
//   (none at all: tf.while_loop refuses them too) there is no graph to record the error
//   on: the result is an invalid Tensor per loop variable (one for none), which every use
//   reports.
// - Captures: tensors of the enclosing graph a body uses (weights, Variables, a Function's
//   arguments) become explicit inputs of the op, as TF's functional ops capture them; a
//   Variable read in a body reads its value when the op runs. A tensor of any other graph
//   is an error naming it. A body may not create or assign a Variable (an Assign inside a
//   body is an error naming the node: assign the op's result after it instead).
// - JitScopes and DeviceScopes active where the op is built apply to its bodies' ops;
//   a body may open its own JitScope on the Graph& it receives. Bodies are never fused
//   with the ops around the control-flow op: their clusters are compiled on their own.
// - Gradients (braze/gradients.h): Cond -> a Cond over the branches' gradients (the
//   untaken branch gives zeros); Scan -> a reverse Scan reading the carry kept per step;
//   bounded While -> the same, with the iteration count bounded; an unbounded While's
//   gradient is Unimplemented naming the node.
// - Builders never throw: errors (a body that throws, returns tensors of another graph, or
//   has a build error) are recorded on the op's node and returned by every Run.
#ifndef BRAZE_CONTROL_FLOW_H_
#define BRAZE_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braze/graph.h"

namespace braze {

// A branch of Cond: receives the body's Graph and the operands (Placeholders of it).
using BranchFn = std::function<std::vector<Tensor>(Graph& g, const std::vector<Tensor>& operands)>;

// The outputs of the branch that runs.
std::vector<Tensor> Cond(Tensor pred, BranchFn then_fn, BranchFn else_fn,
                         std::vector<Tensor> operands, const std::string& name = "Cond");

// What a Scan step returns: the new carry and this step's outputs.
struct ScanStep {
  std::vector<Tensor> carry;
  std::vector<Tensor> outputs;
};
using ScanFn = std::function<ScanStep(Graph& g, const std::vector<Tensor>& carry,
                                      const std::vector<Tensor>& slices)>;
struct ScanOptions {
  bool reverse = false;
  std::string name = "Scan";
};
struct ScanResult {
  std::vector<Tensor> carry;    // after the last step (init when the length is 0)
  std::vector<Tensor> stacked;  // step output i stacked: [T] + its shape
};
ScanResult Scan(ScanFn fn, std::vector<Tensor> init, std::vector<Tensor> elems,
                const ScanOptions& options = {});

using WhileCondFn = std::function<Tensor(Graph& g, const std::vector<Tensor>& vars)>;
using WhileBodyFn = std::function<std::vector<Tensor>(Graph& g, const std::vector<Tensor>& vars)>;
// The loop variables after the last iteration.
std::vector<Tensor> While(WhileCondFn cond_fn, WhileBodyFn body_fn, std::vector<Tensor> loop_vars,
                          int64_t max_iterations = -1, const std::string& name = "While");

}  // namespace braze

#endif  // BRAZE_CONTROL_FLOW_H_
