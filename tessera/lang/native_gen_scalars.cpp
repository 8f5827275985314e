// Gen (native_gen.hpp): numbers. Python's and NumPy's arithmetic on ints
// and floats (overflow checks, floor division and modulo, powers), float32
// and int32 operands, negation and `not`, and float functions of one number
// (np.sqrt, math.exp, ...) checked against the primitive on a sample.
#include "tessera/lang/native_gen.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_calls.hpp"
#include "tessera/lang/native_dicts.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::native_gen {

CV Gen::int_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y) {
  CV r = int_op0(f, x, y, strong);
  return mk(r.k, r.v, strong);
}

int Gen::pow2(llvm::Value* y) {
  auto* c = llvm::dyn_cast<llvm::ConstantInt>(y);
  if (!c || c->getSExtValue() <= 0 || !c->getValue().isPowerOf2()) return -1;
  const int k = static_cast<int>(c->getValue().logBase2());
  return k < 63 ? k : -1;
}

CV Gen::int_op0(Fast f, llvm::Value* x, llvm::Value* y, llvm::Value* strong) {
  const int ik = Reg::PyInt;
  const int bk = Reg::PyBool;
  auto ovf = [&](llvm::Intrinsic::ID id) {
    // NumPy's int64 wraps around (the general evaluation's answer too):
    // only Python's int, unbounded, leaves an overflow to the general path.
    // A known NumPy result has no check, so both arms of a branch such as
    // lcs's `L[i - 1, j - 1] + 1` / `max(...)` stay cheap to speculate
    // and LLVM may turn it into a select.
    auto* known = llvm::dyn_cast_or_null<llvm::ConstantInt>(strong);
    if (known && known->isOne()) {
      switch (id) {
        case llvm::Intrinsic::sadd_with_overflow:
          return CV{ik, b.CreateAdd(x, y)};
        case llvm::Intrinsic::ssub_with_overflow:
          return CV{ik, b.CreateSub(x, y)};
        default:
          return CV{ik, b.CreateMul(x, y)};
      }
    }
    llvm::Value* r = b.CreateBinaryIntrinsic(id, x, y);
    llvm::Value* over = b.CreateExtractValue(r, 1);
    if (strong) over = b.CreateAnd(over, b.CreateNot(strong));
    bail_if(over);
    return CV{ik, b.CreateExtractValue(r, 0)};
  };
  switch (f) {
    case Fast::add:
      return ovf(llvm::Intrinsic::sadd_with_overflow);
    case Fast::sub:
      return ovf(llvm::Intrinsic::ssub_with_overflow);
    case Fast::mul:
      return ovf(llvm::Intrinsic::smul_with_overflow);
    case Fast::div:
      bail_if(b.CreateICmpEQ(y, b.getInt64(0)));
      return CV{Reg::PyFloat, b.CreateFDiv(b.CreateSIToFP(x, f64), b.CreateSIToFP(y, f64))};
    case Fast::lt:
      return CV{bk, b.CreateICmpSLT(x, y)};
    case Fast::le:
      return CV{bk, b.CreateICmpSLE(x, y)};
    case Fast::gt:
      return CV{bk, b.CreateICmpSGT(x, y)};
    case Fast::ge:
      return CV{bk, b.CreateICmpSGE(x, y)};
    case Fast::eq:
      return CV{bk, b.CreateICmpEQ(x, y)};
    case Fast::ne:
      return CV{bk, b.CreateICmpNE(x, y)};
    case Fast::floordiv: {
      if (int k = pow2(y); k >= 0)  // floor division by 2**k: an arithmetic shift
        return CV{ik, b.CreateAShr(x, b.getInt64(k))};
      // Python's floor division; by zero, and INT64_MIN // -1, the
      // general path's (for a power of two the interpreter's shift gives
      // the same).
      bail_if(b.CreateOr(b.CreateICmpEQ(y, b.getInt64(0)),
                         b.CreateAnd(b.CreateICmpEQ(y, b.getInt64(-1)),
                                     b.CreateICmpEQ(x, b.getInt64(INT64_MIN)))));
      llvm::Value* q = b.CreateSDiv(x, y);
      llvm::Value* r = b.CreateSRem(x, y);
      llvm::Value* adjust = b.CreateAnd(b.CreateICmpNE(r, b.getInt64(0)),
                                        b.CreateICmpNE(b.CreateICmpSLT(x, b.getInt64(0)),
                                                       b.CreateICmpSLT(y, b.getInt64(0))));
      return CV{ik, b.CreateSub(q, b.CreateZExt(adjust, i64))};
    }
    case Fast::mod: {
      if (int k = pow2(y); k >= 0)  // Python's modulo by 2**k: the low k bits, for any sign
        return CV{ik, b.CreateAnd(x, b.getInt64((uint64_t{1} << k) - 1))};
      return CV{ik, mod_if_needed(x, y, [&] {
                  bail_if(b.CreateICmpEQ(y, b.getInt64(0)));
                  // y == -1: 0 (srem by -1 of INT64_MIN is undefined in LLVM).
                  llvm::Value* is_m1 = b.CreateICmpEQ(y, b.getInt64(-1));
                  llvm::Value* ys = b.CreateSelect(is_m1, b.getInt64(1), y);
                  llvm::Value* r = b.CreateSRem(x, ys);
                  llvm::Value* adjust = b.CreateAnd(
                      b.CreateICmpNE(r, b.getInt64(0)),
                      b.CreateICmpNE(b.CreateICmpSLT(r, b.getInt64(0)),
                                     b.CreateICmpSLT(ys, b.getInt64(0))));
                  r = b.CreateAdd(r, b.CreateSelect(adjust, ys, b.getInt64(0)));
                  return b.CreateSelect(is_m1, b.getInt64(0), r);
                })};
    }
    default:
      throw Refuse{"an integer operation without native code"};
  }
}

llvm::Value* Gen::mod_if_needed(llvm::Value* x, llvm::Value* y,
                                const std::function<llvm::Value*()>& general) {
  // An array expression's element loop keeps no branch (LLVM's vectoriser).
  if (elem_t || (llvm::isa<llvm::Constant>(x) && llvm::isa<llvm::Constant>(y))) return general();
  llvm::BasicBlock* from = b.GetInsertBlock();
  llvm::BasicBlock* divide = llvm::BasicBlock::Create(ctx, "mod_divide", fn);
  llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "mod_done", fn);
  b.CreateCondBr(b.CreateAnd(b.CreateICmpSGE(x, b.getInt64(0)), b.CreateICmpSLT(x, y)), join,
                 divide);
  b.SetInsertPoint(divide);
  llvm::Value* r = general();
  llvm::BasicBlock* divided = b.GetInsertBlock();
  b.CreateBr(join);
  b.SetInsertPoint(join);
  llvm::PHINode* phi = b.CreatePHI(i64, 2);
  phi->addIncoming(x, from);
  phi->addIncoming(r, divided);
  return phi;
}

CV Gen::float_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y) {
  if (f == Fast::div || f == Fast::floordiv || f == Fast::mod)  // Python's ZeroDivisionError
    bail_if(b.CreateAnd(b.CreateNot(strong), b.CreateFCmpOEQ(y, llvm::ConstantFP::get(f64, 0.0))));
  CV r = float_op0(f, x, y);
  return mk(r.k, r.v, strong);
}

CV Gen::float_op0(Fast f, llvm::Value* x, llvm::Value* y) {
  const int fk = Reg::PyFloat;
  const int bk = Reg::PyBool;
  switch (f) {
    case Fast::add:
      return CV{fk, b.CreateFAdd(x, y)};
    case Fast::sub:
      return CV{fk, b.CreateFSub(x, y)};
    case Fast::mul:
      return CV{fk, b.CreateFMul(x, y)};
    case Fast::div:
      return CV{fk, b.CreateFDiv(x, y)};
    case Fast::lt:
      return CV{bk, b.CreateFCmpOLT(x, y)};
    case Fast::le:
      return CV{bk, b.CreateFCmpOLE(x, y)};
    case Fast::gt:
      return CV{bk, b.CreateFCmpOGT(x, y)};
    case Fast::ge:
      return CV{bk, b.CreateFCmpOGE(x, y)};
    case Fast::eq:
      return CV{bk, b.CreateFCmpOEQ(x, y)};
    case Fast::ne:
      return CV{bk, b.CreateFCmpUNE(x, y)};
    case Fast::floordiv:
    case Fast::mod: {
      auto* t = llvm::FunctionType::get(f64, {f64, f64}, false);
      void* h = f == Fast::floordiv ? reinterpret_cast<void*>(&native_float_floordiv)
                                     : reinterpret_cast<void*>(&native_float_mod);
      return CV{fk, b.CreateCall(t, fptr(h, t), {x, y})};
    }
    default:
      throw Refuse{"a float operation without native code"};
  }
}

CV Gen::power(const CV& a, const CV& c) {
  const auto ka = static_cast<Reg::Kind>(a.k), kb = static_cast<Reg::Kind>(c.k);
  if (is_narrow(ka) || is_narrow(kb)) throw Refuse{"'power' of a float32 or int32"};
  llvm::Value* strong = b.CreateOr(strong_of(a), strong_of(c));
  if ((is_float(ka) || is_int(ka)) && (is_float(kb) || is_int(kb)) &&
      (is_float(ka) || is_float(kb))) {
    llvm::Value* x = as_double(a);
    llvm::Value* y = as_double(c);
    // x ** 2 (a constant 2 or 2.0): x * x, the correctly rounded square that
    // std::pow gives too (and NumPy's power by 2, a square); LLVM cannot see
    // through the helper's call (four of them a step of an RK4 over
    // `omega ** 2 * y`).
    auto* ci = llvm::dyn_cast<llvm::ConstantInt>(c.v);
    auto* cf = llvm::dyn_cast<llvm::ConstantFP>(c.v);
    if ((ci && ci->getSExtValue() == 2) || (cf && cf->getValueAPF().convertToDouble() == 2.0))
      return mk(Reg::PyFloat, b.CreateFMul(x, x), strong);
    // Python's numbers: 0.0 ** -y is the general path's ZeroDivisionError.
    bail_if(b.CreateAnd(b.CreateNot(strong),
                        b.CreateAnd(b.CreateFCmpOEQ(x, llvm::ConstantFP::get(f64, 0.0)),
                                    b.CreateFCmpOLT(y, llvm::ConstantFP::get(f64, 0.0)))));
    auto* t = llvm::FunctionType::get(f64, {f64, f64}, false);
    llvm::Value* r = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_pow), t), {x, y});
    return mk(Reg::PyFloat, r, strong);
  }
  auto* e = is_int(ka) && is_int(kb) ? llvm::dyn_cast<llvm::ConstantInt>(c.v) : nullptr;
  if (!e || e->getSExtValue() < 0 || e->getSExtValue() > 64)
    throw Refuse{"'power' of these operands has no native code"};
  llvm::Value* result = nullptr;  // 1
  llvm::Value* sq = a.v;
  auto mul = [&](llvm::Value* x, llvm::Value* y) {
    llvm::Value* r = b.CreateBinaryIntrinsic(llvm::Intrinsic::smul_with_overflow, x, y);
    bail_if(b.CreateExtractValue(r, 1));
    return b.CreateExtractValue(r, 0);
  };
  for (int64_t k = e->getSExtValue(); k; k >>= 1) {
    if (k & 1) result = result ? mul(result, sq) : sq;
    if (k > 1) sq = mul(sq, sq);
  }
  return mk(Reg::PyInt, result ? result : b.getInt64(1), strong);
}

llvm::Value* Gen::as_double(const CV& v) {
  return is_int(static_cast<Reg::Kind>(v.k)) ? b.CreateSIToFP(v.v, f64) : v.v;
}

bool Gen::narrow_binary(const FNode& n, CV& a, CV& c) {
  const int ka = a.k, kb = c.k;
  if (a.s || c.s) return false;
  llvm::Type* f32 = b.getFloatTy();
  // An operand as a float32 (NumPy's, or a Python number cast as NumPy casts
  // it) or null: refused.
  auto as_f32 = [&](const CV& v) -> llvm::Value* {
    if (v.k == Reg::NpF32) return b.CreateFPTrunc(v.v, f32);
    if (v.k == Reg::PyFloat) {
      llvm::Value* x = b.CreateFPTrunc(v.v, f32);
      llvm::Value* inf = llvm::ConstantFP::getInfinity(f32);
      llvm::Value* ovf = b.CreateAnd(
          b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), inf),
          b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v.v),
                          llvm::ConstantFP::getInfinity(f64)));
      bail_if(ovf);
      return x;
    }
    if (v.k == Reg::PyInt) {
      bail_if(b.CreateICmpUGT(b.CreateAdd(v.v, b.getInt64(int64_t{1} << 24)),
                              b.getInt64(int64_t{1} << 25)));
      return b.CreateSIToFP(v.v, f32);
    }
    return nullptr;
  };
  auto small_int = [](int k) { return narrow_int_kind(k) && narrow_int_bits(k) <= 16; };
  if (ka == Reg::NpF32 || kb == Reg::NpF32) {
    auto f32able = [&](int k) {
      return k == Reg::NpF32 || k == Reg::PyFloat || k == Reg::PyInt || small_int(k);
    };
    if (f32able(ka) && f32able(kb)) {
      if (n.fast < Fast::add || n.fast > Fast::ne) return false;  // arithmetic, comparisons
      // An int of 16 bits or fewer: exactly a float32 (its payload zero or
      // sign extended, so signed conversion is right for both).
      auto op = [&](const CV& v) { return small_int(v.k) ? b.CreateSIToFP(v.v, f32) : as_f32(v); };
      llvm::Value* x = op(a);  // (in this order: their checks)
      llvm::Value* y = op(c);
      llvm::Value* r = f32_op(n.fast, x, y);
      const bool compare = n.fast >= Fast::lt && n.fast <= Fast::ne;
      a = compare ? CV{Reg::NpBool, r} : CV{Reg::NpF32, b.CreateFPExt(r, f64)};
      c = CV{Reg::Nil};
      return true;
    }
  } else if ((narrow_int_kind(ka) || ka == Reg::PyInt) &&
             (narrow_int_kind(kb) || kb == Reg::PyInt)) {
    const int k = !narrow_int_kind(ka)   ? kb
                  : !narrow_int_kind(kb) ? ka
                                         : narrow_int_promote(ka, kb);
    if (k != Reg::NpInt) {
      if (n.fast == Fast::none && !int_bit_op_of(n)) return false;
      // A Python int the kind cannot hold: NumPy's OverflowError (the
      // general path's).
      for (const CV* v : {&a, &c})
        if (v->k == Reg::PyInt) bail_if(b.CreateICmpNE(wrap_int(k, v->v), v->v));
      a = narrow_int_op(n, k, a.v, c.v);
      c = CV{Reg::Nil};
      return true;
    }
  }
  // As float64 / int64 NumPy scalars: with another NumPy number, or an
  // integer scalar with a Python float.
  auto np_wide = [](int k) {
    return k == Reg::NpFloat || k == Reg::NpInt || k == Reg::NpF32 || narrow_int_kind(k);
  };
  if (!(np_wide(ka) && np_wide(kb)) && !(narrow_int_kind(ka) && kb == Reg::PyFloat) &&
      !(narrow_int_kind(kb) && ka == Reg::PyFloat))
    return false;
  auto widen = [](CV& v) {
    if (v.k == Reg::NpF32) v.k = Reg::NpFloat;
    if (narrow_int_kind(v.k)) v.k = Reg::NpInt;
  };
  widen(a);
  widen(c);
  return true;
}

CV Gen::binary(const FNode& n) {
  if ((n.fast == Fast::eq || n.fast == Fast::ne) && char_operand(n.kids[0]) &&
      char_operand(n.kids[1]))
    return char_compare(n);
  if (n.fast >= Fast::lt && n.fast <= Fast::ne && str_expr(n.kids[0]) && str_expr(n.kids[1]))
    return str_compare(n);
  if (n.spec && n.spec->name == "add" && list_expr(n.kids[0]) && list_expr(n.kids[1]))
    return list_concat(n);
  if (small_int_compare_of(n)) return small_int_compare(n);
  CV a = eval(n.kids[0]);
  CV c = eval(n.kids[1]);
  if (py_guards.count(&n)) {
    // NumPy's int (an element of an int array): its comparison's `and` does
    // not short-circuit in the interpreter, so the accesses after the guard
    // are not proven by it: generated again with that variable's kind
    // dynamic, which find_guarded does not take.
    for (const size_t k : {size_t{0}, size_t{1}}) {
      const CV& x = k == 0 ? a : c;
      if (x.k == Reg::PyInt && !x.s) continue;
      if (n.kids[k].op == Op::Var && x.k == Reg::NpInt && !dyn[n.kids[k].reg])
        throw Retry{n.kids[k].reg};
      throw Refuse{"a while loop's guard of its index compares what is not a Python int"};
    }
  }
  const auto ka = static_cast<Reg::Kind>(a.k), kb = static_cast<Reg::Kind>(c.k);
  if (n.fast == Fast::none && (n.spec->name == "power" || n.spec->name == "ipow") &&
      a.k != kDyn && c.k != kDyn) {
    CV r = power(a, c);
    count(n.counter);
    return r;
  }
  if (n.fast == Fast::none && (n.spec->name == "minimum" || n.spec->name == "maximum") &&
      (a.k == Reg::PyInt || a.k == Reg::NpInt) && (c.k == Reg::PyInt || c.k == Reg::NpInt) &&
      !a.s && !c.s) {
    // np.minimum of two ints (zip's length, min of the lists' len()):
    // NumPy's int64, as the interpreter gives.
    const bool lo = n.spec->name == "minimum";
    llvm::Value* r = b.CreateSelect(lo ? b.CreateICmpSLE(a.v, c.v) : b.CreateICmpSGE(a.v, c.v),
                                    a.v, c.v);
    count(n.counter);
    return CV{Reg::NpInt, r};
  }
  if (n.fast == Fast::none && n.spec->name == "hypot" && a.k != kDyn && c.k != kDyn &&
      (is_float(ka) || is_int(ka)) && (is_float(kb) || is_int(kb)) && !is_narrow(a.k) &&
      !is_narrow(c.k)) {
    // A complex number's abs() (fastloop_complex.cpp): a float of the
    // operands' family (Python's unless either is NumPy's).
    auto* t = llvm::FunctionType::get(f64, {f64, f64}, false);
    llvm::Value* r = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_hypot), t),
                                  {as_double(a), as_double(c)});
    count(n.counter);
    return mk(Reg::PyFloat, r, b.CreateOr(strong_of(a), strong_of(c)));
  }
  if (n.fast == Fast::none) throw Refuse{"'" + n.spec->name + "' has no native code"};
  if (a.k == kDyn || c.k == kDyn) throw Refuse{"an operand of varying kind"};
  if (a.k == kDynF32 || c.k == kDynF32) {
    CV r = dyn_f32_binary(n, a, c);
    count(n.counter);
    return r;
  }
  if (is_narrow(a.k) || is_narrow(c.k)) {
    if (!narrow_binary(n, a, c)) {
      throw Refuse{std::string("'") + n.spec->name + "' of a " + kind_name(ka) + " and a " +
                   kind_name(kb)};
    }
    if (c.k == Reg::Nil) {  // computed as float32 or int32
      count(n.counter);
      return a;
    }
    return wide_binary(n, a, c);
  }
  return wide_binary(n, a, c);
}

bool Gen::int_bit_op_of(const FNode& n) {
  if (!n.spec) return false;
  const std::string& op = n.spec->name;
  return op == "bitwise_and" || op == "bitwise_or" || op == "bitwise_xor" ||
         op == "left_shift" || op == "right_shift";
}

CV Gen::narrow_int_op(const FNode& n, int k, llvm::Value* x, llvm::Value* y) {
  const bool compare = n.fast >= Fast::lt && n.fast <= Fast::ne;
  if (compare) return CV{Reg::NpBool, int_op0(n.fast, x, y).v};
  switch (n.fast) {
    case Fast::add: return CV{k, wrap_int(k, b.CreateAdd(x, y))};
    case Fast::sub: return CV{k, wrap_int(k, b.CreateSub(x, y))};
    case Fast::mul: return CV{k, wrap_int(k, b.CreateMul(x, y))};
    case Fast::div:
      bail_if(b.CreateICmpEQ(y, b.getInt64(0)));  // NumPy's inf or nan and its warning
      return CV{Reg::NpFloat, b.CreateFDiv(b.CreateSIToFP(x, f64), b.CreateSIToFP(y, f64))};
    case Fast::floordiv:
    case Fast::mod: {
      // The most negative value // -1 (NumPy wraps with a warning) and by
      // zero: the general path's.
      if (!narrow_int_unsigned(k)) {
        const int64_t lo = -(int64_t{1} << (narrow_int_bits(k) - 1));
        bail_if(b.CreateAnd(b.CreateICmpEQ(y, b.getInt64(-1)), b.CreateICmpEQ(x, b.getInt64(lo))));
      }
      return CV{k, int_op0(n.fast, x, y).v};  // Python's meaning on int64; bails by zero
    }
    default:
      break;
  }
  const std::string& op = n.spec->name;
  if (op == "bitwise_and") return CV{k, b.CreateAnd(x, y)};
  if (op == "bitwise_or") return CV{k, b.CreateOr(x, y)};
  if (op == "bitwise_xor") return CV{k, b.CreateXor(x, y)};
  // NumPy's shifts: a count outside [0, bits) shifts everything out (the
  // sign left by a right shift).
  const int bits = narrow_int_bits(k);
  llvm::Value* in = b.CreateICmpULT(y, b.getInt64(bits));
  llvm::Value* count = b.CreateAnd(y, b.getInt64(63));
  if (op == "left_shift")
    return CV{k, b.CreateSelect(in, wrap_int(k, b.CreateShl(x, count)), b.getInt64(0))};
  llvm::Value* sign = b.CreateAShr(x, b.getInt64(63));
  return CV{k, b.CreateSelect(in, b.CreateAShr(x, count), sign)};
}

CV Gen::int_bit_binary(const FNode& n, CV a, CV c) {
  if (is_narrow(a.k) || is_narrow(c.k)) {
    if (!narrow_binary(n, a, c)) {
      throw Refuse{std::string("'") + n.spec->name + "' of a " +
                   kind_name(static_cast<Reg::Kind>(a.k)) + " and a " +
                   kind_name(static_cast<Reg::Kind>(c.k))};
    }
    if (c.k == Reg::Nil) return a;  // computed in the narrow kind
  }
  // Python's ints and NumPy's int64 (the strong bit: NumPy's when either is).
  const std::string& op = n.spec->name;
  llvm::Value* strong = b.CreateOr(strong_of(a), strong_of(c));
  llvm::Value* x = a.v;
  llvm::Value* y = c.v;
  if (op == "bitwise_and") return mk(Reg::PyInt, b.CreateAnd(x, y), strong);
  if (op == "bitwise_or") return mk(Reg::PyInt, b.CreateOr(x, y), strong);
  if (op == "bitwise_xor") return mk(Reg::PyInt, b.CreateXor(x, y), strong);
  llvm::Value* in = b.CreateICmpULT(y, b.getInt64(64));
  llvm::Value* count = b.CreateAnd(y, b.getInt64(63));
  llvm::Value* weak = b.CreateNot(strong);
  if (op == "right_shift") {
    // Python: a negative count is its ValueError (the general path's); past
    // 63 the sign, as NumPy's int64 gives for any count outside [0, 64).
    bail_if(b.CreateAnd(weak, b.CreateICmpSLT(y, b.getInt64(0))));
    llvm::Value* sign = b.CreateAShr(x, b.getInt64(63));
    return mk(Reg::PyInt, b.CreateSelect(in, b.CreateAShr(x, count), sign), strong);
  }
  // left_shift. Python's int does not overflow: a result past int64, or a
  // negative count, is the general path's; NumPy's int64 wraps, 0 for a
  // count outside [0, 64).
  llvm::Value* r = b.CreateShl(x, count);
  llvm::Value* lost = b.CreateOr(b.CreateNot(in), b.CreateICmpNE(b.CreateAShr(r, count), x));
  bail_if(b.CreateAnd(weak, lost));
  return mk(Reg::PyInt, b.CreateSelect(in, r, b.getInt64(0)), strong);
}

llvm::Value* Gen::f32_op(Fast f, llvm::Value* x, llvm::Value* y) {
  switch (f) {
    case Fast::add: return b.CreateFAdd(x, y);
    case Fast::sub: return b.CreateFSub(x, y);
    case Fast::mul: return b.CreateFMul(x, y);
    case Fast::div: return b.CreateFDiv(x, y);
    case Fast::lt: return b.CreateFCmpOLT(x, y);
    case Fast::le: return b.CreateFCmpOLE(x, y);
    case Fast::gt: return b.CreateFCmpOGT(x, y);
    case Fast::ge: return b.CreateFCmpOGE(x, y);
    case Fast::eq: return b.CreateFCmpOEQ(x, y);
    case Fast::ne: return b.CreateFCmpUNE(x, y);
    default: throw Refuse{"a float32 operation without native code"};
  }
}

CV Gen::dyn_f32_binary(const FNode& n, const CV& a, const CV& c) {
  const Fast f = n.fast;
  const bool compare = f >= Fast::lt && f <= Fast::ne;
  if (!compare && f != Fast::add && f != Fast::sub && f != Fast::mul && f != Fast::div)
    throw Refuse{"'" + n.spec->name + "' of a float that is np.float32 by turns"};
  // With NumPy's float64, int64 or int32: float64 whichever the float is
  // (np.float32 with them promotes to float64, as Python's float does).
  auto wide = [](const CV& v) {
    return !v.s && (v.k == Reg::NpFloat || v.k == Reg::NpInt || v.k == Reg::NpI32);
  };
  auto dbl = [&](const CV& v) { return v.k == kDynF32 ? v.v : as_double(v); };
  if (wide(a) || wide(c)) return float_op(f, b.getTrue(), dbl(a), dbl(c));
  auto narrowable = [](const CV& v) {
    return v.k == kDynF32 || (!v.s && (v.k == Reg::PyFloat || v.k == Reg::PyInt || v.k == Reg::NpF32));
  };
  if (!narrowable(a) || !narrowable(c)) {
    throw Refuse{std::string("'") + n.spec->name + "' of a " +
                 kind_name(static_cast<Reg::Kind>(a.k)) + " and a " +
                 kind_name(static_cast<Reg::Kind>(c.k))};
  }
  auto f32_now = [&](const CV& v) {
    return v.k == kDynF32 ? v.s : b.getInt1(v.k == Reg::NpF32);
  };
  // float32 this turn: either operand a float32 (Python's number then
  // converted to float32, as NumPy's weak scalars are).
  llvm::Value* strong = b.CreateOr(f32_now(a), f32_now(c));
  llvm::Type* f32 = b.getFloatTy();
  auto as_f32 = [&](const CV& v) -> llvm::Value* {
    if (v.k == Reg::PyInt) {  // exactly, or the general path's
      bail_if(b.CreateAnd(strong, b.CreateICmpUGT(b.CreateAdd(v.v, b.getInt64(int64_t{1} << 24)),
                                                  b.getInt64(int64_t{1} << 25))));
      return b.CreateSIToFP(v.v, f32);
    }
    llvm::Value* x = b.CreateFPTrunc(v.v, f32);
    if (v.k != Reg::NpF32) {
      // A Python float past float32's range: NumPy's cast warns (the
      // general path's); a float32's own value is exact.
      llvm::Value* ovf = b.CreateAnd(
          b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(f32)),
          b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v.v),
                          llvm::ConstantFP::getInfinity(f64)));
      if (v.k == kDynF32) ovf = b.CreateAnd(ovf, b.CreateNot(v.s));
      bail_if(b.CreateAnd(strong, ovf));
    }
    return x;
  };
  llvm::Value* x = as_f32(a);
  llvm::Value* y = as_f32(c);
  llvm::Value* narrow = f32_op(f, x, y);
  if (!compare) narrow = b.CreateFPExt(narrow, f64);
  if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(strong); k && k->isOne())
    return CV{compare ? Reg::NpBool : Reg::NpF32, narrow};
  // Python's floats this turn: double arithmetic (a division by zero the
  // general path's ZeroDivisionError).
  const CV wide_r = float_op(f, strong, dbl(a), dbl(c));
  CV r{compare ? Reg::PyBool : kDynF32, b.CreateSelect(strong, narrow, wide_r.v)};
  r.s = strong;
  return r;
}

CV Gen::wide_binary(const FNode& n, const CV& a, const CV& c) {
  const auto ka = static_cast<Reg::Kind>(a.k), kb = static_cast<Reg::Kind>(c.k);
  if (is_bool(ka) || is_bool(kb)) {
    // Bools compared with each other or with numbers (`(fm < 0) == (flo <
    // 0)`) as the ints 0 and 1, np.bool_ when either is NumPy's; Python's
    // bools in arithmetic with Python's numbers: Python's ints.
    const auto number = [](Reg::Kind k) { return is_bool(k) || is_int(k) || is_float(k); };
    const auto plain = [](const CV& v) {
      return !v.s && (v.k == Reg::PyBool || v.k == Reg::PyInt || v.k == Reg::PyFloat);
    };
    const bool compare = n.fast >= Fast::lt && n.fast <= Fast::ne;
    if (number(ka) && number(kb) && (compare || (plain(a) && plain(c)))) {
      const auto as_int = [&](const CV& v) {
        if (!is_bool(static_cast<Reg::Kind>(v.k))) return v;
        CV r{v.k == Reg::NpBool ? Reg::NpInt : Reg::PyInt, b.CreateZExt(v.v, i64)};
        r.s = v.s;
        return r;
      };
      return wide_binary(n, as_int(a), as_int(c));
    }
  }
  CV r;
  llvm::Value* strong = b.CreateOr(strong_of(a), strong_of(c));
  if (is_int(ka) && is_int(kb) && (n.fast == Fast::add || n.fast == Fast::sub) &&
      (is_proven(n) || no_overflow.count(&n))) {
    // Index arithmetic whose values at the loop's ends were checked, or a
    // range loop's counter (k + 1 after k < end): no overflow.
    r = mk(Reg::PyInt,
           n.fast == Fast::add ? b.CreateNSWAdd(a.v, c.v) : b.CreateNSWSub(a.v, c.v), strong);
  } else if (is_int(ka) && is_int(kb) && n.fast == Fast::mod && is_proven(n) &&
             pow2(c.v) < 0) {
    // An index's `a % c` whose divisor the check before the loop nest
    // found positive (Nest's interval): no zero or -1 case, so the
    // remainder is free to be hoisted and shared (grid[(i + di) % n, ...]).
    llvm::Value* rem = mod_if_needed(a.v, c.v, [&] {
      llvm::Value* q = b.CreateSRem(a.v, c.v);
      return b.CreateAdd(q, b.CreateSelect(b.CreateICmpSLT(q, b.getInt64(0)), c.v,
                                           b.getInt64(0)));
    });
    r = mk(Reg::PyInt, rem, strong);
  } else if (is_float(ka) && is_float(kb)) {
    r = float_op(n.fast, strong, a.v, c.v);
  } else if (is_int(ka) && is_int(kb)) {
    r = int_op(n.fast, strong, a.v, c.v);
  } else if ((is_int(ka) || is_float(ka)) && (is_int(kb) || is_float(kb))) {
    r = float_op(n.fast, strong, as_double(a), as_double(c));
  } else {
    throw Refuse{std::string("'") + n.spec->name + "' of a " + kind_name(ka) + " and a " +
                 kind_name(kb)};
  }
  count(n.counter);
  return r;
}

CV Gen::call(const FNode& n) {
  if (CV out; str_call(n, out)) return out;
  if ((n.obj_op == ObjOp::contains || n.obj_op == ObjOp::get) && lists) return dict_call(n);
  static const std::map<std::string, UnaryOp, std::less<>> ops = {
      {"sqrt", UnaryOp::sqrt},   {"exp", UnaryOp::exp},
      {"log", UnaryOp::log},     {"sin", UnaryOp::sin},
      {"cos", UnaryOp::cos},     {"tan", UnaryOp::tan},
      {"floor", UnaryOp::floor}, {"ceil", UnaryOp::ceil},
      {"trunc", UnaryOp::trunc}, {"abs", UnaryOp::abs},
      {"absolute", UnaryOp::abs}, {"tanh", UnaryOp::tanh},
      {"arctan", UnaryOp::arctan}, {"log2", UnaryOp::log2},
      {"log10", UnaryOp::log10}, {"exp2", UnaryOp::exp2},
      {"expm1", UnaryOp::expm1}, {"log1p", UnaryOp::log1p},
      {"sinh", UnaryOp::sinh},   {"cosh", UnaryOp::cosh},
      {"arcsin", UnaryOp::arcsin}, {"arccos", UnaryOp::arccos},
      {"rint", UnaryOp::rint}};
  if (is_reduction(n) && arr_expr(n.kids[0])) return reduce(n);
  if (n.spec->name == "dot" && n.kids.size() == 2 && arr_expr(n.kids[0]) && arr_expr(n.kids[1]))
    return dot_reduce(n);
  if (elem_t && n.spec->name == "where" && n.kids.size() == 3) return elem_where(n);
  if (n.spec->name == "len" && n.kids.size() == 1 && arr_var(n.kids[0])) {
    const int r = n.kids[0].reg;
    const ArrT& e = atype[r];
    if (!e.indexable || e.nd < 1) throw Refuse{"len() of a 0-d array"};
    count(n.slot);
    return CV{Reg::PyInt, ashape(r, 0)};
  }
  if (is_iterate(n)) {
    CV v = eval_any(n.kids[0]);
    if (v.k == Reg::Arr && atype[v.arr].nd >= 1) {  // an array is its own items (its rows)
      count(n.slot);
      return v;
    }
    if (v.k != Reg::Obj) throw Refuse{"'iterate' of what is not a list"};
    if (iterate_alias.count(&n)) {  // the list itself (a dict's keys: the interpreter's)
      llvm::Value* len = len_of_object(reinterpret_cast<void*>(&native_list_len), v.v);
      bail_if(b.CreateICmpSLT(len, b.getInt64(0)));
      count(n.slot);
      return v;
    }
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64}, false);
    llvm::Value* obj =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list_iterate), ft), {cptr, v.v});
    bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
    b.CreateStore(b.getTrue(), made_any);
    count(n.slot);
    return CV{Reg::Obj, obj};
  }
  if (n.spec->name == "len" && n.kids.size() == 1 && n.kids[0].op == Op::Var &&
      views.count(n.kids[0].reg))
    return view_len(n);
  if (n.spec->name == "len" && n.kids.size() == 1 && lists) {
    if (n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2 &&
        list_var(n.kids[0].kids[0]) && !dict_reg[n.kids[0].kids[0].reg])
      return list2_len(n);
    CV v = eval_any(n.kids[0]);
    if (v.k != Reg::Obj) throw Refuse{"len() of a value that is not an array or a list"};
    // lists, dicts (native_container_len) and ASCII strings
    llvm::Value* len = len_of_object(reinterpret_cast<void*>(&native_seq_len), v.v);
    bail_if(b.CreateICmpSLT(len, b.getInt64(0)));
    count(n.slot);
    return CV{Reg::PyInt, len};
  }
  if ((n.spec->name == "negative" || n.spec->name == "not_") && n.kids.size() == 1)
    return negate(n);
  if (n.spec->name == "logical_not" && n.kids.size() == 1) {
    // `!b` of the language (int()'s parse): of a Python number, a Python bool,
    // as the interpreter's; NumPy's give NumPy's bool, on the interpreter.
    CV v = eval(n.kids[0]);
    if (v.k != Reg::PyBool && v.k != Reg::PyInt && v.k != Reg::PyFloat)
      throw Refuse{"'logical_not' of a value that is not a Python number"};
    if (v.s) throw Refuse{"'logical_not' of a number whose kind varies"};
    llvm::Value* r = b.CreateNot(truth(v));
    count(n.slot);
    return CV{Reg::PyBool, r};
  }
  if (n.spec->name == "item" && n.kids.size() == 1 && !arr_var(n.kids[0])) {
    // x.item() of a number: the same value as Python's (NumPy's int32 and
    // float32 widen to Python's int and float).
    CV v = eval(n.kids[0]);
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"item() of a value that is not a number"};
    count(n.slot);
    if (is_bool(vk)) return CV{Reg::PyBool, v.v};
    return CV{is_int(vk) ? Reg::PyInt : Reg::PyFloat, v.v};
  }
  if (n.spec->name == "is_mutable_container" && n.kids.size() == 1) {
    // An array or a number is not a list or dict (anything else stays general).
    const FNode& x = n.kids[0];
    if (x.op == Op::GetItem && !x.kids.empty() && arr_var(x.kids[0])) {
      // What an array's indexing gives (the translator's check before
      // `a[i] = a[j]`): an array or a number. Not evaluated (the write
      // after it evaluates it, and bails where it raises), only counted.
      count_expr(x);
      count(n.slot);
      return CV{Reg::PyBool, b.getInt1(false)};
    }
    if (!arr_var(x)) {
      CV v = eval(n.kids[0]);
      if (v.k == kDyn || !is_scalar(static_cast<Reg::Kind>(v.k)))
        throw Refuse{"is_mutable_container of a value that is not an array or a number"};
    }
    count(n.slot);
    return CV{Reg::PyBool, b.getInt1(false)};
  }
  if (n.spec->name == "range_index" && !n.kids.empty()) {
    // A range's bound: an int (Python's or NumPy's) or a bool passes; any
    // other kind is the primitive's TypeError, on the general path.
    CV v = eval(n.kids[0]);
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (v.k == kDyn || !(is_int(vk) || vk == Reg::PyBool))
      throw Refuse{"a range bound that is not an int"};
    count(n.slot);
    return v;
  }
  if (n.spec->name == "ndim" && n.kids.size() == 1) {
    // np.ndim(x): the rank the code is typed by (0 for a number).
    int64_t nd = 0;
    if (arr_var(n.kids[0])) {
      const ArrT& e = atype[n.kids[0].reg];
      if (!e.indexable) throw Refuse{"ndim() of an array of unknown rank"};
      nd = e.nd;
    } else {
      CV v = eval(n.kids[0]);
      if (v.k == kDyn || !is_scalar(static_cast<Reg::Kind>(v.k)))
        throw Refuse{"ndim() of a value whose kind varies"};
    }
    count(n.slot);
    return CV{Reg::PyInt, b.getInt64(nd)};
  }
  if (n.spec->name == "searchsorted" && (n.kids.size() == 2 || n.kids.size() == 3))
    return searchsorted(n);
  if (int_bit_op_of(n) && n.kids.size() == 2) {
    // & | ^ << >> (primitives of their own, not Op::Binary): of ints only.
    CV a = eval(n.kids[0]);
    CV c = eval(n.kids[1]);
    if (a.k == kDyn || c.k == kDyn || !is_int(static_cast<Reg::Kind>(a.k)) ||
        !is_int(static_cast<Reg::Kind>(c.k)))
      throw Refuse{"'" + n.spec->name + "' of what is not two ints"};
    CV r = int_bit_binary(n, a, c);
    count(n.slot);
    return r;
  }
  auto it = ops.find(n.spec->name);
  if (it == ops.end() || n.kids.size() != 1)
    throw Refuse{"'" + n.spec->name + "' has no native code"};
  CV v = eval(n.kids[0]);
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (!is_int(vk) && !is_float(vk)) throw Refuse{"'" + n.spec->name + "' of a non-number"};
  if (it->second == UnaryOp::abs && is_int(vk)) {
    // abs of an int is an int of its kind: Python's past int64 is a big
    // integer (the general path's OverflowError), NumPy's wraps
    // (np.abs(np.int64 min) is itself, as negation).
    // (an int32's value is its int64 register, sign-extended: < 0 alike)
    llvm::Value* neg = b.CreateICmpSLT(v.v, b.getInt64(0));
    CV r = v;
    r.v = b.CreateSelect(neg, int_negative(v), v.v);
    count(n.slot);
    return r;
  }
  // float32: the functions whose float32 result is the double one rounded
  // (the others are computed by vmath's float32 code, elementwise.hpp).
  if (vk == Reg::NpF32 && it->second != UnaryOp::sqrt && it->second != UnaryOp::abs &&
      it->second != UnaryOp::floor && it->second != UnaryOp::ceil &&
      it->second != UnaryOp::trunc && it->second != UnaryOp::rint)
    throw Refuse{"'" + n.spec->name + "' of a float32 has no native code"};
  // The primitive on a sample of that kind: its result's kind, and its
  // value checked against the function computed here.
  if (v.s) {
    // Python's or NumPy's number by turns: both must give one kind.
    CV py{vk, v.v}, np_{np_kind(vk), v.v};
    const int k1 = probe(n, it->second, py), k2 = probe(n, it->second, np_);
    if (k1 == k2) return finish_call(n, it->second, v, k1);
    if (k2 != np_kind(static_cast<Reg::Kind>(k1)))
      throw Refuse{"'" + n.spec->name + "' of a number whose kind varies"};
    CV r = finish_call(n, it->second, v, k1);  // Python's in, Python's out; NumPy's, NumPy's
    r.s = v.s;
    return r;
  }
  return finish_call(n, it->second, v, probe(n, it->second, v));
}

CV Gen::negate(const FNode& n) {
  CV v = eval(n.kids[0]);
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (v.k == kDynF32) {  // -s keeps its kind; `not s` is Python's bool either way
    CV r = v;
    if (n.spec->name == "not_")
      r = CV{Reg::PyBool, b.CreateNot(truth(v))};
    else
      r.v = b.CreateFNeg(v.v);
    count(n.slot);
    return r;
  }
  if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"'" + n.spec->name + "' of a non-scalar"};
  if (n.spec->name == "not_") {
    llvm::Value* r = b.CreateNot(truth(v));
    count(n.slot);
    return CV{Reg::PyBool, r};
  }
  if (is_bool(vk)) throw Refuse{"'negative' of a bool"};
  CV r = v;
  r.v = is_float(vk) ? b.CreateFNeg(v.v) : int_negative(v);
  count(n.slot);
  return r;
}

llvm::Value* Gen::int_negative(const CV& v) {
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (narrow_int_kind(vk)) return wrap_int(vk, b.CreateNeg(v.v));
  if (vk == Reg::PyInt) {
    llvm::Value* over = b.CreateICmpEQ(v.v, b.getInt64(INT64_MIN));
    if (v.s) over = b.CreateAnd(over, b.CreateNot(v.s));
    bail_if(over);
  }
  return b.CreateSub(b.getInt64(0), v.v);
}

int Gen::probe(const FNode& n, UnaryOp op, const CV& v) {
  const auto vk = static_cast<Reg::Kind>(v.k);
  Value sample = vk == Reg::PyFloat ? Value(0.375)
                 : vk == Reg::NpFloat ? Value(Array::scalar(0.375))
                 : vk == Reg::NpF32   ? Value(Array::scalar(0.375, DType::float32))
                 : narrow_int_kind(vk) ? Value(Array::scalar(3.0, narrow_int_dtype(vk)))
                 : vk == Reg::PyInt   ? Value(int64_t{3})
                                      : Value(Array::scalar_int(3));
  const double xs = is_float(vk) ? 0.375 : 3.0;
  Value res;
  try {
    res = call_primitive(n.spec->name, std::vector<Value>{sample});
  } catch (...) {
    throw Refuse{"'" + n.spec->name + "' failed on a sample"};
  }
  int rk;
  double got;
  if (res.is_float()) {
    rk = Reg::PyFloat, got = res.as_float();
  } else if (res.is_array() && res.as_array().ndim() == 0 && res.as_array().dtype() == DType::float64 &&
             !res.as_array().foreign() && res.as_array().storage_bytes() == 8) {
    rk = Reg::NpFloat, got = res.as_array().origin<double>()[0];
  } else if (res.is_array() && res.as_array().ndim() == 0 &&
             res.as_array().dtype() == DType::float32 && !res.as_array().foreign() &&
             res.as_array().storage_bytes() == 4) {
    rk = Reg::NpF32, got = res.as_array().origin<float>()[0];
  } else {
    throw Refuse{"'" + n.spec->name + "' of a " + kind_name(vk) + " does not give a float"};
  }
  double want = native_unary(static_cast<int32_t>(op), xs);
  if (rk == Reg::NpF32) want = static_cast<float>(want);
  if (std::memcmp(&got, &want, 8) != 0)
    throw Refuse{"'" + n.spec->name + "' computes differently"};
  return rk;
}

CV Gen::finish_call(const FNode& n, UnaryOp op, const CV& v, int rk) {
  llvm::Value* x = as_double(v);
  llvm::Value* r;
  switch (op) {
    case UnaryOp::sqrt:
      r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      break;
    case UnaryOp::abs:
      r = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      break;
    case UnaryOp::floor:
      r = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
      break;
    case UnaryOp::ceil:
      r = b.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
      break;
    case UnaryOp::trunc:
      r = b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
      break;
    default: {
      auto* t = llvm::FunctionType::get(f64, {i32, f64}, false);
      r = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_unary), t),
                       {b.getInt32(static_cast<int32_t>(op)), x});
    }
  }
  if (rk == Reg::NpF32) {
    if (v.k != Reg::NpF32) throw Refuse{"'" + n.spec->name + "' gives a float32 of a non-float32"};
    r = b.CreateFPExt(b.CreateFPTrunc(r, b.getFloatTy()), f64);
  }
  // A NaN of a number that is not NaN (sqrt(-1), log(-1)) or an infinity
  // of a finite one (exp(1000)): Python's functions raise there, NumPy's
  // warn; whichever this call is, the general path's.
  llvm::Value* nan_out = b.CreateAnd(b.CreateFCmpUNO(r, r), b.CreateFCmpORD(x, x));
  llvm::Value* inf = llvm::ConstantFP::getInfinity(f64);
  llvm::Value* inf_out =
      b.CreateAnd(b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, r), inf),
                  b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), inf));
  bail_if(b.CreateOr(nan_out, inf_out));
  count(n.slot);
  return CV{rk, r};
}

CV Gen::native_call(const FNode& n) {
  // The function: the object its variable held when the code was made (the
  // helper calls the one it holds at each call, if its result's kind is
  // the same); a variable the loop assigns keeps the loop interpreted.
  const int fr = n.reg;
  std::function<bool(const FNode&)> assigns = [&](const FNode& x) {
    if ((x.op == Op::Assign || x.op == Op::Append) && x.reg == fr) return true;
    for (const FNode& k : x.kids)
      if (assigns(k)) return true;
    return false;
  };
  if (regs[static_cast<size_t>(fr)].k != Reg::Obj || assigns(loop_cond) || assigns(loop_body))
    throw Refuse{"a call of a recursive function the loop may change"};
  const Value& fv = objects[static_cast<size_t>(regs[static_cast<size_t>(fr)].a)];
  const Closure* closure =
      fv.is_function() ? dynamic_cast<const Closure*>(fv.as_function().get()) : nullptr;
  if (!closure) throw Refuse{"a call of what is not a jit function"};
  if (n.kids.size() > 7) throw Refuse{"a recursive function called with more than 7 arguments"};
  std::vector<CV> args;
  std::vector<uint8_t> kinds;
  for (const FNode& k : n.kids) {
    CV v = eval(k);
    if (v.k == kDyn || v.s || !is_scalar(static_cast<Reg::Kind>(v.k)))
      throw Refuse{"a recursive function called with what is not a number of one kind"};
    args.push_back(v);
    kinds.push_back(static_cast<uint8_t>(v.k));
  }
  uint8_t ret = Reg::Undef;
  if (!native_call_prepare(*closure, kinds, ret))
    throw Refuse{"'" + closure->code().name + "' has no native code for these arguments"};
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  const auto nwords = static_cast<int64_t>(std::max<size_t>(args.size(), 1));
  llvm::Value* words = e.CreateAlloca(i64, b.getInt64(nwords));
  llvm::Value* result = e.CreateAlloca(i64);
  for (size_t i = 0; i < args.size(); ++i)
    b.CreateStore(to_payload(args[i]), b.CreateConstInBoundsGEP1_64(i64, words, i));
  uint64_t packed = args.size() | static_cast<uint64_t>(ret) << 4;
  for (size_t i = 0; i < kinds.size(); ++i)
    packed |= static_cast<uint64_t>(kinds[i]) << (8 * i + 8);
  llvm::Value* obj = b.CreateSExt(
      b.CreateTrunc(b.CreateLoad(i64, field(regp, static_cast<int64_t>(static_cast<size_t>(fr) *
                                                                        sizeof(Reg) + 8),
                                            i64)),
                    i32),
      i64);
  // The callee's entry, found and checked by native_loop_callee at the
  // site's first call in this native call (and again when the register
  // holds another object), then called directly: the frames its guards
  // read change only when the call returns. Its context: the status word
  // and an empty undo log (numbers only: the code writes nothing).
  llvm::Value* known_obj = e.CreateAlloca(i64);
  llvm::Value* known_entry = e.CreateAlloca(i8p);
  llvm::Value* nctx = e.CreateAlloca(i64, b.getInt64(4));
  e.CreateStore(e.getInt64(INT64_MIN), known_obj);  // no object index (an i32)
  auto* entry_t = llvm::FunctionType::get(
      i32, {i64->getPointerTo(), i64->getPointerTo(), i32->getPointerTo()}, false);
  llvm::BasicBlock* find = llvm::BasicBlock::Create(ctx, "callee_find", fn);
  llvm::BasicBlock* call = llvm::BasicBlock::Create(ctx, "callee_call", fn);
  llvm::BasicBlock* from = b.GetInsertBlock();
  llvm::Value* had = b.CreateLoad(i8p, known_entry);
  b.CreateCondBr(b.CreateICmpEQ(b.CreateLoad(i64, known_obj), obj), call, find);
  b.SetInsertPoint(find);
  auto* t = llvm::FunctionType::get(i8p, {i8p, i64, i64}, false);
  llvm::Value* found = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_loop_callee), t),
                                    {cptr, obj, b.getInt64(packed)});
  bail_if(b.CreateIsNull(found));
  b.CreateStore(found, known_entry);
  b.CreateStore(obj, known_obj);
  llvm::BasicBlock* found_at = b.GetInsertBlock();
  b.CreateBr(call);
  b.SetInsertPoint(call);
  llvm::PHINode* entry_p = b.CreatePHI(i8p, 2);
  entry_p->addIncoming(had, from);
  entry_p->addIncoming(found, found_at);
  for (int64_t w = 0; w < 4; ++w) b.CreateStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(i64, nctx, w));
  llvm::Value* status = b.CreateCall(
      entry_t, b.CreateBitCast(entry_p, entry_t->getPointerTo()),
      {words, result, b.CreateBitCast(nctx, i32->getPointerTo())});
  bail_if(b.CreateICmpNE(status, b.getInt32(0)));
  llvm::Value* w = b.CreateLoad(i64, result);
  const auto rk = static_cast<Reg::Kind>(ret);
  if (is_bool(rk)) return CV{rk, b.CreateICmpNE(w, b.getInt64(0))};
  if (is_int(rk)) return CV{rk, w};
  return CV{rk, b.CreateBitCast(w, f64)};
}

bool Gen::small_int_compare_of(const FNode& n) {
  if (n.fast < Fast::lt || n.fast > Fast::ne) return false;
  auto small = [&](const FNode& k) {
    const DType dt = narrow_of(k);
    return narrow_int(k) && dt != DType::int32;  // int32 elements have a kind (NpI32)
  };
  return small(n.kids[0]) || small(n.kids[1]);
}

CV Gen::small_int_compare(const FNode& n) {
  // Each operand in order: an element as stored, widened exactly (every value of these
  // dtypes is an int64 and a double), or a number. The comparison of NumPy's scalar
  // with any number is NumPy's exact one, with no overflow whatever the other's value.
  struct Side {
    llvm::Value* v;
    bool floating;
  };
  auto side = [&](const FNode& k) -> Side {
    if (narrow_int(k)) {
      const DType dt = narrow_of(k);
      llvm::Value* v = narrow_read(k);
      return {is_unsigned_dt(dt) ? b.CreateZExt(v, i64) : b.CreateSExt(v, i64), false};
    }
    CV x = eval(k);
    const auto xk = static_cast<Reg::Kind>(x.k);
    if (x.k == kDyn || !(is_int(xk) || is_float(xk)))
      throw Refuse{"a comparison of a small int element with what is not an int or a float"};
    return {x.v, is_float(xk)};
  };
  Side x = side(n.kids[0]);
  Side y = side(n.kids[1]);
  llvm::Value* r;
  if (x.floating || y.floating) {
    llvm::Value* fx = x.floating ? x.v : b.CreateSIToFP(x.v, f64);
    llvm::Value* fy = y.floating ? y.v : b.CreateSIToFP(y.v, f64);
    switch (n.fast) {
      case Fast::lt: r = b.CreateFCmpOLT(fx, fy); break;
      case Fast::le: r = b.CreateFCmpOLE(fx, fy); break;
      case Fast::gt: r = b.CreateFCmpOGT(fx, fy); break;
      case Fast::ge: r = b.CreateFCmpOGE(fx, fy); break;
      case Fast::eq: r = b.CreateFCmpOEQ(fx, fy); break;
      default: r = b.CreateFCmpUNE(fx, fy); break;
    }
  } else {
    switch (n.fast) {
      case Fast::lt: r = b.CreateICmpSLT(x.v, y.v); break;
      case Fast::le: r = b.CreateICmpSLE(x.v, y.v); break;
      case Fast::gt: r = b.CreateICmpSGT(x.v, y.v); break;
      case Fast::ge: r = b.CreateICmpSGE(x.v, y.v); break;
      case Fast::eq: r = b.CreateICmpEQ(x.v, y.v); break;
      default: r = b.CreateICmpNE(x.v, y.v); break;
    }
  }
  count(n.counter);
  return CV{Reg::NpBool, r};
}

}  // namespace tessera::native_gen
