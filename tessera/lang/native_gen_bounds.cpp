// Gen (native_gen.hpp): the checks done once before a range loop. The
// affine accesses of its body checked at its first and last turns, and the
// intervals of the int variables of a loop nest, for the accesses of its
// inner loops.
#include "tessera/lang/native_gen.hpp"

#include <functional>
#include <set>
#include <vector>

namespace tessera::native_gen {

void Gen::assigns_of(const FNode& n, Nest& ns) {
  if (n.op == Op::Assign) ns.assigns[n.reg].push_back(&n);
  for (const FNode& k : n.kids) assigns_of(k, ns);
}

void Gen::find_inners(const FNode& n, Nest& ns) {
  if (n.op == Op::Block) {
    for (size_t q = 0; q < n.kids.size(); ++q) {
      const FNode& w = n.kids[q];
      if (w.op != Op::While) continue;
      const FNode& c = w.kids[0];
      const FNode& body = w.kids[1];
      if (c.op != Op::Binary || (c.fast != Fast::lt && c.fast != Fast::gt) ||
          c.kids[0].op != Op::Var || body.op != Op::Block)
        continue;
      const int k2 = c.kids[0].reg;
      const FNode& ev = c.kids[1];
      if (ev.op != Op::Var && (ev.op != Op::Const || ev.constant.k != Reg::PyInt)) continue;
      if (ev.op == Op::Var && ev.reg == k2) continue;
      int64_t step = 0;
      const FNode *init = nullptr, *end = ev.op == Op::Const ? &ev : nullptr, *end_asg = nullptr;
      for (size_t p = q; p-- > 0;) {
        const FNode& a = n.kids[p];
        if (a.op != Op::Assign) continue;
        if (a.reg == k2 && !init) init = &a;
        if (ev.op == Op::Var && a.reg == ev.reg && !end_asg) end_asg = &a;
      }
      if (!init) continue;
      // The counter assigned only there and by its increment, the end
      // only there (or not in the nest at all: its interval is its own).
      if (ns.assigns[k2].size() != 2) continue;
      if (ev.op == Op::Var && end_asg && ns.assigns[ev.reg].size() != 1) continue;
      if (!end_asg) end = &ev;
      const FNode* inc = nullptr;
      std::vector<const FNode*> ivars;
      for (const FNode& a : body.kids) {
        if (a.op != Op::Assign) break;
        if (a.reg == k2) {
          const FNode& v = a.kids[0];
          if (v.op == Op::Binary && v.fast == Fast::add && v.kids[0].op == Op::Var &&
              v.kids[0].reg == k2 && v.kids[1].op == Op::Const &&
              v.kids[1].constant.k == Reg::PyInt && step_of(c.fast, v.kids[1].constant.i)) {
            inc = &a;
            step = v.kids[1].constant.i;
          }
          break;
        }
        if (a.kids[0].op == Op::Var && a.kids[0].reg == k2) ivars.push_back(&a);
      }
      if (!inc) continue;
      const size_t at = ns.inners.size();
      ns.inners.push_back({&init->kids[0], end_asg ? &end_asg->kids[0] : end, step, k2});
      ns.role[init] = {0, at};
      ns.role[inc] = {1, at};
      for (const FNode* a : ivars) ns.role[a] = {2, at};
      if (end_asg) ns.role[end_asg] = {3, at};
    }
  }
  for (const FNode& k : n.kids) find_inners(k, ns);
}

void Gen::find_guarded(const FNode& n, Nest& ns) {
  for (const FNode& k : n.kids) find_guarded(k, ns);
  if (n.op != Op::While || n.kids.size() != 2 || n.kids[1].op != Op::Block) return;
  const FNode* g = &n.kids[0];
  while (g->op == Op::Logic && g->is_and && g->kids.size() == 2) g = &g->kids[0];
  if (g->op != Op::Binary || g->kids.size() != 2) return;
  Guarded gd{&n, g, nullptr, false, 0, 0, -1};
  if ((g->fast == Fast::ge || g->fast == Fast::gt) && g->kids[0].op == Op::Var) {
    gd.reg = g->kids[0].reg, gd.bound = &g->kids[1], gd.strict = g->fast == Fast::gt;
  } else if ((g->fast == Fast::le || g->fast == Fast::lt) && g->kids[1].op == Op::Var) {
    gd.reg = g->kids[1].reg, gd.bound = &g->kids[0], gd.strict = g->fast == Fast::lt;
  } else {
    return;
  }
  // Python ints on both sides (j's kind is known only once its first
  // assignment is generated, often inside the nest: binary() refuses the
  // guard then if it is not): a NumPy bool (np.int64's comparison) does not
  // short-circuit `and` in the interpreter, so what follows would run with
  // j below the bound.
  auto int_or_unknown = [&](int r) {
    return (kind[r] == Reg::Undef || is_int(kind[r])) && !dyn[r];
  };
  const FNode& bd = *gd.bound;
  if (!int_or_unknown(gd.reg) || !((bd.op == Op::Const && bd.constant.k == Reg::PyInt) ||
                                   (bd.op == Op::Var && int_or_unknown(bd.reg))))
    return;
  // The loop's only assignment of j: a statement of its body, j - c or j + -c.
  std::vector<const FNode*> in_loop;
  std::function<void(const FNode&)> walk = [&](const FNode& x) {
    if (x.op == Op::Assign && x.reg == gd.reg) in_loop.push_back(&x);
    for (const FNode& k : x.kids) walk(k);
  };
  walk(n);
  if (in_loop.size() != 1) return;
  const FNode& body = n.kids[1];
  const FNode* dec = nullptr;
  for (size_t q = 0; q < body.kids.size(); ++q)
    if (&body.kids[q] == in_loop[0]) dec = &body.kids[q], gd.at = q;
  if (!dec || dec->kids.size() != 1) return;
  const FNode& v = dec->kids[0];
  if (v.op != Op::Binary || v.kids.size() != 2 || v.kids[0].op != Op::Var ||
      v.kids[0].reg != gd.reg || v.kids[1].op != Op::Const || v.kids[1].constant.k != Reg::PyInt)
    return;
  const int64_t c = v.kids[1].constant.i;
  if (v.fast == Fast::sub && c > 0 && c <= (int64_t{1} << 32))
    gd.c = c;
  else if (v.fast == Fast::add && c < 0 && c >= -(int64_t{1} << 32))
    gd.c = -c;
  else
    return;
  ns.guarded[dec] = gd;
  py_guards.insert(g);
}

bool Gen::guard_floor(const Guarded& g, Nest& ns, llvm::Value*& lo) {
  llvm::Value* hi;
  if (!interval(*g.bound, ns, lo, hi)) return false;
  if (g.strict) lo = checked(llvm::Intrinsic::sadd_with_overflow, lo, b.getInt64(1), ns);
  return true;
}

llvm::Value* Gen::floor_div(llvm::Value* a, int64_t c) {
  llvm::Value* q = b.CreateSDiv(a, b.getInt64(c));
  llvm::Value* down = b.CreateAnd(b.CreateICmpSLT(a, b.getInt64(0)),
                                  b.CreateICmpNE(b.CreateSRem(a, b.getInt64(c)), b.getInt64(0)));
  return b.CreateSub(q, b.CreateZExt(down, i64));
}

llvm::Value* Gen::checked(llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y, Nest& ns) {
  llvm::Value* r = b.CreateBinaryIntrinsic(id, x, y);
  ns.bad = b.CreateOr(ns.bad, b.CreateExtractValue(r, 1));
  return b.CreateExtractValue(r, 0);
}

bool Gen::interval(const FNode& x, Nest& ns, llvm::Value*& lo, llvm::Value*& hi) {
  switch (x.op) {
    case Op::Const:
      if (x.constant.k != Reg::PyInt) return false;
      lo = hi = b.getInt64(static_cast<uint64_t>(x.constant.i));
      return true;
    case Op::Var: {
      if (!var_interval(x.reg, ns, lo, hi)) return false;
      // Inside a loop guarded from below (not for the intervals of other
      // variables, which hold everywhere).
      auto f = ns.floor.find(x.reg);
      if (f != ns.floor.end() && ns.visiting.empty()) {
        llvm::Value* fl;
        if (!guard_floor(*f->second, ns, fl)) return false;
        lo = smax(lo, fl);
      }
      return true;
    }
    case Op::Binary: {
      if ((x.fast != Fast::add && x.fast != Fast::sub && x.fast != Fast::mod &&
           x.fast != Fast::floordiv) ||
          x.kids.size() != 2)
        return false;
      llvm::Value *alo, *ahi, *clo, *chi;
      if (!interval(x.kids[0], ns, alo, ahi) || !interval(x.kids[1], ns, clo, chi)) return false;
      if (x.fast == Fast::mod) {
        // Python's a % c for c > 0 is in [0, c - 1], whatever a's sign
        // (wrap-around indices: grid[(i + di) % n]).
        ns.bad = b.CreateOr(ns.bad, b.CreateICmpSLE(clo, b.getInt64(0)));
        lo = b.getInt64(0);
        hi = b.CreateSub(chi, b.getInt64(1));
      } else if (x.fast == Fast::floordiv) {
        // a // c for a constant c > 0: monotonic in a, floor of each end.
        const FNode& c = x.kids[1];
        if (c.op != Op::Const || c.constant.k != Reg::PyInt || c.constant.i <= 0) return false;
        lo = floor_div(alo, c.constant.i);
        hi = floor_div(ahi, c.constant.i);
      } else if (x.fast == Fast::add) {
        lo = checked(llvm::Intrinsic::sadd_with_overflow, alo, clo, ns);
        hi = checked(llvm::Intrinsic::sadd_with_overflow, ahi, chi, ns);
      } else {
        lo = checked(llvm::Intrinsic::ssub_with_overflow, alo, chi, ns);
        hi = checked(llvm::Intrinsic::ssub_with_overflow, ahi, clo, ns);
      }
      return true;
    }
    case Op::GetItem: {  // x.shape[d]
      const FNode& s = x.kids[0];
      if (!(s.op == Op::Call && s.spec->name == "shape" && s.kids.size() == 1 &&
            arr_var(s.kids[0]) && x.kids.size() == 2 && x.kids[1].op == Op::Const &&
            x.kids[1].constant.k == Reg::PyInt))
        return false;
      const int q = s.kids[0].reg;
      if (ns.rl->rebound.count(q)) return false;  // another array on later turns
      const ArrT& e = atype[q];
      int64_t d = x.kids[1].constant.i;
      if (d < 0) d += e.nd;
      if (!e.indexable || d < 0 || d >= e.nd) return false;
      lo = hi = ashape(q, d);
      return true;
    }
    case Op::Call: {  // len(x)
      if (!(x.spec->name == "len" && x.kids.size() == 1 && arr_var(x.kids[0]))) return false;
      const int q = x.kids[0].reg;
      if (ns.rl->rebound.count(q)) return false;
      const ArrT& e = atype[q];
      if (!e.indexable || e.nd < 1) return false;
      lo = hi = ashape(q, 0);
      return true;
    }
    default:
      return false;
  }
}

bool Gen::var_interval(int r, Nest& ns, llvm::Value*& lo, llvm::Value*& hi) {
  const RangeLoop& rl = *ns.rl;
  if (auto m = ns.memo.find(r); m != ns.memo.end()) {
    lo = m->second.first, hi = m->second.second;
    return true;
  }
  if (r == rl.k || rl.ivar.count(r)) {  // the counter: [k0, last + step] (after its increment too)
    llvm::Value* last = last_turn(rl, ns.k0, ns.e0);
    if (rl.k == r) last = b.CreateAdd(last, b.getInt64(rl.step));  // no overflow: range_ok
    lo = rl.step > 0 ? ns.k0 : last;
    hi = rl.step > 0 ? last : ns.k0;
    ns.memo[r] = {lo, hi};
    return true;
  }
  const bool entry = val[r] && is_scalar(kind[r]);
  if (entry && !is_int(kind[r])) return false;
  // Undefined when the call began and first assigned after this point of
  // the code: assigned since (by code after the loop), its value is not
  // known here.
  if (!val[r]) ns.bad = b.CreateOr(ns.bad, b.CreateLoad(i1, def[r]));
  if (!rl.assigned.count(r)) {  // not changed by the loop: its value now
    if (!entry) return false;
    if (maybe_undef[r]) ns.bad = b.CreateOr(ns.bad, b.CreateNot(b.CreateLoad(i1, def[r])));
    lo = hi = b.CreateLoad(i64, val[r]);
    ns.memo[r] = {lo, hi};
    return true;
  }
  if (ns.visiting.count(r)) return false;
  ns.visiting.insert(r);
  lo = hi = nullptr;
  auto join = [&](llvm::Value* l, llvm::Value* h) {
    lo = lo ? smin(lo, l) : l;
    hi = hi ? smax(hi, h) : h;
  };
  bool ok = true;
  bool counted_down = false;
  for (const auto& [a, g] : ns.guarded) counted_down = counted_down || g.reg == r;
  llvm::Value* down = nullptr;  // the lowest value a guarded decrement gives
  for (const FNode* a : ns.assigns[r]) {
    if (auto gd = ns.guarded.find(a); gd != ns.guarded.end()) {
      llvm::Value* fl;
      if (!guard_floor(gd->second, ns, fl)) {
        ok = false;
        break;
      }
      fl = checked(llvm::Intrinsic::ssub_with_overflow, fl, b.getInt64(gd->second.c), ns);
      down = down ? smin(down, fl) : fl;
      continue;
    }
    auto it = ns.role.find(a);
    if (it == ns.role.end() && counted_down) {
      // Any other assignment of such a counter: its value's interval (the
      // counter's own in it is a cycle: visiting).
      llvm::Value *vlo, *vhi;
      if (a->kids.size() != 1 || !interval(a->kids[0], ns, vlo, vhi)) {
        ok = false;
        break;
      }
      join(vlo, vhi);
      continue;
    }
    if (it == ns.role.end()) {
      ok = false;
      break;
    }
    const Inner& in = ns.inners[it->second.second];
    const int role = it->second.first;
    if ((role == 0 || role == 1) && in.k != r) {
      ok = false;
      break;
    }
    llvm::Value *slo, *shi, *elo, *ehi;
    if (!interval(*in.start, ns, slo, shi) || !interval(*in.stop, ns, elo, ehi)) {
      ok = false;
      break;
    }
    switch (role) {
      case 0:  // the counter: from its start to its last turn's value + step
      case 1:
        if (in.step > 0)
          join(slo, smax(shi, checked(llvm::Intrinsic::sadd_with_overflow, ehi,
                                      b.getInt64(in.step - 1), ns)));
        else
          join(smin(slo, checked(llvm::Intrinsic::sadd_with_overflow, elo,
                                 b.getInt64(in.step + 1), ns)),
               shi);
        break;
      case 2:  // j = k2 while k2 < e2
        if (in.step > 0)
          join(slo, checked(llvm::Intrinsic::ssub_with_overflow, ehi, b.getInt64(1), ns));
        else
          join(checked(llvm::Intrinsic::sadd_with_overflow, elo, b.getInt64(1), ns), shi);
        break;
      default:  // e2
        join(elo, ehi);
    }
  }
  ns.visiting.erase(r);
  if (!ok) return false;
  if (!lo) {  // only decrements in the nest: from the value before it down
    if (!down || !entry || maybe_undef[r]) return false;
    lo = hi = b.CreateLoad(i64, val[r]);
  } else if (entry) {  // the value before the loop, read before the loop assigns it
    llvm::Value* v = b.CreateLoad(i64, val[r]);
    llvm::Value* d = maybe_undef[r] ? static_cast<llvm::Value*>(b.CreateLoad(i1, def[r])) : b.getTrue();
    lo = b.CreateSelect(d, smin(lo, v), lo);
    hi = b.CreateSelect(d, smax(hi, v), hi);
  }
  // A decrement never passes the highest value before it.
  if (down) lo = smin(lo, down);
  ns.memo[r] = {lo, hi};
  return true;
}

void Gen::index_ops(const FNode& n, std::set<const FNode*>& pr) {
  if (n.op != Op::Binary) return;
  pr.insert(&n);
  for (const FNode& k : n.kids) index_ops(k, pr);
}

void Gen::guarded_cond(const FNode& c, const Guarded& g, Nest& ns, llvm::Value*& ok,
                       std::set<const FNode*>& pr, std::set<int>& copy) {
  if (&c == g.guard) {
    nest_collect(c, ns, ok, pr, copy);
    return;
  }
  guarded_cond(c.kids[0], g, ns, ok, pr, copy);
  const Guarded* before = ns.floor.count(g.reg) ? ns.floor[g.reg] : nullptr;
  ns.floor[g.reg] = &g;
  nest_collect(c.kids[1], ns, ok, pr, copy);
  if (before)
    ns.floor[g.reg] = before;
  else
    ns.floor.erase(g.reg);
}

void Gen::nest_collect(const FNode& n, Nest& ns, llvm::Value*& ok, std::set<const FNode*>& pr,
                       std::set<int>& copy) {
  if (n.op == Op::While) {
    const Guarded* g = nullptr;
    for (const auto& [a, gd] : ns.guarded)
      if (gd.loop == &n) g = &gd;
    if (g) {
      guarded_cond(n.kids[0], *g, ns, ok, pr, copy);
      const Guarded* before = ns.floor.count(g->reg) ? ns.floor[g->reg] : nullptr;
      const FNode& body = n.kids[1];
      for (size_t q = 0; q < body.kids.size(); ++q) {
        if (q < g->at)
          ns.floor[g->reg] = g;
        else if (before)
          ns.floor[g->reg] = before;
        else
          ns.floor.erase(g->reg);
        nest_collect(body.kids[q], ns, ok, pr, copy);
      }
      if (before)
        ns.floor[g->reg] = before;
      else
        ns.floor.erase(g->reg);
      return;
    }
  }
  if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) && !pr.count(&n) &&
      !(proven && proven->count(&n)) && !ns.rl->rebound.count(n.kids[0].reg)) {
    const int r = n.kids[0].reg;
    const ArrT& e = atype[r];
    const size_t first = n.op == Op::GetItem ? 1 : 2;
    const size_t nidx = n.kids.size() - first;
    if (e.indexable && static_cast<size_t>(e.nd) == nidx && nidx > 0 &&
        (n.op == Op::GetItem || e.writable)) {
      llvm::Value* in = b.getTrue();
      size_t d = 0;
      for (; d < nidx; ++d) {
        llvm::Value *lo, *hi;
        if (!interval(n.kids[first + d], ns, lo, hi)) break;
        in = b.CreateAnd(in, index_in(n, lo, hi, ashape(r, d)));
      }
      if (d == nidx) {
        ok = b.CreateAnd(ok, in);
        pr.insert(&n);
        for (size_t k = 0; k < nidx; ++k) index_ops(n.kids[first + k], pr);
        if (n.op == Op::SetItem) copy.insert(r);
      }
    }
  }
  for (const FNode& k : n.kids) nest_collect(k, ns, ok, pr, copy);
}

llvm::Value* Gen::nest_ok(const FNode& body, const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0,
                          std::set<const FNode*>& pr, std::set<int>& copy) {
  Nest ns;
  ns.rl = &rl;
  ns.k0 = k0;
  ns.e0 = e0;
  ns.bad = b.getFalse();
  assigns_of(body, ns);
  find_inners(body, ns);
  find_guarded(body, ns);
  llvm::Value* ok = b.getTrue();
  nest_collect(body, ns, ok, pr, copy);
  return b.CreateAnd(ok, b.CreateNot(ns.bad));
}

bool Gen::mod_bounded(const FNode& ix, const RangeLoop& rl) const {
  if (ix.op != Op::Binary || ix.fast != Fast::mod || ix.kids.size() != 2) return false;
  const FNode& c = ix.kids[1];
  if (c.op == Op::Const) return c.constant.k == Reg::PyInt && c.constant.i > 0;
  return c.op == Op::Var && int_reg(c.reg) && !rl.assigned.count(c.reg);
}

bool Gen::may_wrap(const FNode& n) const {
  if (n.op != Op::GetItem) return false;
  std::function<bool(const FNode&)> negative = [&](const FNode& x) {
    if (x.op == Op::Const) return x.constant.k == Reg::PyInt && x.constant.i < 0;
    if (x.op == Op::Binary && x.fast == Fast::mod) return false;  // in [0, c) when proven
    if (x.op == Op::Binary && x.fast == Fast::sub) return true;
    if (x.op == Op::Call && x.spec->name == "negative") return true;
    for (const FNode& k : x.kids)
      if (negative(k)) return true;
    return false;
  };
  for (size_t k = 1; k < n.kids.size(); ++k)
    if (negative(n.kids[k])) return true;
  return false;
}

llvm::Value* Gen::index_in(const FNode& n, llvm::Value* lo, llvm::Value* hi, llvm::Value* ext) {
  const bool wraps = may_wrap(n);
  wrap_check.seen = wrap_check.seen || wraps;
  if (!wraps || !wrap_check.on)
    return b.CreateAnd(b.CreateICmpULT(lo, ext), b.CreateICmpULT(hi, ext));
  // Python's negative indices: every index in [-ext, ext) (the access then
  // adds ext to a negative one: element_offset).
  wrap_proven.insert(&n);
  llvm::Value* neg = b.CreateNeg(ext);
  return b.CreateAnd(b.CreateAnd(b.CreateICmpSGE(lo, neg), b.CreateICmpSLT(lo, ext)),
                     b.CreateAnd(b.CreateICmpSGE(hi, neg), b.CreateICmpSLT(hi, ext)));
}

int Gen::affine(const FNode& n, const RangeLoop& rl, size_t at, std::vector<const FNode*>& ops) {
  switch (n.op) {
    case Op::Const:
      return n.constant.k == Reg::PyInt ? 0 : 2;
    case Op::Var: {
      if (n.reg == rl.k) return 1;
      auto iv = rl.ivar.find(n.reg);
      if (iv != rl.ivar.end()) return iv->second < at ? 1 : 2;
      return int_reg(n.reg) && !rl.assigned.count(n.reg) ? 0 : 2;
    }
    case Op::Binary: {
      if ((n.fast != Fast::add && n.fast != Fast::sub) || n.kids.size() != 2) return 2;
      const int a = affine(n.kids[0], rl, at, ops);
      const int c = affine(n.kids[1], rl, at, ops);
      if (a == 2 || c == 2) return 2;
      const int r = n.fast == Fast::add ? a + c : a - c;
      if (r < -1 || r > 1) return 2;
      ops.push_back(&n);
      return r;
    }
    default:
      return 2;
  }
}

void Gen::collect(const FNode& n, const RangeLoop& rl, size_t at, std::vector<Hoisted>& hs,
                  std::set<const FNode*>& pr) {
  if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) &&
      !rl.rebound.count(n.kids[0].reg)) {
    const int r = n.kids[0].reg;
    const ArrT& e = atype[r];
    const size_t first = n.op == Op::GetItem ? 1 : 2;
    const size_t nidx = n.kids.size() - first;
    if (e.indexable && static_cast<size_t>(e.nd) == nidx && nidx > 0 &&
        (n.op == Op::GetItem || e.writable)) {
      Hoisted h{&n, r, first, at > rl.inc_at, {}};
      std::vector<const FNode*> ops;
      for (size_t k = 0; k < nidx; ++k) {
        const FNode& ix = n.kids[first + k];
        if (n.op == Op::GetItem && mod_bounded(ix, rl)) {  // grid[(i + 1) % n]
          h.coef.push_back(kModIndex);
          ops.push_back(&ix);
          continue;
        }
        const int c = affine(ix, rl, at, ops);
        if (c == 2) break;
        h.coef.push_back(c);
      }
      if (h.coef.size() == nidx) {
        hs.push_back(h);
        pr.insert(&n);
        pr.insert(ops.begin(), ops.end());
      }
    }
  }
  for (const FNode& k : n.kids) collect(k, rl, at, hs, pr);
}

llvm::Value* Gen::affine_at(const FNode& n, const RangeLoop& rl, bool after_inc, llvm::Value* t,
                            llvm::Value*& bad) {
  auto ovf = [&](llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y) {
    llvm::Value* r = b.CreateBinaryIntrinsic(id, x, y);
    bad = b.CreateOr(bad, b.CreateExtractValue(r, 1));
    return b.CreateExtractValue(r, 0);
  };
  switch (n.op) {
    case Op::Const:
      return b.getInt64(static_cast<uint64_t>(n.constant.i));
    case Op::Var:
      if (n.reg == rl.k)
        return after_inc ? ovf(llvm::Intrinsic::sadd_with_overflow, t, b.getInt64(rl.step)) : t;
      if (rl.ivar.count(n.reg)) return t;
      if (maybe_undef[n.reg]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[n.reg])));
      return b.CreateLoad(i64, val[n.reg]);
    default: {
      llvm::Value* x = affine_at(n.kids[0], rl, after_inc, t, bad);
      llvm::Value* y = affine_at(n.kids[1], rl, after_inc, t, bad);
      return ovf(n.fast == Fast::add ? llvm::Intrinsic::sadd_with_overflow
                                     : llvm::Intrinsic::ssub_with_overflow,
                 x, y);
    }
  }
}

bool Gen::const_end(const RangeLoop& rl) const {
  return rl.end->op == Op::Const || const_only[rl.end->reg];
}

llvm::Value* Gen::end_value(const RangeLoop& rl, llvm::Value*& bad) {
  if (rl.end->op == Op::Const) return b.getInt64(static_cast<uint64_t>(rl.end->constant.i));
  const int r = rl.end->reg;
  if (maybe_undef[r]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[r])));
  return b.CreateLoad(i64, val[r]);
}

llvm::Value* Gen::range_ok(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value*& k0,
                           llvm::Value*& e0) {
  llvm::Value* bad = b.getFalse();
  if (maybe_undef[rl.k]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[rl.k])));
  k0 = b.CreateLoad(i64, val[rl.k]);
  e0 = end_value(rl, bad);
  llvm::Value* turns_once = rl.step > 0 ? b.CreateICmpSLT(k0, e0) : b.CreateICmpSGT(k0, e0);
  llvm::Value* last = last_turn(rl, k0, e0);
  llvm::Value* ok = b.CreateAnd(turns_once, b.CreateNot(bad));
  if (rl.step > 1) {  // k + step after the last turn (at most e0 - 1 + step) fits
    ok = b.CreateAnd(ok, b.CreateICmpSLE(e0, b.getInt64(INT64_MAX - (rl.step - 1))));
  } else if (rl.step < -1) {
    ok = b.CreateAnd(ok, b.CreateICmpSGE(e0, b.getInt64(INT64_MIN - (rl.step + 1))));
  }
  for (const Hoisted& h : hs) {
    for (size_t d = 0; d < h.coef.size(); ++d) {
      llvm::Value* bad_d = b.getFalse();
      const FNode& ix = h.n->kids[h.first + d];
      llvm::Value* ext = ashape(h.arr, d);
      if (h.coef[d] == kModIndex) {
        // a % c in [0, c - 1] for a c the loop does not change: 1 <= c <= ext.
        llvm::Value* c = affine_at(ix.kids[1], rl, h.after_inc, k0, bad_d);
        ok = b.CreateAnd(ok, b.CreateNot(bad_d));
        ok = b.CreateAnd(ok, b.CreateAnd(b.CreateICmpSGE(c, b.getInt64(1)),
                                         b.CreateICmpSLE(c, ext)));
        continue;
      }
      llvm::Value* lo = affine_at(ix, rl, h.after_inc, k0, bad_d);
      llvm::Value* hi = affine_at(ix, rl, h.after_inc, last, bad_d);
      ok = b.CreateAnd(ok, b.CreateNot(bad_d));
      ok = b.CreateAnd(ok, index_in(*h.n, lo, hi, ext));
    }
  }
  return ok;
}

}  // namespace tessera::native_gen
