// Gen (native_gen.hpp): flat lists of numbers read and written at fixed
// addresses in a range loop. A list register used only as xs[i], xs[i] = v
// and len(xs) (table_plain) holds the same list for the whole call, and
// nothing the loop does moves a list held unboxed (a NumberList: no append
// to it, no write through a helper, which bails for such a list): so its
// items' address, length and kind, and the right to write it in place, are
// asked once before the loop instead of at each access, and the indices
// that are the counter plus what the loop does not change are checked at
// its first and last turns, as an array's.
#include "tessera/lang/native_gen.hpp"

#include <functional>
#include <vector>

namespace tessera::native_gen {

namespace {

// The register of the flat list site `n` reads or writes (xs[i], xs[i] = v
// written `xs = setitem(xs, v, i)`), or -1.
int flat_site_reg(const FNode& n) {
  if ((n.op != Op::GetItem || n.kids.size() != 2) &&
      (n.op != Op::SetItem || n.kids.size() != 3 || !n.in_place))
    return -1;
  return n.kids[0].op == Op::Var ? n.kids[0].reg : -1;
}

}  // namespace

void Gen::list_sites(const FNode& body, const RangeLoop& rl, std::vector<ListSite>& out) {
  // Every use of a candidate register must be one of its flat sites or
  // len(); a list of lists (t[i][j]), a nested write, a dict or a view is
  // left to the per-access code.
  std::vector<bool> bad(regs.size(), false);
  std::function<void(const FNode&, size_t)> walk = [&](const FNode& n, size_t at) {
    const int r = flat_site_reg(n);
    if (r >= 0 && list_var(n.kids[0])) {
      const bool ok = !dict_reg[r] && !views.count(r) &&
                      !(n.op == Op::SetItem && FastLoop::Impl::is_nested_write(n)) &&
                      in_place_kind(r, item_kind[r]) >= 0;
      if (ok)
        out.push_back({&n, r, at});
      else
        bad[r] = true;
    }
    if (n.op == Op::GetItem && !n.kids.empty() && n.kids[0].op == Op::GetItem &&
        !n.kids[0].kids.empty() && n.kids[0].kids[0].op == Op::Var)
      bad[n.kids[0].kids[0].reg] = true;
    for (const FNode& k : n.kids) walk(k, at);
  };
  for (size_t q = 0; q < body.kids.size(); ++q) walk(body.kids[q], q);
  (void)rl;
  std::vector<ListSite> kept;
  for (const ListSite& s : out)
    if (!bad[s.reg]) kept.push_back(s);
  out.swap(kept);
}

int Gen::list_form_now(int reg) const {
  const Reg& r = regs[static_cast<size_t>(reg)];
  const auto o = static_cast<size_t>(r.a);
  if (r.k != Reg::Obj || o >= objects.size() || !objects[o].is_list()) return 0;
  return objects[o].number_items() != nullptr ? 1 : 2;
}

bool Gen::lists_boxed_now(const std::vector<ListSite>& ss) const {
  std::set<int> written;
  for (const ListSite& s : ss)
    if (s.n->op == Op::SetItem) written.insert(s.reg);
  for (const ListSite& s : ss) {
    if (!written.count(s.reg)) continue;  // read only: a list of Values is hoisted too
    const Reg& r = regs[static_cast<size_t>(s.reg)];
    const auto o = static_cast<size_t>(r.a);
    if (r.k == Reg::Obj && o < objects.size() && objects[o].is_list() &&
        objects[o].number_items() == nullptr)
      return true;
  }
  return false;
}

void Gen::hoisted_range_chunks(const FNode& n, const RangeLoop& rl, llvm::Value* e0,
                               llvm::Value* lk, llvm::Value* lp, llvm::BasicBlock* done,
                               const std::set<const FNode*>& pr) {
  std::vector<ListSite> ss;
  if (!rl.loops_in && !hoisted_lists) list_sites(n.kids[1], rl, ss);
  // A lazy build whose lists, when compiled, would fail the check below
  // (a list of Values, as Python's lists come: only a NumberList's items
  // have fixed addresses) goes by access at once: the partial code's check
  // failed at the first call, and the whole code was compiled too (nbody_game).
  if (ss.empty() || (lazy_build && lists_boxed_now(ss))) {
    range_chunks(n, rl, e0, lk, lp, done, pr);
    return;
  }
  std::map<int, HoistedList> hl;
  std::set<const FNode*> pr_h = pr;
  llvm::Value* k0 = b.CreateLoad(i64, val[rl.k]);
  llvm::Value* ok = lists_ok(ss, rl, k0, e0, hl, pr_h);
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "list_hoisted", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "list_sites", fn);
  b.CreateCondBr(ok, fast, or_full(slow, &n, kSiteLists));
  b.SetInsertPoint(fast);
  prelog_lists(ss, rl, k0, e0, hl, nullptr);
  hoisted_lists = &hl;
  range_chunks(n, rl, e0, lk, lp, done, pr_h);
  hoisted_lists = nullptr;
  if (slow->use_empty()) {  // a lazy build: the per-access version comes with the whole code
    slow->eraseFromParent();
    return;
  }
  b.SetInsertPoint(slow);
  range_chunks(n, rl, e0, lk, lp, done, pr);
}

void Gen::top_lists(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                    llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                    llvm::Value* max_turns, llvm::Value* turns) {
  std::vector<ListSite> ss;
  list_sites(loop_body, rl, ss);
  // (A lazy build over lists that would fail the check: likewise, as lists_boxed_now.)
  if (ss.empty() || (lazy_build && lists_boxed_now(ss))) {
    if (lazy_build) throw NoLazy{};  // the general turns are all there is
    b.CreateBr(top);
    return;
  }
  // The loop is the whole function: its turns in chunks (a checkpoint
  // between them, as the general turns take), a bail back to the call's
  // start, where the caller undoes the log (the lists' writes logged
  // before the loop with the rest), as the general turns' bails do.
  llvm::Value* bad = b.getFalse();
  if (maybe_undef[rl.k]) bad = b.CreateNot(b.CreateLoad(i1, def[rl.k]));
  llvm::Value* e0 = end_value(rl, bad);
  if (rl.step > 1)
    bad = b.CreateOr(bad, b.CreateICmpSGT(e0, b.getInt64(INT64_MAX - (rl.step - 1))));
  else if (rl.step < -1)
    bad = b.CreateOr(bad, b.CreateICmpSLT(e0, b.getInt64(INT64_MIN - (rl.step + 1))));
  llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "list_top_ask", fn);
  b.CreateCondBr(bad, top, ask);
  b.SetInsertPoint(ask);
  std::map<int, HoistedList> hl;
  std::set<const FNode*> pr_h;
  // k + step cannot overflow: k < end before it, the end checked above.
  pr_h.insert(rl.inc);
  llvm::Value* k0 = b.CreateLoad(i64, val[rl.k]);
  llvm::Value* ok = lists_ok(ss, rl, k0, e0, hl, pr_h);
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "list_hoisted", fn);
  llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "list_chunk", fn);
  b.CreateCondBr(ok, fast, top);
  b.SetInsertPoint(fast);
  // This call's turns stop at its checkpoint (max_turns), where the log
  // starts again: their writes alone are logged (a 200,000-item list
  // written 16,384 turns a call: 128 KB a call, not the whole 1.6 MB).
  llvm::Value* done_n = b.CreateLoad(i64, turns);
  llvm::Value* cap = b.CreateSelect(b.CreateICmpSGT(max_turns, done_n),
                                    b.CreateSub(max_turns, done_n), b.getInt64(1));
  prelog_lists(ss, rl, k0, e0, hl, cap);
  b.CreateBr(chunk);
  chunked_turns(rl, e0, chunk, done, checkpoint, interrupted, max_turns, turns, [&] {
    hoisted_lists = &hl;
    proven = &pr_h;
    body_turn();
    proven = nullptr;
    hoisted_lists = nullptr;
  });
}

llvm::Value* Gen::lists_ok(const std::vector<ListSite>& ss, const RangeLoop& rl, llvm::Value* k0,
                           llvm::Value* e0, std::map<int, HoistedList>& hl,
                           std::set<const FNode*>& pr_h) {
  // Each list once: its items' address and number, and (when written) the
  // right to write it in place, from the helpers the sites call.
  std::set<int> written;
  for (const ListSite& s : ss)
    if (s.n->op == Op::SetItem) written.insert(s.reg);
  llvm::Value* ok = before(rl, k0, e0);  // at least one turn (the log's count)
  for (const ListSite& s : ss) {
    if (hl.count(s.reg)) continue;
    HoistedList h;
    h.want = in_place_kind(s.reg, item_kind[s.reg]);
    // (Read without a bail: a register not defined yet takes the
    // per-access code, which bails only where the list is read.)
    llvm::Value* defined = b.getTrue();
    if (maybe_undef[s.reg]) defined = b.CreateLoad(i1, def[s.reg]);
    const CV x{Reg::Obj, b.CreateSelect(defined, b.CreateLoad(i64, val[s.reg]), b.getInt64(-1))};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* buf = e.CreateAlloca(i64, e.getInt32(4));
    // The helper's answer kept for the next entries of the loop while the
    // list and the count of helper calls that may move a list's items are
    // the same (an inner loop entered at each turn of an outer one: a call
    // per entry was most of coin_change's `for c in coins`).
    llvm::Value* memo_obj = e.CreateAlloca(i64);
    llvm::Value* memo_gen = e.CreateAlloca(i64);
    llvm::Value* memo_rc = e.CreateAlloca(i32);
    // (Every one set before the first read: LLVM would fold a read of an
    // alloca not written on some path it cannot rule out to anything.)
    e.CreateStore(e.getInt64(-2), memo_obj);
    e.CreateStore(e.getInt64(0), memo_gen);
    e.CreateStore(e.getInt32(1), memo_rc);
    for (unsigned q = 0; q < 4; ++q)
      e.CreateStore(e.getInt64(0), e.CreateConstInBoundsGEP1_64(e.getInt64Ty(), buf, q));
    llvm::Value* gen_at = list_epoch_of();
    llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "list_hoist_site", fn);
    llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "list_hoist_have", fn);
    b.CreateCondBr(b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, memo_obj), x.v),
                               b.CreateICmpEQ(b.CreateLoad(i64, memo_gen),
                                              b.CreateLoad(i64, gen_at))),
                   have, ask);
    b.SetInsertPoint(ask);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
    b.CreateStore(b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                               {cptr, x.v, b.getInt64(0), b.getInt64(0),
                                b.getInt64(written.count(s.reg) ? kNativeFlatMode
                                                                : kNativeFlatReadMode),
                                b.CreateBitCast(buf, i8p)}),
                  memo_rc);
    b.CreateStore(x.v, memo_obj);
    b.CreateStore(b.CreateLoad(i64, gen_at), memo_gen);
    b.CreateBr(have);
    b.SetInsertPoint(have);
    llvm::Value* rc = b.CreateLoad(i32, memo_rc);
    h.data = b.CreateLoad(i64, buf);
    h.len = b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, buf, 1));
    // A NumberList of the kind compiled for (8 bytes an item, one kind):
    // a list of Values keeps each item's own kind, checked at each read.
    llvm::Value* mine =
        b.CreateAnd(b.CreateICmpEQ(rc, b.getInt32(0)),
                    b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(
                                                                  i64, buf, 2)),
                                               b.getInt64(8)),
                                b.CreateICmpEQ(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(
                                                                  i64, buf, 3)),
                                               b.getInt64(h.want))));
    const int form = list_form_now(s.reg);
    if (!written.count(s.reg) && layout().valid && form != 1) {
      // Read only: a list of Values (`for c in coins` of a caller's list),
      // its items' kinds checked at each read. Of the form the register
      // holds now, when known, only: a NumberList's reads keep their
      // constant stride (LLVM vectorises them).
      llvm::Value* stride = b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, buf, 2));
      llvm::Value* boxed =
          b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, buf, 3)),
                                     b.getInt64(-1)),
                      b.CreateICmpEQ(stride, b.getInt64(layout().size)));
      llvm::Value* values = b.CreateAnd(b.CreateICmpEQ(rc, b.getInt32(0)), boxed);
      if (form == 2) {  // a list of Values now: only that
        mine = values;
        h.boxed = b.getTrue();
        h.stride = b.getInt64(layout().size);
      } else {
        mine = b.CreateOr(mine, values);
        h.boxed = boxed;
        h.stride = b.CreateSelect(boxed, stride, b.getInt64(8));
      }
    }
    mine = b.CreateAnd(mine, b.CreateAnd(defined, b.CreateICmpSGT(h.len, b.getInt64(0))));
    if (written.count(s.reg)) {
      // native_list_set's ask, which writes nothing for a NumberList: 2
      // when no other register holds the list and no one but its variable's
      // frame slot shares it (the same answer for every item of its kind).
      llvm::BasicBlock* from = b.GetInsertBlock();
      llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "list_hoist_ask", fn);
      llvm::BasicBlock* asked = llvm::BasicBlock::Create(ctx, "list_hoist_asked", fn);
      b.CreateCondBr(mine, ask, asked);
      b.SetInsertPoint(ask);
      const Reg::Kind k = h.want == static_cast<int>(ValueKind::floating) ? Reg::PyFloat
                                                                           : Reg::PyInt;
      llvm::Value* zero = k == Reg::PyFloat ? static_cast<llvm::Value*>(
                                                  llvm::ConstantFP::get(f64, 0.0))
                                            : b.getInt64(0);
      llvm::Value* item = reg_arg(CV{k, zero});
      auto* st = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i8p}, false);
      llvm::Value* answer = b.CreateCall(
          st, fptr(reinterpret_cast<void*>(&native_list_set), st),
          {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
           b.getInt64(s.reg | kNativeInPlaceAsk), x.v, b.getInt64(0), item});
      llvm::Value* may = b.CreateICmpEQ(answer, b.getInt32(2));
      llvm::BasicBlock* ask_end = b.GetInsertBlock();
      b.CreateBr(asked);
      b.SetInsertPoint(asked);
      llvm::PHINode* phi = b.CreatePHI(i1, 2);
      phi->addIncoming(b.getFalse(), from);
      phi->addIncoming(may, ask_end);
      mine = phi;
    }
    ok = b.CreateAnd(ok, mine);
    hl[s.reg] = h;
  }
  // Indices affine in the counter: in [0, len) at the first and last turns
  // (their arithmetic then unchecked, as an array's); others checked at
  // each turn, against the length kept.
  llvm::Value* last = last_turn(rl, k0, e0);
  for (const ListSite& s : ss) {
    const FNode& ix = s.n->kids[s.n->op == Op::GetItem ? 1 : 2];
    std::vector<const FNode*> ops;
    if (affine(ix, rl, s.at, ops) == 2) continue;
    llvm::Value* bad = b.getFalse();
    const bool after = s.at > rl.inc_at;
    llvm::Value* lo = affine_at(ix, rl, after, k0, bad);
    llvm::Value* hi = affine_at(ix, rl, after, last, bad);
    llvm::Value* len = hl[s.reg].len;
    ok = b.CreateAnd(ok, b.CreateNot(bad));
    ok = b.CreateAnd(ok, b.CreateAnd(b.CreateICmpULT(lo, len), b.CreateICmpULT(hi, len)));
    pr_h.insert(s.n);
    pr_h.insert(ops.begin(), ops.end());
  }
  return ok;
}

void Gen::prelog_lists(const std::vector<ListSite>& ss, const RangeLoop& rl, llvm::Value* k0,
                       llvm::Value* e0, std::map<int, HoistedList>& hl, llvm::Value* cap) {
  std::set<int> written;
  bool all_affine = true;
  for (const ListSite& s : ss) {
    if (s.n->op != Op::SetItem) continue;
    written.insert(s.reg);
    std::vector<const FNode*> ops;
    if (affine(s.n->kids[2], rl, s.at, ops) == 2) all_affine = false;
  }
  // The old bytes of what the loop will write, for a bail: the whole list
  // once per call (as a site that wrote more than the list holds does:
  // row_ranged), or, when the loop writes a small part of a long list, the
  // items each write site's turns reach.
  llvm::Value* turns = turn_count(rl, k0, e0);
  if (cap) turns = b.CreateSelect(b.CreateICmpULT(cap, turns), cap, turns);
  for (int r : written) {
    const HoistedList& h = hl[r];
    llvm::Value* rangedp = ranged_of(r);
    llvm::BasicBlock* todo = llvm::BasicBlock::Create(ctx, "list_prelog", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "list_logged", fn);
    b.CreateCondBr(b.CreateICmpEQ(b.CreateLoad(i64, rangedp), h.data), next, todo);
    b.SetInsertPoint(todo);
    auto log_range = [&](llvm::Value* first, llvm::Value* step_bytes, llvm::Value* count_n) {
      auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i8p, i64, i64, i64}, false);
      llvm::Value* n_now = b.CreateLoad(i64, undo_n);
      llvm::Value* np =
          b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_log_range), ft),
                       {cptr, n_now, first, step_bytes, count_n, b.getInt64(8)});
      b.CreateStore(np, undo_ptr);
      b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
      b.CreateStore(b.CreateAdd(n_now, b.getInt64(1)), undo_n);
    };
    llvm::BasicBlock* whole = llvm::BasicBlock::Create(ctx, "list_log_whole", fn);
    std::vector<const ListSite*> ws;
    for (const ListSite& s : ss)
      if (s.n->op == Op::SetItem && s.reg == r) ws.push_back(&s);
    if (all_affine) {
      llvm::BasicBlock* spans = llvm::BasicBlock::Create(ctx, "list_log_spans", fn);
      llvm::Value* reach = b.CreateMul(turns, b.getInt64(4 * static_cast<int64_t>(ws.size())));
      b.CreateCondBr(b.CreateICmpULE(h.len, reach), whole, spans);
      b.SetInsertPoint(spans);
      for (const ListSite* s : ws) {
        const FNode& ix = s->n->kids[2];
        std::vector<const FNode*> ops;
        const int c = affine(ix, rl, s->at, ops);
        llvm::Value* unused = b.getFalse();  // checked above
        llvm::Value* i0 = affine_at(ix, rl, s->at > rl.inc_at, k0, unused);
        llvm::Value* first = b.CreateIntToPtr(
            b.CreateAdd(h.data, b.CreateShl(i0, b.getInt64(3))), i8p);
        // (A constant index: its one item.)
        log_range(first, b.getInt64(8 * c * rl.step), c == 0 ? b.getInt64(1) : turns);
      }
      b.CreateBr(next);
    } else {
      b.CreateBr(whole);
    }
    b.SetInsertPoint(whole);
    log_range(b.CreateIntToPtr(h.data, i8p), b.getInt64(8), h.len);
    b.CreateStore(h.data, rangedp);
    b.CreateBr(next);
    b.SetInsertPoint(next);
  }
}

const Gen::HoistedList* Gen::hoisted_list(const FNode& n) const {
  if (!hoisted_lists) return nullptr;
  const int r = flat_site_reg(n);
  auto it = r >= 0 ? hoisted_lists->find(r) : hoisted_lists->end();
  return it == hoisted_lists->end() ? nullptr : &it->second;
}

llvm::Value* Gen::hoisted_at(const FNode& n, const HoistedList& h, llvm::Value* i) {
  llvm::Value* at = i;
  if (!is_proven(n)) {
    // Python's negative index from the end; past either end the
    // interpreter's IndexError (the per-access code's helper bails too).
    at = b.CreateSelect(b.CreateICmpSLT(i, b.getInt64(0)), b.CreateAdd(i, h.len), i);
    bail_if(b.CreateNot(b.CreateICmpULT(at, h.len)));
  }
  if (h.stride) {  // 8 or a Value's bytes an item (a list the loop only reads)
    llvm::Value* base = b.CreateIntToPtr(h.data, i8p);
    return b.CreateBitCast(b.CreateInBoundsGEP(i8, base, b.CreateMul(at, h.stride)),
                           i64->getPointerTo());
  }
  llvm::Value* base = b.CreateIntToPtr(h.data, i64->getPointerTo());
  return b.CreateInBoundsGEP(i64, base, at);
}

CV Gen::hoisted_item(const FNode& n, const HoistedList& h) {
  const int k = item_kind[n.kids[0].reg];
  read(n.kids[0].reg);
  llvm::Value* i = int_index(n.kids[1]);
  llvm::Value* at = hoisted_at(n, h, i);
  if (h.boxed) {
    // A Value's kind byte (before its payload, where `at` points): an item
    // of another kind is the per-access code's (bail).
    llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "boxed_kind", fn);
    llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "boxed_ok", fn);
    b.CreateCondBr(h.boxed, check, go);
    b.SetInsertPoint(check);
    llvm::Value* kb = b.CreateLoad(
        i8, b.CreateConstInBoundsGEP1_64(i8, b.CreateBitCast(at, i8p),
                                         static_cast<uint64_t>(layout().kind_at -
                                                               layout().payload_at)));
    bail_if(b.CreateICmpNE(kb, b.getInt8(static_cast<uint8_t>(h.want))));
    b.CreateBr(go);
    b.SetInsertPoint(go);
  }
  llvm::Value* p = b.CreateLoad(i64, at);
  count(n.counter);
  if (k == Reg::PyInt) return CV{k, p};
  return CV{k, b.CreateBitCast(p, f64)};
}

CV Gen::hoisted_write(const FNode& n, const HoistedList& h) {
  CV x = read(n.kids[0].reg);
  const CV value = eval(n.kids[1]);
  if (!scalar_cv(value)) throw Refuse{"writing into a list what is not a number"};
  llvm::Value* i = int_index(n.kids[2]);
  const int written_kind = value.s ? -1 : value.k;
  if (in_place_kind(n.kids[0].reg, written_kind) != h.want) {
    // Another kind into a NumberList: the per-access code's helper declines
    // it too (a list held unboxed is not written out by native code).
    bail_if(b.getTrue());
  } else {
    llvm::Value* bits = value.k == Reg::PyFloat ? b.CreateBitCast(value.v, i64) : value.v;
    b.CreateStore(bits, hoisted_at(n, h, i));
  }
  count(n.counter);
  return x;
}

}  // namespace tessera::native_gen
