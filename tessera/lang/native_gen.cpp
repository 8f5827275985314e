// Gen (native_gen.hpp): the function itself. Its frame (the context's
// fields, helpers by index, bails, counters), the registers' reads and
// writes, conditions and statements (eval, if, merge), Ctrl-C checks, the
// state handed back to the interpreter, and build(), which emits the whole
// function and merges its counters.
#include "tessera/lang/native_gen.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/CFG.h>

#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_comprehensions.hpp"
#include "tessera/lang/native_dicts.hpp"

namespace tessera::native_gen {

llvm::Value* Gen::field(llvm::Value* base, int64_t offset, llvm::Type* t) {
  llvm::Value* p = b.CreateConstInBoundsGEP1_64(i8, base, static_cast<uint64_t>(offset));
  return b.CreateBitCast(p, t->getPointerTo());
}

llvm::Value* Gen::ctx_ptr(size_t offset) {
  return b.CreateLoad(i8p, field(cptr, static_cast<int64_t>(offset), i8p));
}

llvm::Value* Gen::fptr(void* f, llvm::FunctionType* t) {
  size_t i = 0;
  while (i < std::size(kHelpers) && kHelpers[i] != f) ++i;
  if (i == std::size(kHelpers)) throw Refuse{"internal error: an unknown helper"};
  // Helpers that read a container's length, do math or touch only arrays
  // and the undo log change no list or dict: the views and items' addresses
  // kept stay good across them (a list's len() memo too: len_of_object).
  static const void* const kTouchNoContainer[] = {
      reinterpret_cast<void*>(&native_grow_undo),  reinterpret_cast<void*>(&native_log_range),
      reinterpret_cast<void*>(&native_snapshot),   reinterpret_cast<void*>(&native_unary),
      reinterpret_cast<void*>(&native_float_floordiv),
      reinterpret_cast<void*>(&native_float_mod),  reinterpret_cast<void*>(&native_pow),
      reinterpret_cast<void*>(&native_uniform),    reinterpret_cast<void*>(&native_list_len),
      reinterpret_cast<void*>(&native_container_len),
      reinterpret_cast<void*>(&native_seq_len),    reinterpret_cast<void*>(&native_list2_len),
      reinterpret_cast<void*>(&native_plain_list_len),
      reinterpret_cast<void*>(&native_hypot)};
  if (std::find(std::begin(kTouchNoContainer), std::end(kTouchNoContainer), f) !=
      std::end(kTouchNoContainer))
    return helper_ptr(i, t);
  // Any call but a dict's read may change a dict: the views taken before
  // are looked at again (dict_probe).
  if (f != reinterpret_cast<void*>(&native_dict_find) &&
      f != reinterpret_cast<void*>(&native_dict_view)) {
    llvm::Value* g = dict_epoch_of();
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, g), b.getInt64(1)), g);
  }
  // Any call but a list's read may move a list's items (an append, a copy
  // made before a write, a new object, a sweep): the items' addresses kept
  // by the read sites (list_item) are looked up again.
  if (f != reinterpret_cast<void*>(&native_list_get) &&
      f != reinterpret_cast<void*>(&native_list2_get) &&
      f != reinterpret_cast<void*>(&native_row_read)) {
    llvm::Value* g = list_epoch_of();
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, g), b.getInt64(1)), g);
  }
  return helper_ptr(i, t);
}

llvm::Value* Gen::helper_ptr(size_t i, llvm::FunctionType* t) {
  llvm::Value*& p = helper_at[i];
  if (!p) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* table = e.CreateLoad(
        i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), fn->getArg(0),
                                                          offsetof(NativeCtx, helpers)),
                             i8p->getPointerTo()));
    p = e.CreateLoad(i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), table, 8 * i),
                                          i8p->getPointerTo()));
  }
  return b.CreateBitCast(p, t->getPointerTo());
}

llvm::Type* Gen::type_of(Reg::Kind k) {
  if (is_bool(k)) return i1;
  if (is_int(k)) return i64;
  return f64;
}

llvm::Value* Gen::to_payload(const CV& v) {
  if (v.k == kDyn) return v.p;
  if (v.k == Reg::Arr) return apay(v.arr);
  if (v.k == Reg::Nil || !v.v) return b.getInt64(0);
  if (is_bool(static_cast<Reg::Kind>(v.k))) return b.CreateZExt(v.v, i64);
  if (is_int(static_cast<Reg::Kind>(v.k))) return v.v;
  return b.CreateBitCast(v.v, i64);
}

llvm::Value* Gen::kind_of(const CV& v) {
  if (v.k == kDyn) return v.v;
  if (v.k == kDynF32) return b.CreateSelect(v.s, b.getInt8(Reg::NpF32), b.getInt8(Reg::PyFloat));
  if (v.s) return b.CreateSelect(v.s, b.getInt8(np_kind(static_cast<Reg::Kind>(v.k))), b.getInt8(v.k));
  return b.getInt8(v.k);
}

llvm::Value* Gen::strong_of(const CV& v) {
  return v.s ? v.s : b.getInt1(is_strong(static_cast<Reg::Kind>(v.k)));
}

CV Gen::mk(int py, llvm::Value* v, llvm::Value* s) {
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(s)) {
    return CV{c->isOne() ? np_kind(static_cast<Reg::Kind>(py)) : py, v};
  }
  CV r{py, v};
  r.s = s;
  return r;
}

void Gen::dead_block() {
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "dead", fn));
}

void Gen::bail_if(llvm::Value* cond) {
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(cond); !c || !c->isZero()) ++bails;
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx, "ok", fn);
  b.CreateCondBr(cond, bail, ok, unlikely());
  b.SetInsertPoint(ok);
}

void Gen::count(int slot) {
  // Inside an array expression's element loop: its nodes are counted once
  // after it (count_expr), as the general evaluation counts them.
  if (slot < 0 || elem_t || mute_counts) return;
  auto it = counts.find(slot);
  llvm::Value* a;
  if (it == counts.end()) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    a = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), a);
    counts[slot] = a;
  } else {
    a = it->second;
  }
  b.CreateStore(b.CreateAdd(b.CreateLoad(i64, a), b.getInt64(1)), a);
}

llvm::Value* Gen::truth(const CV& v) {
  switch (v.k) {
    case Reg::PyBool:
    case Reg::NpBool:
      return v.v;
    case Reg::PyInt:
    case Reg::NpInt:
    case Reg::NpI32:
    case Reg::NpI8:
    case Reg::NpU8:
    case Reg::NpI16:
    case Reg::NpU16:
    case Reg::NpU32:
      return b.CreateICmpNE(v.v, b.getInt64(0));
    case Reg::PyFloat:
    case Reg::NpFloat:
    case Reg::NpF32:
    case kDynF32:
      return b.CreateFCmpUNE(v.v, llvm::ConstantFP::get(f64, 0.0));
    default:
      throw Refuse{"the truth of a value of kind " + std::string(v.k == kDyn ? "varying" : kind_name(static_cast<Reg::Kind>(v.k)))};
  }
}

llvm::Value* Gen::cond(const FNode& n) {
  if (n.op != Op::Logic && str_expr(n)) {  // a string's truth: not empty
    CV v = str_value(n);
    return b.CreateICmpNE(v.p, b.getInt64(0));
  }
  if (n.op != Op::Logic) return truth(eval(n));
  CV a = eval(n.kids[0]);
  if (!is_scalar(static_cast<Reg::Kind>(a.k))) throw Refuse{"'and'/'or' of a non-scalar"};
  llvm::Value* ta = truth(a);
  if (a.s) return cond_varying(n, ta, a.s);
  if (is_strong(static_cast<Reg::Kind>(a.k))) {
    llvm::Value* tb = cond(n.kids[1]);
    return n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb);
  }
  // Only the truth is used: the right side's too (a condition of its own).
  return short_circuit(n, ta, [&] { return cond(n.kids[1]); });
}

llvm::Value* Gen::cond_varying(const FNode& n, llvm::Value* ta, llvm::Value* s) {
  llvm::Value* decides = n.is_and ? b.CreateNot(ta) : ta;
  llvm::BasicBlock* from = b.GetInsertBlock();
  llvm::BasicBlock* rhs = llvm::BasicBlock::Create(ctx, "rhs", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "logic", fn);
  b.CreateCondBr(b.CreateAnd(decides, b.CreateNot(s)), done, rhs);
  b.SetInsertPoint(rhs);
  llvm::Value* tb = cond(n.kids[1]);
  llvm::Value* both = n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb);
  llvm::BasicBlock* rhs_end = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode* phi = b.CreatePHI(i1, 2);
  phi->addIncoming(b.getInt1(!n.is_and), from);
  phi->addIncoming(both, rhs_end);
  return phi;
}

void Gen::put_reg(llvm::Value* at, int64_t k, const CV& v) {
  llvm::Value* p = b.CreateInBoundsGEP(i64, at, b.getInt64(2 * k));
  b.CreateStore(b.CreateZExt(kind_of(v), i64), p);
  b.CreateStore(to_payload(v), b.CreateInBoundsGEP(i64, p, b.getInt64(1)));
}

CV Gen::read(int r) {
  Reg::Kind k = kind[r];
  if (k == Reg::Arr) {
    if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
    return CV{Reg::Arr, nullptr, nullptr, r};
  }
  if (k == Reg::Undef) throw Refuse{"a variable is read before the loop assigns it"};
  if (k == Reg::Obj && val[r]) {  // a list's (or another object's) index
    if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
    return CV{Reg::Obj, b.CreateLoad(i64, val[r])};
  }
  if (!is_scalar(k)) throw Refuse{std::string("a variable holds a ") + kind_name(k)};
  if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
  if (f32_reg(r)) {
    CV v{kDynF32, b.CreateLoad(f64, val[r])};
    v.s = b.CreateLoad(i1, strong[r]);
    return v;
  }
  CV v{k, b.CreateLoad(type_of(k), val[r])};
  if (dyn[r]) v.s = b.CreateLoad(i1, strong[r]);
  return v;
}

void Gen::write(int r, const CV& v) {
  if (v.k == Reg::Arr && kind[r] == Reg::Arr && v.arr == r) {  // x = setitem(x, v, i)
    b.CreateStore(b.getInt8(1), asg[r]);
    return;
  }
  if (v.k == Reg::Arr && rebinds[r]) {  // u = u_next
    set_array(r, atype[v.arr], nullptr, nullptr, v.arr);
    return;
  }
  if (v.k == Reg::Arr && kind[r] == Reg::Arr) {
    // An array passed to a function called inline: its parameter's
    // register held it since the call began (any other: the interpreter).
    bail_if(b.CreateICmpNE(apay(r), apay(v.arr)));
    b.CreateStore(b.getInt8(1), asg[r]);
    return;
  }
  if (v.k == Reg::Arr && kind[r] == Reg::Undef && im.vars[static_cast<size_t>(r)].depth < 0 &&
      v.arr >= 0 && kind[v.arr] == Reg::Arr) {
    // A parameter of a function called inline whose call has not run before
    // the code was made (a first turn, a call in a branch not taken yet): it
    // holds the argument's array from here on, its descriptor copied.
    set_array(r, atype[v.arr], nullptr, nullptr, v.arr);
    return;
  }
  if (v.k == Reg::Obj) {  // a list's index (the object itself stays where it is)
    if (kind[r] == Reg::Undef) {
      kind[r] = Reg::Obj;
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      val[r] = e.CreateAlloca(i64);
    }
    if (kind[r] != Reg::Obj || !val[r] || dyn[r])
      throw Refuse{"a variable holds a list and another kind of value"};
    b.CreateStore(v.v, val[r]);
    b.CreateStore(b.getTrue(), def[r]);
    b.CreateStore(b.getInt8(1), asg[r]);
    b.CreateStore(no_held[r] ? b.getInt32(-1) : b.CreateTrunc(v.v, i32),
                  b.CreateConstInBoundsGEP1_64(i32, held, r));
    return;
  }
  if (f32_reg(r) && v.k != kDyn && v.k != Reg::Arr) {
    // Python's float or NumPy's float32 by turns: the value as a double and
    // whether it is a float32 (any other kind: the interpreter's).
    const bool fits = v.k == kDynF32 || v.k == Reg::PyFloat || v.k == Reg::NpF32;
    // A float that is Python's or np.float64 by turns (its own strong bit):
    // the float64 turns are the interpreter's (a third kind).
    if (fits && v.k != kDynF32 && v.s) bail_if(v.s);
    if (kind[r] == Reg::Undef) {
      if (!fits) {
        bail_if(b.getTrue());
        return;
      }
      kind[r] = Reg::PyFloat;
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      val[r] = e.CreateAlloca(f64);
    }
    if (!fits) {
      bail_if(b.getTrue());
      return;
    }
    b.CreateStore(v.v, val[r]);
    b.CreateStore(v.k == kDynF32 ? v.s : b.getInt1(v.k == Reg::NpF32), strong[r]);
    b.CreateStore(b.getTrue(), def[r]);
    b.CreateStore(b.getInt8(1), asg[r]);
    return;
  }
  {
    // A float variable that holds Python's float and NumPy's float32 by
    // turns: generated again with it a DynF32 (first seen here, or in
    // what is assigned).
    const bool f32_family = v.k == kDynF32 || v.k == Reg::PyFloat || v.k == Reg::NpF32;
    const bool settled = kind[r] == Reg::Undef ? v.k != kDynF32 : kind[r] == v.k;
    if (f32_family && !settled &&
        (kind[r] == Reg::Undef || kind[r] == Reg::PyFloat || kind[r] == Reg::NpF32)) {
      if (dyn[r]) throw Refuse{"a variable holds Python's float, np.float64 and np.float32 by turns"};
      throw Retry{r, true};
    }
  }
  if (v.k == kDyn && is_scalar(kind[r]) && !dyn[r]) {
    // A value whose kind is known at run time only (an `if` giving a number
    // or a string, as int()'s parse) into a number variable: its kind, or a bail.
    bail_if(b.CreateICmpNE(v.v, b.getInt8(kind[r])));
    llvm::Value* x = v.p;
    if (is_bool(kind[r]))
      x = b.CreateICmpNE(x, b.getInt64(0));
    else if (is_float(kind[r]))
      x = b.CreateBitCast(x, f64);
    b.CreateStore(x, val[r]);
    b.CreateStore(b.getTrue(), def[r]);
    b.CreateStore(b.getInt8(1), asg[r]);
    return;
  }
  if (v.k == kDyn || !is_scalar(static_cast<Reg::Kind>(v.k))) {
    throw Refuse{std::string("a variable is assigned a value that is not a bool, int or float (") +
                 (v.k == kDyn ? "of a kind known only at run time" : kind_name(static_cast<Reg::Kind>(v.k))) + ")"};
  }
  if (kind[r] == Reg::Undef) {  // first assignment of a variable undefined so far
    kind[r] = dyn[r] ? py_kind(static_cast<Reg::Kind>(v.k)) : static_cast<Reg::Kind>(v.k);
    if (v.s && !dyn[r]) throw Retry{r};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    val[r] = e.CreateAlloca(type_of(kind[r]));
    if (dyn[r]) strong[r] = e.CreateAlloca(i1);
  }
  if (!is_scalar(kind[r])) throw Refuse{"a variable that held no number is assigned one"};
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (py_kind(kind[r]) == py_kind(vk) && (dyn[r] || v.s || kind[r] != vk)) {
    // The same family, Python's or NumPy's kind by turns.
    if (!dyn[r]) throw Retry{r};
    b.CreateStore(v.v, val[r]);
    b.CreateStore(strong_of(v), strong[r]);
    b.CreateStore(b.getTrue(), def[r]);
    b.CreateStore(b.getInt8(1), asg[r]);
    return;
  }
  if (kind[r] != v.k) {
    // The variable changes kind (s = 0, then s += x[i]): the interpreter's.
    bail_if(b.getTrue());
    return;
  }
  b.CreateStore(v.v, val[r]);
  b.CreateStore(b.getTrue(), def[r]);
  b.CreateStore(b.getInt8(1), asg[r]);
}

CV Gen::eval(const FNode& n) {
  CV v = eval_any(n);
  if (v.k == Reg::Obj) throw Refuse{"a list used other than by append, len() or assignment"};
  return v;
}

CV Gen::eval_any(const FNode& n) {
  if (elem_t) {  // an element of an array expression (native_gen_arrexpr.cpp)
    CV l = elem_leaf(n);
    if (l.k != -1) return l;
    if (n.op == Op::Var && lazy.count(n.reg)) return eval_any(*lazy.at(n.reg));
  }
  if (n.op == Op::Var && lazy.count(n.reg))
    throw Refuse{"an array expression's variable used other than by sum, mean, max or min"};
  if (n.op == Op::Assign && lazy.count(n.reg)) {
    lazy_assign(n.reg);
    return CV{Reg::Nil};
  }
  if (n.op != Op::Var && n.op != Op::Assign && str_expr(n)) {
    if (n.op == Op::Call && n.spec->name == "iterate" && n.kids[0].op == Op::Var) {
      // `for c in s`: the string itself (its characters are its items), no copy
      CV o = read(n.kids[0].reg);
      count(n.slot);
      return o;
    }
    // A string the code computed, as a value (assigned, the loop's): an object.
    CV v = str_value(n);
    return CV{Reg::Obj, str_object(v)};
  }
  switch (n.op) {
    case Op::Const:
      switch (n.constant.k) {
        case Reg::PyBool:
          return CV{Reg::PyBool, b.getInt1(n.constant.b)};
        case Reg::PyInt:
          return CV{Reg::PyInt, b.getInt64(static_cast<uint64_t>(n.constant.i))};
        case Reg::PyFloat:
          return CV{Reg::PyFloat, llvm::ConstantFP::get(f64, n.constant.f)};
        case Reg::Obj:
          throw Refuse{"a constant that is not a number (a slice, a string)"};
        default:
          return CV{Reg::Nil};
      }
    case Op::Var:
      return read(n.reg);
    case Op::Assign: {
      if (views.count(n.reg)) {
        view_assign(n.reg);
        return CV{Reg::Nil};
      }
      if (auto row = rows.find(n.reg); row != rows.end()) {
        set_row(n.reg, row->second, n.kids[0]);
        return CV{Reg::Nil};
      }
      if (unpack_regs.count(n.reg)) {
        unpack_assign(n);
        return CV{Reg::Nil};
      }
      ArrT t;
      if (rebinds[n.reg] && alloc_type(n.kids[0], t)) {
        alloc_into(n.reg, n.kids[0], t);
        return CV{Reg::Arr, nullptr, nullptr, n.reg};
      }
      CV v = eval_any(n.kids[0]);
      if (v.k == Reg::Obj && item_kind[n.reg] < 0) {
        // `x = block(..., acc)` (sum() of a comprehension): acc's items' kind
        // (known once its append is emitted); `_it = iterate(x)`, `a + b`.
        item_kind[n.reg] = expr_item_kind(n.kids[0]);
      }
      if (n.returned && v.k == Reg::Nil) {  // a function's None: the interpreter's
        bail_if(b.getTrue());
        return v;
      }
      write(n.reg, v);
      return v;
    }
    case Op::Block: {
      CV last{Reg::Nil};
      for (const FNode& k : n.kids) last = eval_any(k);
      return last;
    }
    case Op::If:
      return if_(n);
    case Op::While:
      return while_(n);
    case Op::Break:
    case Op::Continue: {
      if (loops.empty()) throw Refuse{"break outside a loop"};
      b.CreateBr(n.op == Op::Break ? loops.back().brk : loops.back().cont);
      dead_block();
      return CV{Reg::Nil};
    }
    case Op::Logic: {
      CV a = eval(n.kids[0]);
      const auto ka = static_cast<Reg::Kind>(a.k);
      if (!is_scalar(ka)) throw Refuse{"'and'/'or' of a non-scalar"};
      if (a.s) throw Refuse{"'and'/'or' of a number whose kind varies"};
      llvm::Value* ta = truth(a);
      if (is_strong(ka)) {
        CV c = eval(n.kids[1]);
        if (!is_scalar(static_cast<Reg::Kind>(c.k))) throw Refuse{"'and'/'or' of a non-scalar"};
        llvm::Value* tb = truth(c);
        return CV{Reg::NpBool, n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb)};
      }
      // Python-like left side: short-circuits; both sides Python-like.
      return CV{Reg::PyBool, short_circuit(n, ta, [&] {
                  CV c = eval(n.kids[1]);
                  const auto kc = static_cast<Reg::Kind>(c.k);
                  if (!is_scalar(kc) || is_strong(kc) || c.s)
                    throw Refuse{"'and'/'or' whose value's kind varies"};
                  return truth(c);
                })};
    }
    case Op::Binary:
      return binary(n);
    case Op::GetItem:
      return getitem(n);
    case Op::SetItem:
      return setitem(n);
    case Op::AsType:
      return astype(n);
    case Op::Call:
      return call(n);
    case Op::NewList:
      return new_list(n);
    case Op::NewDict:
      return new_dict(n);
    case Op::Append:
      return append(n);
    case Op::NativeCall:
      return native_call(n);
    case Op::Uniform: {
      auto* t = llvm::FunctionType::get(f64, {i8p}, false);
      uniform_draws = true;
      llvm::Value* r = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_uniform), t), {cptr});
      count(n.slot);
      return CV{Reg::NpFloat, r};
    }
    default:
      throw Refuse{"an operation without native code"};
  }
}

CV Gen::merge(const CV& a, llvm::BasicBlock* ba, const CV& c, llvm::BasicBlock* bc) {
  const bool numbers = a.k != kDyn && c.k != kDyn && is_scalar(static_cast<Reg::Kind>(a.k)) &&
                       is_scalar(static_cast<Reg::Kind>(c.k));
  // (a float that is Python's or np.float64 by turns, `s` its own, is not of the family)
  auto f32_family = [](const CV& v) {
    return v.k == kDynF32 || (!v.s && (v.k == Reg::PyFloat || v.k == Reg::NpF32));
  };
  if ((a.k == kDynF32 || c.k == kDynF32) && f32_family(a) && f32_family(c)) {
    // Python's float or NumPy's float32 by turns from either branch.
    auto sa = [&](llvm::BasicBlock* from, const CV& v) {
      auto ip = b.saveIP();
      b.SetInsertPoint(from->getTerminator());
      llvm::Value* r = v.k == kDynF32 ? v.s : b.getInt1(v.k == Reg::NpF32);
      b.restoreIP(ip);
      return r;
    };
    llvm::Value* s1 = sa(ba, a);
    llvm::Value* s2 = sa(bc, c);
    llvm::PHINode* phi = b.CreatePHI(f64, 2);
    phi->addIncoming(a.v, ba);
    phi->addIncoming(c.v, bc);
    llvm::PHINode* ps = b.CreatePHI(i1, 2);
    ps->addIncoming(s1, ba);
    ps->addIncoming(s2, bc);
    CV r{kDynF32, phi};
    r.s = ps;
    return r;
  }
  if (numbers && py_kind(static_cast<Reg::Kind>(a.k)) == py_kind(static_cast<Reg::Kind>(c.k)) &&
      (a.s || c.s || a.k != c.k)) {
    auto sa = [&](llvm::BasicBlock* from, const CV& v) {
      auto ip = b.saveIP();
      b.SetInsertPoint(from->getTerminator());
      llvm::Value* r = strong_of(v);
      b.restoreIP(ip);
      return r;
    };
    llvm::Value* s1 = sa(ba, a);
    llvm::Value* s2 = sa(bc, c);
    llvm::PHINode* phi = b.CreatePHI(a.v->getType(), 2);
    phi->addIncoming(a.v, ba);
    phi->addIncoming(c.v, bc);
    llvm::PHINode* ps = b.CreatePHI(i1, 2);
    ps->addIncoming(s1, ba);
    ps->addIncoming(s2, bc);
    CV r{py_kind(static_cast<Reg::Kind>(a.k)), phi};
    r.s = ps;
    return r;
  }
  if (a.k == c.k && a.k != kDyn && a.k != Reg::Arr) {
    if (a.k == Reg::Nil) return a;
    llvm::PHINode* phi = b.CreatePHI(a.v->getType(), 2);
    phi->addIncoming(a.v, ba);
    phi->addIncoming(c.v, bc);
    return CV{a.k, phi};
  }
  if (a.k == Reg::Arr && c.k == Reg::Arr && a.arr == c.arr) return a;
  // Kinds differ: a kind known at run time.
  auto kp = [&](llvm::BasicBlock* from, const CV& v) -> std::pair<llvm::Value*, llvm::Value*> {
    auto ip = b.saveIP();
    b.SetInsertPoint(from->getTerminator());
    auto r = std::make_pair(kind_of(v), to_payload(v));
    b.restoreIP(ip);
    return r;
  };
  auto [ka, pa] = kp(ba, a);
  auto [kc, pc] = kp(bc, c);
  llvm::PHINode* pk = b.CreatePHI(i8, 2);
  pk->addIncoming(ka, ba);
  pk->addIncoming(kc, bc);
  llvm::PHINode* pp = b.CreatePHI(i64, 2);
  pp->addIncoming(pa, ba);
  pp->addIncoming(pc, bc);
  return CV{kDyn, pk, pp};
}

CV Gen::if_(const FNode& n) {
  if (n.returned) {
    // A function's returned value or its end's (fastloop_compile.cpp,
    // compile_call): one never a number here (None, or not assigned so
    // far) bails where it is taken, the other is the value.
    const auto number = [&](const FNode& k) { return is_scalar(kind[k.reg]); };
    const auto none = [&](const FNode& k) { return kind[k.reg] == Reg::Undef || kind[k.reg] == Reg::Obj; };
    if (number(n.kids[1]) && none(n.kids[2])) {
      bail_if(b.CreateNot(cond(n.kids[0])));
      return read(n.kids[1].reg);
    }
    if (number(n.kids[2]) && none(n.kids[1])) {
      bail_if(cond(n.kids[0]));
      return read(n.kids[2].reg);
    }
  }
  if (const int t = static_truth(n.kids[0]); t >= 0) {
    // type(x) == "string" and the like, of a kind known here: the condition
    // counted, the branch taken alone (the other may have no native code).
    cond(n.kids[0]);
    if (t) return eval_any(n.kids[1]);
    return n.kids.size() > 2 ? eval_any(n.kids[2]) : CV{Reg::Nil};
  }
  const bool then_bails = n.kids[1].op == Op::Bail;
  const bool else_bails = n.kids.size() > 2 && n.kids[2].op == Op::Bail;
  if (then_bails || else_bails) {
    // A branch left to the general evaluation (fastloop_compile.cpp, compile_branch):
    // taking it bails; the other branch is the if's value.
    llvm::Value* c = cond(n.kids[0]);
    if (then_bails && else_bails) {
      bail_if(b.getTrue());
      return CV{Reg::Nil};
    }
    if (then_bails) {
      bail_if(c);
      return n.kids.size() > 2 ? eval_any(n.kids[2]) : CV{Reg::Nil};
    }
    bail_if(b.CreateNot(c));
    return eval_any(n.kids[1]);
  }
  llvm::Value* c = cond(n.kids[0]);
  llvm::BasicBlock* then_b = llvm::BasicBlock::Create(ctx, "then", fn);
  llvm::BasicBlock* else_b = llvm::BasicBlock::Create(ctx, "else", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "endif", fn);
  b.CreateCondBr(c, then_b, else_b);
  b.SetInsertPoint(then_b);
  CV tv = eval_any(n.kids[1]);
  llvm::BasicBlock* then_end = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(else_b);
  CV ev{Reg::Nil};
  if (n.kids.size() > 2) ev = eval_any(n.kids[2]);
  llvm::BasicBlock* else_end = b.GetInsertBlock();
  b.CreateBr(done);
  b.SetInsertPoint(done);
  return merge(tv, then_end, ev, else_end);
}

void Gen::interrupt_check(llvm::BasicBlock* on_interrupt) {
  if (!interrupt_at) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    interrupt_at = e.CreateLoad(
        i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), fn->getArg(0),
                                                          offsetof(NativeCtx, interrupt)),
                             i8p->getPointerTo()));
  }
  llvm::Value* flag = interrupt_at;
  llvm::LoadInst* l = b.CreateLoad(i8, flag);
  l->setAtomic(llvm::AtomicOrdering::Monotonic);
  l->setAlignment(llvm::Align(1));
  llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "go", fn);
  b.CreateCondBr(b.CreateICmpNE(l, b.getInt8(0)), on_interrupt, go, unlikely());
  b.SetInsertPoint(go);
}

void Gen::merge_counters() {
  std::map<llvm::Value*, int> ctr;  // alloca -> index
  std::vector<llvm::Value*> allocas;
  for (auto& [slot, a] : counts) {
    ctr[a] = static_cast<int>(allocas.size());
    allocas.push_back(a);
  }
  if (allocas.size() < 2) return;
  const size_t nc = allocas.size();
  struct Inc {
    llvm::LoadInst* ld;
    llvm::Instruction* add;
    llvm::StoreInst* st;
  };
  std::vector<std::vector<Inc>> incs(nc);
  std::vector<bool> other_write(nc, false);
  std::set<llvm::LoadInst*> inc_loads;
  llvm::BasicBlock* entry = &fn->getEntryBlock();
  auto ctr_of = [&](llvm::Value* p) {
    auto it = ctr.find(p);
    return it == ctr.end() ? -1 : it->second;
  };
  for (llvm::BasicBlock& bb : *fn) {
    for (llvm::Instruction& i : bb) {
      auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
      if (!st) continue;
      const int c = ctr_of(st->getPointerOperand());
      if (c < 0) continue;
      auto* add = llvm::dyn_cast<llvm::BinaryOperator>(st->getValueOperand());
      auto* one = add ? llvm::dyn_cast<llvm::ConstantInt>(add->getOperand(1)) : nullptr;
      auto* ld = add ? llvm::dyn_cast<llvm::LoadInst>(add->getOperand(0)) : nullptr;
      if (add && add->getOpcode() == llvm::Instruction::Add && one && one->isOne() && ld &&
          ld->getPointerOperand() == st->getPointerOperand() && ld->hasOneUse() &&
          add->hasOneUse() && ld->getParent() == &bb && add->getParent() == &bb) {
        incs[c].push_back({ld, add, st});
        inc_loads.insert(ld);
      } else if (!(&bb == entry && llvm::isa<llvm::ConstantInt>(st->getValueOperand()) &&
                   llvm::cast<llvm::ConstantInt>(st->getValueOperand())->isZero())) {
        other_write[c] = true;
      }
    }
  }
  // Blocks from which a read of a counter can be reached ("loud").
  std::set<llvm::BasicBlock*> loud;
  std::vector<llvm::BasicBlock*> work;
  std::map<llvm::BasicBlock*, std::vector<std::pair<llvm::Instruction*, int>>> reads;
  for (llvm::BasicBlock& bb : *fn) {
    for (llvm::Instruction& i : bb) {
      auto* ld = llvm::dyn_cast<llvm::LoadInst>(&i);
      if (!ld || inc_loads.count(ld)) continue;
      const int c = ctr_of(ld->getPointerOperand());
      if (c < 0) continue;
      reads[&bb].push_back({ld, c});
      if (loud.insert(&bb).second) work.push_back(&bb);
    }
  }
  while (!work.empty()) {
    llvm::BasicBlock* bb = work.back();
    work.pop_back();
    for (llvm::BasicBlock* pred : llvm::predecessors(bb))
      if (loud.insert(pred).second) work.push_back(pred);
  }
  // Regions: a block continues its single predecessor's region when the
  // predecessor's other successors are quiet. Positions count along the
  // region (block order within it, then the instruction).
  std::map<llvm::BasicBlock*, std::pair<llvm::BasicBlock*, int64_t>> region;  // head, offset
  std::function<std::pair<llvm::BasicBlock*, int64_t>(llvm::BasicBlock*)> head_of =
      [&](llvm::BasicBlock* bb) -> std::pair<llvm::BasicBlock*, int64_t> {
    if (auto it = region.find(bb); it != region.end()) return it->second;
    std::pair<llvm::BasicBlock*, int64_t> r{bb, 0};
    region[bb] = r;  // a cycle of single predecessors ends here
    llvm::BasicBlock* pred = bb->getSinglePredecessor();
    if (pred && pred != bb) {
      bool quiet = true;
      for (llvm::BasicBlock* succ : llvm::successors(pred))
        if (succ != bb && loud.count(succ)) quiet = false;
      if (quiet) {
        auto ph = head_of(pred);
        if (ph.first != bb) r = {ph.first, ph.second + static_cast<int64_t>(pred->size()) + 1};
      }
    }
    region[bb] = r;
    return r;
  };
  std::map<llvm::Instruction*, int64_t> index;
  for (llvm::BasicBlock& bb : *fn) {
    int64_t k = 0;
    for (llvm::Instruction& i : bb) index[&i] = k++;
  }
  for (llvm::BasicBlock& bb : *fn) head_of(&bb);  // before any increment is erased
  auto pos = [&](llvm::Instruction* i) {
    auto h = head_of(i->getParent());
    return std::make_pair(h.first, h.second + index[i]);
  };
  // Counters grouped by how often each region increments them.
  std::map<std::map<llvm::BasicBlock*, int>, std::vector<int>> groups;
  for (size_t c = 0; c < nc; ++c) {
    if (other_write[c] || incs[c].empty()) continue;
    std::map<llvm::BasicBlock*, int> sig;
    for (const Inc& in : incs[c]) ++sig[pos(in.ld).first];
    groups[sig].push_back(static_cast<int>(c));
  }
  for (auto& [sig, members] : groups) {
    if (members.size() < 2) continue;
    // The span of the group's increments in each region; a read inside it
    // may see members apart.
    std::map<llvm::BasicBlock*, std::pair<int64_t, int64_t>> span;
    for (int c : members) {
      for (const Inc& in : incs[c]) {
        auto a = pos(in.ld);
        auto z = pos(in.st);
        auto [it, fresh] = span.try_emplace(a.first, a.second, z.second);
        if (!fresh) {
          it->second.first = std::min(it->second.first, a.second);
          it->second.second = std::max(it->second.second, z.second);
        }
      }
    }
    std::set<int> in_group(members.begin(), members.end());
    bool apart = false;
    for (auto& [bb, rs] : reads) {
      for (auto& [ld, c] : rs) {
        if (!in_group.count(c)) continue;
        auto p = pos(ld);
        auto it = span.find(p.first);
        if (it != span.end() && p.second > it->second.first && p.second < it->second.second)
          apart = true;
      }
    }
    if (apart) continue;
    llvm::Value* rep = allocas[members[0]];
    for (size_t m = 1; m < members.size(); ++m) {
      const int c = members[m];
      for (const Inc& in : incs[c]) {
        in.st->eraseFromParent();
        in.add->eraseFromParent();
        in.ld->eraseFromParent();
      }
      incs[c].clear();
      for (auto& [bb, rs] : reads)
        for (auto& [ld, rc] : rs)
          if (rc == c) llvm::cast<llvm::LoadInst>(ld)->setOperand(0, rep);
    }
  }
}

void Gen::store_state(const Getter& get) {
  const size_t nr = regs.size();
  llvm::Value* cp = ctx_ptr(offsetof(NativeCtx, counts));
  for (size_t r = 0; r < nr; ++r) {
    if (slot_base[r] && kind[r] == Reg::Arr && rows.count(static_cast<int>(r))) {
      store_row(static_cast<int>(r), get);
      continue;
    }
    if (slot_base[r] && kind[r] == Reg::Arr) {  // an array register that may change
      llvm::Value* d = get(def[r], i1);
      b.CreateStore(b.CreateSelect(d, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef)),
                    field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
      b.CreateStore(get(slot_pay[r], i64),
                    field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
      b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
      continue;
    }
    if (kind[r] == Reg::Obj && val[r]) {
      store_obj(r, get(def[r], i1), get(val[r], i64));
      b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
      continue;
    }
    if (!is_scalar(kind[r])) continue;
    llvm::Value* kp = field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8);
    llvm::Value* d = get(def[r], i1);
    CV cv{kind[r], get(val[r], type_of(kind[r]))};
    if (dyn[r]) cv.s = get(strong[r], i1);
    if (f32_reg(r)) cv.k = kDynF32;
    b.CreateStore(b.CreateSelect(d, kind_of(cv), b.getInt8(Reg::Undef)), kp);
    b.CreateStore(to_payload(cv), field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
    b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
  }
  for (auto& [slot, a] : counts) {
    llvm::Value* p = field(cp, static_cast<int64_t>(slot) * 8, i64);
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, p), get(a, i64)), p);
  }
  b.CreateStore(get(last_k, i8), field(cptr, offsetof(NativeCtx, last), i8));
  b.CreateStore(get(last_p, i64), field(cptr, offsetof(NativeCtx, last) + 8, i64));
  b.CreateStore(b.CreateLoad(i64, undo_n), field(cptr, offsetof(NativeCtx, undo_n), i64));
}

void Gen::store_row(int r, const Getter& get) {
  const RowOf& row = rows.at(r);
  llvm::Value* d = get(def[r], i1);
  llvm::Value* pay = get(slot_pay[r], i64);
  llvm::Value* off = row_off.count(r) ? get(row_off[r], i64) : b.getInt64(0);
  llvm::BasicBlock* from = b.GetInsertBlock();
  llvm::BasicBlock* make = llvm::BasicBlock::Create(ctx, "row_entry", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "row_stored", fn);
  b.CreateCondBr(b.CreateAnd(d, b.CreateICmpSLT(pay, b.getInt64(0))), make, done);
  b.SetInsertPoint(make);
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64, i64}, false);
  llvm::Value* made =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_row_view), ft),
                   {cptr, apay(row.from), off, b.getInt64(static_cast<int64_t>(row.nidx))});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode* entry = b.CreatePHI(i64, 2);
  entry->addIncoming(pay, from);
  entry->addIncoming(made, make);
  llvm::Value* held = b.CreateAnd(d, b.CreateICmpSGE(entry, b.getInt64(0)));
  b.CreateStore(b.CreateSelect(held, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef)),
                field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
  b.CreateStore(entry, field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
  b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
}

void Gen::store_obj(size_t r, llvm::Value* d, llvm::Value* index) {
  b.CreateStore(b.CreateSelect(d, b.getInt8(Reg::Obj), b.getInt8(Reg::Undef)),
                field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
  b.CreateStore(b.CreateAnd(index, b.getInt64(0xffffffff)),
                field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
}

std::map<llvm::Value*, llvm::Value*> Gen::snapshot(llvm::BasicBlock* at) {
  auto ip = b.saveIP();
  b.SetInsertPoint(&*at->getFirstInsertionPt());
  std::map<llvm::Value*, llvm::Value*> at_start;
  auto snap = [&](llvm::Value* a, llvm::Type* t) {
    if (a && !at_start.count(a)) at_start[a] = b.CreateLoad(t, a);
  };
  for (size_t r = 0; r < regs.size(); ++r) {
    if (slot_base[r] && kind[r] == Reg::Arr) {
      snap(def[r], i1);
      snap(slot_pay[r], i64);
      snap(asg[r], i8);
      if (row_off.count(static_cast<int>(r))) snap(row_off[static_cast<int>(r)], i64);
      continue;
    }
    if (kind[r] == Reg::Obj && val[r]) {
      snap(def[r], i1);
      snap(val[r], i64);
      snap(asg[r], i8);
      continue;
    }
    if (!is_scalar(kind[r])) continue;
    snap(def[r], i1);
    snap(val[r], type_of(kind[r]));
    if (dyn[r]) snap(strong[r], i1);
    snap(asg[r], i8);
  }
  for (auto& [slot, a] : counts) snap(a, i64);
  snap(last_k, i8);
  snap(last_p, i64);
  b.restoreIP(ip);
  return at_start;
}

void Gen::sweep_point() {
  llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "sweep", fn);
  llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "swept", fn);
  b.CreateCondBr(b.CreateLoad(i1, made_any), go, next, unlikely());
  b.SetInsertPoint(go);
  sweeps.push_back(go);
  for (size_t r = 0; r < regs.size(); ++r) {
    if (!slot_base[r]) continue;
    llvm::Value* holds = b.CreateLoad(i1, def[r]);
    if (rows.count(static_cast<int>(r)))  // a row not made an entry holds none
      holds = b.CreateAnd(holds, b.CreateICmpSGE(b.CreateLoad(i64, slot_pay[r]), b.getInt64(0)));
    llvm::Value* k = b.CreateSelect(holds, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef));
    b.CreateStore(k, field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
    b.CreateStore(b.CreateLoad(i64, slot_pay[r]),
                  field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
  }
  b.CreateStore(b.CreateLoad(i8, last_k), field(cptr, offsetof(NativeCtx, last), i8));
  b.CreateStore(b.CreateLoad(i64, last_p), field(cptr, offsetof(NativeCtx, last) + 8, i64));
  auto* ft = llvm::FunctionType::get(b.getVoidTy(), {i8p}, false);
  b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_sweep), ft), {cptr});
  b.CreateStore(b.getFalse(), made_any);
  b.CreateBr(next);
  b.SetInsertPoint(next);
}

void Gen::body_turn() {
  if (makes_arrays) sweep_point();
  CV v = eval_any(loop_body);
  b.CreateStore(kind_of(v), last_k);
  b.CreateStore(to_payload(v), last_p);
}

void Gen::byte_span(int q, llvm::Value*& lo, llvm::Value*& hi) {
  const ArrT& e = atype[q];
  llvm::Value* neg = b.getInt64(0);
  llvm::Value* pos = b.getInt64(0);
  for (int d = 0; d < e.nd; ++d) {
    llvm::Value* reach = b.CreateMul(b.CreateSub(ashape(q, d), b.getInt64(1)), astride(q, d));
    neg = b.CreateAdd(neg, b.CreateSelect(b.CreateICmpSLT(reach, b.getInt64(0)), reach, b.getInt64(0)));
    pos = b.CreateAdd(pos, b.CreateSelect(b.CreateICmpSGT(reach, b.getInt64(0)), reach, b.getInt64(0)));
  }
  const int64_t size = dtype_size(e.dt);
  llvm::Value* base = b.CreatePtrToInt(abase(q), i64);
  lo = b.CreateAdd(base, b.CreateMul(neg, b.getInt64(size)));
  hi = b.CreateAdd(base, b.CreateMul(b.CreateAdd(pos, b.getInt64(1)), b.getInt64(size)));
}

llvm::Value* Gen::shares_memory(int r) {
  auto span = [&](int q, llvm::Value*& lo, llvm::Value*& hi) { byte_span(q, lo, hi); };
  if (!atype[r].indexable) return b.getTrue();
  llvm::Value *lo, *hi;
  span(r, lo, hi);
  llvm::Value* shared = b.getFalse();
  for (size_t q = 0; q < regs.size(); ++q) {
    if (static_cast<int>(q) == r || kind[q] != Reg::Arr || regs[q].k != Reg::Arr) continue;
    if (!atype[q].indexable) return b.getTrue();
    llvm::Value *qlo, *qhi;
    span(static_cast<int>(q), qlo, qhi);
    shared = b.CreateOr(shared, b.CreateAnd(b.CreateICmpULT(lo, qhi), b.CreateICmpULT(qlo, hi)));
  }
  return shared;
}

void Gen::build(const std::string& name) {
  auto* ft = llvm::FunctionType::get(i32, {i8p}, false);
  fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, mod);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr("target-cpu", jit().cpu);
  fn->addFnAttr("target-features", jit().features);
  llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  b.SetInsertPoint(entry);
  cptr = fn->getArg(0);
  const size_t nr = regs.size();
  kind.resize(nr);
  maybe_undef.resize(nr);
  val.assign(nr, nullptr);
  def.assign(nr, nullptr);
  asg.assign(nr, nullptr);
  arr_base.assign(nr, nullptr);
  arr_shape.assign(nr, {});
  arr_stride.assign(nr, {});
  arr_payload.assign(nr, nullptr);
  atype.assign(nr, ArrT{});
  slot_base.assign(nr, nullptr);
  slot_pay.assign(nr, nullptr);
  slot_fresh.assign(nr, nullptr);
  slot_shape.assign(nr, {});
  slot_stride.assign(nr, {});
  find_rebinds();
  for (const auto& [r, row] : rows) rebinds[static_cast<size_t>(r)] = true;
  find_const_only();
  find_lists();
  find_unpacks();
  find_comprehensions();
  find_views();
  strong.assign(nr, nullptr);
  regp = ctx_ptr(offsetof(NativeCtx, regs));
  asgp = ctx_ptr(offsetof(NativeCtx, assigned));
  llvm::Value* arrp = ctx_ptr(offsetof(NativeCtx, arrays));
  for (size_t r = 0; r < nr; ++r) {
    const Reg::Kind k = regs[r].k;
    kind[r] = k;
    maybe_undef[r] = k == Reg::Undef;
    def[r] = b.CreateAlloca(i1);
    b.CreateStore(b.getInt1(k != Reg::Undef), def[r]);
    asg[r] = b.CreateAlloca(i8);
    b.CreateStore(b.CreateLoad(i8, b.CreateConstInBoundsGEP1_64(i8, asgp, r)), asg[r]);
    llvm::Value* payload = field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64);
    if (dyn[r]) {
      strong[r] = b.CreateAlloca(i1);
      b.CreateStore(b.getInt1(is_strong(k)), strong[r]);
      kind[r] = py_kind(k);
    }
    if (f32_reg(r)) {  // a DynF32: Python's float or NumPy's float32 at the start
      if (k != Reg::Undef && k != Reg::PyFloat && k != Reg::NpF32)
        throw Refuse{std::string("a float variable that is np.float32 by turns holds a ") +
                     kind_name(k)};
      if (k != Reg::Undef) kind[r] = Reg::PyFloat;
    }
    if (is_scalar(k)) {
      val[r] = b.CreateAlloca(type_of(k));
      llvm::Value* x = b.CreateLoad(i64, payload);
      if (is_bool(k))
        x = b.CreateICmpNE(b.CreateTrunc(x, i8), b.getInt8(0));
      else if (is_float(k))
        x = b.CreateBitCast(x, f64);
      b.CreateStore(x, val[r]);
    } else if (k == Reg::Arr) {
      arr_payload[r] = b.CreateLoad(i64, payload);
      const ArrEntry& ae = arrays[regs[r].a];
      atype[r] = ArrT{ae.dt, ae.nd, ae.writable, ae.indexable, native_unit_last(ae)};
      const int64_t at = static_cast<int64_t>(r * sizeof(NativeArray));
      arr_base[r] = b.CreateLoad(i8p, field(arrp, at + offsetof(NativeArray, base), i8p));
      for (int d = 0; d < kMaxDims; ++d) {
        arr_shape[r].push_back(b.CreateLoad(
            i64, field(arrp, at + offsetof(NativeArray, shape) + 8 * d, i64)));
        arr_stride[r].push_back(b.CreateLoad(
            i64, field(arrp, at + offsetof(NativeArray, strides) + 8 * d, i64)));
      }
      if (rebinds[r]) ensure_slots(static_cast<int>(r));
    } else if (k == Reg::Obj && lists) {
      val[r] = b.CreateAlloca(i64);
      b.CreateStore(b.CreateSExt(b.CreateTrunc(b.CreateLoad(i64, payload), i32), i64), val[r]);
    } else if (k != Reg::Undef) {
      kind[r] = Reg::Obj;  // Nil, objects: only if the loop never reads or writes it
    }
  }
  // Row variables unassigned at the start: their kind and slots already
  // (a read before the turn's assignment, on a turn after the first,
  // reads the row of the turn before; on the first, a bail).
  for (const auto& [r, row] : rows) {
    const auto ru = static_cast<size_t>(r);
    if (kind[ru] != Reg::Undef || kind[static_cast<size_t>(row.fixed)] != Reg::Arr) continue;
    const ArrT& xt = atype[static_cast<size_t>(row.fixed)];
    if (!xt.indexable || xt.nd <= static_cast<int>(row.nidx)) continue;
    kind[ru] = Reg::Arr;
    atype[ru] = ArrT{xt.dt, xt.nd - static_cast<int>(row.nidx), xt.writable, true, xt.unit_last};
    ensure_slots(r);
  }
  find_lazy();
  if (lists) {
    held = b.CreateAlloca(i32, b.getInt32(static_cast<uint32_t>(std::max<size_t>(nr, 1))));
    for (size_t r = 0; r < nr; ++r) {
      b.CreateStore(val[r] && kind[r] == Reg::Obj && !no_held[r]
                        ? b.CreateTrunc(b.CreateLoad(i64, val[r]), i32)
                        : b.getInt32(-1),
                    b.CreateConstInBoundsGEP1_64(i32, held, r));
    }
  }
  undo_ptr = b.CreateAlloca(i8p);
  undo_n = b.CreateAlloca(i64);
  undo_cap = b.CreateAlloca(i64);
  b.CreateStore(ctx_ptr(offsetof(NativeCtx, undo)), undo_ptr);
  b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_n), i64)), undo_n);
  b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
  llvm::Value* max_turns = b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, max_turns), i64));
  llvm::Value* max_undo = b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, max_undo), i64));
  last_k = b.CreateAlloca(i8);
  last_p = b.CreateAlloca(i64);
  b.CreateStore(b.CreateLoad(i8, field(cptr, offsetof(NativeCtx, last), i8)), last_k);
  b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, last) + 8, i64)), last_p);
  llvm::Value* turns = b.CreateAlloca(i64);
  b.CreateStore(b.getInt64(0), turns);
  made_any = b.CreateAlloca(i1);
  b.CreateStore(b.getFalse(), made_any);

  bail = llvm::BasicBlock::Create(ctx, "bail", fn);
  exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  llvm::BasicBlock* top = llvm::BasicBlock::Create(ctx, "top", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "done", fn);
  llvm::BasicBlock* checkpoint = llvm::BasicBlock::Create(ctx, "checkpoint", fn);
  interrupted = llvm::BasicBlock::Create(ctx, "interrupted", fn);
  RangeLoop rl;
  // A range loop with lists goes through the general turns (a bail there
  // goes back to the call's start, where the interpreter's roll-back
  // takes back the lists' changes; top_range's goes to the turn's start).
  const bool ranged = range_loop(loop_cond, loop_body, rl);
  if (lazy_build) need_full = llvm::BasicBlock::Create(ctx, "need_full", fn);
  if (ranged && (rl.loops_in || !lists)) {
    if (rl.loops_in)
      top_nest(rl, top, done, checkpoint, interrupted, turns);
    else
      top_range(rl, top, done, checkpoint, interrupted, turns);
  } else if (ranged && !makes_arrays) {
    top_lists(rl, or_full(top, nullptr, kSiteLists), done, checkpoint, interrupted, max_turns, turns);
  } else {
    if (lazy_build) throw NoLazy{};
    b.CreateBr(top);
  }

  // Between two turns: Ctrl-C, the limits, then the condition (none in a
  // lazy build: what the checks before the loop do not admit is left to the
  // whole code).
  if (top->use_empty()) {
    top->eraseFromParent();
  } else {
    b.SetInsertPoint(top);
    interrupt_check(interrupted);
    llvm::Value* t = b.CreateLoad(i64, turns);
    llvm::BasicBlock* turn = llvm::BasicBlock::Create(ctx, "turn", fn);
    llvm::Value* logged = b.CreateAdd(
        b.CreateLoad(i64, undo_n),
        b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, range_units), i64)));
    b.CreateCondBr(b.CreateOr(b.CreateICmpSGE(t, max_turns), b.CreateICmpSGE(logged, max_undo)),
                   checkpoint, turn, unlikely());
    b.SetInsertPoint(turn);
    b.CreateStore(b.CreateAdd(t, b.getInt64(1)), turns);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "outer_body", fn);
    b.CreateCondBr(cond(loop_cond), body, done);
    b.SetInsertPoint(body);
    loops.push_back({top, done, nullptr, nullptr});
    body_turn();
    loops.pop_back();
    b.CreateBr(top);
  }

  auto exit_with = [&](llvm::BasicBlock* bb, int code) {
    b.SetInsertPoint(bb);
    b.CreateBr(exit);
    exit_code->addIncoming(b.getInt32(code), bb);
  };
  b.SetInsertPoint(exit);
  exit_code = b.CreatePHI(i32, 3);
  exit_with(done, kNativeDone);
  exit_with(checkpoint, kNativeCheckpoint);
  exit_with(interrupted, kNativeInterrupt);
  // The registers, counters and the loop's value back, as they are.
  b.SetInsertPoint(exit);
  store_state([&](llvm::Value* a, llvm::Type* t) { return b.CreateLoad(t, a); });
  b.CreateRet(exit_code);
  // A bail: back to the call's start (the caller undoes the log; the
  // registers in the context were not written).
  b.SetInsertPoint(bail);
  b.CreateStore(b.CreateLoad(i64, undo_n), field(cptr, offsetof(NativeCtx, undo_n), i64));
  b.CreateRet(b.getInt32(kNativeBailCall));
  if (need_full) {  // the same, for the caller to run the whole code from the call's start
    b.SetInsertPoint(need_full);
    b.CreateStore(b.CreateLoad(i64, undo_n), field(cptr, offsetof(NativeCtx, undo_n), i64));
    b.CreateRet(b.getInt32(kNativeNeedFull));
  }
  // The object registers to the context before each sweep (their kinds
  // are all known now).
  for (llvm::BasicBlock* go : sweeps) {
    b.SetInsertPoint(&*go->getFirstInsertionPt());
    for (size_t r = 0; r < regs.size(); ++r)
      if (kind[r] == Reg::Obj && val[r])
        store_obj(r, b.CreateLoad(i1, def[r]), b.CreateLoad(i64, val[r]));
  }
  for (const HeldCheck& c : held_checks) {
    b.SetInsertPoint(c.block);
    llvm::Value* other = b.getFalse();
    llvm::Value* o = b.CreateTrunc(c.obj, i32);
    for (size_t k = 0; k < regs.size(); ++k)
      if (static_cast<int>(k) != c.r && kind[k] == Reg::Obj && val[k] && !no_held[k])
        other = b.CreateOr(
            other,
            b.CreateICmpEQ(b.CreateLoad(i32, b.CreateConstInBoundsGEP1_64(i32, held, k)), o));
    b.CreateStore(other, c.other);
    b.CreateBr(c.next);
  }
  // Blocks left without a terminator after a break: unreachable.
  for (llvm::BasicBlock& bb : *fn) {
    if (!bb.getTerminator()) {
      b.SetInsertPoint(&bb);
      b.CreateUnreachable();
    }
  }
  merge_counters();
}

}  // namespace tessera::native_gen
