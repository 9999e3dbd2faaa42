// Braze's log: the one place its diagnostics go. Warnings (a cluster that failed to
// compile and runs op by op, say), errors nothing else reports (a timeline that could
// not be finished at exit), and informational messages, some of them verbose.
//
// Every message has a severity and a verbosity level. Warnings and errors have level 0
// and are always delivered. An info message of level v is delivered when
// v <= LogVerbosity(); the levels in use:
//
//   0  what a flag asked for (BRAZE_FLAGS=--clustering_debug's summaries)
//   1  a scheduler that failed on a cluster, and the next one of its fall-through chain
//      tried (the reason is also in the kernel's scheduler failures)
//   2  what Halide prints while scheduling and compiling (the Adams2019 autoscheduler's
//      "Pass 0 of 5, cost: ..." lines, "Update definition ... has not been scheduled"
//      warnings), captured and forwarded one line at a time, prefixed "halide: ";
//      with HL_DEBUG_CODEGEN or HL_DEBUG_AUTOSCHEDULE set above 0 Halide's output is
//      not captured but goes to stderr as Halide writes it
//
// The verbosity is 0 unless the program sets it, or BRAZE_FLAGS=--v=N does (applied
// when Braze first reads its flags, at the first Session run, and then winning over an
// earlier SetLogVerbosity). So by default a program hears only warnings and errors:
//
//   braze: warning: cluster 'cluster_0' failed to compile, running it op by op: ...
//
// A program that keeps its own log installs a sink, which receives every delivered
// message instead of stderr:
//
//   braze::SetLogSink([](braze::LogSeverity severity, int verbosity, std::string_view text) {
//     MyLogger(severity == braze::LogSeverity::kInfo ? kDebug : kWarn) << text;
//   });
//   ...
//   braze::SetLogSink(nullptr);  // back to stderr
//
// Thread-safety: every function here may be called from any thread. Messages may come
// from any thread that runs or compiles (the compile cache compiles on the threads of
// the sessions that need a kernel); the sink is called under one process-wide mutex, so
// it is never called twice at once, and SetLogSink waits for a call in progress to
// return before replacing the sink. Hence a sink must not call back into Braze (log, run
// a Session, SetLogSink): that would deadlock. Nor may it throw: messages come from
// code that does not expect exceptions.
#ifndef BRAZE_LOGGING_H_
#define BRAZE_LOGGING_H_

#include <functional>
#include <string_view>

namespace braze {

enum class LogSeverity { kInfo, kWarning, kError };

// "info", "warning", "error".
const char* LogSeverityName(LogSeverity severity);

// Receives one delivered message: its severity, its verbosity level (0 for warnings and
// errors) and its text, with no trailing newline (a message may span several lines).
// The text is valid only during the call.
using LogSink = std::function<void(LogSeverity severity, int verbosity, std::string_view message)>;

// Installs `sink` for every message from now on; an empty sink (nullptr, LogSink())
// restores the default, which writes "braze: <severity>: <message>\n" to the C stderr
// stream (stdio's, not std::cerr: Braze redirects std::cerr while Halide compiles, and
// its own messages must not be caught up in that).
void SetLogSink(LogSink sink);

// The highest verbosity level of info messages delivered; 0 by default. Negative values
// deliver no info messages (warnings and errors still come).
void SetLogVerbosity(int level);
int LogVerbosity();

}  // namespace braze

#endif  // BRAZE_LOGGING_H_
