// Symbolic dims by probing; see symbolic.h.
#include "lower/symbolic.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"

namespace braze {
namespace lower {
namespace {

using ValueKey = std::pair<int, int>;
using TypeMap = std::map<ValueKey, TensorType>;

constexpr int kProbes = 2;

// The size class k takes in probe p: large (no concrete dim of a real program is
// near), distinct per class and per probe, and never a product of small dims.
int64_t ProbeSize(int p, int k) { return p == 0 ? 10007 + 7 * k : 7001 + 11 * k; }

// The cluster's types with each input's class dims at `size(k)`; fails naming the
// node whose shape inference refuses them.
absl::StatusOr<TypeMap> Infer(const ClusterSpec& spec, const std::function<int64_t(int)>& size,
                              bool use_node_types) {
  TypeMap types;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    TensorType t = spec.input_types[i];
    if (size) {
      for (size_t d = 0; d < t.shape.size(); ++d) {
        const int k = i < spec.input_symbols.size() && d < spec.input_symbols[i].size()
                          ? spec.input_symbols[i][d]
                          : -1;
        if (k >= 0) t.shape[d] = size(k);
      }
    }
    types[{spec.inputs[i].node_id(), spec.inputs[i].index()}] = t;
  }
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    const Node& node = spec.graph->node(spec.nodes[n]);
    if (use_node_types && n < spec.node_types.size()) {
      types[{node.id(), 0}] = spec.node_types[n];
      continue;
    }
    std::vector<TensorType> in;
    for (const Tensor& t : node.inputs()) {
      auto it = types.find({t.node_id(), t.index()});
      if (it == types.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", node.name(), "' reads a value outside the cluster"));
      }
      in.push_back(it->second);
    }
    auto out = InferOutputTypes(node.op(), node.attrs(), in);
    if (!out.ok() || out->size() != 1) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", node.name(), "' (", node.op_name(), ") does not accept other sizes of its "
          "symbolic dims", out.ok() ? "" : absl::StrCat(": ", out.status().message())));
    }
    types[{node.id(), 0}] = (*out)[0];
  }
  return types;
}

}  // namespace

absl::StatusOr<SymbolMap> InferSymbols(const ClusterSpec& spec) {
  int classes = 0;
  std::vector<int64_t> estimate;  // per class
  for (size_t i = 0; i < spec.input_symbols.size() && i < spec.input_types.size(); ++i) {
    for (size_t d = 0; d < spec.input_symbols[i].size(); ++d) {
      const int k = spec.input_symbols[i][d];
      if (k < 0) continue;
      if (d >= spec.input_types[i].shape.size()) {
        return absl::InvalidArgumentError(absl::StrCat("input ", i, " has no dim ", d));
      }
      classes = std::max(classes, k + 1);
      estimate.resize(classes, -1);
      const int64_t size = spec.input_types[i].shape[d];
      if (estimate[k] >= 0 && estimate[k] != size) {
        return absl::InvalidArgumentError(
            absl::StrCat("symbol class ", k, " has sizes ", estimate[k], " and ", size));
      }
      estimate[k] = size;
    }
  }
  if (classes == 0) return SymbolMap();
  for (int k = 0; k < classes; ++k) {
    if (estimate[k] < 0) return absl::InvalidArgumentError(absl::StrCat("no input of class ", k));
    for (int p = 0; p < kProbes; ++p) {
      if (estimate[k] == ProbeSize(p, k)) {  // a probe must move every symbolic dim
        return absl::UnimplementedError(absl::StrCat("size ", estimate[k], " is a probe size"));
      }
    }
  }
  absl::StatusOr<TypeMap> base = Infer(spec, nullptr, /*use_node_types=*/true);
  if (!base.ok()) return base.status();
  std::array<TypeMap, kProbes> probes;
  for (int p = 0; p < kProbes; ++p) {
    absl::StatusOr<TypeMap> t =
        Infer(spec, [p](int k) { return ProbeSize(p, k); }, /*use_node_types=*/false);
    if (!t.ok()) return t.status();
    probes[p] = *std::move(t);
  }
  SymbolMap result;
  for (const auto& [key, type] : *base) {
    std::vector<int> sym(type.shape.size(), -1);
    for (size_t d = 0; d < type.shape.size(); ++d) {
      const int64_t e = type.shape[d];
      bool fixed = true;
      for (const TypeMap& p : probes) fixed = fixed && p.at(key).shape.size() == type.shape.size() &&
                                              p.at(key).shape[d] == e;
      if (fixed) continue;
      for (int k = 0; k < classes && sym[d] < 0; ++k) {
        bool follows = e == estimate[k];
        for (int p = 0; p < kProbes; ++p) {
          follows = follows && p < static_cast<int>(probes.size()) &&
                    probes[p].at(key).shape.size() == type.shape.size() &&
                    probes[p].at(key).shape[d] == ProbeSize(p, k);
        }
        if (follows) sym[d] = k;
      }
      if (sym[d] < 0) {
        const std::string what =
            key.first < spec.graph->num_nodes()
                ? absl::StrCat("node '", spec.graph->node(key.first).name(), "'")
                : absl::StrCat("value ", key.first);
        return absl::UnimplementedError(
            absl::StrCat(what, " dim ", d, " depends on a symbolic size but is not one (",
                         e, " at this signature)"));
      }
    }
    result[key] = std::move(sym);
  }
  return result;
}

}  // namespace lower
}  // namespace braze
