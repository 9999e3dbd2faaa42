#include "braze/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>

#include "absl/strings/str_cat.h"

namespace braze {
namespace {

std::shared_ptr<uint8_t> Allocate(size_t bytes) {
  // 64-byte alignment suits AVX-512 loads and lets Halide wrap the memory directly.
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();  // as operator new: Run turns it into a Status
  std::memset(p, 0, rounded);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

// The element count, or -1 when a dim is negative or the byte size overflows an int64
// (the count would wrap: {2^32, 2^32} gave 0 elements and was read past its end).
int64_t CheckedNumElements(DType dtype, const Shape& shape) {
  const int64_t n = NumElements(shape);
  const int64_t size = static_cast<int64_t>(SizeOf(dtype));
  // SizeOf is 0 for a value outside the DType enum: an impossible tensor too.
  return size == 0 || n > std::numeric_limits<int64_t>::max() / size ? -1 : n;
}

template <typename T>
T SaturatingCast(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
    return std::numeric_limits<T>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(v);
}

}  // namespace

HostTensor::HostTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  num_elements_ = CheckedNumElements(dtype_, shape_);
  data_ = Allocate(num_bytes());
}

HostTensor::HostTensor(const HostTensor& other)
    : dtype_(other.dtype_), shape_(other.shape_), num_elements_(other.num_elements_) {
  data_ = Allocate(num_bytes());
  std::memcpy(data_.get(), other.data_.get(), num_bytes());
}

HostTensor& HostTensor::operator=(const HostTensor& other) {
  if (this != &other) *this = HostTensor(other);
  return *this;
}

HostTensor::HostTensor(HostTensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      num_elements_(other.num_elements_),
      data_(std::move(other.data_)) {
  other.LeaveEmpty();
}

HostTensor& HostTensor::operator=(HostTensor&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    num_elements_ = other.num_elements_;
    data_ = std::move(other.data_);
    other.LeaveEmpty();
  }
  return *this;
}

// The defaulted moves left the element count behind a null buffer: a copy, a Const or a
// feed of the moved-from tensor read through null. Now it holds no values, and its
// buffer is a zero block nobody owns (a move must not allocate), so even an unchecked
// data<T>()[0] stays inside memory.
void HostTensor::LeaveEmpty() noexcept {
  alignas(64) static uint8_t no_values[64];
  shape_.clear();
  num_elements_ = -1;
  data_ = std::shared_ptr<uint8_t>(std::shared_ptr<uint8_t>(), no_values);
}

HostTensor HostTensor::Filled(DType dtype, Shape shape, double value) {
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, value);
  return t;
}

namespace {

// Element i of a floating tensor moved one value of its dtype toward `target`.
void StepToward(HostTensor& t, int64_t i, double target) {
  const double x = t.GetDouble(i);
  switch (t.dtype()) {
    case DType::kF32:
      t.data<float>()[i] = std::nextafter(t.data<float>()[i], static_cast<float>(target));
      return;
    case DType::kF64:
      t.data<double>()[i] = std::nextafter(x, target);
      return;
    default: {  // bf16, f16: sign and magnitude bits
      uint16_t& bits = static_cast<uint16_t*>(t.raw_data())[i];
      const bool up = target > x;
      if (x == 0) {
        bits = up ? 0x0001 : 0x8001;
      } else if ((x > 0) == up) {
        ++bits;  // away from zero
      } else {
        --bits;
      }
    }
  }
}

}  // namespace

HostTensor HostTensor::RandomUniform(DType dtype, Shape shape, uint64_t seed, double lo,
                                     double hi) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  const bool floating = IsFloating(dtype);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = u(rng);
    if (dtype == DType::kI32) v = std::floor(v);
    if (dtype == DType::kBool) v = (rng() & 1) ? 1 : 0;
    t.SetDouble(i, v);
    // Rounded to the dtype, a draw may be hi itself (bf16: one in 500 draws of [0, 1)
    // were 1) or below lo: the nearest value of the dtype inside [lo, hi) instead.
    if (floating && lo < hi) {
      while (t.GetDouble(i) >= hi) StepToward(t, i, lo);
      while (t.GetDouble(i) < lo && t.GetDouble(i) < hi) StepToward(t, i, hi);
      if (t.GetDouble(i) >= hi) StepToward(t, i, lo);  // no value of the dtype inside
    }
  }
  return t;
}

HostTensor HostTensor::RandomNormal(DType dtype, Shape shape, uint64_t seed, double mean,
                                    double stddev) {
  HostTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(mean, stddev);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, n(rng));
  return t;
}

double HostTensor::GetDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kF32:
      return data<float>()[i];
    case DType::kF64:
      return data<double>()[i];
    case DType::kI32:
      return data<int32_t>()[i];
    case DType::kBool:
      return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kBF16:
      return BF16BitsToFloat(data<BFloat16>()[i].bits);
    case DType::kF16:
      return F16BitsToFloat(data<Float16>()[i].bits);
  }
  return 0;
}

void HostTensor::SetDouble(int64_t i, double v) {
  switch (dtype_) {
    case DType::kF32:
      data<float>()[i] = static_cast<float>(v);
      return;
    case DType::kF64:
      data<double>()[i] = v;
      return;
    case DType::kI32:
      data<int32_t>()[i] = SaturatingCast<int32_t>(v);
      return;
    case DType::kBool:
      data<uint8_t>()[i] = v != 0 ? 1 : 0;
      return;
    // Through f32, as Cast from f64 does (docs/MIXED_PRECISION.md).
    case DType::kBF16:
      data<BFloat16>()[i].bits = FloatToBF16Bits(static_cast<float>(v));
      return;
    case DType::kF16:
      data<Float16>()[i].bits = FloatToF16Bits(static_cast<float>(v));
      return;
  }
}

HostTensor HostTensor::Reshaped(Shape shape) const {
  HostTensor t(dtype_, std::move(shape));
  std::memcpy(t.raw_data(), raw_data(), std::min(t.num_bytes(), num_bytes()));
  return t;
}

std::string HostTensor::DebugString(int max_elements) const {
  std::string s = absl::StrCat(TypeString(type()), " {");
  for (int64_t i = 0; i < num_elements_ && i < max_elements; ++i) {
    absl::StrAppend(&s, i ? ", " : "", GetDouble(i));
  }
  if (num_elements_ > max_elements) s += ", ...";
  return s + "}";
}

bool AllClose(const HostTensor& a, const HostTensor& b, double rtol, double atol,
              std::string* why) {
  auto fail = [&](std::string msg) {
    if (why) *why = std::move(msg);
    return false;
  };
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return fail(
        absl::StrCat("type mismatch: ", TypeString(a.type()), " vs ", TypeString(b.type())));
  }
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.GetDouble(i), y = b.GetDouble(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      return fail(absl::StrCat("element ", i, ": ", x, " vs ", y));
    }
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      return fail(
          absl::StrCat("element ", i, ": ", x, " vs ", y, " (|diff| ", std::fabs(x - y), ")"));
    }
  }
  return true;
}

}  // namespace braze
