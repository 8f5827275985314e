// Collectives as primitives of the execution tree (family "dist"). Each has an
// asynchronous evaluation: the node's future is the collective's future,
// completed by the communication engine (comm.hpp), so no worker waits. The
// synchronous `eval` is the fallback of call_primitive (the outermost
// boundary), which waits for that future.
//
// With one locality every collective is the identity (or the obvious local
// result) and no MPI call is made.
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/dist/comm.hpp"
#include "tessera/dist/locality.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::dist {
namespace {

using detail::split_counts;

// The synchronous form of an asynchronous primitive: waits at the boundary.
std::function<Value(Args&)> waiting(Future<Value> (*fn)(Args&)) {
  return [fn](Args& a) -> Value { return fn(a).wait(); };
}

Array numeric_array(Args& a, size_t i, bool allow_bool) {
  Array x = a.array(i);
  if (!allow_bool && x.dtype() == DType::bool_) {
    throw TypeError(error_message("[", a.op(), "] argument '", a.param_name(i),
                                  "' must be a numeric array (int64, float32, float64), got a bool array"));
  }
  return x;
}

Array with_rows(Args& a, size_t i) {
  Array x = numeric_array(a, i, true);
  if (x.ndim() == 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i),
                                              "' must have at least one dimension to be split or joined "
                                              "along axis 0, got a 0-d array"));
  }
  return x;
}

int rank_arg(Args& a, size_t i) {
  int64_t r = a.integer(i);
  int n = num_localities();
  if (r < 0 || r >= n) {
    throw std::out_of_range(error_message("[", a.op(), "] argument '", a.param_name(i), "' is ", r,
                                          " but ranks are 0..", n - 1, " (", n, " localit", n == 1 ? "y" : "ies",
                                          ")"));
  }
  return static_cast<int>(r);
}

Value divided(const Value& v, int n) {
  return call_primitive("divide", std::vector<Value>{v, Value(static_cast<int64_t>(n))});
}

Value concatenated(const Value& parts, int axis, DType dt) {
  std::vector<Array> arrays;
  for (const Value& p : parts.as_list()) arrays.push_back(p.as_array());
  return Value(kernels::concatenate_arrays(arrays, axis, dt));
}

Future<Value> all_reduce_async(Args& a) {
  Array x = numeric_array(a, 0, false);
  ReduceOp op = parse_reduce_op(a.string(1), a.op());
  int n = num_localities();
  if (n == 1) {
    return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(x), 1) : Value(x));
  }
  Future<Value> f = detail::all_reduce(x, op, a.site());
  if (op != ReduceOp::mean) return f;
  return f.then([n](const Value& v) { return divided(v, n); });
}

Future<Value> broadcast_async(Args& a) {
  Array x = numeric_array(a, 0, true);
  int root = rank_arg(a, 1);
  if (num_localities() == 1) return Future<Value>::ready(Value(x));
  return detail::broadcast(x, root, a.site());
}

Future<Value> all_gather_async(Args& a) {
  Array x = with_rows(a, 0);
  int axis = normalize_axis(a.integer(1), x.ndim(), a.op());
  if (num_localities() == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::all_gather(x, axis, a.site()).then([axis, dt](const Value& parts) {
    return concatenated(parts, axis, dt);
  });
}

Future<Value> reduce_scatter_async(Args& a) {
  Array x = with_rows(a, 0);
  if (x.dtype() == DType::bool_) numeric_array(a, 0, false);
  ReduceOp op = parse_reduce_op(a.string(1), a.op());
  int n = num_localities();
  if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(x), 1) : Value(x));
  Future<Value> f = detail::reduce_scatter(x, op, a.site());
  if (op != ReduceOp::mean) return f;
  return f.then([n](const Value& v) { return divided(v, n); });
}

Future<Value> gather_async(Args& a) {
  Array x = with_rows(a, 0);
  int root = rank_arg(a, 1);
  if (num_localities() == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::gather(x, root, a.site()).then([x, dt](const Value& parts) {
    return parts.is_nil() ? Value(x) : concatenated(parts, 0, dt);
  });
}

Future<Value> scatter_async(Args& a) {
  int root = rank_arg(a, 1);
  bool is_root = locality() == root;
  Array x = is_root ? with_rows(a, 0) : a.array(0);
  if (num_localities() == 1) return Future<Value>::ready(Value(x));
  return detail::scatter(x, root, a.site());
}

Future<Value> all_to_all_async(Args& a) {
  Array x = with_rows(a, 0);
  if (num_localities() == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::all_to_all(x, a.site()).then([dt](const Value& parts) { return concatenated(parts, 0, dt); });
}

Future<Value> barrier_async(Args& a) {
  if (num_localities() == 1) return Future<Value>::ready(Value());
  return detail::barrier(a.site());
}

int peer_arg(Args& a, size_t i) {
  int n = num_localities();
  if (n == 1) {
    throw std::invalid_argument(error_message("[", a.op(), "] needs another locality, but this program runs on "
                                              "one (start it with `tessera run -n N`)"));
  }
  int peer = rank_arg(a, i);
  if (peer == locality()) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i), "' is ", peer,
                                              ", this locality itself"));
  }
  return peer;
}

int tag_arg(Args& a, size_t i) {
  int64_t t = a.integer(i);
  if (t < 0 || t > 32767) {
    throw std::out_of_range(error_message("[", a.op(), "] argument 'tag' must be in 0..32767, got ", t));
  }
  return static_cast<int>(t);
}

Future<Value> send_async(Args& a) {
  Array x = numeric_array(a, 0, true);
  int dest = peer_arg(a, 1);
  return detail::send(x, dest, tag_arg(a, 2), a.site());
}

Future<Value> recv_async(Args& a) {
  int source = peer_arg(a, 0);
  return detail::recv(source, tag_arg(a, 1), a.site());
}

// The cotangent of all_reduce's x: for sum and mean every locality's output
// depends on every input, so it is the all-reduced cotangent (mean: scaled);
// for max and min it flows to the elements equal to the result.
Future<Value> all_reduce_grad_async(Args& a) {
  Array x = a.array(0), out = a.array(1), g = a.array(2);
  ReduceOp op = parse_reduce_op(a.string(3), "all_reduce");
  int n = num_localities();
  if (op == ReduceOp::sum || op == ReduceOp::mean) {
    if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(g), 1) : Value(g));
    Future<Value> f = detail::all_reduce(g, ReduceOp::sum, a.site());
    if (op == ReduceOp::sum) return f;
    return f.then([n](const Value& v) { return divided(v, n); });
  }
  Value mask = call_primitive("equal", std::vector<Value>{Value(x), Value(out)});
  Future<Value> total = n == 1 ? Future<Value>::ready(Value(g)) : detail::all_reduce(g, ReduceOp::sum, a.site());
  return total.then([mask](const Value& v) { return call_primitive("multiply", std::vector<Value>{v, mask}); });
}

// The cotangent of reduce_scatter's x (sum, mean): every locality's part of
// the cotangent, joined (mean: scaled). max and min have no rule.
Future<Value> reduce_scatter_grad_async(Args& a) {
  Array g = with_rows(a, 0);
  ReduceOp op = parse_reduce_op(a.string(1), "reduce_scatter");
  if (op == ReduceOp::max || op == ReduceOp::min) {
    throw std::invalid_argument("[reduce_scatter] has no gradient for op 'max' or 'min'");
  }
  int n = num_localities();
  if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(g), 1) : Value(g));
  DType dt = g.dtype();
  return detail::all_gather(g, 0, a.site()).then([dt, op, n](const Value& parts) {
    Value joined = concatenated(parts, 0, dt);
    return op == ReduceOp::mean ? divided(joined, n) : joined;
  });
}

// The gradient rules of the collectives. They are attached once the
// autodiff suite (tests/cpp/lang/test_autodiff.cpp, which requires a
// finite-difference case for every rule) has cases for all_reduce,
// broadcast and reduce_scatter; until then these primitives are not
// differentiable and the rules are tested through the *_grad primitives.
constexpr bool kAttachGradientRules = true;
std::vector<std::string> rules(std::vector<std::string> r) {
  return kAttachGradientRules ? r : std::vector<std::string>{};
}

PrimitiveSpec async_spec(PrimitiveSpec spec, Future<Value> (*fn)(Args&)) {
  spec.eval_async = fn;
  spec.eval = waiting(fn);
  return spec;
}

const bool registered = register_primitives({
    async_spec({.name = "all_reduce",
                .family = "dist",
                .params = {{"x"}, opt("op", Value("sum"))},
                .help = "Reduces x elementwise over all localities (op: 'sum', 'mean', 'max', 'min'); "
                        "every locality gets the result. Shapes and dtypes must agree on every locality.",
                .eval = nullptr,
                .grads = rules({"all_reduce_grad(x, out, g, op)", ""})},
               all_reduce_async),
    async_spec({.name = "broadcast",
                .family = "dist",
                .params = {{"x"}, opt("root", Value(0))},
                .help = "The root locality's x, on every locality (x must have the same shape and dtype "
                        "everywhere).",
                .eval = nullptr,
                .grads = rules({"all_reduce(g, \"sum\") * (locality() == root)", ""})},
               broadcast_async),
    async_spec({.name = "all_gather",
                .family = "dist",
                .params = {{"x"}, opt("axis", Value(0))},
                .help = "Every locality's x joined along axis, in locality order; the extents along axis "
                        "may differ between localities. No gradient rule yet.",
                .eval = nullptr,
                .grads = {}},
               all_gather_async),
    async_spec({.name = "reduce_scatter",
                .family = "dist",
                .params = {{"x"}, opt("op", Value("sum"))},
                .help = "Reduces x over all localities (op: 'sum', 'mean', 'max', 'min') and gives each "
                        "locality its part of axis 0 (split in num_localities() parts; the first "
                        "shape(x)[0] % num_localities() parts have one more row).",
                .eval = nullptr,
                .grads = rules({"reduce_scatter_grad(g, op)", ""})},
               reduce_scatter_async),
    async_spec({.name = "gather",
                .family = "dist",
                .params = {{"x"}, opt("root", Value(0))},
                .help = "On the root: every locality's x joined along axis 0 (extents may differ); on the "
                        "other localities: x itself. No gradient rule yet.",
                .eval = nullptr,
                .grads = {}},
               gather_async),
    async_spec({.name = "scatter",
                .family = "dist",
                .params = {{"x"}, opt("root", Value(0))},
                .help = "This locality's part of the root's x, split along axis 0 in num_localities() "
                        "parts (the first shape(x)[0] % num_localities() have one more row); x is ignored "
                        "on the other localities. No gradient rule yet.",
                .eval = nullptr,
                .grads = {}},
               scatter_async),
    async_spec({.name = "all_to_all",
                .family = "dist",
                .params = {{"x"}},
                .help = "Splits x along axis 0 in num_localities() parts, sends part j to locality j, and "
                        "joins the parts received, in locality order, along axis 0. No gradient rule yet.",
                .eval = nullptr,
                .grads = {}},
               all_to_all_async),
    async_spec({.name = "barrier",
                .family = "dist",
                .params = {},
                .help = "Completes (as nil) once every locality has reached it.",
                .eval = nullptr,
                .grads = {}},
               barrier_async),
    async_spec({.name = "send",
                .family = "dist",
                .params = {{"x"}, {"dest"}, opt("tag", Value(0))},
                .help = "Sends x to locality dest (its shape and dtype travel with it); nil once sent.",
                .eval = nullptr,
                .grads = {}},
               send_async),
    async_spec({.name = "recv",
                .family = "dist",
                .params = {{"source"}, opt("tag", Value(0))},
                .help = "The array sent by locality source with the same tag.",
                .eval = nullptr,
                .grads = {}},
               recv_async),
    async_spec({.name = "all_reduce_grad",
                .family = "dist",
                .params = {{"x"}, {"out"}, {"g"}, opt("op", Value("sum"))},
                .help = "The gradient rule of all_reduce: the cotangent of x given out = all_reduce(x, "
                        "op) and its cotangent g (a collective itself).",
                .eval = nullptr,
                .grads = {}},
               all_reduce_grad_async),
    async_spec({.name = "reduce_scatter_grad",
                .family = "dist",
                .params = {{"g"}, opt("op", Value("sum"))},
                .help = "The gradient rule of reduce_scatter (op 'sum' or 'mean'): every locality's "
                        "cotangent g joined along axis 0 (a collective itself).",
                .eval = nullptr,
                .grads = {}},
               reduce_scatter_grad_async),
});

}  // namespace
}  // namespace tessera::dist
