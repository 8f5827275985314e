// The in-place family: primitives that write into an existing array's
// buffer, as NumPy's augmented assignment (x += y), np.copyto and
// ndarray.fill do. Every array sharing the buffer (views, the caller's NumPy
// array) sees the write. They are marked `writes`, so the execution tree
// orders them after the reads before them (docs/runtime.md, "Views and
// writes"). Indexed writes (x[i] = v) are setitem, in indexing.cpp.
#include <cstring>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/fused.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

// The binary primitive an in-place operator applies ("add" for iadd);
// looked up once (the registry is complete before any program runs).
const PrimitiveSpec& binary_primitive(const char* name, const char* fallback) {
  const PrimitiveSpec* spec = find_primitive(name);
  if (!spec && fallback) spec = find_primitive(fallback);
  if (!spec) {
    throw std::logic_error(error_message("[", name, "] internal error: no such primitive"));
  }
  return *spec;
}

// Writes `value` into all of `x` as NumPy's in-place operations do: the
// result must have x's shape and cast to x's dtype under `casting`.
void write_result(Array& x, const Array& value, const std::string& what, const char* casting,
                  const char* op) {
  if (!x.writable()) {
    throw std::invalid_argument(error_message("[", op, "] output array is read-only"));
  }
  if (std::string(casting) == "same_kind" && !can_cast_same_kind(value.dtype(), x.dtype())) {
    throw TypeError(error_message("[", op, "] cannot cast ", what, " output from dtype('",
                                  dtype_name(value.dtype()), "') to dtype('", dtype_name(x.dtype()),
                                  "') with casting rule 'same_kind'"));
  }
  // The value is the broadcast result of x OP y, so it must have x's shape
  // or broadcast to it.
  Shape common;
  if (!kernels::broadcast_shape_pair(value.shape(), x.shape(), common) || common != x.shape()) {
    throw std::invalid_argument(error_message(
        "[", op, "] non-broadcastable output operand with shape ", shape_str(x.shape()),
        " doesn't match the broadcast shape ", shape_str(value.shape())));
  }
  x.assign(value);
}

// x OP= y for a float array x (a view too) and an operand of its dtype (an
// array, or a Python number, weak as in NumPy 2) that broadcasts to x's shape
// and whose elements do not overlap x's: computed straight into x's buffer in
// one pass (the general way computes x OP y into a new array and copies it in).
// False when any of that does not hold; nothing is done then.
bool in_place_float(Args& a, const PrimitiveSpec& base) {
  if (base.fuse_binary < 0 || !a[0].is_array()) return false;
  const Array& x = a[0].as_array();
  const DType dt = x.dtype();
  if (x.ndim() == 0 || !x.writable() || (dt != DType::float64 && dt != DType::float32)) {
    return false;
  }
  Array y;
  if (a[1].is_array()) {
    y = a[1].as_array();
    if (y.dtype() != dt || y.may_overlap(x)) return false;
    Shape common;
    if (!kernels::broadcast_shape_pair(y.shape(), x.shape(), common) || common != x.shape()) {
      return false;
    }
  } else if (a[1].is_float() || a[1].is_int() || a[1].is_bool()) {
    const Value& v = a[1];
    const double d = v.is_float() ? v.as_float()
                     : v.is_int() ? static_cast<double>(v.as_int())
                                  : (v.as_bool() ? 1.0 : 0.0);
    y = Array::scalar(dt == DType::float32 ? static_cast<double>(static_cast<float>(d)) : d, dt);
  } else {
    return false;
  }
  Array out = x;
  return kernels::strided_binary(static_cast<BinaryOp>(base.fuse_binary), x, y, out);
}

// x OP= y: in place into x when x is an array (the result x itself);
// otherwise (numbers, lists, strings) x OP y, as Python rebinds them.
Value augmented(Args& a, const PrimitiveSpec& base) {
  // xs += v on a list extends it with any iterable, as Python's (where
  // xs + v takes lists only).
  if (base.name == "add" && a[0].is_list() && python_operands(a[0], a[1])) {
    return sequence_inplace_add(a[0], a[1], a.op());
  }
  if (in_place_float(a, base)) return a[0];
  std::vector<Value> operands{a[0], a[1]};
  Args inner(base, std::move(operands));
  Value r = run_primitive(base, inner);
  // Numbers, lists and strings are rebound, and so are 0-d results that
  // hold their own one element (what NumPy gives as immutable scalars: an
  // element x[i], a sum); a 0-d view (x[0, ...]) or a 0-d NumPy array
  // passed in is written, as NumPy writes it.
  if (!a[0].is_array()) return r;
  Array x = a[0].as_array();
  if (x.ndim() == 0 && !x.foreign() && x.storage_bytes() == dtype_size(x.dtype())) return r;
  Array value = to_array(r, a.op(), "result");
  write_result(x, value, "ufunc '" + base.name + "'", "same_kind", a.op());
  return x;
}

struct InPlaceOp {
  const char* name;      // the operator module's name (iadd)
  const char* symbol;    // Python's operator (+)
  const char* base;      // the primitive it applies
  const char* fallback;  // used when `base` is not registered
  // The scalar path of the base operator, for two numbers (a loop's
  // `s += x`), computed by the execution tree without binding arguments.
  ScalarBinary scalar;
};

const InPlaceOp kInPlaceOps[] = {
    {"iadd", "+", "add", nullptr, scalar_binary_of(BinaryOp::add)},
    {"isub", "-", "subtract", nullptr, scalar_binary_of(BinaryOp::subtract)},
    {"imul", "*", "multiply", nullptr, scalar_binary_of(BinaryOp::multiply)},
    {"itruediv", "/", "divide", nullptr, scalar_binary_of(BinaryOp::divide)},
    {"ifloordiv", "//", "floor_divide", nullptr, scalar_binary_of(BinaryOp::floor_divide)},
    {"imod", "%", "mod", nullptr, scalar_binary_of(BinaryOp::mod)},
    {"ipow", "**", "power", nullptr, scalar_binary_of(BinaryOp::power)},
    {"imatmul", "@", "matmul", nullptr, nullptr},
    {"iand", "&", "bitwise_and", "logical_and", nullptr},
    {"ior", "|", "bitwise_or", "logical_or", nullptr},
    {"ixor", "^", "bitwise_xor", "logical_xor", nullptr},
    {"ilshift", "<<", "left_shift", nullptr, nullptr},
    {"irshift", ">>", "right_shift", nullptr, nullptr},
};

std::vector<PrimitiveSpec> in_place_specs() {
  std::vector<PrimitiveSpec> specs;
  for (const InPlaceOp& op : kInPlaceOps) {
    const std::string sym = op.symbol;
    specs.push_back(PrimitiveSpec{
        .name = op.name,
        .family = "inplace",
        .params = {{"x"}, {"y"}},
        .help = "Python's x " + sym + "= y (the " + op.base +
                " primitive): for an array x the result is written into x's buffer (every "
                "view of x and the caller's array see it) and x is given; it must keep x's "
                "shape and cast to x's dtype under casting='same_kind' (an int array and a "
                "float give a TypeError), as in NumPy. For numbers, lists and strings it is "
                "x " +
                sym + " y.",
        .eval = [op](Args& a) -> Value {
          return augmented(a, binary_primitive(op.base, op.fallback));
        },
        .ns_per_element = 1.0,
        .scalar_binary = op.scalar,
        .views = true,
        .writes = true});
  }
  return specs;
}

Value copyto(Args& a) {
  if (!a[0].is_array()) a.type_error(0, "an array");
  Array dst = a[0].as_array();
  if (!a[1].is_numeric() && !a[1].is_list()) a.type_error(1, "a number or an array");
  const std::string& casting = a.string(2);
  if (casting != "same_kind" && casting != "unsafe" && casting != "safe" && casting != "no" &&
      casting != "equiv") {
    a.value_error(
        2, "must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe', got '" + casting + "'");
  }
  Array src = a.array(1);
  if ((casting == "no" || casting == "equiv") && src.dtype() != dst.dtype()) {
    throw TypeError(error_message("[", a.op(), "] cannot cast array data from dtype('",
                                  dtype_name(src.dtype()), "') to dtype('", dtype_name(dst.dtype()),
                                  "') according to the rule '", casting, "'"));
  }
  if (casting == "safe" && promote(src.dtype(), dst.dtype()) != dst.dtype()) {
    throw TypeError(error_message("[", a.op(), "] cannot cast array data from dtype('",
                                  dtype_name(src.dtype()), "') to dtype('", dtype_name(dst.dtype()),
                                  "') according to the rule 'safe'"));
  }
  if (a.is_nil(3) || (a[3].is_bool() && a[3].as_bool())) {
    write_result(dst, src, "array data", casting == "same_kind" ? "same_kind" : "unsafe", a.op());
    return dst;
  }
  // where=mask: only the elements where the mask is true are written.
  Array mask = a.array(3);
  if (mask.dtype() != DType::bool_) a.type_error(3, "a bool or a boolean array");
  Shape common;
  if (!kernels::broadcast_shape_pair(mask.shape(), dst.shape(), common) || common != dst.shape() ||
      !kernels::broadcast_shape_pair(src.shape(), dst.shape(), common) || common != dst.shape()) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] could not broadcast where mask from shape ", shape_str(mask.shape()),
        " and src from shape ", shape_str(src.shape()), " into shape ", shape_str(dst.shape())));
  }
  if (!dst.writable()) {
    throw std::invalid_argument(error_message("[", a.op(), "] output array is read-only"));
  }
  if (casting == "same_kind" && !can_cast_same_kind(src.dtype(), dst.dtype())) {
    throw TypeError(error_message("[", a.op(), "] cannot cast array data from dtype('",
                                  dtype_name(src.dtype()), "') to dtype('", dtype_name(dst.dtype()),
                                  "') according to the rule 'same_kind'"));
  }
  // Both broadcast to dst's shape, packed in C order, then merged.
  Array s = kernels::gather_view(src.astype(dst.dtype()),
                                 kernels::broadcast_layout(src.astype(dst.dtype()), dst.shape()));
  Array m = kernels::gather_view(mask, kernels::broadcast_layout(mask, dst.shape()));
  Array merged = dst.copy();
  dispatch(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = merged.data<T>();
    const T* in = s.data<T>();
    const bool* w = m.data<bool>();
    for (int64_t i = 0; i < merged.size(); ++i) {
      if (w[i]) out[i] = in[i];
    }
  });
  dst.assign(merged);
  return dst;
}

// np.fill_diagonal(a, val, wrap=False): writes val (a scalar, or the
// flattened values repeated) along the main diagonal of `a`, in place. 2-D:
// NumPy's flat positions k * (ncols + 1), up to ncols**2 unless `wrap` (a tall
// matrix then continues every ncols + 1 rows); n-d: all extents equal.
Value fill_diagonal(Args& a) {
  if (!a[0].is_array()) a.type_error(0, "an array");
  Array x = a[0].as_array();
  if (!x.writable()) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] assignment destination is read-only"));
  }
  if (x.ndim() < 2) {
    throw std::invalid_argument(
        error_message("[", a.op(), "] array must be at least 2-d, got ", x.ndim(), "-d"));
  }
  if (!a[1].is_numeric() && !a[1].is_list()) a.type_error(1, "a number or an array");
  check_python_int(a[1], x.dtype(), a.op());
  const bool wrap = a.boolean(2);
  const std::vector<int64_t> st = x.strides();
  std::vector<int64_t> offsets;  // element offsets from x's origin
  if (x.ndim() == 2) {
    const int64_t rows = x.dim(0), cols = x.dim(1);
    const int64_t total = rows * cols;
    const int64_t end = wrap ? total : std::min(total, cols * cols);
    for (int64_t pos = 0; pos < end; pos += cols + 1) {
      offsets.push_back((pos / cols) * st[0] + (pos % cols) * st[1]);
    }
  } else {
    for (int k = 1; k < x.ndim(); ++k) {
      if (x.dim(k) != x.dim(0)) {
        throw std::invalid_argument(error_message("[", a.op(),
                                                  "] all dimensions of input must be of equal "
                                                  "length, got shape ",
                                                  shape_str(x.shape())));
      }
    }
    int64_t step = 0;
    for (int64_t s : st) step += s;
    for (int64_t i = 0; i < x.dim(0); ++i) offsets.push_back(i * step);
  }
  if (offsets.empty()) return x;
  Array v = a.array(1).astype(x.dtype()).contiguous();
  if (v.size() == 0) return x;
  const size_t es = dtype_size(x.dtype());
  auto* base = static_cast<char*>(x.origin_raw());
  const auto* src = static_cast<const char*>(v.raw());
  for (size_t k = 0; k < offsets.size(); ++k) {
    std::memcpy(base + offsets[k] * static_cast<int64_t>(es),
                src + (k % static_cast<size_t>(v.size())) * es, es);
  }
  return x;
}

const bool registered_ops = register_primitives(in_place_specs());

const bool registered_inplace = register_primitives({
    {.name = "copyto",
     .family = "inplace",
     .params = {{"dst"}, {"src"}, opt("casting", "same_kind"), opt("where", true)},
     .help = "Copies src (broadcast) into the array dst, where the boolean mask `where` is "
             "true, casting under `casting` ('no', 'equiv', 'safe', 'same_kind', 'unsafe'), "
             "like numpy.copyto; gives dst.",
     .eval = copyto,
     .ns_per_element = 1.0,
     .views = true,
     .writes = true},
    {.name = "fill_diagonal",
     .family = "inplace",
     .params = {{"a"}, {"val"}, opt("wrap", false)},
     .help = "Writes val along the main diagonal of the array a, in place, like "
             "numpy.fill_diagonal (an array val is flattened and repeated; wrap=true continues "
             "a tall matrix's diagonal every ncols + 1 rows; n-d arrays need equal extents); "
             "gives a.",
     .eval = fill_diagonal,
     .ns_per_element = 1.0,
     .views = true,
     .writes = true},
});

}  // namespace

}  // namespace tessera
