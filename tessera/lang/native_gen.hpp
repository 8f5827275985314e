// Gen, the code generator of the scalar loop fast path (native.cpp,
// docs/runtime.md "Code generation"): the loop's tree of operations, typed
// by the kinds its registers hold, becomes one LLVM function. Declared here
// and defined by family: native_gen.cpp (the function: its frame, the
// registers, statements, the state handed back, build), native_gen_analysis.cpp
// (what the loop's tree shows before any code: rebinding arrays, lists),
// native_gen_scalars.cpp (arithmetic and math calls), native_gen_arrays.cpp
// (array registers, element reads and writes, the write log),
// native_gen_arrexpr.cpp (array expressions over 1-d views: reductions and
// slice writes, one loop each), native_gen_containers.cpp (lists, lists of lists, strings, dicts and sets),
// native_gen_loops.cpp (nested and range loops, their chunks and versions),
// native_gen_bounds.cpp (the index intervals checked once before a range loop),
// native_gen_search.cpp (np.searchsorted's binary search) and
// native_gen_strings.cpp (ASCII text as views: str(n), s[i], s[a:b:c], ==, in).
// Private to those files and native.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/native_gen_comprehensions.hpp"
#include "tessera/lang/native_helpers.hpp"
#include "tessera/lang/native_lists.hpp"
#include "tessera/lang/native_strings.hpp"

// Jit's members, complete in native.cpp only (ORC's headers are slow to
// compile; the generator reads only the CPU's name and features).
namespace llvm {
class TargetMachine;
namespace orc {
class LLJIT;
}  // namespace orc
}  // namespace llvm

namespace tessera::native_gen {

using FNode = FastLoop::Impl::FNode;

// The JIT (one per process, made on first use: jit()).
struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex mu;
  uint64_t next = 0;
  std::string error;
  std::string cpu, features;
  std::string llvm_args;  // TESSERA_NATIVE_LLVM_ARGS (part of the cache's key)
  std::map<std::string, NativeFn> loaded;  // the code linked in this process, by symbol
  // The optimised codes being compiled in the background, by symbol: their
  // quick code (linked) and the codes to swap them into (native_tiers.hpp).
  struct Pending {
    NativeFn quick = nullptr;
    std::vector<std::shared_ptr<NativeUpgrade>> targets;
  };
  std::map<std::string, Pending> pending;
};
Jit& jit();

// By payload: an int (i64; int32 ... uint32 too, sign or zero extended) or a
// float (double; float32 too, its value exactly).
inline bool is_int(Reg::Kind k) {
  return k == Reg::PyInt || k == Reg::NpInt || (k >= Reg::NpI32 && k <= Reg::NpU32);
}
inline bool is_float(Reg::Kind k) {
  return k == Reg::PyFloat || k == Reg::NpFloat || k == Reg::NpF32;
}
inline bool is_bool(Reg::Kind k) { return k == Reg::PyBool || k == Reg::NpBool; }
inline bool is_narrow(int k) { return k >= Reg::NpF32 && k <= Reg::NpU32; }
inline bool is_strong(Reg::Kind k) { return k >= Reg::NpBool && k <= Reg::NpU32; }
inline bool is_scalar(Reg::Kind k) { return k >= Reg::PyBool && k <= Reg::NpU32; }

constexpr int kDynF32 = 102;  // (below, with CV)

inline const char* kind_name(Reg::Kind k) {
  static const char* names[] = {"undefined",  "None",       "bool",     "int",
                                "float",      "np.bool",    "np.int64", "np.float64",
                                "np.float32", "np.int32",   "np.int8",  "np.uint8",
                                "np.int16",   "np.uint16",  "np.uint32", "array",
                                "object"};
  if (static_cast<int>(k) == kDynF32) return "float or np.float32 by turns";
  if (k < Reg::Undef || k > Reg::Obj) return "value of a kind known only at run time";
  return names[k];
}

// Refusal: the loop stays on the interpreter, with this reason.
struct Refuse {
  std::string why;
};

// A value in the generated code: its kind, known when compiling, and its
// payload (i1 for bools, i64 for ints, double for floats; none for None).
// Dyn: a kind known only at run time (the value of an `if` whose branches
// differ), as an i8 kind and an i64 payload; it can only become the loop's
// value. Arr: the register holding the array.
constexpr int kDyn = 100;
// Str: ASCII text the code computes (native_gen_strings.cpp) as a view, no
// object: v its first character's address (i8*), p its length (i64), step the
// bytes from one character to the next (i64; null: 1). Only a string
// operation or an assignment (which makes it an object) takes it.
constexpr int kStr = 101;
// DynF32 (kDynF32, declared above): a number that is Python's float or
// NumPy's float32 by turns (a float32 accumulator reset to a Python float:
// `s = 0.0`, then `s += img[i, k]`): v its value as a double (exact when a
// float32), s its i1 "float32". Only what knows this kind takes it (binary
// arithmetic and comparisons, element writes, truth, negation, assignment,
// the merge of two branches); the rest refuse it by its unknown kind.
// s: for a number whose kind is NumPy's or Python's depending on the turn (a
// variable that holds 0.0, then s + x[i]), an i1 "strong" and k the Python
// kind; null when k says it all.
struct CV {
  int k = Reg::Nil;
  llvm::Value* v = nullptr;
  llvm::Value* p = nullptr;  // Dyn's payload
  int arr = -1;
  llvm::Value* s = nullptr;
  llvm::Value* step = nullptr;  // Str's
};

inline Reg::Kind py_kind(Reg::Kind k) {
  return k == Reg::NpBool ? Reg::PyBool : k == Reg::NpInt ? Reg::PyInt : k == Reg::NpFloat ? Reg::PyFloat : k;
}
inline Reg::Kind np_kind(Reg::Kind k) {
  return k == Reg::PyBool ? Reg::NpBool : k == Reg::PyInt ? Reg::NpInt : k == Reg::PyFloat ? Reg::NpFloat : k;
}

// Thrown when a variable turns out to hold both Python's and NumPy's kind of
// one family: the function is generated again with it dynamic.
struct Retry {
  int reg;
  bool f32 = false;  // Python's float and NumPy's float32 by turns (kDynF32)
};

// Thrown by a lazy build (Gen::lazy_build) whose loop has no checked-once version
// at its top: the general turns are all there is, so the whole is compiled.
struct NoLazy {};

// A variable holding a view of an array variable's row (`row = A[i]`,
// `for row in A`): `from` A's register, `nidx` the indices given.
struct RowOf {
  int from;
  size_t nidx;
  int fixed;  // the array variable `from` always holds (itself, or what it aliases)
};

// The code of one loop: made for its registers' kinds (regs, arrays,
// objects), emitted into `mod` by build(); throws Refuse or Retry.
struct Gen {
  const FastLoop::Impl& im;
  // The loop's condition and body as compiled: im's, or a copy with chained
  // element accesses flattened (ChainFlattener).
  const FNode& loop_cond;
  const FNode& loop_body;
  // Row variables (ChainFlattener::rows): the register holds the row's
  // base, extents and strides in its slots, and no array entry (payload -1)
  // until the state goes back to the interpreter (store_state makes one).
  std::map<int, RowOf> rows;
  std::map<int, llvm::Value*> row_off;  // the row's first element, from A's (an i64 alloca)
  const std::vector<Reg>& regs;
  const std::vector<ArrEntry>& arrays;
  const std::vector<Value>& objects;
  llvm::LLVMContext& ctx;
  llvm::Module& mod;
  llvm::IRBuilder<> b;
  llvm::Function* fn = nullptr;
  llvm::Value* cptr = nullptr;  // NativeCtx* as i8*

  llvm::Type *i1, *i8, *i32, *i64, *f64, *i8p;
  std::vector<Reg::Kind> kind;        // per register: the kind it holds in the code
  std::vector<bool> maybe_undef;      // undefined at the call's start
  std::vector<llvm::Value*> val;      // allocas (typed by kind)
  std::vector<llvm::Value*> def;      // i1 allocas: defined now
  std::vector<llvm::Value*> asg;      // i8 allocas: assigned (for write_back)
  std::vector<llvm::Value*> arr_base; // per Arr register: base pointer, shapes, strides
  std::vector<std::vector<llvm::Value*>> arr_shape, arr_stride;
  std::vector<llvm::Value*> arr_payload;  // the register's payload (its array entry)
  // An array register's static type: what the arrays it holds in this code
  // are (from its array at the call's start, or the first one assigned).
  struct ArrT {
    DType dt = DType::float64;
    int nd = 0;
    bool writable = false;
    bool indexable = false;
    bool unit_last = false;  // the last dimension's stride is 1 (native_unit_last)
  };
  std::vector<ArrT> atype;
  // Registers that may hold another array during the call (assigned
  // np.zeros(n), x.copy(), u_next, ...; native_arrays.hpp): their base,
  // extents, strides, entry and freshness (made in this call: writes into it
  // need no undo) in allocas; null for the arrays fixed for the call.
  std::vector<bool> rebinds;
  std::vector<bool> const_only;        // int registers assigned int constants only
  std::vector<llvm::Value*> slot_base, slot_pay, slot_fresh;
  std::vector<std::vector<llvm::Value*>> slot_shape, slot_stride;
  bool makes_arrays = false;        // the loop makes arrays (a sweep at each turn's start)
  llvm::Value* made_any = nullptr;  // i1 alloca: arrays made since the last sweep
  // Lists (docs/runtime.md, "Lists built by append"): object registers hold
  // the index of a list in the interpreter's objects (an i64 alloca in
  // `val`), made and appended to by helpers (native_list_new/_append), so
  // that the lists are the interpreter's own, logged for its roll-back.
  // `held`: per register, the object it holds (-1: none), for the append's
  // aliasing check; `sweeps`: the blocks that hand the registers to
  // native_sweep, which get the object registers' stores once every
  // register's kind is known (the end of build).
  bool lists = false;
  llvm::Value* held = nullptr;
  // Per register, the kind of number its list's items are read as (-1: not
  // known): the first item of the list it holds now, or of the list it is
  // assigned (`_it = iterate(xs)`), or the kind of the variable an item is
  // assigned to. A read of another kind bails.
  std::vector<int> item_kind;
  // Per register: it holds a dict (a set) in this code; item_kind is then
  // the kind of its values (docs/runtime.md, "Dicts and sets in native code").
  std::vector<bool> dict_reg;
  // Per register, the kind t[i][j] is read as for a list of lists (-1: none;
  // native_table_kind of its list when the call starts).
  std::vector<int> table_kind;
  // Per register, true when the loop never assigns it, appends to it or
  // writes into it: the list it holds when the call starts stays that list,
  // with the same items, for the whole call (a write through another
  // register holding it bails: `held`), so xs[i] reads of it are memoised.
  std::vector<bool> list_fixed;
  // Per register, true when it appears only as t in t[i][j], t[i][j] = v,
  // len(t) and len(t[i]): no other register comes to hold its list in the
  // call, so rows it made its own stay so (t[i][j] read and written in place,
  // NativeValueLayout). `row_gen`: per such register, an i64 alloca counting
  // the writes through native_list2_set, each of which may move a row (the
  // row addresses kept by the sites are good while it is unchanged).
  std::vector<bool> table_plain;
  std::map<int, llvm::Value*> row_gen;
  // Per such register, an i64 alloca: the items' address of the row whose
  // numbers the call logged whole (write_in_place), 0 none yet.
  std::map<int, llvm::Value*> row_ranged;
  // `for x in xs`'s `_it = iterate(xs)` where `_it` is read only by that
  // loop (and its len() before it) and the loop does not assign xs: `_it`
  // holds xs's own list (no new object), and is left out of `held`, so that
  // an append to xs after the loop neither bails nor copies the list.
  std::set<const FNode*> iterate_alias;
  std::vector<bool> no_held;
  // Checks that no register but `r` holds the object `obj` (a write through
  // r would be seen there: the interpreter's), written at the end of build
  // over the object registers alone, once every register's kind is known:
  // `block` gets the comparisons and stores the answer in `other`, then
  // branches to `next`.
  struct HeldCheck {
    llvm::BasicBlock *block, *next;
    int r;
    llvm::Value *obj, *other;
  };
  std::vector<HeldCheck> held_checks;
  std::vector<llvm::BasicBlock*> sweeps;
  std::map<int, llvm::Value*> counts;     // slot -> i64 alloca
  llvm::Value *undo_ptr = nullptr, *undo_n = nullptr, *undo_cap = nullptr;
  llvm::Value *last_k = nullptr, *last_p = nullptr;
  llvm::BasicBlock *bail = nullptr, *exit = nullptr;
  // A lazy build: the versions with accesses checked once before a loop
  // only. Where one of their checks fails, the code returns
  // kNativeNeedFull from `need_full` (back to the call's start, as a bail)
  // instead of going on in the versions checked at each access, which are
  // compiled then (most runs never need them, and they were half or more
  // of the code LLVM optimised).
  bool lazy_build = false;
  llvm::BasicBlock* need_full = nullptr;
  // A lazy build's checks that failed in an earlier run (NativeCtx::need_site):
  // they go to their general versions, the rest still to need_full, so that
  // a loop whose one inner check fails gets that loop's general version, not
  // the whole code (which is 2-4 times the partial one's IR).
  const std::set<int>* general_sites = nullptr;
  // kSiteWrap: a range check that failed where a read's index may be
  // negative by its form; the next build checks that loop's reads against
  // [-extent, extent) (wrap_check), before any general version.
  enum SiteKind { kSiteRange = 0, kSiteUndef = 1, kSiteLists = 2, kSiteWrap = 3, kSiteKinds = 4 };
  // The range check of `loop` (null: the call's own loop) being emitted:
  // whether it admits negative indices of the reads of negative form
  // (its kSiteWrap failed before), and whether it met such a read.
  struct WrapCheck {
    bool on = false;
    bool seen = false;
  };
  WrapCheck wrap_check;
  WrapCheck begin_wrap_check(const FNode* loop);  // returns the one it replaces
  // Where a range check of `loop` that failed goes (or_full of kSiteWrap
  // when it met reads of negative form and did not admit them yet).
  llvm::BasicBlock* range_failed(llvm::BasicBlock* general, const FNode* loop);
  // The reads proven under an admitting check: the access adds the extent
  // to a negative index.
  std::set<const FNode*> wrap_proven;
  // Where a failed check before a loop goes: `general` (the versions
  // checked at each access), or, in a lazy build, a block that records the
  // site (`loop`: the While node, null for the call's loop) and goes to
  // need_full.
  llvm::BasicBlock* or_full(llvm::BasicBlock* general, const FNode* loop, SiteKind kind);
  // A check's id, stable across builds and processes of the same loop: its
  // loop's shape and the check's kind.
  int site_id(const FNode* loop, SiteKind kind);
  std::map<const FNode*, int> site_of;  // the loops' shape hashes
  llvm::PHINode* exit_code = nullptr;
  struct LoopTargets {
    llvm::BasicBlock* cont;
    llvm::BasicBlock* brk;
    llvm::Value* last_k;  // nested loops: allocas of their value
    llvm::Value* last_p;
  };
  std::vector<LoopTargets> loops;

  const std::vector<bool>& dyn;  // registers whose strongness is dynamic
  // Of those, the registers holding Python's float or NumPy's float32 by
  // turns (kDynF32; not np.float64): null when none.
  const std::vector<bool>* f32_dyn = nullptr;
  bool f32_reg(int r) const { return f32_dyn && (*f32_dyn)[static_cast<size_t>(r)]; }
  std::vector<llvm::Value*> strong;  // their i1 allocas
  llvm::Value *regp = nullptr, *asgp = nullptr;  // the context's registers and assigned flags

  // The version of a range loop being emitted (range_loop): the accesses
  // whose indices were checked before the loop for all its turns, and the
  // index arithmetic under them (no bounds checks, no overflow checks).
  const std::set<const FNode*>* proven = nullptr;
  bool is_proven(const FNode& n) const { return proven && proven->count(&n); }
  // Range loops' counter increments: k + 1 right after k < end held.
  std::set<const FNode*> no_overflow;
  // The proven writes of the loop being emitted were logged before it.
  bool prelogged = false;
  // A write of a turn without loops: its element's address and old bytes in
  // registers (allocas that -O3 promotes), restored by that turn's bail.
  struct Site {
    llvm::Value* addr;  // i8** alloca
    llvm::Value* old;   // iN* alloca
    llvm::Type* t;
  };
  std::vector<Site>* sites = nullptr;
  // Where Ctrl-C inside a turn exits (the state as it is: the general path
  // raises at once, as Python stops mid-statement).
  llvm::BasicBlock* interrupted = nullptr;
  std::map<int, llvm::Value*> snapped;  // per array register: i1 alloca, copied whole this call
  bool uniform_draws = false;  // np.random.random() emitted (since reset)
  int64_t bails = 0;                    // bail_if()s emitted so far (a constant false aside)
  llvm::Value* interrupt_at = nullptr;  // the interrupt flag's address (NativeCtx::interrupt)

  Gen(const FastLoop::Impl& im_, const FNode& cond_, const FNode& body_,
      const std::vector<Reg>& regs_, const std::vector<ArrEntry>& arrays_,
      const std::vector<Value>& objects_, llvm::LLVMContext& c, llvm::Module& m,
      const std::vector<bool>& dyn_, const std::map<int, RowOf>& rows_)
      : im(im_), loop_cond(cond_), loop_body(body_), rows(rows_), regs(regs_), arrays(arrays_),
        objects(objects_), ctx(c), mod(m), b(c), dyn(dyn_) {
    i1 = b.getInt1Ty();
    i8 = b.getInt8Ty();
    i32 = b.getInt32Ty();
    i64 = b.getInt64Ty();
    f64 = b.getDoubleTy();
    i8p = b.getInt8PtrTy();
  }

  // ---- memory of the context
  llvm::Value* field(llvm::Value* base, int64_t offset, llvm::Type* t);
  llvm::Value* ctx_ptr(size_t offset);
  // Helper function `f` (one of kHelpers), read from the context at the
  // function's entry: no process address is in the code (the disk cache).
  std::map<size_t, llvm::Value*> helper_at;
  llvm::Value* fptr(void* f, llvm::FunctionType* t);
  llvm::Value* helper_ptr(size_t i, llvm::FunctionType* t);
  // Python's x % y of ints: x itself when 0 <= x < y (`(i + 1) % n` but at
  // the last i: no division, 20 to 40 cycles), `general()`'s value (emitted
  // in a block of its own, its bails there) otherwise.
  llvm::Value* mod_if_needed(llvm::Value* x, llvm::Value* y,
                             const std::function<llvm::Value*()>& general);
  // The length `helper` (native_list_len, native_seq_len) gives of the
  // object at index `obj`, < 0 for none, asked again only when the object or
  // list_epoch changed since this site last asked: lengths change only
  // through helpers that bump it (`for c in coins` inside a loop).
  llvm::Value* len_of_object(void* helper, llvm::Value* obj);
  llvm::Type* type_of(Reg::Kind k);
  llvm::Value* to_payload(const CV& v);  // i64 for a Reg's union
  llvm::Value* kind_of(const CV& v);
  llvm::Value* strong_of(const CV& v);
  // A number of Python kind `py` whose strongness is `s`.
  CV mk(int py, llvm::Value* v, llvm::Value* s);
  bool static_strong(const CV& v) { return !v.s && is_strong(static_cast<Reg::Kind>(v.k)); }

  void dead_block();
  void bail_if(llvm::Value* cond);
  llvm::MDNode* unlikely() { return llvm::MDBuilder(ctx).createBranchWeights(1, 1 << 20); }

  void count(int slot);

  // ---- truth and conditions
  llvm::Value* truth(const CV& v);
  // The truth of a condition; `and`/`or` branch as the interpreter
  // evaluates them (a NumPy scalar on the left evaluates both sides).
  llvm::Value* cond(const FNode& n);

  // `and`/`or` in a condition whose left side is Python's or NumPy's number
  // by turns (strong: `s`): the right side is evaluated unless the left
  // decides and is Python's (a NumPy scalar evaluates both, as the
  // interpreter does); the truth is the same either way.
  llvm::Value* cond_varying(const FNode& n, llvm::Value* ta, llvm::Value* s);

  // `and`/`or` whose left side `ta` decides alone when it is false (and) or
  // true (or): the right side, `rhs_truth`, is evaluated in a block of its
  // own; the result is the phi of the two.
  template <class F>
  llvm::Value* short_circuit(const FNode& n, llvm::Value* ta, F rhs_truth) {
    llvm::BasicBlock* from = b.GetInsertBlock();
    llvm::BasicBlock* rhs = llvm::BasicBlock::Create(ctx, "rhs", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "logic", fn);
    if (n.is_and)
      b.CreateCondBr(ta, rhs, done);
    else
      b.CreateCondBr(ta, done, rhs);
    b.SetInsertPoint(rhs);
    llvm::Value* tb = rhs_truth();
    llvm::BasicBlock* rhs_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(done);
    llvm::PHINode* phi = b.CreatePHI(i1, 2);
    phi->addIncoming(b.getInt1(!n.is_and), from);
    phi->addIncoming(tb, rhs_end);
    return phi;
  }

  // ---- registers
  // ---- array registers' descriptors (fixed for the call, or in allocas)
  llvm::Value* abase(int r) { return slot_base[r] ? b.CreateLoad(i8p, slot_base[r]) : arr_base[r]; }
  llvm::Value* ashape(int r, size_t d);
  llvm::Value* astride(int r, size_t d);
  llvm::Value* apay(int r);
  llvm::Value* fresh_of(int r);
  // The allocas of register r's array (made once, in the entry block; a
  // register that held an array at the call's start gets its values there).
  void ensure_slots(int r);
  // A new array in register r (type t, its entry `entry`, its descriptor at
  // `desc`, a NativeArray) or that of register q (desc null).
  void set_array(int r, const ArrT& t, llvm::Value* entry, llvm::Value* desc, int q);

  // r = x[i...]: a row (a view) of array variable x in register r's slots,
  // its entry made only if the state goes back to the interpreter.
  void set_row(int r, const RowOf& row, const FNode& g);

  // np.zeros(n), np.ones(n), np.empty(n) (float64), and np.zeros_like(x),
  // np.ones_like(x), np.empty_like(x), np.copy(x), x.copy() (copy_value) of
  // an array variable: the result's type; false for anything else.
  static bool alloc_name(const FNode& n);
  bool alloc_type(const FNode& n, ArrT& t);
  // r = <an allocation>: the primitive run by native_alloc (its errors: a
  // bail, the interpreter's to report), its array to register r.
  void alloc_into(int r, const FNode& n, const ArrT& t);

  // A number for a helper, as a Reg ({kind, payload}) in a slot of `at`.
  void put_reg(llvm::Value* at, int64_t k, const CV& v);
  static bool scalar_cv(const CV& v);
  // [a, b], list(): a new list of numbers (native_list_new), made in the
  // interpreter's objects (released by its sweep between turns).
  CV new_list(const FNode& n);
  // xs[i] of a list register and an int: native_list_get, for items of the
  // kind item_kind says (another kind, or an index out of range: a bail).
  CV list_item(const FNode& n);

  // ---- comprehensions and list concatenation (native_gen_comprehensions.cpp)
  // `a + b` of two list expressions (a list variable, a display `[0]`, a
  // comprehension, or another such `+`): native_list_concat's new list, a
  // bail for anything it declines (a tuple, a string held in the variable).
  bool list_expr(const FNode& n) const;
  CV list_concat(const FNode& n);
  // The kind of number the items of the list `n` gives are read as (-1: not
  // known): a variable's item_kind, a display's first constant, the left
  // operand's of `+` (else the right's), iterate()'s operand's.
  int expr_item_kind(const FNode& n) const;
  // Comprehensions filled once and views of `a + b` (native_gen_comprehensions.hpp).
  std::vector<CompSite> comp_sites;
  std::map<const FNode*, int> comp_loop, comp_append;
  void find_comprehensions();
  void comp_start(int site);
  CV comp_append_item(const FNode& n, int site);
  void comp_finish(int site);
  // xs.append(row) of a list the item's expression makes (a comprehension,
  // a display, a `+`): native_list_append_list, one helper call a row.
  CV append_list(const FNode& n);
  std::map<int, View> views;
  void find_views();
  void view_assign(int r);
  CV view_item(const FNode& n);
  CV view_len(const FNode& n);
  llvm::Value* view_total(const View& v);

  // xs.append(v) of a number: native_list_append, which declines (a bail)
  // what the interpreter's append leaves to the general path (no list, a
  // list another register holds).
  CV append(const FNode& n);

  // ---- lists of lists and string characters (native_lists.hpp): helpers
  // on the interpreter's objects, a bail for whatever they decline.
  bool list_var(const FNode& k) const;
  llvm::Value* int_index(const FNode& k);
  llvm::Value* reg_arg(const CV& v);
  // ---- rows read and written in place (table_plain registers)
  static const NativeValueLayout& layout() { return native_value_layout(); }
  // The ValueKind byte of a Python int or float of register kind `k` when
  // register r's rows may be read or written in place; -1 otherwise.
  int in_place_kind(int r, int k) const;
  llvm::Value* row_gen_of(int r);
  llvm::Value* ranged_of(int r);
  // After a write through a helper into register r's list: the rows kept
  // by the sites are looked up again.
  void bump_rows(int r);
  // A site's row: valid (i1), its index as written, the writes count it
  // was found at, its items' address and number.
  // data: item 0's 8 bytes; stride: bytes between items (a Value's, or 8
  // for a list held unboxed); kfix: -1, or the ValueKind of every item (a
  // NumberList's; native_list_site).
  struct RowSite {
    llvm::Value *ok, *key, *gen, *data, *len, *buf, *stride, *kfix;
  };
  RowSite row_site(int r);
  // For t[i][j] of a table register: a cache of kNativeRowSlots rows shared
  // by all of the register's sites (NativeRowCache, one alloca), so that
  // code going from row to row (nbody's t[i], t[j]) finds each row's
  // address again instead of asking the helper at each site's change of
  // row. A site tests its slot inline (row_hit) and calls native_row_read
  // or native_row_write for everything else.
  std::map<int, llvm::Value*> row_caches;
  llvm::Value* row_cache_of(int r);
  // Alias scopes: the caches (and generations) in the frame, which escape to
  // the helpers, are never the rows' items, so LLVM keeps a slot's fields
  // in registers across the item stores of a turn. row_kind_dummy: a byte
  // the kind test reads instead of an item's when none is read.
  llvm::MDNode *row_scope = nullptr, *row_noalias = nullptr;
  llvm::Value* row_kind_dummy = nullptr;
  void row_scopes();
  // Slot i's field at byte `offset` of register r's cache, of type t.
  llvm::Value* row_field(llvm::Value* cache, size_t offset, llvm::Type* t, llvm::Value* slot);
  struct RowHit {
    llvm::Value *good, *at, *gen;
  };
  // The inline test of a t[i][j] site: its slot holds row i at the current
  // generation, j (negative from the end) is in range, item j is of
  // ValueKind `want` (for a write also: the row may be written in place and
  // needs no log entry). `at`: the item's 8 bytes when `good`.
  RowHit row_hit(int r, llvm::Value* i, llvm::Value* j, int want, bool write);
  // t[i][j]'s payload (register kind k, ValueKind want) through the cache
  // (`out`: the helper's).
  llvm::Value* row_read(int r, llvm::Value* obj, llvm::Value* i, llvm::Value* j, int k, int want,
                llvm::Value* out);
  // t[i][j] = value (its Reg at `item`) through the cache.
  void row_write(int r, llvm::Value* obj, llvm::Value* i, llvm::Value* j, int want,
                 const CV& value, llvm::Value* item);
  llvm::Value* site_hit(const RowSite& s, llvm::Value* i, llvm::Value* gen);
  void fill_site(const RowSite& s, llvm::Value* obj, llvm::Value* i, llvm::Value* gen);
  // The same for a flat list (xs[i]): the site keyed by the list's object.
  // `read_only`: a site that only reads (a tuple's items too).
  void fill_flat_site(const RowSite& s, llvm::Value* obj, llvm::Value* gen,
                      bool read_only = false);
  // The site's stride and kind (native_list_site's out[2], out[3]) from its buffer.
  void store_site_form(const RowSite& s);
  // Item j of the site's row written with `value` (of ValueKind `want`) in
  // place when the site holds it, through `call_set(kNativeInPlaceAsk)`
  // otherwise (then `fill(gen)` looks the row up again).
  void write_in_place(const RowSite& site, llvm::Value* key, llvm::Value* j, int r, int want,
                      const CV& value, const std::function<llvm::Value*(int64_t)>& call_set,
                      const std::function<void(llvm::Value*)>& fill);
  // Item j of the site's row (negative from the end) when the site holds a
  // row, j is in range and the item is of ValueKind `want`: the address of
  // its 8 bytes; null otherwise (the helpers then do what Python does).
  llvm::Value* site_item(const RowSite& s, llvm::Value* j, int want);
  // The item at `item` (site_item's address) stored into `out` when it is
  // not null, `get` (the helper) otherwise; the two joined after.
  void item_or_helper(llvm::Value* item, llvm::Value* out, const std::function<void()>& get);
  // t[i][j] of a list of lists (native_list2_get), read as table_kind says.
  CV list2_item(const FNode& n);
  // len(t[i]) of a list's item (native_list2_len).
  CV list2_len(const FNode& n);
  // t[i][j] = v (`t = setitem(t, setitem(t[i], v, j), i)`) and xs[i] = v of
  // a list register: native_list2_set / native_list_set, in the
  // interpreter's order (the value, then the indices).
  CV list_setitem(const FNode& n);
  // s[i] of a variable holding a string when the call starts, or a
  // one-character ASCII constant: compared as bytes (char_compare).
  bool char_operand(const FNode& k) const;
  llvm::Value* char_byte(const FNode& k);
  CV char_compare(const FNode& n);

  // ---- strings (native_gen_strings.cpp; docs/runtime.md, "Strings in
  // native code"): views of ASCII text, made by str() of an int, string
  // constants, variables holding a string, items of a list of strings,
  // s[i], s[a:b:c], s.strip(chars) and type(x); taken by comparisons, len(),
  // `in`, str.find, truth and dict keys. A non-ASCII string bails (the
  // interpreter's), a float's str() is refused.
  // True when `n` is such a string expression (without emitting anything).
  bool str_expr(const FNode& n) const;
  // A register that holds a string (an object register whose value at the
  // call's start is a string, or one the loop assigns strings only).
  bool str_reg(int r) const;
  std::vector<bool> str_regs;  // find_str_regs
  // A list of strings the loop only reads (list_fixed, its first item a
  // string): words[i] is a view of the item (native_list_str).
  bool str_list(int r) const;
  std::vector<bool> str_lists;
  // Both tables, before any code (sets `lists` when the loop assigns strings:
  // they become objects).
  void find_str_regs();
  CV str_value(const FNode& n);
  // The text of `n` when it is known here: a constant, type(x) of a string or
  // of a variable of a known kind; and the truth of `a == b` / `a != b` of two
  // such (-1: not known), by which an `if` emits only the branch it takes
  // (int(s)'s `type(v) == "string"`: the other branch has no native code).
  bool static_text(const FNode& n, std::string& out) const;
  int static_truth(const FNode& c) const;
  // A string's view as an object index (an assignment: Python's str in the
  // interpreter's objects).
  llvm::Value* str_object(const CV& s);
  // The character at position i of view s (no check).
  llvm::Value* str_at(const CV& s, llvm::Value* i);
  // ==, !=, <, <=, >, >= of two string expressions (Python's bool).
  CV str_compare(const FNode& n);
  // len(s), not s, `a in s` and s.find(a) of string expressions, into `out`;
  // false when `n` is not one of them on strings.
  bool str_call(const FNode& n, CV& out);

  CV read(int r);
  void write(int r, const CV& v);

  // ---- arithmetic (int_op / float_op of fastloop.cpp)
  CV int_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y);
  // k when `y` is the constant 2**k (k < 63), else -1.
  static int pow2(llvm::Value* y);
  // `strong`: the result is NumPy's int64 (else Python's int), when known.
  CV int_op0(Fast f, llvm::Value* x, llvm::Value* y, llvm::Value* strong = nullptr);

  CV float_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y);
  CV float_op0(Fast f, llvm::Value* x, llvm::Value* y);

  // x ** y as the interpreter's scalar power (Python's meaning): a float
  // operand, std::pow; two ints, by squaring with overflow checks, for a
  // constant exponent >= 0 (others stay on the interpreter).
  CV power(const CV& a, const CV& c);

  llvm::Value* as_double(const CV& v);

  // An operand a float32 or a NumPy int narrower than int64
  // (FastLoop::Impl::binary_narrow): a result of such a kind computed into
  // `a` (true, `c` Nil), or both widened to float64/int64 for the code below
  // (true), or false.
  bool narrow_binary(const FNode& n, CV& a, CV& c);
  // An operand a DynF32 (Python's float or np.float32 by turns) with a
  // float, an int or another DynF32: NumPy's float32 arithmetic when either
  // is a float32 this turn, Python's double otherwise (both computed, the
  // one the turn's kinds give selected); float64 with NumPy's float64 and
  // ints. Comparisons likewise (np.bool or bool).
  CV dyn_f32_binary(const FNode& n, const CV& a, const CV& c);
  // x op y of two float32 values (add, sub, mul, div: a float; the
  // comparisons: an i1).
  llvm::Value* f32_op(Fast f, llvm::Value* x, llvm::Value* y);

  // f(a, b) of a recursive jit function (Op::NativeCall): its own native
  // code (native_calls.cpp), compiled now for the arguments' kinds and
  // called through native_loop_call; a bail when it cannot run it.
  CV native_call(const FNode& n);
  CV binary(const FNode& n);
  // a[i] == b[j], c[k] < 3 of elements of uint8, int8, int16, uint16 or uint32 arrays (no
  // register kind of their own) and ints or floats: NumPy's bool, compared exactly.
  bool small_int_compare_of(const FNode& n);
  CV small_int_compare(const FNode& n);
  CV wide_binary(const FNode& n, const CV& a, const CV& c);

  // ---- elements
  // ---- float32 and narrow int elements: NumPy's scalars of those dtypes
  // have no register kind (the interpreter holds them as 0-d arrays), so
  // their reads are compiled only where the kind does not matter: as an
  // index (x[idx[k]]), or as the value of an element write whose cast is
  // exact (y[i] = x32[i] into float64, int64 or the same dtype).
  llvm::Type* narrow_type(DType dt);
  static bool is_unsigned_dt(DType dt);
  // The dtype of x[i, ...] when `n` reads one element of a float32 or
  // narrow int array variable; float64 (none of them) otherwise.
  DType narrow_of(const FNode& n);
  bool narrow_int(const FNode& n);
  // NumPy's cast of `from` into `to` is exact (no rounding, no wrap-around).
  static bool exact_cast(DType from, DType to);
  // The element n (narrow_of(n) is not float64) as stored.
  llvm::Value* narrow_read(const FNode& n);
  // Element v of dtype `from` as an element of dtype `to` (exact_cast).
  llvm::Value* cast_exact(llvm::Value* v, DType from, DType to, llvm::Type* t);

  llvm::Value* element_offset(const FNode& n, int r, size_t first, size_t nidx);

  // ---- dicts and sets (native_dicts.hpp; docs/runtime.md, "Dicts and sets
  // in native code"). Registers holding a dict when the loop starts, or
  // assigned `{}` (`set()`), through `e = d`; the kind of their values from
  // their first item, else from what the loop writes into them.
  void find_dicts(const std::vector<const FNode*>& asg);
  // The kind of a number written into a dict, as far as it shows without
  // running the loop (`d.get(k, 0) + 1`: Python's int); -1 unknown. A wrong
  // guess costs a bail at the first read of another kind, not an answer.
  int written_kind(const FNode& v) const;
  // The key of d[k], d[i, j] (a tuple), `k in d`: numbers, as Regs in an
  // alloca for the helper.
  // `first`: the first key's value.
  llvm::Value* dict_key(const FNode* const* keys, size_t nkeys, CV* first = nullptr);
  // ---- int keys probed by the code itself (docs/runtime.md, "Dicts and sets
  // in native code"): a compact, indexed dict's slots read in place, as
  // Dict::position_of_int does (the layout of core/value.cpp, given by
  // native_dict_view); a helper call only for a write, a dict of another
  // form, a key past +-2**53, or a value of another kind.
  // Every helper call but a dict's read may change a dict (a write, a new
  // object, a sweep): `dict_epoch` counts them, and a register's view is good
  // while the count is the one it was taken at.
  llvm::Value* dict_epoch = nullptr;
  // The same for lists: bumped by every helper call but a list's read
  // (fptr); a list read site's items address is good while it is unchanged.
  llvm::Value* list_epoch = nullptr;
  llvm::Value* list_epoch_of();
  llvm::Value* dict_epoch_of();
  struct DictView {
    llvm::Value *ok, *obj, *epoch, *buf;  // i1, i64, i64, five i64 (native_dict_view's, and
                                          // native_dict_set's result of it)
  };
  std::map<int, DictView> dict_views;
  DictView dict_view_of(int r);
  // Whether int `key` (an int register's i64) is in register r's dict `obj`,
  // found by the code: decided (i1); if so, its position (-1: not there) and
  // the items' and kinds' addresses (i8*) to read its value.
  struct InPlaceProbe {
    llvm::Value *decided, *pos, *numbers, *kinds;
  };
  InPlaceProbe dict_probe(int r, llvm::Value* obj, llvm::Value* key);
  // The compact kind (DictValueKind) a value of register kind k is held as:
  // -1 for NumPy's scalars (held as Values).
  static int compact_kind(int k);
  // The item at a found position: whether its value is of compact kind `ck`, and its bits.
  std::pair<llvm::Value*, llvm::Value*> dict_probed_value(const InPlaceProbe& p, int ck);
  // native_dict_find on register r's dict: its status, the value's payload
  // in `out` when `kind` >= 0.
  llvm::Value* dict_find(llvm::Value* obj, llvm::Value* key, size_t nkeys, int kind,
                         llvm::Value* out);
  CV dict_value(int k, llvm::Value* payload);
  int dict_kind(int r);
  // d[k] (a missing key: the interpreter's KeyError at the user's line).
  CV dict_item(const FNode& n);
  // `k in d` (not_ of it: negate) and d.get(k, default) of a number default.
  CV dict_call(const FNode& n);
  // d[k] = v, d[i, j] = v, s.add(k) (`s[k] = True`), d[k] += v.
  CV dict_set(const FNode& n);
  // Whether a register other than r holds object `obj` now (i1): its
  // comparisons are written at the end of build (HeldCheck).
  llvm::Value* held_elsewhere(int r, llvm::Value* obj);
  // {} and set() made in the loop (an empty dict: native_dict_new).
  CV new_dict(const FNode& n);

  bool arr_var(const FNode& k) { return k.op == Op::Var && kind[k.reg] == Reg::Arr; }

  // ---- array expressions over 1-d views (native_gen_arrexpr.cpp;
  // docs/runtime.md, "Array expressions in native code"): elementwise
  // expressions whose leaves are numbers and 1-d views (x, X[:, j], X[i],
  // X[a:b:s]), reduced by sum/mean/max/min in one scalar loop, with no array
  // made. `lazy`: registers assigned such an expression (`w = A[:, i] - c`),
  // read only by the consumers that follow (find_lazy), never given a value.
  std::map<int, const FNode*> lazy;
  // Per lazy register: the arrays it reads (registers), and the array
  // registers written between its assignment and its last use, checked
  // not to overlap them where it is assigned (lazy_assign; else a bail).
  std::map<int, std::set<int>> lazy_reads, lazy_writes;
  void find_lazy();
  void lazy_assign(int r);
  bool is_view(const FNode& n);
  bool arr_expr(const FNode& n);
  static bool is_reduction(const FNode& n);
  // A view leaf of the consumer being emitted: its first element, extent
  // and step (elements; 0 when broadcast), and element dtype.
  struct ViewLeaf {
    llvm::Value *base, *len, *step;
    DType dt;
  };
  std::map<const FNode*, ViewLeaf> elem_view;
  std::map<const FNode*, CV> elem_const;  // numbers, evaluated before the element loop
  llvm::Value* elem_t = nullptr;          // the element's index (element mode when set)
  llvm::Value* elem_len = nullptr;        // the broadcast length (prepare)
  // A lazy local's definition prepared again by a consumer: its nodes were
  // counted where it was assigned (lazy_assign), as the general path counts.
  bool mute_counts = false;
  // Evaluates the leaves of expression `n` (its views' descriptors, its
  // numbers), left to right, and checks their lengths broadcast.
  void elem_prepare(const FNode& n);
  // The view n's indices select (GetItem: kids[1...]; SetItem: kids[2...]).
  void view_of(const FNode& n, size_t first = 1);
  // start:stop:step as an index (a constant, or bounds known at run time).
  static bool slice_index(const FNode& k);
  // x[i, :] = e, x[a:b] = e of an array expression or a number: one loop
  // writing each element (logged), e's views checked not to overlap x's
  // elements unless they are the same view.
  bool slice_write_of(const FNode& n);
  CV slice_write(const FNode& n);
  // x.sort() of a 1-d array variable (its translated setitem): in place by a
  // helper (native_sort_1d), the array logged whole once.
  bool sort_in_place_of(const FNode& n) const;
  CV sort_in_place(const FNode& n);
  // x[i] = y, x[i, j] = y[k] of an array variable y (or its row) of x's dtype
  // whose shape is that of the elements the ints select (a row, a plane): copied by a helper
  // (native_copy_block), x logged whole once; another shape bails (NumPy's
  // broadcasting or its ValueError: the interpreter's).
  bool block_write_of(const FNode& n);
  CV block_write(const FNode& n);
  // The value of a block write: an array variable, or one indexed by ints
  // (fewer than its dimensions), with its register and the ints' count.
  bool block_of(const FNode& v, int& r, size_t& nidx);
  // The address of x[i, j, ...] (n.kids[from...] the ints; IndexError bails).
  llvm::Value* block_offset(int r, const FNode& n, size_t from);
  // x[:] = c, x[:, :] = c of an array of any rank: every element set to the number c.
  bool whole_fill_of(const FNode& n);
  CV whole_fill(const FNode& n);
  CV elem_leaf(const FNode& n);
  CV elem_where(const FNode& n);
  void count_expr(const FNode& n);
  CV reduce(const FNode& n);
  CV dot_reduce(const FNode& n);

  CV getitem(const FNode& n);

  // element_cast<T>(double) for an integer T of `bits` bits (array.hpp):
  // out of int64's range gives T's minimum.
  llvm::Value* float_to_int(llvm::Value* f, llvm::Type* t, bool is_unsigned);

  CV setitem(const FNode& n);

  // An element write of array register `r` that no check before the loop
  // covers (an insertion sort's `a[j + 1] = a[j]` under `while j >= 0`):
  // its old bytes to the log, until the call's log holds as many bytes as
  // the array; then the whole array is copied to the log once
  // (snapshot_once) and its later writes in this call are not logged.
  // Millions of shifts within a few thousand elements cost one copy, not a
  // log of tens of megabytes; an array written a few times is never copied.
  void log_or_snapshot(int r, llvm::Value* p, llvm::Type* it, unsigned size);
  // The same, skipped at run time when the array was made in this call (no
  // undo needed: a bail goes back to before it was made, or, turn by turn, to
  // registers not holding it); `name` labels the blocks.
  void log_unless_fresh(int r, llvm::Value* p, llvm::Type* it, unsigned size, const char* name);

  // The old bytes of the element at `p` to the log.
  void log_write(llvm::Value* p, llvm::Type* it, unsigned size);

  CV astype(const FNode& n);

  // A float function of one number (np.sqrt(x), math.exp(x), ...): the
  // kind of its result found by calling the primitive once on a sample.
  CV call(const FNode& n);

  // np.searchsorted(a, v[, side]) of a 1-d array variable or a row of one
  // and a number: a binary search in the code (native_gen_search.cpp).
  CV searchsorted(const FNode& n);

  // `-x` of a number (its kind kept: Python's int overflows at INT64_MIN, to
  // the general path; NumPy's int64 and int32 wrap around) and Python's
  // `not x` (a Python bool whatever x's kind).
  // -x of an int register: NumPy's int32 and int64 wrap around; Python's int
  // past int64 bails (the general path's OverflowError), unless `v.s` says
  // that turn's number is NumPy's.
  llvm::Value* int_negative(const CV& v);
  // The operation is & | ^ << or >> (no Fast of its own).
  static bool int_bit_op_of(const FNode& n);
  // `x op y` of two int64 payloads that kind k (narrow_int_kind) holds:
  // NumPy's arithmetic wrapped to k, comparisons, & | ^ and shifts.
  CV narrow_int_op(const FNode& n, int k, llvm::Value* x, llvm::Value* y);
  // & | ^ << >> of two ints of any kind (NumPy's or Python's meaning).
  CV int_bit_binary(const FNode& n, CV a, CV c);
  // An int64 wrapped to NumPy's integer kind k (narrow_int_kind: truncated,
  // then sign or zero extended back to i64).
  llvm::Value* wrap_int(int k, llvm::Value* v) {
    llvm::Value* t = b.CreateTrunc(v, b.getIntNTy(static_cast<unsigned>(narrow_int_bits(k))));
    return narrow_int_unsigned(k) ? b.CreateZExt(t, i64) : b.CreateSExt(t, i64);
  }
  CV negate(const FNode& n);

  int probe(const FNode& n, UnaryOp op, const CV& v);

  CV finish_call(const FNode& n, UnaryOp op, const CV& v, int rk);

  // ---- statements
  // A value for an operation: a list is one only for len(), an append, an
  // assignment, and as a statement's or the loop's value (eval_any).
  CV eval(const FNode& n);
  CV eval_any(const FNode& n);

  // Merges two values coming from `ba` and `bb` into `at` (the current block).
  CV merge(const CV& a, llvm::BasicBlock* ba, const CV& c, llvm::BasicBlock* bc);

  CV if_(const FNode& n);

  void interrupt_check(llvm::BasicBlock* on_interrupt);

  struct RangeLoop {
    const FNode* cond = nullptr;
    int k = -1;
    const FNode* end = nullptr;  // a variable or a constant
    int64_t step = 0;
    size_t inc_at = 0;            // body.kids[inc_at] is k = k + step
    const FNode* inc = nullptr;   // k + step
    std::map<int, size_t> ivar;   // registers set to k before the increment (i = k), and where
    std::set<int> assigned;       // registers assigned in the body
    std::set<int> rebound;        // array registers assigned another array in the body
    bool loops_in = false;        // loops inside the body
  };
  // An element access whose indices are the counter plus what the loop does
  // not change, checked at the loop's first and last turns.
  struct Hoisted {
    const FNode* n;
    int arr;
    size_t first;             // kids[first...] are the indices
    bool after_inc;           // evaluated after k = k + step (k is then t + step)
    std::vector<int> coef;    // per index: -1, 0 or 1 times the counter, or kModIndex
  };
  // A read's index `a % c` with c > 0 the loop does not change: in [0, c),
  // whatever `a` (checked before the loop: 1 <= c <= the extent).
  static constexpr int kModIndex = 3;
  bool mod_bounded(const FNode& ix, const RangeLoop& rl) const;
  // A read whose index may be negative by its form (x[i - 1], x[-1]): when
  // its loop's check failed so before (cells[i - 1] at i = 0 of a periodic
  // stencil), that check admits [-extent, extent) and the access adds the
  // extent to a negative index; other checks admit [0, extent) (a select at
  // each access would keep LLVM from vectorising the loops that never wrap).
  bool may_wrap(const FNode& n) const;
  llvm::Value* index_in(const FNode& n, llvm::Value* lo, llvm::Value* hi, llvm::Value* ext);

  // A nested loop (FastLoop::Impl::loop): Ctrl-C inside a turn bails.
  CV while_(const FNode& n);

  // The turns of range loop `n` with the accesses in `pr` unchecked (and
  // their writes logged before), in chunks of 65536 turns with Ctrl-C
  // checked between them: the turns of a chunk form a loop with no exit but
  // its end, which LLVM vectorises. Ends branching to `done`.
  void range_chunks(const FNode& n, const RangeLoop& rl, llvm::Value* e0, llvm::Value* lk,
                    llvm::Value* lp, llvm::BasicBlock* done, const std::set<const FNode*>& pr);

  // Node counters that always hold the same value, merged into one before
  // -O3: each counted node has its own counter, incremented where the node
  // runs, so the nodes of one loop body are a dozen equal counters that
  // LLVM keeps apart (each started from 0, equal only by induction), packs
  // into vectors and spills around the nest's inner loops (conv2d_loop's
  // windows). Counters are equal wherever they are read when they are
  // incremented equally often in every region (a block and the blocks
  // after its checks: the other way out of a check leads to no read of a
  // counter) and no read falls between the increments of one region.
  void merge_counters();

  // One turn of range loop `n` with the accesses in `pr` unchecked, then
  // back to `head`.
  void unchecked_turn(const FNode& n, const RangeLoop& rl, llvm::BasicBlock* head,
                      llvm::BasicBlock* done, llvm::Value* lk, llvm::Value* lp,
                      const std::set<const FNode*>& pr);

  // range_chunks, with the flat lists of numbers the body reads and writes
  // (table_plain registers) asked for once before the loop: their items'
  // address, length, kind and the right to write them in place, the
  // affine indices checked at the first and last turns, the writes logged
  // there; when that fails, the per-access code (native_gen_list_hoist.cpp).
  void hoisted_range_chunks(const FNode& n, const RangeLoop& rl, llvm::Value* e0,
                            llvm::Value* lk, llvm::Value* lp, llvm::BasicBlock* done,
                            const std::set<const FNode*>& pr);
  struct ListSite {
    const FNode* n;  // xs[i] or xs = setitem(xs, v, i)
    int reg;
    size_t at;       // the body's statement it is in
  };
  struct HoistedList {
    llvm::Value *data, *len;  // the NumberList's items and their number
    int want;                 // their ValueKind
    // A list the loop only reads may be a list of Values too (a caller's
    // list of Python ints): `boxed` (i1) then, `stride` the bytes from one
    // item to the next (8 or the Value's size; null: 8) and each item's kind
    // checked at its read.
    llvm::Value* boxed = nullptr;
    llvm::Value* stride = nullptr;
  };
  void list_sites(const FNode& body, const RangeLoop& rl, std::vector<ListSite>& out);
  // True when a site's list, as the code is compiled, is a list of Values,
  // which the hoisted version's check refuses (its items have no fixed
  // address): a lazy build then emits the per-access version only.
  bool lists_boxed_now(const std::vector<ListSite>& ss) const;
  // What register `reg` holds as the code is compiled: 1 a NumberList, 2 a
  // list of Values (a tuple too), 0 not known (not a list, or none yet).
  int list_form_now(int reg) const;
  // The check before the loop (at least one turn, the lists' form, the
  // affine indices, added to pr_h), then the log of what the loop writes.
  llvm::Value* lists_ok(const std::vector<ListSite>& ss, const RangeLoop& rl, llvm::Value* k0,
                        llvm::Value* e0, std::map<int, HoistedList>& hl,
                        std::set<const FNode*>& pr_h);
  // (`cap`: the most turns the call runs before its checkpoint, or null.)
  void prelog_lists(const std::vector<ListSite>& ss, const RangeLoop& rl, llvm::Value* k0,
                    llvm::Value* e0, std::map<int, HoistedList>& hl, llvm::Value* cap);
  // A range loop with lists that is the whole function (no loops inside, no
  // arrays made): its turns with the lists asked for once, in chunks; else
  // the general turns at `top`.
  void top_lists(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                 llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                 llvm::Value* max_turns, llvm::Value* turns);
  std::map<int, HoistedList>* hoisted_lists = nullptr;  // while emitting such a loop
  const HoistedList* hoisted_list(const FNode& n) const;
  llvm::Value* hoisted_at(const FNode& n, const HoistedList& h, llvm::Value* i);
  CV hoisted_item(const FNode& n, const HoistedList& h);
  CV hoisted_write(const FNode& n, const HoistedList& h);

  // True when every element access under `n` is in `pr`.
  bool all_proven(const FNode& n, const std::set<const FNode*>& pr);

  // A copy of array register `r` to the log, once per call (before writes
  // not logged one by one).
  void snapshot_once(int r);

  // ---- loop nests: the intervals of the int variables of a range loop's
  // body, known before it, for the accesses of inner loops. An inner loop is
  // the translator's `for j in range(s, e)`: k2 = s; e2 = e; while(k2 < e2,
  // block(j = k2, k2 = k2 + 1, ...)) in one block; k2 takes values in
  // [s, max(s, e - 1 + step)], j in [s, e - 1] (a negative step: mirrored).
  struct Inner {
    const FNode* start;  // the expressions assigned to k2 and e2 before the loop
    const FNode* stop;
    int64_t step;
    int k;
  };
  // A counter run down by a while loop whose condition guards it from below
  // (an insertion sort's `while j >= 0 and a[j] > key: ...; j -= 1`): the
  // decrement `j = j - c` (c > 0), a statement of the body, the only
  // assignment of j in the loop, runs only on turns that began with
  // j >= lo(guard) (j > g: g + 1), so its values are >= lo(guard) - c, and
  // the condition after the guard and the statements before the decrement
  // see j >= lo(guard).
  struct Guarded {
    const FNode* loop;   // the While
    const FNode* guard;  // the comparison of j
    const FNode* bound;  // the other side of it
    bool strict;         // j > bound
    int64_t c;
    size_t at;           // the decrement's place in the body
    int reg;
  };
  struct Nest {
    const RangeLoop* rl;
    llvm::Value *k0, *e0;
    std::map<int, std::vector<const FNode*>> assigns;  // per register: its Assign nodes
    std::vector<Inner> inners;
    std::map<const FNode*, std::pair<int, size_t>> role;  // Assign -> (0 init, 1 inc, 2 ivar, 3 end; inner)
    std::map<int, std::pair<llvm::Value*, llvm::Value*>> memo;
    std::set<int> visiting;
    llvm::Value* bad;
    std::map<const FNode*, Guarded> guarded;  // the `j -= c` of each guarded while, by its Assign
    std::map<int, const Guarded*> floor;  // j's guard where its lower bound holds (nest_collect)
  };
  void find_guarded(const FNode& n, Nest& ns);
  // The guards find_guarded took: Python ints on both sides, or no code.
  std::set<const FNode*> py_guards;
  // The lowest value the guard of `g` lets j have inside its loop.
  bool guard_floor(const Guarded& g, Nest& ns, llvm::Value*& lo);

  static void assigns_of(const FNode& n, Nest& ns);

  void find_inners(const FNode& n, Nest& ns);

  // Python's a // c for a constant c > 0.
  llvm::Value* floor_div(llvm::Value* a, int64_t c);
  llvm::Value* smin(llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSLT(x, y), x, y); }
  llvm::Value* smax(llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSGT(x, y), x, y); }
  llvm::Value* checked(llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y, Nest& ns);

  // The interval [lo, hi] of int expression `x` over the nest's turns;
  // false when it is not known before the loop.
  bool interval(const FNode& x, Nest& ns, llvm::Value*& lo, llvm::Value*& hi);

  bool var_interval(int r, Nest& ns, llvm::Value*& lo, llvm::Value*& hi);

  // Marks the index arithmetic of an access proven (no overflow checks, and
  // a % whose divisor interval() found positive without its zero check).
  static void index_ops(const FNode& n, std::set<const FNode*>& pr);

  void nest_collect(const FNode& n, Nest& ns, llvm::Value*& ok, std::set<const FNode*>& pr,
                    std::set<int>& copy);
  // nest_collect of a guarded while's condition: the guard as anything
  // else, what the `and`s evaluate after it with j's lower bound.
  void guarded_cond(const FNode& c, const Guarded& g, Nest& ns, llvm::Value*& ok,
                    std::set<const FNode*>& pr, std::set<int>& copy);

  // Before a range loop with loops inside: true when every access of the
  // nest whose indices have known intervals (and not already in `pr`) is in
  // range for all of them; those join `pr`, and the arrays they write,
  // `copy` (copied whole once per call before the loop).
  llvm::Value* nest_ok(const FNode& body, const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0,
                       std::set<const FNode*>& pr, std::set<int>& copy);

  // ---- range loops: `for i in range(a, b)` as the translator writes it,
  // while(k < e, block(i = k, k = k + 1, ...)) (or k > e and k + -1), with
  // neither k nor e assigned elsewhere in the body and no loop inside it.
  static void scan(const FNode& n, std::map<int, int>& assigns, bool& loops_in);
  bool int_reg(int r) const { return is_int(kind[r]) && !dyn[r]; }
  // A range's step for a loop condition k < e (positive) or k > e
  // (negative), as `range(a, b, step)` gives: at most 2^32 either way, so
  // that the bounds below stay far from int64's ends.
  static bool step_of(Fast cond, int64_t step);
  // The counter's value at the last turn of a loop that turns at least once
  // (k0 before e0): k0 plus the whole steps that stay before e0.
  llvm::Value* last_turn(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0);
  // The number of turns of such a loop.
  llvm::Value* turn_count(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0);

  bool range_loop(const FNode& cond, const FNode& body, RangeLoop& rl);

  // The coefficient of the counter in index expression `n` (-1, 0, 1), or 2
  // when `n` is not the counter plus or minus what the loop leaves alone.
  int affine(const FNode& n, const RangeLoop& rl, size_t at, std::vector<const FNode*>& ops);

  void collect(const FNode& n, const RangeLoop& rl, size_t at, std::vector<Hoisted>& hs,
               std::set<const FNode*>& pr);

  // Index expression `n` (affine) with the counter at `t`; `bad` collects
  // overflows and variables not defined.
  llvm::Value* affine_at(const FNode& n, const RangeLoop& rl, bool after_inc, llvm::Value* t,
                         llvm::Value*& bad);

  // A range's end LLVM knows: a constant, or a register assigned only
  // constants (its value at the loop is one of them, before the optimiser
  // runs it is a load).
  bool const_end(const RangeLoop& rl) const;

  llvm::Value* end_value(const RangeLoop& rl, llvm::Value*& bad);

  // Before a range loop: true when it turns at least once and every hoisted
  // access is in range at its first and last turns (so at all of them: the
  // indices are monotonic in the counter). Sets k0 and e0.
  llvm::Value* range_ok(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value*& k0,
                        llvm::Value*& e0);

  // The old bytes of every element the proven writes of a range loop will
  // write (all turns), to the log, before the loop: no logging inside it.
  // An array written by a range loop is copied whole (once per call) when
  // it has at most 4 elements per turn of the loop; else the elements it
  // will write are logged.
  void prelog(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value* k0,
              llvm::Value* e0);

  // The end of this chunk of a range loop's turns: at most `room` more.
  llvm::Value* chunk_limit(const RangeLoop& rl, llvm::Value* k, llvm::Value* e0, llvm::Value* room);
  llvm::Value* before(const RangeLoop& rl, llvm::Value* k, llvm::Value* lim);

  // The registers, counters and the loop's value back to the context, each
  // as `get` gives it (now, or as at the start of the turn).
  using Getter = std::function<llvm::Value*(llvm::Value*, llvm::Type*)>;
  void store_state(const Getter& get);

  // Row register r to the context's registers: its entry, made now
  // (native_row_view) when it has none yet; Undef when it holds no row or
  // the entry cannot be made.
  void store_row(int r, const Getter& get);

  // Object register r ({Obj, index}, or Undef) to the context's registers.
  void store_obj(size_t r, llvm::Value* d, llvm::Value* index);

  // The state at the start of a turn, block `at` (loads that -O3 turns into
  // the values live there), for a bail block; made once the turn's code is
  // emitted (the registers it assigns first have their allocas then).
  std::map<llvm::Value*, llvm::Value*> snapshot(llvm::BasicBlock* at);

  // The turns of a versioned range loop, in chunks: at `chunk`, Ctrl-C and
  // the turn limit (to `checkpoint`), then turns while the counter is before
  // the chunk's end, each emitted by `turn` (called once, in the turn's
  // block), then the next chunk, or
  // `done` at e0. Returns the turn's block.
  llvm::BasicBlock* chunked_turns(const RangeLoop& rl, llvm::Value* e0, llvm::BasicBlock* chunk,
                                  llvm::BasicBlock* done, llvm::BasicBlock* checkpoint,
                                  llvm::BasicBlock* interrupted, llvm::Value* max_turns,
                                  llvm::Value* turns,
                                  const std::function<void()>& turn);

  // The body's accesses the range loop `rl` proves (hs, pr) and the check
  // of them before it (true: the unchecked version may run), its counter's
  // increment then without overflow check.
  llvm::Value* hoist(const RangeLoop& rl, std::vector<Hoisted>& hs, std::set<const FNode*>& pr,
                     llvm::Value*& k0, llvm::Value*& e0);

  // Registers that may be assigned another array (rebinds): those assigned
  // an allocation or a variable (see below), found until nothing changes.
  void find_rebinds();

  // Lists in the loop: made or appended to (their sweep at each turn's
  // start), or a variable holding one (or another object) when it began.
  void find_lists();
  void find_fixed_lists();
  // `a, b = t[i]` (native_gen_rows.cpp): the registers assigned
  // unpack(t[i], n) once and read only as their [c] (unpack_regs); the
  // items copied at the unpacking into i64 allocas, read back by kind.
  struct Unpacked {
    std::vector<int> kinds;
    std::vector<llvm::Value*> out;
    llvm::Value* def = nullptr;  // i1: unpacked in this call
  };
  std::set<int> unpack_regs;
  std::map<int, Unpacked> unpacked;
  void find_unpacks();
  const Value* compile_list(int r, int depth) const;
  void unpack_assign(const FNode& n);
  CV unpacked_item(const FNode& n);
  void find_iterate_aliases();
  // `iterate(x)` of a variable holding an array when the loop starts (its
  // value is the array itself).
  bool iterates_array(const FNode& n) const;
  static bool is_iterate(const FNode& n);

  // Registers every assignment of which is an int constant (a range's
  // hidden end in `range(3)`): LLVM sees their value.
  void find_const_only();

  // The array registers `n` assigns another array (not x = setitem(x, ...)).
  void rebound_in(const FNode& n, std::set<int>& out) const;

  // At a turn's start, after arrays were made: the array registers to the
  // context and the arrays no register (nor the checkpoint, nor the loop's
  // value) refers to any more released (native_sweep).
  void sweep_point();

  // The body's value as the loop's value so far.
  void body_turn();

  // The loop itself a range loop without loops inside: its turns as one
  // loop with the accesses checked before it, each turn's writes undone
  // from registers on a bail; the general turns (`top`) when the check
  // fails. Ends at a checkpoint after the context's max_turns turns, as they do.
  void top_range(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                 llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                 llvm::Value* turns);

  // The loop itself a range loop with loops inside: the accesses of the
  // whole nest checked before it (range_ok, nest_ok), its turns without
  // those checks; a bail goes back to the call's start (the writes logged
  // before the loop, or none when nothing in it can bail). The general
  // turns (`top`) when the check fails. Ends at a checkpoint after the
  // context's max_turns turns (native_snapshot raises it).
  void top_nest(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                llvm::Value* turns);

  // Per register, the uses of its variable other than as the array of an
  // element write assigned back to it (x = setitem(x, v, i) counts none).
  void count_reads(const FNode& n, std::vector<int>& reads);

  // True when the elements of array register `r` may share memory with
  // those of another array register (by the bytes they span).
  llvm::Value* shares_memory(int r);
  // The bytes [lo, hi) array register q's elements span.
  void byte_span(int q, llvm::Value*& lo, llvm::Value*& hi);

  // ---- the function
  void build(const std::string& name);
};

}  // namespace tessera::native_gen
