// Ahead-of-time kernels: linking, their one Halide runtime, and the kernel that launches
// one (see aot_kernel.h).
#include "compile/aot_kernel.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>
#include <vector>

#include "Halide.h"
#include "absl/strings/str_cat.h"
#include "braze/status.h"
#include "compile/launch.h"
#include "device/cpu_conv.h"
#include "device/cpu_gemm.h"
#include "device/halide_util.h"
#include "device/jit_memory.h"
#include "device/stream_copy.h"
#include "device/thread_pool.h"
#include "ir/logging.h"

extern char** environ;

namespace braze {
namespace compile {
namespace {

// dlopen and dlclose of kernel libraries under one lock. glibc serializes them with its
// own loader lock, which ThreadSanitizer cannot see: a kernel loaded on one thread and
// unloaded on another was reported as a race inside ld.so's allocator
// (DiskCacheTest.ConcurrentWritersOfOneKeyAreSafe). Loading is rare (once per kernel and
// process), so the lock costs nothing and makes the order visible.
std::mutex& LoaderMutex() {
  static std::mutex mu;
  return mu;
}

void* LockedDlopen(const std::string& path, int flags) {
  std::lock_guard<std::mutex> lock(LoaderMutex());
  return dlopen(path.c_str(), flags);
}

void LockedDlclose(void* handle) {
  std::lock_guard<std::mutex> lock(LoaderMutex());
  dlclose(handle);
}

using device::CatchHalideErrors;

// `cc -shared -o so_path object_path [-O2 -fPIC c_source]`, with the system's C compiler
// driver.
absl::Status LinkSharedWith(const std::string& object_path, const std::string& so_path,
                            const std::string& c_source) {
  const char* cc = std::getenv("CC");
  const std::string driver = cc != nullptr && *cc != '\0' ? cc : "cc";
  std::vector<std::string> args = {driver, "-shared", "-o", so_path, object_path};
  if (!c_source.empty()) args.insert(args.end(), {"-O2", "-fPIC", c_source});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, driver.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run the C compiler driver '", driver,
                                                      "' to link kernels: ", strerror(rc),
                                                      " (set CC, or BRAZE_CACHE_DIR=off)"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("'", driver, " -shared' failed linking ", object_path));
  }
  return absl::OkStatus();
}

// ---- the runtime ----

// Kernels call functions of Braze's own by name: the CPU GEMM library's extern stage
// and the streaming-store copy and fence. Braze's static libraries export no symbols, so the
// stored runtime (loaded RTLD_GLOBAL, where each kernel's undefined symbols resolve)
// defines them, as jumps through addresses Braze sets when it loads the runtime.
// Compiled from this source by `cc` with the runtime's link.
constexpr char kExternTrampolines[] = R"(
#ifdef __cplusplus
extern "C" {  /* CC may name a C++ driver, which compiles a .c file as C++ */
#endif
typedef int (*GemmFn)(void*, void*, int, int, int, int, unsigned long long, void*);
typedef int (*GemmBiasFn)(void*, void*, void*, int, int, int, int, int, unsigned long long,
                          void*);
typedef int (*ConvFn)(void*, void*, void*, void*, int, int, int, int, int, int, int, int, int,
                      int, int, int, int, int, int, int, int, int, int, int, void*);
typedef int (*CopyFn)(void*, long long, const void*, long long, long long);
typedef int (*FenceFn)(void);
static GemmFn gemm_fn;
static GemmBiasFn gemm_bias_fn;
static ConvFn conv_fn;
static CopyFn copy_fn;
static FenceFn fence_fn;
void braze_set_extern_addresses(void* gemm, void* gemm_bias, void* conv, void* copy,
                                void* fence) {
  gemm_fn = (GemmFn)gemm;
  gemm_bias_fn = (GemmBiasFn)gemm_bias;
  conv_fn = (ConvFn)conv;
  copy_fn = (CopyFn)copy;
  fence_fn = (FenceFn)fence;
}
int braze_cpu_gemm_f32(void* a, void* b, int ta, int tb, int k, int threads,
                       unsigned long long b_const, void* out) {
  return gemm_fn(a, b, ta, tb, k, threads, b_const, out);
}
int braze_cpu_gemm_bias_f32(void* a, void* b, void* bias, int ta, int tb, int k, int relu,
                            int threads, unsigned long long b_const, void* out) {
  return gemm_bias_fn(a, b, bias, ta, tb, k, relu, threads, b_const, out);
}
int braze_cpu_conv_f32(void* a, void* b, void* bias, void* residual, int dir, int nchw, int n,
                       int c_in, int in_h, int in_w, int c_out, int kh, int kw, int groups, int sh,
                       int sw, int dh, int dw, int pt, int pb, int pl, int pr, int post,
                       int threads, void* out) {
  return conv_fn(a, b, bias, residual, dir, nchw, n, c_in, in_h, in_w, c_out, kh, kw, groups, sh,
                 sw, dh, dw, pt, pb, pl, pr, post, threads, out);
}
int braze_stream_copy(void* dst, long long dst_offset, const void* src, long long src_offset,
                      long long bytes) {
  return copy_fn(dst, dst_offset, src, src_offset, bytes);
}
int braze_stream_fence(void) { return fence_fn(); }
/* compile/codegen_workarounds.h kOpaqueBitsSymbol: defined here, out of the kernel's sight */
unsigned long long braze_opaque_bits(unsigned long long bits) { return bits; }
#ifdef __cplusplus
}
#endif
)";

struct Runtime {
  std::string target, path;
  void* handle = nullptr;
  int (*set_num_threads)(int) = nullptr;
};

// The runtime this process loaded: one per process, as its symbols are global.
std::mutex runtime_mu;
Runtime* loaded_runtime = nullptr;  // guarded by runtime_mu
RuntimeThreadCount aot_runtime_threads;

// Halide reports a run-time error on the thread that met it: the launching thread
// (kept in `run_error`) or one of the runtime's workers inside a parallel loop (kept in
// `worker_errors` until the launch that failed collects it).
thread_local std::string* run_error = nullptr;
std::mutex worker_errors_mu;
std::string worker_errors;

extern "C" void BrazeAotError(void*, const char* message) {
  if (run_error != nullptr) {
    absl::StrAppend(run_error, message);
    return;
  }
  std::lock_guard<std::mutex> lock(worker_errors_mu);
  if (worker_errors.size() < 4096) absl::StrAppend(&worker_errors, message);
}

std::atomic<device::ParallelForFunction> aot_halide_pool{nullptr};

int AotParallelFor(void* user_context, device::ParallelTask f, int min, int extent,
                   uint8_t* closure) {
  return device::ParallelFor(user_context, f, min, extent, closure, aot_halide_pool.load());
}

std::string TakeWorkerErrors() {
  std::lock_guard<std::mutex> lock(worker_errors_mu);
  return std::exchange(worker_errors, std::string());
}
extern "C" void BrazeAotPrint(void*, const char* message) { LogInfo(2, message); }

// ---- the kernel ----

class AotKernel : public PipelineKernel {
 public:
  AotKernel(std::string name, void* handle, int (*argv_fn)(void**), KernelLayout layout,
            int num_threads, std::string so_path, bool loaded)
      : PipelineKernel(std::move(name), std::move(layout), /*on_device=*/false, num_threads),
        handle_(handle),
        argv_fn_(argv_fn),
        so_path_(std::move(so_path)),
        loaded_(loaded) {}
  ~AotKernel() override { LockedDlclose(handle_); }

  std::string schedule_text() const override {
    return absl::StrCat("// ahead of time, ", so_path_, "\n", layout().schedule);
  }
  std::string lowered_stmt() const override {
    return absl::StrCat("// this kernel came from the disk cache (", so_path_,
                        "): run with BRAZE_CACHE_DIR=off to see its lowered statement\n");
  }
  bool loaded_from_disk() const override { return loaded_; }

 protected:
  absl::Status Call(std::vector<KernelBuffer>& args, size_t num_inputs) override {
    std::vector<void*> raw;
    raw.reserve(args.size());
    for (KernelBuffer& b : args) raw.push_back(b.raw());
    std::string error;
    run_error = &error;
    const int rc = argv_fn_(raw.data());
    run_error = nullptr;
    if (rc != 0) {
      if (error.empty()) error = TakeWorkerErrors();
      return absl::InvalidArgumentError(absl::StrCat(
          name(), ": Halide run-time error: ", error.empty() ? absl::StrCat("code ", rc) : error));
    }
    return absl::OkStatus();
  }

  void UseRuntimeThreads(int n) override {
    aot_runtime_threads.Use(n, []() -> RuntimeThreadCount::SetNumThreads {
      std::lock_guard<std::mutex> lock(runtime_mu);
      return loaded_runtime != nullptr ? loaded_runtime->set_num_threads : nullptr;
    });
  }

 private:
  void* handle_;
  int (*argv_fn_)(void**);
  const std::string so_path_;
  const bool loaded_;
};

}  // namespace

absl::Status LinkShared(const std::string& object_path, const std::string& so_path) {
  return LinkSharedWith(object_path, so_path, "");
}

const char* RuntimeExternsSource() { return kExternTrampolines; }

absl::Status BuildRuntime(const std::string& target, const std::string& so_path) {
  char object[] = "/tmp/braze_runtime_XXXXXX.o";
  const int fd = mkstemps(object, 2);
  if (fd < 0) return absl::InternalError("disk cache: cannot create a temporary file");
  close(fd);
  absl::Status built =
      CatchHalideErrors("disk cache: Halide runtime", absl::StatusCode::kInternal, [&] {
        Halide::compile_standalone_runtime(object, Halide::Target(target));
        return absl::OkStatus();
      });
  // The source under one name in a private directory: compilers record its name in the
  // .so, and concurrent builders must write the same bytes (the disk cache checks a
  // runtime against its .sum).
  char source_dir[] = "/tmp/braze_externs_XXXXXX";
  const bool have_dir = mkdtemp(source_dir) != nullptr;
  const std::string source = std::string(source_dir) + "/braze_externs.c";
  if (built.ok() && !have_dir) built = absl::InternalError("cannot create a temporary directory");
  if (built.ok()) {
    std::ofstream out(source, std::ios::binary);
    out << kExternTrampolines;
    out.close();
    if (!out) built = absl::InternalError(absl::StrCat("cannot write ", source));
  }
  if (built.ok()) built = LinkSharedWith(object, so_path, source);
  std::remove(object);
  if (have_dir) {
    std::remove(source.c_str());
    rmdir(source_dir);
  }
  return built;
}

std::optional<LoadedRuntime> CurrentRuntime() {
  std::lock_guard<std::mutex> lock(runtime_mu);
  if (loaded_runtime == nullptr) return std::nullopt;
  return LoadedRuntime{loaded_runtime->target, loaded_runtime->path};
}

absl::Status LoadRuntime(const std::string& so_path, const std::string& target) {
  std::lock_guard<std::mutex> lock(runtime_mu);
  if (loaded_runtime != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("disk cache: this process already runs kernels for ", loaded_runtime->target));
  }
  void* handle = LockedDlopen(so_path, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::DataLossError(absl::StrCat("cannot load ", so_path, ": ", why ? why : "?"));
  }
  auto set_error = reinterpret_cast<void* (*)(void (*)(void*, const char*))>(
      dlsym(handle, "halide_set_error_handler"));
  auto set_print = reinterpret_cast<void* (*)(void (*)(void*, const char*))>(
      dlsym(handle, "halide_set_custom_print"));
  auto set_externs = reinterpret_cast<void (*)(void*, void*, void*, void*, void*)>(
      dlsym(handle, "braze_set_extern_addresses"));
  // The addresses given are Braze's own functions, never these trampolines: the real ones
  // are hidden, so a second copy of Braze in the process cannot bind its names to them
  // (which would make each trampoline jump to itself).
  if (set_error == nullptr || set_print == nullptr || set_externs == nullptr) {
    LockedDlclose(handle);
    return absl::DataLossError(absl::StrCat(so_path, " is not a Halide runtime built by Braze"));
  }
  set_externs(CpuGemmF32Address(), CpuGemmBiasF32Address(), CpuConvF32Address(),
              StreamCopyAddress(), StreamFenceAddress());
  // Never Halide's default handler, which aborts.
  set_error(&BrazeAotError);
  set_print(&BrazeAotPrint);
  // Intermediates through Braze's buffer cache, as JIT kernels (device/jit_memory.h):
  // with glibc's malloc a fused matmul's temporaries were page-faulted every run (25%
  // slower than the JIT kernel here).
  auto set_malloc = reinterpret_cast<void* (*)(void* (*)(void*, size_t))>(
      dlsym(handle, "halide_set_custom_malloc"));
  auto set_free =
      reinterpret_cast<void* (*)(void (*)(void*, void*))>(dlsym(handle, "halide_set_custom_free"));
  if (set_malloc != nullptr && set_free != nullptr) {
    set_malloc(&device::BufferCacheMalloc);
    set_free(&device::BufferCacheFree);
  }
  // Parallel loops on Braze's thread pool, as JIT kernels, and on this runtime's own
  // pool while Braze's is busy (device/thread_pool.h).
  auto set_par_for = reinterpret_cast<device::ParallelForFunction (*)(device::ParallelForFunction)>(
      dlsym(handle, "halide_set_custom_do_par_for"));
  aot_halide_pool.store(
      reinterpret_cast<device::ParallelForFunction>(dlsym(handle, "halide_default_do_par_for")));
  if (set_par_for != nullptr) set_par_for(&AotParallelFor);
  loaded_runtime =
      new Runtime{target, so_path, handle,
                  reinterpret_cast<int (*)(int)>(dlsym(handle, "halide_set_num_threads"))};
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CompiledKernel>> OpenKernel(const std::string& so_path,
                                                           const std::string& name,
                                                           const KernelLayout& layout,
                                                           int num_threads, bool loaded) {
  void* handle = LockedDlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::DataLossError(absl::StrCat("cannot load ", so_path, ": ", why ? why : "?"));
  }
  auto* fn = reinterpret_cast<int (*)(void**)>(dlsym(handle, "braze_kernel_argv"));
  if (fn == nullptr) {
    LockedDlclose(handle);
    return absl::DataLossError(absl::StrCat(so_path, " has no braze_kernel_argv"));
  }
  return std::unique_ptr<CompiledKernel>(
      std::make_unique<AotKernel>(name, handle, fn, layout, num_threads, so_path, loaded));
}

}  // namespace compile
}  // namespace braze
