// The process settings that make Braze and its peers comparable (issues 14 and 34),
// shared by braze_bench's main and the standalone peer programs (char_lm_torch): one
// waiting policy for every thread pool, OpenBLAS on the right core, glibc's malloc
// thresholds pinned. bench/main.cc's header comment says why each is needed.
//
// What SettleProcess does depends on the target's definitions: BRAZE_BENCH_PEERS (the
// target links libgomp through a peer) and BRAZE_BENCH_OPENBLAS (it links OpenBLAS).
#ifndef BRAZE_BENCH_PROCESS_SETTINGS_H_
#define BRAZE_BENCH_PROCESS_SETTINGS_H_

#include <set>
#include <string>

namespace braze::bench {

// Set in the re-executed process, so it does not re-execute again.
inline constexpr char kSettled[] = "BRAZE_BENCH_SETTLED";
// What OpenBLAS picked on its own, when main.cc overrode it (for the context).
inline constexpr char kOpenBlasDetected[] = "BRAZE_BENCH_OPENBLAS_DETECTED";
// An OPENBLAS_CORETYPE from the environment that main.cc removed (for the context).
inline constexpr char kOpenBlasRemoved[] = "BRAZE_BENCH_OPENBLAS_CORETYPE_REMOVED";
// The spin count main.cc calibrated (for the context: GOMP_SPINCOUNT may come from outside).
inline constexpr char kSpinCalibrated[] = "BRAZE_BENCH_GOMP_SPINCOUNT_CALIBRATED";

std::string Env(const char* name);

// "model name" and the flags of the first CPU in /proc/cpuinfo.
struct CpuInfo {
  std::string model, family, model_number;
  std::set<std::string> flags;
};
CpuInfo ReadCpuInfo();
bool HasSkylakeXFeatures(const CpuInfo& cpu);
// OpenBLAS's cores with AVX-512 kernels (0.3.21's names).
bool IsAvx512Core(const std::string& core);

// Sets what the libraries read when they are loaded and re-executes this binary; returns
// when nothing needed setting (or in the re-executed process, or when the exec failed).
// Call it first in main, before any library starts its threads.
void SettleProcess(char** argv);

// glibc's mmap and trim thresholds fixed at 1 GiB: every benchmark sees the same
// allocator, whatever ran before it.
void PinMallocThresholds();

// OpenBLAS's threads: all cores, as Braze's pool and OpenMP use (OpenBLAS's default may
// differ when OPENBLAS_NUM_THREADS or a container limit is set). A no-op without OpenBLAS.
void SetOpenBlasThreads();

}  // namespace braze::bench

#endif  // BRAZE_BENCH_PROCESS_SETTINGS_H_
