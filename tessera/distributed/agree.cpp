// The cached agreement of the communication engine (engine.hpp): once the
// members of a channel have offered the same entries in a round, the next
// round agrees by an all-reduce (the engine's recursive doubling) of a
// 40-byte fingerprint instead of all-gathering every rank's offer, and falls
// back to the full exchange (resolve) only when the fingerprints differ.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "tessera/distributed/algorithms.hpp"
#include "tessera/distributed/engine.hpp"

namespace tessera::distributed::detail {

namespace {

// A 64-bit hash of the offer's header and entries, a word at a time
// (splitmix64's finalizer per word).
uint64_t mix(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

uint64_t fingerprint(const char* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return mix(h ^ tail ^ (uint64_t{n - i} << 56));
}

// What a rank whose program has ended offers: never the fingerprint of an
// offer (the header of one says it has not finished).
constexpr uint64_t kFinishedFingerprint = 0x66696e6973686564ull;

uint64_t value_kind(DType dt, ReduceOp rop, int64_t count) {
  return 1 | uint64_t{static_cast<uint8_t>(dt)} << 8 | uint64_t{static_cast<uint8_t>(rop)} << 16 |
         static_cast<uint64_t>(count) << 24;
}

template <class T>
void combine(unsigned char* acc, const unsigned char* in, int64_t n, ReduceOp rop) {
  for (int64_t i = 0; i < n; ++i) {
    T a, v;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      a = rop == ReduceOp::min ? (a && v) : (a || v);
    } else if (rop == ReduceOp::max) {
      a = a < v || v != v ? v : a;  // NaN propagates
    } else if (rop == ReduceOp::min) {
      a = v < a || v != v ? v : a;
    } else {
      a += v;
    }
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

// left OP right of two ranks' CachedAgreement (left: the lower ranks'):
// the fingerprints' maxima, and the values reduced, left + right, when both
// carry the same kind (a hit: every member does). The order of the values
// is that of recursive doubling (algorithms.hpp: reduce_doubling_order), the
// same as the full round's.
CachedAgreement merged(const CachedAgreement& left, const CachedAgreement& right) {
  CachedAgreement out = left;
  if (left.kind == right.kind && left.kind != 0) {
    auto dt = static_cast<DType>((left.kind >> 8) & 0xff);
    auto rop = static_cast<ReduceOp>((left.kind >> 16) & 0xff);
    auto n = static_cast<int64_t>(left.kind >> 24);
    switch (dt) {
      case DType::float32: combine<float>(out.value, right.value, n, rop); break;
      case DType::float64: combine<double>(out.value, right.value, n, rop); break;
      case DType::int64: combine<int64_t>(out.value, right.value, n, rop); break;
      default: combine<bool>(out.value, right.value, n, rop); break;
    }
  } else {
    out.kind = std::max(left.kind, right.kind);
  }
  out.high = std::max(left.high, right.high);
  out.low_not = std::max(left.low_not, right.low_not);
  return out;
}

// Whether op's data rides in a cached round's message (a lone small
// all-reduce carried inline).
bool carried(const Op& op) {
  int64_t n = op.x.nbytes();
  return op.kind == Kind::all_reduce && op.inline_now && n > 0 && n <= kCachedValueBytes;
}

}  // namespace

bool Engine::order_sensitive(const Channel& ch) {
  if (ch.size < 3) return false;  // a + b is b + a, bitwise
  // A lone small sum rides in the cached round's message and is reduced
  // there in the order of recursive doubling, as the full round reduces it.
  if (ch.offered.size() == 1 && carried(*ch.offered.front())) return false;
  for (const OpPtr& op : ch.offered) {
    DType dt = op->x.dtype();
    if (op->inline_now && (dt == DType::float32 || dt == DType::float64) &&
        (op->rop == ReduceOp::sum || op->rop == ReduceOp::mean)) {
      return true;
    }
  }
  return false;
}

void Engine::start_cached(Channel& ch, const char* offer, size_t offer_bytes, bool finished) {
  CachedAgreement& mine = ch.cached_mine;
  mine = CachedAgreement();
  // Inline sums of floats among 3 or more ranks that the message cannot
  // carry (several, or more than kCachedValueBytes) would run as an
  // all-reduce of their own, in another order than the full round's: a
  // fingerprint of this rank alone makes the round miss, and the full
  // exchange carries the data.
  uint64_t f = finished           ? kFinishedFingerprint
               : order_sensitive(ch) ? mix(0x6d697373ull + static_cast<uint64_t>(ch.rank))
                                   : fingerprint(offer, offer_bytes);
  mine.high = f;
  mine.low_not = ~f;
  if (!finished && ch.offered.size() == 1 && carried(*ch.offered.front())) {
    const Op& op = *ch.offered.front();
    mine.kind = value_kind(op.x.dtype(), op.rop, op.x.size());
    std::memcpy(mine.value, op.x.raw(), op.x.nbytes());
  }
  // The engine's own recursive doubling (algorithms.hpp) of one
  // CachedAgreement over point-to-point messages on agree_comm, which
  // carries nothing else: ⌈log2 N⌉ messages of 40 bytes (one more on the
  // ranks of a non-power-of-two's fold), reduced in a fixed order.
  ch.cached_all = mine;
  ch.cached_steps = schedule(Algorithm::doubling, ch.rank, ch.size, 1);
  ch.cached_step = 0;
  ch.cached_active = true;
  end_speculation(ch);
  if (!finished) start_speculation(ch);
  post_cached_step(ch);
}

void Engine::start_speculation(Channel& ch) {
  end_speculation(ch);
  // The first all-reduce offered that runs by halving or doubling (on a hit
  // it runs alone, never coalesced with the others agreed: progress_cached).
  // With coalescing off a round runs only the first it agrees on: then only
  // a lone one.
  if (ch.offered.size() != 1 && !coalesce_.load()) return;
  OpPtr op;
  Algorithm a = Algorithm::mpi;
  for (const OpPtr& o : ch.offered) {
    if (o->kind != Kind::all_reduce || o->inline_now || o->x.size() == 0) continue;
    a = algorithm_for(ch, o->x);
    if (a == Algorithm::halving || a == Algorithm::doubling) {
      op = o;
      break;
    }
  }
  if (!op) return;
  // Every step of the round but the fold's return (ranks below 2r) is a
  // step of the algorithm with the same partner: its data rides along.
  std::vector<Step> steps = schedule(a, ch.rank, ch.size, op->x.size());
  int p = 1;
  while (p * 2 <= ch.size) p *= 2;
  size_t carried = ch.cached_steps.size() - (ch.rank < 2 * (ch.size - p) ? 1 : 0);
  if (carried > steps.size()) return;
  int64_t scratch = 0;
  for (size_t i = 0; i < carried; ++i) {
    const Step& c = ch.cached_steps[i];
    const Step& d = steps[i];
    if (c.send_to != d.send_to || c.recv_from != d.recv_from) return;
  }
  for (const Step& d : steps)
    if (d.reduce) scratch = std::max(scratch, d.recv_hi - d.recv_lo);
  ch.spec = op;
  ch.spec_steps = std::move(steps);
  ch.spec_carried = carried;
  ch.spec_broken = false;
  ch.spec_out = Array(op->x.dtype(), op->x.shape());
  if (scratch) ch.spec_in.emplace(op->x.dtype(), Shape{scratch});
}

void Engine::end_speculation(Channel& ch) {
  ch.spec.reset();
  ch.spec_steps.clear();
  ch.spec_carried = 0;
  ch.spec_broken = false;
  ch.spec_out = no_array();
  ch.spec_in.reset();
}

namespace {

// One message of `head`'s 40 bytes followed by `count` elements of `dt` at
// `data` (absolute addresses: used with MPI_BOTTOM), without copying.
MPI_Datatype head_and_data(const void* head, const void* data, int count, MPI_Datatype dt) {
  MPI_Aint at[2];
  MPI_Get_address(head, &at[0]);
  MPI_Get_address(data, &at[1]);
  int lengths[2] = {static_cast<int>(sizeof(CachedAgreement)), count};
  MPI_Datatype types[2] = {MPI_BYTE, dt};
  MPI_Datatype t;
  MPI_Type_create_struct(2, lengths, at, types, &t);
  MPI_Type_commit(&t);
  return t;
}

}  // namespace

void Engine::post_cached_step(Channel& ch) {
  const Step& s = ch.cached_steps[ch.cached_step];
  // One tag for every step: two ranks exchange at most one message each
  // way per round, and MPI does not overtake on one tag, so messages of
  // consecutive rounds match in order. The receive is posted once the
  // message is probed (advance_cached): its size depends on what the
  // sender offered.
  const int tag = 0;
  ch.cached_reqs[0] = ch.cached_reqs[1] = MPI_REQUEST_NULL;
  ch.cached_matched = s.recv_from < 0;
  ch.cached_odd_used = false;
  if (s.send_to >= 0) {
    const CachedAgreement* from = s.send_from_x ? &ch.cached_mine : &ch.cached_all;
    if (ch.spec && ch.cached_step < ch.spec_carried) {
      const Step& d = ch.spec_steps[ch.cached_step];
      const Op& op = *ch.spec;
      int64_t width = static_cast<int64_t>(dtype_size(op.x.dtype()));
      const char* data = d.send_from_x ? static_cast<const char*>(op.x.raw())
                                       : static_cast<const char*>(ch.spec_out.raw());
      MPI_Datatype t = head_and_data(from, data + d.send_lo * width,
                                     checked_int(d.send_hi - d.send_lo, op.name, "elements"),
                                     mpi_type(op.x.dtype()));
      int rc = MPI_Isend(MPI_BOTTOM, 1, t, s.send_to, tag, ch.agree_comm, &ch.cached_reqs[1]);
      MPI_Type_free(&t);
      check(rc, "collective", "MPI_Isend");
    } else {
      check(MPI_Isend(from, sizeof(CachedAgreement), MPI_BYTE, s.send_to, tag, ch.agree_comm,
                      &ch.cached_reqs[1]),
            "collective", "MPI_Isend");
    }
  }
}

bool Engine::advance_cached(Channel& ch) {
  while (ch.cached_step < ch.cached_steps.size()) {
    const Step& s = ch.cached_steps[ch.cached_step];
    if (!ch.cached_matched) {
      int flag = 0;
      MPI_Status st;
      check(MPI_Improbe(s.recv_from, 0, ch.agree_comm, &flag, &ch.cached_msg, &st), "collective",
            "MPI_Improbe");
      if (!flag) return false;
      int bytes = 0;
      check(MPI_Get_count(&st, MPI_BYTE, &bytes), "collective", "MPI_Get_count");
      void* head = s.reduce ? &ch.cached_in : &ch.cached_all;
      bool carries = ch.spec && ch.cached_step < ch.spec_carried && !ch.spec_broken;
      const Step* d = carries ? &ch.spec_steps[ch.cached_step] : nullptr;
      int64_t width = ch.spec ? static_cast<int64_t>(dtype_size(ch.spec->x.dtype())) : 0;
      int64_t want = static_cast<int64_t>(sizeof(CachedAgreement)) +
                     (d ? (d->recv_hi - d->recv_lo) * width : 0);
      if (bytes == want && d) {
        char* into = d->reduce ? static_cast<char*>(ch.spec_in->raw())
                               : static_cast<char*>(ch.spec_out.raw()) + d->recv_lo * width;
        MPI_Datatype t = head_and_data(head, into, static_cast<int>(d->recv_hi - d->recv_lo),
                                       mpi_type(ch.spec->x.dtype()));
        int rc = MPI_Imrecv(MPI_BOTTOM, 1, t, &ch.cached_msg, &ch.cached_reqs[0]);
        MPI_Type_free(&t);
        check(rc, "collective", "MPI_Imrecv");
      } else if (bytes == static_cast<int>(sizeof(CachedAgreement))) {
        if (d) ch.spec_broken = true;
        check(MPI_Imrecv(head, bytes, MPI_BYTE, &ch.cached_msg, &ch.cached_reqs[0]), "collective",
              "MPI_Imrecv");
      } else if (bytes > static_cast<int>(sizeof(CachedAgreement))) {
        // A member that offered something else speculated with other data:
        // only its 40 bytes count (the round misses).
        if (ch.spec && ch.cached_step < ch.spec_carried) ch.spec_broken = true;
        ch.cached_odd.reset(static_cast<size_t>(bytes));
        ch.cached_odd_used = true;
        check(MPI_Imrecv(ch.cached_odd.data(), bytes, MPI_BYTE, &ch.cached_msg, &ch.cached_reqs[0]),
              "collective", "MPI_Imrecv");
      } else {
        throw std::runtime_error(error_message(
            "[collective] agreement round on rank ", rank_, ": a message of ", bytes,
            " bytes from rank ", ch.world_rank(s.recv_from), ", expected at least ",
            sizeof(CachedAgreement)));
      }
      ch.cached_matched = true;
    }
    int flag = 0;
    check(MPI_Testall(2, ch.cached_reqs, &flag, MPI_STATUSES_IGNORE), "collective", "MPI_Testall");
    if (!flag) return false;
    if (ch.cached_odd_used) {
      std::memcpy(s.reduce ? &ch.cached_in : &ch.cached_all, ch.cached_odd.data(),
                  sizeof(CachedAgreement));
    }
    if (s.reduce) {
      const CachedAgreement& own = s.mine_from_x ? ch.cached_mine : ch.cached_all;
      ch.cached_all = s.came_left ? merged(ch.cached_in, own) : merged(own, ch.cached_in);
    }
    if (ch.spec && ch.cached_step < ch.spec_carried && !ch.spec_broken)
      reduce_speculated(ch, ch.spec_steps[ch.cached_step]);
    if (++ch.cached_step < ch.cached_steps.size()) post_cached_step(ch);
  }
  ch.cached_active = false;
  return true;
}

void Engine::reduce_speculated(Channel& ch, const Step& d) {
  if (!d.reduce || d.recv_from < 0) return;
  // As advance_own: result[range] = came OP mine (or mine OP came).
  const Op& op = *ch.spec;
  DType dt = op.x.dtype();
  int64_t width = static_cast<int64_t>(dtype_size(dt)), count = d.recv_hi - d.recv_lo;
  char* acc = static_cast<char*>(ch.spec_out.raw()) + d.recv_lo * width;
  const char* mine = d.mine_from_x ? static_cast<const char*>(op.x.raw()) + d.recv_lo * width : acc;
  const char* came = static_cast<const char*>(ch.spec_in->raw());
  if (d.came_left) combine(acc, came, mine, count, dt, op.rop);
  else combine(acc, mine, came, count, dt, op.rop);
}

bool Engine::progress_cached(Channel& ch, std::vector<Completion>& done) {
  if (!advance_cached(ch)) return false;
  if (!ch.cached_all.hit()) {
    // Some member offered something else: the full exchange of the same
    // block says what (and gives the precise errors); what was reduced
    // speculatively is dropped.
    end_speculation(ch);
    ch.try_cached = false;
    ch.round.start(ch.round_comm, ch.rank, ch.size);
    if (ch.round.progress()) resolve(ch, done);
    return true;
  }
  // Every member offered exactly these entries (same sites, keys,
  // fingerprints and extents): all of them run, in the order resolve gives.
  ch.expected.clear();
  std::vector<OpPtr>& agreed = ch.agreed;
  agreed.assign(ch.offered.begin(), ch.offered.end());
  ch.offered.clear();
  std::sort(agreed.begin(), agreed.end(), [](const OpPtr& a, const OpPtr& b) {
    return std::tie(a->entry.key, a->entry.site) < std::tie(b->entry.key, b->entry.site);
  });
  if (!coalesce_.load() && agreed.size() > 1) agreed.resize(1);
  size_t count = agreed.size();
  for (const OpPtr& op : agreed) {
    ch.pending.erase(op->seq);
    bool extents = op->kind == Kind::all_gather || op->kind == Kind::gather ||
                   op->kind == Kind::all_to_all;
    if (extents) op->extents.assign(ch.size, op->entry.extent);
  }
  if (ch.cached_all.kind != 0) {
    const OpPtr& op = agreed.front();
    Array out(op->x.dtype(), op->x.shape());
    std::memcpy(out.raw(), ch.cached_all.value, out.nbytes());
    done.push_back({op->promise, Value(std::move(out)), nullptr});
    agreed.clear();
  }
  if (debug_rounds_) {
    std::fprintf(stderr, "[rank %d] cached round: agreed %zu, pending %zu%s\n", rank_, count,
                 ch.pending.size(), ch.spec ? " (speculated)" : "");
  }
  if (ch.spec) {
    // A hit: every member offered these operations and speculated alike on
    // the same all-reduce, which goes on first (its tag first), then the rest.
    OpPtr op = ch.spec;
    agreed.erase(std::remove(agreed.begin(), agreed.end(), op), agreed.end());
    guarded(op, done, [&] { continue_speculated(ch, op, done); });
    end_speculation(ch);
  }
  post_agreed(agreed, done);
  agreed.clear();
  return count > 0;
}

void Engine::continue_speculated(Channel& ch, const OpPtr& op, std::vector<Completion>& done) {
  if (ch.spec_broken) {
    throw std::runtime_error(error_message(
        "[", op->name, "] rank ", rank_, ": the agreement round hit but a member's message "
        "carried no data for ", op->desc()));
  }
  op->out = ch.spec_out;
  if (ch.spec_in) op->ring_in.emplace(*ch.spec_in);
  op->stage = Stage::ring;
  op->tag = 1 + static_cast<int>(ch.ring_serial++ % 30000);
  op->steps = std::move(ch.spec_steps);
  op->step = ch.spec_carried;
  if (op->step < op->steps.size()) {
    post_step(op);
    return;
  }
  op->ring_in.reset();
  op->steps.clear();
  op->stage = Stage::data;
  advance(op, done);
}

bool Engine::offers_identical(const Channel& ch) {
  const Offer& mine = ch.offers[ch.rank];
  if (mine.finished || mine.entries.empty()) return false;
  for (const Offer& o : ch.offers) {
    if (o.finished || o.entries.size() != mine.entries.size() ||
        std::memcmp(o.entries.data(), mine.entries.data(), sizeof(Entry) * o.entries.size()) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace tessera::distributed::detail
