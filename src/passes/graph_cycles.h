// GraphCycles: a DAG that stays acyclic under edge insertion and edge contraction, with
// fast reachability queries. The clustering pass contracts producer->consumer edges and
// must refuse any contraction that would create a cycle; a DFS over the whole cluster
// graph per query made clustering quadratic (seconds for 20k-node graphs).
//
// After TensorFlow's GraphCycles: it keeps a topological order (rank) of the nodes,
// updated on insertion by Pearce and Kelly's algorithm ("A dynamic topological sort
// algorithm for directed acyclic graphs", JEA 2007). A path x ~> y requires
// rank(x) < rank(y), so every search only visits nodes whose rank lies between the two.
#ifndef BRAZE_PASSES_GRAPH_CYCLES_H_
#define BRAZE_PASSES_GRAPH_CYCLES_H_

#include <optional>
#include <set>
#include <vector>

namespace braze {

class GraphCycles {
 public:
  // Nodes 0..num_nodes-1 and no edges. The initial order is the ids, so inserting edges
  // from lower to higher ids (a graph whose ids are topological) never reorders.
  explicit GraphCycles(int num_nodes);

  // Adds x->y. Returns false, adding nothing, when that would close a cycle (x == y
  // included); true when added or already present.
  bool InsertEdge(int x, int y);
  void RemoveEdge(int x, int y);
  bool HasEdge(int x, int y) const { return out_[x].count(y) > 0; }

  // Whether a path of one or more edges leads from x to y.
  bool IsReachable(int x, int y);

  // Merges the endpoints of edge a->b into one node unless another path a ~> b exists
  // (the merged node would lie on a cycle). Returns the surviving id (a or b; the other
  // is left without edges), or nullopt with the graph unchanged.
  std::optional<int> ContractEdge(int a, int b);

  // For an edge a->b that cannot be contracted: a successor of a, other than b, from
  // which b is reachable (the start of the other path); -1 when there is none.
  int PathWitness(int a, int b);

  const std::set<int>& successors(int x) const { return out_[x]; }
  const std::set<int>& predecessors(int x) const { return in_[x]; }

  // Ranks are a permutation and every edge goes from lower to higher rank (for tests).
  bool CheckInvariants() const;

 private:
  // Collects into delta_f_ the nodes reachable from n with rank below upper_bound;
  // false as soon as the node of rank upper_bound is reached.
  bool ForwardDfs(int n, int upper_bound);
  // Collects into delta_b_ the nodes reaching n with rank above lower_bound.
  void BackwardDfs(int n, int lower_bound);
  // Gives delta_b_ then delta_f_ (each in old rank order) the ranks they held, sorted.
  void Reorder();
  void ClearVisited(const std::vector<int>& nodes);

  // std::set, not a hash set: iteration order must not depend on addresses, or clustering
  // results (and so compile-cache keys) would vary between runs.
  std::vector<std::set<int>> out_;
  std::vector<std::set<int>> in_;
  std::vector<int> rank_;
  std::vector<bool> visited_;
  std::vector<int> stack_, delta_f_, delta_b_;
};

}  // namespace braze

#endif  // BRAZE_PASSES_GRAPH_CYCLES_H_
