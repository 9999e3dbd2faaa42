// Runs a random program (random_program.h) compiled and on the reference kernels and
// compares; shrinks a failing program while it still fails the same way.
#ifndef BRAZE_TOOLS_FUZZ_FUZZ_RUNNER_H_
#define BRAZE_TOOLS_FUZZ_FUZZ_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "braze/session.h"
#include "tools/fuzz/random_program.h"

namespace braze {
namespace fuzz {

struct RunOptions {
  Scheduler scheduler = Scheduler::kAuto;
  // The compiled run: every op under one JitScope (false: placed on `jit_device`, a
  // forced-compilation device, instead: jit:cpu, or jit:opencl for the GPU schedules).
  bool jit_scope = true;
  std::string jit_device = "jit:cpu";
  bool strict = true;          // a cluster that fails to compile or run is an error, not a fallback
  std::string device = "cpu";  // the session's device ("cuda:0" where there is one)
  // Testing hook passed to SessionOptions::inject_compile_failure.
  std::function<bool(const std::string& step_name)> inject_compile_failure;
  // Testing hook: applied to each compiled result (fetch index, value) before it is
  // compared.
  std::function<void(size_t fetch, HostTensor* result)> corrupt_result;
  // SessionOptions::num_threads of the compiled run (0: all the CPUs).
  int num_threads = 0;
  // The compiled run is a Function (jit_compile, the program's input signature with its
  // -1 batch) traced from the program on its arguments, instead of a Session of a graph
  // under JitScope (braze-fuzz --function, braze-fuzz-mpi --function).
  bool function = false;
  // The tolerance of f32 results and of f64 results that carry f32 rounding
  // (ProgramOp::f32_rounding); `atol` is scaled by the largest finite magnitude in the
  // reference output (at least 1).
  double rtol = 2e-3;
  double atol = 2e-4;
  // f64 results computed in f64 throughout. Both sides compute f64 in f64: the reference
  // with std:: functions, Halide's f64 exp, log, pow and erf are libm's and tanh is
  // Braze's exp form within an ulp (lower_elementwise.cc); what differs is the order of
  // sums (reassociated), FMA contractions and reciprocals, a few ulps per op, amplified
  // by a sum's cancellation. 1e-9 relative is about 5e6 ulps; 1e-11 of the output's
  // scale covers a sum of 40,000 terms of magnitude 2 cancelling down to it (eps times
  // the absolute sum is 1e-11). A gross error of f64 code (an f32 rounding, a wrong
  // term) is 1e-8 relative or more.
  double rtol_f64 = 1e-9;
  double atol_f64 = 1e-11;
  // Results that carry bf16 or f16 rounding (ProgramOp::half_rounding): each op rounds
  // once to 8 (bf16) or 11 (f16) significant bits, so two implementations whose f32
  // results differ by an ulp round an ulp of the 16-bit type apart (2^-8 .. 2^-7
  // relative for bf16), and later ops carry and amplify that as they do an f32 ulp.
  // 2^-4 relative is eight bf16 ulps; a gross error (a wrong term, a bf16 accumulator
  // that stops at 256) is larger.
  double rtol_16 = 0x1p-4;
  double atol_16 = 0x1p-7;
};

// kIllConditioned: the compiled result differs from the reference's beyond the tolerance,
// but only at elements where the reference itself moves as much when the float inputs
// move by a few ulps (IllConditioned in fuzz_runner.cc): rounding noise amplified by the
// program (a LayerNorm of a nearly constant row, whose gradient is noise times
// 1/sqrt(eps)), which no tolerance on the output can judge. Counted and reported apart,
// never as a pass.
struct Outcome {
  enum class Kind { kPass, kSkip, kMismatch, kError, kIllConditioned };
  Kind kind = Kind::kPass;
  std::string detail;  // what differed, or the error
  int runs = 0;        // feeds sizes compared (dynamic inputs run with several)
  int64_t cluster_launches = 0;
};
const char* OutcomeName(Outcome::Kind kind);

// The program with the ops in `keep` (empty: all), run with every feed size.
Outcome RunProgram(const Program& program, const RunOptions& options,
                   const std::vector<bool>& keep = {});

// A program with collectives on every rank of the job (braze-fuzz-mpi under mpirun):
// compiled, this rank's feeds (RankFeeds); the reference, every rank's copy of the program
// in one graph (BuildWorldProgram) on every rank's feeds, whose rank-`WorldRank()` fetches
// the compiled ones must match. Every rank must call it with the same program and options
// (the collectives run in step): a mismatch does not stop the sizes after it, an error
// (a failed Run) does, and then the other ranks fail too, at the communicator's timeout.
// No ill-conditioning check: a mismatch is a mismatch. A program whose world copies have
// no gradients (an AllGather of a -1 batch: a Concat Braze cannot differentiate there) is
// compared without its gradients.
Outcome RunWorldProgram(const Program& program, const RunOptions& options);

// Drops fetches and ops (delta debugging, one at a time, while the outcome keeps its
// kind); returns the ops to keep and updates `program`'s fetches and gradients flag.
std::vector<bool> Minimize(Program& program, const RunOptions& options, Outcome::Kind kind);

}  // namespace fuzz
}  // namespace braze

#endif  // BRAZE_TOOLS_FUZZ_FUZZ_RUNNER_H_
