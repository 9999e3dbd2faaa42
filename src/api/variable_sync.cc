#include "api/variable_sync.h"

#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/changing_dims.h"

namespace braze {
namespace api {
namespace {

using Key = std::pair<uint64_t, int>;  // graph id, node id

std::mutex& RegistryMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

std::map<Key, std::shared_ptr<SharedVariable>>& Variables() {
  static auto* variables = new std::map<Key, std::shared_ptr<SharedVariable>>;
  return *variables;
}

absl::StatusOr<HostTensor> InitialValue(const Tensor& variable) {
  const auto& attrs = variable.node().attrs_as<VariableAttrs>();
  if (attrs.initial_value) return *attrs.initial_value;
  return absl::FailedPreconditionError(
      absl::StrCat("variable '", variable.name(), "' is uninitialized"));
}

}  // namespace

absl::StatusOr<HostTensor> SharedVariable::Read() {
  std::lock_guard<std::mutex> lock(mu_);
  if (holder_ != nullptr) return holder_->VariableValue(holder_variable_);
  if (host_) return *host_;
  return InitialValue(variable_);
}

absl::Status SharedVariable::Write(const HostTensor& value) {
  const TensorType& want = variable_.type();
  if (value.num_elements() < 0) {  // a scalar's type matches a moved-from tensor's
    return absl::InvalidArgumentError(absl::StrCat("AssignVariable to variable '", variable_.name(),
                                                   "': the value's ",
                                                   BadValueShape(value.shape())));
  }
  if (value.dtype() != want.dtype || value.shape() != want.shape) {
    return absl::InvalidArgumentError(absl::StrCat("AssignVariable to variable '", variable_.name(),
                                                   "': expected ", TypeString(want), ", got ",
                                                   TypeString(value.type())));
  }
  std::lock_guard<std::mutex> lock(mu_);
  host_ = value;
  holder_ = nullptr;
  ++version_;
  return absl::OkStatus();
}

absl::Status SharedVariable::PullInto(Session& session, const Tensor& local, uint64_t* held) {
  std::lock_guard<std::mutex> lock(mu_);
  if (*held == version_ || (holder_ == &session && holder_variable_ == local)) {
    *held = version_;
    return absl::OkStatus();
  }
  absl::StatusOr<HostTensor> value = holder_ != nullptr ? holder_->VariableValue(holder_variable_)
                                     : host_            ? absl::StatusOr<HostTensor>(*host_)
                                                        : InitialValue(variable_);
  if (!value.ok()) {
    // Uninitialized everywhere: the session reports it when its Run reads the variable.
    if (version_ == 0) return absl::OkStatus();
    return value.status();
  }
  if (absl::Status s = session.AssignVariable(local, *value); !s.ok()) return s;
  *held = version_;
  return absl::OkStatus();
}

void SharedVariable::Updated(Session& session, const Tensor& local, uint64_t* held) {
  std::lock_guard<std::mutex> lock(mu_);
  ++version_;
  holder_ = &session;
  holder_variable_ = local;
  host_.reset();
  *held = version_;
}

void SharedVariable::Release(Session& session) {
  std::lock_guard<std::mutex> lock(mu_);
  if (holder_ != &session) return;
  absl::StatusOr<HostTensor> value = session.VariableValue(holder_variable_);
  if (value.ok()) host_ = *std::move(value);
  holder_ = nullptr;
}

std::shared_ptr<SharedVariable> SharedVariableOf(const Tensor& variable) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& slot = Variables()[Key(variable.graph()->id(), variable.node_id())];
  if (slot == nullptr) slot = std::make_shared<SharedVariable>(variable);
  return slot;
}

void ForgetVariablesOf(const Graph& graph) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& variables = Variables();
  variables.erase(variables.lower_bound(Key(graph.id(), 0)),
                  variables.lower_bound(Key(graph.id() + 1, 0)));
}

std::shared_ptr<std::shared_mutex> GraphLock(const Graph& graph) {
  static auto* locks = new std::map<uint64_t, std::weak_ptr<std::shared_mutex>>;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (locks->count(graph.id()) == 0) {
    // The locks of graphs whose Functions are all gone: a program that makes Functions
    // over many graphs keeps no entry per graph.
    for (auto it = locks->begin(); it != locks->end();) {
      it = it->second.expired() ? locks->erase(it) : std::next(it);
    }
  }
  std::weak_ptr<std::shared_mutex>& slot = (*locks)[graph.id()];
  std::shared_ptr<std::shared_mutex> mu = slot.lock();
  if (mu == nullptr) {
    mu = std::make_shared<std::shared_mutex>();
    slot = mu;
  }
  return mu;
}

}  // namespace api
}  // namespace braze
