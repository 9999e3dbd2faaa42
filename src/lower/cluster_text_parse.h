// The pieces ClusterFromText (cluster_text_read.cc) reads a cluster's text with: its
// tokens and values (cluster_text_values.cc) and the attributes of each op
// (cluster_text_attrs.cc). Errors here say what is wrong; the reader adds the source and
// line. Internal to src/lower.
#ifndef BRAZE_LOWER_CLUSTER_TEXT_PARSE_H_
#define BRAZE_LOWER_CLUSTER_TEXT_PARSE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "braze/graph.h"
#include "braze/host_tensor.h"
#include "braze/status.h"

namespace braze {
namespace cluster_text {

// Bound on every dim, padding, slice bound and depth read, and on a shape's element
// count: far above any real tensor, low enough that no sum or product the shape
// inference forms overflows.
constexpr int64_t kMaxExtent = int64_t{1} << 48;

inline absl::Status Invalid(std::string what) {
  return absl::InvalidArgumentError(std::move(what));
}

// ---- Tokens and values (cluster_text_values.cc). ----

// A line's tokens: runs of non-blank characters, where a double quote starts a quoted
// part that may hold blanks and `#`; `#` elsewhere starts a comment.
absl::StatusOr<std::vector<absl::string_view>> Tokenize(absl::string_view line);

// A double-quoted string -> its text (escapes: \" \\ \n \t \xHH).
absl::StatusOr<std::string> Unquote(absl::string_view tok, absl::string_view what);

// An integer in [lo, hi].
absl::StatusOr<int64_t> ParseInt(absl::string_view tok, absl::string_view what, int64_t lo,
                                 int64_t hi);
absl::StatusOr<uint64_t> ParseU64(absl::string_view tok, absl::string_view what);
// 0, 1, false or true.
absl::StatusOr<bool> ParseBool(absl::string_view tok, absl::string_view what);

// A C99 hex float (what %a writes), a decimal, inf or nan; with an optional '-'.
absl::StatusOr<double> ParseDouble(absl::string_view tok, absl::string_view what);

absl::StatusOr<DType> ParseDType(absl::string_view tok, absl::string_view what);

// "[1,2,3]" -> its items ("[]": none).
absl::StatusOr<std::vector<absl::string_view>> ListItems(absl::string_view tok,
                                                         absl::string_view what);

// "[1,2,3]" -> its integers, each in [lo, hi].
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
absl::StatusOr<Shape> ParseShape(absl::string_view tok, absl::string_view what, int64_t min_dim);

// "f32[2,3]:<hex bytes>" -> the tensor.
absl::StatusOr<std::shared_ptr<const HostTensor>> ParseValue(absl::string_view tok,
                                                             absl::string_view what);

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

// ---- Attributes (cluster_text_attrs.cc). ----

// The attributes of `op` from its keys (the struct graph.h gives the op).
absl::StatusOr<Attrs> ParseAttrs(OpKind op, KeyValues& kv);

}  // namespace cluster_text
}  // namespace braze

#endif  // BRAZE_LOWER_CLUSTER_TEXT_PARSE_H_
