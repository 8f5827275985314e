// Control flow in the execution tree: blocks (their statements run in
// order, defines still computing deferred), parallel blocks, if, while
// (the fast loop first), for_each, short-circuit and/or, and break(),
// continue() and return(value) as preallocated signals.
#include "tessera/lang/nodes.hpp"

#include <memory>

#include "tessera/lang/nodes_impl.hpp"
#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera {

namespace {

using namespace detail;  // nodes_impl.hpp

}  // namespace

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
