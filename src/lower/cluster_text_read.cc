// Text -> ClusterSpec: ClusterFromText (cluster_text.h has the format; the writer,
// ClusterToText, is in cluster_text.cc). The reader checks every token before it reaches
// the graph and lets Graph::AddNode's shape inference judge the rest, so a hand-edited or
// cut-short file is an error naming its line, never a crash. In order: tokens and
// values, the attributes of each op (one case per op, -Werror=switch), and the Parser
// that reads the lines into a fresh graph.
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/charconv.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "braze/status.h"
#include "ir/window_geometry.h"
#include "lower/cluster_text.h"

namespace braze {
namespace {

// Bound on every dim, padding, slice bound and depth read, and on a shape's element
// count: far above any real tensor, low enough that no sum or product the shape
// inference forms overflows.
constexpr int64_t kMaxExtent = int64_t{1} << 48;

absl::Status Invalid(std::string what) { return absl::InvalidArgumentError(std::move(what)); }

// ---- Tokens and values. Errors here say what is wrong; the caller adds the source and
// line. ----

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// A line's tokens: runs of non-blank characters, where a double quote starts a quoted
// part that may hold blanks and `#`; `#` elsewhere starts a comment.
absl::StatusOr<std::vector<absl::string_view>> Tokenize(absl::string_view line) {
  std::vector<absl::string_view> tokens;
  size_t i = 0;
  while (i < line.size()) {
    if (IsSpace(line[i])) {
      ++i;
      continue;
    }
    if (line[i] == '#') break;
    const size_t start = i;
    bool quoted = false;
    while (i < line.size()) {
      const char c = line[i];
      if (quoted) {
        if (c == '\\') {
          i += 2;
          continue;
        }
        if (c == '"') quoted = false;
        ++i;
        continue;
      }
      if (IsSpace(c) || c == '#') break;
      if (c == '"') quoted = true;
      ++i;
    }
    if (quoted || i > line.size()) return Invalid("a quoted string is not closed");
    tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> Unquote(absl::string_view tok, absl::string_view what) {
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') {
    return Invalid(absl::StrCat(what, " must be a double-quoted string, got '", tok, "'"));
  }
  std::string out;
  for (size_t i = 1; i + 1 < tok.size(); ++i) {
    char c = tok[i];
    if (c == '"') return Invalid(absl::StrCat(what, ": a quote inside ", tok, " is not escaped"));
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 2 >= tok.size()) return Invalid(absl::StrCat(what, ": a bad escape in ", tok));
    c = tok[++i];
    switch (c) {
      case '"':
      case '\\':
        out.push_back(c);
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'x': {
        const int hi = i + 2 < tok.size() - 1 ? HexDigit(tok[i + 1]) : -1;
        const int lo = hi >= 0 ? HexDigit(tok[i + 2]) : -1;
        if (lo < 0) return Invalid(absl::StrCat(what, ": a bad \\x escape in ", tok));
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        break;
      }
      default:
        return Invalid(absl::StrCat(what, ": unknown escape \\", std::string(1, c), " in ", tok));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseInt(absl::string_view tok, absl::string_view what, int64_t lo,
                                 int64_t hi) {
  int64_t v = 0;
  if (tok.empty() || !absl::SimpleAtoi(tok, &v)) {
    return Invalid(absl::StrCat(what, ": '", tok, "' is not an integer"));
  }
  if (v < lo || v > hi) {
    return Invalid(absl::StrCat(what, ": ", v, " is out of range [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<uint64_t> ParseU64(absl::string_view tok, absl::string_view what) {
  uint64_t v = 0;
  if (tok.empty() || !absl::SimpleAtoi(tok, &v)) {
    return Invalid(absl::StrCat(what, ": '", tok, "' is not an unsigned 64-bit integer"));
  }
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view tok, absl::string_view what) {
  if (tok == "1" || tok == "true") return true;
  if (tok == "0" || tok == "false") return false;
  return Invalid(absl::StrCat(what, ": '", tok, "' is not 0 or 1"));
}

// A C99 hex float (what %a writes), a decimal, inf or nan; with an optional '-'.
absl::StatusOr<double> ParseDouble(absl::string_view tok, absl::string_view what) {
  absl::string_view rest = tok;
  const bool negative = !rest.empty() && rest.front() == '-';
  if (negative) rest.remove_prefix(1);
  absl::chars_format format = absl::chars_format::general;
  if (rest.size() > 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X')) {
    rest.remove_prefix(2);
    format = absl::chars_format::hex;
  }
  double v = 0;
  const absl::from_chars_result r =
      rest.empty() || rest.front() == '-' || rest.front() == '+'
          ? absl::from_chars_result{rest.data(), std::errc::invalid_argument}
          : absl::from_chars(rest.data(), rest.data() + rest.size(), v, format);
  if (r.ec != std::errc() || r.ptr != rest.data() + rest.size()) {
    return Invalid(absl::StrCat(what, ": '", tok, "' is not a number (or out of range)"));
  }
  return negative ? -v : v;
}

absl::StatusOr<DType> ParseDType(absl::string_view tok, absl::string_view what) {
  for (DType d : {DType::kF32, DType::kF64, DType::kI32, DType::kBool, DType::kBF16, DType::kF16}) {
    if (tok == DTypeName(d)) return d;
  }
  return Invalid(
      absl::StrCat(what, ": unknown dtype '", tok, "' (f32, f64, i32, bool, bf16, f16)"));
}

// "[1,2,3]" -> its items ("[]": none).
absl::StatusOr<std::vector<absl::string_view>> ListItems(absl::string_view tok,
                                                         absl::string_view what) {
  if (tok.size() < 2 || tok.front() != '[' || tok.back() != ']') {
    return Invalid(absl::StrCat(what, ": expected a [..] list, got '", tok, "'"));
  }
  tok = tok.substr(1, tok.size() - 2);
  if (tok.empty()) return std::vector<absl::string_view>();
  return std::vector<absl::string_view>(absl::StrSplit(tok, ','));
}

template <typename T>
absl::StatusOr<std::vector<T>> ParseIntList(absl::string_view tok, absl::string_view what,
                                            int64_t lo, int64_t hi) {
  BRAZE_ASSIGN_OR_RETURN(std::vector<absl::string_view> items, ListItems(tok, what));
  std::vector<T> out;
  for (absl::string_view item : items) {
    BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(item, what, lo, hi));
    out.push_back(static_cast<T>(v));
  }
  return out;
}

// A shape: dims >= `min_dim` (-1 where unknown dims are allowed), at most kMaxExtent
// elements over its known dims.
absl::StatusOr<Shape> ParseShape(absl::string_view tok, absl::string_view what, int64_t min_dim) {
  BRAZE_ASSIGN_OR_RETURN(Shape shape, ParseIntList<int64_t>(tok, what, min_dim, kMaxExtent));
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) continue;
    if (elements > kMaxExtent / d) {
      return Invalid(absl::StrCat(what, ": ", tok, " has too many elements"));
    }
    elements *= d;
  }
  return shape;
}

// "f32[2,3]:<hex bytes>" -> the tensor.
absl::StatusOr<std::shared_ptr<const HostTensor>> ParseValue(absl::string_view tok,
                                                             absl::string_view what) {
  const size_t open = tok.find('['), close = tok.find("]:");
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return Invalid(absl::StrCat(what, ": expected DTYPE[SHAPE]:HEX, got '", tok.substr(0, 40),
                                tok.size() > 40 ? "...'" : "'"));
  }
  BRAZE_ASSIGN_OR_RETURN(DType dtype, ParseDType(tok.substr(0, open), what));
  BRAZE_ASSIGN_OR_RETURN(Shape shape, ParseShape(tok.substr(open, close + 1 - open), what, 0));
  const absl::string_view hex = tok.substr(close + 2);
  if (hex.size() % 2 != 0) return Invalid(absl::StrCat(what, ": an odd number of hex digits"));
  const size_t num_bytes = hex.size() / 2;
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;  // ParseShape bounded the product
  if (static_cast<uint64_t>(elements) * SizeOf(dtype) != num_bytes) {
    return Invalid(absl::StrCat(what, ": ", DTypeName(dtype), ShapeString(shape), " holds ",
                                static_cast<uint64_t>(elements) * SizeOf(dtype),
                                " bytes, the hex gives ", num_bytes));
  }
  auto value = std::make_shared<HostTensor>(dtype, shape);
  auto* bytes = static_cast<unsigned char*>(value->raw_data());
  for (size_t i = 0; i < num_bytes; ++i) {
    const int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return Invalid(absl::StrCat(what, ": '", hex.substr(2 * i, 2), "' is not a hex byte"));
    }
    bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
    if (dtype == DType::kBool && bytes[i] > 1) {
      return Invalid(absl::StrCat(what, ": a bool byte must be 00 or 01"));
    }
  }
  return std::shared_ptr<const HostTensor>(std::move(value));
}

// A node line's KEY=VALUE tokens; each is taken once, and what is left over is unknown.
class KeyValues {
 public:
  absl::Status Add(absl::string_view tok) {
    const size_t eq = tok.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Invalid(absl::StrCat("expected KEY=VALUE, got '", tok, "'"));
    }
    if (!values_.emplace(std::string(tok.substr(0, eq)), tok.substr(eq + 1)).second) {
      return Invalid(absl::StrCat("key '", tok.substr(0, eq), "' given twice"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<absl::string_view> Take(const std::string& key) {
    auto it = values_.find(key);
    if (it == values_.end()) return Invalid(absl::StrCat("missing ", key, "="));
    absl::string_view v = it->second;
    values_.erase(it);
    return v;
  }
  // OK when every key was taken.
  absl::Status CheckAllTaken(const char* op) const {
    if (values_.empty()) return absl::OkStatus();
    return Invalid(absl::StrCat("unknown key '", values_.begin()->first, "' for ", op));
  }

 private:
  std::map<std::string, absl::string_view> values_;
};

#define BRAZE_TAKE(var, key) BRAZE_ASSIGN_OR_RETURN(absl::string_view var, kv.Take(key))

// The fields WindowText (cluster_text.cc) writes.
absl::StatusOr<Window2D> ParseWindow(KeyValues& kv) {
  constexpr int64_t kMaxWindow = 1 << 20;
  BRAZE_TAKE(strides, "strides");
  BRAZE_TAKE(dilations, "dilations");
  BRAZE_TAKE(padding, "padding");
  BRAZE_TAKE(pads, "pads");
  BRAZE_TAKE(format, "format");
  Window2D w;
  BRAZE_ASSIGN_OR_RETURN(std::vector<int> s, ParseIntList<int>(strides, "strides", 0, kMaxWindow));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int> d,
                         ParseIntList<int>(dilations, "dilations", 0, kMaxWindow));
  BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> p,
                         ParseIntList<int64_t>(pads, "pads", -kMaxWindow, kMaxWindow));
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) {
    return Invalid("strides and dilations need 2 values, pads 4");
  }
  w.stride_h = s[0];
  w.stride_w = s[1];
  w.dilation_h = d[0];
  w.dilation_w = d[1];
  w.pad_top = p[0];
  w.pad_bottom = p[1];
  w.pad_left = p[2];
  w.pad_right = p[3];
  if (padding == "VALID") {
    w.padding = Padding::kValid;
  } else if (padding == "SAME") {
    w.padding = Padding::kSame;
  } else if (padding == "EXPLICIT") {
    w.padding = Padding::kExplicit;
  } else {
    return Invalid(absl::StrCat("padding: expected VALID, SAME or EXPLICIT, got '", padding, "'"));
  }
  if (format == "NHWC") {
    w.format = DataFormat::kNHWC;
  } else if (format == "NCHW") {
    w.format = DataFormat::kNCHW;
  } else {
    return Invalid(absl::StrCat("format: expected NHWC or NCHW, got '", format, "'"));
  }
  return w;
}

// The attributes of `op` from its keys (the struct graph.h gives the op).
absl::StatusOr<Attrs> ParseAttrs(OpKind op, KeyValues& kv) {
  constexpr int64_t kMaxInt = 1 << 30;
  switch (op) {
    case OpKind::kPlaceholder: {
      BRAZE_TAKE(dtype, "dtype");
      BRAZE_TAKE(shape, "shape");
      PlaceholderAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kConst: {
      BRAZE_TAKE(value, "value");
      ConstAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.value, ParseValue(value, "value"));
      return Attrs(std::move(a));
    }
    case OpKind::kVariable: {
      BRAZE_TAKE(dtype, "dtype");
      BRAZE_TAKE(shape, "shape");
      BRAZE_TAKE(initial, "initial_value");
      VariableAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      if (initial != "none") {
        BRAZE_ASSIGN_OR_RETURN(a.initial_value, ParseValue(initial, "initial_value"));
      }
      return Attrs(std::move(a));
    }
    case OpKind::kAssign:
    case OpKind::kAssignAdd:
    case OpKind::kAssignSub:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSquare:
    case OpKind::kReciprocal:
    case OpKind::kSign:
    case OpKind::kFloor:
    case OpKind::kErf:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPow:
    case OpKind::kGreater:
    case OpKind::kLess:
    case OpKind::kEqual:
    case OpKind::kSelect:
      return Attrs(NoAttrs{});
    case OpKind::kCast: {
      BRAZE_TAKE(dtype, "dtype");
      CastAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
    case OpKind::kMin: {
      BRAZE_TAKE(axes, "axes");
      BRAZE_TAKE(keep_dims, "keep_dims");
      ReduceAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.axes, ParseIntList<int>(axes, "axes", -kMaxInt, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(a.keep_dims, ParseBool(keep_dims, "keep_dims"));
      return Attrs(std::move(a));
    }
    case OpKind::kArgMax: {
      BRAZE_TAKE(axis, "axis");
      ArgMaxAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kMatMul:
    case OpKind::kBatchMatMul: {
      BRAZE_TAKE(ta, "transpose_a");
      BRAZE_TAKE(tb, "transpose_b");
      MatMulAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.transpose_a, ParseBool(ta, "transpose_a"));
      BRAZE_ASSIGN_OR_RETURN(a.transpose_b, ParseBool(tb, "transpose_b"));
      return Attrs(a);
    }
    case OpKind::kReshape: {
      BRAZE_TAKE(shape, "shape");
      ReshapeAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -kMaxExtent));
      return Attrs(std::move(a));
    }
    case OpKind::kTranspose: {
      BRAZE_TAKE(perm, "perm");
      TransposeAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.perm, ParseIntList<int>(perm, "perm", -kMaxInt, kMaxInt));
      return Attrs(std::move(a));
    }
    case OpKind::kBroadcastTo: {
      BRAZE_TAKE(shape, "shape");
      BroadcastToAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kConcat: {
      BRAZE_TAKE(axis, "axis");
      ConcatAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kSlice: {
      BRAZE_TAKE(begin, "begin");
      BRAZE_TAKE(size, "size");
      SliceAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.begin,
                             ParseIntList<int64_t>(begin, "begin", -kMaxExtent, kMaxExtent));
      BRAZE_ASSIGN_OR_RETURN(a.size, ParseIntList<int64_t>(size, "size", -kMaxExtent, kMaxExtent));
      return Attrs(std::move(a));
    }
    case OpKind::kPad: {
      BRAZE_TAKE(paddings, "paddings");
      BRAZE_TAKE(value, "value");
      PadAttrs a;
      BRAZE_ASSIGN_OR_RETURN(std::vector<absl::string_view> pairs, ListItems(paddings, "paddings"));
      for (absl::string_view pair : pairs) {
        const size_t colon = pair.find(':');
        if (colon == absl::string_view::npos) {
          return Invalid(absl::StrCat("paddings: expected LO:HI, got '", pair, "'"));
        }
        BRAZE_ASSIGN_OR_RETURN(
            int64_t lo, ParseInt(pair.substr(0, colon), "paddings", -kMaxExtent, kMaxExtent));
        BRAZE_ASSIGN_OR_RETURN(
            int64_t hi, ParseInt(pair.substr(colon + 1), "paddings", -kMaxExtent, kMaxExtent));
        a.paddings.emplace_back(lo, hi);
      }
      BRAZE_ASSIGN_OR_RETURN(a.value, ParseDouble(value, "value"));
      return Attrs(std::move(a));
    }
    case OpKind::kConv2D:
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropFilter: {
      Conv2DAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.window, ParseWindow(kv));
      BRAZE_TAKE(shape, "shape");
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kMaxPool:
    case OpKind::kMaxPoolGrad:
    case OpKind::kMaxPoolGradGrad:
    case OpKind::kAvgPool:
    case OpKind::kAvgPoolGrad: {
      Pool2DAttrs a;
      BRAZE_TAKE(size, "size");
      BRAZE_ASSIGN_OR_RETURN(std::vector<int64_t> hw,
                             ParseIntList<int64_t>(size, "size", 0, kMaxInt));
      if (hw.size() != 2) return Invalid("size: expected 2 values");
      a.size_h = hw[0];
      a.size_w = hw[1];
      BRAZE_ASSIGN_OR_RETURN(a.window, ParseWindow(kv));
      BRAZE_TAKE(shape, "shape");
      BRAZE_ASSIGN_OR_RETURN(a.shape, ParseShape(shape, "shape", -1));
      return Attrs(std::move(a));
    }
    case OpKind::kOneHot: {
      BRAZE_TAKE(depth, "depth");
      BRAZE_TAKE(on, "on_value");
      BRAZE_TAKE(off, "off_value");
      BRAZE_TAKE(dtype, "dtype");
      OneHotAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.depth, ParseInt(depth, "depth", -kMaxExtent, kMaxExtent));
      BRAZE_ASSIGN_OR_RETURN(a.on_value, ParseDouble(on, "on_value"));
      BRAZE_ASSIGN_OR_RETURN(a.off_value, ParseDouble(off, "off_value"));
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kGather: {
      BRAZE_TAKE(axis, "axis");
      GatherAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      return Attrs(a);
    }
    case OpKind::kUnsortedSegmentSum: {
      BRAZE_TAKE(axis, "axis");
      BRAZE_TAKE(segments, "num_segments");
      SegmentSumAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      BRAZE_ASSIGN_OR_RETURN(a.num_segments,
                             ParseInt(segments, "num_segments", -kMaxExtent, kMaxExtent));
      return Attrs(a);
    }
    case OpKind::kIota: {
      BRAZE_TAKE(axis, "axis");
      BRAZE_TAKE(dtype, "dtype");
      IotaAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t v, ParseInt(axis, "axis", -kMaxInt, kMaxInt));
      a.axis = static_cast<int>(v);
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kAttention:
    case OpKind::kAttentionLogSumExp:
    case OpKind::kAttentionGradQ:
    case OpKind::kAttentionGradK:
    case OpKind::kAttentionGradV: {
      BRAZE_TAKE(causal, "causal");
      BRAZE_TAKE(scale, "scale");
      BRAZE_TAKE(dropout, "dropout");
      BRAZE_TAKE(seed, "seed");
      BRAZE_TAKE(op_key, "op_key");
      AttentionAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.causal, ParseBool(causal, "causal"));
      BRAZE_ASSIGN_OR_RETURN(a.scale, ParseDouble(scale, "scale"));
      BRAZE_ASSIGN_OR_RETURN(a.dropout, ParseDouble(dropout, "dropout"));
      BRAZE_ASSIGN_OR_RETURN(a.seed, ParseU64(seed, "seed"));
      BRAZE_ASSIGN_OR_RETURN(a.op_key, ParseU64(op_key, "op_key"));
      return Attrs(a);
    }
    case OpKind::kRandomUniform:
    case OpKind::kRandomNormal: {
      BRAZE_TAKE(seed, "seed");
      BRAZE_TAKE(op_key, "op_key");
      BRAZE_TAKE(dtype, "dtype");
      RandomAttrs a;
      BRAZE_ASSIGN_OR_RETURN(a.seed, ParseU64(seed, "seed"));
      BRAZE_ASSIGN_OR_RETURN(a.op_key, ParseU64(op_key, "op_key"));
      BRAZE_ASSIGN_OR_RETURN(a.dtype, ParseDType(dtype, "dtype"));
      return Attrs(a);
    }
    case OpKind::kAllReduce:  // dp (issue 37)
    case OpKind::kBroadcast:
    case OpKind::kAllGather: {
      BRAZE_TAKE(world_size, "world_size");
      BRAZE_TAKE(rank, "rank");
      BRAZE_TAKE(root, "root");
      CollectiveAttrs a;
      BRAZE_ASSIGN_OR_RETURN(int64_t w, ParseInt(world_size, "world_size", 1, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(int64_t r, ParseInt(rank, "rank", 0, kMaxInt));
      BRAZE_ASSIGN_OR_RETURN(int64_t o, ParseInt(root, "root", 0, kMaxInt));
      a.world_size = static_cast<int>(w);
      a.rank = static_cast<int>(r);
      a.root = static_cast<int>(o);
      return Attrs(a);
    }
    case OpKind::kCond:  // cf (issue 40): never in a cluster, so never in its text
    case OpKind::kWhile:
    case OpKind::kScan:
      return Invalid(absl::StrCat(OpName(op), " (control flow) is never in a cluster's text"));
    case OpKind::kHostCall:
      return Invalid("a HostCall (a user's C++ function) cannot be rebuilt from text");
  }
  return Invalid("unknown op");
}

#undef BRAZE_TAKE

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
