// Collectives as primitives of the execution tree (family "distributed"). Each has an
// asynchronous evaluation: the node's future is the collective's future,
// completed by the communication engine (comm.hpp), so no worker waits. The
// synchronous `eval` is the fallback of call_primitive (the outermost
// boundary), which waits for that future.
//
// With one locality every collective is the identity (or the obvious local
// result) and no MPI call is made.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/kernels/shape.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {
namespace {

using detail::split_counts;

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

// The group argument: nil (the world) or a group id (mesh.group(axis)).
GroupInfo group_arg(Args& a, size_t i) { return group_of_value(a[i], a.op()); }

// A rank of group g (a root, a peer).
int rank_arg(Args& a, size_t i, const GroupInfo& g) {
  int64_t r = a.integer(i);
  int n = g.size;
  if (r < 0 || r >= n) {
    std::string in = g.id == 0 ? "" : error_message(" of group ", g.name);
    throw std::out_of_range(error_message("[", a.op(), "] argument '", a.param_name(i), "' is ", r,
                                          " but ranks", in, " are 0..", n - 1, " (", n, " localit",
                                          n == 1 ? "y" : "ies", ")"));
  }
  return static_cast<int>(r);
}

Value divided(const Value& v, int n) {
  return call_primitive("divide", std::vector<Value>{v, Value(static_cast<int64_t>(n))});
}

// Parts that are consecutive views of one array along axis 0 (an all_gather
// received in place, Engine::result) are joined as a view of it, no copy.
Value concatenated(const Value& parts, int axis, DType dt) {
  std::vector<Array> arrays;
  for (const Value& p : parts.as_list()) arrays.push_back(p.as_array());
  bool joined = axis == 0 && !arrays.empty() && arrays[0].ndim() > 0;
  int64_t at = joined ? arrays[0].offset() : 0, rows = 0;
  for (const Array& p : arrays) {
    if (!joined) break;
    joined = p.dtype() == dt && p.is_contiguous() && p.shares_storage(arrays[0]) && p.offset() == at &&
             p.ndim() == arrays[0].ndim();
    for (int k = 1; joined && k < p.ndim(); ++k) joined = p.dim(k) == arrays[0].dim(k);
    at += p.size();
    rows += joined ? p.dim(0) : 0;
  }
  if (joined) {
    Shape whole = arrays[0].shape();
    whole[0] = rows;
    std::vector<int64_t> strides(whole.size(), 1);
    for (int k = static_cast<int>(whole.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * whole[k + 1];
    return Value(Array::view(arrays[0], whole, strides, arrays[0].offset()));
  }
  return Value(kernels::concatenate_arrays(arrays, axis, dt));
}

// With one member a group's collectives are computed here: the op checks
// its group's size, not the engine.
Future<Value> all_reduce_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  // x is read here last: an array argument is moved on to the engine, not copied.
  Array x = a[0].is_array() && a[0].as_array().dtype() != DType::bool_ ? std::move(a.at(0).as_array())
                                                                       : numeric_array(a, 0, false);
  ReduceOp op = parse_reduce_op(a.string(1), a.op());
  int n = g.size;
  if (n == 1) {
    return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(x), 1) : Value(x));
  }
  Future<Value> f = detail::all_reduce(std::move(x), op, a.site(), g.id);
  if (op != ReduceOp::mean) return f;
  return f.then([n](const Value& v) { return divided(v, n); });
}

Future<Value> broadcast_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  Array x = numeric_array(a, 0, true);
  int root = rank_arg(a, 1, g);
  if (g.size == 1) return Future<Value>::ready(Value(x));
  return detail::broadcast(x, root, a.site(), g.id);
}

Future<Value> all_gather_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  Array x = with_rows(a, 0);
  int axis = normalize_axis(a.integer(1), x.ndim(), a.op());
  if (g.size == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::all_gather(x, axis, a.site(), g.id).then([axis, dt](const Value& parts) {
    return concatenated(parts, axis, dt);
  });
}

Future<Value> reduce_scatter_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  Array x = with_rows(a, 0);
  if (x.dtype() == DType::bool_) numeric_array(a, 0, false);
  ReduceOp op = parse_reduce_op(a.string(1), a.op());
  int n = g.size;
  if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(x), 1) : Value(x));
  Future<Value> f = detail::reduce_scatter(x, op, a.site(), g.id);
  if (op != ReduceOp::mean) return f;
  return f.then([n](const Value& v) { return divided(v, n); });
}

Future<Value> gather_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  Array x = with_rows(a, 0);
  int root = rank_arg(a, 1, g);
  if (g.size == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::gather(x, root, a.site(), g.id).then([x, dt](const Value& parts) {
    return parts.is_nil() ? Value(x) : concatenated(parts, 0, dt);
  });
}

Future<Value> scatter_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  int root = rank_arg(a, 1, g);
  bool is_root = g.rank == root;
  Array x = is_root ? with_rows(a, 0) : a.array(0);
  if (g.size == 1) return Future<Value>::ready(Value(x));
  return detail::scatter(x, root, a.site(), g.id);
}

Future<Value> all_to_all_async(Args& a) {
  GroupInfo g = group_arg(a, 1);
  Array x = with_rows(a, 0);
  if (g.size == 1) return Future<Value>::ready(Value(x));
  DType dt = x.dtype();
  return detail::all_to_all(x, a.site(), g.id).then([dt](const Value& parts) {
    return concatenated(parts, 0, dt);
  });
}

Future<Value> barrier_async(Args& a) {
  GroupInfo g = group_arg(a, 0);
  if (g.size == 1) return Future<Value>::ready(Value());
  return detail::barrier(a.site(), g.id);
}

// Tensor parallelism's two conjugate operations (Megatron's "f" and "g"): a
// layer split over a tensor group takes a replicated input through tp_copy
// and gives a replicated output through tp_reduce. Gradient conventions (the
// loss is replicated over the group, every member computing the same value):
//   tp_copy(x):   forward y = x;               backward dx = all_reduce(dy, sum)
//     (each member's slice contributes a part of dL/dx; the sum is the whole);
//   tp_reduce(x): forward y = all_reduce(x, sum); backward dx = dy
//     (every member's y is the same replicated value, so dy is already the
//     cotangent of each partial sum; all_reduce's own rule would sum the
//     members' identical cotangents and count the loss t times).
// On a one-member group both are the identity and make no MPI call.
Future<Value> tp_copy_async(Args& a) {
  group_arg(a, 1);  // checked: a valid group even where it is not used
  return Future<Value>::ready(Value(numeric_array(a, 0, false)));
}

Future<Value> tp_reduce_async(Args& a) {
  GroupInfo g = group_arg(a, 1);
  Array x = a[0].is_array() && a[0].as_array().dtype() != DType::bool_ ? std::move(a.at(0).as_array())
                                                                       : numeric_array(a, 0, false);
  if (g.size == 1) return Future<Value>::ready(Value(x));
  return detail::all_reduce(std::move(x), ReduceOp::sum, a.site(), g.id);
}

// A peer of this locality in group g, as a world rank.
int peer_arg(Args& a, size_t i, const GroupInfo& g) {
  if (g.size == 1) {
    std::string what =
        g.id == 0 ? std::string("this program runs on one (start it with `tessera run -n N`)")
                  : error_message("group ", g.name, " has one member");
    throw std::invalid_argument(error_message("[", a.op(), "] needs another locality, but ", what));
  }
  int peer = rank_arg(a, i, g);
  if (peer == g.rank) {
    throw std::invalid_argument(error_message("[", a.op(), "] argument '", a.param_name(i), "' is ", peer,
                                              ", this locality itself"));
  }
  return g.world_rank(peer);
}

int tag_arg(Args& a, size_t i) {
  int64_t t = a.integer(i);
  if (t < 0 || t > 32767) {
    throw std::out_of_range(error_message("[", a.op(), "] argument 'tag' must be in 0..32767, got ", t));
  }
  return static_cast<int>(t);
}

Future<Value> send_async(Args& a) {
  GroupInfo g = group_arg(a, 3);
  Array x = numeric_array(a, 0, true);
  int dest = peer_arg(a, 1, g);
  return detail::send(x, dest, tag_arg(a, 2), a.site());
}

Future<Value> recv_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  int source = peer_arg(a, 0, g);
  return detail::recv(source, tag_arg(a, 1), a.site());
}

// Pipeline point-to-point (pipe_send, pipe_recv): stages are ranks of the
// group (the mesh's pipeline group), the tags are pipe tags in a range of
// their own (comm.hpp, kPipeTagBase), per direction. A pipe_send completes
// as soon as its message is posted, so a task posting sends never waits for
// the receiver: both sides of a schedule may send before they receive. The
// engine keeps the message until MPI has sent it; a send that failed is
// reported by the next pipe_send or pipe_recv of this process.
struct PipeSends {
  std::mutex mutex;
  std::vector<Future<Value>> outstanding;
};

PipeSends& pipe_sends() {
  static PipeSends* s = new PipeSends();
  return *s;
}

void check_pipe_sends() {
  std::exception_ptr failed;
  {
    PipeSends& s = pipe_sends();
    std::lock_guard lock(s.mutex);
    auto& v = s.outstanding;
    for (auto it = v.begin(); it != v.end();) {
      if (!it->is_ready()) {
        ++it;
        continue;
      }
      if (!failed) failed = it->error();
      it = v.erase(it);
    }
  }
  if (failed) std::rethrow_exception(failed);
}

int64_t pipe_tag_arg(Args& a, size_t i) {
  int64_t t = a.integer(i);
  if (t < 0 || t >= detail::kPipeTags) {
    throw std::out_of_range(error_message("[", a.op(), "] argument 'tag' must be in 0..",
                                          detail::kPipeTags - 1, ", got ", t));
  }
  return t;
}

// The MPI tag of pipe tag t from stage `from` to stage `to`.
int pipe_mpi_tag(int64_t t, int from, int to) {
  return detail::kPipeTagBase + static_cast<int>(2 * t + (from < to ? 0 : 1));
}

std::string stage_name(const GroupInfo& g, int r) {
  return g.id == 0 ? error_message("stage ", r) : error_message("stage ", r, " of ", g.name);
}

Future<Value> pipe_send_async(Args& a) {
  check_pipe_sends();
  GroupInfo g = group_arg(a, 3);
  int dest = peer_arg(a, 1, g);
  int to = static_cast<int>(a.integer(1));
  // The message goes out after this returns. By default a copy: the
  // program (or Python, whose array may be x's buffer) may write into x
  // meanwhile. With copy=false the message holds x itself, which the
  // engine then never updates in place (it is not unique); a wrapped NumPy
  // buffer or a strided view is still copied. A pipeline stage sends its
  // forward's output, which it keeps for the backward anyway: a copy would
  // hold a second one until the receiver takes it (docs/parallelism.md).
  Array given = numeric_array(a, 0, true);
  bool copy = a.is_nil(4) || a.boolean(4);
  Array x = copy || given.foreign() ? given.copy() : given.contiguous();
  int64_t t = pipe_tag_arg(a, 2);
  std::string what =
      error_message("pipe_send(", stage_name(g, g.rank), " -> ", to, ", tag=", t, ")");
  Future<Value> sent = detail::send(x, dest, pipe_mpi_tag(t, g.rank, to), a.site(), what);
  if (!sent.is_ready() || sent.error()) {
    PipeSends& s = pipe_sends();
    std::lock_guard lock(s.mutex);
    s.outstanding.push_back(std::move(sent));
  }
  return Future<Value>::ready(Value());
}

Future<Value> pipe_recv_async(Args& a) {
  check_pipe_sends();
  GroupInfo g = group_arg(a, 2);
  int source = peer_arg(a, 0, g);
  int from = static_cast<int>(a.integer(0));
  int64_t t = pipe_tag_arg(a, 1);
  std::optional<std::pair<DType, Shape>> want;
  if (!a.is_nil(3)) {
    if (!a[3].is_array()) a.type_error(3, "an array (the shape and dtype expected) or nil");
    want.emplace(a[3].as_array().dtype(), a[3].as_array().shape());
  }
  std::string me = stage_name(g, g.rank);
  std::string what = error_message("pipe_recv(", me, " <- ", from, ", tag=", t, ")");
  std::string site = a.site();
  return detail::recv(source, pipe_mpi_tag(t, from, g.rank), site, what)
      .then([want, me, from, t](const Value& v) -> Value {
        if (!want) return v;
        const Array& got = v.as_array();
        if (got.dtype() != want->first || got.shape() != want->second) {
          throw std::invalid_argument(error_message(
              "[pipe_recv] ", me, " expected ", dtype_name(want->first), " ",
              shape_str(want->second), " from stage ", from, " with tag ", t, ", but stage ",
              from, " sent ", dtype_name(got.dtype()), " ", shape_str(got.shape())));
        }
        return v;
      });
}

// The cotangent of broadcast's x: the sum of every member's cotangent, on
// the root; zeros elsewhere (their x was not used).
Future<Value> broadcast_grad_async(Args& a) {
  GroupInfo g = group_arg(a, 2);
  Array gr = numeric_array(a, 0, true);
  int root = rank_arg(a, 1, g);
  if (g.size == 1) return Future<Value>::ready(Value(gr));
  bool is_root = g.rank == root;
  return detail::all_reduce(gr, ReduceOp::sum, a.site(), g.id).then([is_root](const Value& v) {
    return is_root ? v : Value(Array::zeros(v.as_array().dtype(), v.as_array().shape()));
  });
}

// The cotangent of all_reduce's x: for sum and mean every locality's output
// depends on every input, so it is the all-reduced cotangent (mean: scaled);
// for max and min it flows to the elements equal to the result.
Future<Value> all_reduce_grad_async(Args& a) {
  Array x = a.array(0), out = a.array(1), g = a.array(2);
  ReduceOp op = parse_reduce_op(a.string(3), "all_reduce");
  GroupInfo grp = group_arg(a, 4);
  int n = grp.size;
  if (op == ReduceOp::sum || op == ReduceOp::mean) {
    if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(g), 1) : Value(g));
    Future<Value> f = detail::all_reduce(g, ReduceOp::sum, a.site(), grp.id);
    if (op == ReduceOp::sum) return f;
    return f.then([n](const Value& v) { return divided(v, n); });
  }
  Value mask = call_primitive("equal", std::vector<Value>{Value(x), Value(out)});
  Future<Value> total = n == 1 ? Future<Value>::ready(Value(g))
                               : detail::all_reduce(g, ReduceOp::sum, a.site(), grp.id);
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
  GroupInfo grp = group_arg(a, 2);
  int n = grp.size;
  if (n == 1) return Future<Value>::ready(op == ReduceOp::mean ? divided(Value(g), 1) : Value(g));
  DType dt = g.dtype();
  return detail::all_gather(g, 0, a.site(), grp.id).then([dt, op, n](const Value& parts) {
    Value joined = concatenated(parts, 0, dt);
    return op == ReduceOp::mean ? divided(joined, n) : joined;
  });
}

// Helpers of the gradients below. A locality knows only its own extents, but
// these gradients send every locality its own part of a cotangent, so they
// first learn everyone's extents (one small all_gather), then move blocks
// padded to a common size, because the engine splits axis 0 evenly.

// Every locality's extent of x along `axis`, in locality order.
Future<std::vector<int64_t>> extents(const Array& x, int axis, const std::string& site, int group) {
  Array mine = Array::from_vector<int64_t>({x.dim(axis)}, {1});
  return detail::all_gather(mine, 0, site, group).then([](const Value& parts) {
    std::vector<int64_t> out;
    for (const Value& p : parts.as_list()) out.push_back(p.as_array().get_int(0));
    return out;
  });
}

std::vector<int> axis_first(int ndim, int axis) {
  std::vector<int> perm{axis};
  for (int i = 0; i < ndim; ++i) {
    if (i != axis) perm.push_back(i);
  }
  return perm;
}

// `a` with `axis` moved to the front (a copy unless it is already there).
Array moved_to_front(const Array& a, int axis) {
  return axis == 0 ? a : kernels::transpose_array(a, axis_first(a.ndim(), axis));
}

// The inverse of moved_to_front.
Array moved_back(const Array& a, int axis) {
  if (axis == 0) return a;
  std::vector<int> perm = axis_first(a.ndim(), axis), inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return kernels::transpose_array(a, inverse);
}

// Rows [begin, begin + count) of `a`, as a new array.
Array row_block(const Array& a, int64_t begin, int64_t count) {
  Shape s = a.shape();
  s[0] = count;
  Array out(a.dtype(), s);
  int64_t rb = detail::row_bytes(a.dtype(), a.shape());
  if (count > 0 && rb > 0) std::memcpy(out.raw(), static_cast<const char*>(a.raw()) + begin * rb, count * rb);
  return out;
}

// Blocks of rows of `a` (block k: `counts[k]` rows from `offsets[k]`), each
// padded with zero rows to `rows` rows, one after the other.
Array padded_blocks(const Array& a, const std::vector<int64_t>& offsets, const std::vector<int64_t>& counts,
                    int64_t rows) {
  Shape s = a.shape();
  s[0] = rows * static_cast<int64_t>(counts.size());
  Array out = Array::zeros(a.dtype(), s);
  int64_t rb = detail::row_bytes(a.dtype(), a.shape());
  char* dst = static_cast<char*>(out.raw());
  const char* src = static_cast<const char*>(a.raw());
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] > 0 && rb > 0) std::memcpy(dst + rows * static_cast<int64_t>(k) * rb, src + offsets[k] * rb,
                                             counts[k] * rb);
  }
  return out;
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> out(counts.size(), 0);
  for (size_t k = 1; k < counts.size(); ++k) out[k] = out[k - 1] + counts[k - 1];
  return out;
}

int64_t largest(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t e : v) m = std::max(m, e);
  return m;
}

// The cotangent's extent along the joined axis must be the sum of the parts.
void check_joined(const char* op, const Array& g, int axis, const std::vector<int64_t>& parts) {
  int64_t total = 0;
  for (int64_t e : parts) total += e;
  if (g.ndim() <= axis || g.dim(axis) != total) {
    throw std::invalid_argument(error_message("[", op, "] the cotangent g has shape ", shape_str(g.shape()),
                                              " but the localities' parts along axis ", axis, " add up to ",
                                              total, " (extents ", shape_str(parts), ")"));
  }
}

// The cotangent of all_gather's x: every locality's output holds every x, so
// locality k gets the sum over localities of the slice of their cotangents
// that came from its x (a reduce-scatter with the localities' extents).
Future<Value> all_gather_grad_async(Args& a) {
  Array x = with_rows(a, 0), g = a.array(1);
  int axis = normalize_axis(a.integer(2), x.ndim(), "all_gather");
  GroupInfo grp = group_arg(a, 3);
  if (grp.size == 1) return Future<Value>::ready(Value(g));
  std::string site = a.site();
  int me = grp.rank, id = grp.id;
  return extents(x, axis, site, id)
      .then([x, g, axis, site, me, id](const std::vector<int64_t>& ext) -> Future<Value> {
        check_joined("all_gather_grad", g, axis, ext);
        int64_t rows = largest(ext), mine = ext[me];
        Shape shape = x.shape();
        if (rows == 0) return Future<Value>::ready(Value(Array::zeros(g.dtype(), shape)));
        Array blocks = padded_blocks(moved_to_front(g, axis), offsets_of(ext), ext, rows);
        return detail::reduce_scatter(blocks, ReduceOp::sum, site, id)
            .then([axis, mine](const Value& part) {
              return Value(moved_back(row_block(part.as_array(), 0, mine), axis));
            });
      });
}

// The cotangent of gather's x: the root's cotangent of the joined array, cut
// into the localities' parts and scattered; elsewhere gather returned x
// itself, so that locality's own cotangent is added.
Future<Value> gather_grad_async(Args& a) {
  Array x = with_rows(a, 0), g = a.array(1);
  GroupInfo grp = group_arg(a, 3);
  int root = rank_arg(a, 2, grp);
  if (grp.size == 1) return Future<Value>::ready(Value(g));
  std::string site = a.site();
  int me = grp.rank, id = grp.id;
  return extents(x, 0, site, id)
      .then([x, g, root, site, me, id](const std::vector<int64_t>& ext) -> Future<Value> {
        int64_t rows = largest(ext), mine = ext[me];
        if (me == root) check_joined("gather_grad", g, 0, ext);
        auto own = [g, me, root](Array part) {
          return me == root ? Value(part)
                            : call_primitive("add", std::vector<Value>{Value(part), Value(g)});
        };
        if (rows == 0) return Future<Value>::ready(own(Array::zeros(g.dtype(), x.shape())));
        Array blocks = me == root ? padded_blocks(g, offsets_of(ext), ext, rows) : g;
        return detail::scatter(blocks, root, site, id).then([mine, own](const Value& part) {
          return own(row_block(part.as_array(), 0, mine));
        });
      });
}

// The cotangent of scatter's x: on the root, every locality's cotangent
// joined in locality order; elsewhere zeros (scatter ignores x there).
Future<Value> scatter_grad_async(Args& a) {
  Array x = a.array(0), g = with_rows(a, 1);
  GroupInfo grp = group_arg(a, 3);
  int root = rank_arg(a, 2, grp);
  if (grp.size == 1) return Future<Value>::ready(Value(g));
  DType dt = g.dtype();
  Shape shape = x.shape();
  return detail::gather(g, root, a.site(), grp.id).then([dt, shape](const Value& parts) {
    if (parts.is_nil()) return Value(Array::zeros(dt, shape));
    return concatenated(parts, 0, dt);
  });
}

// The cotangent of all_to_all's x: every locality sends back to locality k
// the rows of its cotangent that came from k, and k joins them in order.
Future<Value> all_to_all_grad_async(Args& a) {
  Array x = with_rows(a, 0), g = a.array(1);
  GroupInfo grp = group_arg(a, 2);
  int n = grp.size;
  if (n == 1) return Future<Value>::ready(Value(g));
  std::string site = a.site();
  DType dt = g.dtype();
  int me = grp.rank, id = grp.id;
  return extents(x, 0, site, id)
      .then([x, g, n, dt, site, me, id](const std::vector<int64_t>& ext) -> Future<Value> {
        // Rows of g that came from locality k: its part `me` of an even split.
        std::vector<int64_t> from(n);
        for (int k = 0; k < n; ++k) from[k] = split_counts(ext[k], n)[me];
        check_joined("all_to_all_grad", g, 0, from);
        // What this locality receives back from locality j: its own part j.
        std::vector<int64_t> back = split_counts(ext[me], n);
        int64_t rows = (largest(ext) + n - 1) / n;
        if (rows == 0) return Future<Value>::ready(Value(Array::zeros(dt, x.shape())));
        bool even = std::all_of(ext.begin(), ext.end(), [&](int64_t e) { return e == ext[0]; });
        // With equal extents everywhere g is already split the way the engine
        // splits (n blocks of equal size); otherwise blocks are padded.
        Array send = even ? g : padded_blocks(g, offsets_of(from), from, rows);
        return detail::all_to_all(send, site, id).then([back, dt, even](const Value& parts) {
          if (even) return concatenated(parts, 0, dt);
          List trimmed;
          const List& l = parts.as_list();
          for (size_t j = 0; j < l.size(); ++j)
            trimmed.push_back(Value(row_block(l[j].as_array(), 0, back[j])));
          return concatenated(Value(std::move(trimmed)), 0, dt);
        });
      });
}

// The gradient rules of the collectives (a switch kept for bisecting: the
// autodiff suite, tests/cpp/lang/test_autodiff.cpp, requires a
// finite-difference case for every attached rule; the multi-rank gradients
// are checked by tests/distributed/collective_grads.tsl).
constexpr bool kAttachGradientRules = true;
std::vector<std::string> rules(std::vector<std::string> r) {
  return kAttachGradientRules ? r : std::vector<std::string>{};
}

// The group argument's help, shared by every collective.
#define TESSERA_GROUP_HELP                                                             \
  " group: nil (every locality) or a group (mesh.group(axis), tessera.distributed.Mesh): " \
  "then the localities are the group's members and ranks are ranks in the group."

const bool registered_collectives = register_primitives({
    async_spec(
        {.name = "all_reduce",
         .family = "distributed",
         .params = {{"x"}, opt("op", Value("sum")), opt("group", Value())},
         .help = "Reduces x elementwise over all localities (op: 'sum', 'mean', 'max', 'min'); "
                 "every locality gets the result. Shapes and dtypes must agree on every "
                 "locality." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"all_reduce_grad(x, out, g, op, group)", "", ""})},
        all_reduce_async),
    async_spec(
        {.name = "broadcast",
         .family = "distributed",
         .params = {{"x"}, opt("root", Value(0)), opt("group", Value())},
         .help = "The root locality's x, on every locality (x must have the same shape and dtype "
                 "everywhere)." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"broadcast_grad(g, root, group)", "", ""})},
        broadcast_async),
    async_spec(
        {.name = "all_gather",
         .family = "distributed",
         .params = {{"x"}, opt("axis", Value(0)), opt("group", Value())},
         .help = "Every locality's x joined along axis, in locality order; the extents along axis "
                 "may differ between localities." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"all_gather_grad(x, g, axis, group)", "", ""})},
        all_gather_async),
    async_spec(
        {.name = "reduce_scatter",
         .family = "distributed",
         .params = {{"x"}, opt("op", Value("sum")), opt("group", Value())},
         .help = "Reduces x over all localities (op: 'sum', 'mean', 'max', 'min') and gives each "
                 "locality its part of axis 0 (split in as many parts as localities; the first "
                 "shape(x)[0] % that number of parts have one more row)." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"reduce_scatter_grad(g, op, group)", "", ""})},
        reduce_scatter_async),
    async_spec(
        {.name = "gather",
         .family = "distributed",
         .params = {{"x"}, opt("root", Value(0)), opt("group", Value())},
         .help = "On the root: every locality's x joined along axis 0 (extents may differ); on the "
                 "other localities: x itself." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"gather_grad(x, g, root, group)", "", ""})},
        gather_async),
    async_spec(
        {.name = "scatter",
         .family = "distributed",
         .params = {{"x"}, opt("root", Value(0)), opt("group", Value())},
         .help = "This locality's part of the root's x, split along axis 0 in as many parts as "
                 "localities (the first shape(x)[0] % that number have one more row); x is ignored "
                 "on the other localities." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"scatter_grad(x, g, root, group)", "", ""})},
        scatter_async),
    async_spec(
        {.name = "all_to_all",
         .family = "distributed",
         .params = {{"x"}, opt("group", Value())},
         .help =
             "Splits x along axis 0 in as many parts as localities, sends part j to locality j, "
             "and joins the parts received, in locality order, along axis 0 (the localities' x "
             "may differ in length along axis 0)." TESSERA_GROUP_HELP,
         .eval = nullptr,
         .grads = rules({"all_to_all_grad(x, g, group)", ""})},
        all_to_all_async),
    async_spec({.name = "barrier",
                .family = "distributed",
                .params = {opt("group", Value())},
                .help = "Completes (as nil) once every locality has reached it." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = {}},
               barrier_async),
    async_spec({.name = "tp_copy",
                .family = "distributed",
                .params = {{"x"}, opt("group", Value())},
                .help = "Tensor parallelism's input operation (Megatron's f): x itself forward; "
                        "backward, the cotangent summed over the group (all_reduce), since each "
                        "member's slice of a layer gives a part of the input's gradient. The "
                        "identity on a one-member group." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = rules({"all_reduce(g, \"sum\", group)", ""})},
               tp_copy_async),
    async_spec({.name = "tp_reduce",
                .family = "distributed",
                .params = {{"x"}, opt("group", Value())},
                .help = "Tensor parallelism's output operation (Megatron's g): x summed over "
                        "the group forward (one all_reduce); backward, the cotangent itself, "
                        "since the sum is replicated on every member and the loss computed once "
                        "per member. The identity on a one-member group." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = rules({"g", ""})},
               tp_reduce_async),
    async_spec({.name = "send",
                .family = "distributed",
                .params = {{"x"}, {"dest"}, opt("tag", Value(0)), opt("group", Value())},
                .help = "Sends x to locality dest (its shape and dtype travel with it); nil once "
                        "sent." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = {}},
               send_async),
    async_spec({.name = "recv",
                .family = "distributed",
                .params = {{"source"}, opt("tag", Value(0)), opt("group", Value())},
                .help = "The array sent by locality source with the same tag." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = {}},
               recv_async),
    async_spec({.name = "pipe_send",
                .family = "distributed",
                .params = {{"x"}, {"dest"}, {"tag"}, opt("group", Value()),
                           opt("copy", Value(true))},
                .help = "Pipeline parallelism's send: x to stage dest (a rank of group), with a "
                        "pipe tag (0..1048575; its own tag space, per direction: it never "
                        "matches a send/recv tag or the opposite direction's message of the "
                        "same tag). Completes (nil) as soon as the message is posted, so the "
                        "task sending never waits for the receiver: both sides of a schedule "
                        "may send first; x is copied, so later writes into it do not change the "
                        "message (copy=false: the message holds x itself until it is sent, "
                        "and the program must not write into x meanwhile; a NumPy buffer is "
                        "copied still). Give each message in flight between two stages its own tag "
                        "(the micro-batch)." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = {}},
               pipe_send_async),
    async_spec({.name = "pipe_recv",
                .family = "distributed",
                .params = {{"source"}, {"tag"}, opt("group", Value()), opt("like", Value())},
                .help = "Pipeline parallelism's receive: the array stage source sent with "
                        "pipe_send and the same pipe tag. With like (an array, or a "
                        "grad_template of one), a message of another shape or dtype is a "
                        "ValueError naming both stages, the tag and both shapes. A pending "
                        "define: the block goes on while it waits." TESSERA_GROUP_HELP,
                .eval = nullptr,
                .grads = {}},
               pipe_recv_async),
    async_spec(
        {.name = "all_reduce_grad",
         .family = "distributed",
         .params = {{"x"}, {"out"}, {"g"}, opt("op", Value("sum")), opt("group", Value())},
         .help = "The gradient rule of all_reduce: the cotangent of x given out = all_reduce(x, "
                 "op, group) and its cotangent g (a collective itself, on the same group).",
         .eval = nullptr,
         .grads = {}},
        all_reduce_grad_async),
    async_spec(
        {.name = "broadcast_grad",
         .family = "distributed",
         .params = {{"g"}, opt("root", Value(0)), opt("group", Value())},
         .help =
             "The gradient rule of broadcast: on the root the sum of every locality's cotangent "
             "g, elsewhere zeros (a collective itself, on the same group).",
         .eval = nullptr,
         .grads = {}},
        broadcast_grad_async),
    async_spec(
        {.name = "reduce_scatter_grad",
         .family = "distributed",
         .params = {{"g"}, opt("op", Value("sum")), opt("group", Value())},
         .help = "The gradient rule of reduce_scatter (op 'sum' or 'mean'): every locality's "
                 "cotangent g joined along axis 0 (a collective itself, on the same group).",
         .eval = nullptr,
         .grads = {}},
        reduce_scatter_grad_async),
    async_spec(
        {.name = "all_gather_grad",
         .family = "distributed",
         .params = {{"x"}, {"g"}, opt("axis", Value(0)), opt("group", Value())},
         .help = "The gradient rule of all_gather: the sum over localities of the slice of their "
                 "cotangent g that came from this locality's x (a collective itself, on the same "
                 "group).",
         .eval = nullptr,
         .grads = {}},
        all_gather_grad_async),
    async_spec(
        {.name = "gather_grad",
         .family = "distributed",
         .params = {{"x"}, {"g"}, opt("root", Value(0)), opt("group", Value())},
         .help =
             "The gradient rule of gather: this locality's part of the root's cotangent g, plus "
             "its own g on the other localities (a collective itself, on the same group).",
         .eval = nullptr,
         .grads = {}},
        gather_grad_async),
    async_spec(
        {.name = "scatter_grad",
         .family = "distributed",
         .params = {{"x"}, {"g"}, opt("root", Value(0)), opt("group", Value())},
         .help =
             "The gradient rule of scatter: on the root every locality's cotangent g joined along "
             "axis 0, elsewhere zeros shaped like x (a collective itself, on the same group).",
         .eval = nullptr,
         .grads = {}},
        scatter_grad_async),
    async_spec(
        {.name = "all_to_all_grad",
         .family = "distributed",
         .params = {{"x"}, {"g"}, opt("group", Value())},
         .help =
             "The gradient rule of all_to_all: the rows of every locality's cotangent g that came "
             "from this locality's x, sent back and joined in order (a collective itself, on the "
             "same group).",
         .eval = nullptr,
         .grads = {}},
        all_to_all_grad_async),
});

#undef TESSERA_GROUP_HELP

}  // namespace
}  // namespace tessera::distributed
