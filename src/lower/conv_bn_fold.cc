// Batch norm folded into a convolution; see conv_bn_fold.h.
#include "lower/conv_bn_fold.h"

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace braze {
namespace lower {
namespace {

using ValueKey = std::pair<int, int>;  // (node id, output index)

// Who reads what inside the cluster, and what leaves it.
struct Readers {
  std::map<ValueKey, std::vector<int>> of;  // value -> reading nodes, once per read
  std::set<ValueKey> outputs;

  explicit Readers(const ClusterSpec& spec) {
    for (int id : spec.nodes) {
      for (const Tensor& t : spec.graph->node(id).inputs()) {
        of[{t.node_id(), t.index()}].push_back(id);
      }
    }
    for (const Tensor& t : spec.outputs) outputs.insert({t.node_id(), t.index()});
  }
  // The node that alone reads output 0 of `id`, once, when it is no cluster output
  // (a fetch or a reader in another step makes it one); -1 otherwise.
  int Only(int id) const {
    auto it = of.find({id, 0});
    if (outputs.count({id, 0}) > 0 || it == of.end() || it->second.size() != 1) return -1;
    return it->second[0];
  }
};

// `t` is one value per output channel of a convolution whose output has `channel_axis`
// and `channels` channels: of `dtype`, and broadcast against the output (right-aligned)
// every dim is 1 but the channel's, which is `channels` or 1. Static shapes only: a dim
// unknown at build time is not matched.
bool PerChannel(const Tensor& t, DType dtype, int channel_axis, int64_t channels) {
  if (!t.valid() || !t.node().status().ok() || t.dtype() != dtype || t.rank() > 4) return false;
  const Shape& s = t.shape();
  for (int j = 0; j < t.rank(); ++j) {
    const int d = 4 - t.rank() + j;
    if (s[j] != 1 && !(d == channel_axis && s[j] == channels)) return false;
  }
  return true;
}

// The operand of binary node `n` other than output 0 of `id`; invalid when `id` is not
// one of them.
Tensor Other(const Node& n, int id) {
  if (n.input(0).node_id() == id && n.input(0).index() == 0) return n.input(1);
  if (n.input(1).node_id() == id && n.input(1).index() == 0) return n.input(0);
  return Tensor();
}

bool Is(const Graph& g, int id, OpKind op) {
  return id >= 0 && g.node(id).op() == op && g.node(id).status().ok();
}

// The fold rooted at Conv2D `conv`, if the chain after it matches.
std::optional<ConvBnFold> Match(const Graph& g, const Readers& readers, int conv) {
  const Node& c = g.node(conv);
  if (c.op() != OpKind::kConv2D || !c.status().ok() || c.num_inputs() != 2) return std::nullopt;
  const DType dtype = c.output(0).dtype;
  const Shape& filter = c.input(1).shape();
  if ((dtype != DType::kF32 && dtype != DType::kF64) || filter.size() != 4 || filter[3] <= 0) {
    return std::nullopt;
  }
  const int axis = c.attrs_as<Conv2DAttrs>().window.format == DataFormat::kNHWC ? 3 : 1;
  auto per_channel = [&](const Tensor& t) { return PerChannel(t, dtype, axis, filter[3]); };
  ConvBnFold f;
  f.conv = conv;
  f.sub = readers.Only(conv);
  // The convolution is the minuend: mean - conv would negate the scale.
  if (!Is(g, f.sub, OpKind::kSub) || g.node(f.sub).input(0).node_id() != conv) return std::nullopt;
  f.mean = g.node(f.sub).input(1);
  f.mul = readers.Only(f.sub);
  if (!Is(g, f.mul, OpKind::kMul)) return std::nullopt;
  f.scale = Other(g.node(f.mul), f.sub);
  f.add = readers.Only(f.mul);
  if (!Is(g, f.add, OpKind::kAdd)) return std::nullopt;
  f.shift = Other(g.node(f.add), f.mul);
  if (!per_channel(f.mean) || !per_channel(f.scale) || !per_channel(f.shift)) return std::nullopt;
  const int relu = readers.Only(f.add);
  if (Is(g, relu, OpKind::kRelu)) f.relu = relu;
  return f;
}

}  // namespace

std::string ConvBnFold::Describe(const Graph& g) const {
  auto node = [&](int id) {
    return absl::StrCat(g.node(id).op_name(), " '", g.node(id).name(), "'");
  };
  return absl::StrCat(node(sub), ", ", node(mul), ", ", node(add), " into the filter and bias of ",
                      node(conv));
}

std::map<int, ConvBnFold> FindConvBnFolds(const ClusterSpec& spec) {
  const Graph& g = *spec.graph;
  const Readers readers(spec);
  std::map<int, ConvBnFold> found;
  for (int id : spec.nodes) {
    std::optional<ConvBnFold> f = Match(g, readers, id);
    if (f.has_value()) found.emplace(f->add, *std::move(f));
  }
  return found;
}

}  // namespace lower
}  // namespace braze
