#include "braze/dtype.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
// Eigen's bfloat16 and half: header-only, round-to-nearest-even conversions with NaN,
// infinities and subnormals handled (tested against Halide's and F16C's, all 65536
// patterns, in test/lower/float16_test.cc). Only this file includes them.
#include <Eigen/Core>

namespace braze {

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kBool:
      return 1;
    case DType::kBF16:
    case DType::kF16:
      return 2;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kI32:
      return "i32";
    case DType::kBool:
      return "bool";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || Is16BitFloat(dtype);
}

bool Is16BitFloat(DType dtype) { return dtype == DType::kBF16 || dtype == DType::kF16; }

DType ComputeDType(DType dtype) { return Is16BitFloat(dtype) ? DType::kF32 : dtype; }

uint16_t FloatToBF16Bits(float v) { return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(v)); }

float BF16BitsToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

uint16_t FloatToF16Bits(float v) { return Eigen::numext::bit_cast<uint16_t>(Eigen::half(v)); }

float F16BitsToFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;  // unknown, or past int64
  }
  return n;
}

bool IsFullyDefined(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
}

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    // -1 is unknown; a dim below it is never valid, and is shown as it is ("[?,?]" hid
    // a Reshape target's -3).
    s += shape[i] == kUnknownDim ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

std::string TypeString(const TensorType& type) {
  return absl::StrCat(DTypeName(type.dtype), ShapeString(type.shape));
}

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right, as numpy does.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da < 0 || db < 0) {
      // One unknown, the other a known size != 1: the known size wins (the feed is
      // checked at run time against the concrete shapes).
      out[i] = da < 0 ? db : da;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "incompatible shapes for broadcasting: ", ShapeString(a), " and ", ShapeString(b)));
    }
  }
  return out;
}

bool ShapeMatches(const Shape& pattern, const Shape& concrete) {
  if (pattern.size() != concrete.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] >= 0 && pattern[i] != concrete[i]) return false;
  }
  return true;
}

}  // namespace braze
