// The communication engine: start-up, submission, agreement rounds and the
// end of the program (see engine.hpp).
#include "tessera/distributed/engine.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::distributed::detail {

namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) { return fnv1a(s.data(), s.size(), h); }

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

// A rank ended by SIGTERM writes its trace first: that is how mpirun stops
// the healthy ranks when another one was killed or raised (and how the
// launcher stops a job). The handler only wakes a thread of its own, which
// writes the trace (nothing when none is recorded) and ends the process by
// the same signal. A handler the program installed itself is left alone.
// A rank that already knows of another's failure is about to say so (its
// collectives fail with the error that names the lost rank): mpirun stops
// the job as soon as the first healthy rank ends with that error, so the
// others get a moment to print theirs (mpirun's SIGKILL follows SIGTERM
// after 1 s, odls_base_sigkill_timeout).
int sigterm_pipe[2] = {-1, -1};

void on_sigterm(int) {
  char c = 1;
  ssize_t ignored = write(sigterm_pipe[1], &c, 1);
  (void)ignored;
}

void write_trace_on_sigterm() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old{};
    if (sigaction(SIGTERM, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
        old.sa_handler != SIG_DFL) {
      return;
    }
    if (pipe2(sigterm_pipe, O_CLOEXEC) != 0) return;
    std::thread([] {
      char c;
      while (read(sigterm_pipe[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (Engine::get().peer_failure_known())
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
      trace::write_before_abrupt_end();
      std::fflush(stdout);
      std::fflush(stderr);
      signal(SIGTERM, SIG_DFL);
      kill(getpid(), SIGTERM);
    }).detach();
    struct sigaction sa{};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, nullptr);
  });
}

// Whether MPI's progress gives the core up when a poll finds nothing
// (Open MPI's control variable mpi_yield_when_idle, through MPI_T; false if
// this MPI has none or it cannot be read).
bool mpi_progress_yields_when_idle() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
  bool yields = false;
  int index = 0;
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS) {
    char name[256], desc[256];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    MPI_T_cvar_handle handle;
    int count = 0, size = 0;
    if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &dt, &enumtype, desc, &desc_len,
                            &bind, &scope) == MPI_SUCCESS &&
        dt != MPI_DATATYPE_NULL && MPI_Type_size(dt, &size) == MPI_SUCCESS && size > 0 &&
        size <= 8 && MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      unsigned char value[8] = {};
      if (count == 1 && MPI_T_cvar_read(handle, value) == MPI_SUCCESS)
        yields = std::any_of(value, value + size, [](unsigned char b) { return b != 0; });
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return yields;
}

}  // namespace

std::pair<int, int> Engine::world() {
  // Every collective asks: after start-up, no lock.
  if (ready_.load(std::memory_order_acquire)) return {rank_, size_};
  std::unique_lock lock(in_mu_);
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { run(); });
    std::atexit([] { Engine::get().stop(); });
  }
  cv_.wait(lock, [&] { return init_done_; });
  if (!init_error_.empty() && init_value_error_) throw std::invalid_argument(init_error_);
  if (!init_error_.empty()) throw std::runtime_error(init_error_);
  return {rank_, size_};
}

Future<Value> Engine::submit(OpPtr op, int group) {
  world();
  Future<Value> f = op->promise.get_future();
  if (trace::on()) trace_op(*op, f);
  {
    std::lock_guard lock(in_mu_);
    if (!broken_.empty()) {
      std::string msg = peer_failed_.load()
                            ? error_message("[", op->name, "] ", peer_failure_)
                            : error_message("[", op->name, "] the communication engine of rank ",
                                            rank_, " stopped after an earlier error: ", broken_);
      op->promise.set_error(std::make_exception_ptr(std::runtime_error(msg)));
      return f;
    }
    auto ch = channel_of_.find(op->collective() ? group : 0);
    if (ch == channel_of_.end()) {
      // The primitives run groups of one member locally: only a bug gets here.
      op->promise.set_error(std::make_exception_ptr(std::logic_error(error_message(
          "[", op->name, "] rank ", rank_, " has no group ", group, " of several members"))));
      return f;
    }
    op->ch = ch->second;
    op->group = op->ch->id;
    if (op->collective()) {
      op->entry.key = op->ch->next_key[op->entry.site]++;
      op->site_calls = site_calls_[op->entry.site]++;
      // The record the mismatch probe answers from (only groups need it).
      if (channels_.size() > 1) {
        history_.push_back({op->entry.site, op->site_calls, op->group, op->name, op->desc()});
        if (history_.size() > kHistory) history_.pop_front();
      }
    }
    incoming_.push_back(std::move(op));
    work_.store(true, std::memory_order_release);
  }
  // Post it now instead of waiting for the progress thread to wake. The
  // caller may be inside a node's evaluation: results completed on the way
  // go to workers rather than running the program's continuations here.
  help(/*complete_here=*/false);
  // Only a worker wakes the progress thread: a thread that is not one runs
  // the program at the boundary and polls when it waits there, in either
  // wait mode (waking the progress thread would cost two context switches
  // per operation, and on a full machine a core), and a polling thread is
  // there already. The progress thread looks for work every millisecond anyway.
  if (registered_.load(std::memory_order_acquire) == 0 && in_worker()) cv_.notify_all();
  return f;
}

void Engine::stop() {
  {
    std::lock_guard lock(in_mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The program ended, but the job failed: the launcher names the rank
  // (peer_failed wrote the marker), this rank leaves with the status that
  // says so.
  if (peer_failed_.load()) {
    linger_after_peer_failure();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(kPeerFailedExitStatus);
  }
}

void Engine::linger_after_peer_failure() {
  if (!peer_failed_.load(std::memory_order_acquire)) return;
  std::chrono::steady_clock::time_point known;
  {
    std::lock_guard lock(in_mu_);
    known = peer_failed_at_;
  }
  std::this_thread::sleep_until(known + std::chrono::seconds(1));
}

void Engine::defer(std::vector<Completion>& done) {
  for (auto& c : done) deferred_.push_back(std::move(c));
  done.clear();
  work_.store(true, std::memory_order_release);
}

void Engine::run() {
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
  bool value_error = false;
  if (rc != MPI_SUCCESS) {
    init_error = "[locality] MPI_Init_thread failed: " + mpi_error(rc);
  } else {
    // MPI is called by one thread at a time (under mu_), so any level from
    // SERIALIZED up is safe.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // One communicator per kind of traffic, so that agreement rounds, data,
    // diagnostics, point-to-point messages and mismatch probes never match
    // each other.
    auto world_ch = std::make_unique<Channel>();
    world_ch->rank = rank_;
    world_ch->size = size_;
    world_ch->inline_budget = inline_budget(size_);
    for (MPI_Comm* c : {&world_ch->round_comm, &world_ch->data_comm, &world_ch->diag_comm,
                        &world_ch->agree_comm, &p2p_header_comm_, &p2p_data_comm_, &probe_comm_}) {
      MPI_Comm_dup(MPI_COMM_WORLD, c);
      MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    }
    // Named for tools (the PMPI counter of bench/pmpi reports per communicator).
    MPI_Comm_set_name(world_ch->round_comm, "tessera.round");
    MPI_Comm_set_name(world_ch->data_comm, "tessera.data");
    MPI_Comm_set_name(world_ch->diag_comm, "tessera.diag");
    MPI_Comm_set_name(p2p_header_comm_, "tessera.p2p_header");
    MPI_Comm_set_name(p2p_data_comm_, "tessera.p2p_data");
    MPI_Comm_set_name(probe_comm_, "tessera.probe");
    MPI_Comm_set_name(world_ch->agree_comm, "tessera.agree");
    {
      std::lock_guard lock(in_mu_);
      channel_of_[0] = world_ch.get();
      channels_.push_back(std::move(world_ch));
    }
    try {
      // TESSERA_RING=0 (the older switch) means MPI_Iallreduce throughout.
      const char* ring = std::getenv("TESSERA_RING");
      const char* choice = std::getenv("TESSERA_ALLREDUCE");
      algorithm_ = algorithm_setting(!choice && ring && std::string(ring) == "0" ? "mpi" : choice);
      channels_[0]->host_of = host_map(channels_[0]->data_comm, size_);
      channels_[0]->hosts = channels_[0]->host_of.empty() ? 1 : host_count(channels_[0]->host_of);
    } catch (const std::exception& e) {
      init_error = e.what();
      value_error = true;
    }
    if (init_error.empty()) init_error = check_same_program();
    if (init_error.empty()) {
      init_error = choose_wait_mode();
      value_error = !init_error.empty();
    }
    if (init_error.empty() && size_ > 1) init_error = start_heartbeat();
    if (size_ > 1) write_trace_on_sigterm();
  }
  {
    std::lock_guard lock(in_mu_);
    init_error_ = init_error;
    init_value_error_ = value_error;
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
  if (!failed_ && broken_.empty() && finish()) {
    MPI_Finalize();
    heartbeat_.goodbye();
  }
}

std::string Engine::choose_wait_mode() {
  // The ranks on this host (one shared-memory communicator per host) and
  // the cores they may run on: the union of their affinities (ranks bound
  // to a core each have one each; unbound ranks share all of them).
  cpu_set_t set;
  CPU_ZERO(&set);
  bool affinity = sched_getaffinity(0, sizeof set, &set) == 0;
  cores_ = affinity ? CPU_COUNT(&set)
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The host busy with other work before this job (the 1-minute load
  // average, which the job's own ranks, just started, have hardly raised, at
  // least the cores): a rank of a job sharing the cores with others is
  // descheduled while its peers wait for it, as when ranks outnumber cores
  // (six training tests, three of 2 ranks and three of 4, three at a time
  // on 2 cores: 116 s, 93 s with this). The host's ranks agree (the
  // largest load any of them read).
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  MPI_Comm host = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host) ==
      MPI_SUCCESS) {
    MPI_Comm_size(host, &host_ranks_);
    int all_affinity = 0, mine = affinity ? 1 : 0;
    MPI_Allreduce(&mine, &all_affinity, 1, MPI_INT, MPI_MIN, host);
    cpu_set_t all;
    CPU_ZERO(&all);
    if (all_affinity &&
        MPI_Allreduce(&set, &all, sizeof set, MPI_BYTE, MPI_BOR, host) == MPI_SUCCESS) {
      cores_ = CPU_COUNT(&all);
    }
    double mine_load = load;
    MPI_Allreduce(&mine_load, &load, 1, MPI_DOUBLE, MPI_MAX, host);
    MPI_Comm_free(&host);
  }
  host_load_ = load;
  // (Checked after the collective calls above, which every rank makes.)
  const char* env = std::getenv("TESSERA_WAIT");
  std::string mode = env && *env ? env : "auto";
  if (mode != "auto" && mode != "spin" && mode != "yield") {
    return error_message("[locality] TESSERA_WAIT must be auto, spin or yield, got '", mode,
                         "' (environment variable TESSERA_WAIT)");
  }
  // Every rank has a thread that waits for its collectives: more ranks than
  // cores means a polling waiter holds a core that a rank it waits for needs.
  bool yield = mode == "yield" ||
               (mode == "auto" && (host_ranks_ > cores_ || host_load_ >= cores_));
  mpi_yields_ = mpi_progress_yields_when_idle();
  tessera::detail::set_wait_mode(yield ? tessera::detail::WaitMode::yield
                                       : tessera::detail::WaitMode::spin);
  return "";
}

std::string Engine::check_same_program() {
  struct Identity {
    uint64_t hash;
    char shown[248];
  } mine{}, *all = nullptr;
  auto [hash, shown] = program_identity();
  // Settings every rank must share, or collectives would run different
  // schedules and wait for each other until the timeout.
  for (const char* var : {"TESSERA_ALLREDUCE", "TESSERA_RING", "TESSERA_HOST_RANKS"}) {
    if (const char* v = std::getenv(var)) {
      std::string setting = error_message(" (", var, "=", v, ")");
      hash = fnv1a(setting, hash);
      shown = setting.substr(1) + " " + shown;
    }
  }
  mine.hash = hash;
  std::strncpy(mine.shown, shown.c_str(), sizeof mine.shown - 1);
  // The same hash on every rank when the largest of the hashes and of their
  // complements give back one hash: 16 bytes all-reduced, whatever the
  // number of ranks; only when they differ is every rank's identity
  // gathered, to name them.
  uint64_t ends[2] = {hash, ~hash}, most[2] = {0, 0};
  if (MPI_Allreduce(ends, most, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return "";
  }
  if (most[0] == ~most[1]) return "";
  std::vector<Identity> ids(size_);
  all = ids.data();
  if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
    return "";
  }
  bool same = true;
  for (const Identity& id : ids) same = same && id.hash == ids[0].hash;
  if (same) return "";
  std::string msg = "[locality] the localities run different programs, arguments or settings:";
  for (int r = 0; r < size_; ++r) msg += error_message("\n  rank ", r, ": ", ids[r].shown);
  return msg;
}

bool Engine::finish() {
  // Every channel's last round at once: a rank still waiting for a
  // collective on one of them learns there that this one has finished,
  // whichever channel it waits on.
  OfferHeader mine;
  mine.finished = 1;
  auto deadline = Clock::now() + std::chrono::duration<double>(collective_timeout_seconds());
  enum class Step { start, cached, gather, send, done };
  std::vector<Step> steps(channels_.size(), Step::start);
  try {
    for (;;) {
      bool all_done = true;
      for (size_t i = 0; i < channels_.size(); ++i) {
        Channel& ch = *channels_[i];
        if (steps[i] == Step::start) {
          // The regular rounds' object: its posted receives match the other
          // ranks' next round, this one.
          ch.round.next_block(ch.rank, ch.size)
              .assign(reinterpret_cast<const char*>(&mine), sizeof mine);
          if (ch.try_cached) {
            // The others' next round starts with the cached agreement too:
            // this rank's fingerprint (finished) makes it miss unless every
            // member has finished.
            start_cached(ch, nullptr, 0, /*finished=*/true);
            steps[i] = Step::cached;
          } else {
            ch.round.start(ch.round_comm, ch.rank, ch.size);
            steps[i] = Step::gather;
          }
        }
        if (steps[i] == Step::cached) {
          if (advance_cached(ch)) {
            ch.try_cached = false;
            if (ch.cached_all.hit()) {
              ch.round.cancel_posted();  // every member has finished
              steps[i] = Step::done;
            } else {
              ch.round.start(ch.round_comm, ch.rank, ch.size);
              steps[i] = Step::gather;
            }
          }
        }
        if (steps[i] == Step::gather && ch.round.progress()) steps[i] = Step::send;
        if (steps[i] == Step::send) {
          // The sends must complete before their buffers go (and before
          // MPI_Finalize).
          ch.round.reap_sends();
          if (!ch.round.sending()) {
            bool all = true, work = false;
            for (const Bytes& b : ch.round.blocks()) {
              Offer o = parse_offer(b);
              all = all && o.finished;
              work = work || (!o.finished && !o.entries.empty());
            }
            // Another rank still offering work learns from this round that
            // this one has finished and fails. Finalizing leaves the report
            // of the failure to that rank (mpirun then ends the job).
            if (all || work) {
              ch.round.cancel_posted();
              steps[i] = Step::done;
            } else {
              steps[i] = Step::start;
            }
          }
        }
        all_done = all_done && steps[i] == Step::done;
      }
      if (all_done) return true;
      if (Clock::now() > deadline || broken_flag_.load()) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  } catch (const std::exception&) {
    return false;
  }
}

bool Engine::pass(std::vector<Completion>& done, bool may_defer_round) {
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
      Channel& ch = *op->ch;
      ch.pending.emplace(op->seq, op);
      auto id = std::make_pair(op->entry.site, op->entry.key);
      auto it = std::lower_bound(ch.expected.begin(), ch.expected.end(), id);
      if (it != ch.expected.end() && *it == id) ch.expected.erase(it);
    } else {
      guarded(op, done, [&] { post_p2p(op); });
    }
  }
  fresh.clear();
  if (peer_failed_.load(std::memory_order_acquire) && !peer_failure_handled_) {
    peer_failure_handled_ = true;
    fail_on_peer_failure(done);
    progressed = true;
  }
  bool groups = channels_.size() > 1;
  if (groups) {
    try {
      answer_probes(done);
    } catch (const std::exception& e) {
      fail_all_pending(e.what(), done);
    }
  }
  for (auto& chp : channels_) {
    Channel& ch = *chp;
    if (ch.cached_active) {
      try {
        progressed = progress_cached(ch, done) || progressed;
      } catch (const std::exception& e) {
        set_broken(e.what());
        fail_all_pending(e.what(), done);
      }
    }
    if (ch.round.active()) {
      try {
        // A round that agreed on nothing (ranks with different operations
        // pending) is not progress: the next one waits for the poll interval.
        if (ch.round.progress()) progressed = resolve(ch, done) > 0 || progressed;
      } catch (const std::exception& e) {
        set_broken(e.what());
        fail_all_pending(e.what(), done);
      }
    }
    bool defer = may_defer_round && !ch.expected.empty();
    if (!ch.round.active() && !ch.cached_active && !ch.pending.empty() && !broken_flag_.load() &&
        !defer)
      guarded_round(ch, done);
  }
  progressed = test_all(done) || progressed;
  if (++passes_ % 256 == 0) {
    check_timeouts(done);
    if (groups && !broken_flag_.load()) probe_stalled();
  }
  bool in_flight = !active_.empty();
  for (auto& ch : channels_) in_flight = in_flight || ch->round.active() || ch->cached_active;
  mpi_in_flight_ = in_flight;
  bool work = in_flight;
  for (auto& ch : channels_) work = work || !ch->pending.empty();
  {
    std::lock_guard lock(in_mu_);
    work = work || !incoming_.empty();
    work_.store(work, std::memory_order_release);
  }
  return progressed;
}

void Engine::fail(const OpPtr& op, std::exception_ptr e, std::vector<Completion>& done) {
  if (op->kind == Kind::coalesced) {
    for (auto& m : op->members) done.push_back({m->promise, Value(), e});
  } else {
    done.push_back({op->promise, Value(), e});
  }
}

void Engine::set_broken(const std::string& msg) {
  std::lock_guard lock(in_mu_);
  if (broken_.empty()) broken_ = msg;
  broken_flag_.store(true);
}

void Engine::check(int rc, const char* name, const char* call) {
  if (rc == MPI_SUCCESS) return;
  std::string msg = error_message("[", name, "] ", call, " failed on rank ", rank_, ": ", mpi_error(rc));
  set_broken(msg);
  throw std::runtime_error(msg);
}

void Engine::guarded_round(Channel& ch, std::vector<Completion>& done) {
  ch.offered.clear();
  int64_t data_bytes = 0;
  for (auto& [k, op] : ch.pending) {
    if (static_cast<int>(ch.offered.size()) == kRoundEntries) break;
    int64_t n = op->x.nbytes();
    // Small all-reduces carry their data, oldest first, up to the round's
    // budget, every time they are offered: when one rank runs ahead, its
    // rounds offer many and the other's one at a time, and each round then
    // agrees on the oldest, which still completes in its round instead of
    // taking a separate collective.
    op->inline_now =
        op->kind == Kind::all_reduce && n <= ch.inline_budget && data_bytes + n <= ch.inline_budget;
    if (op->inline_now) data_bytes += n;
    ch.offered.push_back(op);
    op->offered = true;
  }
  OfferHeader h;
  h.count = static_cast<int32_t>(ch.offered.size());
  if (ch.unmatched_since) {
    if (tasks_outstanding() > 0 || tasks_spawned() != ch.unmatched_spawned) {
      // Still computing: what it computes may offer what the others wait for.
      ch.unmatched_since = Clock::now();
      ch.unmatched_spawned = tasks_spawned();
    } else if (Clock::now() - *ch.unmatched_since >= kUnmatchedDelay) {
      h.finished |= OfferHeader::kStalled;
    }
  }
  Bytes& block = ch.round.next_block(ch.rank, ch.size);
  size_t entries_at = sizeof h, data_at = entries_at + sizeof(Entry) * ch.offered.size();
  block.reset(data_at + static_cast<size_t>(data_bytes));
  std::memcpy(block.data(), &h, sizeof h);
  for (size_t i = 0; i < ch.offered.size(); ++i) {
    const Op& op = *ch.offered[i];
    Entry e = op.entry;
    if (op.inline_now) {
      e.inline_bytes = op.x.nbytes();
      if (e.inline_bytes) std::memcpy(block.data() + data_at, op.x.raw(), e.inline_bytes);
      data_at += e.inline_bytes;
    }
    std::memcpy(block.data() + entries_at + sizeof(Entry) * i, &e, sizeof e);
  }
  try {
    if (ch.try_cached) {
      start_cached(ch, block.data(), entries_at + sizeof(Entry) * ch.offered.size(), false);
      progress_cached(ch, done);
      return;
    }
    ch.round.start(ch.round_comm, ch.rank, ch.size);
    if (ch.round.progress()) resolve(ch, done);
  } catch (const std::exception& e) {
    set_broken(e.what());
    fail_all_pending(e.what(), done);
  }
}

void Engine::fail_all_pending(const std::string& msg, std::vector<Completion>& done) {
  auto e = std::make_exception_ptr(std::runtime_error(msg));
  for (auto& ch : channels_) {
    for (auto& [k, op] : ch->pending) fail(op, e, done);
    ch->pending.clear();
  }
}

size_t Engine::resolve(Channel& ch, std::vector<Completion>& done) {
  // Scratch space reused from round to round: a round runs per collective.
  ch.offers.resize(ch.size);
  for (int r = 0; r < ch.size; ++r) parse_offer(ch.round.blocks()[r], ch.offers[r]);
  std::vector<Offer>& offers = ch.offers;
  // Every member offered the same: the next round tries the cached agreement.
  // (Not after a round of inline float sums among 3 or more ranks that a
  // cached round cannot carry: the next like it would miss, see
  // start_cached.)
  // (Between 2 ranks the full exchange is one message of the offer, already
  // of constant size, and cheaper than an all-reduce with an operation of
  // tessera's: measured 0.9 against 1.7 µs per 8-byte all-reduce.)
  ch.try_cached = agree_cache_ && ch.size > 2 && offers_identical(ch) && !order_sensitive(ch);
  note_expected(ch);
  ch.candidates.clear();
  ch.candidate_data.clear();
  ch.index.resize(ch.size);
  for (auto& index : ch.index) index.clear();
  ch.cursor.assign(ch.size, 0);
  for (const OpPtr& op : ch.offered) {
    Candidate c{op, true, true, ch.candidate_data.size()};
    ch.candidate_data.resize(ch.candidate_data.size() + ch.size, nullptr);
    // Every rank's extent along the free axis travels in its entry.
    bool extents = op->kind == Kind::all_gather || op->kind == Kind::gather || op->kind == Kind::all_to_all;
    if (extents) op->extents.assign(ch.size, 0);
    bool everywhere = true;
    for (int r = 0; r < ch.size && everywhere; ++r) {
      size_t at = find_entry(ch, r, op->entry, ch.cursor[r]);
      everywhere = at != kNotFound;
      if (!everywhere) break;
      ch.cursor[r] = at + 1;
      const Entry& found = offers[r].entries[at];
      ch.candidate_data[c.data_at + r] = offers[r].data[at];
      if (extents) op->extents[r] = found.extent;
      c.same = c.same && found.hash == op->entry.hash;
      c.inline_everywhere = c.inline_everywhere && found.inline_bytes == static_cast<int64_t>(op->x.nbytes());
    }
    if (!everywhere) {
      ch.candidate_data.resize(c.data_at);
      continue;
    }
    ch.candidates.push_back(c);
  }
  ch.offered.clear();
  // Every rank derives the same order from the same round.
  std::sort(ch.candidates.begin(), ch.candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.op->entry.key, a.op->entry.site) < std::tie(b.op->entry.key, b.op->entry.site);
  });
  if (!ch.candidates.empty()) {
    ch.unmatched_since.reset();
  } else if (fail_unmatched(ch, done)) {
    return 1;
  }
  // Without coalescing, one operation per round (the others wait and are
  // offered again, so each runs as its own exchange or MPI operation).
  if (!coalesce_.load() && ch.candidates.size() > 1) ch.candidates.resize(1);
  ch.agreed.clear();
  ch.disagreed.clear();
  size_t inline_done = 0;
  for (Candidate& c : ch.candidates) {
    ch.pending.erase(c.op->seq);
    if (c.same && c.inline_everywhere && c.op->kind == Kind::all_reduce) {
      done.push_back({c.op->promise,
                      Value(reduce_in_rank_order(*c.op, &ch.candidate_data[c.data_at])), nullptr});
      ++inline_done;
    } else {
      (c.same ? ch.agreed : ch.disagreed).push_back(c.op);
    }
    c.op = nullptr;
  }
  size_t agreed_count = ch.candidates.size();
  if (debug_rounds_) {
    std::fprintf(stderr, "[rank %d] round: offered %zu, agreed %zu (%zu inline), pending %zu\n",
                 rank_, offers[ch.rank].entries.size(), agreed_count, inline_done,
                 ch.pending.size());
  }
  for (auto& op : ch.disagreed) guarded(op, done, [&] { post_diag(op); });
  post_agreed(ch.agreed, done);
  ch.agreed.clear();
  ch.disagreed.clear();
  for (int r = 0; r < ch.size; ++r) {
    if (offers[r].finished && !ch.pending.empty()) {
      std::string msg;
      if (ch.pending.size() == 1) {
        const Op& op = *ch.pending.begin()->second;
        msg = error_message("[", op.name, "] rank ", ch.world_rank(r),
                            " finished its program without calling ", op.desc(), " (which rank ",
                            rank_, " waits for)");
      } else {
        msg = error_message("[", ch.pending.begin()->second->name, "] rank ", ch.world_rank(r),
                            " finished its program without ",
                            "calling these collectives, which rank ", rank_, " waits for:");
        for (auto& [k, op] : ch.pending) msg += "\n  " + op->desc();
      }
      set_broken(msg);
      fail_all_pending(msg, done);
      break;
    }
  }
  return agreed_count;
}

bool Engine::fail_unmatched(Channel& ch, std::vector<Completion>& done) {
  bool all_offer = true, stalled = false;
  for (const Offer& o : ch.offers) {
    all_offer = all_offer && !o.finished && !o.entries.empty();
    stalled = stalled || o.stalled;
  }
  if (!all_offer) {
    ch.unmatched_since.reset();
    return false;
  }
  if (!ch.unmatched_since) {
    ch.unmatched_since = Clock::now();
    ch.unmatched_spawned = tasks_spawned();
  }
  // Every member decides from the same round: all post the diagnostics
  // exchange of their oldest collective together.
  if (!stalled || ch.pending.empty()) return false;
  ch.unmatched_since.reset();
  OpPtr op = ch.pending.begin()->second;
  ch.pending.erase(ch.pending.begin());
  op->unmatched = true;
  guarded(op, done, [&] { post_diag(op); });
  return true;
}

void Engine::note_expected(Channel& ch) {
  ch.mine.clear();
  for (auto& [k, op] : ch.pending) ch.mine.push_back({op->entry.site, op->entry.key});
  std::sort(ch.mine.begin(), ch.mine.end());
  ch.expected.clear();
  for (int r = 0; r < ch.size; ++r) {
    if (r == ch.rank) continue;
    for (const Entry& e : ch.offers[r].entries) {
      auto id = std::make_pair(e.site, e.key);
      if (!std::binary_search(ch.mine.begin(), ch.mine.end(), id)) ch.expected.push_back(id);
    }
  }
  std::sort(ch.expected.begin(), ch.expected.end());
  ch.expected.erase(std::unique(ch.expected.begin(), ch.expected.end()), ch.expected.end());
}

size_t Engine::find_entry(Channel& ch, int r, const Entry& e, size_t hint) {
  const std::vector<Entry>& entries = ch.offers[r].entries;
  if (hint < entries.size() && entries[hint].site == e.site && entries[hint].key == e.key) return hint;
  auto& index = ch.index[r];
  if (index.empty() && !entries.empty()) {
    for (size_t i = 0; i < entries.size(); ++i) index.push_back({entries[i].site, entries[i].key, i});
    std::sort(index.begin(), index.end());
  }
  auto it = std::lower_bound(index.begin(), index.end(), std::make_tuple(e.site, e.key, size_t{0}));
  if (it == index.end() || std::get<0>(*it) != e.site || std::get<1>(*it) != e.key) return kNotFound;
  return std::get<2>(*it);
}

}  // namespace tessera::distributed::detail
