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
  post_cached_step(ch);
}

void Engine::post_cached_step(Channel& ch) {
  const Step& s = ch.cached_steps[ch.cached_step];
  // One tag for every step: two ranks exchange at most one message each
  // way per round, and MPI does not overtake on one tag, so messages of
  // consecutive rounds match in order.
  const int tag = 0;
  ch.cached_reqs[0] = ch.cached_reqs[1] = MPI_REQUEST_NULL;
  if (s.recv_from >= 0) {
    void* into = s.reduce ? &ch.cached_in : &ch.cached_all;
    check(MPI_Irecv(into, sizeof(CachedAgreement), MPI_BYTE, s.recv_from, tag, ch.agree_comm,
                    &ch.cached_reqs[0]),
          "collective", "MPI_Irecv");
  }
  if (s.send_to >= 0) {
    const CachedAgreement* from = s.send_from_x ? &ch.cached_mine : &ch.cached_all;
    check(MPI_Isend(from, sizeof(CachedAgreement), MPI_BYTE, s.send_to, tag, ch.agree_comm,
                    &ch.cached_reqs[1]),
          "collective", "MPI_Isend");
  }
}

bool Engine::advance_cached(Channel& ch) {
  while (ch.cached_step < ch.cached_steps.size()) {
    int flag = 0;
    check(MPI_Testall(2, ch.cached_reqs, &flag, MPI_STATUSES_IGNORE), "collective", "MPI_Testall");
    if (!flag) return false;
    const Step& s = ch.cached_steps[ch.cached_step];
    if (s.reduce) {
      const CachedAgreement& own = s.mine_from_x ? ch.cached_mine : ch.cached_all;
      ch.cached_all = s.came_left ? merged(ch.cached_in, own) : merged(own, ch.cached_in);
    }
    if (++ch.cached_step < ch.cached_steps.size()) post_cached_step(ch);
  }
  ch.cached_active = false;
  return true;
}

bool Engine::progress_cached(Channel& ch, std::vector<Completion>& done) {
  if (!advance_cached(ch)) return false;
  if (!ch.cached_all.hit()) {
    // Some member offered something else: the full exchange of the same
    // block says what (and gives the precise errors).
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
    std::fprintf(stderr, "[rank %d] cached round: agreed %zu, pending %zu\n", rank_, count,
                 ch.pending.size());
  }
  post_agreed(agreed, done);
  agreed.clear();
  return count > 0;
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
