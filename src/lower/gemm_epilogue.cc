// Bias and ReLU epilogues of a cluster's matmuls; see gemm_epilogue.h.
#include "lower/gemm_epilogue.h"

#include <set>
#include <utility>
#include <vector>

namespace braze {
namespace lower {

std::map<int, GemmEpilogueNodes> FindGemmEpilogues(const ClusterSpec& spec) {
  const Graph& g = *spec.graph;
  std::map<std::pair<int, int>, std::vector<int>> readers;  // value -> nodes, once per read
  for (int id : spec.nodes) {
    for (const Tensor& t : g.node(id).inputs()) readers[{t.node_id(), t.index()}].push_back(id);
  }
  std::set<std::pair<int, int>> outputs;
  for (const Tensor& t : spec.outputs) outputs.insert({t.node_id(), t.index()});
  // The node that alone reads output 0 of `id`, once, when it is no cluster output; -1.
  auto only_reader = [&](int id) {
    auto it = readers.find({id, 0});
    if (outputs.count({id, 0}) > 0 || it == readers.end() || it->second.size() != 1) return -1;
    return it->second[0];
  };
  std::map<int, GemmEpilogueNodes> found;
  for (int id : spec.nodes) {
    const OpKind op = g.node(id).op();
    const bool conv = op == OpKind::kConv2D;
    if (op != OpKind::kMatMul && op != OpKind::kBatchMatMul && !conv) continue;
    const int add = only_reader(id);
    if (add < 0 || g.node(add).op() != OpKind::kAdd) continue;
    const Node& a = g.node(add);
    GemmEpilogueNodes e;
    e.add = add;
    e.bias = a.input(0).node_id() == id ? a.input(1) : a.input(0);
    int last = add;  // the Add a Relu would read
    const int second = conv ? only_reader(add) : -1;
    if (second >= 0 && g.node(second).op() == OpKind::kAdd) {
      const Node& r = g.node(second);
      e.residual_add = second;
      e.residual = r.input(0).node_id() == add ? r.input(1) : r.input(0);
      last = second;
    }
    const int relu = only_reader(last);
    if (relu >= 0 && g.node(relu).op() == OpKind::kRelu) e.relu = relu;
    found.emplace(id, e);
  }
  return found;
}

}  // namespace lower
}  // namespace braze
