// Array: an n-dimensional, contiguous (C order) array of one dtype.
//
// Storage is 64-byte aligned and reference counted: copying an Array shares
// the buffer (cheap), and operations produce new arrays. A buffer held by one
// Array only (`unique()`) may be updated in place by its owner. Arrays may also
// wrap memory owned by someone else (a NumPy array), kept alive by `owner`.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/dtype.hpp"

namespace tessera {

using Shape = std::vector<int64_t>;

// "(2, 3)" as NumPy prints shapes; "()" for 0-d, "(5,)" for 1-d.
std::string shape_str(const Shape& shape);

// Number of elements of a shape; throws ValueError naming `op` on negative
// extents and MemoryError when the count overflows.
int64_t shape_size(const Shape& shape, const char* op = "array");

// Row-major strides, in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Frees the large blocks kept for reuse (see Storage); they are also
// released by themselves when an allocation would otherwise fail.
void release_cached_blocks();

// A block of 64-byte-aligned memory, or a view of memory owned elsewhere.
// Large blocks (1 MiB and up) are recycled through a cache when freed, small
// ones (up to 64 KiB) through per-thread lists of power-of-two sizes.
class Storage {
 public:
  // Allocates `bytes` bytes (uninitialized); throws MemoryError on failure.
  explicit Storage(size_t bytes);
  // Wraps foreign memory; `owner` keeps it alive.
  Storage(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // False for wrapped foreign memory, which tessera must never modify.
  bool owned() const { return owned_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = true;
  std::shared_ptr<void> owner_;
};

class Array {
 public:
  // A 0-d float64 array holding 0.
  Array();
  // An uninitialized array of the given dtype and shape.
  Array(DType dtype, Shape shape);
  // An array viewing foreign memory (contiguous, C order), kept alive by `owner`.
  static Array wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner);

  // 0-d arrays from C++ scalars.
  static Array scalar(double v, DType dtype = DType::float64);
  static Array scalar_int(int64_t v);
  static Array scalar_bool(bool v);
  // Arrays filled with one value.
  static Array full(DType dtype, Shape shape, double value);
  static Array zeros(DType dtype, Shape shape) { return full(dtype, std::move(shape), 0.0); }
  // A 1-d array from values.
  template <class T>
  static Array from_vector(const std::vector<T>& values, Shape shape = {});

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return size_; }
  size_t nbytes() const { return static_cast<size_t>(size_) * dtype_size(dtype_); }
  int64_t dim(int axis) const { return shape_[axis]; }

  template <class T>
  T* data() {
    return static_cast<T*>(storage_->data());
  }
  template <class T>
  const T* data() const {
    return static_cast<const T*>(storage_->data());
  }
  void* raw() { return storage_->data(); }
  const void* raw() const { return storage_->data(); }

  // True when no other Array shares this buffer and tessera owns it (safe to
  // update in place; a wrapped NumPy buffer is never unique).
  bool unique() const { return storage_.use_count() == 1 && storage_->owned(); }
  // True when both arrays share one buffer.
  bool shares_storage(const Array& other) const { return storage_ == other.storage_; }

  // A deep copy with its own buffer.
  Array copy() const;
  // Same data, new shape (sizes must match; checked by the caller's op).
  Array reshaped(Shape shape) const;
  // Converts elements to another dtype (a copy; shares the buffer if equal).
  Array astype(DType dtype) const;

  // Element i (flat index) converted to double / int64 / bool.
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  bool get_bool(int64_t i) const;
  // The single element of a size-1 array as double.
  double item() const { return get_double(0); }

  // NumPy-style text: "[[1. 2.]\n [3. 4.]]", with summarization of large arrays.
  std::string str() const;
  // "array(..., dtype=float32)"-style text used in error messages (short).
  std::string repr_short() const;

 private:
  DType dtype_ = DType::float64;
  Shape shape_;
  int64_t size_ = 1;
  std::shared_ptr<Storage> storage_;
};

template <class T>
Array Array::from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  Array a(dtype_of<T>(), shape);
  T* p = a.data<T>();
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < a.size(); ++i) p[i] = values[i];
  return a;
}

// Converts one element between C++ element types with NumPy's casting
// (bool from nonzero, float to int by truncation).
template <class To, class From>
inline To element_cast(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Out-of-range and NaN conversions are undefined in C++; NumPy yields INT64_MIN.
    if (!(v >= From(-9.2233720368547758e18) && v < From(9.2233720368547758e18))) {
      return std::numeric_limits<To>::min();
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tessera
