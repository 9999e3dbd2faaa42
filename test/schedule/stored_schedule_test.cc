// The stored-schedule file format and lookup (schedule/stored_schedule.h): what
// braze-tune writes reads back the same; a bad, stale or mismatched entry is refused
// with a reason naming its file (and line), never half-applied.
#include "schedule/stored_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "braze/logging.h"
#include "common/temp_files.h"

namespace braze {
namespace {

using testing_util::MakeTempDir;
using testing_util::WriteFile;

using ::testing::HasSubstr;
using ::testing::Not;

StoredSchedule Example() {
  StoredSchedule e;
  e.key_hash = ScheduleKeyHash("some cluster key");
  e.target = "x86-64-linux-avx-avx2-f16c-fma-jit-sse41";
  e.cluster = "cluster_3";
  e.ops = "MatMul Add Relu";
  e.inputs = "f32[1024,1024] f32[1024,1024] f32[1024]";
  e.measured = "default 13.6 ms, tuned 11.9 ms (1.14x)";
  e.params.tasks_per_thread = 8;
  e.params.min_parallel_work = 4096;
  e.params.vector_factor = 2;
  e.params.matmul_vectors = 2;
  e.params.matmul_rows = 64;
  e.params.matmul_strip = 6;
  e.params.row_lanes = 4;
  e.params.row_prefetch = 2;
  e.params.row_pipeline = false;
  e.params.row_materialize = false;
  return e;
}

TEST(StoredScheduleTest, KeyHashIsStableHex) {
  // FNV-1a 64 of "": the offset basis. Stable across builds: files are named by it.
  EXPECT_EQ(ScheduleKeyHash(""), "cbf29ce484222325");
  EXPECT_EQ(ScheduleKeyHash("a"), "af63dc4c8601ec8c");
  EXPECT_NE(ScheduleKeyHash("key1"), ScheduleKeyHash("key2"));
}

TEST(StoredScheduleTest, FormatParsesBackTheSame) {
  const StoredSchedule e = Example();
  absl::StatusOr<StoredSchedule> back = ParseStoredSchedule(FormatStoredSchedule(e), "x.schedule");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->key_hash, e.key_hash);
  EXPECT_EQ(back->target, e.target);
  EXPECT_EQ(back->templates_version, kScheduleTemplatesVersion);
  EXPECT_EQ(back->params, e.params);
  EXPECT_EQ(back->ops, e.ops);
  EXPECT_EQ(back->inputs, e.inputs);
  EXPECT_EQ(back->measured, e.measured);
  EXPECT_EQ(back->path, "x.schedule");
  EXPECT_EQ(ParamsSummary(back->params),
            "SafeDefault tasks_per_thread=8 min_parallel_work=4096 vector_factor=2 "
            "matmul_vectors=2 matmul_rows=64 matmul_strip=6 row_lanes=4 row_prefetch=2 "
            "row_pipeline=false "
            "row_materialize=false");
  EXPECT_EQ(ParamsSummary(ScheduleParams()), "SafeDefault");
}

TEST(StoredScheduleTest, AutoschedulerEntriesParse) {
  StoredSchedule e = Example();
  e.params = ScheduleParams();
  e.params.scheduler = Scheduler::kAdams2019;
  absl::StatusOr<StoredSchedule> back = ParseStoredSchedule(FormatStoredSchedule(e), "a.schedule");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params.scheduler, Scheduler::kAdams2019);
  EXPECT_EQ(ParamsSummary(back->params), "Adams2019");
}

// A GPU cluster's entry: the heuristic's plan and sizes, and a target that names the
// device's architecture; the CPU knobs are not written, and are refused if present.
TEST(StoredScheduleTest, GpuEntriesParseBackTheSame) {
  StoredSchedule e;
  e.key_hash = ScheduleKeyHash("a GPU cluster key");
  e.target = "x86-64-linux-avx-avx2-cuda-cuda_capability_86-jit device=sm_90";
  e.params.scheduler = Scheduler::kGpuSeparate;
  e.params.gpu.block_threads = 512;
  e.params.gpu.tile_x = 64;
  e.params.gpu.row_elements = 8;
  e.params.gpu.warp_row = 0;
  e.params.gpu.vector = 2;
  e.params.gpu.matmul_tile = 32;
  const std::string text = FormatStoredSchedule(e);
  EXPECT_THAT(text, HasSubstr("gpu_block_threads: 512\n"));
  EXPECT_THAT(text, Not(HasSubstr("tasks_per_thread")));
  absl::StatusOr<StoredSchedule> back = ParseStoredSchedule(text, "g.schedule");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->target, e.target);
  EXPECT_TRUE(back->params == e.params);
  EXPECT_EQ(ParamsSummary(back->params),
            "heuristic (separate) gpu_block_threads=512 gpu_tile_x=64 gpu_row_elements=8 "
            "gpu_warp_row=0 gpu_vector=2 gpu_matmul_tile=32");
  // The defaults are the heuristic's own, and differ from no knob of a default entry.
  ScheduleParams fused;
  fused.scheduler = Scheduler::kGpuFused;
  EXPECT_EQ(ParamsSummary(fused), "heuristic (fused)");
  EXPECT_FALSE(fused == back->params);

  const std::string head =
      "braze-schedule 1\nkey: 0123456789abcdef\ntarget: t device=sm_90\ntemplates: 2\n";
  auto bad = [&](const std::string& body) {
    absl::StatusOr<StoredSchedule> r = ParseStoredSchedule(head + body, "g.schedule");
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_THAT(bad("scheduler: heuristic (fused)\ngpu_block_threads: 96\n"),
              HasSubstr("gpu_block_threads must be a power of two in [32, 1024], got '96'"));
  EXPECT_THAT(bad("scheduler: heuristic (fused)\ngpu_vector: 8\n"), HasSubstr("gpu_vector"));
  EXPECT_THAT(bad("scheduler: heuristic (fused)\ntasks_per_thread: 8\n"),
              HasSubstr("'tasks_per_thread' is a CPU field, but the entry's scheduler is "
                        "heuristic (fused)"));
  EXPECT_THAT(bad("scheduler: SafeDefault\ngpu_tile_x: 8\n"),
              HasSubstr("'gpu_tile_x' is a GPU field"));
  // The serial plan is the heuristic's last resort, not a tuning choice.
  EXPECT_THAT(bad("scheduler: heuristic (serial)\n"), HasSubstr("scheduler must be"));
  EXPECT_EQ(bad("scheduler: heuristic (fused)\ngpu_warp_row: 4096\n"), "ok");
}

TEST(StoredScheduleTest, BadEntriesNameTheFileAndLine) {
  const std::string good = FormatStoredSchedule(Example());
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"tasks_per_thread: 8", "tasks_per_thread: 0", "bad.schedule:"},
      {"tasks_per_thread: 8", "tasks_per_thread: eight", "tasks_per_thread must be"},
      {"vector_factor: 2", "vector_factor: 3", "power of two"},
      {"matmul_rows: 64", "matmul_rows: 100000", "in [1, 256]"},
      {"scheduler: SafeDefault", "scheduler: Li2018", "scheduler must be"},
      {"row_pipeline: false", "row_pipeline: maybe", "row_pipeline must be"},
      {"row_prefetch: 2", "row_prefetch: 3", "in [0, 2]"},
      {"row_lanes: 4", "tile_size: 4", "unknown field 'tile_size'"},
      {"braze-schedule 1", "braze-schedule 9", "not a stored schedule"},
      {"templates: 2", "templates: one", "templates must be a number"},
      {"row_lanes: 4", "row_lanes 4", "expected 'name: value'"},
      {"row_lanes: 4", "row_lanes: 4\nrow_lanes: 2", "given twice"},
  };
  for (const Case& c : cases) {
    std::string text = good;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    absl::StatusOr<StoredSchedule> e = ParseStoredSchedule(text, "bad.schedule");
    ASSERT_FALSE(e.ok()) << c.to;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(c.message)) << c.to;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr("bad.schedule")) << c.to;
  }
  // A line number, where there is a line to blame.
  std::string text = good;
  text.replace(text.find("row_lanes: 4"), 12, "row_lanes: 5");
  EXPECT_THAT(
      std::string(ParseStoredSchedule(text, "f").status().message()),
      HasSubstr("f:" +
                std::to_string(
                    1 + std::count(text.begin(), text.begin() + text.find("row_lanes: 5"), '\n'))));
  for (const char* field : {"key: ", "target: ", "templates: ", "scheduler: "}) {
    std::string missing = good;
    const size_t at = missing.find(std::string("\n") + field);
    ASSERT_NE(at, std::string::npos) << field;
    missing.erase(at + 1, missing.find('\n', at + 1) - at);
    EXPECT_THAT(std::string(ParseStoredSchedule(missing, "m").status().message()),
                HasSubstr("no '"))
        << field;
  }
  EXPECT_FALSE(ParseStoredSchedule("", "empty").ok());
  EXPECT_FALSE(ParseStoredSchedule("\0\1\2garbage", "binary").ok());
}

// Warnings, collected: the lookup's refusals are one warning per file and process.
struct Warnings {
  std::vector<std::string> lines;
  Warnings() {
    SetLogSink([this](LogSeverity severity, int, std::string_view message) {
      if (severity == LogSeverity::kWarning) lines.emplace_back(message);
    });
  }
  ~Warnings() { SetLogSink(nullptr); }
};

TEST(StoredScheduleTest, LookupFindsTheFirstDirectoryWithTheKey) {
  const std::string a = MakeTempDir("braze_sched_test_"), b = MakeTempDir("braze_sched_test_");
  StoredSchedule e = Example();
  WriteFile(StoredSchedulePath(b, e.key_hash), FormatStoredSchedule(e));
  Warnings warnings;
  std::optional<StoredSchedule> found = FindStoredSchedule({a, b}, e.key_hash, e.target);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, StoredSchedulePath(b, e.key_hash));
  EXPECT_EQ(found->params, e.params);
  EXPECT_FALSE(FindStoredSchedule({a, b}, ScheduleKeyHash("another"), e.target).has_value());
  EXPECT_FALSE(FindStoredSchedule({}, e.key_hash, e.target).has_value());
  EXPECT_TRUE(warnings.lines.empty());
}

TEST(StoredScheduleTest, StaleInvalidOrMismatchedEntriesWarnOnceAndAreNotUsed) {
  const std::string dir = MakeTempDir("braze_sched_test_");
  struct Case {
    std::string key, text, why;
  };
  StoredSchedule stale = Example();
  stale.key_hash = ScheduleKeyHash("stale");
  stale.templates_version = kScheduleTemplatesVersion - 1;
  StoredSchedule other_target = Example();
  other_target.key_hash = ScheduleKeyHash("other target");
  other_target.target = "arm-64-linux-jit";
  StoredSchedule renamed = Example();  // its key is not its file's name
  const std::vector<Case> cases = {
      {stale.key_hash, FormatStoredSchedule(stale),
       "stale: tuned for version " + std::to_string(kScheduleTemplatesVersion - 1)},
      {other_target.key_hash, FormatStoredSchedule(other_target), "tuned for target arm-64"},
      {ScheduleKeyHash("renamed"), FormatStoredSchedule(renamed), "is not its file's name"},
      {ScheduleKeyHash("broken"), "braze-schedule 1\nkey: zz\n", "key must be 16 hex digits"},
  };
  for (const Case& c : cases) {
    const std::string path = StoredSchedulePath(dir, c.key);
    WriteFile(path, c.text);
    Warnings warnings;
    EXPECT_FALSE(FindStoredSchedule({dir}, c.key, Example().target).has_value()) << c.why;
    EXPECT_FALSE(FindStoredSchedule({dir}, c.key, Example().target).has_value()) << c.why;
    ASSERT_EQ(warnings.lines.size(), 1u) << c.why << ": one warning per file";
    EXPECT_THAT(warnings.lines[0], HasSubstr(path));
    EXPECT_THAT(warnings.lines[0], HasSubstr(c.why));
    EXPECT_THAT(warnings.lines[0], HasSubstr("using the default schedule"));
  }
}

// An entry that is there but cannot be read (here a symbolic link to itself; a file root
// may not read) warns like a bad one, and the default runs: it is not passed over as if
// the key had no entry.
TEST(StoredScheduleTest, AnUnreadableEntryWarnsAndIsNotUsed) {
  const std::string dir = MakeTempDir("braze_sched_test_");
  StoredSchedule e = Example();
  const std::string path = StoredSchedulePath(dir, e.key_hash);
  ASSERT_EQ(symlink(path.c_str(), path.c_str()), 0) << std::strerror(errno);
  Warnings warnings;
  EXPECT_FALSE(FindStoredSchedule({dir}, e.key_hash, e.target).has_value());
  ASSERT_EQ(warnings.lines.size(), 1u);
  EXPECT_THAT(warnings.lines[0], HasSubstr(path));
  EXPECT_THAT(warnings.lines[0], HasSubstr("it cannot be read: Too many levels of symbolic links"));
  EXPECT_THAT(warnings.lines[0], HasSubstr("using the default schedule"));
}

}  // namespace
}  // namespace braze
