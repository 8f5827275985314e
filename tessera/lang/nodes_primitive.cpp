// Calls of primitives in the execution tree (PrimitiveCallNode): binding
// operands to parameters, the timed and counted evaluation, the choice to
// run inline or as a task, asynchronous and tiled primitives, and the direct
// path of two scalars (no future, no binding).
#include "tessera/lang/nodes.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "tessera/lang/nodes_impl.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {

using namespace detail;  // nodes_impl.hpp

// An ErrorDecorator (future.hpp) adding a node's source position.
std::exception_ptr locate_error(std::exception_ptr e, const void* loc) {
  return with_location(std::move(e), *static_cast<const SourceLoc*>(loc));
}

}  // namespace

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

}  // namespace tessera
