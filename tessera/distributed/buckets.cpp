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
  int group = 0;  // the group it is reduced over (0: every locality)
  std::vector<Member> members;
  int arrived = 0;
  Clock::time_point start;
};

// Buckets waiting for members, by name. Never destroyed: the watchdog thread
// (detached) may still look at it while the process exits.
struct Staging {
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::string, Bucket> buckets;
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
  Array flat(dt, {total});
  auto* dst = static_cast<char*>(flat.raw());
  for (const auto& m : b.members) {
    std::memcpy(dst, m.x.raw(), m.x.nbytes());
    dst += m.x.nbytes();
  }
  std::string site = "bucket " + name + " at " + b.members[0].site;
  auto members = std::make_shared<std::vector<Member>>(std::move(b.members));
  for (auto& m : *members) m.x = Array();  // the data is in flat now
  Future<Value> f = detail::all_reduce(flat, ReduceOp::sum, site, b.group);
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

Future<Value> bucket_all_reduce_async(Args& a) {
  Array x = a.array(0);
  if (x.dtype() == DType::bool_) {
    throw TypeError(error_message("[bucket_all_reduce] argument 'x' must be a numeric array, got a bool array"));
  }
  const std::string& name = a.string(1);
  int64_t member = a.integer(2), members = a.integer(3);
  if (members < 1 || member < 0 || member >= members) {
    throw std::out_of_range(error_message("[bucket_all_reduce] member ", member, " of gradient bucket '", name,
                                          "' is not in 0..", members - 1, " (members = ", members, ")"));
  }
  GroupInfo g = group_of_value(a[4], a.op());
  if (g.size == 1) return Future<Value>::ready(Value(x));
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
  } else if (b.group != g.id) {
    throw std::invalid_argument(error_message(
        "[bucket_all_reduce] member ", member, " of gradient bucket '", name,
        "' is reduced over group ", g.id, ", the bucket's earlier members over group ", b.group));
  } else if (static_cast<int64_t>(b.members.size()) != members) {
    throw std::invalid_argument(error_message("[bucket_all_reduce] gradient bucket '", name, "' has ",
                                              b.members.size(), " members, but member ", member, " says ", members));
  }
  Member& m = b.members[static_cast<size_t>(member)];
  if (m.arrived) {
    throw std::invalid_argument(error_message(
        "[bucket_all_reduce] member ", member, " of gradient bucket '", name,
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

const bool registered = register_primitives({
    {.name = "grad_bucket",
     .family = "distributed",
     .params = {{"x"}, {"bucket"}, {"member"}, {"members"}, opt("group", Value())},
     .help = "x unchanged; in the backward pass its gradient is summed over all localities in one "
             "all_reduce with the other members of the named bucket, started as soon as all "
             "members' gradients are ready (data-parallel gradient buckets). group: nil (every "
             "locality) or a group (mesh.group(axis)) to sum over its members only.",
     .eval = [](Args& a) -> Value { return a[0]; },
     .grads = {"bucket_all_reduce(g, bucket, member, members, group)", "", "", "", ""}},
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
