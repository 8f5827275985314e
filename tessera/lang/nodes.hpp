// The kinds of execution-tree nodes: constants, variables, primitive calls,
// function calls and the special forms of the language.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/lang/fastloop.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/primitives/fused.hpp"

namespace tessera {

class ConstantNode : public Node {
  friend class FastLoop;

 public:
  ConstantNode(SourceLoc loc, Value v) : Node(std::move(loc)), value_(std::move(v)) {}
  Future<Value> eval(const FramePtr&) const override { return Future<Value>::ready(value_); }
  bool eval_now(const FramePtr&, Value& out) const override {
    out = value_;
    return true;
  }
  std::string label() const override;

 private:
  Value value_;
};

// Reads a variable `depth` frames up, at `slot`.
class VariableNode : public Node {
 public:
  VariableNode(SourceLoc loc, std::string name, int depth, size_t slot)
      : Node(std::move(loc)), name_(std::move(name)), depth_(depth), slot_(slot) {}
  Future<Value> eval(const FramePtr& frame) const override;
  bool eval_now(const FramePtr& frame, Value& out) const override {
    return frame->up(depth_)->read_now(slot_, out);
  }
  std::string label() const override { return name_; }
  int depth() const { return depth_; }
  size_t slot() const { return slot_; }

 private:
  std::string name_;
  int depth_;
  size_t slot_;
};

// define(x, value) and store(x, value): evaluates value and assigns it.
class AssignNode : public Node {
  friend class FastLoop;

 public:
  AssignNode(SourceLoc loc, std::string name, int depth, size_t slot, NodePtr value, bool is_store);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return (is_store_ ? "store " : "define ") + name_; }
  std::vector<const Node*> children() const override { return {value_.get()}; }
  // As a statement of a block (not its last): when the value is not ready,
  // the variable becomes pending (Frame::set_pending) and the future is
  // returned unassigned, so the block can go on while it computes.
  Future<Value> eval_dataflow(const FramePtr& frame) const;
  // eval_dataflow's usual case without a future: a value at once (a
  // constant, `n + 1`, `range_index(n)` on numbers) assigned, and true;
  // false with nothing evaluated otherwise.
  bool assign_now(const FramePtr& frame, Value& out) const;
  // False when the value may have effects (printing, random draws, files,
  // function calls), assigns variables of this frame or frames around it,
  // or has break(), continue() or return(): then the block waits for it
  // before its next statement.
  bool deferrable() const { return deferrable_; }
  // The variable assigned: `depth` frames up, at `slot`.
  int depth() const { return depth_; }
  size_t slot() const { return slot_; }
  const Node* value() const { return value_.get(); }

 private:
  // xs = append(xs, x) with the list moved out of xs (appended in place);
  // false when this is not that pattern or the values are not there yet,
  // with `result` set when the item was evaluated but is still computing
  // (the append's future then, for the caller to assign as any value).
  bool append_in_place(const FramePtr& frame, Future<Value>& result) const;
  std::string name_;
  int depth_;
  size_t slot_;
  NodePtr value_;
  bool is_store_;
  bool deferrable_;
  bool appends_to_itself_ = false;
};

// lambda(a, b, body) and define(f, a, b, body): makes a closure over the
// current frame (and, for define, assigns it to `slot`).
class FunctionNode : public Node {
 public:
  FunctionNode(SourceLoc loc, std::shared_ptr<const FunctionCode> code, std::optional<size_t> slot)
      : Node(std::move(loc)), code_(std::move(code)), slot_(slot) {}
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override;
  std::vector<const Node*> children() const override;
  const FunctionCode& code() const { return *code_; }
  // The variable define(f, ...) assigns in the frame it runs in (none for a lambda).
  std::optional<size_t> slot() const { return slot_; }

 private:
  std::shared_ptr<const FunctionCode> code_;
  std::optional<size_t> slot_;
};

// A call of a primitive with operands bound to its parameters at compile time.
class PrimitiveCallNode : public Node {
  friend class FastLoop;
  friend class AssignNode;

 public:
  // slots[i] is the parameter index of operand i; operands beyond the fixed
  // parameters of a variadic primitive have the last index.
  // `same_site`: how many primitive calls at the same source position come
  // before this one in the program (their sites get " #2", " #3", ...).
  PrimitiveCallNode(SourceLoc loc, const PrimitiveSpec* spec, std::vector<NodePtr> operands,
                    std::vector<int> slots, int same_site = 0);
  Future<Value> eval(const FramePtr& frame) const override;
  bool eval_now(const FramePtr& frame, Value& out) const override;
  std::string label() const override { return spec_->name; }
  std::vector<const Node*> children() const override;
  bool is_primitive() const override { return true; }
  const PrimitiveSpec* spec() const { return spec_; }
  // True for a draw from a stream that advances with every draw (the global
  // stream of np.random.*, set_seed, a Generator's): a random primitive
  // without a seed of its own. Such calls keep Python's order (may_write).
  bool draws_from_a_stream() const;

  // The call of an elementwise primitive (add, sqrt, ...) on operands that
  // include elementwise calls: one call of a fused primitive on the leaves
  // of the expression (primitives/fused.hpp), which keeps the unfused tree
  // for scalar operands and the scalar loops (fastloop.cpp). Null when the
  // call does not fuse: not elementwise, named arguments, no elementwise
  // operand, or a leaf that may write into an array or have effects (the
  // fused call computes after all leaves, the unfused one between them).
  static NodePtr fuse(const SourceLoc& loc, const PrimitiveSpec* spec,
                      const std::vector<NodePtr>& operands, const std::vector<int>& slots,
                      int same_site);
  // setitem(x, value, indices...) whose value fuses: one call that writes
  // the expression straight into x's selection when it can (fused.hpp);
  // null otherwise.
  static NodePtr fuse_setitem(const SourceLoc& loc, const PrimitiveSpec* spec,
                              const std::vector<NodePtr>& operands, const std::vector<int>& slots,
                              int same_site);
  // x OP= value (iadd, isub, imul, itruediv) whose value fuses or is one
  // elementwise call: one call that computes x OP value into x in one pass
  // when it can (fused.hpp); null otherwise.
  static NodePtr fuse_in_place(const SourceLoc& loc, const PrimitiveSpec* spec,
                               const std::vector<NodePtr>& operands, const std::vector<int>& slots,
                               int same_site);
  // sum/mean/prod/min/max(x, ...) whose x fuses: one call that reduces the
  // expression as it is computed when it can (fused.hpp); null otherwise.
  static NodePtr fuse_reduce(const SourceLoc& loc, const PrimitiveSpec* spec,
                             const std::vector<NodePtr>& operands, const std::vector<int>& slots,
                             int same_site);
  // For a fused call: the same expression as a tree of ordinary calls.
  const Node* unfused() const { return unfused_.get(); }

 private:
  // The fused call of `fused_spec` (fuse, fuse_setitem; lang/fusion.cpp) on
  // `operands`, over `expr`, standing for the call of `spec` on
  // `unfused_operands`.
  static NodePtr fused_call(const SourceLoc& loc, std::shared_ptr<const PrimitiveSpec> fused_spec,
                            std::shared_ptr<const FusedExpr> expr, std::vector<NodePtr> operands,
                            const PrimitiveSpec* spec, std::vector<NodePtr> unfused_operands,
                            const std::vector<int>& slots, int same_site);
  Value compute(std::vector<Value>& operand_values) const;
  Future<Value> finish(std::vector<Value> operand_values) const;
  // Evaluates the operands (the first n_started are given, already started,
  // and moved from) and then the call.
  Future<Value> join_operands(const FramePtr& frame, Future<Value>* started,
                              size_t n_started) const;

  const PrimitiveSpec* spec_;
  std::vector<NodePtr> operands_;
  // Whether an operand before the last may reach settle_here: it is then
  // evaluated out of sequence (the later ones start before it is awaited).
  bool early_operand_may_settle_ = false;
  std::vector<int> slots_;
  std::vector<bool> variadic_;
  // Calls computed by the node itself from operands it has at once
  // (eval_now), as scalar arithmetic is: `type(x)`, and `==`/`!=` of two
  // strings -- the checks the translator puts before a loop on its range()
  // bounds (`type(n) != "int"`), which otherwise bound arguments and read
  // the clock on every call.
  enum class Direct : uint8_t { none, type_name, equal, not_equal };
  Direct direct_ = Direct::none;
  // In a program that writes: per operand, whether it starts only after
  // the ones before it (it may write; nodes.cpp, ordered_operands); empty
  // when none does.
  std::vector<bool> ordered_;
  // loc().str() (with " #k" for the k-th call at that position), made once:
  // asynchronous primitives (collectives) key their matching across
  // localities on it at every call.
  std::string site_;
  // loc() shared with the futures of asynchronous calls, which add it to
  // their errors (Future::decorate_errors) and may outlive the tree.
  std::shared_ptr<const SourceLoc> shared_loc_;
  // A fused call's own primitive (spec_ points at it) and unfused tree.
  std::shared_ptr<const PrimitiveSpec> owned_spec_;
  std::shared_ptr<const FusedExpr> fused_;
  bool fused_in_place_ = false;  // fuse_in_place's call: x OP= value
  NodePtr unfused_;
};

// A call of a function value: f(args) where f is a variable or expression.
class CallNode : public Node {
  friend class FastLoop;

 public:
  CallNode(SourceLoc loc, NodePtr callee, std::vector<NodePtr> args,
           std::vector<std::string> names);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "call " + callee_->label(); }
  std::vector<const Node*> children() const override;

 private:
  NodePtr callee_;
  std::vector<NodePtr> args_;
  std::vector<std::string> names_;
  bool positional_;  // no argument is named
  // In a program that writes: per operand (the callee first), whether it
  // starts only after the ones before it (ordered_operands); empty if none.
  std::vector<bool> ordered_;
  std::vector<NodePtr> all_;  // callee and arguments, when ordered_ is set
};

// block(a, b, c): statements in order, value of the last. A statement
// waits for the one before it, except that a define whose value is still
// computing (a collective in flight, a spawned task) does not hold up the
// statements after it: its variable is pending and whoever reads it waits
// (dataflow). Such a define may still read variables while it computes (the
// branch of an `if` whose condition is pending is evaluated when the
// condition is there: Frame::note_late_reads), so a later statement that
// assigns a variable it reads waits for it first: every read sees the value
// of its turn in program order. The block's value is ready when every
// statement is done; a statement that fails fails the block at once
// (docs/language.md).
class BlockNode : public Node {
  friend class FastLoop;

 public:
  BlockNode(SourceLoc loc, std::vector<NodePtr> body);
  Future<Value> eval(const FramePtr& frame) const override {
    return eval_from(frame, 0, Value(), {});
  }
  std::string label() const override { return "block"; }
  std::vector<const Node*> children() const override;
  const std::vector<NodePtr>& statements() const { return body_; }

 private:
  // The defines still computing: done (nil) or failed futures, in order.
  using Deferred = std::shared_ptr<std::vector<Future<Value>>>;
  Future<Value> eval_from(const FramePtr& frame, size_t i, Value last, Deferred deferred) const;
  std::vector<NodePtr> body_;
  std::vector<const AssignNode*> dataflow_;  // per statement: the define that may defer, or null
  // Per statement: a deferring define whose value may reach settle_here
  // (evaluated out of sequence: the statements after it go on meanwhile).
  std::vector<bool> defer_may_settle_;
  // Per statement: the variables of the frame it assigns (sorted), and
  // whether it calls functions (which may assign any).
  std::vector<std::vector<size_t>> writes_;
  std::vector<bool> calls_;
  // Per statement: it may write into an array (in a program that writes),
  // so it waits for the defines still computing before it.
  std::vector<bool> ordered_;
  // Per statement: a `<release x>` the compiler added after x's last read
  // (compiler.cpp, release_at_last_use): nil assigned at once, with no future
  // made (a jit function's body has one per variable; a small function's
  // call paid about 0.1 us for each).
  std::vector<bool> releases_;
};

// parallel_block(a, b, c): all at once, value of the last.
class ParallelBlockNode : public Node {
 public:
  ParallelBlockNode(SourceLoc loc, std::vector<NodePtr> body)
      : Node(std::move(loc)), body_(std::move(body)) {}
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "parallel_block"; }
  std::vector<const Node*> children() const override;

 private:
  std::vector<NodePtr> body_;
};

class IfNode : public Node {
  friend class FastLoop;

 public:
  IfNode(SourceLoc loc, NodePtr cond, NodePtr then, NodePtr otherwise);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "if"; }
  std::vector<const Node*> children() const override;

 private:
  Future<Value> branch(const FramePtr& frame, const Future<Value>& cond) const;
  NodePtr cond_, then_, else_;  // else_ may be null
  // The variables of the frame the branches read (sorted): noted as late
  // reads while the condition is pending (Frame::note_late_reads).
  std::vector<size_t> branch_reads_;
};

class WhileNode : public Node {
  friend class FastLoop;

 public:
  // `parallel`: a prange loop (parallel_while), whose turns may run as
  // chunks on the workers (docs/runtime.md, "Parallel loops").
  WhileNode(SourceLoc loc, NodePtr cond, NodePtr body, bool parallel = false)
      : Node(std::move(loc)), cond_(std::move(cond)), body_(std::move(body)), parallel_(parallel) {}
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "while"; }
  std::vector<const Node*> children() const override { return {cond_.get(), body_.get()}; }
  // Set by the block that holds the loop as a statement whose value is not
  // used (before the block's last statement).
  void mark_value_unused() const { value_unused_ = true; }
  // By slot of the loop's frame: read somewhere in the function outside the
  // loop (mark_loop_reads); empty when not known (a program's top level).
  void set_reads_outside(std::vector<bool> r) const { reads_outside_ = std::move(r); }
  const std::vector<bool>& reads_outside() const { return reads_outside_; }
  // Set by mark_loop_reads for a loop inside no other loop of its function
  // and making no function: it runs once in its frame, so the variables it
  // alone reads need not be stored back in the frame when it ends.
  void set_runs_once(bool once) const { runs_once_ = once; }
  bool runs_once() const { return runs_once_; }

 private:
  mutable bool value_unused_ = false;
  mutable std::vector<bool> reads_outside_;
  mutable bool runs_once_ = false;
  // Runs turns from here on; `done` is the loop's promise once a turn went
  // asynchronous (null before: the result is returned then).
  Future<Value> run(const FramePtr& frame, Value last, std::shared_ptr<Promise<Value>> done) const;
  // Continues after a body evaluation that finished asynchronously.
  void resume(const FramePtr& frame, const Future<Value>& body, const Value& last,
              const std::shared_ptr<Promise<Value>>& done) const;
  NodePtr cond_, body_;
  bool parallel_ = false;
  // The scalar fast path (fastloop.hpp), compiled at the first evaluation;
  // null when the loop is outside its subset.
  mutable std::once_flag fast_once_;
  mutable std::unique_ptr<FastLoop> fast_;
};

// for_each(f, iterable): calls f on each element in order.
class ForEachNode : public Node {
 public:
  ForEachNode(SourceLoc loc, NodePtr fn, NodePtr iterable)
      : Node(std::move(loc)), fn_(std::move(fn)), iterable_(std::move(iterable)) {}
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "for_each"; }
  std::vector<const Node*> children() const override { return {fn_.get(), iterable_.get()}; }

 private:
  NodePtr fn_, iterable_;
};

// list(a, b) and [a, b]: builds a list (or, for [..] of numbers, an array).
class ListNode : public Node {
  friend class FastLoop;

 public:
  ListNode(SourceLoc loc, std::vector<NodePtr> items, bool as_array, bool tuple = false);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return as_array_ ? "[...]" : tuple_ ? "tuple" : "list"; }
  std::vector<const Node*> children() const override;

 private:
  std::vector<NodePtr> items_;
  bool as_array_;
  bool tuple_;  // tuple(...): the list is marked as a tuple
  // In a program that writes: per item, whether it starts only after the
  // ones before it (it may write or draw: Python evaluates `[x.sum(), h(x)]`
  // left to right; nodes.cpp, ordered_operands); empty when none does.
  std::vector<bool> ordered_;
};

// dict(k1, v1, k2, v2, ...) and dict(name=value, ...).
class DictNode : public Node {
 public:
  DictNode(SourceLoc loc, std::vector<NodePtr> keys, std::vector<NodePtr> values);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return "dict"; }
  std::vector<const Node*> children() const override;

 private:
  friend class FastLoop;
  std::vector<NodePtr> keys_, values_;
  // keys and values in Python's order (k1, v1, k2, ...), and which of them
  // start only after the ones before (as ListNode's).
  std::vector<NodePtr> all_;
  std::vector<bool> ordered_;
};

// break(), continue(), return(value).
class ControlNode : public Node {
  friend class FastLoop;

 public:
  enum class Kind { brk, cont, ret };
  ControlNode(SourceLoc loc, Kind kind, NodePtr value)
      : Node(std::move(loc)), kind_(kind), value_(std::move(value)) {}
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override {
    return kind_ == Kind::brk ? "break" : kind_ == Kind::cont ? "continue" : "return";
  }
  std::vector<const Node*> children() const override {
    if (value_) return {value_.get()};
    return {};
  }

 private:
  Kind kind_;
  NodePtr value_;  // return's value; may be null
};

// a && b, a || b: short-circuit on scalars, elementwise on arrays.
class LogicalNode : public Node {
  friend class FastLoop;

 public:
  LogicalNode(SourceLoc loc, bool is_and, NodePtr lhs, NodePtr rhs);
  Future<Value> eval(const FramePtr& frame) const override;
  std::string label() const override { return is_and_ ? "&&" : "||"; }
  std::vector<const Node*> children() const override { return {lhs_.get(), rhs_.get()}; }

 private:
  bool is_and_;
  NodePtr lhs_, rhs_;
  std::vector<size_t> rhs_reads_;  // as IfNode's branch_reads_, for the right side
};

// The variables of one frame F that evaluating `n` may read and assign, for
// `n` run in F (nesting 0) or inside `nesting` functions defined there
// (whose bodies reach F's variables `nesting` frames up). Compile-time
// analysis: the dataflow of blocks (BlockNode), and Program's resident
// top-level frame.
struct FrameAccess {
  std::vector<size_t> reads, writes;
  bool writes_around = false;  // assigns a variable of a frame around F
};
void frame_access(const Node* n, int nesting, FrameAccess& acc);

// Tells each loop of a function's body (not of functions defined inside it)
// which variables of the frame, `frame_size` slots, the function reads
// outside that loop: native code may leave a variable read only inside the
// loop without its last value (docs/runtime.md, "Array expressions").
void mark_loop_reads(const Node* body, size_t frame_size);

// True if `n` computes a value and nothing else: no primitive with effects
// (registry.hpp: has_effects), no call of a function, no break(),
// continue() or return() (nodes_control.cpp).
bool pure_value(const Node* n);
// True if evaluating `n` may write into an array or advance a random
// stream: a primitive that writes, a draw from a stream
// (PrimitiveCallNode::draws_from_a_stream), or a call of a function (whose
// body may do either).
bool may_write(const Node* n);
// How a call of `spec` draws random numbers: kNoStreamDraw for a primitive
// that does not draw from a stream (not random, or default_rng), kStreamDraw
// for one that always does (set_seed, a Generator's draw, shuffle), else the
// index of its `seed` parameter: a draw from the global stream unless that
// seed is given and not None. Shared by the compiler (on the program's text)
// and PrimitiveCallNode::draws_from_a_stream (on its operands).
constexpr int kNoStreamDraw = -2, kStreamDraw = -1;
int stream_seed_param(const PrimitiveSpec& spec);

}  // namespace tessera
