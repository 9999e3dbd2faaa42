// Stored schedules at run time (docs/SCHEDULES.md): a session finds the entry for its
// cluster's signature in its schedule_dirs and compiles with it (the compile log says
// so); a stale one is refused with one warning and the default schedule runs. Every
// result is checked against the reference kernels.
#include "schedule/stored_schedule.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/logging.h"
#include "braze/ops.h"
#include "braze/session.h"
#include "common/temp_files.h"
#include "compile/cluster_key.h"
#include "lower/cluster_text.h"
#include "runtime/flags.h"

namespace braze {
namespace {

using testing_util::FilesIn;
using testing_util::MakeTempDir;
using testing_util::ReadFile;
using testing_util::WriteFile;

using ::testing::HasSubstr;
using ::testing::Not;

// One cluster: a softmax over rows, then a scale. `scale` keeps each test's kernels
// its own (the compile cache is process-wide and keyed by structure).
struct Model {
  Graph g;
  Tensor x;
  Tensor y;
  Model(double scale, Shape shape) {
    x = Placeholder(g, DType::kF32, shape, "x");
    JitScope scope(g);
    y = Softmax(x * scale + 0.25) * 3.0;
  }
  Feeds Feed(Shape shape) const {
    return {{x, HostTensor::RandomUniform(DType::kF32, shape, 99, -2, 2)}};
  }
};

// Captures log lines (info and warnings) while alive, with --log_compiles on.
struct Logs {
  std::vector<std::string> info, warnings;
  Logs() {
    SetLogSink([this](LogSeverity severity, int, std::string_view text) {
      (severity == LogSeverity::kWarning ? warnings : info).emplace_back(text);
    });
    BrazeFlags flags;
    flags.log_compiles = true;
    SetBrazeFlagsForTesting(flags);
  }
  ~Logs() {
    SetBrazeFlagsForTesting(BrazeFlags{});
    SetLogSink(nullptr);
  }
  std::string CompileLine() const {
    for (const std::string& line : info) {
      if (line.rfind("compile:", 0) == 0) return line;
    }
    return "";
  }
};

// The stored-schedule key of the model's one cluster, as braze-tune computes it: from
// the cluster a dump wrote (BRAZE_FLAGS --dump_to), rebuilt.
std::string KeyHashOfTheCluster(Model& m, const Feeds& feeds) {
  const std::string dump = MakeTempDir("braze_stored_");
  BrazeFlags flags;
  flags.dump_to = dump;
  flags.stored_schedules = false;
  SetBrazeFlagsForTesting(flags);
  SessionOptions o;
  o.disk_cache = false;
  {
    Session session(m.g, o);
    auto out = session.Run(feeds, {m.y});
    EXPECT_TRUE(out.ok()) << out.status();
  }
  SetBrazeFlagsForTesting(BrazeFlags{});
  const std::vector<std::string> clusters = FilesIn(dump, ".cluster");
  EXPECT_EQ(clusters.size(), 1u);
  if (clusters.empty()) return "";
  const std::string file = dump + "/" + clusters[0];
  absl::StatusOr<RebuiltCluster> rebuilt = ClusterFromText(ReadFile(file), file);
  EXPECT_TRUE(rebuilt.ok()) << rebuilt.status();
  if (!rebuilt.ok()) return "";
  return ScheduleKeyHash(ClusterKey(rebuilt->spec, CompileOptions()));
}

StoredSchedule Entry(const std::string& key_hash) {
  StoredSchedule e;
  e.key_hash = key_hash;
  e.target = *JitTargetString();
  e.params.tasks_per_thread = 7;
  e.params.vector_factor = 2;
  e.params.row_lanes = 1;
  return e;
}

void ExpectMatchesReference(Model& m, const Feeds& feeds, const HostTensor& got) {
  SessionOptions ref;
  ref.reference_only = true;
  Session reference(m.g, ref);
  auto want = reference.Run(feeds, {m.y});
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double w = (*want)[0].GetDouble(i);
    ASSERT_NEAR(got.GetDouble(i), w, 1e-5 * (1 + std::abs(w))) << "element " << i;
  }
}

TEST(StoredScheduleRuntimeTest, AStoredScheduleIsAppliedAndSaysSo) {
  const Shape shape = {48, 96};
  Model m(1.25, shape);
  const Feeds feeds = m.Feed(shape);
  const std::string key = KeyHashOfTheCluster(m, feeds);
  ASSERT_FALSE(key.empty());
  const std::string dir = MakeTempDir("braze_stored_");
  const std::string path = StoredSchedulePath(dir, key);
  WriteFile(path, FormatStoredSchedule(Entry(key)));

  SessionOptions o;
  o.disk_cache = false;
  o.schedule_dirs = {dir};
  Logs logs;
  Session session(m.g, o);
  auto out = session.Run(feeds, {m.y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(logs.CompileLine(),
              HasSubstr("stored schedule " + path +
                        ": SafeDefault tasks_per_thread=7 vector_factor=2 row_lanes=1"));
  EXPECT_TRUE(logs.warnings.empty()) << logs.warnings[0];
  ExpectMatchesReference(m, feeds, (*out)[0]);

  // Turned off, the same session options get the default schedule.
  Logs off;
  SessionOptions without = o;
  without.stored_schedules = false;
  Session plain(m.g, without);
  auto again = plain.Run(feeds, {m.y});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(off.CompileLine(), Not(HasSubstr("stored schedule")));
  ExpectMatchesReference(m, feeds, (*again)[0]);
}

TEST(StoredScheduleRuntimeTest, AStaleScheduleIsRefusedWithOneWarning) {
  const Shape shape = {40, 72};
  Model m(1.5, shape);
  const Feeds feeds = m.Feed(shape);
  const std::string key = KeyHashOfTheCluster(m, feeds);
  ASSERT_FALSE(key.empty());
  const std::string dir = MakeTempDir("braze_stored_");
  const std::string path = StoredSchedulePath(dir, key);
  StoredSchedule stale = Entry(key);
  stale.templates_version = kScheduleTemplatesVersion + 1;
  WriteFile(path, FormatStoredSchedule(stale));

  SessionOptions o;
  o.disk_cache = false;
  o.schedule_dirs = {dir};
  Logs logs;
  for (int run = 0; run < 2; ++run) {
    Session session(m.g, o);
    auto out = session.Run(feeds, {m.y});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectMatchesReference(m, feeds, (*out)[0]);
  }
  ASSERT_EQ(logs.warnings.size(), 1u) << "one warning per file and process";
  EXPECT_THAT(logs.warnings[0], HasSubstr(path));
  EXPECT_THAT(logs.warnings[0], HasSubstr("stale"));
  EXPECT_THAT(logs.warnings[0], HasSubstr("using the default schedule"));
  EXPECT_THAT(logs.CompileLine(), Not(HasSubstr("stored schedule")));
}

TEST(StoredScheduleRuntimeTest, AnAutoschedulerEntryIsRefusedForASymbolicCluster) {
  Model m(1.75, {-1, 64});
  const Shape shape = {33, 64};
  const Feeds feeds = m.Feed(shape);
  const std::string key = KeyHashOfTheCluster(m, feeds);
  ASSERT_FALSE(key.empty());
  const std::string dir = MakeTempDir("braze_stored_");
  const std::string path = StoredSchedulePath(dir, key);
  StoredSchedule adams = Entry(key);
  adams.params = ScheduleParams();
  adams.params.scheduler = Scheduler::kAdams2019;
  WriteFile(path, FormatStoredSchedule(adams));

  SessionOptions o;
  o.disk_cache = false;
  o.schedule_dirs = {dir};
  Logs logs;
  Session session(m.g, o);
  auto out = session.Run(feeds, {m.y});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectMatchesReference(m, feeds, (*out)[0]);
  EXPECT_THAT(logs.CompileLine(), HasSubstr("symbolic in input 0 dim 0"));
  EXPECT_THAT(logs.CompileLine(), HasSubstr("refused (it names Adams2019"));
  ASSERT_EQ(logs.warnings.size(), 1u);
  EXPECT_THAT(logs.warnings[0], HasSubstr(path));
}

}  // namespace
}  // namespace braze
