// Gen (native_gen.hpp): rows of lists of lists. The row cache the sites of
// a table register share (row_hit, row_read, row_write: a few instructions
// inline, native_row_cache.cpp's helpers for the rest), and `a, b = t[i]` and
// `for (a, b) in pairs` of a list of tuples or lists of numbers. The translator writes both as
// `_t = unpack(t[i], n)` followed by `a = _t[0]`, `b = _t[1]`; `_t` is read
// nowhere else, so the row is looked up once (native_list2_get's
// kNativeReadRowMode, a tuple row too), its length checked against n, and
// its items copied into registers there and then, as Python's unpacking
// copies the references: a later write into the row does not change a or b.
// Anything else (a row that is not a list or a tuple, another length, an
// item of another kind) bails: the interpreter raises Python's error.
#include <cstddef>
#include <functional>

#include "tessera/lang/native_gen.hpp"

namespace tessera::native_gen {

namespace {

bool is_unpack_of_row(const FNode& v) {
  if (v.op != Op::Call || !v.spec || v.spec->name != "unpack" || v.kids.size() != 2) return false;
  const FNode& src = v.kids[0];
  const FNode& count = v.kids[1];
  return src.op == Op::GetItem && src.kids.size() == 2 && src.kids[0].op == Op::Var &&
         count.op == Op::Const && count.constant.k == Reg::PyInt && count.constant.i > 0 &&
         count.constant.i <= 64;
}

}  // namespace

llvm::Value* Gen::row_cache_of(int r) {
  auto it = row_caches.find(r);
  if (it != row_caches.end()) return it->second;
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* c = e.CreateAlloca(i64, e.getInt32(sizeof(NativeRowCache) / 8));
  // No slot holds a row, none is logged whole.
  e.CreateMemSet(e.CreateBitCast(c, i8p), e.getInt8(0), sizeof(NativeRowCache), llvm::MaybeAlign(8));
  row_caches.emplace(r, c);
  return c;
}

void Gen::row_scopes() {
  if (row_scope) return;
  llvm::MDBuilder md(ctx);
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain("frame");
  llvm::MDNode* cache = md.createAnonymousAliasScope(domain, "row caches");
  row_scope = llvm::MDNode::get(ctx, {cache});
  row_noalias = row_scope;
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  row_kind_dummy = e.CreateAlloca(i8);
  e.CreateStore(e.getInt8(-1), row_kind_dummy);
}

llvm::Value* Gen::row_field(llvm::Value* cache, size_t offset, llvm::Type* t, llvm::Value* slot) {
  llvm::Value* at = b.CreateConstInBoundsGEP1_64(i8, b.CreateBitCast(cache, i8p), offset);
  return b.CreateInBoundsGEP(t, b.CreateBitCast(at, t->getPointerTo()), slot);
}

Gen::RowHit Gen::row_hit(int r, llvm::Value* i, llvm::Value* j, int want, bool write) {
  static_assert(kNativeRowSlots == 8, "a slot is i & 7");
  llvm::Value* c = row_cache_of(r);
  // Row i's slot: i mod 8 (a negative i has its own slot; the same row
  // then has two, each right).
  llvm::Value* slot = b.CreateAnd(i, b.getInt64(kNativeRowSlots - 1));
  auto at = [&](size_t offset, llvm::Type* t) { return row_field(c, offset, t, slot); };
  row_scopes();
  auto frame = [&](llvm::Type* t, llvm::Value* p) {
    llvm::LoadInst* l = b.CreateLoad(t, p);
    l->setMetadata(llvm::LLVMContext::MD_alias_scope, row_scope);
    return l;
  };
  auto word = [&](size_t offset) { return frame(i64, at(offset, i64)); };
  llvm::Value* gen = frame(i64, row_gen_of(r));
  llvm::Value* okp = at(offsetof(NativeRowCache, ok), i8);
  llvm::Value* data = word(offsetof(NativeRowCache, data));
  llvm::Value* len = word(offsetof(NativeRowCache, len));
  llvm::Value* kfix = word(offsetof(NativeRowCache, kfix));
  llvm::Value* jj = b.CreateSelect(b.CreateICmpSLT(j, b.getInt64(0)), b.CreateAdd(j, len), j);
  llvm::Value* valid = b.CreateAnd(
      {b.CreateICmpNE(frame(i8, okp), b.getInt8(0)),
       b.CreateICmpEQ(word(offsetof(NativeRowCache, key)), i),
       b.CreateICmpEQ(word(offsetof(NativeRowCache, gen)), gen), b.CreateICmpULT(jj, len)});
  if (write) {
    // Written in place without a log entry: asked for and said yes, and
    // logged whole already or not to be logged.
    llvm::Value* logs = frame(i8, at(offsetof(NativeRowCache, logs), i8));
    valid = b.CreateAnd(
        {valid, b.CreateICmpNE(frame(i8, at(offsetof(NativeRowCache, writable), i8)),
                               b.getInt8(0)),
         b.CreateOr(b.CreateICmpEQ(logs, b.getInt8(0)),
                    b.CreateICmpEQ(word(offsetof(NativeRowCache, ranged)), data))});
  }
  // Item j: `stride` bytes apart (a Value's or 8). A list of Values has a
  // kind byte per item, read only when the slot is valid (else a byte of
  // the frame's, to no effect); a NumberList's items are all kfix.
  llvm::Value* item = b.CreateAdd(data, b.CreateMul(jj, word(offsetof(NativeRowCache, stride))));
  llvm::Value* boxed = b.CreateICmpSLT(kfix, b.getInt64(0));
  const auto kind_from_payload = layout().kind_at - layout().payload_at;
  llvm::Value* kind_at = b.CreateSelect(
      b.CreateAnd(valid, boxed),
      b.CreateIntToPtr(b.CreateAdd(item, b.getInt64(kind_from_payload)), i8p), row_kind_dummy);
  llvm::LoadInst* kind_byte = b.CreateLoad(i8, kind_at);
  kind_byte->setMetadata(llvm::LLVMContext::MD_noalias, row_noalias);
  llvm::Value* kind_ok = b.CreateSelect(
      boxed, b.CreateICmpEQ(kind_byte, b.getInt8(static_cast<uint8_t>(want))),
      b.CreateICmpEQ(kfix, b.getInt64(want)));
  return RowHit{b.CreateAnd(valid, kind_ok), b.CreateIntToPtr(item, i64->getPointerTo()), gen};
}

llvm::Value* Gen::row_read(int r, llvm::Value* obj, llvm::Value* i, llvm::Value* j, int k,
                           int want, llvm::Value* out) {
  const RowHit h = row_hit(r, i, j, want, false);
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "row_read", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "row_read_slow", fn);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "row_read_join", fn);
  b.CreateCondBr(h.good, fast, slow);
  b.SetInsertPoint(fast);
  // The item as a value, not through `out`: `out` escapes to the helper,
  // so a store to it would count as one to the caches.
  llvm::LoadInst* item = b.CreateLoad(i64, h.at);
  item->setMetadata(llvm::LLVMContext::MD_noalias, row_noalias);
  b.CreateBr(join);
  b.SetInsertPoint(slow);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i64, i64, i8p}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_row_read), ft),
      {cptr, b.CreateBitCast(row_cache_of(r), i8p), obj, i, j, h.gen, b.getInt64(k),
       b.getInt64(want), b.CreateBitCast(out, i8p)});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  llvm::Value* got = b.CreateLoad(i64, out);
  llvm::BasicBlock* slow_end = b.GetInsertBlock();
  b.CreateBr(join);
  b.SetInsertPoint(join);
  llvm::PHINode* v = b.CreatePHI(i64, 2);
  v->addIncoming(item, fast);
  v->addIncoming(got, slow_end);
  return v;
}

void Gen::row_write(int r, llvm::Value* obj, llvm::Value* i, llvm::Value* j, int want,
                    const CV& value, llvm::Value* item) {
  const RowHit h = row_hit(r, i, j, want, true);
  llvm::Value* bits = value.k == Reg::PyFloat ? b.CreateBitCast(value.v, i64) : value.v;
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "row_write", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "row_write_slow", fn);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "row_write_join", fn);
  b.CreateCondBr(h.good, fast, slow);
  b.SetInsertPoint(fast);
  b.CreateStore(bits, h.at)->setMetadata(llvm::LLVMContext::MD_noalias, row_noalias);
  b.CreateBr(join);
  b.SetInsertPoint(slow);
  llvm::Value* counted;  // this site's log entries (native_row_write)
  {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    counted = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), counted);
  }
  // The helper logs into the call's log: its count goes there and back.
  llvm::Value* n_at = field(cptr, offsetof(NativeCtx, undo_n), i64);
  b.CreateStore(b.CreateLoad(i64, undo_n), n_at);
  auto* ft = llvm::FunctionType::get(
      i32, {i8p, i8p, i64, i64, i64, i64, i64, i8p, i64, i64, i8p, i8p, i8p}, false);
  llvm::Value* rc = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_row_write), ft),
      {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
       b.getInt64(r), obj, i, j, item, bits, b.getInt64(want),
       b.CreateBitCast(row_cache_of(r), i8p), b.CreateBitCast(row_gen_of(r), i8p),
       b.CreateBitCast(counted, i8p)});
  b.CreateStore(b.CreateLoad(i64, n_at), undo_n);
  b.CreateStore(ctx_ptr(offsetof(NativeCtx, undo)), undo_ptr);
  b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

void Gen::find_unpacks() {
  // A register qualifies when its one assignment is such an unpack and
  // each of its reads is `_t[c]` with a constant c within the count.
  std::vector<int> assigns(regs.size(), 0), reads(regs.size(), 0), item_reads(regs.size(), 0);
  std::vector<int64_t> count(regs.size(), 0);
  std::vector<const FNode*> found;
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::Var) ++reads[n.reg];
    if (n.op == Op::Assign || n.op == Op::Append) ++assigns[n.reg];
    if (n.op == Op::Assign && is_unpack_of_row(n.kids[0])) found.push_back(&n);
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  for (const FNode* a : found) count[a->reg] = a->kids[0].kids[1].constant.i;
  std::function<void(const FNode&)> items = [&](const FNode& n) {
    if (n.op == Op::GetItem && n.kids.size() == 2 && n.kids[0].op == Op::Var &&
        count[n.kids[0].reg] > 0 && n.kids[1].op == Op::Const &&
        n.kids[1].constant.k == Reg::PyInt && n.kids[1].constant.i >= -count[n.kids[0].reg] &&
        n.kids[1].constant.i < count[n.kids[0].reg])
      ++item_reads[n.kids[0].reg];
    for (const FNode& k : n.kids) items(k);
  };
  items(loop_cond);
  items(loop_body);
  for (const FNode* a : found) {
    const int r = a->reg;
    const int src = a->kids[0].kids[0].kids[0].reg;
    if (assigns[r] == 1 && reads[r] == item_reads[r] && src != r) unpack_regs.insert(r);
  }
}

const Value* Gen::compile_list(int r, int depth) const {
  // The list register r holds when the code is compiled, or, for one
  // assigned in the loop (`_it = iterate(pairs)`), the list it is given.
  if (depth > 4 || r < 0 || static_cast<size_t>(r) >= regs.size()) return nullptr;
  if (regs[r].k == Reg::Obj) {
    const auto o = static_cast<size_t>(regs[r].a);
    return o < objects.size() && objects[o].is_list() ? &objects[o] : nullptr;
  }
  const Value* out = nullptr;
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (out) return;
    if (n.op == Op::Assign && n.reg == r) {
      const FNode& v = n.kids[0];
      const FNode* x = is_iterate(v) ? &v.kids[0] : &v;
      if (x->op == Op::Var) out = compile_list(x->reg, depth + 1);
    }
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  return out;
}

void Gen::unpack_assign(const FNode& n) {
  const FNode& v = n.kids[0];
  const FNode& src = v.kids[0];
  const int t = src.kids[0].reg;
  const auto count_n = static_cast<size_t>(v.kids[1].constant.i);
  // Each item's kind: the first row's when the code is compiled.
  const Value* list = compile_list(t, 0);
  if (!list || list->list_size() == 0) throw Refuse{"unpacking a row of a list not known when compiled"};
  const Value row0 = list->list_item(0);
  if (!row0.is_list() || row0.list_size() != count_n)
    throw Refuse{"unpacking a row that is not a tuple or list of that length"};
  Unpacked u;
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  for (size_t c = 0; c < count_n; ++c) {
    Reg first;
    if (!FastLoop::Impl::scalar_of(row0.list_item(c), first) || !is_scalar(first.k))
      throw Refuse{"unpacking a row whose items are not numbers"};
    u.kinds.push_back(first.k);
    u.out.push_back(e.CreateAlloca(i64));
  }
  u.def = e.CreateAlloca(i1);
  e.CreateStore(e.getFalse(), u.def);
  RowSite s;
  s.ok = e.CreateAlloca(i1);
  s.data = e.CreateAlloca(i64);
  s.len = e.CreateAlloca(i64);
  s.kfix = e.CreateAlloca(i64);
  s.buf = e.CreateAlloca(i64, e.getInt32(4));
  s.key = s.gen = s.stride = nullptr;

  CV tv = read(t);
  if (tv.k != Reg::Obj) throw Refuse{"unpacking an item of what is not a list"};
  llvm::Value* i = int_index(src.kids[1]);
  auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
  llvm::Value* rc =
      b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                   {cptr, tv.v, i, b.getInt64(0), b.getInt64(kNativeReadRowMode),
                    b.CreateBitCast(s.buf, i8p)});
  bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
  llvm::Value* len = b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 1));
  bail_if(b.CreateICmpNE(len, b.getInt64(static_cast<int64_t>(count_n))));  // ValueError there
  b.CreateStore(b.getTrue(), s.ok);
  b.CreateStore(b.CreateLoad(i64, s.buf), s.data);
  b.CreateStore(len, s.len);
  b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 3)), s.kfix);
  for (size_t c = 0; c < count_n; ++c) {
    const int k = u.kinds[c];
    auto get = [&] {
      llvm::Value* r2 = b.CreateCall(
          ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
          {cptr, tv.v, i, b.getInt64(static_cast<int64_t>(c)), b.getInt64(k),
           b.CreateBitCast(u.out[c], i8p)});
      bail_if(b.CreateICmpNE(r2, b.getInt32(0)));
    };
    const int want = !layout().valid       ? -1
                     : k == Reg::PyInt     ? static_cast<int>(ValueKind::integer)
                     : k == Reg::PyFloat   ? static_cast<int>(ValueKind::floating)
                                           : -1;
    if (want >= 0)
      item_or_helper(site_item(s, b.getInt64(static_cast<int64_t>(c)), want), u.out[c], get);
    else
      get();
  }
  b.CreateStore(b.getTrue(), u.def);
  count(src.counter);
  count(v.slot);
  unpacked[n.reg] = std::move(u);
}

CV Gen::unpacked_item(const FNode& n) {
  auto it = unpacked.find(n.kids[0].reg);
  if (it == unpacked.end()) throw Refuse{"an unpacked item read before its unpacking"};
  const Unpacked& u = it->second;
  int64_t c = n.kids[1].constant.i;
  if (c < 0) c += static_cast<int64_t>(u.out.size());
  bail_if(b.CreateNot(b.CreateLoad(i1, u.def)));
  count(n.counter);
  const int k = u.kinds[static_cast<size_t>(c)];
  llvm::Value* p = b.CreateLoad(i64, u.out[static_cast<size_t>(c)]);
  const auto kk = static_cast<Reg::Kind>(k);
  if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(p, i8), b.getInt8(0))};
  if (is_int(kk)) return CV{k, p};
  return CV{k, b.CreateBitCast(p, f64)};
}

}  // namespace tessera::native_gen
