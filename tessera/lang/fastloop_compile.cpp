// The scalar loop fast path's compiler (fastloop_impl.hpp): a loop's nodes
// into the tree of operations on registers (FastLoop::Impl::FNode), one
// register per variable the loop touches, with calls of jit functions
// inlined where their locals are assigned before they are read. Whatever
// it cannot hold keeps the loop on the general path (said under
// TESSERA_FAST_LOOPS=debug).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

// A primitive whose only effect is writing into its first argument (x += y,
// copyto, setitem): the fast path snapshots what it writes into first.
bool writes_only(const PrimitiveSpec& spec) {
  return spec.writes && !spec.eval_async && spec.family != "random" && spec.family != "io" &&
         spec.family != "distributed";
}

// True when a `return` is among `n` and the nodes under it (functions
// defined there excepted: the function called inline makes none).
bool has_return_node(const Node* n) {
  if (auto* c = dynamic_cast<const ControlNode*>(n); c && c->label() == "return") return true;
  for (const Node* k : n->children())
    if (k && has_return_node(k)) return true;
  return false;
}

Fast fast_of(const std::string& name) {
  static const std::map<std::string, Fast, std::less<>> table = {{"add", Fast::add},
                                                                 {"iadd", Fast::add},
                                                                 {"subtract", Fast::sub},
                                                                 {"isub", Fast::sub},
                                                                 {"multiply", Fast::mul},
                                                                 {"imul", Fast::mul},
                                                                 {"divide", Fast::div},
                                                                 {"itruediv", Fast::div},
                                                                 {"less", Fast::lt},
                                                                 {"less_equal", Fast::le},
                                                                 {"greater", Fast::gt},
                                                                 {"greater_equal", Fast::ge},
                                                                 {"equal", Fast::eq},
                                                                 {"not_equal", Fast::ne},
                                                                 {"floor_divide", Fast::floordiv},
                                                                 {"ifloordiv", Fast::floordiv},
                                                                 {"mod", Fast::mod},
                                                                 {"remainder", Fast::mod},
                                                                 {"imod", Fast::mod}};
  auto it = table.find(name);
  return it == table.end() ? Fast::none : it->second;
}

}  // namespace

bool FastLoop::Impl::pure_primitive(const PrimitiveSpec& spec) {
  return !spec.writes && !spec.eval_async && !has_effects(spec) && spec.family != "distributed" &&
         spec.family != "autodiff";
}

bool FastLoop::Impl::compile(const Node* n, FNode& out) {
  if (auto* c = dynamic_cast<const ConstantNode*>(n)) {
    const Value& v = c->value_;
    out.op = Op::Const;
    if (v.is_bool()) {
      out.constant = Reg::boolean(Reg::PyBool, v.as_bool());
    } else if (v.is_int()) {
      out.constant = Reg::make(Reg::PyInt, v.as_int());
    } else if (v.is_float()) {
      out.constant = Reg::real(Reg::PyFloat, v.as_float());
    } else if (v.is_nil()) {
      out.constant.k = Reg::Nil;
    } else if (v.is_slice() || v.is_string()) {
      // A slice (`A[:, j]`) or a string: held as an object (h_const_object).
      out.constant.k = Reg::Obj;
      out.const_arg = &v;
    } else {
      if (debug())
        std::fprintf(stderr, "[fast loops] %s: the constant %s is outside the subset\n",
                     n->loc().str().c_str(), n->label().c_str());
      return false;
    }
    return true;
  }
  if (auto* v = dynamic_cast<const VariableNode*>(n)) {
    out.op = Op::Var;
    out.reg = var_reg(v->depth(), v->slot());
    name_reg(out.reg, v->label());
    return true;
  }
  if (auto* a = dynamic_cast<const AssignNode*>(n)) {
    if (!scopes.empty() && a->depth() == 0 && a->label().rfind("define <release ", 0) == 0) {
      // A local's value let go after its last use in a function called
      // inline (compiler.cpp, release_at_last_use): its register is the
      // call site's own, and keeps its kind for the native code.
      out.op = Op::Const;
      out.constant.k = Reg::Nil;
      return true;
    }
    out.op = Op::Assign;
    out.reg = var_reg(a->depth(), a->slot());
    name_reg(out.reg, a->label().substr(a->label().find(' ') + 1));
    out.kids.resize(1);
    if (auto* p = dynamic_cast<const PrimitiveCallNode*>(a->value());
        p && !p->unfused_ && p->spec_->name == "append" && p->operands_.size() == 2 &&
        p->slots_ == std::vector<int>{0, 1}) {
      // xs = append(xs, v): in place on the list xs holds.
      auto* xs = dynamic_cast<const VariableNode*>(p->operands_[0].get());
      if (xs && xs->depth() == a->depth() && xs->slot() == a->slot()) {
        out.op = Op::Append;
        out.counter = static_cast<int>(counted.size());
        counted.push_back(p);
        return compile(p->operands_[1].get(), out.kids[0]);
      }
    }
    if (!compile(a->value(), out.kids[0])) return false;
    FNode& v = out.kids[0];
    if (v.op == Op::SetItem && v.kids[0].op == Op::Var && v.kids[0].reg == out.reg)
      v.in_place = true;  // d = setitem(d, value, key): `d[key] = value`
    return true;
  }
  if (auto* b = dynamic_cast<const BlockNode*>(n)) {
    out.op = Op::Block;
    out.kids.resize(b->body_.size());
    for (size_t i = 0; i < b->body_.size(); ++i) {
      if (!compile(b->body_[i].get(), out.kids[i])) return false;
    }
    return true;
  }
  if (auto* f = dynamic_cast<const IfNode*>(n)) {
    out.op = Op::If;
    out.kids.resize(f->else_ ? 3 : 2);
    return compile(f->cond_.get(), out.kids[0]) && compile_branch(f->then_.get(), out.kids[1]) &&
           (!f->else_ || compile_branch(f->else_.get(), out.kids[2]));
  }
  if (auto* w = dynamic_cast<const WhileNode*>(n)) {
    if (!scopes.empty() && scopes.back().ret_done >= 0 && has_return_node(w)) {
      // A loop of a function called inline that a `return` leaves: its
      // value (None in Python), then "if returned: break" out of the loop
      // around it (the function's own, or the one turn of its body).
      out.op = Op::Block;
      out.kids.resize(2);
      FNode& leave = out.kids[1];
      leave.op = Op::If;
      leave.kids.resize(2);
      leave.kids[0].op = Op::Var;
      leave.kids[0].reg = scopes.back().ret_done;
      leave.kids[1].op = Op::Break;
      FNode& loop = out.kids[0];
      loop.op = Op::While;
      loop.value_unused = true;
      loop.kids.resize(2);
      return compile(w->cond_.get(), loop.kids[0]) && compile(w->body_.get(), loop.kids[1]);
    }
    out.op = Op::While;
    // Inside a function called inline, an operand of the expression that
    // called it may be held only on the stack: no sweep there.
    out.sweeps = scopes.empty();
    out.value_unused = w->value_unused_;
    out.kids.resize(2);
    return compile(w->cond_.get(), out.kids[0]) && compile(w->body_.get(), out.kids[1]);
  }
  if (auto* c = dynamic_cast<const ControlNode*>(n)) {
    if (c->kind_ == ControlNode::Kind::ret) {
      // In the loop itself: the jit function's return (general). In a
      // function called inline: its value into the call's register, then
      // out of the loops that hold it (see WhileNode above).
      if (scopes.empty() || scopes.back().ret_done < 0) return false;
      const Scope& s = scopes.back();
      out.op = Op::Block;
      out.kids.resize(3);
      out.kids[0].op = Op::Assign;
      out.kids[0].reg = s.ret_value;
      out.kids[0].returned = true;
      out.kids[0].kids.resize(1);
      if (c->value_) {
        if (!compile(c->value_.get(), out.kids[0].kids[0])) return false;
      } else {
        out.kids[0].kids[0].op = Op::Const;
        out.kids[0].kids[0].constant.k = Reg::Nil;
      }
      out.kids[1].op = Op::Assign;
      out.kids[1].reg = s.ret_done;
      out.kids[1].kids.resize(1);
      out.kids[1].kids[0].op = Op::Const;
      out.kids[1].kids[0].constant = Reg::boolean(Reg::PyBool, true);
      out.kids[2].op = Op::Break;
      return true;
    }
    out.op = c->kind_ == ControlNode::Kind::brk ? Op::Break : Op::Continue;
    return true;
  }
  if (auto* l = dynamic_cast<const LogicalNode*>(n)) {
    out.op = Op::Logic;
    out.is_and = l->is_and_;
    out.kids.resize(2);
    return compile(l->lhs_.get(), out.kids[0]) && compile(l->rhs_.get(), out.kids[1]);
  }
  if (auto* p = dynamic_cast<const PrimitiveCallNode*>(n)) {
    // A fused expression runs here as the tree of its operations.
    if (p->unfused_) return compile(p->unfused_.get(), out);
    const PrimitiveSpec& spec = *p->spec_;
    out.spec = &spec;
    out.call = p;
    // Operands bound in order to the leading parameters only (no named or
    // variadic reordering), so kids[i] is parameter i.
    for (size_t i = 0; i < p->slots_.size(); ++i) {
      if (p->slots_[i] != static_cast<int>(i) && !spec.variadic) {
        if (debug())
          std::fprintf(stderr, "[fast loops] %s: '%s' has named arguments\n",
                       n->loc().str().c_str(), spec.name.c_str());
        return false;
      }
    }
    out.counter = static_cast<int>(counted.size());
    counted.push_back(p);
    out.slot = out.counter;
    if (spec.name == "random_uniform" && p->operands_.size() == 1) {
      // np.random.random(): random_uniform(shape=tuple()), one draw of the
      // global stream, made here (the stream is rewound on a roll-back).
      auto* l = dynamic_cast<const ListNode*>(p->operands_[0].get());
      if (l && l->items_.empty() && !l->as_array_) {
        out.op = Op::Uniform;
        return true;
      }
    }
    if ((spec.name == "zeros" || spec.name == "ones" || spec.name == "empty") &&
        !p->operands_.empty() && p->operands_.size() <= 2) {
      // np.zeros((n, m), dtype=np.int64): the shape's tuple built from its
      // items, the dtype's name (a string: no register) kept as a constant.
      auto* l = dynamic_cast<const ListNode*>(p->operands_[0].get());
      auto* d = p->operands_.size() == 2 ? dynamic_cast<const ConstantNode*>(p->operands_[1].get())
                                         : nullptr;
      const bool shape = l && !l->as_array_ && l->items_.size() <= static_cast<size_t>(kMaxDims);
      const bool dtype = d && d->value_.is_string();
      if ((shape || dtype) && (p->operands_.size() == 1 || dtype)) {
        const std::vector<NodePtr> one{p->operands_[0]};
        const std::vector<NodePtr>& items = shape ? l->items_ : one;
        out.kids.resize(items.size());
        for (size_t i = 0; i < items.size(); ++i)
          if (!compile(items[i].get(), out.kids[i])) return false;
        if (shape) {
          out.shape_items = static_cast<int>(items.size());
          out.shape_tuple = l->tuple_;
        }
        if (dtype) out.const_arg = &d->value_;
        out.op = Op::Call;
        out.counter = -1;  // compute() counts it
        return true;
      }
    }
    // astype(x, dtype), and astype(x, dtype, "unsafe", true) of np.int64(x) and the like
    const size_t nargs = p->operands_.size();
    const ConstantNode* casting =
        nargs == 4 ? dynamic_cast<const ConstantNode*>(p->operands_[2].get()) : nullptr;
    const ConstantNode* numpy_scalar =
        nargs == 4 ? dynamic_cast<const ConstantNode*>(p->operands_[3].get()) : nullptr;
    const bool numpy_form = casting && casting->value_.is_string() &&
                            casting->value_.as_string() == "unsafe" && numpy_scalar &&
                            numpy_scalar->value_.is_bool();
    if (spec.name == "astype" && (nargs == 2 || numpy_form)) {
      auto* d = dynamic_cast<const ConstantNode*>(p->operands_[1].get());
      if (d && d->value_.is_string()) {
        const std::string& s = d->value_.as_string();
        // np.uint8(x) and the other narrow ints: the scalar form only (an
        // array's astype in a loop stays the primitive's call).
        const bool narrow = s == "int8" || s == "uint8" || s == "int16" || s == "uint16" ||
                            s == "uint32";
        if (s == "int64" || s == "float64" || s == "bool" || s == "float32" || s == "int32" ||
            (narrow && numpy_form && numpy_scalar->value_.as_bool())) {
          out.op = Op::AsType;
          out.cast_to = dtype_from_name(s);
          out.numpy_scalar = numpy_form && numpy_scalar->value_.as_bool();
          out.kids.resize(1);
          return compile(p->operands_[0].get(), out.kids[0]);
        }
      }
    }
    out.kids.resize(p->operands_.size());
    for (size_t i = 0; i < p->operands_.size(); ++i) {
      if (!compile(p->operands_[i].get(), out.kids[i])) return false;
    }
    if (spec.scalar_binary && p->operands_.size() == 2) {
      out.op = Op::Binary;
      out.fast = fast_of(spec.name);
      return true;
    }
    if (spec.name == "getitem") {
      out.op = Op::GetItem;
      return true;
    }
    if (spec.name == "setitem") {
      out.op = Op::SetItem;
      return p->operands_.size() >= 3;
    }
    if (spec.name == "append") {
      // ys = append(xs, x) (another variable: a copy of the list each turn);
      // xs = append(xs, x) is Op::Append (above).
      if (debug())
        std::fprintf(stderr, "[fast loops] %s: an append to another variable stays general\n",
                     n->loc().str().c_str());
      return false;
    }
    if (spec.name == "list" && p->operands_.empty()) {
      out.op = Op::NewList;  // list()
      return true;
    }
    if (!pure_primitive(spec) && !writes_only(spec)) {
      if (debug())
        std::fprintf(stderr, "[fast loops] %s: '%s' has effects\n", n->loc().str().c_str(),
                     spec.name.c_str());
      return false;
    }
    out.op = Op::Call;
    out.counter = -1;  // compute() counts it (its entry in `counted` stays at 0)
    const size_t nops = p->operands_.size();
    if (spec.name == "contains" && nops == 2) out.obj_op = ObjOp::contains;
    if (spec.name == "get" && (nops == 2 || nops == 3)) out.obj_op = ObjOp::get;
    if (spec.name == "not_" && nops == 1) out.obj_op = ObjOp::not_;
    if (spec.name == "logical_not" && nops == 1) out.obj_op = ObjOp::logical_not;
    if (spec.name == "unpack" && nops == 2) out.obj_op = ObjOp::unpack;
    if (spec.name == "str_find" && nops == 2) out.obj_op = ObjOp::str_find;
    return true;
  }
  if (auto* c = dynamic_cast<const CallNode*>(n)) return compile_call(*c, out);
  if (auto* l = dynamic_cast<const ListNode*>(n); l && !l->tuple_ && !l->as_array_) {
    // [a, b]: a new list of the items' values.
    out.op = Op::NewList;
    out.kids.resize(l->items_.size());
    for (size_t i = 0; i < l->items_.size(); ++i)
      if (!compile(l->items_[i].get(), out.kids[i])) return false;
    return true;
  }
  if (auto* d = dynamic_cast<const DictNode*>(n)) {
    // {k: v, ...}: a new dict (a fresh one at every evaluation).
    out.op = Op::NewDict;
    out.kids.resize(2 * d->keys_.size());
    for (size_t i = 0; i < d->keys_.size(); ++i) {
      if (!compile(d->keys_[i].get(), out.kids[2 * i]) ||
          !compile(d->values_[i].get(), out.kids[2 * i + 1]))
        return false;
    }
    return true;
  }
  if (auto* l = dynamic_cast<const ListNode*>(n); l && l->tuple_ && !l->as_array_) {
    // (a, b): its items in registers of their own (lower_tuples).
    out.op = Op::MakeTuple;
    out.kids.resize(l->items_.size());
    for (size_t i = 0; i < l->items_.size(); ++i)
      if (!compile(l->items_[i].get(), out.kids[i])) return false;
    return true;
  }
  // lambdas, lists, dicts, for_each, parallel blocks
  if (debug())
    std::fprintf(stderr, "[fast loops] %s: '%s' is outside the subset\n", n->loc().str().c_str(),
                 n->label().c_str());
  return false;
}

bool FastLoop::Impl::compile_branch(const Node* n, FNode& out) {
  // What a failed compile left (registers, call sites) is unused; the
  // primitive nodes it counted are dropped with it.
  const size_t counted_before = counted.size();
  if (compile(n, out)) return true;
  counted.resize(counted_before);
  out = FNode{};
  out.op = Op::Bail;
  if (debug())
    std::fprintf(stderr, "[fast loops] %s: this branch runs in the general evaluation when taken\n",
                 n->loc().str().c_str());
  return true;
}

namespace {

// True when every read of a local of the function (a variable of its own
// frame, depth 0 here) in `n` comes after an assignment on every path to
// it, given the locals `set` assigned before `n` (updated). An inlined call
// keeps its locals' registers from call to call, so a function that may
// read one unassigned (the general path's error) is not inlined.
bool assigned_before_read(const Node* n, std::vector<bool>& set) {
  if (auto* v = dynamic_cast<const VariableNode*>(n))
    return v->depth() != 0 || (v->slot() < set.size() && set[v->slot()]);
  if (auto* a = dynamic_cast<const AssignNode*>(n)) {
    if (!assigned_before_read(a->value(), set)) return false;
    if (a->depth() == 0 && a->slot() < set.size()) set[a->slot()] = true;
    return true;
  }
  if (auto* c = dynamic_cast<const ControlNode*>(n); c && c->label() == "return") {
    // Nothing after a return runs on its path: for what follows (an `if`
    // whose other branch goes on), as if every local were assigned.
    for (const Node* k : c->children())
      if (k && !assigned_before_read(k, set)) return false;
    set.assign(set.size(), true);
    return true;
  }
  // if: the condition, then either branch (both: assigned after it);
  // while and and/or: the condition or left side, then what may not run.
  const bool branches = dynamic_cast<const IfNode*>(n) != nullptr;
  if (branches || dynamic_cast<const WhileNode*>(n) || dynamic_cast<const LogicalNode*>(n)) {
    const std::vector<const Node*> k = n->children();
    if (!assigned_before_read(k[0], set)) return false;
    std::vector<bool> t = set, e = set;
    if (k.size() > 1 && k[1] && !assigned_before_read(k[1], t)) return false;
    if (k.size() > 2 && k[2] && !assigned_before_read(k[2], e)) return false;
    if (branches && k.size() > 2 && k[2])
      for (size_t i = 0; i < set.size(); ++i) set[i] = t[i] && e[i];
    return true;
  }
  for (const Node* k : n->children())  // blocks and operands, in order
    if (k && !assigned_before_read(k, set)) return false;
  return true;
}

// True when `n` reads or assigns a variable of a frame around its function.
bool reads_around(const Node* n) {
  if (!n) return false;
  if (auto* v = dynamic_cast<const VariableNode*>(n); v && v->depth() != 0) return true;
  if (auto* a = dynamic_cast<const AssignNode*>(n); a && a->depth() != 0) return true;
  for (const Node* k : n->children())
    if (reads_around(k)) return true;
  return false;
}

}  // namespace

int FastLoop::Impl::var_reg(int depth, size_t slot) {
  if (scopes.empty()) return reg(depth, slot);
  const Scope& s = scopes.back();
  if (depth == 0) return reg(-1 - s.site, slot);
  return reg(s.env_depth + depth - 1, slot);
}

bool FastLoop::Impl::compile_call(const CallNode& c, FNode& out) {
  auto refuse = [&](const char* why) {
    if (debug())
      std::fprintf(stderr, "[fast loops] %s: the call is outside the subset: %s\n",
                   c.loc().str().c_str(), why);
    return false;
  };
  // The function called: a variable of a frame around the loop's (or the
  // inlined function's) that holds a jit function now.
  auto* callee = dynamic_cast<const VariableNode*>(c.callee_.get());
  if (!callee || !c.positional_) return refuse("not a function variable called with positional arguments");
  if (!frame) return refuse("no frame to find the function in");
  int depth = callee->depth();
  if (!scopes.empty()) {
    if (depth == 0) return refuse("a function defined inside the function called");
    depth = scopes.back().env_depth + depth - 1;
  }
  const Frame* f = frame;
  for (int k = 0; k < depth && f; ++k) f = f->parent();
  Value fn;
  if (!f || !f->read_now(callee->slot(), fn) || !fn.is_function()) return refuse("not a function");
  auto* closure = dynamic_cast<const Closure*>(fn.as_function().get());
  if (!closure) return refuse("not a jit function");
  const FunctionCode& code = closure->code();
  if (code.makes_closures) return refuse("the function makes functions");
  if (std::find(inlining.begin(), inlining.end(), &code) != inlining.end()) {
    recursive.push_back(&code);
    return refuse("a recursive call (not inlined: a native function of its own)");
  }
  if (code.params.size() != c.args_.size()) return refuse("not one argument per parameter");
  std::vector<bool> assigned(code.frame_size, false);
  for (size_t i = 0; i < code.params.size() && i < assigned.size(); ++i) assigned[i] = true;
  if (!assigned_before_read(code.body.get(), assigned))
    return refuse("a local may be read before it is assigned");
  if (scopes.size() >= 8) return refuse("calls nested more than 8 deep (recursion?)");
  int env_depth = 0;
  {
    const Frame* e = frame;
    while (e && e != closure->env_raw()) {
      e = e->parent();
      ++env_depth;
    }
    // A function reading nothing around it (a key lambda passed on to a
    // library function: `lambda kv: (-kv[1], kv[0])`) needs no frame.
    if (!e && reads_around(code.body.get())) return refuse("the function closes over a frame the loop cannot see");
    if (!e) env_depth = 0;
  }
  const bool any_env = !reads_around(code.body.get());
  for (const Inlined& in : inlined) {
    if (in.depth == depth && in.slot == callee->slot() && in.code.get() != &code)
      return refuse("the variable holds another function at another call");
  }
  // Each argument (the caller's code) into its parameter's register (the
  // call site's own), in order, then the body, whose value is the call's.
  const int site = sites++;
  out.op = Op::Block;
  out.kids.resize(c.args_.size() + 1);
  for (size_t i = 0; i < c.args_.size(); ++i) {
    FNode& bind = out.kids[i];
    bind.op = Op::Assign;
    bind.reg = reg(-1 - site, i);
    bind.kids.resize(1);
    if (!compile(c.args_[i].get(), bind.kids[0])) return false;
  }
  bool ok;
  inlining.push_back(&code);
  if (!code.has_return) {
    scopes.push_back({site, env_depth});
    ok = compile(code.body.get(), out.kids.back());
  } else {
    // A return before the end: the body as one turn of a loop, which a
    // return leaves with its value in `value` and `done` set (registers
    // after the locals' at this site); falling off the end gives the value
    // of the body's last statement (`tail`), or None when that statement
    // holds a return (a loop: its value is not the function's, and the
    // register interpreter's assignment of a value left by a break would
    // still assign).
    //   block(done = false, while(true, block(statements..., tail = last, break)),
    //         if(done, value, tail))
    const int value = reg(-1 - site, code.frame_size), done = reg(-1 - site, code.frame_size + 1),
              tail = reg(-1 - site, code.frame_size + 2);
    scopes.push_back({site, env_depth, value, done});
    auto var = [](int r) {
      FNode v;
      v.op = Op::Var;
      v.reg = r;
      return v;
    };
    auto constant = [](Reg c) {
      FNode v;
      v.op = Op::Const;
      v.constant = c;
      return v;
    };
    Reg nil;
    nil.k = Reg::Nil;
    std::vector<const Node*> stmts;
    if (auto* blk = dynamic_cast<const BlockNode*>(code.body.get())) {
      for (const NodePtr& k : blk->body_) stmts.push_back(k.get());
    } else {
      stmts.push_back(code.body.get());
    }
    FNode& fb = out.kids.back();
    fb.op = Op::Block;
    fb.kids.resize(3);
    fb.kids[0].op = Op::Assign;
    fb.kids[0].reg = done;
    fb.kids[0].kids = {constant(Reg::boolean(Reg::PyBool, false))};
    FNode& once = fb.kids[1];
    once.op = Op::While;
    once.value_unused = true;
    once.kids.resize(2);
    once.kids[0] = constant(Reg::boolean(Reg::PyBool, true));
    FNode& turn = once.kids[1];
    turn.op = Op::Block;
    const bool last_returns = !stmts.empty() && has_return_node(stmts.back());
    turn.kids.resize(stmts.size() + (last_returns ? 2 : 1));
    ok = true;
    for (size_t i = 0; i < stmts.size() && ok; ++i) {
      FNode* into = &turn.kids[i];
      if (i + 1 == stmts.size() && !last_returns) {
        into->op = Op::Assign;
        into->reg = tail;
        into->returned = true;
        into->kids.resize(1);
        into = &into->kids[0];
      }
      ok = compile(stmts[i], *into);
    }
    if (last_returns) {
      FNode& none = turn.kids[stmts.size()];
      none.op = Op::Assign;
      none.reg = tail;
      none.returned = true;
      none.kids = {constant(nil)};
    }
    turn.kids.back().op = Op::Break;
    FNode& pick = fb.kids[2];
    pick.op = Op::If;
    pick.returned = true;
    pick.kids = {var(done), var(value), var(tail)};
  }
  scopes.pop_back();
  inlining.pop_back();
  if (auto it = std::find(recursive.begin(), recursive.end(), &code); it != recursive.end()) {
    recursive.erase(it);
    // Not inlined: called as a native function of its own, on the
    // arguments compiled above (in the caller's scope).
    if (!inlining.empty())
      return refuse("the function is recursive (called from a function inlined)");
    FNode call;
    call.op = Op::NativeCall;
    call.reg = var_reg(callee->depth(), callee->slot());
    call.kids.resize(c.args_.size());
    for (size_t i = 0; i < c.args_.size(); ++i) call.kids[i] = std::move(out.kids[i].kids[0]);
    out = std::move(call);
    return true;
  }
  if (!ok) return false;
  // A function reading nothing around it is the same code over any frame.
  inlined.push_back({depth, callee->slot(), closure->code_ptr(), any_env ? -1 : env_depth});
  return true;
}

}  // namespace tessera
