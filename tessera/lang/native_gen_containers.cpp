// Gen (native_gen.hpp): the interpreter's objects. Lists (made, appended
// to, indexed), lists of lists (rows read and written in place), string
// characters, dicts and sets (their own probe of int keys, the helpers
// otherwise): helpers on the interpreter's objects, a bail for whatever
// they decline.
#include "tessera/lang/native_gen.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_dicts.hpp"

namespace tessera::native_gen {

bool Gen::scalar_cv(const CV& v) {
  // A DynF32 goes by its kind this turn (put_reg: kind_of, to_payload); its
  // `s` keeps it from any one-kind buffer, as the other varying numbers.
  return v.k == kDynF32 || (v.k != kDyn && is_scalar(static_cast<Reg::Kind>(v.k)));
}

CV Gen::new_list(const FNode& n) {
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* items =
      e.CreateAlloca(i64, e.getInt32(static_cast<uint32_t>(2 * std::max<size_t>(n.kids.size(), 1))));
  for (size_t k = 0; k < n.kids.size(); ++k) {
    CV v = eval(n.kids[k]);
    if (!scalar_cv(v)) throw Refuse{"a list of what is not a number"};
    put_reg(items, static_cast<int64_t>(k), v);
  }
  auto* ft = llvm::FunctionType::get(i64, {i8p, i8p, i64}, false);
  llvm::Value* obj = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list_new), ft),
      {cptr, b.CreateBitCast(items, i8p), b.getInt64(static_cast<int64_t>(n.kids.size()))});
  bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
  b.CreateStore(b.getTrue(), made_any);
  return CV{Reg::Obj, obj};
}

void Gen::item_or_helper(llvm::Value* item, llvm::Value* out, const std::function<void()>& get) {
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "item_read", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "item_slow", fn);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "item_join", fn);
  b.CreateCondBr(b.CreateIsNotNull(item), fast, slow);
  b.SetInsertPoint(fast);
  b.CreateStore(b.CreateLoad(i64, b.CreateBitCast(item, i64->getPointerTo())), out);
  b.CreateBr(join);
  b.SetInsertPoint(slow);
  get();
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

CV Gen::list_item(const FNode& n) {
  if (const HoistedList* h = hoisted_list(n)) return hoisted_item(n, *h);
  const int r = n.kids[0].reg;
  const int k = item_kind[r];
  if (k < 0) throw Refuse{"a list's items of a kind not known when compiled"};
  CV x = read(r);
  CV i = eval(n.kids[1]);
  if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
    throw Refuse{"a list indexed by what is not an int"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* out = e.CreateAlloca(i64);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i8p}, false);
  auto get = [&] {
    llvm::Value* rc = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_list_get), ft),
        {cptr, x.v, i.v, b.getInt64(k), b.CreateBitCast(out, i8p)});
    bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  };
  // An int or float item of the list read in place through the site's kept
  // items' address while `gen_at` (a generation counter) is unchanged; the
  // helper otherwise.
  const auto read_in_place = [&](llvm::Value* gen_at, int want) {
    RowSite site = row_site(r);
    llvm::Value* gen = b.CreateLoad(i64, gen_at);
    llvm::BasicBlock* fill = llvm::BasicBlock::Create(ctx, "items_fill", fn);
    llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "items_have", fn);
    b.CreateCondBr(site_hit(site, x.v, gen), have, fill);
    b.SetInsertPoint(fill);
    fill_flat_site(site, x.v, gen, true);
    b.CreateBr(have);
    b.SetInsertPoint(have);
    llvm::Value* item = site_item(site, i.v, want);
    item_or_helper(item, out, get);
  };
  if (const int want = in_place_kind(r, k); want >= 0) {
    // The list's items' address kept per site (native_list2_get's
    // kNativeFlatMode) while no write through a helper may have moved them;
    // an item of the kind compiled for read in place.
    read_in_place(row_gen_of(r), want);
  } else if (r < static_cast<int>(list_fixed.size()) && list_fixed[r]) {
    // weights[i - 1] in an inner loop: the helper once per index (the
    // list and its items are the call's start's), its item kept in `out`.
    llvm::Value* memo_i = e.CreateAlloca(i64);
    llvm::Value* memo_ok = e.CreateAlloca(i1);
    e.CreateStore(e.getFalse(), memo_ok);
    llvm::Value* hit =
        b.CreateAnd(b.CreateLoad(i1, memo_ok), b.CreateICmpEQ(b.CreateLoad(i64, memo_i), i.v));
    llvm::BasicBlock* miss = llvm::BasicBlock::Create(ctx, "memo_miss", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "memo_join", fn);
    b.CreateCondBr(hit, join, miss);
    b.SetInsertPoint(miss);
    get();
    b.CreateStore(i.v, memo_i);
    b.CreateStore(b.getTrue(), memo_ok);
    b.CreateBr(join);
    b.SetInsertPoint(join);
  } else if (const int want = k == Reg::PyInt     ? static_cast<int>(ValueKind::integer)
                             : k == Reg::PyFloat ? static_cast<int>(ValueKind::floating)
                                                 : -1;
             want >= 0 && layout().valid) {
    // `for x in p` over a list another statement appends to (`_it[k]`), any
    // list register: the items' address kept per site while no helper but a
    // list's read has run (list_epoch), an int or float item read in place.
    read_in_place(list_epoch_of(), want);
  } else {
    get();
  }
  count(n.counter);
  llvm::Value* p = b.CreateLoad(i64, out);
  const auto kk = static_cast<Reg::Kind>(k);
  if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(p, i8), b.getInt8(0))};
  if (is_int(kk)) return CV{k, p};
  return CV{k, b.CreateBitCast(p, f64)};
}

CV Gen::append(const FNode& n) {
  if (const auto c = comp_append.find(&n); c != comp_append.end())
    return comp_append_item(n, c->second);
  if (list_expr(n.kids[0])) return append_list(n);
  CV v = eval(n.kids[0]);
  if (!scalar_cv(v)) throw Refuse{"an append of what is not a number"};
  // A list the loop makes (a comprehension's): read as the kind appended
  // first in the code (an item of another kind bails where it is read).
  if (item_kind[n.reg] < 0 && !v.s) item_kind[n.reg] = v.k;
  CV x = read(n.reg);
  if (x.k != Reg::Obj) throw Refuse{"an append to what is not a list"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
  put_reg(item, 0, v);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i8p}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list_append), ft),
      {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
       b.getInt64(n.reg), x.v, b.CreateBitCast(item, i8p)});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  b.CreateStore(b.getInt8(1), asg[n.reg]);
  count(n.counter);
  return x;
}

bool Gen::list_var(const FNode& k) const {
  return k.op == Op::Var && kind[k.reg] == Reg::Obj && val[k.reg];
}

llvm::Value* Gen::int_index(const FNode& k) {
  CV i = eval(k);
  if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
    throw Refuse{"a list indexed by what is not an int"};
  return i.v;
}

llvm::Value* Gen::reg_arg(const CV& v) {
  if (!scalar_cv(v)) throw Refuse{"writing into a list what is not a number"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
  put_reg(item, 0, v);
  return b.CreateBitCast(item, i8p);
}

int Gen::in_place_kind(int r, int k) const {
  if (!layout().valid || r < 0 || static_cast<size_t>(r) >= table_plain.size() ||
      !table_plain[static_cast<size_t>(r)])
    return -1;
  if (k == Reg::PyInt) return static_cast<int>(ValueKind::integer);
  if (k == Reg::PyFloat) return static_cast<int>(ValueKind::floating);
  return -1;
}

llvm::Value* Gen::row_gen_of(int r) {
  llvm::Value*& g = row_gen[r];
  if (!g) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    g = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), g);
  }
  return g;
}

llvm::Value* Gen::ranged_of(int r) {
  llvm::Value*& g = row_ranged[r];
  if (!g) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    g = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), g);
  }
  return g;
}

void Gen::bump_rows(int r) {
  if (in_place_kind(r, Reg::PyInt) < 0) return;
  llvm::Value* g = row_gen_of(r);
  b.CreateStore(b.CreateAdd(b.CreateLoad(i64, g), b.getInt64(1)), g);
}

Gen::RowSite Gen::row_site(int r) {
  row_gen_of(r);
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  RowSite s;
  s.ok = e.CreateAlloca(i1);
  s.key = e.CreateAlloca(i64);
  s.gen = e.CreateAlloca(i64);
  s.data = e.CreateAlloca(i64);
  s.len = e.CreateAlloca(i64);
  s.buf = e.CreateAlloca(i64, e.getInt32(4));
  s.stride = e.CreateAlloca(i64);
  s.kfix = e.CreateAlloca(i64);
  e.CreateStore(e.getFalse(), s.ok);
  return s;
}

llvm::Value* Gen::site_hit(const RowSite& s, llvm::Value* i, llvm::Value* gen) {
  return b.CreateAnd(b.CreateLoad(i1, s.ok),
                     b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, s.key), i),
                                 b.CreateICmpEQ(b.CreateLoad(i64, s.gen), gen)));
}

void Gen::fill_site(const RowSite& s, llvm::Value* obj, llvm::Value* i, llvm::Value* gen) {
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
  llvm::Value* rc =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                   {cptr, obj, i, b.getInt64(0), b.getInt64(kNativeRowMode),
                    b.CreateBitCast(s.buf, i8p)});
  b.CreateStore(b.CreateICmpEQ(rc, b.getInt32(0)), s.ok);
  b.CreateStore(i, s.key);
  b.CreateStore(gen, s.gen);
  b.CreateStore(b.CreateLoad(i64, s.buf), s.data);
  b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 1)), s.len);
  store_site_form(s);
}

void Gen::store_site_form(const RowSite& s) {
  b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 2)), s.stride);
  b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 3)), s.kfix);
}

void Gen::fill_flat_site(const RowSite& s, llvm::Value* obj, llvm::Value* gen, bool read_only) {
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
      {cptr, obj, b.getInt64(0), b.getInt64(0),
       b.getInt64(read_only ? kNativeFlatReadMode : kNativeFlatMode), b.CreateBitCast(s.buf, i8p)});
  b.CreateStore(b.CreateICmpEQ(rc, b.getInt32(0)), s.ok);
  b.CreateStore(obj, s.key);
  b.CreateStore(gen, s.gen);
  b.CreateStore(b.CreateLoad(i64, s.buf), s.data);
  b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 1)), s.len);
  store_site_form(s);
}

void Gen::write_in_place(const RowSite& site, llvm::Value* key, llvm::Value* j, int r, int want,
                         const CV& value, const std::function<llvm::Value*(int64_t)>& call_set,
                         const std::function<void(llvm::Value*)>& fill) {
  // A list the last write through the helper made its own (copied and
  // logged: 0), or one it says may be written in place (2: seen by nothing
  // but its register, its old bytes then logged at each write): the next
  // items of its kind written in place; any other write through the
  // helper, which makes that list its own and moves no other, then keeps
  // it for the next ones.
  // (The row cache of t[i][j] sites does the same in native_row_write.)
  llvm::Value* logs;
  {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    logs = e.CreateAlloca(i1);
    e.CreateStore(e.getTrue(), logs);
  }
  llvm::Value* genp = row_gen_of(r);
  llvm::Value* gen = b.CreateLoad(i64, genp);
  llvm::Value* hit = site_hit(site, key, gen);
  llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "roww_look", fn);
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "roww_fast", fn);
  llvm::BasicBlock* log = llvm::BasicBlock::Create(ctx, "roww_log", fn);
  llvm::BasicBlock* store = llvm::BasicBlock::Create(ctx, "roww_store", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "roww_slow", fn);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "roww_join", fn);
  b.CreateCondBr(hit, look, slow);
  b.SetInsertPoint(look);
  llvm::Value* item = site_item(site, j, want);
  llvm::BasicBlock* looked = b.GetInsertBlock();
  b.CreateCondBr(b.CreateIsNotNull(item), fast, slow);
  b.SetInsertPoint(slow);
  llvm::Value* rc = call_set(kNativeInPlaceAsk);
  bail_if(b.CreateICmpEQ(rc, b.getInt32(1)));
  llvm::Value* in_place = b.CreateICmpEQ(rc, b.getInt32(2));
  // The helper's own write may have moved rows (a copy): every kept
  // address is looked up again.
  llvm::Value* next = b.CreateAdd(b.CreateLoad(i64, genp), b.getInt64(1));
  b.CreateStore(next, genp);
  fill(next);
  b.CreateStore(in_place, logs);
  llvm::BasicBlock* now = llvm::BasicBlock::Create(ctx, "roww_now", fn);
  b.CreateCondBr(in_place, now, join);
  b.SetInsertPoint(now);
  llvm::Value* item2 = site_item(site, j, want);
  bail_if(b.CreateIsNull(item2));  // the helper saw it of that kind
  llvm::BasicBlock* now_at = b.GetInsertBlock();
  b.CreateBr(fast);
  b.SetInsertPoint(fast);
  llvm::PHINode* at = b.CreatePHI(i8p, 2);
  at->addIncoming(item, looked);
  at->addIncoming(item2, now_at);
  llvm::Value* p = at;
  b.CreateCondBr(b.CreateLoad(i1, logs), log, store);
  b.SetInsertPoint(log);
  {
    // Each write's 16-byte entry until the site has logged as many as its
    // row holds items; then the row's numbers once as one range (8 bytes an
    // item, native_log_range), and no more entries for that row in this
    // call: coin_sums's 160,000 writes into 20,001 items grew a 2.5 MB log
    // (page faults, copies) a call. A bail undoes the log newest first, so
    // the range puts back the items as they were before it, the entries
    // before it what they held earlier.
    llvm::Value* data = b.CreateLoad(i64, site.data);
    llvm::Value* rangedp = ranged_of(r);
    llvm::BasicBlock* one = llvm::BasicBlock::Create(ctx, "roww_log_one", fn);
    llvm::BasicBlock* count_it = llvm::BasicBlock::Create(ctx, "roww_log_count", fn);
    llvm::BasicBlock* whole = llvm::BasicBlock::Create(ctx, "roww_log_whole", fn);
    b.CreateCondBr(b.CreateICmpEQ(b.CreateLoad(i64, rangedp), data), store, count_it);
    b.SetInsertPoint(count_it);
    llvm::Value* counted;
    {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      counted = e.CreateAlloca(i64);
      e.CreateStore(e.getInt64(0), counted);
    }
    llvm::Value* c1 = b.CreateAdd(b.CreateLoad(i64, counted), b.getInt64(1));
    b.CreateStore(c1, counted);
    llvm::Value* len = b.CreateLoad(i64, site.len);
    llvm::Value* go_whole = b.CreateICmpSGT(c1, len);
    b.CreateCondBr(go_whole, whole, one, unlikely());
    b.SetInsertPoint(whole);
    auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i8p, i64, i64, i64}, false);
    llvm::Value* n_now = b.CreateLoad(i64, undo_n);
    llvm::Value* first = b.CreateIntToPtr(data, i8p);
    llvm::Value* np = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_log_range), ft),
                                   {cptr, n_now, first, b.CreateLoad(i64, site.stride), len,
                                    b.getInt64(8)});
    b.CreateStore(np, undo_ptr);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
    b.CreateStore(b.CreateAdd(n_now, b.getInt64(1)), undo_n);
    b.CreateStore(data, rangedp);
    b.CreateBr(store);
    b.SetInsertPoint(one);
    log_write(p, i64, 8);
  }
  b.CreateBr(store);
  b.SetInsertPoint(store);
  llvm::Value* bits = value.k == Reg::PyFloat ? b.CreateBitCast(value.v, i64) : value.v;
  b.CreateStore(bits, b.CreateBitCast(p, i64->getPointerTo()));
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

llvm::Value* Gen::site_item(const RowSite& s, llvm::Value* j, int want) {
  llvm::Value* len = b.CreateLoad(i64, s.len);
  llvm::Value* jj = b.CreateSelect(b.CreateICmpSLT(j, b.getInt64(0)), b.CreateAdd(j, len), j);
  llvm::Value* in = b.CreateAnd(b.CreateLoad(i1, s.ok), b.CreateICmpULT(jj, len));
  llvm::Value* safe = b.CreateSelect(in, jj, b.getInt64(0));
  llvm::Value* base = b.CreateIntToPtr(b.CreateLoad(i64, s.data), i8p);
  llvm::Value* kfix = b.CreateLoad(i64, s.kfix);
  llvm::Value* null = llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p));
  llvm::BasicBlock* from = b.GetInsertBlock();
  llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "item_look", fn);
  llvm::BasicBlock* boxed = llvm::BasicBlock::Create(ctx, "item_boxed", fn);
  llvm::BasicBlock* unboxed = llvm::BasicBlock::Create(ctx, "item_unboxed", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "item_done", fn);
  b.CreateCondBr(in, look, done);
  b.SetInsertPoint(look);
  b.CreateCondBr(b.CreateICmpSLT(kfix, b.getInt64(0)), boxed, unboxed);
  // A list of Values: the item's own kind byte, `layout().size` bytes apart.
  b.SetInsertPoint(boxed);
  llvm::Value* at = b.CreateInBoundsGEP(i8, base, b.CreateMul(safe, b.getInt64(layout().size)));
  const auto kind_from_payload = static_cast<uint64_t>(layout().kind_at - layout().payload_at);
  llvm::Value* kb = b.CreateLoad(i8, b.CreateConstGEP1_64(i8, at, kind_from_payload));
  llvm::Value* item =
      b.CreateSelect(b.CreateICmpEQ(kb, b.getInt8(static_cast<uint8_t>(want))), at, null);
  b.CreateBr(done);
  // A NumberList: 8 bytes an item, all of its one kind.
  b.SetInsertPoint(unboxed);
  llvm::Value* at8 = b.CreateInBoundsGEP(i8, base, b.CreateShl(safe, b.getInt64(3)));
  llvm::Value* item8 = b.CreateSelect(b.CreateICmpEQ(kfix, b.getInt64(want)), at8, null);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  llvm::PHINode* phi = b.CreatePHI(i8p, 3);
  phi->addIncoming(null, from);
  phi->addIncoming(item, boxed);
  phi->addIncoming(item8, unboxed);
  return phi;
}

CV Gen::list2_item(const FNode& n) {
  const FNode& in = n.kids[0];
  const int k = table_kind[in.kids[0].reg];
  if (k < 0) throw Refuse{"a list of lists whose items are of a kind not known when compiled"};
  CV t = read(in.kids[0].reg);
  llvm::Value* i = int_index(in.kids[1]);
  llvm::Value* j = int_index(n.kids[1]);
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* out = e.CreateAlloca(i64);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
  auto get = [&] {
    llvm::Value* rc =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                     {cptr, t.v, i, j, b.getInt64(k), b.CreateBitCast(out, i8p)});
    bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  };
  const int tr = in.kids[0].reg;
  llvm::Value* p;
  if (const int want = in_place_kind(tr, k); want >= 0) {
    // The row's address kept in the table's row cache (native_gen_rows.cpp),
    // the item read in place when it is of the kind compiled for.
    p = row_read(tr, t.v, i, j, k, want, out);
  } else {
    get();
    p = b.CreateLoad(i64, out);
  }
  count(in.counter);
  count(n.counter);
  const auto kk = static_cast<Reg::Kind>(k);
  if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(p, i8), b.getInt8(0))};
  if (is_int(kk)) return CV{k, p};
  return CV{k, b.CreateBitCast(p, f64)};
}

CV Gen::list2_len(const FNode& n) {
  const FNode& in = n.kids[0];
  CV t = read(in.kids[0].reg);
  llvm::Value* i = int_index(in.kids[1]);
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
  llvm::Value* len =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_len), ft), {cptr, t.v, i});
  bail_if(b.CreateICmpSLT(len, b.getInt64(0)));
  count(in.counter);
  count(n.slot);
  return CV{Reg::PyInt, len};
}

CV Gen::list_setitem(const FNode& n) {
  const int r = n.kids[0].reg;
  CV x = read(r);
  llvm::Value* ok;
  if (FastLoop::Impl::is_nested_write(n)) {
    const FNode& inner = n.kids[1];
    const CV value = eval(inner.kids[1]);
    const int written_kind = value.s ? -1 : value.k;
    llvm::Value* v = reg_arg(value);
    llvm::Value* i = int_index(n.kids[2]);
    llvm::Value* j = int_index(inner.kids[2]);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i64, i8p}, false);
    auto call_set = [&](int64_t ask) {
      return b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_set), ft),
                          {cptr, b.CreateBitCast(held, i8p),
                           b.getInt64(static_cast<int64_t>(regs.size())),
                           b.getInt64(r | ask), x.v, i, j, v});
    };
    auto set = [&] {
      ok = call_set(0);
      bail_if(b.CreateICmpNE(ok, b.getInt32(0)));
    };
    const int want = in_place_kind(r, written_kind);
    if (want >= 0) {
      row_write(r, x.v, i, j, want, value, v);
    } else {
      set();
      bump_rows(r);
    }
    count(inner.counter);
    count(inner.kids[0].counter);
  } else {
    if (!n.in_place || n.kids.size() != 3) throw Refuse{"a list write that is not xs[i] = v"};
    if (const HoistedList* h = hoisted_list(n)) return hoisted_write(n, *h);
    const CV value = eval(n.kids[1]);
    const int written_kind = value.s ? -1 : value.k;
    llvm::Value* v = reg_arg(value);
    llvm::Value* i = int_index(n.kids[2]);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i8p}, false);
    auto call_set = [&](int64_t ask) {
      return b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list_set), ft),
                          {cptr, b.CreateBitCast(held, i8p),
                           b.getInt64(static_cast<int64_t>(regs.size())), b.getInt64(r | ask),
                           x.v, i, v});
    };
    const int want = in_place_kind(r, written_kind);
    if (want >= 0) {
      // xs[i] = v of a number into an item of its kind, in place (as t[i][j]).
      RowSite site = row_site(r);
      write_in_place(site, x.v, i, r, want, value, call_set,
                     [&](llvm::Value* next) { fill_flat_site(site, x.v, next); });
    } else {
      ok = call_set(0);
      bail_if(b.CreateICmpNE(ok, b.getInt32(0)));
      bump_rows(r);  // t[i] = v: a row replaced
    }
  }
  count(n.counter);
  return x;
}

bool Gen::char_operand(const FNode& k) const {
  if (k.op == Op::Const)
    return k.constant.k == Reg::Obj && k.const_arg && k.const_arg->is_string() &&
           k.const_arg->as_string().size() == 1 &&
           static_cast<unsigned char>(k.const_arg->as_string()[0]) < 0x80;
  if (k.op != Op::GetItem || k.kids.size() != 2 || !list_var(k.kids[0])) return false;
  const FNode& i = k.kids[1];  // not a slice (native_gen_strings.cpp's)
  if ((i.op == Op::Const && i.constant.k == Reg::Obj) ||
      (i.op == Op::Call && i.spec && i.spec->name == "slice"))
    return false;
  const Reg& s = regs[static_cast<size_t>(k.kids[0].reg)];
  return s.k == Reg::Obj && static_cast<size_t>(s.a) < objects.size() &&
         objects[static_cast<size_t>(s.a)].is_string();
}

llvm::Value* Gen::char_byte(const FNode& k) {
  if (k.op == Op::Const)
    return b.getInt64(static_cast<unsigned char>(k.const_arg->as_string()[0]));
  CV s = read(k.kids[0].reg);
  llvm::Value* i = int_index(k.kids[1]);
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
  llvm::Value* c =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_byte), ft), {cptr, s.v, i});
  bail_if(b.CreateICmpSLT(c, b.getInt64(0)));  // not ASCII, out of range: the interpreter's
  count(k.counter);
  return c;
}

CV Gen::char_compare(const FNode& n) {
  llvm::Value* x = char_byte(n.kids[0]);
  llvm::Value* y = char_byte(n.kids[1]);
  count(n.counter);
  return CV{Reg::PyBool, n.fast == Fast::eq ? b.CreateICmpEQ(x, y) : b.CreateICmpNE(x, y)};
}

void Gen::find_dicts(const std::vector<const FNode*>& asg) {
  dict_reg.assign(regs.size(), false);
  for (size_t r = 0; r < regs.size(); ++r) {
    const auto o = static_cast<size_t>(regs[r].a);
    if (regs[r].k != Reg::Obj || o >= objects.size() || !objects[o].is_dict()) continue;
    dict_reg[r] = true;
    Reg first;
    const Dict& d = objects[o].as_dict();
    if (!d.items.empty() && FastLoop::Impl::scalar_of(d.value_at(0), first))
      item_kind[r] = first.k;
  }
  for (bool more = true; more;) {
    more = false;
    for (const FNode* a : asg) {
      const FNode& v = a->kids[0];
      if (dict_reg[a->reg]) continue;
      if (v.op == Op::NewDict || (v.op == Op::Var && dict_reg[v.reg])) {
        dict_reg[a->reg] = more = true;
        if (v.op == Op::Var) item_kind[a->reg] = item_kind[v.reg];
      }
    }
  }
  std::function<void(const FNode&)> writes = [&](const FNode& n) {
    for (const FNode& k : n.kids) writes(k);
    if (n.op != Op::SetItem || n.kids[0].op != Op::Var || !dict_reg[n.kids[0].reg]) return;
    int& k = item_kind[n.kids[0].reg];
    if (k < 0) k = written_kind(n.kids[1]);
  };
  writes(loop_cond);
  writes(loop_body);
}

int Gen::written_kind(const FNode& v) const {
  if (v.op == Op::Const) return is_scalar(v.constant.k) ? v.constant.k : -1;
  if (v.op == Op::Var) return is_scalar(regs[v.reg].k) ? regs[v.reg].k : -1;
  if (v.op == Op::Call && v.obj_op == ObjOp::get && v.kids.size() == 3)
    return written_kind(v.kids[2]);
  if (v.op != Op::Binary || v.kids.size() != 2) return -1;
  const int a = written_kind(v.kids[0]), c = written_kind(v.kids[1]);
  const bool py = (a == Reg::PyInt || a == Reg::PyFloat) && (c == Reg::PyInt || c == Reg::PyFloat);
  if (!py) return -1;
  if (v.fast == Fast::add || v.fast == Fast::sub || v.fast == Fast::mul ||
      v.fast == Fast::floordiv || v.fast == Fast::mod)
    return a == Reg::PyFloat || c == Reg::PyFloat ? Reg::PyFloat : Reg::PyInt;
  return v.fast == Fast::div ? Reg::PyFloat : -1;
}

llvm::Value* Gen::dict_key(const FNode* const* keys, size_t nkeys, CV* first) {
  if (nkeys == 0 || nkeys > static_cast<size_t>(kMaxDims)) throw Refuse{"a dict key of no items"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* at = e.CreateAlloca(i64, e.getInt32(static_cast<uint32_t>(2 * nkeys)));
  for (size_t k = 0; k < nkeys; ++k) {
    // A string key (d[word]): its object, the interpreter's key (key_of).
    CV v = nkeys == 1 && str_expr(*keys[k]) ? eval_any(*keys[k]) : eval(*keys[k]);
    if (!scalar_cv(v) && v.k != Reg::Obj)
      throw Refuse{"a dict key that is not a number, a string or a tuple of numbers"};
    put_reg(at, static_cast<int64_t>(k), v);
    if (k == 0 && first) *first = v;
  }
  return b.CreateBitCast(at, i8p);
}

llvm::Value* Gen::len_of_object(void* helper, llvm::Value* obj) {
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* memo_obj = e.CreateAlloca(i64);
  llvm::Value* memo_gen = e.CreateAlloca(i64);
  llvm::Value* memo_len = e.CreateAlloca(i64);
  e.CreateStore(e.getInt64(-1), memo_obj);
  e.CreateStore(e.getInt64(0), memo_gen);
  e.CreateStore(e.getInt64(-1), memo_len);
  llvm::Value* gen_at = list_epoch_of();
  llvm::Value* hit = b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, memo_obj), obj),
                                 b.CreateICmpEQ(b.CreateLoad(i64, memo_gen),
                                                b.CreateLoad(i64, gen_at)));
  llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "len_ask", fn);
  llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "len_have", fn);
  b.CreateCondBr(hit, have, ask);
  b.SetInsertPoint(ask);
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64}, false);
  llvm::Value* len = b.CreateCall(ft, fptr(helper, ft), {cptr, obj});
  b.CreateStore(obj, memo_obj);
  b.CreateStore(b.CreateLoad(i64, gen_at), memo_gen);
  b.CreateStore(len, memo_len);
  b.CreateBr(have);
  b.SetInsertPoint(have);
  return b.CreateLoad(i64, memo_len);
}

llvm::Value* Gen::list_epoch_of() {
  if (!list_epoch) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    list_epoch = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), list_epoch);
  }
  return list_epoch;
}

llvm::Value* Gen::dict_epoch_of() {
  if (!dict_epoch) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    dict_epoch = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), dict_epoch);
  }
  return dict_epoch;
}

Gen::DictView Gen::dict_view_of(int r) {
  auto it = dict_views.find(r);
  if (it != dict_views.end()) return it->second;
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  DictView v{e.CreateAlloca(i1), e.CreateAlloca(i64), e.CreateAlloca(i64),
             e.CreateAlloca(i64, e.getInt32(5))};
  e.CreateStore(e.getFalse(), v.ok);
  e.CreateStore(e.getInt64(-1), v.obj);  // no view taken yet
  e.CreateStore(e.getInt64(0), v.epoch);
  dict_views.emplace(r, v);
  return v;
}

Gen::InPlaceProbe Gen::dict_probe(int r, llvm::Value* obj, llvm::Value* key) {
  const DictView v = dict_view_of(r);
  llvm::Value* epoch = b.CreateLoad(i64, dict_epoch_of());
  // Taken for this object since the last call that may change it (also
  // when none could be given: a dict of Values is not asked again).
  llvm::Value* fresh = b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, v.obj), obj),
                                   b.CreateICmpEQ(b.CreateLoad(i64, v.epoch), epoch));
  llvm::BasicBlock* refill = llvm::BasicBlock::Create(ctx, "dview_fill", fn);
  llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "dview_have", fn);
  llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "dprobe_look", fn);
  llvm::BasicBlock* cmp = llvm::BasicBlock::Create(ctx, "dprobe_cmp", fn);
  llvm::BasicBlock* step = llvm::BasicBlock::Create(ctx, "dprobe_step", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "dprobe_done", fn);
  b.CreateCondBr(fresh, have, refill);
  b.SetInsertPoint(refill);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i8p}, false);
  llvm::Value* rc = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_dict_view), ft),
                                 {cptr, obj, b.CreateBitCast(v.buf, i8p)});
  b.CreateStore(b.CreateICmpNE(rc, b.getInt32(0)), v.ok);
  b.CreateStore(obj, v.obj);
  b.CreateStore(epoch, v.epoch);
  b.CreateBr(have);
  b.SetInsertPoint(have);
  // An int within +-2**53 hashes to itself (core/value.cpp's hash_int).
  const int64_t exact = int64_t{1} << 53;
  llvm::Value* near = b.CreateICmpULE(b.CreateAdd(key, b.getInt64(exact)), b.getInt64(2 * exact));
  llvm::Value* slots = b.CreateIntToPtr(b.CreateLoad(i64, v.buf), i64->getPointerTo());
  llvm::Value* mask = b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 1));
  llvm::Value* numbers = b.CreateIntToPtr(
      b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 2)), i8p);
  llvm::Value* kinds = b.CreateIntToPtr(
      b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 3)), i8p);
  llvm::Value* first_slot = b.CreateAnd(key, mask);
  llvm::BasicBlock* from = b.GetInsertBlock();
  b.CreateCondBr(b.CreateAnd(b.CreateLoad(i1, v.ok), near), look, done);
  // Python's order: the key's own slot, then slot * 5 + 1 plus the hash's higher bits.
  b.SetInsertPoint(look);
  llvm::PHINode* slot = b.CreatePHI(i64, 2);
  llvm::PHINode* perturb = b.CreatePHI(i64, 2);
  slot->addIncoming(first_slot, from);
  perturb->addIncoming(key, from);
  llvm::Value* at = b.CreateShl(slot, 1);
  llvm::Value* w = b.CreateLoad(i64, b.CreateInBoundsGEP(i64, slots, b.CreateAdd(at, b.getInt64(1))));
  b.CreateCondBr(b.CreateICmpEQ(w, b.getInt64(0)), done, cmp);
  b.SetInsertPoint(cmp);
  llvm::Value* h = b.CreateLoad(i64, b.CreateInBoundsGEP(i64, slots, at));
  // A slot of the same hash marked integral (bit 63) is the key.
  llvm::Value* hit = b.CreateAnd(b.CreateICmpEQ(h, key), b.CreateICmpSLT(w, b.getInt64(0)));
  llvm::Value* pos = b.CreateSub(b.CreateAnd(w, b.getInt64(0xffffffffLL)), b.getInt64(1));
  b.CreateCondBr(hit, done, step);
  b.SetInsertPoint(step);
  llvm::Value* next_perturb = b.CreateLShr(perturb, 5);
  llvm::Value* next_slot = b.CreateAnd(
      b.CreateAdd(b.CreateAdd(b.CreateMul(slot, b.getInt64(5)), next_perturb), b.getInt64(1)), mask);
  slot->addIncoming(next_slot, step);
  perturb->addIncoming(next_perturb, step);
  b.CreateBr(look);
  b.SetInsertPoint(done);
  llvm::PHINode* decided = b.CreatePHI(i1, 3);
  decided->addIncoming(b.getFalse(), from);
  decided->addIncoming(b.getTrue(), look);
  decided->addIncoming(b.getTrue(), cmp);
  llvm::PHINode* where = b.CreatePHI(i64, 3);
  where->addIncoming(b.getInt64(-1), from);
  where->addIncoming(b.getInt64(-1), look);
  where->addIncoming(pos, cmp);
  return InPlaceProbe{decided, where, numbers, kinds};
}

int Gen::compact_kind(int k) {
  return k == Reg::PyBool ? 1 : k == Reg::PyInt ? 2 : k == Reg::PyFloat ? 3 : -1;
}

std::pair<llvm::Value*, llvm::Value*> Gen::dict_probed_value(const InPlaceProbe& p, int ck) {
  llvm::Value* kb = b.CreateLoad(i8, b.CreateInBoundsGEP(i8, p.kinds, p.pos));
  llvm::Value* same = b.CreateICmpEQ(b.CreateAnd(b.CreateLShr(kb, 2), b.getInt8(3)),
                                     b.getInt8(static_cast<uint8_t>(ck)));
  llvm::Value* bits = b.CreateLoad(
      i64, b.CreateBitCast(b.CreateInBoundsGEP(i8, p.numbers,
                                               b.CreateAdd(b.CreateMul(p.pos, b.getInt64(16)),
                                                           b.getInt64(8))),
                           i64->getPointerTo()));
  return {same, bits};
}

llvm::Value* Gen::dict_find(llvm::Value* obj, llvm::Value* key, size_t nkeys, int kind,
                            llvm::Value* out) {
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i8p, i64, i64, i8p}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_dict_find), ft),
      {cptr, obj, key, b.getInt64(static_cast<int64_t>(nkeys)), b.getInt64(kind),
       out ? b.CreateBitCast(out, i8p) : llvm::ConstantPointerNull::get(b.getInt8PtrTy())});
  bail_if(b.CreateICmpEQ(rc, b.getInt32(kNativeDictBail)));
  return rc;
}

CV Gen::dict_value(int k, llvm::Value* payload) {
  const auto kk = static_cast<Reg::Kind>(k);
  if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(payload, i8), b.getInt8(0))};
  if (is_int(kk)) return CV{k, payload};
  return CV{k, b.CreateBitCast(payload, f64)};
}

int Gen::dict_kind(int r) {
  const int k = item_kind[r];
  if (k < 0 || !is_scalar(static_cast<Reg::Kind>(k)))
    throw Refuse{"a dict's values of a kind not known when compiled"};
  return k;
}

CV Gen::dict_item(const FNode& n) {
  const int r = n.kids[0].reg;
  const int k = dict_kind(r);
  CV d = read(r);
  std::vector<const FNode*> keys;
  for (size_t i = 1; i < n.kids.size(); ++i) keys.push_back(&n.kids[i]);
  CV first;
  llvm::Value* key = dict_key(keys.data(), keys.size(), &first);
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* out = e.CreateAlloca(i64);
  if (keys.size() == 1 && is_int(static_cast<Reg::Kind>(first.k)) && compact_kind(k) > 0) {
    // Found in place with a value of the kind compiled for: no call.
    InPlaceProbe p = dict_probe(r, d.v, first.v);
    llvm::BasicBlock* read = llvm::BasicBlock::Create(ctx, "ditem_read", fn);
    llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "ditem_ask", fn);
    llvm::BasicBlock* got = llvm::BasicBlock::Create(ctx, "ditem_got", fn);
    b.CreateCondBr(b.CreateAnd(p.decided, b.CreateICmpSGE(p.pos, b.getInt64(0))), read, ask);
    b.SetInsertPoint(read);
    auto [same, bits] = dict_probed_value(p, compact_kind(k));
    b.CreateStore(bits, out);
    b.CreateCondBr(same, got, ask);
    b.SetInsertPoint(ask);
    bail_if(b.CreateICmpNE(dict_find(d.v, key, 1, k, out), b.getInt32(kNativeDictHit)));
    b.CreateBr(got);
    b.SetInsertPoint(got);
  } else {
    bail_if(b.CreateICmpNE(dict_find(d.v, key, keys.size(), k, out), b.getInt32(kNativeDictHit)));
  }
  count(n.counter);
  return dict_value(k, b.CreateLoad(i64, out));
}

CV Gen::dict_call(const FNode& n) {
  const bool get = n.obj_op == ObjOp::get;
  const FNode& x = n.kids[0];
  if (x.op != Op::Var || kind[x.reg] != Reg::Obj || !dict_reg[x.reg])
    throw Refuse{"'" + n.spec->name + "' of what is not a dict"};
  if (get && n.kids.size() != 3) throw Refuse{"d.get(k) without a default (None)"};
  const int k = get ? dict_kind(x.reg) : -1;
  CV d = read(x.reg);
  const FNode* key_node = &n.kids[1];
  CV first;
  llvm::Value* key = dict_key(&key_node, 1, &first);
  const bool int_key = is_int(static_cast<Reg::Kind>(first.k));
  if (!get) {
    if (!int_key) {
      llvm::Value* rc = dict_find(d.v, key, 1, -1, nullptr);
      count(n.slot);
      return CV{Reg::PyBool, b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit))};
    }
    // The index decides (no call) unless the dict is of another form.
    InPlaceProbe p = dict_probe(x.reg, d.v, first.v);
    llvm::BasicBlock* decided = b.GetInsertBlock();
    llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "din_ask", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "din_join", fn);
    llvm::Value* there = b.CreateICmpSGE(p.pos, b.getInt64(0));
    b.CreateCondBr(p.decided, join, ask);
    b.SetInsertPoint(ask);
    llvm::Value* asked = b.CreateICmpEQ(dict_find(d.v, key, 1, -1, nullptr),
                                        b.getInt32(kNativeDictHit));
    llvm::BasicBlock* asked_at = b.GetInsertBlock();
    b.CreateBr(join);
    b.SetInsertPoint(join);
    llvm::PHINode* in = b.CreatePHI(i1, 2);
    in->addIncoming(there, decided);
    in->addIncoming(asked, asked_at);
    count(n.slot);
    return CV{Reg::PyBool, in};
  }
  CV dflt = eval(n.kids[2]);
  if (dflt.k != k || dflt.s) throw Refuse{"d.get(k, v) with v of another kind than d's values"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* out = e.CreateAlloca(i64);
  if (int_key && compact_kind(k) > 0) {
    // Found in place with a value of the kind compiled for, or missing: no call.
    InPlaceProbe p = dict_probe(x.reg, d.v, first.v);
    llvm::BasicBlock* read = llvm::BasicBlock::Create(ctx, "dget_read", fn);
    llvm::BasicBlock* miss = llvm::BasicBlock::Create(ctx, "dget_miss", fn);
    llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "dget_ask", fn);
    llvm::BasicBlock* got = llvm::BasicBlock::Create(ctx, "dget_got", fn);
    llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "dget_check", fn);
    b.CreateCondBr(p.decided, check, ask);
    b.SetInsertPoint(check);
    b.CreateCondBr(b.CreateICmpSGE(p.pos, b.getInt64(0)), read, miss);
    b.SetInsertPoint(read);
    auto [same, bits] = dict_probed_value(p, compact_kind(k));
    b.CreateStore(bits, out);
    b.CreateCondBr(same, got, ask);
    b.SetInsertPoint(miss);
    b.CreateStore(to_payload(dflt), out);
    b.CreateBr(got);
    b.SetInsertPoint(ask);
    llvm::Value* rc = dict_find(d.v, key, 1, k, out);
    llvm::BasicBlock* fill = llvm::BasicBlock::Create(ctx, "dget_fill", fn);
    b.CreateCondBr(b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit)), got, fill);
    b.SetInsertPoint(fill);
    b.CreateStore(to_payload(dflt), out);
    b.CreateBr(got);
    b.SetInsertPoint(got);
    count(n.slot);
    return dict_value(k, b.CreateLoad(i64, out));
  }
  llvm::Value* rc = dict_find(d.v, key, 1, k, out);
  CV found = dict_value(k, b.CreateLoad(i64, out));
  count(n.slot);
  return CV{k, b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit)), found.v, dflt.v)};
}

CV Gen::dict_set(const FNode& n) {
  if (!n.in_place) throw Refuse{"a dict written that is not assigned back"};
  const int r = n.kids[0].reg;
  CV d = read(r);
  CV v = eval(n.kids[1]);  // the interpreter's order: the value, then the key
  if (!scalar_cv(v)) throw Refuse{"a dict's value that is not a number"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
  put_reg(item, 0, v);
  std::vector<const FNode*> keys;
  for (size_t i = 2; i < n.kids.size(); ++i) keys.push_back(&n.kids[i]);
  CV first;
  llvm::Value* key = dict_key(keys.data(), keys.size(), &first);
  llvm::BasicBlock* same_there = nullptr;
  llvm::Value* missing = b.getInt64(0);  // the key known not there (native_dict_set's)
  const int ck = v.s ? -1 : compact_kind(v.k);
  const bool probed = keys.size() == 1 && is_int(static_cast<Reg::Kind>(first.k)) && ck > 0;
  if (probed) {
    // s.add(k) of a k there (d[k] = v of that very number): nothing
    // changes, nothing is logged, no call (native_dict_set's no-op).
    InPlaceProbe p = dict_probe(r, d.v, first.v);
    llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "dset_check", fn);
    llvm::BasicBlock* write = llvm::BasicBlock::Create(ctx, "dset_write", fn);
    same_there = llvm::BasicBlock::Create(ctx, "dset_done", fn);
    b.CreateCondBr(b.CreateAnd(p.decided, b.CreateICmpSGE(p.pos, b.getInt64(0))), check, write);
    b.SetInsertPoint(check);
    auto [same, bits] = dict_probed_value(p, ck);
    b.CreateCondBr(b.CreateAnd(same, b.CreateICmpEQ(bits, to_payload(v))), same_there, write);
    b.SetInsertPoint(write);
    missing = b.CreateZExt(b.CreateAnd(p.decided, b.CreateICmpSLT(p.pos, b.getInt64(0))), i64);
  }
  // Another register holding this dict: left to the interpreter (the
  // helper is then told of no register to look at).
  bail_if(held_elsewhere(r, d.v));
  auto* ft =
      llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i8p, i64, i8p, i8p, i64}, false);
  llvm::Value* view = probed ? b.CreateBitCast(dict_view_of(r).buf, i8p)
                             : llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p));
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_dict_set), ft),
      {cptr, b.CreateBitCast(held, i8p), b.getInt64(0), b.getInt64(r), d.v, key,
       b.getInt64(static_cast<int64_t>(keys.size())), b.CreateBitCast(item, i8p), view,
       missing});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  if (probed) {
    // The view after the write, given by the call itself (taken at the
    // count of calls that includes it).
    const DictView dv = dict_view_of(r);
    b.CreateStore(b.CreateICmpNE(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, dv.buf, 4)),
                                 b.getInt64(0)),
                  dv.ok);
    b.CreateStore(d.v, dv.obj);
    b.CreateStore(b.CreateLoad(i64, dict_epoch_of()), dv.epoch);
  }
  if (same_there) {
    b.CreateBr(same_there);
    b.SetInsertPoint(same_there);
  }
  count(n.counter);
  return d;
}

llvm::Value* Gen::held_elsewhere(int r, llvm::Value* obj) {
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  HeldCheck c{llvm::BasicBlock::Create(ctx, "held_check", fn),
              llvm::BasicBlock::Create(ctx, "held_checked", fn), r, obj, e.CreateAlloca(i1)};
  b.CreateBr(c.block);
  b.SetInsertPoint(c.next);
  held_checks.push_back(c);
  return b.CreateLoad(i1, c.other);
}

CV Gen::new_dict(const FNode& n) {
  if (!n.kids.empty()) throw Refuse{"a dict made in the loop with items"};
  auto* ft = llvm::FunctionType::get(i64, {i8p}, false);
  llvm::Value* obj = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_dict_new), ft), {cptr});
  bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
  b.CreateStore(b.getTrue(), made_any);
  return CV{Reg::Obj, obj};
}

}  // namespace tessera::native_gen
