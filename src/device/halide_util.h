// The Halide boundary shared by every layer that touches Halide: the JIT target of the
// host, Braze dtypes as Halide types, the one place Halide's exceptions stop, and the
// capture of what Halide prints while it schedules and compiles.
//
// Internal header: includes Halide.h.
#ifndef BRAZE_DEVICE_HALIDE_UTIL_H_
#define BRAZE_DEVICE_HALIDE_UTIL_H_

#include <string>

#include "Halide.h"
#include "absl/status/status.h"
#include "braze/dtype.h"

namespace braze {
namespace device {

// The JIT target of CPU kernels: HL_JIT_TARGET or the host, minus CPU features the host
// lacks (see halide_util.cc). Throws Halide::Error for a bad HL_JIT_TARGET.
Halide::Target SanitizedJitTarget();

// f32 -> Float(32), f64 -> Float(64), i32 -> Int(32), bool -> UInt(8) holding 0/1 (the
// HostTensor layout).
Halide::Type HalideType(DType dtype);

// While alive on a thread, an LLVM fatal error on that thread (report_fatal_error, which
// prints "LLVM ERROR: ..." and ends the process) throws a std::runtime_error instead,
// so that a kernel LLVM cannot compile is a failed compile (the scheduler chain falls
// through, or the cluster runs op by op) and not a dead process. LLVM 14's x86 DAG
// combiner aborted on the AVX-512 code of a small MatMul of a Transpose ("Invalid size
// request on a scalable vector", braze-fuzz seed 1400264). The exception unwinds through
// LLVM frames built without exception handling, whose objects are not destroyed: the
// failed module's MCJIT engine, target machine and code generator state leak (Halide
// holds the engine in a local until codegen succeeds), once per failed attempt, and a
// lock MCJIT held stays held on an engine nothing uses again. LLVM 14 releases its own
// handler lock before calling the handler, and Halide's JIT runtime lock is released by
// its (exception-aware) frames. A fatal error raised while an IR pass holds value
// handles on the stack could leave them dangling when Halide then frees the module:
// the only one seen is in instruction selection, which holds none. Elsewhere, LLVM's
// own behaviour is kept (its message, then exit or abort). The handler is installed
// once per process, through the symbol libHalide's LLVM exports.
class LlvmFatalErrorsThrow {
 public:
  LlvmFatalErrorsThrow();
  ~LlvmFatalErrorsThrow();
  LlvmFatalErrorsThrow(const LlvmFatalErrorsThrow&) = delete;
  LlvmFatalErrorsThrow& operator=(const LlvmFatalErrorsThrow&) = delete;
};

// Whether `message` names a CUDA error that leaves the context unusable (a kernel's
// fault: CUDA_ERROR_LAUNCH_FAILED, ILLEGAL_ADDRESS, ...). Such errors are sticky: every
// later CUDA call in the process fails with the same code, whatever it is.
bool NamesLostCudaContext(const std::string& message);

// `message`, with a sentence saying the CUDA context is lost when it names such an
// error: a caller (and a user reading a later error) can tell the first failure from
// its aftermath.
std::string NoteLostCudaContext(std::string message);

// Runs fn() (returning absl::Status) and turns a Halide error (or any other exception,
// an LLVM fatal error among them: LlvmFatalErrorsThrow) thrown inside it into a Status
// of `code` whose message starts with `context`. This is the one boundary where
// Halide's exceptions stop.
template <typename Fn>
absl::Status CatchHalideErrors(const std::string& context, absl::StatusCode code, Fn&& fn) {
  auto message = [&](const char* what) {
    std::string m = context + ": " + what;
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return NoteLostCudaContext(std::move(m));
  };
  try {
    LlvmFatalErrorsThrow llvm_errors;
    return fn();
  } catch (const Halide::Error& e) {
    return absl::Status(code, message(e.what()));
  } catch (const std::exception& e) {
    return absl::Status(code, message(e.what()));
  }
}

// While alive, what Halide prints to std::cerr is captured instead of reaching stderr:
// the Adams2019 autoscheduler's "generate_schedule for target=...", "Pass 0 of 5,
// cost: ..." and "Cache (block) hits" lines (printed on every schedule, whatever the
// debug level), and user warnings such as "Update definition 0 of function f has not
// been scheduled" (lowering prints them at compile time). The captured lines go to the
// log as info at verbosity 2, each prefixed "halide: " (braze/logging.h), so
// BRAZE_FLAGS=--v=2 shows them and the default shows nothing. Wrap every call that
// schedules or compiles a pipeline:
//
//   absl::Status s = CatchHalideErrors(what, code, [&] {
//     HalideOutputCapture halide_output;  // ends (and forwards) even when Halide throws
//     ...
//   });
//
// std::cerr is one process-wide stream, so the capture is process-wide too: the first
// capture to start swaps std::cerr's buffer for one of its own (thread-safe: Halide
// writes from every thread that compiles), the last to end swaps the old one back. The
// compile cache compiles different keys on several threads at once; their captures share
// the buffer, and each capture, as it ends, forwards the complete lines captured so far,
// so at --v=2 the lines of concurrent compiles can interleave (and a line can be
// forwarded by another thread's capture than the one whose compile printed it).
//
// What else follows from capturing a global stream: whatever the program writes to
// std::cerr on other threads while a compile runs is captured too and shows only at
// --v=2, and a write to std::cerr at the moment the buffer is swapped races with the
// swap. Braze's own default log sink writes to the C stderr stream, which the capture
// does not touch.
//
// Not captured: everything, when HL_DEBUG_CODEGEN or HL_DEBUG_AUTOSCHEDULE is set above
// 0 (the user asked Halide for its debug output, which then goes to stderr as Halide
// writes it; a capture does nothing); what Halide's Adams2019 cost model prints to
// stdout, which it does only when told to load weights (HL_WEIGHTS_DIR) that fail to
// load or do not match, or to randomize them (HL_RANDOMIZE_WEIGHTS=1); and what LLVM
// writes to file descriptor 2 itself.
class HalideOutputCapture {
 public:
  HalideOutputCapture();
  ~HalideOutputCapture();
  HalideOutputCapture(const HalideOutputCapture&) = delete;
  HalideOutputCapture& operator=(const HalideOutputCapture&) = delete;

 private:
  const bool active_;  // false when Halide's debug output was asked for
};

}  // namespace device
}  // namespace braze

#endif  // BRAZE_DEVICE_HALIDE_UTIL_H_
