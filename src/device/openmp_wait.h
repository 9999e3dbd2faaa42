// libgomp's waiting policy for the oneDNN calls inside Braze's kernels (docs/CPU_GEMM.md,
// "Threads and libgomp's wait").
//
// oneDNN threads with OpenMP (libgomp), beside Braze's own pool. libgomp's default keeps
// each worker spinning about 3 ms (300,000 rounds) after every parallel region; a
// training step calls oneDNN dozens to hundreds of times, and on a machine with few
// cores those spinning workers take the cores Braze's pool needs for the kernel's next
// loop. Measured on the 2-core VM (2026-12-01, `gru --steps=30`, a loaded machine):
// f32 164 ms a step with the default, 56 ms with OMP_WAIT_POLICY=passive; the bf16
// policy 1178 ms against 240. libgomp reads its settings once, when it is loaded, so
// Braze sets OMP_WAIT_POLICY=passive before anything loads oneDNN, unless the user chose
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set) or libgomp is already loaded (a program that
// links OpenMP itself): then nothing is set, and the first use of oneDNN says so in a
// warning when the user chose nothing.
#ifndef BRAZE_DEVICE_OPENMP_WAIT_H_
#define BRAZE_DEVICE_OPENMP_WAIT_H_

#include <string>

namespace braze {
namespace onednn {

enum class OpenMpWait {
  kSetPassive,     // Braze set OMP_WAIT_POLICY=passive before libgomp was loaded
  kUserChose,      // OMP_WAIT_POLICY or GOMP_SPINCOUNT was set: kept as it is
  kAlreadyLoaded,  // libgomp was loaded before Braze could choose: its default applies
};

// The decision, from whether libgomp is loaded and whether either variable is set.
OpenMpWait DecideOpenMpWait(bool libgomp_loaded, bool user_chose);

// What this process decided: once, at static initialization (before main, while the
// process has one thread: setenv is not safe beside other threads' getenv).
OpenMpWait ProcessOpenMpWait();

// The warning for kAlreadyLoaded; empty for the other two.
std::string OpenMpWaitWarning(OpenMpWait wait);

}  // namespace onednn
}  // namespace braze

#endif  // BRAZE_DEVICE_OPENMP_WAIT_H_
