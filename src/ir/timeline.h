// The timeline: a Chrome trace event file of what the runtime ran, one "X" (complete)
// event per kernel launch and per compile, which chrome://tracing and Perfetto
// (ui.perfetto.dev) open. A fused cluster is one bar; an unfused graph is one bar per op.
//
// It lives in ir/, the bottom layer, because every layer above records into it: the
// compile layer its compiles (compile/kernel_source.cc), the runtime its launches.
//
//   {"displayTimeUnit":"ms","traceEvents":[
//     {"name":"cluster_0","cat":"cluster","ph":"X","ts":12.5,"dur":30.1,"pid":7,"tid":1},
//     ...]}
//
// Categories: "cluster" (a fused cluster launch, named after the cluster), "op" (a
// compiled single-op kernel, named after its node), "reference" (an op on a reference
// kernel), "compile" (getting a step's kernel from the compile cache, compiling it on a
// miss; args.cache_hit says which). ts/dur are microseconds since Start; pid is the
// process, tid a small number per thread, except "collective" (a communicator's call),
// whose bars all sit on one row named "communication", whichever thread made the call.
//
// Host rows show when the host launched work: for a GPU's kernels and copies that is the
// time to queue them, not to run them. A GPU's own row ("cuda:0 (device time)") shows the
// same launches as the device ran them, timed with device events (RecordOnRow, written by
// device/device_timeline.h): docs/CUDA.md, "Timeline".
//
// One process-wide timeline, started by BRAZE_FLAGS=--timeline=FILE or by Start() (the
// public face is braze/timeline.h). Events are written to the file as they come (memory
// stays flat over long training runs); Stop(), or process exit, closes the JSON.
// Recording is thread-safe; while inactive, an event costs one relaxed atomic load.
#ifndef BRAZE_IR_TIMELINE_H_
#define BRAZE_IR_TIMELINE_H_

#include <atomic>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace braze {

class Timeline {
 public:
  // Starts a trace written to `path` (truncated). FailedPrecondition while another trace
  // is active; the OS's reason when the file cannot be opened.
  static absl::Status Start(const std::string& path);
  // Finishes the file; from here on it is valid JSON. FailedPrecondition when inactive;
  // Internal when writing failed (e.g. a full disk), naming the file.
  static absl::Status Stop();
  static bool active() { return active_.load(std::memory_order_relaxed); }

  // Appends a complete event: `start_us` from NowMicros(), `args_json` either empty or
  // the members of the event's "args" object (`"cache_hit":true`). Names are escaped
  // here. Dropped when no trace is active.
  static void Record(std::string_view name, std::string_view category, double start_us,
                     double duration_us, std::string_view args_json = {});
  // As Record, on the row named `row` (made on first use in each trace, after every
  // thread's and the communication row) instead of the calling thread's.
  static void RecordOnRow(std::string_view row, std::string_view name, std::string_view category,
                          double start_us, double duration_us, std::string_view args_json = {});
  // A monotonic clock, in microseconds.
  static double NowMicros();

 private:
  static std::atomic<bool> active_;
};

// Records an event spanning its own lifetime, if a trace was active when it was built.
// `name` must outlive it (it is not copied, to keep the inactive path free).
class TimelineEvent {
 public:
  TimelineEvent(const std::string& name, const char* category)
      : active_(Timeline::active()), name_(name), category_(category) {
    if (active_) start_us_ = Timeline::NowMicros();
  }
  ~TimelineEvent() {
    if (active_) {
      Timeline::Record(name_, category_, start_us_, Timeline::NowMicros() - start_us_, args_);
    }
  }
  TimelineEvent(const TimelineEvent&) = delete;
  TimelineEvent& operator=(const TimelineEvent&) = delete;

  // Members of the event's "args" object; `args_json` must outlive the event (literals).
  void set_args(const char* args_json) { args_ = args_json; }

 private:
  const bool active_;
  const std::string& name_;
  const char* category_;
  const char* args_ = "";
  double start_us_ = 0;
};

}  // namespace braze

#endif  // BRAZE_IR_TIMELINE_H_
