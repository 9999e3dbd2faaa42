// What the examples' command lines share (trainer.h's TrainFlags and char_lm's flags
// extend CommonFlags): how to compile and run (--jit, --api, --device), the run's length
// and seed, the mixed-precision policy (--precision), and checkpoints (--checkpoint_dir,
// --checkpoint_every, --keep_checkpoints,
// --print_losses); one parser for `--name=value` and `--name value`, and the session
// and Function options those flags ask for.
#ifndef BRAZE_EXAMPLES_LIB_COMMON_FLAGS_H_
#define BRAZE_EXAMPLES_LIB_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "braze/braze.h"

namespace braze_examples {

// How the example asks Braze to compile, mirroring the seeds' three ways to run
// mnist_softmax: no XLA, jit_scope around the model, session-level auto-clustering.
enum class JitMode {
  kOff,    // default session: every op runs as its own compiled single-op kernel
  kScope,  // the model, loss, gradients and updates are built under JitScope(g)
  kAuto,   // SessionOptions::global_jit_level = JitLevel::kOn1
};

// How the train step is run: a Session over a graph built once (session), or a
// braze::Function traced per input signature (function; see braze/function.h).
enum class Api { kSession, kFunction };

const char* JitModeName(JitMode mode);

struct CommonFlags {
  JitMode jit = JitMode::kScope;
  Api api = Api::kSession;
  std::string device = "auto";  // SessionOptions::device
  int64_t steps = 1000;         // total train steps
  int64_t batch = 100;          // examples per step
  uint64_t seed = 1;            // data order, initialization (and dropout) seed
  // Checkpoints (braze/checkpoint.h, docs/CHECKPOINTS.md): every --checkpoint_every
  // steps and at the end, the variables (optimizer slots and step counters included) and
  // the data position are saved to --checkpoint_dir, keeping the last
  // --keep_checkpoints; a run started with a directory holding checkpoints resumes from
  // the newest (same batches from there on).
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 100;
  int64_t keep_checkpoints = 3;
  bool print_losses = false;  // one line per step: `step_loss <step> <loss in %a>` (exact)
  // The mixed-precision policy the step is built under (braze/precision.h): f32 (none),
  // bf16 or f16 (16-bit compute, f32 master weights and loss; docs/MIXED_PRECISION.md).
  braze::DType precision = braze::DType::kF32;
};

// The usage lines of the checkpoint flags (with `d`'s defaults).
std::string CheckpointFlagsUsage(const CommonFlags& d);

// kUnused: a flag the program knows but does not use (a model option of another
// example); refused rather than ignored, so a run never silently lacks what was asked.
enum class FlagMatch { kOk, kBadValue, kUnknown, kUnused };

// Parses `value` into the common flag `name` ("--steps", ...): kUnknown when it is none.
FlagMatch ParseCommonFlag(const std::string& name, const std::string& value, CommonFlags* flags);
// "true"/"1" or "false"/"0".
bool ParseBool(const std::string& value, bool* out);
// A finite number ("inf" and "nan", which absl::SimpleAtod reads, are refused: a NaN
// accuracy bar would pass every run, an infinite rate trains to NaN).
bool ParseFiniteDouble(const std::string& value, double* out);

// Splits argv into `--name=value` or `--name value` pairs (the flags in `bare` may also
// stand alone, meaning true) and hands each to `parse`, which tries the example's own
// flags and then ParseCommonFlag. --help or -h calls `help` and exits 0. An unknown flag
// or a bad value is InvalidArgument naming it.
absl::Status ParseCommandLine(
    int argc, char** argv, const std::vector<std::string>& bare, const std::function<void()>& help,
    const std::function<FlagMatch(const std::string& name, const std::string& value)>& parse);

// The Session options for --jit and --device (JitMode::kAuto: auto-clustering).
braze::SessionOptions SessionOptionsFor(JitMode jit, const std::string& device);
// The Function options for them: jit_compile true under kScope, false under kOff, unset
// with session-level auto-clustering under kAuto.
void SetFunctionOptions(JitMode jit, const std::string& device, braze::FunctionOptions* options);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_COMMON_FLAGS_H_
