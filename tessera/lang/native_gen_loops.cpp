// Gen (native_gen.hpp): loops. Nested while loops, and range loops
// (`for i in range(a, b)` as the translator writes it): found, their
// accesses proven before them, their writes logged before them, and their
// turns in chunks (Ctrl-C between them) that LLVM can vectorise; the loop
// itself as one, with or without loops inside.
#include "tessera/lang/native_gen.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace tessera::native_gen {

Gen::WrapCheck Gen::begin_wrap_check(const FNode* loop) {
  const WrapCheck was = wrap_check;
  wrap_check.on = lazy_build && general_sites && general_sites->count(site_id(loop, kSiteWrap));
  wrap_check.seen = false;
  return was;
}

llvm::BasicBlock* Gen::range_failed(llvm::BasicBlock* general, const FNode* loop) {
  return or_full(general, loop, wrap_check.seen && !wrap_check.on ? kSiteWrap : kSiteRange);
}

int Gen::site_id(const FNode* loop, SiteKind kind) {
  if (!loop) return kind;
  // The loop's shape (its nodes' operations, pre-order), not its place: the
  // copies of a function called inline at several places (spectral_norm's
  // four calls) share their id, so that one failed check gives all of them
  // their general versions at once, not one compile per copy. Loops of one
  // shape elsewhere get theirs too (more code, the same answers).
  auto [it, added] = site_of.emplace(loop, 0);
  if (added) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    std::function<void(const FNode&)> walk = [&](const FNode& x) {
      mix(static_cast<uint64_t>(x.op));
      mix(static_cast<uint64_t>(x.fast));
      mix(x.kids.size());
      for (const FNode& k : x.kids) walk(k);
    };
    walk(*loop);
    it->second = static_cast<int>(h % 100000000) + 1;
  }
  return it->second * kSiteKinds + kind;
}

llvm::BasicBlock* Gen::or_full(llvm::BasicBlock* general, const FNode* loop, SiteKind kind) {
  if (!lazy_build) return general;
  const int site = site_id(loop, kind);
  if (site >= 0 && general_sites && general_sites->count(site)) return general;
  ++bails;  // a way back to the call's start: the nest's writes need their log
  // One small block per site: the caller learns which check failed (site + 1;
  // 0: unknown, the whole code then) and compiles that loop's general version.
  llvm::BasicBlock* at = llvm::BasicBlock::Create(ctx, "need_site", fn);
  llvm::IRBuilderBase::InsertPointGuard keep(b);
  b.SetInsertPoint(at);
  b.CreateStore(b.getInt64(site + 1), field(cptr, offsetof(NativeCtx, need_site), i64));
  b.CreateBr(need_full);
  return at;
}

CV Gen::while_(const FNode& n) {
  const auto comp = comp_loop.find(&n);
  if (comp != comp_loop.end()) comp_start(comp->second);
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* lk = e.CreateAlloca(i8);
  llvm::Value* lp = e.CreateAlloca(i64);
  b.CreateStore(b.getInt8(Reg::Nil), lk);
  b.CreateStore(b.getInt64(0), lp);
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "while", fn);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "body", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "wend", fn);
  RangeLoop rl;
  // A loop with loops inside is versioned inside the unchecked version of
  // an outer loop only (where something remains to check): elsewhere
  // (the checked versions) its inner loops are, so that the code grows
  // linearly with the depth of the nest.
  if (range_loop(n.kids[0], n.kids[1], rl) && (!rl.loops_in || proven)) {
    const bool unit = rl.step == 1 || rl.step == -1;
    if (unit) no_overflow.insert(rl.inc);
    if (unit && proven && prelogged && all_proven(n.kids[1], *proven) &&
        (!maybe_undef[rl.k] || !const_end(rl))) {
      // Inside a loop nest whose check before it covered every access of
      // this loop (and logged its writes): one version, without checks.
      // A counter or end that may be undefined at the call's start (an
      // inner loop's hidden registers are) was assigned just before the
      // loop: LLVM folds its flag's test away (else the general turns).
      // Not for such a counter with an end of constants only (`range(3)`):
      // the versioned form below measured faster there (SLP's packing).
      llvm::Value* bad = b.getFalse();
      if (maybe_undef[rl.k]) bad = b.CreateNot(b.CreateLoad(i1, def[rl.k]));
      llvm::Value* e0 = end_value(rl, bad);
      llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "proven_range", fn);
      // A counter defined for sure: no other version (LLVM would drop it,
      // after optimising it for nothing).
      if (llvm::isa<llvm::ConstantInt>(bad))
        b.CreateBr(fast);
      else
        b.CreateCondBr(bad, or_full(head, &n, kSiteUndef), fast, unlikely());
      b.SetInsertPoint(fast);
      hoisted_range_chunks(n, rl, e0, lk, lp, done, *proven);
    } else {
    // Two versions: with the accesses checked once before the loop (and
    // their writes logged there), and as below when that check fails.
    // With loops inside, the accesses of the whole nest whose indices
    // stay within intervals known before the loop are checked there too.
    std::vector<Hoisted> hs;
    std::set<const FNode*> pr;
    if (!unit) pr.insert(rl.inc);  // no overflow: range_ok checks the end
    for (size_t q = 0; q < n.kids[1].kids.size(); ++q) collect(n.kids[1].kids[q], rl, q, hs, pr);
    llvm::Value *k0, *e0;
    const WrapCheck outer_check = begin_wrap_check(&n);
    llvm::Value* ok = range_ok(rl, hs, k0, e0);
    std::set<int> copy;
    if (rl.loops_in) ok = b.CreateAnd(ok, nest_ok(n.kids[1], rl, k0, e0, pr, copy));
    if (proven) pr.insert(proven->begin(), proven->end());
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "range", fn);
    b.CreateCondBr(ok, fast, range_failed(head, &n));
    wrap_check = outer_check;
    b.SetInsertPoint(fast);
    prelog(rl, hs, k0, e0);
    for (int r : copy) snapshot_once(r);
    hoisted_range_chunks(n, rl, e0, lk, lp, done, pr);
    }
  } else {
    b.CreateBr(head);
  }
  if (head->use_empty()) {  // the checked-once version only (see above)
    head->eraseFromParent();
    body->eraseFromParent();
  } else {
    b.SetInsertPoint(head);
    interrupt_check(interrupted);
    b.CreateCondBr(cond(n.kids[0]), body, done);
    b.SetInsertPoint(body);
    loops.push_back({head, done, lk, lp});
    CV v = eval_any(n.kids[1]);
    loops.pop_back();
    b.CreateStore(kind_of(v), lk);
    b.CreateStore(to_payload(v), lp);
    b.CreateBr(head);
  }
  b.SetInsertPoint(done);
  if (comp != comp_loop.end()) comp_finish(comp->second);
  return CV{kDyn, b.CreateLoad(i8, lk), b.CreateLoad(i64, lp)};
}

void Gen::range_chunks(const FNode& n, const RangeLoop& rl, llvm::Value* e0, llvm::Value* lk,
                       llvm::Value* lp, llvm::BasicBlock* done, const std::set<const FNode*>& pr) {
  llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "chunk", fn);
  llvm::BasicBlock* fhead = llvm::BasicBlock::Create(ctx, "rhead", fn);
  llvm::BasicBlock* fbody = llvm::BasicBlock::Create(ctx, "rbody", fn);
  llvm::BasicBlock* fend = llvm::BasicBlock::Create(ctx, "rchunk_end", fn);
  llvm::BasicBlock* ffin = llvm::BasicBlock::Create(ctx, "rfin", fn);
  b.CreateBr(chunk);
  b.SetInsertPoint(chunk);
  if (rl.loops_in) {
    // Loops inside: one loop, Ctrl-C checked on each turn (the chunks of
    // its innermost loops check it too); chunks here would double the
    // depth of the nest for the optimiser (seconds of compile time).
    b.CreateBr(fhead);
    b.SetInsertPoint(fhead);
    interrupt_check(interrupted);
    b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), fbody, fend);
  } else {
    // Ctrl-C before a chunk when more than one chunk's turns are left: a
    // shorter loop (every chunk of 65,536 turns or less) is the inner loop
    // of a loop that checks it on each turn, and a constant short range
    // (`range(-1, 2)`, `range(3)`) then keeps no exit but its end, which
    // LLVM unrolls whole.
    llvm::Value* k = b.CreateLoad(i64, val[rl.k]);
    llvm::Value* left = rl.step > 0 ? b.CreateSub(e0, k) : b.CreateSub(k, e0);
    llvm::BasicBlock* longer = llvm::BasicBlock::Create(ctx, "long_range", fn);
    llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "chunk_go", fn);
    if (!const_end(rl)) {
      // An end known at run time only (`range(k.shape[1])`, a local the
      // loop does not write): at most one chunk's turns left, the common
      // case, run as one plain loop up to the end, without the chunk's
      // bookkeeping, which LLVM cannot drop when it does not know that
      // one chunk suffices.
      llvm::BasicBlock* phead = llvm::BasicBlock::Create(ctx, "shead", fn);
      llvm::BasicBlock* pbody = llvm::BasicBlock::Create(ctx, "sbody", fn);
      // A float that is Python's at the first turn and np.float32 after
      // (`s = 0.0`, then `s += img[i, k]`): the first turn on its own, so
      // that in the loop its kind is known (its value an f32, not an f64
      // converted to f32 and back at each turn: a dependency chain three
      // times as long).
      bool peel = false;
      for (int r : rl.assigned) peel = peel || (r != rl.k && f32_reg(r));
      llvm::BasicBlock* peel_test = peel ? llvm::BasicBlock::Create(ctx, "speel_test", fn) : phead;
      b.CreateCondBr(b.CreateICmpSGT(left, b.getInt64(1 << 16)), longer, peel_test);
      // A turn at `body` if one is left, at `test`; then the loop's head.
      const auto turn_if_left = [&](llvm::BasicBlock* test, llvm::BasicBlock* body) {
        b.SetInsertPoint(test);
        b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), body, ffin);
        b.SetInsertPoint(body);
        unchecked_turn(n, rl, phead, done, lk, lp, pr);
      };
      if (peel) turn_if_left(peel_test, llvm::BasicBlock::Create(ctx, "speel", fn));
      turn_if_left(phead, pbody);
    } else {
      b.CreateCondBr(b.CreateICmpSGT(left, b.getInt64(1 << 16)), longer, go);
    }
    b.SetInsertPoint(longer);
    interrupt_check(interrupted);
    b.CreateBr(go);
    b.SetInsertPoint(go);
    llvm::Value* lim = chunk_limit(rl, b.CreateLoad(i64, val[rl.k]), e0, b.getInt64(1 << 16));
    b.CreateBr(fhead);
    b.SetInsertPoint(fhead);
    b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), lim), fbody, fend);
  }
  b.SetInsertPoint(fbody);
  unchecked_turn(n, rl, fhead, done, lk, lp, pr);
  b.SetInsertPoint(fend);
  b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), chunk, ffin);
  b.SetInsertPoint(ffin);
  count(rl.cond->counter);
  b.CreateBr(done);
}

void Gen::unchecked_turn(const FNode& n, const RangeLoop& rl, llvm::BasicBlock* head,
                         llvm::BasicBlock* done, llvm::Value* lk, llvm::Value* lp,
                         const std::set<const FNode*>& pr) {
  count(rl.cond->counter);
  const auto* saved_proven = proven;
  const bool saved_prelogged = prelogged;
  proven = &pr;
  prelogged = true;
  loops.push_back({head, done, lk, lp});
  CV fv = eval_any(n.kids[1]);
  loops.pop_back();
  proven = saved_proven;
  prelogged = saved_prelogged;
  b.CreateStore(kind_of(fv), lk);
  b.CreateStore(to_payload(fv), lp);
  b.CreateBr(head);
}

bool Gen::all_proven(const FNode& n, const std::set<const FNode*>& pr) {
  if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) && !pr.count(&n))
    return false;
  for (const FNode& k : n.kids)
    if (!all_proven(k, pr)) return false;
  return true;
}

void Gen::scan(const FNode& n, std::map<int, int>& assigns, bool& loops_in) {
  if (n.op == Op::Assign) ++assigns[n.reg];
  if (n.op == Op::While) loops_in = true;
  if (n.op == Op::SetItem) {  // a slice write is a loop (slice_write)
    for (size_t k = 2; k < n.kids.size(); ++k)
      if (slice_index(n.kids[k])) loops_in = true;
  }
  for (const FNode& k : n.kids) scan(k, assigns, loops_in);
}

bool Gen::step_of(Fast cond, int64_t step) {
  constexpr int64_t kMaxStep = int64_t{1} << 32;
  return cond == Fast::lt ? step > 0 && step <= kMaxStep : step < 0 && step >= -kMaxStep;
}

llvm::Value* Gen::last_turn(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0) {
  if (rl.step == 1 || rl.step == -1) return b.CreateSub(e0, b.getInt64(rl.step));
  const int64_t mag = rl.step > 0 ? rl.step : -rl.step;
  llvm::Value* span = rl.step > 0 ? b.CreateSub(b.CreateSub(e0, k0), b.getInt64(1))
                                  : b.CreateSub(b.CreateSub(k0, e0), b.getInt64(1));
  llvm::Value* whole = b.CreateMul(b.CreateUDiv(span, b.getInt64(mag)), b.getInt64(mag));
  return rl.step > 0 ? b.CreateAdd(k0, whole) : b.CreateSub(k0, whole);
}

llvm::Value* Gen::turn_count(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0) {
  if (rl.step == 1) return b.CreateSub(e0, k0);
  if (rl.step == -1) return b.CreateSub(k0, e0);
  const int64_t mag = rl.step > 0 ? rl.step : -rl.step;
  llvm::Value* span = rl.step > 0 ? b.CreateSub(b.CreateSub(e0, k0), b.getInt64(1))
                                  : b.CreateSub(b.CreateSub(k0, e0), b.getInt64(1));
  return b.CreateAdd(b.CreateUDiv(span, b.getInt64(mag)), b.getInt64(1));
}

bool Gen::range_loop(const FNode& cond, const FNode& body, RangeLoop& rl) {
  if (cond.op != Op::Binary || cond.kids.size() != 2) return false;
  if (cond.fast != Fast::lt && cond.fast != Fast::gt) return false;
  const FNode& kv = cond.kids[0];
  const FNode& ev = cond.kids[1];
  if (kv.op != Op::Var || !int_reg(kv.reg)) return false;
  if (ev.op == Op::Var) {
    if (!int_reg(ev.reg) || ev.reg == kv.reg) return false;
  } else if (ev.op != Op::Const || ev.constant.k != Reg::PyInt) {
    return false;
  }
  if (body.op != Op::Block) return false;
  std::map<int, int> assigns;
  scan(body, assigns, rl.loops_in);
  rl.cond = &cond;
  rl.k = kv.reg;
  rl.end = &ev;
  if (assigns[rl.k] != 1 || (ev.op == Op::Var && assigns.count(ev.reg))) return false;
  for (size_t q = 0; q < body.kids.size(); ++q) {
    const FNode& s = body.kids[q];
    if (s.op != Op::Assign) return false;
    if (s.reg == rl.k) {
      const FNode& v = s.kids[0];
      if (v.op != Op::Binary || v.fast != Fast::add || v.kids[0].op != Op::Var ||
          v.kids[0].reg != rl.k || v.kids[1].op != Op::Const ||
          v.kids[1].constant.k != Reg::PyInt ||
          !step_of(cond.fast, v.kids[1].constant.i))
        return false;
      rl.step = v.kids[1].constant.i;
      rl.inc_at = q;
      rl.inc = &v;
      break;
    }
    if (s.kids[0].op == Op::Var && s.kids[0].reg == rl.k && assigns[s.reg] == 1)
      rl.ivar[s.reg] = q;
  }
  if (!rl.inc) return false;
  for (const auto& [r, c] : assigns) rl.assigned.insert(r);
  rebound_in(body, rl.rebound);
  return true;
}

void Gen::prelog(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value* k0,
                 llvm::Value* e0) {
  llvm::Value* turns_n = turn_count(rl, k0, e0);
  for (const Hoisted& h : hs) {
    if (h.n->op != Op::SetItem) continue;
    llvm::Value*& flag = snapped[h.arr];
    if (!flag) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      flag = e.CreateAlloca(i1);
      e.CreateStore(e.getFalse(), flag);
    }
    llvm::Value* elements = b.getInt64(1);
    for (int d = 0; d < atype[h.arr].nd; ++d)
      elements = b.CreateMul(elements, ashape(h.arr, d));
    llvm::BasicBlock* copy = llvm::BasicBlock::Create(ctx, "copy", fn);
    llvm::BasicBlock* log = llvm::BasicBlock::Create(ctx, "prelog", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "logged", fn);
    llvm::BasicBlock* test = llvm::BasicBlock::Create(ctx, "small", fn);
    b.CreateCondBr(b.CreateOr(b.CreateLoad(i1, flag), fresh_of(h.arr)), next, test);
    b.SetInsertPoint(test);
    b.CreateCondBr(b.CreateICmpULE(elements, b.CreateMul(turns_n, b.getInt64(4))), copy, log);
    b.SetInsertPoint(copy);
    auto* st = llvm::FunctionType::get(i8p, {i8p, i64, i64}, false);
    llvm::Value* n_at = b.CreateLoad(i64, undo_n);
    b.CreateStore(b.CreateCall(st, fptr(reinterpret_cast<void*>(&native_snapshot), st),
                               {cptr, n_at, apay(h.arr)}),
                  undo_ptr);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
    b.CreateStore(b.CreateAdd(n_at, b.getInt64(1)), undo_n);
    b.CreateStore(b.getTrue(), flag);
    b.CreateBr(next);
    b.SetInsertPoint(log);
    llvm::Value* bad = b.getFalse();  // already checked by range_ok
    llvm::Value* off = b.getInt64(0);
    llvm::Value* step = b.getInt64(0);
    for (size_t d = 0; d < h.coef.size(); ++d) {
      llvm::Value* i0 = affine_at(h.n->kids[h.first + d], rl, h.after_inc, k0, bad);
      off = b.CreateAdd(off, b.CreateMul(i0, astride(h.arr, d)));
      if (h.coef[d] != 0)
        step = b.CreateAdd(step, b.CreateMul(astride(h.arr, d), b.getInt64(h.coef[d] * rl.step)));
    }
    const unsigned size = dtype_size(atype[h.arr].dt);
    llvm::Value* first =
        b.CreateInBoundsGEP(i8, abase(h.arr), b.CreateMul(off, b.getInt64(size)));
    if (std::all_of(h.coef.begin(), h.coef.end(), [](int64_t c) { return c == 0; }) &&
        (size == 8 || size == 4 || size == 1)) {
      // One element written at every turn (dp[x] in `for c in coins`): its
      // old value logged here, with no call (range_ok: at least one turn).
      log_write(first, size == 8 ? static_cast<llvm::Type*>(i64)
                       : size == 4 ? static_cast<llvm::Type*>(i32) : i8, size);
      b.CreateBr(next);
      b.SetInsertPoint(next);
      continue;
    }
    auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i8p, i64, i64, i64}, false);
    llvm::Value* n_now = b.CreateLoad(i64, undo_n);
    llvm::Value* np = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_log_range), ft),
        {cptr, n_now, first, b.CreateMul(step, b.getInt64(size)), turns_n, b.getInt64(size)});
    b.CreateStore(np, undo_ptr);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
    b.CreateStore(b.CreateAdd(n_now, b.getInt64(1)), undo_n);
    b.CreateBr(next);
    b.SetInsertPoint(next);
  }
}

llvm::Value* Gen::chunk_limit(const RangeLoop& rl, llvm::Value* k, llvm::Value* e0,
                              llvm::Value* room) {
  llvm::Value* left = rl.step > 0 ? b.CreateSub(e0, k) : b.CreateSub(k, e0);
  llvm::Value* cut = rl.step > 0 ? b.CreateAdd(k, room) : b.CreateSub(k, room);
  return b.CreateSelect(b.CreateICmpUGT(left, room), cut, e0);
}

llvm::Value* Gen::before(const RangeLoop& rl, llvm::Value* k, llvm::Value* lim) {
  return rl.step > 0 ? b.CreateICmpSLT(k, lim) : b.CreateICmpSGT(k, lim);
}

llvm::BasicBlock* Gen::chunked_turns(const RangeLoop& rl, llvm::Value* e0, llvm::BasicBlock* chunk,
                                     llvm::BasicBlock* done, llvm::BasicBlock* checkpoint,
                                     llvm::BasicBlock* interrupted, llvm::Value* max_turns,
                                     llvm::Value* turns,
                                     const std::function<void()>& turn) {
  llvm::BasicBlock* fhead = llvm::BasicBlock::Create(ctx, "thead", fn);
  llvm::BasicBlock* fbody = llvm::BasicBlock::Create(ctx, "tbody", fn);
  llvm::BasicBlock* fend = llvm::BasicBlock::Create(ctx, "tchunk_end", fn);
  llvm::BasicBlock* ffin = llvm::BasicBlock::Create(ctx, "tfin", fn);
  b.SetInsertPoint(chunk);
  interrupt_check(interrupted);
  // None: the context's, read at each chunk (a whole-array copy raises it:
  // native_snapshot).
  if (!max_turns) max_turns = b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, max_turns), i64));
  llvm::Value* t = b.CreateLoad(i64, turns);
  llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "tgo", fn);
  b.CreateCondBr(b.CreateICmpSGE(t, max_turns), checkpoint, go, unlikely());
  b.SetInsertPoint(go);
  llvm::Value* lim = chunk_limit(rl, b.CreateLoad(i64, val[rl.k]), e0, b.CreateSub(max_turns, t));
  b.CreateBr(fhead);
  b.SetInsertPoint(fhead);
  b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), lim), fbody, fend);
  b.SetInsertPoint(fbody);
  b.CreateStore(b.CreateAdd(b.CreateLoad(i64, turns), b.getInt64(1)), turns);
  count(rl.cond->counter);
  // With loops inside, Ctrl-C on each turn too: their chunks of at most
  // 65,536 turns do not check it (range_chunks).
  if (rl.loops_in) interrupt_check(interrupted);
  loops.push_back({fhead, done, nullptr, nullptr});
  turn();
  loops.pop_back();
  b.CreateBr(fhead);
  b.SetInsertPoint(fend);
  b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), chunk, ffin);
  b.SetInsertPoint(ffin);
  count(rl.cond->counter);
  b.CreateBr(done);
  return fbody;
}

llvm::Value* Gen::hoist(const RangeLoop& rl, std::vector<Hoisted>& hs, std::set<const FNode*>& pr,
                        llvm::Value*& k0, llvm::Value*& e0) {
  // k + 1 right after k < end holds cannot overflow; k + step in the
  // version range_ok admits (end far enough from int64's end) neither.
  if (rl.step == 1 || rl.step == -1)
    no_overflow.insert(rl.inc);
  else
    pr.insert(rl.inc);
  for (size_t q = 0; q < loop_body.kids.size(); ++q) collect(loop_body.kids[q], rl, q, hs, pr);
  return range_ok(rl, hs, k0, e0);
}

void Gen::top_range(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                    llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                    llvm::Value* turns) {
  std::vector<Hoisted> hs;
  std::set<const FNode*> pr;
  llvm::Value *k0, *e0;
  const WrapCheck outer_check = begin_wrap_check(nullptr);
  llvm::Value* ok = hoist(rl, hs, pr, k0, e0);
  llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "tchunk", fn);
  llvm::BasicBlock* fbail = llvm::BasicBlock::Create(ctx, "tbail", fn);
  b.CreateCondBr(ok, chunk, range_failed(top, nullptr));
  wrap_check = outer_check;
  std::vector<Site> sv;
  llvm::BasicBlock* fbody =
      chunked_turns(rl, e0, chunk, done, checkpoint, interrupted, nullptr, turns,
                    [&] {
                      // The draws before the turn (a bail rewinds the stream
                      // there), kept only if the body draws.
                      auto* at = llvm::cast<llvm::Instruction>(
                          b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, draws), i64)));
                      auto* keep = b.CreateStore(
                          at, field(cptr, offsetof(NativeCtx, draws_at_turn), i64));
                      uniform_draws = false;
                      llvm::BasicBlock* saved_bail = bail;
                      bail = fbail;
                      proven = &pr;
                      sites = &sv;
                      body_turn();
                      proven = nullptr;
                      sites = nullptr;
                      bail = saved_bail;
                      if (!uniform_draws) {
                        keep->eraseFromParent();
                        at->eraseFromParent();
                      }
                    });
  // A bail: this turn's writes undone, newest first, then the state as at
  // its start. A site not written this turn points at a scratch slot.
  std::map<llvm::Value*, llvm::Value*> at_start = snapshot(fbody);
  if (!sv.empty()) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* scratch = e.CreateBitCast(e.CreateAlloca(i64), i8p);
    auto ip = b.saveIP();
    b.SetInsertPoint(&*fbody->getFirstInsertionPt());
    for (const Site& st : sv) b.CreateStore(scratch, st.addr);
    b.restoreIP(ip);
  }
  b.SetInsertPoint(fbail);
  for (auto it = sv.rbegin(); it != sv.rend(); ++it) {
    llvm::Value* p = b.CreateBitCast(b.CreateLoad(i8p, it->addr), it->t->getPointerTo());
    b.CreateStore(b.CreateLoad(it->t, it->old), p);
  }
  store_state([&](llvm::Value* a, llvm::Type*) { return at_start.at(a); });
  b.CreateRet(b.getInt32(kNativeBail));
}

void Gen::top_nest(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                   llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                   llvm::Value* turns) {
  std::vector<Hoisted> hs;
  std::set<const FNode*> pr;
  llvm::Value *k0, *e0;
  const WrapCheck outer_check = begin_wrap_check(nullptr);
  llvm::Value* ok = hoist(rl, hs, pr, k0, e0);
  std::set<int> copy;
  ok = b.CreateAnd(ok, nest_ok(loop_body, rl, k0, e0, pr, copy));
  llvm::BasicBlock* pre = llvm::BasicBlock::Create(ctx, "tnest", fn);
  llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "tchunk", fn);
  b.CreateCondBr(ok, pre, range_failed(top, nullptr));
  wrap_check = outer_check;
  const int64_t bails_before = bails;
  chunked_turns(rl, e0, chunk, done, checkpoint, interrupted, nullptr, turns,
                [&] {
                  proven = &pr;
                  prelogged = true;
                  body_turn();
                  proven = nullptr;
                  prelogged = false;
                });
  const bool can_bail = bails > bails_before;
  // Before the loop: the old bytes of what it writes unchecked, unless no
  // turn can bail (then nothing needs undoing: Ctrl-C and checkpoints
  // keep the state as it is).
  b.SetInsertPoint(pre);
  if (can_bail) {
    // An array the nest only writes (never reads, passes or assigns), in
    // memory no other array of the loop shares, needs no undo: the turns
    // redone after a bail write the same values into it again.
    std::set<int> only_written;
    for (const Hoisted& h : hs)
      if (h.n->op == Op::SetItem) only_written.insert(h.arr);
    for (int r : copy) only_written.insert(r);
    std::vector<int> reads(regs.size(), 0);
    count_reads(loop_cond, reads);
    count_reads(loop_body, reads);
    for (auto it = only_written.begin(); it != only_written.end();)
      it = reads[*it] ? only_written.erase(it) : std::next(it);
    std::vector<Hoisted> logged;
    for (const Hoisted& h : hs)
      if (!only_written.count(h.arr)) logged.push_back(h);
    prelog(rl, logged, k0, e0);
    for (int r : copy)
      if (!only_written.count(r)) snapshot_once(r);
    for (int r : only_written) {
      llvm::BasicBlock* undo = llvm::BasicBlock::Create(ctx, "shared_memory", fn);
      llvm::BasicBlock* own = llvm::BasicBlock::Create(ctx, "own_memory", fn);
      llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "undo_planned", fn);
      b.CreateCondBr(shares_memory(r), undo, own, unlikely());
      b.SetInsertPoint(undo);
      std::vector<Hoisted> mine;
      for (const Hoisted& h : hs)
        if (h.arr == r) mine.push_back(h);
      prelog(rl, mine, k0, e0);
      if (copy.count(r)) snapshot_once(r);
      b.CreateBr(next);
      // Its own memory: marked as copied, so the loops inside log nothing of it.
      b.SetInsertPoint(own);
      llvm::Value*& flag = snapped[r];
      if (!flag) {
        llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
        flag = e.CreateAlloca(i1);
        e.CreateStore(e.getFalse(), flag);
      }
      b.CreateStore(b.getTrue(), flag);
      b.CreateBr(next);
      b.SetInsertPoint(next);
    }
  }
  b.CreateBr(chunk);
}

}  // namespace tessera::native_gen
