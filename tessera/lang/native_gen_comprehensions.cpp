// Gen (native_gen.hpp): lists built by comprehensions and concatenation.
// A comprehension is the translator's loop appending to a hidden list
// (`acc = list(); while(...) acc = append(acc, expr); acc`), compiled by
// the loop code with list reads and appends; what is here is `a + b` of
// two lists (`row + [0]`, `[0] + row`) and the kinds of the items such
// lists give.
#include "tessera/lang/native_gen.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_comprehensions.hpp"

namespace tessera::native_gen {

bool Gen::list_expr(const FNode& n) const {
  if (n.op == Op::NewList) return true;
  if (n.op == Op::Var) {
    const auto r = static_cast<size_t>(n.reg);
    if (dict_reg[r] || str_reg(n.reg)) return false;
    // A tuple when the loop starts (`t1 + t2`): left to the interpreter
    // rather than compiled to bail at each turn.
    if (regs[r].k == Reg::Obj) {
      const auto o = static_cast<size_t>(regs[r].a);
      if (o < objects.size() && (!objects[o].is_list() || objects[o].is_tuple())) return false;
    }
    return kind[r] == Reg::Obj || (kind[r] == Reg::Undef && regs[r].k == Reg::Obj);
  }
  if (n.op == Op::Block && !n.kids.empty() && n.kids.back().op == Op::Var) {
    // A comprehension: block(acc = list(), its loop, acc).
    const int acc = n.kids.back().reg;
    for (const FNode& k : n.kids)
      if (k.op == Op::Assign && k.reg == acc && k.kids.size() == 1 && k.kids[0].op == Op::NewList)
        return true;
    return false;
  }
  return n.op == Op::Binary && n.spec && n.spec->name == "add" && n.kids.size() == 2 &&
         list_expr(n.kids[0]) && list_expr(n.kids[1]);
}

CV Gen::list_concat(const FNode& n) {
  CV x = eval_any(n.kids[0]);
  CV y = eval_any(n.kids[1]);
  if (x.k != Reg::Obj || y.k != Reg::Obj) throw Refuse{"'+' of a list and what is not a list"};
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
  llvm::Value* obj = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list_concat), ft), {cptr, x.v, y.v});
  bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
  b.CreateStore(b.getTrue(), made_any);
  count(n.counter);
  return CV{Reg::Obj, obj};
}

int Gen::expr_item_kind(const FNode& n) const {
  switch (n.op) {
    case Op::Var:
      return item_kind[static_cast<size_t>(n.reg)];
    case Op::NewList:
      for (const FNode& k : n.kids)
        if (k.op == Op::Const && is_scalar(k.constant.k)) return k.constant.k;
      return -1;
    case Op::Binary: {
      if (!n.spec || n.spec->name != "add" || n.kids.size() != 2) return -1;
      const int a = expr_item_kind(n.kids[0]);
      return a >= 0 ? a : expr_item_kind(n.kids[1]);
    }
    case Op::Block:
      return n.kids.empty() ? -1 : expr_item_kind(n.kids.back());
    default:
      return is_iterate(n) ? expr_item_kind(n.kids[0]) : -1;
  }
}

namespace {

// True when register r appears in `n` (read, assigned or appended to).
bool mentions(const FNode& n, int r) {
  if ((n.op == Op::Var || n.op == Op::Assign || n.op == Op::Append) && n.reg == r) return true;
  for (const FNode& k : n.kids)
    if (mentions(k, r)) return true;
  return false;
}

// True when `n` uses register r only as `r = append(r, x)` with x not
// mentioning r; `appends` collects those statements.
bool only_appends(const FNode& n, int r, std::vector<const FNode*>& appends) {
  if (n.op == Op::Append && n.reg == r) {
    if (n.kids.size() != 1 || mentions(n.kids[0], r)) return false;
    appends.push_back(&n);
    return true;
  }
  if ((n.op == Op::Var || n.op == Op::Assign) && n.reg == r) return false;
  for (const FNode& k : n.kids)
    if (!only_appends(k, r, appends)) return false;
  return true;
}

}  // namespace

void Gen::find_comprehensions() {
  comp_sites.clear();
  comp_loop.clear();
  comp_append.clear();
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    for (const FNode& k : n.kids) walk(k);
    if (n.op != Op::Block) return;
    for (size_t i = 0; i < n.kids.size(); ++i) {
      const FNode& a = n.kids[i];
      if (a.op != Op::Assign || a.kids.size() != 1 || a.kids[0].op != Op::NewList ||
          !a.kids[0].kids.empty() || dict_reg[static_cast<size_t>(a.reg)])
        continue;
      size_t j = i + 1;
      while (j < n.kids.size() && n.kids[j].op != Op::While && !mentions(n.kids[j], a.reg)) ++j;
      if (j == n.kids.size() || n.kids[j].op != Op::While || comp_loop.count(&n.kids[j])) continue;
      std::vector<const FNode*> appends;
      if (!only_appends(n.kids[j], a.reg, appends) || appends.empty()) continue;
      // Lists of lists: each row appended when made (append_list).
      if (std::any_of(appends.begin(), appends.end(),
                      [&](const FNode* p) { return list_expr(p->kids[0]); }))
        continue;
      const int site = static_cast<int>(comp_sites.size());
      comp_sites.push_back(CompSite{a.reg});
      comp_loop[&n.kids[j]] = site;
      for (const FNode* p : appends) comp_append[p] = site;
    }
  };
  walk(loop_cond);
  walk(loop_body);
}

void Gen::comp_start(int site) {
  CompSite& s = comp_sites[static_cast<size_t>(site)];
  if (!s.n) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    s.buf = e.CreateAlloca(i8p);
    s.cap = e.CreateAlloca(i64);
    s.n = e.CreateAlloca(i64);
    e.CreateStore(llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p)), s.buf);
    e.CreateStore(e.getInt64(0), s.cap);
    e.CreateStore(e.getInt64(0), s.n);
  }
  b.CreateStore(b.getInt64(0), s.n);
}

CV Gen::comp_append_item(const FNode& n, int site) {
  CompSite& s = comp_sites[static_cast<size_t>(site)];
  CV v = eval(n.kids[0]);
  if (!scalar_cv(v)) throw Refuse{"an append of what is not a number"};
  // A number whose kind varies at run time (Python's or NumPy's by turns)
  // has no one kind for the buffer.
  if (v.s) throw Refuse{"a comprehension of numbers whose kind varies"};
  if (s.kind < 0) s.kind = v.k;
  if (s.kind != v.k) throw Refuse{"a comprehension of numbers of two kinds"};
  if (item_kind[n.reg] < 0) item_kind[n.reg] = v.k;
  CV x = read(n.reg);
  if (x.k != Reg::Obj) throw Refuse{"an append to what is not a list"};
  llvm::Value* at = b.CreateLoad(i64, s.n);
  llvm::BasicBlock* grow = llvm::BasicBlock::Create(ctx, "comp_grow", fn);
  llvm::BasicBlock* put = llvm::BasicBlock::Create(ctx, "comp_put", fn);
  b.CreateCondBr(b.CreateICmpSGE(at, b.CreateLoad(i64, s.cap)), grow, put, unlikely());
  b.SetInsertPoint(grow);
  {
    auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i64, i8p}, false);
    llvm::Value* p = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_comp_room), ft),
        {cptr, b.getInt64(site), b.CreateAdd(at, b.getInt64(1)), b.CreateBitCast(s.cap, i8p)});
    bail_if(b.CreateIsNull(p));
    b.CreateStore(p, s.buf);
    b.CreateBr(put);
  }
  b.SetInsertPoint(put);
  llvm::Value* base = b.CreateBitCast(b.CreateLoad(i8p, s.buf), i64->getPointerTo());
  b.CreateStore(to_payload(v), b.CreateInBoundsGEP(i64, base, at));
  b.CreateStore(b.CreateAdd(at, b.getInt64(1)), s.n);
  b.CreateStore(b.getInt8(1), asg[n.reg]);
  count(n.counter);
  return x;
}

CV Gen::append_list(const FNode& n) {
  // Only a list nothing else refers to, as the interpreter's append: a
  // comprehension's (its hidden variable made anew before the next append),
  // a display, a `+`'s new list; a list variable is the interpreter's.
  const FNode& item = n.kids[0];
  if (item.op == Op::Var) throw Refuse{"an append of a list variable"};
  CV v = eval_any(item);
  if (v.k != Reg::Obj) throw Refuse{"an append of what is not a number or a new list"};
  CV x = read(n.reg);
  if (x.k != Reg::Obj) throw Refuse{"an append to what is not a list"};
  auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list_append_list), ft),
      {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
       b.getInt64(n.reg), x.v, v.v});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  b.CreateStore(b.getInt8(1), asg[n.reg]);
  count(n.counter);
  return x;
}

void Gen::comp_finish(int site) {
  const CompSite& s = comp_sites[static_cast<size_t>(site)];
  if (s.kind < 0 || !s.n) return;  // no append emitted: no item
  CV x = read(s.reg);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i8p, i64}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_comp_put), ft),
      {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
       b.getInt64(s.reg), x.v, b.getInt64(s.kind), b.CreateLoad(i8p, s.buf),
       b.CreateLoad(i64, s.n)});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
}

namespace {

// The parts of `a + b + ...` in order, or false when one is neither a
// variable nor a display of number constants.
bool concat_parts(const FNode& n, std::vector<const FNode*>& out) {
  if (n.op == Op::Binary && n.spec && n.spec->name == "add" && n.kids.size() == 2)
    return concat_parts(n.kids[0], out) && concat_parts(n.kids[1], out);
  if (n.op == Op::Var) {
    out.push_back(&n);
    return true;
  }
  if (n.op != Op::NewList) return false;
  for (const FNode& k : n.kids)
    if (k.op != Op::Const || (k.constant.k != Reg::PyInt && k.constant.k != Reg::PyFloat))
      return false;
  out.push_back(&n);
  return true;
}

// True when register r is assigned, appended to or written into in `n`.
bool writes(const FNode& n, int r) {
  if ((n.op == Op::Assign || n.op == Op::Append) && n.reg == r) return true;
  if (n.op == Op::SetItem && !n.kids.empty() && n.kids[0].op == Op::Var && n.kids[0].reg == r)
    return true;
  for (const FNode& k : n.kids)
    if (writes(k, r)) return true;
  return false;
}

// True when every mention of register r in `n` is `r[k]` or `len(r)`.
bool only_indexed(const FNode& n, int r) {
  for (size_t q = 0; q < n.kids.size(); ++q) {
    const FNode& k = n.kids[q];
    if (k.op == Op::Var && k.reg == r) {
      const bool item = n.op == Op::GetItem && q == 0 && n.kids.size() == 2;
      const bool len = n.op == Op::Call && n.spec && n.spec->name == "len" && n.kids.size() == 1;
      if (!item && !len) return false;
    } else if ((k.op == Op::Assign || k.op == Op::Append) && k.reg == r) {
      return false;
    }
    if (!only_indexed(k, r)) return false;
  }
  return true;
}

int count_mentions(const FNode& n, int r) {
  int c = ((n.op == Op::Var || n.op == Op::Assign || n.op == Op::Append) && n.reg == r) ? 1 : 0;
  for (const FNode& k : n.kids) c += count_mentions(k, r);
  return c;
}

}  // namespace

void Gen::find_views() {
  views.clear();
  std::vector<std::pair<int, View>> found;
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    for (const FNode& k : n.kids) walk(k);
    if (n.op != Op::Block) return;
    for (size_t i = 0; i < n.kids.size(); ++i) {
      const FNode& a = n.kids[i];
      if (a.op != Op::Assign || a.kids.size() != 1 || !is_iterate(a.kids[0])) continue;
      const FNode& e = a.kids[0].kids[0];
      std::vector<const FNode*> parts;
      if (e.op != Op::Binary || !concat_parts(e, parts)) continue;
      View v;
      v.assign = &a;
      bool ok = true;
      int mentioned = 1;
      for (const FNode* p : parts) {
        int k = -1;
        if (p->op == Op::Var) {
          const auto pr = static_cast<size_t>(p->reg);
          if (regs[pr].k == Reg::Arr || dict_reg[pr] || str_reg(p->reg) || p->reg == a.reg)
            ok = false;
          k = item_kind[pr];
          for (size_t q = i + 1; q < n.kids.size() && ok; ++q) ok = !writes(n.kids[q], p->reg);
        } else {
          k = p->kids.empty() ? v.kind : p->kids[0].constant.k;
          for (const FNode& c : p->kids) ok = ok && c.constant.k == k;
        }
        if (v.kind < 0) v.kind = k;
        ok = ok && k >= 0 && k == v.kind;
        v.parts.push_back(ViewPart{p});
      }
      ok = ok && (v.kind == Reg::PyInt || v.kind == Reg::PyFloat);
      for (size_t q = i + 1; q < n.kids.size() && ok; ++q) {
        ok = only_indexed(n.kids[q], a.reg);
        mentioned += count_mentions(n.kids[q], a.reg);
      }
      // Nowhere else in the loop (a hidden variable of this statement's).
      if (!ok || count_mentions(loop_cond, a.reg) + count_mentions(loop_body, a.reg) != mentioned)
        continue;
      found.emplace_back(a.reg, std::move(v));
    }
  };
  walk(loop_cond);
  walk(loop_body);
  for (auto& [r, v] : found)
    if (!views.emplace(r, std::move(v)).second) views.erase(r);  // assigned twice: neither
}

void Gen::view_assign(int r) {
  View& v = views.at(r);
  const FNode& it = v.assign->kids[0];
  for (ViewPart& p : v.parts) {
    if (p.node->op != Op::Var) continue;
    CV x = read(p.node->reg);
    if (x.k != Reg::Obj) throw Refuse{"'+' of a list and what is not a list"};
    if (!p.obj) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      p.obj = e.CreateAlloca(i64);
      p.len = e.CreateAlloca(i64);
      e.CreateStore(e.getInt64(-1), p.obj);
      e.CreateStore(e.getInt64(0), p.len);
    }
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64}, false);
    llvm::Value* len = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_plain_list_len), ft), {cptr, x.v});
    bail_if(b.CreateICmpSLT(len, b.getInt64(0)));  // a tuple, a string: the interpreter's
    b.CreateStore(x.v, p.obj);
    b.CreateStore(len, p.len);
  }
  // The interpreter's counts of the `+`s and of iterate().
  std::function<void(const FNode&)> adds = [&](const FNode& n) {
    if (n.op != Op::Binary) return;
    adds(n.kids[0]);
    adds(n.kids[1]);
    count(n.counter);
  };
  adds(it.kids[0]);
  count(it.slot);
}

llvm::Value* Gen::view_total(const View& v) {
  llvm::Value* total = b.getInt64(0);
  for (const ViewPart& p : v.parts) {
    llvm::Value* len = p.node->op == Op::Var
                           ? static_cast<llvm::Value*>(b.CreateLoad(i64, p.len))
                           : b.getInt64(static_cast<int64_t>(p.node->kids.size()));
    total = b.CreateAdd(total, len);
  }
  return total;
}

CV Gen::view_len(const FNode& n) {
  View& v = views.at(n.kids[0].reg);
  if (v.parts.front().node->op == Op::Var && !v.parts.front().obj)
    throw Refuse{"a list read before it is made"};
  llvm::Value* total = view_total(v);
  count(n.slot);
  return CV{Reg::PyInt, total};
}

CV Gen::view_item(const FNode& n) {
  View& v = views.at(n.kids[0].reg);
  for (const ViewPart& p : v.parts)
    if (p.node->op == Op::Var && !p.obj) throw Refuse{"a list read before it is made"};
  llvm::Value* i = int_index(n.kids[1]);
  llvm::Value* total = view_total(v);
  // Python's negative indices; out of range: the interpreter's IndexError.
  llvm::Value* k = b.CreateSelect(b.CreateICmpSLT(i, b.getInt64(0)), b.CreateAdd(i, total), i);
  bail_if(b.CreateICmpUGE(k, total));
  llvm::Value* out;
  {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    out = e.CreateAlloca(i64);
  }
  const int want = v.kind == Reg::PyInt ? static_cast<int>(ValueKind::integer)
                                        : static_cast<int>(ValueKind::floating);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "view_join", fn);
  for (size_t q = 0; q < v.parts.size(); ++q) {
    const ViewPart& p = v.parts[q];
    const bool var = p.node->op == Op::Var;
    llvm::Value* len = var ? static_cast<llvm::Value*>(b.CreateLoad(i64, p.len))
                           : b.getInt64(static_cast<int64_t>(p.node->kids.size()));
    llvm::BasicBlock* here = llvm::BasicBlock::Create(ctx, "view_part", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "view_next", fn);
    // The last part holds k (k < total was checked).
    if (q + 1 == v.parts.size())
      b.CreateBr(here);
    else
      b.CreateCondBr(b.CreateICmpSLT(k, len), here, next);
    b.SetInsertPoint(here);
    if (var) {
      llvm::Value* obj = b.CreateLoad(i64, p.obj);
      auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i8p}, false);
      auto get = [&] {
        llvm::Value* rc = b.CreateCall(
            ft, fptr(reinterpret_cast<void*>(&native_list_get), ft),
            {cptr, obj, k, b.getInt64(v.kind), b.CreateBitCast(out, i8p)});
        bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
      };
      if (layout().valid) {
        // In place, as list_item's reads of a list the loop appends to: the
        // items' address kept while no helper but a list's read has run.
        RowSite site = row_site(p.node->reg);
        llvm::Value* gen = b.CreateLoad(i64, list_epoch_of());
        llvm::BasicBlock* fill = llvm::BasicBlock::Create(ctx, "view_fill", fn);
        llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "view_have", fn);
        b.CreateCondBr(site_hit(site, obj, gen), have, fill);
        b.SetInsertPoint(fill);
        fill_flat_site(site, obj, gen, true);
        b.CreateBr(have);
        b.SetInsertPoint(have);
        item_or_helper(site_item(site, k, want), out, get);
      } else {
        get();
      }
    } else {
      // A display of constants: its item by a select over them.
      llvm::Value* x = b.getInt64(0);
      for (size_t c = 0; c < p.node->kids.size(); ++c) {
        const Reg& r = p.node->kids[c].constant;
        llvm::Value* bits = v.kind == Reg::PyInt ? b.getInt64(static_cast<uint64_t>(r.i))
                                                 : b.CreateBitCast(llvm::ConstantFP::get(f64, r.f), i64);
        x = b.CreateSelect(b.CreateICmpEQ(k, b.getInt64(static_cast<int64_t>(c))), bits, x);
      }
      b.CreateStore(x, out);
    }
    b.CreateBr(join);
    b.SetInsertPoint(next);
    if (q + 1 < v.parts.size()) k = b.CreateSub(k, len);
  }
  b.CreateUnreachable();  // `next` of the last part: never reached
  b.SetInsertPoint(join);
  count(n.counter);
  llvm::Value* payload = b.CreateLoad(i64, out);
  if (v.kind == Reg::PyInt) return CV{Reg::PyInt, payload};
  return CV{Reg::PyFloat, b.CreateBitCast(payload, f64)};
}

}  // namespace tessera::native_gen
