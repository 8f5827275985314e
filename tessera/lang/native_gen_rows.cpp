// Gen (native_gen.hpp): rows of lists of lists. The row cache the sites of
// a table register share (row_cache_site), and `a, b = t[i]` and
// `for (a, b) in pairs` of a list of tuples or lists of numbers. The translator writes both as
// `_t = unpack(t[i], n)` followed by `a = _t[0]`, `b = _t[1]`; `_t` is read
// nowhere else, so the row is looked up once (native_list2_get's
// kNativeReadRowMode, a tuple row too), its length checked against n, and
// its items copied into registers there and then, as Python's unpacking
// copies the references: a later write into the row does not change a or b.
// Anything else (a row that is not a list or a tuple, another length, an
// item of another kind) bails: the interpreter raises Python's error.
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

Gen::RowSite Gen::row_cache_site(int r, llvm::Value* i) {
  auto it = row_caches.find(r);
  if (it == row_caches.end()) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    RowCache c;
    auto* n = e.getInt32(kRowSlots);
    c.ok = e.CreateAlloca(i1, n);
    c.writable = e.CreateAlloca(i1, n);
    c.logs = e.CreateAlloca(i1, n);
    c.key = e.CreateAlloca(i64, n);
    c.gen = e.CreateAlloca(i64, n);
    c.data = e.CreateAlloca(i64, n);
    c.len = e.CreateAlloca(i64, n);
    c.stride = e.CreateAlloca(i64, n);
    c.kfix = e.CreateAlloca(i64, n);
    c.ranged = e.CreateAlloca(i64, n);
    c.buf = e.CreateAlloca(i64, e.getInt32(4));
    for (int k = 0; k < kRowSlots; ++k) {
      e.CreateStore(e.getFalse(), e.CreateConstInBoundsGEP1_64(i1, c.ok, k));
      e.CreateStore(e.getInt64(0), e.CreateConstInBoundsGEP1_64(i64, c.ranged, k));
    }
    it = row_caches.emplace(r, c).first;
  }
  const RowCache& c = it->second;
  row_gen_of(r);
  // Row i's slot: i mod kRowSlots (a negative i has its own slot; the same
  // row then has two, each right).
  llvm::Value* at = b.CreateAnd(i, b.getInt64(kRowSlots - 1));
  RowSite s;
  s.ok = b.CreateInBoundsGEP(i1, c.ok, at);
  s.writable = b.CreateInBoundsGEP(i1, c.writable, at);
  s.logs = b.CreateInBoundsGEP(i1, c.logs, at);
  s.key = b.CreateInBoundsGEP(i64, c.key, at);
  s.gen = b.CreateInBoundsGEP(i64, c.gen, at);
  s.data = b.CreateInBoundsGEP(i64, c.data, at);
  s.len = b.CreateInBoundsGEP(i64, c.len, at);
  s.stride = b.CreateInBoundsGEP(i64, c.stride, at);
  s.kfix = b.CreateInBoundsGEP(i64, c.kfix, at);
  s.ranged = b.CreateInBoundsGEP(i64, c.ranged, at);
  s.buf = c.buf;
  return s;
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
