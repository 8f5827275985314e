// Array: an n-dimensional array of one dtype, and NumPy's views of one.
//
// Storage is 64-byte aligned and reference counted: copying an Array shares
// the buffer (cheap), and operations produce new arrays. As in NumPy, an
// Array may be a *view*: it sees its storage from an offset and with strides
// (in elements; negative for reversed slices, 0 for broadcast axes), and a
// write through a view changes every array sharing the storage (see
// docs/runtime.md, "Views and writes"). Kernels take C-contiguous arrays only
// (`data()` checks it); the primitives layer packs a view with contiguous()
// before a kernel sees it, except in the primitives that work on views.
// Arrays may also wrap memory owned by someone else (a NumPy array), kept
// alive by `owner`.
#pragma once

#include <complex>
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

// Bytes of array memory tessera owns: `live` held by arrays now, `peak_live`
// the most held at once since the last reset_peak_memory(), `high_water` the
// most ever, `cached` freed large blocks kept for reuse (see Storage; live +
// cached stays under high_water), which count in the process's resident set
// too. Small blocks are counted at their rounded size.
struct MemoryStats {
  size_t live = 0;
  size_t peak_live = 0;
  size_t high_water = 0;
  size_t cached = 0;
  size_t cache_limit = 0;
};
MemoryStats memory_stats();
void reset_peak_memory();

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
  // An object that lives as long as this (owned) buffer: what a primitive
  // computed with the array and leaves for a later one (attention's kept
  // probabilities, for its backward). Set once, by the primitive that made
  // the array, before anyone else sees it.
  void set_companion(std::shared_ptr<void> c) {
    if (owned_) owner_ = std::move(c);
  }
  const std::shared_ptr<void>& companion() const {
    static const std::shared_ptr<void> none;
    return owned_ ? owner_ : none;
  }

 private:
  void allocate(size_t rounded);

  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t block_ = 0;  // the block's size (rounded; a cached block may be larger)
  bool owned_ = true;
  // Foreign memory: what keeps it alive; owned memory: the companion.
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
  // The same with strides (in elements) from `data`, which is element
  // (0, ..., 0); `lowest`/`highest` are the element offsets of the extreme
  // elements relative to it, and `writable` says whether writes are allowed.
  static Array wrap_strided(DType dtype, Shape shape, std::vector<int64_t> strides, void* data,
                            int64_t lowest, int64_t highest, bool writable,
                            std::shared_ptr<void> owner);
  // A view of `base`'s storage: element (i0, ..., in) at base-offset
  // `offset` + sum_k i_k * strides[k] (offsets in elements from the start of
  // the storage, see offset()). Read-only when `base` is or `readonly`.
  static Array view(const Array& base, Shape shape, std::vector<int64_t> strides, int64_t offset,
                    bool readonly = false);
  // The real (part 0) or imaginary (part 1) parts of a complex array as a
  // float view of its buffer (NumPy's z.real, z.imag): writes reach z.
  static Array complex_part_view(const Array& z, int part);

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

  // The elements in C order; the array must be C-contiguous (a view that is
  // not raises an internal error: it must be packed with contiguous() first).
  template <class T>
  T* data() {
    require_contiguous();
    return origin<T>();
  }
  template <class T>
  const T* data() const {
    require_contiguous();
    return origin<T>();
  }
  void* raw() {
    require_contiguous();
    return origin_raw();
  }
  const void* raw() const {
    require_contiguous();
    return origin_raw();
  }
  // Element (0, ..., 0) of any array, contiguous or not (with strides()).
  template <class T>
  T* origin() const {
    return reinterpret_cast<T*>(static_cast<char*>(storage_->data()) + byte_offset());
  }
  void* origin_raw() const { return static_cast<char*>(storage_->data()) + byte_offset(); }
  // The start of the whole storage (what a view's offset counts from).
  void* storage_data() const { return storage_->data(); }
  size_t storage_bytes() const { return storage_->bytes(); }

  // True for a C-contiguous array (every array that is not a strided view).
  bool is_contiguous() const { return strides_.empty(); }
  // Strides in elements (C order's for a contiguous array).
  std::vector<int64_t> strides() const;
  // Offset of element (0, ..., 0) from the start of the storage, in elements.
  int64_t offset() const { return offset_; }
  // False for read-only arrays (broadcast views, read-only NumPy arrays).
  bool writable() const { return !readonly_; }
  // True for a 0-d complex128 value that stands for a Python complex number
  // (a literal 1j, complex(a, b) of numbers, a complex argument): weak in
  // NumPy 2's promotion, as Python ints and floats are (float32_array * 1j
  // is complex64). Arrays made from it are not weak.
  bool weak() const { return weak_; }
  static Array weak_complex(std::complex<double> v);
  // This array, or a C-contiguous copy of it when it is a strided view.
  Array contiguous() const { return strides_.empty() ? *this : copy(); }

  // True when no other Array shares this buffer and tessera owns it (safe to
  // update in place; a wrapped NumPy buffer is never unique).
  bool unique() const { return storage_.use_count() == 1 && storage_->owned() && !readonly_; }
  // True when both arrays share one buffer.
  bool shares_storage(const Array& other) const { return storage_ == other.storage_; }
  // True when the two arrays may have elements in common (same storage and
  // overlapping extents).
  bool may_overlap(const Array& other) const;
  // True when the buffer belongs to someone else (a wrapped NumPy array).
  bool foreign() const { return !storage_->owned(); }
  // How many Arrays (views included) share this buffer.
  long use_count() const { return storage_.use_count(); }
  // The buffer's companion (Storage::set_companion; null when none).
  const std::shared_ptr<void>& companion() const { return storage_->companion(); }
  void set_companion(std::shared_ptr<void> c) const { storage_->set_companion(std::move(c)); }

  // A deep copy with its own buffer (C order).
  Array copy() const;
  // Same data, new shape (sizes must match; checked by the caller's op): a
  // view of a contiguous array, a copy of a strided one.
  Array reshaped(Shape shape) const;
  // Converts elements to another dtype (a copy; shares the buffer if equal).
  Array astype(DType dtype) const;
  // Writes `src` (broadcast to this array's shape, converted to its dtype)
  // into this array's elements, through its strides. `src` may overlap this
  // array (it is copied first then). The caller checks writability and shapes.
  void assign(const Array& src);

  // Element i (flat index in C order, also for views) converted to double / int64 / bool.
  double get_double(int64_t i) const;
  int64_t get_int(int64_t i) const;
  bool get_bool(int64_t i) const;
  std::complex<double> get_complex(int64_t i) const;
  // The single element of a size-1 array as double.
  double item() const { return get_double(0); }

  // NumPy-style text: "[[1. 2.]\n [3. 4.]]", with summarization of large arrays.
  std::string str() const;
  // "array(..., dtype=float32)"-style text used in error messages (short).
  std::string repr_short() const;

 private:
  // An array with no storage yet (wrap_strided and view fill it in).
  struct NoStorage {};
  explicit Array(NoStorage) {}
  void require_contiguous() const {
    if (!strides_.empty()) contiguity_error();
  }
  [[noreturn]] void contiguity_error() const;
  // Drops the strides when they are C order's (the view is contiguous).
  void normalize_strides();
  int64_t byte_offset() const { return offset_ * static_cast<int64_t>(dtype_size(dtype_)); }
  // Offset in elements (from origin) of flat C-order element i.
  int64_t flat_offset(int64_t i) const;

  DType dtype_ = DType::float64;
  bool readonly_ = false;
  bool weak_ = false;  // a Python complex number (see weak())
  Shape shape_;
  int64_t size_ = 1;
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;             // element (0, ..., 0), in elements from the storage's start
  std::vector<int64_t> strides_;  // empty: C-contiguous
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
template <class T> struct is_std_complex : std::false_type {};
template <class T> struct is_std_complex<std::complex<T>> : std::true_type {};

// A 16-bit float as float; any other element as itself.
template <class From>
inline auto widen_element(From v) {
  if constexpr (std::is_same_v<From, float16_t>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<From, bfloat16_t>) {
    return bfloat_to_float(v.bits);
  } else {
    return v;
  }
}

// Converts one element as NumPy's astype does: integers wrap around modulo
// their width, floats truncate toward zero, complex to real drops the
// imaginary part, anything to bool is "!= 0". A float outside int64's range
// becomes the target's minimum (NumPy's result on x86; it warns).
template <class To, class From>
inline To element_cast(From v0) {
  const auto v = widen_element(v0);
  using W = std::remove_const_t<decltype(v)>;
  if constexpr (std::is_same_v<To, W>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != W(0);
  } else if constexpr (is_std_complex<To>::value) {
    using R = typename To::value_type;
    if constexpr (is_std_complex<W>::value) {
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return To(static_cast<R>(v), R(0));
    }
  } else if constexpr (is_std_complex<W>::value) {
    return element_cast<To>(v.real());
  } else if constexpr (std::is_same_v<To, float16_t>) {
    return float16_t{double_to_half(static_cast<double>(v))};
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    return bfloat16_t{float_to_bfloat(static_cast<float>(v))};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<W>) {
    if (!(v >= W(-9.2233720368547758e18) && v < W(9.2233720368547758e18))) {
      if constexpr (std::is_same_v<To, uint64_t>) {
        if (v >= W(0) && v < W(1.8446744073709552e19)) return static_cast<uint64_t>(v);
      }
      return std::numeric_limits<To>::min();
    }
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tessera
