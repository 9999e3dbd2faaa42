#include "passes/graph_cycles.h"

#include <algorithm>
#include <utility>

namespace braze {

GraphCycles::GraphCycles(int num_nodes)
    : out_(num_nodes), in_(num_nodes), rank_(num_nodes), visited_(num_nodes, false) {
  for (int i = 0; i < num_nodes; ++i) rank_[i] = i;
}

bool GraphCycles::InsertEdge(int x, int y) {
  if (x == y) return false;
  if (!out_[x].insert(y).second) return true;
  in_[y].insert(x);
  const int rx = rank_[x], ry = rank_[y];
  if (rx < ry) return true;  // already in order
  // y now must come after x: if y reaches x this closes a cycle; otherwise move the
  // affected region (what y reaches below rx, what reaches x above ry) into order.
  if (!ForwardDfs(y, rx)) {
    out_[x].erase(y);
    in_[y].erase(x);
    ClearVisited(delta_f_);
    return false;
  }
  BackwardDfs(x, ry);
  Reorder();
  return true;
}

void GraphCycles::RemoveEdge(int x, int y) {
  out_[x].erase(y);
  in_[y].erase(x);
}

bool GraphCycles::IsReachable(int x, int y) {
  if (x == y || rank_[x] > rank_[y]) return false;
  const bool reachable = !ForwardDfs(x, rank_[y]);
  ClearVisited(delta_f_);
  return reachable;
}

std::optional<int> GraphCycles::ContractEdge(int a, int b) {
  RemoveEdge(a, b);
  if (IsReachable(a, b)) {
    InsertEdge(a, b);
    return std::nullopt;
  }
  // Keep the node with more edges, to move fewer.
  if (in_[b].size() + out_[b].size() > in_[a].size() + out_[a].size()) std::swap(a, b);
  std::set<int> out = std::move(out_[b]);
  std::set<int> in = std::move(in_[b]);
  out_[b].clear();
  in_[b].clear();
  for (int y : out) in_[y].erase(b);
  for (int y : in) out_[y].erase(b);
  // Cannot fail: with no other path a ~> b the contracted graph is acyclic, and so is
  // every intermediate state.
  for (int y : out) InsertEdge(a, y);
  for (int y : in) InsertEdge(y, a);
  return a;
}

int GraphCycles::PathWitness(int a, int b) {
  for (int s : out_[a]) {
    if (s != b && IsReachable(s, b)) return s;
  }
  return -1;
}

bool GraphCycles::CheckInvariants() const {
  std::vector<bool> seen(rank_.size(), false);
  for (int r : rank_) {
    if (r < 0 || r >= static_cast<int>(rank_.size()) || seen[r]) return false;
    seen[r] = true;
  }
  for (size_t x = 0; x < out_.size(); ++x) {
    for (int y : out_[x]) {
      if (rank_[x] >= rank_[y] || in_[y].count(static_cast<int>(x)) == 0) return false;
    }
    for (int y : in_[x]) {
      if (out_[y].count(static_cast<int>(x)) == 0) return false;
    }
  }
  return true;
}

bool GraphCycles::ForwardDfs(int n, int upper_bound) {
  delta_f_.clear();
  stack_.assign(1, n);
  while (!stack_.empty()) {
    n = stack_.back();
    stack_.pop_back();
    if (visited_[n]) continue;
    visited_[n] = true;
    delta_f_.push_back(n);
    for (int w : out_[n]) {
      if (rank_[w] == upper_bound) return false;
      if (!visited_[w] && rank_[w] < upper_bound) stack_.push_back(w);
    }
  }
  return true;
}

void GraphCycles::BackwardDfs(int n, int lower_bound) {
  delta_b_.clear();
  stack_.assign(1, n);
  while (!stack_.empty()) {
    n = stack_.back();
    stack_.pop_back();
    if (visited_[n]) continue;
    visited_[n] = true;
    delta_b_.push_back(n);
    for (int w : in_[n]) {
      if (!visited_[w] && rank_[w] > lower_bound) stack_.push_back(w);
    }
  }
}

void GraphCycles::Reorder() {
  auto by_rank = [&](int u, int v) { return rank_[u] < rank_[v]; };
  std::sort(delta_b_.begin(), delta_b_.end(), by_rank);
  std::sort(delta_f_.begin(), delta_f_.end(), by_rank);
  std::vector<int> nodes = delta_b_;
  nodes.insert(nodes.end(), delta_f_.begin(), delta_f_.end());
  std::vector<int> ranks;
  ranks.reserve(nodes.size());
  for (int v : nodes) ranks.push_back(rank_[v]);
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < nodes.size(); ++i) {
    rank_[nodes[i]] = ranks[i];
    visited_[nodes[i]] = false;
  }
}

void GraphCycles::ClearVisited(const std::vector<int>& nodes) {
  for (int v : nodes) visited_[v] = false;
}

}  // namespace braze
