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

// kBF16 and kF16 (bfloat16 and IEEE binary16) are stored as their 16 bits; every op
// computes them in f32 and rounds its result once (docs/MIXED_PRECISION.md).
enum class DType : uint8_t { kF32, kF64, kI32, kBool, kBF16, kF16 };

// Bytes per element; bool is stored as one byte holding 0 or 1.
size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);  // "f32", "f64", "i32", "bool", "bf16", "f16"
bool IsFloating(DType dtype);        // f32, f64, bf16, f16
bool Is16BitFloat(DType dtype);      // bf16, f16
// The type a 16-bit float computes in (f32); any other dtype is its own.
DType ComputeDType(DType dtype);

// Conversions between f32 and the 16-bit floats: round to nearest, ties to even; NaN
// stays NaN (quiet), infinities and signed zeros are kept, subnormals are exact where
// representable and rounded where not, overflow gives infinity. Widening is exact.
uint16_t FloatToBF16Bits(float v);
float BF16BitsToFloat(uint16_t bits);
uint16_t FloatToF16Bits(float v);
float F16BitsToFloat(uint16_t bits);

// The element types of kBF16 and kF16: the bits, with conversions through f32 (a double
// rounds to f32 first, as Cast from f64 does).
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(double v) : bits(FloatToBF16Bits(static_cast<float>(v))) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 x;
    x.bits = b;
    return x;
  }
  explicit operator float() const { return BF16BitsToFloat(bits); }
  explicit operator double() const { return BF16BitsToFloat(bits); }
};
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(double v) : bits(FloatToF16Bits(static_cast<float>(v))) {}
  static Float16 FromBits(uint16_t b) {
    Float16 x;
    x.bits = b;
    return x;
  }
  explicit operator float() const { return F16BitsToFloat(bits); }
  explicit operator double() const { return F16BitsToFloat(bits); }
};

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
template <>
struct CType<DType::kBF16> {
  using type = BFloat16;
};
template <>
struct CType<DType::kF16> {
  using type = Float16;
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
template <>
constexpr DType DTypeOf<BFloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType DTypeOf<Float16>() {
  return DType::kF16;
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
