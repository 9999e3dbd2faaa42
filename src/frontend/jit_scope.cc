#include "braze/jit_scope.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/eager_body.h"

namespace braze {
namespace frontend {

EagerBody*& CurrentEagerBody() {
  thread_local EagerBody* body = nullptr;
  return body;
}

}  // namespace frontend

JitScope::JitScope(Graph& graph, CompileOps compile_ops)
    : JitScope(graph, Options{std::move(compile_ops), std::nullopt}) {}

JitScope::JitScope(Graph& graph, Options options) : graph_(graph) {
  std::vector<JitScopeFrame>& frames = graph_.mutable_jit_frames();
  JitScopeFrame frame;
  if (frames.empty()) {
    // Outermost: a fresh id, so separate outermost scopes never merge into one cluster.
    frame.scope = graph_.NextJitScopeName();
    frame.separate_compiled_gradients = options.separate_compiled_gradients.value_or(false);
  } else {
    frame.scope = frames.back().scope;
    frame.separate_compiled_gradients =
        options.separate_compiled_gradients.value_or(frames.back().separate_compiled_gradients);
  }
  if (options.compile_ops.is_predicate()) {
    if (options.compile_ops.predicate()) {
      frame.predicate = options.compile_ops.predicate();
    } else {
      // Not compiling is the safe reading of a missing predicate; the recorded error
      // still makes every Run fail, so the mistake cannot go unnoticed.
      frame.compile = false;
      graph_.RecordError(absl::InvalidArgumentError(
          absl::StrCat("JitScope ", frame.scope, ": compile_ops is an empty predicate")));
    }
  } else {
    frame.compile = options.compile_ops.compile();
  }
  frame.token = graph_.NextToken();
  if (frontend::EagerBody* eager = frontend::CurrentEagerBody();
      eager != nullptr && eager->first_jit_scope.empty()) {
    eager->first_jit_scope = frame.scope;
  }
  scope_ = frame.scope;
  token_ = frame.token;
  frames.push_back(std::move(frame));
}

JitScope::~JitScope() {
  std::vector<JitScopeFrame>& frames = graph_.mutable_jit_frames();
  if (!frames.empty() && frames.back().token == token_) {
    frames.pop_back();
    return;
  }
  auto it = std::find_if(frames.begin(), frames.end(),
                         [&](const JitScopeFrame& f) { return f.token == token_; });
  if (it == frames.end()) {
    graph_.RecordError(absl::FailedPreconditionError(absl::StrCat(
        "JitScope ", scope_, " (token ", token_,
        ") destroyed but its frame is no longer on the graph's JIT scope stack; the stack "
        "was modified behind JitScope's back")));
    return;
  }
  const auto still_alive = static_cast<int>(frames.end() - it) - 1;
  // Remove only our own frame: the later scopes stay in effect for ops built while they
  // live, and pop themselves cleanly when they are destroyed.
  frames.erase(it);
  graph_.RecordError(absl::FailedPreconditionError(absl::StrCat(
      "JitScope ", scope_, " (token ", token_, ") destroyed out of order: ", still_alive,
      " JitScope(s) created after it are still alive; destroy scopes in reverse order of "
      "creation")));
}

}  // namespace braze
