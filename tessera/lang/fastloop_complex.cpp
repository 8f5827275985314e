// Complex numbers in the scalar loop fast path (docs/runtime.md, "Complex
// numbers in loops").
//
// A complex value in a loop — `z = complex(x, y)`, `z = z * z + c`, an
// element of a complex128 array, a complex variable of the loop's frames — is
// kept as two float registers, its real and imaginary parts: after
// lower_tuples, lower_complex finds the registers that hold complex numbers
// and rewrites every operation on them into float operations on the parts,
// with CPython's formulas for Python's complex (complexobject.c: _Py_c_prod,
// _Py_c_quot, c_powu for a small integer power, _Py_c_abs's hypot) and
// NumPy's for np.complex128 (its division's), so that the interpreter and
// the native code compute the same bits as Python and NumPy and need no
// complex kind of their own. What either raises or warns of (a division by
// zero, an overflow of `**` or abs()) is a Bail: the general evaluation redoes
// the turn and raises it. Whether a value is Python's complex or NumPy's is
// known when the loop is compiled (from the operations, and from the kinds
// of the frame's variables then, checked again at each run's start); a
// complex value used in any other way (given to another operation, stored
// into an array, compared by <) keeps the loop on the general path.
#include <array>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

namespace {

using CNode = FastLoop::Impl::FNode;

// The registers of complex parts and of temporaries: depths no frame,
// inlined call or tuple uses.
constexpr int kCxPartDepth = -(1 << 26);
constexpr int kCxTempDepth = -(1 << 27);

// What an expression holds, as far as the lowering needs to know: not yet
// known (unset), a number or value of unknown kind (unk), a real number of
// Python's (rpy) or NumPy's (rnp) kind, a Python complex (cpy) or a NumPy
// complex128 (cnp), or either by turns (cdyn: `z = 0j`, then `z = z * z + c[k]`
// of a complex128 array; its parts are Python's or NumPy's floats by turns,
// which the interpreter and the native code track as for any float); bad: a
// register holding both a complex and something else.
enum class T : uint8_t { unset, unk, rpy, rnp, cpy, cnp, cdyn, bad };

bool is_cx(T t) { return t == T::cpy || t == T::cnp || t == T::cdyn; }
bool is_real(T t) { return t == T::rpy || t == T::rnp; }

T join(T a, T b) {
  if (a == T::unset) return b;
  if (b == T::unset || a == b) return a;
  if (is_cx(a) && is_cx(b)) return T::cdyn;
  if (a == T::bad || b == T::bad || is_cx(a) || is_cx(b)) return T::bad;
  return T::unk;  // rpy and rnp by turns, or unknown
}

CNode var(int r) { return FastLoop::Impl::var_node(r); }

CNode fconst(double f) {
  CNode c;
  c.op = Op::Const;
  c.constant = Reg::real(Reg::PyFloat, f);
  return c;
}

CNode assign(int r, CNode value) { return FastLoop::Impl::assign_node(r, std::move(value)); }

CNode block(std::vector<CNode> kids) {
  CNode b;
  b.op = Op::Block;
  b.kids = std::move(kids);
  return b;
}

CNode if_(CNode cond, CNode then, CNode otherwise) {
  CNode n;
  n.op = Op::If;
  n.kids.push_back(std::move(cond));
  n.kids.push_back(std::move(then));
  if (otherwise.op != Op::Const || otherwise.constant.k != Reg::Undef)
    n.kids.push_back(std::move(otherwise));
  return n;
}

CNode bail() {
  CNode b;
  b.op = Op::Bail;
  return b;
}

CNode logic(bool is_and, CNode a, CNode b) {
  CNode n;
  n.op = Op::Logic;
  n.is_and = is_and;
  n.kids.push_back(std::move(a));
  n.kids.push_back(std::move(b));
  return n;
}

class ComplexLowering {
 public:
  explicit ComplexLowering(FastLoop::Impl& im) : im_(im) {}

  // True with the tree rewritten (or nothing complex in it), false with `why`.
  bool run(CNode& cond, CNode& body) {
    const size_t n = im_.vars.size();
    t_.assign(n, T::unset);
    arr_.assign(n, DType::float64);
    is_arr_.assign(n, 0);
    arr_nd_.assign(n, 0);
    seed();
    assigned_.assign(n, 0);
    mark_assigned(cond);
    mark_assigned(body);
    if (!any_complex_source(cond) && !any_complex_source(body) && !frame_complex_) return true;
    if (!specs()) {
      why = "a primitive of complex arithmetic is missing";
      return false;
    }
    for (size_t round = 0; round < 4 * n + 8; ++round) {
      bool changed = false;
      infer(cond, changed);
      infer(body, changed);
      if (!changed) break;
    }
    for (T& t : t_)
      if (t == T::unset) t = T::unk;
    bool any = false;
    for (size_t r = 0; r < n; ++r) {
      if (t_[r] == T::bad) {
        why = "'" + name(static_cast<int>(r)) +
              "' holds a complex number and another value, Python's complex and NumPy's by "
              "turns, or a complex number computed with a number of a kind not known here (a "
              "float32, a narrow int, an object)";
        return false;
      }
      any = any || is_cx(t_[r]);
    }
    if (!any && !has_cx_expr(cond) && !has_cx_expr(body)) return true;
    // The kinds of the frame's variables relied on: checked at each run.
    for (size_t r = 0; r < n; ++r) {
      if (seeded_[r] == 0) continue;
      guards.push_back({static_cast<int>(r), seeded_[r], is_arr_[r] ? arr_[r] : DType::float64});
    }
    sink_ = static_cast<int>(im_.counted.size());
    im_.counted.push_back(nullptr);  // the generated nodes' counter (counted nowhere)
    parts_.assign(n, {-1, -1});
    return lower(cond, true) && lower(body, !im_.value_unused);
  }

  std::string why;
  std::vector<T> t_;
  std::vector<std::array<int, 2>> parts_;
  // The frame's variables whose kind the lowering relied on, checked again
  // when a run starts (FastLoop::Impl::CxGuard).
  std::vector<FastLoop::Impl::CxGuard> guards;

 private:
  // The kinds of the loop's frames' variables now.
  void seed() {
    seeded_.assign(im_.vars.size(), 0);
    if (!im_.frame) return;
    for (size_t r = 0; r < im_.vars.size(); ++r) {
      const FastLoop::Impl::VarRef& v = im_.vars[r];
      if (v.depth < 0 || v.tuple_item) continue;
      const Frame* f = im_.frame;
      for (int k = 0; k < v.depth && f; ++k) f = f->parent();
      Value x;
      if (!f || !f->read_now(v.slot, x)) continue;
      using G = FastLoop::Impl::CxGuard;
      if (x.is_bool() || x.is_int() || x.is_float()) {
        t_[r] = T::rpy;
        seeded_[r] = G::python_number;
      } else if (x.is_array()) {
        const Array& a = x.as_array();
        if (a.ndim() == 0) {
          if (a.dtype() == DType::complex128) {
            t_[r] = a.weak() ? T::cpy : T::cnp;
            frame_complex_ = true;
          } else if (!a.weak() && (a.dtype() == DType::float64 || a.dtype() == DType::int64 ||
                                   a.dtype() == DType::bool_)) {
            t_[r] = T::rnp;
            seeded_[r] = G::numpy_scalar;
          }
        } else if (a.ndim() <= kMaxDims) {
          is_arr_[r] = 1;
          arr_[r] = a.dtype();
          arr_nd_[r] = static_cast<int>(a.ndim());
          seeded_[r] = G::array;
          if (a.dtype() == DType::complex128) frame_complex_ = true;
        }
      }
    }
  }

  bool specs() {
    add_ = find_primitive("add");
    sub_ = find_primitive("subtract");
    mul_ = find_primitive("multiply");
    div_ = find_primitive("divide");
    hypot_ = find_primitive("hypot");
    eq_ = find_primitive("equal");
    ne_ = find_primitive("not_equal");
    lt_ = find_primitive("less");
    ge_ = find_primitive("greater_equal");
    item_ = find_primitive("item");
    return add_ && sub_ && mul_ && div_ && hypot_ && eq_ && ne_ && lt_ && ge_ && item_;
  }

  // A complex number made here: complex(), an element of a complex array.
  bool any_complex_source(const CNode& n) const {
    if (n.op == Op::Call && n.spec && n.spec->name == "complex") return true;
    for (const CNode& k : n.kids)
      if (any_complex_source(k)) return true;
    return false;
  }

  bool has_cx_expr(const CNode& n) const {
    if (is_cx(kind(n))) return true;
    for (const CNode& k : n.kids)
      if (has_cx_expr(k)) return true;
    return false;
  }

  std::string name(int r) const {
    if (r >= 0 && static_cast<size_t>(r) < im_.names.size() && !im_.names[r].empty())
      return im_.names[r];
    return "a variable";
  }

  // An element read x[i, j] of an array variable of the frame, by as many
  // indices as it has dimensions.
  bool element_of_frame_array(const CNode& e) const {
    if (e.op != Op::GetItem || e.kids.empty() || e.kids[0].op != Op::Var) return false;
    const int r = e.kids[0].reg;
    return r >= 0 && static_cast<size_t>(r) < is_arr_.size() && is_arr_[r] &&
           arr_nd_[r] == static_cast<int>(e.kids.size()) - 1 && !assigned_in_loop(r);
  }

  bool assigned_in_loop(int r) const {
    return r < static_cast<int>(assigned_.size()) && assigned_[r];
  }

  T kind(const CNode& e) const {
    switch (e.op) {
      case Op::Const:
        return e.constant.k == Reg::PyBool || e.constant.k == Reg::PyInt ||
                       e.constant.k == Reg::PyFloat
                   ? T::rpy
                   : T::unk;
      case Op::Var:
        return e.reg >= 0 && static_cast<size_t>(e.reg) < t_.size() ? t_[e.reg] : T::unk;
      case Op::Assign:
        return kind(e.kids[0]);
      case Op::Block:
        return e.kids.empty() ? T::unk : kind(e.kids.back());
      case Op::If:
        return e.kids.size() == 3 ? join(kind(e.kids[1]), kind(e.kids[2])) : T::unk;
      case Op::GetItem: {
        if (!element_of_frame_array(e)) return T::unk;
        const DType dt = arr_[e.kids[0].reg];
        if (dt == DType::complex128) return T::cnp;
        if (dt == DType::float64 || dt == DType::int64 || dt == DType::bool_) return T::rnp;
        return T::unk;
      }
      case Op::AsType:
        return is_cx(kind(e.kids[0]))       ? T::bad
               : e.numpy_scalar && (e.cast_to == DType::float64 || e.cast_to == DType::int64 ||
                                    e.cast_to == DType::bool_)
                   ? T::rnp
                   : T::unk;
      case Op::Binary:
        return binary_kind(e);
      case Op::Call: {
        if (!e.spec) return T::unk;
        const std::string& m = e.spec->name;
        if (m == "complex" && (e.kids.size() == 1 || e.kids.size() == 2)) {
          // complex(x, y) of real numbers (of any kind: converted by float()).
          for (const CNode& k : e.kids) {
            const T a = kind(k);
            if (a == T::unset) return T::unset;
            if (is_cx(a) || a == T::bad) return T::bad;
          }
          return T::cpy;
        }
        if (e.kids.size() != 1) return T::unk;
        const T a = kind(e.kids[0]);
        if (!is_cx(a)) return m == "item" && a != T::bad ? T::rpy : T::unk;
        if (m == "abs" || m == "absolute" || m == "real" || m == "imag")
          return a == T::cpy ? T::rpy : a == T::cnp ? T::rnp : T::unk;
        if (m == "conj" || m == "conjugate" || m == "negative" || m == "positive") return a;
        return T::bad;
      }
      default:
        return T::unk;
    }
  }

  T binary_kind(const CNode& e) const {
    const T a = kind(e.kids[0]), b = kind(e.kids[1]);
    const bool cmp = e.fast >= Fast::lt && e.fast <= Fast::ne;
    if (!is_cx(a) && !is_cx(b)) {
      if (a == T::unset || b == T::unset) return T::unset;
      if (cmp || e.fast == Fast::add || e.fast == Fast::sub || e.fast == Fast::mul ||
          e.fast == Fast::div || e.fast == Fast::floordiv || e.fast == Fast::mod) {
        if (a == T::rpy && b == T::rpy) return T::rpy;
        if (is_real(a) && is_real(b)) return T::rnp;
      }
      return T::unk;
    }
    if (a == T::unset || b == T::unset) return T::unset;
    // A complex operand: the other a complex or a real of known kind.
    if (!(is_cx(a) || is_real(a)) || !(is_cx(b) || is_real(b))) return T::bad;
    const bool np = a == T::cnp || b == T::cnp || a == T::rnp || b == T::rnp;
    const bool dyn = a == T::cdyn || b == T::cdyn;
    if (e.fast == Fast::eq || e.fast == Fast::ne) return np ? T::rnp : dyn ? T::unk : T::rpy;
    if (e.fast == Fast::add || e.fast == Fast::sub || e.fast == Fast::mul)
      return np ? T::cnp : dyn ? T::cdyn : T::cpy;
    // Python's and NumPy's quotients differ: a kind known here only.
    if (e.fast == Fast::div) return np ? T::cnp : dyn ? T::bad : T::cpy;
    if (e.fast == Fast::none && e.spec && (e.spec->name == "power" || e.spec->name == "ipow") &&
        a == T::cpy && !np && small_int_power(e.kids[1]))
      return T::cpy;
    return T::bad;
  }

  // z ** n for an integral constant n, |n| <= 100: CPython's c_powi.
  static bool small_int_power(const CNode& x) {
    if (x.op != Op::Const) return false;
    if (x.constant.k == Reg::PyInt) return x.constant.i >= -100 && x.constant.i <= 100;
    if (x.constant.k == Reg::PyFloat)
      return x.constant.f >= -100.0 && x.constant.f <= 100.0 &&
             x.constant.f == static_cast<double>(static_cast<int64_t>(x.constant.f));
    return false;
  }

  static int64_t power_of(const CNode& x) {
    return x.constant.k == Reg::PyInt ? x.constant.i : static_cast<int64_t>(x.constant.f);
  }

  void mark_assigned(const CNode& n) {
    for (const CNode& k : n.kids) mark_assigned(k);
    if ((n.op == Op::Assign || n.op == Op::Append) && n.reg >= 0 &&
        static_cast<size_t>(n.reg) < assigned_.size())
      assigned_[n.reg] = 1;
  }

  void infer(const CNode& n, bool& changed) {
    for (const CNode& k : n.kids) infer(k, changed);
    if (n.op != Op::Assign || n.reg < 0 || static_cast<size_t>(n.reg) >= t_.size()) return;
    const T v = kind(n.kids[0]);
    if (v == T::unset) return;
    const T j = join(t_[n.reg], v);
    if (j != t_[n.reg]) {
      t_[n.reg] = j;
      changed = true;
    }
  }

  // ---- rewriting

  int temp() {
    const int x = im_.reg(kCxTempDepth - temps_++, 0);
    im_.vars[x].tuple_item = true;
    return x;
  }

  const std::array<int, 2>& parts_of(int r) {
    std::array<int, 2>& p = parts_[r];
    if (p[0] < 0) {
      const std::string base = name(r);
      for (int i = 0; i < 2; ++i) {
        p[i] = im_.reg(kCxPartDepth - r, static_cast<size_t>(i));
        im_.vars[p[i]].tuple_item = true;
        im_.name_reg(p[i], base + (i == 0 ? ".real" : ".imag"));
      }
    }
    return p;
  }

  CNode bin(const PrimitiveSpec* spec, Fast f, CNode a, CNode b, int counter = -1) {
    CNode n;
    n.op = Op::Binary;
    n.spec = spec;
    n.fast = f;
    n.counter = counter >= 0 ? counter : sink_;
    n.slot = n.counter;
    n.kids.push_back(std::move(a));
    n.kids.push_back(std::move(b));
    return n;
  }
  CNode add(CNode a, CNode b) { return bin(add_, Fast::add, std::move(a), std::move(b)); }
  CNode sub(CNode a, CNode b) { return bin(sub_, Fast::sub, std::move(a), std::move(b)); }
  CNode mul(CNode a, CNode b) { return bin(mul_, Fast::mul, std::move(a), std::move(b)); }
  CNode div(CNode a, CNode b) { return bin(div_, Fast::div, std::move(a), std::move(b)); }
  CNode cmp(const PrimitiveSpec* s, Fast f, CNode a, CNode b) {
    return bin(s, f, std::move(a), std::move(b));
  }
  // -x exactly (as Python's float negation), without a Call.
  CNode neg(CNode a) { return mul(std::move(a), fconst(-1.0)); }
  // |x| as CPython computes it in _Py_c_quot (x < 0 ? -x : x).
  CNode fabs(const CNode& x) {
    return if_(cmp(lt_, Fast::lt, x, fconst(0.0)), neg(x), x);
  }
  CNode np_float(CNode a) {  // np.float64(a)
    CNode n;
    n.op = Op::AsType;
    n.cast_to = DType::float64;
    n.numpy_scalar = true;
    n.counter = sink_;
    n.slot = sink_;
    n.kids.push_back(std::move(a));
    return n;
  }
  CNode py_float(CNode a, T k) {  // float(a) of a real number
    if (a.op == Op::Const && a.constant.k == Reg::PyFloat) return a;
    if (k != T::rpy) {
      CNode it;
      it.op = Op::Call;
      it.spec = item_;
      it.slot = sink_;
      it.counter = -1;
      it.kids.push_back(std::move(a));
      a = std::move(it);
    }
    CNode n;
    n.op = Op::AsType;
    n.cast_to = DType::float64;
    n.counter = sink_;
    n.slot = sink_;
    n.kids.push_back(std::move(a));
    return n;
  }

  // `e` as a constant or a register read: assigned to a temporary first
  // when it is anything else.
  CNode held(CNode e, std::vector<CNode>& pre) {
    if (e.op == Op::Const || e.op == Op::Var) return e;
    const int t = temp();
    pre.push_back(assign(t, std::move(e)));
    return var(t);
  }

  // `n` rewritten where its value is real or unused (`value`: it is used).
  bool lower(CNode& n, bool value) {
    const T k = kind(n);
    if (is_cx(k)) {
      if (n.op == Op::Assign && !value) return lower_assign(n);
      if (value) {
        why = "a complex number is used whole (given to an operation, stored or compared by "
              "order)";
        return false;
      }
      // A complex value computed and dropped: its parts computed and dropped.
      std::vector<CNode> pre;
      CNode re, im;
      if (!lower_cx(n, pre, re, im)) return false;
      n = block(std::move(pre));
      return true;
    }
    if (k == T::bad) {
      why = "a complex number is given to an operation the fast path does not compute on it";
      return false;
    }
    switch (n.op) {
      case Op::Block:
        for (size_t i = 0; i < n.kids.size(); ++i)
          if (!lower(n.kids[i], i + 1 == n.kids.size() && value)) return false;
        return true;
      case Op::If:
        if (!lower(n.kids[0], true)) return false;
        for (size_t i = 1; i < n.kids.size(); ++i)
          if (!lower(n.kids[i], value)) return false;
        return true;
      case Op::While:
        return lower(n.kids[0], true) && lower(n.kids[1], !n.value_unused);
      case Op::Binary:
        if (is_cx(kind(n.kids[0])) || is_cx(kind(n.kids[1]))) return lower_compare(n);
        break;
      case Op::Call:
        if (n.kids.size() == 1 && is_cx(kind(n.kids[0]))) return lower_part(n);
        break;
      default:
        break;
    }
    for (CNode& c : n.kids) {
      if (is_cx(kind(c))) {
        why = "a complex number is given to an operation the fast path does not compute on it";
        return false;
      }
      if (!lower(c, true)) return false;
    }
    return true;
  }

  bool lower_assign(CNode& n) {
    const int r = n.reg;
    std::vector<CNode> pre;
    CNode re, im;
    if (!lower_cx(n.kids[0], pre, re, im)) return false;
    const std::array<int, 2> p = parts_of(r);
    pre.push_back(assign(p[0], std::move(re)));
    pre.push_back(assign(p[1], std::move(im)));
    n = block(std::move(pre));
    return true;
  }

  // abs(z), z.real, z.imag of a complex z (real results).
  bool lower_part(CNode& n) {
    const std::string m = n.spec->name;
    std::vector<CNode> pre;
    CNode re, im;
    if (!lower_cx(n.kids[0], pre, re, im)) return false;
    if (m == "real" || m == "imag") {
      pre.push_back(m == "real" ? std::move(re) : std::move(im));
      n = block(std::move(pre));
      return true;
    }
    // abs: hypot (CPython's _Py_c_abs and NumPy's npy_cabs both are, for
    // infinities and NaN too); an overflow of finite parts is Python's
    // OverflowError and NumPy's warning: the general path's.
    const int h = temp();
    CNode hy = bin(hypot_, Fast::none, re, im, n.slot);
    pre.push_back(assign(h, std::move(hy)));
    const double inf = std::numeric_limits<double>::infinity();
    CNode finite = logic(true, cmp(lt_, Fast::lt, fabs(re), fconst(inf)),
                         cmp(lt_, Fast::lt, fabs(im), fconst(inf)));
    pre.push_back(if_(logic(true, cmp(eq_, Fast::eq, var(h), fconst(inf)), std::move(finite)),
                      bail(), CNode{}));
    pre.push_back(var(h));
    n = block(std::move(pre));
    return true;
  }

  // z == w, z != w with a complex operand: both parts equal.
  bool lower_compare(CNode& n) {
    if (n.fast != Fast::eq && n.fast != Fast::ne) {
      why = "a complex number compared by order";
      return false;
    }
    std::vector<CNode> pre;
    CNode ar, ai, br, bi;
    if (!operand(n.kids[0], pre, ar, ai) || !operand(n.kids[1], pre, br, bi)) return false;
    const bool eq = n.fast == Fast::eq;
    const int counter = n.counter;
    CNode r = eq ? logic(true, bin(eq_, Fast::eq, ar, br, counter), bin(eq_, Fast::eq, ai, bi))
                 : logic(false, bin(ne_, Fast::ne, ar, br, counter), bin(ne_, Fast::ne, ai, bi));
    pre.push_back(std::move(r));
    n = block(std::move(pre));
    return true;
  }

  // An operand of complex arithmetic as its parts (a real x is x + 0j).
  bool operand(CNode& e, std::vector<CNode>& pre, CNode& re, CNode& im) {
    if (is_cx(kind(e))) return lower_cx(e, pre, re, im);
    if (!lower(e, true)) return false;
    re = held(std::move(e), pre);
    im = fconst(0.0);
    return true;
  }

  // A complex-valued `e`: the statements that compute it (`pre`) and its
  // parts, each a constant or a register read.
  bool lower_cx(CNode& e, std::vector<CNode>& pre, CNode& re, CNode& im) {
    const T k = kind(e);
    switch (e.op) {
      case Op::Var: {
        const std::array<int, 2> p = parts_of(e.reg);
        re = var(p[0]);
        im = var(p[1]);
        return true;
      }
      case Op::Assign: {
        const int r = e.reg;
        if (!lower_assign(e)) return false;
        pre.push_back(std::move(e));
        const std::array<int, 2> p = parts_of(r);
        re = var(p[0]);
        im = var(p[1]);
        return true;
      }
      case Op::Block:
        for (size_t i = 0; i + 1 < e.kids.size(); ++i) {
          if (!lower(e.kids[i], false)) return false;
          pre.push_back(std::move(e.kids[i]));
        }
        return lower_cx(e.kids.back(), pre, re, im);
      case Op::If: {
        if (!lower(e.kids[0], true)) return false;
        const int t0 = temp(), t1 = temp();
        for (size_t b = 1; b < 3; ++b) {
          std::vector<CNode> bp;
          CNode r, i;
          const T bk = kind(e.kids[b]);  // (before the branch is rewritten)
          if (!lower_cx(e.kids[b], bp, r, i)) return false;
          bp.push_back(assign(t0, to_kind(std::move(r), bk, k)));
          bp.push_back(assign(t1, to_kind(std::move(i), bk, k)));
          e.kids[b] = block(std::move(bp));
        }
        e.returned = false;
        pre.push_back(std::move(e));
        re = var(t0);
        im = var(t1);
        return true;
      }
      case Op::GetItem: {
        // The parts of element i of a complex128 array (NumPy's float64s):
        // the indices computed once.
        for (size_t i = 1; i < e.kids.size(); ++i) {
          if (!lower(e.kids[i], true)) return false;
          e.kids[i] = held(std::move(e.kids[i]), pre);
        }
        CNode a = e, b = e;
        a.cpart = 1;
        b.cpart = 2;
        b.counter = sink_;
        b.also_count.clear();
        re = held(std::move(a), pre);
        im = held(std::move(b), pre);
        return true;
      }
      case Op::Call:
        return lower_call(e, pre, re, im);
      case Op::Binary:
        return lower_arith(e, k, pre, re, im);
      default:
        why = "a complex number made by an operation the fast path does not compute";
        return false;
    }
  }

  // A part computed as kind `from` (cpy or cnp) as a part of kind `to`.
  CNode to_kind(CNode part, T from, T to) {
    if (to == T::cnp && from != T::cnp) return np_float(std::move(part));
    return part;
  }

  bool lower_call(CNode& e, std::vector<CNode>& pre, CNode& re, CNode& im) {
    const std::string m = e.spec->name;
    if (m == "complex") {
      // complex(x, y) of real numbers: Python's complex, parts float(x) and
      // float(y) exactly (no arithmetic: -0.0 stays -0.0).
      CNode parts[2] = {fconst(0.0), fconst(0.0)};
      for (size_t i = 0; i < e.kids.size(); ++i) {
        const T a = kind(e.kids[i]);
        if (!lower(e.kids[i], true)) return false;
        parts[i] = held(py_float(std::move(e.kids[i]), a), pre);
      }
      re = std::move(parts[0]);
      im = std::move(parts[1]);
      return true;
    }
    CNode ar, ai;
    if (!lower_cx(e.kids[0], pre, ar, ai)) return false;
    if (m == "conj" || m == "conjugate") {
      re = ar;
      im = held(neg(ai), pre);
    } else if (m == "negative") {
      re = held(neg(ar), pre);
      im = held(neg(ai), pre);
    } else {  // positive
      re = ar;
      im = ai;
    }
    return true;
  }

  bool lower_arith(CNode& e, T k, std::vector<CNode>& pre, CNode& re, CNode& im) {
    const int counter = e.counter;
    if (e.fast == Fast::none) return lower_power(e, pre, re, im);
    const bool np = k == T::cnp;
    CNode ar, ai, br, bi;
    if (!operand(e.kids[0], pre, ar, ai) || !operand(e.kids[1], pre, br, bi)) return false;
    CNode r, i;
    switch (e.fast) {
      case Fast::add:
        // (a + b): a real operand is complex(x, 0.0), as CPython 3.11 and
        // NumPy convert it (0.0 + -0.0 is 0.0).
        r = bin(add_, Fast::add, ar, br, counter);
        i = add(ai, bi);
        break;
      case Fast::sub:
        r = bin(sub_, Fast::sub, ar, br, counter);
        i = sub(ai, bi);
        break;
      case Fast::mul:
        // _Py_c_prod (and NumPy's): no shortcut for a real operand.
        r = bin(sub_, Fast::sub, mul(ar, br), mul(ai, bi), counter);
        i = add(mul(ar, bi), mul(ai, br));
        break;
      case Fast::div:
        return lower_div(np, ar, ai, br, bi, counter, pre, re, im);
      default:
        why = "a complex operation the fast path does not compute";
        return false;
    }
    re = held(np ? np_float(std::move(r)) : std::move(r), pre);
    im = held(np ? np_float(std::move(i)) : std::move(i), pre);
    return true;
  }

  // a / b: CPython's _Py_c_quot for Python's complex, NumPy's division loop
  // for complex128; a zero divisor is the general path's (ZeroDivisionError,
  // or NumPy's inf and warning).
  bool lower_div(bool np, const CNode& ar, const CNode& ai, const CNode& br, const CNode& bi,
                 int counter, std::vector<CNode>& pre, CNode& re, CNode& im) {
    const int abr = temp(), abi = temp(), t0 = temp(), t1 = temp(), ratio = temp(), den = temp();
    pre.push_back(assign(abr, fabs(br)));
    pre.push_back(assign(abi, fabs(bi)));
    auto ge = [&](int x, int y) { return cmp(ge_, Fast::ge, var(x), var(y)); };
    auto is_zero = [&](int x) { return cmp(eq_, Fast::eq, var(x), fconst(0.0)); };
    auto out = [&](CNode x, CNode y) {
      std::vector<CNode> s;
      s.push_back(assign(t0, np ? np_float(std::move(x)) : std::move(x)));
      s.push_back(assign(t1, np ? np_float(std::move(y)) : std::move(y)));
      return s;
    };
    // |b.real| >= |b.imag|: divided by b.real.
    std::vector<CNode> by_real;
    by_real.push_back(if_(np ? logic(true, is_zero(abr), is_zero(abi)) : is_zero(abr), bail(),
                          CNode{}));
    by_real.push_back(assign(ratio, bin(div_, Fast::div, bi, br, counter)));
    std::vector<CNode> by_imag;
    if (!np) {
      by_real.push_back(assign(den, add(br, mul(bi, var(ratio)))));
      for (CNode& s : out(div(add(ar, mul(ai, var(ratio))), var(den)),
                          div(sub(ai, mul(ar, var(ratio))), var(den))))
        by_real.push_back(std::move(s));
      by_imag.push_back(assign(ratio, div(br, bi)));
      by_imag.push_back(assign(den, add(mul(br, var(ratio)), bi)));
      for (CNode& s : out(div(add(mul(ar, var(ratio)), ai), var(den)),
                          div(sub(mul(ai, var(ratio)), ar), var(den))))
        by_imag.push_back(std::move(s));
      // Neither: a NaN in b, (nan, nan).
      const double nan = std::numeric_limits<double>::quiet_NaN();
      CNode nans = block(out(fconst(nan), fconst(nan)));
      pre.push_back(if_(ge(abr, abi), block(std::move(by_real)),
                        if_(ge(abi, abr), block(std::move(by_imag)), std::move(nans))));
    } else {
      // NumPy: the reciprocal of the scaled divisor, then products.
      by_real.push_back(assign(den, div(fconst(1.0), add(br, mul(bi, var(ratio))))));
      for (CNode& s : out(mul(add(ar, mul(ai, var(ratio))), var(den)),
                          mul(sub(ai, mul(ar, var(ratio))), var(den))))
        by_real.push_back(std::move(s));
      by_imag.push_back(assign(ratio, div(br, bi)));
      by_imag.push_back(assign(den, div(fconst(1.0), add(bi, mul(br, var(ratio))))));
      for (CNode& s : out(mul(add(mul(ar, var(ratio)), ai), var(den)),
                          mul(sub(mul(ai, var(ratio)), ar), var(den))))
        by_imag.push_back(std::move(s));
      pre.push_back(if_(ge(abr, abi), block(std::move(by_real)), block(std::move(by_imag))));
    }
    re = var(t0);
    im = var(t1);
    return true;
  }

  // z ** n of a Python complex, n an integral constant with |n| <= 100:
  // CPython's c_powi (c_powu's products, the reciprocal by _Py_c_quot for
  // n < 0); an infinite part is Python's OverflowError (the general path's).
  bool lower_power(CNode& e, std::vector<CNode>& pre, CNode& re, CNode& im) {
    const int64_t n = power_of(e.kids[1]);
    const int counter = e.counter;
    CNode xr, xi;
    if (!lower_cx(e.kids[0], pre, xr, xi)) return false;
    CNode rr = fconst(1.0), ri = fconst(0.0);
    CNode pr = xr, pi = xi;
    const uint64_t m = static_cast<uint64_t>(n < 0 ? -n : n);
    for (uint64_t mask = 1; mask <= m; mask <<= 1) {
      if (m & mask) {
        CNode a = held(sub(mul(rr, pr), mul(ri, pi)), pre);
        CNode b = held(add(mul(rr, pi), mul(ri, pr)), pre);
        rr = std::move(a);
        ri = std::move(b);
      }
      if ((mask << 1) <= m) {
        CNode a = held(sub(mul(pr, pr), mul(pi, pi)), pre);
        CNode b = held(add(mul(pr, pi), mul(pi, pr)), pre);
        pr = std::move(a);
        pi = std::move(b);
      }
    }
    if (n <= 0) {
      // c_powi: 1 / c_powu(x, -n) (n == 0 too: c_quot(1, 1)).
      CNode qr, qi;
      if (!lower_div(false, fconst(1.0), fconst(0.0), rr, ri, counter, pre, qr, qi)) return false;
      rr = std::move(qr);
      ri = std::move(qi);
    }
    const int t0 = temp(), t1 = temp();
    CNode first = bin(mul_, Fast::mul, rr, fconst(1.0), counter);  // counted as the `**`
    pre.push_back(assign(t0, std::move(first)));
    pre.push_back(assign(t1, ri));
    const double inf = std::numeric_limits<double>::infinity();
    pre.push_back(if_(logic(false, cmp(eq_, Fast::eq, fabs(var(t0)), fconst(inf)),
                            cmp(eq_, Fast::eq, fabs(var(t1)), fconst(inf))),
                      bail(), CNode{}));
    re = var(t0);
    im = var(t1);
    return true;
  }

  FastLoop::Impl& im_;
  std::vector<DType> arr_;
  std::vector<char> is_arr_;
  std::vector<int> arr_nd_;
  std::vector<char> assigned_;
  std::vector<uint8_t> seeded_;  // CxGuard::What of the frame's value when compiled, or 0
  bool frame_complex_ = false;
  int temps_ = 0;
  int sink_ = -1;
  const PrimitiveSpec *add_ = nullptr, *sub_ = nullptr, *mul_ = nullptr, *div_ = nullptr,
                      *hypot_ = nullptr, *eq_ = nullptr, *ne_ = nullptr, *lt_ = nullptr,
                      *ge_ = nullptr, *item_ = nullptr;
};

}  // namespace

bool FastLoop::Impl::lower_complex() {
  const size_t regs_before = vars.size();
  FNode c = cond, b = body;
  ComplexLowering t(*this);
  if (!t.run(c, b)) {
    while (vars.size() > regs_before) {
      reg_of.erase({vars.back().depth, vars.back().slot});
      vars.pop_back();
    }
    if (names.size() > vars.size()) names.resize(vars.size());
    if (counted.size() > 0 && counted.back() == nullptr) counted.pop_back();
    // The loop as it was: its complex values objects of the interpreter.
    if (fast_loops_debug())
      std::fprintf(stderr, "[fast loops] %s: complex numbers stay objects: %s\n",
                   where.empty() ? "a loop" : where.c_str(), t.why.c_str());
    return true;
  }
  cond = std::move(c);
  body = std::move(b);
  cx_guards = std::move(t.guards);
  // The complex variables of the loop's frames: read from the frame's value
  // at a run's start and written back as Python's or NumPy's complex.
  for (size_t r = 0; r < t.parts_.size(); ++r) {
    if (t.parts_[r][0] < 0 || vars[r].depth < 0) continue;
    if (frame_tuple_of.size() < vars.size()) frame_tuple_of.resize(vars.size(), -1);
    frame_tuple_of[r] = static_cast<int>(frame_tuples.size());
    frame_tuples.push_back({static_cast<int>(r), {t.parts_[r][0], t.parts_[r][1]},
                            t.t_[r] == T::cpy ? 1 : t.t_[r] == T::cnp ? 2 : 3});
  }
  if (!frame_tuple_of.empty() && frame_tuple_of.size() < vars.size())
    frame_tuple_of.resize(vars.size(), -1);
  return true;
}

}  // namespace tessera
