// The communication engine's reductions: inline all-reduces reduced in rank
// order, coalescing, and the engine's own all-reduce algorithms run over MPI
// (the ring, recursive halving and doubling: algorithms.hpp, engine.hpp).
#include "tessera/distributed/engine.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace tessera::distributed::detail {

namespace {

// out = a + b (or, with b null, out += a), elementwise, for the sums of
// inline all-reduces (the contributions may be unaligned inside an offer).
template <class T>
[[gnu::always_inline]] inline void sum_loop(T* out, const char* a, const char* b, int64_t n) {
  // b, or out itself: the other operand (out[i] = b[i] + a[i]).
  const char* other = b ? b : reinterpret_cast<const char*>(out);
  for (int64_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof x, sizeof x);
    std::memcpy(&y, other + i * sizeof y, sizeof y);
    out[i] = y + x;
  }
}

// sum_loop for float32 or float64. On x86-64 compiled for AVX2 as well,
// chosen at load time on CPUs that have it; the same bits either way (one
// addition per element, in the same order).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void sum_floats(void* out, const char* a, const char* b, int64_t n, bool f64) {
  if (f64) {
    sum_loop(static_cast<double*>(out), a, b, n);
  } else {
    sum_loop(static_cast<float*>(out), a, b, n);
  }
}

// acc = acc OP in, elementwise, for n elements of dt (in may be unaligned).
// max and min propagate NaN.
void accumulate(void* acc, const char* in, int64_t n, DType dt, ReduceOp rop) {
  bool f64 = dt == DType::float64;
  if (rop == ReduceOp::sum && (f64 || dt == DType::float32)) {
    sum_floats(acc, in, nullptr, n, f64);
    return;
  }
  auto combine = [&](auto* a) {
    using T = std::remove_pointer_t<decltype(a)>;
    T v;
    switch (rop) {
      case ReduceOp::max:
        for (int64_t i = 0; i < n; ++i) {
          std::memcpy(&v, in + i * sizeof v, sizeof v);
          a[i] = a[i] < v || v != v ? v : a[i];
        }
        break;
      case ReduceOp::min:
        for (int64_t i = 0; i < n; ++i) {
          std::memcpy(&v, in + i * sizeof v, sizeof v);
          a[i] = v < a[i] || v != v ? v : a[i];
        }
        break;
      default:
        for (int64_t i = 0; i < n; ++i) {
          std::memcpy(&v, in + i * sizeof v, sizeof v);
          a[i] += v;
        }
    }
  };
  switch (dt) {
    case DType::float32: combine(static_cast<float*>(acc)); break;
    case DType::float64: combine(static_cast<double*>(acc)); break;
    case DType::int64: combine(static_cast<int64_t*>(acc)); break;
    default: throw std::invalid_argument("[all_reduce] bool arrays cannot be reduced");
  }
}

}  // namespace

void combine(void* out, const void* left, const void* right, int64_t n, DType dt, ReduceOp rop) {
  const char* l = static_cast<const char*>(left);
  const char* r = static_cast<const char*>(right);
  bool f64 = dt == DType::float64;
  bool sum = rop == ReduceOp::sum || rop == ReduceOp::mean;
  if (sum && (f64 || dt == DType::float32)) {
    sum_floats(out, r, l, n, f64);  // out = left + right
    return;
  }
  auto each = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    for (int64_t i = 0; i < n; ++i) {
      T a, b;
      std::memcpy(&a, l + i * sizeof a, sizeof a);
      std::memcpy(&b, r + i * sizeof b, sizeof b);
      // As accumulate with acc = left, in = right: max and min propagate NaN.
      T v = rop == ReduceOp::max   ? (a < b || b != b ? b : a)
            : rop == ReduceOp::min ? (b < a || b != b ? b : a)
                                   : a + b;
      std::memcpy(reinterpret_cast<char*>(o) + i * sizeof v, &v, sizeof v);
    }
  };
  switch (dt) {
    case DType::float32: each(static_cast<float*>(out)); break;
    case DType::float64: each(static_cast<double*>(out)); break;
    case DType::int64: each(static_cast<int64_t*>(out)); break;
    default: throw std::invalid_argument("[all_reduce] bool arrays cannot be reduced");
  }
}

void reduce_doubling_order(void* out, const char* const* data, int size, int64_t n, DType dt,
                           ReduceOp rop) {
  if (size < 1) throw std::invalid_argument("[all_reduce] reduce_doubling_order: no ranks");
  size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
  int p = 1;
  while (p * 2 <= size) p *= 2;
  int r = size - p;
  if (p == 1) {
    if (bytes) std::memcpy(out, data[0], bytes);
    return;
  }
  // Level by level, in place: v[i] holds the subtree whose leftmost leaf is
  // i; the first level reads the ranks' data directly.
  std::vector<char> v(bytes * static_cast<size_t>(p / 2));
  auto leaf = [&](int i) { return i < r ? nullptr : data[i + r]; };
  for (int i = 0; i < p; i += 2) {
    char* into = p == 2 ? static_cast<char*>(out) : v.data() + bytes * static_cast<size_t>(i / 2);
    const char* a = leaf(i);
    const char* b = leaf(i + 1);
    // A folded pair stands in for a leaf: its two ranks' data added first.
    std::vector<char> fa, fb;
    if (!a) {
      fa.resize(bytes);
      combine(fa.data(), data[2 * i], data[2 * i + 1], n, dt, rop);
      a = fa.data();
    }
    if (!b) {
      fb.resize(bytes);
      combine(fb.data(), data[2 * (i + 1)], data[2 * (i + 1) + 1], n, dt, rop);
      b = fb.data();
    }
    combine(into, a, b, n, dt, rop);
  }
  for (int width = 2; width < p; width *= 2) {
    // v[j] (j = i / 2) holds the subtree of `width` leaves starting at leaf i.
    for (int j = 0; j < p / 2; j += width) {
      char* left = v.data() + bytes * static_cast<size_t>(j);
      const char* right = v.data() + bytes * static_cast<size_t>(j + width / 2);
      combine(width * 2 == p ? out : left, left, right, n, dt, rop);
    }
  }
}

Array Engine::reduce_in_rank_order(const Op& op, const char* const* data) const {
  Array out(op.x.dtype(), op.x.shape());
  int64_t n = out.size();
  if (n == 0) return out;
  // Sums of floats: in the order of recursive doubling (reduce_doubling_order,
  // as the cached round computes them): (data[0] + data[1]) + data[2] at 3
  // ranks, (data[0] + data[1]) + (data[2] + data[3]) at 4 ...
  bool f32 = out.dtype() == DType::float32, f64 = out.dtype() == DType::float64;
  if ((op.rop == ReduceOp::sum || op.rop == ReduceOp::mean) && op.ch->size >= 2 && (f32 || f64)) {
    reduce_doubling_order(out.raw(), data, op.ch->size, n, out.dtype(), op.rop);
    return out;
  }
  std::memcpy(out.raw(), data[0], out.nbytes());
  for (int r = 1; r < op.ch->size; ++r) accumulate(out.raw(), data[r], n, out.dtype(), op.rop);
  return out;
}

void Engine::post_agreed(const std::vector<OpPtr>& agreed, std::vector<Completion>& done) {
  bool coalesce = coalesce_.load();
  for (size_t i = 0; i < agreed.size();) {
    const OpPtr& op = agreed[i];
    size_t j = i + 1;
    if (coalesce && fusable(*op)) {
      int64_t bytes = op->x.nbytes();
      while (j < agreed.size() && fusable(*agreed[j]) && agreed[j]->x.dtype() == op->x.dtype() &&
             agreed[j]->rop == op->rop && bytes + agreed[j]->x.nbytes() <= kCoalesceCapBytes) {
        bytes += agreed[j]->x.nbytes();
        ++j;
      }
    }
    if (j - i >= 2) {
      auto group = std::make_shared<Op>();
      group->kind = Kind::coalesced;
      group->ch = op->ch;
      group->name = "all_reduce";
      group->rop = op->rop;
      group->members.assign(agreed.begin() + i, agreed.begin() + j);
      guarded(group, done, [&] { post_coalesced(group); });
    } else {
      guarded(op, done, [&] { post_data(op); });
    }
    i = j;
  }
}

void Engine::post_coalesced(const OpPtr& group) {
  DType dt = group->members[0]->x.dtype();
  int64_t n = 0;
  for (auto& m : group->members) n += m->x.size();
  Array in(dt, {n});
  group->out = Array(dt, {n});
  char* at = static_cast<char*>(in.raw());
  for (auto& m : group->members) {
    if (m->x.nbytes()) std::memcpy(at, m->x.raw(), m->x.nbytes());
    at += m->x.nbytes();
  }
  group->x = in;
  if (Algorithm a = algorithm_for(*group->ch, group->x); a != Algorithm::mpi) {
    post_own(group, a);
    return;
  }
  group->stage = Stage::data;
  group->reqs.assign(1, MPI_REQUEST_NULL);
  check(MPI_Iallreduce(in.raw(), group->out.raw(), checked_int(n, "all_reduce", "elements"),
                       mpi_type(dt), mpi_op(group->rop), group->ch->data_comm, &group->reqs[0]),
        "all_reduce", "MPI_Iallreduce");
  active_.push_back(group);
}

void Engine::post_own(const OpPtr& op, Algorithm a) {
  const Array& x = op->x;
  if (op->kind != Kind::coalesced) op->out = Array(x.dtype(), x.shape());  // a group's is made already
  op->stage = Stage::ring;
  op->tag = 1 + static_cast<int>(op->ch->ring_serial++ % 30000);
  op->steps = schedule(a, op->ch->rank, op->ch->size, x.size(), op->ch->host_of);
  op->step = 0;
  int64_t scratch = 0;  // the largest range a reducing step receives
  for (const Step& s : op->steps)
    if (s.reduce) scratch = std::max(scratch, s.recv_hi - s.recv_lo);
  if (scratch) op->ring_in.emplace(x.dtype(), Shape{scratch});
  post_step(op);
}

void Engine::post_step(const OpPtr& op) {
  const Channel& ch = *op->ch;
  const Step& s = op->steps[op->step];
  DType dt = op->x.dtype();
  int64_t width = static_cast<int64_t>(dtype_size(dt));
  char* out = static_cast<char*>(op->out.raw());
  op->reqs.assign(2, MPI_REQUEST_NULL);
  // Counted in elements, not bytes: a range may hold up to MPI's count
  // limit of them (as many as one MPI_Iallreduce of the whole array).
  if (s.recv_from >= 0) {
    char* into = s.reduce ? static_cast<char*>(op->ring_in->raw()) : out + s.recv_lo * width;
    check(MPI_Irecv(into, checked_int(s.recv_hi - s.recv_lo, op->name, "elements"), mpi_type(dt),
                    s.recv_from, op->tag, ch.data_comm, &op->reqs[0]),
          op->name, "MPI_Irecv");
  }
  if (s.send_to >= 0) {
    const char* from = s.send_from_x ? static_cast<const char*>(op->x.raw()) : out;
    check(MPI_Isend(from + s.send_lo * width,
                    checked_int(s.send_hi - s.send_lo, op->name, "elements"), mpi_type(dt),
                    s.send_to, op->tag, ch.data_comm, &op->reqs[1]),
          op->name, "MPI_Isend");
  }
  active_.push_back(op);
}

void Engine::advance_own(const OpPtr& op, std::vector<Completion>& done) {
  const Step& s = op->steps[op->step];
  if (s.reduce) {
    // result[range] = came OP mine (or mine OP came): reduced here once.
    DType dt = op->x.dtype();
    int64_t width = static_cast<int64_t>(dtype_size(dt)), count = s.recv_hi - s.recv_lo;
    char* acc = static_cast<char*>(op->out.raw()) + s.recv_lo * width;
    const char* mine =
        s.mine_from_x ? static_cast<const char*>(op->x.raw()) + s.recv_lo * width : acc;
    const char* came = static_cast<const char*>(op->ring_in->raw());
    if (s.came_left) combine(acc, came, mine, count, dt, op->rop);
    else combine(acc, mine, came, count, dt, op->rop);
  }
  if (++op->step < op->steps.size()) {
    post_step(op);
    return;
  }
  op->ring_in.reset();
  op->steps.clear();
  op->stage = Stage::data;
  advance(op, done);
}

}  // namespace tessera::distributed::detail
