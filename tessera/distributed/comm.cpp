#include "tessera/distributed/comm.hpp"

#include <mpi.h>

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "tessera/core/error.hpp"
#include "tessera/distributed/round.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::distributed {

ReduceOp parse_reduce_op(const std::string& name, const char* op) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "mean") return ReduceOp::mean;
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  throw std::invalid_argument(error_message("[", op, "] argument 'op' must be 'sum', 'mean', 'max' or 'min', got '",
                                            name, "'"));
}

namespace detail {

bool started_by_mpirun() {
  // Asked by every collective: the environment is read once.
  static const bool started = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
  return started;
}

double collective_timeout_seconds() {
  static const double seconds = [] {
    const char* s = std::getenv("TESSERA_COLLECTIVE_TIMEOUT");
    if (!s || !*s) return 300.0;
    double v = std::atof(s);
    return v > 0 ? v : 300.0;
  }();
  return seconds;
}

int64_t row_bytes(DType dt, const Shape& shape) {
  int64_t n = static_cast<int64_t>(dtype_size(dt));
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

int internal_tag(const std::string& op, const std::string& site, uint64_t seq) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string* part : {&op, &site}) {
    for (unsigned char c : *part) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= '|';
    h *= 1099511628211ull;
  }
  h += seq * 0x9E3779B97F4A7C15ull;
  return 32768 + static_cast<int>(h % (uint64_t{1} << 22));
}

std::vector<int64_t> split_counts(int64_t rows, int parts) {
  std::vector<int64_t> out(parts, rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) ++out[i];
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

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

constexpr int kMaxDims = 8;
constexpr int kDescBytes = 256;
// Operations a rank offers per agreement round at most (see Engine): all
// it has pending, oldest first, so that ranks' offers overlap whatever order
// concurrent tasks issued them in.
constexpr int kRoundEntries = 4096;
// Small all-reduces travel inside the agreement round itself and are
// reduced by every rank in rank order: one message exchange, and the same
// bits on every rank however the operations were grouped. Between 2 ranks
// an all-reduce of up to kInlineBudget bytes does, up to that much per rank
// and round: the offer then still fits the round's posted receive and goes
// eagerly (64 KiB: measured 1.1-1.5x a raw MPI_Allreduce, against 4x as a
// round and then an MPI_Iallreduce). With more ranks the budget halves per
// exchange of the round after the first, as the last exchange carries the
// offers of half the ranks (Engine::inline_budget_).
constexpr int64_t kInlineBudget = int64_t{64} << 10;
// All-reduces of at most this many bytes may be coalesced, up to this many
// bytes per coalesced message (the size of the gradient buckets of fit).
constexpr int64_t kCoalesceMaxBytes = int64_t{64} << 10;
// All-reduces (and coalesced groups) of at least this many bytes run as the
// engine's own ring (Engine::post_ring) instead of MPI_Iallreduce, whose
// schedule took 1.3-2.4x a blocking MPI_Allreduce from 256 KiB to 16 MiB on
// this machine, where the ring took 0.9-1.2x (and 0.7x at 64 MiB)
// (TESSERA_RING=0 turns it off: the same on every rank).
constexpr int64_t kRingMinBytes = int64_t{128} << 10;
constexpr int64_t kCoalesceCapBytes = int64_t{4} << 20;

enum class Kind { all_reduce, broadcast, all_gather, reduce_scatter, gather, scatter, all_to_all,
                  barrier, send, recv, coalesced };

enum class Stage { pending, root_meta, data, diag, header, ring };

struct Op;
using OpPtr = std::shared_ptr<Op>;

// What an operation's arrays hold until set: a shared 0-d array (a default
// Array allocates, and an operation is made per collective).
const Array& no_array() {
  static const Array* a = new Array();
  return *a;
}

struct Op {
  Kind kind;
  const char* name = "";
  std::string what, site;
  Entry entry;
  uint64_t seq = 0;  // order of submission on this rank
  bool offered = false;  // in an earlier agreement round
  bool inline_now = false;  // its data travels in the round being built
  bool has_x = false;
  Array x = no_array();
  ReduceOp rop = ReduceOp::sum;
  int root = 0, peer = 0, tag = 0, free_axis = -1;
  Promise<Value> promise;
  Clock::time_point start = Clock::now();

  // Progress state.
  Stage stage = Stage::pending;
  std::vector<int64_t> extents;  // every rank's extent along the free axis
  std::vector<char> diag_send, diag_recv, recv_bytes;
  Array out = no_array();
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  int64_t header[2 + kMaxDims] = {};
  std::vector<MPI_Request> reqs;
  std::vector<OpPtr> members;  // of a coalesced all-reduce
  // A ring all-reduce's step and where its chunks start (elements; one
  // more entry: the end) (Engine::post_ring).
  int ring_step = 0;
  std::vector<int64_t> chunk_at;
  std::optional<Array> ring_in;  // where the reduce-scatter receives (a chunk)

  bool collective() const { return kind != Kind::send && kind != Kind::recv; }
  // "all_reduce(sum) float32 (1024,) at train.py:12:5" (built for messages only).
  std::string desc() const {
    std::string d = what;
    if (has_x) d += error_message(" ", dtype_name(x.dtype()), " ", shape_str(x.shape()));
    if (!site.empty()) d += " at " + site;
    return d;
  }
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) { return fnv1a(s.data(), s.size(), h); }

// fnv1a's step on 8 bytes at a time, with the length first: a fingerprint
// made per collective (a fifth of the cost of fnv1a's byte loop). Each step
// is a bijection of the state for a given word, so two inputs of one length
// that differ in one word always hash apart. Compared only between ranks
// running one build.
uint64_t hash_words(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  constexpr uint64_t kPrime = 1099511628211ull;
  const char* p = static_cast<const char*>(data);
  h = (h ^ n) * kPrime;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kPrime;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kPrime;
  }
  return h;
}
uint64_t hash_words(const std::string& s, uint64_t h = 1469598103934665603ull) {
  return hash_words(s.data(), s.size(), h);
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::int64: return MPI_INT64_T;
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    default: return MPI_C_BOOL;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    default: return MPI_SUM;
  }
}

// An MPI count or displacement (`unit`: what it counts), which must fit an int.
int checked_int(int64_t v, const char* op, const char* unit = "bytes") {
  if (v > 2147483647) {
    throw std::invalid_argument(error_message("[", op, "] message of ", v, " ", unit,
                                              " is larger than MPI's count limit of 2147483647"));
  }
  return static_cast<int>(v);
}


// What this process runs: its command line and a hash of it and of the
// program files it names (.py, .tsl), to tell ranks running different
// programs apart.
std::pair<uint64_t, std::string> program_identity() {
  std::string cmdline;
  if (FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    cmdline.assign(buf, n);
  }
  uint64_t h = fnv1a(cmdline);
  std::string shown;
  size_t at = 0;
  while (at < cmdline.size()) {
    std::string arg(cmdline.c_str() + at);
    at += arg.size() + 1;
    shown += (shown.empty() ? "" : " ") + arg;
    bool program = arg.size() > 3 && (arg.ends_with(".py") || arg.ends_with(".tsl"));
    if (!program) continue;
    if (FILE* f = std::fopen(arg.c_str(), "rb")) {
      char buf[65536];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) h = fnv1a(buf, n, h);
      std::fclose(f);
    }
  }
  return {h, shown};
}

// A trace records the operation from submission to completion (the bytes
// are those sent, or received for recv).
void trace_op(const Op& op, const Future<Value>& f) {
  trace::Event e;
  e.kind = trace::EventKind::comm;
  e.t0 = trace::now_ns();
  e.what = trace::intern(op.what);
  e.where = trace::intern(op.site);
  e.amount = op.x.nbytes();
  e.peer = op.collective() ? -1 : op.peer;
  f.on_ready([e, f]() mutable {
    e.t1 = trace::now_ns();
    if (e.amount == 0 && !f.error() && f.get().is_array()) e.amount = f.get().as_array().nbytes();
    trace::record(e);
  });
}

// The communication engine. Every collective is identified by its call site
// and that site's sequence number (ranks issue the collectives of one site in
// the same order: SPMD). Ranks agree on what to run in rounds: in each round
// every rank offers its pending operations (oldest first, up to
// kRoundEntries) with their fingerprints, gathered by every rank
// (BlockGather); what every rank offered runs, in an order all ranks derive
// from the same data; an operation offered with different fingerprints fails
// on every rank with a message naming each rank's side. Small all-reduces
// carry their data in the round and are reduced there; other small
// all-reduces agreed in one round are coalesced into one message. One round
// is in flight at a time; a rank with nothing pending posts none, so rounds
// match up one to one, and a rank whose program has ended says so in a last
// round (finish).
//
// Any thread may drive progress (one at a time): a thread that submits an
// operation posts it at once, and a thread waiting at the outermost boundary
// polls for a while (Future::wait). The progress thread polls whenever
// operations are in flight and nobody else does, so they advance while tasks
// compute. Results are handed to workers when the progress thread completes
// them; a waiting thread completes them itself.
class Engine {
 public:
  static Engine& get() {
    // Never destroyed: the engine is stopped by an atexit handler.
    static Engine* engine = new Engine();
    return *engine;
  }

  std::pair<int, int> world() {
    // Every collective asks: after start-up, no lock.
    if (ready_.load(std::memory_order_acquire)) return {rank_, size_};
    std::unique_lock lock(in_mu_);
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { run(); });
      std::atexit([] { Engine::get().stop(); });
    }
    cv_.wait(lock, [&] { return init_done_; });
    if (!init_error_.empty()) throw std::runtime_error(init_error_);
    return {rank_, size_};
  }

  Future<Value> submit(OpPtr op) {
    world();
    Future<Value> f = op->promise.get_future();
    if (trace::on()) trace_op(*op, f);
    {
      std::lock_guard lock(in_mu_);
      if (!broken_.empty()) {
        op->promise.set_error(std::make_exception_ptr(std::runtime_error(error_message(
            "[", op->name, "] the communication engine of rank ", rank_, " stopped after an earlier error: ",
            broken_))));
        return f;
      }
      if (op->collective()) op->entry.key = next_key_[op->entry.site]++;
      incoming_.push_back(std::move(op));
      work_.store(true, std::memory_order_release);
    }
    // Post it now instead of waiting for the progress thread to wake. The
    // caller may be inside a node's evaluation: results completed on the way
    // go to workers rather than running the program's continuations here.
    help(/*complete_here=*/false);
    // Only a worker wakes the progress thread: a thread that is not one runs
    // the program at the boundary and polls when it waits there (waking the
    // progress thread would cost two context switches per operation, and on
    // a full machine a core), and a polling thread is there already. The
    // progress thread looks for work every millisecond anyway.
    if (registered_.load(std::memory_order_acquire) == 0 && in_worker()) cv_.notify_all();
    return f;
  }

  // The wait helper (future.hpp). A thread waiting at the boundary is
  // registered from its HelpCall::enter to its HelpCall::leave and polls all
  // that time except while it runs the program on from a completion. While
  // one has polled in the last kPollerAway the progress thread stays away;
  // while one is registered the progress thread leaves the completions it
  // makes to it (its next poll runs them), so a program's chain of
  // collectives stays on that thread instead of hopping to a worker. When
  // the last one leaves with work in flight, the progress thread takes over
  // at once.
  int wait_help(tessera::detail::HelpCall call) {
    using tessera::detail::HelpCall;
    switch (call) {
      case HelpCall::enter:
        polls_.fetch_add(1, std::memory_order_relaxed);
        registered_.fetch_add(1, std::memory_order_acq_rel);
        return tessera::detail::kHelpBusy;
      case HelpCall::leave:
        if (registered_.fetch_sub(1, std::memory_order_acq_rel) == 1 && work_.load(std::memory_order_acquire)) {
          cv_.notify_all();
        }
        return tessera::detail::kHelpIdle;
      default:
        return help();
    }
  }

  // One progress pass unless another thread is making one. Returns
  // kHelpIdle (future.hpp) when nothing is in flight, kHelpProgressed when
  // it completed operations here, else kHelpBusy.
  int help(bool complete_here = true) {
    using tessera::detail::kHelpBusy, tessera::detail::kHelpIdle, tessera::detail::kHelpProgressed;
    if (!work_.load(std::memory_order_acquire)) return kHelpIdle;
    if (complete_here) polls_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      std::this_thread::yield();
      return kHelpBusy;
    }
    // A list from this thread's pool (completions below may help again,
    // nested): no allocation per pass once warm.
    CompletionList list;
    std::vector<Completion>& done = list.items;
    pass(done, /*may_defer_round=*/!complete_here);
    if (!complete_here && !done.empty()) {
      // What nothing waits on yet is completed here: that runs no
      // continuation (an operation that completed within its own submit
      // returns a ready future, and the program goes on without a wait).
      // The rest is left for the next thread that helps (usually the
      // submitter itself, waiting at the boundary) or for the progress thread.
      done.erase(std::remove_if(done.begin(), done.end(), [](Completion& c) { return c.complete_quietly(); }),
                 done.end());
      if (done.empty()) return kHelpProgressed;
      defer(done);
      return kHelpBusy;
    }
    lock.unlock();
    {
      // Only the complete_here path completes (the other returned above).
      for (auto& c : done) c.complete();
    }
    if (!done.empty()) return kHelpProgressed;
    return work_.load(std::memory_order_acquire) ? kHelpBusy : kHelpIdle;
  }

  void mark_failed() { failed_ = true; }

  void set_coalescing(bool on) { coalesce_.store(on); }

  void stop() {
    {
      std::lock_guard lock(in_mu_);
      if (!started_ || stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // A finished operation: its result or error, handed over outside the lock.
  struct Completion {
    Promise<Value> promise;
    Value value;
    std::exception_ptr error;
    // Completes it here if nothing waits on it with a continuation yet (a
    // result the program has not reached), which costs no hand-off.
    bool complete_quietly() { return promise.set_if_unobserved(value, error); }
    // Completes it here: the program's continuations run on this thread.
    void complete() {
      if (error) {
        promise.set_error(error);
      } else {
        promise.set_value(std::move(value));
      }
    }
    // Completes it on a worker (the progress thread must not run the
    // program's continuations).
    void complete_on_worker() {
      spawn([p = promise, v = std::move(value), e = error]() mutable {
        if (e) p.set_error(e); else p.set_value(std::move(v));
      });
    }
  };

  // Leaves completions for the next pass of a helping thread (which runs
  // them) or of the progress thread. Requires mu_.
  void defer(std::vector<Completion>& done) {
    for (auto& c : done) deferred_.push_back(std::move(c));
    done.clear();
    work_.store(true, std::memory_order_release);
  }

  // A vector of completions taken from the calling thread's pool and given
  // back (emptied, capacity kept) when done.
  struct CompletionList {
    std::vector<Completion> items;
    static std::vector<std::vector<Completion>>& pool() {
      thread_local std::vector<std::vector<Completion>> p;
      return p;
    }
    CompletionList() {
      if (!pool().empty()) {
        items = std::move(pool().back());
        pool().pop_back();
      }
    }
    ~CompletionList() {
      items.clear();
      if (pool().size() < 8) pool().push_back(std::move(items));
    }
  };

  void run() {
    // Short sleeps between polls are short (the default timer slack is 50 µs).
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    // Agreement rounds carry small all-reduces inline: let shared-memory
    // messages the size of a round's posted receive go eagerly (Open MPI's
    // default is 4 KiB, which makes a 4 KiB all-reduce wait for a
    // rendezvous, and a 64 KiB one wait for the other rank's progress). The
    // user's setting wins.
    setenv("OMPI_MCA_btl_vader_eager_limit", std::to_string(BlockGather::kPostedBytes + 1024).c_str(),
           /*overwrite=*/0);
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    std::string init_error;
    if (rc != MPI_SUCCESS) {
      init_error = "[locality] MPI_Init_thread failed: " + mpi_error(rc);
    } else {
      // MPI is called by one thread at a time (under mu_), so any level from
      // SERIALIZED up is safe.
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      for (int reach = 2; reach < size_; reach *= 2) inline_budget_ /= 2;
      // One communicator per kind of traffic, so that agreement rounds, data,
      // diagnostics and point-to-point messages never match each other.
      for (MPI_Comm* c : {&round_comm_, &data_comm_, &diag_comm_, &p2p_header_comm_, &p2p_data_comm_}) {
        MPI_Comm_dup(MPI_COMM_WORLD, c);
        MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
      }
      init_error = check_same_program();
    }
    {
      std::lock_guard lock(in_mu_);
      init_error_ = init_error;
      init_done_ = true;
      ready_.store(rc == MPI_SUCCESS && init_error.empty(), std::memory_order_release);
    }
    cv_.notify_all();
    if (rc != MPI_SUCCESS) return;
    if (!init_error.empty()) {
      failed_ = true;
      return;
    }
    tessera::detail::wait_helper().store([](tessera::detail::HelpCall c) { return Engine::get().wait_help(c); },
                                         std::memory_order_release);
    loop();
    tessera::detail::wait_helper().store(nullptr, std::memory_order_release);
    // MPI_Finalize waits for the other ranks; after an error they may be
    // waiting for this one, so a failing rank exits without it and mpirun
    // ends the job.
    if (!failed_ && broken_.empty() && finish()) MPI_Finalize();
  }

  std::string check_same_program() {
    struct Identity {
      uint64_t hash;
      char shown[248];
    } mine{}, *all = nullptr;
    auto [hash, shown] = program_identity();
    mine.hash = hash;
    std::strncpy(mine.shown, shown.c_str(), sizeof mine.shown - 1);
    std::vector<Identity> ids(size_);
    all = ids.data();
    if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
      return "";
    }
    bool same = true;
    for (const Identity& id : ids) same = same && id.hash == ids[0].hash;
    if (same) return "";
    std::string msg = "[locality] the localities run different programs or arguments:";
    for (int r = 0; r < size_; ++r) msg += error_message("\n  rank ", r, ": ", ids[r].shown);
    return msg;
  }

  void loop() {
    using namespace std::chrono;
    for (;;) {
      // A thread waiting at the boundary polls: stay out of its way (it
      // wakes this one when it leaves). If it has not polled for
      // kPollerAway (it runs the program on from a completion), this thread
      // polls meanwhile.
      if (registered_.load(std::memory_order_acquire) > 0) {
        uint64_t seen = polls_.load(std::memory_order_relaxed);
        if (seen != polls_seen_) {
          polls_seen_ = seen;
          std::unique_lock lock(in_mu_);
          cv_.wait_for(lock, kPollerAway, [&] { return stopping_ || registered_.load(std::memory_order_acquire) == 0; });
          continue;
        }
      }
      {
        std::unique_lock lock(in_mu_);
        // Submissions from a helping thread do not notify (submit): look
        // for work every millisecond as well.
        cv_.wait_for(lock, std::chrono::milliseconds(1), [&] { return stopping_ || work_.load(); });
        if (!stopping_ && !work_.load()) continue;
        if (stopping_ && !work_.load()) return;
        if (stopping_ && !broken_.empty()) return;
      }
      bool progressed = false;
      {
        std::unique_lock lock(mu_, std::try_to_lock);
        if (lock.owns_lock()) {
          std::vector<Completion> done;
          progressed = pass(done);
          if (!done.empty() && registered_.load(std::memory_order_acquire) > 0) defer(done);
          lock.unlock();
          // What nothing waits on yet is completed here; a thread blocked at
          // the boundary runs the program on from the rest (and then polls
          // for its next collective); else workers do.
          done.erase(std::remove_if(done.begin(), done.end(), [](Completion& c) { return c.complete_quietly(); }),
                     done.end());
          if (!done.empty()) {
            auto batch = std::make_shared<std::vector<Completion>>(std::move(done));
            if (!tessera::detail::hand_to_boundary([batch] {
                  for (auto& c : *batch) c.complete();
                })) {
              for (auto& c : *batch) c.complete_on_worker();
            }
          }
        }
      }
      // Poll again at once after progress, else after a sleep (a spinning
      // poll would slow down the tasks computing on the cores): 20 µs while
      // no task runs; while tasks run, twice as long after each poll that
      // found nothing, up to kBusyPollMax. Each poll then takes a core from
      // a task for two context switches: with a poll every 20 µs, a 16 MiB
      // all-reduce beside ~56 ms of products took 2.4-17.6 ms (median 5.2)
      // more than the two one after the other, with the backoff 1.4-6.5 ms
      // (median 2.9; four launches each in turn, docs/benchmarks.md). A step
      // of communication that completes meanwhile waits at most
      // kBusyPollMax for its next poll.
      if (progressed) {
        idle_sleep_ = kIdlePoll;
      } else {
        std::this_thread::sleep_for(idle_sleep_);
        idle_sleep_ = tasks_outstanding() > 0 ? std::min(idle_sleep_ * 2, kBusyPollMax) : kIdlePoll;
      }
    }
  }

  // After the program: tells the other ranks this one has finished (so a
  // rank waiting for a collective this one never calls gets an error, not a
  // hang) and waits until every rank has. Returns false if that failed.
  bool finish() {
    OfferHeader mine;
    mine.finished = 1;
    auto deadline = Clock::now() + std::chrono::duration<double>(collective_timeout_seconds());
    try {
      for (;;) {
        // The regular rounds' object: its posted receives match the other
        // ranks' next round, this one.
        round_.next_block(rank_, size_).assign(reinterpret_cast<const char*>(&mine), sizeof mine);
        round_.start(round_comm_, rank_, size_);
        while (!round_.progress()) {
          if (Clock::now() > deadline) return false;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        // The sends must complete before their buffers go (and before
        // MPI_Finalize).
        for (;;) {
          round_.reap_sends();
          if (!round_.sending()) break;
          if (Clock::now() > deadline) return false;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        bool all = true, work = false;
        for (const Bytes& b : round_.blocks()) {
          Offer o = parse_offer(b);
          all = all && o.finished;
          work = work || (!o.finished && !o.entries.empty());
        }
        // Another rank still offering work learns from this round that this
        // one has finished and fails. Finalizing leaves the report of the
        // failure to that rank (mpirun then ends the job).
        if (all || work) {
          round_.cancel_posted();
          return true;
        }
      }
    } catch (const std::exception&) {
      return false;
    }
  }

  // One pass: posts new work, tests what is in flight, advances what
  // completed. Requires mu_. Returns true if anything changed. A pass made
  // right after a submission (may_defer_round) starts no round while other
  // ranks have offered operations this one has not issued yet: its program
  // is about to issue them, and they then go in one round together (and
  // are coalesced) instead of one round each, paced by this rank. The next
  // pass of a waiting thread or of the progress thread starts it anyway.
  bool pass(std::vector<Completion>& done, bool may_defer_round = false) {
    std::vector<OpPtr>& fresh = fresh_;
    {
      std::lock_guard lock(in_mu_);
      fresh.swap(incoming_);
    }
    bool progressed = !fresh.empty() || !deferred_.empty();
    for (auto& c : deferred_) done.push_back(std::move(c));
    deferred_.clear();
    for (auto& op : fresh) {
      if (op->collective()) {
        op->seq = next_seq_++;
        pending_.emplace(op->seq, op);
        auto it = std::lower_bound(expected_.begin(), expected_.end(), std::make_pair(op->entry.site, op->entry.key));
        if (it != expected_.end() && *it == std::make_pair(op->entry.site, op->entry.key)) expected_.erase(it);
      } else {
        guarded(op, done, [&] { post_p2p(op); });
      }
    }
    fresh.clear();
    if (round_.active()) {
      try {
        // A round that agreed on nothing (ranks with different operations
        // pending) is not progress: the next one waits for the poll interval.
        if (round_.progress()) progressed = resolve(done) > 0 || progressed;
      } catch (const std::exception& e) {
        set_broken(e.what());
        fail_all_pending(e.what(), done);
      }
    }
    bool defer = may_defer_round && !expected_.empty();
    if (!round_.active() && !pending_.empty() && !broken_flag_.load() && !defer) guarded_round(done);
    progressed = test_all(done) || progressed;
    if (++passes_ % 256 == 0) check_timeouts(done);
    bool work = round_.active() || !pending_.empty() || !active_.empty();
    {
      std::lock_guard lock(in_mu_);
      work = work || !incoming_.empty();
      work_.store(work, std::memory_order_release);
    }
    return progressed;
  }

  template <class F>
  void guarded(const OpPtr& op, std::vector<Completion>& done, F&& fn) {
    try {
      fn();
    } catch (...) {
      active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
      fail(op, std::current_exception(), done);
    }
  }

  static void fail(const OpPtr& op, std::exception_ptr e, std::vector<Completion>& done) {
    if (op->kind == Kind::coalesced) {
      for (auto& m : op->members) done.push_back({m->promise, Value(), e});
    } else {
      done.push_back({op->promise, Value(), e});
    }
  }

  void set_broken(const std::string& msg) {
    std::lock_guard lock(in_mu_);
    if (broken_.empty()) broken_ = msg;
    broken_flag_.store(true);
  }

  void check(int rc, const char* name, const char* call) {
    if (rc == MPI_SUCCESS) return;
    std::string msg = error_message("[", name, "] ", call, " failed on rank ", rank_, ": ", mpi_error(rc));
    set_broken(msg);
    throw std::runtime_error(msg);
  }

  // Offers the oldest pending operations (by sequence number) to the others.
  // The block is written straight into the round's reused buffer: header,
  // entries, then the inline data.
  void guarded_round(std::vector<Completion>& done) {
    offered_.clear();
    int64_t data_bytes = 0;
    for (auto& [k, op] : pending_) {
      if (static_cast<int>(offered_.size()) == kRoundEntries) break;
      int64_t n = op->x.nbytes();
      // Small all-reduces carry their data, oldest first, up to the round's
      // budget, every time they are offered: when one rank runs ahead, its
      // rounds offer many and the other's one at a time, and each round then
      // agrees on the oldest, which still completes in its round instead of
      // taking a separate collective.
      op->inline_now =
          op->kind == Kind::all_reduce && n <= inline_budget_ && data_bytes + n <= inline_budget_;
      if (op->inline_now) data_bytes += n;
      offered_.push_back(op);
      op->offered = true;
    }
    OfferHeader h;
    h.count = static_cast<int32_t>(offered_.size());
    Bytes& block = round_.next_block(rank_, size_);
    size_t entries_at = sizeof h, data_at = entries_at + sizeof(Entry) * offered_.size();
    block.reset(data_at + static_cast<size_t>(data_bytes));
    std::memcpy(block.data(), &h, sizeof h);
    for (size_t i = 0; i < offered_.size(); ++i) {
      const Op& op = *offered_[i];
      Entry e = op.entry;
      if (op.inline_now) {
        e.inline_bytes = op.x.nbytes();
        if (e.inline_bytes) std::memcpy(block.data() + data_at, op.x.raw(), e.inline_bytes);
        data_at += e.inline_bytes;
      }
      std::memcpy(block.data() + entries_at + sizeof(Entry) * i, &e, sizeof e);
    }
    try {
      round_.start(round_comm_, rank_, size_);
      if (round_.progress()) resolve(done);
    } catch (const std::exception& e) {
      set_broken(e.what());
      fail_all_pending(e.what(), done);
    }
  }

  void fail_all_pending(const std::string& msg, std::vector<Completion>& done) {
    auto e = std::make_exception_ptr(std::runtime_error(msg));
    for (auto& [k, op] : pending_) fail(op, e, done);
    pending_.clear();
  }

  // What every rank offered runs; fingerprints must agree. Returns how many
  // operations were agreed (or found to disagree).
  size_t resolve(std::vector<Completion>& done) {
    // Scratch space reused from round to round: a round runs per collective.
    offers_.resize(size_);
    for (int r = 0; r < size_; ++r) parse_offer(round_.blocks()[r], offers_[r]);
    std::vector<Offer>& offers = offers_;
    note_expected();
    candidates_.clear();
    candidate_data_.clear();
    index_.resize(size_);
    for (auto& index : index_) index.clear();
    cursor_.assign(size_, 0);
    for (const OpPtr& op : offered_) {
      Candidate c{op, true, true, candidate_data_.size()};
      candidate_data_.resize(candidate_data_.size() + size_, nullptr);
      // Every rank's extent along the free axis travels in its entry.
      bool extents = op->kind == Kind::all_gather || op->kind == Kind::gather || op->kind == Kind::all_to_all;
      if (extents) op->extents.assign(size_, 0);
      bool everywhere = true;
      for (int r = 0; r < size_ && everywhere; ++r) {
        size_t at = find_entry(r, op->entry, cursor_[r]);
        everywhere = at != kNotFound;
        if (!everywhere) break;
        cursor_[r] = at + 1;
        const Entry& found = offers[r].entries[at];
        candidate_data_[c.data_at + r] = offers[r].data[at];
        if (extents) op->extents[r] = found.extent;
        c.same = c.same && found.hash == op->entry.hash;
        c.inline_everywhere = c.inline_everywhere && found.inline_bytes == static_cast<int64_t>(op->x.nbytes());
      }
      if (!everywhere) {
        candidate_data_.resize(c.data_at);
        continue;
      }
      candidates_.push_back(c);
    }
    offered_.clear();
    // Every rank derives the same order from the same round.
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.op->entry.key, a.op->entry.site) < std::tie(b.op->entry.key, b.op->entry.site);
    });
    // Without coalescing, one operation per round (the others wait and are
    // offered again, so each runs as its own exchange or MPI operation).
    if (!coalesce_.load() && candidates_.size() > 1) candidates_.resize(1);
    agreed_.clear();
    disagreed_.clear();
    size_t inline_done = 0;
    for (Candidate& c : candidates_) {
      pending_.erase(c.op->seq);
      if (c.same && c.inline_everywhere && c.op->kind == Kind::all_reduce) {
        done.push_back({c.op->promise, Value(reduce_in_rank_order(*c.op, &candidate_data_[c.data_at])), nullptr});
        ++inline_done;
      } else {
        (c.same ? agreed_ : disagreed_).push_back(c.op);
      }
      c.op = nullptr;
    }
    size_t agreed_count = candidates_.size();
    if (debug_rounds_) {
      std::fprintf(stderr, "[rank %d] round: offered %zu, agreed %zu (%zu inline), pending %zu\n", rank_,
                   offers[rank_].entries.size(), agreed_count, inline_done, pending_.size());
    }
    for (auto& op : disagreed_) guarded(op, done, [&] { post_diag(op); });
    post_agreed(agreed_, done);
    agreed_.clear();
    disagreed_.clear();
    for (int r = 0; r < size_; ++r) {
      if (offers[r].finished && !pending_.empty()) {
        std::string msg;
        if (pending_.size() == 1) {
          const Op& op = *pending_.begin()->second;
          msg = error_message("[", op.name, "] rank ", r, " finished its program without calling ", op.desc(),
                              " (which rank ", rank_, " waits for)");
        } else {
          msg = error_message("[", pending_.begin()->second->name, "] rank ", r, " finished its program without ",
                              "calling these collectives, which rank ", rank_, " waits for:");
          for (auto& [k, op] : pending_) msg += "\n  " + op->desc();
        }
        set_broken(msg);
        fail_all_pending(msg, done);
        break;
      }
    }
    return agreed_count;
  }

  // What the other ranks offered in this round and this one has not issued
  // yet (pending_ holds everything it issued and has not completed).
  void note_expected() {
    mine_.clear();
    for (auto& [k, op] : pending_) mine_.push_back({op->entry.site, op->entry.key});
    std::sort(mine_.begin(), mine_.end());
    expected_.clear();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      for (const Entry& e : offers_[r].entries) {
        auto id = std::make_pair(e.site, e.key);
        if (!std::binary_search(mine_.begin(), mine_.end(), id)) expected_.push_back(id);
      }
    }
    std::sort(expected_.begin(), expected_.end());
    expected_.erase(std::unique(expected_.begin(), expected_.end()), expected_.end());
  }

  static constexpr size_t kNotFound = ~size_t{0};

  // Where rank r offered the operation of `e` (its site and key), or
  // kNotFound. Ranks usually offer in the same order: the entry at `hint`
  // (just after the last one found) is tried first, then an index of that
  // rank's entries is built once per round.
  size_t find_entry(int r, const Entry& e, size_t hint) {
    const std::vector<Entry>& entries = offers_[r].entries;
    if (hint < entries.size() && entries[hint].site == e.site && entries[hint].key == e.key) return hint;
    auto& index = index_[r];
    if (index.empty() && !entries.empty()) {
      for (size_t i = 0; i < entries.size(); ++i) index.push_back({entries[i].site, entries[i].key, i});
      std::sort(index.begin(), index.end());
    }
    auto it = std::lower_bound(index.begin(), index.end(), std::make_tuple(e.site, e.key, size_t{0}));
    if (it == index.end() || std::get<0>(*it) != e.site || std::get<1>(*it) != e.key) return kNotFound;
    return std::get<2>(*it);
  }

  // The reduction of every rank's inline data, in rank order: the same bits
  // on every rank.
  Array reduce_in_rank_order(const Op& op, const char* const* data) const {
    Array out(op.x.dtype(), op.x.shape());
    int64_t n = out.size();
    if (n == 0) return out;
    // Sums of floats: (data[0] + data[1]) + data[2] ..., in one pass each.
    bool f32 = out.dtype() == DType::float32, f64 = out.dtype() == DType::float64;
    if (op.rop == ReduceOp::sum && size_ >= 2 && (f32 || f64)) {
      sum_floats(out.raw(), data[1], data[0], n, f64);
      for (int r = 2; r < size_; ++r) sum_floats(out.raw(), data[r], nullptr, n, f64);
      return out;
    }
    std::memcpy(out.raw(), data[0], out.nbytes());
    for (int r = 1; r < size_; ++r) accumulate(out.raw(), data[r], n, out.dtype(), op.rop);
    return out;
  }

  // Posts the agreed operations in order; runs of small all-reduces of the
  // same dtype and reduction become one message.
  void post_agreed(const std::vector<OpPtr>& agreed, std::vector<Completion>& done) {
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

  static bool fusable(const Op& op) { return op.kind == Kind::all_reduce && op.x.nbytes() <= kCoalesceMaxBytes; }

  void post_coalesced(const OpPtr& group) {
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
    if (use_ring(group->x)) {
      post_ring(group);
      return;
    }
    group->stage = Stage::data;
    group->reqs.assign(1, MPI_REQUEST_NULL);
    check(MPI_Iallreduce(in.raw(), group->out.raw(), checked_int(n, "all_reduce", "elements"), mpi_type(dt),
                         mpi_op(group->rop), data_comm_, &group->reqs[0]),
          "all_reduce", "MPI_Iallreduce");
    active_.push_back(group);
  }

  bool use_ring(const Array& x) const {
    return ring_ && size_ > 1 && x.nbytes() >= kRingMinBytes;
  }

  // A ring all-reduce of op->x into op->out over point-to-point messages on
  // data_comm_ (which carries no other point-to-point traffic): the
  // elements in size_ nearly equal chunks; size_ - 1 steps of reduce-scatter
  // (send a chunk to the right, receive the next from the left and reduce
  // it into the result), then size_ - 1 of all-gather (pass the reduced
  // chunks on). Each rank sends and receives 2 (size_ - 1) / size_ of the
  // data, the least any all-reduce moves. Every chunk is reduced once, in
  // an order fixed by the number of ranks, and then copied: the same bits
  // on every rank and in every run. The tag tells concurrent rings apart:
  // rings are posted in the agreed order, the same on every rank.
  void post_ring(const OpPtr& op) {
    const Array& x = op->x;
    if (op->kind != Kind::coalesced) op->out = Array(x.dtype(), x.shape());  // a group's is made already
    op->stage = Stage::ring;
    op->ring_step = 0;
    op->tag = 1 + static_cast<int>(ring_serial_++ % 30000);
    op->chunk_at.assign(1, 0);
    for (int64_t c : split_counts(x.size(), size_)) op->chunk_at.push_back(op->chunk_at.back() + c);
    op->ring_in.emplace(x.dtype(), Shape{op->chunk_at[1]});  // the first chunk is the largest
    post_ring_step(op);
  }

  // The chunk a rank sends and the one it receives at `step` (0 .. 2 size_ - 3).
  std::pair<int, int> ring_chunks(int step) const {
    int s = step < size_ - 1 ? step : step - (size_ - 1);
    int shift = step < size_ - 1 ? 0 : 1;  // the all-gather passes the chunk reduced last
    int send = ((rank_ - s + shift) % size_ + size_) % size_;
    int recv = ((rank_ - s - 1 + shift) % size_ + size_) % size_;
    return {send, recv};
  }

  void post_ring_step(const OpPtr& op) {
    auto [send, recv] = ring_chunks(op->ring_step);
    DType dt = op->x.dtype();
    int64_t width = static_cast<int64_t>(dtype_size(dt));
    char* out = static_cast<char*>(op->out.raw());
    int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
    // Counted in elements, not bytes: a chunk may hold up to MPI's count
    // limit of them (as many as one MPI_Iallreduce of the whole array).
    int64_t recv_count = op->chunk_at[recv + 1] - op->chunk_at[recv];
    int64_t send_count = op->chunk_at[send + 1] - op->chunk_at[send];
    // The reduce-scatter receives beside the result and reduces into it (its
    // first step sends this rank's own chunk of x: the result holds only
    // reduced chunks); the all-gather receives in place.
    char* into = out + op->chunk_at[recv] * width;
    if (op->ring_step < size_ - 1) into = static_cast<char*>(op->ring_in->raw());
    const char* from = op->ring_step == 0 ? static_cast<const char*>(op->x.raw()) : out;
    op->reqs.assign(2, MPI_REQUEST_NULL);
    check(MPI_Irecv(into, checked_int(recv_count, op->name, "elements"), mpi_type(dt), left, op->tag, data_comm_,
                    &op->reqs[0]),
          op->name, "MPI_Irecv");
    check(MPI_Isend(from + op->chunk_at[send] * width, checked_int(send_count, op->name, "elements"), mpi_type(dt),
                    right, op->tag, data_comm_, &op->reqs[1]),
          op->name, "MPI_Isend");
    active_.push_back(op);
  }

  // A step's messages are done: reduce what came (reduce-scatter), then the
  // next step, or the result.
  void advance_ring(const OpPtr& op, std::vector<Completion>& done) {
    if (op->ring_step < size_ - 1) {
      // The chunk received is reduced here for the first and only time: its
      // base is this rank's contribution (x), and then the result holds it.
      int c = ring_chunks(op->ring_step).second;
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
    if (++op->ring_step < 2 * (size_ - 1)) {
      post_ring_step(op);
      return;
    }
    op->ring_in.reset();
    op->stage = Stage::data;
    advance(op, done);
  }

  void post_diag(const OpPtr& op) {
    op->stage = Stage::diag;
    std::string d = op->desc();
    op->diag_send.assign(kDescBytes, '\0');
    std::memcpy(op->diag_send.data(), d.data(), std::min<size_t>(d.size(), kDescBytes - 1));
    op->diag_recv.assign(static_cast<size_t>(kDescBytes) * size_, '\0');
    op->reqs.assign(1, MPI_REQUEST_NULL);
    check(MPI_Iallgather(op->diag_send.data(), kDescBytes, MPI_CHAR, op->diag_recv.data(), kDescBytes, MPI_CHAR,
                         diag_comm_, &op->reqs[0]),
          op->name, "MPI_Iallgather");
    active_.push_back(op);
  }

  void post_data(const OpPtr& op) {
    op->stage = Stage::data;
    op->reqs.assign(1, MPI_REQUEST_NULL);
    MPI_Request* req = &op->reqs[0];
    MPI_Comm comm = data_comm_;
    const Array& x = op->x;
    DType dt = x.dtype();
    const char* name = op->name;
    switch (op->kind) {
      case Kind::all_reduce: {
        if (use_ring(x)) {
          post_ring(op);
          return;
        }
        // Separate buffers: an in-place all-reduce costs a copy, and Open MPI
        // then picks a slower algorithm for large messages.
        op->out = Array(dt, x.shape());
        check(MPI_Iallreduce(x.raw(), op->out.raw(), checked_int(x.size(), name, "elements"), mpi_type(dt),
                             mpi_op(op->rop), comm, req),
              name, "MPI_Iallreduce");
        break;
      }
      case Kind::broadcast: {
        op->out = rank_ == op->root ? x : Array(dt, x.shape());
        check(MPI_Ibcast(op->out.raw(), checked_int(x.nbytes(), name), MPI_BYTE, op->root, comm, req), name,
              "MPI_Ibcast");
        break;
      }
      case Kind::all_gather:
      case Kind::gather: {
        bool receives = op->kind == Kind::all_gather || rank_ == op->root;
        int64_t total = 0;
        op->rcounts.assign(size_, 0);
        op->rdispls.assign(size_, 0);
        for (int i = 0; i < size_; ++i) {
          Shape s = x.shape();
          s[op->free_axis] = op->extents[i];
          int64_t bytes = shape_size(s) * static_cast<int64_t>(dtype_size(dt));
          op->rcounts[i] = checked_int(bytes, name);
          op->rdispls[i] = checked_int(total, name);
          total += bytes;
        }
        if (receives) op->recv_bytes.resize(static_cast<size_t>(total) + 1);
        int sendn = checked_int(x.nbytes(), name);
        if (op->kind == Kind::all_gather) {
          check(MPI_Iallgatherv(x.raw(), sendn, MPI_BYTE, op->recv_bytes.data(), op->rcounts.data(),
                                op->rdispls.data(), MPI_BYTE, comm, req),
                name, "MPI_Iallgatherv");
        } else {
          check(MPI_Igatherv(x.raw(), sendn, MPI_BYTE, receives ? op->recv_bytes.data() : nullptr, op->rcounts.data(),
                             op->rdispls.data(), MPI_BYTE, op->root, comm, req),
                name, "MPI_Igatherv");
        }
        break;
      }
      case Kind::reduce_scatter: {
        Shape s = x.shape();
        std::vector<int64_t> rows = split_counts(s[0], size_);
        int64_t per_row = x.size() / std::max<int64_t>(s[0], 1);
        op->rcounts.resize(size_);
        for (int i = 0; i < size_; ++i) op->rcounts[i] = checked_int(rows[i] * per_row, name, "elements");
        s[0] = rows[rank_];
        op->out = Array(dt, s);
        check(MPI_Ireduce_scatter(x.raw(), op->out.raw(), op->rcounts.data(), mpi_type(dt), mpi_op(op->rop), comm,
                                  req),
              name, "MPI_Ireduce_scatter");
        break;
      }
      case Kind::scatter: {
        // First the root's dtype and shape (the others' x is ignored).
        op->stage = Stage::root_meta;
        op->header[0] = static_cast<int64_t>(x.dtype());
        op->header[1] = x.ndim();
        for (int i = 0; i < x.ndim() && i < kMaxDims; ++i) op->header[2 + i] = x.shape()[i];
        check(MPI_Ibcast(op->header, 2 + kMaxDims, MPI_INT64_T, op->root, comm, req), name, "MPI_Ibcast");
        break;
      }
      case Kind::all_to_all: {
        op->scounts.assign(size_, 0);
        op->sdispls.assign(size_, 0);
        op->rcounts.assign(size_, 0);
        op->rdispls.assign(size_, 0);
        std::vector<int64_t> mine = split_counts(x.shape()[0], size_);
        int64_t rb = row_bytes(dt, x.shape());
        int64_t off = 0;
        for (int j = 0; j < size_; ++j) {
          op->scounts[j] = checked_int(mine[j] * rb, name);
          op->sdispls[j] = checked_int(off, name);
          off += mine[j] * rb;
        }
        int64_t total = 0;
        for (int j = 0; j < size_; ++j) {
          int64_t bytes = split_counts(op->extents[j], size_)[rank_] * rb;
          op->rcounts[j] = checked_int(bytes, name);
          op->rdispls[j] = checked_int(total, name);
          total += bytes;
        }
        op->recv_bytes.resize(static_cast<size_t>(total) + 1);
        check(MPI_Ialltoallv(x.raw(), op->scounts.data(), op->sdispls.data(), MPI_BYTE, op->recv_bytes.data(),
                             op->rcounts.data(), op->rdispls.data(), MPI_BYTE, comm, req),
              name, "MPI_Ialltoallv");
        break;
      }
      case Kind::barrier:
        check(MPI_Ibarrier(comm, req), name, "MPI_Ibarrier");
        break;
      default:
        break;
    }
    active_.push_back(op);
    if (op->kind == Kind::scatter) scatters_.push_back(op);
  }

  // The second step of a scatter, once the root's shape is known. Posted in
  // the order the scatters were agreed (every rank the same), after their
  // first steps completed.
  void post_scatter_data(std::vector<Completion>& done) {
    while (!scatters_.empty() && scatters_.front()->stage == Stage::data) {
      OpPtr op = scatters_.front();
      scatters_.pop_front();
      guarded(op, done, [&] {
        const char* name = op->name;
        DType rdt = static_cast<DType>(op->header[0]);
        int ndim = static_cast<int>(op->header[1]);
        Shape s(op->header + 2, op->header + 2 + ndim);
        std::vector<int64_t> rows = split_counts(s[0], size_);
        int64_t rb = row_bytes(rdt, s);
        op->scounts.resize(size_);
        op->sdispls.resize(size_);
        int64_t off = 0;
        for (int i = 0; i < size_; ++i) {
          op->scounts[i] = checked_int(rows[i] * rb, name);
          op->sdispls[i] = checked_int(off, name);
          off += rows[i] * rb;
        }
        s[0] = rows[rank_];
        op->out = Array(rdt, s);
        bool is_root = rank_ == op->root;
        op->reqs.assign(1, MPI_REQUEST_NULL);
        check(MPI_Iscatterv(is_root ? op->x.raw() : nullptr, op->scounts.data(), op->sdispls.data(), MPI_BYTE,
                            op->out.raw(), op->scounts[rank_], MPI_BYTE, op->root, data_comm_, &op->reqs[0]),
              name, "MPI_Iscatterv");
        op->stage = Stage::header;  // marks "second step posted"
        active_.push_back(op);
      });
    }
  }

  void post_p2p(const OpPtr& op) {
    if (op->kind == Kind::send) {
      const Array& x = op->x;
      op->header[0] = static_cast<int64_t>(x.dtype());
      op->header[1] = x.ndim();
      for (int i = 0; i < x.ndim(); ++i) op->header[2 + i] = x.shape()[i];
      op->stage = Stage::data;
      op->reqs.assign(2, MPI_REQUEST_NULL);
      check(MPI_Isend(op->header, 2 + kMaxDims, MPI_INT64_T, op->peer, op->tag, p2p_header_comm_, &op->reqs[0]),
            op->name, "MPI_Isend");
      check(MPI_Isend(x.raw(), checked_int(x.nbytes(), op->name), MPI_BYTE, op->peer, op->tag, p2p_data_comm_,
                      &op->reqs[1]),
            op->name, "MPI_Isend");
    } else {
      op->stage = Stage::header;
      op->reqs.assign(1, MPI_REQUEST_NULL);
      check(MPI_Irecv(op->header, 2 + kMaxDims, MPI_INT64_T, op->peer, op->tag, p2p_header_comm_, &op->reqs[0]),
            op->name, "MPI_Irecv");
    }
    active_.push_back(op);
  }

  // Polls every outstanding request; advances what completed.
  bool test_all(std::vector<Completion>& done) {
    std::vector<MPI_Request> reqs;
    std::vector<std::pair<size_t, size_t>> owner;
    for (size_t i = 0; i < active_.size(); ++i) {
      for (size_t k = 0; k < active_[i]->reqs.size(); ++k) {
        if (active_[i]->reqs[k] == MPI_REQUEST_NULL) continue;
        reqs.push_back(active_[i]->reqs[k]);
        owner.push_back({i, k});
      }
    }
    if (reqs.empty()) return false;
    std::vector<int> indices(reqs.size());
    int outcount = 0;
    int rc = MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      std::string msg = error_message("[collective] MPI_Testsome failed on rank ", rank_, ": ", mpi_error(rc));
      set_broken(msg);
      auto e = std::make_exception_ptr(std::runtime_error(msg));
      for (auto& op : active_) fail(op, e, done);
      active_.clear();
      fail_all_pending(msg, done);
      return true;
    }
    if (outcount == MPI_UNDEFINED || outcount == 0) return false;
    for (size_t j = 0; j < reqs.size(); ++j) active_[owner[j].first]->reqs[owner[j].second] = reqs[j];
    std::vector<OpPtr> completed;
    for (const auto& op : active_) {
      bool all = true;
      for (auto r : op->reqs) all = all && r == MPI_REQUEST_NULL;
      if (all) completed.push_back(op);
    }
    for (auto& op : completed) {
      active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
      guarded(op, done, [&] { advance(op, done); });
    }
    post_scatter_data(done);
    return true;
  }

  void advance(const OpPtr& op, std::vector<Completion>& done) {
    switch (op->stage) {
      case Stage::ring:
        advance_ring(op, done);
        return;
      case Stage::diag:
        done.push_back({op->promise, Value(), std::make_exception_ptr(std::invalid_argument(disagreement(*op)))});
        return;
      case Stage::root_meta:
        op->stage = Stage::data;  // post_scatter_data posts the second step
        return;
      case Stage::header:
        if (op->kind == Kind::recv) {
          int ndim = static_cast<int>(op->header[1]);
          Shape s(op->header + 2, op->header + 2 + ndim);
          op->out = Array(static_cast<DType>(op->header[0]), s);
          op->stage = Stage::data;
          op->reqs.assign(1, MPI_REQUEST_NULL);
          check(MPI_Irecv(op->out.raw(), checked_int(op->out.nbytes(), op->name), MPI_BYTE, op->peer, op->tag,
                          p2p_data_comm_, &op->reqs[0]),
                op->name, "MPI_Irecv");
          active_.push_back(op);
          return;
        }
        done.push_back({op->promise, Value(std::move(op->out)), nullptr});  // scatter's second step
        return;
      default:
        if (op->kind == Kind::coalesced) {
          const char* at = static_cast<const char*>(op->out.raw());
          for (auto& m : op->members) {
            Array r(m->x.dtype(), m->x.shape());
            if (r.nbytes()) std::memcpy(r.raw(), at, r.nbytes());
            at += r.nbytes();
            done.push_back({m->promise, Value(std::move(r)), nullptr});
          }
          return;
        }
        done.push_back({op->promise, result(*op), nullptr});
        return;
    }
  }

  std::string disagreement(const Op& op) const {
    std::string msg = "[" + std::string(op.name) + "] ranks disagree on the collective: ";
    for (int i = 0; i < size_; ++i) {
      std::string d(op.diag_recv.data() + static_cast<size_t>(i) * kDescBytes);
      msg += error_message(i ? ", " : "", "rank ", i, " has ", d);
    }
    return msg;
  }

  // One array per rank from a contiguous byte buffer.
  std::vector<Array> unpack(const Op& op, const std::vector<Shape>& shapes, DType dt) const {
    std::vector<Array> parts;
    for (int i = 0; i < size_; ++i) {
      Array a(dt, shapes[i]);
      if (a.nbytes()) std::memcpy(a.raw(), op.recv_bytes.data() + op.rdispls[i], a.nbytes());
      parts.push_back(std::move(a));
    }
    return parts;
  }

  Value result(Op& op) const {
    DType dt = op.x.dtype();
    switch (op.kind) {
      case Kind::all_gather:
      case Kind::gather:
      case Kind::all_to_all: {
        if (op.kind == Kind::gather && rank_ != op.root) return Value();
        std::vector<Shape> shapes;
        for (int r = 0; r < size_; ++r) {
          Shape s = op.x.shape();
          if (op.kind == Kind::all_to_all) {
            s[0] = split_counts(op.extents[r], size_)[rank_];
          } else {
            s[op.free_axis] = op.extents[r];
          }
          shapes.push_back(s);
        }
        List out;
        for (auto& a : unpack(op, shapes, dt)) out.push_back(Value(std::move(a)));
        return Value(std::move(out));
      }
      case Kind::barrier:
      case Kind::send:
        return Value();
      default:
        return Value(std::move(op.out));
    }
  }

  void check_timeouts(std::vector<Completion>& done) {
    using namespace std::chrono;
    double limit = collective_timeout_seconds();
    auto now = Clock::now();
    std::vector<OpPtr> waiting;
    for (auto& op : active_) {
      if (op->kind == Kind::coalesced) {
        waiting.insert(waiting.end(), op->members.begin(), op->members.end());
      } else {
        waiting.push_back(op);
      }
    }
    for (auto& [k, op] : pending_) waiting.push_back(op);
    bool expired = false;
    for (auto& op : waiting) expired = expired || duration<double>(now - op->start).count() > limit;
    if (!expired) return;
    std::string list;
    for (auto& op : waiting) {
      const char* stage = op->stage == Stage::pending ? "not joined by every rank"
                          : op->stage == Stage::header && op->kind == Kind::recv ? "waiting for a message"
                          : op->stage == Stage::diag                              ? "exchanging diagnostics"
                                                                                  : "transferring data";
      if (op->collective()) {
        list += error_message("\n  ", op->desc(), " (call ", op->entry.key + 1, " of that site, ", stage, ")");
      } else {
        list += error_message("\n  ", op->desc(), " (tag ", op->tag, ", ", stage, ")");
      }
    }
    std::string msg = error_message("[", waiting.front()->name, "] timed out after ", limit, " s on rank ", rank_,
                                    " (TESSERA_COLLECTIVE_TIMEOUT); a rank did not join. This rank waits for:", list);
    set_broken(msg);
    // MPI may still write into the buffers of posted operations: keep them.
    for (auto& op : active_) abandoned_.push_back(op);
    for (auto& [k, op] : pending_) abandoned_.push_back(op);
    auto e = std::make_exception_ptr(std::runtime_error(msg));
    for (auto& op : waiting) done.push_back({op->promise, Value(), e});
    active_.clear();
    pending_.clear();
    scatters_.clear();
  }

  // Guards submission (incoming_, keys, broken_, start-up state).
  std::mutex in_mu_;
  std::condition_variable cv_;
  bool started_ = false, init_done_ = false, stopping_ = false;
  std::string init_error_, broken_;
  std::atomic<bool> ready_{false};  // started without error: rank_ and size_ are set
  std::atomic<bool> failed_{false}, work_{false}, broken_flag_{false}, coalesce_{[] {
    const char* s = std::getenv("TESSERA_COALESCE");
    return !(s && std::string(s) == "0");
  }()};
  int rank_ = 0, size_ = 1;
  int64_t inline_budget_ = kInlineBudget;  // bytes of inline data per rank and round (set at start-up)
  const bool ring_ = [] {
    const char* env = std::getenv("TESSERA_RING");
    return !env || std::string(env) != "0";
  }();
  uint64_t ring_serial_ = 0;  // rings posted so far (their tags)
  std::map<uint64_t, uint64_t> next_key_;
  std::vector<OpPtr> incoming_;
  std::thread thread_;

  // Guards everything below and every MPI call after start-up.
  std::mutex mu_;
  MPI_Comm round_comm_ = MPI_COMM_NULL, data_comm_ = MPI_COMM_NULL, diag_comm_ = MPI_COMM_NULL;
  MPI_Comm p2p_header_comm_ = MPI_COMM_NULL, p2p_data_comm_ = MPI_COMM_NULL;
  std::map<uint64_t, OpPtr> pending_;  // by order of submission
  uint64_t next_seq_ = 0;
  std::vector<OpPtr> active_, abandoned_, offered_;
  std::vector<OpPtr> fresh_;  // pass's take of incoming_ (swapped: both keep their capacity)
  std::deque<OpPtr> scatters_;
  BlockGather round_;
  // resolve's scratch space.
  struct Candidate {
    OpPtr op;
    bool same, inline_everywhere;
    size_t data_at;  // every rank's inline data: candidate_data_[data_at + rank]
  };
  std::vector<Offer> offers_;
  std::vector<std::vector<std::tuple<uint64_t, uint64_t, size_t>>> index_;  // per rank: (site, key, entry)
  std::vector<size_t> cursor_;  // per rank: just after the entry found last
  std::vector<Candidate> candidates_;
  std::vector<const char*> candidate_data_;
  std::vector<OpPtr> agreed_, disagreed_;
  // (site, key) of operations other ranks offered and this one has not
  // issued yet, sorted (note_expected), and resolve's scratch for it.
  std::vector<std::pair<uint64_t, uint64_t>> expected_, mine_;
  std::vector<Completion> deferred_;
  // Threads waiting at the boundary (wait_help), and a count of their polls
  // (the progress thread compares it with what it saw kPollerAway earlier).
  std::atomic<int> registered_{0};
  std::atomic<uint64_t> polls_{0};
  uint64_t polls_seen_ = 0;  // the progress thread's
  // The progress thread's sleep after a poll that found nothing (loop()).
  static constexpr std::chrono::microseconds kIdlePoll{20}, kBusyPollMax{500};
  std::chrono::microseconds idle_sleep_ = kIdlePoll;
  static constexpr std::chrono::microseconds kPollerAway{200};
  const bool debug_rounds_ = std::getenv("TESSERA_DEBUG_ROUNDS") != nullptr;
  uint64_t passes_ = 0;
};

// Fills the fingerprint: `what` names the op and its settings; dtype and
// shape are those of x (the extent along `free_axis` travels apart).
OpPtr make_op(Kind kind, const char* name, std::string what, std::optional<Array> x, int free_axis,
              const std::string& site) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->name = name;
  op->what = std::move(what);
  op->site = site;
  op->free_axis = free_axis;
  op->entry.site = hash_words(site);
  uint64_t h = hash_words(op->what, op->entry.site);
  if (x) {
    if (x->ndim() > kMaxDims) {
      throw std::invalid_argument(error_message("[", name, "] arrays of more than ", kMaxDims,
                                                " dimensions are not supported, got ", shape_str(x->shape())));
    }
    op->x = std::move(*x);
    op->has_x = true;
    const Array& a = op->x;
    int64_t meta[2 + kMaxDims] = {static_cast<int64_t>(a.dtype()), a.ndim()};
    for (int i = 0; i < a.ndim(); ++i) meta[2 + i] = i == free_axis ? -1 : a.shape()[i];
    h = hash_words(meta, sizeof(int64_t) * (2 + a.ndim()), h);
    if (free_axis >= 0) op->entry.extent = a.shape()[free_axis];
  }
  op->entry.hash = h;
  return op;
}

const char* reduce_name(ReduceOp op) {
  static const char* names[] = {"all_reduce(sum)", "all_reduce(mean)", "all_reduce(max)", "all_reduce(min)"};
  return names[static_cast<int>(op)];
}

}  // namespace

std::pair<int, int> world() { return Engine::get().world(); }

void mark_failed() {
  if (started_by_mpirun()) Engine::get().mark_failed();
}

void set_coalescing(bool on) { Engine::get().set_coalescing(on); }

Future<Value> all_reduce(Array x, ReduceOp op, const std::string& site) {
  auto o = make_op(Kind::all_reduce, "all_reduce", reduce_name(op), std::move(x), -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o);
}

Future<Value> broadcast(const Array& x, int root, const std::string& site) {
  auto o = make_op(Kind::broadcast, "broadcast", error_message("broadcast(root=", root, ")"), x, -1, site);
  o->root = root;
  return Engine::get().submit(o);
}

Future<Value> all_gather(const Array& x, int free_axis, const std::string& site) {
  return Engine::get().submit(
      make_op(Kind::all_gather, "all_gather", error_message("all_gather(axis=", free_axis, ")"), x, free_axis, site));
}

Future<Value> reduce_scatter(const Array& x, ReduceOp op, const std::string& site) {
  static const char* names[] = {"reduce_scatter(sum)", "reduce_scatter(mean)", "reduce_scatter(max)",
                                "reduce_scatter(min)"};
  auto o = make_op(Kind::reduce_scatter, "reduce_scatter", names[static_cast<int>(op)], x, -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o);
}

Future<Value> gather(const Array& x, int root, const std::string& site) {
  auto o = make_op(Kind::gather, "gather", error_message("gather(root=", root, ")"), x, 0, site);
  o->root = root;
  return Engine::get().submit(o);
}

Future<Value> scatter(const Array& x, int root, const std::string& site) {
  // Only the root's array matters: the fingerprint leaves out dtype and shape.
  if (x.ndim() > kMaxDims) throw std::invalid_argument("[scatter] more than 8 dimensions are not supported");
  auto o = make_op(Kind::scatter, "scatter", error_message("scatter(root=", root, ")"), std::nullopt, -1, site);
  o->root = root;
  o->x = x;
  return Engine::get().submit(o);
}

Future<Value> all_to_all(const Array& x, const std::string& site) {
  return Engine::get().submit(make_op(Kind::all_to_all, "all_to_all", "all_to_all", x, 0, site));
}

Future<Value> barrier(const std::string& site) {
  return Engine::get().submit(make_op(Kind::barrier, "barrier", "barrier", std::nullopt, -1, site));
}

Future<Value> send(const Array& x, int dest, int tag, const std::string& site) {
  auto o = make_op(Kind::send, "send", error_message("send(dest=", dest, ", tag=", tag, ")"), x, -1, site);
  o->peer = dest;
  o->tag = tag;
  return Engine::get().submit(o);
}

Future<Value> recv(int source, int tag, const std::string& site) {
  auto o = make_op(Kind::recv, "recv", error_message("recv(source=", source, ", tag=", tag, ")"), std::nullopt, -1,
                   site);
  o->peer = source;
  o->tag = tag;
  return Engine::get().submit(o);
}

}  // namespace detail
}  // namespace tessera::distributed
