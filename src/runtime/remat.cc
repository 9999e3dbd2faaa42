#include "runtime/remat.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace braze {
namespace {

using ValueKey = std::pair<int, int>;  // {node id, output index}

ValueKey KeyOf(const Tensor& t) { return {t.node_id(), t.index()}; }

// Ops whose copy costs a few instructions per element and reads nothing but its inputs.
bool Elementwise(const Node& n) {
  const OpCategory c = OpCategoryOf(n.op());
  return (c == OpCategory::kUnary || c == OpCategory::kBinary || c == OpCategory::kSelect) &&
         n.num_outputs() == 1;
}

// A Const is copied with the cone (a constant is part of the kernel, not an input).
bool CopyableConst(const Node& n) { return n.op() == OpKind::kConst && n.num_inputs() == 0; }

// Bytes of a value; a symbolic dim counts as 1024 (both sides of a comparison mostly
// share their dims, so the guess rarely decides).
double Bytes(const Tensor& t) {
  double n = static_cast<double>(SizeOf(t.dtype()));
  for (int64_t d : t.shape()) n *= d < 0 ? 1024.0 : static_cast<double>(d);
  return n;
}

struct Cone {
  std::vector<int> nodes;      // E's cone in P
  std::vector<Tensor> leaves;  // what the cone reads from outside itself
};

// E's elementwise cone within `members` (P's original nodes), stopping at values in
// `reads` (the consumer reads them already: free leaves) and in `stored` (written to
// memory for another reader anyway: a read, not a recomputation), or false when it
// cannot be copied (a leaf read from a Variable, or the cone would exceed
// kMaxRematCone).
bool ConeOf(const Graph& g, int e, const std::set<int>& members, const std::set<ValueKey>& reads,
            const std::set<ValueKey>& stored, Cone* cone) {
  std::set<int> in_cone;
  std::vector<int> stack = {e};
  std::set<ValueKey> leaf_keys;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (!in_cone.insert(id).second) continue;
    if (static_cast<int>(in_cone.size()) > kMaxRematCone) return false;
    for (const Tensor& in : g.node(id).inputs()) {
      const Node& producer = g.node(in.node_id());
      const bool copy = members.count(in.node_id()) > 0 && !reads.count(KeyOf(in)) &&
                        !stored.count(KeyOf(in)) &&
                        (Elementwise(producer) || CopyableConst(producer));
      if (copy) {
        stack.push_back(in.node_id());
      } else if (producer.op() == OpKind::kVariable) {
        return false;
      } else if (leaf_keys.insert(KeyOf(in)).second) {
        cone->leaves.push_back(in);
      }
    }
  }
  cone->nodes.assign(in_cone.begin(), in_cone.end());
  // A leaf found before its producer joined the cone (two paths) is internal after all.
  cone->leaves.erase(std::remove_if(cone->leaves.begin(), cone->leaves.end(),
                                    [&](const Tensor& t) { return in_cone.count(t.node_id()); }),
                     cone->leaves.end());
  return true;
}

// The values read from outside `nodes` by them, in node order (as plan.cc's ClusterStep).
std::vector<Tensor> InputsOf(const Graph& g, const std::vector<int>& nodes) {
  const std::set<int> members(nodes.begin(), nodes.end());
  std::vector<Tensor> inputs;
  std::set<ValueKey> seen;
  for (int m : nodes) {
    for (const Tensor& in : g.node(m).inputs()) {
      if (!members.count(in.node_id()) && seen.insert(KeyOf(in)).second) inputs.push_back(in);
    }
  }
  return inputs;
}

// The values some step other than `c` reads, and the fetched ones: written to memory
// whatever `c` does.
std::set<ValueKey> StoredForOthers(const std::vector<Step>& steps, const Step& c,
                                   const std::set<ValueKey>& fetched) {
  std::set<ValueKey> stored = fetched;
  for (const Step& s : steps) {
    if (&s == &c) continue;
    for (const Tensor& in : s.inputs) stored.insert(KeyOf(in));
  }
  return stored;
}

// Tries to give step `c` its own copy of input `t`'s cone; true when it did. The copy
// is made when the leaves `c` does not read yet take no more bytes than t; or else,
// when t is written for `c` alone, with the cone stopped at values stored anyway for
// other readers, when those are its only new leaves and take no more than
// kStoredLeafRatio times t's bytes: their extra read then replaces a value kept in
// memory from P to `c` (a ReLU gradient's mask, computed in the forward cluster from
// the activation that cluster writes for the backward pass: policy, issue 38).
constexpr double kStoredLeafRatio = 4;
bool Rematerialize(const Graph& g, const std::vector<std::set<int>>& original,
                   const std::unordered_map<int, int>& owner, const std::vector<Step>& steps,
                   const std::set<ValueKey>& fetched, int max_step_ops, const Tensor& t, Step& c) {
  const auto it = owner.find(t.node_id());
  if (it == owner.end()) return false;
  const Step& p = steps[it->second];
  if (&p == &c || p.space != c.space || !(p.device == c.device)) return false;
  if (!Elementwise(g.node(t.node_id()))) return false;
  std::set<ValueKey> reads;
  for (const Tensor& in : c.inputs) reads.insert(KeyOf(in));
  // The bytes of the leaves `c` does not read yet; whether each is stored anyway.
  auto added_bytes = [&](const Cone& k, const std::set<ValueKey>& stored, bool* all_stored) {
    double added = 0;
    for (const Tensor& leaf : k.leaves) {
      if (reads.count(KeyOf(leaf))) continue;
      added += Bytes(leaf);
      *all_stored = *all_stored && stored.count(KeyOf(leaf)) > 0;
    }
    return added;
  };
  Cone cone;
  bool unused = true;
  if (!ConeOf(g, t.node_id(), original[it->second], reads, {}, &cone) ||
      added_bytes(cone, {}, &unused) > Bytes(t)) {
    const std::set<ValueKey> stored = StoredForOthers(steps, c, fetched);
    if (stored.count(KeyOf(t)) > 0) return false;  // P writes t anyway
    cone = Cone();
    bool leaves_stored = true;
    if (!ConeOf(g, t.node_id(), original[it->second], reads, stored, &cone) ||
        added_bytes(cone, stored, &leaves_stored) > kStoredLeafRatio * Bytes(t) || !leaves_stored) {
      return false;
    }
  }
  std::vector<int> nodes = c.nodes;
  nodes.insert(nodes.end(), cone.nodes.begin(), cone.nodes.end());
  std::sort(nodes.begin(), nodes.end());  // ids are a topological order
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (static_cast<int64_t>(nodes.size()) > max_step_ops) return false;
  c.nodes = std::move(nodes);
  c.inputs = InputsOf(g, c.nodes);
  return true;
}

}  // namespace

std::vector<int> RematerializeElementwise(const Graph& g, const std::set<ValueKey>& fetched,
                                          int max_step_ops, std::vector<Step>* steps) {
  std::vector<Step>& s = *steps;
  const int n = static_cast<int>(s.size());
  std::vector<std::set<int>> original(n);
  std::unordered_map<int, int> owner;  // node id -> the cluster step that computes it
  for (int i = 0; i < n; ++i) {
    if (s[i].kind != Step::Kind::kCluster) continue;
    original[i].insert(s[i].nodes.begin(), s[i].nodes.end());
    for (int id : s[i].nodes) owner[id] = i;
  }
  std::vector<int> changed;
  for (int i = 0; i < n; ++i) {
    if (s[i].kind != Step::Kind::kCluster) continue;
    bool any = false;
    // Each input once, in order; an accepted cone changes the inputs, so start again
    // from the new list, skipping the ones already tried.
    std::set<ValueKey> tried;
    for (bool again = true; again;) {
      again = false;
      for (const Tensor& t : s[i].inputs) {
        if (!tried.insert(KeyOf(t)).second) continue;
        if (Rematerialize(g, original, owner, s, fetched, max_step_ops, t, s[i])) {
          any = again = true;
          break;
        }
      }
    }
    if (any) changed.push_back(i);
  }
  if (changed.empty()) return changed;
  // Each value is written by the step that originally computed it, and only when some
  // step (or the caller) still reads it.
  std::set<ValueKey> read = fetched;
  for (const Step& step : s) {
    for (const Tensor& in : step.inputs) read.insert(KeyOf(in));
  }
  for (int i = 0; i < n; ++i) {
    if (s[i].kind != Step::Kind::kCluster) continue;
    std::vector<Tensor> outputs;
    for (int m : s[i].nodes) {
      if (!original[i].count(m)) continue;
      for (int o = 0; o < g.node(m).num_outputs(); ++o) {
        if (read.count({m, o})) outputs.push_back(Tensor(const_cast<Graph*>(&g), m, o));
      }
    }
    s[i].outputs = std::move(outputs);
  }
  return changed;
}

}  // namespace braze
