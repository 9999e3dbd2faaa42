// GraphCycles against a brute-force model: random insertions, reachability queries and
// contractions, checking answers, edge sets and the rank invariant after every step.
#include "passes/graph_cycles.h"

#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace braze {
namespace {

// Plain adjacency sets with BFS reachability.
struct Model {
  explicit Model(int n) : out(n) {}
  bool Reaches(int x, int y, int skip_from = -1, int skip_to = -1) const {
    std::vector<bool> seen(out.size(), false);
    std::vector<int> stack = {x};
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (int w : out[v]) {
        if (v == skip_from && w == skip_to) continue;
        if (w == y) return true;
        if (!seen[w]) {
          seen[w] = true;
          stack.push_back(w);
        }
      }
    }
    return false;
  }
  std::vector<std::set<int>> out;
};

void ExpectSameEdges(const GraphCycles& gc, const Model& m) {
  for (size_t x = 0; x < m.out.size(); ++x) {
    EXPECT_EQ(gc.successors(static_cast<int>(x)), m.out[x]) << "node " << x;
  }
}

TEST(GraphCyclesTest, InsertAndReachabilityMatchBruteForce) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    const int n = 2 + static_cast<int>(rng() % 30);
    GraphCycles gc(n);
    Model m(n);
    for (int step = 0; step < 4 * n; ++step) {
      const int x = static_cast<int>(rng() % n), y = static_cast<int>(rng() % n);
      const bool expect_ok = x != y && !m.Reaches(y, x);
      ASSERT_EQ(gc.InsertEdge(x, y), expect_ok) << "seed " << seed << " " << x << "->" << y;
      if (expect_ok) m.out[x].insert(y);
      ASSERT_TRUE(gc.CheckInvariants()) << "seed " << seed;
      const int a = static_cast<int>(rng() % n), b = static_cast<int>(rng() % n);
      EXPECT_EQ(gc.IsReachable(a, b), a != b && m.Reaches(a, b));
    }
    ExpectSameEdges(gc, m);
  }
}

TEST(GraphCyclesTest, ContractionMatchesBruteForce) {
  int contracted = 0, refused = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const int n = 3 + static_cast<int>(rng() % 25);
    GraphCycles gc(n);
    Model m(n);
    // Random DAG in id order, so it starts consistent with the initial ranks.
    for (int y = 1; y < n; ++y) {
      for (int x = 0; x < y; ++x) {
        if (rng() % 4 == 0) {
          ASSERT_TRUE(gc.InsertEdge(x, y));
          m.out[x].insert(y);
        }
      }
    }
    for (int step = 0; step < 3 * n; ++step) {
      std::vector<std::pair<int, int>> edges;
      for (int x = 0; x < n; ++x) {
        for (int y : m.out[x]) edges.push_back({x, y});
      }
      if (edges.empty()) break;
      const auto [a, b] = edges[rng() % edges.size()];
      const bool other_path = m.Reaches(a, b, a, b);
      const std::optional<int> survivor = gc.ContractEdge(a, b);
      ASSERT_EQ(survivor.has_value(), !other_path) << "seed " << seed;
      if (!survivor) {
        ++refused;
        const int via = gc.PathWitness(a, b);
        ASSERT_GE(via, 0);
        EXPECT_NE(via, b);
        EXPECT_TRUE(m.out[a].count(via));
        EXPECT_TRUE(m.Reaches(via, b));
      } else {
        ++contracted;
        const int keep = *survivor, gone = keep == a ? b : a;
        ASSERT_TRUE(keep == a || keep == b);
        // The model merges `gone` into `keep`.
        m.out[a].erase(b);
        for (int y : m.out[gone]) m.out[keep].insert(y);
        m.out[gone].clear();
        for (auto& s : m.out) {
          if (s.erase(gone)) s.insert(keep);
        }
        m.out[keep].erase(keep);
        EXPECT_TRUE(gc.predecessors(gone).empty());
      }
      ASSERT_TRUE(gc.CheckInvariants()) << "seed " << seed;
      ExpectSameEdges(gc, m);
    }
  }
  // Both outcomes must actually be exercised.
  EXPECT_GT(contracted, 200);
  EXPECT_GT(refused, 50);
}

TEST(GraphCyclesTest, Diamond) {
  // 0 -> 1 -> 3, 0 -> 2 -> 3: 0->1 contracts, then {0,1}->3 cannot (path via 2).
  GraphCycles gc(4);
  for (auto [x, y] : {std::pair{0, 1}, {1, 3}, {0, 2}, {2, 3}}) ASSERT_TRUE(gc.InsertEdge(x, y));
  EXPECT_FALSE(gc.InsertEdge(3, 0));
  EXPECT_FALSE(gc.InsertEdge(2, 2));
  const std::optional<int> s = gc.ContractEdge(0, 1);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(gc.ContractEdge(*s, 3).has_value());
  EXPECT_EQ(gc.PathWitness(*s, 3), 2);
  EXPECT_TRUE(gc.HasEdge(*s, 3));  // a refused contraction leaves the edge in place
  EXPECT_TRUE(gc.CheckInvariants());
}

}  // namespace
}  // namespace braze
