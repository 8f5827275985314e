// The scalar loop fast path (fastloop.hpp). The loop's nodes are compiled
// once into a small tree of operations on registers, one per variable the
// loop touches. A register holds what the general evaluation would hold
// there, in one of the kinds it knows how to compute with: Python-like
// scalars, NumPy's strong scalars (an element x[i], a 0-d own array of
// float64, int64 or bool) and arrays (which only pass through, or are
// indexed). Every operation does exactly what the general evaluation does
// (the same scalar functions, the same element casts), and anything else
// (an error to report, a value of another kind) rolls the turn back: the
// elements it wrote get their old bytes, the registers their values at the
// start of the turn, and the general evaluation runs the loop from there,
// so errors keep their messages and positions and nothing is done twice.
#include "tessera/lang/fastloop.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/random_stream.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"
#include "tessera/runtime/interrupt.hpp"

namespace tessera {

namespace {

// TESSERA_FAST_LOOPS: "0" turns the fast path off, "debug" says on stderr
// which loops stay general and why; read once.
const std::string& fast_loops_setting() {
  static const std::string setting = [] {
    const char* v = std::getenv("TESSERA_FAST_LOOPS");
    return std::string(v ? v : "");
  }();
  return setting;
}

bool debug() {
  static const bool on = fast_loops_setting() == "debug";
  return on;
}

}  // namespace

bool fast_loops_enabled() {
  static const bool on = fast_loops_setting() != "0";
  return on;
}

bool fast_loops_debug() { return debug() || native_debug(); }


namespace {

// A primitive call of at most this many operands may be given its operands'
// arrays (FNode::reuse).
constexpr size_t kMaxReuseKids = 4;

bool pure_primitive(const PrimitiveSpec& spec) {
  return !spec.writes && !spec.eval_async && !has_effects(spec) && spec.family != "distributed" &&
         spec.family != "autodiff";
}

// A primitive whose only effect is writing into its first argument (x += y,
// copyto, setitem): the fast path snapshots what it writes into first.
bool writes_only(const PrimitiveSpec& spec) {
  return spec.writes && !spec.eval_async && spec.family != "random" && spec.family != "io" &&
         spec.family != "distributed";
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

// The inline arithmetic and comparisons of two ints (Python's or NumPy's,
// `strong` when either is NumPy's) and of two floats: what the primitives'
// scalar functions give; what they would report (a Python int's overflow, a
// division by zero) is left to the general path. NumPy's int64 wraps around
// (r holds the wrapped result), as on the general path and in native code.
template <Fast F>
inline Reg int_op(bool strong, int64_t a, int64_t b) {
  const Reg::Kind ik = strong ? Reg::NpInt : Reg::PyInt;
  const Reg::Kind bk = strong ? Reg::NpBool : Reg::PyBool;
  int64_t r = 0;
  if constexpr (F == Fast::add) {
    if (__builtin_add_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::sub) {
    if (__builtin_sub_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::mul) {
    if (__builtin_mul_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::div) {
    if (b == 0) throw BAIL;
    return Reg::real(strong ? Reg::NpFloat : Reg::PyFloat,
                     static_cast<double>(a) / static_cast<double>(b));
  } else if constexpr (F == Fast::lt) {
    return Reg::boolean(bk, a < b);
  } else if constexpr (F == Fast::le) {
    return Reg::boolean(bk, a <= b);
  } else if constexpr (F == Fast::gt) {
    return Reg::boolean(bk, a > b);
  } else if constexpr (F == Fast::ge) {
    return Reg::boolean(bk, a >= b);
  } else if constexpr (F == Fast::eq) {
    return Reg::boolean(bk, a == b);
  } else if constexpr (F == Fast::ne) {
    return Reg::boolean(bk, a != b);
  } else if constexpr (F == Fast::floordiv) {
    // By a positive power of two (k // 2): a shift, the floor for negative
    // k too, without the division (tens of cycles).
    if (b > 0 && (b & (b - 1)) == 0) {
      return Reg::make(ik, a >> __builtin_ctzll(static_cast<uint64_t>(b)));
    }
    // Division by zero and INT64_MIN // -1 are the general path's to
    // report (or, for NumPy's scalars, to wrap).
    if (b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min())) throw BAIL;
    return Reg::make(ik, kernels::int_floor_divide(a, b, "floor_divide"));
  } else {
    static_assert(F == Fast::mod);
    // By a positive power of two: the low bits (in [0, b) for negative k
    // too, as Python's and NumPy's modulo).
    if (b > 0 && (b & (b - 1)) == 0) return Reg::make(ik, a & (b - 1));
    if (b == 0) throw BAIL;
    return Reg::make(ik, kernels::int_mod(a, b, "mod"));
  }
}

template <Fast F>
inline Reg float_op(bool strong, double x, double y) {
  const Reg::Kind fk = strong ? Reg::NpFloat : Reg::PyFloat;
  const Reg::Kind bk = strong ? Reg::NpBool : Reg::PyBool;
  // Python's floats: / // % by zero is the general path's ZeroDivisionError.
  if constexpr (F == Fast::div || F == Fast::floordiv || F == Fast::mod) {
    if (!strong && y == 0.0) throw BAIL;
  }
  if constexpr (F == Fast::add) {
    return Reg::real(fk, x + y);
  } else if constexpr (F == Fast::sub) {
    return Reg::real(fk, x - y);
  } else if constexpr (F == Fast::mul) {
    return Reg::real(fk, x * y);
  } else if constexpr (F == Fast::div) {
    return Reg::real(fk, x / y);
  } else if constexpr (F == Fast::lt) {
    return Reg::boolean(bk, x < y);
  } else if constexpr (F == Fast::le) {
    return Reg::boolean(bk, x <= y);
  } else if constexpr (F == Fast::gt) {
    return Reg::boolean(bk, x > y);
  } else if constexpr (F == Fast::ge) {
    return Reg::boolean(bk, x >= y);
  } else if constexpr (F == Fast::eq) {
    return Reg::boolean(bk, x == y);
  } else if constexpr (F == Fast::ne) {
    return Reg::boolean(bk, x != y);
  } else if constexpr (F == Fast::floordiv) {
    return Reg::real(fk, kernels::float_floor_divide(x, y));
  } else {
    static_assert(F == Fast::mod);
    return Reg::real(fk, kernels::float_mod(x, y));
  }
}

// fn(std::integral_constant<Fast, f>) for the inline operation f.
template <class Fn>
inline auto with_fast(Fast f, Fn&& fn) {
  switch (f) {
    case Fast::add:
      return fn(std::integral_constant<Fast, Fast::add>{});
    case Fast::sub:
      return fn(std::integral_constant<Fast, Fast::sub>{});
    case Fast::mul:
      return fn(std::integral_constant<Fast, Fast::mul>{});
    case Fast::div:
      return fn(std::integral_constant<Fast, Fast::div>{});
    case Fast::lt:
      return fn(std::integral_constant<Fast, Fast::lt>{});
    case Fast::le:
      return fn(std::integral_constant<Fast, Fast::le>{});
    case Fast::gt:
      return fn(std::integral_constant<Fast, Fast::gt>{});
    case Fast::ge:
      return fn(std::integral_constant<Fast, Fast::ge>{});
    case Fast::eq:
      return fn(std::integral_constant<Fast, Fast::eq>{});
    case Fast::ne:
      return fn(std::integral_constant<Fast, Fast::ne>{});
    case Fast::floordiv:
      return fn(std::integral_constant<Fast, Fast::floordiv>{});
    case Fast::mod:
      return fn(std::integral_constant<Fast, Fast::mod>{});
    default:
      return fn(std::integral_constant<Fast, Fast::none>{});
  }
}

}  // namespace

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
    out.op = Op::While;
    // Inside a function called inline, an operand of the expression that
    // called it may be held only on the stack: no sweep there.
    out.sweeps = scopes.empty();
    out.value_unused = w->value_unused_;
    out.kids.resize(2);
    return compile(w->cond_.get(), out.kids[0]) && compile(w->body_.get(), out.kids[1]);
  }
  if (auto* c = dynamic_cast<const ControlNode*>(n)) {
    if (c->kind_ == ControlNode::Kind::ret) return false;
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
    if (spec.name == "astype" && p->operands_.size() == 2) {
      auto* d = dynamic_cast<const ConstantNode*>(p->operands_[1].get());
      if (d && d->value_.is_string()) {
        const std::string& s = d->value_.as_string();
        if (s == "int64" || s == "float64" || s == "bool") {
          out.op = Op::AsType;
          out.cast_to = dtype_from_name(s);
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
  if (code.has_return) return refuse("a return before the end of the function");
  if (code.makes_closures) return refuse("the function makes functions");
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
    if (!e) return refuse("the function closes over a frame the loop cannot see");
  }
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
  scopes.push_back({site, env_depth});
  const bool ok = compile(code.body.get(), out.kids.back());
  scopes.pop_back();
  if (!ok) return false;
  inlined.push_back({depth, callee->slot(), closure->code_ptr(), env_depth});
  return true;
}

namespace {

// An array value into an entry of st.arrays: `a` is copied or moved in
// (Ref: const Array& or Array&&).
template <class Ref>
Reg array_reg(Ref&& a, FastLoop::Impl::State& st) {
  if (st.free_arrays.empty() && st.arrays.size() >= kMaxArrays) throw BAIL;
  ArrEntry e{std::forward<Ref>(a)};  // not a default Array first: that allocates a 0-d buffer
  const Array& x = e.array;
  if (x.use_count() <= 3 && !x.foreign()) {  // a buffer of its own, made in the loop
    e.own_bytes = static_cast<int64_t>(x.storage_bytes());
    st.new_bytes += e.own_bytes;
    if (st.new_bytes > kMaxNewBytes) throw BAIL;
  }
  e.base = static_cast<char*>(x.origin_raw());
  e.dt = x.dtype();
  e.nd = x.ndim();
  e.writable = x.writable();
  e.indexable = e.nd <= kMaxDims;
  if (e.indexable) {
    for (int k = 0; k < e.nd; ++k) e.shape[k] = x.dim(k);
    if (x.is_contiguous()) {  // C order's strides, without the vector strides() makes
      int64_t step = 1;
      for (int k = e.nd - 1; k >= 0; --k) {
        e.strides[k] = step;
        step *= e.shape[k];
      }
    } else {
      const std::vector<int64_t> s = x.strides();
      for (int k = 0; k < e.nd; ++k) e.strides[k] = s[k];
    }
  }
  Reg r;
  r.k = Reg::Arr;
  r.i = 0;
  if (!st.free_arrays.empty()) {
    r.a = st.free_arrays.back();
    st.free_arrays.pop_back();
    st.arrays[static_cast<size_t>(r.a)] = std::move(e);
  } else {
    st.arrays.push_back(std::move(e));
    r.a = static_cast<int32_t>(st.arrays.size() - 1);
  }
  ++st.made;
  return r;
}

// A 0-d array that is a strong scalar (an own value of these dtypes: a 0-d
// view or a NumPy array passed in stays an array, writes reach it), into
// `out`; false for any other array.
bool scalar_reg(const Array& a, Reg& out) {
  if (a.ndim() != 0 || a.foreign() || a.storage_bytes() != dtype_size(a.dtype())) return false;
  switch (a.dtype()) {
    case DType::float64:
      out = Reg::real(Reg::NpFloat, a.origin<double>()[0]);
      return true;
    case DType::int64:
      out = Reg::make(Reg::NpInt, a.origin<int64_t>()[0]);
      return true;
    case DType::float32:
      out = Reg::real(Reg::NpF32, a.origin<float>()[0]);
      return true;
    case DType::int32:
      out = Reg::make(Reg::NpI32, a.origin<int32_t>()[0]);
      return true;
    case DType::bool_:
      out = Reg::boolean(Reg::NpBool, a.origin<bool>()[0]);
      return true;
    default:
      return false;
  }
}

}  // namespace

bool FastLoop::Impl::scalar_of(const Value& v, Reg& out) {
  if (v.is_bool()) {
    out = Reg::boolean(Reg::PyBool, v.as_bool());
  } else if (v.is_int()) {
    out = Reg::make(Reg::PyInt, v.as_int());
  } else if (v.is_float()) {
    out = Reg::real(Reg::PyFloat, v.as_float());
  } else {
    return v.is_array() && scalar_reg(v.as_array(), out);
  }
  return true;
}

Reg FastLoop::Impl::to_reg(const Value& v, State& st) {
  if (v.is_bool()) return Reg::boolean(Reg::PyBool, v.as_bool());
  if (v.is_int()) return Reg::make(Reg::PyInt, v.as_int());
  if (v.is_float()) return Reg::real(Reg::PyFloat, v.as_float());
  if (v.is_nil()) {
    Reg r;
    r.k = Reg::Nil;
    return r;
  }
  if (!v.is_array()) {
    Reg r;
    r.k = Reg::Obj;
    r.i = 0;
    r.a = place_object(v, st);
    return r;
  }
  Reg r;
  if (scalar_reg(v.as_array(), r)) return r;
  return array_reg(v.as_array(), st);
}

int32_t FastLoop::Impl::place_object(Value v, State& st) {
  ++st.objects_made;  // a sweep between turns releases the objects let go of
  if (!st.free_objects.empty()) {
    const int32_t i = st.free_objects.back();
    st.free_objects.pop_back();
    st.objects[static_cast<size_t>(i)] = std::move(v);
    st.object_epoch[static_cast<size_t>(i)] = st.epoch;
    st.object_logged[static_cast<size_t>(i)] = 0;
    st.object_ascii[static_cast<size_t>(i)] = -1;
    return i;
  }
  if (st.objects.size() >= kMaxArrays) throw BAIL;
  st.objects.push_back(std::move(v));
  st.object_epoch.resize(st.objects.size(), 0);
  st.object_logged.resize(st.objects.size(), 0);
  st.object_ascii.resize(st.objects.size(), -1);
  st.object_epoch.back() = st.epoch;
  return static_cast<int32_t>(st.objects.size() - 1);
}

Reg FastLoop::Impl::to_reg(Value&& v, State& st) {
  if (!v.is_array()) return to_reg(static_cast<const Value&>(v), st);
  Reg r;
  if (scalar_reg(v.as_array(), r)) return r;
  return array_reg(std::move(v.as_array()), st);
}

bool FastLoop::Impl::dying(const Reg& r, int owner, const State& st) {
  if (r.k != Reg::Arr) return false;
  const ArrEntry& e = st.arrays[static_cast<size_t>(r.a)];
  // A logged element write must stay restorable; a shared buffer (a view,
  // an argument the caller holds, a snapshot) is seen by others.
  if (e.released || e.written == st.epoch || !e.array.unique()) return false;
  auto refers = [&](const Reg& x) { return x.k == Reg::Arr && x.a == r.a; };
  for (size_t k = 0; k < st.regs.size(); ++k) {
    if (static_cast<int>(k) != owner && refers(st.regs[k])) return false;
  }
  for (const Reg& x : st.saved) {
    if (refers(x)) return false;
  }
  for (const Reg* x : st.roots) {
    if (refers(*x)) return false;
  }
  return true;
}

void FastLoop::Impl::release(State& st, int32_t index) {
  ArrEntry& e = st.arrays[static_cast<size_t>(index)];
  st.new_bytes -= e.own_bytes;
  e.own_bytes = 0;
  e.released = true;
  e.base = nullptr;
  { Array gone = std::move(e.array); }  // moved from: no 0-d buffer allocated in its place
  st.free_arrays.push_back(index);
}

Value FastLoop::Impl::give(const FNode& n, size_t i, const Reg& r, State& st) {
  if (i < 8 && ((n.reuse >> i) & 1)) {
    const FNode& k = n.kids[i];
    if (dying(r, k.op == Op::Var ? k.reg : -1, st)) {
      Value v(std::move(st.arrays[static_cast<size_t>(r.a)].array));
      release(st, r.a);
      return v;
    }
  }
  return to_value(r, st);
}

Value FastLoop::Impl::to_value(const Reg& r, const State& st) {
  switch (r.k) {
    case Reg::PyBool:
      return Value(r.b);
    case Reg::PyInt:
      return Value(r.i);
    case Reg::PyFloat:
      return Value(r.f);
    case Reg::NpBool:
      return Value(Array::scalar_bool(r.b));
    case Reg::NpInt:
      return Value(Array::scalar_int(r.i));
    case Reg::NpFloat:
      return Value(Array::scalar(r.f));
    case Reg::NpF32:
      return Value(Array::scalar(r.f, DType::float32));
    case Reg::NpI32:
      return Value(Array::scalar(static_cast<double>(r.i), DType::int32));
    case Reg::Arr:
      return Value(st.arrays[r.a].array);
    case Reg::Obj:
      return st.objects[r.a];
    default:
      return Value();
  }
}

Reg FastLoop::Impl::binary(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  if (Reg r; a.k == Reg::Obj && object_compare(n, a, b, st, r)) return r;
  // Arrays (and NumPy's 0-d bools) go through the primitive itself.
  if (!a.scalar() || !b.scalar() || a.k == Reg::NpBool || b.k == Reg::NpBool) {
    return binary_general(n, a, b, st);
  }
  if (a.narrow() || b.narrow()) return binary_narrow(n, a, b, st);
  const bool strong = a.strong() || b.strong();
  const bool ints =
      (a.k == Reg::PyInt || a.k == Reg::NpInt) && (b.k == Reg::PyInt || b.k == Reg::NpInt);
  const bool floats = !ints && a.k != Reg::PyBool && b.k != Reg::PyBool;
  const Reg::Kind fk = strong ? Reg::NpFloat : Reg::PyFloat;
  const Reg::Kind ik = strong ? Reg::NpInt : Reg::PyInt;
  if (ints && n.fast != Fast::none) {
    return with_fast(n.fast, [&](auto f) -> Reg {
      if constexpr (decltype(f)::value == Fast::none) {
        return Reg();
      } else {
        return int_op<decltype(f)::value>(strong, a.i, b.i);
      }
    });
  }
  if (floats && n.fast != Fast::none) {
    const double x = (a.k == Reg::PyInt || a.k == Reg::NpInt) ? static_cast<double>(a.i) : a.f;
    const double y = (b.k == Reg::PyInt || b.k == Reg::NpInt) ? static_cast<double>(b.i) : b.f;
    return with_fast(n.fast, [&](auto f) -> Reg {
      if constexpr (decltype(f)::value == Fast::none) {
        return Reg();
      } else {
        return float_op<decltype(f)::value>(strong, x, y);
      }
    });
  }
  // Everything else through the primitive's own scalar function (what the
  // general evaluation calls); its errors go the general way.
  Value r;
  try {
    r = n.spec->scalar_binary(*n.spec, py(a), py(b));
  } catch (const ZeroDivisionError&) {
    // 0.0 ** -y with a NumPy float: NumPy's inf (Python's numbers raise;
    // NumPy's ints too, on the general path).
    if (!strong || !(a.float_payload() || b.float_payload()) || n.spec->name != "power")
      throw BAIL;
    const double x = a.float_payload() ? a.f : static_cast<double>(a.i);
    const double y = b.float_payload() ? b.f : static_cast<double>(b.i);
    return Reg::real(fk, std::pow(x, y));
  } catch (...) {
    throw BAIL;
  }
  if (r.is_float()) return Reg::real(fk, r.as_float());
  if (r.is_int()) return Reg::make(ik, r.as_int());
  if (r.is_bool()) return Reg::boolean(strong ? Reg::NpBool : Reg::PyBool, r.as_bool());
  throw BAIL;
}

Reg FastLoop::Impl::binary_narrow(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  // NumPy 2's promotion (NEP 50): a float32 with a float32 or a Python
  // number is a float32 (the Python number cast to float32 first); an int32
  // with an int32 or a Python int is an int32 (wrapped around; a Python
  // int out of int32's range is the general path's OverflowError); with a
  // NumPy scalar of another kind (float64, int64, int32 with float32) or an
  // int32 with a Python float, both are as wide as float64/int64 are.
  // The general evaluation warns of no overflow either.
  if (n.fast == Fast::none) return binary_general(n, a, b, st);
  auto widen = [](Reg r) {
    if (r.k == Reg::NpF32) r.k = Reg::NpFloat;
    if (r.k == Reg::NpI32) r.k = Reg::NpInt;
    return r;
  };
  auto f32_operand = [](const Reg& r, float& out) {
    if (r.k == Reg::NpF32) return out = static_cast<float>(r.f), true;
    if (r.k == Reg::PyFloat) {
      out = static_cast<float>(r.f);
      return std::isfinite(out) || !std::isfinite(r.f);  // an overflow: the general path's
    }
    if (r.k == Reg::PyInt && r.i >= -(int64_t{1} << 24) && r.i <= (int64_t{1} << 24))
      return out = static_cast<float>(r.i), true;
    return false;
  };
  auto i32_operand = [](const Reg& r, int64_t& out) {
    if (r.k == Reg::NpI32) return out = r.i, true;
    if (r.k == Reg::PyInt && r.i >= INT32_MIN && r.i <= INT32_MAX) return out = r.i, true;
    return false;
  };
  if (a.k == Reg::NpF32 || b.k == Reg::NpF32) {
    float x, y;
    if (f32_operand(a, x) && f32_operand(b, y)) {
      const double dx = x, dy = y;
      // A float32 operation is the double one rounded to float32 (exactly
      // so for + - * /: double has more than 2 * 24 + 2 bits).
      auto f32 = [](double r) { return Reg::real(Reg::NpF32, static_cast<float>(r)); };
      switch (n.fast) {
        case Fast::add: return f32(dx + dy);
        case Fast::sub: return f32(dx - dy);
        case Fast::mul: return f32(dx * dy);
        case Fast::div: return f32(dx / dy);
        case Fast::lt: return Reg::boolean(Reg::NpBool, x < y);
        case Fast::le: return Reg::boolean(Reg::NpBool, x <= y);
        case Fast::gt: return Reg::boolean(Reg::NpBool, x > y);
        case Fast::ge: return Reg::boolean(Reg::NpBool, x >= y);
        case Fast::eq: return Reg::boolean(Reg::NpBool, x == y);
        case Fast::ne: return Reg::boolean(Reg::NpBool, x != y);
        default: return binary_general(n, a, b, st);
      }
    }
  } else {
    int64_t x, y;
    if (i32_operand(a, x) && i32_operand(b, y)) {
      auto i32 = [](int64_t r) {
        return Reg::make(Reg::NpI32, static_cast<int32_t>(static_cast<uint32_t>(r)));
      };
      switch (n.fast) {
        case Fast::add: return i32(x + y);
        case Fast::sub: return i32(x - y);
        case Fast::mul: return i32(x * y);
        case Fast::div:
          if (y == 0) return binary_general(n, a, b, st);
          return Reg::real(Reg::NpFloat, static_cast<double>(x) / static_cast<double>(y));
        case Fast::lt: return Reg::boolean(Reg::NpBool, x < y);
        case Fast::le: return Reg::boolean(Reg::NpBool, x <= y);
        case Fast::gt: return Reg::boolean(Reg::NpBool, x > y);
        case Fast::ge: return Reg::boolean(Reg::NpBool, x >= y);
        case Fast::eq: return Reg::boolean(Reg::NpBool, x == y);
        case Fast::ne: return Reg::boolean(Reg::NpBool, x != y);
        case Fast::floordiv:
        case Fast::mod:
          if (y == 0 || (x == INT32_MIN && y == -1)) return binary_general(n, a, b, st);
          return i32(n.fast == Fast::floordiv ? kernels::int_floor_divide(x, y, "floor_divide")
                                              : kernels::int_mod(x, y, "mod"));
        default: return binary_general(n, a, b, st);
      }
    }
  }
  // The wide cases: as float64 / int64 NumPy scalars.
  const bool wide_ok = [&] {
    auto np_wide = [](Reg::Kind k) {
      return k == Reg::NpFloat || k == Reg::NpInt || k == Reg::NpF32 || k == Reg::NpI32;
    };
    if (np_wide(a.k) && np_wide(b.k)) return true;
    // an int32 with a Python float
    return (a.k == Reg::NpI32 && b.k == Reg::PyFloat) || (b.k == Reg::NpI32 && a.k == Reg::PyFloat);
  }();
  if (!wide_ok) return binary_general(n, a, b, st);
  return binary(n, widen(a), widen(b), st);
}

Reg FastLoop::Impl::binary_general(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  if (a.k == Reg::Undef || b.k == Reg::Undef || a.k == Reg::Nil || b.k == Reg::Nil) throw BAIL;
  std::vector<Value> vals;
  // Room for the parameters after the two (bind_operands fills in defaults).
  vals.reserve(std::max<size_t>(2, n.spec->params.size()));
  // Both operands one array (`x + x`): copies, neither given up.
  const bool same = a.k == Reg::Arr && b.k == Reg::Arr && a.a == b.a;
  vals.push_back(same ? to_value(a, st) : give(n, 0, a, st));
  vals.push_back(same ? to_value(b, st) : give(n, 1, b, st));
  Reg r = call_values(n, vals, st);
  --st.counts[n.counter];  // compute() counted it; eval adds one for every binary
  return r;
}

Reg FastLoop::Impl::getitem(const FNode& n, State& st) const {
  if (n.kids.size() == 2 && n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2)
    return nested_getitem(n, st);
  return getitem_of(n, eval(n.kids[0], st), st);
}

// c[i][j] with c a list (or tuple) in an object register: its item c[i] read
// in place, not placed as an object of its own at every read (a table's
// row: `d[i - 1][j] + 1` filled the table of objects in a few hundred turns).
Reg FastLoop::Impl::nested_getitem(const FNode& n, State& st) const {
  const FNode& in = n.kids[0];
  const Reg c = eval(in.kids[0], st);
  if (c.k != Reg::Obj) {
    const Reg x = getitem_of(in, c, st);
    ++st.counts[in.counter];
    return getitem_of(n, x, st);
  }
  const Reg i = eval(in.kids[1], st);
  const Value& cv = st.objects[static_cast<size_t>(c.a)];
  if (!cv.is_list() || !i.int_payload()) {
    const Reg x = getitem_general(in, c, &i, 1, st);
    ++st.counts[in.counter];
    return getitem_of(n, x, st);
  }
  const List& items = cv.as_list();
  const auto len = static_cast<int64_t>(items.size());
  const int64_t j = i.i < 0 ? i.i + len : i.i;
  if (j < 0 || j >= len) throw BAIL;  // the IndexError is the general path's
  const Value& row = items[static_cast<size_t>(j)];
  ++st.counts[in.counter];
  if (row.is_list()) {
    const Reg k = eval(n.kids[1], st);
    if (k.int_payload()) {
      const List& r = row.as_list();
      const auto rlen = static_cast<int64_t>(r.size());
      const int64_t kk = k.i < 0 ? k.i + rlen : k.i;
      if (kk < 0 || kk >= rlen) throw BAIL;
      return to_reg(r[static_cast<size_t>(kk)], st);
    }
    return getitem_general(n, to_reg(row, st), &k, 1, st);
  }
  return getitem_of(n, to_reg(row, st), st);
}

Reg FastLoop::Impl::getitem_of(const FNode& n, const Reg& x, State& st) const {
  const size_t nidx = n.kids.size() - 1;
  Reg idx[kMaxDims];
  size_t done = 0;  // index operands evaluated into idx
  if (x.k == Reg::Arr && nidx > 0 && nidx <= static_cast<size_t>(kMaxDims)) {
    // x[i, j] of ints: the element, read here.
    bool ints = true;
    for (; done < nidx && ints; ++done) {
      idx[done] = eval(n.kids[done + 1], st);
      ints = idx[done].int_payload();
    }
    const ArrEntry& e = st.arrays[x.a];
    if (ints && e.indexable && static_cast<size_t>(e.nd) == nidx &&
        (e.dt == DType::float64 || e.dt == DType::int64 || e.dt == DType::bool_ ||
         e.dt == DType::float32 || e.dt == DType::int32)) {
      int64_t off = 0;
      for (size_t k = 0; k < nidx; ++k) {
        int64_t j = idx[k].i < 0 ? idx[k].i + e.shape[k] : idx[k].i;
        if (j < 0 || j >= e.shape[k]) throw BAIL;  // the IndexError is the general path's
        off += j * e.strides[k];
      }
      // The element (a 0-d own value in the general evaluation).
      switch (e.dt) {
        case DType::float64:
          return Reg::real(Reg::NpFloat, reinterpret_cast<const double*>(e.base)[off]);
        case DType::int64:
          return Reg::make(Reg::NpInt, reinterpret_cast<const int64_t*>(e.base)[off]);
        case DType::float32:
          return Reg::real(Reg::NpF32, reinterpret_cast<const float*>(e.base)[off]);
        case DType::int32:
          return Reg::make(Reg::NpI32, reinterpret_cast<const int32_t*>(e.base)[off]);
        default:
          return Reg::boolean(Reg::NpBool, reinterpret_cast<const bool*>(e.base)[off]);
      }
    }
  }
  if (x.k == Reg::Obj && nidx == 1) {
    // xs[i] of a list or tuple and an int: the item, read here (the
    // primitive's argument binding scanned the whole list).
    idx[0] = eval(n.kids[1], st);
    done = 1;
    const Value& v = st.objects[static_cast<size_t>(x.a)];
    if (v.is_list() && idx[0].int_payload()) {
      const List& items = v.as_list();
      const auto len = static_cast<int64_t>(items.size());
      const int64_t j = idx[0].i < 0 ? idx[0].i + len : idx[0].i;
      if (j < 0 || j >= len) throw BAIL;  // the IndexError is the general path's
      return to_reg(items[static_cast<size_t>(j)], st);
    }
    // d[k] of a dict, s[i] of an ASCII string (fastloop_objects.cpp).
    if (Reg r; dict_item(x, idx, 1, st, r) || string_item(x, idx[0], st, r)) return r;
  } else if (x.k == Reg::Obj && nidx > 1 && nidx <= static_cast<size_t>(kMaxDims) &&
             st.objects[static_cast<size_t>(x.a)].is_dict()) {
    // d[i, j]: a tuple key.
    for (; done < nidx; ++done) idx[done] = eval(n.kids[done + 1], st);
    if (Reg r; dict_item(x, idx, nidx, st, r)) return r;
  }
  return getitem_general(n, x, idx, done, st);
}

Reg FastLoop::Impl::getitem_general(const FNode& n, const Reg& x, const Reg* idx, size_t done,
                                    State& st) const {
  // Other indexing (slices, rows, lists, other dtypes): the primitive itself,
  // with the operands evaluated so far and the rest.
  std::vector<Value> vals;
  vals.push_back(to_value(x, st));
  for (size_t k = 0; k < done; ++k) vals.push_back(to_value(idx[k], st));
  for (size_t k = done + 1; k < n.kids.size(); ++k)
    vals.push_back(to_value(eval(n.kids[k], st), st));
  count_general(vals, st);
  Value r;
  try {
    r = n.call->compute(vals);
  } catch (...) {
    throw BAIL;
  }
  --st.counts[n.counter];  // compute() counted it; eval adds one for every getitem
  return to_reg(std::move(r), st);
}

Reg FastLoop::Impl::setitem(const FNode& n, State& st) const {
  Reg x = eval(n.kids[0], st);
  if (x.k == Reg::Obj && is_nested_write(n)) return nested_setitem(n, x, st);
  Reg v = eval(n.kids[1], st);
  const size_t nidx = n.kids.size() - 2;
  if (x.k == Reg::Obj) return object_setitem(n, x, v, st);
  if (x.k != Reg::Arr || !v.scalar() || !element_index(n, st, x)) {
    // Slices, masks, array values: setitem itself, after a snapshot.
    if (x.k != Reg::Arr || v.k == Reg::Undef) throw BAIL;
    std::vector<Value> vals{to_value(x, st), to_value(v, st)};
    for (size_t k = 2; k < n.kids.size(); ++k) vals.push_back(to_value(eval(n.kids[k], st), st));
    Reg r = call_values(n, vals, st);
    --st.counts[n.counter];  // compute() counted it; eval adds one for every setitem
    return r;
  }
  int64_t off = 0;
  {
    const ArrEntry& e = st.arrays[x.a];
    if (!e.indexable || !e.writable || static_cast<size_t>(e.nd) != nidx || is_complex(e.dt)) {
      throw BAIL;
    }
  }
  for (size_t k = 0; k < nidx; ++k) {
    Reg i = eval(n.kids[k + 2], st);
    if (!i.int_payload()) throw BAIL;
    const ArrEntry& e = st.arrays[x.a];
    int64_t j = i.i < 0 ? i.i + e.shape[k] : i.i;
    if (j < 0 || j >= e.shape[k]) throw BAIL;
    off += j * e.strides[k];
  }
  const ArrEntry& e = st.arrays[x.a];
  const bool float_value = v.float_payload();
  // NaN or infinity into integers, and Python ints a narrow dtype cannot
  // hold, are errors the general evaluation reports.
  if (float_value && !std::isfinite(v.f) && !is_inexact(e.dt) && e.dt != DType::bool_) throw BAIL;
  if (v.k == Reg::PyInt && is_integer(e.dt) && e.dt != DType::int64) {
    try {
      check_python_int(Value(v.i), e.dt, "setitem");
    } catch (...) {
      throw BAIL;
    }
  }
  const size_t es = dtype_size(e.dt);
  char* p = e.base + off * static_cast<int64_t>(es);
  st.arrays[static_cast<size_t>(x.a)].written = st.epoch;  // kept for a roll-back
  State::Undo u;
  u.arr = x.a;
  u.offset = off * static_cast<int64_t>(es);
  u.size = static_cast<uint8_t>(es);
  std::memcpy(u.old, p, es);
  st.undo.push_back(u);
  dispatch_all(e.dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = reinterpret_cast<T*>(p);
    switch (v.k) {
      case Reg::PyBool:
      case Reg::NpBool:
        *dst = element_cast<T>(v.b);
        break;
      case Reg::PyInt:
      case Reg::NpInt:
      case Reg::NpI32:
        *dst = element_cast<T>(v.i);
        break;
      default:
        *dst = element_cast<T>(v.f);
        break;
    }
  });
  return x;
}

bool FastLoop::Impl::element_index(const FNode& n, const State& st, const Reg& x) {
  const size_t nidx = n.kids.size() - 2;
  const ArrEntry& e = st.arrays[x.a];
  if (!e.indexable || static_cast<size_t>(e.nd) != nidx) return false;
  for (size_t k = 0; k < nidx; ++k) {
    const FNode& i = n.kids[k + 2];
    Reg::Kind kind = Reg::Undef;
    if (i.op == Op::Const)
      kind = i.constant.k;
    else if (i.op == Op::Var)
      kind = st.regs[i.reg].k;
    else if (i.op == Op::Binary || i.op == Op::AsType)
      kind = Reg::PyInt;  // evaluated below
    else
      return false;
    if (kind != Reg::PyInt && kind != Reg::NpInt && kind != Reg::NpI32) return false;
  }
  return true;
}

// Item k of the list at object slot `slot`, the list made this run's own
// (its whole value before logged once per checkpoint, so a roll-back puts
// it back with the items it held then); a bail for what the general path
// reports (an index that is not an int, out of range).
Value& FastLoop::Impl::own_list_item(int32_t slot, const Reg& k, State& st) {
  const auto o = static_cast<size_t>(slot);
  if (!k.int_payload()) throw BAIL;
  Value& held = st.objects[o];
  const auto len = static_cast<int64_t>(held.as_list().size());
  const int64_t j = k.i < 0 ? k.i + len : k.i;
  if (j < 0 || j >= len) throw BAIL;  // the general path's IndexError
  const bool fresh = st.object_epoch[o] == st.epoch && held.unique_list();
  if (!fresh && std::find(st.snapshot_lists.begin(), st.snapshot_lists.end(), slot) ==
                    st.snapshot_lists.end()) {
    // Its whole value now goes back on a roll-back (after the appends'
    // cut, newest first: the items written since are undone too).
    st.list_undo.push_back({slot, -2, held});
    st.snapshot_lists.push_back(slot);
    if (st.object_logged[o] != st.epoch) {
      st.object_logged[o] = st.epoch;
      st.logged_objects.push_back(slot);
    }
  }
  List* items = held.unique_list();
  if (!items) {
    held = Value(List(held.as_list()));
    items = held.unique_list();
  }
  return (*items)[static_cast<size_t>(j)];
}

// The dict at object slot `slot`, made this run's own before `key` is
// written: changed in place, as a list's append: made since the checkpoint
// (a roll-back drops it), or with its changes since logged as its length
// then (the keys added since are cut) and the value before of each key it
// had that is written; a dict held elsewhere too (the frame's variable) is
// copied once, the one before kept whole.
Dict& FastLoop::Impl::own_dict(int32_t slot, const Value& key, State& st) {
  const auto o = static_cast<size_t>(slot);
  Value& held = st.objects[o];
  Dict* d = held.unique_dict();
  const bool fresh = d && st.object_epoch[o] == st.epoch;
  const bool whole_kept = std::find(st.snapshot_lists.begin(), st.snapshot_lists.end(), slot) !=
                          st.snapshot_lists.end();
  if (!d || (!fresh && !whole_kept)) {
    if (st.object_logged[o] != st.epoch) {
      st.object_logged[o] = st.epoch;
      st.logged_objects.push_back(slot);
      if (d) st.list_undo.push_back({slot, static_cast<int64_t>(d->items.size()), Value()});
    }
    if (!d) {
      st.list_undo.push_back({slot, -2, held});
      st.snapshot_lists.push_back(slot);
      held = Value(Dict(held.as_dict()));
      d = held.unique_dict();
    } else if (const std::ptrdiff_t pos = d->position(key); pos >= 0) {
      // By position and a copy: a compact dict is not written out as Values.
      st.list_undo.push_back({slot, State::kDictItemUndo - static_cast<int64_t>(pos),
                              d->value_at(static_cast<size_t>(pos))});
    }
  }
  return *d;
}

// A dict key from register k as the general path makes it (a bail for any
// other kind of key, and for what it reports).
Value FastLoop::Impl::dict_key(const Reg& k, const char* op, State& st) {
  if (!k.scalar() && !(k.k == Reg::Obj && st.objects[static_cast<size_t>(k.a)].is_string()))
    throw BAIL;
  try {
    return python_dict_key(to_value(k, st), op);
  } catch (...) {
    throw BAIL;  // the general path raises it at the user's line
  }
}

Reg FastLoop::Impl::object_setitem(const FNode& n, const Reg& x, const Reg& v,
                                   State& st) const {
  const auto o = static_cast<size_t>(x.a);
  const bool is_list = st.objects[o].is_list() && !st.objects[o].is_tuple();
  const size_t nidx = n.kids.size() - 2;
  if (!n.in_place || v.k == Reg::Undef || !(is_list || st.objects[o].is_dict()) ||
      (is_list && nidx != 1) || nidx > static_cast<size_t>(kMaxDims))
    throw BAIL;
  // Another register holding the same object would see the change (Python's
  // aliasing): left to the general path.
  for (size_t r = 0; r < st.regs.size(); ++r) {
    if (static_cast<int>(r) != n.kids[0].reg && st.regs[r].k == Reg::Obj && st.regs[r].a == x.a)
      throw BAIL;
  }
  Reg idx[kMaxDims];
  for (size_t k = 0; k < nidx; ++k) idx[k] = eval(n.kids[k + 2], st);
  const Reg& k = idx[0];
  if (is_list) {
    Value item = to_value(v, st);
    own_list_item(x.a, k, st) = std::move(item);
    ++st.inline_ops;
    return x;
  }
  // d[i, j] = v: a tuple key (`pairs.add((a, b))`, `grid[x, y] = c`).
  Value key;
  if (nidx == 1) {
    key = dict_key(k, "setitem", st);
  } else if (!key_of(idx, nidx, st, key)) {
    throw BAIL;
  }
  Value item = to_value(v, st);
  own_dict(x.a, key, st).set(std::move(key), std::move(item));
  ++st.inline_ops;
  return x;
}

// `c[i][j] = v` (`c = setitem(c, setitem(c[i], v, j), i)`, the same i) of a
// list or dict c in an object register whose item c[i] is a list or dict:
// the item changed in place in c, made c's own first (c logged as above;
// an item shared with what was logged, or with anything else, is copied
// before it changes, so a roll-back finds the one before). Before, the
// inner setitem left the loop to the general path, which copied the item
// (a row of a dynamic-programming table) at every write.
Reg FastLoop::Impl::nested_setitem(const FNode& n, const Reg& x, State& st) const {
  const FNode& inner = n.kids[1];
  const auto o = static_cast<size_t>(x.a);
  const bool is_list = st.objects[o].is_list() && !st.objects[o].is_tuple();
  if (!is_list && !st.objects[o].is_dict()) throw BAIL;
  for (size_t r = 0; r < st.regs.size(); ++r) {
    if (static_cast<int>(r) != n.kids[0].reg && st.regs[r].k == Reg::Obj && st.regs[r].a == x.a)
      throw BAIL;
  }
  const Reg v = eval(inner.kids[1], st);  // Python's order: the value, then the targets
  if (v.k == Reg::Undef) throw BAIL;
  const Reg ki = eval(n.kids[2], st);
  const Reg kj = eval(inner.kids[2], st);
  Value* item;
  if (is_list) {
    item = &own_list_item(x.a, ki, st);
  } else {
    const Value key = dict_key(ki, "getitem", st);
    if (st.objects[o].as_dict().position(key) < 0) throw BAIL;  // the general path's KeyError
    Dict& d = own_dict(x.a, key, st);
    item = const_cast<Value*>(d.find(key));
  }
  if (item->is_list() && !item->is_tuple()) {
    if (!kj.int_payload()) throw BAIL;
    const auto len = static_cast<int64_t>(item->as_list().size());
    const int64_t j = kj.i < 0 ? kj.i + len : kj.i;
    if (j < 0 || j >= len) throw BAIL;
    List* row = item->unique_list();
    if (!row) {
      *item = Value(List(item->as_list()));
      row = item->unique_list();
    }
    (*row)[static_cast<size_t>(j)] = to_value(v, st);
  } else if (item->is_dict()) {
    Value key = dict_key(kj, "setitem", st);
    Dict* row = item->unique_dict();
    if (!row) {
      *item = Value(Dict(item->as_dict()));
      row = item->unique_dict();
    }
    row->set(std::move(key), to_value(v, st));
  } else {
    throw BAIL;  // an array, a tuple (its TypeError), a string: the general path's
  }
  ++st.counts[inner.counter];
  ++st.counts[inner.kids[0].counter];
  st.inline_ops += 2;
  return x;
}

// The write `nested_setitem` takes: `c = setitem(c, setitem(getitem(c, i), v, j), i)`.
bool FastLoop::Impl::is_nested_write(const FNode& n) {
  if (!n.in_place || n.kids.size() != 3 || n.kids[1].op != Op::SetItem) return false;
  const FNode& inner = n.kids[1];
  if (inner.kids.size() != 3 || inner.kids[0].op != Op::GetItem) return false;
  const FNode& read = inner.kids[0];
  return read.kids.size() == 2 && read.kids[0].op == Op::Var && read.kids[0].reg == n.kids[0].reg &&
         same_pure(read.kids[1], n.kids[2]) && inner.counter >= 0 && read.counter >= 0;
}

bool FastLoop::Impl::same_pure(const FNode& a, const FNode& b) {
  if (a.op != b.op || a.kids.size() != b.kids.size()) return false;
  switch (a.op) {
    case Op::Var:
      return a.reg == b.reg;
    case Op::Const:
      return (a.constant.k == Reg::PyInt || a.constant.k == Reg::NpInt) &&
             a.constant.k == b.constant.k && a.constant.i == b.constant.i;
    case Op::Binary:
      if (a.fast != b.fast || a.spec != b.spec) return false;
      for (size_t k = 0; k < a.kids.size(); ++k)
        if (!same_pure(a.kids[k], b.kids[k])) return false;
      return true;
    default:
      return false;
  }
}

Reg FastLoop::Impl::new_list(const FNode& n, State& st) const {
  List items;
  items.reserve(n.kids.size());
  for (const FNode& k : n.kids) {
    Reg r = eval(k, st);
    if (r.k == Reg::Undef) throw BAIL;
    items.push_back(to_value(r, st));
  }
  Reg r;
  r.k = Reg::Obj;
  r.i = 0;
  r.a = place_object(Value(std::move(items)), st);
  return r;
}

Reg FastLoop::Impl::new_dict(const FNode& n, State& st) const {
  Dict d;
  for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
    const Reg k = eval(n.kids[i], st);
    const Reg v = eval(n.kids[i + 1], st);
    if (k.k == Reg::Undef || v.k == Reg::Undef) throw BAIL;
    Value key = dict_key(k, "dict", st);
    d.set(std::move(key), to_value(v, st));
  }
  Reg r;
  r.k = Reg::Obj;
  r.i = 0;
  r.a = place_object(Value(std::move(d)), st);
  return r;
}

namespace {

bool flo_immutable_object(const Value& v) {
  if (v.is_string()) return true;
  if (!v.is_tuple()) return false;
  for (const Value& item : v.as_list())
    if (!item.is_string() && !item.is_bool() && !item.is_int() && !item.is_float()) return false;
  return true;
}

}  // namespace

Reg FastLoop::Impl::append(const FNode& n, State& st) const {
  Reg v = eval(n.kids[0], st);
  // Lists of lists and dicts: the general path's. A string or a tuple of
  // numbers and strings (Python's immutable values: nothing seen through
  // another name changes) is appended here (`sorted(pairs)`, words), and so
  // is a list just made by the item's own expression (`t.append([0] * n)`,
  // the rows of `[[0] * n for _ in range(m)]`): nothing else refers to it.
  const bool made_here = n.kids[0].op == Op::NewList || n.kids[0].op == Op::Binary;
  if (v.k == Reg::Undef ||
      (v.k == Reg::Obj && !flo_immutable_object(st.objects[v.a]) &&
       !(made_here && st.objects[v.a].is_list() && !st.objects[v.a].is_tuple())))
    throw BAIL;
  const Reg x = st.regs[n.reg];
  if (x.k != Reg::Obj) throw BAIL;
  // Another register holding the same list would see the append (Python's
  // aliasing): left to the general path.
  for (size_t k = 0; k < st.regs.size(); ++k)
    if (static_cast<int>(k) != n.reg && st.regs[k].k == Reg::Obj && st.regs[k].a == x.a) throw BAIL;
  if (!list_push(st, x.a, to_value(v, st))) throw BAIL;
  st.assigned[n.reg] = 1;
  return x;
}

bool FastLoop::Impl::list_push(State& st, int32_t obj, Value v) {
  const auto o = static_cast<size_t>(obj);
  Value& list = st.objects[o];
  if (!list.is_list() || list.is_tuple()) return false;
  if (st.object_epoch[o] == st.epoch && list.unique_list()) {
    list.unique_list()->push_back(std::move(v));  // made since the checkpoint
    return true;
  }
  if (st.object_logged[o] != st.epoch) {
    // Its first change since the checkpoint: its length then (a roll-back
    // cuts it back), one entry however many appends follow.
    st.object_logged[o] = st.epoch;
    st.logged_objects.push_back(obj);
    st.list_undo.push_back({obj, static_cast<int64_t>(list.as_list().size()), Value()});
  }
  if (!list.unique_list()) {
    // Held elsewhere too (the frame's variable): a copy of its own, the one
    // before kept for a roll-back.
    Value copy{List(list.as_list())};
    st.list_undo.push_back({obj, -2, std::move(list)});
    list = std::move(copy);
  }
  list.unique_list()->push_back(std::move(v));
  return true;
}

Reg FastLoop::Impl::astype(const FNode& n, State& st) const {
  Reg v = eval(n.kids[0], st);
  if (!v.scalar()) throw BAIL;
  const bool strong = v.strong();
  double f = v.float_payload()                            ? v.f
             : (v.k == Reg::PyBool || v.k == Reg::NpBool) ? (v.b ? 1.0 : 0.0)
                                                          : static_cast<double>(v.i);
  switch (n.cast_to) {
    case DType::int64: {
      int64_t i = v.int_payload() ? v.i : element_cast<int64_t>(f);
      return Reg::make(strong ? Reg::NpInt : Reg::PyInt, i);
    }
    case DType::float64:
      return Reg::real(strong ? Reg::NpFloat : Reg::PyFloat,
                       v.int_payload() ? static_cast<double>(v.i) : f);
    default:
      return Reg::boolean(strong ? Reg::NpBool : Reg::PyBool, truthy(v));
  }
}

Reg FastLoop::Impl::call(const FNode& n, State& st) const {
  if (n.obj_op != ObjOp::none && n.slot >= 0) return object_call(n, st);
  if (n.kids.size() == 1 && n.shape_items < 0 && !n.const_arg && n.spec->name == "len") {
    // len() of a list, dict, string or array, read here (a loop's `for x in
    // xs` asks it at every turn); counted in the node's slot, as native code does.
    const Reg r = eval(n.kids[0], st);
    int64_t len = -1;
    const Value* obj = r.k == Reg::Obj ? &st.objects[static_cast<size_t>(r.a)] : nullptr;
    if (obj && obj->is_list()) {
      len = static_cast<int64_t>(obj->as_list().size());
    } else if (obj && obj->is_dict()) {
      len = static_cast<int64_t>(obj->as_dict().items.size());
    } else if (obj && obj->is_string()) {
      len = utf8_length(obj->as_string());  // Python's: code points
    } else if (r.k == Reg::Arr) {
      const ArrEntry& e = st.arrays[static_cast<size_t>(r.a)];
      if (e.indexable && e.nd >= 1) len = e.shape[0];
    }
    if (len >= 0 && n.slot >= 0) {
      ++st.counts[static_cast<size_t>(n.slot)];
      return Reg::make(Reg::PyInt, len);
    }
    if (r.k == Reg::Undef) throw BAIL;
    std::vector<Value> vals{to_value(r, st)};
    return call_values(n, vals, st);
  }
  std::vector<Value> vals;
  vals.reserve(std::max(n.kids.size() + 1, n.spec->params.size()));
  if (n.reuse) {
    // The operands first, then their values: an array is given up (give())
    // only when no other operand is that array too (link() sets `reuse`
    // only for at most kMaxReuseKids operands).
    Reg regs[kMaxReuseKids];
    const size_t nk = n.kids.size();
    for (size_t i = 0; i < nk; ++i) {
      regs[i] = eval(n.kids[i], st);
      if (regs[i].k == Reg::Undef) throw BAIL;
    }
    for (size_t i = 0; i < nk; ++i) {
      bool shared = false;
      for (size_t j = 0; j < nk && regs[i].k == Reg::Arr; ++j)
        shared |= j != i && regs[j].k == Reg::Arr && regs[j].a == regs[i].a;
      vals.push_back(shared ? to_value(regs[i], st) : give(n, i, regs[i], st));
    }
  } else {
    for (const FNode& k : n.kids) {
      Reg r = eval(k, st);
      if (r.k == Reg::Undef) throw BAIL;
      vals.push_back(to_value(r, st));
    }
  }
  if (n.shape_items >= 0) {  // the shape's items into its tuple (or list)
    List items(std::vector<Value>(vals.begin(), vals.begin() + n.shape_items));
    vals.erase(vals.begin(), vals.begin() + n.shape_items);
    vals.insert(vals.begin(),
                n.shape_tuple ? Value::tuple(std::move(items)) : Value(std::move(items)));
  }
  if (n.const_arg) vals.push_back(*n.const_arg);
  return call_values(n, vals, st);
}

// A primitive the loop calls: an array operation (the loop may go the
// general way when those are most of its work, see run), or one on lists,
// dicts, strings and numbers (`k in d`, `d[k]`), which the general path
// would do no faster.
void FastLoop::Impl::count_general(const std::vector<Value>& vals, State& st) {
  for (const Value& v : vals) {
    if (v.is_array() || v.is_tiled()) {
      ++st.general_ops;
      return;
    }
  }
  ++st.inline_ops;
}

Reg FastLoop::Impl::call_values(const FNode& n, std::vector<Value>& vals, State& st) const {
  count_general(vals, st);
  if (n.spec->writes) {
    // The elements it may write, as they are now (small arrays only: a
    // large one goes the general way, where the copy would cost more than
    // the per-statement cost it saves).
    constexpr int64_t kMaxSnapshot = 1 << 16;
    if (vals.empty() || !vals[0].is_array()) throw BAIL;
    const Array& target = vals[0].as_array();
    if (target.size() > kMaxSnapshot || !target.writable()) throw BAIL;
    st.snapshots.emplace_back(target, target.copy());
    st.snapshot_elements += target.size();
    State::Undo u{};
    u.arr = -1;
    u.offset = static_cast<int64_t>(st.snapshots.size() - 1);
    st.undo.push_back(u);
  }
  Value r;
  try {
    r = n.call->compute(vals);
  } catch (...) {
    throw BAIL;
  }
  if (r.is_array() && r.as_array().size() >= kLargeResult) ++st.large_results;
  return to_reg(std::move(r), st);
}

namespace {

using FNode = FastLoop::Impl::FNode;
using State = FastLoop::Impl::State;
using Handler = FastLoop::Impl::Handler;

// An operand's shape, known when the loop is compiled: a variable's register
// or a constant is read in place, anything else evaluated.
enum OperandShape { kVar, kConst, kExpr };

OperandShape shape_of(const FNode& k) {
  return k.op == Op::Var                                      ? kVar
         : k.op == Op::Const && k.constant.k != Reg::Obj ? kConst
                                                           : kExpr;
}

template <int S>
inline const Reg& fetch(const FastLoop::Impl& im, const FNode& k, State& st, Reg& tmp) {
  if constexpr (S == kVar) {
    const Reg& r = st.regs[k.reg];
    if (r.k == Reg::Undef) throw BAIL;
    return r;
  } else if constexpr (S == kConst) {
    return k.constant;
  } else {
    tmp = im.eval(k, st);
    return tmp;
  }
}

inline bool truth(const Reg& r, const State& st) {
  if (r.k == Reg::PyBool) return r.b;
  if (r.k == Reg::Obj) return FastLoop::Impl::object_truthy(r, st);  // `if word:`
  return FastLoop::Impl::truthy(r);
}

Reg h_const(const FastLoop::Impl&, const FNode& n, State&) { return n.constant; }

// A constant that is not a number: placed in the state's objects once per run.
Reg h_const_object(const FastLoop::Impl&, const FNode& n, State& st) {
  for (const auto& [node, index] : st.constant_objects) {
    if (node == &n) {
      Reg r;
      r.k = Reg::Obj;
      r.i = 0;
      r.a = index;
      return r;
    }
  }
  Reg r = FastLoop::Impl::to_reg(*n.const_arg, st);
  st.constant_objects.emplace_back(&n, r.a);
  return r;
}

Reg h_var(const FastLoop::Impl&, const FNode& n, State& st) {
  const Reg& r = st.regs[n.reg];
  if (r.k == Reg::Undef) throw BAIL;
  return r;
}

template <int S>
Reg h_assign(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg tmp;
  const Reg v = fetch<S>(im, n.kids[0], st, tmp);
  if (v.k == Reg::Undef) throw BAIL;
  st.regs[n.reg] = v;
  st.assigned[n.reg] = 1;
  return v;
}

Reg h_block(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg last;
  last.k = Reg::Nil;
  for (const FNode& k : n.kids) {
    last = im.eval(k, st);
    if (st.flow != State::Flow::normal) return last;
  }
  return last;
}

template <int S>
Reg h_if(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg tc;
  if (truth(fetch<S>(im, n.kids[0], st, tc), st)) return im.eval(n.kids[1], st);
  if (n.kids.size() > 2) return im.eval(n.kids[2], st);
  Reg nil;
  nil.k = Reg::Nil;
  return nil;
}

// The kinds that are numbers and not bools, as a mask of bits 1 << kind.
constexpr unsigned kNumbers =
    (1u << Reg::PyInt) | (1u << Reg::PyFloat) | (1u << Reg::NpInt) | (1u << Reg::NpFloat);

// A binary primitive: two numbers (Python's or NumPy's, not bools) computed
// here for the operations computed inline; any other pair of kinds (and
// any other primitive) by binary().
template <Fast F, int SA, int SB>
Reg h_binary(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg ta, tb;
  const Reg& a = fetch<SA>(im, n.kids[0], st, ta);
  const Reg& b = fetch<SB>(im, n.kids[1], st, tb);
  Reg r;
  if constexpr (F != Fast::none) {
    if ((a.k == Reg::PyFloat || a.k == Reg::NpFloat) &&
        (b.k == Reg::PyFloat || b.k == Reg::NpFloat)) {
      r = float_op<F>(a.k == Reg::NpFloat || b.k == Reg::NpFloat, a.f, b.f);
    } else if ((a.k == Reg::PyInt || a.k == Reg::NpInt) &&
               (b.k == Reg::PyInt || b.k == Reg::NpInt)) {
      r = int_op<F>(a.k == Reg::NpInt || b.k == Reg::NpInt, a.i, b.i);
    } else if ((kNumbers >> a.k) & (kNumbers >> b.k) & 1) {
      // An int and a float (i * dx, x[i] * nbins): in floats, as binary().
      const double x = a.k == Reg::PyInt || a.k == Reg::NpInt ? static_cast<double>(a.i) : a.f;
      const double y = b.k == Reg::PyInt || b.k == Reg::NpInt ? static_cast<double>(b.i) : b.f;
      r = float_op<F>(a.strong() || b.strong(), x, y);
    } else {
      r = im.binary(n, a, b, st);
    }
  } else {
    r = im.binary(n, a, b, st);
  }
  ++st.counts[n.counter];
  ++st.inline_ops;
  return r;
}

template <Fast F>
Handler binary_handler(OperandShape a, OperandShape b) {
  static constexpr Handler table[3][3] = {
      {&h_binary<F, kVar, kVar>, &h_binary<F, kVar, kConst>, &h_binary<F, kVar, kExpr>},
      {&h_binary<F, kConst, kVar>, &h_binary<F, kConst, kConst>, &h_binary<F, kConst, kExpr>},
      {&h_binary<F, kExpr, kVar>, &h_binary<F, kExpr, kConst>, &h_binary<F, kExpr, kExpr>}};
  return table[a][b];
}

Reg h_while(const FastLoop::Impl& im, const FNode& n, State& st) { return im.loop(n, st); }
Reg h_logic(const FastLoop::Impl& im, const FNode& n, State& st) { return im.logic(n, st); }
Reg h_rest(const FastLoop::Impl& im, const FNode& n, State& st) { return im.rest(n, st); }

}  // namespace

void FastLoop::Impl::link(FNode& n) {
  for (FNode& k : n.kids) link(k);
  // Operands a pure primitive may take over (give()): temporaries, and the
  // variable its value is assigned to (`x = x + y`, `x = np.sqrt(x)`).
  auto takes_over = [](const FNode& c) {
    return c.spec && c.call && pure_primitive(*c.spec) &&
           (c.op == Op::Binary ||
            (c.op == Op::Call && c.shape_items < 0 && c.kids.size() <= kMaxReuseKids));
  };
  if (takes_over(n)) {
    for (size_t i = 0; i < n.kids.size() && i < 8; ++i) {
      if (shape_of(n.kids[i]) == kExpr) n.reuse |= static_cast<uint8_t>(1u << i);
    }
  }
  if (n.op == Op::Assign && takes_over(n.kids[0])) {
    FNode& v = n.kids[0];
    for (size_t i = 0; i < v.kids.size() && i < 8; ++i) {
      if (v.kids[i].op == Op::Var && v.kids[i].reg == n.reg)
        v.reuse |= static_cast<uint8_t>(1u << i);
    }
  }
  switch (n.op) {
    case Op::Const:
      n.fn = n.constant.k == Reg::Obj ? &h_const_object : &h_const;
      break;
    case Op::Var:
      n.fn = &h_var;
      break;
    case Op::Assign: {
      static constexpr Handler by_shape[3] = {&h_assign<kVar>, &h_assign<kConst>, &h_assign<kExpr>};
      n.fn = by_shape[shape_of(n.kids[0])];
      break;
    }
    case Op::Block:
      n.fn = &h_block;
      break;
    case Op::If: {
      static constexpr Handler by_shape[3] = {&h_if<kVar>, &h_if<kConst>, &h_if<kExpr>};
      n.fn = by_shape[shape_of(n.kids[0])];
      break;
    }
    case Op::Binary: {
      const OperandShape a = shape_of(n.kids[0]), b = shape_of(n.kids[1]);
      n.fn = with_fast(n.fast, [&](auto f) { return binary_handler<decltype(f)::value>(a, b); });
      break;
    }
    case Op::While:
      n.fn = &h_while;
      break;
    case Op::Logic:
      n.fn = &h_logic;
      break;
    default:
      n.fn = &h_rest;
      break;
  }
}

// The parts of eval that are not on every turn's path (kept out of it so
// that its frame stays small).
Reg FastLoop::Impl::loop(const FNode& n, State& st) const {
  {
    {
      Reg last;
      last.k = Reg::Nil;
      // The loop's value is kept by the sweeps (of its turns and of loops
      // inside), until it returns or a bail unwinds it.
      struct Root {
        std::vector<const Reg*>& roots;
        ~Root() { roots.pop_back(); }
      } root{st.roots};
      st.roots.push_back(&last);
      for (;;) {
        if (interrupt_requested()) throw BAIL;
        if (!truth(eval(n.kids[0], st), st)) return last;
        Reg v = eval(n.kids[1], st);
        if (st.flow == State::Flow::brk) {
          st.flow = State::Flow::normal;
          return last;
        }
        if (st.flow == State::Flow::cont) {
          st.flow = State::Flow::normal;
        } else if (!n.value_unused) {
          last = v;
        }
        if (n.sweeps) sweep(st);
      }
    }
  }
}

Reg FastLoop::Impl::rest(const FNode& n, State& st) const {
  switch (n.op) {
    case Op::Break:
    case Op::Continue: {
      st.flow = n.op == Op::Break ? State::Flow::brk : State::Flow::cont;
      Reg nil;
      nil.k = Reg::Nil;
      return nil;
    }
    case Op::GetItem: {
      Reg r = getitem(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::SetItem: {
      Reg r = setitem(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::AsType: {
      Reg r = astype(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::Call:
      return call(n, st);
    case Op::NewList:
      return new_list(n, st);
    case Op::NewDict:
      return new_dict(n, st);
    case Op::Append: {
      Reg r = append(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::Uniform: {
      // random_uniform's value for element 0 of the draw, low 0 and high 1
      // (creation.cpp, kernels::uniform_fill_range): a 0-d float64 array.
      const kernels::RandomKey key = next_uniform_key();
      ++st.draws;
      auto w = kernels::philox4x32(key, 0);
      ++st.counts[n.counter];
      return Reg::real(Reg::NpFloat, kernels::unit_double(w[0], w[1]));
    }
    default:
      break;
  }
  throw BAIL;
}

Reg FastLoop::Impl::logic(const FNode& n, State& st) const {
  switch (n.op) {
    case Op::Logic: {
      Reg a = eval(n.kids[0], st);
      if (!a.scalar()) throw BAIL;
      const bool ta = truthy(a);
      if (!a.strong()) {
        // Python-like scalars short-circuit and give a bool.
        if (n.is_and && !ta) return Reg::boolean(Reg::PyBool, false);
        if (!n.is_and && ta) return Reg::boolean(Reg::PyBool, true);
      }
      Reg b = eval(n.kids[1], st);
      if (!b.scalar()) throw BAIL;
      const bool tb = truthy(b);
      if (!a.strong() && !b.strong()) return Reg::boolean(Reg::PyBool, tb);
      // A 0-d array on either side: logical_and/or elementwise, a 0-d bool.
      return Reg::boolean(Reg::NpBool, n.is_and ? (ta && tb) : (ta || tb));
    }
    default:
      throw BAIL;
  }
}

void FastLoop::Impl::rollback(State& st, size_t objects_before) const {
  for (auto it = st.list_undo.rbegin(); it != st.list_undo.rend(); ++it) {
    Value& list = st.objects[static_cast<size_t>(it->obj)];
    const auto keep = static_cast<size_t>(it->index);
    if (it->index == -2) {
      list = std::move(it->old);
    } else if (list.is_dict()) {
      Dict* d = list.unique_dict();
      if (!d) {  // shared since (not by the loop's own changes): a copy of its own
        list = Value(Dict(list.as_dict()));
        d = list.unique_dict();
      }
      if (it->index >= 0) {
        d->truncate(keep);
      } else if (const auto pos = static_cast<size_t>(State::kDictItemUndo - it->index);
                 pos < d->items.size()) {
        d->set_value_at(pos, std::move(it->old));
      }
    } else if (list.is_list() && list.as_list().size() > keep) {
      if (List* items = list.unique_list())
        items->resize(keep);
      else
        list = Value(List(list.as_list().begin(), list.as_list().begin() + it->index));
    }
  }
  st.list_undo.clear();
  st.logged_objects.clear();
  for (auto it = st.undo.rbegin(); it != st.undo.rend(); ++it) {
    if (it->arr < 0) {
      auto& [target, before] = st.snapshots[static_cast<size_t>(it->offset)];
      target.assign(before);
    } else {
      std::memcpy(st.arrays[it->arr].base + it->offset, it->old, it->size);
    }
  }
  st.undo.clear();
  st.snapshots.clear();
  st.snapshot_elements = 0;
  st.regs = st.saved;
  st.assigned = st.saved_assigned;
  st.counts = st.saved_counts;
  // The arrays made since the checkpoint are released by the next sweep.
  st.objects.resize(objects_before);
  st.object_epoch.resize(objects_before);
  st.object_logged.resize(objects_before);
  st.object_ascii.resize(objects_before);
  const auto placed_since = [&](int32_t c) { return static_cast<size_t>(c) >= objects_before; };
  if (std::erase_if(st.char_slots, placed_since)) {
    for (int32_t& c : st.char_objects)
      if (c >= 0 && placed_since(c)) c = -1;
  }
  std::erase_if(st.free_objects, [&](int32_t i) { return static_cast<size_t>(i) >= objects_before; });
  std::erase_if(st.constant_objects,
                [&](const auto& e) { return static_cast<size_t>(e.second) >= objects_before; });
  st.flow = State::Flow::normal;
  // The draws since the checkpoint are made again by the general
  // evaluation: the stream goes back (unless another task drew meanwhile).
  if (st.draws) rewind_random_stream(st.stream_at_checkpoint + st.draws, st.stream_at_checkpoint);
  st.draws = 0;
}

void FastLoop::Impl::sweep(State& st) {
  // Nothing made since the last sweep: at most an array a register let go
  // of without a new one made, released at the next sweep that has work.
  // Objects are swept once every kObjectSweep made (a string per turn
  // swept them at every turn: a fifth of a word count's time), so a loop
  // making a list per turn holds at most that many it let go of.
  constexpr int64_t kObjectSweep = 16;
  const bool objects = st.objects_made >= kObjectSweep;
  if (st.made == 0 && !objects) return;
  st.made = 0;
  std::vector<uint8_t>& marks = st.marks;
  marks.assign(st.arrays.size(), 0);
  auto mark = [&](const Reg& r) {
    if (r.k == Reg::Arr) marks[static_cast<size_t>(r.a)] = 1;
  };
  for (const Reg& r : st.regs) mark(r);
  for (const Reg& r : st.saved) mark(r);
  for (const Reg* r : st.roots) mark(*r);
  for (size_t i = 0; i < st.arrays.size(); ++i) {
    ArrEntry& e = st.arrays[i];
    if (marks[i] || e.released || e.written == st.epoch) continue;
    release(st, static_cast<int32_t>(i));
  }
  // Lists made in the loop (and other objects) no register, checkpoint,
  // loop value, constant or logged list change refers to.
  if (!objects || st.objects.size() < 64) return;
  st.objects_made = 0;
  marks.assign(st.objects.size(), 0);
  auto mark_obj = [&](const Reg& r) {
    if (r.k == Reg::Obj && static_cast<size_t>(r.a) < marks.size()) marks[static_cast<size_t>(r.a)] = 1;
  };
  for (const Reg& r : st.regs) mark_obj(r);
  for (const Reg& r : st.saved) mark_obj(r);
  for (const Reg* r : st.roots) mark_obj(*r);
  for (const auto& c : st.constant_objects) marks[static_cast<size_t>(c.second)] = 1;
  for (int32_t c : st.char_slots) marks[static_cast<size_t>(c)] = 1;
  for (int32_t i : st.logged_objects) marks[static_cast<size_t>(i)] = 1;
  for (int32_t i : st.free_objects) marks[static_cast<size_t>(i)] = 1;  // already free
  for (size_t i = 0; i < st.objects.size(); ++i) {
    if (marks[i]) continue;
    st.objects[i] = Value();
    st.free_objects.push_back(static_cast<int32_t>(i));
  }
}

void FastLoop::Impl::write_back(const FramePtr& frame, const State& st) const {
  for (size_t c = 0; c < counted.size(); ++c) {
    if (st.counts[c])
      counted[c]->counters().evaluations.fetch_add(st.counts[c], std::memory_order_relaxed);
  }
  for (size_t r = 0; r < vars.size(); ++r) {
    if (!st.assigned[r] || vars[r].depth < 0) continue;
    const Reg& x = st.regs[r];
    if (st.numbers_written_only && x.k == Reg::Obj && r < st.loaded_objects.size() &&
        st.loaded_objects[r] == x.a && st.objects[static_cast<size_t>(x.a)].is_list()) {
      frame->up(vars[r].depth)->set_numbers_written(vars[r].slot, to_value(x, st));
      continue;
    }
    frame->up(vars[r].depth)->set(vars[r].slot, to_value(x, st));
  }
  for (const TupleVar& t : frame_tuples) {
    if (!st.assigned[t.items[0]]) continue;  // the items are assigned together
    frame->up(vars[t.reg].depth)->set(vars[t.reg].slot, tuple_value(t, st));
  }
}

const NativeCode* FastLoop::Impl::native_for(const State& st) const {
  std::vector<uint8_t> sig = native_signature(st.regs, st.arrays);
  std::lock_guard<std::mutex> lock(native_mu);
  for (const auto& c : native_codes) {
    if (c->signature == sig) return c.get();
  }
  for (const auto& r : native_refused) {
    if (r == sig) return nullptr;
  }
  // A few signatures at most (a loop run with other kinds of arguments).
  if (native_codes.size() + native_refused.size() >= 4) return nullptr;
  std::string why;
  std::unique_ptr<NativeCode> code = native_compile(*this, st.regs, st.arrays, st.objects, why);
  if (!code) {
    if (debug() || native_debug())
      std::fprintf(stderr, "[fast loops] %s: no native code, the interpreter runs the loop: %s\n",
                   where.c_str(), why.c_str());
    native_refused.push_back(std::move(sig));
    return nullptr;
  }
  if (debug() || native_debug()) {
    if (code->from_cache)
      std::fprintf(stderr, "[fast loops] %s: native code loaded from the cache in %.1f ms\n",
                   where.c_str(), code->compile_ms);
    else
      std::fprintf(stderr, "[fast loops] %s: native code compiled in %.1f ms%s%s\n", where.c_str(),
                   code->compile_ms, code->cache_note.empty() ? "" : "; cache: ",
                   code->cache_note.c_str());
  }
  native_codes.push_back(std::move(code));
  return native_codes.back().get();
}

int32_t FastLoop::Impl::run_native(const NativeCode& code, State& st, Reg& last,
                                   NativeLog& log, int64_t& undo_count) const {
  std::vector<NativeArray> arrs(st.regs.size());
  for (size_t r = 0; r < st.regs.size(); ++r) {
    if (st.regs[r].k != Reg::Arr) continue;
    const ArrEntry& e = st.arrays[st.regs[r].a];
    arrs[r].base = e.base;
    for (int d = 0; d < e.nd && d < kMaxDims; ++d) {
      arrs[r].shape[d] = e.shape[d];
      arrs[r].strides[d] = e.strides[d];
    }
  }
  if (log.entries.size() < 4096) log.entries.resize(4096);
  log.ranges.clear();
  log.bytes.clear();
  log.copies.clear();
  NativeCtx c;
  c.regs = st.regs.data();
  c.assigned = st.assigned.data();
  c.counts = st.counts.data();
  c.arrays = arrs.data();
  c.entries = st.arrays.data();
  c.undo = log.entries.data();
  c.undo_n = 0;
  c.undo_cap = static_cast<int64_t>(log.entries.size());
  c.log = &log;
  c.range_units = 0;
  // Checkpoints every 16384 turns or 65536 logged element writes: a bail
  // redoes at most that many turns on the interpreter.
  c.max_turns = int64_t{1} << 14;
  c.max_undo = int64_t{1} << 16;
  c.last = last;
  c.helpers = native_helpers();
  c.interrupt = interrupt_flag_address();
  c.draws = 0;
  c.draws_at_turn = 0;
  NativeDraws draws;
  c.rand = &draws;
  c.state = &st;
  c.impl = this;
  const int32_t status = code.fn(&c);
  native_draws_settle(draws);
  undo_count = c.undo_n;
  last = c.last;
  // Random draws the general evaluation makes again: back to the call's
  // start (rollback rewinds st.draws), or to the start of the turn stopped.
  if (status == kNativeBailCall) {
    st.draws += static_cast<uint64_t>(c.draws);
  } else if (status == kNativeBail && c.draws > c.draws_at_turn) {
    const uint64_t at = st.stream_at_checkpoint;
    rewind_random_stream(at + static_cast<uint64_t>(c.draws),
                         at + static_cast<uint64_t>(c.draws_at_turn));
  }
  return status;
}

FastLoop::FastLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FastLoop::~FastLoop() = default;

std::unique_ptr<FastLoop> FastLoop::compile(const WhileNode& loop, const Frame& frame) {
  auto impl = std::make_unique<Impl>();
  impl->frame = &frame;
  impl->value_unused = loop.value_unused_;
  impl->where = loop.loc().str();
  if (!impl->compile(loop.cond_.get(), impl->cond) ||
      !impl->compile(loop.body_.get(), impl->body) || !impl->lower_tuples()) {
    return nullptr;
  }
  impl->frame = nullptr;
  // A function called inline stays the one called: the loop does not assign
  // its variable.
  std::function<bool(const Impl::FNode&)> assigns_called = [&](const Impl::FNode& n) {
    if (n.op == Op::Assign) {
      for (const Impl::Inlined& in : impl->inlined) {
        const Impl::VarRef& v = impl->vars[n.reg];
        if (v.depth == in.depth && v.slot == in.slot) return true;
      }
    }
    for (const auto& k : n.kids)
      if (assigns_called(k)) return true;
    return false;
  };
  if (assigns_called(impl->cond) || assigns_called(impl->body)) {
    if (debug())
      std::fprintf(stderr, "[fast loops] %s: the loop assigns a function it calls\n",
                   loop.loc().str().c_str());
    return nullptr;
  }
  Impl::link(impl->cond);
  Impl::link(impl->body);
  std::function<bool(const Impl::FNode&)> has_loop = [&](const Impl::FNode& n) {
    if (n.op == Op::While) return true;
    for (const auto& k : n.kids)
      if (has_loop(k)) return true;
    return false;
  };
  impl->nested = has_loop(impl->body);
  impl->parallel = loop.parallel_;
  if (impl->parallel) impl->plan_parallel();
  return std::unique_ptr<FastLoop>(new FastLoop(std::move(impl)));
}

bool FastLoop::run(const FramePtr& frame, Value& result) const {
  const Impl& im = *impl_;
  if (im.prefer_general.load(std::memory_order_relaxed)) {
    result = Value();
    return false;
  }
  Impl::State st;
  const size_t n = im.vars.size();
  st.regs.resize(n);
  st.assigned.assign(n, 0);
  st.counts.assign(im.counted.size(), 0);
  result = Value();
  // The functions called inline: still those (else the general evaluation).
  for (const Impl::Inlined& in : im.inlined) {
    Value fn;
    const Closure* c = nullptr;
    if (frame->up(in.depth)->read_now(in.slot, fn) && fn.is_function())
      c = dynamic_cast<const Closure*>(fn.as_function().get());
    if (!c || &c->code() != in.code.get() || c->env_raw() != frame->up(in.env_depth)) {
      if (debug())
        std::fprintf(stderr, "[fast loops] %s: a function called inline is another one now\n",
                     im.where.c_str());
      return false;
    }
  }
  // The variables as they are now; a pending one (a define still
  // computing) leaves the loop to the general evaluation. The locals of
  // functions called inline start unassigned.
  for (size_t r = 0; r < n; ++r) {
    if (im.vars[r].depth < 0) continue;
    const Frame* f = frame->up(im.vars[r].depth);
    Value v;
    if (!f->read_now(im.vars[r].slot, v)) {
      if (!f->defined(im.vars[r].slot))
        continue;  // not assigned yet: Undef until the loop assigns it
      // A define still computing (a deferred statement before the loop):
      // waited for where the caller waits anyway, else the general way.
      Future<Value> pending = f->read(im.vars[r].slot);
      if (!pending.is_ready() && !settle_here(pending)) {
        if (debug())
          std::fprintf(stderr, "[fast loops] a variable is still computing at the loop's start\n");
        return false;
      }
      if (pending.error()) return false;
      v = pending.get();
    }
    if (!im.frame_tuple_of.empty() && im.frame_tuple_of[r] >= 0) {
      // A tuple variable: its items into their registers.
      if (!im.load_tuple(im.frame_tuples[im.frame_tuple_of[r]], v, st)) {
        if (debug())
          std::fprintf(stderr, "[fast loops] %s: '%s' is not the tuple the loop was compiled for\n",
                       im.where.c_str(), r < im.names.size() ? im.names[r].c_str() : "?");
        return false;
      }
      continue;
    }
    try {
      st.regs[r] = Impl::to_reg(v, st);
      if (v.is_list() && !v.is_tuple()) {
        st.frame_lists.push_back(v.list_ptr().get());
        st.loaded_objects.resize(n, -1);
        st.loaded_objects[r] = st.regs[r].a;
      }
    } catch (const Bail&) {
      st.regs[r].k = Reg::Undef;  // lists, strings, ...: only if the loop never reads it
    }
  }
  Reg last, saved_last;
  last.k = Reg::Nil;
  // Checkpoints every kCheckpointTurns turns (or when many elements were
  // written): a turn that meets anything outside the subset rolls back to
  // the last one, and the general evaluation redoes the turns since (they
  // are pure apart from the element writes undone, so it computes the same).
  constexpr int kCheckpointTurns = 64;
  constexpr size_t kMaxUndo = 1 << 14;
  int since = kCheckpointTurns;
  size_t objects_before = 0;
  auto checkpoint = [&] {
    st.saved = st.regs;
    st.saved_assigned = st.assigned;
    st.saved_counts = st.counts;
    saved_last = last;
    st.undo.clear();
    st.list_undo.clear();
    st.logged_objects.clear();
    st.snapshots.clear();
    st.snapshot_elements = 0;
    st.snapshot_lists.clear();
    st.draws = 0;
    st.stream_at_checkpoint = random_stream_position();
    objects_before = st.objects.size();
    ++st.epoch;  // the element writes before it are not undone any more
    since = 0;
  };
  bool native = native_enabled();
  int64_t turns = 0;
  NativeLog undo_log;
  // Native code from the first turn (variables first assigned in it get
  // their kinds there; an interpreted first turn was most of a small loop's
  // call), and when that has no code or its first call bails, once more
  // after one turn on the interpreter (the registers' kinds settled).
  int64_t native_from = 0;
  bool retried = false;
  // A prange loop: its native code in chunks on the workers, tried at the
  // first native call (and once more after one interpreted turn when that
  // was the nest's first turn); otherwise it runs as range.
  int parallel_tries = im.parallel && im.plan ? 2 : 0;
  if (im.parallel && !im.plan) note_serial_prange(im.where, im.serial_why);
  if (im.parallel && !native) note_serial_prange(im.where, "TESSERA_NATIVE=0");
  st.roots.push_back(&last);
  st.roots.push_back(&saved_last);
  for (;;) {
    if (interrupt_requested()) break;  // between turns: nothing to undo
    Impl::sweep(st);
    // Mostly array operations (each through the primitive, with a value
    // conversion more than the general path): the rest of the loop, and its
    // later runs, go the general way (between turns: nothing to undo).
    // So do loops over large arrays at once: there their expressions run
    // fused and their operations may run in parallel (here each operation
    // of `result = result * x + c` was a pass over memory of its own).
    if ((st.general_ops > 64 && st.general_ops * 2 > st.inline_ops) || st.large_results > 0) {
      im.prefer_general.store(true, std::memory_order_relaxed);
      break;
    }
    if (since >= kCheckpointTurns || st.undo.size() > kMaxUndo ||
        st.snapshot_elements > (int64_t{1} << 20) ||
        (native && turns >= native_from && since > 0)) {
      checkpoint();
    }
    // After a first turn (the registers' kinds settled), native code for
    // these kinds, run from this checkpoint.
    if (native && turns >= native_from) {
      const NativeCode* code = im.native_for(st);
      if (!code && turns == 0 && !retried) {
        // Registers of functions called inline get their kinds in a turn
        // (an array parameter), so may variables the loop assigns before it
        // reads them: once more after one turn on the interpreter.
        retried = true;
        native_from = 1;
      } else if (!code) {
        if (parallel_tries > 0) note_serial_prange(im.where, "the loop has no native code");
        native = false;
      } else if (parallel_tries > 0) {
        --parallel_tries;
        st.numbers_written_only = false;
        const Impl::Parallel how = im.run_parallel(*code, st, last);
        if (how == Impl::Parallel::done) {
          im.write_back(frame, st);
          result = Impl::to_value(last, st);
          return true;
        }
        if (how == Impl::Parallel::interrupted) break;  // the general path raises at once
        if (turns == 0 && parallel_tries > 0 && !retried) {
          retried = true;
          native_from = 1;
        } else {
          parallel_tries = 0;
        }
        continue;
      } else {
        int64_t undo_count = 0;
        const int32_t status =
            im.run_native(*code, st, last, undo_log, undo_count);
        if (debug() && status != kNativeCheckpoint)
          std::fprintf(stderr, "[fast loops] %s: native code returned %d after turn %lld\n",
                       im.where.c_str(), status, static_cast<long long>(turns));
        if (status == kNativeDone) {
          im.write_back(frame, st);
          result = Impl::to_value(last, st);
          return true;
        }
        if (status == kNativeInterrupt) break;  // the general path raises at once
        if (status == kNativeBailCall) {
          // Back to the checkpoint taken before the call: the logged writes
          // (and arrays copied whole) undone, newest first; the interpreter
          // redoes the turns since, meeting what stopped the native code.
          native_undo(undo_log, undo_count);
          im.rollback(st, objects_before);
          last = saved_last;
          if (turns == 0 && !retried) {
            retried = true;
            native_from = 1;
          } else {
            native = false;
          }
          since = kCheckpointTurns;
          continue;
        }
        if (status == kNativeCheckpoint) {  // a checkpoint, then more native turns
          since = kCheckpointTurns;
          continue;
        }
        // Bail: the registers, counters and the loop's value are as at
        // the start of the turn that stopped, its element writes undone
        // here; the interpreter takes a checkpoint there and redoes that
        // turn, meeting what stopped the native code itself (the checkpoint
        // first: a roll-back from that turn must not go back past the
        // turns the native code did).
        native_undo(undo_log, undo_count);
        native = false;
        since = kCheckpointTurns;
        continue;
      }
    }
    ++since;
    ++turns;
    st.numbers_written_only = false;  // the interpreter's turns write any value
    try {
      if (!truth(im.eval(im.cond, st), st)) {
        im.write_back(frame, st);
        result = Impl::to_value(last, st);
        return true;
      }
      Reg v = im.eval(im.body, st);
      if (st.flow == Impl::State::Flow::brk) {
        im.write_back(frame, st);
        result = Impl::to_value(last, st);
        return true;
      }
      if (st.flow == Impl::State::Flow::cont) {
        st.flow = Impl::State::Flow::normal;
        continue;
      }
      if (!im.value_unused) last = v;
    } catch (const Bail& b) {
      if (debug()) {
        std::fprintf(stderr,
                     "[fast loops] %s: rolled back to the last checkpoint (fastloop.cpp:%d); the "
                     "loop goes on in the general evaluation\n",
                     im.where.c_str(), b.line);
      }
      im.rollback(st, objects_before);
      last = saved_last;
      break;
    }
  }
  im.write_back(frame, st);
  result = Impl::to_value(last, st);
  return false;
}

}  // namespace tessera
