// The code generator of native calls (native_calls_impl.hpp): one LLVM
// function per (jit function, kinds of its arguments) of a group, the calls
// among them direct calls, so recursion is a plain call; see native_calls.cpp
// for the semantics the code keeps (a status every frame returns on, the undo
// log of its writes). The class's NumPy scalar, array and list parts are in
// native_calls_gen_numpy.inc, native_calls_gen_arrays.inc,
// native_calls_gen_lists.inc and native_calls_gen_fresh.inc, included in it.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_calls_impl.hpp"
#include "tessera/lang/native_calls_undo.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/runtime/interrupt.hpp"

namespace tessera::detail {
namespace {

struct NcVal {
  llvm::Value* v = nullptr;
  NcKind k = NcKind::None;
  // A list: the variable whose descriptor it is (lists are passed by
  // reference; each list variable names one descriptor for good), and
  // whether it is a loop's `iterate(xs)` (a snapshot in the general path).
  int list_slot = -1;
  bool iterated = false;
  // A list no variable holds (a display, a `+`, a call's result, a
  // comprehension's hidden list as its value); `[]` whose kind is open.
  bool fresh = false;
  bool uncommitted = false;
  // A call's list(result, lists...) or pop's (list, item): taken apart by
  // getitem(pack, k) at compile time.
  std::shared_ptr<std::vector<NcVal>> pack{};
};

// One function of the group: a (code, kinds) the module defines.
struct NcFunc {
  const FunctionCode* code;
  std::vector<NcKind> args;
  NcKind ret;
  Frame* env;
  llvm::Function* fn = nullptr;
  std::vector<int> ret_lists{};  // the parameters given back (nc_ret_lists)
};

class NcCompiler {
 public:
  NcCompiler(llvm::LLVMContext& c, llvm::Module& m, std::map<NcKey, NcKind>& ret_guess)
      : ctx_(c), mod_(m), b_(c), ret_guess_(ret_guess) {}

  std::string why;
  SourceLoc where;
  // Set when a function's return kind was guessed wrong: compile again.
  bool retry = false;
  bool makes_lists = false;  // the code makes new lists (nc_list_new)
  std::vector<NcFunc> funcs;
  std::vector<NcStep> steps;

  bool compile_group(const FunctionCode& code, Frame* env, const std::vector<NcKind>& args) {
    function_for(code, env, args);
    for (cur_ = 0; cur_ < funcs.size(); ++cur_) {
      if (compile_function()) continue;
      // Refused on a call's result kind still guessed (a list's): the
      // functions after may settle it, and then it is compiled again.
      for (++cur_; cur_ < funcs.size() && !retry; ++cur_) compile_function();
      return false;
    }
    return true;
  }

 private:
  llvm::Type* type_of(NcKind k) {
    if (nc_is_array(k) || nc_is_list(k))
      return llvm::PointerType::getUnqual(b_.getInt64Ty());  // its descriptor
    switch (k) {
      case NcKind::Int:
      case NcKind::NpInt64:
      case NcKind::NpInt32:
        return b_.getInt64Ty();
      case NcKind::Float:
      case NcKind::NpFloat64:
        return b_.getDoubleTy();
      case NcKind::NpFloat32:
        return b_.getFloatTy();
      default:
        return b_.getInt1Ty();
    }
  }

  // The element type an array of dtype index `dt` stores.
  llvm::Type* element_type(int dt) {
    switch (kNcDtypes[dt]) {
      case DType::float64:
        return b_.getDoubleTy();
      case DType::float32:
        return b_.getFloatTy();
      case DType::int64:
        return b_.getInt64Ty();
      case DType::int32:
        return b_.getInt32Ty();
      default:
        return b_.getInt8Ty();
    }
  }

  // Word `i` of an array's descriptor: 0 the address of element (0, ...),
  // 1 writable, 2.. the shape, then the strides in bytes.
  llvm::Value* desc_word(NcVal a, int64_t i) {
    // Descriptors do not change during a call: loads LLVM may hoist past writes.
    llvm::LoadInst* w =
        b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), a.v, i));
    w->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
    return w;
  }

  // Appends (address, old bytes, size) of the element at `at` to the undo log.
  void log_write(llvm::Value* at, llvm::Type* elem, int64_t bytes) {
    llvm::Function* fn = funcs[cur_].fn;
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::Value* ctx = b_.CreateBitCast(fn->getArg(0), llvm::PointerType::getUnqual(i64));
    llvm::Value* used_at = b_.CreateConstGEP1_64(i64, ctx, 2);
    llvm::Value* used = b_.CreateLoad(i64, used_at);
    llvm::Value* full = b_.CreateICmpSGT(b_.CreateAdd(used, b_.getInt64(3)),
                                         b_.CreateLoad(i64, b_.CreateConstGEP1_64(i64, ctx, 3)));
    auto* grow = llvm::BasicBlock::Create(ctx_, "grow", fn);
    auto* room = llvm::BasicBlock::Create(ctx_, "room", fn);
    b_.CreateCondBr(full, grow, room);
    b_.SetInsertPoint(grow);
    auto* i32p = llvm::PointerType::getUnqual(b_.getInt32Ty());
    auto* grow_ty = llvm::FunctionType::get(b_.getVoidTy(), {i32p}, false);
    b_.CreateCall(grow_ty,
                  b_.CreateIntToPtr(b_.getInt64(reinterpret_cast<uint64_t>(&nc_grow_log)),
                                    llvm::PointerType::getUnqual(grow_ty)),
                  {fn->getArg(0)});
    b_.CreateBr(room);
    b_.SetInsertPoint(room);
    used = b_.CreateLoad(i64, used_at);  // the helper may have reset it
    llvm::Value* log = b_.CreateIntToPtr(b_.CreateLoad(i64, b_.CreateConstGEP1_64(i64, ctx, 1)),
                                         llvm::PointerType::getUnqual(i64));
    llvm::Value* old = b_.CreateLoad(elem, at);
    if (elem->isDoubleTy()) {
      old = b_.CreateBitCast(old, i64);
    } else if (elem->isFloatTy()) {
      old = b_.CreateZExt(b_.CreateBitCast(old, b_.getInt32Ty()), i64);
    } else if (!elem->isIntegerTy(64)) {
      old = b_.CreateZExt(old, i64);
    }
    b_.CreateStore(b_.CreatePtrToInt(at, i64), b_.CreateGEP(i64, log, used));
    b_.CreateStore(old, b_.CreateGEP(i64, log, b_.CreateAdd(used, b_.getInt64(1))));
    b_.CreateStore(b_.getInt64(bytes), b_.CreateGEP(i64, log, b_.CreateAdd(used, b_.getInt64(2))));
    b_.CreateStore(b_.CreateAdd(used, b_.getInt64(3)), used_at);
  }

  bool refuse(const Node* n, const std::string& what) {
    if (why.empty()) {
      why = what;
      if (n) where = n->loc();
    }
    return false;
  }

  size_t function_for(const FunctionCode& code, Frame* env, const std::vector<NcKind>& args) {
    for (size_t i = 0; i < funcs.size(); ++i)
      if (funcs[i].code == &code && funcs[i].args == args) return i;
    NcKey key{&code, args};
    auto g = ret_guess_.find(key);
    NcFunc f{&code, args, g == ret_guess_.end() ? NcKind::Int : g->second, env};
    std::vector<llvm::Type*> params{llvm::PointerType::getUnqual(b_.getInt32Ty()),
                                    b_.getInt32Ty()};
    for (NcKind k : args) params.push_back(type_of(k));
    auto* ft = llvm::FunctionType::get(type_of(f.ret), params, false);
    f.fn = llvm::Function::Create(ft, llvm::Function::InternalLinkage,
                                  "f" + std::to_string(funcs.size()), mod_);
    funcs.push_back(f);
    return funcs.size() - 1;
  }

  // Sets the status and returns from the function being compiled.
  void bail() {
    llvm::Function* fn = funcs[cur_].fn;
    b_.CreateStore(b_.getInt32(1), fn->getArg(0));
    b_.CreateRet(llvm::UndefValue::get(fn->getReturnType()));
    dead();
  }

  // Code after a return: a block nothing branches to.
  void dead() {
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "dead", funcs[cur_].fn));
    dead_ = true;
  }

  // Branches to a bail when `cond` is true.
  void bail_if(llvm::Value* cond) {
    llvm::Function* fn = funcs[cur_].fn;
    auto* bad = llvm::BasicBlock::Create(ctx_, "bail", fn);
    auto* ok = llvm::BasicBlock::Create(ctx_, "ok", fn);
    b_.CreateCondBr(cond, bad, ok);
    b_.SetInsertPoint(bad);
    b_.CreateStore(b_.getInt32(1), fn->getArg(0));
    b_.CreateRet(llvm::UndefValue::get(fn->getReturnType()));
    b_.SetInsertPoint(ok);
  }

  bool compile_function() {
    // By index: the calls compiled below add functions to `funcs`.
    const NcFunc& f = funcs[cur_];
    const FunctionCode& code = *f.code;
    llvm::Function* fn = f.fn;
    const std::vector<NcKind> arg_kinds = f.args;
    if (code.makes_closures) return refuse(code.body.get(), "the function makes functions");
    if (!ret_lists_for(code, arg_kinds, funcs[cur_].ret_lists))
      return refuse(code.body.get(), "some returns give lists back, others not");
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    dead_ = false;
    slots_.assign(code.frame_size, nullptr);
    kinds_.assign(code.frame_size, NcKind::None);
    assigned_.assign(code.frame_size, false);
    lists_reset(code.frame_size);
    bail_if(b_.CreateICmpSGT(fn->getArg(1), b_.getInt32(kMaxCallDepth)));
    for (size_t i = 0; i < arg_kinds.size(); ++i) {
      if (i >= slots_.size()) return refuse(code.body.get(), "a parameter without a slot");
      set_slot(i, {fn->getArg(static_cast<unsigned>(i + 2)), arg_kinds[i]});
    }
    NcVal v;
    if (!expr(code.body.get(), v)) return false;
    if (!dead_) {
      // The body's value is the function's; None (falling off the end of a
      // function with returns): the general path's value.
      if (v.k == NcKind::None && !v.pack) {
        bail();
      } else if (!ret(code.body.get(), v)) {
        return false;
      }
    }
    b_.CreateUnreachable();  // the block after the last return
    return true;
  }

  void set_slot(size_t slot, NcVal v) {
    if (!slots_[slot]) {
      llvm::IRBuilder<> at(&funcs[cur_].fn->getEntryBlock(),
                           funcs[cur_].fn->getEntryBlock().begin());
      slots_[slot] = at.CreateAlloca(type_of(v.k));
      kinds_[slot] = v.k;
    }
    b_.CreateStore(v.v, slots_[slot]);
    assigned_[slot] = true;
  }

  bool ret(const Node* n, NcVal v) {
    NcFunc& f = funcs[cur_];
    if (!f.ret_lists.empty() || v.pack) {
      if (!returned_lists(n, v)) return false;
      if (v.k == NcKind::None) {  // list(nil, p, ...): the general path's None
        bail();
        return true;
      }
    }
    if (nc_is_list(v.k)) {
      v = returned_list(v);
      if (v.uncommitted && nc_is_list(f.ret)) v.k = f.ret;  // `return []`: any kind
    } else if (!nc_number(v.k)) {
      return refuse(n, "a return without a number");
    }
    if (v.k != f.ret) {
      // The kinds of calls' results are guesses until every return agrees
      // (nc_compile gives up after a few rounds: one that returns both).
      // A call's result returned: the callee's guess follows this one's
      // once this one's is settled by a return of another kind.
      const NcKey own{f.code, f.args};
      auto t = call_target_.find(v.v);
      if (t != call_target_.end() && ret_guess_.count(own)) {
        const NcFunc& callee = funcs[t->second];
        ret_guess_[NcKey{callee.code, callee.args}] = f.ret;
      } else {
        ret_guess_[own] = v.k;
      }
      retry = true;
      return refuse(n, "return kind guessed wrong");
    }
    b_.CreateRet(v.v);
    dead();
    return true;
  }

  // A value as a condition: Python's truth of a number.
  llvm::Value* truth(NcVal v) {
    if (nc_bool_kind(v.k)) return v.v;
    if (nc_int_kind(v.k)) return b_.CreateICmpNE(v.v, b_.getInt64(0));
    return b_.CreateFCmpUNE(v.v, llvm::ConstantFP::get(v.v->getType(), 0.0));
  }

  llvm::Value* as_float(NcVal v) {
    if (v.k == NcKind::Float || v.k == NcKind::NpFloat64) return v.v;
    if (v.k == NcKind::NpFloat32) return b_.CreateFPExt(v.v, b_.getDoubleTy());
    if (nc_bool_kind(v.k)) return b_.CreateUIToFP(v.v, b_.getDoubleTy());
    // Python converts exactly or raises OverflowError; beyond 2**53 the
    // rounding may differ from Python's for a true division: bail there.
    llvm::Value* big = b_.CreateICmpUGT(b_.CreateAdd(v.v, b_.getInt64(int64_t{1} << 53)),
                                        b_.getInt64(int64_t{1} << 54));
    bail_if(big);
    return b_.CreateSIToFP(v.v, b_.getDoubleTy());
  }

  llvm::Value* as_int(NcVal v) {
    return nc_bool_kind(v.k) ? b_.CreateZExt(v.v, b_.getInt64Ty()) : v.v;
  }

  // A number as float32 (NumPy's float32 with a Python number: float32).
  llvm::Value* as_float32(NcVal v) {
    if (v.k == NcKind::NpFloat32) return v.v;
    if (nc_float_kind(v.k)) return b_.CreateFPTrunc(v.v, b_.getFloatTy());
    if (nc_bool_kind(v.k)) return b_.CreateUIToFP(v.v, b_.getFloatTy());
    return b_.CreateSIToFP(v.v, b_.getFloatTy());
  }

  // Bails unless the int fits int32 (NumPy's int32 results and stores: the
  // general path wraps with a warning or raises OverflowError).
  void check_int32(llvm::Value* v) {
    llvm::Value* shifted = b_.CreateAdd(v, b_.getInt64(int64_t{1} << 31));
    bail_if(b_.CreateICmpUGE(shifted, b_.getInt64(int64_t{1} << 32)));
  }

#include "tessera/lang/native_calls_gen_numpy.inc"

  // Python's a // c (or a % c when `mod`) of two int64s: the floor of the
  // quotient, the remainder with the divisor's sign. By zero, and
  // INT64_MIN // -1: a bail to the general path.
  llvm::Value* floor_div_mod(llvm::Value* a, llvm::Value* c, bool mod) {
    bail_if(b_.CreateOr(b_.CreateICmpEQ(c, b_.getInt64(0)),
                        b_.CreateAnd(b_.CreateICmpEQ(a, b_.getInt64(INT64_MIN)),
                                     b_.CreateICmpEQ(c, b_.getInt64(-1)))));
    llvm::Value* q = b_.CreateSDiv(a, c);
    llvm::Value* r = b_.CreateSRem(a, c);
    llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, b_.getInt64(0)),
                                       b_.CreateICmpSLT(b_.CreateXor(r, c), b_.getInt64(0)));
    return mod ? b_.CreateSelect(adjust, b_.CreateAdd(r, c), r)
               : b_.CreateSelect(adjust, b_.CreateSub(q, b_.getInt64(1)), q);
  }

  llvm::Value* checked(llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y) {
    llvm::Function* f = llvm::Intrinsic::getDeclaration(&mod_, id, {b_.getInt64Ty()});
    llvm::Value* r = b_.CreateCall(f, {x, y});
    bail_if(b_.CreateExtractValue(r, 1));
    return b_.CreateExtractValue(r, 0);
  }

  bool binary(const PrimitiveCallNode& p, const std::string& op, NcVal x, NcVal y, NcVal& out) {
    if (!nc_number(x.k) || !nc_number(y.k)) return refuse(&p, "an operand is not a number");
    const bool cmp = op == "less" || op == "less_equal" || op == "greater" ||
                     op == "greater_equal" || op == "equal" || op == "not_equal";
    if (nc_numpy_kind(x.k) || nc_numpy_kind(y.k)) return numpy_binary(p, op, cmp, x, y, out);
    const bool ints = x.k != NcKind::Float && y.k != NcKind::Float;
    if (cmp) {
      if (!ints && (x.k != NcKind::Float || y.k != NcKind::Float))
        return refuse(&p, "a comparison of an int with a float");
      out.k = NcKind::Bool;
      if (ints) {
        llvm::Value* a = as_int(x);
        llvm::Value* c = as_int(y);
        auto pred = op == "less"            ? llvm::CmpInst::ICMP_SLT
                    : op == "less_equal"    ? llvm::CmpInst::ICMP_SLE
                    : op == "greater"       ? llvm::CmpInst::ICMP_SGT
                    : op == "greater_equal" ? llvm::CmpInst::ICMP_SGE
                    : op == "equal"         ? llvm::CmpInst::ICMP_EQ
                                            : llvm::CmpInst::ICMP_NE;
        out.v = b_.CreateICmp(pred, a, c);
      } else {
        auto pred = op == "less"            ? llvm::CmpInst::FCMP_OLT
                    : op == "less_equal"    ? llvm::CmpInst::FCMP_OLE
                    : op == "greater"       ? llvm::CmpInst::FCMP_OGT
                    : op == "greater_equal" ? llvm::CmpInst::FCMP_OGE
                    : op == "equal"         ? llvm::CmpInst::FCMP_OEQ
                                            : llvm::CmpInst::FCMP_UNE;
        out.v = b_.CreateFCmp(pred, x.v, y.v);
      }
      return true;
    }
    if (op == "divide") {
      llvm::Value* a = as_float(x);
      llvm::Value* c = as_float(y);
      bail_if(b_.CreateFCmpOEQ(c, llvm::ConstantFP::get(b_.getDoubleTy(), 0.0)));
      out = {b_.CreateFDiv(a, c), NcKind::Float};
      return true;
    }
    if (ints) {
      llvm::Value* a = as_int(x);
      llvm::Value* c = as_int(y);
      out.k = NcKind::Int;
      if (op == "add") {
        out.v = checked(llvm::Intrinsic::sadd_with_overflow, a, c);
      } else if (op == "subtract") {
        out.v = checked(llvm::Intrinsic::ssub_with_overflow, a, c);
      } else if (op == "multiply") {
        out.v = checked(llvm::Intrinsic::smul_with_overflow, a, c);
      } else if (op == "bitwise_and" || op == "bitwise_or" || op == "bitwise_xor") {
        if (x.k == NcKind::Bool && y.k == NcKind::Bool) {  // Python's bool & bool is a bool
          out.k = NcKind::Bool;
          a = x.v;
          c = y.v;
        }
        out.v = op == "bitwise_and" ? b_.CreateAnd(a, c)
                : op == "bitwise_or" ? b_.CreateOr(a, c)
                                     : b_.CreateXor(a, c);
      } else if (op == "right_shift") {
        // A negative count is Python's ValueError (the general path's); a
        // count of 64 or more gives the sign.
        bail_if(b_.CreateICmpSLT(c, b_.getInt64(0)));
        out.v = b_.CreateAShr(a, b_.CreateSelect(b_.CreateICmpSGT(c, b_.getInt64(63)),
                                                 b_.getInt64(63), c));
      } else if (op == "left_shift") {
        // Python's int does not overflow: a result beyond int64 is the
        // general path's (its error), as is a negative count.
        bail_if(b_.CreateOr(b_.CreateICmpSLT(c, b_.getInt64(0)),
                            b_.CreateICmpSGT(c, b_.getInt64(62))));
        llvm::Value* r = b_.CreateShl(a, c);
        bail_if(b_.CreateICmpNE(b_.CreateAShr(r, c), a));
        out.v = r;
      } else if (op == "floor_divide" || op == "mod") {
        out.v = floor_div_mod(a, c, op == "mod");
      } else {
        return refuse(&p, "'" + op + "' of ints is not compiled in native calls");
      }
      return true;
    }
    llvm::Value* a = as_float(x);
    llvm::Value* c = as_float(y);
    out.k = NcKind::Float;
    if (op == "add") {
      out.v = b_.CreateFAdd(a, c);
    } else if (op == "subtract") {
      out.v = b_.CreateFSub(a, c);
    } else if (op == "multiply") {
      out.v = b_.CreateFMul(a, c);
    } else {
      return refuse(&p, "'" + op + "' of floats is not compiled in native calls");
    }
    return true;
  }

#include "tessera/lang/native_calls_gen_arrays.inc"

#include "tessera/lang/native_calls_gen_lists.inc"

#include "tessera/lang/native_calls_gen_fresh.inc"

  bool primitive(const PrimitiveCallNode& p, NcVal& out) {
    if (p.unfused()) return expr(p.unfused(), out);  // a fused call: its expression
    const std::vector<const Node*> kids = p.children();
    std::string op = p.spec()->name;
    {
      bool handled = false;
      bool ok = list_primitive(p, op, kids, out, handled);
      if (handled || !ok) return ok;
      ok = array_primitive(p, op, kids, out, handled);
      if (handled || !ok) return ok;
    }
    if (op == "remainder" || op == "imod") op = "mod";
    if (op == "iadd" || op == "isub" || op == "imul" || op == "ifloordiv")
      op = op == "iadd" ? "add" : op == "isub" ? "subtract" : op == "imul" ? "multiply" : "floor_divide";
    std::vector<NcVal> vals(kids.size());
    // range_index(n, "range"): the second operand names the caller for errors.
    const size_t evaluated = op == "range_index" ? 1 : kids.size();
    for (size_t i = 0; i < evaluated; ++i)
      if (!expr(kids[i], vals[i])) return false;
    if (kids.size() == 2 && op == "range_index") {  // range()'s bound: an int is itself
      if (vals[0].k != NcKind::Int) return refuse(&p, "a range bound that is not an int");
      out = vals[0];
      return true;
    }
    if (p.spec()->name == "add" &&
        std::any_of(vals.begin(), vals.end(), [](const NcVal& v) { return nc_is_list(v.k); }))
      return list_concat(p, vals, out);
    if (kids.size() == 2) return binary(p, op, vals[0], vals[1], out);
    if (kids.size() > 2 && (op == "add" || op == "multiply")) {  // a + b + c, left to right
      NcVal acc = vals[0];
      for (size_t i = 1; i < vals.size(); ++i)
        if (!binary(p, op, acc, vals[i], acc)) return false;
      out = acc;
      return true;
    }
    if (kids.size() == 1 && op == "negative") {
      const NcKind k = vals[0].k;
      if (nc_float_kind(k)) {
        out = {b_.CreateFNeg(vals[0].v), k};
        return true;
      }
      if (!nc_number(k) || k == NcKind::NpBool) return refuse(&p, "an operand is not a number");
      out = {checked(llvm::Intrinsic::ssub_with_overflow, b_.getInt64(0), as_int(vals[0])),
             k == NcKind::Bool ? NcKind::Int : k};
      if (k == NcKind::NpInt32) check_int32(out.v);
      return true;
    }
    if (kids.size() == 1 && op == "abs" &&
        (vals[0].k == NcKind::Int || vals[0].k == NcKind::Float)) {  // Python's abs()
      llvm::Value* x = vals[0].v;
      if (vals[0].k == NcKind::Float) {
        out = {b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), NcKind::Float};
      } else {  // abs(-2**63) is beyond int64: a bail
        llvm::Value* neg = checked(llvm::Intrinsic::ssub_with_overflow, b_.getInt64(0), x);
        out = {b_.CreateSelect(b_.CreateICmpSLT(x, b_.getInt64(0)), neg, x), NcKind::Int};
      }
      return true;
    }
    if (kids.size() == 1 && (op == "logical_not" || op == "not" || op == "not_")) {
      if (!nc_number(vals[0].k)) return refuse(&p, "an operand is not a number");
      out = {b_.CreateNot(truth(vals[0])), NcKind::Bool};
      return true;
    }
    return refuse(&p, "'" + op + "' is not compiled in native calls");
  }

  bool call(const CallNode& c, NcVal& out) {
    const std::vector<const Node*> kids = c.children();
    auto* callee = dynamic_cast<const VariableNode*>(kids[0]);
    if (!callee || callee->depth() < 1) return refuse(&c, "the function called is not a variable around the function");
    Frame* f = funcs[cur_].env;
    for (int k = 1; k < callee->depth() && f; ++k) f = f->parent();
    Value fn;
    if (!f || !f->read_now(callee->slot(), fn) || !fn.is_function())
      return refuse(&c, "the function called is not a function now");
    auto* closure = dynamic_cast<const Closure*>(fn.as_function().get());
    if (!closure) return refuse(&c, "a call of a primitive held in a variable");
    const FunctionCode& code = closure->code();
    if (code.params.size() != kids.size() - 1)
      return refuse(&c, "not one argument per parameter (or named arguments)");
    std::vector<NcVal> args(kids.size() - 1);
    std::vector<NcKind> kinds;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!expr(kids[i + 1], args[i])) return false;
      if (args[i].k == NcKind::None)
        return refuse(kids[i + 1], "an argument is not a number or an array");
      kinds.push_back(args[i].k);
    }
    std::vector<int> given_back;
    if (!ret_lists_for(code, kinds, given_back))
      return refuse(&c, "the function called gives lists back from some returns only");
    if (!lists_passed(c, args, given_back)) return false;
    const size_t before = funcs.size();
    const size_t target = function_for(code, closure->env_raw(), kinds);
    if (funcs[target].env != closure->env_raw())
      return refuse(&c, "the same function over another frame");
    // One guard a variable: a function's calls of the same variable (three
    // in Ackermann's) read the same slot of the same frame at each entry.
    const NcStep step{cur_, callee->depth() - 1, callee->slot(), &code, target};
    if (std::none_of(steps.begin(), steps.end(), [&](const NcStep& s) {
          return s.caller == step.caller && s.up == step.up && s.slot == step.slot &&
                 s.code == step.code && s.callee == step.callee;
        }))
      steps.push_back(step);
    (void)before;
    llvm::Function* caller = funcs[cur_].fn;
    std::vector<llvm::Value*> vs{caller->getArg(0),
                                 b_.CreateAdd(caller->getArg(1), b_.getInt32(1))};
    for (auto& a : args) vs.push_back(a.v);
    llvm::Value* r = b_.CreateCall(funcs[target].fn, vs);
    call_target_[r] = target;
    bail_if(b_.CreateICmpNE(b_.CreateLoad(b_.getInt32Ty(), caller->getArg(0)), b_.getInt32(0)));
    out = {r, funcs[target].ret};
    out.fresh = nc_is_list(out.k);  // a list returned is one no variable holds
    if (!given_back.empty()) {
      // list(result, p, ...): the callee changed the caller's lists in place
      auto pack = std::make_shared<std::vector<NcVal>>();
      pack->push_back(out);
      for (int p : given_back) pack->push_back(args[static_cast<size_t>(p)]);
      out = {};
      out.pack = pack;
    }
    return true;
  }

  bool if_node(const IfNode& n, NcVal& out) {
    const std::vector<const Node*> kids = n.children();
    NcVal c;
    cond_ctx_ = true;
    if (!expr(kids[0], c)) return false;
    if (!nc_number(c.k)) return refuse(kids[0], "a condition that is not a number");
    llvm::Function* fn = funcs[cur_].fn;
    auto* tb = llvm::BasicBlock::Create(ctx_, "then", fn);
    auto* eb = llvm::BasicBlock::Create(ctx_, "else", fn);
    auto* mb = llvm::BasicBlock::Create(ctx_, "merge", fn);
    b_.CreateCondBr(truth(c), tb, eb);
    const std::vector<bool> before = assigned_;
    b_.SetInsertPoint(tb);
    NcVal tv;
    if (!expr(kids[1], tv)) return false;
    const bool t_dead = dead_;
    llvm::BasicBlock* t_end = b_.GetInsertBlock();
    if (t_dead)
      b_.CreateUnreachable();
    else
      b_.CreateBr(mb);
    const std::vector<bool> t_set = assigned_;
    assigned_ = before;
    dead_ = false;
    b_.SetInsertPoint(eb);
    NcVal ev;
    if (kids.size() > 2 && kids[2] && !expr(kids[2], ev)) return false;
    const bool e_dead = dead_;
    llvm::BasicBlock* e_end = b_.GetInsertBlock();
    if (e_dead)
      b_.CreateUnreachable();
    else
      b_.CreateBr(mb);
    b_.SetInsertPoint(mb);
    dead_ = t_dead && e_dead;
    if (dead_) {
      mb->eraseFromParent();
      dead();
      return true;
    }
    if (t_dead) {
      // assigned_ is the else branch's already
    } else if (e_dead) {
      assigned_ = t_set;
    } else {
      for (size_t i = 0; i < assigned_.size(); ++i) assigned_[i] = assigned_[i] && t_set[i];
    }
    out = {};
    if (!t_dead && !e_dead && tv.k == ev.k && tv.k != NcKind::None && !nc_is_list(tv.k)) {
      llvm::PHINode* phi = b_.CreatePHI(type_of(tv.k), 2);
      phi->addIncoming(tv.v, t_end);
      phi->addIncoming(ev.v, e_end);
      out = {phi, tv.k};
    }
    return true;
  }

  // while(cond, body): Ctrl-C is checked on every turn (a bail: the general
  // path runs the call again and stops at its own check).
  bool while_node(const WhileNode& n, NcVal& out) {
    const std::vector<const Node*> kids = n.children();
    llvm::Function* fn = funcs[cur_].fn;
    auto* head = llvm::BasicBlock::Create(ctx_, "head", fn);
    auto* body = llvm::BasicBlock::Create(ctx_, "body", fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    auto* flag_ty = b_.getInt8Ty();
    llvm::Value* flag_at = b_.CreateIntToPtr(
        b_.getInt64(reinterpret_cast<uint64_t>(interrupt_flag_address())),
        llvm::PointerType::getUnqual(flag_ty));
    llvm::LoadInst* flag = b_.CreateLoad(flag_ty, flag_at);
    flag->setAtomic(llvm::AtomicOrdering::Monotonic);
    flag->setAlignment(llvm::Align(1));
    bail_if(b_.CreateICmpNE(flag, b_.getInt8(0)));
    NcVal c;
    cond_ctx_ = true;
    if (!expr(kids[0], c)) return false;
    if (!nc_number(c.k) || dead_) return refuse(kids[0], "a loop condition that is not a number");
    b_.CreateCondBr(truth(c), body, exit);
    b_.SetInsertPoint(body);
    const std::vector<bool> before = assigned_;
    loops_.push_back({head, exit});
    const bool ok = expr(kids[1], c);
    loops_.pop_back();
    if (!ok) return false;
    if (dead_)
      b_.CreateUnreachable();
    else
      b_.CreateBr(head);
    dead_ = false;
    if (!one_turn(n)) assigned_ = before;  // the body may not run
    b_.SetInsertPoint(exit);
    out = {};
    return true;
  }

  // `as_condition`: the value is only tested (an if's or a loop's
  // condition), so Python's and NumPy's bools may meet.
  bool logical(const LogicalNode& n, bool as_condition, NcVal& out) {
    const std::vector<const Node*> kids = n.children();
    const bool is_and = n.label() == "&&";
    NcVal x, y;
    cond_ctx_ = as_condition;
    if (!expr(kids[0], x)) return false;
    if (!nc_bool_kind(x.k)) return refuse(&n, "and/or of what is not a bool");
    llvm::Function* fn = funcs[cur_].fn;
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* rhs = llvm::BasicBlock::Create(ctx_, "rhs", fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", fn);
    if (is_and)
      b_.CreateCondBr(x.v, rhs, done);
    else
      b_.CreateCondBr(x.v, done, rhs);
    b_.SetInsertPoint(rhs);
    const std::vector<bool> before = assigned_;
    cond_ctx_ = as_condition;
    if (!expr(kids[1], y)) return false;
    assigned_ = before;
    if (!nc_bool_kind(y.k) || dead_) return refuse(&n, "and/or of what is not a bool");
    if (x.k != y.k && !as_condition)
      return refuse(&n, "and/or of a Python bool and NumPy's bool whose value is kept");
    llvm::BasicBlock* r_end = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* phi = b_.CreatePHI(b_.getInt1Ty(), 2);
    phi->addIncoming(x.v, from);
    phi->addIncoming(y.v, r_end);
    out = {phi, x.k == y.k ? x.k : NcKind::Bool};
    return true;
  }

  bool expr(const Node* n, NcVal& out) {
    out = {};
    const bool as_condition = cond_ctx_;
    cond_ctx_ = false;
    target_ = rebind_;  // the variable this expression's value is assigned to, if any
    rebind_ = -1;
    if (dead_) return true;  // after a return: nothing runs
    if (auto* k = dynamic_cast<const ConstantNode*>(n)) {
      Value v;
      k->eval_now(nullptr, v);
      if (v.is_bool()) {
        out = {b_.getInt1(v.as_bool()), NcKind::Bool};
      } else if (v.is_int()) {
        out = {b_.getInt64(v.as_int()), NcKind::Int};
      } else if (v.is_float()) {
        out = {llvm::ConstantFP::get(b_.getDoubleTy(), v.as_float()), NcKind::Float};
      } else if (!v.is_nil()) {
        return refuse(n, "a constant that is not a number");
      }
      return true;
    }
    if (auto* v = dynamic_cast<const VariableNode*>(n)) {
      if (v->depth() != 0) return refuse(n, "a variable of a frame around the function");
      if (v->slot() < packs_.size() && packs_[v->slot()]) {
        out.pack = packs_[v->slot()];
        return true;
      }
      if (v->slot() >= assigned_.size() || !assigned_[v->slot()])
        return refuse(n, "a local may be read before it is assigned");
      out = {b_.CreateLoad(type_of(kinds_[v->slot()]), slots_[v->slot()]), kinds_[v->slot()]};
      read_[v->slot()] = true;
      uncommitted_[v->slot()] = false;
      if (nc_is_list(out.k)) out.list_slot = static_cast<int>(v->slot());
      // A comprehension's hidden list is read once, as its value: moved.
      out.fresh = nc_is_list(out.k) && v->label().rfind("__acc", 0) == 0;
      return true;
    }
    if (auto* a = dynamic_cast<const AssignNode*>(n)) {
      if (a->depth() != 0) return refuse(n, "an assignment of a variable around the function");
      NcVal v;
      rebind_ = static_cast<int>(a->slot());
      if (!expr(a->value(), v)) return false;
      if (dead_) return true;
      bool done = false;
      if (!assign_list(n, a->slot(), v, done)) return false;
      if (done) return true;
      if (v.k == NcKind::None && dynamic_cast<const ConstantNode*>(a->value())) {
        // define(x, nil): a local declared (unassigned: reading it still refuses)
        if (a->slot() < assigned_.size()) assigned_[a->slot()] = false;
        return true;
      }
      if (v.k == NcKind::None)
        return refuse(n, "a value that is not a number or an array ('" + a->value()->label() + "')");
      if (kinds_[a->slot()] != NcKind::None && kinds_[a->slot()] != v.k)
        return refuse(n, "a variable that changes kind");
      set_slot(a->slot(), v);
      return true;
    }
    if (auto* bl = dynamic_cast<const BlockNode*>(n)) {
      const size_t pending = pending_.size();
      for (const NodePtr& s : bl->statements())
        if (!expr(s.get(), out)) return false;
      if (pending_.size() > pending)  // a changed list not assigned back: it was a copy
        return refuse(n, "a list changed by a call or pop() and not assigned back");
      return true;
    }
    if (auto* p = dynamic_cast<const PrimitiveCallNode*>(n)) return primitive(*p, out);
    if (auto* c = dynamic_cast<const CallNode*>(n)) return call(*c, out);
    if (auto* i = dynamic_cast<const IfNode*>(n)) return if_node(*i, out);
    if (auto* l = dynamic_cast<const LogicalNode*>(n)) return logical(*l, as_condition, out);
    if (auto* w = dynamic_cast<const WhileNode*>(n)) return while_node(*w, out);
    if (auto* l = dynamic_cast<const ListNode*>(n)) return list_display(*l, out);
    if (auto* c = dynamic_cast<const ControlNode*>(n)) {
      if (c->label() != "return") {
        if (loops_.empty()) return refuse(n, "break or continue outside a loop");
        b_.CreateBr(c->label() == "break" ? loops_.back().second : loops_.back().first);
        dead();
        return true;
      }
      const std::vector<const Node*> kids = c->children();
      if (kids.empty()) return refuse(n, "a return without a value");
      NcVal v;
      if (!expr(kids[0], v)) return false;
      if (dead_) return true;
      return ret(n, v);
    }
    return refuse(n, "'" + n->label() + "' is not compiled in native calls");
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  llvm::IRBuilder<> b_;
  std::map<NcKey, NcKind>& ret_guess_;
  size_t cur_ = 0;
  bool dead_ = false;
  bool cond_ctx_ = false;  // the next expression is a condition (see logical)
  int rebind_ = -1;       // the next expression is assigned to this variable
  int target_ = -1;       // the expression being compiled is (list_primitive)
  // Lists (native_calls_gen_lists.inc): per variable, the pack it holds, the
  // list a loop's iterate() variable reads (-1: none) and the loop depth it
  // was made at, whether the function gives the list back (may change it);
  // the lists changed by a call or pop() still to be assigned back.
  std::vector<std::shared_ptr<std::vector<NcVal>>> packs_;
  std::vector<int> alias_of_;
  std::vector<size_t> alias_depth_;
  std::vector<bool> changeable_;
  std::vector<bool> uncommitted_;  // holds a `[]` whose item kind is open
  std::vector<bool> read_;         // read so far (its kind can no longer change)
  std::vector<int> pending_;
  std::vector<llvm::AllocaInst*> slots_;
  std::vector<NcKind> kinds_;
  std::vector<bool> assigned_;
  std::map<const llvm::Value*, size_t> call_target_;
  std::vector<std::pair<llvm::BasicBlock*, llvm::BasicBlock*>> loops_;  // (continue, break)  // a call's result: the function called
};

// Adds `entry(args, result)` calling function 0 of the group.
void nc_add_entry(llvm::LLVMContext& ctx, llvm::Module& mod, const NcFunc& f,
                  const std::string& name) {
  llvm::IRBuilder<> b(ctx);
  auto* i64p = llvm::PointerType::getUnqual(b.getInt64Ty());
  auto* i32p = llvm::PointerType::getUnqual(b.getInt32Ty());
  auto* ft = llvm::FunctionType::get(b.getInt32Ty(), {i64p, i64p, i32p}, false);
  auto* fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, mod);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* status = fn->getArg(2);
  b.CreateStore(b.getInt32(0), status);
  std::vector<llvm::Value*> args{status, b.getInt32(0)};
  for (size_t i = 0; i < f.args.size(); ++i) {
    llvm::Value* w = b.CreateLoad(b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), fn->getArg(0), i));
    const NcKind k = f.args[i];
    if (k == NcKind::Float || k == NcKind::NpFloat64 || k == NcKind::NpFloat32)
      w = b.CreateBitCast(w, b.getDoubleTy());
    if (k == NcKind::NpFloat32) w = b.CreateFPTrunc(w, b.getFloatTy());  // exact: it was one
    if (nc_bool_kind(k)) w = b.CreateICmpNE(w, b.getInt64(0));
    if (nc_is_array(k) || nc_is_list(k))
      w = b.CreateIntToPtr(w, llvm::PointerType::getUnqual(b.getInt64Ty()));
    args.push_back(w);
  }
  llvm::Value* r = b.CreateCall(f.fn, args);
  if (f.ret == NcKind::NpFloat32) r = b.CreateFPExt(r, b.getDoubleTy());
  if (f.ret == NcKind::Float || f.ret == NcKind::NpFloat64 || f.ret == NcKind::NpFloat32)
    r = b.CreateBitCast(r, b.getInt64Ty());
  if (nc_bool_kind(f.ret)) r = b.CreateZExt(r, b.getInt64Ty());
  if (nc_is_list(f.ret)) r = b.CreatePtrToInt(r, b.getInt64Ty());  // a new list's descriptor
  b.CreateStore(r, fn->getArg(1));
  b.CreateRet(b.CreateLoad(b.getInt32Ty(), status));
}

// True when a function of the group calls itself, directly or through others.
bool nc_recursive(const std::vector<NcStep>& steps, size_t n) {
  std::vector<std::vector<size_t>> calls(n);
  for (const NcStep& s : steps) calls[s.caller].push_back(s.callee);
  for (size_t start = 0; start < n; ++start) {
    std::vector<bool> seen(n, false);
    std::vector<size_t> todo = calls[start];
    while (!todo.empty()) {
      const size_t f = todo.back();
      todo.pop_back();
      if (f == start) return true;
      if (seen[f]) continue;
      seen[f] = true;
      todo.insert(todo.end(), calls[f].begin(), calls[f].end());
    }
  }
  return false;
}

}  // namespace

bool nc_generate(llvm::LLVMContext& ctx, llvm::Module& mod, std::map<NcKey, NcKind>& ret_guess,
                 const Closure& closure, const std::vector<NcKind>& kinds, const std::string& name,
                 NcGenerated& out) {
  NcCompiler c(ctx, mod, ret_guess);
  if (!c.compile_group(closure.code(), closure.env_raw(), kinds)) {
    out.retry = c.retry;
    out.why = c.why;
    out.where = c.where;
    return false;
  }
  out.recursive = nc_recursive(c.steps, c.funcs.size());
  out.ret = c.funcs[0].ret;
  out.ret_lists = c.funcs[0].ret_lists;
  out.steps = c.steps;
  out.functions = c.funcs.size();
  out.makes_lists = c.makes_lists;
  if (out.recursive) nc_add_entry(ctx, mod, c.funcs[0], name);
  return true;
}

}  // namespace tessera::detail
