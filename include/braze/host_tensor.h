// HostTensor: an owning, 64-byte aligned, dense row-major host buffer with a dtype and
// a fully defined shape. Copies are deep; moves are cheap.
#ifndef BRAZE_HOST_TENSOR_H_
#define BRAZE_HOST_TENSOR_H_

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "braze/dtype.h"

namespace braze {

class HostTensor {
 public:
  HostTensor() : HostTensor(DType::kF32, Shape{0}) {}
  // Zero-filled tensor. Every dim must be >= 0 and the byte size must fit in an int64:
  // otherwise the tensor holds no values and num_elements() is -1, which Run (as a feed),
  // Const and AssignVariable reject with InvalidArgument. A size that fits but cannot be
  // allocated throws std::bad_alloc, as std::vector does (Run returns ResourceExhausted).
  HostTensor(DType dtype, Shape shape);

  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  // A moved-from HostTensor holds no values, as one of an impossible shape (rank 0,
  // num_elements() -1): Run (as a feed), Const and AssignVariable reject it with
  // InvalidArgument, its helpers read and write nothing; assign it to use it again.
  HostTensor(HostTensor&& other) noexcept;
  HostTensor& operator=(HostTensor&& other) noexcept;

  template <typename T>
  static HostTensor From(const std::vector<T>& values, Shape shape) {
    HostTensor t(DTypeOf<T>(), std::move(shape));
    assert(static_cast<int64_t>(values.size()) == t.num_elements());
    // Never past the tensor (an impossible shape holds nothing; NDEBUG drops the assert).
    const size_t n =
        std::min(values.size(), static_cast<size_t>(std::max<int64_t>(t.num_elements(), 0)));
    for (size_t i = 0; i < n; ++i) t.SetDouble(i, static_cast<double>(values[i]));
    return t;
  }
  template <typename T>
  static HostTensor From(std::initializer_list<T> values, Shape shape) {
    return From(std::vector<T>(values), std::move(shape));
  }
  // A rank-1 tensor holding `values`.
  template <typename T>
  static HostTensor Vector(const std::vector<T>& values) {
    return From(values, Shape{static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static HostTensor Scalar(T value) {
    return From(std::vector<T>{value}, Shape{});
  }
  static HostTensor Filled(DType dtype, Shape shape, double value);

  // Seeded fills for tests: uniform in [lo, hi) (integers: [lo, hi) rounded down;
  // bool: fair coin), and normal(mean, stddev) for floating types.
  static HostTensor RandomUniform(DType dtype, Shape shape, uint64_t seed, double lo = -1.0,
                                  double hi = 1.0);
  static HostTensor RandomNormal(DType dtype, Shape shape, uint64_t seed, double mean = 0.0,
                                 double stddev = 1.0);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  size_t num_bytes() const { return num_elements_ < 0 ? 0 : num_elements_ * SizeOf(dtype_); }
  TensorType type() const { return {dtype_, shape_}; }

  // The elements as T, which must be the dtype's C++ type (DTypeOf<T>() == dtype():
  // float for f32, int32_t for i32, bool or uint8_t for bool, ...), as TF's
  // Tensor::flat<T>() and torch's data_ptr<T>() require. Another T is a contract
  // violation checked only by an assert (debug builds): the bytes read as another type,
  // and a wider T reads past the buffer. GetDouble/SetDouble and ToVector convert from
  // any dtype.
  template <typename T>
  T* data() {
    assert(DTypeOf<T>() == dtype_);
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data() const {
    assert(DTypeOf<T>() == dtype_);
    return reinterpret_cast<const T*>(data_.get());
  }
  void* raw_data() { return data_.get(); }
  const void* raw_data() const { return data_.get(); }

  // Element access by flat row-major index, converting through double.
  double GetDouble(int64_t i) const;
  // Integers truncate toward zero, bool is v != 0, bf16 and f16 round through f32.
  void SetDouble(int64_t i, double v);
  template <typename T>
  std::vector<T> ToVector() const {
    std::vector<T> out(std::max<int64_t>(num_elements_, 0));
    for (int64_t i = 0; i < num_elements_; ++i) out[i] = static_cast<T>(GetDouble(i));
    return out;
  }

  // Same dtype and element count, new shape; shares nothing (deep copy). A shape of
  // another count gets the values that fit (never a copy past either buffer).
  HostTensor Reshaped(Shape shape) const;
  std::string DebugString(int max_elements = 16) const;

 private:
  DType dtype_;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<uint8_t> data_;

  void LeaveEmpty() noexcept;  // the moved-from state
};

// Max |a-b| <= atol + rtol*|b| for every element, same dtype and shape. On failure the
// message names the first offending index. For tests and tools.
bool AllClose(const HostTensor& a, const HostTensor& b, double rtol, double atol,
              std::string* why = nullptr);

}  // namespace braze

#endif  // BRAZE_HOST_TENSOR_H_
