// Text -> ClusterSpec: ClusterFromText (cluster_text.h has the format; the writer,
// ClusterToText, is in cluster_text.cc). The reader checks every token before it reaches
// the graph and lets Graph::AddNode's shape inference judge the rest, so a hand-edited or
// cut-short file is an error naming its line, never a crash. The tokens and values
// (cluster_text_values.cc) and the attributes of each op (cluster_text_attrs.cc) are read
// by the functions of cluster_text_parse.h; here, the Parser that reads the lines into a
// fresh graph.
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "braze/status.h"
#include "lower/cluster_text.h"
#include "lower/cluster_text_parse.h"

namespace braze {
namespace {

using namespace cluster_text;  // the token, value and attribute readers

// Reads the text line by line into a fresh graph.
class Parser {
 public:
  Parser(absl::string_view text, absl::string_view source) : text_(text), source_(source) {}

  absl::StatusOr<RebuiltCluster> Parse() {
    out_.graph = std::make_unique<Graph>();
    const std::vector<absl::string_view> lines = absl::StrSplit(text_, '\n');
    for (size_t i = 0; i < lines.size(); ++i) {
      line_ = static_cast<int>(i) + 1;
      absl::StatusOr<std::vector<absl::string_view>> tokens = Tokenize(lines[i]);
      if (!tokens.ok()) return Error(tokens.status().message());
      if (tokens->empty()) continue;
      if (stage_ == kEnded) return Error(absl::StrCat("text after 'end': '", (*tokens)[0], "'"));
      absl::Status s = Line(*tokens);
      if (!s.ok()) return Error(s.message());
    }
    if (stage_ == kHeader) return Error("empty: no 'braze-cluster 1' header");
    if (stage_ != kEnded) return Error("the text ends before its 'end' line (cut short?)");
    ClusterSpec& spec = out_.spec;
    spec.graph = out_.graph.get();
    if (has_symbols_) {
      spec.input_symbols = std::move(symbols_);
    }
    return std::move(out_);
  }

 private:
  enum Stage { kHeader, kName, kInputs, kNodes, kOutputs, kEnded };

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line_, ": ", what));
  }

  static absl::Status Arity(const std::vector<absl::string_view>& t, size_t n, const char* form) {
    if (t.size() == n) return absl::OkStatus();
    return Invalid(absl::StrCat("expected '", form, "' (", n, " tokens), got ", t.size()));
  }

  absl::Status Line(const std::vector<absl::string_view>& t) {
    const absl::string_view word = t[0];
    if (stage_ == kHeader) {
      if (word != "braze-cluster") {
        return Invalid(absl::StrCat("not a cluster text: expected the header 'braze-cluster ",
                                    kClusterTextVersion, "', got '", word, "'"));
      }
      BRAZE_RETURN_IF_ERROR(Arity(t, 2, "braze-cluster VERSION"));
      BRAZE_ASSIGN_OR_RETURN(int64_t version, ParseInt(t[1], "version", 0, 1 << 30));
      if (version != kClusterTextVersion) {
        return Invalid(absl::StrCat("format version ", version,
                                    " is not supported (this build reads version ",
                                    kClusterTextVersion, ")"));
      }
      stage_ = kName;
      return absl::OkStatus();
    }
    if (stage_ == kName) {
      if (word != "name") return Invalid(absl::StrCat("expected 'name \"...\"', got '", word, "'"));
      BRAZE_RETURN_IF_ERROR(Arity(t, 2, "name \"NAME\""));
      BRAZE_ASSIGN_OR_RETURN(out_.spec.name, Unquote(t[1], "name"));
      stage_ = kInputs;
      return absl::OkStatus();
    }
    if (word == "input") {
      if (stage_ != kInputs) return Invalid("an input after the first node or output");
      return Input(t);
    }
    if (word == "node") {
      if (stage_ > kNodes) return Invalid("a node after the first output");
      stage_ = kNodes;
      return NodeLine(t);
    }
    if (word == "output") {
      stage_ = kOutputs;
      return Output(t);
    }
    if (word == "end") {
      BRAZE_RETURN_IF_ERROR(Arity(t, 1, "end"));
      stage_ = kEnded;
      return absl::OkStatus();
    }
    return Invalid(absl::StrCat("unknown line '", word, "' (input, node, output or end)"));
  }

  // input I DTYPE SHAPE [symbols CLASSES]
  absl::Status Input(const std::vector<absl::string_view>& t) {
    if (t.size() != 4 && t.size() != 6) {
      return Invalid(absl::StrCat("expected 'input I DTYPE SHAPE [symbols CLASSES]', got ",
                                  t.size(), " tokens"));
    }
    ClusterSpec& spec = out_.spec;
    const int64_t i = static_cast<int64_t>(spec.inputs.size());
    BRAZE_ASSIGN_OR_RETURN(int64_t index, ParseInt(t[1], "input index", 0, 1 << 30));
    if (index != i) return Invalid(absl::StrCat("input ", index, " where input ", i, " is next"));
    TensorType type;
    BRAZE_ASSIGN_OR_RETURN(type.dtype, ParseDType(t[2], "input dtype"));
    BRAZE_ASSIGN_OR_RETURN(type.shape, ParseShape(t[3], "input shape", 0));
    std::vector<int> symbols;
    if (t.size() == 6) {
      if (t[4] != "symbols") {
        return Invalid(absl::StrCat("expected 'symbols' after the shape, got '", t[4], "'"));
      }
      BRAZE_ASSIGN_OR_RETURN(symbols, ParseIntList<int>(t[5], "symbols", -1, 1 << 30));
      if (!symbols.empty() && symbols.size() != type.shape.size()) {
        return Invalid(absl::StrCat("symbols ", t[5], " for an input of rank ", type.shape.size()));
      }
      has_symbols_ = true;
    }
    Shape declared = type.shape;  // symbolic dims unknown, as the program's placeholder
    for (size_t d = 0; d < symbols.size(); ++d) {
      if (symbols[d] >= 0) declared[d] = kUnknownDim;
    }
    Graph& g = *out_.graph;
    Tensor p = g.AddNode(OpKind::kPlaceholder, {}, PlaceholderAttrs{type.dtype, declared},
                         absl::StrCat("input_", i));
    if (!g.status().ok()) return g.status();
    spec.inputs.push_back(p);
    spec.input_types.push_back(std::move(type));
    symbols_.push_back(std::move(symbols));
    return absl::OkStatus();
  }

  // aI (argument I) or nK.O (output O of node K, one of the first `num_nodes`).
  absl::StatusOr<Tensor> Ref(absl::string_view tok, size_t num_nodes) const {
    const ClusterSpec& spec = out_.spec;
    if (tok.size() >= 2 && tok[0] == 'a') {
      int64_t a = 0;
      if (!absl::SimpleAtoi(tok.substr(1), &a) || a < 0) {
        return Invalid(absl::StrCat("bad reference '", tok, "'"));
      }
      if (a >= static_cast<int64_t>(spec.inputs.size())) {
        return Invalid(
            absl::StrCat("'", tok, "' refers to argument ", a, " of ", spec.inputs.size()));
      }
      return spec.inputs[a];
    }
    const size_t dot = tok.find('.');
    int64_t k = 0, o = 0;
    if (tok.size() < 4 || tok[0] != 'n' || dot == absl::string_view::npos ||
        !absl::SimpleAtoi(tok.substr(1, dot - 1), &k) ||
        !absl::SimpleAtoi(tok.substr(dot + 1), &o) || k < 0 || o < 0) {
      return Invalid(absl::StrCat("bad reference '", tok, "' (aI or nK.O)"));
    }
    if (k >= static_cast<int64_t>(num_nodes)) {
      return Invalid(absl::StrCat("'", tok, "' refers to node ", k, ", not defined yet (",
                                  num_nodes, " node(s) before it)"));
    }
    const Node& node = out_.graph->node(spec.nodes[k]);
    if (o >= node.num_outputs()) {
      return Invalid(absl::StrCat("'", tok, "' refers to output ", o, " of node ", k, " (",
                                  node.op_name(), "), which has ", node.num_outputs()));
    }
    return Tensor(out_.graph.get(), spec.nodes[k], static_cast<int>(o));
  }

  // node K OP KEY=VALUE... in=REFS name="NAME"
  absl::Status NodeLine(const std::vector<absl::string_view>& t) {
    if (t.size() < 3) return Invalid("expected 'node K OP KEY=VALUE... in=REFS name=\"NAME\"'");
    ClusterSpec& spec = out_.spec;
    const size_t k = spec.nodes.size();
    BRAZE_ASSIGN_OR_RETURN(int64_t index, ParseInt(t[1], "node index", 0, 1 << 30));
    if (index != static_cast<int64_t>(k)) {
      return Invalid(absl::StrCat("node ", index, " where node ", k, " is next"));
    }
    const std::optional<OpKind> op = OpFromName(std::string_view(t[2].data(), t[2].size()));
    if (!op.has_value()) return Invalid(absl::StrCat("unknown op '", t[2], "'"));
    KeyValues kv;
    for (size_t i = 3; i < t.size(); ++i) BRAZE_RETURN_IF_ERROR(kv.Add(t[i]));
    BRAZE_ASSIGN_OR_RETURN(absl::string_view in, kv.Take("in"));
    BRAZE_ASSIGN_OR_RETURN(absl::string_view quoted_name, kv.Take("name"));
    BRAZE_ASSIGN_OR_RETURN(std::string name, Unquote(quoted_name, "name"));
    absl::StatusOr<Attrs> attrs = ParseAttrs(*op, kv);
    if (!attrs.ok()) {
      return Invalid(absl::StrCat("node ", k, " (", t[2], "): ", attrs.status().message()));
    }
    BRAZE_RETURN_IF_ERROR(kv.CheckAllTaken(OpName(*op)));
    std::vector<Tensor> inputs;
    if (!in.empty()) {
      for (absl::string_view ref : absl::StrSplit(in, ',')) {
        BRAZE_ASSIGN_OR_RETURN(Tensor t_in, Ref(ref, k));
        inputs.push_back(t_in);
      }
    }
    Graph& g = *out_.graph;
    const Tensor node = g.AddNode(*op, std::move(inputs), std::move(*attrs), name);
    if (!g.status().ok()) return g.status();
    spec.nodes.push_back(node.node_id());
    return absl::OkStatus();
  }

  // output J REF
  absl::Status Output(const std::vector<absl::string_view>& t) {
    BRAZE_RETURN_IF_ERROR(Arity(t, 3, "output J REF"));
    ClusterSpec& spec = out_.spec;
    const int64_t j = static_cast<int64_t>(spec.outputs.size());
    BRAZE_ASSIGN_OR_RETURN(int64_t index, ParseInt(t[1], "output index", 0, 1 << 30));
    if (index != j) return Invalid(absl::StrCat("output ", index, " where output ", j, " is next"));
    BRAZE_ASSIGN_OR_RETURN(Tensor ref, Ref(t[2], spec.nodes.size()));
    spec.outputs.push_back(ref);
    return absl::OkStatus();
  }

  absl::string_view text_, source_;
  int line_ = 0;
  Stage stage_ = kHeader;
  RebuiltCluster out_;
  bool has_symbols_ = false;
  std::vector<std::vector<int>> symbols_;
};

}  // namespace

absl::StatusOr<RebuiltCluster> ClusterFromText(std::string_view text,
                                               std::string_view source_name) {
  return Parser(absl::string_view(text.data(), text.size()),
                absl::string_view(source_name.data(), source_name.size()))
      .Parse();
}

}  // namespace braze
