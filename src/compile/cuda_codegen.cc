// CUDA code generation and ptxas; see cuda_codegen.h.
#include "compile/cuda_codegen.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>

#include "Halide.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "compile/codegen_workarounds.h"
#include "compile/gpu_scheduling.h"
#include "device/halide_util.h"
#include "lower/lower_util.h"
#include "lower/lowering.h"
#include "schedule/autoschedule.h"
#include "schedule/extremum_operands.h"
#include "schedule/gpu_launch_check.h"
#include "schedule/gpu_schedule.h"

extern char** environ;

namespace braze {

namespace {

using device::CatchHalideErrors;

// Li2018 sizes its GPU tiles for this much parallelism: an H100's SM count.
constexpr int kGpuParallelism = 132;

// A fixed x86-64 host (the host code is never compiled here, and a fixed target keeps
// the code independent of the build machine) plus CUDA at capability 8.6.
Halide::Target CudaTarget() {
  return Halide::Target(
      Halide::Target::Linux, Halide::Target::X86, 64,
      {Halide::Target::SSE41, Halide::Target::AVX, Halide::Target::AVX2, Halide::Target::FMA,
       Halide::Target::F16C, Halide::Target::CUDA, Halide::Target::CUDACapability86});
}

// Halide function names must be C identifiers.
std::string FunctionName(const std::string& name) {
  std::string out = name.empty() ? "cluster" : name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

// Counts what the host code still does itself after GPU offload: loops (compute left on
// the CPU) and kernel launches.
class HostCodeCounter : public Halide::Internal::IRVisitor {
 public:
  int loops = 0;
  int launches = 0;
  // NVVM intrinsics left on the host, which x86 cannot select, and libdevice calls,
  // which the host cannot resolve.
  int nvvm_calls = 0;

 private:
  using IRVisitor::visit;
  void visit(const Halide::Internal::For* op) override {
    ++loops;
    IRVisitor::visit(op);
  }
  void visit(const Halide::Internal::Call* op) override {
    if (op->name == "halide_cuda_run") ++launches;
    if (op->name.rfind("llvm.nvvm.", 0) == 0 || op->name.rfind("__nv_", 0) == 0) ++nvvm_calls;
    IRVisitor::visit(op);
  }
};

std::vector<std::string> EntryNames(const std::string& ptx) {
  std::vector<std::string> names;
  static const std::regex kEntry(R"(\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*))");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), kEntry); it != std::sregex_iterator();
       ++it) {
    names.push_back((*it)[1].str());
  }
  return names;
}

// Schedules and compiles a freshly lowered cluster to a Module; fills code's PTX and
// counts. Every error is the schedule's (or Halide's) and names the attempt.
absl::Status TryScheduler(const ClusterSpec& spec, lower::LoweredCluster& lowered, Scheduler kind,
                          const Halide::Target& target, const GpuScheduleParams& params,
                          CudaKernelCode& code) {
  const std::string what = SchedulerName(kind);
  absl::Status status = CatchHalideErrors(what, absl::StatusCode::kInternal, [&] {
    device::HalideOutputCapture halide_output;  // Halide's chatter: to the log at --v=2
    Halide::Pipeline pipeline(lowered.info.outputs);
    InstallCodegenWorkarounds(pipeline, /*gpu=*/true);
    code.schedule = compile::ApplyGpuScheduler(kind, lowered, pipeline, target, params);
    std::vector<Halide::Argument> args;
    for (size_t i = 0; i < lowered.params.size(); ++i) {
      if (!lowered.input_elided[i]) args.push_back(lowered.params[i]);
    }
    const Halide::Module module = pipeline.compile_to_module(args, FunctionName(spec.name), target);
    for (const Halide::Buffer<>& buffer : module.buffers()) {
      const std::string& name = buffer.name();
      const std::string suffix = "gpu_source_kernels";
      if (name.size() < suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      // The PTX text, NUL-terminated inside the buffer.
      const char* data = static_cast<const char*>(buffer.data());
      const size_t size = buffer.size_in_bytes();
      code.ptx.assign(data, strnlen(data, size));
    }
    HostCodeCounter counter;
    for (const auto& fn : module.functions()) fn.body.accept(&counter);
    code.launches = counter.launches;
    code.host_loops = counter.loops;
    if (code.ptx.empty()) {
      return absl::FailedPreconditionError("the schedule produced no CUDA kernels");
    }
    if (counter.nvvm_calls > 0) {
      // The host forms' pass (codegen_workarounds.h) missed one.
      return absl::InternalError(absl::StrCat(
          counter.nvvm_calls, " NVVM intrinsic or libdevice call(s) left in host code"));
    }
    if (counter.loops > 0 && kind != Scheduler::kLi2018) {
      // The heuristic puts every Func on the GPU; a host loop means a Func was missed.
      return absl::InternalError(
          absl::StrCat("the schedule left ", counter.loops, " loops on the host"));
    }
    code.kernels = EntryNames(code.ptx);
    for (const schedule::GpuLaunch& l : schedule::GpuLaunches(module)) {
      code.max_threads_per_block =
          std::max(code.max_threads_per_block, l.threads >= 0 ? l.threads : l.threads_bound);
      code.max_shared_bytes =
          std::max(code.max_shared_bytes, l.shared_bytes >= 0 ? l.shared_bytes : l.shared_bound);
    }
    // As the compile driver does (lowered_check.h): a kernel that could never launch.
    const std::string launch = schedule::CheckGpuLaunchLimits(module);
    if (!launch.empty()) return absl::ResourceExhaustedError(launch);
    return absl::OkStatus();
  });
  if (!status.ok() && status.message().rfind(what, 0) != 0) {
    status = absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
  }
  return status;
}

}  // namespace

absl::StatusOr<CudaKernelCode> GenerateCudaCode(const ClusterSpec& spec, Scheduler which,
                                                const GpuScheduleParams& params) {
  const auto start = std::chrono::steady_clock::now();
  const std::string name = spec.name.empty() ? "cluster" : spec.name;
  Halide::Target target;
  BRAZE_RETURN_IF_ERROR(
      CatchHalideErrors(name + ": bad CUDA target", absl::StatusCode::kInternal, [&] {
        target = CudaTarget();
        return absl::OkStatus();
      }));
  std::vector<std::string> failures;
  for (Scheduler kind : SchedulerChain(which, /*gpu=*/true)) {
    CudaKernelCode code;
    code.target = target.to_string();
    // Fresh Funcs every attempt: a failed schedule leaves directives on the old ones.
    // Lowering errors are the cluster's, not the schedule's: no point in retrying.
    lower::LowerOptions gpu_lowering;
    gpu_lowering.gpu = true;
    gpu_lowering.cuda = true;
    BRAZE_ASSIGN_OR_RETURN(lower::LoweredCluster lowered, lower::LowerCluster(spec, gpu_lowering));
    if (lowered.info.outputs.empty()) {
      code.schedule = "(every output is empty: nothing to compute)\n";
    } else {
      absl::Status s = TryScheduler(spec, lowered, kind, target, params, code);
      if (!s.ok()) {
        failures.emplace_back(s.message());
        continue;
      }
    }
    code.scheduler_used = kind;
    code.scheduler = SchedulerName(kind);
    code.scheduler_failures = std::move(failures);
    code.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return code;
  }
  return absl::InternalError(
      absl::StrCat(name, ": every GPU schedule failed: ", absl::StrJoin(failures, "; ")));
}

namespace compile {

std::string ApplyGpuScheduler(Scheduler kind, const lower::LoweredCluster& lowered,
                              Halide::Pipeline& pipeline, const Halide::Target& target,
                              const GpuScheduleParams& params) {
  if (kind == Scheduler::kLi2018) {
    std::string text = schedule::ApplyAutoscheduler(kind, pipeline, target, kGpuParallelism);
    // A value that a reduction and a comparison both read must be stored once
    // (schedule/extremum_operands.h); inlined, each reader rounds its own copy (braze-fuzz
    // seeds 1130088, 1130170 on OpenCL). Refused, the chain goes on to the heuristic.
    for (const Halide::Func& f : schedule::ComparedReductionOperands(lowered.info)) {
      if (f.function().schedule().compute_level().is_inlined()) {
        throw Halide::CompileError(absl::StrCat(
            "Li2018 inlined ", f.name(),
            ", which a reduction and a comparison both read: each would round its own copy"));
      }
    }
    return text;
  }
  return schedule::ApplyGpuSchedule(lowered.info, target, kind, params);
}

}  // namespace compile

std::string PtxasPath() {
#ifdef BRAZE_PTXAS_PATH
  return BRAZE_PTXAS_PATH;
#else
  return "/usr/local/cuda/bin/ptxas";
#endif
}

namespace {

// Parses `ptxas -v` output: "Compiling entry function 'k' for 'sm_90'", then for k
// "N bytes stack frame, N bytes spill stores, N bytes spill loads" and
// "Used N registers, used N barriers[, N bytes smem]".
std::vector<PtxasKernel> ParsePtxasLog(const std::string& log) {
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kProperties(R"(Function properties for (\S+))");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kRegisters(R"(Used (\d+) registers)");
  static const std::regex kBarriers(R"(used (\d+) barriers)");
  static const std::regex kShared(R"((\d+) bytes smem)");
  std::vector<PtxasKernel> kernels;
  int current = -1;
  std::istringstream lines(log);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, kEntry)) {
      kernels.push_back({});
      kernels.back().name = m[1].str();
      current = static_cast<int>(kernels.size()) - 1;
      continue;
    }
    if (std::regex_search(line, m, kProperties)) {
      // Properties of a non-entry function (none in Halide's PTX) are not ours.
      current = -1;
      for (size_t i = 0; i < kernels.size(); ++i) {
        if (kernels[i].name == m[1].str()) current = static_cast<int>(i);
      }
      continue;
    }
    if (current < 0) continue;
    PtxasKernel& k = kernels[current];
    if (std::regex_search(line, m, kFrame)) {
      k.stack_bytes = std::stoll(m[1].str());
      k.spill_store_bytes = std::stoll(m[2].str());
      k.spill_load_bytes = std::stoll(m[3].str());
    }
    if (std::regex_search(line, m, kRegisters)) k.registers = std::stoi(m[1].str());
    if (std::regex_search(line, m, kBarriers)) k.barriers = std::stoi(m[1].str());
    if (std::regex_search(line, m, kShared)) k.shared_bytes = std::stoll(m[1].str());
  }
  return kernels;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Runs argv[0] with stdout and stderr into `log_path`; returns the exit status, or -1
// with errno's message in `error` when it could not run.
int RunTo(const std::vector<std::string>& argv, const std::string& log_path, std::string* error) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = std::strerror(errno);
      return -1;
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

absl::StatusOr<PtxasReport> AssemblePtx(const std::string& ptx, const std::string& gpu_name) {
  const std::string ptxas = PtxasPath();
  if (access(ptxas.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("ptxas not found at ", ptxas, " (install the CUDA toolkit)"));
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/braze_ptxXXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", dir, ": ", std::strerror(errno)));
  }
  const std::string ptx_path = dir + "/kernels.ptx";
  const std::string cubin_path = dir + "/kernels.cubin";
  const std::string log_path = dir + "/ptxas.log";
  {
    std::ofstream out(ptx_path, std::ios::binary);
    out << ptx;
  }
  std::string error;
  const int rc =
      RunTo({ptxas, "--gpu-name", gpu_name, "-v", ptx_path, "-o", cubin_path}, log_path, &error);
  PtxasReport report;
  report.log = ReadFile(log_path);
  for (const std::string& path : {ptx_path, cubin_path, log_path}) std::remove(path.c_str());
  rmdir(dir.c_str());
  if (rc < 0) return absl::InternalError(absl::StrCat("could not run ", ptxas, ": ", error));
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat(ptxas, " --gpu-name ", gpu_name, " failed (exit ", rc, "):\n", report.log));
  }
  report.kernels = ParsePtxasLog(report.log);
  return report;
}

}  // namespace braze
