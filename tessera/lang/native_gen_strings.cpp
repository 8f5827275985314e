// Strings in native loops (docs/runtime.md, "Strings in native code"): ASCII
// text as views (an address, a length, a step in bytes) with no object per
// string or character: str() of an int written into a buffer of the
// function's frame, string constants as the module's constant data, a
// string variable's own bytes (native_str_view), s[i] and s[a:b:c] as views
// of those. Comparisons, len(), `in`, str.find, type() and truth read them
// where they are; an assignment makes the view a Python str among the
// interpreter's objects (native_str_object), as the interpreter holds it.
// The helpers the code calls (native_strings.hpp) are at the end.
#include <functional>
#include <optional>
#include <string>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_gen.hpp"
#include "tessera/lang/native_strings.hpp"

namespace tessera::native_gen {

namespace {

bool ascii_text(const std::string& s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

// A string constant (one of other characters too: its evaluation bails).
bool str_const(const FNode& k) {
  return k.op == Op::Const && k.constant.k == Reg::Obj && k.const_arg && k.const_arg->is_string();
}

bool named(const FNode& n, const char* name, size_t nk) {
  return n.op == Op::Call && n.spec && n.spec->name == name && n.kids.size() == nk;
}

bool slice_node(const FNode& k) {
  return (k.op == Op::Const && k.constant.k == Reg::Obj && k.const_arg &&
          k.const_arg->is_slice()) ||
         named(k, "slice", 3);
}

// An index or a slice's bound whose evaluation places no object (a view of
// a variable's string stays valid while it runs: the table of objects does
// not move).
bool pure_index(const FNode& k) {
  switch (k.op) {
    case Op::Const:
    case Op::Var:
      return k.constant.k != Reg::Obj || k.op == Op::Var;
    case Op::Binary:
      return pure_index(k.kids[0]) && pure_index(k.kids[1]);
    case Op::Call:
      if (!k.spec || (k.spec->name != "len" && k.spec->name != "negative" &&
                      k.spec->name != "range_index" && k.spec->name != "slice"))
        return false;
      for (const FNode& c : k.kids)
        if (!(c.op == Op::Const || pure_index(c))) return false;
      return true;
    default:
      return false;
  }
}

// type(x) of a number of register kind k, as the primitive names it.
const char* type_name_of(Reg::Kind k) {
  switch (k) {
    case Reg::PyBool: return "bool";
    case Reg::PyInt: return "int";
    case Reg::PyFloat: return "float";
    case Reg::NpBool: return "bool array";
    case Reg::NpInt: return "int64 array";
    case Reg::NpFloat: return "float64 array";
    case Reg::NpF32: return "float32 array";
    case Reg::NpI32: return "int32 array";
    default: return nullptr;
  }
}

}  // namespace

bool Gen::str_list(int r) const {
  return r >= 0 && static_cast<size_t>(r) < str_lists.size() && str_lists[static_cast<size_t>(r)];
}

bool Gen::str_reg(int r) const {
  return r >= 0 && static_cast<size_t>(r) < str_regs.size() && str_regs[static_cast<size_t>(r)];
}

bool Gen::str_expr(const FNode& n) const {
  switch (n.op) {
    case Op::Const:
      return str_const(n);
    case Op::Var:
      return str_reg(n.reg);
    case Op::GetItem:
      if (n.kids.size() == 2 && n.kids[0].op == Op::Var && str_list(n.kids[0].reg))
        return !slice_node(n.kids[1]) && pure_index(n.kids[1]);
      return n.kids.size() == 2 && str_expr(n.kids[0]) &&
             (slice_node(n.kids[1]) ? n.kids[1].op == Op::Const || pure_index(n.kids[1])
                                    : pure_index(n.kids[1]));
    case Op::Call:
      if (named(n, "str", 1) || named(n, "type", 1)) return true;
      if (named(n, "iterate", 1)) return str_expr(n.kids[0]);
      if (named(n, "str_strip", 2)) return str_expr(n.kids[0]) && str_expr(n.kids[1]);
      return false;
    case Op::If:
      return n.kids.size() == 3 && !n.returned && str_expr(n.kids[1]) && str_expr(n.kids[2]);
    case Op::Block:
      return !n.kids.empty() && str_expr(n.kids.back());
    default:
      return false;
  }
}

bool Gen::static_text(const FNode& n, std::string& out) const {
  if (str_const(n)) {
    out = n.const_arg->as_string();
    return true;
  }
  if (!named(n, "type", 1)) return false;
  const FNode& x = n.kids[0];
  if (str_expr(x)) {
    out = "string";
    return true;
  }
  if (x.op != Op::Var || dyn[x.reg]) return false;
  const char* t = type_name_of(kind[x.reg]);
  if (t) out = t;
  return t != nullptr;
}

int Gen::static_truth(const FNode& c) const {
  std::string x, y;
  if (c.op != Op::Binary || (c.fast != Fast::eq && c.fast != Fast::ne) ||
      !static_text(c.kids[0], x) || !static_text(c.kids[1], y))
    return -1;
  return (x == y) == (c.fast == Fast::eq) ? 1 : 0;
}

void Gen::find_str_regs() {
  const size_t nr = regs.size();
  std::vector<std::vector<const FNode*>> assigns(nr);
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::Assign && n.reg >= 0) assigns[static_cast<size_t>(n.reg)].push_back(&n.kids[0]);
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  // Lists of strings the loop only reads (`for word in words`'s).
  str_lists.assign(nr, false);
  for (size_t r = 0; r < nr; ++r) {
    const Reg& g = regs[r];
    if (g.k != Reg::Obj || dict_reg[r] || r >= list_fixed.size() || !list_fixed[r] ||
        static_cast<size_t>(g.a) >= objects.size())
      continue;
    const Value& v = objects[static_cast<size_t>(g.a)];
    str_lists[r] = v.is_list() && v.number_items() == nullptr && !v.as_list().empty() &&
                   v.as_list()[0].is_string();
  }
  // `_it = iterate(words)` of an inner `for w in words`: the same list.
  for (size_t r = 0; r < nr; ++r) {
    if (str_lists[r] || assigns[r].empty() || dict_reg[r] ||
        !(regs[r].k == Reg::Undef || regs[r].k == Reg::Obj))
      continue;
    bool all = true;
    for (const FNode* v : assigns[r])
      all = all && named(*v, "iterate", 1) && v->kids[0].op == Op::Var && str_list(v->kids[0].reg);
    str_lists[r] = all;
  }
  // Optimistic first (s = t; t = s), then every register with an assignment
  // of something else struck off until nothing changes.
  str_regs.assign(nr, false);
  for (size_t r = 0; r < nr; ++r) {
    const Reg& g = regs[r];
    const bool holds_str = g.k == Reg::Obj && static_cast<size_t>(g.a) < objects.size() &&
                           objects[static_cast<size_t>(g.a)].is_string();
    const bool other_obj = g.k == Reg::Obj && !holds_str;
    if (dict_reg[r] || rows.count(static_cast<int>(r))) continue;
    str_regs[r] = holds_str || ((g.k == Reg::Undef || other_obj) && !assigns[r].empty());
  }
  for (bool more = true; more;) {
    more = false;
    for (size_t r = 0; r < nr; ++r) {
      if (!str_regs[r]) continue;
      for (const FNode* v : assigns[r]) {
        if (!str_expr(*v)) {
          str_regs[r] = false;
          more = true;
          break;
        }
      }
    }
  }
  for (size_t r = 0; r < nr; ++r) {
    if (!str_regs[r]) continue;
    for (const FNode* v : assigns[r])
      if (v->op != Op::Var) lists = makes_arrays = true;  // strings made into objects
    if (!assigns[r].empty()) lists = true;
  }
}

llvm::Value* Gen::str_at(const CV& s, llvm::Value* i) {
  llvm::Value* off = s.step ? b.CreateMul(i, s.step) : i;
  return b.CreateInBoundsGEP(i8, s.v, off);
}

CV Gen::str_value(const FNode& n) {
  auto view = [&](llvm::Value* p, llvm::Value* len, llvm::Value* step) {
    CV s{kStr, p, len};
    s.step = step;
    return s;
  };
  auto constant = [&](const std::string& text) {
    static_assert(sizeof(char) == 1);
    llvm::Value* p = b.CreateGlobalStringPtr(text, "text", 0, &mod);
    return view(p, b.getInt64(static_cast<int64_t>(text.size())), nullptr);
  };
  switch (n.op) {
    case Op::Const:
      if (!ascii_text(n.const_arg->as_string())) {
        // Text of several bytes per character (int()'s table of Unicode digits,
        // reached for a non-ASCII character only): the interpreter's.
        bail_if(b.getTrue());
        return constant("");
      }
      return constant(n.const_arg->as_string());
    case Op::Var: {
      CV o = read(n.reg);
      if (o.k != Reg::Obj) throw Refuse{"a string variable that holds no object"};
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      llvm::Value* len = e.CreateAlloca(i64);
      auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i64->getPointerTo()}, false);
      llvm::Value* p = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_view), ft),
                                    {cptr, o.v, len});
      bail_if(b.CreateICmpEQ(p, llvm::ConstantPointerNull::get(b.getInt8PtrTy())));
      return view(p, b.CreateLoad(i64, len), nullptr);
    }
    case Op::GetItem: {
      if (n.kids[0].op == Op::Var && str_list(n.kids[0].reg)) {  // words[i]
        CV o = read(n.kids[0].reg);
        CV i = eval(n.kids[1]);
        if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
          throw Refuse{"a list indexed by what is not an int"};
        llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
        llvm::Value* len = e.CreateAlloca(i64);
        auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i64, i64->getPointerTo()}, false);
        llvm::Value* p = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list_str), ft),
                                      {cptr, o.v, i.v, len});
        bail_if(b.CreateICmpEQ(p, llvm::ConstantPointerNull::get(b.getInt8PtrTy())));
        count(n.counter);
        return view(p, b.CreateLoad(i64, len), nullptr);
      }
      CV s = str_value(n.kids[0]);
      const FNode& k = n.kids[1];
      if (slice_node(k)) {
        // Python's slice of a sequence of s.p characters (PySlice_AdjustIndices).
        int64_t step = 1;
        const FNode* bound[2] = {nullptr, nullptr};
        std::optional<int64_t> fixed[2];
        if (k.op == Op::Const) {
          const Slice& sl = k.const_arg->as_slice();
          step = sl.step.value_or(1);
          fixed[0] = sl.start;
          fixed[1] = sl.stop;
        } else {
          const FNode& st = k.kids[2];
          if (st.op != Op::Const ||
              !(st.constant.k == Reg::Nil || (st.constant.k == Reg::PyInt && st.constant.i != 0)))
            throw Refuse{"a string slice whose step is not a constant"};
          if (st.constant.k == Reg::PyInt) step = st.constant.i;
          for (int q = 0; q < 2; ++q)
            if (!(k.kids[q].op == Op::Const && k.kids[q].constant.k == Reg::Nil))
              bound[q] = &k.kids[q];
        }
        if (step == 0) throw Refuse{"a string slice of step 0"};  // ValueError: the general path's
        llvm::Value* len = s.p;
        llvm::Value* zero = b.getInt64(0);
        auto adjust = [&](int q) -> llvm::Value* {
          llvm::Value* x;
          if (bound[q]) {
            CV v = eval(*bound[q]);
            if (v.k == kDyn || !is_int(static_cast<Reg::Kind>(v.k)))
              throw Refuse{"a string slice's bound that is not an int"};
            x = v.v;
          } else if (fixed[q]) {
            x = b.getInt64(*fixed[q]);
          } else {  // None
            return q == 0 ? (step < 0 ? b.CreateSub(len, b.getInt64(1)) : zero)
                          : (step < 0 ? b.getInt64(-1) : len);
          }
          llvm::Value* neg = b.CreateICmpSLT(x, zero);
          llvm::Value* y = b.CreateSelect(neg, b.CreateAdd(x, len), x);
          llvm::Value* low = step < 0 ? b.getInt64(-1) : zero;
          llvm::Value* high = step < 0 ? b.CreateSub(len, b.getInt64(1)) : len;
          y = b.CreateSelect(b.CreateICmpSLT(y, zero), low, y);
          return b.CreateSelect(b.CreateICmpSGE(y, len), high, y);
        };
        llvm::Value* start = adjust(0);
        llvm::Value* stop = adjust(1);
        llvm::Value* nchars;
        if (step > 0) {
          llvm::Value* m = b.CreateAdd(
              b.CreateSDiv(b.CreateSub(b.CreateSub(stop, start), b.getInt64(1)), b.getInt64(step)),
              b.getInt64(1));
          nchars = b.CreateSelect(b.CreateICmpSLT(start, stop), m, zero);
        } else {
          llvm::Value* m = b.CreateAdd(
              b.CreateSDiv(b.CreateSub(b.CreateSub(start, stop), b.getInt64(1)), b.getInt64(-step)),
              b.getInt64(1));
          nchars = b.CreateSelect(b.CreateICmpSLT(stop, start), m, zero);
        }
        // An empty slice's start may be outside the text: never read.
        llvm::Value* first = b.CreateSelect(b.CreateICmpEQ(nchars, zero), zero, start);
        llvm::Value* p = str_at(s, first);
        llvm::Value* st = s.step ? b.CreateMul(s.step, b.getInt64(step)) : b.getInt64(step);
        if (k.op == Op::Call) count(k.slot);
        count(n.counter);
        return view(p, nchars, step == 1 ? s.step : st);
      }
      CV i = eval(k);
      if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
        throw Refuse{"a string indexed by what is not an int"};
      llvm::Value* j =
          b.CreateSelect(b.CreateICmpSLT(i.v, b.getInt64(0)), b.CreateAdd(i.v, s.p), i.v);
      bail_if(b.CreateICmpUGE(j, s.p));  // IndexError: the general path's, at its line
      count(n.counter);
      return view(str_at(s, j), b.getInt64(1), s.step);
    }
    case Op::Call: {
      const std::string& name = n.spec->name;
      if (name == "iterate") {  // a string's characters: indexed and counted as itself
        CV s = str_value(n.kids[0]);
        count(n.slot);
        return s;
      }
      if (name == "str_strip") {  // s.strip(chars)
        CV s = str_value(n.kids[0]);
        CV c = str_value(n.kids[1]);
        llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
        llvm::Value* first = e.CreateAlloca(i64);
        auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64, i8p, i64, i64, i64->getPointerTo()},
                                           false);
        llvm::Value* len = b.CreateCall(
            ft, fptr(reinterpret_cast<void*>(&native_str_strip), ft),
            {s.v, s.p, s.step ? s.step : b.getInt64(1), c.v, c.p, c.step ? c.step : b.getInt64(1),
             first});
        count(n.slot);
        return view(str_at(s, b.CreateLoad(i64, first)), len, s.step);
      }
      if (name == "type") {
        if (str_expr(n.kids[0])) {
          str_value(n.kids[0]);
          count(n.slot);
          return constant("string");
        }
        CV v = eval(n.kids[0]);
        const char* t = v.k == kDyn || v.s ? nullptr : type_name_of(static_cast<Reg::Kind>(v.k));
        if (!t) throw Refuse{"type() of a value whose kind is not known"};
        count(n.slot);
        return constant(t);
      }
      // str(x) of a number
      CV v = eval(n.kids[0]);
      const auto vk = static_cast<Reg::Kind>(v.k);
      if (v.k == kDyn) throw Refuse{"str() of a value whose kind varies"};
      if (is_bool(vk)) {
        CV t = constant("True"), f = constant("False");
        count(n.slot);
        return view(b.CreateSelect(v.v, t.v, f.v), b.CreateSelect(v.v, t.p, f.p), nullptr);
      }
      if (!is_int(vk))
        throw Refuse{std::string("str() of a ") + kind_name(vk) + " has no native code"};
      // The digits written backwards into a buffer of the frame (one per str() node).
      constexpr int64_t kRoom = 24;
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      llvm::Value* buf = e.CreateAlloca(llvm::ArrayType::get(i8, kRoom));
      buf = b.CreateBitCast(buf, i8p);
      llvm::Value* neg = b.CreateICmpSLT(v.v, b.getInt64(0));
      llvm::Value* mag = b.CreateSelect(neg, b.CreateSub(b.getInt64(0), v.v), v.v);  // as unsigned
      llvm::BasicBlock* from = b.GetInsertBlock();
      llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx, "digits", fn);
      llvm::BasicBlock* after = llvm::BasicBlock::Create(ctx, "digits_done", fn);
      b.CreateBr(loop);
      b.SetInsertPoint(loop);
      llvm::PHINode* pos = b.CreatePHI(i64, 2);
      llvm::PHINode* u = b.CreatePHI(i64, 2);
      pos->addIncoming(b.getInt64(kRoom), from);
      u->addIncoming(mag, from);
      llvm::Value* at = b.CreateSub(pos, b.getInt64(1));
      llvm::Value* q = b.CreateUDiv(u, b.getInt64(10));
      llvm::Value* d = b.CreateSub(u, b.CreateMul(q, b.getInt64(10)));
      b.CreateStore(b.CreateTrunc(b.CreateAdd(d, b.getInt64('0')), i8),
                    b.CreateInBoundsGEP(i8, buf, at));
      pos->addIncoming(at, loop);
      u->addIncoming(q, loop);
      b.CreateCondBr(b.CreateICmpNE(q, b.getInt64(0)), loop, after);
      b.SetInsertPoint(after);
      // At most 19 digits: the byte before them is in the buffer.
      llvm::Value* sign_at = b.CreateSub(at, b.getInt64(1));
      b.CreateStore(b.getInt8('-'), b.CreateInBoundsGEP(i8, buf, sign_at));
      llvm::Value* first = b.CreateSelect(neg, sign_at, at);
      count(n.slot);
      return view(b.CreateInBoundsGEP(i8, buf, first), b.CreateSub(b.getInt64(kRoom), first),
                  nullptr);
    }
    case Op::Block: {
      for (size_t k = 0; k + 1 < n.kids.size(); ++k) eval_any(n.kids[k]);
      return str_value(n.kids.back());
    }
    case Op::If: {
      if (const int t = static_truth(n.kids[0]); t >= 0) {  // type(x) == "string"
        cond(n.kids[0]);
        return str_value(n.kids[t ? 1 : 2]);
      }
      llvm::Value* c = cond(n.kids[0]);
      llvm::BasicBlock* then_b = llvm::BasicBlock::Create(ctx, "str_then", fn);
      llvm::BasicBlock* else_b = llvm::BasicBlock::Create(ctx, "str_else", fn);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "str_endif", fn);
      b.CreateCondBr(c, then_b, else_b);
      b.SetInsertPoint(then_b);
      CV x = str_value(n.kids[1]);
      llvm::Value* xs = x.step ? x.step : b.getInt64(1);
      llvm::BasicBlock* then_end = b.GetInsertBlock();
      b.CreateBr(done);
      b.SetInsertPoint(else_b);
      CV y = str_value(n.kids[2]);
      llvm::Value* ys = y.step ? y.step : b.getInt64(1);
      llvm::BasicBlock* else_end = b.GetInsertBlock();
      b.CreateBr(done);
      b.SetInsertPoint(done);
      auto phi = [&](llvm::Value* u, llvm::Value* w) {
        llvm::PHINode* p = b.CreatePHI(u->getType(), 2);
        p->addIncoming(u, then_end);
        p->addIncoming(w, else_end);
        return p;
      };
      return view(phi(x.v, y.v), phi(x.p, y.p), phi(xs, ys));
    }
    default:
      throw Refuse{"a string expression without native code"};
  }
}

llvm::Value* Gen::str_object(const CV& s) {
  auto* ft = llvm::FunctionType::get(i64, {i8p, i8p, i64, i64}, false);
  llvm::Value* obj =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_object), ft),
                   {cptr, s.v, s.p, s.step ? s.step : b.getInt64(1)});
  bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
  b.CreateStore(b.getTrue(), made_any);
  return obj;
}

CV Gen::str_compare(const FNode& n) {
  CV x = str_value(n.kids[0]);
  CV y = str_value(n.kids[1]);
  if (const int t = static_truth(n); t >= 0) {  // type(x) == "int": known here
    count(n.counter);
    return CV{Reg::PyBool, b.getInt1(t == 1)};
  }
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64, i8p, i64, i64}, false);
  auto order = [&] {
    return b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_compare), ft),
                        {x.v, x.p, x.step ? x.step : b.getInt64(1), y.v, y.p,
                         y.step ? y.step : b.getInt64(1)});
  };
  llvm::Value* r;
  if (n.fast == Fast::eq || n.fast == Fast::ne) {
    // Lengths first, then the bytes in the code, one by one (short text).
    llvm::BasicBlock* from = b.GetInsertBlock();
    llvm::BasicBlock* bytes = llvm::BasicBlock::Create(ctx, "str_bytes", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "str_next", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "str_eq", fn);
    llvm::Value* zero = b.getInt64(0);
    b.CreateCondBr(b.CreateICmpEQ(x.p, y.p), bytes, done);
    b.SetInsertPoint(bytes);
    llvm::PHINode* k = b.CreatePHI(i64, 2);
    k->addIncoming(zero, from);
    llvm::Value* more = b.CreateICmpSLT(k, x.p);
    llvm::BasicBlock* cmp = llvm::BasicBlock::Create(ctx, "str_byte", fn);
    b.CreateCondBr(more, cmp, done);
    b.SetInsertPoint(cmp);
    llvm::Value* same =
        b.CreateICmpEQ(b.CreateLoad(i8, str_at(x, k)), b.CreateLoad(i8, str_at(y, k)));
    b.CreateCondBr(same, next, done);
    b.SetInsertPoint(next);
    k->addIncoming(b.CreateAdd(k, b.getInt64(1)), next);
    b.CreateBr(bytes);
    b.SetInsertPoint(done);
    llvm::PHINode* eq = b.CreatePHI(i1, 3);
    eq->addIncoming(b.getFalse(), from);
    eq->addIncoming(b.getTrue(), bytes);
    eq->addIncoming(b.getFalse(), cmp);
    r = n.fast == Fast::eq ? static_cast<llvm::Value*>(eq) : b.CreateNot(eq);
  } else {
    llvm::Value* o = order();
    llvm::Value* zero = b.getInt64(0);
    switch (n.fast) {
      case Fast::lt: r = b.CreateICmpSLT(o, zero); break;
      case Fast::le: r = b.CreateICmpSLE(o, zero); break;
      case Fast::gt: r = b.CreateICmpSGT(o, zero); break;
      default: r = b.CreateICmpSGE(o, zero); break;
    }
  }
  count(n.counter);
  return CV{Reg::PyBool, r};
}

bool Gen::str_call(const FNode& n, CV& out) {
  if (!n.spec) return false;
  const std::string& name = n.spec->name;
  auto find = [&](const CV& a, const CV& c) {
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64, i8p, i64, i64}, false);
    return b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_find), ft),
                        {a.v, a.p, a.step ? a.step : b.getInt64(1), c.v, c.p,
                         c.step ? c.step : b.getInt64(1)});
  };
  if (name == "len" && n.kids.size() == 1 && str_expr(n.kids[0])) {
    CV s = str_value(n.kids[0]);
    count(n.slot);
    out = CV{Reg::PyInt, s.p};
    return true;
  }
  if (name == "not_" && n.kids.size() == 1 && str_expr(n.kids[0])) {
    CV s = str_value(n.kids[0]);
    count(n.slot);
    out = CV{Reg::PyBool, b.CreateICmpEQ(s.p, b.getInt64(0))};
    return true;
  }
  if ((name == "contains" || name == "str_find") && n.kids.size() == 2 && str_expr(n.kids[0]) &&
      str_expr(n.kids[1])) {
    CV a = str_value(n.kids[0]);  // the container (the text searched)
    CV c = str_value(n.kids[1]);
    llvm::Value* at = find(a, c);
    count(n.slot);
    out = name == "contains" ? CV{Reg::PyBool, b.CreateICmpSGE(at, b.getInt64(0))}
                             : CV{Reg::PyInt, at};
    return true;
  }
  return false;
}

}  // namespace tessera::native_gen

// ---- the helpers the code calls (native_strings.hpp)

namespace tessera {

extern "C" const char* native_str_view(NativeCtx* c, int64_t obj, int64_t* len) {
  if (c->state == nullptr) return nullptr;
  FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const auto o = static_cast<size_t>(obj);
  const Value& v = st.objects[o];
  if (!v.is_string()) return nullptr;
  const std::string& text = v.as_string();
  int8_t& ascii = st.object_ascii[o];
  if (ascii < 0) {  // as string_item (fastloop_objects.cpp) caches it
    ascii = 1;
    for (char ch : text) ascii &= static_cast<unsigned char>(ch) < 0x80;
  }
  if (!ascii) return nullptr;
  *len = static_cast<int64_t>(text.size());
  return text.data();
}

extern "C" int64_t native_str_object(NativeCtx* c, const char* p, int64_t len, int64_t step) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  try {
    if (len == 1) {  // one object per character, as the interpreter's s[i]
      const auto ch = static_cast<unsigned char>(*p);
      int32_t& slot = st.char_objects[ch & 0x7f];
      if (slot < 0) {
        slot = FastLoop::Impl::place_object(Value(std::string(1, static_cast<char>(ch))), st);
        st.char_slots.push_back(slot);
      }
      return slot;
    }
    std::string text(static_cast<size_t>(len), '\0');
    for (int64_t k = 0; k < len; ++k) text[static_cast<size_t>(k)] = p[k * step];
    const int32_t at = FastLoop::Impl::place_object(Value(std::move(text)), st);
    st.object_ascii[static_cast<size_t>(at)] = 1;
    ++st.made;  // a sweep between turns releases the strings let go of
    return at;
  } catch (...) {
    return -1;
  }
}

extern "C" int64_t native_str_compare(const char* a, int64_t na, int64_t sa, const char* b,
                                      int64_t nb, int64_t sb) {
  const int64_t n = na < nb ? na : nb;
  for (int64_t k = 0; k < n; ++k) {
    const auto x = static_cast<unsigned char>(a[k * sa]), y = static_cast<unsigned char>(b[k * sb]);
    if (x != y) return x < y ? -1 : 1;
  }
  return na < nb ? -1 : na > nb ? 1 : 0;
}

extern "C" int64_t native_str_find(const char* a, int64_t na, int64_t sa, const char* b,
                                   int64_t nb, int64_t sb) {
  for (int64_t at = 0; at + nb <= na; ++at) {
    int64_t k = 0;
    while (k < nb && a[(at + k) * sa] == b[k * sb]) ++k;
    if (k == nb) return at;
  }
  return -1;
}

extern "C" const char* native_list_str(NativeCtx* c, int64_t obj, int64_t i, int64_t* len) {
  if (c->state == nullptr) return nullptr;
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  if (!v.is_list()) return nullptr;
  const List& items = v.as_list();
  const auto n = static_cast<int64_t>(items.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n || !items[static_cast<size_t>(i)].is_string()) return nullptr;
  const std::string& text = items[static_cast<size_t>(i)].as_string();
  for (char ch : text)
    if (static_cast<unsigned char>(ch) >= 0x80) return nullptr;
  *len = static_cast<int64_t>(text.size());
  return text.data();
}

extern "C" int64_t native_str_strip(const char* a, int64_t na, int64_t sa, const char* chars,
                                    int64_t nc, int64_t sc, int64_t* first) {
  auto in = [&](char ch) {
    for (int64_t k = 0; k < nc; ++k)
      if (chars[k * sc] == ch) return true;
    return false;
  };
  int64_t lo = 0, hi = na;
  while (lo < hi && in(a[lo * sa])) ++lo;
  while (hi > lo && in(a[(hi - 1) * sa])) --hi;
  *first = lo;
  return hi - lo;
}

}  // namespace tessera
