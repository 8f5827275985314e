// The execution tree: nodes compiled from the AST, each evaluating to a
// Future<Value>. Variables are resolved at compile time to (depth, slot) pairs
// in a chain of frames; functions are closures over the frame they were made in.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/value.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/future.hpp"
#include "tessera/runtime/spinlock.hpp"

namespace tessera {

struct FunctionCode;

// The variables of one function activation (or of the program's top level).
class Frame {
 public:
  Frame(size_t n, std::shared_ptr<Frame> parent) : slots_(n), parent_(std::move(parent)) {}

  // The value in `slot`; nullopt if it was never assigned. Requires that
  // the slot is not pending (see set_pending); read() is the general form.
  std::optional<Value> get(size_t slot) const;
  // The variable as a future: ready with its value, or the pending future
  // of a define whose value is still being computed; an invalid future
  // (valid() false) if never assigned.
  Future<Value> read(size_t slot) const;
  // The slot's value into `out` if it holds one (assigned and not
  // pending): read() without a future.
  bool read_now(size_t slot, Value& out) const;
  // The code and frame of the closure in `slot`, under read_now's
  // conditions, without copying the value (no reference counted, no strong
  // copy of a weak closure made): the guards checked at each native call.
  bool closure_now(size_t slot, const FunctionCode*& code, Frame*& env) const;
  // The slot's value moved into `out` (the slot keeps nil until it is set
  // again), under the same conditions as read_now: for xs = append(xs, x),
  // which then holds the only reference and appends in place.
  bool take_now(size_t slot, Value& out);
  // Dataflow assignment: `slot` takes the value of `pending` once it is
  // there; until then readers get the future and wait on it, not the
  // block that assigned it. A later set/set_pending of the slot wins over a
  // completion that arrives after it. `keep` is the frame (or a frame
  // inside it) of the assignment, kept alive until then.
  void set_pending(size_t slot, const Future<Value>& pending, std::shared_ptr<Frame> keep);
  // Assigns `slot`. A closure over this very frame is stored with a weak
  // reference to it (a function defined in a scope refers to that scope,
  // which holds the function: a strong reference would be a cycle that is
  // never freed); get() hands out a strong copy again.
  void set(size_t slot, Value v);
  // set() of `list`, which is the list the slot held with `item` appended:
  // only the item is scanned for closures (a loop of appends stays linear).
  void set_appended(size_t slot, Value list, const Value& item);
  // set() of `list`, the list the slot held (or a copy of it) with numbers
  // written into it and nothing else: no item to scan (the loops' write-back).
  void set_numbers_written(size_t slot, Value list);
  bool defined(size_t slot) const {
    std::lock_guard lock(spin_);
    return slots_[slot].defined;
  }
  // An evaluation that went on past a pending value (the branch of an if
  // whose condition is still computing) will read `slots` (sorted; they must
  // outlive it) before `done` is ready. A statement that assigns one of them
  // waits for it first (BlockNode), so the read sees the value of its turn.
  void note_late_reads(const std::vector<size_t>* slots, const Future<Value>& done);
  // A late read noted on one of `slots` (sorted; null: on any variable)
  // that is not done yet, if any (the finished ones are forgotten here).
  std::optional<Future<Value>> late_read_of(const std::vector<size_t>* slots);
  // False while no late read is noted (checked per statement, without the lock).
  bool has_late_reads() const { return has_late_reads_.load(std::memory_order_acquire); }
  // Drops every value (ends a program's run: closures stored in the
  // program's variables may refer back to it through their frames).
  void clear() {
    // The frame's activation is over (nothing else uses it now), so the
    // values are freed in place, under the lock, with no new allocation.
    std::lock_guard lock(spin_);
    for (auto& s : slots_) s = Slot();
    pending_.clear();
    late_reads_.clear();
    has_late_reads_.store(false, std::memory_order_release);
    return_value_ = Value();
  }
  // The value given to return() in this activation.
  void set_return_value(Value v) {
    std::lock_guard lock(spin_);
    std::swap(return_value_, v);  // the old value is freed after the lock
  }
  Value return_value() const {
    std::lock_guard lock(spin_);
    return return_value_;
  }
  // True once a closure over this frame (or a frame inside it) was stored
  // outside it: then the frame must outlive its function's return.
  bool escaped() const { return escaped_.load(std::memory_order_relaxed); }
  // True if `f` is this frame or one of its lexical ancestors.
  bool within(const Frame* f) const {
    for (const Frame* g = this; g; g = g->parent_.get()) {
      if (g == f) return true;
    }
    return false;
  }
  Frame* parent() const { return parent_.get(); }
  // The frame `depth` levels up the lexical chain (0 = this one).
  Frame* up(int depth) {
    Frame* f = this;
    while (depth-- > 0) f = f->parent_.get();
    return f;
  }

 private:
  // Guards the slots and lists below (held for a few instructions: values
  // a slot drops are freed after it is released, except by clear()).
  mutable SpinLock spin_;
  // A variable: its value, and whether it was assigned (one allocation
  // per frame for both).
  struct Slot {
    Value value;
    bool defined = false;
  };
  std::vector<Slot> slots_;
  // Slots whose define is still computing (few at a time: a linear list),
  // with the assignment's number so a stale completion is ignored.
  struct Pending {
    size_t slot;
    uint64_t serial;
    Future<Value> future;
  };
  std::vector<Pending> pending_;
  uint64_t serial_ = 0;
  struct LateRead {
    const std::vector<size_t>* slots;
    Future<Value> done;
  };
  std::vector<LateRead> late_reads_;  // few at a time: a linear list
  std::atomic<bool> has_late_reads_{false};

  // What set() stores for v (closures over this frame held weakly).
  Value prepare(Value v);
  // Assigns an already prepared value.
  void store(size_t slot, Value v);
  // What get() hands out for a defined slot (spin_ held).
  Value stored(size_t slot) const;
  // Removes the slot's pending define, if any, and gives its future (to be
  // dropped after spin_ is released; spin_ held).
  Future<Value> take_pending(size_t slot);
  // Removes the late reads that are done and gives them (spin_ held).
  std::vector<LateRead> take_finished_late_reads();
  std::shared_ptr<Frame> parent_;
  Value return_value_;
  std::atomic<bool> escaped_{false};
};
using FramePtr = std::shared_ptr<Frame>;

// In sequence: the calling thread evaluates what its caller awaits before it
// does anything else. Program::run and call_function (the boundary, which
// would only wait for the result) set it; a node that starts a child and
// goes on before awaiting it (the operands of a call, a deferred define)
// clears it for that child, and continuations run with it clear. In
// sequence, a statement or a loop's turn whose result is pending (a
// collective in flight, a task) is waited for in place (settle_here), as
// the boundary would wait for the program's result, instead of being carried
// on by continuations: no states, allocations or hand-offs per turn.
bool& in_sequence();
class InSequence {
 public:
  explicit InSequence(bool on) : saved_(in_sequence()) { in_sequence() = on; }
  ~InSequence() { in_sequence() = saved_; }
  InSequence(const InSequence&) = delete;
  InSequence& operator=(const InSequence&) = delete;

 private:
  bool saved_;
};
// In sequence on a thread that is not a worker: waits until `f` is ready,
// as Future::wait does at the boundary (polling the communication engine,
// then blocking), and gives true. Otherwise false, at once.
bool settle_here(const Future<Value>& f);

// True while compiling a program that writes into arrays (a call of a
// primitive with PrimitiveSpec::writes anywhere in it): its blocks then
// order every statement that may write (a writing primitive, or a call of
// a function) after the defines still computing before it
// (docs/runtime.md, "Views and writes"). Programs that never write keep
// all their overlap.
bool& program_writes();
class ProgramWrites {
 public:
  explicit ProgramWrites(bool on) : saved_(program_writes()) { program_writes() = on; }
  ~ProgramWrites() { program_writes() = saved_; }
  ProgramWrites(const ProgramWrites&) = delete;
  ProgramWrites& operator=(const ProgramWrites&) = delete;

 private:
  bool saved_;
};

// Control flow: break(), continue() and return(value) unwind to the
// enclosing loop or function as failed futures carrying one of these
// preallocated objects. They are recognized by identity and never thrown, so
// leaving a loop costs no more than finishing it.
struct ControlSignal {
  const char* what;
};
const std::exception_ptr& break_signal();
const std::exception_ptr& continue_signal();
const std::exception_ptr& return_signal();

// Per-node measurements (Phylanx's performance counters): how often the node
// ran, how long its own work took, and how often it was spawned as a task.
struct NodeCounters {
  std::atomic<uint64_t> evaluations{0};
  std::atomic<uint64_t> total_ns{0};
  std::atomic<uint64_t> spawned{0};
  // Set when an evaluation cut its work into parallel tiles (parallel_for):
  // such a node uses every thread by itself.
  std::atomic<bool> tiled{false};
  // The cheapest evaluation of the latest window of kCostWindow, the first
  // evaluation of all left out (cold pages and caches): the node's cost as
  // the spawn rule sees it. A mean is held up for many calls by one slow
  // evaluation (the first; one preempted on a loaded machine), and a fill
  // of 84,000 elements (15 us) was then spawned on each call, its parent
  // waiting for the hand-off (4-9 ms calls of a 1 ms function at 2
  // threads). The window lets the cost follow a node whose work grows.
  std::atomic<uint64_t> recent_min_ns{UINT64_MAX};
  static constexpr uint64_t kCostWindow = 16;

  void record(uint64_t ns) {
    const uint64_t n = evaluations.fetch_add(1, std::memory_order_relaxed);
    total_ns.fetch_add(ns, std::memory_order_relaxed);
    // Races between concurrent evaluations only blur the estimate.
    if (n == 0) return;
    if (n % kCostWindow == 0 || ns < recent_min_ns.load(std::memory_order_relaxed)) {
      recent_min_ns.store(ns, std::memory_order_relaxed);
    }
  }
  // The cost the spawn rule compares with its bar (0 before any evaluation).
  double cost_ns() const {
    const uint64_t m = recent_min_ns.load(std::memory_order_relaxed);
    return m == UINT64_MAX ? 0.0 : double(m);
  }

  double mean_ns() const {
    uint64_t n = evaluations.load(std::memory_order_relaxed);
    return n ? double(total_ns.load(std::memory_order_relaxed)) / double(n) : 0.0;
  }
  void reset() {
    evaluations = 0;
    total_ns = 0;
    spawned = 0;
    tiled = false;
    recent_min_ns = UINT64_MAX;
  }
};

// Work that takes longer than this (its cheapest recent evaluation, as
// measured: NodeCounters::cost_ns) is spawned as a
// task so that siblings run in parallel; cheaper work runs inline in its
// parent. Spawning costs about 1 us (bench/bench_runtime), so 20 us of work
// keeps the overhead of a spawn near 5% while letting any operation of real
// size run in parallel with its siblings.
inline constexpr double kSpawnThresholdNs = 20000.0;

// The threshold in force (kSpawnThresholdNs unless changed: benchmarks and
// tests set 0 to force every measured node onto its own task).
double spawn_threshold_ns();
void set_spawn_threshold_ns(double ns);

class Node {
 public:
  explicit Node(SourceLoc loc) : loc_(std::move(loc)) {}
  virtual ~Node() = default;

  virtual Future<Value> eval(const FramePtr& frame) const = 0;
  // The value at once, into `out`, from the nodes that have it without a
  // future: a constant, a variable holding its value, an elementwise
  // operation on two scalars from such nodes (a loop's `i < n`, `i + 1`).
  // False when eval must run instead (a pending or undefined variable, an
  // error, a trace recording): such nodes have no effects, so nothing done
  // here is observable, and `out` may hold anything then.
  virtual bool eval_now(const FramePtr&, Value&) const { return false; }
  // A short label for the DOT tree and counters ("add", "define x", "if").
  virtual std::string label() const = 0;
  // Child nodes in evaluation order (for traversals).
  virtual std::vector<const Node*> children() const { return {}; }
  // True for nodes that do measurable work of their own (primitive calls).
  virtual bool is_primitive() const { return false; }

  const SourceLoc& loc() const { return loc_; }
  NodeCounters& counters() const { return counters_; }

 private:
  SourceLoc loc_;
  mutable NodeCounters counters_;
};
using NodePtr = std::shared_ptr<const Node>;

// A compiled function body: parameters, defaults, frame size.
struct FunctionCode {
  std::string name;
  std::vector<std::string> params;
  std::vector<NodePtr> defaults;  // one per parameter; null when required
  size_t frame_size = 0;
  NodePtr body;
  SourceLoc loc;
  bool has_return = false;      // the body contains return()
  bool makes_closures = false;  // the body contains lambda or a function define
};

// A function value: code plus the frame it closes over.
class Closure : public Callable {
 public:
  Closure(std::shared_ptr<const FunctionCode> code, FramePtr env,
          std::vector<std::optional<Value>> defaults)
      : code_(std::move(code)), env_(std::move(env)), defaults_(std::move(defaults)) {}
  std::string name() const override { return code_->name; }
  const FunctionCode& code() const { return *code_; }
  const std::shared_ptr<const FunctionCode>& code_ptr() const { return code_; }
  // The frame the function closes over (null only for a weak closure whose
  // frame is gone, which cannot be observed: weak closures live in that frame).
  FramePtr env() const { return env_ ? env_ : weak_env_.lock(); }
  const std::vector<std::optional<Value>>& defaults() const { return defaults_; }

  // The same function holding its frame weakly / strongly (see Frame::set).
  bool is_weak() const { return !env_; }
  // The closed-over frame without taking a reference (may be null if weak
  // and gone).
  Frame* env_raw() const { return env_ ? env_.get() : weak_env_.lock().get(); }
  bool closes_over(const Frame* f) const { return env_.get() == f; }
  std::shared_ptr<const Closure> weakened() const;
  std::shared_ptr<const Closure> strengthened() const;

 private:
  std::shared_ptr<const FunctionCode> code_;
  FramePtr env_;
  std::weak_ptr<Frame> weak_env_;
  std::vector<std::optional<Value>> defaults_;
};

// A primitive used as a value (passed to another function).
class PrimitiveFunction : public Callable {
 public:
  explicit PrimitiveFunction(const PrimitiveSpec* spec) : spec_(spec) {}
  std::string name() const override { return spec_->name; }
  const PrimitiveSpec& spec() const { return *spec_; }

 private:
  const PrimitiveSpec* spec_;
};

// True if `v` (or, looking a bounded way into lists and dicts, a value in
// it) is a closure whose frame chain includes `frame`.
bool refers_to_frame(const Value& v, const Frame* frame);

// Calls a function value with arguments (named ones carry a name). Errors
// name the call site `loc`.
Future<Value> invoke(const Value& fn, std::vector<CallArg> args, const SourceLoc& loc);
// The same with positional arguments only.
Future<Value> invoke(const Value& fn, std::vector<Value> args, const SourceLoc& loc);

// Function calls nested deeper than this raise RuntimeError instead of
// overflowing a worker's stack.
inline constexpr int kMaxCallDepth = 4000;
// On a thread that is not a worker (the caller of Program::run, whose stack
// may be small), calls nested deeper than this continue on a worker.
inline constexpr int kMaxCallDepthOffWorker = 100;

}  // namespace tessera
