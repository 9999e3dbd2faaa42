// Tokens and values of a cluster's text (cluster_text_parse.h).
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/charconv.h"
#include "absl/strings/numbers.h"
#include "lower/cluster_text_parse.h"

namespace braze {
namespace cluster_text {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

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

}  // namespace cluster_text
}  // namespace braze
