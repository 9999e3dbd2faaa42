// Shared variable values for braze::Function. Each Function runs its traces in its own
// Session, and a Session keeps its own variable values; Functions that capture the same
// Variable must still see one value, as TF's functions see one tf.Variable. So every
// captured Variable has one SharedVariable: a version, and where its newest value is (a
// session that ran an update, or a host copy). A session whose copy is older pulls the
// newest before it runs; a session that assigned a variable becomes its holder. Copies
// happen only when another Function (or AssignVariable) changed the value, so one
// training loop copies nothing between calls.
#ifndef BRAZE_API_VARIABLE_SYNC_H_
#define BRAZE_API_VARIABLE_SYNC_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/session.h"

namespace braze {
namespace api {

class SharedVariable {
 public:
  explicit SharedVariable(Tensor variable) : variable_(variable) {}

  // The newest value: from its holder session, a host copy, or the initial value.
  absl::StatusOr<HostTensor> Read();
  // Replaces the value (no session holds it afterwards).
  absl::Status Write(const HostTensor& value);

  // Makes the copy `local` (a Variable of `session`'s graph standing for this one: the
  // variable itself, or what a Function's graph captured for it) the newest one if it is
  // not (version `*held`), so the session's next Run reads it. A session that never saw
  // a changed value keeps the initial value it starts with.
  absl::Status PullInto(Session& session, const Tensor& local, uint64_t* held);
  // `session` assigned `local` in a Run that succeeded: it now holds the newest value.
  void Updated(Session& session, const Tensor& local, uint64_t* held);
  // `session` is going away: if it holds the newest value, keep a host copy.
  void Release(Session& session);

 private:
  std::mutex mu_;
  Tensor variable_;
  uint64_t version_ = 0;            // 0: never changed since its initial value
  Session* holder_ = nullptr;       // the session with the newest value, if any
  Tensor holder_variable_;          // and its Variable standing for this one
  std::optional<HostTensor> host_;  // else the newest value, if changed
};

// The one SharedVariable of `variable` (a Variable node), created on first use. Kept
// for the process (a few bytes plus, once its Function is gone, one host copy).
std::shared_ptr<SharedVariable> SharedVariableOf(const Tensor& variable);
// Drops the SharedVariables of `graph`'s Variables: a Function's own graph, going away
// with it (the variables its body created).
void ForgetVariablesOf(const Graph& graph);

// One reader-writer lock per graph: tracing into a graph (which grows it) excludes every
// Function's run on it; runs share it.
std::shared_ptr<std::shared_mutex> GraphLock(const Graph& graph);

}  // namespace api
}  // namespace braze

#endif  // BRAZE_API_VARIABLE_SYNC_H_
