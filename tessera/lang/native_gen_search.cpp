// Gen (native_gen.hpp): np.searchsorted(a, v[, side]) of a 1-d array
// variable, or of a row of one (`cdf[i]`), and one number: a binary search
// emitted in the code, comparing in the dtype NumPy compares in (the array's
// dtype promoted with the value's, a Python number counting as its own
// dtype: a float32 array searched for 0.1 compares in float64) with NumPy's
// order (every NaN after every number).
#include "tessera/lang/native_gen.hpp"

#include <string>

#include "tessera/core/dtype.hpp"

namespace tessera::native_gen {

namespace {

// The LLVM type a value of `dt` is compared as (bool: i1).
llvm::Type* search_type(llvm::IRBuilder<>& b, DType dt) {
  switch (dt) {
    case DType::float64:
      return b.getDoubleTy();
    case DType::float32:
      return b.getFloatTy();
    case DType::int64:
      return b.getInt64Ty();
    case DType::int32:
      return b.getInt32Ty();
    case DType::bool_:
      return b.getInt1Ty();
    default:
      return nullptr;
  }
}

bool search_float(DType dt) { return dt == DType::float64 || dt == DType::float32; }

// `x` (held as search_type(from)) as a value of `to`, as NumPy's astype.
llvm::Value* search_cast(llvm::IRBuilder<>& b, llvm::Value* x, DType from, DType to) {
  llvm::Type* t = search_type(b, to);
  if (from == to) return x;
  if (search_float(to)) {
    if (search_float(from)) return to == DType::float64 ? b.CreateFPExt(x, t) : b.CreateFPTrunc(x, t);
    return from == DType::bool_ ? b.CreateUIToFP(x, t) : b.CreateSIToFP(x, t);
  }
  if (from == DType::bool_) return b.CreateZExt(x, t);
  return to == DType::int64 ? b.CreateSExt(x, t) : b.CreateTrunc(x, t);
}

// NumPy's sort order in `dt`: x < y, with NaN after every number.
llvm::Value* search_less(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, DType dt) {
  if (search_float(dt))
    return b.CreateOr(b.CreateFCmpOLT(x, y), b.CreateAnd(b.CreateFCmpUNO(y, y), b.CreateFCmpORD(x, x)));
  return dt == DType::bool_ ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y);
}

}  // namespace

CV Gen::searchsorted(const FNode& n) {
  bool right = false;
  if (n.kids.size() == 3) {
    const FNode& s = n.kids[2];
    if (s.op != Op::Const || s.constant.k != Reg::Obj || !s.const_arg || !s.const_arg->is_string())
      throw Refuse{"searchsorted's side is not a constant string"};
    const std::string& side = s.const_arg->as_string();
    if (side != "left" && side != "right")
      throw Refuse{"searchsorted's side is neither 'left' nor 'right'"};  // the primitive's error
    right = side == "right";
  }
  // The array: its register, and the offset of its first element (a row's).
  const FNode& a = n.kids[0];
  const bool row = a.op == Op::GetItem && a.kids.size() >= 2 && arr_var(a.kids[0]);
  if (!arr_var(a) && !row)
    throw Refuse{"searchsorted of what is not an array variable or a row of one"};
  const int r = row ? a.kids[0].reg : a.reg;
  const ArrT& e = atype[r];
  const size_t nidx = row ? a.kids.size() - 1 : 0;
  if (!e.indexable || static_cast<size_t>(e.nd) != nidx + 1)
    throw Refuse{"searchsorted of an array that is not 1-d"};
  llvm::Type* et = search_type(b, e.dt);
  if (!et) throw Refuse{std::string("searchsorted of an array of dtype ") + std::string(dtype_name(e.dt))};
  if (rows.count(r) && maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
  llvm::Value* first = b.getInt64(0);
  if (row) {
    first = element_offset(a, r, 1, nidx);
    count(a.counter);
    for (int c : a.also_count) count(c);
  }
  const size_t d = nidx;
  llvm::Value* len = ashape(r, d);
  llvm::Value* stride = astride(r, d);
  llvm::Type* mt = e.dt == DType::bool_ ? i8 : et;  // in memory
  llvm::Value* p = b.CreateInBoundsGEP(mt, b.CreateBitCast(abase(r), mt->getPointerTo()), first);

  // The value, held as its own dtype's type, then both in the dtype compared.
  CV v = eval(n.kids[1]);
  const auto vk = static_cast<Reg::Kind>(v.k);
  if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"searchsorted of a value that is not a number"};
  DType vdt;
  llvm::Value* x = v.v;
  if (is_bool(vk)) {
    vdt = DType::bool_;
  } else if (vk == Reg::NpI32) {
    vdt = DType::int32, x = b.CreateTrunc(x, i32);
  } else if (is_int(vk)) {
    vdt = DType::int64;
  } else if (vk == Reg::NpF32) {
    vdt = DType::float32, x = b.CreateFPTrunc(x, b.getFloatTy());  // exact: a float32's value
  } else {
    vdt = DType::float64;
  }
  const DType ct = promote(e.dt, vdt);
  if (!search_type(b, ct)) throw Refuse{"searchsorted compares in another dtype"};
  x = search_cast(b, x, vdt, ct);

  // lo, hi = 0, len; while lo < hi: mid = (lo + hi) // 2; go right of mid
  // when a[mid] < x (left) or not x < a[mid] (right).
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "search", fn);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "search_step", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "search_done", fn);
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::PHINode* lo = b.CreatePHI(i64, 2);
  llvm::PHINode* hi = b.CreatePHI(i64, 2);
  lo->addIncoming(b.getInt64(0), pre);
  hi->addIncoming(len, pre);
  b.CreateCondBr(b.CreateICmpSLT(lo, hi), body, done);
  b.SetInsertPoint(body);
  llvm::Value* mid = b.CreateAdd(lo, b.CreateLShr(b.CreateSub(hi, lo), 1));
  llvm::Value* el = b.CreateLoad(mt, b.CreateGEP(mt, p, b.CreateMul(mid, stride)));
  if (e.dt == DType::bool_) el = b.CreateICmpNE(el, b.getInt8(0));
  el = search_cast(b, el, e.dt, ct);
  llvm::Value* go_right = right ? b.CreateNot(search_less(b, x, el, ct)) : search_less(b, el, x, ct);
  lo->addIncoming(b.CreateSelect(go_right, b.CreateAdd(mid, b.getInt64(1)), lo), body);
  hi->addIncoming(b.CreateSelect(go_right, hi, mid), body);
  b.CreateBr(head);
  b.SetInsertPoint(done);
  count(n.slot);
  return CV{Reg::NpInt, lo};
}

}  // namespace tessera::native_gen
