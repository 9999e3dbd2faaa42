// Session: runs a Graph. Variables live in the session and keep their values across
// Run calls; several sessions on one graph are independent.
#ifndef BRAZE_SESSION_H_
#define BRAZE_SESSION_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {

// Session-level auto-clustering, as TF's global_jit_level. See the fusion docs.
enum class JitLevel { kOff, kOn1, kOn2 };

struct SessionOptions {
  JitLevel global_jit_level = JitLevel::kOff;
};

using Feeds = std::vector<std::pair<Tensor, HostTensor>>;

class Session {
 public:
  explicit Session(const Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds any tensor (usually placeholders), computes `fetches` and runs `targets` for
  // their side effects (Assign ops). Returns one HostTensor per fetch.
  absl::StatusOr<std::vector<HostTensor>> Run(const Feeds& feeds,
                                              const std::vector<Tensor>& fetches,
                                              const std::vector<Tensor>& targets = {});

  // The current value of a variable in this session (for tests, checkpoints).
  absl::StatusOr<HostTensor> VariableValue(const Tensor& variable) const;

  const SessionOptions& options() const { return options_; }

 private:
  struct State;
  const Graph& graph_;
  SessionOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace braze

#endif  // BRAZE_SESSION_H_
