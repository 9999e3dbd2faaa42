// The Halide boundary; see halide_util.h.
#include "device/halide_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <dlfcn.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <streambuf>
#include <string>

#include "ir/logging.h"

namespace braze {
namespace device {
namespace {

// The buffer std::cerr writes into during a capture: a string appended to under a mutex,
// since several compiling threads may write at once (std::stringbuf is not safe for
// that). It has no put area, so every write comes through overflow or xsputn.
class LockedStringBuf : public std::streambuf {
 public:
  // Removes and returns the text up to and including its last newline, or all of it.
  std::string Take(bool all) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t end = text_.size();
    if (!all) {
      const size_t newline = text_.rfind('\n');
      end = newline == std::string::npos ? 0 : newline + 1;
    }
    std::string taken = text_.substr(0, end);
    text_.erase(0, end);
    return taken;
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    std::lock_guard<std::mutex> lock(mu_);
    text_.push_back(traits_type::to_char_type(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

struct CaptureState {
  std::mutex mu;  // guards `active` and the swaps of std::cerr's buffer
  int active = 0;
  std::streambuf* saved = nullptr;  // std::cerr's own buffer while active > 0
  LockedStringBuf buffer;
};

// Leaked on purpose, as std::cerr may be in use during static destruction.
CaptureState& Capture() {
  static CaptureState* const state = new CaptureState;
  return *state;
}

// HL_DEBUG_CODEGEN / HL_DEBUG_AUTOSCHEDULE above 0: Halide's debug output was asked for
// (Halide reads them with atoi, as here).
bool HalideDebugRequested() {
  static const bool requested = [] {
    for (const char* name : {"HL_DEBUG_CODEGEN", "HL_DEBUG_AUTOSCHEDULE"}) {
      const char* value = std::getenv(name);
      if (value != nullptr && std::atoi(value) > 0) return true;
    }
    return false;
  }();
  return requested;
}

void ForwardLine(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  LogInfo(2, "halide: " + line);
}

// Sends `text` to the log line by line. On a terminal, Adams2019 draws a progress bar
// and erases it with backspaces before the next line: applied here, they leave only the
// line.
void Forward(const std::string& text) {
  if (text.empty() || !VLogIsOn(2)) return;
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      ForwardLine(line);
      line.clear();
    } else if (c == '\b') {
      if (!line.empty()) line.pop_back();
    } else {
      line.push_back(c);
    }
  }
  ForwardLine(line);
}

}  // namespace

HalideOutputCapture::HalideOutputCapture() : active_(!HalideDebugRequested()) {
  if (!active_) return;
  CaptureState& state = Capture();
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.active++ == 0) {
    std::cerr.flush();
    state.saved = std::cerr.rdbuf(&state.buffer);
  }
}

HalideOutputCapture::~HalideOutputCapture() {
  if (!active_) return;
  CaptureState& state = Capture();
  std::string text;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    const bool last = --state.active == 0;
    if (last) {
      std::cerr.rdbuf(state.saved);
      state.saved = nullptr;
    }
    // A partial line waits for the rest while other captures run.
    text = state.buffer.Take(/*all=*/last);
  }
  // Outside the lock: the sink is the program's code and may be slow.
  Forward(text);
}

namespace {

thread_local int llvm_errors_throw = 0;  // LlvmFatalErrorsThrow guards alive on this thread

void OnLlvmFatalError(void*, const char* reason, bool /*gen_crash_diag*/) {
  if (llvm_errors_throw > 0) throw std::runtime_error(std::string("LLVM ERROR: ") + reason);
  // Outside a compile: LLVM's own message; returning lets LLVM end the process as it
  // would without a handler (its interrupt handlers, then exit or abort).
  std::fprintf(stderr, "LLVM ERROR: %s\n", reason);
}

void InstallLlvmFatalErrorHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    using Handler = void (*)(void*, const char*, bool);
    using Install = void (*)(Handler, void*);
    // llvm::install_fatal_error_handler(fatal_error_handler_t, void*), LLVM 14.
    auto install = reinterpret_cast<Install>(
        dlsym(RTLD_DEFAULT, "_ZN4llvm27install_fatal_error_handlerEPFvPvPKcbES0_"));
    if (install != nullptr) install(&OnLlvmFatalError, nullptr);
  });
}

}  // namespace

LlvmFatalErrorsThrow::LlvmFatalErrorsThrow() {
  InstallLlvmFatalErrorHandler();
  ++llvm_errors_throw;
}

LlvmFatalErrorsThrow::~LlvmFatalErrorsThrow() { --llvm_errors_throw; }

// The JIT target: HL_JIT_TARGET or the host, minus features this CPU lacks. Halide 14
// reports AVX512_SapphireRapids for any CPU with AVX512-VNNI and AVX512-BF16 and then
// compiles for LLVM's "sapphirerapids" CPU, which includes AVX512-FP16; AMD Zen 4 has
// the former but not FP16, and the kernels die of SIGILL there. Dropping the feature
// leaves Cannonlake-level AVX-512, which Zen 4 has.
Halide::Target SanitizedJitTarget() {
  Halide::Target target = Halide::get_jit_target_from_environment();
#if defined(__x86_64__) || defined(__i386__)
  if (target.has_feature(Halide::Target::AVX512_SapphireRapids)) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool fp16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23));
    if (!fp16) target = target.without_feature(Halide::Target::AVX512_SapphireRapids);
  }
#endif
  return target;
}

Halide::Type HalideType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return Halide::Float(32);
    case DType::kF64:
      return Halide::Float(64);
    case DType::kI32:
      return Halide::Int(32);
    case DType::kBool:
      return Halide::UInt(8);
    case DType::kBF16:
      return Halide::BFloat(16);
    case DType::kF16:
      return Halide::Float(16);
  }
  return Halide::Float(32);
}

bool NamesLostCudaContext(const std::string& message) {
  static const char* const kSticky[] = {
      "CUDA_ERROR_LAUNCH_FAILED",         "CUDA_ERROR_ILLEGAL_ADDRESS",
      "CUDA_ERROR_ILLEGAL_INSTRUCTION",   "CUDA_ERROR_MISALIGNED_ADDRESS",
      "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
      "CUDA_ERROR_HARDWARE_STACK_ERROR",  "CUDA_ERROR_ASSERT",
      "CUDA_ERROR_LAUNCH_TIMEOUT",        "CUDA_ERROR_ECC_UNCORRECTABLE"};
  for (const char* code : kSticky) {
    if (message.find(code) != std::string::npos) return true;
  }
  return false;
}

std::string NoteLostCudaContext(std::string message) {
  static const char kNote[] =
      " (the CUDA context is lost: every later CUDA call in this process fails with this "
      "error; the first such failure is the one to look at)";
  if (NamesLostCudaContext(message) && message.find(kNote) == std::string::npos) {
    message += kNote;
  }
  return message;
}

}  // namespace device
}  // namespace braze
