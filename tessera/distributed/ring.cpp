// The communication engine's reductions: inline all-reduces reduced in rank
// order, coalescing, and the ring all-reduce (see engine.hpp).
#include "tessera/distributed/engine.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

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

Array Engine::reduce_in_rank_order(const Op& op, const char* const* data) const {
  Array out(op.x.dtype(), op.x.shape());
  int64_t n = out.size();
  if (n == 0) return out;
  // Sums of floats: (data[0] + data[1]) + data[2] ..., in one pass each.
  bool f32 = out.dtype() == DType::float32, f64 = out.dtype() == DType::float64;
  if (op.rop == ReduceOp::sum && op.ch->size >= 2 && (f32 || f64)) {
    sum_floats(out.raw(), data[1], data[0], n, f64);
    for (int r = 2; r < op.ch->size; ++r) sum_floats(out.raw(), data[r], nullptr, n, f64);
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
  if (use_ring(*group->ch, group->x)) {
    post_ring(group);
    return;
  }
  group->stage = Stage::data;
  group->reqs.assign(1, MPI_REQUEST_NULL);
  check(MPI_Iallreduce(in.raw(), group->out.raw(), checked_int(n, "all_reduce", "elements"),
                       mpi_type(dt), mpi_op(group->rop), group->ch->data_comm, &group->reqs[0]),
        "all_reduce", "MPI_Iallreduce");
  active_.push_back(group);
}

void Engine::post_ring(const OpPtr& op) {
  const Array& x = op->x;
  if (op->kind != Kind::coalesced) op->out = Array(x.dtype(), x.shape());  // a group's is made already
  op->stage = Stage::ring;
  op->ring_step = 0;
  op->tag = 1 + static_cast<int>(op->ch->ring_serial++ % 30000);
  op->chunk_at.assign(1, 0);
  for (int64_t c : split_counts(x.size(), op->ch->size))
    op->chunk_at.push_back(op->chunk_at.back() + c);
  op->ring_in.emplace(x.dtype(), Shape{op->chunk_at[1]});  // the first chunk is the largest
  post_ring_step(op);
}

std::pair<int, int> Engine::ring_chunks(const Channel& ch, int step) {
  int s = step < ch.size - 1 ? step : step - (ch.size - 1);
  int shift = step < ch.size - 1 ? 0 : 1;  // the all-gather passes the chunk reduced last
  int send = ((ch.rank - s + shift) % ch.size + ch.size) % ch.size;
  int recv = ((ch.rank - s - 1 + shift) % ch.size + ch.size) % ch.size;
  return {send, recv};
}

void Engine::post_ring_step(const OpPtr& op) {
  const Channel& ch = *op->ch;
  auto [send, recv] = ring_chunks(ch, op->ring_step);
  DType dt = op->x.dtype();
  int64_t width = static_cast<int64_t>(dtype_size(dt));
  char* out = static_cast<char*>(op->out.raw());
  int right = (ch.rank + 1) % ch.size, left = (ch.rank - 1 + ch.size) % ch.size;
  // Counted in elements, not bytes: a chunk may hold up to MPI's count
  // limit of them (as many as one MPI_Iallreduce of the whole array).
  int64_t recv_count = op->chunk_at[recv + 1] - op->chunk_at[recv];
  int64_t send_count = op->chunk_at[send + 1] - op->chunk_at[send];
  // The reduce-scatter receives beside the result and reduces into it (its
  // first step sends this rank's own chunk of x: the result holds only
  // reduced chunks); the all-gather receives in place.
  char* into = out + op->chunk_at[recv] * width;
  if (op->ring_step < ch.size - 1) into = static_cast<char*>(op->ring_in->raw());
  const char* from = op->ring_step == 0 ? static_cast<const char*>(op->x.raw()) : out;
  op->reqs.assign(2, MPI_REQUEST_NULL);
  check(MPI_Irecv(into, checked_int(recv_count, op->name, "elements"), mpi_type(dt), left, op->tag,
                  ch.data_comm, &op->reqs[0]),
        op->name, "MPI_Irecv");
  check(MPI_Isend(from + op->chunk_at[send] * width, checked_int(send_count, op->name, "elements"),
                  mpi_type(dt), right, op->tag, ch.data_comm, &op->reqs[1]),
        op->name, "MPI_Isend");
  active_.push_back(op);
}

void Engine::advance_ring(const OpPtr& op, std::vector<Completion>& done) {
  if (op->ring_step < op->ch->size - 1) {
    // The chunk received is reduced here for the first and only time: its
    // base is this rank's contribution (x), and then the result holds it.
    int c = ring_chunks(*op->ch, op->ring_step).second;
    DType dt = op->x.dtype();
    int64_t width = static_cast<int64_t>(dtype_size(dt)), count = op->chunk_at[c + 1] - op->chunk_at[c];
    char* acc = static_cast<char*>(op->out.raw()) + op->chunk_at[c] * width;
    const char* mine = static_cast<const char*>(op->x.raw()) + op->chunk_at[c] * width;
    const char* came = static_cast<const char*>(op->ring_in->raw());
    if (op->rop == ReduceOp::sum && (dt == DType::float32 || dt == DType::float64)) {
      sum_floats(acc, came, mine, count, dt == DType::float64);  // acc = mine + came in one pass
    } else {
      if (count) std::memcpy(acc, mine, static_cast<size_t>(count * width));
      accumulate(acc, came, count, dt, op->rop);
    }
  }
  if (++op->ring_step < 2 * (op->ch->size - 1)) {
    post_ring_step(op);
    return;
  }
  op->ring_in.reset();
  op->stage = Stage::data;
  advance(op, done);
}

}  // namespace tessera::distributed::detail
