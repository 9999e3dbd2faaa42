#include "ir/timeline.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "braze/timeline.h"
#include "ir/logging.h"

namespace braze {
namespace {

struct TraceFile {
  std::mutex mu;
  std::FILE* file = nullptr;  // non-null exactly while a trace is active
  std::string path;
  double origin_us = 0;                          // NowMicros() at Start: the trace's ts 0
  std::map<std::string, int, std::less<>> rows;  // RecordOnRow's rows in this trace
  bool exit_hook_installed = false;
};

// Leaked on purpose: the exit hook and late events may run during static destruction.
TraceFile& Trace() {
  static TraceFile* const trace = new TraceFile;
  return *trace;
}

// The row of every "collective" bar, whichever thread made the call: the executor makes
// a call itself when it needs the result before the communication thread has started it
// (or when nothing could overlap it), and which thread won that race is noise, not the
// picture a reader wants. On one row the bars show when the network was busy; a gap in a
// kernel row at the same time shows that executor waiting on it (or making the call).
// Threads take ids from 1 up, so this one stays apart from theirs.
constexpr int kCommunicationRow = 1000000;
// Named rows (RecordOnRow) from here up, in order of first use.
constexpr int kFirstNamedRow = 1000001;

int ThisThreadId() {
  static std::atomic<int> next{1};
  thread_local const int id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

// Length of the valid UTF-8 sequence at s[i], or 0 if the bytes there are not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  unsigned min_code;
  unsigned code;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, min_code = 0x80, code = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, min_code = 0x800, code = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, min_code = 0x10000, code = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid JSON text.
  if (code < min_code || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
  return n;
}

// A JSON string literal. Node names are user text: quotes, backslashes and control
// characters are escaped, and bytes that are not UTF-8 become U+FFFD, so the file stays
// JSON that strict parsers (Perfetto's) accept.
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
    } else if (size_t n = Utf8SequenceLength(s, i); n > 0) {
      out->append(s.data() + i, n);
      i += n;
      continue;
    } else {
      out->append("\\ufffd");
    }
    ++i;
  }
  out->push_back('"');
}

void FinishAtExit() {
  if (Timeline::active()) {
    absl::Status s = Timeline::Stop();
    // Nobody is left to return the Status to.
    if (!s.ok()) LogError(absl::StrCat("timeline: ", s.message()));
  }
}

}  // namespace

std::atomic<bool> Timeline::active_{false};

double Timeline::NowMicros() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

absl::Status Timeline::Start(const std::string& path) {
  TraceFile& trace = Trace();
  std::lock_guard<std::mutex> lock(trace.mu);
  if (trace.file != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start a timeline to '", path, "': one is already writing to '", trace.path, "'"));
  }
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open timeline file '", path, "': ", std::strerror(errno)));
  }
  trace.file = file;
  trace.path = path;
  trace.origin_us = NowMicros();
  trace.rows.clear();
  // The process-name metadata event also means every real event follows a comma.
  std::string header = R"({"displayTimeUnit":"ms","traceEvents":[)"
                       "\n"
                       R"({"name":"process_name","ph":"M","pid":)";
  absl::StrAppend(&header, getpid(), R"(,"tid":0,"args":{"name":"braze"}})");
  absl::StrAppend(&header, ",\n", R"({"name":"thread_name","ph":"M","pid":)", getpid(),
                  R"(,"tid":)", kCommunicationRow, R"(,"args":{"name":"communication"}})");
  std::fputs(header.c_str(), file);
  if (!trace.exit_hook_installed) {
    trace.exit_hook_installed = true;
    std::atexit(FinishAtExit);
  }
  active_.store(true, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Timeline::Stop() {
  TraceFile& trace = Trace();
  std::lock_guard<std::mutex> lock(trace.mu);
  if (trace.file == nullptr) return absl::FailedPreconditionError("no timeline is active");
  active_.store(false, std::memory_order_relaxed);
  std::fputs("\n]}\n", trace.file);
  const bool write_failed = std::ferror(trace.file) != 0;
  const bool close_failed = std::fclose(trace.file) != 0;
  trace.file = nullptr;
  if (write_failed || close_failed) {
    return absl::InternalError(
        absl::StrCat("writing timeline file '", trace.path, "' failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Writes one complete event on row `tid`, named by `row` when not empty (its metadata
// line first, the first time in this trace).
void WriteEvent(std::string_view row, int tid, std::string_view name, std::string_view category,
                double start_us, double duration_us, std::string_view args_json) {
  // Formatted outside the lock: only the write is serialized.
  std::string line = ",\n{\"name\":";
  AppendJsonString(&line, name);
  line.append(",\"cat\":");
  AppendJsonString(&line, category);
  TraceFile& trace = Trace();
  std::lock_guard<std::mutex> lock(trace.mu);
  if (trace.file == nullptr) return;  // stopped since the caller's check
  // An event that ended before this trace began is none of it (nor is its row).
  if (start_us + (duration_us < 0 ? 0.0 : duration_us) <= trace.origin_us &&
      start_us < trace.origin_us) {
    return;
  }
  if (!row.empty()) {
    auto it = trace.rows.find(row);
    if (it == trace.rows.end()) {
      tid = kFirstNamedRow + static_cast<int>(trace.rows.size());
      trace.rows.emplace(std::string(row), tid);
      std::string meta =
          absl::StrCat(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", getpid(),
                       ",\"tid\":", tid, ",\"args\":{\"name\":");
      AppendJsonString(&meta, row);
      meta.append("}}");
      std::fwrite(meta.data(), 1, meta.size(), trace.file);
    } else {
      tid = it->second;
    }
  }
  // An event that began before this trace did (under an earlier one, stopped since, or
  // just before Start) shows the part inside the trace: it starts at 0, not at a negative
  // time, which trace viewers place before the process existed.
  double ts = start_us - trace.origin_us;
  double dur = duration_us < 0 ? 0.0 : duration_us;
  if (ts < 0) {
    dur = dur + ts < 0 ? 0.0 : dur + ts;
    ts = 0;
  }
  char numbers[160];
  std::snprintf(numbers, sizeof(numbers),
                ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d", ts, dur,
                static_cast<int>(getpid()), tid);
  line.append(numbers);
  if (!args_json.empty()) absl::StrAppend(&line, ",\"args\":{", std::string(args_json), "}");
  line.push_back('}');
  std::fwrite(line.data(), 1, line.size(), trace.file);
}

}  // namespace

void Timeline::Record(std::string_view name, std::string_view category, double start_us,
                      double duration_us, std::string_view args_json) {
  if (!active()) return;
  const int tid = category == "collective" ? kCommunicationRow : ThisThreadId();
  WriteEvent({}, tid, name, category, start_us, duration_us, args_json);
}

void Timeline::RecordOnRow(std::string_view row, std::string_view name, std::string_view category,
                           double start_us, double duration_us, std::string_view args_json) {
  if (!active()) return;
  WriteEvent(row.empty() ? std::string_view("unnamed") : row, 0, name, category, start_us,
             duration_us, args_json);
}

absl::Status StartTimeline(const std::string& path) { return Timeline::Start(path); }

absl::Status StopTimeline() { return Timeline::Stop(); }

}  // namespace braze
