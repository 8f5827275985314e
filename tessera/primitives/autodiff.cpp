// The autodiff family: the helpers that gradient programs are made of
// (seeding, accumulating and un-broadcasting cotangents) and the backward
// parts of reductions and matrix products. See tessera/lang/autodiff.hpp.
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

Value prim(const char* name, std::vector<Value> args) {
  return call_primitive(name, std::move(args));
}

Value prim(const char* name, std::vector<CallArg> args) {
  return call_primitive(name, std::move(args));
}

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

// a + b where nil stands for "no contribution yet". Cotangents of a tiled
// array are tiled like it: their tiles are added.
Value grad_accumulate(Args& a) {
  if (a.is_nil(0)) return a[1];
  if (a.is_nil(1)) return a[0];
  if (a[0].is_tiled() || a[1].is_tiled()) {
    if (!a[0].is_tiled() || !a[1].is_tiled() || !a[0].as_tiled().same_tiling(a[1].as_tiled())) {
      throw std::invalid_argument(error_message(
          "[grad] cannot add the cotangents ", a[0].describe(), " and ", a[1].describe(),
          ": the cotangents of one value must be tiled alike"));
    }
    TiledArray sum = a[0].as_tiled();
    sum.tile = prim("add", std::vector<Value>{Value(sum.tile), Value(a[1].as_tiled().tile)}).as_array();
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
      throw std::invalid_argument(error_message(
          "[", a.op(), "] cotangent of shape ", shape_str(shape_of(g)),
          " does not match the reduction of shape ", shape_str(xs), " (expected ",
          shape_str(reduced), ")"));
    }
    g = prim("reshape", std::vector<Value>{g, shape_list(kept)});
  }
  return prim("broadcast_to", std::vector<Value>{g, shape_list(xs)});
}

// d/dx of matmul(x, y) given its cotangent g (NumPy's matmul shapes).
Value matmul_grad_x(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  int nx = ndim_of(x), ny = ndim_of(y);
  if (nx == 1 && ny == 1) return prim("multiply", std::vector<Value>{g, y});
  if (ny == 1) return prim("outer", std::vector<Value>{g, y});
  if (nx == 1) return prim("matmul", std::vector<Value>{y, g});
  return prim("matmul", std::vector<Value>{g, prim("swapaxes", std::vector<Value>{
                                                     y, Value(int64_t{-1}), Value(int64_t{-2})})});
}

// d/dy of matmul(x, y) given its cotangent g.
Value matmul_grad_y(Args& a) {
  const Value &g = a[0], &x = a[1], &y = a[2];
  int nx = ndim_of(x), ny = ndim_of(y);
  if (nx == 1 && ny == 1) return prim("multiply", std::vector<Value>{g, x});
  if (nx == 1) return prim("outer", std::vector<Value>{x, g});
  if (nx == 2) return prim("matmul_tn", std::vector<Value>{x, g});
  return prim("matmul", std::vector<Value>{prim("swapaxes", std::vector<Value>{
                                               x, Value(int64_t{-1}), Value(int64_t{-2})}),
                                           g});
}

// d/dx of matmul_tn(x, y) = transpose(x) @ y, for a 2-d x.
Value matmul_tn_grad_x(Args& a) {
  const Value &g = a[0], &y = a[2];
  if (ndim_of(y) == 1) return prim("outer", std::vector<Value>{y, g});
  return prim("matmul", std::vector<Value>{y, prim("transpose", std::vector<Value>{g})});
}

const bool registered = register_primitives({
    {.name = "grad_seed",
     .family = "autodiff",
     .params = {{"out"}},
     .help = "The cotangent seed of a differentiated function's value: 1 in its dtype. Raises "
             "ValueError unless the value is a single number.",
     .eval = grad_seed},
    {.name = "grad_accumulate",
     .family = "autodiff",
     .params = {{"a"}, {"b"}},
     .help = "a + b, where nil stands for no contribution (the sum of cotangents); tiled cotangents "
             "(tiled alike) add their tiles.",
     .eval = grad_accumulate},
    {.name = "unbroadcast",
     .family = "autodiff",
     .params = {{"g"}, {"x"}},
     .help = "g summed back to the shape of x (undoing broadcasting) and cast to x's float "
             "dtype; a number when x is a Python-like scalar; for a tiled x, g tiled like it; for "
             "a plain x and a tiled g, every locality's part added up (one all_reduce).",
     .eval = unbroadcast},
    {.name = "reduce_grad",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, opt("axis", Value()), opt("keepdims", false)},
     .help = "The cotangent g of a reduction of x over `axis` broadcast back to x's shape.",
     .eval = reduce_grad},
    {.name = "matmul_grad_x",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of x in matmul(x, y) given the cotangent g of the product.",
     .eval = matmul_grad_x},
    {.name = "matmul_grad_y",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of y in matmul(x, y) given the cotangent g of the product.",
     .eval = matmul_grad_y},
    {.name = "matmul_tn_grad_x",
     .family = "autodiff",
     .params = {{"g"}, {"x"}, {"y"}},
     .help = "The cotangent of x in matmul_tn(x, y) = transpose(x) @ y given g.",
     .eval = matmul_tn_grad_x},
});

}  // namespace

}  // namespace tessera
