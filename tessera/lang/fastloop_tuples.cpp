// Tuples in the scalar loop fast path (docs/runtime.md, "Tuples in loops").
//
// A tuple of fixed length in a loop — `state = (y, v)`, a helper returning
// `(v, -w * y)`, `y, v = state`, `k1[0]` — is kept as one register per item:
// after compilation, lower_tuples finds the registers that hold tuples (a
// display assigned to them, a variable or a call returning one, or, for a
// variable of the loop's frames, the tuple it holds when the loop is
// compiled) and rewrites every use into operations on the items' registers.
// The interpreter and the native code then see only scalar code: no tuple
// is built in a turn. A tuple used whole (given to a primitive, compared,
// indexed by a variable, nested in another) keeps the loop on the general
// path, as before; a variable of the loop's frames that only holds a tuple
// when the loop starts and is used whole stays an object register.
#include <complex>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

namespace {

using TupNode = FastLoop::Impl::FNode;

// The registers of tuple items and of a display's temporaries: depths no
// frame or inlined call uses (inlined calls' locals are -1 - site).
constexpr int kTupItemDepth = -(1 << 24);
constexpr int kTupTempDepth = -(1 << 25);

bool tup_is_unpack(const TupNode& n) {
  return n.op == Op::Call && n.spec && n.spec->name == "unpack" && n.kids.size() == 2;
}

bool tup_is_len(const TupNode& n) {
  return n.op == Op::Call && n.spec && n.spec->name == "len" && n.kids.size() == 1;
}

TupNode tup_var(int reg) { return FastLoop::Impl::var_node(reg); }

TupNode tup_assign(int reg, TupNode value) {
  return FastLoop::Impl::assign_node(reg, std::move(value));
}

class TupleLowering {
 public:
  explicit TupleLowering(FastLoop::Impl& im) : im_(im) {}

  // True with the tree rewritten, or false with `why` (and `soft_whole_`
  // set when a register whose length came only from the frame was used
  // whole: the caller drops that guess and tries again).
  bool run(TupNode& cond, TupNode& body, const std::vector<char>& not_tuples) {
    const size_t n = im_.vars.size();
    len_.assign(n, -1);
    soft_.assign(n, 0);
    seed(not_tuples);
    if (!infer(cond, body)) return false;
    bool any = false;
    for (int l : len_) any = any || l >= 0;
    if (!any && !has_display(cond) && !has_display(body)) return true;
    items_.assign(n, {});
    return lower(cond, Ctx::value) && lower(body, im_.value_unused ? Ctx::discard : Ctx::value);
  }

  std::string why;
  int soft_whole = -1;
  std::vector<std::vector<int>> items_;

 private:
  enum class Ctx { value, discard };

  // Variables of the loop's frames that hold a tuple of numbers (or arrays)
  // now: tuples of that length, unless the loop uses them otherwise.
  void seed(const std::vector<char>& not_tuples) {
    if (!im_.frame) return;
    for (size_t r = 0; r < im_.vars.size(); ++r) {
      const FastLoop::Impl::VarRef& v = im_.vars[r];
      if (v.depth < 0 || (r < not_tuples.size() && not_tuples[r])) continue;
      const Frame* f = im_.frame;
      for (int k = 0; k < v.depth && f; ++k) f = f->parent();
      Value x;
      if (!f || !f->read_now(v.slot, x) || !x.is_tuple()) continue;
      bool items_ok = !x.as_list().empty();
      for (const Value& it : x.as_list()) items_ok = items_ok && (it.is_scalar() || it.is_array());
      if (!items_ok) continue;
      len_[r] = static_cast<int>(x.as_list().size());
      soft_[r] = 1;
    }
  }

  int length_of(const TupNode& e) const {
    switch (e.op) {
      case Op::MakeTuple:
        return static_cast<int>(e.kids.size());
      case Op::Var:
        return e.reg >= 0 && static_cast<size_t>(e.reg) < len_.size() ? len_[e.reg] : -1;
      case Op::Assign:
        return length_of(e.kids[0]);
      case Op::Block:
        return e.kids.empty() ? -1 : length_of(e.kids.back());
      case Op::If: {
        // `a if c else b` of two tuples of one length (a function called
        // inline with an early return: if(done, value, tail)).
        if (e.kids.size() != 3) return -1;
        const int a = length_of(e.kids[1]);
        return a >= 0 && a == length_of(e.kids[2]) ? a : -1;
      }
      default:
        return tup_is_unpack(e) ? length_of(e.kids[0]) : -1;
    }
  }

  static bool has_display(const TupNode& n) {
    if (n.op == Op::MakeTuple) return true;
    for (const TupNode& k : n.kids)
      if (has_display(k)) return true;
    return false;
  }

  // The registers' lengths from the assignments, to a fixed point.
  bool infer(const TupNode& cond, const TupNode& body) {
    for (size_t round = 0; round <= len_.size() + 1; ++round) {
      bool changed = false;
      if (!infer_in(cond, changed) || !infer_in(body, changed)) return false;
      if (!changed) return true;
    }
    return true;
  }

  bool infer_in(const TupNode& n, bool& changed) {
    for (const TupNode& k : n.kids)
      if (!infer_in(k, changed)) return false;
    if (n.op != Op::Assign) return true;
    const int l = length_of(n.kids[0]);
    int& have = len_[n.reg];
    if (l >= 0 && have < 0) {
      have = l;
      changed = true;
    } else if (l >= 0 && have != l) {
      why = "'" + name(n.reg) + "' holds tuples of " + std::to_string(have) + " and " +
            std::to_string(l) + " items";
      if (soft_[n.reg]) soft_whole = n.reg;
      return false;
    } else if (l < 0 && have >= 0) {
      why = "'" + name(n.reg) + "' holds a tuple and another value";
      if (soft_[n.reg]) soft_whole = n.reg;
      return false;
    }
    if (l >= 0) soft_[n.reg] = 0;
    return true;
  }

  std::string name(int r) const {
    if (r >= 0 && static_cast<size_t>(r) < im_.names.size() && !im_.names[r].empty())
      return im_.names[r];
    return "a variable";
  }

  const std::vector<int>& items_of(int r) {
    std::vector<int>& it = items_[r];
    if (it.empty()) {
      const std::string base = name(r);
      for (int i = 0; i < len_[r]; ++i) {
        const int x = im_.reg(kTupItemDepth - r, static_cast<size_t>(i));
        im_.vars[x].tuple_item = true;
        im_.name_reg(x, base + "[" + std::to_string(i) + "]");
        it.push_back(x);
      }
    }
    return it;
  }

  int temp() {
    const int x = im_.reg(kTupTempDepth - temps_++, 0);
    im_.vars[x].tuple_item = true;
    return x;
  }

  bool whole(int r) {
    why = "the tuple '" + name(r) + "' is used whole (given to an operation, compared or indexed "
          "by a variable)";
    if (soft_[r]) soft_whole = r;
    return false;
  }

  // `n` rewritten where its value is a scalar (or unused).
  bool lower(TupNode& n, Ctx ctx) {
    switch (n.op) {
      case Op::Var:
        return len_[n.reg] < 0 || whole(n.reg);
      case Op::MakeTuple:
        why = "a tuple is built where a single value is needed";
        return false;
      case Op::Assign: {
        if (len_[n.reg] < 0) return lower(n.kids[0], Ctx::value);
        if (ctx == Ctx::value) {
          why = "the value of an assignment of the tuple '" + name(n.reg) + "' is used";
          return false;
        }
        std::vector<TupNode> pre, parts;
        if (!lower_tuple(n.kids[0], pre, parts)) return false;
        const std::vector<int>& it = items_of(n.reg);
        TupNode b;
        b.op = Op::Block;
        b.kids = std::move(pre);
        for (size_t i = 0; i < it.size(); ++i) b.kids.push_back(tup_assign(it[i], std::move(parts[i])));
        n = std::move(b);
        return true;
      }
      case Op::Block:
        for (size_t i = 0; i < n.kids.size(); ++i)
          if (!lower(n.kids[i], i + 1 == n.kids.size() ? ctx : Ctx::discard)) return false;
        return true;
      case Op::If:
        if (!lower(n.kids[0], Ctx::value)) return false;
        for (size_t i = 1; i < n.kids.size(); ++i)
          if (!lower(n.kids[i], ctx)) return false;
        return true;
      case Op::While:
        return lower(n.kids[0], Ctx::value) &&
               lower(n.kids[1], n.value_unused ? Ctx::discard : Ctx::value);
      case Op::GetItem:
        if (n.kids.size() == 2 && length_of(n.kids[0]) >= 0) return lower_index(n);
        break;
      default:
        if (tup_is_len(n) && length_of(n.kids[0]) >= 0 && n.kids[0].op == Op::Var) {
          const int l = length_of(n.kids[0]);
          n = TupNode{};
          n.op = Op::Const;
          n.constant = Reg::make(Reg::PyInt, l);
          return true;
        }
        if (tup_is_unpack(n) && length_of(n.kids[0]) >= 0) {
          why = "a tuple is unpacked where a single value is needed";
          return false;
        }
        break;
    }
    for (TupNode& k : n.kids)
      if (!lower(k, Ctx::value)) return false;
    return true;
  }

  // t[k] for a constant k: the item's value after what computes t.
  bool lower_index(TupNode& n) {
    const TupNode& idx = n.kids[1];
    const int l = length_of(n.kids[0]);
    if (idx.op != Op::Const || idx.constant.k != Reg::PyInt) {
      why = "a tuple is indexed by a variable";
      return false;
    }
    int64_t k = idx.constant.i;
    if (k < 0) k += l;
    if (k < 0 || k >= l) {
      why = "a tuple index is out of range";  // the general path raises IndexError
      return false;
    }
    std::vector<TupNode> pre, parts;
    if (!lower_tuple(n.kids[0], pre, parts)) return false;
    if (pre.empty()) {
      n = std::move(parts[static_cast<size_t>(k)]);
      return true;
    }
    TupNode b;
    b.op = Op::Block;
    b.kids = std::move(pre);
    b.kids.push_back(std::move(parts[static_cast<size_t>(k)]));
    n = std::move(b);
    return true;
  }

  // A tuple-valued `e`: the statements that compute it (`pre`, in order)
  // and then one expression per item, each a constant or a register read.
  bool lower_tuple(TupNode& e, std::vector<TupNode>& pre, std::vector<TupNode>& parts) {
    switch (e.op) {
      case Op::MakeTuple:
        for (TupNode& k : e.kids) {
          if (length_of(k) >= 0) {
            why = "a tuple holds a tuple";
            return false;
          }
          if (!lower(k, Ctx::value)) return false;
          if (k.op == Op::Const) {
            parts.push_back(std::move(k));
            continue;
          }
          const int t = temp();
          pre.push_back(tup_assign(t, std::move(k)));
          parts.push_back(tup_var(t));
        }
        return true;
      case Op::Var:
        for (int x : items_of(e.reg)) parts.push_back(tup_var(x));
        return true;
      case Op::Assign: {
        const int r = e.reg;
        if (!lower(e, Ctx::discard)) return false;
        pre.push_back(std::move(e));
        for (int x : items_of(r)) parts.push_back(tup_var(x));
        return true;
      }
      case Op::Block:
        for (size_t i = 0; i + 1 < e.kids.size(); ++i) {
          if (!lower(e.kids[i], Ctx::discard)) return false;
          pre.push_back(std::move(e.kids[i]));
        }
        return lower_tuple(e.kids.back(), pre, parts);
      case Op::If: {
        // Each branch computes its tuple and assigns the items to the same
        // temporaries, which are the value's items after the `if`.
        const int l = length_of(e);
        if (l < 0) break;
        if (!lower(e.kids[0], Ctx::value)) return false;
        std::vector<int> ts;
        for (int i = 0; i < l; ++i) ts.push_back(temp());
        for (size_t b = 1; b < 3; ++b) {
          std::vector<TupNode> bpre, bparts;
          if (!lower_tuple(e.kids[b], bpre, bparts)) return false;
          TupNode blk;
          blk.op = Op::Block;
          blk.kids = std::move(bpre);
          for (size_t i = 0; i < static_cast<size_t>(l); ++i)
            blk.kids.push_back(tup_assign(ts[i], std::move(bparts[i])));
          e.kids[b] = std::move(blk);
        }
        e.returned = false;  // the branches are blocks now, neither None
        pre.push_back(std::move(e));
        for (int t : ts) parts.push_back(tup_var(t));
        return true;
      }
      default:
        if (tup_is_unpack(e)) {
          const TupNode& count = e.kids[1];
          const int l = length_of(e.kids[0]);
          if (count.op != Op::Const || count.constant.k != Reg::PyInt || count.constant.i != l) {
            why = "a tuple is unpacked into another number of names";  // ValueError there
            return false;
          }
          return lower_tuple(e.kids[0], pre, parts);
        }
        break;
    }
    why = "a tuple comes from an operation";
    return false;
  }

  FastLoop::Impl& im_;
  std::vector<int> len_;
  std::vector<char> soft_;
  int temps_ = 0;
};

}  // namespace

bool FastLoop::Impl::lower_tuples() {
  // A variable of the loop's frames guessed a tuple from its value now but
  // used whole is left an object register: tried again without the guess.
  std::vector<char> not_tuples(vars.size(), 0);
  for (size_t attempt = 0; attempt <= vars.size(); ++attempt) {
    const size_t regs_before = vars.size();
    FNode c = cond, b = body;
    TupleLowering t(*this);
    if (t.run(c, b, not_tuples)) {
      cond = std::move(c);
      body = std::move(b);
      frame_tuple_of.assign(vars.size(), -1);
      for (size_t r = 0; r < t.items_.size(); ++r) {
        if (t.items_[r].empty() || vars[r].depth < 0) continue;
        frame_tuple_of[r] = static_cast<int>(frame_tuples.size());
        frame_tuples.push_back({static_cast<int>(r), t.items_[r]});
      }
      if (frame_tuples.empty()) frame_tuple_of.clear();
      return true;
    }
    // The registers that attempt made are dropped with it.
    while (vars.size() > regs_before) {
      reg_of.erase({vars.back().depth, vars.back().slot});
      vars.pop_back();
    }
    if (names.size() > vars.size()) names.resize(vars.size());
    if (t.soft_whole < 0) {
      if (fast_loops_debug())
        std::fprintf(stderr, "[fast loops] %s: %s\n", where.empty() ? "a loop" : where.c_str(),
                     t.why.c_str());
      return false;
    }
    not_tuples[static_cast<size_t>(t.soft_whole)] = 1;
  }
  return false;
}

bool FastLoop::Impl::load_tuple(const TupleVar& t, const Value& v, State& st) const {
  if (t.cx) {
    // A complex number of the kind compiled for: its parts.
    if (!v.is_array()) return false;
    const Array& a = v.as_array();
    if (a.ndim() != 0 || a.dtype() != DType::complex128) return false;
    if (t.cx != 3 && a.weak() != (t.cx == 1)) return false;
    const std::complex<double> z = a.get_complex(0);
    const Reg::Kind k = a.weak() ? Reg::PyFloat : Reg::NpFloat;
    st.regs[t.items[0]] = Reg::real(k, z.real());
    st.regs[t.items[1]] = Reg::real(k, z.imag());
    return true;
  }
  if (!v.is_tuple() || v.as_list().size() != t.items.size()) return false;
  const List& xs = v.as_list();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].is_scalar() && !xs[i].is_array()) return false;
    try {
      st.regs[t.items[i]] = to_reg(xs[i], st);
    } catch (const Bail&) {
      return false;
    }
  }
  return true;
}

Value FastLoop::Impl::tuple_value(const TupleVar& t, const State& st) const {
  if (t.cx) {
    auto part = [&](int r) {
      const Reg& x = st.regs[r];
      return x.float_payload() ? x.f : x.int_payload() ? static_cast<double>(x.i) : 0.0;
    };
    const std::complex<double> z(part(t.items[0]), part(t.items[1]));
    // Python's complex, or (its parts NumPy's floats) NumPy's complex128.
    if (t.cx == 1 || (t.cx == 3 && !st.regs[t.items[0]].strong()))
      return Value(Array::weak_complex(z));
    Array a(DType::complex128, Shape{});
    a.data<std::complex<double>>()[0] = z;
    return Value(std::move(a));
  }
  List xs;
  xs.reserve(t.items.size());
  for (int r : t.items) xs.push_back(to_value(st.regs[r], st));
  return Value::tuple(std::move(xs));
}

}  // namespace tessera
