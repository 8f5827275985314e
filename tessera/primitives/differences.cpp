// diff: n-th discrete differences along an axis, composed of getitem,
// subtract (not_equal for bools, as NumPy) and concatenate.
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

Value prim(const char* name, std::vector<Value> args) {
  return call_primitive(name, std::move(args));
}

// x[..., a:b] along `axis` (the other axes whole).
Value slice_along(const Value& x, int ndim, int axis, std::optional<int64_t> start,
                  std::optional<int64_t> stop) {
  std::vector<Value> args{x};
  for (int d = 0; d < ndim; ++d) {
    args.push_back(d == axis ? Value(Slice{start, stop, std::nullopt}) : Value(Slice{}));
  }
  return call_primitive("getitem", std::move(args));
}

// prepend/append: a scalar is broadcast to x's shape with extent 1 along axis.
Value edge_values(const Args& a, size_t i, const Array& x, int axis) {
  Array v = a.array(i);
  if (v.ndim() != 0) return v;
  List shape;
  for (int d = 0; d < x.ndim(); ++d) shape.push_back(Value(d == axis ? int64_t{1} : x.dim(d)));
  return prim("broadcast_to", {v, Value(shape)});
}

Value diff(Args& a) {
  Array x = a.array(0);
  int64_t n = a.integer(1);
  if (n < 0) {
    throw std::invalid_argument(
        error_message("[diff] order must be non-negative but got ", n));
  }
  if (x.ndim() == 0) {
    throw std::invalid_argument(
        error_message("[diff] diff requires input that is at least one dimensional: got ",
                      a[0].describe()));
  }
  int axis = normalize_axis(a.integer(2), x.ndim(), "diff");
  if (n == 0) return x;
  if (!a.is_nil(3) || !a.is_nil(4)) {
    List parts;
    if (!a.is_nil(3)) parts.push_back(edge_values(a, 3, x, axis));
    parts.push_back(x);
    if (!a.is_nil(4)) parts.push_back(edge_values(a, 4, x, axis));
    x = to_array(prim("concatenate", {Value(parts), Value(static_cast<int64_t>(axis))}), "diff");
  }
  Value cur = x;
  const char* op = x.dtype() == DType::bool_ ? "not_equal" : "subtract";
  for (int64_t k = 0; k < n; ++k) {
    Value hi = slice_along(cur, x.ndim(), axis, 1, std::nullopt);
    Value lo = slice_along(cur, x.ndim(), axis, std::nullopt, -1);
    cur = prim(op, {hi, lo});
  }
  return cur;
}

const bool registered = register_primitives({
    {.name = "diff",
     .family = "arithmetic",
     .params = {{"x"}, opt("n", int64_t{1}), opt("axis", int64_t{-1}), opt("prepend", Value()),
                opt("append", Value())},
     .help = "The n-th discrete difference x[i + 1] - x[i] along axis, like numpy.diff; "
             "prepend/append (a scalar or an array) are joined to x along axis first. Bools "
             "give x[i + 1] != x[i].",
     .eval = diff,
     .ns_per_element = 1.0},
});

}  // namespace

}  // namespace tessera
