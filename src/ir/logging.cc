// The log: see braze/logging.h and ir/logging.h. Lives in the lowest layer so that every
// layer (compile for Halide's output, runtime for fallbacks) can log.
#include "ir/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>

namespace braze {
namespace {

// Constant-initialized, so logging works before main and during static destruction.
std::atomic<int> verbosity{0};

struct SinkState {
  std::mutex mu;  // held while the sink runs: one message at a time, swaps wait
  LogSink sink;   // empty: the default, stderr
};

// Leaked on purpose: sessions (and so warnings) may run during static destruction.
SinkState& State() {
  static SinkState* const state = new SinkState;
  return *state;
}

void Deliver(LogSeverity severity, int v, std::string_view message) {
  // Sinks get the text without a trailing newline, whoever built it.
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.remove_suffix(1);
  }
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.sink) {
    state.sink(severity, v, message);
  } else {
    // One fprintf per message, so a multi-line message is not split by other writers.
    std::fprintf(stderr, "braze: %s: %.*s\n", LogSeverityName(severity),
                 static_cast<int>(message.size()), message.data());
  }
}

}  // namespace

const char* LogSeverityName(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "info";
    case LogSeverity::kWarning:
      return "warning";
    case LogSeverity::kError:
      return "error";
  }
  return "unknown";
}

void SetLogSink(LogSink sink) {
  SinkState& state = State();
  {
    std::lock_guard<std::mutex> lock(state.mu);
    std::swap(state.sink, sink);
  }
  // The old sink is destroyed here, outside the lock: its captures' destructors are the
  // program's code.
}

void SetLogVerbosity(int level) { verbosity.store(level, std::memory_order_relaxed); }

int LogVerbosity() { return verbosity.load(std::memory_order_relaxed); }

bool VLogIsOn(int v) { return v <= LogVerbosity(); }

void LogInfo(int v, std::string_view message) {
  if (VLogIsOn(v)) Deliver(LogSeverity::kInfo, v, message);
}

void LogWarning(std::string_view message) { Deliver(LogSeverity::kWarning, 0, message); }

void LogError(std::string_view message) { Deliver(LogSeverity::kError, 0, message); }

}  // namespace braze
