// The communication engine's progress: posting MPI operations, polling them,
// advancing what completed, the progress thread, timeouts (see engine.hpp).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tessera/distributed/engine.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::distributed::detail {

namespace {

// How long the progress thread stays away from a registered poller that
// polled since it last looked, when ranks outnumber cores (WaitMode::yield;
// else Engine::kPollerAway).
constexpr std::chrono::microseconds kPollerAwayYielding{2000};

}  // namespace

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

int checked_int(int64_t v, const char* op, const char* unit) {
  if (v > 2147483647) {
    throw std::invalid_argument(error_message("[", op, "] message of ", v, " ", unit,
                                              " is larger than MPI's count limit of 2147483647"));
  }
  return static_cast<int>(v);
}

int Engine::wait_help(tessera::detail::HelpCall call) {
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

int Engine::help(bool complete_here) {
  using tessera::detail::kHelpBusy, tessera::detail::kHelpBusyYielded, tessera::detail::kHelpIdle,
      tessera::detail::kHelpProgressed;
  if (!work_.load(std::memory_order_acquire)) return kHelpIdle;
  if (complete_here) polls_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    std::this_thread::yield();
    return kHelpBusyYielded;
  }
  // A list from this thread's pool (completions below may help again,
  // nested): no allocation per pass once warm.
  CompletionList list;
  std::vector<Completion>& done = list.items;
  pass(done, /*may_defer_round=*/!complete_here);
  bool yielded = yielded_in_mpi();
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
  if (!work_.load(std::memory_order_acquire)) return kHelpIdle;
  return yielded ? kHelpBusyYielded : kHelpBusy;
}

void Engine::loop() {
  using namespace std::chrono;
  // When ranks outnumber cores this thread yields between empty polls for
  // kYieldAfterProgress after its last progress (the steps of a round),
  // then sleeps as it does otherwise (a long wait: a pipeline stage in its
  // bubble, a rank waiting for a slower one).
  constexpr microseconds kYieldAfterProgress{2000};
  steady_clock::time_point last_progress{};
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
        // Ranks outnumbering cores, a poller that yields may not run again
        // for a time slice: looking every kPollerAway would only add
        // context switches.
        cv_.wait_for(lock, yield_waits() ? kPollerAwayYielding : kPollerAway,
                     [&] { return stopping_ || registered_.load(std::memory_order_acquire) == 0; });
        continue;
      }
    }
    {
      std::unique_lock lock(in_mu_);
      // Submissions from a helping thread do not notify (submit): look
      // for work every millisecond as well.
      cv_.wait_for(lock, std::chrono::milliseconds(1), [&] { return stopping_ || work_.load(); });
      if (!stopping_ && !work_.load()) {
        lock.unlock();
        answer_probes_when_idle();
        continue;
      }
      if (stopping_ && !work_.load()) return;
      if (stopping_ && !broken_.empty()) return;
    }
    bool progressed = false, yielded = false;
    {
      std::unique_lock lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        std::vector<Completion> done;
        progressed = pass(done);
        yielded = yielded_in_mpi();
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
    // poll would slow down the tasks computing on the cores), twice as long
    // after each poll that found nothing: up to kIdlePollMax while no task
    // runs, up to kBusyPollMax while tasks run. No task running is a
    // locality waiting for a message or a collective: the thread waiting
    // at the boundary polls itself for its first kWaitHelpSeconds, so this
    // thread's polls only serve longer waits (a pipeline stage in its
    // bubble), where polling every 20 µs took ~40% of a core from the
    // other localities computing on it (a rank waiting 3 s for a recv:
    // 1.28 s of CPU), against a few percent with the backoff. Each poll then takes a core from
    // a task for two context switches: with a poll every 20 µs, a 16 MiB
    // all-reduce beside ~56 ms of products took 2.4-17.6 ms (median 5.2)
    // more than the two one after the other, with the backoff 1.4-6.5 ms
    // (median 2.9; four launches each in turn, docs/benchmarks.md). A step
    // of communication that completes meanwhile waits at most
    // kBusyPollMax for its next poll.
    if (progressed) {
      idle_sleep_ = kIdlePoll;
      last_progress = steady_clock::now();
    } else if (yield_waits() && steady_clock::now() - last_progress < kYieldAfterProgress) {
      // Ranks outnumber cores: this thread (and any waiter polling for
      // its own results) gives its core to the other ranks between polls,
      // and polls again as soon as the scheduler comes back to it (a
      // sleep would add the timer's latency to every step of a round).
      // Only for a while after the last progress: a thread that yields is
      // always runnable, so through a long wait (a pipeline stage in its
      // bubble: the last of 4 stages on 2 cores waits for most of a step)
      // it took a turn of the run queue, and the cache, from the ranks
      // computing on its core at every scheduling point; it sleeps then.
      // (Not twice: MPI's poll may have given the core up already.)
      if (!yielded) sched_yield();
    } else {
      std::this_thread::sleep_for(idle_sleep_);
      idle_sleep_ = std::min(idle_sleep_ * 2, tasks_outstanding() > 0 ? kBusyPollMax : kIdlePollMax);
    }
  }
}

void Engine::post_diag(const OpPtr& op) {
  op->stage = Stage::diag;
  std::string d = op->desc();
  op->diag_send.assign(kDescBytes, '\0');
  std::memcpy(op->diag_send.data(), d.data(), std::min<size_t>(d.size(), kDescBytes - 1));
  op->diag_recv.assign(static_cast<size_t>(kDescBytes) * op->ch->size, '\0');
  op->reqs.assign(1, MPI_REQUEST_NULL);
  check(MPI_Iallgather(op->diag_send.data(), kDescBytes, MPI_CHAR, op->diag_recv.data(), kDescBytes,
                       MPI_CHAR, op->ch->diag_comm, &op->reqs[0]),
        op->name, "MPI_Iallgather");
  active_.push_back(op);
}

void Engine::post_data(const OpPtr& op) {
  op->stage = Stage::data;
  op->reqs.assign(1, MPI_REQUEST_NULL);
  MPI_Request* req = &op->reqs[0];
  Channel& ch = *op->ch;
  MPI_Comm comm = ch.data_comm;
  const Array& x = op->x;
  DType dt = x.dtype();
  const char* name = op->name;
  switch (op->kind) {
    case Kind::all_reduce: {
      if (Algorithm a = algorithm_for(ch, x); a != Algorithm::mpi) {
        post_own(op, a);
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
      op->out = ch.rank == op->root ? x : Array(dt, x.shape());
      check(MPI_Ibcast(op->out.raw(), checked_int(x.nbytes(), name), MPI_BYTE, op->root, comm, req), name,
            "MPI_Ibcast");
      break;
    }
    case Kind::all_gather:
    case Kind::gather: {
      bool receives = op->kind == Kind::all_gather || ch.rank == op->root;
      int64_t total = 0;
      op->rcounts.assign(ch.size, 0);
      op->rdispls.assign(ch.size, 0);
      for (int i = 0; i < ch.size; ++i) {
        Shape s = x.shape();
        s[op->free_axis] = op->extents[i];
        int64_t bytes = shape_size(s) * static_cast<int64_t>(dtype_size(dt));
        op->rcounts[i] = checked_int(bytes, name);
        op->rdispls[i] = checked_int(total, name);
        total += bytes;
      }
      // Along axis 0 the parts lie one after the other in the joined array:
      // received there, with no copy of each part and no join afterwards
      // (ZeRO-3 gathers every bucket twice per step).
      op->gathered_in_out = op->kind == Kind::all_gather && op->free_axis == 0 && total > 0;
      char* into = nullptr;
      if (op->gathered_in_out) {
        Shape whole = x.shape();
        whole[0] = 0;
        for (int i = 0; i < ch.size; ++i) whole[0] += op->extents[i];
        op->out = Array(dt, whole);
        into = static_cast<char*>(op->out.raw());
      } else if (receives) {
        op->recv_bytes.resize(static_cast<size_t>(total) + 1);
        into = op->recv_bytes.data();
      }
      int sendn = checked_int(x.nbytes(), name);
      if (op->kind == Kind::all_gather) {
        check(MPI_Iallgatherv(x.raw(), sendn, MPI_BYTE, into, op->rcounts.data(),
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
      std::vector<int64_t> rows = split_counts(s[0], ch.size);
      int64_t per_row = x.size() / std::max<int64_t>(s[0], 1);
      op->rcounts.resize(ch.size);
      for (int i = 0; i < ch.size; ++i)
        op->rcounts[i] = checked_int(rows[i] * per_row, name, "elements");
      s[0] = rows[ch.rank];
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
      op->scounts.assign(ch.size, 0);
      op->sdispls.assign(ch.size, 0);
      op->rcounts.assign(ch.size, 0);
      op->rdispls.assign(ch.size, 0);
      std::vector<int64_t> mine = split_counts(x.shape()[0], ch.size);
      int64_t rb = row_bytes(dt, x.shape());
      int64_t off = 0;
      for (int j = 0; j < ch.size; ++j) {
        op->scounts[j] = checked_int(mine[j] * rb, name);
        op->sdispls[j] = checked_int(off, name);
        off += mine[j] * rb;
      }
      int64_t total = 0;
      for (int j = 0; j < ch.size; ++j) {
        int64_t bytes = split_counts(op->extents[j], ch.size)[ch.rank] * rb;
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
  if (op->kind == Kind::scatter) ch.scatters.push_back(op);
}

void Engine::post_scatter_data(Channel& ch, std::vector<Completion>& done) {
  while (!ch.scatters.empty() && ch.scatters.front()->stage == Stage::data) {
    OpPtr op = ch.scatters.front();
    ch.scatters.pop_front();
    guarded(op, done, [&] {
      const char* name = op->name;
      DType rdt = static_cast<DType>(op->header[0]);
      int ndim = static_cast<int>(op->header[1]);
      Shape s(op->header + 2, op->header + 2 + ndim);
      std::vector<int64_t> rows = split_counts(s[0], ch.size);
      int64_t rb = row_bytes(rdt, s);
      op->scounts.resize(ch.size);
      op->sdispls.resize(ch.size);
      int64_t off = 0;
      for (int i = 0; i < ch.size; ++i) {
        op->scounts[i] = checked_int(rows[i] * rb, name);
        op->sdispls[i] = checked_int(off, name);
        off += rows[i] * rb;
      }
      s[0] = rows[ch.rank];
      op->out = Array(rdt, s);
      bool is_root = ch.rank == op->root;
      op->reqs.assign(1, MPI_REQUEST_NULL);
      check(MPI_Iscatterv(is_root ? op->x.raw() : nullptr, op->scounts.data(), op->sdispls.data(),
                          MPI_BYTE, op->out.raw(), op->scounts[ch.rank], MPI_BYTE, op->root,
                          ch.data_comm, &op->reqs[0]),
            name, "MPI_Iscatterv");
      op->stage = Stage::header;  // marks "second step posted"
      active_.push_back(op);
    });
  }
}

void Engine::post_p2p(const OpPtr& op) {
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

bool Engine::test_all(std::vector<Completion>& done) {
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
  for (auto& ch : channels_) post_scatter_data(*ch, done);
  return true;
}

void Engine::advance(const OpPtr& op, std::vector<Completion>& done) {
  switch (op->stage) {
    case Stage::ring:
      advance_own(op, done);
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

std::string Engine::disagreement(const Op& op) const {
  std::string msg = "[" + std::string(op.name) + "] ranks disagree on the collective: ";
  for (int i = 0; i < op.ch->size; ++i) {
    std::string d(op.diag_recv.data() + static_cast<size_t>(i) * kDescBytes);
    msg += error_message(i ? ", " : "", "rank ", op.ch->world_rank(i), " has ", d);
  }
  if (op.unmatched) {
    msg += error_message(" (each waited ", Engine::kUnmatchedDelay.count(),
                         " s for a collective no other rank called at its source position: do "
                         "the ranks run different program texts?)");
  }
  return msg;
}

std::vector<Array> Engine::unpack(const Op& op, const std::vector<Shape>& shapes, DType dt) const {
  std::vector<Array> parts;
  for (int i = 0; i < op.ch->size; ++i) {
    Array a(dt, shapes[i]);
    if (a.nbytes()) std::memcpy(a.raw(), op.recv_bytes.data() + op.rdispls[i], a.nbytes());
    parts.push_back(std::move(a));
  }
  return parts;
}

Value Engine::result(Op& op) const {
  DType dt = op.x.dtype();
  switch (op.kind) {
    case Kind::all_gather:
    case Kind::gather:
    case Kind::all_to_all: {
      if (op.kind == Kind::gather && op.ch->rank != op.root) return Value();
      std::vector<Shape> shapes;
      for (int r = 0; r < op.ch->size; ++r) {
        Shape s = op.x.shape();
        if (op.kind == Kind::all_to_all) {
          s[0] = split_counts(op.extents[r], op.ch->size)[op.ch->rank];
        } else {
          s[op.free_axis] = op.extents[r];
        }
        shapes.push_back(s);
      }
      List out;
      if (op.gathered_in_out) {
        // Views of the joined array, in order (collectives.cpp, concatenated).
        // The operation lets go of it: its parts' users alone keep it.
        Array joined = std::move(op.out);
        int64_t at = 0;
        for (const Shape& s : shapes) {
          std::vector<int64_t> strides(s.size(), 1);
          for (int k = static_cast<int>(s.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * s[k + 1];
          out.push_back(Value(Array::view(joined, s, strides, at)));
          at += shape_size(s);
        }
        return Value(std::move(out));
      }
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

std::vector<OpPtr> Engine::waiting_ops() const {
  std::vector<OpPtr> waiting;
  for (auto& op : active_) {
    if (op->kind == Kind::coalesced) {
      waiting.insert(waiting.end(), op->members.begin(), op->members.end());
    } else {
      waiting.push_back(op);
    }
  }
  for (auto& ch : channels_) {
    for (auto& [k, op] : ch->pending) waiting.push_back(op);
  }
  return waiting;
}

std::string Engine::waiting_list(const std::vector<OpPtr>& waiting) {
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
  return list;
}

void Engine::abandon_waiting(const std::vector<OpPtr>& waiting, const std::string& msg,
                             std::vector<Completion>& done, bool value_error) {
  set_broken(msg);
  // MPI may still write into the buffers of posted operations: keep them.
  for (auto& op : active_) abandoned_.push_back(op);
  for (auto& ch : channels_) {
    for (auto& [k, op] : ch->pending) abandoned_.push_back(op);
    ch->pending.clear();
    ch->scatters.clear();
  }
  auto e = value_error ? std::make_exception_ptr(std::invalid_argument(msg))
                       : std::make_exception_ptr(std::runtime_error(msg));
  for (auto& op : waiting) done.push_back({op->promise, Value(), e});
  active_.clear();
}

void Engine::check_timeouts(std::vector<Completion>& done) {
  using namespace std::chrono;
  double limit = collective_timeout_seconds();
  auto now = Clock::now();
  std::vector<OpPtr> waiting = waiting_ops();
  bool expired = false;
  for (auto& op : waiting) expired = expired || duration<double>(now - op->start).count() > limit;
  if (!expired) return;
  std::string msg =
      error_message("[", waiting.front()->name, "] timed out after ", limit, " s on rank ", rank_,
                    " (TESSERA_COLLECTIVE_TIMEOUT); a rank did not join. This rank waits for:",
                    waiting_list(waiting));
  abandon_waiting(waiting, msg, done);
}

std::string Engine::start_heartbeat() {
  double timeout = 0;
  try {
    timeout = failure_timeout_seconds();
  } catch (const std::exception& e) {
    return e.what();
  }
  if (timeout <= 0) return "";
  auto allgather = [](const void* mine, void* all, size_t bytes) {
    int n = static_cast<int>(bytes);
    return MPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS;
  };
  return heartbeat_.start(
      allgather, rank_, size_, timeout,
      {[this](const PeerFailure& f) { peer_failed(f); }, [this] { give_up(); }});
}

void Engine::peer_failed(const PeerFailure& f) {
  // First the launcher's marker and this rank's trace: the program may end
  // as soon as its collectives fail.
  std::fprintf(stderr, "%s\n", f.marker().c_str());
  std::fflush(stderr);
  trace::write_before_abrupt_end();
  {
    std::lock_guard lock(in_mu_);
    peer_failure_ = f.message();
    peer_failed_at_ = std::chrono::steady_clock::now();
    if (broken_.empty()) broken_ = peer_failure_;
    broken_flag_.store(true);
    peer_failed_.store(true, std::memory_order_release);
    work_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Engine::give_up() {
  std::string failure;
  {
    std::lock_guard lock(in_mu_);
    failure = peer_failure_;
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "RuntimeError: [locality] %s; rank %d ends (its program did not end within %g s)\n",
               failure.c_str(), rank_, Heartbeat::kExitGrace);
  std::fflush(stderr);
  _exit(kPeerFailedExitStatus);
}

void Engine::fail_on_peer_failure(std::vector<Completion>& done) {
  std::string failure;
  {
    std::lock_guard lock(in_mu_);
    failure = peer_failure_;
  }
  std::vector<OpPtr> waiting = waiting_ops();
  // Later submissions fail at once (submit).
  if (waiting.empty()) return;
  std::string msg = error_message("[", waiting.front()->name, "] ", failure, "; rank ", rank_,
                                  " was waiting for:", waiting_list(waiting));
  abandon_waiting(waiting, msg, done);
}

}  // namespace tessera::distributed::detail
