// The autoscheduler plugins and the disk cache's Halide runtime in one process: each
// plugin keeps using one runtime (schedule/autoschedule.cc, EnsurePluginLoaded;
// docs/DISK_CACHE.md, "One Halide runtime per caller").
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "compile/aot_kernel.h"
#include "gtest/gtest.h"
#include "lower/lower_test_util.h"
#include "schedule/scheduler.h"

namespace braze {
namespace lowertest {
namespace {

using Task = int (*)(void*, int, uint8_t*);
using ParFor = int (*)(void*, Task, int, int, uint8_t*);
int Nothing(void*, int, uint8_t*) { return 0; }

// Adams2019's plugin loaded (by a compile under another scheduler, so its cost model
// never ran), then the disk cache's runtime (RTLD_GLOBAL), then the plugin's own
// parallel loop, then the cached runtime's halide_set_num_threads: with the plugin bound
// lazily, its loop's first calls bound to the cache's runtime, left that runtime's
// work-queue mutex locked, and the last call slept forever (a watchdog ends the child).
TEST(PluginRuntime, APluginLoadedBeforeTheCacheRuntimeKeepsItsOwn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string plugin = AutoschedulerPluginPath(Scheduler::kAdams2019);
  if (access(plugin.c_str(), R_OK) != 0) GTEST_SKIP() << "no Adams2019 plugin at " << plugin;
  char dir[] = "/tmp/braze_plugin_runtime_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string so = absl::StrCat(dir, "/runtime.so");
  EXPECT_EXIT(
      {
        alarm(60);
        Case c;
        c.outputs = {Exp(c.Input(DType::kF32, {33, 17}, 1))};
        if (!CompileCluster(SpecOf(c), {Scheduler::kMullapudi2016, 0}).ok()) std::_Exit(2);
        if (!compile::BuildRuntime("host", so).ok()) std::_Exit(3);
        if (!compile::LoadRuntime(so, "host").ok()) std::_Exit(4);
        void* p = dlopen(plugin.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        void* r = dlopen(so.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (p == nullptr || r == nullptr) std::_Exit(5);
        auto par_for = reinterpret_cast<ParFor>(dlsym(p, "halide_default_do_par_for"));
        auto set_threads = reinterpret_cast<int (*)(int)>(dlsym(r, "halide_set_num_threads"));
        if (par_for == nullptr || set_threads == nullptr) std::_Exit(6);
        for (int i = 0; i < 200; ++i) par_for(nullptr, Nothing, 0, 64, nullptr);
        set_threads(3);
        set_threads(2);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  std::remove(so.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace lowertest
}  // namespace braze
