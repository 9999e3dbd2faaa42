// bench/process_settings.h; bench/main.cc's header comment says why each setting exists.
#include "process_settings.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "device/thread_pool.h"

#ifdef BRAZE_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace braze::bench {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

CpuInfo ReadCpuInfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (!info.model.empty()) break;  // the end of the first CPU
      continue;
    }
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name") info.model = value;
    if (key == "cpu family") info.family = value;
    if (key == "model") info.model_number = value;
    if (key == "flags") {
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
    }
  }
  return info;
}

bool HasSkylakeXFeatures(const CpuInfo& cpu) {
  for (const char* f : {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}) {
    if (cpu.flags.count(f) == 0) return false;
  }
  return true;
}

bool IsAvx512Core(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

// Rounds of libgomp's spin loop (config/linux/wait.h: a relaxed load of the futex word
// and cpu_relax(), `pause` on x86) in `micros` microseconds: the best of 5 windows of
// 10 ms, so a preempted window does not shorten it.
namespace {

[[maybe_unused]] long long CalibrateGompSpinCount(int micros) {
  std::atomic<int> word{0};
  double best_rate = 0;  // rounds per second
  for (int window = 0; window < 5; ++window) {
    const auto start = std::chrono::steady_clock::now();
    long long rounds = 0;
    double elapsed = 0;
    do {
      for (int i = 0; i < 1024; ++i) {
        if (word.load(std::memory_order_relaxed) != 0) return 0;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      rounds += 1024;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.01);
    best_rate = std::max(best_rate, rounds / elapsed);
  }
  return static_cast<long long>(best_rate * micros * 1e-6);
}

}  // namespace

void SettleProcess(char** argv) {
#ifdef BRAZE_BENCH_PEERS
  if (!Env(kSettled).empty()) return;
  bool changed = false;
  if (Env("OMP_WAIT_POLICY").empty()) {
    setenv("OMP_WAIT_POLICY", "active", 1);
    if (Env("GOMP_SPINCOUNT").empty()) {
      const std::string count = std::to_string(CalibrateGompSpinCount(device::kSpinMicros));
      setenv("GOMP_SPINCOUNT", count.c_str(), 1);
      setenv(kSpinCalibrated, count.c_str(), 1);
    }
    changed = true;
  }
#ifdef BRAZE_BENCH_OPENBLAS
  // An OPENBLAS_CORETYPE from the environment that names a core without AVX-512 on a CPU
  // with it is removed (this VM's sessions export OPENBLAS_CORETYPE=Haswell: AVX2 kernels,
  // half the sgemm rate), unless BRAZE_BENCH_KEEP_OPENBLAS_CORETYPE is set; then, if
  // OpenBLAS's own detection still picks a core without AVX-512, SkylakeX is set.
  const bool cpu_avx512 = HasSkylakeXFeatures(ReadCpuInfo());
  const std::string core = openblas_get_corename();
  const std::string forced = Env("OPENBLAS_CORETYPE");
  if (cpu_avx512 && !IsAvx512Core(core) && Env("BRAZE_BENCH_KEEP_OPENBLAS_CORETYPE").empty()) {
    if (!forced.empty()) {
      setenv(kOpenBlasRemoved, forced.c_str(), 1);
      unsetenv("OPENBLAS_CORETYPE");
    } else {
      setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
      setenv(kOpenBlasDetected, core.c_str(), 1);
    }
    changed = true;
  }
#endif
  if (!changed) return;
  setenv(kSettled, "1", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "%s: re-exec with the OpenMP and OpenBLAS settings failed: %s\n", argv[0],
               std::strerror(errno));
#else
  (void)argv;
#endif
}

void PinMallocThresholds() {
  constexpr int kThreshold = 1 << 30;  // 1 GiB: above every buffer the benchmarks allocate
  mallopt(M_MMAP_THRESHOLD, kThreshold);
  mallopt(M_TRIM_THRESHOLD, kThreshold);
}

void SetOpenBlasThreads() {
#ifdef BRAZE_BENCH_OPENBLAS
  openblas_set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
#endif
}

}  // namespace braze::bench
