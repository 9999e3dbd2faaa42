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

  // Makes `session`'s copy the newest one if it is not (version `*held`), so its next Run
  // reads it. Leaves a session that never saw it on the variable's initial value.
  absl::Status PullInto(Session& session, uint64_t* held);
  // `session` assigned the variable in a Run that succeeded: it now holds the newest.
  void Updated(Session& session, uint64_t* held);
  // `session` is going away: if it holds the newest value, keep a host copy.
  void Release(Session& session);

  const Tensor& variable() const { return variable_; }

 private:
  std::mutex mu_;
  Tensor variable_;
  uint64_t version_ = 0;            // 0: never changed since its initial value
  Session* holder_ = nullptr;       // the session with the newest value, if any
  std::optional<HostTensor> host_;  // else the newest value, if changed
};

// The one SharedVariable of `variable` (a Variable node), created on first use. Kept
// for the process (a few bytes plus, once its Function is gone, one host copy).
std::shared_ptr<SharedVariable> SharedVariableOf(const Tensor& variable);
// The SharedVariable of `variable` if a Function has used it, else null.
std::shared_ptr<SharedVariable> FindSharedVariable(const Tensor& variable);

// One reader-writer lock per graph: tracing into a graph (which grows it) excludes every
// Function's run on it; runs share it.
std::shared_ptr<std::shared_mutex> GraphLock(const Graph& graph);

}  // namespace api
}  // namespace braze

#endif  // BRAZE_API_VARIABLE_SYNC_H_
