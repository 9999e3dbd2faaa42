// Static (non-tensor) arguments of braze::Function (braze/function.h): the trace key's
// values, the checks that name a misplaced one, and the words of the retracing warning.
#ifndef BRAZE_API_STATIC_ARGS_H_
#define BRAZE_API_STATIC_ARGS_H_

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/signature.h"
#include "braze/function.h"

namespace braze {
namespace api {

// Per argument of a call: its static value, nullopt for a tensor. Part of a trace's key.
using StaticKey = std::vector<std::optional<StaticValue>>;

// Thrown by TracedArg's accessors when a body asks for the wrong kind of argument; the
// trace fails with InvalidArgument (not the InternalError of other exceptions).
struct ArgKindError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Whether two static values (two keys) are the same trace key: doubles by their bits, so
// a NaN is the same NaN at every call (with ==, each call of one retraced it) and -0.0
// is not 0.0 (a body's 1 / x is -inf, not inf: == gave -0.0 the trace of 0.0); other
// values by ==.
bool SameValue(const StaticValue& a, const StaticValue& b);
bool SameStatics(const StaticKey& a, const StaticKey& b);

StaticKey TensorsOnly(size_t count);  // `count` tensor arguments
bool HasStatic(const StaticKey& key);
// Splits Function::Call's arguments into the tensors (in order) and the key.
void SplitArgs(const std::vector<Arg>& args, std::vector<HostTensor>* tensors, StaticKey* key);

// OK when `call` has the argument count and the tensor / static positions of `first` (the
// function's first trace); else InvalidArgument naming function `name` and the argument.
absl::Status CheckPattern(const std::string& name, const StaticKey& first, const StaticKey& call);

// input_signature covers the tensor arguments only: OK when the tensors of `key`
// (`tensors`, in order) fit `spec`; else InvalidArgument naming the argument by its
// position in the call (a static value where `spec` expects a tensor included).
absl::Status CheckTensorsAgainst(const std::string& name, const Signature& spec,
                                 const StaticKey& key, const Signature& tensors);

// "argument 1 (int 3, int 4, int 5)": the static arguments whose values differ among
// `traced` keys (those with the first one's positions); empty when none do.
std::string ChangedValues(const std::vector<StaticKey>& traced);

// The excessive-retracing warning of function `label` ("function 'f'"): `traced` and
// `statics` are its traces within its last `calls` calls; it names the static values and
// the tensor dims that changed.
std::string RetraceWarning(const std::string& label, const std::vector<Signature>& traced,
                           const std::vector<StaticKey>& statics, size_t calls,
                           bool reduce_retracing);

// The arguments a body receives for a call of `signature` (its tensors) and `statics`:
// a placeholder per tensor argument (appended to `inputs`, named "arg<position>"), the
// value of each static one.
std::vector<TracedArg> TraceArgs(Graph& g, const Signature& signature, const StaticKey& statics,
                                 std::vector<Tensor>* inputs);

// A FunctionBody as a TracedArgsBody: it sees the placeholders (the caller checked that
// there is no static value, CheckTensorsOnly).
TracedArgsBody TensorsOnlyBody(FunctionBody body);

// A function whose body takes tensors only (a FunctionBody): InvalidArgument naming the
// first static argument of `key`.
absl::Status CheckTensorsOnly(const std::string& name, const StaticKey& key);

}  // namespace api
}  // namespace braze

#endif  // BRAZE_API_STATIC_ARGS_H_
