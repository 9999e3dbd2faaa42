// ClusterSpec -> text: ClusterToText (cluster_text.h has the format). The writer names
// values by position exactly as the cluster key does, so a rebuilt cluster keys the same.
// The reader, ClusterFromText, is in cluster_text_read.cc: the two share only the format,
// which the header documents, so each half reads on its own.
#include "lower/cluster_text.h"

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "ir/overloaded.h"
#include "ir/window_geometry.h"

namespace braze {
namespace {

constexpr int kMaxPreview = 8;  // values of a constant shown in its comment

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

template <typename T>
std::string ListText(const std::vector<T>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

// Every bit of a double, as the cluster key spells it.
std::string DoubleText(double v) { return absl::StrFormat("%a", v); }

std::string ValueText(const HostTensor& v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = absl::StrCat(DTypeName(v.dtype()), ListText(v.shape()), ":");
  const auto* bytes = static_cast<const unsigned char*>(v.raw_data());
  out.reserve(out.size() + 2 * v.num_bytes());
  for (size_t i = 0; i < v.num_bytes(); ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

std::string ValuePreview(const HostTensor& v) {
  std::vector<std::string> parts;
  for (int64_t i = 0; i < v.num_elements() && i < kMaxPreview; ++i) {
    const double x = v.GetDouble(i);
    parts.push_back(IsFloating(v.dtype()) ? absl::StrFormat("%g", x)
                                          : absl::StrCat(static_cast<int64_t>(x)));
  }
  if (v.num_elements() > kMaxPreview) parts.push_back("...");
  return absl::StrJoin(parts, ", ");
}

// A window's fields as KEY=VALUE tokens (cluster_text_attrs.cc's ParseWindow reads them).
std::string WindowText(const Window2D& w) {
  return absl::StrCat(
      "strides=", ListText(std::vector<int>{w.stride_h, w.stride_w}),
      " dilations=", ListText(std::vector<int>{w.dilation_h, w.dilation_w}),
      " padding=", PaddingName(w.padding),
      " pads=", ListText(std::vector<int64_t>{w.pad_top, w.pad_bottom, w.pad_left, w.pad_right}),
      " format=", FormatName(w.format));
}

// The node's attributes as KEY=VALUE tokens; `*comment` gets what a reader would want
// in decimal. Every field of the struct is written.
absl::StatusOr<std::string> AttrsText(const Attrs& attrs, std::string* comment) {
  using R = absl::StatusOr<std::string>;
  return std::visit(
      Overloaded{
          [](const NoAttrs&) -> R { return std::string(); },
          [](const PlaceholderAttrs& a) -> R {
            return absl::StrCat("dtype=", DTypeName(a.dtype), " shape=", ListText(a.shape));
          },
          [comment](const ConstAttrs& a) -> R {
            if (a.value == nullptr) return absl::InvalidArgumentError("a Const without a value");
            *comment = ValuePreview(*a.value);
            return absl::StrCat("value=", ValueText(*a.value));
          },
          [comment](const VariableAttrs& a) -> R {
            if (a.initial_value != nullptr) *comment = ValuePreview(*a.initial_value);
            return absl::StrCat(
                "dtype=", DTypeName(a.dtype), " shape=", ListText(a.shape),
                " initial_value=", a.initial_value ? ValueText(*a.initial_value) : "none");
          },
          [](const CastAttrs& a) -> R { return absl::StrCat("dtype=", DTypeName(a.dtype)); },
          [](const ReduceAttrs& a) -> R {
            return absl::StrCat("axes=", ListText(a.axes), " keep_dims=", a.keep_dims ? 1 : 0);
          },
          [](const ArgMaxAttrs& a) -> R { return absl::StrCat("axis=", a.axis); },
          [](const MatMulAttrs& a) -> R {
            return absl::StrCat("transpose_a=", a.transpose_a ? 1 : 0,
                                " transpose_b=", a.transpose_b ? 1 : 0);
          },
          [](const ReshapeAttrs& a) -> R { return absl::StrCat("shape=", ListText(a.shape)); },
          [](const TransposeAttrs& a) -> R { return absl::StrCat("perm=", ListText(a.perm)); },
          [](const BroadcastToAttrs& a) -> R { return absl::StrCat("shape=", ListText(a.shape)); },
          [](const ConcatAttrs& a) -> R { return absl::StrCat("axis=", a.axis); },
          [](const SliceAttrs& a) -> R {
            return absl::StrCat("begin=", ListText(a.begin), " size=", ListText(a.size));
          },
          [comment](const PadAttrs& a) -> R {
            std::vector<std::string> pairs;
            for (const auto& [lo, hi] : a.paddings) pairs.push_back(absl::StrCat(lo, ":", hi));
            *comment = absl::StrFormat("value %g", a.value);
            return absl::StrCat("paddings=", ListText(pairs), " value=", DoubleText(a.value));
          },
          [comment](const OneHotAttrs& a) -> R {
            *comment = absl::StrFormat("on %g, off %g", a.on_value, a.off_value);
            return absl::StrCat("depth=", a.depth, " on_value=", DoubleText(a.on_value),
                                " off_value=", DoubleText(a.off_value),
                                " dtype=", DTypeName(a.dtype));
          },
          [](const GatherAttrs& a) -> R { return absl::StrCat("axis=", a.axis); },
          [](const SegmentSumAttrs& a) -> R {
            return absl::StrCat("axis=", a.axis, " num_segments=", a.num_segments);
          },
          [](const IotaAttrs& a) -> R {
            return absl::StrCat("axis=", a.axis, " dtype=", DTypeName(a.dtype));
          },
          [](const RandomAttrs& a) -> R {
            if (!a.op_key) return absl::InvalidArgumentError("a random op without its op key");
            return absl::StrCat("seed=", a.seed, " op_key=", *a.op_key,
                                " dtype=", DTypeName(a.dtype));
          },
          [](const Conv2DAttrs& a) -> R {
            return absl::StrCat(WindowText(a.window), " shape=", ListText(a.shape));
          },
          [](const Pool2DAttrs& a) -> R {
            return absl::StrCat("size=", ListText(std::vector<int64_t>{a.size_h, a.size_w}), " ",
                                WindowText(a.window), " shape=", ListText(a.shape));
          },
          [](const AttentionAttrs& a) -> R {
            return absl::StrCat("causal=", a.causal ? 1 : 0, " scale=", DoubleText(a.scale),
                                " dropout=", DoubleText(a.dropout), " seed=", a.seed,
                                " op_key=", a.op_key);
          },
          [](const CollectiveAttrs& a) -> R {  // dp (issue 37)
            return absl::StrCat("world_size=", a.world_size, " rank=", a.rank, " root=", a.root);
          },
          [](const HostCallAttrs&) -> R {
            return absl::InvalidArgumentError(
                "a HostCall (a user's C++ function) has no text form");
          },
          [](const ControlFlowAttrs&) -> R {  // cf (issue 40): never in a cluster
            return absl::InvalidArgumentError(
                "control flow (Cond, While, Scan) is never in a cluster, so has no cluster text");
          },
      },
      attrs);
}

}  // namespace

absl::StatusOr<std::string> ClusterToText(const ClusterSpec& spec) {
  auto error = [&](std::string what) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", spec.name, "' has no text form: ", what));
  };
  if (spec.graph == nullptr) return error("no graph");
  if (spec.input_types.size() != spec.inputs.size()) {
    return error(
        absl::StrCat(spec.inputs.size(), " inputs but ", spec.input_types.size(), " input types"));
  }
  const Graph& g = *spec.graph;
  std::string out = absl::StrCat("braze-cluster ", kClusterTextVersion, "\n");
  absl::StrAppend(&out, "# ClusterFromText (src/lower/cluster_text.h) rebuilds this cluster\n");
  absl::StrAppend(&out, "name ", Quote(spec.name), "\n");
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorType& type = spec.input_types[i];
    if (!IsFullyDefined(type.shape)) {
      return error(absl::StrCat("input ", i, "'s type ", TypeString(type), " is not concrete"));
    }
    absl::StrAppend(&out, "input ", i, " ", DTypeName(type.dtype), " ", ListText(type.shape));
    if (!spec.input_symbols.empty()) {
      absl::StrAppend(
          &out, " symbols ",
          ListText(i < spec.input_symbols.size() ? spec.input_symbols[i] : std::vector<int>()));
    }
    absl::StrAppend(&out, "\n");
  }
  // Values by position, as the cluster key names them: a node of the cluster first (only
  // earlier ones: the reader builds in order), then the first argument equal to it.
  std::unordered_map<int, int> local;  // node id -> position
  auto ref = [&](const Tensor& t) -> std::optional<std::string> {
    auto it = local.find(t.node_id());
    if (it != local.end() && t.graph() == &g) {
      if (t.index() < 0 || t.index() >= g.node(t.node_id()).num_outputs()) return std::nullopt;
      return absl::StrCat("n", it->second, ".", t.index());
    }
    for (size_t a = 0; a < spec.inputs.size(); ++a) {
      if (spec.inputs[a] == t) return absl::StrCat("a", a);
    }
    return std::nullopt;
  };
  for (size_t k = 0; k < spec.nodes.size(); ++k) {
    const int id = spec.nodes[k];
    if (id < 0 || id >= g.num_nodes()) return error(absl::StrCat("node id ", id, " out of range"));
    const Node& node = g.node(id);
    if (!node.status().ok()) return error(std::string(node.status().message()));
    std::string comment;
    absl::StatusOr<std::string> attrs = AttrsText(node.attrs(), &comment);
    if (!attrs.ok()) {
      return error(absl::StrCat("node '", node.name(), "': ", attrs.status().message()));
    }
    std::vector<std::string> refs;
    for (int i = 0; i < node.num_inputs(); ++i) {
      std::optional<std::string> r = ref(node.input(i));
      if (!r.has_value()) {
        return error(absl::StrCat("node '", node.name(), "' input ", i, " ('",
                                  node.input(i).valid() ? node.input(i).name() : "?",
                                  "') is neither an argument nor an earlier node of the cluster"));
      }
      refs.push_back(*std::move(r));
    }
    absl::StrAppend(&out, "node ", k, " ", node.op_name(), attrs->empty() ? "" : " ", *attrs,
                    " in=", absl::StrJoin(refs, ","), " name=", Quote(node.name()));
    if (!comment.empty()) absl::StrAppend(&out, "   # ", comment);
    absl::StrAppend(&out, "\n");
    local[id] = static_cast<int>(k);
  }
  for (size_t j = 0; j < spec.outputs.size(); ++j) {
    std::optional<std::string> r = ref(spec.outputs[j]);
    if (!r.has_value()) {
      return error(absl::StrCat("result ", j, " is neither an argument nor a node of the cluster"));
    }
    absl::StrAppend(&out, "output ", j, " ", *r, "\n");
  }
  absl::StrAppend(&out, "end\n");
  return out;
}

}  // namespace braze
