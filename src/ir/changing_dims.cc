#include "ir/changing_dims.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace braze {
namespace {

bool SameKinds(const std::vector<TensorType>& a, const std::vector<TensorType>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype != b[i].dtype || a[i].shape.size() != b[i].shape.size()) return false;
  }
  return true;
}

}  // namespace

std::string ChangingDims(const std::vector<std::vector<TensorType>>& signatures,
                         const std::string& noun) {
  if (signatures.empty()) return "";
  constexpr size_t kShown = 8;
  const std::vector<TensorType>& first = signatures.front();
  std::vector<std::string> parts;
  bool other_kinds = false;
  for (const auto& s : signatures) other_kinds |= !SameKinds(s, first);
  for (size_t i = 0; i < first.size(); ++i) {
    for (size_t d = 0; d < first[i].shape.size(); ++d) {
      std::vector<int64_t> values;
      for (const auto& s : signatures) {
        if (!SameKinds(s, first)) continue;
        if (std::find(values.begin(), values.end(), s[i].shape[d]) == values.end()) {
          values.push_back(s[i].shape[d]);
        }
      }
      if (values.size() < 2) continue;
      std::vector<std::string> shown;
      for (size_t k = 0; k < values.size() && k < kShown; ++k) {
        shown.push_back(values[k] < 0 ? "?" : absl::StrCat(values[k]));
      }
      parts.push_back(absl::StrCat(noun, " ", i, " dim ", d, " (", absl::StrJoin(shown, ", "),
                                   values.size() > kShown ? ", ...)" : ")"));
    }
  }
  if (other_kinds) parts.push_back(absl::StrCat(noun, " dtypes or ranks"));
  return parts.empty() ? absl::StrCat("no ", noun, " dims (the same signature again)")
                       : absl::StrJoin(parts, ", ");
}

std::string BadValueShape(const Shape& shape) {
  // Rank 0 with no values: only a moved-from HostTensor is that.
  if (shape.empty()) return "shape [] holds no values (a moved-from HostTensor)";
  return absl::StrCat("shape [", absl::StrJoin(shape, ","),
                      "] has a negative dim or a byte size past int64");
}

}  // namespace braze
