// Sibling reductions and moments of a cluster; see sibling_reductions.h.
#include "lower/sibling_reductions.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

#include "braze/graph.h"

namespace braze {
namespace lower {
namespace {

// A column reduction's identity: its input's shape, its sorted axes, keep_dims.
using ReductionKey = std::tuple<Shape, std::vector<int>, bool>;

bool StaticInputs(const ClusterSpec& spec) {
  for (const std::vector<int>& sym : spec.input_symbols) {
    for (int k : sym) {
      if (k >= 0) return false;
    }
  }
  return true;
}

// The key of a Sum or Mean of a static f32 input whose innermost dim it does not
// reduce, or nothing.
bool ColumnReduction(const Node& node, ReductionKey* key) {
  if (node.op() != OpKind::kSum && node.op() != OpKind::kMean) return false;
  if (node.num_inputs() != 1) return false;
  const Tensor& x = node.inputs()[0];
  if (x.dtype() != DType::kF32) return false;
  const Shape& shape = x.shape();
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) return false;
  for (int64_t d : shape) {
    if (d <= 0) return false;  // unknown, or no elements
  }
  const ReduceAttrs& attrs = node.attrs_as<ReduceAttrs>();
  std::vector<int> axes;
  for (int a : attrs.axes) axes.push_back(a < 0 ? a + rank : a);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty() || axes.front() < 0 || axes.back() >= rank - 1) return false;
  *key = ReductionKey{shape, axes, attrs.keep_dims};
  return true;
}

// Descendants within the cluster, as bit rows over positions in spec.nodes (which are
// in topological order).
class Reach {
 public:
  Reach(const ClusterSpec& spec, const std::map<int, size_t>& pos) : n_(spec.nodes.size()) {
    words_ = (n_ + 63) / 64;
    bits_.assign(n_ * words_, 0);
    std::vector<std::vector<size_t>> consumers(n_);
    for (size_t p = 0; p < n_; ++p) {
      for (const Tensor& t : spec.graph->node(spec.nodes[p]).inputs()) {
        auto it = pos.find(t.node_id());
        if (it != pos.end()) consumers[it->second].push_back(p);
      }
    }
    for (size_t p = n_; p-- > 0;) {
      for (size_t c : consumers[p]) {
        Set(p, c);
        for (size_t w = 0; w < words_; ++w) bits_[p * words_ + w] |= bits_[c * words_ + w];
      }
    }
  }
  bool Reaches(size_t from, size_t to) const {
    return (bits_[from * words_ + to / 64] >> (to % 64)) & 1;
  }

 private:
  void Set(size_t from, size_t to) { bits_[from * words_ + to / 64] |= uint64_t{1} << (to % 64); }
  size_t n_, words_;
  std::vector<uint64_t> bits_;
};

// v = Mean(Square(x - m)) (or Mean((x - m) * (x - m))) with m = Mean(x, same axes,
// keep_dims), every node in the cluster: m's id, or -1.
int MomentsMean(const ClusterSpec& spec, const std::map<int, size_t>& pos, const Node& v) {
  ReductionKey vkey;
  if (v.op() != OpKind::kMean || !ColumnReduction(v, &vkey)) return -1;
  const Tensor& s = v.inputs()[0];
  if (pos.count(s.node_id()) == 0) return -1;
  const Node& sq = spec.graph->node(s.node_id());
  Tensor d;
  if (sq.op() == OpKind::kSquare) {
    d = sq.inputs()[0];
  } else if (sq.op() == OpKind::kMul && sq.inputs()[0].node_id() == sq.inputs()[1].node_id() &&
             sq.inputs()[0].index() == sq.inputs()[1].index()) {
    d = sq.inputs()[0];
  } else {
    return -1;
  }
  if (pos.count(d.node_id()) == 0) return -1;
  const Node& sub = spec.graph->node(d.node_id());
  if (sub.op() != OpKind::kSub) return -1;
  const Tensor& x = sub.inputs()[0];
  const Tensor& m = sub.inputs()[1];
  if (pos.count(m.node_id()) == 0) return -1;
  const Node& mean = spec.graph->node(m.node_id());
  ReductionKey mkey;
  if (mean.op() != OpKind::kMean || !ColumnReduction(mean, &mkey)) return -1;
  const Tensor& mx = mean.inputs()[0];
  if (mx.node_id() != x.node_id() || mx.index() != x.index()) return -1;
  // The same domain; m keeps its dims (it broadcasts against x); x - m is x's shape.
  if (std::get<0>(mkey) != std::get<0>(vkey) || std::get<1>(mkey) != std::get<1>(vkey) ||
      !std::get<2>(mkey) || sub.inputs()[0].shape() != std::get<0>(vkey)) {
    return -1;
  }
  return m.node_id();
}

// Groups of siblings: candidates by key, each joining the first group of its key that
// none of whose members it reaches or is reached by.
std::vector<std::vector<int>> GroupSiblings(const ClusterSpec& spec,
                                            const std::map<int, size_t>& pos,
                                            const std::set<int>& taken) {
  const Reach reach(spec, pos);
  std::map<ReductionKey, std::vector<std::vector<int>>> by_key;
  for (int id : spec.nodes) {
    ReductionKey key;
    if (taken.count(id) > 0 || !ColumnReduction(spec.graph->node(id), &key)) continue;
    std::vector<std::vector<int>>& groups = by_key[key];
    bool joined = false;
    for (std::vector<int>& g : groups) {
      bool independent = true;
      for (int m : g) {
        const size_t a = pos.at(m), b = pos.at(id);
        independent &= !reach.Reaches(a, b) && !reach.Reaches(b, a);
      }
      if (independent) {
        g.push_back(id);
        joined = true;
        break;
      }
    }
    if (!joined) groups.push_back({id});
  }
  std::vector<std::vector<int>> result;
  for (auto& [key, groups] : by_key) {
    for (std::vector<int>& g : groups) {
      if (g.size() >= 2) result.push_back(std::move(g));
    }
  }
  return result;
}

// spec.nodes' positions with each group contracted to one node (placed where all of
// its members' inputs are ready; the least position first among the ready ones), or
// empty when the contraction has a cycle.
std::vector<size_t> ContractedOrder(const ClusterSpec& spec, const std::map<int, size_t>& pos,
                                    const std::vector<std::vector<int>>& groups) {
  const size_t n = spec.nodes.size();
  std::vector<size_t> unit(n);  // a position's unit: its group's least position, or itself
  for (size_t p = 0; p < n; ++p) unit[p] = p;
  std::map<size_t, std::vector<size_t>> members;  // unit -> positions
  for (const std::vector<int>& g : groups) {
    size_t lead = n;
    for (int id : g) lead = std::min(lead, pos.at(id));
    for (int id : g) {
      unit[pos.at(id)] = lead;
      members[lead].push_back(pos.at(id));
    }
  }
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<size_t>> out(n);
  for (size_t p = 0; p < n; ++p) {
    std::set<size_t> from;
    for (const Tensor& t : spec.graph->node(spec.nodes[p]).inputs()) {
      auto it = pos.find(t.node_id());
      if (it != pos.end() && unit[it->second] != unit[p]) from.insert(unit[it->second]);
    }
    for (size_t f : from) {
      out[f].push_back(unit[p]);
      ++indegree[unit[p]];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t p = 0; p < n; ++p) {
    if (unit[p] == p && indegree[p] == 0) ready.push(p);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t u = ready.top();
    ready.pop();
    auto m = members.find(u);
    if (m == members.end()) {
      order.push_back(u);
    } else {
      std::vector<size_t> ps = m->second;
      std::sort(ps.begin(), ps.end());
      order.insert(order.end(), ps.begin(), ps.end());
    }
    for (size_t v : out[u]) {
      if (--indegree[v] == 0) ready.push(v);
    }
  }
  if (order.size() != n) return {};
  return order;
}

}  // namespace

SiblingReductions FindSiblingReductions(const ClusterSpec& spec, bool enabled) {
  SiblingReductions plan;
  for (size_t p = 0; p < spec.nodes.size(); ++p) plan.order.push_back(p);
  if (!enabled || !StaticInputs(spec)) return plan;
  std::map<int, size_t> pos;
  for (size_t p = 0; p < spec.nodes.size(); ++p) pos[spec.nodes[p]] = p;
  std::set<int> taken;  // means and variances of moments
  for (int id : spec.nodes) {
    const int m = MomentsMean(spec, pos, spec.graph->node(id));
    if (m >= 0 && taken.count(m) == 0) {
      plan.moments[m] = id;
      taken.insert({m, id});
    }
  }
  const std::vector<std::vector<int>> groups = GroupSiblings(spec, pos, taken);
  if (groups.empty()) return plan;
  std::vector<size_t> order = ContractedOrder(spec, pos, groups);
  if (order.empty()) return plan;  // the groups would make a cycle: none
  plan.order = std::move(order);
  for (const std::vector<int>& g : groups) {
    std::vector<int> members = g;
    std::sort(members.begin(), members.end(), [&](int a, int b) { return pos.at(a) < pos.at(b); });
    plan.groups[members[0]] = members;
    plan.followers.insert(members.begin() + 1, members.end());
  }
  return plan;
}

}  // namespace lower
}  // namespace braze
