// diff: n-th discrete differences along an axis, composed of getitem,
// subtract (not_equal for bools, as NumPy) and concatenate.
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

Value slice_along(const Value& x, int ndim, int axis, std::optional<int64_t> start,
                  std::optional<int64_t> stop) {
  std::vector<Value> args{x};
  for (int d = 0; d < ndim; ++d) {
    Slice s;
    if (d == axis) {
      s.start = start;
      s.stop = stop;
    }
    args.emplace_back(s);
  }
  return call_primitive("getitem", std::move(args));
}

namespace {

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

// The pad width putting `before` / `after` elements along `axis` only.
Value pad_along(int ndim, int axis, int64_t before, int64_t after) {
  List widths;
  for (int d = 0; d < ndim; ++d) {
    widths.push_back(Value(List{Value(d == axis ? before : int64_t{0}),
                                Value(d == axis ? after : int64_t{0})}));
  }
  return Value(widths);
}

// The cotangent of diff's x, prepend or append (argument 6 names which): the
// adjoint of one difference, h -> [0, h] - [h, 0] along the axis, applied n
// times, cut into the parts that came from prepend, x and append.
Value diff_grad(Args& a) {
  Array g = a.array(0);
  Array x = a.array(1);
  int64_t n = a.integer(2);
  int axis = normalize_axis(a.integer(3), x.ndim(), "diff_grad");
  auto edge = [&](size_t i) -> int64_t {
    if (a.is_nil(i)) return 0;
    Array v = a.array(i);
    return v.ndim() == 0 ? 1 : v.dim(axis);
  };
  int64_t before = edge(4), after = edge(5);
  const std::string& part = a.string(6);
  Value cur = g;
  for (int64_t k = 0; k < n; ++k) {
    Value lead = prim("pad", {cur, pad_along(g.ndim(), axis, 1, 0)});
    Value trail = prim("pad", {cur, pad_along(g.ndim(), axis, 0, 1)});
    cur = prim("subtract", {lead, trail});
  }
  if (part == "prepend") return slice_along(cur, x.ndim(), axis, 0, before);
  if (part == "append") {
    return slice_along(cur, x.ndim(), axis, before + x.dim(axis), before + x.dim(axis) + after);
  }
  if (before == 0 && after == 0) return cur;
  return slice_along(cur, x.ndim(), axis, before, before + x.dim(axis));
}

const bool registered_differences = register_primitives({
    {.name = "diff",
     .family = "arithmetic",
     .params = {{"x"}, opt("n", int64_t{1}), opt("axis", int64_t{-1}), opt("prepend", Value()),
                opt("append", Value())},
     .help = "The n-th discrete difference x[i + 1] - x[i] along axis, like numpy.diff; "
             "prepend/append (a scalar or an array) are joined to x along axis first. Bools "
             "give x[i + 1] != x[i].",
     .eval = diff,
     .ns_per_element = 1.0,
     .grads = {"diff_grad(g, x, n, axis, prepend, append, \"x\")", "", "",
               "diff_grad(g, x, n, axis, prepend, append, \"prepend\")",
               "diff_grad(g, x, n, axis, prepend, append, \"append\")"}},
    {.name = "diff_grad",
     .family = "arithmetic",
     .params = {{"g"}, {"x"}, {"n"}, {"axis"}, {"prepend"}, {"append"}, opt("part", "x")},
     .help = "The gradient of diff(x, n, axis, prepend, append) with respect to x, prepend or "
             "append (part), given the cotangent g of its result (used by autodiff).",
     .eval = diff_grad,
     .ns_per_element = 2.0},
});

}  // namespace

}  // namespace tessera
