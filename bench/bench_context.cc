#include "bench_context.h"

#include <benchmark/benchmark.h>

#include <utility>
#include <vector>

namespace braze::bench {
namespace {

std::vector<std::function<void()>>& Registry() {
  static auto* registry = new std::vector<std::function<void()>>();
  return *registry;
}

}  // namespace

void AddContext(const std::string& key, const std::string& value) {
  benchmark::AddCustomContext(key, value);
}

bool RegisterContext(std::function<void()> add) {
  Registry().push_back(std::move(add));
  return true;
}

void AddRegisteredContext() {
  for (const auto& add : Registry()) add();
}

}  // namespace braze::bench
