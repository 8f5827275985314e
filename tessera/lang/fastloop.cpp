// The scalar loop fast path (fastloop.hpp). The loop's nodes are compiled
// once into a small tree of operations on registers, one per variable the
// loop touches. A register holds what the general evaluation would hold
// there, in one of the kinds it knows how to compute with: Python-like
// scalars, NumPy's strong scalars (an element x[i], a 0-d own array of
// float64, int64 or bool) and arrays (which only pass through, or are
// indexed). Every operation does exactly what the general evaluation does
// (the same scalar functions, the same element casts), and anything else
// (an error to report, a value of another kind) rolls the turn back: the
// elements it wrote get their old bytes, the registers their values at the
// start of the turn, and the general evaluation runs the loop from there,
// so errors keep their messages and positions and nothing is done twice.
// This file: the handlers of the operations, the arithmetic, loops and
// logic, the native code's calls, and FastLoop's compile and run; the
// compiler is in fastloop_compile.cpp, registers and the state in
// fastloop_state.cpp, element and item operations in fastloop_items.cpp.
#include "tessera/lang/fastloop.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/lang/fastloop_buffers.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/native_trace.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/random_stream.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"
#include "tessera/runtime/interrupt.hpp"

namespace tessera {

namespace {

// TESSERA_FAST_LOOPS: "0" turns the fast path off, "debug" says on stderr
// which loops stay general and why; read once.
const std::string& fast_loops_setting() {
  static const std::string setting = [] {
    const char* v = std::getenv("TESSERA_FAST_LOOPS");
    return std::string(v ? v : "");
  }();
  return setting;
}

}  // namespace

bool FastLoop::Impl::debug() {
  static const bool on = fast_loops_setting() == "debug";
  return on;
}

bool fast_loops_enabled() {
  static const bool on = fast_loops_setting() != "0";
  return on;
}

bool fast_loops_debug() { return FastLoop::Impl::debug() || native_debug(); }


namespace {

// The inline arithmetic and comparisons of two ints (Python's or NumPy's,
// `strong` when either is NumPy's) and of two floats: what the primitives'
// scalar functions give; what they would report (a Python int's overflow, a
// division by zero) is left to the general path. NumPy's int64 wraps around
// (r holds the wrapped result), as on the general path and in native code.
template <Fast F>
inline Reg int_op(bool strong, int64_t a, int64_t b) {
  const Reg::Kind ik = strong ? Reg::NpInt : Reg::PyInt;
  const Reg::Kind bk = strong ? Reg::NpBool : Reg::PyBool;
  int64_t r = 0;
  if constexpr (F == Fast::add) {
    if (__builtin_add_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::sub) {
    if (__builtin_sub_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::mul) {
    if (__builtin_mul_overflow(a, b, &r) && !strong) throw BAIL;
    return Reg::make(ik, r);
  } else if constexpr (F == Fast::div) {
    if (b == 0) throw BAIL;
    return Reg::real(strong ? Reg::NpFloat : Reg::PyFloat,
                     static_cast<double>(a) / static_cast<double>(b));
  } else if constexpr (F == Fast::lt) {
    return Reg::boolean(bk, a < b);
  } else if constexpr (F == Fast::le) {
    return Reg::boolean(bk, a <= b);
  } else if constexpr (F == Fast::gt) {
    return Reg::boolean(bk, a > b);
  } else if constexpr (F == Fast::ge) {
    return Reg::boolean(bk, a >= b);
  } else if constexpr (F == Fast::eq) {
    return Reg::boolean(bk, a == b);
  } else if constexpr (F == Fast::ne) {
    return Reg::boolean(bk, a != b);
  } else if constexpr (F == Fast::floordiv) {
    // By a positive power of two (k // 2): a shift, the floor for negative
    // k too, without the division (tens of cycles).
    if (b > 0 && (b & (b - 1)) == 0) {
      return Reg::make(ik, a >> __builtin_ctzll(static_cast<uint64_t>(b)));
    }
    // Division by zero and INT64_MIN // -1 are the general path's to
    // report (or, for NumPy's scalars, to wrap).
    if (b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min())) throw BAIL;
    return Reg::make(ik, kernels::int_floor_divide(a, b, "floor_divide"));
  } else {
    static_assert(F == Fast::mod);
    // By a positive power of two: the low bits (in [0, b) for negative k
    // too, as Python's and NumPy's modulo).
    if (b > 0 && (b & (b - 1)) == 0) return Reg::make(ik, a & (b - 1));
    if (b == 0) throw BAIL;
    return Reg::make(ik, kernels::int_mod(a, b, "mod"));
  }
}

template <Fast F>
inline Reg float_op(bool strong, double x, double y) {
  const Reg::Kind fk = strong ? Reg::NpFloat : Reg::PyFloat;
  const Reg::Kind bk = strong ? Reg::NpBool : Reg::PyBool;
  // Python's floats: / // % by zero is the general path's ZeroDivisionError.
  if constexpr (F == Fast::div || F == Fast::floordiv || F == Fast::mod) {
    if (!strong && y == 0.0) throw BAIL;
  }
  if constexpr (F == Fast::add) {
    return Reg::real(fk, x + y);
  } else if constexpr (F == Fast::sub) {
    return Reg::real(fk, x - y);
  } else if constexpr (F == Fast::mul) {
    return Reg::real(fk, x * y);
  } else if constexpr (F == Fast::div) {
    return Reg::real(fk, x / y);
  } else if constexpr (F == Fast::lt) {
    return Reg::boolean(bk, x < y);
  } else if constexpr (F == Fast::le) {
    return Reg::boolean(bk, x <= y);
  } else if constexpr (F == Fast::gt) {
    return Reg::boolean(bk, x > y);
  } else if constexpr (F == Fast::ge) {
    return Reg::boolean(bk, x >= y);
  } else if constexpr (F == Fast::eq) {
    return Reg::boolean(bk, x == y);
  } else if constexpr (F == Fast::ne) {
    return Reg::boolean(bk, x != y);
  } else if constexpr (F == Fast::floordiv) {
    return Reg::real(fk, kernels::float_floor_divide(x, y));
  } else {
    static_assert(F == Fast::mod);
    return Reg::real(fk, kernels::float_mod(x, y));
  }
}

// fn(std::integral_constant<Fast, f>) for the inline operation f.
template <class Fn>
inline auto with_fast(Fast f, Fn&& fn) {
  switch (f) {
    case Fast::add:
      return fn(std::integral_constant<Fast, Fast::add>{});
    case Fast::sub:
      return fn(std::integral_constant<Fast, Fast::sub>{});
    case Fast::mul:
      return fn(std::integral_constant<Fast, Fast::mul>{});
    case Fast::div:
      return fn(std::integral_constant<Fast, Fast::div>{});
    case Fast::lt:
      return fn(std::integral_constant<Fast, Fast::lt>{});
    case Fast::le:
      return fn(std::integral_constant<Fast, Fast::le>{});
    case Fast::gt:
      return fn(std::integral_constant<Fast, Fast::gt>{});
    case Fast::ge:
      return fn(std::integral_constant<Fast, Fast::ge>{});
    case Fast::eq:
      return fn(std::integral_constant<Fast, Fast::eq>{});
    case Fast::ne:
      return fn(std::integral_constant<Fast, Fast::ne>{});
    case Fast::floordiv:
      return fn(std::integral_constant<Fast, Fast::floordiv>{});
    case Fast::mod:
      return fn(std::integral_constant<Fast, Fast::mod>{});
    default:
      return fn(std::integral_constant<Fast, Fast::none>{});
  }
}

}  // namespace

Reg FastLoop::Impl::binary(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  if (Reg r; a.k == Reg::Obj && object_compare(n, a, b, st, r)) return r;
  // Arrays (and NumPy's 0-d bools) go through the primitive itself.
  if (!a.scalar() || !b.scalar() || a.k == Reg::NpBool || b.k == Reg::NpBool) {
    return binary_general(n, a, b, st);
  }
  if (a.narrow() || b.narrow()) return binary_narrow(n, a, b, st);
  const bool strong = a.strong() || b.strong();
  const bool ints =
      (a.k == Reg::PyInt || a.k == Reg::NpInt) && (b.k == Reg::PyInt || b.k == Reg::NpInt);
  const bool floats = !ints && a.k != Reg::PyBool && b.k != Reg::PyBool;
  const Reg::Kind fk = strong ? Reg::NpFloat : Reg::PyFloat;
  const Reg::Kind ik = strong ? Reg::NpInt : Reg::PyInt;
  if (ints && n.fast != Fast::none) {
    return with_fast(n.fast, [&](auto f) -> Reg {
      if constexpr (decltype(f)::value == Fast::none) {
        return Reg();
      } else {
        return int_op<decltype(f)::value>(strong, a.i, b.i);
      }
    });
  }
  if (floats && n.fast != Fast::none) {
    const double x = (a.k == Reg::PyInt || a.k == Reg::NpInt) ? static_cast<double>(a.i) : a.f;
    const double y = (b.k == Reg::PyInt || b.k == Reg::NpInt) ? static_cast<double>(b.i) : b.f;
    return with_fast(n.fast, [&](auto f) -> Reg {
      if constexpr (decltype(f)::value == Fast::none) {
        return Reg();
      } else {
        return float_op<decltype(f)::value>(strong, x, y);
      }
    });
  }
  // Everything else through the primitive's own scalar function (what the
  // general evaluation calls); its errors go the general way.
  Value r;
  try {
    r = n.spec->scalar_binary(*n.spec, py(a), py(b));
  } catch (const ZeroDivisionError&) {
    // 0.0 ** -y with a NumPy float: NumPy's inf (Python's numbers raise;
    // NumPy's ints too, on the general path).
    if (!strong || !(a.float_payload() || b.float_payload()) || n.spec->name != "power")
      throw BAIL;
    const double x = a.float_payload() ? a.f : static_cast<double>(a.i);
    const double y = b.float_payload() ? b.f : static_cast<double>(b.i);
    return Reg::real(fk, std::pow(x, y));
  } catch (...) {
    throw BAIL;
  }
  if (r.is_float()) return Reg::real(fk, r.as_float());
  if (r.is_int()) return Reg::make(ik, r.as_int());
  if (r.is_bool()) return Reg::boolean(strong ? Reg::NpBool : Reg::PyBool, r.as_bool());
  throw BAIL;
}

Reg FastLoop::Impl::binary_narrow(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  // NumPy 2's promotion (NEP 50): a float32 with a float32, a Python number
  // or an integer scalar of 16 bits or fewer is a float32 (the other cast to
  // float32 first); an integer scalar narrower than int64 (int8 ... uint32)
  // with a Python int is of its own kind, with another the kind
  // np.promote_types gives (wrapped around; a Python int out of the kind's
  // range is the general path's OverflowError); with a NumPy scalar of
  // another kind (float64, int64, int32 with float32) or with a Python
  // float, both are as wide as float64/int64 are. The general evaluation
  // warns of no overflow either.
  auto widen = [](Reg r) {
    if (r.k == Reg::NpF32) r.k = Reg::NpFloat;
    if (narrow_int_kind(r.k)) r.k = Reg::NpInt;
    return r;
  };
  auto f32_operand = [](const Reg& r, float& out) {
    if (r.k == Reg::NpF32) return out = static_cast<float>(r.f), true;
    if (r.k == Reg::PyFloat) {
      out = static_cast<float>(r.f);
      return std::isfinite(out) || !std::isfinite(r.f);  // an overflow: the general path's
    }
    if (r.k == Reg::PyInt && r.i >= -(int64_t{1} << 24) && r.i <= (int64_t{1} << 24))
      return out = static_cast<float>(r.i), true;
    if (narrow_int_kind(r.k) && narrow_int_bits(r.k) <= 16)
      return out = static_cast<float>(r.i), true;
    return false;
  };
  if (a.k == Reg::NpF32 || b.k == Reg::NpF32) {
    float x, y;
    if (n.fast != Fast::none && f32_operand(a, x) && f32_operand(b, y)) {
      const double dx = x, dy = y;
      // A float32 operation is the double one rounded to float32 (exactly
      // so for + - * /: double has more than 2 * 24 + 2 bits).
      auto f32 = [](double r) { return Reg::real(Reg::NpF32, static_cast<float>(r)); };
      switch (n.fast) {
        case Fast::add: return f32(dx + dy);
        case Fast::sub: return f32(dx - dy);
        case Fast::mul: return f32(dx * dy);
        case Fast::div: return f32(dx / dy);
        case Fast::lt: return Reg::boolean(Reg::NpBool, x < y);
        case Fast::le: return Reg::boolean(Reg::NpBool, x <= y);
        case Fast::gt: return Reg::boolean(Reg::NpBool, x > y);
        case Fast::ge: return Reg::boolean(Reg::NpBool, x >= y);
        case Fast::eq: return Reg::boolean(Reg::NpBool, x == y);
        case Fast::ne: return Reg::boolean(Reg::NpBool, x != y);
        default: return binary_general(n, a, b, st);
      }
    }
  } else if ((narrow_int_kind(a.k) || a.k == Reg::PyInt) &&
             (narrow_int_kind(b.k) || b.k == Reg::PyInt)) {
    const Reg::Kind k = !narrow_int_kind(a.k)   ? b.k
                        : !narrow_int_kind(b.k) ? a.k
                                                : narrow_int_promote(a.k, b.k);
    // A Python int the kind cannot hold: NumPy's OverflowError (general).
    if (k != Reg::NpInt && (a.k != Reg::PyInt || narrow_int_fits(k, a.i)) &&
        (b.k != Reg::PyInt || narrow_int_fits(k, b.i))) {
      const int64_t x = a.i, y = b.i;
      Reg r;
      if (narrow_int_op(n, k, x, y, r)) return r;
      return binary_general(n, a, b, st);
    }
  }
  if (n.fast == Fast::none) return binary_general(n, a, b, st);
  // The wide cases: as float64 / int64 NumPy scalars.
  const bool wide_ok = [&] {
    auto np_wide = [](Reg::Kind k) {
      return k == Reg::NpFloat || k == Reg::NpInt || k == Reg::NpF32 || narrow_int_kind(k);
    };
    if (np_wide(a.k) && np_wide(b.k)) return true;
    // an integer scalar with a Python float
    return (narrow_int_kind(a.k) && b.k == Reg::PyFloat) ||
           (narrow_int_kind(b.k) && a.k == Reg::PyFloat);
  }();
  if (!wide_ok) return binary_general(n, a, b, st);
  return binary(n, widen(a), widen(b), st);
}

bool FastLoop::Impl::narrow_int_op(const FNode& n, Reg::Kind k, int64_t x, int64_t y, Reg& out) {
  auto wrap = [&](int64_t r) { return Reg::make(k, narrow_int_wrap(k, r)); };
  switch (n.fast) {
    case Fast::add: return out = wrap(x + y), true;
    case Fast::sub: return out = wrap(x - y), true;
    case Fast::mul:
      return out = wrap(static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y))),
             true;
    case Fast::div:
      if (y == 0) return false;  // NumPy's inf or nan and its warning
      return out = Reg::real(Reg::NpFloat, static_cast<double>(x) / static_cast<double>(y)), true;
    case Fast::lt: return out = Reg::boolean(Reg::NpBool, x < y), true;
    case Fast::le: return out = Reg::boolean(Reg::NpBool, x <= y), true;
    case Fast::gt: return out = Reg::boolean(Reg::NpBool, x > y), true;
    case Fast::ge: return out = Reg::boolean(Reg::NpBool, x >= y), true;
    case Fast::eq: return out = Reg::boolean(Reg::NpBool, x == y), true;
    case Fast::ne: return out = Reg::boolean(Reg::NpBool, x != y), true;
    case Fast::floordiv:
    case Fast::mod:
      // By zero (tessera's ZeroDivisionError, docs/python.md) and the most
      // negative value // -1 (a wrap NumPy warns of): the general path's.
      if (y == 0 || (y == -1 && narrow_int_wrap(k, -x) != -x)) return false;
      return out = wrap(n.fast == Fast::floordiv ? kernels::int_floor_divide(x, y, "floor_divide")
                                                  : kernels::int_mod(x, y, "mod")),
             true;
    default:
      return false;  // & | ^ << >> are calls of their primitives (native code computes them)
  }
}

Reg FastLoop::Impl::binary_general(const FNode& n, const Reg& a, const Reg& b, State& st) const {
  if (a.k == Reg::Undef || b.k == Reg::Undef || a.k == Reg::Nil || b.k == Reg::Nil) throw BAIL;
  std::vector<Value> vals;
  // Room for the parameters after the two (bind_operands fills in defaults).
  vals.reserve(std::max<size_t>(2, n.spec->params.size()));
  // Both operands one array (`x + x`): copies, neither given up.
  const bool same = a.k == Reg::Arr && b.k == Reg::Arr && a.a == b.a;
  vals.push_back(same ? to_value(a, st) : give(n, 0, a, st));
  vals.push_back(same ? to_value(b, st) : give(n, 1, b, st));
  Reg r = call_values(n, vals, st);
  --st.counts[n.counter];  // compute() counted it; eval adds one for every binary
  return r;
}

namespace {

using FNode = FastLoop::Impl::FNode;
using State = FastLoop::Impl::State;
using Handler = FastLoop::Impl::Handler;

// An operand's shape, known when the loop is compiled: a variable's register
// or a constant is read in place, anything else evaluated.
enum OperandShape { kVar, kConst, kExpr };

OperandShape shape_of(const FNode& k) {
  return k.op == Op::Var                                      ? kVar
         : k.op == Op::Const && k.constant.k != Reg::Obj ? kConst
                                                           : kExpr;
}

template <int S>
inline const Reg& fetch(const FastLoop::Impl& im, const FNode& k, State& st, Reg& tmp) {
  if constexpr (S == kVar) {
    const Reg& r = st.regs[k.reg];
    if (r.k == Reg::Undef) throw BAIL;
    return r;
  } else if constexpr (S == kConst) {
    return k.constant;
  } else {
    tmp = im.eval(k, st);
    return tmp;
  }
}

inline bool truth(const Reg& r, const State& st) {
  if (r.k == Reg::PyBool) return r.b;
  if (r.k == Reg::Obj) return FastLoop::Impl::object_truthy(r, st);  // `if word:`
  return FastLoop::Impl::truthy(r);
}

Reg h_const(const FastLoop::Impl&, const FNode& n, State&) { return n.constant; }

// A constant that is not a number: placed in the state's objects once per run.
Reg h_const_object(const FastLoop::Impl&, const FNode& n, State& st) {
  for (const auto& [node, index] : st.constant_objects) {
    if (node == &n) {
      Reg r;
      r.k = Reg::Obj;
      r.i = 0;
      r.a = index;
      return r;
    }
  }
  Reg r = FastLoop::Impl::to_reg(*n.const_arg, st);
  st.constant_objects.emplace_back(&n, r.a);
  return r;
}

Reg h_var(const FastLoop::Impl&, const FNode& n, State& st) {
  const Reg& r = st.regs[n.reg];
  if (r.k == Reg::Undef) throw BAIL;
  return r;
}

template <int S>
Reg h_assign(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg tmp;
  const Reg v = fetch<S>(im, n.kids[0], st, tmp);
  if (v.k == Reg::Undef) throw BAIL;
  st.regs[n.reg] = v;
  st.assigned[n.reg] = 1;
  return v;
}

Reg h_block(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg last;
  last.k = Reg::Nil;
  for (const FNode& k : n.kids) {
    last = im.eval(k, st);
    if (st.flow != State::Flow::normal) return last;
  }
  return last;
}

template <int S>
Reg h_if(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg tc;
  if (truth(fetch<S>(im, n.kids[0], st, tc), st)) return im.eval(n.kids[1], st);
  if (n.kids.size() > 2) return im.eval(n.kids[2], st);
  Reg nil;
  nil.k = Reg::Nil;
  return nil;
}

// The kinds that are numbers and not bools, as a mask of bits 1 << kind.
constexpr unsigned kNumbers =
    (1u << Reg::PyInt) | (1u << Reg::PyFloat) | (1u << Reg::NpInt) | (1u << Reg::NpFloat);

// A binary primitive: two numbers (Python's or NumPy's, not bools) computed
// here for the operations computed inline; any other pair of kinds (and
// any other primitive) by binary().
template <Fast F, int SA, int SB>
Reg h_binary(const FastLoop::Impl& im, const FNode& n, State& st) {
  Reg ta, tb;
  const Reg& a = fetch<SA>(im, n.kids[0], st, ta);
  const Reg& b = fetch<SB>(im, n.kids[1], st, tb);
  Reg r;
  if constexpr (F != Fast::none) {
    if ((a.k == Reg::PyFloat || a.k == Reg::NpFloat) &&
        (b.k == Reg::PyFloat || b.k == Reg::NpFloat)) {
      r = float_op<F>(a.k == Reg::NpFloat || b.k == Reg::NpFloat, a.f, b.f);
    } else if ((a.k == Reg::PyInt || a.k == Reg::NpInt) &&
               (b.k == Reg::PyInt || b.k == Reg::NpInt)) {
      r = int_op<F>(a.k == Reg::NpInt || b.k == Reg::NpInt, a.i, b.i);
    } else if ((kNumbers >> a.k) & (kNumbers >> b.k) & 1) {
      // An int and a float (i * dx, x[i] * nbins): in floats, as binary().
      const double x = a.k == Reg::PyInt || a.k == Reg::NpInt ? static_cast<double>(a.i) : a.f;
      const double y = b.k == Reg::PyInt || b.k == Reg::NpInt ? static_cast<double>(b.i) : b.f;
      r = float_op<F>(a.strong() || b.strong(), x, y);
    } else {
      r = im.binary(n, a, b, st);
    }
  } else {
    r = im.binary(n, a, b, st);
  }
  ++st.counts[n.counter];
  ++st.inline_ops;
  return r;
}

template <Fast F>
Handler binary_handler(OperandShape a, OperandShape b) {
  static constexpr Handler table[3][3] = {
      {&h_binary<F, kVar, kVar>, &h_binary<F, kVar, kConst>, &h_binary<F, kVar, kExpr>},
      {&h_binary<F, kConst, kVar>, &h_binary<F, kConst, kConst>, &h_binary<F, kConst, kExpr>},
      {&h_binary<F, kExpr, kVar>, &h_binary<F, kExpr, kConst>, &h_binary<F, kExpr, kExpr>}};
  return table[a][b];
}

Reg h_while(const FastLoop::Impl& im, const FNode& n, State& st) { return im.loop(n, st); }
Reg h_logic(const FastLoop::Impl& im, const FNode& n, State& st) { return im.logic(n, st); }
Reg h_rest(const FastLoop::Impl& im, const FNode& n, State& st) { return im.rest(n, st); }

}  // namespace

void FastLoop::Impl::link(FNode& n) {
  for (FNode& k : n.kids) link(k);
  // Operands a pure primitive may take over (give()): temporaries, and the
  // variable its value is assigned to (`x = x + y`, `x = np.sqrt(x)`).
  auto takes_over = [](const FNode& c) {
    return c.spec && c.call && pure_primitive(*c.spec) &&
           (c.op == Op::Binary ||
            (c.op == Op::Call && c.shape_items < 0 && c.kids.size() <= kMaxReuseKids));
  };
  if (takes_over(n)) {
    for (size_t i = 0; i < n.kids.size() && i < 8; ++i) {
      if (shape_of(n.kids[i]) == kExpr) n.reuse |= static_cast<uint8_t>(1u << i);
    }
  }
  if (n.op == Op::Assign && takes_over(n.kids[0])) {
    FNode& v = n.kids[0];
    for (size_t i = 0; i < v.kids.size() && i < 8; ++i) {
      if (v.kids[i].op == Op::Var && v.kids[i].reg == n.reg)
        v.reuse |= static_cast<uint8_t>(1u << i);
    }
  }
  switch (n.op) {
    case Op::Const:
      n.fn = n.constant.k == Reg::Obj ? &h_const_object : &h_const;
      break;
    case Op::Var:
      n.fn = &h_var;
      break;
    case Op::Assign: {
      static constexpr Handler by_shape[3] = {&h_assign<kVar>, &h_assign<kConst>, &h_assign<kExpr>};
      n.fn = by_shape[shape_of(n.kids[0])];
      break;
    }
    case Op::Block:
      n.fn = &h_block;
      break;
    case Op::If: {
      static constexpr Handler by_shape[3] = {&h_if<kVar>, &h_if<kConst>, &h_if<kExpr>};
      n.fn = by_shape[shape_of(n.kids[0])];
      break;
    }
    case Op::Binary: {
      const OperandShape a = shape_of(n.kids[0]), b = shape_of(n.kids[1]);
      n.fn = with_fast(n.fast, [&](auto f) { return binary_handler<decltype(f)::value>(a, b); });
      break;
    }
    case Op::While:
      n.fn = &h_while;
      break;
    case Op::Logic:
      n.fn = &h_logic;
      break;
    default:
      n.fn = &h_rest;
      break;
  }
}

// The parts of eval that are not on every turn's path (kept out of it so
// that its frame stays small).
Reg FastLoop::Impl::loop(const FNode& n, State& st) const {
  {
    {
      Reg last;
      last.k = Reg::Nil;
      // The loop's value is kept by the sweeps (of its turns and of loops
      // inside), until it returns or a bail unwinds it.
      struct Root {
        std::vector<const Reg*>& roots;
        ~Root() { roots.pop_back(); }
      } root{st.roots};
      st.roots.push_back(&last);
      for (;;) {
        if (interrupt_requested()) throw BAIL;
        if (!truth(eval(n.kids[0], st), st)) return last;
        Reg v = eval(n.kids[1], st);
        if (st.flow == State::Flow::brk) {
          st.flow = State::Flow::normal;
          return last;
        }
        if (st.flow == State::Flow::cont) {
          st.flow = State::Flow::normal;
        } else if (!n.value_unused) {
          last = v;
        }
        if (n.sweeps) sweep(st);
      }
    }
  }
}

Reg FastLoop::Impl::rest(const FNode& n, State& st) const {
  switch (n.op) {
    case Op::Break:
    case Op::Continue: {
      st.flow = n.op == Op::Break ? State::Flow::brk : State::Flow::cont;
      Reg nil;
      nil.k = Reg::Nil;
      return nil;
    }
    case Op::GetItem: {
      Reg r = getitem(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::SetItem: {
      Reg r = setitem(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::AsType: {
      Reg r = astype(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::Call:
      return call(n, st);
    case Op::NewList:
      return new_list(n, st);
    case Op::NewDict:
      return new_dict(n, st);
    case Op::Append: {
      Reg r = append(n, st);
      ++st.counts[n.counter];
      return r;
    }
    case Op::NativeCall:
      return call_native(n, st);
    case Op::Uniform: {
      // random_uniform's value for element 0 of the draw, low 0 and high 1
      // (creation.cpp, kernels::uniform_fill_range): a 0-d float64 array.
      const kernels::RandomKey key = next_uniform_key();
      ++st.draws;
      auto w = kernels::philox4x32(key, 0);
      ++st.counts[n.counter];
      return Reg::real(Reg::NpFloat, kernels::unit_double(w[0], w[1]));
    }
    default:
      break;
  }
  throw BAIL;
}

Reg FastLoop::Impl::logic(const FNode& n, State& st) const {
  switch (n.op) {
    case Op::Logic: {
      Reg a = eval(n.kids[0], st);
      if (!a.scalar()) throw BAIL;
      const bool ta = truthy(a);
      if (!a.strong()) {
        // Python-like scalars short-circuit and give a bool.
        if (n.is_and && !ta) return Reg::boolean(Reg::PyBool, false);
        if (!n.is_and && ta) return Reg::boolean(Reg::PyBool, true);
      }
      Reg b = eval(n.kids[1], st);
      if (!b.scalar()) throw BAIL;
      const bool tb = truthy(b);
      if (!a.strong() && !b.strong()) return Reg::boolean(Reg::PyBool, tb);
      // A 0-d array on either side: logical_and/or elementwise, a 0-d bool.
      return Reg::boolean(Reg::NpBool, n.is_and ? (ta && tb) : (ta || tb));
    }
    default:
      throw BAIL;
  }
}

FastLoop::FastLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FastLoop::~FastLoop() = default;

std::unique_ptr<FastLoop> FastLoop::compile(const WhileNode& loop, const Frame& frame) {
  auto impl = std::make_unique<Impl>();
  impl->frame = &frame;
  impl->value_unused = loop.value_unused_;
  impl->where = loop.loc().str();
  impl->node = &loop;
  if (!impl->compile(loop.cond_.get(), impl->cond) ||
      !impl->compile(loop.body_.get(), impl->body) || !impl->lower_tuples() ||
      !impl->lower_complex()) {
    return nullptr;
  }
  impl->frame = nullptr;
  const std::vector<bool>& outside = loop.reads_outside();
  for (const Impl::VarRef& v : impl->vars) {
    impl->loop_local.push_back(
        !v.tuple_item &&
        (v.depth < 0 || (v.depth == 0 && v.slot < outside.size() && !outside[v.slot])));
  }
  impl->runs_once = loop.runs_once() && !outside.empty();
  // A function called inline stays the one called: the loop does not assign
  // its variable.
  std::function<bool(const Impl::FNode&)> assigns_called = [&](const Impl::FNode& n) {
    if (n.op == Op::Assign) {
      for (const Impl::Inlined& in : impl->inlined) {
        const Impl::VarRef& v = impl->vars[n.reg];
        if (v.depth == in.depth && v.slot == in.slot) return true;
      }
    }
    for (const auto& k : n.kids)
      if (assigns_called(k)) return true;
    return false;
  };
  if (assigns_called(impl->cond) || assigns_called(impl->body)) {
    if (Impl::debug())
      std::fprintf(stderr, "[fast loops] %s: the loop assigns a function it calls\n",
                   loop.loc().str().c_str());
    return nullptr;
  }
  Impl::link(impl->cond);
  Impl::link(impl->body);
  std::function<bool(const Impl::FNode&)> has_loop = [&](const Impl::FNode& n) {
    if (n.op == Op::While) return true;
    for (const auto& k : n.kids)
      if (has_loop(k)) return true;
    return false;
  };
  impl->nested = has_loop(impl->body);
  impl->parallel = loop.parallel_;
  if (impl->parallel) impl->plan_parallel();
  return std::unique_ptr<FastLoop>(new FastLoop(std::move(impl)));
}

bool FastLoop::run(const FramePtr& frame, Value& result) const {
  LoopRunTrace traced(*impl_);
  const bool finished = run_turns(frame, result, traced);
  if (finished) traced.finished();
  return finished;
}

bool FastLoop::run_turns(const FramePtr& frame, Value& result, LoopRunTrace& traced) const {
  const Impl& im = *impl_;
  if (im.prefer_general.load(std::memory_order_relaxed)) {
    result = Value();
    return false;
  }
  Impl::State st;
  RecycledState recycled(st);
  const size_t n = im.vars.size();
  st.regs.resize(n);
  st.assigned.assign(n, 0);
  st.counts.assign(im.counted.size(), 0);
  result = Value();
  // The functions called inline: still those (else the general evaluation).
  for (const Impl::Inlined& in : im.inlined) {
    const FunctionCode* code = nullptr;
    Frame* env = nullptr;
    if (!frame->up(in.depth)->closure_now(in.slot, code, env) || code != in.code.get() ||
        (in.env_depth >= 0 && env != frame->up(in.env_depth))) {
      if (Impl::debug())
        std::fprintf(stderr, "[fast loops] %s: a function called inline is another one now\n",
                     im.where.c_str());
      return false;
    }
  }
  // The variables as they are now; a pending one (a define still
  // computing) leaves the loop to the general evaluation. The locals of
  // functions called inline start unassigned. (An array made before the
  // loop, 71 MB of a 3000 x 3000 table, counted as the loop's own buffers
  // once: past kMaxNewBytes, it was no register and the loop ran general,
  // 650x slower.)
  struct Loading {
    Impl::State& st;
    explicit Loading(Impl::State& s) : st(s) { st.loading_frame = true; }
    ~Loading() { st.loading_frame = false; }
  };
  std::optional<Loading> loading(std::in_place, st);
  for (size_t r = 0; r < n; ++r) {
    if (im.vars[r].depth < 0) continue;
    const Frame* f = frame->up(im.vars[r].depth);
    Value v;
    if (!f->read_now(im.vars[r].slot, v)) {
      if (!f->defined(im.vars[r].slot))
        continue;  // not assigned yet: Undef until the loop assigns it
      // A define still computing (a deferred statement before the loop):
      // waited for where the caller waits anyway, else the general way.
      Future<Value> pending = f->read(im.vars[r].slot);
      if (!pending.is_ready() && !settle_here(pending)) {
        if (Impl::debug())
          std::fprintf(stderr, "[fast loops] a variable is still computing at the loop's start\n");
        return false;
      }
      if (pending.error()) return false;
      v = pending.get();
    }
    if (!im.frame_tuple_of.empty() && im.frame_tuple_of[r] >= 0) {
      // A tuple variable: its items into their registers.
      if (!im.load_tuple(im.frame_tuples[im.frame_tuple_of[r]], v, st)) {
        if (Impl::debug())
          std::fprintf(stderr, "[fast loops] %s: '%s' is not the tuple the loop was compiled for\n",
                       im.where.c_str(), r < im.names.size() ? im.names[r].c_str() : "?");
        return false;
      }
      continue;
    }
    try {
      st.regs[r] = Impl::to_reg(v, st);
      if (v.is_list() && !v.is_tuple()) {
        st.frame_lists.push_back(v.list_ptr().get());
        st.loaded_objects.resize(n, -1);
        st.loaded_objects[r] = st.regs[r].a;
      }
    } catch (const Bail&) {
      st.regs[r].k = Reg::Undef;  // lists, strings, ...: only if the loop never reads it
    }
  }
  loading.reset();
  // The kinds the complex lowering was compiled for (fastloop_complex.cpp).
  for (const Impl::CxGuard& g : im.cx_guards) {
    const Reg& x = st.regs[static_cast<size_t>(g.reg)];
    if (x.k == Reg::Undef) continue;
    const bool ok =
        g.what == Impl::CxGuard::python_number
            ? x.k == Reg::PyBool || x.k == Reg::PyInt || x.k == Reg::PyFloat
        : g.what == Impl::CxGuard::numpy_scalar
            ? x.k == Reg::NpBool || x.k == Reg::NpInt || x.k == Reg::NpFloat
            : x.k == Reg::Arr && st.arrays[static_cast<size_t>(x.a)].dt == g.dt;
    if (!ok) {
      if (Impl::debug())
        std::fprintf(stderr, "[fast loops] %s: '%s' is not of the kind the loop's complex "
                     "numbers were compiled for\n", im.where.c_str(),
                     static_cast<size_t>(g.reg) < im.names.size() ? im.names[g.reg].c_str() : "?");
      return false;
    }
  }
  Reg last, saved_last;
  last.k = Reg::Nil;
  // Checkpoints every kCheckpointTurns turns (or when many elements were
  // written): a turn that meets anything outside the subset rolls back to
  // the last one, and the general evaluation redoes the turns since (they
  // are pure apart from the element writes undone, so it computes the same).
  constexpr int kCheckpointTurns = 64;
  constexpr size_t kMaxUndo = 1 << 14;
  int since = kCheckpointTurns;
  size_t objects_before = 0;
  auto checkpoint = [&] {
    st.saved = st.regs;
    st.saved_assigned = st.assigned;
    st.saved_counts = st.counts;
    saved_last = last;
    st.undo.clear();
    st.list_undo.clear();
    st.logged_objects.clear();
    st.snapshots.clear();
    st.snapshot_elements = 0;
    st.snapshot_lists.clear();
    st.draws = 0;
    st.stream_at_checkpoint = random_stream_position();
    objects_before = st.objects.size();
    ++st.epoch;  // the element writes before it are not undone any more
    since = 0;
  };
  bool native = native_enabled();
  int64_t turns = 0;
  traced.count_turns(&turns);
  NativeLog undo_log;
  // Native code from the first turn (variables first assigned in it get
  // their kinds there; an interpreted first turn was most of a small loop's
  // call), and when that has no code or its first call bails, once more
  // after one turn on the interpreter (the registers' kinds settled).
  int64_t native_from = 0;
  bool retried = false;
  // A prange loop: its native code in chunks on the workers, tried at the
  // first native call (and once more after one interpreted turn when that
  // was the nest's first turn); otherwise it runs as range.
  int parallel_tries = im.parallel && im.plan ? 2 : 0;
  if (im.parallel && !im.plan) note_serial_prange(im.where, im.serial_why);
  if (im.parallel && !native) note_serial_prange(im.where, "TESSERA_NATIVE=0");
  st.roots.push_back(&last);
  st.roots.push_back(&saved_last);
  for (;;) {
    if (interrupt_requested()) break;  // between turns: nothing to undo
    Impl::sweep(st);
    // Mostly array operations (each through the primitive, with a value
    // conversion more than the general path): the rest of the loop, and its
    // later runs, go the general way (between turns: nothing to undo).
    // So do loops over large arrays at once: there their expressions run
    // fused and their operations may run in parallel (here each operation
    // of `result = result * x + c` was a pass over memory of its own).
    if ((st.general_ops > 64 && st.general_ops * 2 > st.inline_ops) || st.large_results > 0) {
      im.prefer_general.store(true, std::memory_order_relaxed);
      break;
    }
    if (since >= kCheckpointTurns || st.undo.size() > kMaxUndo ||
        st.snapshot_elements > (int64_t{1} << 20) ||
        (native && turns >= native_from && since > 0)) {
      checkpoint();
    }
    // After a first turn (the registers' kinds settled), native code for
    // these kinds, run from this checkpoint.
    if (native && turns >= native_from) {
      const NativeCode* code = im.native_for(st);
      if (!code && turns == 0 && !retried) {
        // Registers of functions called inline get their kinds in a turn
        // (an array parameter), so may variables the loop assigns before it
        // reads them: once more after one turn on the interpreter.
        retried = true;
        native_from = 1;
      } else if (!code) {
        if (parallel_tries > 0) note_serial_prange(im.where, "the loop has no native code");
        native = false;
      } else if (parallel_tries > 0 && code->partial.load() &&
                 !im.native_complete(*code, st, true)) {
        // The chunks of a parallel loop run the whole code (a partial
        // one's return to the call's start is not theirs to take).
        note_serial_prange(im.where, "the loop has no whole native code");
        parallel_tries = 0;
      } else if (parallel_tries > 0) {
        --parallel_tries;
        st.numbers_written_only = false;
        traced.flag(trace::kLoopParallel);
        const Impl::Parallel how = im.run_parallel(*code, st, last);
        if (how == Impl::Parallel::done) {
          im.write_back(frame, st, true);
          result = Impl::to_value(last, st);
          return true;
        }
        if (how == Impl::Parallel::interrupted) break;  // the general path raises at once
        if (turns == 0 && parallel_tries > 0 && !retried) {
          retried = true;
          native_from = 1;
        } else {
          parallel_tries = 0;
        }
        continue;
      } else {
        int64_t undo_count = 0;
        const int32_t status =
            im.run_native(*code, st, last, undo_log, undo_count);
        traced.native_call();
        if (status == kNativeBail || status == kNativeBailCall || status == kNativeNeedFull)
          traced.flag(trace::kLoopRolledBack);
        if (Impl::debug() && status != kNativeCheckpoint)
          std::fprintf(stderr, "[fast loops] %s: native code returned %d after turn %lld\n",
                       im.where.c_str(), status, static_cast<long long>(turns));
        if (status == kNativeDone) {
          im.write_back(frame, st, true);
          result = Impl::to_value(last, st);
          return true;
        }
        if (status == kNativeInterrupt) break;  // the general path raises at once
        if (status == kNativeNeedFull) {
          // A lazily compiled code met what only its other versions do:
          // back to the checkpoint taken before the call (as below), then
          // the same turns again with the whole code, once it is compiled
          // (the interpreter if it cannot be).
          native_undo(undo_log, undo_count);
          im.rollback(st, objects_before);
          last = saved_last;
          if (!im.native_complete(*code, st)) native = false;
          since = kCheckpointTurns;
          continue;
        }
        if (status == kNativeBailCall) {
          // Back to the checkpoint taken before the call: the logged writes
          // (and arrays copied whole) undone, newest first; the interpreter
          // redoes the turns since, meeting what stopped the native code.
          native_undo(undo_log, undo_count);
          im.rollback(st, objects_before);
          last = saved_last;
          if (turns == 0 && !retried) {
            retried = true;
            native_from = 1;
          } else {
            native = false;
          }
          since = kCheckpointTurns;
          continue;
        }
        if (status == kNativeCheckpoint) {  // a checkpoint, then more native turns
          since = kCheckpointTurns;
          continue;
        }
        // Bail: the registers, counters and the loop's value are as at
        // the start of the turn that stopped, its element writes undone
        // here; the interpreter takes a checkpoint there and redoes that
        // turn, meeting what stopped the native code itself (the checkpoint
        // first: a roll-back from that turn must not go back past the
        // turns the native code did).
        native_undo(undo_log, undo_count);
        native = false;
        since = kCheckpointTurns;
        continue;
      }
    }
    ++since;
    ++turns;
    st.numbers_written_only = false;  // the interpreter's turns write any value
    try {
      if (!truth(im.eval(im.cond, st), st)) {
        im.write_back(frame, st, true);
        result = Impl::to_value(last, st);
        return true;
      }
      Reg v = im.eval(im.body, st);
      if (st.flow == Impl::State::Flow::brk) {
        im.write_back(frame, st, true);
        result = Impl::to_value(last, st);
        return true;
      }
      if (st.flow == Impl::State::Flow::cont) {
        st.flow = Impl::State::Flow::normal;
        continue;
      }
      if (!im.value_unused) last = v;
    } catch (const Bail& b) {
      if (Impl::debug()) {
        std::fprintf(stderr,
                     "[fast loops] %s: rolled back to the last checkpoint (fastloop.cpp:%d); the "
                     "loop goes on in the general evaluation\n",
                     im.where.c_str(), b.line);
      }
      im.rollback(st, objects_before);
      last = saved_last;
      break;
    }
  }
  im.write_back(frame, st);
  result = Impl::to_value(last, st);
  return false;
}

}  // namespace tessera
