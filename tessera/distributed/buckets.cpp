// Gradient buckets: all-reduces planned when a training step is compiled and
// started from inside the backward pass.
//
// grad_bucket(x, bucket, member, members) marks a parameter: the forward pass
// passes x through; the gradient rule sends the parameter's cotangent to
// bucket_all_reduce, which holds it until every member of the named bucket
// has arrived and then starts one all_reduce (sum) of all of them,
// concatenated in member order. Each member's future is its part of the
// result, so the backward pass goes on computing the earlier layers'
// gradients while the bucket is on the wire (a define of a pending value does
// not hold up its block: see BlockNode). The plan (which parameters share a
// bucket, and the member numbers) is fixed in the program's text, the same
// on every locality, so no coordinator is needed; the engine matches the
// bucket's all_reduce across localities by its name and first member's call
// site like any other collective, fingerprint included.
//
// grad_bucket_shard(shard, x, bucket, member, members) is ZeRO-2's marker: the
// forward pass passes the whole weight x through (no copy); the gradient rule
// sends x's cotangent to bucket_reduce_scatter, which joins the bucket's
// members in member order, pads them with zeros to shard's length times the
// group's size and starts one reduce_scatter (sum): this member's part is the
// gradient of `shard`, this member's slice of the flat bucket. The gradient
// bucket is made of the gradients only (as the all-reduce's is); no flat copy
// of the weights is made, forward or backward. Member 0 receives the slice,
// the others nil (no contribution), so the slice's cotangent is the sum of
// one part.
//
// A bucket whose members do not all arrive (a parameter whose gradient is
// never computed on some step) fails after the collective timeout with a
// message naming the missing members, instead of hanging.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {
namespace {

using Clock = std::chrono::steady_clock;

struct Member {
  bool arrived = false;
  Array x;      // until the bucket starts
  Shape shape;  // x's
  std::string site;
  Promise<Value> promise;
};

struct Bucket {
  int group = 0;        // the group it is reduced over (0: every locality)
  int64_t length = -1;  // reduce_scatter of this padded length; -1: all_reduce
  int group_size = 1;
  std::vector<Member> members;
  int arrived = 0;
  Clock::time_point start;
};

// Buckets waiting for members, by name. Never destroyed: the watchdog thread
// (detached) may still look at it while the process exits.
// A fence waiting for a bucket in flight: its cotangent, passed on when the
// bucket's collective completes.
struct Fence {
  Promise<Value> promise;
  Value g;
};

struct Staging {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::string, Bucket> buckets;
  // Buckets whose collective is in flight (launched, not completed), with the
  // fences (bucket_after) waiting for them.
  std::map<std::string, std::vector<Fence>> in_flight;
  bool watchdog = false;
};

Staging& staging() {
  static Staging* s = new Staging();
  return *s;
}

std::string member_list(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out;
}

// Fails buckets that have waited longer than the collective timeout for a
// member. Checks a few times per timeout, at most once a second.
void watch() {
  Staging& s = staging();
  std::unique_lock lock(s.mutex);
  for (;;) {
    double limit = detail::collective_timeout_seconds();
    s.cv.wait_for(lock, std::chrono::duration<double>(std::min(1.0, limit / 4)));
    auto now = Clock::now();
    std::vector<std::pair<std::string, Bucket>> expired;
    for (auto it = s.buckets.begin(); it != s.buckets.end();) {
      if (std::chrono::duration<double>(now - it->second.start).count() > limit) {
        expired.emplace_back(it->first, std::move(it->second));
        it = s.buckets.erase(it);
      } else {
        ++it;
      }
    }
    if (expired.empty()) continue;
    lock.unlock();
    for (auto& [name, b] : expired) {
      std::vector<int> have, missing;
      for (size_t m = 0; m < b.members.size(); ++m) (b.members[m].arrived ? have : missing).push_back(int(m));
      auto e = std::make_exception_ptr(std::runtime_error(error_message(
          "[bucket_all_reduce] gradient bucket '", name, "' timed out after ", limit, " s on locality ", locality(),
          " (TESSERA_COLLECTIVE_TIMEOUT): only member", have.size() == 1 ? " " : "s ", member_list(have), " of ",
          b.members.size(), " arrived; member", missing.size() == 1 ? " " : "s ", member_list(missing),
          " never did (every parameter of a bucket must get its gradient in each backward pass)")));
      for (auto& m : b.members) {
        if (m.arrived) m.promise.set_error(e);
      }
    }
    lock.lock();
  }
}

void track_in_flight(const std::string& name, Future<Value> f);

// Every member is there: one all_reduce of all of them, then each member's
// part of the result (views of the reduced buffer, no copy).
void launch(const std::string& name, Bucket b) {
  const DType dt = b.members[0].x.dtype();
  int64_t total = 0;
  for (const auto& m : b.members) {
    if (m.x.dtype() != dt) {
      std::string kinds;
      for (size_t i = 0; i < b.members.size(); ++i) {
        kinds += error_message(i ? ", " : "", i, ": ", dtype_name(b.members[i].x.dtype()));
      }
      auto e = std::make_exception_ptr(TypeError(error_message(
          "[bucket_all_reduce] the members of gradient bucket '", name, "' must share one dtype, got ", kinds)));
      for (auto& mm : b.members) mm.promise.set_error(e);
      return;
    }
    total += m.x.size();
  }
  const bool scatter = b.length >= 0;
  if (scatter && total > b.length) {
    auto e = std::make_exception_ptr(std::invalid_argument(error_message(
        "[bucket_reduce_scatter] gradient bucket '", name, "' has ", total,
        " elements, more than its padded length ", b.length, " (shard's length times the group's size)")));
    for (auto& m : b.members) m.promise.set_error(e);
    return;
  }
  Array flat(dt, {scatter ? b.length : total});
  auto* dst = static_cast<char*>(flat.raw());
  for (const auto& m : b.members) {
    std::memcpy(dst, m.x.raw(), m.x.nbytes());
    dst += m.x.nbytes();
  }
  if (scatter) std::memset(dst, 0, static_cast<size_t>(b.length - total) * dtype_size(dt));
  std::string site = "bucket " + name + " at " + b.members[0].site;
  auto members = std::make_shared<std::vector<Member>>(std::move(b.members));
  for (auto& m : *members) m.x = Array();  // the data is in flat now
  if (scatter) {
    // Only member 0 carries the slice: the others contribute nothing, at once.
    for (size_t i = 1; i < members->size(); ++i) (*members)[i].promise.set_value(Value());
    if (b.group_size == 1) {
      (*members)[0].promise.set_value(Value(std::move(flat)));
      return;
    }
    Future<Value> f = detail::reduce_scatter(flat, ReduceOp::sum, site, b.group);
    track_in_flight(name, f);
    f.on_ready([f, members] {
      if (auto e = f.error()) {
        (*members)[0].promise.set_error(e);
      } else {
        (*members)[0].promise.set_value(f.get());
      }
    });
    return;
  }
  Future<Value> f = detail::all_reduce(flat, ReduceOp::sum, site, b.group);
  track_in_flight(name, f);
  f.on_ready([f, members, dt] {
    if (auto e = f.error()) {
      for (auto& m : *members) m.promise.set_error(e);
      return;
    }
    auto sum = std::make_shared<Array>(f.get().as_array());
    auto* part = static_cast<char*>(sum->raw());
    for (auto& m : *members) {
      Array view = Array::wrap(dt, m.shape, part, sum);
      part += view.nbytes();
      m.promise.set_value(Value(std::move(view)));
    }
  });
}

// The bucket's collective is on the wire until `f` is ready: fences asking
// for it wait (bucket_after), then go on, whatever its outcome.
void track_in_flight(const std::string& name, Future<Value> f) {
  Staging& s = staging();
  {
    std::lock_guard lock(s.mutex);
    s.in_flight.try_emplace(name);
  }
  f.on_ready([name] {
    Staging& st = staging();
    std::vector<Fence> released;
    {
      std::lock_guard lock(st.mutex);
      auto it = st.in_flight.find(name);
      if (it == st.in_flight.end()) return;
      released = std::move(it->second);
      st.in_flight.erase(it);
    }
    for (auto& fence : released) fence.promise.set_value(std::move(fence.g));
  });
}

}  // namespace

int drop_gradient_buckets() {
  Staging& s = staging();
  std::map<std::string, Bucket> dropped;
  {
    std::lock_guard lock(s.mutex);
    dropped.swap(s.buckets);
  }
  for (auto& [name, b] : dropped) {
    auto e = std::make_exception_ptr(std::runtime_error(error_message(
        "[bucket_all_reduce] gradient bucket '", name, "' was dropped before all its members arrived (its backward "
        "pass failed)")));
    for (auto& m : b.members) {
      if (m.arrived) m.promise.set_error(e);
    }
  }
  return static_cast<int>(dropped.size());
}

namespace {

// Stages argument 0 as member `member` of its bucket (arguments `first` on:
// bucket, member, members, group) and launches the bucket when it is full.
// `length` >= 0: a reduce_scatter bucket of that padded length.
Future<Value> stage_member(Args& a, int first, int64_t length, const char* op) {
  Array x = a.array(0);
  if (x.dtype() == DType::bool_) {
    throw TypeError(error_message("[", op, "] argument 'x' must be a numeric array, got a bool array"));
  }
  const std::string& name = a.string(first);
  int64_t member = a.integer(first + 1), members = a.integer(first + 2);
  if (members < 1 || member < 0 || member >= members) {
    throw std::out_of_range(error_message("[", op, "] member ", member, " of gradient bucket '", name,
                                          "' is not in 0..", members - 1, " (members = ", members, ")"));
  }
  GroupInfo g = group_of_value(a[first + 3], a.op());
  if (g.size == 1 && length < 0) return Future<Value>::ready(Value(x));
  Staging& s = staging();
  std::unique_lock lock(s.mutex);
  if (!s.watchdog) {
    s.watchdog = true;
    std::thread(watch).detach();
  }
  Bucket& b = s.buckets[name];
  if (b.members.empty()) {
    b.members.resize(static_cast<size_t>(members));
    b.start = Clock::now();
    b.group = g.id;
    b.group_size = g.size;
    b.length = length;
  } else if (b.group != g.id) {
    throw std::invalid_argument(error_message(
        "[", op, "] member ", member, " of gradient bucket '", name,
        "' is reduced over group ", g.id, ", the bucket's earlier members over group ", b.group));
  } else if (static_cast<int64_t>(b.members.size()) != members) {
    throw std::invalid_argument(error_message("[", op, "] gradient bucket '", name, "' has ",
                                              b.members.size(), " members, but member ", member, " says ", members));
  } else if (b.length != length) {
    throw std::invalid_argument(error_message(
        "[", op, "] member ", member, " of gradient bucket '", name, "' asks for ",
        length < 0 ? std::string("an all_reduce") : error_message("a reduce_scatter of length ", length),
        ", the bucket's earlier members for ",
        b.length < 0 ? std::string("an all_reduce") : error_message("a reduce_scatter of length ", b.length)));
  }
  Member& m = b.members[static_cast<size_t>(member)];
  if (m.arrived) {
    throw std::invalid_argument(error_message(
        "[", op, "] member ", member, " of gradient bucket '", name,
        "' arrived twice before the bucket was reduced (each member must arrive once per backward pass; first "
        "at ", m.site, ")"));
  }
  m.arrived = true;
  m.shape = x.shape();
  m.x = std::move(x);
  m.site = a.site();
  Future<Value> result = m.promise.get_future();
  if (++b.arrived == members) {
    Bucket full = std::move(b);
    s.buckets.erase(name);
    lock.unlock();
    launch(name, std::move(full));
  }
  return result;
}

// bucket_fence's gradient: g, once the named bucket's collective is no longer
// in flight (at once when it is not: not launched yet, or done).
Future<Value> bucket_after_async(Args& a) {
  const std::string& name = a.string(1);
  Staging& s = staging();
  std::lock_guard lock(s.mutex);
  auto it = s.in_flight.find(name);
  if (it == s.in_flight.end()) return Future<Value>::ready(a[0]);
  it->second.push_back({Promise<Value>(), a[0]});
  return it->second.back().promise.get_future();
}

Future<Value> bucket_all_reduce_async(Args& a) { return stage_member(a, 1, -1, "bucket_all_reduce"); }

Future<Value> bucket_reduce_scatter_async(Args& a) {
  if (!a[1].is_array()) a.type_error(1, "an array");
  const int64_t k = a[1].as_array().size();
  const int64_t d = group_of_value(a[5], a.op()).size;
  return stage_member(a, 2, k * d, "bucket_reduce_scatter");
}

// ZeRO-3's cut of a gathered flat bucket into its parameters: views, no copy
// (split copies its pieces). `points` are the ends of the parts, the last
// one x's length, so that the gradient rule needs nothing of x (which would
// keep every gathered bucket of the forward pass for the backward).
std::vector<int64_t> part_bounds(Args& a, size_t i, int64_t length) {
  std::vector<int64_t> bounds{0};
  for (int64_t p : a.int_list(i)) {
    if (p < bounds.back()) {
      throw std::invalid_argument(error_message("[", a.op(), "] the ends of the parts must rise, got ", p,
                                                " after ", bounds.back()));
    }
    bounds.push_back(p);
  }
  if (length >= 0 && bounds.back() != length) {
    throw std::invalid_argument(error_message("[", a.op(), "] the last end of the parts must be x's length ",
                                              length, ", got ", bounds.back()));
  }
  return bounds;
}

Value bucket_parts(Args& a) {
  Array x = a.array(0);
  if (x.ndim() != 1) {
    throw std::invalid_argument(error_message("[bucket_parts] x must be a flat (1-d) array, got shape ",
                                              shape_str(x.shape())));
  }
  x = x.contiguous();
  std::vector<int64_t> bounds = part_bounds(a, 1, x.size());
  List out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    out.push_back(Value(Array::view(x, {bounds[i + 1] - bounds[i]}, {1}, x.offset() + bounds[i])));
  }
  return Value(std::move(out));
}

// The gradient of bucket_parts: the parts' cotangents joined in one copy,
// zeros for those no gradient reached (accumulating each part's getitem
// gradient would add as many arrays of the whole bucket); nil when none did.
Value bucket_parts_grad(Args& a) {
  if (!a[0].is_list()) a.type_error(0, "a list of the parts' cotangents");
  const List& gs = a.list(0);
  std::vector<int64_t> bounds = part_bounds(a, 1, -1);
  if (gs.size() + 1 != bounds.size()) {
    throw std::invalid_argument(error_message("[bucket_parts_grad] ", bounds.size() - 1,
                                              " parts, but the cotangent has ", gs.size()));
  }
  const Array* first = nullptr;
  for (const Value& g : gs) {
    if (!g.is_nil() && !first) first = &g.as_array();
  }
  if (!first) return Value();
  const DType dt = first->dtype();
  Array joined(dt, {bounds.back()});
  auto* dst = static_cast<char*>(joined.raw());
  const size_t item = dtype_size(dt);
  for (size_t i = 0; i < gs.size(); ++i) {
    const size_t n = static_cast<size_t>(bounds[i + 1] - bounds[i]) * item;
    if (gs[i].is_nil()) {
      std::memset(dst, 0, n);
    } else {
      Array g = gs[i].as_array().astype(dt).contiguous();
      if (g.nbytes() != n) {
        throw std::invalid_argument(error_message("[bucket_parts_grad] the cotangent of part ", i, " has ",
                                                  g.size(), " elements, the part ", n / item));
      }
      std::memcpy(dst, g.raw(), n);
    }
    dst += n;
  }
  return Value(std::move(joined));
}

const bool registered_buckets = register_primitives({
    {.name = "bucket_parts",
     .family = "distributed",
     .params = {{"x"}, {"points"}},
     .help = "A flat array cut into a list of views of it (ZeRO-3's parameters cut from a "
             "gathered bucket, no copy); points are the parts' ends, rising, the last x's length. "
             "The gradient joins the parts' gradients in one copy.",
     .eval = bucket_parts,
     .ns_per_element = 0.0,
     .grads = {"bucket_parts_grad(g, points)", ""}},
    {.name = "bucket_parts_grad",
     .family = "distributed",
     .params = {{"g"}, {"points"}},
     .help = "The gradient of bucket_parts: the list of the parts' cotangents joined into one flat "
             "array, zeros for nil items (parts no gradient reached); nil when all are nil.",
     .eval = bucket_parts_grad},
    {.name = "grad_bucket",
     .family = "distributed",
     .params = {{"x"}, {"bucket"}, {"member"}, {"members"}, opt("group", Value())},
     .help = "x unchanged; in the backward pass its gradient is summed over all localities in one "
             "all_reduce with the other members of the named bucket, started as soon as all "
             "members' gradients are ready (data-parallel gradient buckets). group: nil (every "
             "locality) or a group (mesh.group(axis)) to sum over its members only.",
     .eval = [](Args& a) -> Value { return a[0]; },
     .grads = {"bucket_all_reduce(g, bucket, member, members, group)", "", "", "", ""},
     // x itself, not a copy: a copy of every weight on every step (and kept
     // for the backward pass) is what a mark must not cost. The weights of a
     // step are never written in place while the mark's value lives.
     .passes_through = true},
    {.name = "grad_scatter",
     .family = "distributed",
     .params = {{"shard"}, {"x"}, opt("group", Value())},
     .help = "x unchanged (the whole flat bucket of a ZeRO-2 step, made from the whole weights "
             "this member holds); in the backward pass the gradient of x, summed over all "
             "localities (or the members of `group`) and cut in as many equal parts, becomes "
             "shard's: this member's part (reduce_scatter), as soon as x's gradient is complete. "
             "shard must have x's length / the group's size elements; x gets no gradient.",
     .eval = [](Args& a) -> Value {
       const Value& x = a[1];
       if (!x.is_array() || !a[0].is_array()) a.type_error(x.is_array() ? 0 : 1, "an array");
       const int64_t n = x.as_array().size(), k = a[0].as_array().size();
       const int64_t d = group_of_value(a[2], a.op()).size;
       if (x.as_array().ndim() != 1 || n != k * d) {
         throw std::invalid_argument(error_message(
             "[grad_scatter] x must be a flat array of shard's length times the group's size: x "
             "has shape ",
             shape_str(x.as_array().shape()), ", shard ", k, " elements, the group ", d,
             " members"));
       }
       return x;
     },
     .ns_per_element = 0.0,
     .grads = {"reduce_scatter(g, \"sum\", group)", "", ""}},
    {.name = "grad_local",
     .family = "distributed",
     .params = {{"shard"}, {"x"}},
     .help = "x unchanged (the whole flat bucket of a deterministic ZeRO-3 step, gathered from "
             "the slices); in the backward pass the gradient of x, whole and summed over no "
             "locality, becomes the gradient of `shard`, a stand-in of x's shape whose values are "
             "not read (broadcast_to(zeros(1), shape): one element): the step adds the chunks' "
             "whole gradients in its fixed order and sends each member its slice itself. x gets "
             "no gradient.",
     .eval = [](Args& a) -> Value {
       if (!a[0].is_array()) a.type_error(0, "an array");
       if (!a[1].is_array()) a.type_error(1, "an array");
       const Array& x = a[1].as_array();
       const Array& shard = a[0].as_array();
       if (x.ndim() != 1 || shard.shape() != x.shape()) {
         throw std::invalid_argument(error_message(
             "[grad_local] x must be a flat array of the stand-in shard's shape: x has shape ",
             shape_str(x.shape()), ", shard ", shape_str(shard.shape())));
       }
       return a[1];
     },
     .ns_per_element = 0.0,
     .grads = {"g", ""},
     .passes_through = true},
    {.name = "grad_bucket_shard",
     .family = "distributed",
     .params = {{"shard"}, {"x"}, {"bucket"}, {"member"}, {"members"}, opt("group", Value())},
     .help = "x unchanged (a whole weight of a ZeRO-2 step); in the backward pass x's gradient "
             "joins the other members of the named bucket, and once all have arrived the bucket "
             "(members in order, padded with zeros to shard's length times the group's size) is "
             "summed over the group and cut in equal parts (one reduce_scatter): this member's part "
             "is shard's gradient. x gets no gradient.",
     .eval = [](Args& a) -> Value {
       if (!a[0].is_array()) a.type_error(0, "an array");
       if (!a[1].is_array()) a.type_error(1, "an array");
       return a[1];
     },
     .ns_per_element = 0.0,
     .grads = {"bucket_reduce_scatter(g, shard, bucket, member, members, group)", "", "", "", "",
               ""},
     .passes_through = true},  // x itself, as grad_bucket's
    {.name = "bucket_fence",
     .family = "distributed",
     .params = {{"x"}, {"bucket"}},
     .help = "x unchanged; in the backward pass x's gradient goes on only once the named gradient "
             "bucket's collective is no longer in flight (bucket_after): back-pressure that bounds "
             "the gradient buckets on the wire while the backward pass computes (ZeRO-2's "
             "Model.ZERO2_IN_FLIGHT). Only an order: the values are unchanged.",
     .eval = [](Args& a) -> Value { return a[0]; },
     .ns_per_element = 0.0,
     .grads = {"bucket_after(g, bucket)", ""},
     .passes_through = true},
    async_spec(
        {.name = "bucket_after",
         .family = "distributed",
         .params = {{"g"}, {"bucket"}},
         .help = "g, once the named gradient bucket's collective (bucket_all_reduce, "
                 "bucket_reduce_scatter) is no longer in flight; at once when it is not (not "
                 "launched yet, or done). The gradient of bucket_fence.",
         .eval = nullptr,
         .grads = {}},
        bucket_after_async),
    async_spec(
        {.name = "bucket_reduce_scatter",
         .family = "distributed",
         .params = {{"x"}, {"shard"}, {"bucket"}, {"member"}, {"members"}, opt("group", Value())},
         .help = "Member `member` of the ZeRO-2 gradient bucket named `bucket` (of `members`): once "
                 "all have arrived, one reduce_scatter (sum) of all of them joined and padded with "
                 "zeros to shard's length times the group's size; member 0's result is this "
                 "locality's part (shard's length), the others' nil.",
         .eval = nullptr,
         .grads = {}},
        bucket_reduce_scatter_async),
    async_spec(
        {.name = "bucket_all_reduce",
         .family = "distributed",
         .params = {{"x"}, {"bucket"}, {"member"}, {"members"}, opt("group", Value())},
         .help =
             "Member `member` of the gradient bucket named `bucket` (of `members`): once all have "
             "arrived, one all_reduce (sum) of all of them over every locality, or over the "
             "members of `group` (mesh.group(axis)); the result is this member's part.",
         .eval = nullptr,
         .grads = {}},
        bucket_all_reduce_async),
});

}  // namespace
}  // namespace tessera::distributed
