// Parallel loops (tessera.prange, docs/runtime.md "Parallel loops"): the
// native code of a `parallel_while` loop run as chunks of its turns on the
// runtime's workers. The plan (made once per loop) finds the counter, the
// scalar reductions and the arrays written; a run splits the turns left into
// chunks fixed by their number alone, runs each chunk's turns with private
// registers, and combines the reductions' partials in chunk order. Anything
// a chunk cannot finish puts every array back and leaves the loop to the
// sequential path, which meets the same error at the same turn.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera {

// How a reduction variable's partials combine: s = s OP e in every turn.
enum class ReduceOp : uint8_t { add, sub, mul, bit_or, bit_and, bit_xor, min, max };

struct ParallelPlan {
  int counter = -1;  // k of `while k < e` (step > 0) or `while k > e` (step < 0)
  int end = -1;      // e
  int64_t step = 1;
  struct Reduction {
    int reg;
    ReduceOp op;
  };
  std::vector<Reduction> reductions;
  std::vector<int> written;     // array registers whose elements the body writes
  bool writes_unknown = false;  // a write through an expression: every array is kept
  int target = -1;              // the loop's variable (i = k at each turn's start)
  // Every element write's first index is the loop's variable: turn i writes
  // only row i of the arrays written (so a chunk keeps only its own rows).
  bool rows_owned = true;
  std::vector<std::pair<int, int>> row_writes;  // (array register, first index register)
  std::vector<char> always;  // assigned by every turn (on every path through the body)
};

namespace {

// Turns of a prange loop are cut into this many chunks (fewer when there
// are fewer turns), whatever the number of threads: a reduction's partials,
// and so its bits, depend on the turns alone.
constexpr int64_t kChunks = 64;

using FNode = FastLoop::Impl::FNode;

bool reads(const FNode& n, int reg) {
  if (n.op == Op::Var && n.reg == reg) return true;
  for (const FNode& k : n.kids)
    if (reads(k, reg)) return true;
  return false;
}

bool name_is(const FNode& n, std::initializer_list<const char*> names) {
  if (!n.spec) return false;
  for (const char* s : names)
    if (n.spec->name == s) return true;
  return false;
}

// The reduction `n` (an assignment to register r) is, if it is one:
// r = r OP e (OP: + - * | & ^, e not reading r), or Python's min/max of two,
// block(a = r, b = e, if(b < a, b, a)) as the translator writes it.
bool match_reduction(const FNode& n, ReduceOp& op) {
  const int r = n.reg;
  if (n.kids.size() != 1) return false;
  const FNode& v = n.kids[0];
  if ((v.op == Op::Binary || v.op == Op::Call) && v.kids.size() == 2 && v.kids[0].op == Op::Var &&
      v.kids[0].reg == r && !reads(v.kids[1], r)) {
    if (name_is(v, {"add", "iadd"})) op = ReduceOp::add;
    else if (name_is(v, {"subtract", "isub"})) op = ReduceOp::sub;
    else if (name_is(v, {"multiply", "imul"})) op = ReduceOp::mul;
    else if (name_is(v, {"bitwise_or", "ior"})) op = ReduceOp::bit_or;
    else if (name_is(v, {"bitwise_and", "iand"})) op = ReduceOp::bit_and;
    else if (name_is(v, {"bitwise_xor", "ixor"})) op = ReduceOp::bit_xor;
    else return false;
    return true;
  }
  if (v.op == Op::Block && v.kids.size() == 3) {
    const FNode& a = v.kids[0];
    const FNode& b = v.kids[1];
    const FNode& f = v.kids[2];
    if (a.op != Op::Assign || a.kids[0].op != Op::Var || a.kids[0].reg != r) return false;
    if (b.op != Op::Assign || reads(b.kids[0], r) || reads(b.kids[0], a.reg)) return false;
    if (f.op != Op::If || f.kids.size() != 3) return false;
    const FNode& c = f.kids[0];
    if (c.op != Op::Binary || c.kids.size() != 2 || c.kids[0].op != Op::Var ||
        c.kids[0].reg != b.reg || c.kids[1].op != Op::Var || c.kids[1].reg != a.reg)
      return false;
    if (f.kids[1].op != Op::Var || f.kids[1].reg != b.reg || f.kids[2].op != Op::Var ||
        f.kids[2].reg != a.reg)
      return false;
    if (name_is(c, {"less"}) || c.fast == Fast::lt) op = ReduceOp::min;
    else if (name_is(c, {"greater"}) || c.fast == Fast::gt) op = ReduceOp::max;
    else return false;
    return true;
  }
  return false;
}

// What the body does with each register, walked in evaluation order.
struct BodyFacts {
  std::vector<char> exposed;   // read in a turn before any assignment in that turn
  std::vector<char> assigned;  // assigned somewhere in the body
  std::vector<int> reads;      // reads in the body
  std::vector<int> pattern_reads;
  std::vector<int> assigns, reduction_assigns;
  std::vector<int> op;  // the reduction's ReduceOp, -1 none yet, -2 mixed
  std::string refuse;   // a construct that keeps the loop serial
};

void walk(const FNode& n, std::vector<char>& defined, BodyFacts& f, int depth,
          const FastLoop::Impl& im, ParallelPlan& plan) {
  switch (n.op) {
    case Op::Var:
      ++f.reads[n.reg];
      if (!defined[n.reg]) f.exposed[n.reg] = 1;
      return;
    case Op::Assign: {
      walk(n.kids[0], defined, f, depth, im, plan);
      // x = setitem(x, ...): an element write, x itself unchanged.
      const FNode& v = n.kids[0];
      if (v.op == Op::SetItem && !v.kids.empty() && v.kids[0].op == Op::Var &&
          v.kids[0].reg == n.reg)
        return;
      f.assigned[n.reg] = 1;
      ++f.assigns[n.reg];
      ReduceOp op;
      if (match_reduction(n, op)) {
        ++f.reduction_assigns[n.reg];
        ++f.pattern_reads[n.reg];
        int& o = f.op[n.reg];
        o = (o == -1 || o == static_cast<int>(op)) ? static_cast<int>(op) : -2;
      }
      defined[n.reg] = 1;
      return;
    }
    case Op::If: {
      walk(n.kids[0], defined, f, depth, im, plan);
      std::vector<char> t = defined, e = defined;
      walk(n.kids[1], t, f, depth, im, plan);
      if (n.kids.size() > 2) {
        walk(n.kids[2], e, f, depth, im, plan);
        for (size_t i = 0; i < defined.size(); ++i) defined[i] = t[i] && e[i];
      }
      return;
    }
    case Op::While: {
      walk(n.kids[0], defined, f, depth + 1, im, plan);
      std::vector<char> b = defined;
      walk(n.kids[1], b, f, depth + 1, im, plan);
      return;
    }
    case Op::Logic: {
      walk(n.kids[0], defined, f, depth, im, plan);
      std::vector<char> r = defined;
      walk(n.kids[1], r, f, depth, im, plan);
      return;
    }
    case Op::Break:
      if (depth == 0 && f.refuse.empty()) f.refuse = "'break' leaves a prange loop";
      return;
    case Op::Uniform:
      if (f.refuse.empty())
        f.refuse = "np.random.random() draws from one stream, in the order of the turns";
      return;
    case Op::Bail:
      if (f.refuse.empty()) f.refuse = "a branch runs in the general evaluation when taken";
      return;
    case Op::NativeCall:
      if (f.refuse.empty()) f.refuse = "a recursive function's call (its own native code)";
      return;
    case Op::NewList:
    case Op::NewDict:
    case Op::Append:
      // Lists and dicts live in the interpreter's one table of objects.
      if (f.refuse.empty()) f.refuse = "the body builds lists";
      return;
    case Op::Call:
      // Arrays made in the body go into the interpreter's one table of
      // arrays (native_alloc), which the chunks' threads cannot share.
      if (n.spec && f.refuse.empty()) {
        const std::string& m = n.spec->name;
        if (m == "zeros" || m == "ones" || m == "empty" || m == "zeros_like" ||
            m == "ones_like" || m == "empty_like" || m == "copy" || m == "copy_value")
          f.refuse = "the body makes arrays (np." + m + ")";
        if (m == "iterate")  // lists are in the interpreter's table of objects
          f.refuse = "the body iterates a list";
      }
      break;
    case Op::SetItem:
      // setitem(x, value, indices...)
      if (!n.kids.empty() && n.kids[0].op == Op::Var && im.vars[n.kids[0].reg].depth >= 0)
        plan.written.push_back(n.kids[0].reg);
      else
        plan.writes_unknown = true;
      if (n.kids.size() >= 3 && n.kids[2].op == Op::Var && n.kids[0].op == Op::Var)
        plan.row_writes.push_back({n.kids[0].reg, n.kids[2].reg});
      else
        plan.rows_owned = false;
      break;
    default:
      break;
  }
  for (const FNode& k : n.kids) walk(k, defined, f, depth, im, plan);
}

std::string name_of(const FastLoop::Impl& im, int r) {
  if (r >= 0 && static_cast<size_t>(r) < im.names.size() && !im.names[r].empty())
    return "'" + im.names[r] + "'";
  return "a variable";
}

bool is_int(const Reg& r) { return r.k == Reg::PyInt || r.k == Reg::NpInt; }

// The value that leaves a reduction's partial unchanged, of the kind of `s`.
bool identity(const Reg& s, ReduceOp op, Reg& out) {
  out = s;
  if (s.k == Reg::PyFloat || s.k == Reg::NpFloat) {
    const double inf = std::numeric_limits<double>::infinity();
    switch (op) {
      case ReduceOp::add:
      case ReduceOp::sub: out.f = -0.0; return true;  // x + -0.0 is x, -0.0 too
      case ReduceOp::mul: out.f = 1.0; return true;
      case ReduceOp::min: out.f = inf; return true;
      case ReduceOp::max: out.f = -inf; return true;
      default: return false;
    }
  }
  if (is_int(s)) {
    switch (op) {
      case ReduceOp::add:
      case ReduceOp::sub:
      case ReduceOp::bit_or:
      case ReduceOp::bit_xor: out.i = 0; return true;
      case ReduceOp::mul: out.i = 1; return true;
      case ReduceOp::bit_and: out.i = -1; return true;
      case ReduceOp::min: out.i = std::numeric_limits<int64_t>::max(); return true;
      case ReduceOp::max: out.i = std::numeric_limits<int64_t>::min(); return true;
    }
  }
  if (s.k == Reg::PyBool || s.k == Reg::NpBool) {
    out.i = 0;
    switch (op) {
      case ReduceOp::bit_or:
      case ReduceOp::bit_xor: out.b = false; return true;
      case ReduceOp::bit_and: out.b = true; return true;
      default: return false;
    }
  }
  return false;
}

double as_double(const Reg& r) {
  if (r.k == Reg::PyFloat || r.k == Reg::NpFloat) return r.f;
  if (is_int(r)) return static_cast<double>(r.i);
  return r.b ? 1.0 : 0.0;
}

// acc = acc OP p (p a chunk's partial) as the turns would have made it:
// NumPy's kinds (a NumPy scalar on either side makes one); false for what
// only the sequential path does (an int overflow, bools added).
bool combine(Reg& acc, const Reg& p, ReduceOp op) {
  if (!acc.scalar() || !p.scalar() || acc.narrow() || p.narrow()) return false;
  const bool strong = acc.strong() || p.strong();
  const bool fa = acc.k == Reg::PyFloat || acc.k == Reg::NpFloat;
  const bool fp = p.k == Reg::PyFloat || p.k == Reg::NpFloat;
  const bool ba = acc.k == Reg::PyBool || acc.k == Reg::NpBool;
  const bool bp = p.k == Reg::PyBool || p.k == Reg::NpBool;
  if (op == ReduceOp::min || op == ReduceOp::max) {
    // Python's min(a, b): b if b < a else a, the object itself.
    if (ba || bp) return false;
    const bool take = (fa || fp) ? (op == ReduceOp::min ? as_double(p) < as_double(acc)
                                                        : as_double(p) > as_double(acc))
                                 : (op == ReduceOp::min ? p.i < acc.i : p.i > acc.i);
    if (take) acc = p;
    return true;
  }
  if (fa || fp) {
    if (op != ReduceOp::add && op != ReduceOp::sub && op != ReduceOp::mul) return false;
    const double x = as_double(acc), y = as_double(p);
    acc = Reg::real(strong ? Reg::NpFloat : Reg::PyFloat, op == ReduceOp::mul ? x * y : x + y);
    return true;
  }
  if (ba && bp) {
    if (op == ReduceOp::bit_or) acc = Reg::boolean(acc.k, acc.b || p.b);
    else if (op == ReduceOp::bit_and) acc = Reg::boolean(acc.k, acc.b && p.b);
    else if (op == ReduceOp::bit_xor) acc = Reg::boolean(acc.k, acc.b != p.b);
    else return false;
    if (strong) acc.k = Reg::NpBool;
    return true;
  }
  if (ba || bp) return false;
  // An overflow (Python's big ints; NumPy's wrap-around with its warning)
  // is left to the sequential path, which does what range does.
  int64_t r = 0;
  switch (op) {
    case ReduceOp::add:
    case ReduceOp::sub:
      if (__builtin_add_overflow(acc.i, p.i, &r)) return false;
      break;
    case ReduceOp::mul:
      if (__builtin_mul_overflow(acc.i, p.i, &r)) return false;
      break;
    case ReduceOp::bit_or: r = acc.i | p.i; break;
    case ReduceOp::bit_and: r = acc.i & p.i; break;
    case ReduceOp::bit_xor: r = acc.i ^ p.i; break;
    default: return false;
  }
  acc = Reg::make(strong ? Reg::NpInt : Reg::PyInt, r);
  return true;
}

// The bytes of one row (axis 0) of the array `e`.
size_t row_bytes(const ArrEntry& e) {
  int64_t count = 1;
  for (int d = 1; d < e.nd; ++d) count *= e.shape[d];
  return static_cast<size_t>(count) * dtype_size(e.dt);
}

// Copies row `r` of the array `e` to `buf + at` (save) or back from there
// (restore), through its strides; `at` advances by the row's bytes.
void copy_row(const ArrEntry& e, int64_t r, char* buf, size_t& at, bool save) {
  const size_t esz = dtype_size(e.dt);
  int64_t count = 1;
  bool dense = true;  // the row's elements are one block (C order after axis 0)
  for (int d = e.nd - 1; d >= 1; --d) {
    if (e.strides[d] != count) dense = false;
    count *= e.shape[d];
  }
  if (count == 0) return;
  char* row = e.base + r * e.strides[0] * static_cast<int64_t>(esz);
  auto move = [&](char* p, size_t n) {
    if (save) {
      std::memcpy(buf + at, p, n);
    } else {
      std::memcpy(p, buf + at, n);
    }
    at += n;
  };
  if (dense) return move(row, static_cast<size_t>(count) * esz);
  int64_t idx[kMaxDims] = {};
  for (;;) {
    char* p = row;
    for (int d = 1; d < e.nd; ++d) p += idx[d] * e.strides[d] * static_cast<int64_t>(esz);
    move(p, esz);
    int d = e.nd - 1;
    for (; d >= 1; --d) {
      if (++idx[d] < e.shape[d]) break;
      idx[d] = 0;
    }
    if (d < 1) return;
  }
}

// The rows' old bytes, kept from run to run on the calling thread (a fresh
// buffer of many MB each run costs its page faults: 14 ms of 18 MB
// measured); a run nested on the same thread takes a buffer of its own.
struct RowBuffer {
  std::vector<char> own;
  std::vector<char>* buf;
  bool* busy = nullptr;
  explicit RowBuffer(size_t bytes) {
    thread_local std::vector<char> cached;
    thread_local bool in_use = false;
    constexpr size_t kMaxCached = size_t{64} << 20;
    if (!in_use && bytes <= kMaxCached) {
      in_use = true;
      busy = &in_use;
      buf = &cached;
    } else {
      buf = &own;
    }
    if (buf->size() < bytes) buf->resize(bytes);
  }
  ~RowBuffer() {
    if (busy) *busy = false;
  }
  char* data() { return buf->data(); }
};

// Runs body(0) ... body(n - 1) on the workers, one chunk per claim (not in
// parallel_for's tiles of several chunks: a chunk is the unit of load
// balance, and on a loaded machine the caller then waits at the end only for
// the chunk a descheduled helper holds). The caller takes chunks itself.
void run_chunks(int64_t n, const std::function<void(int64_t)>& body) {
  check_interrupt();
  if (n <= 1 || num_threads() == 1) {
    for (int64_t c = 0; c < n; ++c) body(c);
    return;
  }
  if (in_worker()) {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<int64_t>(0, n, 1),
        [&](const oneapi::tbb::blocked_range<int64_t>& r) {
          for (int64_t c = r.begin(); c != r.end(); ++c) body(c);
        },
        oneapi::tbb::simple_partitioner());
    return;
  }
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mutex;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  // A helper holds the shared state; it calls `body` only for a chunk it
  // claimed, and this thread returns only when every chunk is done.
  auto work = [n, &body](Shared& sh) {
    for (;;) {
      const int64_t c = sh.next.fetch_add(1, std::memory_order_relaxed);
      if (c >= n) return;
      try {
        body(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(sh.mutex);
        if (!sh.error) sh.error = std::current_exception();
      }
      sh.done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(n - 1, num_threads() - 1);
  {
    HelperOffer offer(helpers, [shared, work] { work(*shared); });
    work(*shared);
    while (shared->done.load(std::memory_order_acquire) < n) std::this_thread::yield();
  }
  if (shared->error) std::rethrow_exception(shared->error);
}

}  // namespace

void FastLoop::Impl::name_reg(int r, const std::string& name) {
  if (r < 0) return;
  if (names.size() <= static_cast<size_t>(r)) names.resize(r + 1);
  if (names[r].empty()) names[r] = name;
}

void FastLoop::Impl::plan_parallel() {
  auto plan = std::make_shared<ParallelPlan>();
  auto refuse = [&](std::string why) { serial_why = std::move(why); };
  // The translator's `while k < e: i = k; k = k + step; body`.
  if (cond.op != Op::Binary || cond.kids.size() != 2 || cond.kids[0].op != Op::Var ||
      cond.kids[1].op != Op::Var || (cond.fast != Fast::lt && cond.fast != Fast::gt)) {
    return refuse("its step is not a constant");
  }
  plan->counter = cond.kids[0].reg;
  plan->end = cond.kids[1].reg;
  const int k = plan->counter;
  bool stepped = false;
  if (body.op == Op::Block) {
    for (size_t s = 0; s < body.kids.size() && s < 2; ++s) {
      const FNode& a = body.kids[s];
      if (a.op != Op::Assign || a.reg != k) continue;
      const FNode& v = a.kids[0];
      if (v.op == Op::Binary && v.fast == Fast::add && v.kids[0].op == Op::Var &&
          v.kids[0].reg == k && v.kids[1].op == Op::Const && v.kids[1].constant.k == Reg::PyInt &&
          v.kids[1].constant.i != 0) {
        plan->step = v.kids[1].constant.i;
        stepped = true;
      }
    }
  }
  if (!stepped || (plan->step > 0) != (cond.fast == Fast::lt))
    return refuse("its step is not a constant");
  if (body.kids[0].op == Op::Assign && body.kids[0].kids[0].op == Op::Var &&
      body.kids[0].kids[0].reg == k)
    plan->target = body.kids[0].reg;
  const size_t n = vars.size();
  BodyFacts f;
  f.exposed.assign(n, 0);
  f.assigned.assign(n, 0);
  f.reads.assign(n, 0);
  f.pattern_reads.assign(n, 0);
  f.assigns.assign(n, 0);
  f.reduction_assigns.assign(n, 0);
  f.op.assign(n, -1);
  std::vector<char> defined(n, 0);
  walk(body, defined, f, 0, *this, *plan);
  plan->always = defined;
  if (!f.refuse.empty()) return refuse(f.refuse);
  if (f.assigned[plan->end]) return refuse("the body assigns the loop's end");
  if (f.assigns[k] != 1) return refuse("the body assigns the loop's counter");
  for (size_t r = 0; r < n; ++r) {
    const int ri = static_cast<int>(r);
    if (ri == k || !f.assigned[r] || !f.exposed[r]) continue;
    // Read in a turn before that turn assigns it: a value carried from turn
    // to turn, which only a reduction may be.
    const bool reduction = f.op[r] >= 0 && f.reduction_assigns[r] == f.assigns[r] &&
                           f.pattern_reads[r] == f.reads[r];
    if (!reduction)
      return refuse(name_of(*this, ri) +
                    " is carried from one turn to the next (read before the turn assigns it) "
                    "and is not a reduction (s += e, s -= e, s *= e, s |= e, s &= e, s ^= e, "
                    "s = min(s, e), s = max(s, e))");
    plan->reductions.push_back({ri, static_cast<ReduceOp>(f.op[r])});
  }
  if (plan->target < 0 || f.assigns[plan->target] != 1) plan->rows_owned = false;
  for (const auto& [arr, idx] : plan->row_writes)
    if (idx != plan->target) plan->rows_owned = false;
  std::sort(plan->written.begin(), plan->written.end());
  plan->written.erase(std::unique(plan->written.begin(), plan->written.end()),
                      plan->written.end());
  this->plan = std::move(plan);
}

FastLoop::Impl::Parallel FastLoop::Impl::run_parallel(const NativeCode& code, State& st,
                                                      Reg& last) const {
  const ParallelPlan& p = *plan;
  const Reg k0 = st.regs[p.counter], end = st.regs[p.end];
  if (!is_int(k0) || !is_int(end)) {
    note_serial_prange(where, "its bounds are not integers");
    return Parallel::serial;
  }
  const __int128 span = p.step > 0 ? static_cast<__int128>(end.i) - k0.i
                                   : static_cast<__int128>(k0.i) - end.i;
  const __int128 astep = p.step > 0 ? p.step : -static_cast<__int128>(p.step);
  if (span <= 0) return Parallel::serial;  // no turn left
  const int64_t turns = static_cast<int64_t>((span + astep - 1) / astep);
  if (turns < 2) return Parallel::serial;
  const int64_t chunks = std::min(turns, kChunks);
  // The counter at the start of turn t: k0 + t * step fits (the last turn's
  // start is before the end; the chunk ends past it are only compared).
  auto counter_at = [&](int64_t t) -> int64_t {
    const __int128 v = static_cast<__int128>(k0.i) + static_cast<__int128>(t) * p.step;
    if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
    if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(v);
  };

  std::vector<Reg> start = st.regs;
  for (const auto& red : p.reductions) {
    if (!identity(st.regs[red.reg], red.op, start[red.reg])) {
      note_serial_prange(where, name_of(*this, red.reg) + " is not a number this reduction takes");
      return Parallel::serial;
    }
  }

  // The arrays the chunks may write, kept to put back if a chunk stops.
  std::vector<int32_t> kept;
  auto keep = [&](const Reg& r) {
    if (r.k != Reg::Arr || !st.arrays[r.a].writable) return;
    if (std::find(kept.begin(), kept.end(), r.a) == kept.end()) kept.push_back(r.a);
  };
  if (p.writes_unknown) {
    for (const Reg& r : st.regs) keep(r);
  } else {
    for (int r : p.written) keep(st.regs[r]);
  }
  // Each chunk keeps the rows it will write when every write's first index
  // is the loop's variable, that variable stays in [0, rows) and no two
  // arrays written share a buffer; otherwise the arrays are copied whole.
  bool by_rows = p.rows_owned && !p.writes_unknown;
  if (by_rows) {
    const int64_t first = k0.i, last_row = counter_at(turns - 1);
    for (size_t i = 0; i < kept.size() && by_rows; ++i) {
      const ArrEntry& e = st.arrays[kept[i]];
      if (e.nd < 1 || e.nd > kMaxDims || std::min(first, last_row) < 0 ||
          std::max(first, last_row) >= e.shape[0])
        by_rows = false;
      for (size_t j = 0; j < i && by_rows; ++j)
        if (st.arrays[kept[j]].array.shares_storage(e.array)) by_rows = false;
    }
  }
  size_t per_turn = 0;  // bytes of the rows one turn writes
  if (by_rows)
    for (int32_t a : kept) per_turn += row_bytes(st.arrays[a]);
  std::unique_ptr<RowBuffer> rows;
  if (by_rows) rows = std::make_unique<RowBuffer>(per_turn * static_cast<size_t>(turns));
  std::vector<Array> before;
  if (!by_rows) {
    before.reserve(kept.size());
    for (int32_t a : kept) before.push_back(st.arrays[a].array.copy());
  }

  std::vector<NativeArray> arrs;
  native_array_table(st.regs, st.arrays, arrs);

  struct Chunk {
    std::vector<Reg> regs;
    std::vector<uint8_t> assigned;
    std::vector<uint64_t> counts;
    Reg last;
    int32_t status = -1;  // not run
    std::thread::id thread;
  };
  std::vector<Chunk> ch(static_cast<size_t>(chunks));
  // 1: a chunk stopped (the loop goes sequential); 2: Ctrl-C.
  std::atomic<int> stop{0};
  auto run_chunk = [&](int64_t c) {
    if (stop.load(std::memory_order_relaxed)) return;
    Chunk& x = ch[static_cast<size_t>(c)];
    x.thread = std::this_thread::get_id();
    x.regs = start;
    x.assigned = st.assigned;
    x.counts.assign(st.counts.size(), 0);
    x.regs[p.counter].i = counter_at(turns * c / chunks);
    x.regs[p.end].i = c + 1 == chunks ? end.i : counter_at(turns * (c + 1) / chunks);
    if (by_rows) {
      size_t at = per_turn * static_cast<size_t>(turns * c / chunks);
      for (int64_t t = turns * c / chunks; t < turns * (c + 1) / chunks; ++t)
        for (int32_t a : kept) copy_row(st.arrays[a], counter_at(t), rows->data(), at, true);
    }
    NativeLog log;
    log.entries.resize(256);
    NativeCtx ctx;
    ctx.regs = x.regs.data();
    ctx.assigned = x.assigned.data();
    ctx.counts = x.counts.data();
    ctx.arrays = arrs.data();
    ctx.entries = st.arrays.data();
    ctx.log = &log;
    ctx.max_turns = int64_t{1} << 20;
    ctx.max_undo = int64_t{1} << 16;
    ctx.last = last;
    ctx.helpers = native_helpers();
    ctx.interrupt = interrupt_flag_address();
    ctx.state = nullptr;  // no arrays made in a chunk (refused above; native_alloc bails)
    ctx.impl = nullptr;
    int32_t status;
    for (;;) {
      // The undo log is not needed (the arrays kept above are): emptied at
      // each checkpoint the code returns for.
      log.ranges.clear();
      log.bytes.clear();
      log.copies.clear();
      ctx.undo = log.entries.data();
      ctx.undo_n = 0;
      ctx.undo_cap = static_cast<int64_t>(log.entries.size());
      ctx.range_units = 0;
      ctx.draws = 0;
      ctx.draws_at_turn = 0;
      ctx.rand = nullptr;
      status = code.fn.load(std::memory_order_acquire)(&ctx);
      if (status != kNativeCheckpoint) break;
      if (stop.load(std::memory_order_relaxed)) break;
    }
    x.last = ctx.last;
    x.status = status;
    if (status == kNativeInterrupt) {
      stop.store(2, std::memory_order_relaxed);
    } else if (status != kNativeDone) {
      int none = 0;
      stop.compare_exchange_strong(none, 1, std::memory_order_relaxed);
    }
  };
  try {
    run_chunks(chunks, run_chunk);
  } catch (const Interrupted&) {
    stop.store(2, std::memory_order_relaxed);
  } catch (...) {
    int none = 0;  // anything else: the sequential path meets it again
    stop.compare_exchange_strong(none, 1, std::memory_order_relaxed);
  }
  if (stop.load() == 2 || interrupt_requested()) return Parallel::interrupted;

  // Every chunk done: the reductions combined in chunk order, the other
  // variables as the last chunk left them.
  bool ok = stop.load() == 0;
  std::vector<Reg> regs;
  if (ok) {
    regs = ch.back().regs;
    regs[p.end] = end;
    for (const auto& red : p.reductions) {
      Reg acc = st.regs[red.reg];
      for (const Chunk& x : ch) {
        if (!combine(acc, x.regs[red.reg], red.op)) {
          ok = false;
          break;
        }
      }
      regs[red.reg] = acc;
    }
  }
  if (!ok) {
    if (by_rows) {
      for (int64_t c = 0; c < chunks; ++c) {
        Chunk& x = ch[static_cast<size_t>(c)];
        if (x.status == -1) continue;
        size_t at = per_turn * static_cast<size_t>(turns * c / chunks);
        for (int64_t t = turns * c / chunks; t < turns * (c + 1) / chunks; ++t)
          for (int32_t a : kept) copy_row(st.arrays[a], counter_at(t), rows->data(), at, false);
      }
    } else {
      for (size_t i = 0; i < kept.size(); ++i) st.arrays[kept[i]].array.assign(before[i]);
    }
    if (fast_loops_debug()) {
      int32_t why = kNativeDone;
      for (const Chunk& x : ch)
        if (x.status != kNativeDone && x.status != -1) why = x.status;
      std::fprintf(stderr,
                   "[fast loops] %s: a chunk of the prange loop returned %d: its arrays put "
                   "back (%s), the loop runs as range\n",
                   where.c_str(), static_cast<int>(why),
                   by_rows ? "each chunk's rows" : "copied whole");
    }
    return Parallel::serial;
  }
  // A variable every turn assigns: the last chunk's. One only some turns
  // assign: from the last chunk that assigned it (`assigned`, when this run
  // had not before the chunks), or else that left it other than it was (the
  // same value assigned again is not told apart).
  auto same = [](const Reg& a, const Reg& b) { return a.k == b.k && a.i == b.i; };
  std::vector<char> reduced(st.regs.size(), 0);
  for (const auto& red : p.reductions) reduced[red.reg] = 1;
  for (size_t i = 0; i < st.regs.size(); ++i) {
    if (reduced[i] || p.always[i] || static_cast<int>(i) == p.end) continue;
    for (auto x = ch.rbegin(); x != ch.rend(); ++x) {
      if (st.assigned[i] ? same(x->regs[i], st.regs[i]) : !x->assigned[i]) continue;
      regs[i] = x->regs[i];
      break;
    }
  }
  // `assigned`: written back to the frame (what any chunk assigned).
  for (const Chunk& x : ch) {
    for (size_t i = 0; i < st.counts.size(); ++i) st.counts[i] += x.counts[i];
    for (size_t i = 0; i < st.assigned.size(); ++i) st.assigned[i] |= x.assigned[i];
  }
  st.regs = std::move(regs);
  last = ch.back().last;
  if (fast_loops_debug()) {
    std::set<std::thread::id> threads;
    for (const Chunk& x : ch) threads.insert(x.thread);
    std::fprintf(stderr, "[fast loops] %s: prange ran %lld turns in %lld chunks on %zu threads\n",
                 where.c_str(), static_cast<long long>(turns), static_cast<long long>(chunks),
                 threads.size());
  }
  return Parallel::done;
}

void note_serial_prange(const std::string& where, const std::string& why) {
  if (!fast_loops_debug()) return;
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (!said.insert(where + why).second) return;
  std::fprintf(stderr, "[fast loops] %s: prange runs as range: %s\n", where.c_str(), why.c_str());
}

}  // namespace tessera
