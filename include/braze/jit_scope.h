// JitScope: the seeds' `tf.xla.experimental.jit_scope`, as an RAII guard on a Graph.
//
//   Graph g;
//   {
//     JitScope s(g);                     // ops built here: compile = true
//     Tensor c = MatMul(a, b);
//   }
//   { JitScope s(g, false); ... }        // compile = false: never compiled
//   { JitScope s(g, [](const NodeDef& n) { return n.op_kind() == OpKind::kMatMul; }); ... }
//   { JitScope s(g, JitScope::Options{true, /*separate_compiled_gradients=*/true}); ... }
//
// Every op built while a scope is alive records (see JitInfo in graph.h) the compile
// decision of the innermost scope and the scope id of the outermost one. Only the
// outermost scope allocates an id (jit_scope_0, jit_scope_1, ... per graph); nested
// scopes inherit it, so a nested `false` scope only switches compilation off for its own
// ops and everything compiled in one outermost scope may form one cluster.
//
// Scopes must be destroyed in reverse order of creation, which block scoping gives for
// free (also when an exception or early return leaves the block). Destroying a scope
// while one created after it is still alive (possible with heap-allocated scopes) removes
// only its own frame and records FailedPrecondition on the graph (Graph::status()), so
// every later Session::Run reports the misuse instead of computing with a corrupted stack.
// The Graph must outlive its scopes.
#ifndef BRAZE_JIT_SCOPE_H_
#define BRAZE_JIT_SCOPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "braze/graph.h"

namespace braze {

// The `compile_ops` argument: a bool, or a predicate asked once per op built in the
// scope (the seeds' callable form). Implicitly constructible from either, so
// `JitScope s(g, false)` and `JitScope s(g, [](const NodeDef&) {...})` both read naturally.
// (A std::variant<bool, CompilePredicate> would make a captureless lambda ambiguous: it
// converts to bool through its function pointer.)
class CompileOps {
 public:
  CompileOps(bool compile = true) : compile_(compile) {}  // NOLINT: implicit by design
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, bool> &&
                                        !std::is_same_v<std::decay_t<F>, CompileOps> &&
                                        std::is_invocable_r_v<bool, F&, const NodeDef&>>>
  CompileOps(F&& predicate)  // NOLINT: implicit by design
      : is_predicate_(true), predicate_(std::forward<F>(predicate)) {}

  bool is_predicate() const { return is_predicate_; }
  bool compile() const { return compile_; }  // meaningful when !is_predicate()
  const CompilePredicate& predicate() const { return predicate_; }

 private:
  bool is_predicate_ = false;
  bool compile_ = true;
  CompilePredicate predicate_;
};

class JitScope {
 public:
  struct Options {
    // true: compile every op built in the scope; false: none; predicate: ask per op.
    // An empty predicate is scope misuse: recorded as InvalidArgument on the graph, and
    // the scope's ops are not compiled.
    CompileOps compile_ops = true;
    // Gradients of ops in this scope get their own scope (see the gradients pass). Empty:
    // inherit from the enclosing scope (false for an outermost scope).
    std::optional<bool> separate_compiled_gradients;
  };

  // `JitScope s(g);` `JitScope s(g, false);` `JitScope s(g, predicate);`
  explicit JitScope(Graph& graph, CompileOps compile_ops = true);
  JitScope(Graph& graph, Options options);
  ~JitScope();

  JitScope(const JitScope&) = delete;
  JitScope& operator=(const JitScope&) = delete;
  JitScope(JitScope&&) = delete;
  JitScope& operator=(JitScope&&) = delete;

  // The scope id recorded on this scope's ops ("jit_scope_0"), shared with nested scopes.
  const std::string& scope() const { return scope_; }
  // The token of this scope's frame on the graph's stack (JitScopeFrame::token).
  uint64_t token() const { return token_; }

 private:
  Graph& graph_;
  std::string scope_;
  uint64_t token_ = 0;
};

}  // namespace braze

#endif  // BRAZE_JIT_SCOPE_H_
