// BRAZE_FLAGS: the process-wide observability switches, read from the environment once,
// as TensorFlow reads TF_XLA_FLAGS. The variable holds whitespace-separated flags:
//
//   BRAZE_FLAGS="--dump_to=/tmp/braze --clustering_debug --timeline=/tmp/trace.json"
//
//   --dump_to=DIR        per session, each new plan's graph before and after clustering
//                        (Graphviz .dot) and each compiled kernel's Halide statement and
//                        schedule (.txt), and a device kernel's OpenCL C (.cl) or PTX
//                        (.ptx), go to DIR (created if missing); runtime/dump.h
//   --clustering_debug   logs each new plan's clustering summary (info, verbosity 0: to
//                        stderr unless the program installed a log sink)
//   --timeline=FILE      writes a Chrome trace (chrome://tracing, Perfetto) of every
//                        kernel launch and compile to FILE; ir/timeline.h
//                        (under mpirun each rank writes its own: ApplyRankToPaths)
//   --v=N                the log verbosity (braze/logging.h), N >= 0: 0 (default) shows
//                        warnings and errors, 1 adds schedulers that failed and were
//                        fallen through, 2 what Halide prints while scheduling and
//                        compiling (Adams2019's passes, Halide's warnings); applied when
//                        the flags are read, over any earlier SetLogVerbosity
//
//   --verify             every session verifies its compiled kernels (SessionOptions::
//                        verify): a kernel that disagrees with the reference kernels
//                        fails the Run with a Status naming it, and is dumped
//   --log_compiles       logs (info, verbosity 0) one line per kernel a session prepares:
//                        the cluster, its input signature, compiled or a cache hit, the
//                        scheduler that produced it with each one refused before it and
//                        why, the compile time; and a line per compile that failed
//   --symbolic_shapes=false  compiles every input signature for its own sizes, as if
//                        each session had SessionOptions::symbolic_shapes = false
//                        (docs/SYMBOLIC_SHAPES.md); default true
//   --schedule_dirs=DIR[:DIR...]  also looks up stored, tuned schedules in these
//                        directories, after the session's SessionOptions::schedule_dirs
//                        and before the default ones (docs/SCHEDULES.md)
//   --stored_schedules=false  uses no stored schedule in any session: every cluster
//                        gets the default schedulers (a tuned schedule's A/B check)
//   --cpu_gemm_library=false  no CPU matmul calls oneDNN, as if each session had
//                        SessionOptions::cpu_matmul = kHalide (docs/CPU_GEMM.md)
//   --cpu_gemm_min_work=N  the least batch*m*n*k for which a matmul calls oneDNN
//                        (default 2^18; convolutions 2^21); 1 sends every f32 matmul
//                        and convolution there, which is how
//                        braze-fuzz checks the library path on small, odd shapes
//   --cpu_conv_winograd=false  no CPU convolution runs as oneDNN's Winograd algorithm:
//                        every one is its direct convolution (docs/CONVOLUTIONS.md)
//
// A boolean flag also takes =true/false/1/0; a repeated flag's last value wins; values
// cannot contain whitespace. Parsing lives in the library, so a bad BRAZE_FLAGS cannot
// stop the program at start-up: it is kept as a Status that every Session::Run returns.
#ifndef BRAZE_RUNTIME_FLAGS_H_
#define BRAZE_RUNTIME_FLAGS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace braze {

struct BrazeFlags {
  std::string dump_to;  // empty: no dumps
  bool clustering_debug = false;
  std::string timeline;  // empty: no timeline from the environment
  std::optional<int> v;  // --v=N; unset: the log verbosity is left as the program set it
  bool verify = false;   // as SessionOptions::verify, for every session
  bool log_compiles = false;
  bool symbolic_shapes = true;             // false: overrides SessionOptions::symbolic_shapes
  std::vector<std::string> schedule_dirs;  // searched after a session's own
  bool stored_schedules = true;            // false: overrides SessionOptions::stored_schedules
  bool cpu_gemm_library = true;            // false: overrides SessionOptions::cpu_matmul
  int64_t cpu_gemm_min_work = -1;          // > 0: replaces kLibraryGemmMinWork
  bool cpu_conv_winograd = true;           // false: SetCpuConvWinograd(false)
};

// Parses a BRAZE_FLAGS value. InvalidArgument for an unknown flag (the message lists the
// known ones), a missing or empty value, or a bad boolean.
absl::StatusOr<BrazeFlags> ParseBrazeFlags(std::string_view text);

// Under an MPI launcher with more than one rank (`world_size` > 1) every rank reads the
// same BRAZE_FLAGS, and one --timeline file written by all was invalid JSON, one
// --dump_to folder's session_0 files overwritten by each: rank r writes its own, the
// timeline's name with ".rank<r>" before its extension (trace.json -> trace.rank1.json),
// the dumps in DIR/rank<r>. Unchanged in a world of one.
void ApplyRankToPaths(int rank, int world_size, BrazeFlags* flags);

// The process's flags: BRAZE_FLAGS parsed on the first call (thread-safe), the paths made
// per rank under an MPI launcher (ApplyRankToPaths), and, when it names a --timeline,
// that timeline started. Defaults when BRAZE_FLAGS is unset or bad.
const BrazeFlags& GetBrazeFlags();

// OK, or why BRAZE_FLAGS was rejected (or its --timeline could not be started). Session
// checks it on every Run, so the error reaches the user instead of being dropped.
const absl::Status& BrazeFlagsStatus();

// Replaces the process's flags (and clears any BRAZE_FLAGS error, or installs `flags`'s
// error), so tests can switch dumps on without an environment. A `v` sets the log
// verbosity, as from the environment. The `timeline` field is not acted on here: tests
// drive braze::Timeline directly. Not synchronized with running
// sessions: call it only while none runs.
void SetBrazeFlagsForTesting(absl::StatusOr<BrazeFlags> flags);

}  // namespace braze

#endif  // BRAZE_RUNTIME_FLAGS_H_
