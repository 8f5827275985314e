// Gen (native_gen.hpp): array expressions over 1-d views. An elementwise
// expression whose leaves are numbers and 1-d views of array variables
// (`(A[:, i] - B[:, j]) / W[:, i]`), reduced by .sum(), np.sum, .mean(),
// .max(), .min(), becomes one scalar loop over the elements: each element
// computed as the scalar code computes NumPy's scalars of the views' dtypes
// (so NumPy's promotion and integer wrap-around), no array made. A local
// assigned such an expression and read only by the reductions after it
// (find_lazy) is never given a value. Broadcasting (a view of one element),
// a shape mismatch (the interpreter's ValueError), an index out of range and
// views of kLargeResult (4,096) elements or more go back to the interpreter
// (a bail): the general evaluation's vectorised kernels are faster there.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "tessera/lang/native_gen.hpp"

namespace tessera::native_gen {

namespace {

bool slice_const(const FNode& k) {
  return k.op == Op::Const && k.constant.k == Reg::Obj && k.const_arg && k.const_arg->is_slice();
}

// start:stop:step with bounds known only when it runs (a constant step).
bool slice_call(const FNode& k) {
  if (k.op != Op::Call || !k.spec || k.spec->name != "slice" || k.kids.size() != 3) return false;
  const FNode& st = k.kids[2];
  return st.op == Op::Const &&
         (st.constant.k == Reg::Nil || (st.constant.k == Reg::PyInt && st.constant.i != 0));
}

bool elementwise_call(const FNode& n) {
  static const std::set<std::string, std::less<>> names = {
      "sqrt", "exp",    "log",   "sin",   "cos",    "tan",    "floor",    "ceil",
      "trunc", "abs",   "absolute", "tanh", "arctan", "log2", "log10",    "exp2",
      "expm1", "log1p", "sinh",  "cosh",  "arcsin", "arccos", "rint",     "negative"};
  return n.op == Op::Call && n.spec && n.kids.size() == 1 && names.count(n.spec->name);
}

bool where_call(const FNode& n) {
  return n.op == Op::Call && n.spec && n.spec->name == "where" && n.kids.size() == 3;
}

// The registers `n` reads (through the definitions of lazy registers too).
void reads_of(const FNode& n, const std::map<int, const FNode*>& lazy, std::set<int>& out) {
  if (n.op == Op::Var) {
    if (!out.insert(n.reg).second) return;
    if (auto it = lazy.find(n.reg); it != lazy.end()) reads_of(*it->second, lazy, out);
  }
  for (const FNode& k : n.kids) reads_of(k, lazy, out);
}

bool reads_reg(const FNode& n, int r) {
  if (n.op == Op::Var && n.reg == r) return true;
  for (const FNode& k : n.kids)
    if (reads_reg(k, r)) return true;
  return false;
}

int assigns_to(const FNode& n, int r) {
  int c = (n.op == Op::Assign || n.op == Op::Append) && n.reg == r ? 1 : 0;
  for (const FNode& k : n.kids) c += assigns_to(k, r);
  return c;
}

// Nothing in `n` writes into an array it reads or a list, assigns a
// register of `reads`, draws random numbers or loops: the values an
// expression reads are the same before and after it. Element writes into
// other variables are allowed, their registers put in `writes` (checked not
// to share memory with what the expression reads: lazy_assign).
bool quiet(const FNode& n, const std::set<int>& reads, std::set<int>& writes) {
  switch (n.op) {
    case Op::SetItem:
      if (n.kids.empty() || n.kids[0].op != Op::Var || reads.count(n.kids[0].reg)) return false;
      writes.insert(n.kids[0].reg);
      break;
    case Op::Append:
    case Op::While:
    case Op::Uniform:
    case Op::Bail:
      return false;
    case Op::Assign:
      if (reads.count(n.reg)) return false;
      break;
    case Op::Call:
      if (n.spec && n.spec->writes) return false;
      break;
    default:
      break;
  }
  for (const FNode& k : n.kids)
    if (!quiet(k, reads, writes)) return false;
  return true;
}

// The statement that uses the expression last: its outer assignment and
// element write come after its value.
bool quiet_last(const FNode& n, const std::set<int>& reads, std::set<int>& writes) {
  if (n.op == Op::Assign && n.kids.size() == 1) return quiet_last(n.kids[0], reads, writes);
  if (n.op == Op::SetItem) {
    for (const FNode& k : n.kids)
      if (!quiet(k, reads, writes)) return false;
    return true;
  }
  return quiet(n, reads, writes);
}

// Only numbers and reads: safe to evaluate once before the element loop.
bool pure_leaf(const FNode& n) {
  switch (n.op) {
    case Op::Const:
    case Op::Var:
    case Op::Binary:
    case Op::GetItem:
    case Op::AsType:
    case Op::Logic:
      break;
    case Op::Call:
      if (n.spec && n.spec->writes) return false;
      break;
    default:
      return false;
  }
  for (const FNode& k : n.kids)
    if (!pure_leaf(k)) return false;
  return true;
}

}  // namespace

bool Gen::is_reduction(const FNode& n) {
  if (n.op != Op::Call || !n.spec || n.kids.size() != 1) return false;
  const std::string& s = n.spec->name;
  return s == "sum" || s == "mean" || s == "max" || s == "min" || s == "amax" || s == "amin";
}

bool Gen::slice_index(const FNode& k) { return slice_const(k) || slice_call(k); }

bool Gen::is_view(const FNode& n) {
  if (n.op == Op::Var) {
    const int r = n.reg;
    return !lazy.count(r) && kind[r] == Reg::Arr && atype[r].indexable && atype[r].nd == 1;
  }
  if (n.op != Op::GetItem || n.kids.empty() || !arr_var(n.kids[0])) return false;
  const ArrT& e = atype[n.kids[0].reg];
  const size_t nidx = n.kids.size() - 1;
  if (!e.indexable || nidx > static_cast<size_t>(e.nd)) return false;
  size_t free_dims = static_cast<size_t>(e.nd) - nidx;
  for (size_t k = 1; k < n.kids.size(); ++k)
    free_dims += slice_const(n.kids[k]) || slice_call(n.kids[k]) ? 1 : 0;
  return free_dims == 1;
}

bool Gen::arr_expr(const FNode& n) {
  if (is_view(n)) return true;
  if (n.op == Op::Var) return lazy.count(n.reg) > 0;
  if (n.op == Op::Binary && n.kids.size() == 2) return arr_expr(n.kids[0]) || arr_expr(n.kids[1]);
  if (elementwise_call(n)) return arr_expr(n.kids[0]);
  if (where_call(n)) return arr_expr(n.kids[0]) || arr_expr(n.kids[1]) || arr_expr(n.kids[2]);
  return false;
}

CV Gen::elem_where(const FNode& n) {
  // np.where(c, x, y): all three evaluated, as NumPy does; the result's
  // dtype NumPy's promotion of x and y (Python numbers weak).
  CV c = eval(n.kids[0]);
  CV x = eval(n.kids[1]);
  CV y = eval(n.kids[2]);
  for (const CV* v : {&c, &x, &y}) {
    if (v->k == kDyn || v->s || !is_scalar(static_cast<Reg::Kind>(v->k)) ||
        is_narrow(v->k))
      throw Refuse{"np.where of what is not a float64, int64 or bool"};
  }
  const auto kx = static_cast<Reg::Kind>(x.k), ky = static_cast<Reg::Kind>(y.k);
  llvm::Value* t = truth(c);
  int rk;
  llvm::Value *xv = x.v, *yv = y.v;
  if (is_bool(kx) && is_bool(ky)) {
    rk = Reg::NpBool;
  } else if (is_bool(kx) || is_bool(ky)) {
    throw Refuse{"np.where of a bool and a number"};
  } else if (is_int(kx) && is_int(ky)) {
    rk = Reg::NpInt;
  } else {
    rk = Reg::NpFloat;
    if (is_int(kx)) xv = b.CreateSIToFP(xv, f64);
    if (is_int(ky)) yv = b.CreateSIToFP(yv, f64);
  }
  return CV{rk, b.CreateSelect(t, xv, yv)};
}

void Gen::find_lazy() {
  // Statement by statement, the last first: a lazy register read by the
  // definition of another is used until that one's last use.
  std::function<void(const FNode&)> walk = [&](const FNode& blk) {
    for (const FNode& k : blk.kids) walk(k);
    if (blk.op != Op::Block) return;
    // Candidates first (a definition may read an earlier one).
    std::set<int> cand;
    for (const FNode& a : blk.kids) {
      if (a.op != Op::Assign || a.kids.size() != 1) continue;
      const int r = a.reg;
      if (r < 0 || static_cast<size_t>(r) >= im.loop_local.size() || !im.loop_local[r]) continue;
      if (rows.count(r) || rebinds[r] || kind[r] == Reg::Obj || dyn[r]) continue;
      const FNode& v = a.kids[0];
      if (!arr_expr(v) || v.op == Op::Var || reads_reg(v, r)) continue;
      if (assigns_to(loop_body, r) != 1 || reads_reg(loop_cond, r)) continue;
      lazy[r] = &v;
      cand.insert(r);
    }
    std::map<int, size_t> last_of;  // lazy register -> index of its last use
    for (size_t i = blk.kids.size(); i-- > 0;) {
      const FNode& a = blk.kids[i];
      if (a.op != Op::Assign || !cand.count(a.reg)) continue;
      const int r = a.reg;
      const FNode& v = a.kids[0];
      lazy.erase(r);
      // Every use after the assignment in this block.
      size_t last = i;
      int uses = 0;
      for (size_t j = 0; j < blk.kids.size(); ++j) {
        if (j == i || !reads_reg(blk.kids[j], r)) continue;
        if (j < i) {
          uses = -1;
          break;
        }
        ++uses;
        size_t u = j;
        const FNode& s = blk.kids[j];
        if (s.op == Op::Assign && lazy.count(s.reg) && last_of.count(s.reg)) u = last_of[s.reg];
        last = std::max(last, u);
      }
      if (uses <= 0) continue;
      // Uses elsewhere in the loop (another block): not lazy.
      int total = 0;
      std::function<void(const FNode&)> count_reads = [&](const FNode& n) {
        if (n.op == Op::Var && n.reg == r) ++total;
        for (const FNode& k : n.kids) count_reads(k);
      };
      count_reads(loop_body);
      int here = 0;
      for (size_t j = i + 1; j < blk.kids.size(); ++j) {
        std::function<void(const FNode&)> cr = [&](const FNode& n) {
          if (n.op == Op::Var && n.reg == r) ++here;
          for (const FNode& k : n.kids) cr(k);
        };
        cr(blk.kids[j]);
      }
      if (here != total) continue;
      std::set<int> reads;
      reads_of(v, lazy, reads);
      bool ok = true;
      std::set<int> writes;
      for (size_t j = i + 1; j < last && ok; ++j) ok = quiet(blk.kids[j], reads, writes);
      std::set<int> after;  // written after the value: no check
      if (ok && last > i) ok = quiet_last(blk.kids[last], reads, after);
      if (!ok) continue;
      lazy[r] = &v;
      lazy_reads[r] = reads;
      lazy_writes[r] = writes;
      last_of[r] = last;
    }
  };
  walk(loop_body);
}

void Gen::lazy_assign(int r) {
  // The expression's checks where Python evaluates it (an index out of
  // range, lengths that do not broadcast: a bail, the interpreter's error at
  // this line, even when no consumer runs), its nodes counted here once.
  llvm::Value* saved_len = elem_len;
  elem_len = b.getInt64(1);
  elem_prepare(*lazy.at(r));
  count_expr(*lazy.at(r));
  elem_len = saved_len;
  for (int w : lazy_writes[r]) {
    if (kind[w] != Reg::Arr) continue;  // a list or dict: not an array's memory
    llvm::Value *wlo, *whi;
    byte_span(w, wlo, whi);
    for (int q : lazy_reads[r]) {
      if (q == w || kind[q] != Reg::Arr || lazy.count(q)) continue;
      llvm::Value *qlo, *qhi;
      byte_span(q, qlo, qhi);
      bail_if(b.CreateAnd(b.CreateICmpULT(wlo, qhi), b.CreateICmpULT(qlo, whi)));
    }
  }
}

void Gen::view_of(const FNode& n, size_t first) {
  llvm::Value *base, *len, *step;
  int r;
  if (n.op == Op::Var) {
    r = n.reg;
    base = b.getInt64(0);
    len = ashape(r, 0);
    step = astride(r, 0);
  } else {
    r = n.kids[0].reg;
    const ArrT& e = atype[r];
    if (rows.count(r) && maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
    base = b.getInt64(0);
    len = nullptr;
    step = nullptr;
    const size_t nidx = n.kids.size() - first;
    for (size_t d = 0; d < static_cast<size_t>(e.nd); ++d) {
      llvm::Value* ext = ashape(r, d);
      llvm::Value* st = astride(r, d);
      if (d >= nidx) {  // X[i] of a 2-d X: its last dimension whole
        len = ext;
        step = st;
        continue;
      }
      const FNode& k = n.kids[d + first];
      if (slice_const(k) || slice_call(k)) {
        // Python's slice.indices(ext); the step a constant.
        std::optional<int64_t> cstart, cstop;
        const FNode *kstart = nullptr, *kstop = nullptr;
        int64_t s = 1;
        if (slice_const(k)) {
          const Slice& sl = k.const_arg->as_slice();
          s = sl.step.value_or(1);
          cstart = sl.start;
          cstop = sl.stop;
        } else {
          if (k.kids[2].constant.k == Reg::PyInt) s = k.kids[2].constant.i;
          if (k.kids[0].op != Op::Const || k.kids[0].constant.k != Reg::Nil) kstart = &k.kids[0];
          if (k.kids[1].op != Op::Const || k.kids[1].constant.k != Reg::Nil) kstop = &k.kids[1];
        }
        if (s == 0 || s == INT64_MIN) throw Refuse{"a slice step of zero"};
        llvm::Value* zero = b.getInt64(0);
        llvm::Value* m1 = b.getInt64(static_cast<uint64_t>(-1));
        auto bound = [&](const std::optional<int64_t>& c, const FNode* kn) -> llvm::Value* {
          llvm::Value* x;
          if (kn) {
            CV v = eval(*kn);
            if (!is_int(static_cast<Reg::Kind>(v.k)) || v.s)
              throw Refuse{"a slice bound that is not an int"};
            x = v.v;
          } else {
            x = b.getInt64(static_cast<uint64_t>(*c));
          }
          x = b.CreateSelect(b.CreateICmpSLT(x, zero), b.CreateAdd(x, ext), x);
          if (s > 0) return smin(smax(x, zero), ext);
          return smin(smax(x, m1), b.CreateSub(ext, b.getInt64(1)));
        };
        const bool has_start = cstart || kstart, has_stop = cstop || kstop;
        llvm::Value* lo = has_start ? bound(cstart, kstart)
                                    : (s > 0 ? zero : b.CreateSub(ext, b.getInt64(1)));
        llvm::Value* hi = has_stop ? bound(cstop, kstop) : (s > 0 ? ext : m1);
        llvm::Value* span = s > 0 ? b.CreateSub(hi, lo) : b.CreateSub(lo, hi);
        const int64_t as = s > 0 ? s : -s;
        // ceil(span / |s|) when positive, else 0
        llvm::Value* cnt = b.CreateSDiv(b.CreateAdd(span, b.getInt64(as - 1)), b.getInt64(as));
        len = b.CreateSelect(b.CreateICmpSGT(span, zero), cnt, zero);
        // An empty view's start may be past the end: never read.
        base = b.CreateAdd(base, b.CreateMul(b.CreateSelect(b.CreateICmpSGT(len, zero), lo, zero), st));
        step = b.CreateMul(st, b.getInt64(static_cast<uint64_t>(s)));
        continue;
      }
      CV i = eval(k);
      if (!is_int(static_cast<Reg::Kind>(i.k)) || i.s) throw Refuse{"an index that is not an int"};
      llvm::Value* j = b.CreateSelect(b.CreateICmpSLT(i.v, b.getInt64(0)), b.CreateAdd(i.v, ext), i.v);
      bail_if(b.CreateICmpUGE(j, ext));  // the interpreter's IndexError
      base = b.CreateAdd(base, b.CreateMul(j, st));
    }
  }
  const DType dt = atype[r].dt;
  if (dt != DType::float64 && dt != DType::int64 && dt != DType::bool_)
    throw Refuse{std::string("an array expression over a view of dtype ") +
                 std::string(dtype_name(dt))};
  // The element pointer of the view's first element (as i8*).
  const unsigned size = dt == DType::bool_ ? 1 : 8;
  llvm::Value* p = b.CreateInBoundsGEP(i8, abase(r), b.CreateMul(base, b.getInt64(size)));
  // NumPy's broadcasting of lengths: equal, or 1 (that element for all).
  llvm::Value* one = b.getInt64(1);
  llvm::Value* ne1 = b.CreateICmpNE(len, one);
  llvm::Value* n1 = b.CreateICmpEQ(elem_len, one);
  bail_if(b.CreateAnd(b.CreateAnd(ne1, b.CreateNot(n1)), b.CreateICmpNE(len, elem_len)));
  elem_len = b.CreateSelect(b.CreateAnd(ne1, n1), len, elem_len);
  step = b.CreateSelect(ne1, step, b.getInt64(0));
  elem_view[&n] = ViewLeaf{p, len, step, dt};
}

void Gen::elem_prepare(const FNode& n) {
  if (is_view(n)) {
    view_of(n);
    return;
  }
  if (n.op == Op::Var && lazy.count(n.reg)) {
    const bool m = mute_counts;
    mute_counts = true;
    elem_prepare(*lazy[n.reg]);
    mute_counts = m;
    return;
  }
  if (arr_expr(n)) {
    for (const FNode& k : n.kids) elem_prepare(k);
    return;
  }
  if (!pure_leaf(n)) throw Refuse{"an array expression with an operand that has effects"};
  CV v = eval(n);
  if (v.k == kDyn || !is_scalar(static_cast<Reg::Kind>(v.k)))
    throw Refuse{"an array expression with an operand that is not a number or a 1-d view"};
  elem_const[&n] = v;
}

CV Gen::elem_leaf(const FNode& n) {
  if (auto c = elem_const.find(&n); c != elem_const.end()) return c->second;
  auto it = elem_view.find(&n);
  if (it == elem_view.end()) return CV{-1};
  const ViewLeaf& w = it->second;
  llvm::Type* t = w.dt == DType::float64 ? f64 : w.dt == DType::int64 ? i64 : i8;
  llvm::Value* p = b.CreateBitCast(w.base, t->getPointerTo());
  llvm::Value* v = b.CreateLoad(t, b.CreateGEP(t, p, b.CreateMul(elem_t, w.step)));
  if (w.dt == DType::float64) return CV{Reg::NpFloat, v};
  if (w.dt == DType::int64) return CV{Reg::NpInt, v};
  return CV{Reg::NpBool, b.CreateICmpNE(v, b.getInt8(0))};
}

void Gen::count_expr(const FNode& n) {
  if (elem_const.count(&n)) return;  // counted when evaluated
  if (elem_view.count(&n)) {         // its indices counted when evaluated
    if (n.op != Op::GetItem) return;
    count(n.counter);
    for (int c : n.also_count) count(c);
    for (const FNode& k : n.kids)
      if (slice_call(k)) count(k.slot);
    return;
  }
  if (n.op == Op::Var && lazy.count(n.reg)) return;  // counted where assigned
  if (n.op == Op::Call) count(n.slot);
  if (n.op == Op::Binary || n.op == Op::GetItem) count(n.counter);
  for (int c : n.also_count) count(c);
  for (const FNode& k : n.kids) count_expr(k);
}

CV Gen::reduce(const FNode& n) {
  const std::string& name = n.spec->name;
  const FNode& x = n.kids[0];
  llvm::Value* saved_len = elem_len;
  elem_len = b.getInt64(1);
  elem_prepare(x);
  llvm::Value* len = elem_len;
  elem_len = saved_len;
  const bool is_sum = name == "sum", is_mean = name == "mean";
  const bool is_max = name == "max" || name == "amax";
  if (!is_sum) bail_if(b.CreateICmpEQ(len, b.getInt64(0)));  // NumPy's error (or mean's nan)
  bail_if(b.CreateICmpSGE(len, b.getInt64(kLargeResult)));
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  auto slot = [&](llvm::Type* t) { return e.CreateAlloca(t); };
  // The elements are reduced by leaves [leaf_at, leaf_at + leaf_n): the
  // whole range, or for a float sum longer than 128 elements the leaves of
  // NumPy's pairwise recursion, walked with a stack of the nodes above
  // (start, length, stage: 0 new, 1 left child done, 2 both; the left
  // child's sum), `ret` the sum of the node just finished.
  llvm::Value* leaf_at = slot(i64);
  llvm::Value* leaf_n = slot(i64);
  llvm::Value* ua = slot(i64);
  llvm::BasicBlock* leaf = llvm::BasicBlock::Create(ctx, "elem_leaf", fn);
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "elem_head", fn);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "elem_body", fn);
  llvm::BasicBlock* leaf_end = llvm::BasicBlock::Create(ctx, "elem_leaf_end", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "elem_done", fn);
  b.CreateStore(b.getInt64(0), leaf_at);
  b.CreateStore(len, leaf_n);
  llvm::BasicBlock* pre = b.GetInsertBlock();
  b.CreateBr(leaf);  // replaced below for a pairwise sum
  b.SetInsertPoint(leaf);
  llvm::Value* ln = b.CreateLoad(i64, leaf_n);
  llvm::Value* l0 = b.CreateLoad(i64, leaf_at);
  llvm::Value* n8 = b.CreateSelect(b.CreateICmpSGE(ln, b.getInt64(8)),
                                   b.CreateAnd(ln, b.getInt64(~int64_t{7})), b.getInt64(0));
  b.CreateStore(b.getInt64(0), ua);
  llvm::BasicBlock* leaf_init = b.GetInsertBlock();
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::Value* u = b.CreateLoad(i64, ua);
  b.CreateCondBr(b.CreateICmpSLT(u, ln), body, leaf_end);
  b.SetInsertPoint(body);
  llvm::Value* saved_t = elem_t;
  elem_t = b.CreateAdd(l0, u);
  CV v = eval(x);
  elem_t = saved_t;
  const int ek = v.k;
  if (v.k == kDyn || v.s || (ek != Reg::NpFloat && ek != Reg::NpInt && ek != Reg::NpBool))
    throw Refuse{"an array expression whose elements are not float64, int64 or bool"};
  const bool as_float = ek == Reg::NpFloat || is_mean;
  const bool pairwise = (is_sum || is_mean) && as_float;
  llvm::Value* x0 = v.v;
  if (is_mean && ek != Reg::NpFloat)
    x0 = ek == Reg::NpInt ? b.CreateSIToFP(x0, f64) : b.CreateUIToFP(x0, f64);
  if ((is_sum || is_mean) && !as_float && ek == Reg::NpBool) x0 = b.CreateZExt(x0, i64);
  llvm::Type* at = as_float ? f64 : (ek == Reg::NpBool && !is_sum ? i1 : i64);
  llvm::Value* acc = slot(at);
  {
    llvm::IRBuilder<> lb(leaf_init->getTerminator());
    lb.CreateStore(as_float ? llvm::ConstantFP::get(f64, 0.0) : llvm::Constant::getNullValue(at), acc);
  }
  llvm::Value* parts = pairwise ? e.CreateAlloca(f64, b.getInt64(8)) : nullptr;
  auto tree = [&](llvm::IRBuilder<>& q) {
    llvm::Value* r[8];
    for (int j = 0; j < 8; ++j) r[j] = q.CreateLoad(f64, q.CreateConstInBoundsGEP1_64(f64, parts, j));
    return q.CreateFAdd(q.CreateFAdd(q.CreateFAdd(r[0], r[1]), q.CreateFAdd(r[2], r[3])),
                        q.CreateFAdd(q.CreateFAdd(r[4], r[5]), q.CreateFAdd(r[6], r[7])));
  };
  llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "elem_next", fn);
  if (pairwise) {
    // NumPy's pairwise_sum of a leaf: 8 partial sums from 8 elements on.
    llvm::BasicBlock* blk = llvm::BasicBlock::Create(ctx, "elem_block8", fn);
    llvm::BasicBlock* tail = llvm::BasicBlock::Create(ctx, "elem_tail", fn);
    b.CreateCondBr(b.CreateICmpSLT(u, n8), blk, tail);
    b.SetInsertPoint(blk);
    llvm::Value* ps = b.CreateInBoundsGEP(f64, parts, b.CreateAnd(u, b.getInt64(7)));
    llvm::Value* old = b.CreateLoad(f64, ps);
    b.CreateStore(b.CreateSelect(b.CreateICmpSLT(u, b.getInt64(8)), x0, b.CreateFAdd(old, x0)), ps);
    b.CreateBr(next);
    b.SetInsertPoint(tail);
    // The first element after the blocks starts from their sum.
    llvm::BasicBlock* first = llvm::BasicBlock::Create(ctx, "elem_tail_first", fn);
    llvm::BasicBlock* add = llvm::BasicBlock::Create(ctx, "elem_tail_add", fn);
    b.CreateCondBr(b.CreateAnd(b.CreateICmpEQ(u, n8), b.CreateICmpSGT(n8, b.getInt64(0))), first, add);
    b.SetInsertPoint(first);
    b.CreateStore(tree(b), acc);
    b.CreateBr(add);
    b.SetInsertPoint(add);
    b.CreateStore(b.CreateFAdd(b.CreateLoad(f64, acc), x0), acc);
    b.CreateBr(next);
  } else if (is_sum) {
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, acc), x0), acc);  // wraps, as NumPy's int64
    b.CreateBr(next);
  } else {
    llvm::Value* m = b.CreateLoad(at, acc);
    llvm::Value* better;
    if (as_float) {
      // NaN propagates (NumPy's maximum/minimum).
      better = b.CreateOr(is_max ? b.CreateFCmpOGT(x0, m) : b.CreateFCmpOLT(x0, m),
                          b.CreateFCmpUNO(x0, x0));
    } else if (at == i1) {
      better = is_max ? b.CreateAnd(x0, b.CreateNot(m)) : b.CreateAnd(b.CreateNot(x0), m);
    } else {
      better = is_max ? b.CreateICmpSGT(x0, m) : b.CreateICmpSLT(x0, m);
    }
    better = b.CreateOr(better, b.CreateICmpEQ(u, b.getInt64(0)));
    b.CreateStore(b.CreateSelect(better, x0, m), acc);
    b.CreateBr(next);
  }
  b.SetInsertPoint(next);
  b.CreateStore(b.CreateAdd(u, b.getInt64(1)), ua);
  b.CreateBr(head);
  b.SetInsertPoint(leaf_end);
  llvm::Value* res;
  if (!pairwise) {
    res = b.CreateLoad(at, acc);
    b.CreateBr(done);
  } else {
    // The leaf's sum (the blocks' alone when no element follows them).
    llvm::Value* ret = slot(f64);
    llvm::Value* only = b.CreateAnd(b.CreateICmpEQ(n8, ln), b.CreateICmpSGT(n8, b.getInt64(0)));
    llvm::BasicBlock* only_b = llvm::BasicBlock::Create(ctx, "elem_blocks_only", fn);
    llvm::BasicBlock* acc_b = llvm::BasicBlock::Create(ctx, "elem_acc", fn);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(ctx, "elem_after_node", fn);
    b.CreateCondBr(only, only_b, acc_b);
    b.SetInsertPoint(only_b);
    b.CreateStore(tree(b), ret);
    b.CreateBr(after);
    b.SetInsertPoint(acc_b);
    b.CreateStore(b.CreateLoad(f64, acc), ret);
    b.CreateBr(after);
    // The recursion over nodes longer than 128 elements.
    llvm::Type* a64 = llvm::ArrayType::get(i64, 64);
    llvm::Value* st_at = e.CreateAlloca(a64);
    llvm::Value* st_n = e.CreateAlloca(a64);
    llvm::Value* st_stage = e.CreateAlloca(a64);
    llvm::Value* st_val = e.CreateAlloca(llvm::ArrayType::get(f64, 64));
    llvm::Value* sp = slot(i64);
    llvm::Value* c_at = slot(i64);
    llvm::Value* c_n = slot(i64);
    auto item = [&](llvm::Value* arr, llvm::Type* t, llvm::Value* k) {
      return b.CreateInBoundsGEP(llvm::ArrayType::get(t, 64), arr, {b.getInt64(0), k});
    };
    llvm::BasicBlock* visit = llvm::BasicBlock::Create(ctx, "pw_visit", fn);
    llvm::BasicBlock* disp = llvm::BasicBlock::Create(ctx, "pw_node", fn);
    // Before: the whole range a leaf, or the root pushed.
    pre->getTerminator()->eraseFromParent();
    b.SetInsertPoint(pre);
    b.CreateStore(b.getInt64(0), sp);
    b.CreateStore(b.getInt64(0), c_at);
    b.CreateStore(len, c_n);
    b.CreateBr(visit);
    // A node: a leaf (at most 128 elements) or pushed.
    b.SetInsertPoint(visit);
    llvm::Value* vat = b.CreateLoad(i64, c_at);
    llvm::Value* vn = b.CreateLoad(i64, c_n);
    llvm::BasicBlock* push = llvm::BasicBlock::Create(ctx, "pw_push", fn);
    llvm::BasicBlock* to_leaf = llvm::BasicBlock::Create(ctx, "pw_leaf", fn);
    b.CreateCondBr(b.CreateICmpSLE(vn, b.getInt64(128)), to_leaf, push);
    b.SetInsertPoint(to_leaf);
    b.CreateStore(vat, leaf_at);
    b.CreateStore(vn, leaf_n);
    b.CreateBr(leaf);
    b.SetInsertPoint(push);
    llvm::Value* k = b.CreateLoad(i64, sp);
    b.CreateStore(vat, item(st_at, i64, k));
    b.CreateStore(vn, item(st_n, i64, k));
    b.CreateStore(b.getInt64(0), item(st_stage, i64, k));
    b.CreateStore(b.CreateAdd(k, b.getInt64(1)), sp);
    b.CreateBr(disp);
    // After a node: its parent's next step, or the end.
    b.SetInsertPoint(after);
    b.CreateCondBr(b.CreateICmpEQ(b.CreateLoad(i64, sp), b.getInt64(0)), done, disp);
    b.SetInsertPoint(disp);
    llvm::Value* top = b.CreateSub(b.CreateLoad(i64, sp), b.getInt64(1));
    llvm::Value* tat = b.CreateLoad(i64, item(st_at, i64, top));
    llvm::Value* tn = b.CreateLoad(i64, item(st_n, i64, top));
    llvm::Value* stage = b.CreateLoad(i64, item(st_stage, i64, top));
    llvm::Value* half = b.CreateSDiv(tn, b.getInt64(2));
    llvm::Value* m = b.CreateSub(half, b.CreateSRem(half, b.getInt64(8)));
    llvm::BasicBlock* s0 = llvm::BasicBlock::Create(ctx, "pw_left", fn);
    llvm::BasicBlock* s1 = llvm::BasicBlock::Create(ctx, "pw_right", fn);
    llvm::BasicBlock* s2 = llvm::BasicBlock::Create(ctx, "pw_join", fn);
    llvm::SwitchInst* sw = b.CreateSwitch(stage, s2, 2);
    sw->addCase(b.getInt64(0), s0);
    sw->addCase(b.getInt64(1), s1);
    b.SetInsertPoint(s0);
    b.CreateStore(b.getInt64(1), item(st_stage, i64, top));
    b.CreateStore(tat, c_at);
    b.CreateStore(m, c_n);
    b.CreateBr(visit);
    b.SetInsertPoint(s1);
    b.CreateStore(b.CreateLoad(f64, ret), item(st_val, f64, top));
    b.CreateStore(b.getInt64(2), item(st_stage, i64, top));
    b.CreateStore(b.CreateAdd(tat, m), c_at);
    b.CreateStore(b.CreateSub(tn, m), c_n);
    b.CreateBr(visit);
    b.SetInsertPoint(s2);
    b.CreateStore(b.CreateFAdd(b.CreateLoad(f64, item(st_val, f64, top)), b.CreateLoad(f64, ret)), ret);
    b.CreateStore(top, sp);
    b.CreateBr(after);
    b.SetInsertPoint(done);
    res = b.CreateLoad(f64, ret);
  }
  if (!pairwise) b.SetInsertPoint(done);
  count_expr(x);
  count(n.slot);
  if (is_mean) return CV{Reg::NpFloat, b.CreateFDiv(res, b.CreateSIToFP(len, f64))};
  if (is_sum) return CV{as_float ? Reg::NpFloat : Reg::NpInt, res};
  return CV{ek, res};
}

CV Gen::dot_reduce(const FNode& n) {
  // np.dot(u, v) of two 1-d float64 expressions: the general path's
  // strided_vector_dot (primitives/matrix.cpp) in its order, four partial
  // sums and the rest into the first; lengths must be equal (no broadcasting).
  llvm::Value* saved_len = elem_len;
  elem_len = b.getInt64(1);
  elem_prepare(n.kids[0]);
  llvm::Value* la = elem_len;
  elem_len = b.getInt64(1);
  elem_prepare(n.kids[1]);
  llvm::Value* lb = elem_len;
  elem_len = saved_len;
  bail_if(b.CreateICmpNE(la, lb));  // the interpreter's "shapes not aligned"
  bail_if(b.CreateICmpSGE(la, b.getInt64(kLargeResult)));
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* parts = e.CreateAlloca(f64, b.getInt64(4));
  for (int j = 0; j < 4; ++j)
    b.CreateStore(llvm::ConstantFP::get(f64, 0.0), b.CreateConstInBoundsGEP1_64(f64, parts, j));
  llvm::Value* n4 = b.CreateAnd(la, b.getInt64(~int64_t{3}));
  llvm::Value* ta = e.CreateAlloca(i64);
  b.CreateStore(b.getInt64(0), ta);
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "dot_head", fn);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "dot_body", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "dot_done", fn);
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::Value* t = b.CreateLoad(i64, ta);
  b.CreateCondBr(b.CreateICmpSLT(t, la), body, done);
  b.SetInsertPoint(body);
  llvm::Value* saved_t = elem_t;
  elem_t = t;
  CV x = eval(n.kids[0]);
  CV y = eval(n.kids[1]);
  elem_t = saved_t;
  if (x.k != Reg::NpFloat || y.k != Reg::NpFloat || x.s || y.s)
    throw Refuse{"np.dot of array expressions that are not both float64"};
  llvm::Value* j = b.CreateSelect(b.CreateICmpSLT(t, n4), b.CreateAnd(t, b.getInt64(3)), b.getInt64(0));
  llvm::Value* ps = b.CreateInBoundsGEP(f64, parts, j);
  b.CreateStore(b.CreateFAdd(b.CreateLoad(f64, ps), b.CreateFMul(x.v, y.v)), ps);
  b.CreateStore(b.CreateAdd(t, b.getInt64(1)), ta);
  b.CreateBr(head);
  b.SetInsertPoint(done);
  llvm::Value* r[4];
  for (int k = 0; k < 4; ++k) r[k] = b.CreateLoad(f64, b.CreateConstInBoundsGEP1_64(f64, parts, k));
  count_expr(n.kids[0]);
  count_expr(n.kids[1]);
  count(n.slot);
  return CV{Reg::NpFloat, b.CreateFAdd(b.CreateFAdd(r[0], r[1]), b.CreateFAdd(r[2], r[3]))};
}

bool Gen::slice_write_of(const FNode& n) {
  const ArrT& e = atype[n.kids[0].reg];
  const size_t nidx = n.kids.size() - 2;
  if (!e.indexable || nidx > static_cast<size_t>(e.nd)) return false;
  size_t slices = 0;
  for (size_t k = 2; k < n.kids.size(); ++k) slices += slice_index(n.kids[k]) ? 1 : 0;
  return slices > 0;
}

CV Gen::slice_write(const FNode& n) {
  const int r = n.kids[0].reg;
  const ArrT& e = atype[r];
  const size_t nidx = n.kids.size() - 2;
  size_t free_dims = static_cast<size_t>(e.nd) - nidx;
  for (size_t k = 2; k < n.kids.size(); ++k) free_dims += slice_index(n.kids[k]) ? 1 : 0;
  if (free_dims != 1 && whole_fill_of(n)) return whole_fill(n);
  if (free_dims != 1) throw Refuse{"a slice write that is not 1-d"};
  if (!e.writable) throw Refuse{"a slice write into an array that is not writable"};
  if (e.dt != DType::float64 && e.dt != DType::int64 && e.dt != DType::bool_)
    throw Refuse{std::string("a slice write into an array of dtype ") + std::string(dtype_name(e.dt))};
  if (sites) throw Refuse{"a slice write in a turn without loops"};
  // The value first, then the destination (setitem's operands in order).
  const FNode& v = n.kids[1];
  llvm::Value* saved_len = elem_len;
  elem_len = b.getInt64(1);
  const bool is_arr = arr_expr(v);
  if (is_arr) {
    elem_prepare(v);
  } else {
    CV c = eval(v);
    if (c.k == kDyn || !is_scalar(static_cast<Reg::Kind>(c.k)))
      throw Refuse{"a slice write of what is not a number or an array expression"};
    elem_const[&v] = c;
  }
  llvm::Value* vlen = elem_len;
  elem_len = b.getInt64(1);
  view_of(n, 2);
  const ViewLeaf dst = elem_view.at(&n);
  elem_view.erase(&n);
  elem_len = saved_len;
  // NumPy broadcasts the value to the destination's length (else ValueError).
  bail_if(b.CreateAnd(b.CreateICmpNE(vlen, b.getInt64(1)), b.CreateICmpNE(vlen, dst.len)));
  bail_if(b.CreateICmpSGE(dst.len, b.getInt64(kLargeResult)));
  // What the value reads must not be what the loop writes before reading
  // it (NumPy computes the value first): the same view, or no common byte.
  auto span = [&](const ViewLeaf& w, llvm::Value*& lo, llvm::Value*& hi) {
    const int64_t size = w.dt == DType::bool_ ? 1 : 8;
    llvm::Value* reach = b.CreateMul(b.CreateSub(w.len, b.getInt64(1)), w.step);
    llvm::Value* base = b.CreatePtrToInt(w.base, i64);
    lo = b.CreateAdd(base, b.CreateMul(smin(reach, b.getInt64(0)), b.getInt64(size)));
    hi = b.CreateAdd(base, b.CreateMul(b.CreateAdd(smax(reach, b.getInt64(0)), b.getInt64(1)),
                                       b.getInt64(size)));
  };
  llvm::Value *dlo, *dhi;
  span(dst, dlo, dhi);
  std::function<void(const FNode&)> check = [&](const FNode& x) {
    if (x.op == Op::Var && lazy.count(x.reg)) {
      check(*lazy.at(x.reg));
      return;
    }
    if (elem_const.count(&x)) return;
    if (auto it = elem_view.find(&x); it != elem_view.end() && is_view(x)) {
      const ViewLeaf& w = it->second;
      llvm::Value *lo, *hi;
      span(w, lo, hi);
      llvm::Value* same = b.getFalse();
      if (w.dt == dst.dt)
        same = b.CreateAnd(b.CreateICmpEQ(b.CreatePtrToInt(w.base, i64), b.CreatePtrToInt(dst.base, i64)),
                           b.CreateICmpEQ(w.step, dst.step));
      llvm::Value* meet = b.CreateAnd(b.CreateICmpULT(lo, dhi), b.CreateICmpULT(dlo, hi));
      meet = b.CreateAnd(meet, b.CreateICmpSGT(w.len, b.getInt64(0)));
      bail_if(b.CreateAnd(b.CreateAnd(meet, b.CreateICmpSGT(dst.len, b.getInt64(0))), b.CreateNot(same)));
      return;
    }
    for (const FNode& k : x.kids) check(k);
  };
  if (is_arr) check(v);
  llvm::Type* t = e.dt == DType::float64 ? f64 : e.dt == DType::int64 ? i64 : i8;
  const unsigned size = e.dt == DType::bool_ ? 1 : 8;
  llvm::Type* it = b.getIntNTy(size * 8);
  llvm::IRBuilder<> eb(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* ta = eb.CreateAlloca(i64);
  b.CreateStore(b.getInt64(0), ta);
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "slice_head", fn);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "slice_body", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "slice_done", fn);
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::Value* ti = b.CreateLoad(i64, ta);
  b.CreateCondBr(b.CreateICmpSLT(ti, dst.len), body, done);
  b.SetInsertPoint(body);
  llvm::Value* saved_t = elem_t;
  elem_t = ti;
  CV x = eval(v);
  elem_t = saved_t;
  const auto xk = static_cast<Reg::Kind>(x.k);
  if (x.k == kDyn || x.s || !is_scalar(xk) || is_narrow(xk))
    throw Refuse{"a slice write of elements that are not float64, int64 or bool"};
  // NumPy's cast into the destination's dtype: exact ones only (a float into
  // int64 or bool, an int into bool: the interpreter's).
  llvm::Value* xv;
  if (e.dt == DType::float64) {
    xv = is_float(xk) ? x.v : is_int(xk) ? b.CreateSIToFP(x.v, f64) : b.CreateUIToFP(x.v, f64);
  } else if (e.dt == DType::int64) {
    if (is_float(xk)) throw Refuse{"a slice write of floats into int64"};
    xv = is_int(xk) ? x.v : b.CreateZExt(x.v, i64);
  } else {
    if (!is_bool(xk)) throw Refuse{"a slice write of numbers into bool"};
    xv = b.CreateZExt(x.v, i8);
  }
  llvm::Value* p = b.CreateGEP(t, b.CreateBitCast(dst.base, t->getPointerTo()), b.CreateMul(ti, dst.step));
  log_unless_fresh(r, p, it, size, "slice_log");
  b.CreateStore(xv, p);
  b.CreateStore(b.CreateAdd(ti, b.getInt64(1)), ta);
  b.CreateBr(head);
  b.SetInsertPoint(done);
  if (is_arr) count_expr(v);
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{Reg::Arr, nullptr, nullptr, r};
}

bool Gen::whole_fill_of(const FNode& n) {
  for (size_t k = 2; k < n.kids.size(); ++k) {
    const FNode& i = n.kids[k];
    if (!slice_const(i)) return false;
    const Slice& sl = i.const_arg->as_slice();
    if (sl.start || sl.stop || (sl.step && *sl.step != 1)) return false;
  }
  return !arr_expr(n.kids[1]);
}

CV Gen::whole_fill(const FNode& n) {
  // `acc[:] = 0.0` of a 2-d array at each step of a simulation: the number cast as the
  // 1-d slice write casts it, then one nested loop over the extents (any strides).
  const int r = n.kids[0].reg;
  const ArrT& e = atype[r];
  if (!e.writable) throw Refuse{"a slice write into an array that is not writable"};
  if (e.dt != DType::float64 && e.dt != DType::int64 && e.dt != DType::bool_)
    throw Refuse{std::string("a slice write into an array of dtype ") + std::string(dtype_name(e.dt))};
  if (sites) throw Refuse{"a slice write in a turn without loops"};
  CV x = eval(n.kids[1]);
  const auto xk = static_cast<Reg::Kind>(x.k);
  if (x.k == kDyn || x.s || !is_scalar(xk) || is_narrow(xk))
    throw Refuse{"a slice write of a value that is not a float64, int64 or bool number"};
  llvm::Value* xv;
  if (e.dt == DType::float64) {
    xv = is_float(xk) ? x.v : is_int(xk) ? b.CreateSIToFP(x.v, f64) : b.CreateUIToFP(x.v, f64);
  } else if (e.dt == DType::int64) {
    if (is_float(xk)) throw Refuse{"a slice write of floats into int64"};
    xv = is_int(xk) ? x.v : b.CreateZExt(x.v, i64);
  } else {
    if (!is_bool(xk)) throw Refuse{"a slice write of numbers into bool"};
    xv = b.CreateZExt(x.v, i8);
  }
  // As the 1-d write: a large one goes the general way (its log would be as large).
  llvm::Value* total = b.getInt64(1);
  for (int d = 0; d < e.nd; ++d) total = b.CreateMul(total, ashape(r, static_cast<size_t>(d)));
  bail_if(b.CreateICmpSGE(total, b.getInt64(kLargeResult)));
  llvm::Type* t = e.dt == DType::float64 ? f64 : e.dt == DType::int64 ? i64 : i8;
  const unsigned size = e.dt == DType::bool_ ? 1 : 8;
  llvm::Type* it = b.getIntNTy(size * 8);
  llvm::Value* base = b.CreateBitCast(abase(r), t->getPointerTo());
  llvm::IRBuilder<> eb(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  std::function<void(int, llvm::Value*)> level = [&](int d, llvm::Value* off) {
    if (d == e.nd) {
      llvm::Value* p = b.CreateGEP(t, base, off);
      log_unless_fresh(r, p, it, size, "fill_log");
      b.CreateStore(xv, p);
      return;
    }
    llvm::Value* ta = eb.CreateAlloca(i64);
    b.CreateStore(b.getInt64(0), ta);
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "fill_head", fn);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "fill_body", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "fill_done", fn);
    b.CreateBr(head);
    b.SetInsertPoint(head);
    llvm::Value* ti = b.CreateLoad(i64, ta);
    b.CreateCondBr(b.CreateICmpSLT(ti, ashape(r, static_cast<size_t>(d))), body, done);
    b.SetInsertPoint(body);
    level(d + 1, b.CreateAdd(off, b.CreateMul(ti, astride(r, static_cast<size_t>(d)))));
    b.CreateStore(b.CreateAdd(ti, b.getInt64(1)), ta);
    b.CreateBr(head);
    b.SetInsertPoint(done);
  };
  level(0, b.getInt64(0));
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{Reg::Arr, nullptr, nullptr, r};
}

}  // namespace tessera::native_gen
