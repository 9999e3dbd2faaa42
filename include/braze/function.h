// Function: TensorFlow's tf.function for C++ training loops. A body (a C++ lambda that
// builds ops) is traced into a graph once per input signature; calls with a signature
// seen before reuse that trace and its compiled kernels.
//
//   Graph g;                                   // where the model's state lives
//   Tensor w = Variable(g, init, "w");
//   FunctionOptions options;
//   options.graph = &g;
//   options.input_signature = {{{DType::kF32, {-1, 784}}, {DType::kF32, {-1, 10}}}};
//   options.jit_compile = true;
//   Function step(
//       [&](Graph& g, const std::vector<Tensor>& args) -> std::vector<Tensor> {
//         Tensor loss = Mean(Square(MatMul(args[0], w) - args[1]));
//         auto grads = Gradients({loss}, {w});   // optimizer updates run every call
//         ApplyGradients(Optimizer::Sgd(0.1), {{(*grads)[0], w}});
//         return {loss};
//       },
//       {.input_signature = {{{DType::kF32, {-1, 784}}, {DType::kF32, {-1, 10}}}},
//        .jit_compile = true});
//   auto loss = step({x_batch, y_batch});       // StatusOr<std::vector<HostTensor>>
//
// Semantics (TensorFlow's):
// - The body runs once per new signature (dtype and shape of every argument); each
//   argument is a Placeholder of that spec. tracing_count() counts traces.
// - input_signature: calls are checked against it (a wrong count, dtype, rank or fixed
//   dim is InvalidArgument naming the argument); one trace serves every size of a -1 dim.
// - reduce_retracing: a call that matches no trace but differs from earlier calls of the
//   same dtypes and ranks only in some dims is traced with those dims generalized to -1.
//   Each such trace makes at least one more dim -1, so per combination of argument
//   dtypes and ranks there are at most 1 + (sum of the ranks) traces.
// - jit_compile: true compiles the whole body as one must-compile region (strict: an op
//   that cannot compile, or a cluster that fails to, is InvalidArgument naming it);
//   false compiles nothing (ops run one by one); a HostCall the body builds under
//   JitScope(g, false) runs outside the compiled body (TF's outside_compilation); unset
//   leaves it to
//   session.global_jit_level, and JitScopes opened inside the body work as documented.
// - Every stateful op the body builds (Assign*, optimizer updates, HostCall) runs on each
//   call, as TF's automatic control dependencies do; the returned tensors are fetched.
// - State: Variables created outside the body and used by it (captured) live in a graph
//   the function traces into: FunctionOptions::graph. (Without it the function traces
//   into a graph of its own: Variables and Consts built outside the body are captured
//   into it, and any other tensor built outside the body is an error naming it.)
//   Gradients and optimizers in the body then see the variables themselves. Variable
//   values live on the device where they are used and are shared by every trace of a
//   function and every Function capturing them: a Function whose copy is stale pulls the
//   newest before it runs (one copy, only after another Function or AssignVariable
//   changed it; a training loop copies nothing between calls). ReadVariable and
//   AssignVariable read and write that shared value; Sessions a program creates itself
//   keep their own values, as always.
// - Variables the body creates (an optimizer's slots, built in the body) follow
//   tf.function's rule: only the first trace may create them. They are the function's
//   and live on: every later call, and every later trace that uses them (a body that
//   keeps the Tensors it created on its first call), goes on from their values;
//   ReadVariable and AssignVariable reach them. A later trace that would create a
//   variable (a new signature, reduce_retracing's generalized trace) is
//   FailedPrecondition naming the function and the variable, and nothing is kept or
//   run: a fresh variable would start again from its initial value (Adam would silently
//   restart). Create such variables outside the body (FunctionOptions::graph), or on the
//   first call only, or give an input_signature with -1 dims so one trace serves all.
// - Excessive retracing: when a function has traced 5 times within its last 10 calls, it
//   warns once through the log sink (braze/logging.h), naming the function and the
//   argument dims that changed, and suggesting input_signature or reduce_retracing.
// - RunFunctionsEagerly(true) (tf.config.run_functions_eagerly): every call runs the body
//   anew, its ops one by one on the reference kernels, caching no trace. A JitScope
//   opened by a body then fails the call with FailedPrecondition naming the scope. (With
//   FunctionOptions::graph set, that graph then grows by the body's ops on each call;
//   without it, tensors the body builds do not outlive the call.) Variables the body
//   creates again on each call stand for those of the same names (within the body's name
//   scope) its first trace or eager call created, and go on from their values, in eager
//   and graph calls alike; a new one, or any in a call that a trace would not cover
//   (the first trace's, or the first eager call's, signature), is the error above.
// - Thread safety: a Function may be called from several threads; a new signature is
//   traced and compiled once. The graph a function traces into must outlive it, and
//   must not be changed by other code while functions trace into or run it. A call on
//   the thread that is tracing the same Function (from its body), or that would trace
//   into a graph this thread is running or tracing, is FailedPrecondition, and so is a
//   HostCall of a running trace calling its own Function (its Session is running).
// - Errors (wrong argument count, types, a body that returns no tensors or tensors of
//   another graph, a body that throws, a build error inside the body) are a Status
//   naming the function, and the argument or node. A trace that fails is not kept.
#ifndef BRAZE_FUNCTION_H_
#define BRAZE_FUNCTION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/session.h"

namespace braze {

struct FunctionOptions {
  std::string name = "function";
  // Fixed argument specs; a -1 dim accepts any size. Unset: trace per call signature.
  std::optional<std::vector<TensorSpec>> input_signature;
  bool reduce_retracing = false;
  // true: the body is one must-compile region (strict: an op that cannot compile is
  // InvalidArgument naming it); unset: session.global_jit_level decides (auto-clustering
  // when on); false: nothing is compiled.
  std::optional<bool> jit_compile;
  // Mixed precision (braze/precision.h): kBF16 or kF16 traces the body under a
  // PrecisionScope (16-bit matmuls and elementwise chains, f32 reductions and loss, the
  // Variables f32 masters); kF32 (default): the body's dtypes as written.
  DType precision = DType::kF32;
  SessionOptions session;  // device, scheduler, threads, ...
  // The graph to trace into: where the Variables the body captures live. It must outlive
  // the function. Null: the function traces into a graph of its own.
  Graph* graph = nullptr;
};

using FunctionBody = std::function<std::vector<Tensor>(Graph& g, const std::vector<Tensor>& args)>;

class Function;
namespace function_internal {
struct Trace;
struct Shared;
}  // namespace function_internal

// One trace of a Function: the graph it was traced into, its arguments' specs and a
// call that runs exactly this trace. Owned by its Function; valid while it lives.
class ConcreteFunction {
 public:
  const std::vector<TensorSpec>& signature() const;
  const Graph& graph() const;
  const std::vector<Tensor>& inputs() const;   // the argument placeholders
  const std::vector<Tensor>& outputs() const;  // what the body returned
  absl::StatusOr<std::vector<HostTensor>> operator()(const std::vector<HostTensor>& args);
  // Counters of the session this trace runs in (shared by the function's traces).
  SessionStats stats() const;

 private:
  friend class Function;
  ConcreteFunction(Function* function, function_internal::Trace* trace)
      : function_(function), trace_(trace) {}
  Function* function_;
  function_internal::Trace* trace_;
};

class Function {
 public:
  explicit Function(FunctionBody body, FunctionOptions options = {});
  ~Function();
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;

  absl::StatusOr<std::vector<HostTensor>> operator()(const std::vector<HostTensor>& args);
  // The trace for `signature`, traced now if no trace matches it (tf.function's
  // get_concrete_function). Checked against input_signature when there is one.
  absl::StatusOr<ConcreteFunction*> GetConcreteFunction(const std::vector<TensorSpec>& signature);
  int tracing_count() const;  // TF's experimental_get_tracing_count
  const FunctionOptions& options() const;
  // Counters of the session the traces run in.
  SessionStats stats() const;

 private:
  friend class ConcreteFunction;
  // The trace whose signature is exactly `spec`, traced now if there is none. With
  // `reduce_call` (reduce_retracing), a trace covering that call found under the tracing
  // lock is returned instead, and `spec` is generalized again there against the traces
  // other threads made meanwhile.
  absl::StatusOr<ConcreteFunction*> FindOrTrace(
      const std::vector<TensorSpec>& spec, bool* traced,
      const std::vector<TensorSpec>* reduce_call = nullptr);
  std::unique_ptr<function_internal::Shared> shared_;
};

// tf.config.run_functions_eagerly: process-wide, for debugging.
void RunFunctionsEagerly(bool enable);
bool FunctionsRunEagerly();

// The value of a Variable as Functions left it (the newest copy, wherever it is), or its
// initial value when no Function has run it; FailedPrecondition when uninitialized.
absl::StatusOr<HostTensor> ReadVariable(const Tensor& variable);
// Sets the value every Function sees on its next call (checkpoint restore, tests).
// InvalidArgument naming the variable on a dtype or shape mismatch.
absl::Status AssignVariable(const Tensor& variable, const HostTensor& value);

}  // namespace braze

#endif  // BRAZE_FUNCTION_H_
