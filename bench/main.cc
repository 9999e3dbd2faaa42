// braze_bench's main: Google Benchmark's, after two process settings that decide
// whether Braze and its peers (peers_*.cc) are compared fairly on a small machine
// (issue 14, measured on the 2-core VM):
//
//  - OMP_WAIT_POLICY=passive. By default libgomp's threads spin after each parallel
//    region; on 2 cores they starve OpenBLAS's own threads and Halide's thread pool in
//    the next benchmark: 2-8x distortions. libgomp reads the variable once, when it is
//    loaded (before main), so when it is unset we set it and re-execute this binary.
//    A value from the environment is kept.
//  - glibc malloc thresholds pinned. glibc moves its mmap threshold up as large blocks
//    are freed, so whether a library's big temporaries are reused or freshly mmapped
//    (and page-faulted on every run) depended on which benchmark ran before: 2.5 vs 9 ms
//    for one softmax. Fixed thresholds make every benchmark see the same allocator:
//    blocks come from the heap and freed memory stays there.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#ifdef BRAZE_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

// Returns only when OMP_WAIT_POLICY was already set (or the re-exec failed).
void EnsurePassiveOpenMpWait(char** argv) {
#ifdef BRAZE_BENCH_PEERS
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
  execv("/proc/self/exe", argv);
  std::perror("braze_bench: re-exec with OMP_WAIT_POLICY=passive failed; OpenMP threads spin");
#else
  (void)argv;
#endif
}

void PinMallocThresholds() {
  constexpr int kThreshold = 1 << 30;  // 1 GiB: above every buffer the benchmarks allocate
  mallopt(M_MMAP_THRESHOLD, kThreshold);
  mallopt(M_TRIM_THRESHOLD, kThreshold);
}

}  // namespace

int main(int argc, char** argv) {
  EnsurePassiveOpenMpWait(argv);
  PinMallocThresholds();
#ifdef BRAZE_BENCH_OPENBLAS
  // All cores, as Halide's thread pool and OpenMP use (OpenBLAS's default may differ
  // when OPENBLAS_NUM_THREADS or a container limit is set).
  openblas_set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
