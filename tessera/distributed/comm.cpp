#include "tessera/distributed/comm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "tessera/core/error.hpp"
#include "tessera/distributed/engine.hpp"

namespace tessera::distributed {

ReduceOp parse_reduce_op(const std::string& name, const char* op) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "mean") return ReduceOp::mean;
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  throw std::invalid_argument(error_message("[", op, "] argument 'op' must be 'sum', 'mean', 'max' or 'min', got '",
                                            name, "'"));
}

namespace {

// The groups made so far (index: id - 1).
std::mutex groups_mu;
std::vector<GroupInfo>& groups() {
  static auto* g = new std::vector<GroupInfo>();
  return *g;
}

}  // namespace

int make_group(const std::string& name, const std::vector<int>& members) {
  int me = detail::started_by_mpirun() ? detail::world().first : 0;
  int n = detail::started_by_mpirun() ? detail::world().second : 1;
  bool sorted = !members.empty();
  for (size_t i = 0; i < members.size(); ++i) {
    sorted = sorted && members[i] >= 0 && members[i] < n && (i == 0 || members[i] > members[i - 1]);
  }
  auto at = std::find(members.begin(), members.end(), me);
  if (!sorted || at == members.end()) {
    std::string got;
    for (int m : members) got += (got.empty() ? "" : ", ") + std::to_string(m);
    throw std::invalid_argument(
        error_message("[mesh] group '", name, "' must list distinct ranks in 0..", n - 1,
                      " in ascending order, this locality (", me, ") among them, got [", got, "]"));
  }
  GroupInfo g;
  g.name = name;
  g.members = members;
  g.rank = static_cast<int>(at - members.begin());
  g.size = static_cast<int>(members.size());
  std::lock_guard lock(groups_mu);
  g.id = static_cast<int>(groups().size()) + 1;
  if (detail::started_by_mpirun()) detail::Engine::get().add_group(g.id, name, members);
  groups().push_back(g);
  return g.id;
}

GroupInfo group_info(int64_t id, const char* op) {
  if (id == 0) {
    GroupInfo g;
    g.rank = detail::started_by_mpirun() ? detail::world().first : 0;
    g.size = detail::started_by_mpirun() ? detail::world().second : 1;
    return g;
  }
  std::lock_guard lock(groups_mu);
  if (id < 0 || id > static_cast<int64_t>(groups().size())) {
    throw std::invalid_argument(error_message(
        "[", op, "] argument 'group' is ", id, ", which is no group (", groups().size(),
        " made so far; groups come from ", "tessera.distributed.Mesh: mesh.group(axis))"));
  }
  return groups()[id - 1];
}

GroupInfo group_of_value(const Value& v, const char* op) {
  if (v.is_nil()) return group_info(0, op);
  if (!v.is_int()) {
    throw TypeError(
        error_message("[", op, "] argument 'group' must be a group (mesh.group(axis)) or nil, got ",
                      v.kind_name()));
  }
  return group_info(v.as_int(), op);
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

void linger_after_peer_failure() {
  if (started_by_mpirun()) Engine::get().linger_after_peer_failure();
}

void set_coalescing(bool on) { Engine::get().set_coalescing(on); }

Future<Value> all_reduce(Array x, ReduceOp op, const std::string& site, int group) {
  auto o = make_op(Kind::all_reduce, "all_reduce", reduce_name(op), std::move(x), -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o, group);
}

Future<Value> broadcast(const Array& x, int root, const std::string& site, int group) {
  auto o = make_op(Kind::broadcast, "broadcast", error_message("broadcast(root=", root, ")"), x, -1, site);
  o->root = root;
  return Engine::get().submit(o, group);
}

Future<Value> all_gather(const Array& x, int free_axis, const std::string& site, int group) {
  return Engine::get().submit(
      make_op(Kind::all_gather, "all_gather", error_message("all_gather(axis=", free_axis, ")"), x,
              free_axis, site),
      group);
}

Future<Value> reduce_scatter(const Array& x, ReduceOp op, const std::string& site, int group) {
  static const char* names[] = {"reduce_scatter(sum)", "reduce_scatter(mean)", "reduce_scatter(max)",
                                "reduce_scatter(min)"};
  auto o = make_op(Kind::reduce_scatter, "reduce_scatter", names[static_cast<int>(op)], x, -1, site);
  o->rop = op == ReduceOp::mean ? ReduceOp::sum : op;
  return Engine::get().submit(o, group);
}

Future<Value> gather(const Array& x, int root, const std::string& site, int group) {
  auto o = make_op(Kind::gather, "gather", error_message("gather(root=", root, ")"), x, 0, site);
  o->root = root;
  return Engine::get().submit(o, group);
}

Future<Value> scatter(const Array& x, int root, const std::string& site, int group) {
  // Only the root's array matters: the fingerprint leaves out dtype and shape.
  if (x.ndim() > kMaxDims) throw std::invalid_argument("[scatter] more than 8 dimensions are not supported");
  auto o = make_op(Kind::scatter, "scatter", error_message("scatter(root=", root, ")"), std::nullopt, -1, site);
  o->root = root;
  o->x = x;
  return Engine::get().submit(o, group);
}

Future<Value> all_to_all(const Array& x, const std::string& site, int group) {
  return Engine::get().submit(make_op(Kind::all_to_all, "all_to_all", "all_to_all", x, 0, site),
                              group);
}

Future<Value> barrier(const std::string& site, int group) {
  return Engine::get().submit(make_op(Kind::barrier, "barrier", "barrier", std::nullopt, -1, site),
                              group);
}

Future<Value> send(const Array& x, int dest, int tag, const std::string& site,
                   const std::string& what) {
  auto o = make_op(Kind::send, "send",
                   what.empty() ? error_message("send(dest=", dest, ", tag=", tag, ")") : what, x,
                   -1, site);
  o->peer = dest;
  o->tag = tag;
  return Engine::get().submit(o);
}

Future<Value> recv(int source, int tag, const std::string& site, const std::string& what) {
  auto o = make_op(Kind::recv, "recv",
                   what.empty() ? error_message("recv(source=", source, ", tag=", tag, ")") : what,
                   std::nullopt, -1, site);
  o->peer = source;
  o->tag = tag;
  return Engine::get().submit(o);
}

}  // namespace detail
}  // namespace tessera::distributed
