#include "tessera/dist/comm.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::dist {

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
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
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

std::vector<int64_t> split_counts(int64_t rows, int parts) {
  std::vector<int64_t> out(parts, rows / parts);
  for (int64_t i = 0; i < rows % parts; ++i) ++out[i];
  return out;
}

namespace {

constexpr int kMaxDims = 8;
// Collectives travel on kChannels independent channels (communicators),
// chosen by their call site: the sequence numbers, and so the order in which
// ranks must post them, are per channel. Collectives of different call sites
// issued by concurrent tasks (whose order differs between ranks) thus do not
// depend on each other unless their sites share a channel; then the
// fingerprint check reports the disagreement instead of a hang.
constexpr int kChannels = 16;
constexpr int kDescBytes = 256;

enum class Kind { all_reduce, broadcast, all_gather, reduce_scatter, gather, scatter, all_to_all,
                  barrier, send, recv };

// What each rank says about a collective before it runs it.
struct Meta {
  uint64_t hash = 0;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[kMaxDims] = {};
};

enum class Stage { queued, meta, ordered, data, diag, header };

struct Op {
  Kind kind;
  std::string name, site, desc;
  uint64_t key = 0;
  int channel = 0;
  Meta meta;
  Array x;
  ReduceOp rop = ReduceOp::sum;
  int root = 0, peer = 0, tag = 0, free_axis = -1;
  Promise<Value> promise;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  // Progress-thread state.
  Stage stage = Stage::queued;
  std::vector<Meta> metas;
  std::vector<char> diag_send, diag_recv, recv_bytes;
  Array out;
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  int64_t header[2 + kMaxDims] = {};
  std::vector<MPI_Request> reqs;

  bool collective() const { return kind != Kind::send && kind != Kind::recv; }
};

using OpPtr = std::shared_ptr<Op>;

Shape meta_shape(const Meta& m) { return Shape(m.shape, m.shape + m.ndim); }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
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

int checked_int(int64_t v, const std::string& op) {
  if (v > 2147483647) {
    throw std::invalid_argument(error_message("[", op, "] message of ", v,
                                              " bytes is larger than MPI's 2 GiB count limit"));
  }
  return static_cast<int>(v);
}

int64_t row_bytes(DType dt, const Shape& shape) {
  int64_t n = static_cast<int64_t>(dtype_size(dt));
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

class Engine {
 public:
  static Engine& get() {
    // Never destroyed: the progress thread is stopped by an atexit handler.
    static Engine* engine = new Engine();
    return *engine;
  }

  std::pair<int, int> world() {
    std::unique_lock lock(mu_);
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
    std::lock_guard lock(mu_);
    if (!broken_.empty()) {
      op->promise.set_error(std::make_exception_ptr(std::runtime_error(error_message(
          "[", op->name, "] the communication engine of rank ", rank_,
          " stopped after an earlier error: ", broken_))));
      return f;
    }
    if (op->collective()) {
      op->channel = static_cast<int>(fnv1a(op->site) % kChannels);
      op->key = next_key_[op->channel]++;
    }
    incoming_.push_back(std::move(op));
    cv_.notify_all();
    return f;
  }

  void mark_failed() { failed_ = true; }

  void stop() {
    {
      std::lock_guard lock(mu_);
      if (!started_ || stopping_) return;
      stopping_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    {
      std::lock_guard lock(mu_);
      if (rc != MPI_SUCCESS) {
        init_error_ = "[locality] MPI_Init_thread failed: " + mpi_error(rc);
      } else {
        // Only this thread calls MPI, so any level from SERIALIZED up is safe
        // (and FUNNELED too, since this thread initialized MPI).
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        // One communicator per kind of traffic, so that fingerprints, data,
        // diagnostics and point-to-point messages never match each other.
        std::vector<MPI_Comm*> comms = {&p2p_header_comm_, &p2p_data_comm_};
        for (int c = 0; c < kChannels; ++c) {
          comms.insert(comms.end(), {&meta_comm_[c], &data_comm_[c], &diag_comm_[c]});
        }
        for (MPI_Comm* c : comms) {
          MPI_Comm_dup(MPI_COMM_WORLD, c);
          MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
        }
      }
      init_done_ = true;
    }
    cv_.notify_all();
    if (rc != MPI_SUCCESS) return;
    loop();
    bool clean = active_.empty() && !queued() && broken_.empty() && !failed_;
    // MPI_Finalize waits for the other ranks; after an error they may be
    // waiting for this one, so a failing rank exits without it and mpirun
    // ends the job.
    if (clean) MPI_Finalize();
  }

  void loop() {
    using namespace std::chrono;
    for (;;) {
      std::deque<OpPtr> fresh;
      {
        std::unique_lock lock(mu_);
        bool idle = active_.empty() && !queued();
        if (idle) cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
        if (stopping_ && incoming_.empty()) return;
        fresh.swap(incoming_);
      }
      for (auto& op : fresh) {
        if (op->collective()) {
          waiting_[op->channel][op->key] = op;
        } else {
          guarded(op, [&] { post_p2p(op); });
        }
      }
      // Fingerprints are exchanged in key order (per channel).
      for (int c = 0; c < kChannels; ++c) {
        auto& w = waiting_[c];
        for (auto it = w.find(next_meta_[c]); it != w.end(); it = w.find(next_meta_[c])) {
          OpPtr op = it->second;
          w.erase(it);
          ++next_meta_[c];
          guarded(op, [&] { post_meta(op); });
        }
      }
      bool progressed = test_all();
      // Data (or the diagnostics of a disagreement) are posted in key order.
      for (int c = 0; c < kChannels; ++c) {
        auto& o = ordered_[c];
        for (auto it = o.find(next_data_[c]); it != o.end(); it = o.find(next_data_[c])) {
          OpPtr op = it->second;
          o.erase(it);
          ++next_data_[c];
          guarded(op, [&] { post_data(op); });
          progressed = true;
        }
      }
      check_timeouts();
      if (!progressed) std::this_thread::sleep_for(microseconds(20));
    }
  }

  // Runs fn; an exception fails the op (and, for MPI errors, the engine).
  template <class F>
  void guarded(const OpPtr& op, F&& fn) {
    try {
      fn();
    } catch (...) {
      fail(op, std::current_exception());
    }
  }

  void fail(const OpPtr& op, std::exception_ptr e) {
    active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
    deliver_error(op, e);
  }

  // Results are handed to a worker: the continuations of a collective's
  // future are the rest of the program, which must not run on (and stall)
  // the progress thread.
  static void deliver(const OpPtr& op, Value v) {
    spawn([p = op->promise, v = std::move(v)]() mutable { p.set_value(std::move(v)); });
  }
  static void deliver_error(const OpPtr& op, std::exception_ptr e) {
    spawn([p = op->promise, e] { p.set_error(e); });
  }

  void check(int rc, const Op& op, const char* call) {
    if (rc == MPI_SUCCESS) return;
    std::string msg = error_message("[", op.name, "] ", call, " failed on rank ", rank_, ": ", mpi_error(rc));
    {
      std::lock_guard lock(mu_);
      broken_ = msg;
    }
    throw std::runtime_error(msg);
  }

  static std::string mpi_error(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
    return std::string(text, len);
  }

  void post_meta(const OpPtr& op) {
    op->stage = Stage::meta;
    op->metas.resize(size_);
    op->reqs.assign(1, MPI_REQUEST_NULL);
    check(MPI_Iallgather(&op->meta, sizeof(Meta), MPI_BYTE, op->metas.data(), sizeof(Meta), MPI_BYTE,
                         meta_comm_[op->channel], &op->reqs[0]),
          *op, "MPI_Iallgather");
    active_.push_back(op);
  }

  void post_data(const OpPtr& op) {
    bool agree = true;
    for (const Meta& m : op->metas) agree = agree && m.hash == op->metas[0].hash;
    if (!agree) {
      op->stage = Stage::diag;
      op->diag_send.assign(kDescBytes, '\0');
      std::memcpy(op->diag_send.data(), op->desc.data(), std::min<size_t>(op->desc.size(), kDescBytes - 1));
      op->diag_recv.assign(static_cast<size_t>(kDescBytes) * size_, '\0');
      op->reqs.assign(1, MPI_REQUEST_NULL);
      check(MPI_Iallgather(op->diag_send.data(), kDescBytes, MPI_CHAR, op->diag_recv.data(), kDescBytes,
                           MPI_CHAR, diag_comm_[op->channel], &op->reqs[0]),
            *op, "MPI_Iallgather");
      active_.push_back(op);
      return;
    }
    op->stage = Stage::data;
    op->reqs.assign(1, MPI_REQUEST_NULL);
    MPI_Request* req = &op->reqs[0];
    MPI_Comm comm = data_comm_[op->channel];
    const Array& x = op->x;
    DType dt = x.dtype();
    switch (op->kind) {
      case Kind::all_reduce: {
        op->out = x.copy();
        check(MPI_Iallreduce(MPI_IN_PLACE, op->out.raw(), checked_int(x.size(), op->name), mpi_type(dt),
                             mpi_op(op->rop), comm, req),
              *op, "MPI_Iallreduce");
        break;
      }
      case Kind::broadcast: {
        op->out = rank_ == op->root ? x.copy() : Array(dt, x.shape());
        check(MPI_Ibcast(op->out.raw(), checked_int(x.nbytes(), op->name), MPI_BYTE, op->root, comm, req),
              *op, "MPI_Ibcast");
        break;
      }
      case Kind::all_gather:
      case Kind::gather: {
        bool receives = op->kind == Kind::all_gather || rank_ == op->root;
        int64_t total = 0;
        op->rcounts.assign(size_, 0);
        op->rdispls.assign(size_, 0);
        for (int i = 0; i < size_; ++i) {
          Shape s = meta_shape(op->metas[i]);
          int64_t bytes = shape_size(s) * static_cast<int64_t>(dtype_size(dt));
          op->rcounts[i] = checked_int(bytes, op->name);
          op->rdispls[i] = checked_int(total, op->name);
          total += bytes;
        }
        if (receives) op->recv_bytes.resize(static_cast<size_t>(total) + 1);
        int sendn = checked_int(x.nbytes(), op->name);
        if (op->kind == Kind::all_gather) {
          check(MPI_Iallgatherv(x.raw(), sendn, MPI_BYTE, op->recv_bytes.data(), op->rcounts.data(),
                                op->rdispls.data(), MPI_BYTE, comm, req),
                *op, "MPI_Iallgatherv");
        } else {
          check(MPI_Igatherv(x.raw(), sendn, MPI_BYTE, receives ? op->recv_bytes.data() : nullptr,
                             op->rcounts.data(), op->rdispls.data(), MPI_BYTE, op->root, comm, req),
                *op, "MPI_Igatherv");
        }
        break;
      }
      case Kind::reduce_scatter: {
        Shape s = x.shape();
        std::vector<int64_t> rows = split_counts(s[0], size_);
        int64_t per_row = x.size() / std::max<int64_t>(s[0], 1);
        op->rcounts.resize(size_);
        for (int i = 0; i < size_; ++i) op->rcounts[i] = checked_int(rows[i] * per_row, op->name);
        s[0] = rows[rank_];
        op->out = Array(dt, s);
        check(MPI_Ireduce_scatter(x.raw(), op->out.raw(), op->rcounts.data(), mpi_type(dt), mpi_op(op->rop),
                                  comm, req),
              *op, "MPI_Ireduce_scatter");
        break;
      }
      case Kind::scatter: {
        const Meta& rm = op->metas[op->root];
        DType rdt = static_cast<DType>(rm.dtype);
        Shape s = meta_shape(rm);
        std::vector<int64_t> rows = split_counts(s[0], size_);
        int64_t rb = row_bytes(rdt, s);
        op->scounts.resize(size_);
        op->sdispls.resize(size_);
        int64_t off = 0;
        for (int i = 0; i < size_; ++i) {
          op->scounts[i] = checked_int(rows[i] * rb, op->name);
          op->sdispls[i] = checked_int(off, op->name);
          off += rows[i] * rb;
        }
        s[0] = rows[rank_];
        op->out = Array(rdt, s);
        bool is_root = rank_ == op->root;
        check(MPI_Iscatterv(is_root ? x.raw() : nullptr, op->scounts.data(), op->sdispls.data(), MPI_BYTE,
                            op->out.raw(), op->scounts[rank_], MPI_BYTE, op->root, comm, req),
              *op, "MPI_Iscatterv");
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
          op->scounts[j] = checked_int(mine[j] * rb, op->name);
          op->sdispls[j] = checked_int(off, op->name);
          off += mine[j] * rb;
        }
        int64_t total = 0;
        for (int j = 0; j < size_; ++j) {
          Shape sj = meta_shape(op->metas[j]);
          int64_t bytes = split_counts(sj[0], size_)[rank_] * row_bytes(dt, sj);
          op->rcounts[j] = checked_int(bytes, op->name);
          op->rdispls[j] = checked_int(total, op->name);
          total += bytes;
        }
        op->recv_bytes.resize(static_cast<size_t>(total) + 1);
        check(MPI_Ialltoallv(x.raw(), op->scounts.data(), op->sdispls.data(), MPI_BYTE, op->recv_bytes.data(),
                             op->rcounts.data(), op->rdispls.data(), MPI_BYTE, comm, req),
              *op, "MPI_Ialltoallv");
        break;
      }
      case Kind::barrier:
        check(MPI_Ibarrier(comm, req), *op, "MPI_Ibarrier");
        break;
      default:
        break;
    }
    active_.push_back(op);
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
            *op, "MPI_Isend");
      check(MPI_Isend(x.raw(), checked_int(x.nbytes(), op->name), MPI_BYTE, op->peer, op->tag, p2p_data_comm_,
                      &op->reqs[1]),
            *op, "MPI_Isend");
    } else {
      op->stage = Stage::header;
      op->reqs.assign(1, MPI_REQUEST_NULL);
      check(MPI_Irecv(op->header, 2 + kMaxDims, MPI_INT64_T, op->peer, op->tag, p2p_header_comm_, &op->reqs[0]),
            *op, "MPI_Irecv");
    }
    active_.push_back(op);
  }

  // Polls every outstanding request; advances the operations that completed.
  bool test_all() {
    std::vector<MPI_Request> reqs;
    std::vector<std::pair<size_t, size_t>> owner;
    for (size_t i = 0; i < active_.size(); ++i) {
      for (size_t k = 0; k < active_[i]->reqs.size(); ++k) {
        if (active_[i]->reqs[k] == MPI_REQUEST_NULL) continue;
        reqs.push_back(active_[i]->reqs[k]);
        owner.push_back({i, k});
      }
    }
    std::vector<OpPtr> completed;
    if (!reqs.empty()) {
      std::vector<int> indices(reqs.size());
      int outcount = 0;
      int rc = MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &outcount, indices.data(),
                            MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        std::string msg = error_message("[collective] MPI_Testsome failed on rank ", rank_, ": ", mpi_error(rc));
        {
          std::lock_guard lock(mu_);
          broken_ = msg;
        }
        auto ops = active_;
        for (auto& op : ops) fail(op, std::make_exception_ptr(std::runtime_error(msg)));
        return true;
      }
      if (outcount == MPI_UNDEFINED) outcount = 0;
      for (size_t j = 0; j < reqs.size(); ++j) active_[owner[j].first]->reqs[owner[j].second] = reqs[j];
    }
    for (const auto& op : active_) {
      bool done = true;
      for (auto r : op->reqs) done = done && r == MPI_REQUEST_NULL;
      if (done) completed.push_back(op);
    }
    for (auto& op : completed) {
      active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
      guarded(op, [&] { advance(op); });
    }
    return !completed.empty();
  }

  void advance(const OpPtr& op) {
    switch (op->stage) {
      case Stage::meta:
        op->stage = Stage::ordered;
        ordered_[op->channel][op->key] = op;
        return;
      case Stage::diag:
        deliver_error(op, std::make_exception_ptr(std::invalid_argument(disagreement(*op))));
        return;
      case Stage::header: {
        int ndim = static_cast<int>(op->header[1]);
        Shape s(op->header + 2, op->header + 2 + ndim);
        op->out = Array(static_cast<DType>(op->header[0]), s);
        op->stage = Stage::data;
        op->reqs.assign(1, MPI_REQUEST_NULL);
        check(MPI_Irecv(op->out.raw(), checked_int(op->out.nbytes(), op->name), MPI_BYTE, op->peer, op->tag,
                        p2p_data_comm_, &op->reqs[0]),
              *op, "MPI_Irecv");
        active_.push_back(op);
        return;
      }
      default:
        deliver(op, result(*op));
        return;
    }
  }

  std::string disagreement(const Op& op) const {
    std::string msg = "[" + op.name + "] ranks disagree on the collective: ";
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
      case Kind::gather: {
        if (op.kind == Kind::gather && rank_ != op.root) return Value();
        std::vector<Shape> shapes;
        for (const Meta& m : op.metas) shapes.push_back(meta_shape(m));
        List out;
        for (auto& a : unpack(op, shapes, dt)) out.push_back(Value(std::move(a)));
        return Value(std::move(out));
      }
      case Kind::all_to_all: {
        std::vector<Shape> shapes;
        for (const Meta& m : op.metas) {
          Shape s = meta_shape(m);
          s[0] = split_counts(s[0], size_)[rank_];
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

  void check_timeouts() {
    using namespace std::chrono;
    double limit = collective_timeout_seconds();
    auto now = steady_clock::now();
    std::vector<OpPtr> pending = active_;
    for (int c = 0; c < kChannels; ++c) {
      for (auto& [k, op] : ordered_[c]) pending.push_back(op);
      for (auto& [k, op] : waiting_[c]) pending.push_back(op);
    }
    bool expired = false;
    for (auto& op : pending) {
      expired = expired || duration<double>(now - op->start).count() > limit;
    }
    if (!expired) return;
    std::string list;
    for (auto& op : pending) {
      const char* stage = op->stage == Stage::meta      ? "exchanging fingerprints"
                          : op->stage == Stage::queued  ? "queued behind an earlier collective"
                          : op->stage == Stage::ordered ? "waiting for an earlier collective"
                          : op->stage == Stage::header  ? "waiting for a message"
                                                        : "transferring data";
      if (op->collective()) {
        list += error_message("\n  ", op->desc, " (key ", op->channel, ":", op->key, ", ", stage, ")");
      } else {
        list += error_message("\n  ", op->desc, " (tag ", op->tag, ", ", stage, ")");
      }
    }
    std::string msg = error_message("[", pending.front()->name, "] timed out after ", limit,
                                    " s on rank ", rank_, " (TESSERA_COLLECTIVE_TIMEOUT); a rank did not join. ",
                                    "This rank waits for:", list);
    {
      std::lock_guard lock(mu_);
      broken_ = msg;
    }
    // MPI may still write into the buffers of the posted operations: keep
    // them alive.
    for (auto& op : pending) abandoned_.push_back(op);
    active_.clear();
    for (int c = 0; c < kChannels; ++c) {
      ordered_[c].clear();
      waiting_[c].clear();
    }
    for (auto& op : pending) deliver_error(op, std::make_exception_ptr(std::runtime_error(msg)));
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false, init_done_ = false, stopping_ = false;
  std::string init_error_, broken_;
  std::atomic<bool> failed_{false};
  int rank_ = 0, size_ = 1;
  uint64_t next_key_[kChannels] = {};
  std::deque<OpPtr> incoming_;
  std::thread thread_;

  // Progress-thread only.
  MPI_Comm meta_comm_[kChannels], data_comm_[kChannels], diag_comm_[kChannels];
  MPI_Comm p2p_header_comm_ = MPI_COMM_NULL, p2p_data_comm_ = MPI_COMM_NULL;
  std::map<uint64_t, OpPtr> waiting_[kChannels], ordered_[kChannels];
  std::vector<OpPtr> active_, abandoned_;
  uint64_t next_meta_[kChannels] = {}, next_data_[kChannels] = {};

  bool queued() const {
    for (int c = 0; c < kChannels; ++c) {
      if (!waiting_[c].empty() || !ordered_[c].empty()) return true;
    }
    return false;
  }
};

// Fills the fingerprint: `what` names the op and its settings; the shape
// (with `free_axis` left out of the hash) and dtype are those of x.
OpPtr make_op(Kind kind, const char* name, const std::string& what, const Array* x, int free_axis,
              const std::string& site) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->name = name;
  op->site = site;
  op->free_axis = free_axis;
  std::string hashed = what;
  op->desc = what;
  if (x) {
    if (x->ndim() > kMaxDims) {
      throw std::invalid_argument(error_message("[", name, "] arrays of more than ", kMaxDims,
                                                " dimensions are not supported, got ", shape_str(x->shape())));
    }
    op->x = *x;
    op->meta.dtype = static_cast<int32_t>(x->dtype());
    op->meta.ndim = x->ndim();
    for (int i = 0; i < x->ndim(); ++i) op->meta.shape[i] = x->shape()[i];
    op->desc += error_message(" ", dtype_name(x->dtype()), " ", shape_str(x->shape()));
    hashed += error_message("|", dtype_name(x->dtype()), "|", x->ndim());
    for (int i = 0; i < x->ndim(); ++i) hashed += i == free_axis ? "|*" : "|" + std::to_string(x->shape()[i]);
  }
  if (!site.empty()) op->desc += " at " + site;
  op->meta.hash = fnv1a(hashed + "|" + site);
  return op;
}

}  // namespace

std::pair<int, int> world() { return Engine::get().world(); }

void mark_failed() {
  if (started_by_mpirun()) Engine::get().mark_failed();
}

Future<Value> all_reduce(const Array& x, ReduceOp op, const std::string& site) {
  static const char* names[] = {"sum", "mean", "max", "min"};
  auto o = make_op(Kind::all_reduce, "all_reduce",
                   error_message("all_reduce(", names[static_cast<int>(op)], ")"), &x, -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o);
}

Future<Value> broadcast(const Array& x, int root, const std::string& site) {
  auto o = make_op(Kind::broadcast, "broadcast", error_message("broadcast(root=", root, ")"), &x, -1, site);
  o->root = root;
  return Engine::get().submit(o);
}

Future<Value> all_gather(const Array& x, int free_axis, const std::string& site) {
  return Engine::get().submit(make_op(Kind::all_gather, "all_gather",
                                      error_message("all_gather(axis=", free_axis, ")"), &x, free_axis, site));
}

Future<Value> reduce_scatter(const Array& x, ReduceOp op, const std::string& site) {
  static const char* names[] = {"sum", "mean", "max", "min"};
  auto o = make_op(Kind::reduce_scatter, "reduce_scatter",
                   error_message("reduce_scatter(", names[static_cast<int>(op)], ")"), &x, -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o);
}

Future<Value> gather(const Array& x, int root, const std::string& site) {
  auto o = make_op(Kind::gather, "gather", error_message("gather(root=", root, ")"), &x, 0, site);
  o->root = root;
  return Engine::get().submit(o);
}

Future<Value> scatter(const Array& x, int root, const std::string& site) {
  // Only the root's array matters: the fingerprint leaves out dtype and shape.
  auto o = make_op(Kind::scatter, "scatter", error_message("scatter(root=", root, ")"), nullptr, -1, site);
  o->root = root;
  o->x = x;
  o->meta.dtype = static_cast<int32_t>(x.dtype());
  o->meta.ndim = x.ndim();
  if (x.ndim() > kMaxDims) throw std::invalid_argument("[scatter] more than 8 dimensions are not supported");
  for (int i = 0; i < x.ndim(); ++i) o->meta.shape[i] = x.shape()[i];
  return Engine::get().submit(o);
}

Future<Value> all_to_all(const Array& x, const std::string& site) {
  return Engine::get().submit(make_op(Kind::all_to_all, "all_to_all", "all_to_all", &x, 0, site));
}

Future<Value> barrier(const std::string& site) {
  return Engine::get().submit(make_op(Kind::barrier, "barrier", "barrier", nullptr, -1, site));
}

Future<Value> send(const Array& x, int dest, int tag, const std::string& site) {
  auto o = make_op(Kind::send, "send", error_message("send(dest=", dest, ", tag=", tag, ")"), &x, -1, site);
  o->peer = dest;
  o->tag = tag;
  return Engine::get().submit(o);
}

Future<Value> recv(int source, int tag, const std::string& site) {
  auto o = make_op(Kind::recv, "recv", error_message("recv(source=", source, ", tag=", tag, ")"), nullptr, -1,
                   site);
  o->peer = source;
  o->tag = tag;
  return Engine::get().submit(o);
}

}  // namespace detail
}  // namespace tessera::dist
