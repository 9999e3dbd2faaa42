// braze_bench's main: Google Benchmark's, after the process settings that decide
// whether Braze and its peers (peers_*.cc) are compared fairly (issues 14 and 34), and
// the run's context (bench_context.h), written into every JSON.
//
//  - One waiting policy for every thread pool. Braze's pool spins about 200 us
//    (kSpinMicros, docs/THREAD_POOL.md) after a parallel loop before its workers sleep.
//    libgomp (the OpenMP of the hand loops, Eigen, oneDNN and libtorch) reads its policy
//    once, when it is loaded (before main), so unless OMP_WAIT_POLICY is set we set
//    OMP_WAIT_POLICY=active with GOMP_SPINCOUNT calibrated here to the same 200 us of
//    libgomp's spin loop (a relaxed load and a `pause` per round), and re-execute this
//    binary. A value from the environment is kept: OMP_WAIT_POLICY=passive measures the
//    peers the other way (their workers sleep at once, each launch pays the wake-up).
//    libgomp's default (unset: 300,000 rounds, about 3 ms) and plain `active` (30
//    billion rounds) are not used: on 2 cores a worker spinning that long starves
//    OpenBLAS's threads and Braze's pool in the next benchmark (2-8x distortions,
//    issue 14).
//  - OpenBLAS on the right core. Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) detects this
//    Zen 5 VM as Cooperlake (AVX-512 kernels), but the VM's sessions export
//    OPENBLAS_CORETYPE=Haswell, which forces its AVX2 kernels: sgemm 1024^3 at about half
//    the rate (24.5-32.5 ms against 11.2-14.9, 2026-11-28, beside a test run; the "OpenBLAS at half
//    of oneDNN's rate" of earlier runs). On a CPU with AVX-512 F, CD, BW, DQ and VL, a forced core
//    without AVX-512 is removed (BRAZE_BENCH_KEEP_OPENBLAS_CORETYPE=1 keeps it), and where
//    OpenBLAS's own detection picks one, SkylakeX is set. OpenBLAS reads the variable when it is
//    loaded: the same re-execution. libtorch's BLAS is the same OpenBLAS.
//  - glibc malloc thresholds pinned. glibc moves its mmap threshold up as large blocks
//    are freed, so whether a library's big temporaries are reused or freshly mmapped
//    (and page-faulted on every run) depended on which benchmark ran before: 2.5 vs 9 ms
//    for one softmax. Fixed thresholds make every benchmark see the same allocator:
//    blocks come from the heap and freed memory stays there.
//
// The settings themselves are in process_settings.cc, shared with char_lm_torch (a
// standalone peer without them ran its steps 2.6x slower than in this binary: libgomp's
// default spin and OpenBLAS's threads fighting over 2 cores, and OpenBLAS's AVX2 kernels).
#include <benchmark/benchmark.h>

#include <string>
#include <thread>

#include "bench_context.h"
#include "braze/braze.h"
#include "device/thread_pool.h"
#include "process_settings.h"

namespace braze::bench {
namespace {

// The context keys of the process: the CPU, Braze's threads and pool, Halide, and the
// settings SettleProcess made. The peers' libraries add theirs (AddRegisteredContext).
void AddProcessContext() {
  const CpuInfo cpu = ReadCpuInfo();
  AddContext("cpu_model",
             cpu.model + " (family " + cpu.family + ", model " + cpu.model_number + ")");
  std::string isa;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                        "avx512_bf16", "amx_tile"}) {
    if (cpu.flags.count(f) != 0) isa += (isa.empty() ? "" : " ") + std::string(f);
  }
  AddContext("cpu_flags", isa);
  AddContext("hardware_concurrency", std::to_string(std::thread::hardware_concurrency()));
#ifdef BRAZE_BENCH_HALIDE_VERSION
  AddContext("halide_version", BRAZE_BENCH_HALIDE_VERSION);
#endif
  AddContext("braze_threads",
             "SessionOptions::num_threads 0: the pool's threads, one per CPU of the affinity "
             "mask (HL_NUM_THREADS=" +
                 (Env("HL_NUM_THREADS").empty() ? std::string("unset") : Env("HL_NUM_THREADS")) +
                 ")");
  AddContext("braze_pool_wait", "spin " + std::to_string(device::kSpinMicros) +
                                    " us after a parallel loop (pause, sched_yield every 64 "
                                    "rounds), then sleep (docs/THREAD_POOL.md)");
#ifdef BRAZE_BENCH_PEERS
  const std::string policy = Env("OMP_WAIT_POLICY"), spin = Env("GOMP_SPINCOUNT");
  AddContext("omp_wait_policy", policy.empty() ? "unset (libgomp: spin 300000 rounds)" : policy);
  std::string spin_note = spin.empty() ? "unset" : spin;
  if (!spin.empty() && spin == Env(kSpinCalibrated)) {
    spin_note += " (calibrated by main.cc to " + std::to_string(device::kSpinMicros) +
                 " us of libgomp's spin loop: the same spin as Braze's pool)";
  } else if (!spin.empty()) {
    spin_note += " (from the environment)";
  }
  AddContext("gomp_spincount", spin_note);
  AddContext("omp_fairness",
             policy == "active" && spin == Env(kSpinCalibrated)
                 ? "same spin: OpenMP peers spin as long as Braze's pool, then sleep"
                 : "NOT the same spin as Braze's pool: the OpenMP peers run with "
                   "OMP_WAIT_POLICY=" +
                       (policy.empty() ? std::string("unset") : policy) +
                       " GOMP_SPINCOUNT=" + (spin.empty() ? std::string("unset") : spin));
#endif
#ifdef BRAZE_BENCH_OPENBLAS
  const std::string detected = Env(kOpenBlasDetected), removed = Env(kOpenBlasRemoved);
  if (!removed.empty()) {
    AddContext("openblas_coretype",
               "detected by OpenBLAS; OPENBLAS_CORETYPE=" + removed +
                   " from the environment was removed by main.cc: a core without AVX-512 on a "
                   "CPU with AVX-512 F/CD/BW/DQ/VL (BRAZE_BENCH_KEEP_OPENBLAS_CORETYPE=1 keeps "
                   "it)");
  } else if (!detected.empty()) {
    AddContext("openblas_coretype",
               "SkylakeX, set by main.cc: OpenBLAS detected " + detected +
                   " (no AVX-512) on this CPU, which has AVX-512 F/CD/BW/DQ/VL");
  } else {
    AddContext("openblas_coretype", Env("OPENBLAS_CORETYPE").empty()
                                        ? "detected by OpenBLAS"
                                        : Env("OPENBLAS_CORETYPE") + " (from the environment)");
  }
  if (!Env("OPENBLAS_L2_SIZE").empty()) {
    AddContext("openblas_l2_size", Env("OPENBLAS_L2_SIZE") + " (from the environment)");
  }
#endif
}

}  // namespace
}  // namespace braze::bench

int main(int argc, char** argv) {
  braze::bench::SettleProcess(argv);
  braze::bench::PinMallocThresholds();
  braze::bench::SetOpenBlasThreads();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  braze::bench::AddProcessContext();
  braze::bench::AddRegisteredContext();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
