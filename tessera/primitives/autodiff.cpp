// The autodiff family: the helpers that gradient programs are made of
// (seeding, accumulating and un-broadcasting cotangents) and the backward
// parts of reductions and matrix products. See tessera/lang/autodiff.hpp.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/indexing.hpp"
#include "tessera/kernels/linalg.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

int ndim_of(const Value& v) { return v.is_array() ? v.as_array().ndim() : 0; }

Shape shape_of(const Value& v) { return v.is_array() ? v.as_array().shape() : Shape{}; }

Value shape_list(const Shape& s) {
  List l;
  for (int64_t d : s) l.emplace_back(d);
  return Value(std::move(l));
}

// The cotangent seed of a function's value: ones like it, which must be a
// single number (gradients are of scalar functions).
Value grad_seed(Args& a) {
  const Value& out = a[0];
  if (out.is_float() || out.is_int() || out.is_bool()) return Value(1.0);
  if (out.is_array() && out.as_array().size() == 1) {
    const Array& arr = out.as_array();
    DType dt = is_floating(arr.dtype()) ? arr.dtype() : DType::float64;
    return Array::full(dt, arr.shape(), 1.0);
  }
  throw std::invalid_argument(error_message(
      "[grad] the differentiated function must return a single number, got ", out.describe()));
}

// The cotangent a vjp pullback was called with, checked against the value's
// template (grad_template): an array of the value's shape and dtype (for a
// value with an integer or bool dtype, float64, as grad_seed's); a number
// stands for an array of the value's shape filled with it.
Value vjp_seed(Args& a) {
  const Value& ct = a[0];
  const Value& like = a[1];
  if (like.is_list()) {
    // A list of values (a stage sending several tensors): a list of
    // cotangents, item by item.
    const List& l = like.as_list();
    if (!ct.is_list() || ct.as_list().size() != l.size()) {
      throw std::invalid_argument(error_message(
          "[vjp] the value is a list of ", l.size(), " items: the cotangent must be a list of ",
          l.size(), ", got ", ct.describe()));
    }
    NestingLevel level("vjp", like);
    List out;
    for (size_t i = 0; i < l.size(); ++i) {
      std::vector<Value> pair{ct.as_list()[i], l[i]};
      Args inner(a.spec(), std::move(pair));
      out.push_back(vjp_seed(inner));
    }
    return Value(std::move(out));
  }
  if (like.is_float() || like.is_int() || like.is_bool()) {
    if (ct.is_float() || ct.is_int()) {
      return Value(ct.is_float() ? ct.as_float() : static_cast<double>(ct.as_int()));
    }
    if (ct.is_array() && ct.as_array().ndim() == 0 && is_floating(ct.as_array().dtype())) {
      return Value(ct.as_array().get_double(0));
    }
    throw std::invalid_argument(error_message(
        "[vjp] the cotangent must be a number like the value ", like.describe(), ", got ",
        ct.describe()));
  }
  if (!like.is_array()) {
    throw std::invalid_argument(
        error_message("[vjp] the value must be an array or a number to be pulled back, got ",
                      like.describe()));
  }
  const Array& l = like.as_array();
  const DType dt = is_floating(l.dtype()) ? l.dtype() : DType::float64;
  if (ct.is_float() || ct.is_int()) {
    const double v = ct.is_float() ? ct.as_float() : static_cast<double>(ct.as_int());
    return Array::full(dt, l.shape(), v);
  }
  if (!ct.is_array() || ct.as_array().shape() != l.shape() || ct.as_array().dtype() != dt) {
    std::string got = ct.describe();
    if (ct.is_array()) {
      const Array& c = ct.as_array();
      got = error_message(dtype_name(c.dtype()), " ", shape_str(c.shape()));
    }
    throw std::invalid_argument(
        error_message("[vjp] the cotangent must have the value's shape and dtype: expected ",
                      dtype_name(dt), " ", shape_str(l.shape()), ", got ", got));
  }
  return ct;
}

// a + b where nil stands for "no contribution yet". Cotangents of a tiled
// array are tiled like it: their tiles are added.
Value grad_accumulate(Args& a) {
  if (a.is_nil(0)) return a[1];
  if (a.is_nil(1)) return a[0];
  if (a[0].is_list() && a[1].is_list()) {
    // The cotangents of a list (concatenate([a, b]) used twice): item by item.
    const List &x = a[0].as_list(), &y = a[1].as_list();
    if (x.size() != y.size()) {
      throw std::invalid_argument(error_message("[grad] cannot add list cotangents of ", x.size(),
                                                " and ", y.size(), " items"));
    }
    List sum;
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<Value> pair{x[i], y[i]};
      Args inner(a.spec(), std::move(pair));
      sum.push_back(grad_accumulate(inner));
    }
    return Value(std::move(sum));
  }
  if (a[0].is_tiled() || a[1].is_tiled()) {
    if (!a[0].is_tiled() || !a[1].is_tiled() || !a[0].as_tiled().same_tiling(a[1].as_tiled())) {
      throw std::invalid_argument(
          error_message("[grad] cannot add the cotangents ", a[0].describe(), " and ",
                        a[1].describe(), ": the cotangents of one value must be tiled alike"));
    }
    TiledArray sum = a[0].as_tiled();
    sum.tile =
        prim("add", std::vector<Value>{Value(sum.tile), Value(a[1].as_tiled().tile)}).as_array();
    return Value(std::move(sum));
  }
  return prim("add", std::vector<Value>{a[0], a[1]});
}

// unbroadcast for a tiled x: its cotangent must be tiled like it (tiled
// values never broadcast); the tile takes x's float dtype.
Value unbroadcast_tiled(const Value& g, const Value& x) {
  const TiledArray& xt = x.as_tiled();
  if (!g.is_tiled() || !g.as_tiled().same_tiling(xt)) {
    throw std::invalid_argument(error_message("[grad] the cotangent of ", xt.describe(),
                                              " must be tiled like it, got ", g.describe()));
  }
  const TiledArray& gt = g.as_tiled();
  if (!is_floating(xt.dtype()) || gt.dtype() == xt.dtype()) return g;
  TiledArray cast = gt;
  cast.tile = gt.tile.astype(xt.dtype());
  return Value(std::move(cast));
}

// g summed back to the shape of x (undoing broadcasting), in x's float dtype.
Value unbroadcast(Args& a) {
  Value g = a[0];
  const Value& x = a[1];
  if (g.is_nil()) return g;
  if (x.is_list() && g.is_list() && x.as_list().size() == g.as_list().size()) {
    // A list's cotangent: each item summed back to its own item's shape.
    NestingLevel level("grad", x);
    List out;
    for (size_t i = 0; i < x.as_list().size(); ++i) {
      std::vector<Value> pair{g.as_list()[i], x.as_list()[i]};
      Args inner(a.spec(), std::move(pair));
      out.push_back(unbroadcast(inner));
    }
    return Value(std::move(out));
  }
  if (x.is_tiled()) return unbroadcast_tiled(g, x);
  if (g.is_tiled()) {
    throw std::invalid_argument(error_message("[grad] the cotangent of ", x.describe(),
                                              " cannot be the tiled ", g.describe()));
  }
  if (!x.is_array()) {
    // A Python-like scalar: its cotangent is a number.
    if (g.is_array()) g = prim("sum", std::vector<Value>{g});
    if (g.is_array()) return Value(g.as_array().get_double(0));
    return g;
  }
  const Array& xa = x.as_array();
  Shape xs = xa.shape();
  Shape gs = shape_of(g);
  if (gs != xs) {
    int extra = static_cast<int>(gs.size()) - static_cast<int>(xs.size());
    List axes;
    for (int i = 0; i < static_cast<int>(gs.size()); ++i) {
      int xi = i - extra;
      if (xi < 0 || (xs[xi] == 1 && gs[i] != 1)) axes.emplace_back(static_cast<int64_t>(i));
    }
    if (!axes.empty()) {
      g = prim("sum", std::vector<CallArg>{{"", g}, {"axis", Value(std::move(axes))}});
    }
    g = prim("reshape", std::vector<Value>{g, shape_list(xs)});
  }
  if (is_floating(xa.dtype()) && g.is_array() && g.as_array().dtype() != xa.dtype()) {
    g = g.as_array().astype(xa.dtype());
  }
  if (!g.is_array()) g = prim("full", std::vector<Value>{shape_list(xs), g});
  return g;
}

// What unbroadcast needs of a value, without its data: an array's shape and
// dtype as a view of one element (all strides 0), a list's items' templates;
// tiled values and numbers stand for themselves.
Value grad_template(const Value& x) {
  if (x.is_array()) {
    const Array& xa = x.as_array();
    if (xa.size() <= 1) return x;
    Array one = Array::zeros(xa.dtype(), {1});
    return Value(
        Array::view(one, xa.shape(), std::vector<int64_t>(xa.shape().size(), 0), 0, true));
  }
  if (x.is_list()) {
    NestingLevel level("grad", x);
    List out;
    for (const Value& item : x.as_list()) out.push_back(grad_template(item));
    return Value(std::move(out));
  }
  return x;
}

// The cotangent of a reduction's input: g broadcast back over the reduced axes.
Value reduce_grad(Args& a) {
  Value g = a[0];
  const Value& x = a[1];
  if (!x.is_numeric()) a.type_error(1, "a number or an array");
  if (!g.is_numeric()) a.type_error(0, "a number or an array");
  Shape xs = shape_of(x);
  if (!a.is_nil(2) && !a.boolean(3)) {
    std::vector<int64_t> axes = a.int_list(2);
    std::vector<int> norm;
    for (int64_t ax : axes) norm.push_back(normalize_axis(ax, static_cast<int>(xs.size()), a.op()));
    std::sort(norm.begin(), norm.end());
    norm.erase(std::unique(norm.begin(), norm.end()), norm.end());
    Shape reduced, kept = xs;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::find(norm.begin(), norm.end(), static_cast<int>(i)) == norm.end()) {
        reduced.push_back(xs[i]);
      } else {
        kept[i] = 1;
      }
    }
    if (shape_of(g) != reduced) {
      throw std::invalid_argument(
          error_message("[", a.op(), "] cotangent of shape ", shape_str(shape_of(g)),
                        " does not match the reduction of shape ", shape_str(xs), " (expected ",
                        shape_str(reduced), ")"));
    }
    g = prim("reshape", std::vector<Value>{g, shape_list(kept)});
  }
  return prim("broadcast_to", std::vector<Value>{g, shape_list(xs)});
}

// matmul's operands have at least 1 dimension (a scalar would reach shape
// code that assumes an axis).
void require_matmul_operands(const Args& a, int nx, int ny) {
  if (nx == 0 || ny == 0) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] x and y must have at least 1 dimension (matmul's operands), got shapes ",
        shape_str(shape_of(a[1])), " and ", shape_str(shape_of(a[2]))));
  }
}

// d/dx of matmul(x, y) given its cotangent g (NumPy's matmul shapes).
Value matmul_grad_x(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  int nx = ndim_of(x), ny = ndim_of(y);
  require_matmul_operands(a, nx, ny);
  if (nx == 1 && ny == 1) return prim("multiply", std::vector<Value>{g, y});
  if (ny == 1) return prim("outer", std::vector<Value>{g, y});
  if (nx == 1) return prim("matmul", std::vector<Value>{y, g});
  return prim("matmul",
              std::vector<Value>{g, prim("swapaxes", std::vector<Value>{y, Value(int64_t{-1}),
                                                                        Value(int64_t{-2})})});
}

// d/dy of matmul(x, y) given its cotangent g.
Value matmul_grad_y(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  int nx = ndim_of(x), ny = ndim_of(y);
  require_matmul_operands(a, nx, ny);
  if (nx == 1 && ny == 1) return prim("multiply", std::vector<Value>{g, x});
  if (nx == 1) return prim("outer", std::vector<Value>{x, g});
  if (nx == 2) return prim("matmul_tn", std::vector<Value>{x, g});
  if (ny == 2) {
    // A batch of rows times one matrix (a dense layer on (batch, steps,
    // features)): one tall product over all rows, not a product per batch
    // element summed afterwards.
    Shape xs = shape_of(x), gs = shape_of(g);
    if (gs.size() != xs.size()) {
      throw std::invalid_argument(error_message(
          "[", a.op(), "] the cotangent g has shape ", shape_str(gs),
          " but matmul's result for x of shape ", shape_str(xs), " has ", xs.size(),
          " dimensions"));
    }
    const int64_t k = xs.back(), n = gs.back();
    const int64_t rows = k == 0 ? 0 : shape_size(xs) / k;
    return prim("matmul_tn",
                std::vector<Value>{prim("reshape", std::vector<Value>{x, shape_list({rows, k})}),
                                   prim("reshape", std::vector<Value>{g, shape_list({rows, n})})});
  }
  return prim(
      "matmul",
      std::vector<Value>{
          prim("swapaxes", std::vector<Value>{x, Value(int64_t{-1}), Value(int64_t{-2})}), g});
}

// d/dx of matmul_tn(x, y) = transpose(x) @ y, for a 2-d x.
Value matmul_tn_grad_x(Args& a) {
  const Value &g = a[0], &y = a[2];
  if (ndim_of(y) == 1) return prim("outer", std::vector<Value>{y, g});
  return prim("matmul", std::vector<Value>{y, prim("transpose", std::vector<Value>{g})});
}

// The cotangent of x in dot(x, y) (numpy.dot), given g. Scalars: dot is
// multiply (the autodiff sums the cotangent back to x's shape). Up to 2-d:
// matmul's rules. N-d: dot(x, y)[I..., J..., n] = sum_k x[I..., k] y[J..., k, n],
// so d/dx[I..., k] = sum over J..., n of g y, a tensordot.
Value dot_grad_x(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  const int nx = ndim_of(x), ny = ndim_of(y);
  if (nx == 0 || ny == 0) return prim("multiply", std::vector<Value>{g, y});
  if (nx <= 2 && ny <= 2) return matmul_grad_x(a);
  if (ny == 1) {
    return prim("multiply", std::vector<Value>{
                                prim("expand_dims", std::vector<Value>{g, Value(int64_t{-1})}), y});
  }
  List g_axes, y_axes;
  for (int j = 0; j < ny - 2; ++j) {
    g_axes.emplace_back(int64_t{nx - 1 + j});
    y_axes.emplace_back(int64_t{j});
  }
  g_axes.emplace_back(int64_t{nx - 1 + ny - 2});
  y_axes.emplace_back(int64_t{ny - 1});
  return prim(
      "tensordot",
      std::vector<Value>{g, y, Value(List{Value(std::move(g_axes)), Value(std::move(y_axes))})});
}

// The cotangent of y in dot(x, y): sum over x's leading axes I... of x g,
// with k moved to its place in y.
Value dot_grad_y(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  const int nx = ndim_of(x), ny = ndim_of(y);
  if (nx == 0 || ny == 0) return prim("multiply", std::vector<Value>{g, x});
  if (nx <= 2 && ny <= 2) return matmul_grad_y(a);
  List lead;
  for (int i = 0; i < nx - 1; ++i) lead.emplace_back(int64_t{i});
  Value r = prim("tensordot", std::vector<Value>{x, g, Value(List{Value(lead), Value(lead)})});
  if (ny == 1) return r;  // (k,)
  return prim("moveaxis", std::vector<Value>{r, Value(int64_t{0}), Value(int64_t{-2})});
}

// The cotangent of x in cumsum(x, axis): each x[i] reaches out[j] for j >= i,
// so it is the reversed cumulative sum of g (of the flattened g for axis nil).
Value cumsum_grad(Args& a) {
  const Value &g = a[0], &x = a[1];
  if (a.is_nil(2)) {
    Value flat = prim("ravel", std::vector<Value>{g});
    Value r =
        prim("flip", std::vector<Value>{prim(
                         "cumsum", std::vector<Value>{prim("flip", std::vector<Value>{flat})})});
    return prim("reshape", std::vector<Value>{r, shape_list(shape_of(x))});
  }
  const Value axis = a[2];
  Value flipped = prim("flip", std::vector<Value>{g, axis});
  return prim("flip",
              std::vector<Value>{
                  prim("cumsum", std::vector<CallArg>{{"", flipped}, {"axis", axis}}), axis});
}

// d prod(x over axes) / dx[i]: the product of the other elements of x[i]'s
// lane (exact with zeros in the lane, unlike prod / x), times g broadcast back.
Value prod_grad(Args& a) {
  const Value& x = a[1];
  if (!x.is_array()) return reduce_grad(a);  // a number: d prod(x)/dx = 1
  const Array xa = a.array(1).astype(DType::float64);
  const int nd = xa.ndim();
  std::vector<bool> reduced(nd, a.is_nil(2));
  if (!a.is_nil(2)) {
    for (int64_t ax : a.int_list(2)) reduced[normalize_axis(ax, nd, a.op())] = true;
  }
  // Kept axes first, reduced axes last: lanes of K contiguous elements.
  std::vector<int> perm, inverse(nd);
  int64_t lane = 1;
  for (int d = 0; d < nd; ++d) {
    if (!reduced[d]) perm.push_back(d);
  }
  for (int d = 0; d < nd; ++d) {
    if (reduced[d]) {
      perm.push_back(d);
      lane *= xa.dim(d);
    }
  }
  for (int i = 0; i < nd; ++i) inverse[perm[i]] = i;
  Array moved = kernels::permute_axes(xa, perm);
  Array others(DType::float64, moved.shape());
  const double* src = moved.data<double>();
  double* dst = others.data<double>();
  const int64_t lanes = lane ? moved.size() / lane : 0;
  for (int64_t l = 0; l < lanes; ++l) {
    const double* v = src + l * lane;
    double* o = dst + l * lane;
    double left = 1.0;
    for (int64_t i = 0; i < lane; ++i) {
      o[i] = left;
      left *= v[i];
    }
    double right = 1.0;
    for (int64_t i = lane - 1; i >= 0; --i) {
      o[i] *= right;
      right *= v[i];
    }
  }
  Value back = Value(kernels::permute_axes(others, inverse));
  Value spread = reduce_grad(a);
  Value r = prim("multiply", std::vector<Value>{spread, back});
  const DType dt = a.array(1).dtype();
  if (is_floating(dt) && r.is_array() && r.as_array().dtype() != dt) r = r.as_array().astype(dt);
  return r;
}

// The cotangent of x in norm(x, ord, axis, keepdims) for the 2-norm of
// vectors and the Frobenius norm of matrices (g x / norm, 0 where the norm
// is 0) and the 1-norm of vectors (g sign(x)). Other orders raise.
// Which norm has a gradient rule: 2 (the vector 2-norm, the Frobenius norm)
// or 1 (the vector 1-norm), from x (index ix), ord (index io) and axis (the
// next); ValueError for the others.
int norm_gradient_order(Args& a, int ix, int io) {
  const Value &x = a[ix], &ord = a[io];
  const bool number = ord.is_int() || ord.is_float();
  // A matrix norm: over two axes, or of a 2-d x with ord given and no axis.
  const bool matrix =
      a.is_nil(io + 1) ? !ord.is_nil() && ndim_of(x) == 2 : a.int_list(io + 1).size() == 2;
  const bool fro = ord.is_nil() || (ord.is_string() && ord.as_string() == "fro" && matrix);
  const bool two = fro || (number && a.number(io) == 2.0 && !matrix);
  const bool one = number && a.number(io) == 1.0 && !matrix;
  if (!two && !one) {
    throw std::invalid_argument(
        error_message("[", a.op(),
                      "] norm has a gradient rule for the 2-norm and the 1-norm of vectors and "
                      "the Frobenius norm of matrices; got ord=",
                      ord.str(), matrix ? " of a matrix" : ""));
  }
  return two ? 2 : 1;
}

Value norm_grad(Args& a) {
  const Value &g = a[0], &x = a[1], &out = a[2];
  const bool one = norm_gradient_order(a, 1, 3) == 1;
  // g and the norm broadcast back over the reduced axes.
  std::vector<CallArg> spread_g{{"", g}, {"", x}, {"axis", a[4]}, {"keepdims", a[5]}};
  Value gb = prim("reduce_grad", std::move(spread_g));
  if (one) return prim("multiply", std::vector<Value>{gb, prim("sign", std::vector<Value>{x})});
  std::vector<CallArg> spread_out{{"", out}, {"", x}, {"axis", a[4]}, {"keepdims", a[5]}};
  Value nb = prim("reduce_grad", std::move(spread_out));
  Value zero = prim("equal", std::vector<Value>{nb, Value(0.0)});
  Value safe = prim("where", std::vector<Value>{zero, Value(1.0), nb});
  Value r = prim("divide", std::vector<Value>{prim("multiply", std::vector<Value>{gb, x}), safe});
  return prim("where", std::vector<Value>{zero, Value(0.0), r});
}

// The cotangents of the arrays in concatenate(arrays, axis): g cut back into
// their extents along the axis (for axis nil, the flattened arrays, reshaped).
Value concatenate_grad(Args& a) {
  const Value& g = a[0];
  const List& xs = a.list(1);
  List out;
  if (a.is_nil(2)) {
    Value flat = prim("ravel", std::vector<Value>{g});
    int64_t at = 0;
    for (const Value& x : xs) {
      const Shape s = shape_of(x);
      int64_t n = 1;
      for (int64_t e : s) n *= e;
      Value piece =
          prim("getitem", std::vector<Value>{flat, Value(Slice{at, at + n, std::nullopt})});
      out.push_back(prim("reshape", std::vector<Value>{piece, shape_list(s)}));
      at += n;
    }
    return Value(std::move(out));
  }
  const int nd = ndim_of(g);
  const int axis = normalize_axis(a.integer(2), nd, a.op());
  int64_t at = 0;
  for (const Value& x : xs) {
    const Shape xs = shape_of(x);
    if (static_cast<int>(xs.size()) != nd) {
      a.value_error(1, "must hold arrays of the cotangent's rank " + std::to_string(nd));
    }
    const int64_t n = xs[axis];
    std::vector<Value> index{g};  // getitem(g, i0, i1, ...): one index per axis
    for (int d = 0; d < nd; ++d) {
      Slice s{std::nullopt, std::nullopt, std::nullopt};
      if (d == axis) s = Slice{at, at + n, std::nullopt};
      index.emplace_back(s);
    }
    out.push_back(prim("getitem", std::move(index)));
    at += n;
  }
  return Value(std::move(out));
}

// The cotangent of x in split(x, indices_or_sections, axis), from g, the list
// of the pieces' cotangents (nil for a piece no gradient reached): each put
// back where its piece came from, zeros elsewhere.
Value split_grad(Args& a) {
  if (!a[0].is_list()) a.type_error(0, "a list of the pieces' cotangents");
  const List& gs = a.list(0);
  const Shape xs = shape_of(a[1]);
  if (xs.empty()) a.value_error(1, "must be an array of at least 1 dimension");
  const int axis = normalize_axis(a.integer(3), static_cast<int>(xs.size()), a.op());
  const int64_t n = xs[axis];
  // The pieces' bounds as split finds them (numpy.split's clamping).
  std::vector<int64_t> bounds{0};
  const Value& ios = a[2];
  if (ios.is_int() || ios.is_bool() || (ios.is_array() && ios.as_array().ndim() == 0)) {
    const int64_t sections = a.integer(2);
    if (sections <= 0 || n % sections != 0) {
      a.value_error(2, error_message("must divide the axis of ", n, " elements, got ", sections));
    }
    for (int64_t i = 1; i <= sections; ++i) bounds.push_back(i * (n / sections));
  } else {
    for (int64_t i : a.int_list(2))
      bounds.push_back(std::min(i < 0 ? std::max<int64_t>(0, i + n) : i, n));
    bounds.push_back(n);
  }
  if (gs.size() + 1 != bounds.size()) {
    throw std::invalid_argument(error_message("[", a.op(), "] split into ", bounds.size() - 1,
                                              " pieces, but the cotangent has ", gs.size()));
  }
  DType dt = DType::float64;
  bool any = false;
  for (const Value& g : gs) {
    if (g.is_nil()) continue;
    if (!any && g.is_array() && is_floating(g.as_array().dtype())) dt = g.as_array().dtype();
    any = true;
  }
  if (!any) return Value();
  auto piece_shape = [&](size_t i) {
    Shape s = xs;
    s[axis] = std::max(bounds[i], bounds[i + 1]) - bounds[i];
    return s;
  };
  if (std::is_sorted(bounds.begin(), bounds.end())) {
    // The pieces tile x: one concatenation.
    List parts;
    for (size_t i = 0; i < gs.size(); ++i) {
      parts.push_back(gs[i].is_nil() ? Value(Array::zeros(dt, piece_shape(i))) : gs[i]);
    }
    return prim("concatenate", std::vector<CallArg>{{"", Value(std::move(parts))},
                                                    {"axis", Value(int64_t{axis})}});
  }
  // Split points out of order give overlapping pieces: added where each came from.
  Value dx(Array::zeros(dt, xs));
  for (size_t i = 0; i < gs.size(); ++i) {
    if (gs[i].is_nil()) continue;
    std::vector<Value> args{dx, gs[i]};
    for (int d = 0; d < static_cast<int>(xs.size()); ++d) {
      args.push_back(d == axis
                         ? Value(Slice{bounds[i], bounds[i] + piece_shape(i)[axis], std::nullopt})
                         : Value(Slice{}));
    }
    dx = prim("index_add", std::move(args));
  }
  return dx;
}

// The cotangent of x in getitem(x, indices...) given g: for an array, g added
// at x[indices...] into zeros; for a list or tuple (a list-valued result,
// such as split's), a list as long as x with g at the index and nil
// elsewhere (nothing reached the other items).
Value getitem_grad(Args& a) {
  const Value& x = a[1];
  const List& indices = a.list(2);
  if (x.is_list()) {
    return sequence_setitem(Value(List(x.as_list().size())), a[0], indices, a.op());
  }
  std::vector<Value> args{prim("zeros_like", std::vector<Value>{x}), a[0]};
  args.insert(args.end(), indices.begin(), indices.end());
  return prim("index_add", std::move(args));
}

// The cotangents of the arrays of hstack/vstack/dstack (arrays made at least
// `min_dims`-d as NumPy makes them, then concatenated along `axis`; hstack
// of 1-d arrays along 0): g's part for each, in the arrays' own shapes, as a
// list nested like the arguments (hstack(a, b) or hstack([a, b])).
Value stacked_grad(Args& a) {
  const Value& g = a[0];
  const List& given = a.list(1);
  const bool nested = given.size() == 1 && given[0].is_list();
  const List& items = nested ? given[0].as_list() : given;
  const int64_t min_dims = a.integer(2);
  int64_t axis = a.integer(3);
  auto promoted = [&](const Shape& s) {
    const int64_t r = static_cast<int64_t>(s.size());
    if (r >= min_dims) return s;
    if (min_dims == 1) return Shape{1};
    if (min_dims == 2) return r == 0 ? Shape{1, 1} : Shape{1, s[0]};
    return r == 0 ? Shape{1, 1, 1} : r == 1 ? Shape{1, s[0], 1} : Shape{s[0], s[1], 1};
  };
  if (min_dims == 1 && !items.empty() && promoted(shape_of(items[0])).size() == 1) axis = 0;
  const int nd = ndim_of(g);
  List out;
  int64_t at = 0;
  for (const Value& x : items) {
    const Shape ps = promoted(shape_of(x));
    if (static_cast<int>(ps.size()) != nd || axis >= nd) {
      a.value_error(1, "must hold arrays that stack to the cotangent's rank " + std::to_string(nd));
    }
    std::vector<Value> index{g};
    for (int d = 0; d < nd; ++d) {
      Slice s{std::nullopt, std::nullopt, std::nullopt};
      if (d == axis) s = Slice{at, at + ps[d], std::nullopt};
      index.emplace_back(s);
    }
    at += ps[axis];
    out.push_back(prim(
        "reshape", std::vector<Value>{prim("getitem", std::move(index)), shape_list(shape_of(x))}));
  }
  if (nested) return Value(List{Value(std::move(out))});
  return Value(std::move(out));
}

// The cotangents of the arrays in stack(arrays, axis): g's slices along the
// new axis.
Value stack_grad(Args& a) {
  const Value& g = a[0];
  const List& xs = a.list(1);
  const int nd = ndim_of(g);
  const int axis = normalize_axis(a.integer(2), nd, a.op());
  List out;
  for (size_t i = 0; i < xs.size(); ++i) {
    out.push_back(prim("take", std::vector<CallArg>{{"", g},
                                                    {"", Value(static_cast<int64_t>(i))},
                                                    {"axis", Value(static_cast<int64_t>(axis))}}));
  }
  return Value(std::move(out));
}

// The cotangents of the operands of einsum(subscripts, operands...) (a
// list): for operand i with labels s_i and output labels s_out,
// einsum("s_out,<the others>->s_i", g, others...), broadcast over the labels
// only operand i has (summed away in the product). Explicit or implicit
// output; an operand with a repeated label (a diagonal) or '...' raises.
Value einsum_grad(Args& a) {
  const Value& g = a[0];
  std::string subs = a.string(1);
  const List& ops = a.list(2);
  subs.erase(std::remove(subs.begin(), subs.end(), ' '), subs.end());
  if (subs.find("...") != std::string::npos) {
    throw std::invalid_argument(error_message("[", a.op(),
                                              "] einsum with '...' has no gradient "
                                              "rule; got '",
                                              subs, "'"));
  }
  std::string lhs = subs, out;
  const size_t arrow = subs.find("->");
  if (arrow != std::string::npos) {
    lhs = subs.substr(0, arrow);
    out = subs.substr(arrow + 2);
  }
  std::vector<std::string> in;
  for (size_t st = 0;;) {
    const size_t comma = lhs.find(',', st);
    in.push_back(lhs.substr(st, comma == std::string::npos ? std::string::npos : comma - st));
    if (comma == std::string::npos) break;
    st = comma + 1;
  }
  if (arrow == std::string::npos) {
    // Implicit output: the labels used once, sorted.
    std::map<char, int> count;
    for (const auto& s : in) {
      for (char c : s) ++count[c];
    }
    for (auto [c, n] : count) {
      if (n == 1) out.push_back(c);
    }
  }
  if (in.size() != ops.size()) {
    throw std::invalid_argument(error_message("[", a.op(), "] ", in.size(), " operand labels in '",
                                              subs, "' for ", ops.size(), " operands"));
  }
  List grads;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& si = in[i];
    for (size_t p = 0; p < si.size(); ++p) {
      if (si.find(si[p], p + 1) != std::string::npos) {
        throw std::invalid_argument(error_message(
            "[", a.op(), "] einsum with a repeated label in an operand (a diagonal or trace, '", si,
            "') has no gradient rule"));
      }
    }
    std::string others, target;
    std::vector<Value> args;
    for (size_t k = 0; k < ops.size(); ++k) {
      if (k == i) continue;
      others += "," + in[k];
      args.push_back(ops[k]);
    }
    // Labels of operand i that appear nowhere else: g does not depend on
    // them, so its cotangent is the same along them (a broadcast).
    std::vector<bool> lonely(si.size());
    for (size_t p = 0; p < si.size(); ++p) {
      const char c = si[p];
      bool elsewhere = out.find(c) != std::string::npos;
      for (size_t k = 0; k < in.size() && !elsewhere; ++k) {
        elsewhere = k != i && in[k].find(c) != std::string::npos;
      }
      lonely[p] = !elsewhere;
      if (!lonely[p]) target.push_back(c);
    }
    Value r;
    if (out.empty()) {
      // A full contraction: g is one number, times the others' product.
      if (args.empty()) {
        r = Value(1.0);
      } else {
        std::vector<Value> v{Value(others.substr(1) + "->" + target)};
        v.insert(v.end(), args.begin(), args.end());
        r = prim("einsum", std::move(v));
      }
      r = prim("multiply", std::vector<Value>{r, g});
    } else {
      std::vector<Value> v{Value(out + others + "->" + target), g};
      v.insert(v.end(), args.begin(), args.end());
      r = prim("einsum", std::move(v));
    }
    const Shape xs = shape_of(ops[i]);
    List with_ones;
    for (size_t p = 0; p < si.size(); ++p) with_ones.emplace_back(lonely[p] ? int64_t{1} : xs[p]);
    r = prim("reshape", std::vector<Value>{r, Value(std::move(with_ones))});
    grads.push_back(prim("broadcast_to", std::vector<Value>{r, shape_list(xs)}));
  }
  return Value(std::move(grads));
}

// The cotangent of x in cumprod(x, axis): for a lane with its first zero at
// z, d out[j] / d x[i] is out[j] / x[i] for i < z (no zero divides), the
// product of the others for i = z, and 0 past z (every product holds x[z]).
Value cumprod_grad(Args& a) {
  const Value& x = a[1];
  const Shape xs = shape_of(x);
  const bool flat = a.is_nil(2);
  const Array x64 = a.array(1).astype(DType::float64);
  const Array xa = flat ? x64.contiguous().reshaped({x64.size()}) : x64;
  Array ga = a.array(0).astype(DType::float64).reshaped(xa.shape());
  const int nd = xa.ndim();
  const int axis = flat ? 0 : normalize_axis(a.integer(2), nd, a.op());
  // Lanes along `axis` as rows of (outer, n, inner).
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= xa.dim(d);
  for (int d = axis + 1; d < nd; ++d) inner *= xa.dim(d);
  const int64_t n = nd ? xa.dim(axis) : 1;
  const Array xc = xa.contiguous(), gc = ga.contiguous();
  const double* px = xc.data<double>();
  const double* pg = gc.data<double>();
  Array out(DType::float64, xa.shape());
  double* po = out.data<double>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + in; };
      int64_t z = n;
      for (int64_t i = 0; i < n; ++i) {
        if (px[at(i)] == 0.0) {
          z = i;
          break;
        }
      }
      // sum_{j >= i, j < z} g[j] out[j], from the back; out[j] = prefix products.
      std::vector<double> prefix(n);
      double p = 1.0;
      for (int64_t i = 0; i < n; ++i) {
        p *= px[at(i)];
        prefix[i] = p;
      }
      double tail = 0.0;
      for (int64_t i = std::min(z, n) - 1; i >= 0; --i) {
        tail += pg[at(i)] * prefix[i];
        po[at(i)] = tail / px[at(i)];
      }
      if (z < n) {
        // i = z: sum_{j >= z} g[j] * (product before z) * (product of z+1..j).
        const double before = z > 0 ? prefix[z - 1] : 1.0;
        double run = 1.0, acc = pg[at(z)];
        for (int64_t j = z + 1; j < n; ++j) {
          run *= px[at(j)];
          acc += pg[at(j)] * run;
        }
        po[at(z)] = before * acc;
        for (int64_t i = z + 1; i < n; ++i) po[at(i)] = 0.0;
      }
    }
  }
  Value r = Value(out.reshaped(xs));
  const DType dt = a.array(1).dtype();
  if (is_floating(dt) && dt != DType::float64) r = r.as_array().astype(dt);
  return r;
}

// take_grad of a float x and g of its dtype, integer index array in range
// (an embedding's rows): zeros with g's blocks added in index order, no
// per-element offsets. Empty otherwise (the general index_add handles it).
std::optional<Array> take_grad_by_blocks(const Value& g, const Value& x, const Value& indices,
                                         int axis) {
  if (!g.is_array() || !x.is_array() || !indices.is_array()) return std::nullopt;
  const Array& xa = x.as_array();
  const DType dt = xa.dtype();
  if ((dt != DType::float32 && dt != DType::float64) || g.as_array().dtype() != dt) {
    return std::nullopt;
  }
  const Array& idx = indices.as_array();
  Shape gs(xa.shape().begin(), xa.shape().begin() + axis);
  gs.insert(gs.end(), idx.shape().begin(), idx.shape().end());
  gs.insert(gs.end(), xa.shape().begin() + axis + 1, xa.shape().end());
  const int64_t n = xa.dim(axis);
  std::vector<int64_t> ip;
  if (g.as_array().shape() != gs || !kernels::block_indices(idx, n, ip)) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= xa.dim(d);
  for (int d = axis + 1; d < xa.ndim(); ++d) inner *= xa.dim(d);
  Array dx(dt, xa.shape());
  kernels::add_blocks(g.as_array().contiguous(), outer, n, inner, ip.data(), idx.size(), dx,
                      /*zero_first=*/true, &parallel_for);
  return dx;
}

// The cotangent of x in take(x, indices, axis): g added at the taken
// positions (repeated indices accumulate).
Value take_grad(Args& a) {
  const Value &g = a[0], &x = a[1], &indices = a[2];
  const Shape xs = shape_of(x);
  if (a.is_nil(3)) {
    int64_t size = 1;
    for (int64_t e : xs) size *= e;
    Value zeros = prim("zeros", std::vector<Value>{Value(size)});
    Value r = prim("index_add", std::vector<Value>{zeros, g, indices});
    return prim("reshape", std::vector<Value>{r, shape_list(xs)});
  }
  const int axis = normalize_axis(a.integer(3), static_cast<int>(xs.size()), a.op());
  if (std::optional<Array> dx = take_grad_by_blocks(g, x, indices, axis)) return *dx;
  std::vector<Value> args{prim("zeros_like", std::vector<Value>{x}), g};
  for (int d = 0; d < axis; ++d) args.emplace_back(Slice{});
  args.push_back(indices);
  return prim("index_add", std::move(args));
}

// The cotangent of x in take_along_axis(x, indices, axis): g added at the
// taken positions, each other axis indexed by its own position (an x axis of
// length 1, broadcast against the indices, gathers its cotangent from all).
Value take_along_axis_grad(Args& a) {
  const Value &g = a[0], &x = a[1], &indices = a[2];
  const Shape xs = shape_of(x);
  if (a.is_nil(3)) {
    Value zeros = prim("zeros", std::vector<Value>{Value(shape_size(xs, a.op()))});
    Value r = prim("index_add", std::vector<Value>{zeros, g, indices});
    return prim("reshape", std::vector<Value>{r, shape_list(xs)});
  }
  const int nd = static_cast<int>(xs.size());
  const int axis = normalize_axis(a.integer(3), nd, a.op());
  std::vector<Value> args{prim("zeros_like", std::vector<Value>{x}), g};
  for (int d = 0; d < nd; ++d) {
    if (d == axis) {
      args.push_back(indices);
      continue;
    }
    Shape at(nd, 1);
    at[d] = xs[d];
    args.push_back(prim("reshape", std::vector<Value>{prim("arange", std::vector<Value>{
                                                          Value(xs[d])}),
                                                      shape_list(at)}));
  }
  return prim("index_add", std::move(args));
}

// The cotangent of x in pad(x, pad_width) with mode "constant": the part of
// g where x was placed.
Value pad_grad(Args& a) {
  const Value &g = a[0], &x = a[1], &pw = a[2];
  if (!a[3].is_string() || a[3].as_string() != "constant") {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] pad has a gradient rule for mode 'constant'; got mode ", a[3].str()));
  }
  const Shape xs = shape_of(x);
  const size_t nd = xs.size();
  // pad_width as pad itself reads it: n, [b, a], [[b, a]] or one pair per axis.
  std::vector<int64_t> before(nd, 0);
  auto first = [&](const Value& p) {
    Args sub(a.spec(), {a[0], p});
    std::vector<int64_t> v = sub.int_list(1);
    if (v.empty()) a.value_error(2, "must be an int, a pair or one pair per axis, got " + pw.str());
    return v[0];
  };
  if (pw.is_list() && !pw.as_list().empty() && pw.as_list()[0].is_list()) {
    const List& pairs = pw.as_list();
    if (pairs.size() != 1 && pairs.size() != nd) {
      a.value_error(2, "must be one pair per axis, got " + pw.str());
    }
    for (size_t d = 0; d < nd; ++d) before[d] = first(pairs[pairs.size() == 1 ? 0 : d]);
  } else {
    before.assign(nd, first(pw));
  }
  std::vector<Value> index{g};
  for (size_t d = 0; d < nd; ++d)
    index.emplace_back(Slice{before[d], before[d] + xs[d], std::nullopt});
  return prim("getitem", std::move(index));
}

// The cotangent of x in roll(x, shift, axis): g rolled back.
Value roll_grad(Args& a) {
  Value back;
  if (a[2].is_int()) {
    back = Value(-a[2].as_int());
  } else {
    List l;
    for (int64_t v : a.int_list(2)) l.emplace_back(-v);
    back = Value(std::move(l));
  }
  return prim("roll", std::vector<CallArg>{{"", a[0]}, {"", back}, {"axis", a[3]}});
}

// The cotangent of x in sort(x, axis): g sent back to where each sorted
// value came from (the inverse of argsort's permutation).
Value sort_grad(Args& a) {
  const Value &g = a[0], &x = a[1];
  if (a.is_nil(2)) {
    Value p = prim("argsort", std::vector<CallArg>{{"", prim("ravel", std::vector<Value>{x})},
                                                   {"axis", Value(int64_t{-1})}});
    Value inv = prim("argsort", std::vector<CallArg>{{"", p}, {"axis", Value(int64_t{-1})}});
    Value r = prim("take_along_axis", std::vector<Value>{prim("ravel", std::vector<Value>{g}), inv,
                                                         Value(int64_t{-1})});
    return prim("reshape", std::vector<Value>{r, shape_list(shape_of(x))});
  }
  Value p = prim("argsort", std::vector<CallArg>{{"", x}, {"axis", a[2]}});
  Value inv = prim("argsort", std::vector<CallArg>{{"", p}, {"axis", a[2]}});
  return prim("take_along_axis", std::vector<Value>{g, inv, a[2]});
}

// The cotangent of x in tile(x, reps): the copies summed. With shapes padded
// to one rank d as NumPy pads them, g reshaped to (r0, s0, r1, s1, ...) and
// summed over the r axes.
Value tile_grad(Args& a) {
  const Value &g = a[0], &x = a[1];
  std::vector<int64_t> reps = a[2].is_int() ? std::vector<int64_t>{a[2].as_int()} : a.int_list(2);
  Shape xs = shape_of(x);
  const size_t d = std::max(reps.size(), xs.size());
  reps.insert(reps.begin(), d - reps.size(), 1);
  xs.insert(xs.begin(), d - xs.size(), 1);
  List split, axes;
  for (size_t i = 0; i < d; ++i) {
    split.emplace_back(reps[i]);
    split.emplace_back(xs[i]);
    axes.emplace_back(static_cast<int64_t>(2 * i));
  }
  Value r = prim("reshape", std::vector<Value>{g, Value(std::move(split))});
  r = prim("sum", std::vector<CallArg>{{"", r}, {"axis", Value(std::move(axes))}});
  return prim("reshape", std::vector<Value>{r, shape_list(shape_of(x))});
}

// The cotangent of x in repeat(x, n, axis) for an integer n: each element's
// n consecutive copies summed (of the flattened x for axis nil).
Value repeat_grad(Args& a) {
  const Value &g = a[0], &x = a[1];
  if (!a[2].is_int()) {
    throw std::invalid_argument(error_message(
        "[", a.op(), "] repeat has a gradient rule for an integer number of repeats; got ",
        a[2].describe()));
  }
  const int64_t n = a[2].as_int();
  const Shape xs = shape_of(x);
  if (a.is_nil(3)) {
    int64_t size = 1;
    for (int64_t e : xs) size *= e;
    Value r = prim("reshape", std::vector<Value>{g, Value(List{Value(size), Value(n)})});
    r = prim("sum", std::vector<CallArg>{{"", r}, {"axis", Value(int64_t{1})}});
    return prim("reshape", std::vector<Value>{r, shape_list(xs)});
  }
  const int axis = normalize_axis(a.integer(3), static_cast<int>(xs.size()), a.op());
  List split;
  for (int i = 0; i < static_cast<int>(xs.size()); ++i) {
    split.emplace_back(xs[i]);
    if (i == axis) split.emplace_back(n);
  }
  Value r = prim("reshape", std::vector<Value>{g, Value(std::move(split))});
  return prim("sum", std::vector<CallArg>{{"", r}, {"axis", Value(int64_t{axis + 1})}});
}

const bool registered_autodiff = register_primitives({
    {.name = "grad_seed",
     .family = "autodiff",
     .params = {{"out"}},
     .help = "The cotangent seed of a differentiated function's value: 1 in its dtype. Raises "
             "ValueError unless the value is a single number.",
     .eval = grad_seed,
     // The seed is 1 whatever the value: no second-order contribution.
     .grads = {""}},
    {.name = "checkpoint",
     .family = "autodiff",
     .params = {{"f"}},
     .help = "Activation checkpointing: checkpoint(f)(args...) is f(args...); inside a "
             "differentiated function (grad, value_and_grad, vjp), the call keeps none of f's "
             "intermediates for the backward pass, only its arguments, and the backward "
             "recomputes f's forward from them before running f's backward (the same gradients, "
             "bit for bit). f is a function defined with define or a lambda; random draws inside "
             "need a seed= (dropout's is one), other effects are refused.",
     .eval = [](Args& a) -> Value {
       if (!a[0].is_function()) a.type_error(0, "a function");
       return a[0];
     },
     .ns_per_element = 0.0,
     .grads = {""}},
    {.name = "remat",
     .family = "autodiff",
     .params = {{"f"}},
     .help = "Rematerialisation: remat(f)(args...) is f(args...); inside a differentiated "
             "function (grad, value_and_grad, vjp), f's value, and the views of it that getitem, "
             "reshape, ravel and transpose make, are not kept for the backward pass: the backward "
             "recomputes them just before the first backward statement that reads them (the same "
             "gradients, bit for bit). f's own intermediates are kept as without remat. "
             "Collectives inside f run again in the backward, on every member alike; random "
             "draws need a seed=, other effects are refused.",
     .eval = [](Args& a) -> Value {
       if (!a[0].is_function()) a.type_error(0, "a function");
       return a[0];
     },
     .ns_per_element = 0.0,
     .grads = {""}},
    {.name = "vjp_seed",
     .family = "autodiff",
     .params = {{"ct"}, {"like"}},
     .help = "The cotangent a vjp pullback was called with, checked against the value's "
             "template: an array of the value's shape and dtype (float64 for an integer value), "
             "or a number (filled to that shape); for a list value, a list of as many, item by "
             "item. Raises ValueError naming both otherwise.",
     .eval = vjp_seed,
     .ns_per_element = 0.0,
     .grads = {"adjoint", ""},
     .strided = true,
     .passes_through = true},
    {.name = "grad_accumulate",
     .family = "autodiff",
     .params = {{"a"}, {"b"}},
     .help =
         "a + b, where nil stands for no contribution (the sum of cotangents); tiled cotangents "
         "(tiled alike) add their tiles.",
     .eval = grad_accumulate,
     // Second order: the adjoint goes to each side that held a contribution.
     .grads = {"if(is_nil(a), nil, adjoint)", "if(is_nil(b), nil, adjoint)"},
     .passes_through = true},
    {.name = "unbroadcast",
     .family = "autodiff",
     .params = {{"g"}, {"x"}},
     .help = "g summed back to the shape of x (undoing broadcasting) and cast to x's float "
             "dtype; a number when x is a Python-like scalar; for a tiled x, g tiled like it; for "
             "a plain x and a tiled g, every locality's part added up (one all_reduce).",
     .eval = unbroadcast,
     .grads = {"broadcast_to(adjoint, shape(g))", ""},
     // Not packed: x is often a template (grad_template), a view of one
     // element that packing would expand to x's full size.
     .strided = true,
     .passes_through = true},
    {.name = "grad_template",
     .family = "autodiff",
     .params = {{"x"}},
     .help = "x's shape and dtype without its data, for unbroadcast: an array becomes a view of "
             "one element with x's shape (all strides 0), a list the list of its items' "
             "templates; gradients keep these instead of the values they were computed from.",
     .eval = [](Args& a) -> Value { return grad_template(a[0]); },
     .ns_per_element = 0.0,
     .grads = {""},
     .views = true},
    {.name = "reduce_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", Value()), opt("keepdims", false)},
     .help = "The cotangent g of a reduction of x over `axis` broadcast back to x's shape.",
     .eval = reduce_grad,
     .grads = {"sum(adjoint, axis=axis, keepdims=keepdims)", "", "", ""},
     // A broadcast view of g, read in place by the elementwise operations
     // that take it (a LayerNormalization's mean: 1M elements written per
     // step for nothing otherwise).
     .passes_through = true},
    {.name = "matmul_grad_x",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of x in matmul(x, y) given the cotangent g of the product.",
     .eval = matmul_grad_x,
     // g @ y^T is linear in g and in y (second derivatives).
     .grads = {"matmul(adjoint, y)", "", "matmul_grad_y(g, adjoint, y)"}},
    {.name = "matmul_grad_y",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of y in matmul(x, y) given the cotangent g of the product.",
     .eval = matmul_grad_y,
     .grads = {"matmul(x, adjoint)", "matmul_grad_x(g, x, adjoint)", ""}},
    {.name = "dot_grad_x",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of x in dot(x, y) given the cotangent g of the product (numpy.dot's "
             "shapes: scalars, vectors, matrices and N-d).",
     .eval = dot_grad_x,
     // Linear in g and in y, as matmul_grad_x; with a scalar operand the
     // product is g * y (elementwise).
     .grads = {"if(ndim(x) == 0 || ndim(y) == 0, adjoint * y, dot(adjoint, y))", "",
               "if(ndim(x) == 0 || ndim(y) == 0, adjoint * g, dot_grad_y(g, adjoint, y))"}},
    {.name = "dot_grad_y",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of y in dot(x, y) given the cotangent g of the product.",
     .eval = dot_grad_y,
     .grads = {"if(ndim(x) == 0 || ndim(y) == 0, adjoint * x, dot(x, adjoint))",
               "if(ndim(x) == 0 || ndim(y) == 0, adjoint * g, dot_grad_x(g, x, adjoint))", ""}},
    {.name = "cumsum_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", Value())},
     .help = "The cotangent of x in cumsum(x, axis): the reversed cumulative sum of g.",
     .eval = cumsum_grad,
     // The reversed cumulative sum is linear in g, its adjoint the cumulative sum.
     .grads = {"cumsum(adjoint, axis)", "", ""}},
    {.name = "prod_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", Value()), opt("keepdims", false)},
     .help = "The cotangent of x in prod(x, axis, keepdims): g times the product of the other "
             "elements of each reduced lane (exact when the lane holds zeros).",
     .eval = prod_grad},
    {.name = "norm_grad",
     .family = "autodiff",
     .params =
         {{"g"}, {"x"}, {"out"}, opt("ord", Value()), opt("axis", Value()), opt("keepdims", false)},
     .help = "The cotangent of x in norm(x, ord, axis, keepdims) = out: g x / out for the 2-norm "
             "and the Frobenius norm (0 where out is 0), g sign(x) for the vector 1-norm.",
     .eval = norm_grad},
    {.name = "norm_grad_order",
     .family = "autodiff",
     .params = {{"x"}, opt("ord", Value()), opt("axis", Value())},
     .help = "2 when norm(x, ord, axis) is the vector 2-norm or the Frobenius norm, 1 for the "
             "vector 1-norm (the norms norm_grad has a rule for); ValueError for the others.",
     .eval = [](Args& a) -> Value { return Value(int64_t{norm_gradient_order(a, 0, 1)}); },
     .grads = {"", "", ""}},
    {.name = "concatenate_grad",
     .family = "autodiff",
     .params = {{"g"}, {"arrays"}, opt("axis", int64_t{0})},
     .help = "The cotangents of the arrays in concatenate(arrays, axis): g cut back into their "
             "extents (a list).",
     .eval = concatenate_grad},
    {.name = "split_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"indices_or_sections"}, opt("axis", int64_t{0})},
     .help = "The cotangent of x in split(x, indices_or_sections, axis) from the list of the "
             "pieces' cotangents (nil for a piece no gradient reached): each put back where its "
             "piece came from, zeros elsewhere.",
     .eval = split_grad},
    {.name = "getitem_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"indices"}},
     .variadic = true,
     .help = "The cotangent of x in getitem(x, indices...) given g: index_add(zeros_like(x), g, "
             "indices...) for an array; for a list or tuple x, a list as long as x with g at the "
             "index (an int or a slice) and nil elsewhere.",
     .eval = getitem_grad,
     .views = true},
    {.name = "stacked_grad",
     .family = "autodiff",
     .params = {{"g"}, {"arrays"}, {"min_dims"}, {"axis"}},
     .help = "The cotangents of the arrays of hstack (min_dims 1, axis 1), vstack (2, 0) and "
             "dstack (3, 2): g's part for each, as a list nested like the arguments.",
     .eval = stacked_grad},
    {.name = "stack_grad",
     .family = "autodiff",
     .params = {{"g"}, {"arrays"}, opt("axis", int64_t{0})},
     .help = "The cotangents of the arrays in stack(arrays, axis): g's slices along the new "
             "axis (a list).",
     .eval = stack_grad},
    {.name = "einsum_grad",
     .family = "autodiff",
     .params = {{"g"}, {"subscripts"}, {"operands"}},
     .help = "The cotangents of the operands of einsum(subscripts, operands...), as a list.",
     .eval = einsum_grad},
    {.name = "cumprod_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", Value())},
     .help = "The cotangent of x in cumprod(x, axis), exact with zeros in x.",
     .eval = cumprod_grad},
    {.name = "take_along_axis_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"indices"}, {"axis"}},
     .help = "The cotangent of x in take_along_axis(x, indices, axis): g added at the taken "
             "positions (repeated indices accumulate).",
     .eval = take_along_axis_grad,
     // Linear in g: its adjoint takes the same positions.
     .grads = {"take_along_axis(adjoint, indices, axis)", "", "", ""}},
    {.name = "take_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"indices"}, opt("axis", Value())},
     .help = "The cotangent of x in take(x, indices, axis): g added at the taken positions.",
     .eval = take_grad,
     // Linear in g: its adjoint takes the same positions.
     .grads = {"take(adjoint, indices, axis)", "", "", ""}},
    {.name = "pad_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"pad_width"}, opt("mode", "constant")},
     .help = "The cotangent of x in pad(x, pad_width, mode='constant'): the part of g where x "
             "was placed.",
     .eval = pad_grad,
     .grads = {"pad(adjoint, pad_width, mode)", "", "", ""}},
    {.name = "roll_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"shift"}, opt("axis", Value())},
     .help = "The cotangent of x in roll(x, shift, axis): g rolled back by -shift.",
     .eval = roll_grad,
     // Linear in g: its adjoint rolls forward again.
     .grads = {"roll(adjoint, shift, axis)", "", "", ""}},
    {.name = "sort_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", int64_t{-1})},
     .help = "The cotangent of x in sort(x, axis): g sent back to where each sorted value came "
             "from.",
     .eval = sort_grad,
     // Linear in g (a permutation): its adjoint takes the cotangent in sorted order.
     .grads = {"if(is_nil(axis), take_along_axis(ravel(adjoint), argsort(ravel(x), axis=-1), -1),"
               " take_along_axis(adjoint, argsort(x, axis=axis), axis))",
               "", ""}},
    {.name = "tile_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"reps"}},
     .help = "The cotangent of x in tile(x, reps): the cotangents of the copies summed.",
     .eval = tile_grad,
     // Linear in g: its adjoint tiles again.
     .grads = {"tile(adjoint, reps)", "", ""}},
    {.name = "repeat_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"repeats"}, opt("axis", Value())},
     .help = "The cotangent of x in repeat(x, n, axis) for an integer n: the n copies of each "
             "element summed.",
     .eval = repeat_grad,
     // Linear in g: its adjoint repeats again.
     .grads = {"repeat(adjoint, repeats, axis)", "", "", ""}},
    {.name = "matmul_tn_grad_x",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of x in matmul_tn(x, y) = transpose(x) @ y given g.",
     .eval = matmul_tn_grad_x,
     .grads = {"matmul_tn(adjoint, y)", "", "matmul(adjoint, g)"}},
});

}  // namespace

// norm_grad as an expression (second-order gradients): g x / out spread over
// the reduced axes (0 where out is 0; out stays 1 there under the division,
// so that no 0 / 0 reaches the second derivative), or g sign(x).
const bool expanded_autodiff = register_gradient_expansions({
    {"norm_grad",
     "block(define(gb, reduce_grad(g, x, axis, keepdims)),"
     "      if(norm_grad_order(x, ord, axis) == 1, gb * sign(x),"
     "         block(define(nb, reduce_grad(out, x, axis, keepdims)),"
     "               define(zero, nb == 0),"
     "               where(zero, 0.0, gb * x / where(zero, 1.0, nb)))))"},
});

}  // namespace tessera
