// The execution tree's values and calls: constants, variables, assignments,
// functions, calls of functions (invoke), lists and dicts; the analyses that
// the other node files share (nodes_impl.hpp). Calls of primitives are in
// nodes_primitive.cpp, blocks, branches, loops and break/continue/return in
// nodes_control.cpp.
#include "tessera/lang/nodes.hpp"

#include <algorithm>
#include <memory>

#include "tessera/core/recursion_error.hpp"
#include "tessera/lang/native_calls.hpp"
#include "tessera/lang/nodes_impl.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera {

namespace {

using namespace detail;  // nodes_impl.hpp

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

namespace detail {

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

std::vector<size_t> sorted_unique(std::vector<size_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

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

std::vector<size_t> late_reads(std::initializer_list<const Node*> nodes) {
  FrameAccess acc;
  for (const Node* n : nodes) {
    if (n && (!pure_value(n) || calls_functions(n))) return {};
    frame_access(n, 0, acc);
  }
  if (!acc.writes.empty() || acc.writes_around) return {};
  return sorted_unique(std::move(acc.reads));
}

}  // namespace detail

namespace {

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

}  // namespace tessera
