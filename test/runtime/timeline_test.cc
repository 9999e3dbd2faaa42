// The Chrome trace timeline: the file is strict JSON (parsed here by a small validating
// parser, since the project takes no JSON dependency), with one event per launch: a fused
// softmax is one cluster bar, the unfused one a bar per op.
#include "ir/timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "braze/timeline.h"

namespace braze {
namespace {

using ::testing::HasSubstr;

// ---- A strict JSON parser (RFC 8259), enough to check what trace viewers will read. ----
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  const Json* Get(const std::string& key) const {
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : s_(std::move(text)) {}

  // The document, or nullopt with error() saying where it broke.
  std::optional<Json> Parse() {
    Json value;
    if (!Value(&value, 0)) return std::nullopt;
    SkipSpace();
    if (pos_ != s_.size()) return Fail("trailing characters");
    return value;
  }
  const std::string& error() const { return error_; }

 private:
  std::nullopt_t Fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(pos_);
    return std::nullopt;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return Fail("nesting too deep"), false;
    SkipSpace();
    if (pos_ >= s_.size()) return Fail("unexpected end"), false;
    const char c = s_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      out->type = Json::Type::kString;
      return String(&out->string);
    }
    if (Literal("true")) {
      out->type = Json::Type::kBool;
      out->boolean = true;
      return true;
    }
    if (Literal("false")) {
      out->type = Json::Type::kBool;
      return true;
    }
    if (Literal("null")) return true;
    return Number(out);
  }
  bool Number(Json* out) {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (!digits()) {
      return Fail("bad value"), false;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) return Fail("bad fraction"), false;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return Fail("bad exponent"), false;
    }
    out->type = Json::Type::kNumber;
    out->number = std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    return true;
  }
  static void AppendUtf8(std::string* out, unsigned code) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }
  bool Hex4(unsigned* code) {
    if (pos_ + 4 > s_.size()) return false;
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      *code <<= 4;
      if (h >= '0' && h <= '9') {
        *code |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        *code |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        *code |= h - 'A' + 10;
      } else {
        return false;
      }
    }
    return true;
  }
  bool String(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("raw control character in string"), false;
      if (c >= 0x80) {
        // Multi-byte UTF-8 must be well formed; a lone continuation or 0xFF is not.
        int extra = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c <= 0xDF ? 1 : -1;
        if (c >= 0xF5 || extra < 0) return Fail("invalid UTF-8"), false;
        out->push_back(static_cast<char>(c));
        for (int k = 0; k < extra; ++k) {
          if (pos_ >= s_.size() || (static_cast<unsigned char>(s_[pos_]) & 0xC0) != 0x80) {
            return Fail("invalid UTF-8"), false;
          }
          out->push_back(s_[pos_++]);
        }
        continue;
      }
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          unsigned code;
          if (!Hex4(&code)) return Fail("bad \\u escape"), false;
          if (code >= 0xD800 && code <= 0xDBFF) {
            unsigned low;
            if (!Literal("\\u") || !Hex4(&low) || low < 0xDC00 || low > 0xDFFF) {
              return Fail("unpaired surrogate"), false;
            }
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code <= 0xDFFF) {
            return Fail("unpaired surrogate"), false;
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          return Fail("bad escape"), false;
      }
    }
    return Fail("unterminated string"), false;
  }
  bool Array(Json* out, int depth) {
    out->type = Json::Type::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    while (true) {
      Json element;
      if (!Value(&element, depth + 1)) return false;
      out->array.push_back(std::move(element));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return Fail("expected , or ]"), false;
    }
  }
  bool Object(Json* out, int depth) {
    out->type = Json::Type::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    while (true) {
      SkipSpace();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"' || !String(&key)) return Fail("expected key"), false;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_++] != ':') return Fail("expected :"), false;
      Json value;
      if (!Value(&value, depth + 1)) return false;
      out->object.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return Fail("expected , or }"), false;
    }
  }

  const std::string s_;
  size_t pos_ = 0;
  std::string error_;
};

TEST(TimelineJsonParser, RejectsWhatViewersReject) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[\"\x01\"]", "[\"\\x\"]",
                          "[01]", "[1.]", "{}x", "[\"\\ud800\"]", "[\"\xff\"]", "[\"\xc3\"]"}) {
    JsonParser parser(bad);
    EXPECT_FALSE(parser.Parse().has_value()) << bad;
  }
  JsonParser good(R"( {"a":[1,-2.5e3,true,false,null,"\u00e9\ud83d\ude00\n"],"b":{}} )");
  auto doc = good.Parse();
  ASSERT_TRUE(doc.has_value()) << good.error();
  EXPECT_EQ(doc->Get("a")->array[5].string, "\xc3\xa9\xf0\x9f\x98\x80\n");
}

// ---- Reading traces. ----
struct Event {
  std::string name, cat;
  double ts = 0, dur = 0;
  const Json* args = nullptr;
};

struct Trace {
  Json doc;
  std::vector<Event> events;  // the "X" events
  int Count(const std::string& cat) const {
    int n = 0;
    for (const Event& e : events) n += e.cat == cat;
    return n;
  }
  int Launches() const { return Count("cluster") + Count("op") + Count("reference"); }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses the trace at `path`, checking the shape every event must have.
void LoadTrace(const std::string& path, Trace* trace) {
  const std::string text = ReadFile(path);
  JsonParser parser(text);
  std::optional<Json> doc = parser.Parse();
  ASSERT_TRUE(doc.has_value()) << path << ": " << parser.error() << "\n" << text;
  trace->doc = *std::move(doc);
  ASSERT_EQ(trace->doc.type, Json::Type::kObject);
  const Json* events = trace->doc.Get("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->type, Json::Type::kArray);
  for (const Json& e : events->array) {
    ASSERT_EQ(e.type, Json::Type::kObject);
    const Json* ph = e.Get("ph");
    ASSERT_TRUE(ph && ph->type == Json::Type::kString);
    for (const char* key : {"pid", "tid"}) {
      ASSERT_TRUE(e.Get(key) && e.Get(key)->type == Json::Type::kNumber) << key;
    }
    if (ph->string != "X") continue;
    for (const char* key : {"name", "cat"}) {
      ASSERT_TRUE(e.Get(key) && e.Get(key)->type == Json::Type::kString) << key;
    }
    for (const char* key : {"ts", "dur"}) {
      ASSERT_TRUE(e.Get(key) && e.Get(key)->type == Json::Type::kNumber) << key;
      EXPECT_GE(e.Get(key)->number, 0) << key;
    }
    // One process: every event on one pid (a child process's trace has the child's).
    EXPECT_EQ(e.Get("pid")->number, events->array.front().Get("pid")->number);
    trace->events.push_back({e.Get("name")->string, e.Get("cat")->string, e.Get("ts")->number,
                             e.Get("dur")->number, e.Get("args")});
  }
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "braze_timeline_" + std::to_string(getpid()) + "_" + name;
}

class TimelineTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (Timeline::active()) (void)Timeline::Stop();
  }
};

// Softmax of a [7,33] input: five primitive ops (Max, Sub, Exp, Sum, Div) plus constants.
struct SoftmaxGraph {
  explicit SoftmaxGraph(bool jit) {
    x = Placeholder(g, DType::kF32, {-1, 33}, "x");
    if (jit) {
      JitScope scope(g);
      y = Softmax(x);
    } else {
      y = Softmax(x);
    }
  }
  Feeds feeds() const { return {{x, HostTensor::RandomUniform(DType::kF32, {7, 33}, 3)}}; }
  Graph g;
  Tensor x, y;
};

// Copies between memory spaces are events of their own ("copy", with their bytes): on
// jit:cpu (a memory space of its own) the feed goes on and the fetch comes off.
TEST_F(TimelineTest, CopiesBetweenMemorySpacesAreEvents) {
  SoftmaxGraph model(/*jit=*/true);
  SessionOptions options;
  options.device = "jit:cpu";
  Session session(model.g, options);
  const std::string path = TempPath("copies.json");
  ASSERT_TRUE(Timeline::Start(path).ok());
  ASSERT_TRUE(session.Run(model.feeds(), {model.y}).ok());
  ASSERT_TRUE(Timeline::Stop().ok());
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  const SessionStats s = session.stats();
  EXPECT_EQ(t.Count("copy"), s.host_to_device_copies + s.device_to_host_copies);
  bool on = false, off = false;
  for (const Event& e : t.events) {
    if (e.cat != "copy") continue;
    on |= e.name == "copy host -> jit:cpu";
    off |= e.name == "copy jit:cpu -> host";
    ASSERT_NE(e.args, nullptr);
    ASSERT_NE(e.args->Get("bytes"), nullptr);
    EXPECT_EQ(e.args->Get("bytes")->number, 7 * 33 * 4);
  }
  EXPECT_TRUE(on);
  EXPECT_TRUE(off);
}

TEST_F(TimelineTest, FusedSoftmaxIsOneBarAndUnfusedIsOnePerOp) {
  SoftmaxGraph fused_graph(/*jit=*/true), unfused_graph(/*jit=*/false);
  Session fused(fused_graph.g), unfused(unfused_graph.g);
  const std::string fused_path = TempPath("fused.json"), unfused_path = TempPath("unfused.json");

  ASSERT_TRUE(Timeline::Start(fused_path).ok());
  ASSERT_TRUE(fused.Run(fused_graph.feeds(), {fused_graph.y}).ok());
  ASSERT_TRUE(Timeline::Stop().ok());
  ASSERT_TRUE(StartTimeline(unfused_path).ok());  // the public API is the same timeline
  ASSERT_TRUE(unfused.Run(unfused_graph.feeds(), {unfused_graph.y}).ok());
  ASSERT_TRUE(StopTimeline().ok());

  Trace f, u;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(fused_path, &f));
  ASSERT_NO_FATAL_FAILURE(LoadTrace(unfused_path, &u));

  EXPECT_EQ(f.doc.Get("traceEvents")->array.front().Get("pid")->number, getpid());
  // Fused: one launch, named after the cluster.
  ASSERT_EQ(f.Count("cluster"), 1);
  EXPECT_EQ(f.Count("op"), 0);
  EXPECT_EQ(f.Count("reference"), 0);
  const std::optional<std::string> cluster = fused.ClusterOf(fused_graph.y);
  ASSERT_TRUE(cluster.has_value());
  const Event* launch = nullptr;
  const Event* compile = nullptr;
  for (const Event& e : f.events) {
    if (e.cat == "cluster") launch = &e;
    if (e.cat == "compile") compile = &e;
  }
  EXPECT_EQ(launch->name, *cluster);
  // Its compile is a separate event, before the launch, saying whether the cache hit.
  ASSERT_NE(compile, nullptr);
  EXPECT_EQ(f.Count("compile"), 1);
  EXPECT_EQ(compile->name, *cluster);
  EXPECT_LE(compile->ts + compile->dur, launch->ts);
  ASSERT_NE(compile->args, nullptr);
  ASSERT_NE(compile->args->Get("cache_hit"), nullptr);
  EXPECT_EQ(compile->args->Get("cache_hit")->type, Json::Type::kBool);

  // Unfused: one compiled kernel per op, each bar named after its node.
  EXPECT_EQ(u.Count("cluster"), 0);
  EXPECT_GE(u.Count("op"), 5);
  EXPECT_EQ(u.Count("compile"), u.Count("op"));
  std::set<std::string> node_names;
  for (int id = 0; id < unfused_graph.g.num_nodes(); ++id) {
    node_names.insert(unfused_graph.g.node(id).name());
  }
  for (const Event& e : u.events) EXPECT_EQ(node_names.count(e.name), 1u) << e.name;

  EXPECT_LT(f.Launches(), u.Launches());
  // The bars are the launches the sessions counted.
  const SessionStats fs = fused.stats(), us = unfused.stats();
  EXPECT_EQ(f.Launches(), fs.cluster_launches + fs.single_op_launches + fs.reference_launches);
  EXPECT_EQ(u.Launches(), us.cluster_launches + us.single_op_launches + us.reference_launches);
}

TEST_F(TimelineTest, ReferenceKernelsAreTheirOwnCategory) {
  SoftmaxGraph graph(/*jit=*/false);
  SessionOptions options;
  options.reference_only = true;
  Session session(graph.g, options);
  const std::string path = TempPath("reference.json");
  ASSERT_TRUE(Timeline::Start(path).ok());
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.y}).ok());
  ASSERT_TRUE(Timeline::Stop().ok());
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  EXPECT_GE(t.Count("reference"), 5);
  EXPECT_EQ(t.Count("reference"), session.stats().reference_launches);
  EXPECT_EQ(t.Count("op") + t.Count("cluster") + t.Count("compile"), 0);
}

TEST_F(TimelineTest, NothingIsRecordedWhileInactive) {
  const std::string path = TempPath("inactive.json");
  Timeline::Record("before", "op", Timeline::NowMicros(), 1);
  ASSERT_TRUE(Timeline::Start(path).ok());
  ASSERT_TRUE(Timeline::Stop().ok());
  const std::string stopped = ReadFile(path);
  Timeline::Record("after", "op", Timeline::NowMicros(), 1);
  SoftmaxGraph graph(/*jit=*/true);
  Session session(graph.g);
  ASSERT_TRUE(session.Run(graph.feeds(), {graph.y}).ok());
  EXPECT_EQ(ReadFile(path), stopped);  // nothing appended after Stop
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  EXPECT_TRUE(t.events.empty());
}

TEST_F(TimelineTest, NamesAreEscapedIntoValidJson) {
  const std::map<std::string, std::string> names = {
      {"quote\"back\\slash", "quote\"back\\slash"},
      {"line\nbreak\ttab\x01\x7f", "line\nbreak\ttab\x01\x7f"},
      {"caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80"},  // valid UTF-8 kept
      {"bad\xff", "bad\xef\xbf\xbd"},                                    // U+FFFD
      {"cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd"},
      {"overlong\xc0\xaf", "overlong\xef\xbf\xbd\xef\xbf\xbd"},
      {"surrogate\xed\xa0\x80", "surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
  };
  const std::string path = TempPath("escape.json");
  ASSERT_TRUE(Timeline::Start(path).ok());
  for (const auto& [raw, decoded] : names) {
    Timeline::Record(raw, "op", Timeline::NowMicros(), 2.5, "\"k\":\"v\"");
  }
  ASSERT_TRUE(Timeline::Stop().ok());
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  ASSERT_EQ(t.events.size(), names.size());
  std::set<std::string> got;
  for (const Event& e : t.events) {
    got.insert(e.name);
    EXPECT_DOUBLE_EQ(e.dur, 2.5);
    ASSERT_NE(e.args, nullptr);
    EXPECT_EQ(e.args->Get("k")->string, "v");
  }
  for (const auto& [raw, decoded] : names) EXPECT_EQ(got.count(decoded), 1u) << decoded;
}

// A device's row (RecordOnRow, device/device_timeline.h): its bars share one tid, apart
// from every thread's, named once per trace by a thread_name metadata event.
TEST_F(TimelineTest, NamedRowsAreNamedOncePerTraceAndHoldTheirBars) {
  for (int trace = 0; trace < 2; ++trace) {  // a second trace names the row again
    const std::string path = TempPath("rows.json");
    ASSERT_TRUE(Timeline::Start(path).ok());
    Timeline::Record("host bar", "cluster", Timeline::NowMicros(), 1);
    for (int i = 0; i < 3; ++i) {
      Timeline::RecordOnRow("cuda:0 (device time)", "k\"" + std::to_string(i), "cluster",
                            Timeline::NowMicros(), 4.25);
    }
    Timeline::RecordOnRow("other", "x", "copy", Timeline::NowMicros(), 1);
    ASSERT_TRUE(Timeline::Stop().ok());
    Trace t;
    ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
    std::map<std::string, double> row_tid;  // thread_name metadata: row name -> tid
    std::map<double, int> bars_per_tid;
    for (const Json& e : t.doc.Get("traceEvents")->array) {
      if (e.Get("ph")->string == "M" && e.Get("name")->string == "thread_name") {
        const std::string row = e.Get("args")->Get("name")->string;
        EXPECT_EQ(row_tid.count(row), 0u) << row << " named twice";
        row_tid[row] = e.Get("tid")->number;
      } else if (e.Get("ph")->string == "X") {
        ++bars_per_tid[e.Get("tid")->number];
      }
    }
    ASSERT_EQ(row_tid.count("cuda:0 (device time)"), 1u);
    ASSERT_EQ(row_tid.count("other"), 1u);
    const double device = row_tid["cuda:0 (device time)"];
    EXPECT_NE(device, row_tid["other"]);
    EXPECT_EQ(bars_per_tid[device], 3);
    EXPECT_EQ(bars_per_tid[row_tid["other"]], 1);
    EXPECT_EQ(t.events.size(), 5u);
  }
}

// An event begun under one trace and ended under the next (a kernel launched across
// StopTimeline and StartTimeline) lands in the second with the part it spent there, from
// ts 0: not at a negative time, before the trace began. One that ended before is none of
// it.
TEST_F(TimelineTest, AnEventBegunBeforeTheTraceStartsAtItsOrigin) {
  const std::string first = TempPath("first.json"), second = TempPath("second.json");
  ASSERT_TRUE(Timeline::Start(first).ok());
  const std::string name = "straddling";
  std::optional<TimelineEvent> event;
  event.emplace(name, "cluster");
  ASSERT_TRUE(Timeline::Stop().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const double before_start = Timeline::NowMicros();
  ASSERT_TRUE(Timeline::Start(second).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  event.reset();  // recorded now
  const double after_end = Timeline::NowMicros();
  // A bar that ended before the trace began, on a row of its own: neither is written.
  Timeline::RecordOnRow("old row", "earlier", "op", before_start - 5000, 2000);
  ASSERT_TRUE(Timeline::Stop().ok());
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(second, &t));  // checks ts >= 0 and dur >= 0
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].name, "straddling");
  EXPECT_EQ(t.events[0].ts, 0);
  EXPECT_GE(t.events[0].dur, 1000);                      // the millisecond slept inside
  EXPECT_LE(t.events[0].dur, after_end - before_start);  // none of the 2 ms before
  EXPECT_THAT(ReadFile(second), ::testing::Not(HasSubstr("old row")));
  Trace f;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(first, &f));
  EXPECT_EQ(f.events.size(), 0u);
}

TEST_F(TimelineTest, ConcurrentRecordsAllLandIntact) {
  const std::string path = TempPath("threads.json");
  ASSERT_TRUE(Timeline::Start(path).ok());
  constexpr int kThreads = 8, kEvents = 500;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i] {
      const std::string name = "thread_" + std::to_string(i);
      for (int k = 0; k < kEvents; ++k) {
        TimelineEvent event(name, "op");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(Timeline::Stop().ok());
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  ASSERT_EQ(t.events.size(), static_cast<size_t>(kThreads * kEvents));
  // Each thread's events carry one tid of their own.
  std::map<std::string, std::set<double>> tids;
  const Json& events = *t.doc.Get("traceEvents");
  for (const Json& e : events.array) {
    if (e.Get("ph")->string == "X") tids[e.Get("name")->string].insert(e.Get("tid")->number);
  }
  ASSERT_EQ(tids.size(), static_cast<size_t>(kThreads));
  std::set<double> all;
  for (const auto& [name, ids] : tids) {
    EXPECT_EQ(ids.size(), 1u) << name;
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads));
}

TEST_F(TimelineTest, MisuseIsAnError) {
  EXPECT_TRUE(absl::IsFailedPrecondition(Timeline::Stop()));
  absl::Status bad = Timeline::Start("/nonexistent_braze_dir/trace.json");
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(std::string(bad.message()), HasSubstr("/nonexistent_braze_dir/trace.json"));
  EXPECT_FALSE(Timeline::active());

  const std::string path = TempPath("twice.json");
  ASSERT_TRUE(Timeline::Start(path).ok());
  absl::Status again = StartTimeline(TempPath("other.json"));
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr(path));
  ASSERT_TRUE(Timeline::Stop().ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(StopTimeline()));
}

// BRAZE_FLAGS=--timeline=FILE in a fresh process that never calls Stop: the trace is
// finished at exit.
TEST(TimelineEnv, FlagWritesATraceFinishedAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Not TempPath: this body runs again in the child, whose pid differs.
  const std::string path = ::testing::TempDir() + "braze_timeline_env_test.json";
  std::remove(path.c_str());
  const char* old = std::getenv("BRAZE_FLAGS");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("BRAZE_FLAGS", ("--timeline=" + path).c_str(), 1);
  EXPECT_EXIT(
      {
        SoftmaxGraph graph(/*jit=*/true);
        Session session(graph.g);
        absl::Status s = session.Run(graph.feeds(), {graph.y}).status();
        std::fprintf(stderr, "status: %s active: %d\n", s.ToString().c_str(), Timeline::active());
        std::exit(s.ok() && Timeline::active() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "status: OK active: 1");
  if (saved) {
    setenv("BRAZE_FLAGS", saved->c_str(), 1);
  } else {
    unsetenv("BRAZE_FLAGS");
  }
  Trace t;
  ASSERT_NO_FATAL_FAILURE(LoadTrace(path, &t));
  EXPECT_EQ(t.Count("cluster"), 1);
  EXPECT_EQ(t.Count("compile"), 1);
}

}  // namespace
}  // namespace braze
