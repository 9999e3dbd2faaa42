// Element types and shapes. Ranks are always known; a dim of -1 is unknown (only
// placeholders introduce unknown dims; Session::Run resolves them from the feeds).
#ifndef BRAZE_DTYPE_H_
#define BRAZE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace braze {

enum class DType : uint8_t { kF32, kF64, kI32, kBool };

// Bytes per element; bool is stored as one byte holding 0 or 1.
size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);  // "f32", "f64", "i32", "bool"
bool IsFloating(DType dtype);

// The C++ type each DType is stored as.
template <DType D>
struct CType;
template <>
struct CType<DType::kF32> {
  using type = float;
};
template <>
struct CType<DType::kF64> {
  using type = double;
};
template <>
struct CType<DType::kI32> {
  using type = int32_t;
};
template <>
struct CType<DType::kBool> {
  using type = uint8_t;
};

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType DTypeOf<bool>() {
  return DType::kBool;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kBool;
}

using Shape = std::vector<int64_t>;

constexpr int64_t kUnknownDim = -1;

// Product of dims; -1 when any dim is unknown. A scalar (rank 0) has 1 element.
int64_t NumElements(const Shape& shape);
bool IsFullyDefined(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2,?,3]"
// Numpy broadcasting of two shapes. Unknown dims broadcast with 1 and with each other.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// True when `concrete` (fully defined) matches `pattern` whose -1 dims match anything.
bool ShapeMatches(const Shape& pattern, const Shape& concrete);

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};
std::string TypeString(const TensorType& type);  // "f32[2,3]"

}  // namespace braze

#endif  // BRAZE_DTYPE_H_
