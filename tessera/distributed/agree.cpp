// The cached agreement of the communication engine (engine.hpp): once the
// members of a channel have offered the same entries in a round, the next
// round agrees by an all-reduce of a 40-byte fingerprint instead of
// all-gathering every rank's offer, and falls back to the full exchange
// (resolve) only when the fingerprints differ.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

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

// The all-reduce's operation: the fingerprints' maxima, and the values
// reduced when both sides carry the same kind (a hit: every member does).
void combine_cached(void* in, void* inout, int* len, MPI_Datatype*) {
  for (int k = 0; k < *len; ++k) {
    CachedAgreement a, b;
    std::memcpy(&a, static_cast<const char*>(in) + k * sizeof a, sizeof a);
    std::memcpy(&b, static_cast<const char*>(inout) + k * sizeof b, sizeof b);
    if (a.kind == b.kind && b.kind != 0) {
      auto dt = static_cast<DType>((b.kind >> 8) & 0xff);
      auto rop = static_cast<ReduceOp>((b.kind >> 16) & 0xff);
      auto n = static_cast<int64_t>(b.kind >> 24);
      switch (dt) {
        case DType::float32: combine<float>(b.value, a.value, n, rop); break;
        case DType::float64: combine<double>(b.value, a.value, n, rop); break;
        case DType::int64: combine<int64_t>(b.value, a.value, n, rop); break;
        default: combine<bool>(b.value, a.value, n, rop); break;
      }
    } else {
      b.kind = std::max(a.kind, b.kind);
    }
    b.high = std::max(a.high, b.high);
    b.low_not = std::max(a.low_not, b.low_not);
    std::memcpy(static_cast<char*>(inout) + k * sizeof b, &b, sizeof b);
  }
}

}  // namespace

void Engine::make_cached_type() {
  MPI_Type_contiguous(sizeof(CachedAgreement), MPI_BYTE, &cached_type_);
  MPI_Type_commit(&cached_type_);
  MPI_Op_create(&combine_cached, /*commute=*/1, &cached_op_);
}

bool Engine::order_sensitive(const Channel& ch) {
  if (ch.size < 3) return false;  // a + b is b + a, bitwise
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
  // An inline sum of floats among 3 or more ranks is summed in rank order
  // (bitwise (x0 + x1) + x2 ...), which an all-reduce cannot promise: a
  // fingerprint of this rank alone makes the round miss, and the full
  // exchange carries the data.
  uint64_t f = finished           ? kFinishedFingerprint
               : order_sensitive(ch) ? mix(0x6d697373ull + static_cast<uint64_t>(ch.rank))
                                   : fingerprint(offer, offer_bytes);
  mine.high = f;
  mine.low_not = ~f;
  if (!finished && ch.offered.size() == 1 && !order_sensitive(ch)) {
    const Op& op = *ch.offered.front();
    int64_t n = op.x.nbytes();
    if (op.kind == Kind::all_reduce && op.inline_now && n > 0 && n <= kCachedValueBytes) {
      mine.kind = value_kind(op.x.dtype(), op.rop, op.x.size());
      std::memcpy(mine.value, op.x.raw(), n);
    }
  }
  check(MPI_Iallreduce(&ch.cached_mine, &ch.cached_all, 1, cached_type_, cached_op_, ch.agree_comm,
                       &ch.cached_req),
        "collective", "MPI_Iallreduce");
  ch.cached_active = true;
}

bool Engine::progress_cached(Channel& ch, std::vector<Completion>& done) {
  int flag = 0;
  check(MPI_Test(&ch.cached_req, &flag, MPI_STATUS_IGNORE), "collective", "MPI_Test");
  if (!flag) return false;
  ch.cached_active = false;
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
