// Gen (native_gen.hpp): arrays. Array registers' descriptors (fixed for
// the call, or rebound in allocas), rows and allocations, element offsets,
// reads and writes with NumPy's casts (float32 and narrow int elements too),
// astype, and the log of element writes (one by one, or the array copied).
#include "tessera/lang/native_gen.hpp"

#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tessera/lang/native_arrays.hpp"

namespace tessera::native_gen {

llvm::Value* Gen::ashape(int r, size_t d) {
  return slot_base[r] ? b.CreateLoad(i64, slot_shape[r][d]) : arr_shape[r][d];
}

llvm::Value* Gen::astride(int r, size_t d) {
  if (atype[r].unit_last && d + 1 == static_cast<size_t>(atype[r].nd)) return b.getInt64(1);
  return slot_base[r] ? b.CreateLoad(i64, slot_stride[r][d]) : arr_stride[r][d];
}

llvm::Value* Gen::apay(int r) {
  return slot_base[r] ? b.CreateLoad(i64, slot_pay[r]) : arr_payload[r];
}

llvm::Value* Gen::fresh_of(int r) {
  if (!slot_fresh[r]) return b.getFalse();
  return b.CreateLoad(i1, slot_fresh[r]);
}

void Gen::ensure_slots(int r) {
  if (slot_base[r]) return;
  // With initial values: called from build(), still in the entry block.
  const bool init = arr_base[r] != nullptr;
  llvm::IRBuilder<> eb(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::IRBuilder<>& e = init ? b : eb;
  auto slot = [&](llvm::Type* t, llvm::Value* v) {
    llvm::Value* a = e.CreateAlloca(t);
    if (v) e.CreateStore(v, a);
    return a;
  };
  slot_base[r] = slot(i8p, arr_base[r]);
  slot_pay[r] = slot(i64, arr_payload[r]);
  slot_fresh[r] = slot(i1, e.getFalse());
  for (int d = 0; d < kMaxDims; ++d) {
    slot_shape[r].push_back(slot(i64, init ? arr_shape[r][d] : nullptr));
    slot_stride[r].push_back(slot(i64, init ? arr_stride[r][d] : nullptr));
  }
  llvm::Value*& flag = snapped[r];
  if (!flag) flag = slot(i1, e.getFalse());
}

void Gen::set_array(int r, const ArrT& t, llvm::Value* entry, llvm::Value* desc, int q) {
  if (kind[r] == Reg::Undef) {
    kind[r] = Reg::Arr;
    atype[r] = t;
  }
  const ArrT& rt = atype[r];
  if (kind[r] != Reg::Arr || rt.dt != t.dt || rt.nd != t.nd || rt.indexable != t.indexable ||
      (rt.writable && !t.writable)) {
    bail_if(b.getTrue());  // another kind of value: the interpreter's
    return;
  }
  ensure_slots(r);
  if (rt.unit_last && (desc || !t.unit_last)) {
    // An array whose last stride is not 1 in a register compiled for one
    // that is: the interpreter's (a bail).
    const size_t d = static_cast<size_t>(t.nd - 1);
    llvm::Value* st = desc ? b.CreateLoad(i64, field(desc, offsetof(NativeArray, strides) + 8 * d, i64))
                           : astride(q, d);
    llvm::Value* sh = desc ? b.CreateLoad(i64, field(desc, offsetof(NativeArray, shape) + 8 * d, i64))
                           : ashape(q, d);
    bail_if(b.CreateAnd(b.CreateICmpNE(st, b.getInt64(1)), b.CreateICmpSGT(sh, b.getInt64(1))));
  }
  if (desc) {
    b.CreateStore(b.CreateLoad(i8p, field(desc, offsetof(NativeArray, base), i8p)), slot_base[r]);
    for (int d = 0; d < t.nd; ++d) {
      b.CreateStore(b.CreateLoad(i64, field(desc, offsetof(NativeArray, shape) + 8 * d, i64)),
                    slot_shape[r][d]);
      b.CreateStore(b.CreateLoad(i64, field(desc, offsetof(NativeArray, strides) + 8 * d, i64)),
                    slot_stride[r][d]);
    }
    b.CreateStore(entry, slot_pay[r]);
    b.CreateStore(b.getTrue(), slot_fresh[r]);
    b.CreateStore(b.getTrue(), made_any);
  } else {
    // Loaded before any store: q may be r's own operand (u = u).
    llvm::Value* base = abase(q);
    llvm::Value* pay = apay(q);
    llvm::Value* fr = fresh_of(q);
    std::vector<llvm::Value*> sh, st;
    for (int d = 0; d < t.nd; ++d) {
      sh.push_back(ashape(q, d));
      st.push_back(astride(q, d));
    }
    b.CreateStore(base, slot_base[r]);
    b.CreateStore(pay, slot_pay[r]);
    b.CreateStore(fr, slot_fresh[r]);
    for (int d = 0; d < t.nd; ++d) {
      b.CreateStore(sh[d], slot_shape[r][d]);
      b.CreateStore(st[d], slot_stride[r][d]);
    }
  }
  // Another array: not copied to the log yet in this call.
  b.CreateStore(b.getFalse(), snapped[r]);
  b.CreateStore(b.getTrue(), def[r]);
  b.CreateStore(b.getInt8(1), asg[r]);
}

void Gen::set_row(int r, const RowOf& row, const FNode& g) {
  const int x = row.from;
  if (kind[x] != Reg::Arr || !atype[x].indexable)
    throw Refuse{"a row of what is not an array variable"};
  const ArrT& xt = atype[x];
  const ArrT t{xt.dt, xt.nd - static_cast<int>(row.nidx), xt.writable, true, xt.unit_last};
  if (kind[r] == Reg::Undef) {
    kind[r] = Reg::Arr;
    atype[r] = t;
  }
  const ArrT& rt = atype[r];
  if (kind[r] != Reg::Arr || rt.dt != t.dt || rt.nd != t.nd || !rt.indexable ||
      (rt.writable && !t.writable) || (rt.unit_last && !t.unit_last)) {
    bail_if(b.getTrue());  // another kind of value: the interpreter's
    return;
  }
  ensure_slots(r);
  llvm::Value*& off_slot = row_off[r];
  if (!off_slot) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    off_slot = e.CreateAlloca(i64);
    e.CreateStore(e.getInt64(0), off_slot);
  }
  llvm::Value* off = b.getInt64(0);
  for (size_t k = 0; k < row.nidx; ++k) {
    CV i = eval(g.kids[1 + k]);
    if (!is_int(static_cast<Reg::Kind>(i.k))) throw Refuse{"an index that is not an int"};
    llvm::Value* ext = ashape(x, k);
    llvm::Value* j =
        b.CreateSelect(b.CreateICmpSLT(i.v, b.getInt64(0)), b.CreateAdd(i.v, ext), i.v);
    bail_if(b.CreateICmpUGE(j, ext));  // the general path's IndexError
    off = b.CreateAdd(off, b.CreateMul(j, astride(x, k)));
  }
  const int64_t size = dtype_size(xt.dt);
  std::vector<llvm::Value*> sh, st;
  for (int d = 0; d < t.nd; ++d) {
    sh.push_back(ashape(x, row.nidx + static_cast<size_t>(d)));
    st.push_back(astride(x, row.nidx + static_cast<size_t>(d)));
  }
  b.CreateStore(b.CreateInBoundsGEP(i8, abase(x), b.CreateMul(off, b.getInt64(size))),
                slot_base[r]);
  for (int d = 0; d < t.nd; ++d) {
    b.CreateStore(sh[static_cast<size_t>(d)], slot_shape[r][static_cast<size_t>(d)]);
    b.CreateStore(st[static_cast<size_t>(d)], slot_stride[r][static_cast<size_t>(d)]);
  }
  b.CreateStore(b.getInt64(-1), slot_pay[r]);
  b.CreateStore(b.getFalse(), slot_fresh[r]);
  b.CreateStore(off, off_slot);
  b.CreateStore(b.getFalse(), snapped[r]);
  b.CreateStore(b.getTrue(), def[r]);
  b.CreateStore(b.getInt8(1), asg[r]);
  count(g.counter);
  for (int c : g.also_count) count(c);
}

bool Gen::alloc_name(const FNode& n) {
  if (n.op != Op::Call || !n.spec || (n.kids.size() != 1 && n.shape_items < 0)) return false;
  const std::string& m = n.spec->name;
  return m == "zeros" || m == "ones" || m == "empty" || m == "zeros_like" ||
         m == "ones_like" || m == "empty_like" || m == "copy" || m == "copy_value";
}

bool Gen::alloc_type(const FNode& n, ArrT& t) {
  if (!alloc_name(n)) return false;
  const std::string& m = n.spec->name;
  if (m == "zeros" || m == "ones" || m == "empty") {
    DType dt = DType::float64;
    if (n.const_arg) {
      try {
        dt = dtype_from_name(n.const_arg->as_string());
      } catch (...) {
        return false;  // the primitive's error to report
      }
    }
    const int nd = n.shape_items >= 0 ? n.shape_items : 1;
    if (nd == 0) return false;  // a 0-d result is a scalar register
    t = ArrT{dt, nd, true, true, true};  // C order (checked when made: set_array)
    return true;
  }
  if (!arr_var(n.kids[0])) return false;
  const ArrT& x = atype[n.kids[0].reg];
  if (!x.indexable || x.nd == 0) return false;  // a 0-d copy is a scalar register
  t = ArrT{x.dt, x.nd, true, true};
  return true;
}

void Gen::alloc_into(int r, const FNode& n, const ArrT& t) {
  llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  // Regs: {kind, payload} each
  llvm::Value* arg = e.CreateAlloca(i64, e.getInt32(2 * kMaxDims));
  llvm::Value* desc = e.CreateAlloca(i8, e.getInt32(sizeof(NativeArray)));
  if (n.kids.size() > static_cast<size_t>(kMaxDims))
    throw Refuse{"a shape of more than 4 extents"};
  for (size_t k = 0; k < n.kids.size(); ++k) {
    CV v = eval(n.kids[k]);
    llvm::Value* at = b.CreateInBoundsGEP(i64, arg, b.getInt64(2 * k));
    if (v.k == Reg::Arr && n.shape_items < 0) {
      b.CreateStore(b.getInt64(Reg::Arr), at);
    } else if (v.k != kDyn && is_int(static_cast<Reg::Kind>(v.k))) {
      b.CreateStore(b.CreateZExt(kind_of(v), i64), at);
    } else {
      throw Refuse{"'" + n.spec->name + "' of what is not an int or an array variable"};
    }
    b.CreateStore(to_payload(v), b.CreateInBoundsGEP(i64, at, b.getInt64(1)));
  }
  static const std::map<std::string, NativeAlloc, std::less<>> ops = {
      {"zeros", NativeAlloc::zeros},           {"ones", NativeAlloc::ones},
      {"empty", NativeAlloc::empty},           {"zeros_like", NativeAlloc::zeros_like},
      {"ones_like", NativeAlloc::ones_like},   {"empty_like", NativeAlloc::empty_like},
      {"copy", NativeAlloc::copy},             {"copy_value", NativeAlloc::copy}};
  const NativeAlloc op = ops.at(n.spec->name);
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i8p, i64, i64, i64, i8p}, false);
  llvm::Value* entry = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_alloc), ft),
      {cptr, b.getInt64(static_cast<int64_t>(op)), b.CreateBitCast(arg, i8p),
       b.getInt64(static_cast<int64_t>(n.kids.size())),
       b.getInt64(static_cast<int64_t>(t.dt)), b.getInt64(t.nd), desc});
  bail_if(b.CreateICmpSLT(entry, b.getInt64(0)));
  count(n.slot);
  set_array(r, t, entry, desc, -1);
}

llvm::Type* Gen::narrow_type(DType dt) {
  switch (dt) {
    case DType::float32:
      return b.getFloatTy();
    case DType::int32:
    case DType::uint32:
      return i32;
    case DType::int16:
    case DType::uint16:
      return b.getInt16Ty();
    case DType::int8:
    case DType::uint8:
      return i8;
    default:
      return nullptr;
  }
}

bool Gen::is_unsigned_dt(DType dt) {
  return dt == DType::uint8 || dt == DType::uint16 || dt == DType::uint32;
}

DType Gen::narrow_of(const FNode& n) {
  if (n.op != Op::GetItem || !arr_var(n.kids[0])) return DType::float64;
  const ArrT& e = atype[n.kids[0].reg];
  const size_t nidx = n.kids.size() - 1;
  if (!narrow_type(e.dt) || !e.indexable || static_cast<size_t>(e.nd) != nidx || nidx == 0)
    return DType::float64;
  return e.dt;
}

bool Gen::narrow_int(const FNode& n) {
  const DType dt = narrow_of(n);
  return dt != DType::float64 && dt != DType::float32;
}

bool Gen::exact_cast(DType from, DType to) {
  if (from == to || to == DType::float64) return true;
  return to == DType::int64 && from != DType::float32;
}

llvm::Value* Gen::narrow_read(const FNode& n) {
  const int r = n.kids[0].reg;
  llvm::Type* t = narrow_type(atype[r].dt);
  llvm::Value* off = element_offset(n, r, 1, n.kids.size() - 1);
  llvm::Value* v =
      b.CreateLoad(t, b.CreateInBoundsGEP(t, b.CreateBitCast(abase(r), t->getPointerTo()), off));
  count(n.counter);
  return v;
}

llvm::Value* Gen::cast_exact(llvm::Value* v, DType from, DType to, llvm::Type* t) {
  if (from == to) return v;
  if (from == DType::float32) return b.CreateFPExt(v, t);
  if (to == DType::float64)
    return is_unsigned_dt(from) ? b.CreateUIToFP(v, t) : b.CreateSIToFP(v, t);
  return is_unsigned_dt(from) ? b.CreateZExt(v, t) : b.CreateSExt(v, t);
}

llvm::Value* Gen::element_offset(const FNode& n, int r, size_t first, size_t nidx) {
  llvm::Value* off = b.getInt64(0);
  for (size_t k = 0; k < nidx; ++k) {
    const FNode& ik = n.kids[first + k];
    CV i;
    if (narrow_int(ik)) {  // x[idx[k]] of an int32 (int16, uint8, ...) idx
      const DType dt = narrow_of(ik);
      llvm::Value* v = narrow_read(ik);
      i = CV{Reg::NpInt, is_unsigned_dt(dt) ? b.CreateZExt(v, i64) : b.CreateSExt(v, i64)};
    } else {
      i = eval(ik);
    }
    if (!is_int(static_cast<Reg::Kind>(i.k))) throw Refuse{"an index that is not an int"};
    if (is_proven(n)) {  // in [0, extent) for every turn: checked before the loop
      llvm::Value* j = i.v;
      if (wrap_proven.count(&n))  // or in [-extent, extent) (index_in)
        j = b.CreateSelect(b.CreateICmpSLT(j, b.getInt64(0)), b.CreateAdd(j, ashape(r, k)), j);
      off = b.CreateAdd(off, b.CreateMul(j, astride(r, k)));
      continue;
    }
    llvm::Value* ext = ashape(r, k);
    llvm::Value* j =
        b.CreateSelect(b.CreateICmpSLT(i.v, b.getInt64(0)), b.CreateAdd(i.v, ext), i.v);
    // j < 0 or j >= extent, as one unsigned comparison
    bail_if(b.CreateICmpUGE(j, ext));
    off = b.CreateAdd(off, b.CreateMul(j, astride(r, k)));
  }
  return off;
}

CV Gen::getitem(const FNode& n) {
  // x.shape[d] of an array variable with a constant d: a Python int.
  const FNode& x = n.kids[0];
  if (x.op == Op::Call && x.spec->name == "shape" && x.kids.size() == 1 && arr_var(x.kids[0]) &&
      n.kids.size() == 2 && n.kids[1].op == Op::Const && n.kids[1].constant.k == Reg::PyInt) {
    const int r = x.kids[0].reg;
    const ArrT& e = atype[r];
    int64_t d = n.kids[1].constant.i;
    if (d < 0) d += e.nd;
    if (!e.indexable || d < 0 || d >= e.nd) throw Refuse{"x.shape[d] with d out of range"};
    count(x.slot);
    count(n.counter);
    return CV{Reg::PyInt, ashape(r, d)};
  }
  if (n.kids[0].op == Op::Var && unpack_regs.count(n.kids[0].reg)) return unpacked_item(n);
  if (n.kids[0].op == Op::Var && kind[n.kids[0].reg] == Reg::Obj && dict_reg[n.kids[0].reg])
    return dict_item(n);
  if (n.kids.size() == 2 && n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2 &&
      list_var(n.kids[0].kids[0]) && !dict_reg[n.kids[0].kids[0].reg])
    return list2_item(n);
  if (n.kids[0].op == Op::Var && n.kids.size() == 2 && views.count(n.kids[0].reg))
    return view_item(n);
  if (list_var(n.kids[0]) && n.kids.size() == 2) return list_item(n);
  if (n.kids[0].op != Op::Var || kind[n.kids[0].reg] != Reg::Arr)
    throw Refuse{"indexing what is not an array variable"};
  const int r = n.kids[0].reg;
  const ArrT& e = atype[r];
  const size_t nidx = n.kids.size() - 1;
  if (!e.indexable || static_cast<size_t>(e.nd) != nidx)
    throw Refuse{"indexing that does not select one element"};
  if (rows.count(r) && maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
  if (n.cpart) {
    // A part of an element of a complex128 array (fastloop_complex.cpp).
    if (e.dt != DType::complex128) throw Refuse{"a complex part of a real array"};
    llvm::Value* off = element_offset(n, r, 1, nidx);
    llvm::Value* at = b.CreateAdd(b.CreateShl(off, 1), b.getInt64(n.cpart - 1));
    llvm::Value* p = b.CreateBitCast(abase(r), f64->getPointerTo());
    llvm::Value* v = b.CreateLoad(f64, b.CreateInBoundsGEP(f64, p, at));
    count(n.counter);
    for (int c : n.also_count) count(c);
    return CV{Reg::NpFloat, v};
  }
  llvm::Type* t;
  int k;
  switch (e.dt) {
    case DType::float64:
      t = f64, k = Reg::NpFloat;
      break;
    case DType::int64:
      t = i64, k = Reg::NpInt;
      break;
    case DType::bool_:
      t = i8, k = Reg::NpBool;
      break;
    case DType::float32:
      t = b.getFloatTy(), k = Reg::NpF32;
      break;
    default:
      k = int_kind_of(e.dt);
      if (k == Reg::Undef)
        throw Refuse{std::string("an element read of dtype ") + std::string(dtype_name(e.dt))};
      t = b.getIntNTy(static_cast<unsigned>(narrow_int_bits(k)));
  }
  llvm::Value* off = element_offset(n, r, 1, nidx);
  llvm::Value* p = b.CreateBitCast(abase(r), t->getPointerTo());
  llvm::Value* v = b.CreateLoad(t, b.CreateInBoundsGEP(t, p, off));
  if (k == Reg::NpBool) v = b.CreateICmpNE(v, b.getInt8(0));
  if (k == Reg::NpF32) v = b.CreateFPExt(v, f64);
  if (narrow_int_kind(k))
    v = narrow_int_unsigned(k) ? b.CreateZExt(v, i64) : b.CreateSExt(v, i64);
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{k, v};
}

llvm::Value* Gen::float_to_int(llvm::Value* f, llvm::Type* t, bool is_unsigned) {
  llvm::Value* in_range =
      b.CreateAnd(b.CreateFCmpOGE(f, llvm::ConstantFP::get(f64, -9.2233720368547758e18)),
                  b.CreateFCmpOLT(f, llvm::ConstantFP::get(f64, 9.2233720368547758e18)));
  llvm::Value* safe = b.CreateSelect(in_range, f, llvm::ConstantFP::get(f64, 0.0));
  llvm::Value* v = b.CreateTrunc(b.CreateFPToSI(safe, i64), t);
  const unsigned bits = t->getIntegerBitWidth();
  llvm::Value* minimum =
      is_unsigned ? llvm::ConstantInt::get(t, 0)
                  : llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits));
  return b.CreateSelect(in_range, v, minimum);
}

CV Gen::setitem(const FNode& n) {
  if (n.kids[0].op == Op::Var && kind[n.kids[0].reg] == Reg::Obj && dict_reg[n.kids[0].reg])
    return dict_set(n);
  if (list_var(n.kids[0])) return list_setitem(n);
  if (n.kids[0].op != Op::Var || kind[n.kids[0].reg] != Reg::Arr)
    throw Refuse{"an element write to what is not an array variable"};
  if (sort_in_place_of(n)) return sort_in_place(n);
  if (block_write_of(n)) return block_write(n);
  if (slice_write_of(n)) return slice_write(n);
  const int r = n.kids[0].reg;
  // y[i] = x[j] of a float32 or narrow int x, cast exactly: the element as
  // stored (v, a placeholder float, then passes the checks below unused).
  const DType from = narrow_of(n.kids[1]);
  llvm::Value* narrow = nullptr;
  if (from != DType::float64) {
    if (!exact_cast(from, atype[r].dt))
      throw Refuse{std::string("an element of dtype ") + std::string(dtype_name(from)) +
                   " written into one of " + std::string(dtype_name(atype[r].dt))};
    narrow = narrow_read(n.kids[1]);
  }
  CV v = narrow ? CV{Reg::NpFloat, llvm::ConstantFP::get(f64, 0.0)} : eval(n.kids[1]);
  // Python's float or NumPy's float32 by turns: the same element either way
  // (a float32's value is exact as a double).
  if (v.k == kDynF32) v = CV{Reg::PyFloat, v.v};
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"writing a value that is not a number"};
  const ArrT& e = atype[r];
  const size_t nidx = n.kids.size() - 2;
  if (!e.indexable || static_cast<size_t>(e.nd) != nidx || !e.writable)
    throw Refuse{"a write that is not one element of a writable array"};
  // Index kinds as element_index() sees them.
  for (size_t k = 0; k < nidx; ++k) {
    const FNode& i = n.kids[k + 2];
    if (i.op == Op::Const && !is_int(i.constant.k)) throw Refuse{"a non-int index"};
    if (i.op == Op::Var && !is_int(kind[i.reg])) throw Refuse{"a non-int index"};
    // int(v) is a block ending in item(astype(v, "int64")) (its check of v
    // before: _templates.py; item() makes NumPy's scalar Python's int)
    auto conversion = [](const FNode& e) {
      if (e.op == Op::Call && e.spec && e.spec->name == "item" && e.kids.size() == 1)
        return e.kids[0].op == Op::AsType;
      return e.op == Op::AsType;
    };
    const bool converted =
        conversion(i) || (i.op == Op::Block && !i.kids.empty() && conversion(i.kids.back()));
    if (i.op != Op::Const && i.op != Op::Var && i.op != Op::Binary && !converted &&
        !narrow_int(i))
      throw Refuse{"an index expression without native code"};
  }
  llvm::Type* t;
  bool is_unsigned = false;
  switch (e.dt) {
    case DType::float64:
      t = f64;
      break;
    case DType::float32:
      t = b.getFloatTy();
      break;
    case DType::int64:
      t = i64;
      break;
    case DType::int32:
    case DType::int16:
    case DType::int8:
      t = b.getIntNTy(static_cast<unsigned>(dtype_size(e.dt) * 8));
      break;
    case DType::uint8:
    case DType::uint16:
    case DType::uint32:
      t = b.getIntNTy(static_cast<unsigned>(dtype_size(e.dt) * 8)), is_unsigned = true;
      break;
    case DType::bool_:
      t = i8;
      break;
    default:
      throw Refuse{std::string("an element write of dtype ") + std::string(dtype_name(e.dt))};
  }
  llvm::Value* off = element_offset(n, r, 2, nidx);
  // What the interpreter leaves to the general path: NaN or infinity into
  // integers (and below, numbers an integer dtype cannot hold).
  if (is_float(vk) && e.dt != DType::float64 && e.dt != DType::float32 && e.dt != DType::bool_) {
    llvm::Value* finite = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v.v),
                                          llvm::ConstantFP::getInfinity(f64));
    bail_if(b.CreateNot(finite));
  }
  if (is_integer(e.dt) && !is_bool(vk) && !narrow) {
    // A number the dtype cannot hold (store_fits, fastloop_impl.hpp): NumPy's
    // OverflowError, the general path's. Python's ints and floats are
    // checked; NumPy's scalars only into a signed dtype not of their kind.
    const bool sgn = is_signed_integer(e.dt);
    auto np_checked = [&](int k) {
      return sgn && k != int_kind_of(e.dt) && !(e.dt == DType::int64 && k == Reg::NpInt);
    };
    llvm::Value* checked;
    if (vk == Reg::PyInt || vk == Reg::PyFloat) {
      // Python's kind, or NumPy's by turns (s)
      checked = !v.s || np_checked(np_kind(vk)) ? b.getTrue() : b.CreateNot(v.s);
    } else {
      checked = b.getInt1(np_checked(vk));
    }
    const int bits = static_cast<int>(dtype_size(e.dt) * 8);
    llvm::Value* out = nullptr;
    if (is_int(vk)) {
      if (bits < 64) {
        const int64_t lo = sgn ? -(int64_t{1} << (bits - 1)) : 0;
        const int64_t hi = sgn ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
        out = b.CreateOr(b.CreateICmpSLT(v.v, b.getInt64(lo)),
                         b.CreateICmpSGT(v.v, b.getInt64(hi)));
      }
    } else {
      llvm::Value* t = b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, v.v);
      const double lo = sgn ? -std::ldexp(1.0, bits - 1) : 0.0;
      const double end = std::ldexp(1.0, sgn ? bits - 1 : bits);
      out = b.CreateNot(b.CreateAnd(b.CreateFCmpOGE(t, llvm::ConstantFP::get(f64, lo)),
                                    b.CreateFCmpOLT(t, llvm::ConstantFP::get(f64, end))));
    }
    if (out) bail_if(b.CreateAnd(checked, out));
  }
  // element_cast<T>(v)
  llvm::Value* x;
  if (e.dt == DType::bool_) {
    x = b.CreateZExt(truth(v), i8);
  } else if (t == f64 || t == b.getFloatTy()) {
    if (is_float(vk))
      x = t == f64 ? v.v : b.CreateFPTrunc(v.v, t);
    else if (is_int(vk))
      x = b.CreateSIToFP(v.v, t);
    else
      x = b.CreateUIToFP(v.v, t);
  } else {
    if (is_float(vk))
      x = float_to_int(v.v, t, is_unsigned);
    else if (is_int(vk))
      x = b.CreateTrunc(v.v, t);
    else
      x = b.CreateZExt(v.v, t);
  }
  if (narrow) x = cast_exact(narrow, from, e.dt, t);
  llvm::Value* p = b.CreateInBoundsGEP(t, b.CreateBitCast(abase(r), t->getPointerTo()), off);
  const unsigned size = t->getPrimitiveSizeInBits() / 8;
  llvm::Type* it = b.getIntNTy(size * 8);
  if (is_proven(n) && prelogged) {
    // Logged (the whole range it writes) before the loop.
  } else if (sites) {
    // A turn without loops: its writes' old values kept in registers.
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    Site site{e.CreateAlloca(i8p), e.CreateAlloca(it), it};
    b.CreateStore(b.CreateBitCast(p, i8p), site.addr);
    b.CreateStore(b.CreateLoad(it, b.CreateBitCast(p, it->getPointerTo())), site.old);
    sites->push_back(site);
  } else {
    log_unless_fresh(r, p, it, size, "log_old");
  }
  b.CreateStore(x, p);
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{Reg::Arr, nullptr, nullptr, r};
}

bool Gen::sort_in_place_of(const FNode& n) const {
  // x.sort(): `x = setitem(x, sort(x, axis=-1), "...")` as translated
  // (python/tessera/_assignments.py), x a 1-d array variable.
  if (n.kids.size() != 3) return false;
  const FNode& v = n.kids[1];
  const FNode& at = n.kids[2];
  const int r = n.kids[0].reg;
  if (at.op != Op::Const || !at.const_arg || !at.const_arg->is_string() ||
      at.const_arg->as_string() != "...")
    return false;
  if (v.op != Op::Call || !v.spec || v.spec->name != "sort" || v.kids.empty() ||
      v.kids[0].op != Op::Var || v.kids[0].reg != r)
    return false;
  for (size_t k = 1; k < v.kids.size(); ++k) {  // axis -1 or 0; no other argument
    const FNode& a = v.kids[k];
    if (a.op != Op::Const) return false;
    if (a.constant.k == Reg::Nil) continue;
    if (a.constant.k != Reg::PyInt || (a.constant.i != -1 && a.constant.i != 0)) return false;
  }
  return atype[r].indexable && atype[r].nd == 1;
}

CV Gen::sort_in_place(const FNode& n) {
  const int r = n.kids[0].reg;
  const ArrT& e = atype[r];
  if (!e.writable) throw Refuse{"x.sort() of an array that is not writable"};
  const DType dt = e.dt;
  if (dt != DType::float64 && dt != DType::float32 && dt != DType::int64 && dt != DType::bool_ &&
      int_kind_of(dt) == Reg::Undef)
    throw Refuse{std::string("x.sort() of an array of dtype ") + std::string(dtype_name(dt))};
  if (sites) throw Refuse{"x.sort() in a turn without loops"};
  if (rows.count(r)) throw Refuse{"x.sort() of a row view"};
  // The whole array logged once (a copy: a sort may move every element).
  snapshot_once(r);
  auto* t = llvm::FunctionType::get(b.getVoidTy(), {i8p, i64, i64, i32}, false);
  b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_sort_1d), t),
               {b.CreateBitCast(abase(r), i8p), ashape(r, 0), astride(r, 0),
                b.getInt32(static_cast<int32_t>(dt))});
  count_expr(n.kids[1]);
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{Reg::Arr, nullptr, nullptr, r};
}

namespace {

// `x[i, ...]` of an array variable by ints only (no slice, no `...`), fewer
// than its dimensions, or the variable itself (no index): a block of x.
bool int_indexed(const FNode& n, size_t from, size_t nd, size_t& nidx) {
  nidx = n.kids.size() - from;
  if (nidx >= nd) return false;
  for (size_t k = from; k < n.kids.size(); ++k) {
    const FNode& i = n.kids[k];
    if (i.op == Op::Const && !is_int(i.constant.k)) return false;  // `...`, a slice's None
    if (Gen::slice_index(i)) return false;
  }
  return true;
}

}  // namespace

bool Gen::block_of(const FNode& v, int& r, size_t& nidx) {
  if (arr_var(v)) {
    r = v.reg;
    nidx = 0;
    return atype[r].indexable;
  }
  if (v.op != Op::GetItem || v.kids.empty() || !arr_var(v.kids[0])) return false;
  r = v.kids[0].reg;
  return atype[r].indexable && v.kids.size() > 1 &&
         int_indexed(v, 1, static_cast<size_t>(atype[r].nd), nidx);
}

bool Gen::block_write_of(const FNode& n) {
  const ArrT& e = atype[n.kids[0].reg];
  size_t nidx = 0, vidx = 0;
  int y = -1;
  if (!e.indexable || n.kids.size() < 3 || !int_indexed(n, 2, static_cast<size_t>(e.nd), nidx))
    return false;
  return block_of(n.kids[1], y, vidx);
}

llvm::Value* Gen::block_offset(int r, const FNode& n, size_t from) {
  llvm::Value* off = element_offset(n, r, from, n.kids.size() - from);
  return b.CreateInBoundsGEP(i8, b.CreateBitCast(abase(r), i8p),
                             b.CreateMul(off, b.getInt64(dtype_size(atype[r].dt))));
}

CV Gen::block_write(const FNode& n) {
  const int r = n.kids[0].reg;
  const FNode& v = n.kids[1];
  int y = -1;
  size_t vidx = 0;
  block_of(v, y, vidx);
  const ArrT e = atype[r];
  const ArrT s = atype[y];
  const size_t nidx = n.kids.size() - 2;
  const int free = e.nd - static_cast<int>(nidx);
  if (!e.writable) throw Refuse{"a row write into an array that is not writable"};
  if (s.dt != e.dt)
    throw Refuse{std::string("a row write of an array of dtype ") + std::string(dtype_name(s.dt)) +
                 " into one of " + std::string(dtype_name(e.dt))};
  if (s.nd - static_cast<int>(vidx) != free)
    throw Refuse{"a row write of an array of another rank"};
  if (sites) throw Refuse{"a row write in a turn without loops"};
  if (rows.count(r)) throw Refuse{"a row write into a row view"};
  // (A row view not assigned on every path so far: the interpreter's.)
  if (rows.count(y) && maybe_undef[y]) bail_if(b.CreateNot(b.CreateLoad(i1, def[y])));
  // The value's block first, then the destination's (setitem's operands in order).
  llvm::Value* src = vidx == 0 ? b.CreateBitCast(abase(y), i8p) : block_offset(y, v, 1);
  llvm::Value* dst = block_offset(r, n, 2);
  // Another shape: NumPy broadcasts it or raises (the general path's).
  for (int d = 0; d < free; ++d)
    bail_if(b.CreateICmpNE(ashape(y, vidx + static_cast<size_t>(d)),
                           ashape(r, nidx + static_cast<size_t>(d))));
  snapshot_once(r);
  llvm::IRBuilder<> at(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::Value* ds = at.CreateAlloca(i64, at.getInt32(kMaxDims));
  llvm::Value* ss = at.CreateAlloca(i64, at.getInt32(kMaxDims));
  llvm::Value* sh = at.CreateAlloca(i64, at.getInt32(kMaxDims));
  for (int d = 0; d < free; ++d) {
    const auto dd = static_cast<size_t>(d);
    b.CreateStore(astride(r, nidx + dd), b.CreateInBoundsGEP(i64, ds, b.getInt64(d)));
    b.CreateStore(astride(y, vidx + dd), b.CreateInBoundsGEP(i64, ss, b.getInt64(d)));
    b.CreateStore(ashape(y, vidx + dd), b.CreateInBoundsGEP(i64, sh, b.getInt64(d)));
  }
  auto* t = llvm::FunctionType::get(i32, {i8p, i8p, i8p, i8p, i8p, i32, i64}, false);
  llvm::Value* status = b.CreateCall(
      t, fptr(reinterpret_cast<void*>(&native_copy_block), t),
      {dst, b.CreateBitCast(ds, i8p), src, b.CreateBitCast(ss, i8p), b.CreateBitCast(sh, i8p),
       b.getInt32(free), b.getInt64(dtype_size(e.dt))});
  bail_if(b.CreateICmpNE(status, b.getInt32(0)));
  if (vidx > 0) {
    count(v.counter);
    for (int c : v.also_count) count(c);
  }
  count(n.counter);
  for (int c : n.also_count) count(c);
  return CV{Reg::Arr, nullptr, nullptr, r};
}

void Gen::log_unless_fresh(int r, llvm::Value* p, llvm::Type* it, unsigned size,
                           const char* name) {
  if (!slot_fresh[r]) {
    log_or_snapshot(r, p, it, size);
    return;
  }
  llvm::BasicBlock* lg = llvm::BasicBlock::Create(ctx, name, fn);
  llvm::BasicBlock* nx = llvm::BasicBlock::Create(ctx, std::string(name) + "_done", fn);
  b.CreateCondBr(fresh_of(r), nx, lg);
  b.SetInsertPoint(lg);
  log_or_snapshot(r, p, it, size);
  b.CreateBr(nx);
  b.SetInsertPoint(nx);
}

void Gen::log_or_snapshot(int r, llvm::Value* p, llvm::Type* it, unsigned size) {
  llvm::Value*& flag = snapped[r];
  if (!flag) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    flag = e.CreateAlloca(i1);
    e.CreateStore(e.getFalse(), flag);
  }
  llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "log_or_copy", fn);
  llvm::BasicBlock* whole = llvm::BasicBlock::Create(ctx, "copy_instead", fn);
  llvm::BasicBlock* one = llvm::BasicBlock::Create(ctx, "log_one", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "write_logged", fn);
  b.CreateCondBr(b.CreateLoad(i1, flag), done, check);
  b.SetInsertPoint(check);
  llvm::Value* bytes = b.getInt64(size);
  for (int d = 0; d < atype[r].nd; ++d) bytes = b.CreateMul(bytes, ashape(r, static_cast<size_t>(d)));
  llvm::Value* logged = b.CreateShl(b.CreateLoad(i64, undo_n), 4);  // 16 bytes an entry
  b.CreateCondBr(b.CreateICmpSGE(logged, bytes), whole, one, unlikely());
  b.SetInsertPoint(whole);
  snapshot_once(r);
  b.CreateBr(done);
  b.SetInsertPoint(one);
  log_write(p, it, size);
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

void Gen::log_write(llvm::Value* p, llvm::Type* it, unsigned size) {
  llvm::Value* n_now = b.CreateLoad(i64, undo_n);
  llvm::BasicBlock* grow = llvm::BasicBlock::Create(ctx, "grow", fn);
  llvm::BasicBlock* log = llvm::BasicBlock::Create(ctx, "log", fn);
  b.CreateCondBr(b.CreateICmpSGE(n_now, b.CreateLoad(i64, undo_cap)), grow, log, unlikely());
  b.SetInsertPoint(grow);
  {
    auto* gt = llvm::FunctionType::get(i8p, {i8p, i64}, false);
    llvm::Value* np = b.CreateCall(gt, fptr(reinterpret_cast<void*>(&native_grow_undo), gt),
                                   {cptr, n_now});
    b.CreateStore(np, undo_ptr);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
    b.CreateBr(log);
  }
  b.SetInsertPoint(log);
  const uint64_t tag = static_cast<uint64_t>(size == 8 ? 3 : size == 4 ? 2 : 0) << 60;
  llvm::Value* entry =
      b.CreateInBoundsGEP(i64, b.CreateBitCast(b.CreateLoad(i8p, undo_ptr), i64->getPointerTo()),
                          b.CreateShl(n_now, 1));
  b.CreateStore(b.CreateOr(b.CreatePtrToInt(p, i64), b.getInt64(tag)), entry);
  llvm::Value* old = b.CreateLoad(it, b.CreateBitCast(p, it->getPointerTo()));
  b.CreateStore(b.CreateZExt(old, i64), b.CreateInBoundsGEP(i64, entry, b.getInt64(1)));
  b.CreateStore(b.CreateAdd(n_now, b.getInt64(1)), undo_n);
}

CV Gen::astype(const FNode& n) {
  CV v = eval(n.kids[0]);
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"astype of a non-scalar"};
  llvm::Value* strong = n.numpy_scalar ? b.getTrue() : strong_of(v);
  llvm::Value* f = is_float(vk) ? v.v : is_bool(vk) ? b.CreateUIToFP(v.v, f64) : b.CreateSIToFP(v.v, f64);
  CV r;
  switch (n.cast_to) {
    case DType::float32:
      // as the interpreter (FastLoop::Impl::astype): ints past 2**53 bail
      if (is_int(vk)) {
        llvm::Value* big = b.getInt64(int64_t{1} << 53);
        bail_if(b.CreateOr(b.CreateICmpSGT(v.v, big), b.CreateICmpSLT(v.v, b.CreateNeg(big))));
      }
      r = CV{Reg::NpF32, b.CreateFPExt(b.CreateFPTrunc(f, b.getFloatTy()), f64)};
      break;
    case DType::int32: {
      llvm::Value* in_range =
          b.CreateAnd(b.CreateFCmpOGE(f, llvm::ConstantFP::get(f64, -2147483648.0)),
                      b.CreateFCmpOLT(f, llvm::ConstantFP::get(f64, 2147483648.0)));
      bail_if(b.CreateNot(in_range));
      llvm::Value* i = is_int(vk) ? v.v : is_bool(vk) ? b.CreateZExt(v.v, i64)
                                                      : b.CreateFPToSI(f, i64);
      r = CV{Reg::NpI32, i};
      break;
    }
    case DType::int64:
      r = mk(Reg::PyInt, is_int(vk) ? v.v : float_to_int(f, i64, false), strong);
      break;
    case DType::float64:
      r = mk(Reg::PyFloat, f, strong);
      break;
    case DType::int8:
    case DType::uint8:
    case DType::int16:
    case DType::uint16:
    case DType::uint32: {
      // as the interpreter: in the kind's range exact (a float truncated),
      // else a bail
      const int k = int_kind_of(n.cast_to);
      llvm::Value* i;
      if (is_int(vk)) {
        i = v.v;
      } else if (is_bool(vk)) {
        i = b.CreateZExt(v.v, i64);
      } else {
        llvm::Value* t = b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, f);
        llvm::Value* lo = b.CreateFCmpOGE(t, llvm::ConstantFP::get(f64, -2147483648.0));
        llvm::Value* hi = b.CreateFCmpOLT(t, llvm::ConstantFP::get(f64, 4294967296.0));
        bail_if(b.CreateNot(b.CreateAnd(lo, hi)));
        i = b.CreateFPToSI(t, i64);
      }
      bail_if(b.CreateICmpNE(wrap_int(k, i), i));
      r = CV{k, i};
      break;
    }
    default:
      r = mk(Reg::PyBool, truth(v), strong);
      break;
  }
  count(n.counter);
  return r;
}

void Gen::snapshot_once(int r) {
  llvm::Value*& flag = snapped[r];
  if (!flag) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    flag = e.CreateAlloca(i1);
    e.CreateStore(e.getFalse(), flag);
  }
  llvm::BasicBlock* copy = llvm::BasicBlock::Create(ctx, "copy", fn);
  llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "copied", fn);
  b.CreateCondBr(b.CreateOr(b.CreateLoad(i1, flag), fresh_of(r)), next, copy);
  b.SetInsertPoint(copy);
  auto* st = llvm::FunctionType::get(i8p, {i8p, i64, i64}, false);
  llvm::Value* n_at = b.CreateLoad(i64, undo_n);
  b.CreateStore(b.CreateCall(st, fptr(reinterpret_cast<void*>(&native_snapshot), st),
                             {cptr, n_at, apay(r)}),
                undo_ptr);
  b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
  b.CreateStore(b.CreateAdd(n_at, b.getInt64(1)), undo_n);
  b.CreateStore(b.getTrue(), flag);
  b.CreateBr(next);
  b.SetInsertPoint(next);
}

}  // namespace tessera::native_gen
