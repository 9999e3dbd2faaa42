// GEMM pattern match; see gemm_match.h.
#include "passes/gemm_match.h"

namespace braze {

std::vector<GemmMatch> MatchGemms(const Graph& g, const std::vector<bool>& needed,
                                  const std::set<std::pair<int, int>>& fetched,
                                  const GemmMatchOptions& options) {
  const int num_nodes = g.num_nodes();
  std::vector<std::vector<int>> consumers(num_nodes);
  for (int id = 0; id < num_nodes; ++id) {
    if (!needed[id]) continue;
    for (const Tensor& in : g.node(id).inputs()) consumers[in.node_id()].push_back(id);
  }
  auto device_of = [&](const Node& n) { return n.device().value_or(options.default_device); };
  // The single needed consumer of output 0 of `id`, on the same device, or -1.
  auto only_consumer = [&](int id) {
    if (fetched.count({id, 0}) || consumers[id].size() != 1) return -1;
    const int user = consumers[id][0];
    return device_of(g.node(user)) == device_of(g.node(id)) ? user : -1;
  };
  std::vector<GemmMatch> matches;
  for (int id = 0; id < num_nodes; ++id) {
    const Node& n = g.node(id);
    if (!needed[id] || (n.op() != OpKind::kMatMul && n.op() != OpKind::kBatchMatMul)) continue;
    const DType dtype = n.output(0).dtype;
    if (!options.has_library_gemm || !options.has_library_gemm(device_of(n), dtype)) continue;
    GemmMatch m;
    m.nodes = {id};
    m.inputs = n.inputs();
    int last = id;
    const int add = only_consumer(id);
    if (add >= 0 && g.node(add).op() == OpKind::kAdd) {
      const Node& a = g.node(add);
      const Tensor bias = a.input(0).node_id() == id ? a.input(1) : a.input(0);
      const int64_t cols = n.output(0).shape.empty() ? -1 : n.output(0).shape.back();
      const bool vector = bias.shape().size() == 1 && bias.shape()[0] == cols && cols >= 0 &&
                          bias.dtype() == dtype && bias.node_id() != id &&
                          a.output(0).shape == n.output(0).shape;
      if (vector) {
        m.nodes.push_back(add);
        m.inputs.push_back(bias);
        last = add;
        const int relu = options.fold_relu ? only_consumer(add) : -1;
        if (relu >= 0 && g.node(relu).op() == OpKind::kRelu) {
          m.nodes.push_back(relu);
          last = relu;
        }
      }
    }
    m.output = Tensor(const_cast<Graph*>(&g), last, 0);
    matches.push_back(std::move(m));
  }
  return matches;
}

}  // namespace braze
