// Batch norm folded into a convolution; see conv_bn_fold.h.
#include "lower/conv_bn_fold.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/logging.h"

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

// The fold rooted at Conv2D `conv` (f.add >= 0), or why the chain after it does not
// match (`why`; empty when it is not a convolution).
ConvBnFold Match(const Graph& g, const Readers& readers, int conv, std::string* why) {
  ConvBnFold f;
  const Node& c = g.node(conv);
  if (c.op() != OpKind::kConv2D || !c.status().ok() || c.num_inputs() != 2) return f;
  const DType dtype = c.output(0).dtype;
  const Shape& filter = c.input(1).shape();
  if ((dtype != DType::kF32 && dtype != DType::kF64) || filter.size() != 4 || filter[3] <= 0) {
    *why = "not an f32/f64 convolution with a static filter";
    return f;
  }
  const int axis = c.attrs_as<Conv2DAttrs>().window.format == DataFormat::kNHWC ? 3 : 1;
  auto per_channel = [&](const Tensor& t) { return PerChannel(t, dtype, axis, filter[3]); };
  const int sub = readers.Only(conv);
  // The convolution is the minuend: mean - conv would negate the scale.
  if (!Is(g, sub, OpKind::kSub) || g.node(sub).input(0).node_id() != conv) {
    *why =
        "its output is not read once, by a Sub of which it is the first operand, alone in "
        "the cluster (training's batch statistics, another reader, or a fetch)";
    return f;
  }
  const int mul = readers.Only(sub);
  const int add = Is(g, mul, OpKind::kMul) ? readers.Only(mul) : -1;
  if (!Is(g, add, OpKind::kAdd)) {
    *why = "the Sub is not read once by a Mul, read once by an Add, alone in the cluster";
    return f;
  }
  const Tensor mean = g.node(sub).input(1), scale = Other(g.node(mul), sub);
  const Tensor shift = Other(g.node(add), mul);
  if (!per_channel(mean) || !per_channel(scale) || !per_channel(shift)) {
    *why = "the mean, scale or shift is not one static value per output channel";
    return f;
  }
  f = ConvBnFold{conv, sub, mul, add, -1, mean, scale, shift};
  int last = add;  // the Add a Relu would read
  const int second = readers.Only(add);
  if (Is(g, second, OpKind::kAdd)) {
    f.residual_add = second;
    f.residual = Other(g.node(second), add);
    last = second;
  }
  const int relu = readers.Only(last);
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
    std::string why;
    ConvBnFold f = Match(g, readers, id, &why);
    if (f.add >= 0) {
      found.emplace(f.add, std::move(f));
    } else if (!why.empty() && VLogIsOn(2)) {
      LogInfo(2, absl::StrCat(spec.name, ": batch norm not folded into ", g.node(id).op_name(),
                              " '", g.node(id).name(), "': ", why));
    }
  }
  return found;
}

}  // namespace lower
}  // namespace braze
