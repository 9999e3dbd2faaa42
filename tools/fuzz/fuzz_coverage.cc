// braze-fuzz --coverage: tallies what the generated programs hold (fuzz_coverage.h).
#include "tools/fuzz/fuzz_coverage.h"

#include <algorithm>
#include <regex>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "braze/dtype.h"
#include "braze/graph.h"

namespace braze {
namespace fuzz {
namespace {

constexpr DType kDTypes[] = {DType::kF32,  DType::kF64,  DType::kI32,
                             DType::kBool, DType::kBF16, DType::kF16};

const char* PaddingName(Padding p) {
  switch (p) {
    case Padding::kValid:
      return "VALID";
    case Padding::kSame:
      return "SAME";
    case Padding::kExplicit:
      return "explicit";
  }
  return "?";
}

// The window features of a convolution or pooling node.
std::vector<std::string> WindowFeatures(const Node& n) {
  const Window2D* w = nullptr;
  std::vector<std::string> f;
  if (const auto* c = std::get_if<Conv2DAttrs>(&n.attrs())) {
    w = &c->window;
    if (n.op() == OpKind::kConv2D && n.input(1).rank() == 4 && n.input(0).rank() == 4) {
      const int64_t cin = n.input(0).shape()[c->window.format == DataFormat::kNHWC ? 3 : 1];
      const int64_t per_group = n.input(1).shape()[2];
      if (cin > 0 && per_group > 0 && cin != per_group) {
        f.push_back(cin == n.input(1).shape()[3] && per_group == 1 ? "depthwise" : "groups > 1");
      }
    }
  } else if (const auto* p = std::get_if<Pool2DAttrs>(&n.attrs())) {
    w = &p->window;
    if (p->size_h != p->size_w) f.push_back("non-square window");
    if (p->size_h == 1 && p->size_w == 1) f.push_back("1x1 window");
  }
  if (w == nullptr) return f;
  f.push_back(absl::StrCat("padding ", PaddingName(w->padding)));
  f.push_back(w->format == DataFormat::kNHWC ? "NHWC" : "NCHW");
  if (w->stride_h > 1 || w->stride_w > 1) f.push_back("stride > 1");
  if (w->stride_h != w->stride_w) f.push_back("stride h != w");
  if (w->dilation_h > 1 || w->dilation_w > 1) f.push_back("dilation > 1");
  if (w->padding == Padding::kExplicit &&
      (w->pad_top != w->pad_bottom || w->pad_left != w->pad_right)) {
    f.push_back("asymmetric explicit pads");
  }
  return f;
}

// Whether the op's code (ProgramOp::code) passes a negative axis: they are normalized in
// the graph, so only the code still shows them.
bool NegativeAxis(const std::string& code, std::string* op) {
  static const std::regex kAxes(R"((Sum|Mean|Max|Min)\(\$\d+, \{[^}]*-\d)");
  static const std::regex kAxis(
      R"((ArgMax|LogSoftmax|Softmax|Gather|Iota|UnsortedSegmentSum|Concat)\([^;]*?, -\d+\))");
  std::smatch m;
  if (std::regex_search(code, m, kAxes) || std::regex_search(code, m, kAxis)) {
    *op = m[1];
    return true;
  }
  return false;
}

}  // namespace

void Coverage::Count(const std::string& feature, std::set<std::string>& seen) {
  ++nodes_[feature];
  if (seen.insert(feature).second) ++holders_[feature];
}

// An input's -1 dims past the batch (GenerateOptions::dynamic_dims_probability): on
// which dims, how many at once, and what the runs feed them (1 against another size,
// followers of another symbol).
void Coverage::CountSymbols(const Program& program, const ProgramInput& in,
                            std::set<std::string>& seen) {
  int symbolic = 0;
  for (size_t d = 0; d < in.symbols.size(); ++d) {
    if (in.symbols[d] < 0) continue;
    ++symbolic;
    if (d > 0) Count("input/a -1 past dim 0", seen);
  }
  if (symbolic >= 2) Count("input/several -1 dims", seen);
  if (symbolic > 0 && symbolic == static_cast<int>(in.symbols.size()) && symbolic > 1) {
    Count("input/every dim -1", seen);
  }
  if (symbolic == 0) return;
  // Per run, whether this input's -1 dims take different sizes, and a 1 beside a larger.
  for (const std::vector<int64_t>& run : program.symbol_sizes) {
    int64_t lo = -1, hi = -1;
    for (int k : in.symbols) {
      if (k < 0) continue;
      lo = lo < 0 ? run[k] : std::min(lo, run[k]);
      hi = std::max(hi, run[k]);
    }
    if (lo != hi) Count("feed/-1 dims of one input fed different sizes", seen);
    if (lo == 1 && hi > 1) Count("feed/a -1 dim fed 1 beside a larger one", seen);
    if (hi >= 16) Count("feed/a -1 dim fed 16 or more", seen);
  }
}

void Coverage::Add(const Program& program) {
  ++programs_;
  std::set<std::string> seen;
  Graph g;
  absl::StatusOr<BuiltProgram> built = BuildProgram(program, g);
  if (!built.ok()) {
    Count("program/does not build", seen);
    return;
  }
  if (program.gradients) Count("program/gradients fetched", seen);
  if (program.image) Count("program/image-shaped", seen);
  for (const ProgramInput& in : program.inputs) {
    Count(absl::StrCat("input/dtype ", DTypeName(in.dtype)), seen);
    Count(absl::StrCat("input/rank ", in.shape.size()), seen);
    if (in.dynamic0) Count("input/dim 0 declared -1", seen);
    CountSymbols(program, in, seen);
    if (in.specials) Count("input/special values", seen);
    if (in.grid) Count("input/on the 1/8 grid", seen);
  }
  for (const ProgramOp& op : program.ops) {
    std::string name;
    if (NegativeAxis(op.code, &name)) Count(absl::StrCat("axes/negative axis: ", name), seen);
  }
  // Symbols that follow another (its size or 1 in every run, each at least once): numpy
  // broadcasting of a 1 against a -1 of another input.
  const std::vector<std::vector<int64_t>>& runs = program.symbol_sizes;
  for (size_t k = 1; !runs.empty() && k < runs[0].size(); ++k) {
    for (size_t leader = 0; leader < k; ++leader) {
      bool follows = true, one = false, same = false;
      for (const std::vector<int64_t>& run : runs) {
        follows = follows && (run[k] == 1 || run[k] == run[leader]);
        one = one || (run[k] == 1 && run[leader] > 1);
        same = same || (run[k] == run[leader] && run[k] > 1);
      }
      if (follows && one && same) {
        Count("feed/a -1 dim that is 1 or another's size", seen);
        break;
      }
    }
  }
  if (!runs.empty()) {
    Count(absl::StrCat("program/-1 dims of ", runs[0].size(), " symbols"), seen);
  }
  Tally(g, seen);
}

void Coverage::Tally(const Graph& g, std::set<std::string>& seen) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    const std::string op = n.op_name();
    Count(absl::StrCat("op/", op), seen);
    if (n.num_outputs() == 0) continue;
    const TensorType& out = n.output(0);
    // Comparisons and selects by their operands' dtype, casts by both.
    const OpCategory cat = OpCategoryOf(n.op());
    DType dtype = out.dtype;
    if (n.op() == OpKind::kGreater || n.op() == OpKind::kLess || n.op() == OpKind::kEqual) {
      dtype = n.input(0).dtype();
    } else if (n.op() == OpKind::kSelect) {
      dtype = n.input(1).dtype();
    } else if (n.op() == OpKind::kArgMax) {
      dtype = n.input(0).dtype();  // its output is always i32
    }
    if (n.op() == OpKind::kCast) {
      Count(absl::StrCat("cast/", DTypeName(n.input(0).dtype()), " -> ", DTypeName(out.dtype)),
            seen);
    } else if (cat != OpCategory::kSource || n.op() == OpKind::kConst) {
      Count(absl::StrCat("op.dtype/", op, " ", DTypeName(dtype)), seen);
    }
    Count(absl::StrCat("value/dtype ", DTypeName(out.dtype)), seen);
    // Shapes.
    bool zero = false, one = false, symbolic = false;
    for (int64_t d : out.shape) {
      zero = zero || d == 0;
      one = one || d == 1;
      symbolic = symbolic || d < 0;
    }
    if (cat != OpCategory::kSource) {
      if (zero) Count(absl::StrCat("shape.0-sized/", op), seen);
      if (one) Count("shape/an op's output with a dim of 1", seen);
      if (symbolic) Count(absl::StrCat("shape.-1/", op), seen);
      Count(
          absl::StrCat("shape/rank ", out.shape.size() > 4 ? ">4" : absl::StrCat(out.shape.size())),
          seen);
      for (int i = 0; i < n.num_inputs(); ++i) {
        for (size_t d = 0; d + 1 < n.input(i).shape().size(); ++d) {
          if (n.input(i).shape()[d + 1] < 0) {
            Count("shape/-1 past dim 0", seen);
            break;
          }
        }
      }
    }
    if (cat == OpCategory::kBinary || cat == OpCategory::kSelect) {
      bool differ = false, scalar = false;
      for (int i = 0; i < n.num_inputs(); ++i) {
        differ = differ || n.input(i).shape() != out.shape;
        scalar = scalar || (n.input(i).rank() == 0 && out.shape.size() > 0);
      }
      if (differ) Count(absl::StrCat("broadcast/", op), seen);
      // Two operands with a -1 at the same place (from the right, as numpy aligns them):
      // equal at run time, or one of them 1.
      if (n.num_inputs() >= 2) {
        const Shape& a = n.input(n.num_inputs() - 2).shape();
        const Shape& b = n.input(n.num_inputs() - 1).shape();
        for (size_t d = 1; d <= std::min(a.size(), b.size()); ++d) {
          if (a[a.size() - d] < 0 && b[b.size() - d] < 0) {
            Count("broadcast/-1 against -1", seen);
            break;
          }
        }
      }
      if (scalar) Count(absl::StrCat("broadcast/", op, " of a rank-0 operand"), seen);
    }
    if (const auto* r = std::get_if<ReduceAttrs>(&n.attrs())) {
      const int rank = n.input(0).rank();
      if (r->keep_dims) Count(absl::StrCat("reduce/", op, " keep_dims"), seen);
      if (rank == 0) {
        Count(absl::StrCat("reduce/", op, " of a scalar"), seen);
      } else if (static_cast<int>(r->axes.size()) == rank) {
        Count(absl::StrCat("reduce/", op, " over every axis"), seen);
      } else {
        Count(absl::StrCat("reduce/", op, " over some axes"), seen);
      }
      for (int a : r->axes) {
        if (a < rank && n.input(0).shape()[a] == 0) {
          Count(absl::StrCat("reduce/", op, " over an empty axis"), seen);
          break;
        }
      }
    }
    if (const auto* m = std::get_if<MatMulAttrs>(&n.attrs())) {
      Count(absl::StrCat("matmul/", op, m->transpose_a ? " ta" : "", m->transpose_b ? " tb" : ""),
            seen);
      for (int i = 0; i < n.num_inputs(); ++i) {
        if (NumElements(n.input(i).shape()) == 0) {
          Count(absl::StrCat("matmul/", op, " of an operand with no elements"), seen);
          break;
        }
      }
    }
    for (const std::string& f : WindowFeatures(n)) Count(absl::StrCat("window/", op, " ", f), seen);
    if (const auto* p = std::get_if<PadAttrs>(&n.attrs())) {
      if (p->value != 0) Count("layout/Pad with a nonzero value", seen);
    }
    if (const auto* s = std::get_if<SliceAttrs>(&n.attrs())) {
      for (int64_t size : s->size) {
        if (size < 0) {
          Count("layout/Slice of size -1", seen);
          break;
        }
      }
    }
    if (const auto* o = std::get_if<OneHotAttrs>(&n.attrs())) {
      Count(absl::StrCat("layout/OneHot to ", DTypeName(o->dtype)), seen);
    }
    if (const auto* gather = std::get_if<GatherAttrs>(&n.attrs())) {
      if (gather->axis != 0) Count("layout/Gather on an axis past 0", seen);
    }
    if (const auto* a = std::get_if<AttentionAttrs>(&n.attrs())) {
      if (a->causal) Count(absl::StrCat("attention/", op, " causal"), seen);
      if (a->dropout > 0) Count(absl::StrCat("attention/", op, " dropout"), seen);
    }
    if (const auto* cf = std::get_if<ControlFlowAttrs>(&n.attrs())) {
      if (cf->reverse) Count("control/Scan reversed", seen);
      if (cf->max_iterations >= 0) Count("control/While bounded", seen);
      for (const auto& body : cf->bodies) {
        if (body && body->graph) Tally(*body->graph, seen);
      }
    }
  }
}

int64_t Coverage::nodes(const std::string& feature) const {
  auto it = nodes_.find(feature);
  return it == nodes_.end() ? 0 : it->second;
}

std::string Coverage::Table() const {
  // Every op and every cast is listed, drawn or not.
  std::map<std::string, int64_t> nodes = nodes_;
  for (int k = 0; k < kNumOps; ++k) nodes.emplace(absl::StrCat("op/", OpName(OpKind(k))), 0);
  for (DType from : kDTypes) {
    for (DType to : kDTypes) {
      if (from != to)
        nodes.emplace(absl::StrCat("cast/", DTypeName(from), " -> ", DTypeName(to)), 0);
    }
  }
  std::string out =
      absl::StrFormat("coverage of %d programs: feature, nodes, programs holding it\n", programs_);
  for (const auto& [feature, count] : nodes) {
    auto it = holders_.find(feature);
    absl::StrAppendFormat(&out, "%-52s %8d %6d\n", feature, count,
                          it == holders_.end() ? 0 : it->second);
  }
  return out;
}

}  // namespace fuzz
}  // namespace braze
