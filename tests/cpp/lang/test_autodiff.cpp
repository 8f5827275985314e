// Reverse-mode autodiff: every gradient rule against central finite
// differences (float64), through the language's grad(), plus the
// transformation's handling of functions, if, and what it rejects.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "tessera/lang/autodiff.hpp"
#include "tessera/lang/program.hpp"
#include "test_util.hpp"

using namespace tessera;
using tessera::test::throws_with;

namespace {

// Inputs by name: small float64 arrays of fixed values, away from kinks.
Array input(const std::string& name) {
  static const std::map<std::string, std::pair<Shape, std::vector<double>>> inputs = {
      {"a", {{2, 3}, {0.3, -0.7, 1.1, 0.45, -1.3, 0.8}}},
      {"b", {{2, 3}, {0.9, 0.35, -0.4, 1.2, 0.6, -0.25}}},
      {"row", {{3}, {0.5, -1.5, 2.0}}},
      {"col", {{2, 1}, {0.7, -0.2}}},
      {"pos", {{2, 3}, {0.3, 0.7, 1.1, 0.45, 1.3, 0.8}}},
      {"unit", {{2, 3}, {0.3, -0.7, 0.1, 0.45, -0.3, 0.8}}},
      {"m", {{3, 2}, {0.2, -0.4, 1.0, 0.5, -0.6, 0.3}}},
      {"v", {{3}, {0.3, -0.5, 0.8}}},
      {"w", {{2}, {1.5, -0.5}}},
      {"cube", {{2, 3, 2}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2}}},
      {"zeroed", {{2, 3}, {0.3, 0.0, 1.1, 0.45, -1.3, 0.8}}},
  };
  // Convolutions' data (batch, steps or rows and columns, channels) and
  // kernels: k1 is (kernel_size, channels / 2, filters) for groups 2, k2 a
  // depthwise kernel over 2 channels. Fixed values of both signs.
  static const std::map<std::string, Shape> conv_inputs = {
      {"sig", {2, 5, 4}},      {"sig10", {2, 10, 4}},   {"k1", {3, 2, 4}},    {"img", {1, 3, 3, 2}},
      {"img45", {1, 4, 5, 2}}, {"img43", {1, 4, 3, 2}}, {"k2", {2, 2, 1, 2}},
  };
  if (auto it = conv_inputs.find(name); it != conv_inputs.end()) {
    Array a(DType::float64, it->second);
    for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = std::sin(1.3 * i + 0.4) * 0.9;
    return a;
  }
  auto& [shape, values] = inputs.at(name);
  return Array::from_vector<double>(values, shape);
}

// The primitive each case is mainly about, the expression of the
// parameters (named after inputs), and the inputs.
struct GradCase {
  std::string primitive;
  std::string body;
  std::vector<std::string> params;
};

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> c = {
      {"add", "a + b", {"a", "b"}},
      {"add", "a + row", {"a", "row"}},  // broadcasting: summed back
      {"subtract", "a - col", {"a", "col"}},
      {"multiply", "a * b", {"a", "b"}},
      {"divide", "a / pos", {"a", "pos"}},
      {"power", "pos ** b", {"pos", "b"}},
      {"maximum", "maximum(a, b)", {"a", "b"}},
      {"minimum", "minimum(a, b)", {"a", "b"}},
      {"fmax", "fmax(a, b)", {"a", "b"}},
      {"fmin", "fmin(a, b)", {"a", "b"}},
      {"mod", "mod(a, pos + 2.0)", {"a", "pos"}},
      {"remainder", "remainder(b * 3.0, pos + 0.2)", {"b", "pos"}},
      {"arctan2", "arctan2(a, b)", {"a", "b"}},
      {"hypot", "hypot(a, b)", {"a", "b"}},
      {"copysign", "copysign(a, b)", {"a", "b"}},
      {"negative", "-a", {"a"}},
      {"positive", "positive(a)", {"a"}},
      {"after", "after(a, b) * b", {"a", "b"}},  // b only a token of after: its own use counts
      {"abs", "abs(a)", {"a"}},
      {"absolute", "absolute(a)", {"a"}},
      {"square", "square(a)", {"a"}},
      {"sqrt", "sqrt(pos)", {"pos"}},
      {"exp", "exp(a)", {"a"}},
      {"exp2", "exp2(a)", {"a"}},
      {"expm1", "expm1(a)", {"a"}},
      {"log", "log(pos)", {"pos"}},
      {"log2", "log2(pos)", {"pos"}},
      {"log10", "log10(pos)", {"pos"}},
      {"log1p", "log1p(pos)", {"pos"}},
      {"sin", "sin(a)", {"a"}},
      {"cos", "cos(a)", {"a"}},
      {"tan", "tan(unit)", {"unit"}},
      {"arcsin", "arcsin(unit)", {"unit"}},
      {"arccos", "arccos(unit)", {"unit"}},
      {"arctan", "arctan(a)", {"a"}},
      {"sinh", "sinh(a)", {"a"}},
      {"cosh", "cosh(a)", {"a"}},
      {"tanh", "tanh(a)", {"a"}},
      {"arcsinh", "arcsinh(a)", {"a"}},
      {"arccosh", "arccosh(pos + 1.5)", {"pos"}},
      {"arctanh", "arctanh(unit)", {"unit"}},
      {"reciprocal", "reciprocal(pos)", {"pos"}},
      {"deg2rad", "deg2rad(a)", {"a"}},
      {"rad2deg", "rad2deg(a)", {"a"}},
      {"clip", "clip(a, -0.5, 0.5)", {"a"}},
      {"where", "where(a > 0, a * b, b)", {"a", "b"}},
      {"astype", "astype(a, \"float64\") * b", {"a", "b"}},
      {"nan_to_num", "nan_to_num(a)", {"a"}},
      {"array", "array(a)", {"a"}},
      {"asarray", "asarray(a)", {"a"}},
      {"ascontiguousarray", "ascontiguousarray(transpose(a))", {"a"}},
      {"copy", "copy(a)", {"a"}},
      {"copy_value", "copy_value(a)", {"a"}},
      {"tril", "tril(m)", {"m"}},
      {"triu", "triu(m)", {"m"}},
      {"reshape", "reshape(a, [3, 2]) * m", {"a", "m"}},
      {"ravel", "ravel(a)", {"a"}},
      {"flatten", "flatten(a)", {"a"}},
      {"transpose", "transpose(a) * m", {"a", "m"}},
      {"transpose", "transpose(cube, [2, 0, 1])", {"cube"}},
      {"swapaxes", "swapaxes(cube, 0, 2)", {"cube"}},
      {"moveaxis", "moveaxis(cube, 0, 2)", {"cube"}},
      {"expand_dims", "expand_dims(a, 1)", {"a"}},
      {"squeeze", "squeeze(col)", {"col"}},
      {"flip", "flip(a, 1)", {"a"}},
      {"broadcast_to", "broadcast_to(row, [2, 3]) * a", {"row", "a"}},
      // overlapping windows: each element's gradient summed over its windows
      {"window_view", "window_view(a, 1, 2) * window_view(b, 1, 2)", {"a", "b"}},
      {"window_view", "window_view(cube, 1, 2) * 1.5", {"cube"}},
      {"window_view_grad", "window_view_grad(window_view(b, 1, 2) * 2.0, a, 1, 2) * a",
       {"a", "b"}},
      {"atleast_1d", "atleast_1d(a)", {"a"}},
      {"atleast_2d", "atleast_2d(row)", {"row"}},
      {"atleast_3d", "atleast_3d(a)", {"a"}},
      {"getitem", "a[1, 0:2] * row[0:2]", {"a", "row"}},
      // An item of a list of differentiated values: the list's cotangent is
      // a list, nil for the items no gradient reached.
      {"getitem", "list(a, a * b)[1] * tuple(b, a)[0]", {"a", "b"}},
      {"getitem", "list(a, b, a * b)[0:2][1] * a", {"a", "b"}},
      // split gives a list: pieces used, unused (nil), and overlapping ones
      // when the split points are out of order.
      {"split", "split(a, 3, axis=1)[2] * split(a, [1], axis=1)[0]", {"a"}},
      {"split", "split(a, [2, 1], axis=1)[2] * 3.0 + split(a, [2, 1], axis=1)[0][:, 1:]", {"a"}},
      {"split", "concatenate(split(cube, 2, axis=2), axis=0) * 2.0", {"cube"}},
      {"unpack", "unpack(a, 2)[1] * unpack(split(v, 3), 3)[0]", {"a", "v"}},
      // Convolutions with groups, and the transposed convolution (the
      // backward primitives differentiated in their arrays).
      {"conv1d", "conv1d(sig, k1, 2, \"same\", 1, 2)", {"sig", "k1"}},
      {"conv2d", "conv2d(img45, k2, [1, 2], \"same\", 1, 2)", {"img45", "k2"}},
      // One gradient alone (its own backward primitive, not conv2d_grads).
      {"conv2d",
       "conv2d(img45, reshape(arange(8) * 0.3 - 0.5, [2, 2, 1, 2]), [1, 2], \"same\", 1, 2)",
       {"img45"}},
      {"conv2d", "conv2d(reshape(arange(40) * 0.1, [1, 4, 5, 2]), k2, [1, 2], \"same\", 1, 2)",
       {"k2"}},
      // Both gradients at once, differentiated in dy, x and w through either.
      {"conv1d_grads", "conv1d_grads(sig, sig10, k1, 2, \"same\", 1, 2)[0]", {"sig", "sig10", "k1"}},
      {"conv1d_grads", "conv1d_grads(sig, sig10, k1, 2, \"same\", 1, 2)[1]", {"sig", "sig10", "k1"}},
      {"conv2d_grads",
       "conv2d_grads(img43, img45, k2, [1, 2], \"same\", 1, 2)[0]",
       {"img43", "img45", "k2"}},
      {"conv2d_grads",
       "conv2d_grads(img43, img45, k2, [1, 2], \"same\", 1, 2)[1] * 3.0",
       {"img43", "img45", "k2"}},
      {"conv1d_grad_input",
       "conv1d_grad_input(sig, k1, [2, 10, 4], 2, \"same\", 1, 2)",
       {"sig", "k1"}},
      {"conv1d_grad_input",
       "conv1d_grad_input(sig, k1, [2, 9, 4], 2, \"causal\", 1, 2)",
       {"sig", "k1"}},
      {"conv2d_grad_input",
       "conv2d_grad_input(img, k2, [1, 7, 4, 2], [2, 1], \"valid\", 1, 2)",
       {"img", "k2"}},
      {"conv2d_grad_input",
       "conv2d_grad_input(img, k2, [1, 5, 5, 2], 1, \"valid\", 2, 2)",
       {"img", "k2"}},
      {"conv1d_grad_weight",
       "conv1d_grad_weight(sig, sig10, [3, 2, 4], 2, \"same\", 1, 2)",
       {"sig", "sig10"}},
      {"conv2d_grad_weight",
       "conv2d_grad_weight(img43, img45, [2, 2, 1, 2], [1, 2], \"same\", 1, 2)",
       {"img43", "img45"}},
      {"sum", "sum(a, axis=1) * col[:, 0]", {"a", "col"}},
      {"sum", "sum(cube, axis=[0, 2], keepdims=true)", {"cube"}},
      {"mean", "mean(a, axis=0) * row", {"a", "row"}},
      {"max", "max(a, axis=1)", {"a"}},
      {"amax", "amax(a)", {"a"}},
      {"min", "min(cube, axis=[1, 2])", {"cube"}},
      {"amin", "amin(a, axis=0)", {"a"}},
      {"logsumexp", "logsumexp(a, axis=1)", {"a"}},
      {"var", "var(a, axis=1, ddof=1)", {"a"}},
      {"std", "std(a)", {"a"}},
      {"matmul", "a @ m", {"a", "m"}},
      {"matmul", "m @ w", {"m", "w"}},
      {"matmul", "v @ m", {"v", "m"}},
      {"matmul", "v @ v", {"v"}},
      {"matmul_tn", "matmul_tn(m, transpose(b))", {"m", "b"}},
      {"matmul_tn", "transpose(m) @ v", {"m", "v"}},
      // The backward primitives' own rules (second-order gradients: grad inside a
      // differentiated function), each against central differences of its value.
      {"grad_accumulate", "grad_accumulate(a, b * 2.0)", {"a", "b"}},
      {"unbroadcast", "unbroadcast(a * b, row) * row", {"a", "b", "row"}},
      {"reduce_grad", "reduce_grad(row * row, a, 0) * b", {"row", "a", "b"}},
      {"reduce_grad", "reduce_grad(col, a, 1, true) * b", {"col", "a", "b"}},
      {"matmul_grad_x", "matmul_grad_x(a @ m, b, m)", {"a", "m", "b"}},
      {"matmul_grad_y", "matmul_grad_y(b @ m, a, m)", {"b", "a", "m"}},
      {"matmul_tn_grad_x", "matmul_tn_grad_x(m @ a, a, b)", {"m", "b", "a"}},
      {"pad_grad", "pad_grad(pad(v, 1) * 2.0 + exp(pad(v, 1)), row, 1)", {"v", "row"}},
      {"vjp_seed", "vjp_seed(a * b, grad_template(b))", {"a", "b"}},
      {"relu_grad", "relu_grad(a * b, b)", {"a", "b"}},
      {"leaky_relu_grad", "leaky_relu_grad(a * b, b, 0.2)", {"a", "b"}},
      {"elu_grad", "elu_grad(a * 2.0, b, 1.3)", {"a", "b"}},
      {"sigmoid_grad", "sigmoid_grad(a, unit)", {"a", "unit"}},
      {"tanh_grad", "tanh_grad(a, unit)", {"a", "unit"}},
      {"softplus_grad", "softplus_grad(a, b)", {"a", "b"}},
      {"bias_add_grad", "bias_add_grad(a * b) * row", {"a", "b", "row"}},
      {"gelu_grad", "gelu_grad(a * 2.0, b)", {"a", "b"}},
      {"gelu_grad", "gelu_grad(a, b * 1.5, true)", {"a", "b"}},
      {"softmax_grad", "softmax_grad(a * b, softmax(b, axis=0), axis=0)", {"a", "b"}},
      {"softmax_grad", "softmax_grad(a, softmax(b)) * b", {"a", "b"}},
      {"log_softmax_grad", "log_softmax_grad(a * b, log_softmax(b))", {"a", "b"}},
      {"dot_grad_x", "dot_grad_x(dot(a, m) * 2.0, a, m)", {"a", "m"}},
      {"dot_grad_x", "dot_grad_x(a * b, cube, w)", {"a", "b", "cube", "w"}},  // N-d by 1-d
      {"dot_grad_y", "dot_grad_y(dot(a, m) + 1.0, a, m)", {"a", "m"}},
      {"dot_grad_y", "dot_grad_y(v * v, row[1], v)", {"v", "row"}},  // a scalar x
      {"cumsum_grad", "cumsum_grad(a * b, a, 1)", {"a", "b"}},
      {"cumsum_grad", "cumsum_grad(ravel(a) * 2.0, a)", {"a"}},  // axis nil: g flat
      {"take_grad", "take_grad(b * 3.0, a, [0, 2, 2], 1) * a", {"b", "a"}},
      {"take_along_axis_grad",
       "take_along_axis_grad(b * b, a, [[0, 2, 2], [1, 1, 0]], 1)",
       {"b", "a"}},
      {"roll_grad", "roll_grad(a * b, a, 2, 1)", {"a", "b"}},
      {"sort_grad", "sort_grad(a * b, b, 1)", {"a", "b"}},
      {"sort_grad", "sort_grad(ravel(a) * 2.0, b, nil) * a", {"a", "b"}},  // flattened
      {"tile_grad", "tile_grad(tile(a, [1, 2]) * 2.0, a, [1, 2]) * b", {"a", "b"}},
      {"repeat_grad", "repeat_grad(repeat(a, 2, 1) * 1.5, a, 2, 1) * a", {"a"}},
      {"avg_pool2d_grad", "avg_pool2d_grad(exp(avg_pool2d(img45, 2, 1, \"same\")), img45, 2, 1, "
                          "\"same\")", {"img45"}},
      {"avg_pool1d_grad", "avg_pool1d_grad(sig * 2.0, sig10, 2, 2, \"valid\")", {"sig", "sig10"}},
      {"outer", "outer(v, w)", {"v", "w"}},
      {"diff", "diff(a)", {"a"}},
      {"diff", "diff(cube, 2, axis=0, prepend=cube[0:1] * 2.0, append=1.5)", {"cube"}},
      {"diff", "diff(a, axis=0, prepend=b[0:1], append=reshape(row, [1, 3]))", {"a", "b", "row"}},
      {"cross", "cross(a, b)", {"a", "b"}},
      {"cross", "cross(a, row)", {"a", "row"}},
      {"cross", "cross(m, w, axisa=0, axisb=0)", {"m", "w"}},
      {"cross", "cross(transpose(a), m, axis=0)", {"a", "m"}},
      // Plain operands: a replicated tiled product (other tilings: tests/distributed/tiled_grad.py).
      {"dot_d", "dot_d(a, m)", {"a", "m"}},
      // A plain x: returned as it is (tiled x: tests/distributed/tiled_grad_moves.py).
      {"all_gather_d", "all_gather_d(a) * b", {"a", "b"}},
      // Collectives on one locality (their multi-rank gradients: tests/distributed).
      {"all_reduce", "all_reduce(v)", {"v"}},
      // A gradient bucket member on one locality: the identity (buckets on
      // several: tests/distributed/grad_buckets.tsl).
      {"grad_bucket", "grad_bucket(a, \"b\", 0, 1) * b", {"a", "b"}},
      // no bucket of that name in flight: the cotangent passes on at once
      {"bucket_fence", "bucket_fence(a, \"s0\") * b", {"a", "b"}},
      {"all_reduce", "all_reduce(v, \"max\")", {"v"}},
      {"broadcast", "broadcast(v)", {"v"}},
      {"dot", "dot(a, m)", {"a", "m"}},
      {"dot", "dot(v, v)", {"v"}},
      {"dot", "dot(a, v)", {"a", "v"}},
      {"dot", "dot(w, a)", {"w", "a"}},
      {"dot", "dot(cube, w)", {"cube", "w"}},             // N-d with a vector
      {"dot", "dot(a, cube)", {"a", "cube"}},             // N-d: (2, 3) . (2, 3, 2)
      {"dot", "dot(cube, transpose(m))", {"cube", "m"}},  // N-d . 2-d
      {"dot", "dot(a, 2.5) + dot(1.5, b)", {"a", "b"}},
      {"cumsum", "cumsum(a, axis=1)", {"a"}},
      {"cumsum", "cumsum(cube, axis=0)", {"cube"}},
      {"cumsum", "cumsum(cube)", {"cube"}},
      {"prod", "prod(a, axis=1)", {"a"}},
      {"prod", "prod(zeroed, axis=0)", {"zeroed"}},  // a zero in a lane: exact
      {"prod", "prod(cube, axis=[0, 2], keepdims=true)", {"cube"}},
      {"prod", "prod(a)", {"a"}},
      {"norm", "norm(a)", {"a"}},
      {"norm", "norm(a, axis=1)", {"a"}},
      {"norm", "norm(cube, axis=2, keepdims=true)", {"cube"}},
      {"norm", "norm(a, 1, 0)", {"a"}},
      {"norm", "norm(a, \"fro\")", {"a"}},
      {"sort", "sort(a)", {"a"}},
      {"sort", "sort(cube, axis=1)", {"cube"}},
      {"sort", "sort(a, axis=nil)", {"a"}},
      {"tile", "tile(a, [2, 1, 3])", {"a"}},
      {"tile", "tile(v, 2)", {"v"}},
      {"repeat", "repeat(a, 2, axis=1)", {"a"}},
      {"repeat", "repeat(cube, 3)", {"cube"}},
      {"concatenate", "concatenate(list(a, b * 2.0), axis=1)", {"a", "b"}},
      {"concatenate", "concatenate(list(a, a * a))", {"a"}},  // one value in two items
      {"concatenate", "concatenate(tuple(a, transpose(m)), axis=nil)", {"a", "m"}},
      {"stack", "stack(list(a, b, a * b), axis=1)", {"a", "b"}},
      {"stack", "stack(tuple(v, v * 3.0))", {"v"}},
      {"take", "take(a, [2, 0, 2], axis=1)", {"a"}},  // a repeated index adds up
      {"take", "take(cube, [[1, 4], [4, 4]])", {"cube"}},
      {"take_along_axis", "take_along_axis(a, astype([[2, 0, 2], [1, 1, 0]], \"int64\"), 1)",
       {"a"}},  // repeated indices add up
      {"take_along_axis", "take_along_axis(cube, astype([[[1], [0], [1]]], \"int64\"), 2)",
       {"cube"}},  // an axis of length 1 in the indices broadcasts
      {"pad", "pad(a, list(list(1, 0), list(2, 3)))", {"a"}},
      {"pad", "pad(v, 2)", {"v"}},
      {"roll", "roll(a, 2, axis=1)", {"a"}},
      {"roll", "roll(cube, [1, -1], axis=[0, 2])", {"cube"}},
      {"roll", "roll(a, 4)", {"a"}},
      {"fftshift", "fftshift(a)", {"a"}},
      {"fftshift", "fftshift(cube, axes=[0, 2])", {"cube"}},
      {"ifftshift", "ifftshift(a, axes=1)", {"a"}},
      {"vdot", "vdot(a, transpose(m)) * a", {"a", "m"}},
      {"cumprod", "cumprod(a, axis=1)", {"a"}},
      {"cumprod", "cumprod(zeroed, axis=1)", {"zeroed"}},  // a zero: exact
      {"cumprod", "cumprod(cube)", {"cube"}},
      {"cumprod", "cumprod(cube, axis=0)", {"cube"}},
      {"accumulate", "accumulate(a, \"maximum\", 1) * b", {"a", "b"}},  // running max/min
      {"accumulate", "accumulate(cube, \"fmin\", 0)", {"cube"}},
      {"accumulate", "accumulate(cube, \"minimum\", -1) * cube", {"cube"}},
      {"einsum", "einsum(\"ij,jk->ik\", a, m)", {"a", "m"}},
      {"einsum", "einsum(\"ij,jk\", a, m)", {"a", "m"}},  // implicit output
      {"einsum", "einsum(\"ijk,j->ik\", cube, v) + einsum(\"ij->i\", a)[0]", {"cube", "v", "a"}},
      {"einsum", "einsum(\"ij,ij->\", a, b)", {"a", "b"}},  // a full contraction
      {"hstack", "hstack(a, b * 2.0)", {"a", "b"}},
      {"hstack", "hstack(list(v, v * v))", {"v"}},  // 1-d: along axis 0
      {"vstack", "vstack(list(a, row, b))", {"a", "row", "b"}},
      {"dstack", "dstack(a, b)", {"a", "b"}},
      {"reduce_scatter", "reduce_scatter(m)", {"m"}},
      // ZeRO-3's cut of a gathered bucket: a piece no gradient reaches gets zeros.
      {"bucket_parts", "bucket_parts(ravel(a), [2, 5, 6])[1] * 3.0", {"a"}},
      {"bucket_parts",
       "concatenate(list(bucket_parts(ravel(a), [1, 1, 4, 6])[2], "
       "bucket_parts(ravel(a), [1, 1, 4, 6])[0]))",
       {"a"}},
      {"all_gather", "all_gather(a, axis=1)", {"a"}},
      {"gather", "gather(m)", {"m"}},
      {"scatter", "scatter(m)", {"m"}},
      {"all_to_all", "all_to_all(m)", {"m"}},
      // Tensor parallelism's f and g on one locality (several: tests/distributed/tp_dense.py).
      {"tp_copy", "tp_copy(a) * b", {"a", "b"}},
      {"tp_reduce", "tp_reduce(m)", {"m"}},
  };
  return c;
}

// sum(body * weights) so every output element has its own weight.
std::string program_for(const GradCase& c, bool with_grad) {
  std::string params;
  for (const auto& p : c.params) params += p + ", ";
  std::string f = "define(f, " + params + "sum((" + c.body + ") * weights(" + c.body + ")))\n";
  std::string wrt = "[";
  for (size_t i = 0; i < c.params.size(); ++i) wrt += (i ? ", " : "") + std::to_string(i);
  wrt += "]";
  return "define(weights, y, reshape(arange(size(y)) * 0.37 + 0.5, shape(y)))\n" + f +
         (with_grad ? "grad(f, " + wrt + ")" : "f");
}

double call_f(const Program& p, const std::vector<Array>& args) {
  std::vector<Value> vals(args.begin(), args.end());
  return p.run(vals).as_array().get_double(0);
}

}  // namespace

TEST(Autodiff, EveryGradientRuleParses) {
  for (const std::string& p : check_gradient_rules()) ADD_FAILURE() << p;
}

TEST(Autodiff, EveryRuleHasAFiniteDifferenceCase) {
  std::set<std::string> covered;
  for (const auto& c : grad_cases()) covered.insert(c.primitive);
  // Rules of primitives taking tiled arrays (the cases here take plain arrays):
  // checked against finite differences in tests/cpp/distributed/test_conv_d.cpp, and
  // against the single-process gradient of the whole arrays under 1, 2 and 4
  // localities in tests/distributed/tiled_grad_moves.py (retile_d, transpose_d).
  for (const char* name : {"conv1d_d", "overlap_d", "local_tile", "with_tile", "retile_d", "transpose_d"}) {
    covered.insert(name);
  }
  // grad_scatter's value is x, made elsewhere from the whole weights whose
  // slice `shard` is: its rule (the reduce-scatter to the shard) is that of
  // the step, not of its own value, which finite differences in shard do not
  // see; ZeRO-2's gradients are checked against one locality in
  // tests/distributed/zero_fit.py.
  covered.insert("grad_scatter");
  covered.insert("grad_bucket_shard");  // the same, its rule checked below
  // grad_local (deterministic ZeRO-3): its shard is a stand-in whose value
  // is not read; its rule is checked below, the step's bits against one
  // locality in tests/distributed/zero_fit.py.
  covered.insert("grad_local");
  for (const PrimitiveSpec* s : all_primitives()) {
    bool has_rule = false;
    for (const auto& r : s->grads) has_rule = has_rule || !r.empty();
    if (has_rule && !covered.count(s->name) && s->family != "nn" && s->family != "losses") {
      ADD_FAILURE() << "no finite-difference case for the gradient rule of " << s->name;
    }
  }
}

TEST(Autodiff, GradientsMatchCentralDifferences) {
  const double h = 1e-6;
  for (const auto& c : grad_cases()) {
    SCOPED_TRACE(c.primitive + ": " + c.body);
    Program f(program_for(c, false), "f.tsl");
    Program g(program_for(c, true), "g.tsl");
    std::vector<Array> args;
    for (const auto& p : c.params) args.push_back(input(p));
    Value grads = g.run(std::vector<Value>(args.begin(), args.end()));
    ASSERT_TRUE(grads.is_list());
    for (size_t i = 0; i < args.size(); ++i) {
      const Array& analytic = grads.as_list()[i].as_array();
      ASSERT_EQ(analytic.shape(), args[i].shape());
      for (int64_t k = 0; k < args[i].size(); ++k) {
        std::vector<Array> plus = args, minus = args;
        plus[i] = args[i].copy();
        minus[i] = args[i].copy();
        plus[i].data<double>()[k] += h;
        minus[i].data<double>()[k] -= h;
        double numeric = (call_f(f, plus) - call_f(f, minus)) / (2 * h);
        EXPECT_NEAR(analytic.get_double(k), numeric, 1e-5 + 1e-5 * std::fabs(numeric))
            << "d/d" << c.params[i] << "[" << k << "]";
      }
    }
  }
}

TEST(Autodiff, FunctionsIfAndValue) {
  Value r = eval_string(
      "define(sq, v, v * v)\n"
      "define(f, x, k=2.0, block(define(y, sq(x) * k), if(sum(x) > 0, sum(y), sum(-y))))\n"
      "list(value_and_grad(f)([1.0, 2.0]), grad(f)([-1.0, -3.0]), grad(f, [0, 1])([1.0], 3.0))");
  // f = k * sum(x^2) (sign by branch); df/dx = 2 k x; df/dk = sum(x^2).
  EXPECT_EQ(r.str(), "[[10.0, [4. 8.]], [ 4. 12.], [[6.], 1.0]]");
}

TEST(Autodiff, FunctionsNamedLikePrimitivesAreTheProgramsOwn) {
  // The forward pass calls the program's relu (x * 2) and its add (a * b),
  // so must the gradient; the `+` operator stays the primitive.
  Value r = eval_string(
      "define(relu, x, x * 2)\n"
      "define(add, a, b, a * b)\n"
      "define(f, x, sum(relu(x)) + sum(add(x, x) + x))\n"
      "list(f([1.0, -1.0]), grad(f)([1.0, -1.0]))");
  // f = sum(2x) + sum(x^2 + x); df/dx = 2 + 2x + 1.
  EXPECT_EQ(r.str(), "[2.0, [5. 1.]]");
  // A function of the body's own named like the operator's primitive.
  Value g = eval_string("define(f, x, block(define(add, a, b, a * b), sum(x + x))) grad(f)([1.0, -1.0])");
  EXPECT_TRUE(tessera::test::array_eq(g, DType::float64, {2}, {2.0, 2.0}));
}

TEST(Autodiff, ConstantFunctionsGiveZeros) {
  Value r = eval_string("define(f, x, y, sum(y)) grad(f)([1.0, 2.0], [3.0])");
  EXPECT_TRUE(tessera::test::array_eq(r, DType::float64, {2}, {0.0, 0.0}));
}

TEST(Autodiff, Float32StaysFloat32) {
  Value r = eval_string("define(f, x, sum(exp(x) * 2.0)) grad(f)(astype([0.0, 1.0], \"float32\"))");
  EXPECT_EQ(r.as_array().dtype(), DType::float32);
}

TEST(Autodiff, UnsupportedConstructsAreNamedWithTheirLine) {
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(f, x, block(define(s, x),\n  while(false, store(s, s * x)), sum(s)))\n"
                    "grad(f)", {}, "w.tsl");
      },
      "[grad] cannot differentiate through while(...)"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(f, x, block(define(s, x),\n  while(false, store(s, s * x)), sum(s)))\n"
                    "grad(f)", {}, "w.tsl");
      },
      "(at w.tsl:2:3)"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] { eval_string("define(f, n, if(n > 0, n * f(n - 1), 1.0)) grad(f)"); },
      "cannot differentiate the recursive function 'f'"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { eval_string("define(f, x, median(x)) grad(f)"); },
                                       "'median' has no gradient rule"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { eval_string("define(x, 1) grad(x)"); },
                                       "'x' is not a function defined with define"));
  EXPECT_TRUE(throws_with<SyntaxError>([] { eval_string("define(f, x, x) grad(f, 3)"); },
                                       "argnums 3 is out of range"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("define(f, x, x * 2.0) grad(f)([1.0, 2.0])"); },
      "must return a single number"));
}

TEST(Autodiff, AuxiliaryValuesRideAlong) {
  Value r = eval_string(
      "define(f, w, x, block(define(p, x * w), list(sum(p * p), mean(p))))\n"
      "value_and_grad(f, has_aux=true)([1.0, 2.0], [3.0, 4.0])");
  // value 9 + 64 = 73, d/dw = 2 p x = [18, 64], aux mean(p) = 5.5
  EXPECT_EQ(r.str(), "[73.0, [18. 64.], 5.5]");
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] { eval_string("define(f, w, sum(w)) value_and_grad(f, has_aux=true)"); },
      "must end in list(value, aux)"));
}

TEST(Autodiff, IntermediatesAreFreedAfterTheirLastUse) {
  // The gradient program releases every forward value and cotangent right
  // after the statement that reads it last: count the releases in the tree.
  Program p("define(f, x, sum(exp(x) * sin(x))) grad(f)", "m.tsl");
  std::string dot = p.tree_dot();
  size_t defines = 0, pos = 0;
  while ((pos = dot.find("define __", pos)) != std::string::npos) ++defines, ++pos;
  size_t releases = 0;
  pos = 0;
  while ((pos = dot.find("label=\"nil\\n", pos)) != std::string::npos) ++releases, ++pos;
  // (Not counting the releases of the function's own variables after
  // their last read, compiler.cpp: release_at_last_use.)
  pos = 0;
  while ((pos = dot.find("define <release ", pos)) != std::string::npos) --releases, ++pos;
  EXPECT_GT(releases, 4u) << dot;
  EXPECT_GT(defines, releases);
  // And the gradient is still right: d/dx sum(exp(x) sin(x)) = exp(x) (sin x + cos x).
  Value g = eval_string("define(f, x, sum(exp(x) * sin(x))) grad(f)([0.0, 1.0])");
  EXPECT_TRUE(tessera::test::array_eq(g, DType::float64, {2},
                                      {1.0, std::exp(1.0) * (std::sin(1.0) + std::cos(1.0))}));
}

// A shared expression with grad_common_users = 2 (a convolution's
// conv*_grads) is computed only when two of its rules are wanted; one
// gradient alone takes its own rule, `common` being nil there.
TEST(Autodiff, SharedExpressionOnlyForEnoughUsers) {
  auto tree = [](const std::string& wrt) {
    return Program("define(f, x, w, sum(conv2d(x, w, 1, \"same\")))\ngrad(f, " + wrt + ")",
                   "c.tsl")
        .tree_dot();
  };
  const std::string both = tree("[0, 1]"), x_only = tree("[0]"), w_only = tree("[1]");
  EXPECT_NE(both.find("conv2d_grads"), std::string::npos) << both;
  EXPECT_EQ(x_only.find("conv2d_grads"), std::string::npos) << x_only;
  EXPECT_NE(x_only.find("conv2d_grad_input"), std::string::npos);
  EXPECT_EQ(x_only.find("conv2d_grad_weight"), std::string::npos);
  EXPECT_EQ(w_only.find("conv2d_grads"), std::string::npos) << w_only;
  // The shared value (both full-size gradients) is released after its last
  // use like every intermediate, not held to the end of the backward pass:
  // defined once, then redefined as nil.
  size_t adc = 0;
  for (size_t pos = 0; (pos = both.find("label=\"define __adc_", pos)) != std::string::npos; ++pos) {
    ++adc;
  }
  EXPECT_EQ(adc, 2u) << both;
  EXPECT_NE(w_only.find("conv2d_grad_weight"), std::string::npos);
  // The same values either way.
  const std::string f = "define(f, x, w, sum(conv2d(x, w, 1, \"same\") ** 2))\n";
  const std::string args =
      "(reshape(arange(18) * 0.1 - 0.8, [1, 3, 3, 2]), reshape(arange(12) * 0.05 - 0.3, [2, 3, 2, 1]))";
  Value b = eval_string(f + "grad(f, [0, 1])" + args);
  Value gx = eval_string(f + "grad(f, [0])" + args), gw = eval_string(f + "grad(f, [1])" + args);
  ASSERT_TRUE(b.is_list());
  EXPECT_EQ(b.as_list()[0].str(), gx.as_list()[0].str());
  EXPECT_EQ(b.as_list()[1].str(), gw.as_list()[0].str());
}

// A convolution whose output only a batch norm reads: autodiff binds the
// batch norm's backward for that output to its arguments and computes it
// inside the convolution's backward (conv2d_grads_bn), with the same values
// as the unfused backward, which a second reader of the output keeps.
TEST(Autodiff, BatchNormBackwardFusedIntoTheConvolutionsBackward) {
  auto text = [](const std::string& extra) {
    return "define(f, x, w, gamma, beta, g, block(define(y, conv2d(x, w, 1, \"same\")),\n"
           "  define(s, batch_norm_stats(y)),\n"
           "  sum(batch_norm_relu(y, gamma, beta, nil, nil, 0.001, true, s) * g)" + extra +
           "))\n";
  };
  const std::string fused = text(""), read_twice = text(" + 0.0 * sum(y)");
  auto tree = [](const std::string& f, const std::string& wrt) {
    return Program(f + "grad(f, " + wrt + ")", "bn.tsl").tree_dot();
  };
  const std::string t = tree(fused, "[0, 1, 2, 3]");
  EXPECT_NE(t.find("conv2d_grads_bn"), std::string::npos) << t;
  std::string others = t;  // batch_norm_grad nowhere (batch_norm_grad_sums stays)
  for (size_t p; (p = others.find("batch_norm_grad_sums")) != std::string::npos;) {
    others.erase(p, 20);
  }
  EXPECT_EQ(others.find("batch_norm_grad"), std::string::npos) << t;
  // Not fused: a second reader of y; only w differentiated (no shared pass).
  EXPECT_EQ(tree(read_twice, "[0, 1, 2, 3]").find("conv2d_grads_bn"), std::string::npos);
  EXPECT_EQ(tree(fused, "[1]").find("conv2d_grads_bn"), std::string::npos);
  const std::string args =
      "(reshape(arange(96) * 0.05 - 2.0, [2, 4, 4, 3]), reshape(arange(54) * 0.03 - 0.7, "
      "[3, 3, 3, 2]), [1.5, -0.5], [0.1, 0.2], reshape(sin(arange(64) * 1.0), [2, 4, 4, 2]))";
  for (const char* wrt : {"[0, 1, 2, 3]", "[0, 1]"}) {
    Value a = eval_string(fused + "grad(f, " + wrt + ")" + args);
    Value b = eval_string(read_twice + "grad(f, " + wrt + ")" + args);
    ASSERT_TRUE(a.is_list() && b.is_list());
    ASSERT_EQ(a.as_list().size(), b.as_list().size());
    for (size_t k = 0; k < a.as_list().size(); ++k) {
      EXPECT_EQ(a.as_list()[k].str(), b.as_list()[k].str()) << wrt << " result " << k;
    }
  }
}

// A gradient keeps a template of the values it sums cotangents back to: their
// shape and dtype in one element, never expanded (unbroadcast reads it as
// given), and the template's value is freed with the value.
TEST(Autodiff, TemplatesAreNotExpanded) {
  Array x = Array::full(DType::float32, {1024, 1024}, 1.5);  // 4 MiB
  Value t = tessera::test::call("grad_template", {Value(x)});
  ASSERT_TRUE(t.is_array());
  EXPECT_EQ(t.as_array().shape(), x.shape());
  EXPECT_EQ(t.as_array().dtype(), DType::float32);
  EXPECT_EQ(t.as_array().strides(), (std::vector<int64_t>{0, 0}));
  Array g = Array::full(DType::float32, {1024, 1024}, 2.0);
  reset_peak_memory();
  const size_t before = memory_stats().live;
  Value r = tessera::test::call("unbroadcast", {Value(g), t});
  EXPECT_LT(memory_stats().peak_live - before, size_t{1} << 20);  // no 4 MiB copy
  EXPECT_EQ(r.as_array().raw(), g.raw());                          // passed through
  // Summed back to a broadcast template's shape and cast to its dtype.
  Value t2 = tessera::test::call("grad_template", {Value(Array::zeros(DType::float64, {1, 1024}))});
  Array s = tessera::test::call("unbroadcast", {Value(g), t2}).as_array();
  EXPECT_EQ(s.shape(), (Shape{1, 1024}));
  EXPECT_EQ(s.dtype(), DType::float64);
  EXPECT_EQ(s.get_double(7), 2048.0);
}

// vjp: the forward/backward split. The pullback's gradients are the
// value_and_grad program's, bit for bit, for a scalar value and ct 1.
namespace {

bool same_bits(const Value& a, const Value& b) {
  if (a.is_list() && b.is_list()) {
    if (a.as_list().size() != b.as_list().size()) return false;
    for (size_t i = 0; i < a.as_list().size(); ++i) {
      if (!same_bits(a.as_list()[i], b.as_list()[i])) return false;
    }
    return true;
  }
  if (!a.is_array() || !b.is_array()) return a.str() == b.str();
  const Array x = a.as_array().copy(), y = b.as_array().copy();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.nbytes())) == 0;
}

const char* kLayers =
    "define(layer, h, w, tanh(h @ w))\n"
    "define(f, w1, w2, x, block(define(h, layer(layer(x, w1), w2)), sum(h * h) / 3.0))\n";

Array mat(Shape shape, double scale, double offset) {
  Array a(DType::float64, shape);
  for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = std::sin(scale * i + offset) * 0.8;
  return a;
}

}  // namespace

TEST(Autodiff, VjpPullbackMatchesValueAndGradBitwise) {
  std::vector<Value> args{mat({4, 5}, 1.3, 0.2), mat({5, 3}, 0.7, 1.1), mat({6, 4}, 0.9, -0.5)};
  Value ref = Program(std::string(kLayers) + "value_and_grad(f, [0, 1, 2])", "v.tsl").run(args);
  Value split = Program(std::string(kLayers) +
                            "lambda(w1, w2, x, block(define(r, vjp(f, [0, 1, 2])(w1, w2, x)),\n"
                            "  list(r[0], r[1](1.0))))",
                        "v.tsl")
                    .run(args);
  ASSERT_TRUE(ref.is_list() && split.is_list());
  EXPECT_TRUE(same_bits(ref.as_list()[0], split.as_list()[0])) << split.str();
  EXPECT_TRUE(same_bits(ref.as_list()[1], split.as_list()[1])) << ref.str() << split.str();
  // A single argnums gives a single gradient, as grad does; has_aux rides along.
  Value one = eval_string(
      "define(f, w, x, block(define(p, x * w), list(sum(p * p), mean(p))))\n"
      "define(r, vjp(f, 0, has_aux=true)([1.0, 2.0], [3.0, 4.0]))\n"
      "list(r[0], r[1](1.0), r[2])");
  EXPECT_EQ(one.str(), "[73.0, [18. 64.], 5.5]");
}

// The value need not be a scalar: pullback(ct) gives the gradient of
// sum(value * ct), checked against central differences.
TEST(Autodiff, VjpOfAnArrayValueMatchesCentralDifferences) {
  const std::string f = "define(f, w, x, tanh(x @ w) * exp(w[0]))\n";
  Array w = mat({3, 2}, 0.6, 0.3), x = mat({4, 3}, 1.1, -0.2), ct = mat({4, 2}, 2.3, 0.9);
  Value g = Program(f + "lambda(w, x, ct, vjp(f, [0, 1])(w, x)[1](ct))", "c.tsl")
                .run({Value(w), Value(x), Value(ct)});
  Program weighted(f + "lambda(w, x, ct, sum(f(w, x) * ct))", "c.tsl");
  const double h = 1e-6;
  std::vector<Array> in{w, x};
  for (size_t i = 0; i < in.size(); ++i) {
    const Array& analytic = g.as_list()[i].as_array();
    ASSERT_EQ(analytic.shape(), in[i].shape());
    for (int64_t k = 0; k < in[i].size(); ++k) {
      std::vector<Array> plus{w.copy(), x.copy()}, minus{w.copy(), x.copy()};
      plus[i].data<double>()[k] += h;
      minus[i].data<double>()[k] -= h;
      auto at = [&](const std::vector<Array>& a) {
        return weighted.run({Value(a[0]), Value(a[1]), Value(ct)}).as_array().get_double(0);
      };
      double numeric = (at(plus) - at(minus)) / (2 * h);
      EXPECT_NEAR(analytic.get_double(k), numeric, 1e-6 + 1e-6 * std::fabs(numeric))
          << "argument " << i << " element " << k;
    }
  }
}

// The pullback runs only the backward: the forward's tanh and product run
// once, however many times it is called (twice here: the same gradients);
// and it may run after other work of the program.
TEST(Autodiff, VjpPullbackRunsOnlyTheBackward) {
  Program p(std::string(kLayers) +
                "lambda(w1, w2, x, block(define(r, vjp(f, [0, 1])(w1, w2, x)),\n"
                "  define(other, sum(exp(x)) * 2.0),\n"
                "  define(a, r[1](1.0)), define(b, r[1](1.0)), list(a, b, other)))",
            "o.tsl");
  std::vector<Value> args{mat({4, 5}, 1.3, 0.2), mat({5, 3}, 0.7, 1.1), mat({6, 4}, 0.9, -0.5)};
  Value r = p.run(args);
  EXPECT_TRUE(same_bits(r.as_list()[0], r.as_list()[1]));
  Value ref = Program(std::string(kLayers) + "grad(f, [0, 1])", "v.tsl").run(args);
  EXPECT_TRUE(same_bits(r.as_list()[0], ref));
  // Per-node counters: every forward primitive node (tanh, matmul, square)
  // of the run evaluated once.
  std::string csv = p.counters_csv();
  size_t pos = 0;
  int forward_evals = 0;
  while ((pos = csv.find('\n', pos)) != std::string::npos) {
    ++pos;
    std::string line = csv.substr(pos, csv.find('\n', pos) - pos);
    if (line.rfind("tanh,", 0) == 0 || line.rfind("matmul,", 0) == 0) {
      // name,position,evaluations,...
      size_t c1 = line.find(','), c2 = line.find(',', c1 + 1), c3 = line.find(',', c2 + 1);
      forward_evals += std::stoi(line.substr(c2 + 1, c3 - c2 - 1));
    }
  }
  EXPECT_EQ(forward_evals, 4) << csv;  // 2 tanh + 2 matmul, never again
}

// A pullback never called: nothing waits for it, and dropping it frees what
// it held. Intermediates the backward does not need are freed after the
// forward: x * 2.0 and exp(...) + 1.0 (8 MB each) are gone, the outputs of
// exp and tanh (their rules read them) stay.
TEST(Autodiff, VjpKeepsOnlyWhatTheBackwardNeeds) {
  Array x(DType::float64, {1 << 20});
  for (int64_t i = 0; i < x.size(); ++i) x.data<double>()[i] = 1e-6 * static_cast<double>(i);
  Program p("define(f, x, sum(tanh(exp(x * 2.0) + 1.0)))\nvjp(f)", "m.tsl");
  const size_t mb8 = size_t{8} << 20;
  const size_t before = memory_stats().live;
  {
    Value r = p.run({Value(x)});
    ASSERT_TRUE(r.is_list());
    const size_t held = memory_stats().live - before;
    EXPECT_GE(held, 2 * mb8);                    // exp's and tanh's outputs
    EXPECT_LT(held, 2 * mb8 + mb8 / 2) << held;  // not x * 2.0 or exp(...) + 1.0
    // And once called, it gives exp's chain rule right: d/dx = (1 - t^2) e 2.
    Value g = call_function(r.as_list()[1], {{"", Value(1.0)}});
    double t = std::tanh(std::exp(2e-6 * 5) + 1.0);
    EXPECT_NEAR(g.as_array().get_double(5), (1 - t * t) * std::exp(2e-6 * 5) * 2, 1e-12);
  }
  EXPECT_LE(memory_stats().live, before + 4096);  // the pullback (never called again) freed all
}

TEST(Autodiff, VjpRefusesACotangentOfAnotherShapeOrDtype) {
  const char* f = "define(g, x, tanh(x) * 2.0)\ndefine(s, vjp(g)([1.0, 2.0]))\n";
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { eval_string(std::string(f) + "s[1]([1.0, 0.5, 3.0])", {}, "ct.tsl"); },
      "[vjp] the cotangent must have the value's shape and dtype: expected float64 (2,), got "
      "float64 (3,) (at ct.tsl:2:11)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { eval_string(std::string(f) + "s[1](astype([1.0, 0.5], \"float32\"))", {}, "ct.tsl"); },
      "expected float64 (2,), got float32 (2,)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { eval_string(std::string(f) + "s[1](\"x\")", {}, "ct.tsl"); }, "got string 'x'"));
  // A number stands for a cotangent filled with it.
  Value r = eval_string(std::string(f) + "s[1](2.0) - s[1]([2.0, 2.0])");
  EXPECT_TRUE(tessera::test::array_eq(r, DType::float64, {2}, {0.0, 0.0}));
}

// Activation checkpointing: checkpoint(f)(args) keeps only f's arguments for
// the backward and recomputes f's forward there; gradients bit for bit the
// program's without it, for functions defined with define and lambdas
// closing over the caller's variables, nested, under grad and vjp.
TEST(Autodiff, CheckpointGivesTheSameGradientsBitwise) {
  const std::string common =
      "define(layer, h, w, tanh(h @ w))\n"
      "define(three, h, w, layer(layer(layer(h, w), w * 0.5), w))\n"
      "define(inner, h, w, checkpoint(layer)(h, w) * h)\n";
  const std::string plain =
      "define(f, w, v, x, block(define(h, three(x, w)), define(h2, layer(h, v) * h),\n"
      "  define(h3, layer(h2, w) * h2 + dropout(h2, 0.5, 7)), sum(h3 * h3 + h)))\n";
  const std::string ckpt =
      "define(f, w, v, x, block(define(h, checkpoint(three)(x, w)),\n"
      "  define(h2, checkpoint(lambda(h, layer(h, v) * h))(h)),\n"
      "  define(h3, checkpoint(lambda(a, inner(a, w) + dropout(a, 0.5, 7)))(h2)),\n"
      "  sum(h3 * h3 + h)))\n";
  std::vector<Value> args{mat({4, 4}, 1.3, 0.2), mat({4, 4}, 0.7, 1.1), mat({6, 4}, 0.9, -0.5)};
  for (const char* form : {"value_and_grad(f, [0, 1, 2])", "grad(f, 1)"}) {
    SCOPED_TRACE(form);
    Value a = Program(common + plain + form, "p.tsl").run(args);
    Value b = Program(common + ckpt + form, "c.tsl").run(args);
    EXPECT_TRUE(same_bits(a, b)) << a.str() << "\n" << b.str();
  }
  Value a = Program(common + plain + "grad(f, [0, 1, 2])", "p.tsl").run(args);
  Value b = Program(common + ckpt + "lambda(w, v, x, vjp(f, [0, 1, 2])(w, v, x)[1](1.0))", "c.tsl")
                .run(args);
  EXPECT_TRUE(same_bits(a, b)) << a.str() << "\n" << b.str();
  // Outside a gradient, checkpoint(f) is f.
  Value v = Program(common + ckpt + "f", "c.tsl").run(args);
  EXPECT_TRUE(same_bits(v, Program(common + plain + "f", "p.tsl").run(args)));
}

// The point of it: a deep chain (20 layers of tanh(h @ w)) in 4 checkpointed
// blocks of 5 holds the blocks' inputs at the end of its forward, not every
// layer's output. Measured as what a vjp's pullback keeps alive (live array
// bytes of the runtime's allocator), with the same gradients.
TEST(Autodiff, CheckpointedChainHoldsOnlyItsBlocksInputs) {
  const std::string layers =
      "define(layer, h, w, tanh(h @ w))\n"
      "define(five, h, w, layer(layer(layer(layer(layer(h, w), w), w), w), w))\n";
  const std::string plain =
      "define(f, x, w, sum(five(five(five(five(x, w), w), w), w)))\nvjp(f, 1)";
  const std::string ckpt =
      "define(f, x, w, sum(checkpoint(five)(checkpoint(five)(checkpoint(five)(checkpoint(five)(\n"
      "  x, w), w), w), w)))\nvjp(f, 1)";
  Array x = mat({256, 64}, 0.37, 0.1), w = mat({64, 64}, 0.11, 0.4);
  for (int64_t i = 0; i < w.size(); ++i) w.data<double>()[i] *= 0.1;
  const size_t activation = 256 * 64 * sizeof(double);
  auto held_by = [&](const std::string& text, Value* grad) {
    Program p(text, "chain.tsl");
    const size_t before = memory_stats().live;
    Value r = p.run({Value(x), Value(w)});
    const size_t held = memory_stats().live - before;
    *grad = call_function(r.as_list()[1], {{"", Value(1.0)}});
    return held;
  };
  Value g_plain, g_ckpt;
  const size_t plain_held = held_by(layers + plain, &g_plain);
  const size_t ckpt_held = held_by(layers + ckpt, &g_ckpt);
  EXPECT_GE(plain_held, 20 * activation) << plain_held;  // every tanh output
  EXPECT_LE(ckpt_held, 5 * activation) << ckpt_held;     // 3 block inputs and a template or two
  EXPECT_TRUE(same_bits(g_plain, g_ckpt));
  std::printf("[ chain    ] held at the end of the forward: %zu bytes plain, %zu checkpointed\n",
              plain_held, ckpt_held);
}

TEST(Autodiff, CheckpointRefusesEffectsThatWouldRunTwice) {
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(g, h, h * random_normal(shape(h)))\n"
                    "define(f, x, sum(checkpoint(g)(x)))\ngrad(f)",
                    {}, "r.tsl");
      },
      "[grad] 'random_normal' inside the checkpointed function 'g' would run again when its "
      "forward is recomputed for the backward and draw different numbers: give it a seed= (as "
      "dropout's) or call it outside checkpoint (at r.tsl:1:18)"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string(
            "define(f, x, sum(checkpoint(lambda(h, block(print(1), h * h)))(x)))\ngrad(f)");
      },
      "'print' inside the checkpointed function 'lambda' would run again"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] { eval_string("define(f, x, sum(checkpoint(x)(x)))\ngrad(f)"); },
      "checkpoint of the function value 'x'"));
  // A seeded draw is the same twice: accepted, and the gradient is the
  // draw (d/dx sum(x * n) = n).
  Value r = eval_string(
      "define(g, h, h * random_normal(shape(h), seed=3))\n"
      "define(f, x, sum(checkpoint(g)(x)))\n"
      "grad(f)([1.0, 2.0]) - random_normal([2], seed=3)");
  EXPECT_TRUE(tessera::test::array_eq(r, DType::float64, {2}, {0.0, 0.0}));
}

// Rematerialisation: remat(f)(args) computes f's value in the forward, and
// the backward statements that read it (or views of it: getitem, reshape,
// ravel, transpose) read a recomputation made just before the first of
// them. Gradients bit for bit the program's without it, under
// value_and_grad, grad and vjp; a collective (all_gather, here on one
// locality) is allowed inside; outside a gradient remat(f) is f.
TEST(Autodiff, RematGivesTheSameGradientsBitwise) {
  const std::string common =
      "define(layer, h, w, tanh(h @ w))\n"
      "define(scaled, v, all_gather(v * 1.5))\n";
  auto body = [](const std::string& z) {
    return "define(f, w, x, block(define(z, " + z +
           "),\n"
           "  define(a, reshape(z[0:16], [4, 4])), define(b, transpose(reshape(z[16:32], [4, "
           "4]))),\n"
           "  define(c, ravel(z)[32:36]), sum(layer(layer(x, a), b) * x + c)))\n";
  };
  const std::string plain = body("scaled(w)");
  const std::string rem = body("remat(scaled)(w)");
  const std::string lam = body("remat(lambda(v, scaled(v)))(w)");
  std::vector<Value> args{mat({36}, 0.3, 0.2), mat({6, 4}, 0.7, -0.5)};
  for (const char* form : {"value_and_grad(f, [0, 1])", "grad(f, 0)"}) {
    SCOPED_TRACE(form);
    Value a = Program(common + plain + form, "p.tsl").run(args);
    for (const auto& r : {rem, lam}) {
      Value b = Program(common + r + form, "r.tsl").run(args);
      EXPECT_TRUE(same_bits(a, b)) << a.str() << "\n" << b.str();
    }
  }
  Value a = Program(common + plain + "grad(f, [0, 1])", "p.tsl").run(args);
  Value b = Program(common + rem + "lambda(w, x, vjp(f, [0, 1])(w, x)[1](1.0))", "r.tsl").run(args);
  EXPECT_TRUE(same_bits(a, b)) << a.str() << "\n" << b.str();
  Value v = Program(common + rem + "f", "r.tsl").run(args);
  EXPECT_TRUE(same_bits(v, Program(common + plain + "f", "p.tsl").run(args)));
}

// The point of it (ZeRO-3's gathered weights): the rematerialised value and
// its views are not read by the backward, so they are freed after their last
// forward use. Measured as what a vjp's pullback keeps alive: 1 MiB of
// weights made by the function plain, none of them with remat; and the
// generated gradient does not read the forward's value after the forward.
TEST(Autodiff, RematValueIsNotKeptForTheBackward) {
  const std::string common =
      "define(scaled, v, v * 1.5)\n"
      "define(f, w, x, block(define(z, ZZ),\n"
      "  define(a, reshape(z[0:65536], [256, 256])), define(b, reshape(z[65536:131072], "
      "[256, 256])),\n"
      "  sum(tanh(tanh(x @ a) @ b))))\nvjp(f, 0)";
  auto with = [&](const std::string& z) {
    std::string t = common;
    t.replace(t.find("ZZ"), 2, z);
    return t;
  };
  Array w = mat({131072}, 0.11, 0.4), x = mat({8, 256}, 0.37, 0.1);
  for (int64_t i = 0; i < w.size(); ++i) w.data<double>()[i] *= 0.05;
  auto held_by = [&](const std::string& text, Value* grad) {
    Program p(text, "remat.tsl");
    const size_t before = memory_stats().live;
    Value r = p.run({Value(w), Value(x)});
    const size_t held = memory_stats().live - before;
    *grad = call_function(r.as_list()[1], {{"", Value(1.0)}});
    return held;
  };
  const size_t weights = 131072 * sizeof(double);
  Value g_plain, g_remat;
  const size_t plain_held = held_by(with("scaled(w)"), &g_plain);
  const size_t remat_held = held_by(with("remat(scaled)(w)"), &g_remat);
  EXPECT_GE(plain_held, weights) << plain_held;
  EXPECT_LE(remat_held, weights / 8) << remat_held;  // the activations (8 x 256) and templates
  EXPECT_TRUE(same_bits(g_plain, g_remat));
  std::printf("[ remat    ] held at the end of the forward: %zu bytes plain, %zu rematerialised\n",
              plain_held, remat_held);
}

TEST(Autodiff, RematRefusesEffectsThatWouldRunTwice) {
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(f, x, sum(remat(lambda(h, block(print(1), h * h)))(x)))\ngrad(f)",
                    {}, "r.tsl");
      },
      "[grad] 'print' inside the rematerialised function 'lambda' would run again when its "
      "value is recomputed for the backward: call it outside remat (at r.tsl:1:40)"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(g, h, h * random_normal(shape(h)))\n"
                    "define(f, x, sum(remat(g)(x)))\ngrad(f)");
      },
      "'random_normal' inside the rematerialised function 'g' would run again when its value "
      "is recomputed for the backward and draw different numbers: give it a seed= (as "
      "dropout's) or call it outside remat"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] { eval_string("define(f, x, sum(remat(x)(x)))\ngrad(f)"); },
      "remat of the function value 'x'"));
}

// grad_scatter (ZeRO-2's bucket): x passes through, the gradient of x goes
// to the shard (on one locality, the reduce-scatter is the gradient
// itself); a shard whose size times the group's is not x's is refused.
TEST(Autodiff, GradScatterGivesTheBucketsGradientToTheShard) {
  Value g = eval_string(
      "define(f, s, x, sum(grad_scatter(s, x) * [1.0, 2.0, 3.0]))\n"
      "grad(f)([0.0, 0.0, 0.0], [4.0, 5.0, 6.0])");
  EXPECT_TRUE(tessera::test::array_eq(g, DType::float64, {3}, {1.0, 2.0, 3.0}));
  // Its rule stands alone in the backward pass (so that the reduce-scatter
  // stays in flight), guarded inside: a bucket no cotangent reaches gives
  // the shard no contribution, zeros, and no error; the same for all_gather.
  Value unused = eval_string(
      "define(f, s, x, block(define(u, grad_scatter(s, x)), sum(x * 2.0)))\n"
      "grad(f, argnums=[0, 1])([0.0, 0.0, 0.0], [4.0, 5.0, 6.0])");
  ASSERT_TRUE(unused.is_list());
  EXPECT_TRUE(tessera::test::array_eq(unused.as_list()[0], DType::float64, {3}, {0.0, 0.0, 0.0}));
  EXPECT_TRUE(tessera::test::array_eq(unused.as_list()[1], DType::float64, {3}, {2.0, 2.0, 2.0}));
  Value gathered = eval_string(
      "define(f, s, block(define(u, all_gather(s)), sum(s * 3.0) + sum(all_gather(s * 2.0))))\n"
      "grad(f)([1.0, 2.0])");
  EXPECT_TRUE(tessera::test::array_eq(gathered, DType::float64, {2}, {5.0, 5.0}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("grad_scatter([0.0], [4.0, 5.0, 6.0])", {}, "gs.tsl"); },
      "[grad_scatter] x must be a flat array of shard's length times the group's size: x has "
      "shape (3,), shard 1 elements, the group 1 members"));
}

// grad_local (deterministic ZeRO-3's gathered bucket): x passes through, not
// copied; the gradient of x, as it is, goes to the shard, a stand-in of x's
// shape (one element broadcast), and x gets none; other shapes are refused.
TEST(Autodiff, GradLocalGivesTheWholeGradientToTheStandIn) {
  Value g = eval_string(
      "define(f, s, x, sum(grad_local(s, x) * [1.0, 2.0, 3.0]))\n"
      "grad(f, argnums=[0, 1])(broadcast_to(zeros(1), [3]), [4.0, 5.0, 6.0])");
  ASSERT_TRUE(g.is_list());
  EXPECT_TRUE(tessera::test::array_eq(g.as_list()[0], DType::float64, {3}, {1.0, 2.0, 3.0}));
  EXPECT_TRUE(tessera::test::array_eq(g.as_list()[1], DType::float64, {3}, {0.0, 0.0, 0.0}));
  Value v = eval_string("grad_local(broadcast_to(zeros(1), [3]), [4.0, 5.0, 6.0])");
  EXPECT_TRUE(tessera::test::array_eq(v, DType::float64, {3}, {4.0, 5.0, 6.0}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] { eval_string("grad_local([0.0], [4.0, 5.0, 6.0])", {}, "gl.tsl"); },
      "[grad_local] x must be a flat array of the stand-in shard's shape: x has shape (3,), "
      "shard (1,)"));
}

// grad_bucket_shard (ZeRO-2's bucket member): x passes through; the members'
// gradients, joined in member order and padded with zeros to the shard's
// length times the group's size, are reduce-scattered to the shard (on one
// locality: the joined bucket itself); a member no cotangent reaches gives
// zeros, and a bucket longer than the shard allows is refused.
TEST(Autodiff, GradBucketShardGivesTheJoinedGradientsToTheShard) {
  Value g = eval_string(
      "define(f, s, a, b, sum(grad_bucket_shard(s, a, \"t1\", 0, 2) * [1.0, 2.0]) + "
      "sum(grad_bucket_shard(s, b, \"t1\", 1, 2) * [[3.0, 4.0]]))\n"
      "grad(f)(zeros(5), [7.0, 8.0], [[9.0, 10.0]])");
  EXPECT_TRUE(tessera::test::array_eq(g, DType::float64, {5}, {1.0, 2.0, 3.0, 4.0, 0.0}));
  Value unused = eval_string(
      "define(f, s, a, b, block(define(u, grad_bucket_shard(s, b, \"t2\", 1, 2)), "
      "sum(grad_bucket_shard(s, a, \"t2\", 0, 2) * 2.0)))\n"
      "grad(f)(zeros(4), [7.0, 8.0], [9.0, 10.0])");
  EXPECT_TRUE(tessera::test::array_eq(unused, DType::float64, {4}, {2.0, 2.0, 0.0, 0.0}));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [] {
        eval_string("define(f, s, a, sum(grad_bucket_shard(s, a, \"t3\", 0, 1)))\n"
                    "grad(f)(zeros(2), [7.0, 8.0, 9.0])");
      },
      "[bucket_reduce_scatter] gradient bucket 't3' has 3 elements, more than its padded length 2"));
}

// A value that is a list of arrays (a pipeline stage sending two tensors):
// the cotangent is a list of as many, each of its item's shape; the pullback
// gives the gradient of the sum of sum(item * ct item).
TEST(Autodiff, VjpOfAListValueTakesAListOfCotangents) {
  const std::string f =
      "define(f, w, x, block(define(h, tanh(x @ w)), list(h * 2.0, sum(h, axis=0))))\n"
      "define(g, w, x, block(define(o, f(w, x)), sum(o[0] * [[1.0, -1.0]]) + sum(o[1] * [0.5, "
      "2.0])))\n"
      "define(w, [[0.1, 0.2], [0.3, -0.4]])\ndefine(x, [[1.0, 2.0]])\n"
      "define(r, vjp(f)(w, x))\n";
  Value d = eval_string(f + "r[1](list([[1.0, -1.0]], [0.5, 2.0])) - grad(g)(w, x)");
  EXPECT_TRUE(tessera::test::array_eq(d, DType::float64, {2, 2}, {0, 0, 0, 0}, 0, 1e-15));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { eval_string(f + "r[1](list([[1.0, -1.0]]))", {}, "l.tsl"); },
      "[vjp] the value is a list of 2 items: the cotangent must be a list of 2, got list of "
      "length 1 (at l.tsl:5:11)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { eval_string(f + "r[1](list([[1.0, -1.0]], [0.5]))", {}, "l.tsl"); },
      "expected float64 (2,), got float64 (1,)"));
}

// A gradient inside a differentiated function (second order): the Hessian-vector
// product of f through grad(f), and of a gradient penalty through grad with respect to
// the input, against central differences of the first-order gradient.
TEST(Autodiff, GradientOfAGradientMatchesDifferencesOfTheGradient) {
  const std::string f =
      "define(f, w, x, sum(tanh(x @ w) * sigmoid(x @ w) + relu(x @ w) * (x @ w)))\n"
      "define(gx, w, x, grad(f, 1)(w, x))\n"
      "define(penalty, w, x, block(define(g, gx(w, x)),\n"
      "  mean((sqrt(sum(g * g, axis=1)) - 1.0) ** 2)))\n"
      "define(hvp, w, x, v, sum(grad(f, 0)(w, x) * v))\n"
      "define(local, w, x, block(define(dfw, grad(f)), sum(dfw(w, x) * dfw(w, x))))\n";
  Array w = mat({4, 3}, 0.8, -0.1), x = mat({5, 4}, 1.1, 0.3), v = mat({4, 3}, 0.6, 0.2);
  const double h = 1e-6;
  auto at = [](const Value& r) { return r.as_array(); };
  Value hv = Program(f + "grad(hvp)", "h.tsl").run({w, x, v});
  Program first(f + "grad(f)", "f.tsl");
  Array plus = w.copy(), minus = w.copy();
  for (int64_t i = 0; i < w.size(); ++i) {
    plus.data<double>()[i] += h * v.data<double>()[i];
    minus.data<double>()[i] -= h * v.data<double>()[i];
  }
  Array gp = at(first.run({plus, x})), gm = at(first.run({minus, x}));
  for (int64_t i = 0; i < w.size(); ++i) {
    const double want = (gp.data<double>()[i] - gm.data<double>()[i]) / (2 * h);
    EXPECT_NEAR(at(hv).data<double>()[i], want, 1e-6 * (1 + std::abs(want))) << i;
  }
  for (const char* name : {"penalty", "local"}) {
    SCOPED_TRACE(name);
    Program value(f + name, "v.tsl");
    Value g = Program(f + "grad(" + name + ")", "g.tsl").run({w, x});
    for (int64_t i = 0; i < w.size(); ++i) {
      Array p = w.copy(), m = w.copy();
      p.data<double>()[i] += h;
      m.data<double>()[i] -= h;
      const double want =
          (at(value.run({p, x})).get_double(0) - at(value.run({m, x})).get_double(0)) / (2 * h);
      EXPECT_NEAR(at(g).data<double>()[i], want, 1e-5 * (1 + std::abs(want))) << i;
    }
  }
}

TEST(Autodiff, SecondOrderGradientOfABackwardWithoutRuleIsRefusedByName) {
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(f, x, prod(x) * sum(x))\n"
                    "define(h, x, sum(grad(f)(x) * x))\ngrad(h)", {}, "s.tsl");
      },
      "[grad] second-order gradient of 'prod_grad' is not supported yet"));
  EXPECT_TRUE(throws_with<SyntaxError>(
      [] {
        eval_string("define(f, x, sum(x * x))\n"
                    "define(h, x, block(define(p, vjp(f)(x)), p[0]))\ngrad(h)", {}, "s.tsl");
      },
      "cannot differentiate through vjp"));
}
