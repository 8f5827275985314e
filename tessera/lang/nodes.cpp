#include "tessera/lang/nodes.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "tessera/core/recursion_error.hpp"
#include "tessera/lang/native_calls.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {

Future<Value> fail_at(const SourceLoc& loc, std::exception_ptr e) {
  return Future<Value>::failed(with_location(std::move(e), loc));
}

// An ErrorDecorator (future.hpp) adding a node's source position.
std::exception_ptr locate_error(std::exception_ptr e, const void* loc) {
  return with_location(std::move(e), *static_cast<const SourceLoc*>(loc));
}

template <class E>
Future<Value> fail_with(const SourceLoc& loc, const std::string& msg) {
  return fail_at(loc, std::make_exception_ptr(E(msg)));
}

std::vector<const Node*> raw(const std::vector<NodePtr>& nodes) {
  std::vector<const Node*> out;
  for (const auto& n : nodes) out.push_back(n.get());
  return out;
}

// fn(), evaluated out of sequence (InSequence) if `off`: a child that is
// started and not awaited before its caller goes on.
template <class F>
Future<Value> out_of_sequence_if(bool off, F&& fn) {
  if (!off) return fn();
  InSequence out(false);
  return fn();
}

// Evaluates nodes (all started before any is awaited, so independent costly
// operands run in parallel) and gathers their values. Each but the last is
// out of sequence: the ones after it start before it is awaited.
Future<std::vector<Value>> eval_all(const std::vector<NodePtr>& nodes, const FramePtr& frame) {
  std::vector<Future<Value>> fs;
  fs.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    fs.push_back(out_of_sequence_if(i + 1 < nodes.size(), [&] { return nodes[i]->eval(frame); }));
  }
  return when_all(std::move(fs));
}

// True if evaluating `n` may reach settle_here: a block or a loop, or a
// function body through a call. (A function made here runs nothing: only
// its defaults, which are its children, are evaluated.)
bool may_settle(const Node* n) {
  if (!n) return false;
  if (dynamic_cast<const BlockNode*>(n) || dynamic_cast<const WhileNode*>(n) ||
      dynamic_cast<const CallNode*>(n) || dynamic_cast<const ForEachNode*>(n)) {
    return true;
  }
  if (n->is_primitive() && static_cast<const PrimitiveCallNode*>(n)->spec()->calls_functions)
    return true;
  for (const Node* c : n->children()) {
    if (may_settle(c)) return true;
  }
  return false;
}

thread_local int tl_call_depth = 0;

std::atomic<double>& threshold() {
  static std::atomic<double> t{kSpawnThresholdNs};
  return t;
}

struct CallDepth {
  CallDepth() { ++tl_call_depth; }
  ~CallDepth() { --tl_call_depth; }
};

}  // namespace

bool& in_sequence() {
  thread_local bool on = false;
  return on;
}

bool& program_writes() {
  thread_local bool on = false;
  return on;
}

bool settle_here(const Future<Value>& f) {
  if (!in_sequence() || in_worker()) return false;
  // Completions run here run their continuations on this thread, and those
  // are not in sequence.
  InSequence off(false);
  f.wait_ready();
  return true;
}

const std::exception_ptr& break_signal() {
  static const std::exception_ptr e = std::make_exception_ptr(ControlSignal{"break"});
  return e;
}
const std::exception_ptr& continue_signal() {
  static const std::exception_ptr e = std::make_exception_ptr(ControlSignal{"continue"});
  return e;
}
const std::exception_ptr& return_signal() {
  static const std::exception_ptr e = std::make_exception_ptr(ControlSignal{"return"});
  return e;
}

Future<Value> ControlNode::eval(const FramePtr& frame) const {
  if (kind_ == Kind::brk) return Future<Value>::failed(break_signal());
  if (kind_ == Kind::cont) return Future<Value>::failed(continue_signal());
  if (!value_) {
    frame->set_return_value(Value());
    return Future<Value>::failed(return_signal());
  }
  return value_->eval(frame).then([frame](const Value& v) {
    frame->set_return_value(v);
    return Future<Value>::failed(return_signal());
  });
}

double spawn_threshold_ns() { return threshold().load(std::memory_order_relaxed); }
void set_spawn_threshold_ns(double ns) { threshold().store(ns, std::memory_order_relaxed); }

std::string ConstantNode::label() const {
  if (value_.is_string()) return "\"" + value_.as_string() + "\"";
  if (value_.is_array()) return value_.describe();
  return value_.str();
}

Future<Value> VariableNode::eval(const FramePtr& frame) const {
  Future<Value> v = frame->up(depth_)->read(slot_);
  if (!v.valid()) {
    return fail_with<std::invalid_argument>(
        loc(), error_message("[", name_, "] variable '", name_, "' is used before it is defined"));
  }
  return v;
}

namespace {

std::vector<size_t> sorted_unique(std::vector<size_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// True if evaluating `n` may call functions (which may assign anything).
bool calls_functions(const Node* n) {
  if (!n) return false;
  if (dynamic_cast<const CallNode*>(n) || dynamic_cast<const ForEachNode*>(n)) return true;
  if (n->is_primitive() && static_cast<const PrimitiveCallNode*>(n)->spec()->calls_functions)
    return true;
  if (dynamic_cast<const FunctionNode*>(n)) return false;  // made, not called
  for (const Node* c : n->children()) {
    if (calls_functions(c)) return true;
  }
  return false;
}

// The operands of a call in a program that writes: operand i > 0 is marked
// when it may write (a writing primitive or a call), so that it starts only
// once the operands before it are done: Python reads them first (in
// `g(x.sum(), h(x))` the sum must not see h's write). Empty when none is.
std::vector<bool> ordered_operands(const std::vector<NodePtr>& operands) {
  std::vector<bool> ordered(operands.size(), false);
  bool any = false;
  if (!program_writes()) return {};
  for (size_t i = 1; i < operands.size(); ++i) {
    ordered[i] = may_write(operands[i].get());
    any = any || ordered[i];
  }
  if (!any) ordered.clear();
  return ordered;
}

// eval_all, except that a node marked in `ordered` starts only once every
// node before it is done (waited for in place in sequence, else by a
// continuation that goes on from it).
Future<std::vector<Value>> eval_all_ordered(const std::vector<NodePtr>* nodes,
                                            const std::vector<bool>* ordered, const FramePtr& frame,
                                            size_t i,
                                            std::shared_ptr<std::vector<Future<Value>>> fs) {
  for (; i < nodes->size(); ++i) {
    if ((*ordered)[i]) {
      for (const auto& f : *fs) {
        if (f.is_ready() || settle_here(f)) continue;
        return f.chain([nodes, ordered, frame, i, fs](const Future<Value>&) {
          return eval_all_ordered(nodes, ordered, frame, i, fs);
        });
      }
    }
    fs->push_back(
        out_of_sequence_if(i + 1 < nodes->size(), [&] { return (*nodes)[i]->eval(frame); }));
  }
  return when_all(std::move(*fs));
}

// The variables of the frame they run in that `nodes`, evaluated late,
// read: none to note if they have effects, assign variables or call
// functions, since then the statement around them is not deferred (the
// block waits for it) and notes of their own reads would make their own
// statements wait for them.
std::vector<size_t> late_reads(std::initializer_list<const Node*> nodes) {
  FrameAccess acc;
  for (const Node* n : nodes) {
    if (n && (!pure_value(n) || calls_functions(n))) return {};
    frame_access(n, 0, acc);
  }
  if (!acc.writes.empty() || acc.writes_around) return {};
  return sorted_unique(std::move(acc.reads));
}

// A value that assigns variables of the frame it runs in (or of one around
// it) cannot go on computing past the statements after it: they would read
// those variables before or after the assignment depending on timing.
bool assigns_variables(const Node* n) {
  FrameAccess acc;
  frame_access(n, 0, acc);
  return !acc.writes.empty() || acc.writes_around;
}

}  // namespace

AssignNode::AssignNode(SourceLoc loc, std::string name, int depth, size_t slot, NodePtr value,
                       bool is_store)
    : Node(std::move(loc)),
      name_(std::move(name)),
      depth_(depth),
      slot_(slot),
      value_(std::move(value)),
      is_store_(is_store),
      deferrable_(pure_value(value_.get()) && !assigns_variables(value_.get())) {
  if (auto* call = dynamic_cast<const PrimitiveCallNode*>(value_.get())) {
    auto* list = call->operands_.size() == 2
                     ? dynamic_cast<const VariableNode*>(call->operands_[0].get())
                     : nullptr;
    appends_to_itself_ = call->spec()->name == "append" && call->slots_ == std::vector<int>{0, 1} &&
                         list && list->depth() == depth_ && list->slot() == slot_;
  }
}

bool AssignNode::append_in_place(const FramePtr& frame, Future<Value>& result) const {
  // Traced too: the append is computed by the node (compute), which
  // records its event.
  if (!appends_to_itself_) return false;
  // xs = append(xs, x): the item first (it may read xs), then the list
  // moved out of the variable, so that append holds the only reference and
  // extends it in place (a loop of appends is linear, not quadratic).
  auto* call = static_cast<const PrimitiveCallNode*>(value_.get());
  // The append by the primitive on the list as the variable holds it, once
  // `item` is ready: assigned by the caller like any value still computing
  // (the item is evaluated once either way).
  auto by_copy = [&](const Future<Value>& item) {
    FramePtr keep = frame;
    const PrimitiveCallNode* c = call;
    result = item.then([keep, c](const Value& x) {
      return c->operands_[0]->eval(keep).then([c, x](const Value& xs) -> Future<Value> {
        std::vector<Value> vals{xs, x};
        try {
          return Future<Value>::ready(c->compute(vals));
        } catch (...) {
          return fail_at(c->loc(), std::current_exception());
        }
      });
    });
    return false;
  };
  Value item;
  bool evaluated = false;  // item computed here (not re-evaluable by the caller)
  if (!call->operands_[1]->eval_now(frame, item)) {
    // An item computed by an operation (xs.append(x[i] * 2.0)): evaluated
    // here, once. Ready (the usual case): appended in place below.
    Future<Value> f = call->operands_[1]->eval(frame);
    if (!f.is_ready() || f.error()) return by_copy(f);
    item = f.get();
    evaluated = true;
  }
  Frame* target = frame->up(depth_);
  std::vector<Value> vals(2);
  if (!target->take_now(slot_, vals[0])) {
    return evaluated ? by_copy(Future<Value>::ready(item)) : false;
  }
  vals[1] = item;
  try {
    Value r = call->compute(vals);
    target->set_appended(slot_, r, item);
    result = Future<Value>::ready(std::move(r));
  } catch (...) {
    // Only an allocation can fail here (take_now took a list): the variable
    // is lost with the program's run.
    result = fail_at(call->loc(), std::current_exception());
  }
  return true;
}

Future<Value> AssignNode::eval_dataflow(const FramePtr& frame) const {
  Frame* target = frame->up(depth_);
  if (is_store_ && !target->defined(slot_)) return eval(frame);  // the error
  Future<Value> f;
  if (append_in_place(frame, f)) return f;
  Value now;
  if (!f.valid() && value_->eval_now(frame, now)) {
    target->set(slot_, now);
    return Future<Value>::ready(std::move(now));
  }
  if (!f.valid()) f = value_->eval(frame);
  if (f.is_ready()) {
    if (!f.error()) target->set(slot_, f.get());
    return f;
  }
  target->set_pending(slot_, f, frame);
  return f;
}

bool AssignNode::assign_now(const FramePtr& frame, Value& out) const {
  // A store() of an undefined variable and an append in place keep
  // eval_dataflow's ways (their errors, the list moved out).
  if (is_store_ || appends_to_itself_) return false;
  if (!value_->eval_now(frame, out)) return false;
  frame->up(depth_)->set(slot_, out);
  return true;
}

Future<Value> AssignNode::eval(const FramePtr& frame) const {
  Frame* target = frame->up(depth_);
  if (is_store_ && !target->defined(slot_)) {
    // store() assigns an existing variable; this one has no value yet.
    return fail_with<std::invalid_argument>(
        loc(), error_message("[store] variable '", name_, "' is stored before it is defined"));
  }
  Future<Value> value;
  if (append_in_place(frame, value)) return value;
  Value now;
  if (!value.valid() && value_->eval_now(frame, now)) {
    // A value at once (`store(i, i + 1)`): no future to make.
    target->set(slot_, now);
    return Future<Value>::ready(std::move(now));
  }
  if (!value.valid()) value = value_->eval(frame);
  if (value.is_ready() && !value.error()) {
    // The usual case: assigned now, no continuation.
    target->set(slot_, value.get());
    return value;
  }
  FramePtr keep = frame;
  return value.then([keep, target, slot = slot_](const Value& v) {
    target->set(slot, v);
    return v;
  });
}

std::string FunctionNode::label() const { return (slot_ ? "define " : "lambda ") + code_->name; }

std::vector<const Node*> FunctionNode::children() const {
  std::vector<const Node*> out;
  for (const auto& d : code_->defaults) {
    if (d) out.push_back(d.get());
  }
  out.push_back(code_->body.get());
  return out;
}

Future<Value> FunctionNode::eval(const FramePtr& frame) const {
  std::vector<NodePtr> present;
  for (const auto& d : code_->defaults) {
    if (d) present.push_back(d);
  }
  auto code = code_;
  auto slot = slot_;
  if (present.empty()) {
    // No default values to evaluate (the common case): the closure now.
    Value fn(std::static_pointer_cast<const Callable>(std::make_shared<Closure>(
        code, frame, std::vector<std::optional<Value>>(code->params.size()))));
    if (slot) frame->set(*slot, fn);
    return Future<Value>::ready(std::move(fn));
  }
  return eval_all(present, frame).then([code, slot, frame](const std::vector<Value>& vals) {
    std::vector<std::optional<Value>> defaults(code->params.size());
    size_t k = 0;
    for (size_t i = 0; i < code->defaults.size(); ++i) {
      if (code->defaults[i]) defaults[i] = vals[k++];
    }
    Value fn(std::static_pointer_cast<const Callable>(
        std::make_shared<Closure>(code, frame, std::move(defaults))));
    if (slot) frame->set(*slot, fn);
    return fn;
  });
}

PrimitiveCallNode::PrimitiveCallNode(SourceLoc loc, const PrimitiveSpec* spec,
                                     std::vector<NodePtr> operands, std::vector<int> slots,
                                     int same_site)
    : Node(std::move(loc)),
      spec_(spec),
      operands_(std::move(operands)),
      slots_(std::move(slots)),
      site_(this->loc().str() + (same_site > 0 ? " #" + std::to_string(same_site + 1) : "")),
      shared_loc_(std::make_shared<const SourceLoc>(this->loc())) {
  for (size_t i = 0; i + 1 < operands_.size(); ++i) {
    early_operand_may_settle_ = early_operand_may_settle_ || may_settle(operands_[i].get());
  }
  ordered_ = ordered_operands(operands_);
  if (spec_->name == "type" && operands_.size() == 1) direct_ = Direct::type_name;
  if (spec_->name == "equal" && operands_.size() == 2) direct_ = Direct::equal;
  if (spec_->name == "not_equal" && operands_.size() == 2) direct_ = Direct::not_equal;
  variadic_.resize(operands_.size(), false);
  if (spec_->variadic) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      variadic_[i] = static_cast<size_t>(slots_[i]) + 1 == spec_->params.size();
    }
  }
}

std::vector<const Node*> PrimitiveCallNode::children() const {
  // A fused call shows the expression it computes (the same leaves, so the
  // analyses that walk the tree see the same reads and writes), and the
  // counters and graphs show both the fused call and its operations (which
  // count the evaluations made on scalars, by the unfused tree).
  if (unfused_) return {unfused_.get()};
  return raw(operands_);
}

namespace {

// Binds a primitive node's operand values to its parameters (filling
// defaults; variadic operands collected into the last parameter).
Args bind_operands(const PrimitiveSpec& spec, const std::vector<int>& slots,
                   const std::vector<bool>& variadic, std::vector<Value>& operand_values) {
  const auto& params = spec.params;
  // The usual call gives the leading parameters in order (no names, no
  // variadic part): the operand values become the arguments in place, the
  // rest filled with their defaults.
  bool in_order = !spec.variadic && operand_values.size() <= params.size();
  for (size_t i = 0; in_order && i < slots.size(); ++i) in_order = slots[i] == static_cast<int>(i);
  if (in_order) {
    operand_values.reserve(params.size());
    for (size_t k = operand_values.size(); k < params.size(); ++k)
      operand_values.push_back(*params[k].default_value);
    return Args(spec, std::move(operand_values));
  }
  std::vector<Value> values(params.size());
  // Which parameters an operand filled (on the stack for all but the
  // rare primitive with many parameters: this runs per evaluation).
  constexpr size_t kOnStack = 16;
  bool on_stack[kOnStack] = {};
  std::unique_ptr<bool[]> on_heap;
  bool* filled = on_stack;
  if (params.size() > kOnStack) {
    on_heap.reset(new bool[params.size()]());
    filled = on_heap.get();
  }
  List rest;
  bool any_variadic = false;
  for (size_t i = 0; i < operand_values.size(); ++i) {
    if (variadic[i]) {
      rest.push_back(std::move(operand_values[i]));
      any_variadic = true;
    } else {
      values[slots[i]] = std::move(operand_values[i]);
      filled[slots[i]] = true;
    }
  }
  for (size_t k = 0; k < params.size(); ++k) {
    bool variadic_slot = spec.variadic && k + 1 == params.size();
    if (variadic_slot) {
      values[k] = any_variadic ? Value(std::move(rest)) : Value(List{});
    } else if (!filled[k]) {
      values[k] = *params[k].default_value;
    }
  }
  return Args(spec, std::move(values));
}

}  // namespace

Value PrimitiveCallNode::compute(std::vector<Value>& operand_values) const {
  Args args = bind_operands(*spec_, slots_, variadic_, operand_values);
  trace::NodeScope traced(this);
  take_tiled_flag();
  auto t0 = std::chrono::steady_clock::now();
  Value result = run_primitive(*spec_, args);
  auto t1 = std::chrono::steady_clock::now();
  traced.measured(t0, t1);
  NodeCounters& c = counters();
  if (take_tiled_flag() && !c.tiled.load(std::memory_order_relaxed)) {
    c.tiled.store(true, std::memory_order_relaxed);
  }
  c.record(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  return result;
}

Future<Value> PrimitiveCallNode::finish(std::vector<Value> operand_values) const {
  // A tiled array among the operands selects the primitive's tiled overload
  // (registry.hpp), which may communicate: it runs like an asynchronous one.
  const TiledOverload* tiled = find_tiled_overload(*spec_, operand_values);
  if (spec_->eval_async || tiled) {
    // An asynchronous primitive (a collective): its future is this node's
    // future, completed later by the communication engine; no worker waits.
    // Counters record the time to issue it, not the time until completion.
    try {
      Args args = bind_operands(*spec_, slots_, variadic_, operand_values);
      args.set_site(site_);
      args.set_loc(*shared_loc_);
      trace::NodeScope traced(this);
      auto t0 = std::chrono::steady_clock::now();
      // Tiled overloads read plain operands as contiguous arrays (primitives
      // that read views themselves, strided or fused, still have them here).
      if (tiled) args.pack_views();
      Future<Value> result = tiled ? (*tiled)(*spec_, args) : spec_->eval_async(args);
      auto t1 = std::chrono::steady_clock::now();
      traced.measured(t0, t1);
      NodeCounters& c = counters();
      c.evaluations.fetch_add(1, std::memory_order_relaxed);
      c.total_ns.fetch_add(
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()),
          std::memory_order_relaxed);
      // Its error, whenever it comes, names this position: installed on the
      // pending future itself, not by a continuation (no state, no
      // allocation, no hop on completion).
      return result.decorate_errors(&locate_error, shared_loc_);
    } catch (...) {
      return fail_at(loc(), std::current_exception());
    }
  }
  // Phylanx's direct-execution rule: run inline unless this node has proven
  // costly, in which case it becomes a task and the parent moves on. On the
  // thread that runs the program (outside the worker arena):
  // - a node whose work is cut into parallel tiles stays inline: its tiles
  //   already use every thread (this thread takes some, parallel_for), and
  //   spawned, its tiles often ran on one worker for the whole call while
  //   the other slept (2 threads as slow as 1 in half the runs);
  // - for others the bar is ten times higher: the result is mostly awaited
  //   next (a loop-carried value), and handing the work over and waking this
  //   thread again costs 10-20 us, which a 30 us step paid on every turn.
  // A threshold of 0 (the tests' "spawn everything") keeps its meaning.
  NodeCounters& c = counters();
  const double threshold = spawn_threshold_ns();
  const bool outside = !in_worker() && threshold > 0;
  const double bar = outside ? 10 * threshold : threshold;
  // On that thread, the two evaluations that open each window of the
  // node's cost run inline whatever the cost: a node judged costly from
  // evaluations made on a worker is measured where it would run inline, or
  // would stay spawned for good. (`np.zeros` of 84,000 elements, 672 KB,
  // took 200-290 us on a worker against 15 us on the caller: glibc serves
  // a worker's blocks of that size from its own arena, whose top is given
  // back to the system when the caller frees the array, so each call met
  // fresh pages; the first inline evaluation after that meets fresh pages
  // too, the second reuses them.)
  const uint64_t evaluations = c.evaluations.load(std::memory_order_relaxed);
  const bool probe = outside && evaluations % NodeCounters::kCostWindow <= 1;
  if (evaluations > 0 && !probe && (bar == 0 || c.cost_ns() > bar) && num_threads() > 1 &&
      !(outside && c.tiled.load(std::memory_order_relaxed))) {
    c.spawned.fetch_add(1, std::memory_order_relaxed);
    return async([this, vals = std::move(operand_values)]() mutable -> Future<Value> {
      if (trace::on()) trace::set_task_node(this);
      try {
        return Future<Value>::ready(compute(vals));
      } catch (...) {
        return fail_at(loc(), std::current_exception());
      }
    });
  }
  try {
    return Future<Value>::ready(compute(operand_values));
  } catch (...) {
    return fail_at(loc(), std::current_exception());
  }
}

namespace {

// For the scalar path of a binary primitive: a Python-like scalar as it is,
// or a 0-d float64 or int64 array (NumPy's strong scalars: an element x[i],
// a reduction's result) as the number it holds, noting that it was strong.
bool as_scalar_operand(const Value& v, Value& out, bool& strong) {
  if (v.is_scalar()) {
    out = v;
    return true;
  }
  if (!v.is_array()) return false;
  const Array& a = v.as_array();
  if (a.ndim() != 0) return false;
  if (a.dtype() == DType::float64) {
    out = Value(a.origin<double>()[0]);
  } else if (a.dtype() == DType::int64) {
    out = Value(a.origin<int64_t>()[0]);
  } else {
    return false;
  }
  strong = true;
  return true;
}

// The scalar path's result when an operand was strong: a 0-d array of the
// dtype NumPy gives (float64 or int64 with a weak or strong int/float,
// bool for comparisons).
Value strong_result(Value r) {
  if (r.is_float()) return Array::scalar(r.as_float());
  if (r.is_int()) return Array::scalar_int(r.as_int());
  if (r.is_bool()) return Array::scalar_bool(r.as_bool());
  return r;
}

// The scalar path of `spec` on two operands, into `out`; false when they
// are not both scalars (or strong 0-d scalars). Errors propagate.
bool scalar_path(const PrimitiveSpec& spec, const Value& x0, const Value& y0, Value& out) {
  Value x, y;
  bool strong = false;
  if (spec.writes && x0.is_array()) {
    // x += y writes into a 0-d view (x[0, ...]) or a 0-d NumPy argument:
    // only a 0-d value holding its own element (a scalar) is rebound here.
    const Array& a = x0.as_array();
    if (a.foreign() || a.storage_bytes() != dtype_size(a.dtype())) return false;
  }
  if (!as_scalar_operand(x0, x, strong) || !as_scalar_operand(y0, y, strong)) return false;
  if (!strong) {
    out = spec.scalar_binary(spec, x, y);
    return true;
  }
  // Strong int64 operands wrap on overflow, as NumPy's do, where the scalar
  // path raises: any error is left to the general path.
  try {
    out = strong_result(spec.scalar_binary(spec, x, y));
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

bool PrimitiveCallNode::eval_now(const FramePtr& frame, Value& out) const {
  // Two scalars (a loop counter's `i < n`, `i + 1`) from nodes that have
  // them at once: computed here, with no future, argument binding, timing
  // or task; counted. An error (integer division by zero) is left to eval,
  // which computes it again and reports it with its position.
  if (unfused_) return unfused_->eval_now(frame, out);
  if (direct_ == Direct::type_name) {
    // The type primitive's answer (primitives/control.cpp, type_name).
    Value x;
    if (trace::on() || !operands_[0]->eval_now(frame, x)) return false;
    out = x.is_array() ? Value(std::string(dtype_name(x.as_array().dtype())) + " array")
                       : Value(std::string(x.kind_name()));
    counters().evaluations.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (!spec_->scalar_binary || operands_.size() != 2 || trace::on()) return false;
  Value x, y;
  if (!operands_[0]->eval_now(frame, x) || !operands_[1]->eval_now(frame, y)) return false;
  if (direct_ != Direct::none && x.is_string() && y.is_string()) {
    out = Value((x.as_string() == y.as_string()) == (direct_ == Direct::equal));
    counters().evaluations.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  try {
    if (!scalar_path(*spec_, x, y, out)) return false;
  } catch (...) {
    return false;
  }
  counters().evaluations.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Future<Value> PrimitiveCallNode::eval(const FramePtr& frame) const {
  if (unfused_) {
    // Scalars (the expression inside a scalar loop on the general path):
    // the unfused tree's direct scalar arithmetic, no call of the fused
    // primitive.
    Value now;
    if (unfused_->eval_now(frame, now)) return Future<Value>::ready(std::move(now));
    // x OP= value on a number x whose value needs a call (`d += x[k] - x[i]`
    // of floats; NumPy's numbers are 0-d arrays): the unfused tree's
    // evaluation, its nodes counted as the loop interpreter counts them (only
    // an array x of one dimension or more gains from the fused call).
    if (fused_in_place_ && operands_[0]->eval_now(frame, now) &&
        !(now.is_array() && now.as_array().ndim() > 0)) {
      return unfused_->eval(frame);
    }
  }
  if (direct_ == Direct::type_name) {
    Value now;
    if (eval_now(frame, now)) return Future<Value>::ready(std::move(now));
  }
  if (!ordered_.empty()) {
    auto started = std::make_shared<std::vector<Future<Value>>>();
    return eval_all_ordered(&operands_, &ordered_, frame, 0, started)
        .then([this](const std::vector<Value>& vals) { return finish(vals); });
  }
  if (spec_->scalar_binary && operands_.size() == 2) {
    Value now;
    if (eval_now(frame, now)) return Future<Value>::ready(std::move(now));
    // Two scalars from operands that needed eval (a call's result): still
    // computed here. Anything else goes on the general way with the two
    // operands already started.
    Future<Value> x =
        out_of_sequence_if(early_operand_may_settle_, [&] { return operands_[0]->eval(frame); });
    Future<Value> y = operands_[1]->eval(frame);
    if (x.is_ready() && y.is_ready() && !x.error() && !y.error() && !trace::on()) {
      Value r;
      try {
        if (scalar_path(*spec_, x.get(), y.get(), r)) {
          counters().evaluations.fetch_add(1, std::memory_order_relaxed);
          return Future<Value>::ready(std::move(r));
        }
      } catch (...) {
        counters().evaluations.fetch_add(1, std::memory_order_relaxed);
        return fail_at(loc(), std::current_exception());
      }
    }
    Future<Value> started[2] = {std::move(x), std::move(y)};
    return join_operands(frame, started, 2);
  }
  return join_operands(frame, nullptr, 0);
}

Future<Value> PrimitiveCallNode::join_operands(const FramePtr& frame, Future<Value>* started,
                                               size_t n_started) const {
  // Every operand is started before any is awaited. While they come back
  // ready (the usual case) their values go straight into `vals` (room for
  // the defaults bind_operands adds); from the first pending one on, the
  // futures are gathered and joined instead.
  std::vector<Value> vals;
  vals.reserve(std::max(operands_.size(), spec_->params.size()));
  std::exception_ptr error;  // the first failed operand's, while all are ready
  std::vector<Future<Value>> fs;
  for (size_t i = 0; i < operands_.size(); ++i) {
    if (i >= n_started && fs.empty() && !error) {
      // A constant or a variable's value: no future.
      Value v;
      if (operands_[i]->eval_now(frame, v)) {
        vals.push_back(std::move(v));
        continue;
      }
    }
    Future<Value> f = i < n_started ? std::move(started[i])
                                    : out_of_sequence_if(
                                          early_operand_may_settle_ && i + 1 < operands_.size(),
                                          [&] { return operands_[i]->eval(frame); });
    if (fs.empty() && f.is_ready()) {
      if (error) continue;
      if ((error = f.error())) continue;
      vals.push_back(f.take());
      continue;
    }
    if (fs.empty()) {
      fs.reserve(operands_.size());
      if (error) {
        fs.push_back(Future<Value>::failed(error));  // fails the join: it is the first by position
      } else {
        for (auto& v : vals) fs.push_back(Future<Value>::ready(std::move(v)));
      }
    }
    fs.push_back(std::move(f));
  }
  if (fs.empty()) {
    if (error) return Future<Value>::failed(error);
    return finish(std::move(vals));
  }
  return when_all(std::move(fs)).then([this](const std::vector<Value>& vals) {
    return finish(vals);
  });
}

std::vector<const Node*> CallNode::children() const {
  std::vector<const Node*> out{callee_.get()};
  for (const auto& a : args_) out.push_back(a.get());
  return out;
}

CallNode::CallNode(SourceLoc loc, NodePtr callee, std::vector<NodePtr> args,
                   std::vector<std::string> names)
    : Node(std::move(loc)),
      callee_(std::move(callee)),
      args_(std::move(args)),
      names_(std::move(names)),
      positional_(std::all_of(names_.begin(), names_.end(),
                              [](const std::string& n) { return n.empty(); })) {
  std::vector<NodePtr> all{callee_};
  all.insert(all.end(), args_.begin(), args_.end());
  ordered_ = ordered_operands(all);
  if (!ordered_.empty()) all_ = std::move(all);
}

Future<Value> CallNode::eval(const FramePtr& frame) const {
  Future<std::vector<Value>> operands;
  if (!ordered_.empty()) {
    auto started = std::make_shared<std::vector<Future<Value>>>();
    operands = eval_all_ordered(&all_, &ordered_, frame, 0, started);
  } else {
    std::vector<NodePtr> all{callee_};
    all.insert(all.end(), args_.begin(), args_.end());
    operands = eval_all(all, frame);
  }
  return operands.then([this](const std::vector<Value>& vals) -> Future<Value> {
    if (positional_)
      return invoke(vals[0], std::vector<Value>(vals.begin() + 1, vals.end()), loc());
    std::vector<CallArg> args;
    args.reserve(args_.size());
    for (size_t i = 0; i < args_.size(); ++i) args.push_back({names_[i], vals[i + 1]});
    return invoke(vals[0], std::move(args), loc());
  });
}

namespace {

// invoke's arguments: named (CallArg) or all positional (Value).
const std::string& arg_name(const CallArg& a) { return a.name; }
Value& arg_value(CallArg& a) { return a.value; }
const std::string& arg_name(const Value&) {
  static const std::string* none = new std::string();
  return *none;
}
Value& arg_value(Value& v) { return v; }
std::vector<CallArg> call_args(std::vector<CallArg> args) { return args; }
std::vector<CallArg> call_args(std::vector<Value> values) {
  std::vector<CallArg> args;
  args.reserve(values.size());
  for (auto& v : values) args.push_back({"", std::move(v)});
  return args;
}

template <class A>
Future<Value> invoke_with(const Value& fn, std::vector<A> args, const SourceLoc& loc) {
  if (!fn.is_function()) {
    return fail_with<TypeError>(
        loc, error_message("[call] ", fn.describe(), " is not a function and cannot be called"));
  }
  const Callable* callable = fn.as_function().get();
  if (auto* prim = dynamic_cast<const PrimitiveFunction*>(callable)) {
    try {
      return Future<Value>::ready(call_primitive(prim->spec().name, call_args(std::move(args))));
    } catch (...) {
      return fail_at(loc, std::current_exception());
    }
  }
  auto* closure = dynamic_cast<const Closure*>(callable);
  if (!closure) {
    return fail_with<TypeError>(loc, "[call] value is not callable");
  }
  if constexpr (std::is_same_v<A, Value>) {
    // Scalar code over Python numbers: a native function (native_calls.cpp).
    Value native_result;
    try {
      if (native_call(*closure, args, native_result))
        return Future<Value>::ready(std::move(native_result));
    } catch (...) {  // its writes could not be undone (MemoryError)
      return fail_at(loc, std::current_exception());
    }
  }
  if (tl_call_depth >= kMaxCallDepthOffWorker && !in_worker()) {
    // Deep recursion moves to a worker's large stack.
    return async([fn, args = std::move(args), loc]() mutable {
      return invoke_with(fn, std::move(args), loc);
    });
  }
  const FunctionCode& code = closure->code();
  auto frame = std::make_shared<Frame>(code.frame_size, closure->env());
  size_t n = code.params.size();
  // Which parameters are bound (on the stack for all but functions with
  // many parameters: this runs per call).
  constexpr size_t kOnStack = 16;
  bool bound_on_stack[kOnStack] = {};
  std::unique_ptr<bool[]> bound_on_heap;
  bool* bound = bound_on_stack;
  if (n > kOnStack) {
    bound_on_heap.reset(new bool[n]());
    bound = bound_on_heap.get();
  }
  size_t next = 0;
  for (auto& a : args) {
    size_t k;
    const std::string& name = arg_name(a);
    if (name.empty()) {
      if (next >= n) {
        return fail_with<std::invalid_argument>(
            loc, error_message("[", code.name, "] takes ", n, " argument", n == 1 ? "" : "s",
                               " but ", args.size(), " were given"));
      }
      k = next++;
    } else {
      auto it = std::find(code.params.begin(), code.params.end(), name);
      if (it == code.params.end()) {
        return fail_with<std::invalid_argument>(
            loc, error_message("[", code.name, "] unexpected named argument '", name, "'"));
      }
      k = static_cast<size_t>(it - code.params.begin());
      if (bound[k]) {
        return fail_with<std::invalid_argument>(
            loc, error_message("[", code.name, "] argument '", name, "' given more than once"));
      }
    }
    bound[k] = true;
    frame->set(k, std::move(arg_value(a)));
  }
  for (size_t k = 0; k < n; ++k) {
    if (bound[k]) continue;
    if (!closure->defaults()[k]) {
      return fail_with<std::invalid_argument>(
          loc, error_message("[", code.name, "] missing argument '", code.params[k], "'"));
    }
    frame->set(k, *closure->defaults()[k]);
  }
  if (tl_call_depth >= kMaxCallDepth) {
    return fail_with<RecursionError>(
        loc, error_message("[", code.name, "] maximum call depth of ", kMaxCallDepth,
                           " exceeded (unbounded recursion?)"));
  }
  CallDepth depth;
  Future<Value> result = code.body->eval(frame);
  if (code.has_return) {
    result = result.chain([frame](const Future<Value>& r) {
      if (r.error() == return_signal()) return Future<Value>::ready(frame->return_value());
      return r;
    });
  }
  if (!code.makes_closures) return result;
  // Closures made here may sit in this frame while referring to it (directly
  // or through a frame inside it): a cycle. Unless one of them escaped (was
  // stored outside or is returned), the frame is done and is cleared.
  return result.chain([frame](const Future<Value>& r) {
    if (!frame->escaped() && (r.error() || !refers_to_frame(r.get(), frame.get()))) {
      frame->clear();
    }
    return r;
  });
}

}  // namespace

Future<Value> invoke(const Value& fn, std::vector<CallArg> args, const SourceLoc& loc) {
  return invoke_with(fn, std::move(args), loc);
}

Future<Value> invoke(const Value& fn, std::vector<Value> args, const SourceLoc& loc) {
  return invoke_with(fn, std::move(args), loc);
}

std::vector<const Node*> BlockNode::children() const { return raw(body_); }

namespace {

// A statement failed: its block fails now, with the error of a deferred
// define that has already failed (an earlier statement) if there is one.
// The others are not waited for: they have no effects, and one may never
// finish because of this error (a gradient bucket whose last member this
// statement would have computed).
Future<Value> fail_now(const std::shared_ptr<std::vector<Future<Value>>>& deferred,
                       const Future<Value>& failed) {
  if (deferred) {
    for (const auto& d : *deferred) {
      if (d.is_ready() && d.error()) return d;
    }
  }
  return failed;
}

// `result` once every deferred define from `from` on is done, or the error
// of the first that failed (by position). Keeps no values: a continuation on
// the first one still computing, and so on (no join state, no copies).
Future<Value> after_deferred(const std::shared_ptr<std::vector<Future<Value>>>& deferred,
                             size_t from, Future<Value> result) {
  for (size_t k = from; k < deferred->size(); ++k) {
    if (!(*deferred)[k].is_ready()) {
      return (*deferred)[k].chain([deferred, k, result](const Future<Value>&) {
        return after_deferred(deferred, k + 1, result);
      });
    }
  }
  for (const auto& d : *deferred) {
    if (auto e = d.error()) return Future<Value>::failed(e);
  }
  return result;
}

}  // namespace

BlockNode::BlockNode(SourceLoc loc, std::vector<NodePtr> body)
    : Node(std::move(loc)), body_(std::move(body)) {
  for (size_t i = 0; i + 1 < body_.size(); ++i) {
    // A loop before the block's last statement: nobody reads its value.
    if (auto* w = dynamic_cast<const WhileNode*>(body_[i].get())) w->mark_value_unused();
  }
  for (size_t i = 0; i < body_.size(); ++i) {
    auto* a = dynamic_cast<const AssignNode*>(body_[i].get());
    // The last statement is the block's value: nothing after it to let go on.
    dataflow_.push_back(a && a->deferrable() && i + 1 < body_.size() ? a : nullptr);
    defer_may_settle_.push_back(dataflow_.back() && may_settle(dataflow_.back()->value()));
    FrameAccess acc;
    frame_access(body_[i].get(), 0, acc);
    writes_.push_back(sorted_unique(std::move(acc.writes)));
    calls_.push_back(calls_functions(body_[i].get()));
    ordered_.push_back(program_writes() && may_write(body_[i].get()));
    const auto* nil = a ? dynamic_cast<const ConstantNode*>(a->value()) : nullptr;
    Value v;
    releases_.push_back(nil && a->depth() == 0 && nil->eval_now(nullptr, v) && v.is_nil() &&
                        a->label().rfind("define <release ", 0) == 0);
  }
}

Future<Value> BlockNode::eval_from(const FramePtr& frame, size_t i, Value last,
                                   Deferred deferred) const {
  // Waits for the deferred defines, then gives `result`; a deferred define
  // that failed comes first (it is the earlier statement).
  auto finish = [&deferred](Future<Value> result) -> Future<Value> {
    if (!deferred) return result;
    // In sequence, the pending defines are waited for here (settle_here);
    // what is still pending then is chained.
    for (const auto& d : *deferred) {
      if (!d.is_ready() && !settle_here(d)) break;
    }
    return after_deferred(deferred, 0, std::move(result));
  };
  for (; i < body_.size(); ++i) {
    if (ordered_[i] && deferred) {
      // This statement may write into an array that a define still
      // computing reads: it starts once they are done, so each read sees
      // the value of its turn (docs/runtime.md, "Views and writes").
      for (const auto& d : *deferred) {
        if (d.is_ready() || settle_here(d)) continue;
        return d.chain([this, frame, i, last, deferred](const Future<Value>&) {
          return eval_from(frame, i, last, deferred);
        });
      }
    }
    if ((calls_[i] || ordered_[i] || !writes_[i].empty()) && frame->has_late_reads()) {
      // This statement assigns a variable that the branch of an earlier
      // `if` whose condition was pending may still read (or calls functions,
      // which may store() into it): it starts once that branch is done (its
      // errors are its own statement's).
      std::optional<Future<Value>> reader = calls_[i] || ordered_[i]
                                                ? frame->late_read_of(nullptr)
                                                : frame->late_read_of(&writes_[i]);
      if (reader) {
        return reader->chain([this, frame, i, last, deferred](const Future<Value>&) {
          return eval_from(frame, i, last, deferred);
        });
      }
    }
    if (releases_[i]) {
      // What the define's evaluation does for a nil constant (Frame::set),
      // without its futures.
      frame->set(static_cast<const AssignNode*>(body_[i].get())->slot(), Value());
      last = Value();
      continue;
    }
    Future<Value> f;
    if (const AssignNode* a = dataflow_[i]) {
      // A small function's statements are mostly these: no future made and
      // taken apart for each (about 0.1 us a statement).
      if (Value now; !defer_may_settle_[i] && a->assign_now(frame, now)) {
        last = std::move(now);
        continue;
      }
      f = out_of_sequence_if(defer_may_settle_[i], [&] { return a->eval_dataflow(frame); });
      if (!f.is_ready()) {
        if (!deferred) deferred = std::make_shared<std::vector<Future<Value>>>();
        // Only its completion (or error) matters here; its value is in the
        // variable anyway. The list lasts one evaluation of the block, so it
        // holds a future of nil: holding the define's own future would keep
        // its value alive to the block's end after the variable let it go
        // (a pipeline stage's pass: every micro-batch's received activation
        // or cotangent until the last micro-batch was done; a ZeRO-3 step:
        // every gathered bucket and product).
        deferred->push_back(f.then([](const Value&) { return Value(); }));
        continue;
      }
    } else {
      f = body_[i]->eval(frame);
    }
    if (!f.is_ready() && !settle_here(f)) {
      return f.chain([this, frame, i, deferred](const Future<Value>& done) {
        if (done.error()) return fail_now(deferred, done);
        return eval_from(frame, i + 1, done.get(), deferred);
      });
    }
    if (f.error()) return fail_now(deferred, f);
    last = f.take();
  }
  return finish(Future<Value>::ready(std::move(last)));
}

std::vector<const Node*> ParallelBlockNode::children() const { return raw(body_); }

Future<Value> ParallelBlockNode::eval(const FramePtr& frame) const {
  // Each child becomes a task, so they run side by side.
  std::vector<Future<Value>> fs;
  for (const auto& n : body_) {
    fs.push_back(async([n, frame] { return n->eval(frame); }));
  }
  return when_all(std::move(fs)).then([](const std::vector<Value>& vals) {
    return vals.empty() ? Value() : vals.back();
  });
}

std::vector<const Node*> IfNode::children() const {
  std::vector<const Node*> out{cond_.get(), then_.get()};
  if (else_) out.push_back(else_.get());
  return out;
}

IfNode::IfNode(SourceLoc loc, NodePtr cond, NodePtr then, NodePtr otherwise)
    : Node(std::move(loc)),
      cond_(std::move(cond)),
      then_(std::move(then)),
      else_(std::move(otherwise)),
      branch_reads_(late_reads({then_.get(), else_.get()})) {}

Future<Value> IfNode::eval(const FramePtr& frame) const {
  Future<Value> c = cond_->eval(frame);
  if (c.is_ready() || branch_reads_.empty()) return branch(frame, c);
  // The branch reads its variables when the condition is there.
  Future<Value> r = branch(frame, c);
  frame->note_late_reads(&branch_reads_, r);
  return r;
}

Future<Value> IfNode::branch(const FramePtr& frame, const Future<Value>& cond) const {
  return cond.then([this, frame](const Value& c) -> Future<Value> {
    bool yes;
    try {
      yes = c.truthy("if");
    } catch (...) {
      return fail_at(loc(), std::current_exception());
    }
    if (yes) return then_->eval(frame);
    if (else_) return else_->eval(frame);
    return Future<Value>::ready(Value());
  });
}

Future<Value> WhileNode::eval(const FramePtr& frame) const {
  Value last;
  // Also while a trace records: the trace shows the program as it runs
  // untraced, each run of the fast loop one event (native_trace.hpp).
  if (fast_loops_enabled()) {
    std::call_once(fast_once_, [this, &frame] { fast_ = FastLoop::compile(*this, *frame); });
    // The loop on registers while it stays scalar code; where it stops (an
    // error to report, a value of another kind) the general evaluation goes
    // on from that turn.
    if (fast_ && fast_->run(frame, last)) return Future<Value>::ready(std::move(last));
  }
  return run(frame, std::move(last), nullptr);
}

Future<Value> WhileNode::run(const FramePtr& frame, Value last,
                             std::shared_ptr<Promise<Value>> done) const {
  // The loop's value goes to `done` once the loop has gone asynchronous (its
  // future was handed out then); before, it is returned.
  const bool first = !done;
  auto give = [&](Future<Value> r) -> Future<Value> {
    if (first) return r;
    done->set_from(r);
    return Future<Value>();
  };
  // An iteration that is not finished: the rest of the loop runs from its
  // completion and fulfils the one promise, so a long loop of asynchronous
  // iterations (collectives) does not build a chain of futures.
  auto suspend = [&](const Future<Value>& pending, bool is_cond) -> Future<Value> {
    if (first) done = std::make_shared<Promise<Value>>();
    pending.on_ready([this, frame, last, pending, is_cond, done] {
      if (!is_cond) {
        resume(frame, pending, last, done);
        return;
      }
      if (auto e = pending.error()) {
        done->set_error(e);
        return;
      }
      bool yes;
      try {
        yes = pending.get().truthy("while");
      } catch (...) {
        done->set_error(with_location(std::current_exception(), loc()));
        return;
      }
      if (!yes) {
        done->set_value(last);
        return;
      }
      Future<Value> b = body_->eval(frame);
      if (!b.is_ready()) {
        b.on_ready([this, frame, last, b, done] { resume(frame, b, last, done); });
        return;
      }
      resume(frame, b, last, done);
    });
    return first ? done->get_future() : Future<Value>();
  };
  for (;;) {
    // Ctrl-C: an endless loop must stop (one relaxed load per iteration).
    if (interrupt_requested()) {
      return give(Future<Value>::failed(std::make_exception_ptr(
          Interrupted("[while] interrupted (SIGINT) (at " + loc().str() + ")"))));
    }
    // The condition's value: at once (`i < n`, no future) or from its future.
    Value now;
    Future<Value> c;
    const Value* cond = &now;
    if (!cond_->eval_now(frame, now)) {
      c = cond_->eval(frame);
      if (!c.is_ready() && !settle_here(c)) return suspend(c, true);
      if (c.error()) return give(c);
      cond = &c.get();
    }
    bool yes;
    try {
      yes = cond->truthy("while");
    } catch (...) {
      return give(fail_at(loc(), std::current_exception()));
    }
    if (!yes) return give(Future<Value>::ready(std::move(last)));
    Future<Value> b = body_->eval(frame);
    if (!b.is_ready() && !settle_here(b)) return suspend(b, false);
    if (auto e = b.error()) {
      if (e == break_signal()) return give(Future<Value>::ready(std::move(last)));
      if (e == continue_signal()) continue;
      return give(b);
    }
    // The last turn's value is the loop's; a loop whose value nobody reads
    // keeps none (it would hold the body's value, a list being appended to
    // say, and make it shared at the next turn).
    if (!value_unused_) last = b.take();
  }
}

void WhileNode::resume(const FramePtr& frame, const Future<Value>& body, const Value& last,
                       const std::shared_ptr<Promise<Value>>& done) const {
  if (auto e = body.error()) {
    if (e == break_signal()) {
      done->set_value(last);
    } else if (e == continue_signal()) {
      run(frame, last, done);
    } else {
      done->set_error(e);
    }
    return;
  }
  run(frame, value_unused_ ? Value() : body.get(), done);
}

namespace {

// The elements for_each visits: list items, array rows, or 0..n-1 for an int.
std::vector<Value> iteration_items(const Value& it, const SourceLoc& loc) {
  std::vector<Value> items;
  if (it.is_list()) return it.as_list();
  if (it.is_int()) {
    for (int64_t i = 0; i < it.as_int(); ++i) items.emplace_back(i);
    return items;
  }
  if (it.is_array()) {
    const Array& a = it.as_array();
    if (a.ndim() == 0) {
      throw TypeError(error_message("[for_each] cannot iterate over a 0-d array"));
    }
    // The rows are views of the array, as NumPy's iteration gives them (a
    // write into one is a write into the array).
    Shape row_shape(a.shape().begin() + 1, a.shape().end());
    const std::vector<int64_t> strides = a.strides();
    const std::vector<int64_t> row_strides(strides.begin() + 1, strides.end());
    for (int64_t i = 0; i < a.dim(0); ++i) {
      items.emplace_back(Array::view(a, row_shape, row_strides, a.offset() + i * strides[0]));
    }
    return items;
  }
  throw TypeError(error_message("[for_each] cannot iterate over ", it.describe(),
                                ": expected a list, an array or an int"));
}

struct ForEachState {
  Value fn;
  std::vector<Value> items;
  SourceLoc loc;
  std::shared_ptr<Promise<Value>> done;  // set once the loop went asynchronous
};

// Calls from item i on. Once a call is pending, the rest runs from its
// completion and fulfils st->done (one promise for the whole loop, as in
// WhileNode::run); until then the result is returned.
Future<Value> for_each_from(std::shared_ptr<ForEachState> st, size_t i) {
  const bool first = !st->done;
  auto give = [&](Future<Value> r) -> Future<Value> {
    if (first) return r;
    st->done->set_from(r);
    return Future<Value>();
  };
  for (; i < st->items.size(); ++i) {
    if (interrupt_requested()) {
      return give(Future<Value>::failed(std::make_exception_ptr(
          Interrupted("[for_each] interrupted (SIGINT) (at " + st->loc.str() + ")"))));
    }
    Future<Value> f = invoke(st->fn, {CallArg{"", st->items[i]}}, st->loc);
    if (!f.is_ready()) {
      if (first) st->done = std::make_shared<Promise<Value>>();
      f.on_ready([st, i, f] {
        if (f.error() == break_signal()) {
          st->done->set_value(Value());
        } else if (f.error() && f.error() != continue_signal()) {
          st->done->set_error(f.error());
        } else {
          for_each_from(st, i + 1);
        }
      });
      return first ? st->done->get_future() : Future<Value>();
    }
    if (auto e = f.error()) {
      if (e == break_signal()) break;
      if (e != continue_signal()) return give(f);
    }
  }
  return give(Future<Value>::ready(Value()));
}

}  // namespace

Future<Value> ForEachNode::eval(const FramePtr& frame) const {
  return eval_all({fn_, iterable_}, frame)
      .then([this](const std::vector<Value>& v) -> Future<Value> {
        auto st = std::make_shared<ForEachState>();
        st->fn = v[0];
        st->loc = loc();
        try {
          st->items = iteration_items(v[1], loc());
        } catch (...) {
          return fail_at(loc(), std::current_exception());
        }
        return for_each_from(st, 0);
      });
}

std::vector<const Node*> ListNode::children() const { return raw(items_); }

ListNode::ListNode(SourceLoc loc, std::vector<NodePtr> items, bool as_array, bool tuple)
    : Node(std::move(loc)),
      items_(std::move(items)),
      as_array_(as_array),
      tuple_(tuple),
      ordered_(ordered_operands(items_)) {}

Future<Value> ListNode::eval(const FramePtr& frame) const {
  Future<std::vector<Value>> items =
      ordered_.empty() ? eval_all(items_, frame)
                       : eval_all_ordered(&items_, &ordered_, frame, 0,
                                          std::make_shared<std::vector<Future<Value>>>());
  return items.then([this](const std::vector<Value>& vals) -> Value {
    if (as_array_) {
      bool numeric = !vals.empty();
      for (const Value& v : vals) numeric = numeric && (v.is_numeric() || v.is_list());
      if (numeric) {
        try {
          return Value(to_array(Value(List(vals)), "[]", "list literal"));
        } catch (const std::invalid_argument&) {
          // Ragged or mixed content stays a list, as Python's lists do.
        }
      }
    }
    if (tuple_) return Value::tuple(List(vals));
    return Value(List(vals));
  });
}

std::vector<const Node*> DictNode::children() const {
  std::vector<const Node*> out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    out.push_back(keys_[i].get());
    out.push_back(values_[i].get());
  }
  return out;
}

DictNode::DictNode(SourceLoc loc, std::vector<NodePtr> keys, std::vector<NodePtr> values)
    : Node(std::move(loc)), keys_(std::move(keys)), values_(std::move(values)) {
  for (size_t i = 0; i < keys_.size(); ++i) {
    all_.push_back(keys_[i]);
    all_.push_back(values_[i]);
  }
  ordered_ = ordered_operands(all_);
}

Future<Value> DictNode::eval(const FramePtr& frame) const {
  Future<std::vector<Value>> items =
      ordered_.empty() ? eval_all(all_, frame)
                       : eval_all_ordered(&all_, &ordered_, frame, 0,
                                          std::make_shared<std::vector<Future<Value>>>());
  return items.then([this](const std::vector<Value>& vals) -> Future<Value> {
    Dict d;
    for (size_t i = 0; i + 1 < vals.size(); i += 2) {
      // The keys d[k] = v takes (floats, tuples, NumPy scalars as the number
      // they equal), with Python's TypeError for an unhashable one.
      Value key;
      try {
        key = python_dict_key(vals[i], "dict");
      } catch (const TypeError& e) {
        return fail_with<TypeError>(loc(), e.what());
      }
      d.set(std::move(key), vals[i + 1]);
    }
    return Future<Value>::ready(Value(std::move(d)));
  });
}

LogicalNode::LogicalNode(SourceLoc loc, bool is_and, NodePtr lhs, NodePtr rhs)
    : Node(std::move(loc)),
      is_and_(is_and),
      lhs_(std::move(lhs)),
      rhs_(std::move(rhs)),
      rhs_reads_(late_reads({rhs_.get()})) {}

Future<Value> LogicalNode::eval(const FramePtr& frame) const {
  const char* name = is_and_ ? "logical_and" : "logical_or";
  Future<Value> lhs = lhs_->eval(frame);
  const bool late = !lhs.is_ready() && !rhs_reads_.empty();
  Future<Value> r = lhs.then([this, frame, name](const Value& a) -> Future<Value> {
    if (!a.is_array()) {
      // Scalars short-circuit, as in C and Python.
      bool t;
      try {
        t = a.truthy(is_and_ ? "&&" : "||");
      } catch (...) {
        return fail_at(loc(), std::current_exception());
      }
      if (is_and_ && !t) return Future<Value>::ready(Value(false));
      if (!is_and_ && t) return Future<Value>::ready(Value(true));
    }
    return rhs_->eval(frame).then([this, a, name](const Value& b) -> Future<Value> {
      try {
        if (!a.is_array() && !b.is_array()) return Future<Value>::ready(Value(b.truthy(name)));
        return Future<Value>::ready(call_primitive(name, std::vector<Value>{a, b}));
      } catch (...) {
        return fail_at(loc(), std::current_exception());
      }
    });
  });
  // The right side reads its variables when the left side is there.
  if (late) frame->note_late_reads(&rhs_reads_, r);
  return r;
}

}  // namespace tessera
