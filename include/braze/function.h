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
//   traced and compiled once. Calls of one Function run one at a time in its session,
//   each reading what the one before wrote. Not so across Functions: a call reads the
//   shared variables at its start and publishes what it assigns at its end, so two
//   Functions that assign one variable, called from two threads at once, can lose an
//   update (unlike TF, whose variable ops are atomic); call them from one thread, or
//   serialize them. The graph a function traces into must outlive it, and
//   must not be changed by other code while functions trace into or run it. A call on
//   the thread that is tracing the same Function (from its body), or that would trace
//   into a graph this thread is running or tracing, is FailedPrecondition, and so is a
//   HostCall of a running trace calling its own Function (its Session is running).
// - Static (non-tensor) arguments, TF's Python-value arguments: a C++ value that changes
//   what the body builds (a loop count, a training flag, an activation's name) is passed
//   to Function::Call as an Arg holding a bool, an integer (kept as int64_t), a floating
//   value (kept as double) or a string; tensors are Args too. A body taking
//   `const std::vector<TracedArg>&` (TracedArgsBody) receives, per argument, the
//   placeholder of a tensor argument or the value of a static one. The value is part of
//   the trace key: one trace per distinct value (and tensor signature), a call with a
//   value seen before reuses its trace (bool true and int 1 are different values; a
//   double is compared by its bits, not by ==: a NaN reuses the trace of a NaN of the
//   same bits, while NaNs of another sign or payload, and -0.0 and 0.0, differ). Which
//   arguments are static is fixed by the first trace, as the argument count is: a static
//   value where it took a tensor, or the reverse, is InvalidArgument naming the argument.
//   input_signature covers the tensor arguments only, in order; a static value where it
//   expects a tensor is InvalidArgument naming the argument. reduce_retracing generalizes
//   dims among the traces of the same static values. The retracing warning names the
//   static arguments whose values changed ("argument 1 (values 3, 4, 5, 6, 7)"). A static
//   value never reaches the graph as data: give a value that varies a lot (a step count,
//   a learning rate) as a tensor instead. A body of the tensor-only kind (FunctionBody)
//   takes no static values (InvalidArgument naming the first). operator() is Call with
//   tensors only.
// - Errors (wrong argument count, types, a body that returns no tensors or tensors of
//   another graph, a body that throws, a build error inside the body) are a Status
//   naming the function, and the argument or node (InvalidArgument for a body that
//   throws, ResourceExhausted for its std::bad_alloc). A trace that fails is not kept:
//   the graph is rolled back to what it was, names included (the next trace's variables
//   and random ops are named, and keyed, as if the failed one never ran). Tensors a body
//   kept from a failed trace name nodes that no longer exist: do not use them.
#ifndef BRAZE_FUNCTION_H_
#define BRAZE_FUNCTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
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

// The value of a static argument (see "Static arguments" above).
using StaticValue = std::variant<bool, int64_t, double, std::string>;
std::string StaticValueString(const StaticValue& value);  // "int 3", "string \"relu\""

// One argument of Function::Call: a tensor, or a static value that is part of the trace
// key. Integers of any type are kept as int64_t, floating values as double.
class Arg {
 public:
  Arg(HostTensor tensor) : tensor_(std::move(tensor)) {}  // NOLINT: implicit by design
  Arg(bool value) : value_(value) {}                      // NOLINT
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Arg(T value) : value_(static_cast<int64_t>(value)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Arg(T value) : value_(static_cast<double>(value)) {}    // NOLINT
  Arg(const char* value) : value_(std::string(value)) {}  // NOLINT
  Arg(std::string value) : value_(std::move(value)) {}    // NOLINT

  bool is_tensor() const { return !value_.has_value(); }
  const HostTensor& tensor() const { return tensor_; }                // empty for a static value
  const std::optional<StaticValue>& value() const { return value_; }  // nullopt: a tensor

 private:
  HostTensor tensor_;
  std::optional<StaticValue> value_;
};

// What a TracedArgsBody receives for argument `index()` of a call: a tensor argument's
// placeholder, or a static argument's value. Asking for the wrong kind (tensor() of a
// static argument, Int() of a string) fails the trace with InvalidArgument naming the
// function and the argument.
class TracedArg {
 public:
  TracedArg(int index, Tensor tensor) : index_(index), tensor_(tensor) {}
  TracedArg(int index, StaticValue value) : index_(index), value_(std::move(value)) {}

  int index() const { return index_; }
  bool is_tensor() const { return !value_.has_value(); }
  const Tensor& tensor() const;
  const StaticValue& value() const;
  bool Bool() const;
  int64_t Int() const;
  double Double() const;  // a double, or an integer converted
  const std::string& String() const;

 private:
  int index_;
  Tensor tensor_;
  std::optional<StaticValue> value_;
};

using TracedArgsBody =
    std::function<std::vector<Tensor>(Graph& g, const std::vector<TracedArg>& args)>;

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
  // A body that receives static arguments' values (see "Static arguments" above).
  explicit Function(TracedArgsBody body, FunctionOptions options = {});
  ~Function();
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;

  absl::StatusOr<std::vector<HostTensor>> operator()(const std::vector<HostTensor>& args);
  // A call with tensor and static arguments: the outputs of the trace for the tensors'
  // signature and the static values (traced now if there is none).
  absl::StatusOr<std::vector<HostTensor>> Call(const std::vector<Arg>& args);
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
  // Only traces of the static values `statics` (one per argument, nullopt for a tensor)
  // are considered.
  absl::StatusOr<ConcreteFunction*> FindOrTrace(
      const std::vector<TensorSpec>& spec, const std::vector<std::optional<StaticValue>>& statics,
      bool* traced, const std::vector<TensorSpec>* reduce_call = nullptr);
  // A call: `tensors` are the tensor arguments in order, `statics` has one entry per
  // argument (nullopt for a tensor).
  absl::StatusOr<std::vector<HostTensor>> Run(
      const std::vector<HostTensor>& tensors,
      const std::vector<std::optional<StaticValue>>& statics);
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
