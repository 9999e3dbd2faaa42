// The process's world: see world.h.
#include "ir/world.h"

#include <atomic>

namespace braze {
namespace {
std::atomic<int> g_rank{0};
std::atomic<int> g_size{1};
}  // namespace

World CurrentWorld() { return World{g_rank.load(), g_size.load()}; }

void SetCurrentWorld(World world) {
  g_rank.store(world.rank);
  g_size.store(world.size);
}

}  // namespace braze
