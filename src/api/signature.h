// Argument signatures of braze::Function: matching a call against a trace or an
// input_signature, generalizing dims for reduce_retracing, and the words of the
// excessive-retracing warning.
#ifndef BRAZE_API_SIGNATURE_H_
#define BRAZE_API_SIGNATURE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"

namespace braze {
namespace api {

using Signature = std::vector<TensorSpec>;

Signature SignatureOf(const std::vector<HostTensor>& args);
std::string SignatureString(const Signature& signature);  // "(f32[?,784], i32[?])"

// True when every argument of `call` (concrete, or with -1 dims for "any size") is
// accepted by `spec`: same count, dtypes and ranks, and each fixed dim of `spec` equal.
bool Covers(const Signature& spec, const Signature& call);
// OK when every entry of `spec` is possible, else InvalidArgument naming function `name`
// and the first (by its index in `spec`) with a dim below -1 or a dtype outside the enum.
absl::Status CheckSpec(const std::string& name, const Signature& spec,
                       const char* source = "input_signature");
// OK when `call` fits `spec`, else InvalidArgument naming function `name` and the first
// argument that does not (count, dtype, rank or a fixed dim), or CheckSpec's error.
absl::Status CheckAgainst(const std::string& name, const Signature& spec, const Signature& call,
                          const char* source = "input_signature");

// reduce_retracing: `call` with -1 in every dim where it differs from an earlier
// signature of the same dtypes and ranks (those in `seen`); `call` itself when none.
Signature Generalize(const Signature& call, const std::vector<Signature>& seen);

// "argument 0 dim 0 (64, 17, 3)": the dims that differ among `traced` signatures.
std::string ChangedDims(const std::vector<Signature>& traced);

}  // namespace api
}  // namespace braze

#endif  // BRAZE_API_SIGNATURE_H_
