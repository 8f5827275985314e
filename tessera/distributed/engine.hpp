// The communication engine's internals (Engine, one operation: Op), shared by
// its parts: engine.cpp (start-up, submission, agreement rounds, the end),
// progress.cpp (posting and polling MPI operations, the progress thread,
// timeouts), ring.cpp (the engine's own all-reduce algorithms, coalescing,
// reductions). The public functions are in comm.hpp. Internal to
// tessera/distributed.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/distributed/algorithms.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/heartbeat.hpp"
#include "tessera/distributed/round.hpp"
#include "tessera/runtime/future.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera::distributed::detail {

using Clock = std::chrono::steady_clock;

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
// offers of half the ranks (inline_budget(), per channel).
constexpr int64_t kInlineBudget = int64_t{64} << 10;
// All-reduces of at most this many bytes may be coalesced, up to this many
// bytes per coalesced message (the size of the gradient buckets of fit).
constexpr int64_t kCoalesceMaxBytes = int64_t{64} << 10;
// All-reduces (and coalesced groups) that do not travel inline run as one of
// the engine's own algorithms (algorithms.hpp: the ring, recursive halving
// or doubling, chosen by the number of ranks and the size, or the
// hierarchical one; Engine::post_own)
// instead of MPI_Iallreduce. TESSERA_ALLREDUCE forces one (the same on every
// rank); TESSERA_RING=0, as before, means TESSERA_ALLREDUCE=mpi.
constexpr int64_t kCoalesceCapBytes = int64_t{4} << 20;

enum class Kind { all_reduce, broadcast, all_gather, reduce_scatter, gather, scatter, all_to_all,
                  barrier, send, recv, coalesced };

// ring: an all-reduce by one of the engine's own algorithms (post_own).
enum class Stage { pending, root_meta, data, diag, header, ring };

struct Op;
using OpPtr = std::shared_ptr<Op>;

// What a cached agreement round all-reduces (Engine::start_cached): a
// fingerprint of the rank's offer (its header and entries), as the maximum
// of it and of its complement (so the minimum too: every member offered
// the same entries exactly when the two agree), and the data of a single
// small all-reduce offered, reduced with it (`kind`: its dtype, reduction
// and element count; 0: none). 40 bytes whatever the number of ranks.
struct CachedAgreement {
  uint64_t high = 0, low_not = 0;
  uint64_t kind = 0;
  unsigned char value[16] = {};
  bool hit() const { return high == ~low_not; }
};
static_assert(sizeof(CachedAgreement) == 40);
// The largest all-reduce whose data rides in a cached round.
constexpr int64_t kCachedValueBytes = 16;

// A candidate of an agreement round: an operation this rank offered, found in
// every member's offer (Engine::resolve's scratch space).
struct Candidate {
  OpPtr op;
  bool same, inline_everywhere;
  size_t data_at;  // every member's inline data: candidate_data[data_at + member]
};

// What an operation's arrays hold until set: a shared 0-d array (a default
// Array allocates, and an operation is made per collective).
inline const Array& no_array() {
  static const Array* a = new Array();
  return *a;
}

// The ranks a collective runs among and everything its agreement rounds
// need: the world (id 0), or a group made by splitting the world
// (Engine::add_group). Each channel has its own communicators, rounds and
// pending operations, so collectives on disjoint groups run concurrently and
// a round costs log2 of the group's size, whatever the world's.
struct Channel {
  int id = 0;
  std::string label;         // "" for the world, else "group tensor (ranks 0, 1)"
  std::vector<int> members;  // world ranks, in group rank order
  int rank = 0, size = 1;    // this rank's group rank, the group's size
  MPI_Comm round_comm = MPI_COMM_NULL, data_comm = MPI_COMM_NULL, diag_comm = MPI_COMM_NULL,
           agree_comm = MPI_COMM_NULL;
  // Since when this channel's rounds have agreed on nothing while every
  // member offered something and this rank ran no task (unset: a round
  // agreed on something since), and the count of tasks spawned then: a rank
  // still computing may yet offer what the others wait for.
  std::optional<Clock::time_point> unmatched_since;
  uint64_t unmatched_spawned = 0;
  // The cached agreement (Engine::start_cached): set when the last round
  // found every member offering the same entries (or the cached round hit),
  // the same on every member (they derive it from the same data), and the
  // next round then first all-reduces a fingerprint of its offer.
  bool try_cached = false;
  bool cached_active = false;  // a cached round's all-reduce is in flight
  CachedAgreement cached_mine, cached_all, cached_in;
  // Its all-reduce: the steps of recursive doubling (algorithms.hpp) and
  // the requests of the one in flight (receive, send).
  std::vector<Step> cached_steps;
  size_t cached_step = 0;
  MPI_Request cached_reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  // Each step's message is probed for (cached_msg) before it is received:
  // a member that offered something else may send a message of another
  // size (a speculating one carries data), received whole into cached_odd.
  bool cached_matched = false;
  MPI_Message cached_msg = MPI_MESSAGE_NULL;
  Bytes cached_odd;
  bool cached_odd_used = false;
  // A speculating cached round (Engine::start_cached): the first all-reduce
  // offered that runs by halving or doubling, whose first spec_carried steps (the
  // fold's and the reduce-scatter's) are those of the round's all-reduce
  // and ride in its messages behind the 40 bytes. spec_broken: a member's
  // message had no data of the expected size (it offered something else).
  OpPtr spec;
  std::vector<Step> spec_steps;
  size_t spec_carried = 0;
  bool spec_broken = false;
  Array spec_out = no_array();
  std::optional<Array> spec_in;
  // Bytes of inline data per rank and round (halved per exchange after the first).
  int64_t inline_budget = 0;
  uint64_t ring_serial = 0;               // own all-reduces posted so far (their tags)
  std::map<uint64_t, uint64_t> next_key;  // per site: calls so far on this channel (under in_mu_)
  std::map<uint64_t, OpPtr> pending;      // by order of submission
  std::vector<OpPtr> offered;
  std::deque<OpPtr> scatters;
  BlockGather round;
  // resolve's scratch space.
  std::vector<Offer> offers;
  std::vector<std::vector<std::tuple<uint64_t, uint64_t, size_t>>>
      index;                   // per member: (site, key, entry)
  std::vector<size_t> cursor;  // per member: just after the entry found last
  std::vector<Candidate> candidates;
  std::vector<const char*> candidate_data;
  std::vector<OpPtr> agreed, disagreed;
  // (site, key) of operations other members offered and this rank has not
  // issued yet, sorted (note_expected), and resolve's scratch for it.
  std::vector<std::pair<uint64_t, uint64_t>> expected, mine;
  // Per group rank, its host (auto or hierarchical; else empty), and the
  // number of hosts (1 when empty).
  std::vector<int> host_of;
  int hosts = 1;
  // The world rank of group rank r.
  int world_rank(int r) const { return members.empty() ? r : members[r]; }
};

struct Op {
  Kind kind;
  const char* name = "";
  std::string what, site;
  Entry entry;
  Channel* ch = nullptr;       // the ranks it runs among (set by submit; point-to-point: the world)
  int group = 0;               // the channel's id
  uint64_t site_calls = 0;     // collectives this rank called at this site before, on any group
  Clock::time_point probed{};  // when the mismatch probe was last sent (Engine::probe_stalled)
  uint64_t seq = 0;  // order of submission on this rank
  bool offered = false;  // in an earlier agreement round
  bool inline_now = false;  // its data travels in the round being built
  bool unmatched = false;   // no member offered it for Engine::kUnmatchedDelay (disagreement())
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
  // An all_gather along axis 0 receives straight into `out` (the joined
  // result) instead of recv_bytes; its parts are views of it.
  bool gathered_in_out = false;
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  int64_t header[2 + kMaxDims] = {};
  std::vector<MPI_Request> reqs;
  std::vector<OpPtr> members;  // of a coalesced all-reduce
  // An all-reduce by one of the engine's algorithms (Engine::post_own): its
  // schedule, the step it is at, and where the reducing steps receive.
  std::vector<Step> steps;
  size_t step = 0;
  std::optional<Array> ring_in;

  bool collective() const { return kind != Kind::send && kind != Kind::recv; }
  // "all_reduce(sum) float32 (1024,) at train.py:12:5" (built for messages only).
  std::string desc() const {
    std::string d = what;
    if (has_x) d += error_message(" ", dtype_name(x.dtype()), " ", shape_str(x.shape()));
    if (ch && !ch->label.empty()) d += " on " + ch->label;
    if (!site.empty()) d += " at " + site;
    return d;
  }
};

// Bytes of inline data per rank and round for a channel of `size` ranks:
// kInlineBudget between 2, halved per exchange of the round after the first.
inline int64_t inline_budget(int size) {
  int64_t b = kInlineBudget;
  for (int reach = 2; reach < size; reach *= 2) b /= 2;
  return b;
}

// MPI's datatype and reduction for a dtype and a ReduceOp.
MPI_Datatype mpi_type(DType dt);
MPI_Op mpi_op(ReduceOp op);

// An MPI count or displacement (`unit`: what it counts), which must fit an int.
int checked_int(int64_t v, const char* op, const char* unit = "bytes");

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

  std::pair<int, int> world();

  // Runs op among the members of group `group` (0: the world).
  Future<Value> submit(OpPtr op, int group = 0);

  // Makes group `id` (ids count up from 1 in the order groups are made, the
  // same on every rank): this rank's group named `name` of world ranks
  // `members` (in group rank order, this rank among them). Every rank must
  // call it, in the same order (MPI_Comm_split); a group of one member gets
  // no communicators. Throws runtime_error if MPI fails.
  void add_group(int id, const std::string& name, const std::vector<int>& members);

  // The wait helper (future.hpp). A thread waiting at the boundary is
  // registered from its HelpCall::enter to its HelpCall::leave and polls all
  // that time except while it runs the program on from a completion. While
  // one has polled in the last kPollerAway the progress thread stays away;
  // while one is registered the progress thread leaves the completions it
  // makes to it (its next poll runs them), so a program's chain of
  // collectives stays on that thread instead of hopping to a worker. When
  // the last one leaves with work in flight, the progress thread takes over
  // at once.
  int wait_help(tessera::detail::HelpCall call);

  // One progress pass unless another thread is making one. Returns
  // kHelpIdle (future.hpp) when nothing is in flight, kHelpProgressed when
  // it completed operations here, else kHelpBusy, or kHelpBusyYielded when
  // the thread gave its core up meanwhile (another thread held the engine,
  // or MPI yielded polling: mpi_yields_).
  int help(bool complete_here = true);

  void mark_failed() { failed_ = true; }

  // Whether this rank has been told (or noticed) that another one failed.
  bool peer_failure_known() const { return peer_failed_.load(std::memory_order_acquire); }

  // When this rank knows of another's failure and is about to end: waits
  // until a second after it learned of it. The first rank to end makes
  // mpirun stop the rest, so the ranks told at about the same time (by this
  // rank's notice, or by their own watch) get the time to print their
  // errors, and every healthy rank says what happened. At once otherwise.
  void linger_after_peer_failure();

  void set_coalescing(bool on) { coalesce_.store(on); }

  void stop();

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
  void defer(std::vector<Completion>& done);

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

  void run();

  std::string check_same_program();

  // Waiting threads yield their core between polls when this host's ranks
  // outnumber the cores this rank may run on (TESSERA_WAIT: auto, the
  // default; spin or yield force a mode). Returns an error message, or "".
  std::string choose_wait_mode();
  int host_ranks_ = 1, cores_ = 1;
  double host_load_ = 0;  // the host's 1-minute load average when the job started
  // Whether MPI's own progress gives the core up (sched_yield) when a poll
  // finds nothing: Open MPI's mpi_yield_when_idle, which mpirun sets when
  // ranks outnumber the slots (read by MPI_T at start-up; false when MPI
  // has no such setting). A poll of MPI work in flight has then yielded
  // already, and a waiting thread in yield mode does not yield again (help,
  // loop): two yields per poll halve how often it looks for a step's message.
  bool mpi_yields_ = false;
  // Set by each pass (under mu_): MPI operations are still in flight after
  // it, so its last MPI calls polled them and found them unfinished.
  bool mpi_in_flight_ = false;
  // A poll that left MPI work in flight gave the core up inside MPI.
  bool yielded_in_mpi() const { return mpi_yields_ && mpi_in_flight_; }
  static bool yield_waits() {
    return tessera::detail::wait_mode() == tessera::detail::WaitMode::yield;
  }

  void loop();

  // After the program: tells the other ranks this one has finished (so a
  // rank waiting for a collective this one never calls gets an error, not a
  // hang) and waits until every rank has. Returns false if that failed.
  bool finish();
  bool finish(Channel& ch);

  // One pass: posts new work, tests what is in flight, advances what
  // completed. Requires mu_. Returns true if anything changed. A pass made
  // right after a submission (may_defer_round) starts no round while other
  // ranks have offered operations this one has not issued yet: its program
  // is about to issue them, and they then go in one round together (and
  // are coalesced) instead of one round each, paced by this rank. The next
  // pass of a waiting thread or of the progress thread starts it anyway.
  bool pass(std::vector<Completion>& done, bool may_defer_round = false);

  template <class F>
  void guarded(const OpPtr& op, std::vector<Completion>& done, F&& fn) {
    try {
      fn();
    } catch (...) {
      active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
      fail(op, std::current_exception(), done);
    }
  }

  static void fail(const OpPtr& op, std::exception_ptr e, std::vector<Completion>& done);

  void set_broken(const std::string& msg);

  void check(int rc, const char* name, const char* call);

  // Offers the oldest pending operations (by sequence number) to the others.
  // The block is written straight into the round's reused buffer: header,
  // entries, then the inline data.
  void guarded_round(Channel& ch, std::vector<Completion>& done);

  void fail_all_pending(const std::string& msg, std::vector<Completion>& done);

  // The cached agreement (agree.cpp). Once a round found every member
  // offering the same entries, the next round first all-reduces a 40-byte
  // CachedAgreement of this rank's offer (the block guarded_round built):
  // if every member's fingerprint is the same, what was offered runs at once
  // (a single small all-reduce's result comes with the fingerprint);
  // otherwise the round goes on as a full exchange of the same block
  // (resolve), with today's precise errors. Every member takes the same
  // path: they decide from the same data. TESSERA_AGREE_CACHE=0 turns it off.
  // `offer`: the header and entries of this rank's block (finished: the
  // last round of finish(), which offers nothing).
  void start_cached(Channel& ch, const char* offer, size_t offer_bytes, bool finished);
  // Tests the cached round's all-reduce; on a hit runs the offer, on a miss
  // starts the full exchange. Returns true if anything changed.
  bool progress_cached(Channel& ch, std::vector<Completion>& done);
  // Whether this rank's offer holds an inline sum of floats among 3 or more
  // ranks that the cached round's message cannot carry (several, or more
  // than kCachedValueBytes): those take the full round.
  static bool order_sensitive(const Channel& ch);
  // After a full exchange: whether every member offered the same entries.
  static bool offers_identical(const Channel& ch);
  // The cached round's all-reduce: posts its current step; advances it as
  // far as messages allow, true once done (then cached_all holds the result).
  void post_cached_step(Channel& ch);
  bool advance_cached(Channel& ch);
  // Speculation: when this rank offers an all-reduce that runs by halving
  // or doubling (the first such), the round's messages carry its fold and
  // reduce-scatter (the same partners, in the same order), so a hit goes on
  // with the all-gather only: 2 log2 N messages in all instead of 3 log2 N.
  // A miss drops what was reduced; the full round then runs it afresh.
  void start_speculation(Channel& ch);
  void reduce_speculated(Channel& ch, const Step& s);
  void end_speculation(Channel& ch);
  // After a hit: the all-reduce goes on from its first step not carried.
  void continue_speculated(Channel& ch, const OpPtr& op, std::vector<Completion>& done);
  const bool agree_cache_ = [] {
    const char* env = std::getenv("TESSERA_AGREE_CACHE");
    return !env || std::string(env) != "0";
  }();

  // What every rank offered runs; fingerprints must agree. Returns how many
  // operations were agreed (or found to disagree).
  size_t resolve(Channel& ch, std::vector<Completion>& done);

  // What the other ranks offered in this round and this one has not issued
  // yet (the channel's pending holds everything it issued and has not
  // completed).
  void note_expected(Channel& ch);

  static constexpr size_t kNotFound = ~size_t{0};

  // Ranks that each wait for a collective no other rank offers (they call
  // collectives at different source positions: rank-specific program
  // texts, say) fail with the mismatch error naming every rank's oldest
  // collective once their rounds have agreed on nothing for this long while
  // no member ran a task (one computing may yet offer the collective the
  // others wait for), instead of at the collective timeout (resolve).
  static constexpr std::chrono::seconds kUnmatchedDelay{3};
  // The rounds of `ch` agreed on nothing although every member offered:
  // fails every member's oldest collective with the diagnostics exchange.
  bool fail_unmatched(Channel& ch, std::vector<Completion>& done);

  // Where rank r offered the operation of `e` (its site and key), or
  // kNotFound. Ranks usually offer in the same order: the entry at `hint`
  // (just after the last one found) is tried first, then an index of that
  // rank's entries is built once per round.
  size_t find_entry(Channel& ch, int r, const Entry& e, size_t hint);

  // The reduction of every rank's inline data, in rank order: the same bits
  // on every rank.
  Array reduce_in_rank_order(const Op& op, const char* const* data) const;

  // Posts the agreed operations in order; runs of small all-reduces of the
  // same dtype and reduction become one message.
  void post_agreed(const std::vector<OpPtr>& agreed, std::vector<Completion>& done);

  static bool fusable(const Op& op) { return op.kind == Kind::all_reduce && op.x.nbytes() <= kCoalesceMaxBytes; }

  void post_coalesced(const OpPtr& group);

  // The algorithm of an all-reduce of x (or a coalesced group) on ch that
  // does not travel inline (algorithms.hpp: choose_algorithm).
  Algorithm algorithm_for(const Channel& ch, const Array& x) const {
    if (ch.size <= 1) return Algorithm::mpi;
    return choose_algorithm(algorithm_, ch.size, static_cast<int64_t>(x.nbytes()), x.size(),
                            ch.hosts);
  }

  // An all-reduce of op->x into op->out by `a` (not mpi) over point-to-point
  // messages on its channel's data_comm (which carries no other
  // point-to-point traffic): the steps of schedule() (algorithms.hpp), each
  // posted when the one before completed. Every element is reduced once, in
  // an order fixed by the number of ranks and the algorithm, and then
  // copied: the same bits on every rank and in every run. The tag tells
  // concurrent ones apart: they are posted in the agreed order, the same on
  // every rank.
  void post_own(const OpPtr& op, Algorithm a);

  // For the hierarchical all-reduce: the host of each of comm's `size` ranks
  // (the lowest rank of comm sharing its memory, by MPI_Comm_split_type), or
  // with TESSERA_HOST_RANKS=k, hosts of k consecutive ranks (for tests on one
  // machine). Collective over comm; empty unless the setting is auto or hierarchical.
  // Throws invalid_argument for a TESSERA_HOST_RANKS that is not a positive integer.
  std::vector<int> host_map(MPI_Comm comm, int size) const;

  void post_step(const OpPtr& op);

  // A step's messages are done: reduce what came, then the next step, or
  // the result.
  void advance_own(const OpPtr& op, std::vector<Completion>& done);

  void post_diag(const OpPtr& op);

  void post_data(const OpPtr& op);

  // The second step of a scatter, once the root's shape is known. Posted in
  // the order the scatters were agreed (every rank the same), after their
  // first steps completed.
  void post_scatter_data(Channel& ch, std::vector<Completion>& done);

  void post_p2p(const OpPtr& op);

  // Polls every outstanding request; advances what completed.
  bool test_all(std::vector<Completion>& done);

  void advance(const OpPtr& op, std::vector<Completion>& done);

  std::string disagreement(const Op& op) const;

  // One array per rank from a contiguous byte buffer.
  std::vector<Array> unpack(const Op& op, const std::vector<Shape>& shapes, DType dt) const;

  Value result(Op& op) const;

  // What this rank waits for: posted operations (the members of coalesced
  // ones) and pending collectives, and their list for an error message.
  std::vector<OpPtr> waiting_ops() const;
  static std::string waiting_list(const std::vector<OpPtr>& waiting);

  // Fails `waiting` with `msg` and stops the engine; the buffers of posted
  // operations are kept (MPI may still write into them).
  // (value_error: the error is a ValueError, as for disagreeing fingerprints.)
  void abandon_waiting(const std::vector<OpPtr>& waiting, const std::string& msg,
                       std::vector<Completion>& done, bool value_error = false);

  void check_timeouts(std::vector<Completion>& done);

  // The mismatch check across groups. A collective on a group that has
  // waited kProbeDelay for its peers asks each of them (a small message on
  // probe_comm_) what it called as its same call of the same site (counted
  // over all groups: Op::site_calls); a peer that called it on another group
  // answers with its side, and both ranks fail with the usual mismatch error
  // naming both. Peers answer from the record of their last kHistory
  // collectives (history_).
  struct Probe {
    uint64_t site = 0, site_calls = 0;
    int32_t group = 0, mismatch = 0;  // mismatch: in a reply, the peer's side differs
    int32_t from = 0;                 // world rank of the sender
    char desc[kDescBytes] = {};       // the sender's side
  };
  struct Record {
    uint64_t site, site_calls;
    int group;
    const char* name;
    std::string desc;
  };
  static constexpr int kProbeTag = 1, kReplyTag = 2;
  static constexpr size_t kHistory = 1024;
  static constexpr std::chrono::milliseconds kProbeDelay{1000};
  void probe_stalled();
  // A rank with nothing to do answers probes too (every kIdleAnswer).
  void answer_probes_when_idle();
  static constexpr std::chrono::milliseconds kIdleAnswer{20};
  Clock::time_point last_idle_answer_{};
  void answer_probes(std::vector<Completion>& done);
  std::string mismatch_message(const char* name, int rank_a, const std::string& a, int rank_b,
                               const std::string& b) const;

  // Failure detection (heartbeat.hpp), started with the engine when there
  // are several ranks and TESSERA_FAILURE_TIMEOUT is not 0. Returns an error
  // message, or "".
  std::string start_heartbeat();
  // On the heartbeat thread: a rank was declared failed. Writes the marker
  // line for `tessera run` and the trace, and stops the engine: every
  // collective waited for (at the next pass) and every later one fails.
  void peer_failed(const PeerFailure& f);
  // On the heartbeat thread, when the program did not end after a failure.
  [[noreturn]] void give_up();
  // In a pass, once after peer_failed: fails what this rank waits for.
  void fail_on_peer_failure(std::vector<Completion>& done);

  // Guards submission (incoming_, keys, broken_, start-up state).
  std::mutex in_mu_;
  std::condition_variable cv_;
  bool started_ = false, init_done_ = false, stopping_ = false;
  std::string init_error_, broken_;
  bool init_value_error_ = false;  // init_error_ is a bad setting (ValueError)
  std::atomic<bool> groups_{false};  // a group of several members exists (add_group)
  std::atomic<bool> ready_{false};  // started without error: rank_ and size_ are set
  std::atomic<bool> failed_{false}, work_{false}, broken_flag_{false}, coalesce_{[] {
    const char* s = std::getenv("TESSERA_COALESCE");
    return !(s && std::string(s) == "0");
  }()};
  int rank_ = 0, size_ = 1;
  // TESSERA_ALLREDUCE (or TESSERA_RING=0), read at start-up (run()).
  AlgorithmSetting algorithm_;
  std::vector<OpPtr> incoming_;
  // Per site: collectives this rank called there (any group), and a record
  // of the last kHistory collectives (the mismatch probe's answers).
  std::map<uint64_t, uint64_t> site_calls_;
  std::deque<Record> history_;
  std::thread thread_;

  // Guards everything below and every MPI call after start-up.
  std::mutex mu_;
  MPI_Comm p2p_header_comm_ = MPI_COMM_NULL, p2p_data_comm_ = MPI_COMM_NULL,
           probe_comm_ = MPI_COMM_NULL;
  // The world (channels_[0]) and the groups of more than one member, in the
  // order they were made (channels_ changes under both locks; the
  // channels never move). channel_of_ maps a group id to its channel.
  std::vector<std::unique_ptr<Channel>> channels_;
  std::map<int, Channel*> channel_of_;
  uint64_t next_seq_ = 0;
  std::vector<OpPtr> active_, abandoned_;
  std::vector<OpPtr> fresh_;  // pass's take of incoming_ (swapped: both keep their capacity)
  // The mismatch probe's messages being sent (with their buffers).
  std::vector<std::pair<MPI_Request, std::unique_ptr<Probe>>> probe_sends_;
  std::vector<Completion> deferred_;
  // Threads waiting at the boundary (wait_help), and a count of their polls
  // (the progress thread compares it with what it saw kPollerAway earlier).
  std::atomic<int> registered_{0};
  std::atomic<uint64_t> polls_{0};
  uint64_t polls_seen_ = 0;  // the progress thread's
  // The progress thread's sleep after a poll that found nothing (loop()):
  // from kIdlePoll, doubled after each such poll up to kIdlePollMax while
  // no task runs, up to kBusyPollMax while tasks run.
  static constexpr std::chrono::microseconds kIdlePoll{20}, kIdlePollMax{160}, kBusyPollMax{500};
  std::chrono::microseconds idle_sleep_ = kIdlePoll;
  static constexpr std::chrono::microseconds kPollerAway{200};
  const bool debug_rounds_ = std::getenv("TESSERA_DEBUG_ROUNDS") != nullptr;
  uint64_t passes_ = 0;

  Heartbeat heartbeat_;
  // Set by peer_failed; peer_failure_ (under in_mu_) says which rank and why.
  std::atomic<bool> peer_failed_{false};
  std::chrono::steady_clock::time_point peer_failed_at_{};  // under in_mu_
  std::string peer_failure_;
  bool peer_failure_handled_ = false;  // fail_on_peer_failure ran (under mu_)
};

}  // namespace tessera::distributed::detail
