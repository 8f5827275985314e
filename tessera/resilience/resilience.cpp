// The resilience family: replay and replicate, HPX's task resilience
// (hpx::resiliency async_replay, async_replicate and their _validate and
// _vote forms) as primitives of the language. See docs/resilience.md.
//
//   replay(n, f, args..., validate=g)      f(args...) up to n times, one
//       after the other, until an attempt returns (and g accepts) a value.
//   replicate(n, f, args..., validate=g, vote=h)   n copies of f(args...)
//       as n tasks at once; the result agreed by a majority of their
//       checksums, the first valid one, or the one h chooses.
//
// Each attempt and copy goes through the fault injector (faults.hpp).
#include "tessera/resilience/resilience.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/core/recursion_error.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/resilience/faults.hpp"
#include "tessera/runtime/interrupt.hpp"

namespace tessera {

namespace {

// Bytes are read 8 at a time into four lanes (independent multiply chains,
// so a large array sums at memory speed), each word mixed by a multiply and
// a rotation; the lanes and the length are mixed together at the end. Not a
// cryptographic hash: enough to tell results apart (a collision of two
// different results is a 2^-64 event, far below the fault rates guarded
// against).
struct Checksum {
  static constexpr uint64_t kMul = 0x9fb21c651e98df25ull;
  uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                      0x082efa98ec4e6c89ull};
  uint64_t length = 0;
  static uint64_t step(uint64_t h, uint64_t w) {
    h = (h ^ w) * kMul;
    return (h << 29) | (h >> 35);
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    length += n;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      uint64_t w[4];
      std::memcpy(w, b + i, 32);
      for (int k = 0; k < 4; ++k) lane[k] = step(lane[k], w[k]);
    }
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, b + i, 8);
      lane[0] = step(lane[0], w);
    }
    if (i < n) {
      uint64_t w = 0;
      std::memcpy(&w, b + i, n - i);
      lane[1] = step(lane[1], w ^ (uint64_t{n - i} << 56));
    }
  }
  uint64_t result() const {
    uint64_t h = length * kMul;
    for (uint64_t l : lane) h = step(h, l) + 0x9e3779b97f4a7c15ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
  }
  template <class T>
  void word(T v) {
    bytes(&v, sizeof v);
  }
  void value(const Value& v) {
    word(static_cast<int>(v.kind()) + (v.is_tuple() ? 100 : 0));
    switch (v.kind()) {
      case ValueKind::nil:
        break;
      case ValueKind::boolean:
        word(v.as_bool());
        break;
      case ValueKind::integer:
        word(v.as_int());
        break;
      case ValueKind::floating:
        word(v.as_float());
        break;
      case ValueKind::string:
        word(v.as_string().size());
        bytes(v.as_string().data(), v.as_string().size());
        break;
      case ValueKind::array:
        array(v.as_array());
        break;
      case ValueKind::list:
        word(v.as_list().size());
        for (const Value& e : v.as_list()) value(e);
        break;
      case ValueKind::dict:
        word(v.as_dict().items.size());
        for (const auto& [k, e] : v.as_dict().items) {
          value(k);
          value(e);
        }
        break;
      case ValueKind::function: {
        const Callable* f = v.as_function().get();
        word(reinterpret_cast<uintptr_t>(f));
        break;
      }
      case ValueKind::slice: {
        const Slice& s = v.as_slice();
        for (const auto& part : {s.start, s.stop, s.step}) {
          word(part.has_value());
          word(part.value_or(0));
        }
        break;
      }
      case ValueKind::tiled:
        array(v.as_tiled().tile);
        break;
    }
  }
  void array(const Array& a) {
    word(static_cast<int>(a.dtype()));
    word(a.ndim());
    for (int64_t d : a.shape()) word(d);
    Array c = a.contiguous();
    bytes(c.origin_raw(), c.nbytes());
  }
};

std::string function_name(const Value& f) { return f.as_function()->name(); }

// The arguments every call shares: n, f, validate and vote checked.
struct Call {
  const char* op;
  int n = 0;
  Value fn, validate, vote;
  List args;
  SourceLoc loc;
  std::string site;  // "file:line:col" of the call, or empty
  std::string name;  // f's name, for messages and the injector's only=
  bool inject = false;
  uint64_t serial = 0;

  std::string at() const { return site.empty() ? "" : " (at " + site + ")"; }
};

std::shared_ptr<Call> read_call(Args& a, const char* op, bool has_vote) {
  auto c = std::make_shared<Call>();
  c->op = op;
  int64_t n = a.integer(0);
  constexpr int64_t kMaxTimes = 1 << 20;
  if (n < 1 || n > kMaxTimes) {
    a.value_error(0, error_message("must be a number of ",
                                   op == std::string("replay") ? "attempts" : "copies",
                                   " from 1 to ", kMaxTimes, ", got ", n));
  }
  c->n = static_cast<int>(n);
  if (!a[1].is_function()) a.type_error(1, "a function");
  c->fn = a[1];
  c->name = function_name(c->fn);
  size_t k = 2;
  if (!a.is_nil(k) && !a[k].is_function()) a.type_error(k, "a function or nil");
  c->validate = a[k++];
  if (has_vote) {
    if (!a.is_nil(k) && !a[k].is_function()) a.type_error(k, "a function or nil");
    c->vote = a[k++];
  }
  c->args = a.list(k);
  c->loc = a.loc();
  c->site = a.site();
  c->inject = fault_injection_on();
  if (c->inject) {
    check_fault_environment(op);
    c->serial = next_fault_call();
  }
  return c;
}

bool is_interrupt(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Interrupted&) {
    return true;
  } catch (...) {
    return false;
  }
}

// An attempt whose result validate(result) rejected.
class Rejected : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `error` as the same kind of exception (ValueError stays ValueError in
// Python) with the message `msg`.
std::exception_ptr same_kind(const std::exception_ptr& error, const std::string& msg) {
  try {
    std::rethrow_exception(error);
  } catch (const Rejected&) {
    return std::make_exception_ptr(std::runtime_error(msg));
  } catch (const TypeError&) {
    return std::make_exception_ptr(TypeError(msg));
  } catch (const SyntaxError&) {
    return std::make_exception_ptr(SyntaxError(msg));
  } catch (const MemoryError&) {
    return std::make_exception_ptr(MemoryError(msg));
  } catch (const AttributeError&) {
    return std::make_exception_ptr(AttributeError(msg));
  } catch (const ZeroDivisionError&) {
    return std::make_exception_ptr(ZeroDivisionError(msg));
  } catch (const std::invalid_argument&) {
    return std::make_exception_ptr(std::invalid_argument(msg));
  } catch (const KeyError&) {
    return std::make_exception_ptr(KeyError(msg));
  } catch (const std::out_of_range&) {
    return std::make_exception_ptr(std::out_of_range(msg));
  } catch (const std::overflow_error&) {
    return std::make_exception_ptr(std::overflow_error(msg));
  } catch (const RecursionError&) {
    return std::make_exception_ptr(RecursionError(msg));
  } catch (...) {
    return std::make_exception_ptr(std::runtime_error(msg));
  }
}

// One call of f (attempt or copy `index`), through the injector, then
// validate: a future of the accepted value, or of the attempt's error.
Future<Value> attempt(const std::shared_ptr<Call>& c, int index) {
  Future<Value> r = invoke(c->fn, std::vector<Value>(c->args.begin(), c->args.end()), c->loc);
  if (c->inject) {
    r = r.then([c, index](const Value& v) {
      return inject_fault(v, c->serial, index, c->name, c->op, c->site);
    });
  }
  if (c->validate.is_nil()) return r;
  return r.then([c, index](const Value& v) -> Future<Value> {
    return invoke(c->validate, std::vector<Value>{v}, c->loc).then([c, index, v](const Value& ok) {
      if (!ok.truthy(c->op)) {
        throw Rejected(error_message("validate rejected the result of ",
                                     std::string(c->op) == "replay" ? "attempt " : "copy ",
                                     index + 1, ": ", function_name(c->validate),
                                     "(result) returned ", ok.describe()));
      }
      return v;
    });
  });
}

// Replay ---------------------------------------------------------------------

std::exception_ptr replay_exhausted(const Call& c, const std::exception_ptr& last) {
  return same_kind(
      last, error_message("[replay] ", c.name, " failed all ", c.n, " attempt", c.n == 1 ? "" : "s",
                          c.at(), "; the last error: ", exception_message(last)));
}

Future<Value> replay_from(const std::shared_ptr<Call>& c, int k);

// What to do once attempt k is done: its value, the next attempt, or the
// final error.
Future<Value> after_attempt(const std::shared_ptr<Call>& c, int k, const Future<Value>& r) {
  std::exception_ptr e = r.error();
  if (!e || is_interrupt(e)) return r;
  if (k + 1 >= c->n) return Future<Value>::failed(replay_exhausted(*c, e));
  return replay_from(c, k + 1);
}

Future<Value> replay_from(const std::shared_ptr<Call>& c, int k) {
  // Attempts that finish at once are looped here, not nested (n may be large).
  for (;; ++k) {
    if (interrupt_requested()) {
      return Future<Value>::failed(
          std::make_exception_ptr(Interrupted("[replay] interrupted (SIGINT)" + c->at())));
    }
    Future<Value> r = attempt(c, k);
    if (!r.is_ready()) {
      return r.chain([c, k](const Future<Value>& done) { return after_attempt(c, k, done); });
    }
    std::exception_ptr e = r.error();
    if (!e || is_interrupt(e)) return r;
    if (k + 1 >= c->n) return Future<Value>::failed(replay_exhausted(*c, e));
  }
}

Future<Value> replay(Args& a) {
  std::shared_ptr<Call> c = read_call(a, "replay", false);
  return replay_from(c, 0);
}

// Replicate ------------------------------------------------------------------

// Picks the result among the copies' (all done): see the help text.
Future<Value> choose(const std::shared_ptr<Call>& c, const std::vector<Future<Value>>& copies) {
  std::vector<std::pair<int, Value>> ok;
  std::exception_ptr last;
  int failed = 0;
  for (int i = 0; i < c->n; ++i) {
    if (std::exception_ptr e = copies[i].error()) {
      if (is_interrupt(e)) return Future<Value>::failed(e);
      last = e;
      ++failed;
    } else {
      ok.emplace_back(i, copies[i].get());
    }
  }
  if (ok.empty()) {
    return Future<Value>::failed(
        same_kind(last, error_message("[replicate] all ", c->n, " copies of ", c->name, " failed",
                                      c->at(), "; the last error: ", exception_message(last))));
  }
  if (!c->vote.is_nil()) {
    List values;
    for (auto& [i, v] : ok) values.push_back(v);
    return invoke(c->vote, std::vector<Value>{Value(std::move(values))}, c->loc);
  }
  if (!c->validate.is_nil()) return Future<Value>::ready(ok.front().second);
  // Consensus: the checksum most copies share, if more than half of those
  // that returned a value share it.
  std::map<uint64_t, std::vector<int>> groups;
  for (auto& [i, v] : ok) groups[value_checksum(v)].push_back(i);
  const std::vector<int>* best = nullptr;
  for (const auto& [sum, members] : groups) {
    if (!best || members.size() > best->size()) best = &members;
  }
  if (2 * best->size() > ok.size()) {
    for (auto& [i, v] : ok) {
      if (i == best->front()) return Future<Value>::ready(v);
    }
  }
  // The groups of agreeing copies, in copy order: "[1, 3], [2]".
  std::vector<std::vector<int>> ordered;
  for (const auto& [sum, members] : groups) ordered.push_back(members);
  std::sort(ordered.begin(), ordered.end());
  std::string listed;
  for (const auto& members : ordered) {
    listed += listed.empty() ? "[" : ", [";
    for (size_t k = 0; k < members.size(); ++k)
      listed += error_message(k ? ", " : "", members[k] + 1);
    listed += "]";
  }
  return Future<Value>::failed(std::make_exception_ptr(std::runtime_error(
      error_message("[replicate] no majority among the results of ", ok.size(), " cop",
                    ok.size() == 1 ? "y" : "ies", " of ", c->name,
                    failed ? error_message(" (", failed, " more failed)") : "", ": ", groups.size(),
                    " different checksums, copies agreeing: ", listed, c->at()))));
}

// Phylanx's direct-execution rule for the copies: the measured time of
// copy 1 at each call site (keyed by the node's site string, which lives
// as long as the node), so that copies too cheap to be worth a task run
// one after the other on the calling thread. The decision takes the least
// of the last three measurements: one copy preempted or slowed by a page
// fault (common on a loaded machine) does not flip a site to tasks, while
// a site whose copies really grew changes within three calls.
class CopyCosts {
 public:
  // The least of the last measured times of one copy at `site` in ns;
  // negative if none.
  double get(const std::string* site) {
    std::lock_guard lock(mutex_);
    auto it = ns_.find(site);
    if (it == ns_.end()) return -1.0;
    const Recent& r = it->second;
    double least = r.ns[0];
    for (int i = 1; i < r.count; ++i) least = std::min(least, r.ns[i]);
    return least;
  }
  void set(const std::string* site, double ns) {
    std::lock_guard lock(mutex_);
    if (ns_.size() > 4096) ns_.clear();  // sites of programs long gone
    Recent& r = ns_[site];
    r.ns[r.next] = ns;
    r.next = (r.next + 1) % kKept;
    r.count = std::min(r.count + 1, kKept);
  }

 private:
  static constexpr int kKept = 3;
  struct Recent {
    double ns[kKept] = {0, 0, 0};
    int next = 0;
    int count = 0;
  };
  std::mutex mutex_;
  std::unordered_map<const std::string*, Recent> ns_;
};

CopyCosts& copy_costs() {
  static CopyCosts costs;
  return costs;
}

Future<Value> replicate(Args& a) {
  std::shared_ptr<Call> c = read_call(a, "replicate", true);
  struct Join {
    std::vector<Future<Value>> copies;
    std::atomic<int> remaining;
    Promise<Value> promise;
  };
  auto join = std::make_shared<Join>();
  join->copies.reserve(c->n);
  join->remaining.store(c->n);
  const std::string* site = &a.site();
  const double cost = copy_costs().get(site);
  const bool inline_all = cost >= 0 && cost < spawn_threshold_ns();
  // Copies 2..n are tasks of their own, spawned first so that the
  // scheduler runs them on other workers while the calling thread runs
  // copy 1 (a task for it too would only leave this thread waiting);
  // copies cheaper than a spawn all run here, in order.
  join->copies.emplace_back();
  for (int i = 1; i < c->n && !inline_all; ++i) {
    join->copies.push_back(async([c, i] { return attempt(c, i); }));
  }
  auto run_here = [&c](int i) {
    try {
      return attempt(c, i);
    } catch (...) {
      return Future<Value>::failed(std::current_exception());
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  join->copies[0] = run_here(0);
  copy_costs().set(site, static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now() - t0)
                                                 .count()));
  for (int i = 1; i < c->n && inline_all; ++i) join->copies.push_back(run_here(i));
  Future<Value> result = join->promise.get_future();
  for (int i = 0; i < c->n; ++i) {
    join->copies[i].on_ready([c, join] {
      if (join->remaining.fetch_sub(1) != 1) return;
      Future<Value> chosen;
      try {
        chosen = choose(c, join->copies);
      } catch (...) {
        chosen = Future<Value>::failed(std::current_exception());
      }
      join->promise.set_from(chosen);
    });
  }
  return result;
}

const char* kCommonHelp =
    " f is any function (a lambda, a defined function, a primitive); n is at least 1. Each "
    "attempt's result goes through the fault injector (TESSERA_INJECT_FAULTS, "
    "docs/resilience.md) before validation. f should not write into its arguments. Not "
    "differentiable.";

PrimitiveSpec resilience_spec(PrimitiveSpec spec, Future<Value> (*fn)(Args&)) {
  spec = async_spec(std::move(spec), fn);
  spec.calls_functions = true;
  spec.help += kCommonHelp;
  return spec;
}

const bool registered_resilience = register_primitives({
    resilience_spec(
        {.name = "replay",
         .family = "resilience",
         .params = {{"n"}, {"f"}, keyword("validate", Value()), {"args"}},
         .variadic = true,
         .help = "f(args...), run again when it fails, up to n attempts in all, one after the "
                 "other (HPX's async_replay): an attempt fails when f raises an error or, with "
                 "validate, when validate(result) is false (or raises). The first accepted result "
                 "is the value. After n failures, the error names the attempts and carries the "
                 "last one's error, of its kind (a ValueError stays a ValueError; a rejected "
                 "result gives a RuntimeError). An interrupt (Ctrl-C) is not retried.",
         .eval = nullptr},
        replay),
    resilience_spec(
        {.name = "replicate",
         .family = "resilience",
         .params = {{"n"}, {"f"}, keyword("validate", Value()), keyword("vote", Value()), {"args"}},
         .variadic = true,
         .help = "n copies of f(args...) run at once (HPX's async_replicate): the first on the "
                 "calling thread, the others as tasks on other workers (copies measured to take "
                 "less than a spawn costs, about 20 us, run one after the other on the calling "
                 "thread). "
                 "Copies that raise (or that validate rejects) are dropped, then the value is, "
                 "with vote, vote(list of the remaining results); else with validate, the first "
                 "valid result (by copy number); else the consensus: the result whose checksum "
                 "(bitwise, over dtype, shape and bytes) more than half of the remaining results "
                 "share, and a RuntimeError naming the groups when none does. When every copy "
                 "fails, the error is the last copy's, of its kind, naming the copies.",
         .eval = nullptr},
        replicate),
});

}  // namespace

uint64_t value_checksum(const Value& v) {
  Checksum c;
  c.value(v);
  return c.result();
}

}  // namespace tessera
