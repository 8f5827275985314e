// The native code generator of the scalar loop fast path (native.hpp): the
// loop's tree of operations (FastLoop::Impl, fastloop_impl.hpp), typed by
// the kinds its registers hold after its first turns, becomes one LLVM
// function, optimised at -O2 and compiled by ORC's LLJIT. Every operation
// does what the register interpreter's handler for it does (fastloop.cpp):
// the same kinds of results, NumPy's casts, Python's floor division and
// modulo, the same counters. What the interpreter leaves to the general
// evaluation (an overflow, a division by zero, an index out of range, a
// register changing kind, Ctrl-C inside a turn) makes the function return
// kNativeBail; its element writes are then undone from its log and the
// interpreter redoes the turns since the call, so errors keep their
// messages and positions. This is the only file that includes LLVM.
#include "tessera/lang/native.hpp"

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/CFG.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_lists.hpp"
#include "tessera/lang/native_cache.hpp"
#include "tessera/lang/native_dicts.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/random_stream.hpp"
#include "tessera/runtime/interrupt.hpp"

#ifndef TESSERA_VERSION_STRING
#define TESSERA_VERSION_STRING "0.1.0"
#endif

namespace tessera {

static_assert(sizeof(Reg) == 16 && offsetof(Reg, i) == 8, "native code reads Reg as {kind, payload}");

// TESSERA_NATIVE, read once: "0" runs the interpreter; "ir" prints each
// loop's optimised LLVM IR to stderr (to see what blocks vectorisation).
namespace {
const std::string& native_setting() {
  static const std::string v = [] {
    const char* e = std::getenv("TESSERA_NATIVE");
    return std::string(e ? e : "");
  }();
  return v;
}
}  // namespace

bool native_enabled() { return native_setting() != "0"; }
bool native_debug() { return native_setting() == "debug"; }

// The array's last dimension has unit stride (or one element at most, whose
// stride no index multiplies): its accesses are compiled with the constant
// stride 1, as a C-contiguous array's in Numba, which is what lets LLVM drop
// the multiplications of an inner loop's index and vectorise without
// versioning on the stride.
bool native_unit_last(const ArrEntry& e) {
  if (!e.indexable || e.nd == 0) return false;
  return e.strides[e.nd - 1] == 1 || e.shape[e.nd - 1] <= 1;
}

std::vector<uint8_t> native_signature(const std::vector<Reg>& regs,
                                      const std::vector<ArrEntry>& arrays) {
  std::vector<uint8_t> sig;
  sig.reserve(regs.size() * 4);
  for (const Reg& r : regs) {
    sig.push_back(r.k);
    if (r.k == Reg::Arr) {
      const ArrEntry& e = arrays[r.a];
      sig.push_back(static_cast<uint8_t>(e.dt));
      sig.push_back(static_cast<uint8_t>(e.nd));
      sig.push_back(static_cast<uint8_t>(native_unit_last(e) * 4 + e.writable * 2 + e.indexable));
    }
  }
  return sig;
}

namespace {
// The entries' buffer a finished NativeLog left on this thread (see NativeLog).
thread_local std::vector<NativeUndo> t_spare_undo_entries;
}  // namespace

NativeLog::NativeLog() { entries.swap(t_spare_undo_entries); }

NativeLog::~NativeLog() {
  // Kept unless another log of this thread (a loop run inside this one)
  // already gave one back, or it grew past 1 MB (a run of many writes).
  if (t_spare_undo_entries.empty() && entries.size() * sizeof(NativeUndo) <= (size_t{1} << 20))
    entries.swap(t_spare_undo_entries);
}

void native_undo(const NativeLog& log, int64_t n) {
  for (int64_t k = n - 1; k >= 0; --k) {
    const NativeUndo& u = log.entries[static_cast<size_t>(k)];
    if ((u.where >> 60) == (kNativeCopyTag >> 60)) {
      Array target = log.copies[u.old].first;  // a handle on the same elements
      target.assign(log.copies[u.old].second);
      continue;
    }
    if ((u.where >> 60) == (kNativeRangeTag >> 60)) {
      const NativeRange& r = log.ranges[u.old];
      const char* from = log.bytes.data() + r.bytes_at;
      for (int64_t j = 0; j < r.count; ++j)
        std::memcpy(r.first + j * r.step_bytes, from + j * r.size, static_cast<size_t>(r.size));
      continue;
    }
    char* p = reinterpret_cast<char*>(u.where & ((uint64_t{1} << 60) - 1));
    const size_t size = size_t{1} << (u.where >> 60);
    std::memcpy(p, &u.old, size);
  }
}

namespace {

using FNode = FastLoop::Impl::FNode;

// ---- helpers the generated code calls (by address)

extern "C" NativeUndo* native_grow_undo(NativeCtx* c, int64_t n) {
  const size_t want = std::max<size_t>(1024, static_cast<size_t>(n) * 2);
  c->log->entries.resize(want);
  c->undo = c->log->entries.data();
  c->undo_cap = static_cast<int64_t>(want);
  return c->undo;
}

// Appends one range entry to the log: the old bytes of `count` elements of
// `size` bytes, `first` then every `step_bytes`.
extern "C" NativeUndo* native_log_range(NativeCtx* c, int64_t n, char* first, int64_t step_bytes,
                                        int64_t count, int64_t size) {
  if (n + 1 > c->undo_cap) native_grow_undo(c, n + 1);
  NativeLog& log = *c->log;
  const size_t at = log.bytes.size();
  log.bytes.resize(at + static_cast<size_t>(count * size));
  char* to = log.bytes.data() + at;
  if (step_bytes == size) {
    std::memcpy(to, first, static_cast<size_t>(count * size));
  } else {
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(to + j * size, first + j * step_bytes, static_cast<size_t>(size));
  }
  c->undo[n].where = kNativeRangeTag;
  c->undo[n].old = log.ranges.size();
  log.ranges.push_back(NativeRange{first, step_bytes, count, size, at});
  c->range_units += count * size / 16;
  return c->undo;
}

// Buffers for whole-array copies of 64 KiB to 1 MiB, kept per thread for
// the next call: the array allocator recycles smaller and larger blocks, but
// blocks of these sizes go back to the system when freed, so each call's
// copy met fresh pages (165 page faults a call for lcs's 677 KB table, as
// many as making the table). At most two per thread (plain data: a thread
// that ends leaves them to the process).
constexpr size_t kSnapPoolMin = size_t{64} << 10;
constexpr size_t kSnapPoolMax = size_t{1} << 20;
struct SnapBlock {
  size_t bytes;
  void* data;
};
thread_local SnapBlock t_snap_pool[2] = {{0, nullptr}, {0, nullptr}};

// A contiguous copy of `a` in a pooled buffer, or a.copy().
Array snapshot_copy(const Array& a) {
  const size_t bytes = a.nbytes();
  if (bytes <= kSnapPoolMin || bytes > kSnapPoolMax) return a.copy();
  const size_t rounded = (bytes + 4095) & ~size_t{4095};
  void* p = nullptr;
  size_t have = 0;
  for (SnapBlock& blk : t_snap_pool) {
    if (blk.data && blk.bytes >= rounded) {
      p = blk.data;
      have = blk.bytes;
      blk = {0, nullptr};
      break;
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, rounded);
    if (!p) return a.copy();  // its MemoryError, or memory the allocator finds
    have = rounded;
  }
  std::shared_ptr<void> owner(p, [have](void* q) {
    for (SnapBlock& blk : t_snap_pool) {
      if (!blk.data) {
        blk = {have, q};
        return;
      }
    }
    std::free(q);
  });
  Array copy = Array::wrap(a.dtype(), a.shape(), p, std::move(owner));
  if (a.is_contiguous())
    std::memcpy(p, a.origin_raw(), bytes);
  else
    copy.assign(a);
  return copy;
}

// A copy of the whole array of entry `entry` (a register's array now) to the
// log, before writes not logged one by one.
extern "C" NativeUndo* native_snapshot(NativeCtx* c, int64_t n, int64_t entry) {
  if (n + 1 > c->undo_cap) native_grow_undo(c, n + 1);
  const Array& a = c->entries[entry].array;
  c->undo[n].where = kNativeCopyTag;
  c->undo[n].old = c->log->copies.size();
  c->log->copies.emplace_back(a, snapshot_copy(a));
  return c->undo;
}

extern "C" double native_unary(int32_t op, double v) {
  return kernels::unary_float(static_cast<UnaryOp>(op), v);
}
extern "C" double native_float_floordiv(double a, double b) {
  return kernels::float_floor_divide(a, b);
}
extern "C" double native_float_mod(double a, double b) { return kernels::float_mod(a, b); }
extern "C" double native_pow(double a, double b) { return std::pow(a, b); }
// np.random.random(): the interpreter's draw (fastloop.cpp, Op::Uniform),
// counted so that a roll-back can rewind the stream. The draws come from the
// call's batch, computed several at a time (native_random.cpp); the positions
// not drawn go back to the stream when the call returns.
extern "C" double native_uniform(NativeCtx* c) {
  ++c->draws;
  NativeDraws* d = c->rand;
  if (d == nullptr) {
    const kernels::RandomKey key = next_uniform_key();
    const auto w = kernels::philox4x32(key, 0);
    return kernels::unit_double(w[0], w[1]);
  }
  if (d->pos == d->len) native_draws_refill(*d);
  return d->buf[d->pos++];
}

// The functions the generated code calls, by index into NativeCtx::helpers.
void* const kHelpers[] = {reinterpret_cast<void*>(&native_grow_undo),
                          reinterpret_cast<void*>(&native_log_range),
                          reinterpret_cast<void*>(&native_snapshot),
                          reinterpret_cast<void*>(&native_unary),
                          reinterpret_cast<void*>(&native_float_floordiv),
                          reinterpret_cast<void*>(&native_float_mod),
                          reinterpret_cast<void*>(&native_pow),
                          reinterpret_cast<void*>(&native_uniform),
                          reinterpret_cast<void*>(&native_alloc),
                          reinterpret_cast<void*>(&native_sweep),
                          reinterpret_cast<void*>(&native_list_new),
                          reinterpret_cast<void*>(&native_list_append),
                          reinterpret_cast<void*>(&native_list_len),
                          reinterpret_cast<void*>(&native_list_get),
                          reinterpret_cast<void*>(&native_list_iterate),
                          reinterpret_cast<void*>(&native_row_view),
                          reinterpret_cast<void*>(&native_dict_find),
                          reinterpret_cast<void*>(&native_dict_set),
                          reinterpret_cast<void*>(&native_container_len),
                          reinterpret_cast<void*>(&native_dict_new),
                          reinterpret_cast<void*>(&native_list2_get),
                          reinterpret_cast<void*>(&native_list2_set),
                          reinterpret_cast<void*>(&native_list_set),
                          reinterpret_cast<void*>(&native_str_byte),
                          reinterpret_cast<void*>(&native_seq_len),
                          reinterpret_cast<void*>(&native_list2_len),
                          reinterpret_cast<void*>(&native_dict_view)};

// ---- the JIT (one per process, made on first use)

struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex mu;
  uint64_t next = 0;
  std::string error;
  std::string cpu, features;
  std::map<std::string, NativeFn> loaded;  // the code linked in this process, by symbol
};

Jit& jit() {
  static Jit* j = [] {
    auto* j = new Jit;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      j->error = llvm::toString(jtmb.takeError());
      return j;
    }
    // The host's CPU name and features (detectHost): AVX2/AVX-512 where the
    // machine has them, for the vectoriser's cost model and the code.
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    j->cpu = jtmb->getCPU();
    j->features = jtmb->getFeatures().getString();
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
      j->error = llvm::toString(tm.takeError());
      return j;
    }
    j->tm = std::move(*tm);
    auto built = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
    if (!built) {
      j->error = llvm::toString(built.takeError());
      return j;
    }
    j->lljit = std::move(*built);
    // Symbols of the process (libm's floor where the CPU has no instruction).
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        j->lljit->getDataLayout().getGlobalPrefix());
    if (!gen) {
      j->error = llvm::toString(gen.takeError());
      j->lljit.reset();
      return j;
    }
    j->lljit->getMainJITDylib().addGenerator(std::move(*gen));
    return j;
  }();
  return *j;
}

// By payload: an int (i64; int32 too, sign extended) or a float (double;
// float32 too, its value exactly).
bool is_int(Reg::Kind k) { return k == Reg::PyInt || k == Reg::NpInt || k == Reg::NpI32; }
bool is_float(Reg::Kind k) { return k == Reg::PyFloat || k == Reg::NpFloat || k == Reg::NpF32; }
bool is_bool(Reg::Kind k) { return k == Reg::PyBool || k == Reg::NpBool; }
bool is_narrow(int k) { return k == Reg::NpF32 || k == Reg::NpI32; }
bool is_strong(Reg::Kind k) { return k >= Reg::NpBool && k <= Reg::NpI32; }
bool is_scalar(Reg::Kind k) { return k >= Reg::PyBool && k <= Reg::NpI32; }

const char* kind_name(Reg::Kind k) {
  static const char* names[] = {"undefined",  "None",       "bool",     "int",
                                "float",      "np.bool",    "np.int64", "np.float64",
                                "np.float32", "np.int32",   "array",    "object"};
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
// s: for a number whose kind is NumPy's or Python's depending on the turn (a
// variable that holds 0.0, then s + x[i]), an i1 "strong" and k the Python
// kind; null when k says it all.
struct CV {
  int k = Reg::Nil;
  llvm::Value* v = nullptr;
  llvm::Value* p = nullptr;  // Dyn's payload
  int arr = -1;
  llvm::Value* s = nullptr;
};

Reg::Kind py_kind(Reg::Kind k) {
  return k == Reg::NpBool ? Reg::PyBool : k == Reg::NpInt ? Reg::PyInt : k == Reg::NpFloat ? Reg::PyFloat : k;
}
Reg::Kind np_kind(Reg::Kind k) {
  return k == Reg::PyBool ? Reg::NpBool : k == Reg::PyInt ? Reg::NpInt : k == Reg::PyFloat ? Reg::NpFloat : k;
}

// Thrown when a variable turns out to hold both Python's and NumPy's kind of
// one family: the function is generated again with it dynamic.
struct Retry {
  int reg;
};

// A variable holding a view of an array variable's row (`row = A[i]`,
// `for row in A`): `from` A's register, `nidx` the indices given.
struct RowOf {
  int from;
  size_t nidx;
  int fixed;  // the array variable `from` always holds (itself, or what it aliases)
};

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
  llvm::PHINode* exit_code = nullptr;
  struct LoopTargets {
    llvm::BasicBlock* cont;
    llvm::BasicBlock* brk;
    llvm::Value* last_k;  // nested loops: allocas of their value
    llvm::Value* last_p;
  };
  std::vector<LoopTargets> loops;

  const std::vector<bool>& dyn;  // registers whose strongness is dynamic
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
  llvm::Value* field(llvm::Value* base, int64_t offset, llvm::Type* t) {
    llvm::Value* p = b.CreateConstInBoundsGEP1_64(i8, base, static_cast<uint64_t>(offset));
    return b.CreateBitCast(p, t->getPointerTo());
  }
  llvm::Value* ctx_ptr(size_t offset) {
    return b.CreateLoad(i8p, field(cptr, static_cast<int64_t>(offset), i8p));
  }
  // Helper function `f` (one of kHelpers), read from the context at the
  // function's entry: no process address is in the code (the disk cache).
  std::map<size_t, llvm::Value*> helper_at;
  llvm::Value* fptr(void* f, llvm::FunctionType* t) {
    size_t i = 0;
    while (i < std::size(kHelpers) && kHelpers[i] != f) ++i;
    if (i == std::size(kHelpers)) throw Refuse{"internal error: an unknown helper"};
    // Any call but a dict's read may change a dict: the views taken before
    // are looked at again (dict_probe).
    if (f != reinterpret_cast<void*>(&native_dict_find) &&
        f != reinterpret_cast<void*>(&native_dict_view)) {
      llvm::Value* g = dict_epoch_of();
      b.CreateStore(b.CreateAdd(b.CreateLoad(i64, g), b.getInt64(1)), g);
    }
    llvm::Value*& p = helper_at[i];
    if (!p) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      llvm::Value* table = e.CreateLoad(
          i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), fn->getArg(0),
                                                            offsetof(NativeCtx, helpers)),
                               i8p->getPointerTo()));
      p = e.CreateLoad(i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), table, 8 * i),
                                            i8p->getPointerTo()));
    }
    return b.CreateBitCast(p, t->getPointerTo());
  }
  llvm::Type* type_of(Reg::Kind k) {
    if (is_bool(k)) return i1;
    if (is_int(k)) return i64;
    return f64;
  }
  llvm::Value* to_payload(const CV& v) {  // i64 for a Reg's union
    if (v.k == kDyn) return v.p;
    if (v.k == Reg::Arr) return apay(v.arr);
    if (v.k == Reg::Nil || !v.v) return b.getInt64(0);
    if (is_bool(static_cast<Reg::Kind>(v.k))) return b.CreateZExt(v.v, i64);
    if (is_int(static_cast<Reg::Kind>(v.k))) return v.v;
    return b.CreateBitCast(v.v, i64);
  }
  llvm::Value* kind_of(const CV& v) {
    if (v.k == kDyn) return v.v;
    if (v.s) return b.CreateSelect(v.s, b.getInt8(np_kind(static_cast<Reg::Kind>(v.k))), b.getInt8(v.k));
    return b.getInt8(v.k);
  }
  llvm::Value* strong_of(const CV& v) {
    return v.s ? v.s : b.getInt1(is_strong(static_cast<Reg::Kind>(v.k)));
  }
  // A number of Python kind `py` whose strongness is `s`.
  CV mk(int py, llvm::Value* v, llvm::Value* s) {
    if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(s)) {
      return CV{c->isOne() ? np_kind(static_cast<Reg::Kind>(py)) : py, v};
    }
    CV r{py, v};
    r.s = s;
    return r;
  }
  bool static_strong(const CV& v) { return !v.s && is_strong(static_cast<Reg::Kind>(v.k)); }

  void dead_block() {
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "dead", fn));
  }
  void bail_if(llvm::Value* cond) {
    if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(cond); !c || !c->isZero()) ++bails;
    llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx, "ok", fn);
    b.CreateCondBr(cond, bail, ok, unlikely());
    b.SetInsertPoint(ok);
  }
  llvm::MDNode* unlikely() { return llvm::MDBuilder(ctx).createBranchWeights(1, 1 << 20); }

  void count(int slot) {
    if (slot < 0) return;
    auto it = counts.find(slot);
    llvm::Value* a;
    if (it == counts.end()) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      a = e.CreateAlloca(i64);
      e.CreateStore(e.getInt64(0), a);
      counts[slot] = a;
    } else {
      a = it->second;
    }
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, a), b.getInt64(1)), a);
  }

  // ---- truth and conditions
  llvm::Value* truth(const CV& v) {
    switch (v.k) {
      case Reg::PyBool:
      case Reg::NpBool:
        return v.v;
      case Reg::PyInt:
      case Reg::NpInt:
      case Reg::NpI32:
        return b.CreateICmpNE(v.v, b.getInt64(0));
      case Reg::PyFloat:
      case Reg::NpFloat:
      case Reg::NpF32:
        return b.CreateFCmpUNE(v.v, llvm::ConstantFP::get(f64, 0.0));
      default:
        throw Refuse{"the truth of a value of kind " + std::string(v.k == kDyn ? "varying" : kind_name(static_cast<Reg::Kind>(v.k)))};
    }
  }
  // The truth of a condition; `and`/`or` branch as the interpreter
  // evaluates them (a NumPy scalar on the left evaluates both sides).
  llvm::Value* cond(const FNode& n) {
    if (n.op != Op::Logic) return truth(eval(n));
    CV a = eval(n.kids[0]);
    if (!is_scalar(static_cast<Reg::Kind>(a.k))) throw Refuse{"'and'/'or' of a non-scalar"};
    llvm::Value* ta = truth(a);
    if (a.s) return cond_varying(n, ta, a.s);
    if (is_strong(static_cast<Reg::Kind>(a.k))) {
      llvm::Value* tb = cond(n.kids[1]);
      return n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb);
    }
    // Only the truth is used: the right side's too (a condition of its own).
    return short_circuit(n, ta, [&] { return cond(n.kids[1]); });
  }

  // `and`/`or` in a condition whose left side is Python's or NumPy's number
  // by turns (strong: `s`): the right side is evaluated unless the left
  // decides and is Python's (a NumPy scalar evaluates both, as the
  // interpreter does); the truth is the same either way.
  llvm::Value* cond_varying(const FNode& n, llvm::Value* ta, llvm::Value* s) {
    llvm::Value* decides = n.is_and ? b.CreateNot(ta) : ta;
    llvm::BasicBlock* from = b.GetInsertBlock();
    llvm::BasicBlock* rhs = llvm::BasicBlock::Create(ctx, "rhs", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "logic", fn);
    b.CreateCondBr(b.CreateAnd(decides, b.CreateNot(s)), done, rhs);
    b.SetInsertPoint(rhs);
    llvm::Value* tb = cond(n.kids[1]);
    llvm::Value* both = n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb);
    llvm::BasicBlock* rhs_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(done);
    llvm::PHINode* phi = b.CreatePHI(i1, 2);
    phi->addIncoming(b.getInt1(!n.is_and), from);
    phi->addIncoming(both, rhs_end);
    return phi;
  }

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
  llvm::Value* ashape(int r, size_t d) {
    return slot_base[r] ? b.CreateLoad(i64, slot_shape[r][d]) : arr_shape[r][d];
  }
  llvm::Value* astride(int r, size_t d) {
    if (atype[r].unit_last && d + 1 == static_cast<size_t>(atype[r].nd)) return b.getInt64(1);
    return slot_base[r] ? b.CreateLoad(i64, slot_stride[r][d]) : arr_stride[r][d];
  }
  llvm::Value* apay(int r) {
    return slot_base[r] ? b.CreateLoad(i64, slot_pay[r]) : arr_payload[r];
  }
  llvm::Value* fresh_of(int r) {
    if (!slot_fresh[r]) return b.getFalse();
    return b.CreateLoad(i1, slot_fresh[r]);
  }
  // The allocas of register r's array (made once, in the entry block; a
  // register that held an array at the call's start gets its values there).
  void ensure_slots(int r) {
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
  // A new array in register r (type t, its entry `entry`, its descriptor at
  // `desc`, a NativeArray) or that of register q (desc null).
  void set_array(int r, const ArrT& t, llvm::Value* entry, llvm::Value* desc, int q) {
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

  // r = x[i...]: a row (a view) of array variable x in register r's slots,
  // its entry made only if the state goes back to the interpreter.
  void set_row(int r, const RowOf& row, const FNode& g) {
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

  // np.zeros(n), np.ones(n), np.empty(n) (float64), and np.zeros_like(x),
  // np.ones_like(x), np.empty_like(x), np.copy(x), x.copy() (copy_value) of
  // an array variable: the result's type; false for anything else.
  static bool alloc_name(const FNode& n) {
    if (n.op != Op::Call || !n.spec || (n.kids.size() != 1 && n.shape_items < 0)) return false;
    const std::string& m = n.spec->name;
    return m == "zeros" || m == "ones" || m == "empty" || m == "zeros_like" ||
           m == "ones_like" || m == "empty_like" || m == "copy" || m == "copy_value";
  }
  bool alloc_type(const FNode& n, ArrT& t) {
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
  // r = <an allocation>: the primitive run by native_alloc (its errors: a
  // bail, the interpreter's to report), its array to register r.
  void alloc_into(int r, const FNode& n, const ArrT& t) {
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

  // A number for a helper, as a Reg ({kind, payload}) in a slot of `at`.
  void put_reg(llvm::Value* at, int64_t k, const CV& v) {
    llvm::Value* p = b.CreateInBoundsGEP(i64, at, b.getInt64(2 * k));
    b.CreateStore(b.CreateZExt(kind_of(v), i64), p);
    b.CreateStore(to_payload(v), b.CreateInBoundsGEP(i64, p, b.getInt64(1)));
  }
  static bool scalar_cv(const CV& v) {
    return v.k != kDyn && is_scalar(static_cast<Reg::Kind>(v.k));
  }
  // [a, b], list(): a new list of numbers (native_list_new), made in the
  // interpreter's objects (released by its sweep between turns).
  CV new_list(const FNode& n) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* items =
        e.CreateAlloca(i64, e.getInt32(static_cast<uint32_t>(2 * std::max<size_t>(n.kids.size(), 1))));
    for (size_t k = 0; k < n.kids.size(); ++k) {
      CV v = eval(n.kids[k]);
      if (!scalar_cv(v)) throw Refuse{"a list of what is not a number"};
      put_reg(items, static_cast<int64_t>(k), v);
    }
    auto* ft = llvm::FunctionType::get(i64, {i8p, i8p, i64}, false);
    llvm::Value* obj = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_list_new), ft),
        {cptr, b.CreateBitCast(items, i8p), b.getInt64(static_cast<int64_t>(n.kids.size()))});
    bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
    b.CreateStore(b.getTrue(), made_any);
    return CV{Reg::Obj, obj};
  }
  // xs[i] of a list register and an int: native_list_get, for items of the
  // kind item_kind says (another kind, or an index out of range: a bail).
  CV list_item(const FNode& n) {
    const int r = n.kids[0].reg;
    const int k = item_kind[r];
    if (k < 0) throw Refuse{"a list's items of a kind not known when compiled"};
    CV x = read(r);
    CV i = eval(n.kids[1]);
    if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
      throw Refuse{"a list indexed by what is not an int"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* out = e.CreateAlloca(i64);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i8p}, false);
    auto get = [&] {
      llvm::Value* rc = b.CreateCall(
          ft, fptr(reinterpret_cast<void*>(&native_list_get), ft),
          {cptr, x.v, i.v, b.getInt64(k), b.CreateBitCast(out, i8p)});
      bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
    };
    if (r < static_cast<int>(list_fixed.size()) && list_fixed[r]) {
      // weights[i - 1] in an inner loop: the helper once per index (the
      // list and its items are the call's start's), its item kept in `out`.
      llvm::Value* memo_i = e.CreateAlloca(i64);
      llvm::Value* memo_ok = e.CreateAlloca(i1);
      e.CreateStore(e.getFalse(), memo_ok);
      llvm::Value* hit =
          b.CreateAnd(b.CreateLoad(i1, memo_ok), b.CreateICmpEQ(b.CreateLoad(i64, memo_i), i.v));
      llvm::BasicBlock* miss = llvm::BasicBlock::Create(ctx, "memo_miss", fn);
      llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "memo_join", fn);
      b.CreateCondBr(hit, join, miss);
      b.SetInsertPoint(miss);
      get();
      b.CreateStore(i.v, memo_i);
      b.CreateStore(b.getTrue(), memo_ok);
      b.CreateBr(join);
      b.SetInsertPoint(join);
    } else {
      get();
    }
    count(n.counter);
    llvm::Value* p = b.CreateLoad(i64, out);
    const auto kk = static_cast<Reg::Kind>(k);
    if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(p, i8), b.getInt8(0))};
    if (is_int(kk)) return CV{k, p};
    return CV{k, b.CreateBitCast(p, f64)};
  }

  // xs.append(v) of a number: native_list_append, which declines (a bail)
  // what the interpreter's append leaves to the general path (no list, a
  // list another register holds).
  CV append(const FNode& n) {
    CV v = eval(n.kids[0]);
    if (!scalar_cv(v)) throw Refuse{"an append of what is not a number"};
    CV x = read(n.reg);
    if (x.k != Reg::Obj) throw Refuse{"an append to what is not a list"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
    put_reg(item, 0, v);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i8p}, false);
    llvm::Value* rc = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_list_append), ft),
        {cptr, b.CreateBitCast(held, i8p), b.getInt64(static_cast<int64_t>(regs.size())),
         b.getInt64(n.reg), x.v, b.CreateBitCast(item, i8p)});
    bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
    b.CreateStore(b.getInt8(1), asg[n.reg]);
    count(n.counter);
    return x;
  }

  // ---- lists of lists and string characters (native_lists.hpp): helpers
  // on the interpreter's objects, a bail for whatever they decline.
  bool list_var(const FNode& k) const {
    return k.op == Op::Var && kind[k.reg] == Reg::Obj && val[k.reg];
  }
  llvm::Value* int_index(const FNode& k) {
    CV i = eval(k);
    if (i.k == kDyn || !is_int(static_cast<Reg::Kind>(i.k)))
      throw Refuse{"a list indexed by what is not an int"};
    return i.v;
  }
  llvm::Value* reg_arg(const CV& v) {
    if (!scalar_cv(v)) throw Refuse{"writing into a list what is not a number"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
    put_reg(item, 0, v);
    return b.CreateBitCast(item, i8p);
  }
  // ---- rows read and written in place (table_plain registers)
  static const NativeValueLayout& layout() { return native_value_layout(); }
  // The ValueKind byte of a Python int or float of register kind `k` when
  // register r's rows may be read or written in place; -1 otherwise.
  int in_place_kind(int r, int k) const {
    if (!layout().valid || r < 0 || static_cast<size_t>(r) >= table_plain.size() ||
        !table_plain[static_cast<size_t>(r)])
      return -1;
    if (k == Reg::PyInt) return static_cast<int>(ValueKind::integer);
    if (k == Reg::PyFloat) return static_cast<int>(ValueKind::floating);
    return -1;
  }
  llvm::Value* row_gen_of(int r) {
    llvm::Value*& g = row_gen[r];
    if (!g) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      g = e.CreateAlloca(i64);
      e.CreateStore(e.getInt64(0), g);
    }
    return g;
  }
  // After a write through a helper into register r's list: the rows kept
  // by the sites are looked up again.
  void bump_rows(int r) {
    if (in_place_kind(r, Reg::PyInt) < 0) return;
    llvm::Value* g = row_gen_of(r);
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, g), b.getInt64(1)), g);
  }
  // A site's row: valid (i1), its index as written, the writes count it
  // was found at, its items' address and number.
  struct RowSite {
    llvm::Value *ok, *key, *gen, *data, *len, *buf;
  };
  RowSite row_site(int r) {
    row_gen_of(r);
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    RowSite s;
    s.ok = e.CreateAlloca(i1);
    s.key = e.CreateAlloca(i64);
    s.gen = e.CreateAlloca(i64);
    s.data = e.CreateAlloca(i64);
    s.len = e.CreateAlloca(i64);
    s.buf = e.CreateAlloca(i64, e.getInt32(2));
    e.CreateStore(e.getFalse(), s.ok);
    return s;
  }
  llvm::Value* site_hit(const RowSite& s, llvm::Value* i, llvm::Value* gen) {
    return b.CreateAnd(b.CreateLoad(i1, s.ok),
                       b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, s.key), i),
                                   b.CreateICmpEQ(b.CreateLoad(i64, s.gen), gen)));
  }
  void fill_site(const RowSite& s, llvm::Value* obj, llvm::Value* i, llvm::Value* gen) {
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
    llvm::Value* rc =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                     {cptr, obj, i, b.getInt64(0), b.getInt64(kNativeRowMode),
                      b.CreateBitCast(s.buf, i8p)});
    b.CreateStore(b.CreateICmpEQ(rc, b.getInt32(0)), s.ok);
    b.CreateStore(i, s.key);
    b.CreateStore(gen, s.gen);
    b.CreateStore(b.CreateLoad(i64, s.buf), s.data);
    b.CreateStore(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, s.buf, 1)), s.len);
  }
  // Item j of the site's row (negative from the end) when the site holds a
  // row, j is in range and the item is of ValueKind `want`: its address;
  // null otherwise (the helpers then do what Python does).
  llvm::Value* site_item(const RowSite& s, llvm::Value* j, int want) {
    llvm::Value* len = b.CreateLoad(i64, s.len);
    llvm::Value* jj = b.CreateSelect(b.CreateICmpSLT(j, b.getInt64(0)), b.CreateAdd(j, len), j);
    llvm::Value* in = b.CreateAnd(b.CreateLoad(i1, s.ok), b.CreateICmpULT(jj, len));
    llvm::Value* safe = b.CreateSelect(in, jj, b.getInt64(0));
    llvm::Value* base = b.CreateIntToPtr(b.CreateLoad(i64, s.data), i8p);
    llvm::BasicBlock* from = b.GetInsertBlock();
    llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "item_look", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "item_done", fn);
    b.CreateCondBr(in, look, done);
    b.SetInsertPoint(look);
    llvm::Value* at = b.CreateInBoundsGEP(i8, base, b.CreateMul(safe, b.getInt64(layout().size)));
    llvm::Value* kb = b.CreateLoad(i8, b.CreateConstInBoundsGEP1_64(i8, at, layout().kind_at));
    llvm::Value* item = b.CreateSelect(b.CreateICmpEQ(kb, b.getInt8(static_cast<uint8_t>(want))),
                                       at, llvm::ConstantPointerNull::get(
                                               llvm::cast<llvm::PointerType>(i8p)));
    b.CreateBr(done);
    llvm::BasicBlock* looked = b.GetInsertBlock();
    b.SetInsertPoint(done);
    llvm::PHINode* phi = b.CreatePHI(i8p, 2);
    phi->addIncoming(llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p)), from);
    phi->addIncoming(item, looked);
    return phi;
  }
  // t[i][j] of a list of lists (native_list2_get), read as table_kind says.
  CV list2_item(const FNode& n) {
    const FNode& in = n.kids[0];
    const int k = table_kind[in.kids[0].reg];
    if (k < 0) throw Refuse{"a list of lists whose items are of a kind not known when compiled"};
    CV t = read(in.kids[0].reg);
    llvm::Value* i = int_index(in.kids[1]);
    llvm::Value* j = int_index(n.kids[1]);
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* out = e.CreateAlloca(i64);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i64, i64, i64, i8p}, false);
    auto get = [&] {
      llvm::Value* rc =
          b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_get), ft),
                       {cptr, t.v, i, j, b.getInt64(k), b.CreateBitCast(out, i8p)});
      bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
    };
    const int tr = in.kids[0].reg;
    if (const int want = in_place_kind(tr, k); want >= 0) {
      // The row's address kept per site (native_list2_get's kNativeRowMode),
      // the item read in place when it is of the kind compiled for.
      RowSite site = row_site(tr);
      llvm::Value* gen = b.CreateLoad(i64, row_gen_of(tr));
      llvm::BasicBlock* fill = llvm::BasicBlock::Create(ctx, "row_fill", fn);
      llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "row_have", fn);
      b.CreateCondBr(site_hit(site, i, gen), have, fill);
      b.SetInsertPoint(fill);
      fill_site(site, t.v, i, gen);
      b.CreateBr(have);
      b.SetInsertPoint(have);
      llvm::Value* item = site_item(site, j, want);
      llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "row_read", fn);
      llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "row_slow", fn);
      llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "row_join", fn);
      b.CreateCondBr(b.CreateIsNotNull(item), fast, slow);
      b.SetInsertPoint(fast);
      b.CreateStore(b.CreateLoad(i64, b.CreateBitCast(
                                          b.CreateConstInBoundsGEP1_64(i8, item, layout().payload_at),
                                          i64->getPointerTo())),
                    out);
      b.CreateBr(join);
      b.SetInsertPoint(slow);
      get();
      b.CreateBr(join);
      b.SetInsertPoint(join);
    } else {
      get();
    }
    count(in.counter);
    count(n.counter);
    llvm::Value* p = b.CreateLoad(i64, out);
    const auto kk = static_cast<Reg::Kind>(k);
    if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(p, i8), b.getInt8(0))};
    if (is_int(kk)) return CV{k, p};
    return CV{k, b.CreateBitCast(p, f64)};
  }
  // len(t[i]) of a list's item (native_list2_len).
  CV list2_len(const FNode& n) {
    const FNode& in = n.kids[0];
    CV t = read(in.kids[0].reg);
    llvm::Value* i = int_index(in.kids[1]);
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
    llvm::Value* len =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_len), ft), {cptr, t.v, i});
    bail_if(b.CreateICmpSLT(len, b.getInt64(0)));
    count(in.counter);
    count(n.slot);
    return CV{Reg::PyInt, len};
  }
  // t[i][j] = v (`t = setitem(t, setitem(t[i], v, j), i)`) and xs[i] = v of
  // a list register: native_list2_set / native_list_set, in the
  // interpreter's order (the value, then the indices).
  CV list_setitem(const FNode& n) {
    const int r = n.kids[0].reg;
    CV x = read(r);
    llvm::Value* ok;
    if (FastLoop::Impl::is_nested_write(n)) {
      const FNode& inner = n.kids[1];
      const CV value = eval(inner.kids[1]);
      const int written_kind = value.s ? -1 : value.k;
      llvm::Value* v = reg_arg(value);
      llvm::Value* i = int_index(n.kids[2]);
      llvm::Value* j = int_index(inner.kids[2]);
      auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i64, i8p}, false);
      auto call_set = [&](int64_t ask) {
        return b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list2_set), ft),
                            {cptr, b.CreateBitCast(held, i8p),
                             b.getInt64(static_cast<int64_t>(regs.size())),
                             b.getInt64(r | ask), x.v, i, j, v});
      };
      auto set = [&] {
        ok = call_set(0);
        bail_if(b.CreateICmpNE(ok, b.getInt32(0)));
      };
      const int want = in_place_kind(r, written_kind);
      if (want >= 0) {
        // A row the last write through the helper made its own (copied and
        // logged: 0), or one it says may be written in place (2: seen by
        // nothing but this list, its old bytes then logged at each write):
        // the next items of its kind written in place; any other write
        // through the helper, which makes that row its own and moves no
        // other row, then keeps it for the next ones.
        RowSite site = row_site(r);
        llvm::Value* logs;
        {
          llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
          logs = e.CreateAlloca(i1);
          e.CreateStore(e.getTrue(), logs);
        }
        llvm::Value* genp = row_gen_of(r);
        llvm::Value* gen = b.CreateLoad(i64, genp);
        llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "roww_look", fn);
        llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "roww_fast", fn);
        llvm::BasicBlock* log = llvm::BasicBlock::Create(ctx, "roww_log", fn);
        llvm::BasicBlock* store = llvm::BasicBlock::Create(ctx, "roww_store", fn);
        llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, "roww_slow", fn);
        llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "roww_join", fn);
        b.CreateCondBr(site_hit(site, i, gen), look, slow);
        b.SetInsertPoint(look);
        llvm::Value* item = site_item(site, j, want);
        llvm::BasicBlock* looked = b.GetInsertBlock();
        b.CreateCondBr(b.CreateIsNotNull(item), fast, slow);
        b.SetInsertPoint(slow);
        llvm::Value* rc = call_set(kNativeInPlaceAsk);
        bail_if(b.CreateICmpEQ(rc, b.getInt32(1)));
        llvm::Value* next = b.CreateAdd(b.CreateLoad(i64, genp), b.getInt64(1));
        b.CreateStore(next, genp);
        fill_site(site, x.v, i, next);
        llvm::Value* in_place = b.CreateICmpEQ(rc, b.getInt32(2));
        b.CreateStore(in_place, logs);
        llvm::BasicBlock* now = llvm::BasicBlock::Create(ctx, "roww_now", fn);
        b.CreateCondBr(in_place, now, join);
        b.SetInsertPoint(now);
        llvm::Value* item2 = site_item(site, j, want);
        bail_if(b.CreateIsNull(item2));  // the helper saw it of that kind
        llvm::BasicBlock* now_at = b.GetInsertBlock();
        b.CreateBr(fast);
        b.SetInsertPoint(fast);
        llvm::PHINode* at = b.CreatePHI(i8p, 2);
        at->addIncoming(item, looked);
        at->addIncoming(item2, now_at);
        llvm::Value* p = b.CreateConstInBoundsGEP1_64(i8, at, layout().payload_at);
        b.CreateCondBr(b.CreateLoad(i1, logs), log, store);
        b.SetInsertPoint(log);
        log_write(p, i64, 8);
        b.CreateBr(store);
        b.SetInsertPoint(store);
        llvm::Value* bits = value.k == Reg::PyFloat ? b.CreateBitCast(value.v, i64) : value.v;
        b.CreateStore(bits, b.CreateBitCast(p, i64->getPointerTo()));
        b.CreateBr(join);
        b.SetInsertPoint(join);
      } else {
        set();
        bump_rows(r);
      }
      count(inner.counter);
      count(inner.kids[0].counter);
    } else {
      if (!n.in_place || n.kids.size() != 3) throw Refuse{"a list write that is not xs[i] = v"};
      llvm::Value* v = reg_arg(eval(n.kids[1]));
      llvm::Value* i = int_index(n.kids[2]);
      auto* ft = llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i64, i8p}, false);
      ok = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list_set), ft),
                        {cptr, b.CreateBitCast(held, i8p),
                         b.getInt64(static_cast<int64_t>(regs.size())), b.getInt64(r), x.v, i, v});
      bail_if(b.CreateICmpNE(ok, b.getInt32(0)));
      bump_rows(r);  // t[i] = v: a row replaced
    }
    count(n.counter);
    return x;
  }
  // s[i] of a variable holding a string when the call starts, or a
  // one-character ASCII constant: compared as bytes (char_compare).
  bool char_operand(const FNode& k) const {
    if (k.op == Op::Const)
      return k.constant.k == Reg::Obj && k.const_arg && k.const_arg->is_string() &&
             k.const_arg->as_string().size() == 1 &&
             static_cast<unsigned char>(k.const_arg->as_string()[0]) < 0x80;
    if (k.op != Op::GetItem || k.kids.size() != 2 || !list_var(k.kids[0])) return false;
    const Reg& s = regs[static_cast<size_t>(k.kids[0].reg)];
    return s.k == Reg::Obj && static_cast<size_t>(s.a) < objects.size() &&
           objects[static_cast<size_t>(s.a)].is_string();
  }
  llvm::Value* char_byte(const FNode& k) {
    if (k.op == Op::Const)
      return b.getInt64(static_cast<unsigned char>(k.const_arg->as_string()[0]));
    CV s = read(k.kids[0].reg);
    llvm::Value* i = int_index(k.kids[1]);
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
    llvm::Value* c =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_str_byte), ft), {cptr, s.v, i});
    bail_if(b.CreateICmpSLT(c, b.getInt64(0)));  // not ASCII, out of range: the interpreter's
    count(k.counter);
    return c;
  }
  CV char_compare(const FNode& n) {
    llvm::Value* x = char_byte(n.kids[0]);
    llvm::Value* y = char_byte(n.kids[1]);
    count(n.counter);
    return CV{Reg::PyBool, n.fast == Fast::eq ? b.CreateICmpEQ(x, y) : b.CreateICmpNE(x, y)};
  }

  CV read(int r) {
    Reg::Kind k = kind[r];
    if (k == Reg::Arr) {
      if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
      return CV{Reg::Arr, nullptr, nullptr, r};
    }
    if (k == Reg::Undef) throw Refuse{"a variable is read before the loop assigns it"};
    if (k == Reg::Obj && val[r]) {  // a list's (or another object's) index
      if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
      return CV{Reg::Obj, b.CreateLoad(i64, val[r])};
    }
    if (!is_scalar(k)) throw Refuse{std::string("a variable holds a ") + kind_name(k)};
    if (maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
    CV v{k, b.CreateLoad(type_of(k), val[r])};
    if (dyn[r]) v.s = b.CreateLoad(i1, strong[r]);
    return v;
  }
  void write(int r, const CV& v) {
    if (v.k == Reg::Arr && kind[r] == Reg::Arr && v.arr == r) {  // x = setitem(x, v, i)
      b.CreateStore(b.getInt8(1), asg[r]);
      return;
    }
    if (v.k == Reg::Arr && rebinds[r]) {  // u = u_next
      set_array(r, atype[v.arr], nullptr, nullptr, v.arr);
      return;
    }
    if (v.k == Reg::Arr && kind[r] == Reg::Arr) {
      // An array passed to a function called inline: its parameter's
      // register held it since the call began (any other: the interpreter).
      bail_if(b.CreateICmpNE(apay(r), apay(v.arr)));
      b.CreateStore(b.getInt8(1), asg[r]);
      return;
    }
    if (v.k == Reg::Obj) {  // a list's index (the object itself stays where it is)
      if (kind[r] == Reg::Undef) {
        kind[r] = Reg::Obj;
        llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
        val[r] = e.CreateAlloca(i64);
      }
      if (kind[r] != Reg::Obj || !val[r] || dyn[r])
        throw Refuse{"a variable holds a list and another kind of value"};
      b.CreateStore(v.v, val[r]);
      b.CreateStore(b.getTrue(), def[r]);
      b.CreateStore(b.getInt8(1), asg[r]);
      b.CreateStore(no_held[r] ? b.getInt32(-1) : b.CreateTrunc(v.v, i32),
                    b.CreateConstInBoundsGEP1_64(i32, held, r));
      return;
    }
    if (v.k == kDyn || !is_scalar(static_cast<Reg::Kind>(v.k))) {
      throw Refuse{"a variable is assigned a value that is not a bool, int or float"};
    }
    if (kind[r] == Reg::Undef) {  // first assignment of a variable undefined so far
      kind[r] = dyn[r] ? py_kind(static_cast<Reg::Kind>(v.k)) : static_cast<Reg::Kind>(v.k);
      if (v.s && !dyn[r]) throw Retry{r};
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      val[r] = e.CreateAlloca(type_of(kind[r]));
      if (dyn[r]) strong[r] = e.CreateAlloca(i1);
    }
    if (!is_scalar(kind[r])) throw Refuse{"a variable that held no number is assigned one"};
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (py_kind(kind[r]) == py_kind(vk) && (dyn[r] || v.s || kind[r] != vk)) {
      // The same family, Python's or NumPy's kind by turns.
      if (!dyn[r]) throw Retry{r};
      b.CreateStore(v.v, val[r]);
      b.CreateStore(strong_of(v), strong[r]);
      b.CreateStore(b.getTrue(), def[r]);
      b.CreateStore(b.getInt8(1), asg[r]);
      return;
    }
    if (kind[r] != v.k) {
      // The variable changes kind (s = 0, then s += x[i]): the interpreter's.
      bail_if(b.getTrue());
      return;
    }
    b.CreateStore(v.v, val[r]);
    b.CreateStore(b.getTrue(), def[r]);
    b.CreateStore(b.getInt8(1), asg[r]);
  }

  // ---- arithmetic (int_op / float_op of fastloop.cpp)
  CV int_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y) {
    CV r = int_op0(f, x, y, strong);
    return mk(r.k, r.v, strong);
  }
  // k when `y` is the constant 2**k (k < 63), else -1.
  static int pow2(llvm::Value* y) {
    auto* c = llvm::dyn_cast<llvm::ConstantInt>(y);
    if (!c || c->getSExtValue() <= 0 || !c->getValue().isPowerOf2()) return -1;
    const int k = static_cast<int>(c->getValue().logBase2());
    return k < 63 ? k : -1;
  }
  // `strong`: the result is NumPy's int64 (else Python's int), when known.
  CV int_op0(Fast f, llvm::Value* x, llvm::Value* y, llvm::Value* strong = nullptr) {
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
        bail_if(b.CreateICmpEQ(y, b.getInt64(0)));
        // y == -1: 0 (srem by -1 of INT64_MIN is undefined in LLVM).
        llvm::Value* is_m1 = b.CreateICmpEQ(y, b.getInt64(-1));
        llvm::Value* ys = b.CreateSelect(is_m1, b.getInt64(1), y);
        llvm::Value* r = b.CreateSRem(x, ys);
        llvm::Value* adjust = b.CreateAnd(b.CreateICmpNE(r, b.getInt64(0)),
                                          b.CreateICmpNE(b.CreateICmpSLT(r, b.getInt64(0)),
                                                         b.CreateICmpSLT(ys, b.getInt64(0))));
        r = b.CreateAdd(r, b.CreateSelect(adjust, ys, b.getInt64(0)));
        return CV{ik, b.CreateSelect(is_m1, b.getInt64(0), r)};
      }
      default:
        throw Refuse{"an integer operation without native code"};
    }
  }

  CV float_op(Fast f, llvm::Value* strong, llvm::Value* x, llvm::Value* y) {
    if (f == Fast::div || f == Fast::floordiv || f == Fast::mod)  // Python's ZeroDivisionError
      bail_if(b.CreateAnd(b.CreateNot(strong), b.CreateFCmpOEQ(y, llvm::ConstantFP::get(f64, 0.0))));
    CV r = float_op0(f, x, y);
    return mk(r.k, r.v, strong);
  }
  CV float_op0(Fast f, llvm::Value* x, llvm::Value* y) {
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

  // x ** y as the interpreter's scalar power (Python's meaning): a float
  // operand, std::pow; two ints, by squaring with overflow checks, for a
  // constant exponent >= 0 (others stay on the interpreter).
  CV power(const CV& a, const CV& c) {
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

  llvm::Value* as_double(const CV& v) {
    return is_int(static_cast<Reg::Kind>(v.k)) ? b.CreateSIToFP(v.v, f64) : v.v;
  }

  // An operand a float32 or int32 (FastLoop::Impl::binary_narrow): a
  // float32 or int32 result computed into `a` (true, `c` unused), or both
  // widened to float64/int64 for the code below (true), or false.
  bool narrow_binary(const FNode& n, CV& a, CV& c) {
    const int ka = a.k, kb = c.k;
    if (a.s || c.s) return false;
    llvm::Type* f32 = b.getFloatTy();
    // A Python operand as a float32 (f) or int32 (i) or null: refused.
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
    auto as_i32 = [&](const CV& v) -> llvm::Value* {
      if (v.k == Reg::NpI32) return v.v;
      if (v.k == Reg::PyInt) {
        bail_if(b.CreateICmpUGT(b.CreateAdd(v.v, b.getInt64(int64_t{1} << 31)),
                                b.getInt64(UINT32_MAX)));
        return v.v;
      }
      return nullptr;
    };
    if (ka == Reg::NpF32 || kb == Reg::NpF32) {
      if ((ka == Reg::NpF32 || ka == Reg::PyFloat || ka == Reg::PyInt) &&
          (kb == Reg::NpF32 || kb == Reg::PyFloat || kb == Reg::PyInt)) {
        llvm::Value* x = as_f32(a);
        llvm::Value* y = as_f32(c);
        llvm::Value* r = nullptr;
        switch (n.fast) {
          case Fast::add: r = b.CreateFAdd(x, y); break;
          case Fast::sub: r = b.CreateFSub(x, y); break;
          case Fast::mul: r = b.CreateFMul(x, y); break;
          case Fast::div: r = b.CreateFDiv(x, y); break;
          case Fast::lt: a = CV{Reg::NpBool, b.CreateFCmpOLT(x, y)}; break;
          case Fast::le: a = CV{Reg::NpBool, b.CreateFCmpOLE(x, y)}; break;
          case Fast::gt: a = CV{Reg::NpBool, b.CreateFCmpOGT(x, y)}; break;
          case Fast::ge: a = CV{Reg::NpBool, b.CreateFCmpOGE(x, y)}; break;
          case Fast::eq: a = CV{Reg::NpBool, b.CreateFCmpOEQ(x, y)}; break;
          case Fast::ne: a = CV{Reg::NpBool, b.CreateFCmpUNE(x, y)}; break;
          default: return false;
        }
        if (r) a = CV{Reg::NpF32, b.CreateFPExt(r, f64)};
        c = CV{Reg::Nil};
        return true;
      }
    } else if ((ka == Reg::NpI32 || ka == Reg::PyInt) && (kb == Reg::NpI32 || kb == Reg::PyInt)) {
      llvm::Value* x = as_i32(a);
      llvm::Value* y = as_i32(c);
      auto wrap = [&](llvm::Value* v) { return CV{Reg::NpI32, b.CreateSExt(b.CreateTrunc(v, i32), i64)}; };
      switch (n.fast) {
        case Fast::add: a = wrap(b.CreateAdd(x, y)); break;
        case Fast::sub: a = wrap(b.CreateSub(x, y)); break;
        case Fast::mul: a = wrap(b.CreateMul(x, y)); break;
        case Fast::div:
          bail_if(b.CreateICmpEQ(y, b.getInt64(0)));
          a = CV{Reg::NpFloat, b.CreateFDiv(b.CreateSIToFP(x, f64), b.CreateSIToFP(y, f64))};
          break;
        case Fast::floordiv:
        case Fast::mod: {
          // INT32_MIN // -1 (NumPy wraps) and by zero: the general path's.
          bail_if(b.CreateAnd(b.CreateICmpEQ(y, b.getInt64(-1)),
                              b.CreateICmpEQ(x, b.getInt64(INT32_MIN))));
          CV r = int_op0(n.fast, x, y);  // Python's meaning on int64; bails by zero
          a = CV{Reg::NpI32, r.v};
          break;
        }
        default: {
          CV r = int_op0(n.fast, x, y);  // the comparisons
          a = CV{Reg::NpBool, r.v};
        }
      }
      c = CV{Reg::Nil};
      return true;
    }
    // As float64 / int64 NumPy scalars: with another NumPy number, or an
    // int32 with a Python float.
    auto np_wide = [](int k) {
      return k == Reg::NpFloat || k == Reg::NpInt || k == Reg::NpF32 || k == Reg::NpI32;
    };
    if (!(np_wide(ka) && np_wide(kb)) && !(ka == Reg::NpI32 && kb == Reg::PyFloat) &&
        !(kb == Reg::NpI32 && ka == Reg::PyFloat))
      return false;
    auto widen = [](CV& v) {
      if (v.k == Reg::NpF32) v.k = Reg::NpFloat;
      if (v.k == Reg::NpI32) v.k = Reg::NpInt;
    };
    widen(a);
    widen(c);
    return true;
  }

  CV binary(const FNode& n) {
    if ((n.fast == Fast::eq || n.fast == Fast::ne) && char_operand(n.kids[0]) &&
        char_operand(n.kids[1]))
      return char_compare(n);
    CV a = eval(n.kids[0]);
    CV c = eval(n.kids[1]);
    const auto ka = static_cast<Reg::Kind>(a.k), kb = static_cast<Reg::Kind>(c.k);
    if (n.fast == Fast::none && (n.spec->name == "power" || n.spec->name == "ipow") &&
        a.k != kDyn && c.k != kDyn) {
      CV r = power(a, c);
      count(n.counter);
      return r;
    }
    if (n.fast == Fast::none) throw Refuse{"'" + n.spec->name + "' has no native code"};
    if (a.k == kDyn || c.k == kDyn) throw Refuse{"an operand of varying kind"};
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
  CV wide_binary(const FNode& n, const CV& a, const CV& c) {
    const auto ka = static_cast<Reg::Kind>(a.k), kb = static_cast<Reg::Kind>(c.k);
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
      llvm::Value* rem = b.CreateSRem(a.v, c.v);
      rem = b.CreateAdd(rem, b.CreateSelect(b.CreateICmpSLT(rem, b.getInt64(0)), c.v,
                                            b.getInt64(0)));
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

  // ---- elements
  // ---- float32 and narrow int elements: NumPy's scalars of those dtypes
  // have no register kind (the interpreter holds them as 0-d arrays), so
  // their reads are compiled only where the kind does not matter: as an
  // index (x[idx[k]]), or as the value of an element write whose cast is
  // exact (y[i] = x32[i] into float64, int64 or the same dtype).
  llvm::Type* narrow_type(DType dt) {
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
  static bool is_unsigned_dt(DType dt) {
    return dt == DType::uint8 || dt == DType::uint16 || dt == DType::uint32;
  }
  // The dtype of x[i, ...] when `n` reads one element of a float32 or
  // narrow int array variable; float64 (none of them) otherwise.
  DType narrow_of(const FNode& n) {
    if (n.op != Op::GetItem || !arr_var(n.kids[0])) return DType::float64;
    const ArrT& e = atype[n.kids[0].reg];
    const size_t nidx = n.kids.size() - 1;
    if (!narrow_type(e.dt) || !e.indexable || static_cast<size_t>(e.nd) != nidx || nidx == 0)
      return DType::float64;
    return e.dt;
  }
  bool narrow_int(const FNode& n) {
    const DType dt = narrow_of(n);
    return dt != DType::float64 && dt != DType::float32;
  }
  // NumPy's cast of `from` into `to` is exact (no rounding, no wrap-around).
  static bool exact_cast(DType from, DType to) {
    if (from == to || to == DType::float64) return true;
    return to == DType::int64 && from != DType::float32;
  }
  // The element n (narrow_of(n) is not float64) as stored.
  llvm::Value* narrow_read(const FNode& n) {
    const int r = n.kids[0].reg;
    llvm::Type* t = narrow_type(atype[r].dt);
    llvm::Value* off = element_offset(n, r, 1, n.kids.size() - 1);
    llvm::Value* v =
        b.CreateLoad(t, b.CreateInBoundsGEP(t, b.CreateBitCast(abase(r), t->getPointerTo()), off));
    count(n.counter);
    return v;
  }
  // Element v of dtype `from` as an element of dtype `to` (exact_cast).
  llvm::Value* cast_exact(llvm::Value* v, DType from, DType to, llvm::Type* t) {
    if (from == to) return v;
    if (from == DType::float32) return b.CreateFPExt(v, t);
    if (to == DType::float64)
      return is_unsigned_dt(from) ? b.CreateUIToFP(v, t) : b.CreateSIToFP(v, t);
    return is_unsigned_dt(from) ? b.CreateZExt(v, t) : b.CreateSExt(v, t);
  }

  llvm::Value* element_offset(const FNode& n, int r, size_t first, size_t nidx) {
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
        off = b.CreateAdd(off, b.CreateMul(i.v, astride(r, k)));
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

  // ---- dicts and sets (native_dicts.hpp; docs/runtime.md, "Dicts and sets
  // in native code"). Registers holding a dict when the loop starts, or
  // assigned `{}` (`set()`), through `e = d`; the kind of their values from
  // their first item, else from what the loop writes into them.
  void find_dicts(const std::vector<const FNode*>& asg) {
    dict_reg.assign(regs.size(), false);
    for (size_t r = 0; r < regs.size(); ++r) {
      const auto o = static_cast<size_t>(regs[r].a);
      if (regs[r].k != Reg::Obj || o >= objects.size() || !objects[o].is_dict()) continue;
      dict_reg[r] = true;
      Reg first;
      const Dict& d = objects[o].as_dict();
      if (!d.items.empty() && FastLoop::Impl::scalar_of(d.value_at(0), first))
        item_kind[r] = first.k;
    }
    for (bool more = true; more;) {
      more = false;
      for (const FNode* a : asg) {
        const FNode& v = a->kids[0];
        if (dict_reg[a->reg]) continue;
        if (v.op == Op::NewDict || (v.op == Op::Var && dict_reg[v.reg])) {
          dict_reg[a->reg] = more = true;
          if (v.op == Op::Var) item_kind[a->reg] = item_kind[v.reg];
        }
      }
    }
    std::function<void(const FNode&)> writes = [&](const FNode& n) {
      for (const FNode& k : n.kids) writes(k);
      if (n.op != Op::SetItem || n.kids[0].op != Op::Var || !dict_reg[n.kids[0].reg]) return;
      int& k = item_kind[n.kids[0].reg];
      if (k < 0) k = written_kind(n.kids[1]);
    };
    writes(loop_cond);
    writes(loop_body);
  }
  // The kind of a number written into a dict, as far as it shows without
  // running the loop (`d.get(k, 0) + 1`: Python's int); -1 unknown. A wrong
  // guess costs a bail at the first read of another kind, not an answer.
  int written_kind(const FNode& v) const {
    if (v.op == Op::Const) return is_scalar(v.constant.k) ? v.constant.k : -1;
    if (v.op == Op::Var) return is_scalar(regs[v.reg].k) ? regs[v.reg].k : -1;
    if (v.op == Op::Call && v.obj_op == ObjOp::get && v.kids.size() == 3)
      return written_kind(v.kids[2]);
    if (v.op != Op::Binary || v.kids.size() != 2) return -1;
    const int a = written_kind(v.kids[0]), c = written_kind(v.kids[1]);
    const bool py = (a == Reg::PyInt || a == Reg::PyFloat) && (c == Reg::PyInt || c == Reg::PyFloat);
    if (!py) return -1;
    if (v.fast == Fast::add || v.fast == Fast::sub || v.fast == Fast::mul ||
        v.fast == Fast::floordiv || v.fast == Fast::mod)
      return a == Reg::PyFloat || c == Reg::PyFloat ? Reg::PyFloat : Reg::PyInt;
    return v.fast == Fast::div ? Reg::PyFloat : -1;
  }
  // The key of d[k], d[i, j] (a tuple), `k in d`: numbers, as Regs in an
  // alloca for the helper.
  // `first`: the first key's value.
  llvm::Value* dict_key(const FNode* const* keys, size_t nkeys, CV* first = nullptr) {
    if (nkeys == 0 || nkeys > static_cast<size_t>(kMaxDims)) throw Refuse{"a dict key of no items"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* at = e.CreateAlloca(i64, e.getInt32(static_cast<uint32_t>(2 * nkeys)));
    for (size_t k = 0; k < nkeys; ++k) {
      CV v = eval(*keys[k]);
      if (!scalar_cv(v)) throw Refuse{"a dict key that is not a number or a tuple of numbers"};
      put_reg(at, static_cast<int64_t>(k), v);
      if (k == 0 && first) *first = v;
    }
    return b.CreateBitCast(at, i8p);
  }
  // ---- int keys probed by the code itself (docs/runtime.md, "Dicts and sets
  // in native code"): a compact, indexed dict's slots read in place, as
  // Dict::position_of_int does (the layout of core/value.cpp, given by
  // native_dict_view); a helper call only for a write, a dict of another
  // form, a key past +-2**53, or a value of another kind.
  // Every helper call but a dict's read may change a dict (a write, a new
  // object, a sweep): `dict_epoch` counts them, and a register's view is good
  // while the count is the one it was taken at.
  llvm::Value* dict_epoch = nullptr;
  llvm::Value* dict_epoch_of() {
    if (!dict_epoch) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      dict_epoch = e.CreateAlloca(i64);
      e.CreateStore(e.getInt64(0), dict_epoch);
    }
    return dict_epoch;
  }
  struct DictView {
    llvm::Value *ok, *obj, *epoch, *buf;  // i1, i64, i64, five i64 (native_dict_view's, and
                                          // native_dict_set's result of it)
  };
  std::map<int, DictView> dict_views;
  DictView dict_view_of(int r) {
    auto it = dict_views.find(r);
    if (it != dict_views.end()) return it->second;
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    DictView v{e.CreateAlloca(i1), e.CreateAlloca(i64), e.CreateAlloca(i64),
               e.CreateAlloca(i64, e.getInt32(5))};
    e.CreateStore(e.getFalse(), v.ok);
    e.CreateStore(e.getInt64(-1), v.obj);  // no view taken yet
    e.CreateStore(e.getInt64(0), v.epoch);
    dict_views.emplace(r, v);
    return v;
  }
  // Whether int `key` (an int register's i64) is in register r's dict `obj`,
  // found by the code: decided (i1); if so, its position (-1: not there) and
  // the items' and kinds' addresses (i8*) to read its value.
  struct InPlaceProbe {
    llvm::Value *decided, *pos, *numbers, *kinds;
  };
  InPlaceProbe dict_probe(int r, llvm::Value* obj, llvm::Value* key) {
    const DictView v = dict_view_of(r);
    llvm::Value* epoch = b.CreateLoad(i64, dict_epoch_of());
    // Taken for this object since the last call that may change it (also
    // when none could be given: a dict of Values is not asked again).
    llvm::Value* fresh = b.CreateAnd(b.CreateICmpEQ(b.CreateLoad(i64, v.obj), obj),
                                     b.CreateICmpEQ(b.CreateLoad(i64, v.epoch), epoch));
    llvm::BasicBlock* refill = llvm::BasicBlock::Create(ctx, "dview_fill", fn);
    llvm::BasicBlock* have = llvm::BasicBlock::Create(ctx, "dview_have", fn);
    llvm::BasicBlock* look = llvm::BasicBlock::Create(ctx, "dprobe_look", fn);
    llvm::BasicBlock* cmp = llvm::BasicBlock::Create(ctx, "dprobe_cmp", fn);
    llvm::BasicBlock* step = llvm::BasicBlock::Create(ctx, "dprobe_step", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "dprobe_done", fn);
    b.CreateCondBr(fresh, have, refill);
    b.SetInsertPoint(refill);
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i8p}, false);
    llvm::Value* rc = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_dict_view), ft),
                                   {cptr, obj, b.CreateBitCast(v.buf, i8p)});
    b.CreateStore(b.CreateICmpNE(rc, b.getInt32(0)), v.ok);
    b.CreateStore(obj, v.obj);
    b.CreateStore(epoch, v.epoch);
    b.CreateBr(have);
    b.SetInsertPoint(have);
    // An int within +-2**53 hashes to itself (core/value.cpp's hash_int).
    const int64_t exact = int64_t{1} << 53;
    llvm::Value* near = b.CreateICmpULE(b.CreateAdd(key, b.getInt64(exact)), b.getInt64(2 * exact));
    llvm::Value* slots = b.CreateIntToPtr(b.CreateLoad(i64, v.buf), i64->getPointerTo());
    llvm::Value* mask = b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 1));
    llvm::Value* numbers = b.CreateIntToPtr(
        b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 2)), i8p);
    llvm::Value* kinds = b.CreateIntToPtr(
        b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, v.buf, 3)), i8p);
    llvm::Value* first_slot = b.CreateAnd(key, mask);
    llvm::BasicBlock* from = b.GetInsertBlock();
    b.CreateCondBr(b.CreateAnd(b.CreateLoad(i1, v.ok), near), look, done);
    // Python's order: the key's own slot, then slot * 5 + 1 plus the hash's higher bits.
    b.SetInsertPoint(look);
    llvm::PHINode* slot = b.CreatePHI(i64, 2);
    llvm::PHINode* perturb = b.CreatePHI(i64, 2);
    slot->addIncoming(first_slot, from);
    perturb->addIncoming(key, from);
    llvm::Value* at = b.CreateShl(slot, 1);
    llvm::Value* w = b.CreateLoad(i64, b.CreateInBoundsGEP(i64, slots, b.CreateAdd(at, b.getInt64(1))));
    b.CreateCondBr(b.CreateICmpEQ(w, b.getInt64(0)), done, cmp);
    b.SetInsertPoint(cmp);
    llvm::Value* h = b.CreateLoad(i64, b.CreateInBoundsGEP(i64, slots, at));
    // A slot of the same hash marked integral (bit 63) is the key.
    llvm::Value* hit = b.CreateAnd(b.CreateICmpEQ(h, key), b.CreateICmpSLT(w, b.getInt64(0)));
    llvm::Value* pos = b.CreateSub(b.CreateAnd(w, b.getInt64(0xffffffffLL)), b.getInt64(1));
    b.CreateCondBr(hit, done, step);
    b.SetInsertPoint(step);
    llvm::Value* next_perturb = b.CreateLShr(perturb, 5);
    llvm::Value* next_slot = b.CreateAnd(
        b.CreateAdd(b.CreateAdd(b.CreateMul(slot, b.getInt64(5)), next_perturb), b.getInt64(1)), mask);
    slot->addIncoming(next_slot, step);
    perturb->addIncoming(next_perturb, step);
    b.CreateBr(look);
    b.SetInsertPoint(done);
    llvm::PHINode* decided = b.CreatePHI(i1, 3);
    decided->addIncoming(b.getFalse(), from);
    decided->addIncoming(b.getTrue(), look);
    decided->addIncoming(b.getTrue(), cmp);
    llvm::PHINode* where = b.CreatePHI(i64, 3);
    where->addIncoming(b.getInt64(-1), from);
    where->addIncoming(b.getInt64(-1), look);
    where->addIncoming(pos, cmp);
    return InPlaceProbe{decided, where, numbers, kinds};
  }
  // The compact kind (DictValueKind) a value of register kind k is held as:
  // -1 for NumPy's scalars (held as Values).
  static int compact_kind(int k) {
    return k == Reg::PyBool ? 1 : k == Reg::PyInt ? 2 : k == Reg::PyFloat ? 3 : -1;
  }
  // The item at a found position: whether its value is of compact kind `ck`, and its bits.
  std::pair<llvm::Value*, llvm::Value*> dict_probed_value(const InPlaceProbe& p, int ck) {
    llvm::Value* kb = b.CreateLoad(i8, b.CreateInBoundsGEP(i8, p.kinds, p.pos));
    llvm::Value* same = b.CreateICmpEQ(b.CreateAnd(b.CreateLShr(kb, 2), b.getInt8(3)),
                                       b.getInt8(static_cast<uint8_t>(ck)));
    llvm::Value* bits = b.CreateLoad(
        i64, b.CreateBitCast(b.CreateInBoundsGEP(i8, p.numbers,
                                                 b.CreateAdd(b.CreateMul(p.pos, b.getInt64(16)),
                                                             b.getInt64(8))),
                             i64->getPointerTo()));
    return {same, bits};
  }
  // native_dict_find on register r's dict: its status, the value's payload
  // in `out` when `kind` >= 0.
  llvm::Value* dict_find(llvm::Value* obj, llvm::Value* key, size_t nkeys, int kind,
                         llvm::Value* out) {
    auto* ft = llvm::FunctionType::get(i32, {i8p, i64, i8p, i64, i64, i8p}, false);
    llvm::Value* rc = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_dict_find), ft),
        {cptr, obj, key, b.getInt64(static_cast<int64_t>(nkeys)), b.getInt64(kind),
         out ? b.CreateBitCast(out, i8p) : llvm::ConstantPointerNull::get(b.getInt8PtrTy())});
    bail_if(b.CreateICmpEQ(rc, b.getInt32(kNativeDictBail)));
    return rc;
  }
  CV dict_value(int k, llvm::Value* payload) {
    const auto kk = static_cast<Reg::Kind>(k);
    if (is_bool(kk)) return CV{k, b.CreateICmpNE(b.CreateTrunc(payload, i8), b.getInt8(0))};
    if (is_int(kk)) return CV{k, payload};
    return CV{k, b.CreateBitCast(payload, f64)};
  }
  int dict_kind(int r) {
    const int k = item_kind[r];
    if (k < 0 || !is_scalar(static_cast<Reg::Kind>(k)))
      throw Refuse{"a dict's values of a kind not known when compiled"};
    return k;
  }
  // d[k] (a missing key: the interpreter's KeyError at the user's line).
  CV dict_item(const FNode& n) {
    const int r = n.kids[0].reg;
    const int k = dict_kind(r);
    CV d = read(r);
    std::vector<const FNode*> keys;
    for (size_t i = 1; i < n.kids.size(); ++i) keys.push_back(&n.kids[i]);
    CV first;
    llvm::Value* key = dict_key(keys.data(), keys.size(), &first);
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* out = e.CreateAlloca(i64);
    if (keys.size() == 1 && is_int(static_cast<Reg::Kind>(first.k)) && compact_kind(k) > 0) {
      // Found in place with a value of the kind compiled for: no call.
      InPlaceProbe p = dict_probe(r, d.v, first.v);
      llvm::BasicBlock* read = llvm::BasicBlock::Create(ctx, "ditem_read", fn);
      llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "ditem_ask", fn);
      llvm::BasicBlock* got = llvm::BasicBlock::Create(ctx, "ditem_got", fn);
      b.CreateCondBr(b.CreateAnd(p.decided, b.CreateICmpSGE(p.pos, b.getInt64(0))), read, ask);
      b.SetInsertPoint(read);
      auto [same, bits] = dict_probed_value(p, compact_kind(k));
      b.CreateStore(bits, out);
      b.CreateCondBr(same, got, ask);
      b.SetInsertPoint(ask);
      bail_if(b.CreateICmpNE(dict_find(d.v, key, 1, k, out), b.getInt32(kNativeDictHit)));
      b.CreateBr(got);
      b.SetInsertPoint(got);
    } else {
      bail_if(b.CreateICmpNE(dict_find(d.v, key, keys.size(), k, out), b.getInt32(kNativeDictHit)));
    }
    count(n.counter);
    return dict_value(k, b.CreateLoad(i64, out));
  }
  // `k in d` (not_ of it: negate) and d.get(k, default) of a number default.
  CV dict_call(const FNode& n) {
    const bool get = n.obj_op == ObjOp::get;
    const FNode& x = n.kids[0];
    if (x.op != Op::Var || kind[x.reg] != Reg::Obj || !dict_reg[x.reg])
      throw Refuse{"'" + n.spec->name + "' of what is not a dict"};
    if (get && n.kids.size() != 3) throw Refuse{"d.get(k) without a default (None)"};
    const int k = get ? dict_kind(x.reg) : -1;
    CV d = read(x.reg);
    const FNode* key_node = &n.kids[1];
    CV first;
    llvm::Value* key = dict_key(&key_node, 1, &first);
    const bool int_key = is_int(static_cast<Reg::Kind>(first.k));
    if (!get) {
      if (!int_key) {
        llvm::Value* rc = dict_find(d.v, key, 1, -1, nullptr);
        count(n.slot);
        return CV{Reg::PyBool, b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit))};
      }
      // The index decides (no call) unless the dict is of another form.
      InPlaceProbe p = dict_probe(x.reg, d.v, first.v);
      llvm::BasicBlock* decided = b.GetInsertBlock();
      llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "din_ask", fn);
      llvm::BasicBlock* join = llvm::BasicBlock::Create(ctx, "din_join", fn);
      llvm::Value* there = b.CreateICmpSGE(p.pos, b.getInt64(0));
      b.CreateCondBr(p.decided, join, ask);
      b.SetInsertPoint(ask);
      llvm::Value* asked = b.CreateICmpEQ(dict_find(d.v, key, 1, -1, nullptr),
                                          b.getInt32(kNativeDictHit));
      llvm::BasicBlock* asked_at = b.GetInsertBlock();
      b.CreateBr(join);
      b.SetInsertPoint(join);
      llvm::PHINode* in = b.CreatePHI(i1, 2);
      in->addIncoming(there, decided);
      in->addIncoming(asked, asked_at);
      count(n.slot);
      return CV{Reg::PyBool, in};
    }
    CV dflt = eval(n.kids[2]);
    if (dflt.k != k || dflt.s) throw Refuse{"d.get(k, v) with v of another kind than d's values"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* out = e.CreateAlloca(i64);
    if (int_key && compact_kind(k) > 0) {
      // Found in place with a value of the kind compiled for, or missing: no call.
      InPlaceProbe p = dict_probe(x.reg, d.v, first.v);
      llvm::BasicBlock* read = llvm::BasicBlock::Create(ctx, "dget_read", fn);
      llvm::BasicBlock* miss = llvm::BasicBlock::Create(ctx, "dget_miss", fn);
      llvm::BasicBlock* ask = llvm::BasicBlock::Create(ctx, "dget_ask", fn);
      llvm::BasicBlock* got = llvm::BasicBlock::Create(ctx, "dget_got", fn);
      llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "dget_check", fn);
      b.CreateCondBr(p.decided, check, ask);
      b.SetInsertPoint(check);
      b.CreateCondBr(b.CreateICmpSGE(p.pos, b.getInt64(0)), read, miss);
      b.SetInsertPoint(read);
      auto [same, bits] = dict_probed_value(p, compact_kind(k));
      b.CreateStore(bits, out);
      b.CreateCondBr(same, got, ask);
      b.SetInsertPoint(miss);
      b.CreateStore(to_payload(dflt), out);
      b.CreateBr(got);
      b.SetInsertPoint(ask);
      llvm::Value* rc = dict_find(d.v, key, 1, k, out);
      llvm::BasicBlock* fill = llvm::BasicBlock::Create(ctx, "dget_fill", fn);
      b.CreateCondBr(b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit)), got, fill);
      b.SetInsertPoint(fill);
      b.CreateStore(to_payload(dflt), out);
      b.CreateBr(got);
      b.SetInsertPoint(got);
      count(n.slot);
      return dict_value(k, b.CreateLoad(i64, out));
    }
    llvm::Value* rc = dict_find(d.v, key, 1, k, out);
    CV found = dict_value(k, b.CreateLoad(i64, out));
    count(n.slot);
    return CV{k, b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(kNativeDictHit)), found.v, dflt.v)};
  }
  // d[k] = v, d[i, j] = v, s.add(k) (`s[k] = True`), d[k] += v.
  CV dict_set(const FNode& n) {
    if (!n.in_place) throw Refuse{"a dict written that is not assigned back"};
    const int r = n.kids[0].reg;
    CV d = read(r);
    CV v = eval(n.kids[1]);  // the interpreter's order: the value, then the key
    if (!scalar_cv(v)) throw Refuse{"a dict's value that is not a number"};
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* item = e.CreateAlloca(i64, e.getInt32(2));
    put_reg(item, 0, v);
    std::vector<const FNode*> keys;
    for (size_t i = 2; i < n.kids.size(); ++i) keys.push_back(&n.kids[i]);
    CV first;
    llvm::Value* key = dict_key(keys.data(), keys.size(), &first);
    llvm::BasicBlock* same_there = nullptr;
    llvm::Value* missing = b.getInt64(0);  // the key known not there (native_dict_set's)
    const int ck = v.s ? -1 : compact_kind(v.k);
    const bool probed = keys.size() == 1 && is_int(static_cast<Reg::Kind>(first.k)) && ck > 0;
    if (probed) {
      // s.add(k) of a k there (d[k] = v of that very number): nothing
      // changes, nothing is logged, no call (native_dict_set's no-op).
      InPlaceProbe p = dict_probe(r, d.v, first.v);
      llvm::BasicBlock* check = llvm::BasicBlock::Create(ctx, "dset_check", fn);
      llvm::BasicBlock* write = llvm::BasicBlock::Create(ctx, "dset_write", fn);
      same_there = llvm::BasicBlock::Create(ctx, "dset_done", fn);
      b.CreateCondBr(b.CreateAnd(p.decided, b.CreateICmpSGE(p.pos, b.getInt64(0))), check, write);
      b.SetInsertPoint(check);
      auto [same, bits] = dict_probed_value(p, ck);
      b.CreateCondBr(b.CreateAnd(same, b.CreateICmpEQ(bits, to_payload(v))), same_there, write);
      b.SetInsertPoint(write);
      missing = b.CreateZExt(b.CreateAnd(p.decided, b.CreateICmpSLT(p.pos, b.getInt64(0))), i64);
    }
    // Another register holding this dict: left to the interpreter (the
    // helper is then told of no register to look at).
    bail_if(held_elsewhere(r, d.v));
    auto* ft =
        llvm::FunctionType::get(i32, {i8p, i8p, i64, i64, i64, i8p, i64, i8p, i8p, i64}, false);
    llvm::Value* view = probed ? b.CreateBitCast(dict_view_of(r).buf, i8p)
                               : llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p));
    llvm::Value* rc = b.CreateCall(
        ft, fptr(reinterpret_cast<void*>(&native_dict_set), ft),
        {cptr, b.CreateBitCast(held, i8p), b.getInt64(0), b.getInt64(r), d.v, key,
         b.getInt64(static_cast<int64_t>(keys.size())), b.CreateBitCast(item, i8p), view,
         missing});
    bail_if(b.CreateICmpNE(rc, b.getInt32(0)));
    if (probed) {
      // The view after the write, given by the call itself (taken at the
      // count of calls that includes it).
      const DictView dv = dict_view_of(r);
      b.CreateStore(b.CreateICmpNE(b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, dv.buf, 4)),
                                   b.getInt64(0)),
                    dv.ok);
      b.CreateStore(d.v, dv.obj);
      b.CreateStore(b.CreateLoad(i64, dict_epoch_of()), dv.epoch);
    }
    if (same_there) {
      b.CreateBr(same_there);
      b.SetInsertPoint(same_there);
    }
    count(n.counter);
    return d;
  }
  // Whether a register other than r holds object `obj` now (i1): its
  // comparisons are written at the end of build (HeldCheck).
  llvm::Value* held_elsewhere(int r, llvm::Value* obj) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    HeldCheck c{llvm::BasicBlock::Create(ctx, "held_check", fn),
                llvm::BasicBlock::Create(ctx, "held_checked", fn), r, obj, e.CreateAlloca(i1)};
    b.CreateBr(c.block);
    b.SetInsertPoint(c.next);
    held_checks.push_back(c);
    return b.CreateLoad(i1, c.other);
  }
  // {} and set() made in the loop (an empty dict: native_dict_new).
  CV new_dict(const FNode& n) {
    if (!n.kids.empty()) throw Refuse{"a dict made in the loop with items"};
    auto* ft = llvm::FunctionType::get(i64, {i8p}, false);
    llvm::Value* obj = b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_dict_new), ft), {cptr});
    bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
    b.CreateStore(b.getTrue(), made_any);
    return CV{Reg::Obj, obj};
  }

  bool arr_var(const FNode& k) { return k.op == Op::Var && kind[k.reg] == Reg::Arr; }

  CV getitem(const FNode& n) {
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
    if (n.kids[0].op == Op::Var && kind[n.kids[0].reg] == Reg::Obj && dict_reg[n.kids[0].reg])
      return dict_item(n);
    if (n.kids.size() == 2 && n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2 &&
        list_var(n.kids[0].kids[0]) && !dict_reg[n.kids[0].kids[0].reg])
      return list2_item(n);
    if (list_var(n.kids[0]) && n.kids.size() == 2) return list_item(n);
    if (n.kids[0].op != Op::Var || kind[n.kids[0].reg] != Reg::Arr)
      throw Refuse{"indexing what is not an array variable"};
    const int r = n.kids[0].reg;
    const ArrT& e = atype[r];
    const size_t nidx = n.kids.size() - 1;
    if (!e.indexable || static_cast<size_t>(e.nd) != nidx)
      throw Refuse{"indexing that does not select one element"};
    if (rows.count(r) && maybe_undef[r]) bail_if(b.CreateNot(b.CreateLoad(i1, def[r])));
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
      case DType::int32:
        t = i32, k = Reg::NpI32;
        break;
      default:
        throw Refuse{std::string("an element read of dtype ") + std::string(dtype_name(e.dt))};
    }
    llvm::Value* off = element_offset(n, r, 1, nidx);
    llvm::Value* p = b.CreateBitCast(abase(r), t->getPointerTo());
    llvm::Value* v = b.CreateLoad(t, b.CreateInBoundsGEP(t, p, off));
    if (k == Reg::NpBool) v = b.CreateICmpNE(v, b.getInt8(0));
    if (k == Reg::NpF32) v = b.CreateFPExt(v, f64);
    if (k == Reg::NpI32) v = b.CreateSExt(v, i64);
    count(n.counter);
    for (int c : n.also_count) count(c);
    return CV{k, v};
  }

  // element_cast<T>(double) for an integer T of `bits` bits (array.hpp):
  // out of int64's range gives T's minimum.
  llvm::Value* float_to_int(llvm::Value* f, llvm::Type* t, bool is_unsigned) {
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

  CV setitem(const FNode& n) {
    if (n.kids[0].op == Op::Var && kind[n.kids[0].reg] == Reg::Obj && dict_reg[n.kids[0].reg])
      return dict_set(n);
    if (list_var(n.kids[0])) return list_setitem(n);
    if (n.kids[0].op != Op::Var || kind[n.kids[0].reg] != Reg::Arr)
      throw Refuse{"an element write to what is not an array variable"};
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
      // int(v) is a block ending in astype (its check of v before: _templates.py)
      const bool converted = i.op == Op::AsType || (i.op == Op::Block && !i.kids.empty() &&
                                                    i.kids.back().op == Op::AsType);
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
        t = i32;
        break;
      case DType::uint8:
        t = i8, is_unsigned = true;
        break;
      case DType::bool_:
        t = i8;
        break;
      default:
        throw Refuse{std::string("an element write of dtype ") + std::string(dtype_name(e.dt))};
    }
    llvm::Value* off = element_offset(n, r, 2, nidx);
    // What the interpreter leaves to the general path: NaN or infinity into
    // integers, a Python int out of a narrow dtype's range.
    if (is_float(vk) && e.dt != DType::float64 && e.dt != DType::float32 && e.dt != DType::bool_) {
      llvm::Value* finite = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v.v),
                                            llvm::ConstantFP::getInfinity(f64));
      bail_if(b.CreateNot(finite));
    }
    if (vk == Reg::PyInt && (e.dt == DType::int32 || e.dt == DType::uint8)) {
      const int64_t lo = e.dt == DType::int32 ? INT32_MIN : 0;
      const int64_t hi = e.dt == DType::int32 ? INT32_MAX : 255;
      llvm::Value* out = b.CreateOr(b.CreateICmpSLT(v.v, b.getInt64(lo)), b.CreateICmpSGT(v.v, b.getInt64(hi)));
      bail_if(v.s ? b.CreateAnd(b.CreateNot(v.s), out) : out);
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
    } else if (slot_fresh[r]) {
      // An array made in this call needs no undo (a bail goes back to
      // before it was made, or, turn by turn, to registers not holding it).
      llvm::BasicBlock* lg = llvm::BasicBlock::Create(ctx, "log_old", fn);
      llvm::BasicBlock* nx = llvm::BasicBlock::Create(ctx, "logged_old", fn);
      b.CreateCondBr(fresh_of(r), nx, lg);
      b.SetInsertPoint(lg);
      log_or_snapshot(r, p, it, size);
      b.CreateBr(nx);
      b.SetInsertPoint(nx);
    } else {
      log_or_snapshot(r, p, it, size);
    }
    b.CreateStore(x, p);
    count(n.counter);
    for (int c : n.also_count) count(c);
    return CV{Reg::Arr, nullptr, nullptr, r};
  }

  // An element write of array register `r` that no check before the loop
  // covers (an insertion sort's `a[j + 1] = a[j]` under `while j >= 0`):
  // its old bytes to the log, until the call's log holds as many bytes as
  // the array; then the whole array is copied to the log once
  // (snapshot_once) and its later writes in this call are not logged.
  // Millions of shifts within a few thousand elements cost one copy, not a
  // log of tens of megabytes; an array written a few times is never copied.
  void log_or_snapshot(int r, llvm::Value* p, llvm::Type* it, unsigned size) {
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

  // The old bytes of the element at `p` to the log.
  void log_write(llvm::Value* p, llvm::Type* it, unsigned size) {
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

  CV astype(const FNode& n) {
    CV v = eval(n.kids[0]);
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"astype of a non-scalar"};
    llvm::Value* strong = strong_of(v);
    llvm::Value* f = is_float(vk) ? v.v : is_bool(vk) ? b.CreateUIToFP(v.v, f64) : b.CreateSIToFP(v.v, f64);
    CV r;
    switch (n.cast_to) {
      case DType::int64:
        r = mk(Reg::PyInt, is_int(vk) ? v.v : float_to_int(f, i64, false), strong);
        break;
      case DType::float64:
        r = mk(Reg::PyFloat, f, strong);
        break;
      default:
        r = mk(Reg::PyBool, truth(v), strong);
        break;
    }
    count(n.counter);
    return r;
  }

  // A float function of one number (np.sqrt(x), math.exp(x), ...): the
  // kind of its result found by calling the primitive once on a sample.
  CV call(const FNode& n) {
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
        auto* ft = llvm::FunctionType::get(i64, {i8p, i64}, false);
        llvm::Value* len =
            b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_list_len), ft), {cptr, v.v});
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
    if (n.spec->name == "len" && n.kids.size() == 1 && lists) {
      if (n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2 &&
          list_var(n.kids[0].kids[0]) && !dict_reg[n.kids[0].kids[0].reg])
        return list2_len(n);
      CV v = eval_any(n.kids[0]);
      if (v.k != Reg::Obj) throw Refuse{"len() of a value that is not an array or a list"};
      auto* ft = llvm::FunctionType::get(i64, {i8p, i64}, false);
      // lists, dicts (native_container_len) and ASCII strings
      llvm::Value* len =
          b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_seq_len), ft), {cptr, v.v});
      bail_if(b.CreateICmpSLT(len, b.getInt64(0)));
      count(n.slot);
      return CV{Reg::PyInt, len};
    }
    if ((n.spec->name == "negative" || n.spec->name == "not_") && n.kids.size() == 1)
      return negate(n);
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
      if (!arr_var(n.kids[0])) {
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
      if (v.k == kDyn || !(vk == Reg::PyInt || vk == Reg::NpInt || vk == Reg::NpI32 ||
                           vk == Reg::PyBool))
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
    auto it = ops.find(n.spec->name);
    if (it == ops.end() || n.kids.size() != 1)
      throw Refuse{"'" + n.spec->name + "' has no native code"};
    CV v = eval(n.kids[0]);
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (!is_int(vk) && !is_float(vk)) throw Refuse{"'" + n.spec->name + "' of a non-number"};
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

  // `-x` of a number (its kind kept: Python's int overflows at INT64_MIN, to
  // the general path; NumPy's int64 and int32 wrap around) and Python's
  // `not x` (a Python bool whatever x's kind).
  CV negate(const FNode& n) {
    CV v = eval(n.kids[0]);
    const auto vk = static_cast<Reg::Kind>(v.k);
    if (v.k == kDyn || !is_scalar(vk)) throw Refuse{"'" + n.spec->name + "' of a non-scalar"};
    if (n.spec->name == "not_") {
      llvm::Value* r = b.CreateNot(truth(v));
      count(n.slot);
      return CV{Reg::PyBool, r};
    }
    if (is_bool(vk)) throw Refuse{"'negative' of a bool"};
    CV r = v;
    if (is_float(vk)) {
      r.v = b.CreateFNeg(v.v);
    } else if (vk == Reg::NpI32) {
      r.v = b.CreateSExt(b.CreateNeg(b.CreateTrunc(v.v, b.getInt32Ty())), i64);
    } else {
      r.v = b.CreateSub(b.getInt64(0), v.v);
      if (vk == Reg::PyInt) {
        llvm::Value* over = b.CreateICmpEQ(v.v, b.getInt64(INT64_MIN));
        if (v.s) over = b.CreateAnd(over, b.CreateNot(v.s));
        bail_if(over);
      }
    }
    count(n.slot);
    return r;
  }

  int probe(const FNode& n, UnaryOp op, const CV& v) {
    const auto vk = static_cast<Reg::Kind>(v.k);
    Value sample = vk == Reg::PyFloat ? Value(0.375)
                   : vk == Reg::NpFloat ? Value(Array::scalar(0.375))
                   : vk == Reg::NpF32   ? Value(Array::scalar(0.375, DType::float32))
                   : vk == Reg::NpI32   ? Value(Array::scalar(3.0, DType::int32))
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

  CV finish_call(const FNode& n, UnaryOp op, const CV& v, int rk) {
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

  // ---- statements
  // A value for an operation: a list is one only for len(), an append, an
  // assignment, and as a statement's or the loop's value (eval_any).
  CV eval(const FNode& n) {
    CV v = eval_any(n);
    if (v.k == Reg::Obj) throw Refuse{"a list used other than by append, len() or assignment"};
    return v;
  }
  CV eval_any(const FNode& n) {
    switch (n.op) {
      case Op::Const:
        switch (n.constant.k) {
          case Reg::PyBool:
            return CV{Reg::PyBool, b.getInt1(n.constant.b)};
          case Reg::PyInt:
            return CV{Reg::PyInt, b.getInt64(static_cast<uint64_t>(n.constant.i))};
          case Reg::PyFloat:
            return CV{Reg::PyFloat, llvm::ConstantFP::get(f64, n.constant.f)};
          case Reg::Obj:
            throw Refuse{"a constant that is not a number (a slice, a string)"};
          default:
            return CV{Reg::Nil};
        }
      case Op::Var:
        return read(n.reg);
      case Op::Assign: {
        if (auto row = rows.find(n.reg); row != rows.end()) {
          set_row(n.reg, row->second, n.kids[0]);
          return CV{Reg::Nil};
        }
        ArrT t;
        if (rebinds[n.reg] && alloc_type(n.kids[0], t)) {
          alloc_into(n.reg, n.kids[0], t);
          return CV{Reg::Arr, nullptr, nullptr, n.reg};
        }
        CV v = eval_any(n.kids[0]);
        write(n.reg, v);
        return v;
      }
      case Op::Block: {
        CV last{Reg::Nil};
        for (const FNode& k : n.kids) last = eval_any(k);
        return last;
      }
      case Op::If:
        return if_(n);
      case Op::While:
        return while_(n);
      case Op::Break:
      case Op::Continue: {
        if (loops.empty()) throw Refuse{"break outside a loop"};
        b.CreateBr(n.op == Op::Break ? loops.back().brk : loops.back().cont);
        dead_block();
        return CV{Reg::Nil};
      }
      case Op::Logic: {
        CV a = eval(n.kids[0]);
        const auto ka = static_cast<Reg::Kind>(a.k);
        if (!is_scalar(ka)) throw Refuse{"'and'/'or' of a non-scalar"};
        if (a.s) throw Refuse{"'and'/'or' of a number whose kind varies"};
        llvm::Value* ta = truth(a);
        if (is_strong(ka)) {
          CV c = eval(n.kids[1]);
          if (!is_scalar(static_cast<Reg::Kind>(c.k))) throw Refuse{"'and'/'or' of a non-scalar"};
          llvm::Value* tb = truth(c);
          return CV{Reg::NpBool, n.is_and ? b.CreateAnd(ta, tb) : b.CreateOr(ta, tb)};
        }
        // Python-like left side: short-circuits; both sides Python-like.
        return CV{Reg::PyBool, short_circuit(n, ta, [&] {
                    CV c = eval(n.kids[1]);
                    const auto kc = static_cast<Reg::Kind>(c.k);
                    if (!is_scalar(kc) || is_strong(kc) || c.s)
                      throw Refuse{"'and'/'or' whose value's kind varies"};
                    return truth(c);
                  })};
      }
      case Op::Binary:
        return binary(n);
      case Op::GetItem:
        return getitem(n);
      case Op::SetItem:
        return setitem(n);
      case Op::AsType:
        return astype(n);
      case Op::Call:
        return call(n);
      case Op::NewList:
        return new_list(n);
      case Op::NewDict:
        return new_dict(n);
      case Op::Append:
        return append(n);
      case Op::Uniform: {
        auto* t = llvm::FunctionType::get(f64, {i8p}, false);
        uniform_draws = true;
        llvm::Value* r = b.CreateCall(t, fptr(reinterpret_cast<void*>(&native_uniform), t), {cptr});
        count(n.slot);
        return CV{Reg::NpFloat, r};
      }
      default:
        throw Refuse{"an operation without native code"};
    }
  }

  // Merges two values coming from `ba` and `bb` into `at` (the current block).
  CV merge(const CV& a, llvm::BasicBlock* ba, const CV& c, llvm::BasicBlock* bc) {
    const bool numbers = a.k != kDyn && c.k != kDyn && is_scalar(static_cast<Reg::Kind>(a.k)) &&
                         is_scalar(static_cast<Reg::Kind>(c.k));
    if (numbers && py_kind(static_cast<Reg::Kind>(a.k)) == py_kind(static_cast<Reg::Kind>(c.k)) &&
        (a.s || c.s || a.k != c.k)) {
      auto sa = [&](llvm::BasicBlock* from, const CV& v) {
        auto ip = b.saveIP();
        b.SetInsertPoint(from->getTerminator());
        llvm::Value* r = strong_of(v);
        b.restoreIP(ip);
        return r;
      };
      llvm::Value* s1 = sa(ba, a);
      llvm::Value* s2 = sa(bc, c);
      llvm::PHINode* phi = b.CreatePHI(a.v->getType(), 2);
      phi->addIncoming(a.v, ba);
      phi->addIncoming(c.v, bc);
      llvm::PHINode* ps = b.CreatePHI(i1, 2);
      ps->addIncoming(s1, ba);
      ps->addIncoming(s2, bc);
      CV r{py_kind(static_cast<Reg::Kind>(a.k)), phi};
      r.s = ps;
      return r;
    }
    if (a.k == c.k && a.k != kDyn && a.k != Reg::Arr) {
      if (a.k == Reg::Nil) return a;
      llvm::PHINode* phi = b.CreatePHI(a.v->getType(), 2);
      phi->addIncoming(a.v, ba);
      phi->addIncoming(c.v, bc);
      return CV{a.k, phi};
    }
    if (a.k == Reg::Arr && c.k == Reg::Arr && a.arr == c.arr) return a;
    // Kinds differ: a kind known at run time.
    auto kp = [&](llvm::BasicBlock* from, const CV& v) -> std::pair<llvm::Value*, llvm::Value*> {
      auto ip = b.saveIP();
      b.SetInsertPoint(from->getTerminator());
      auto r = std::make_pair(kind_of(v), to_payload(v));
      b.restoreIP(ip);
      return r;
    };
    auto [ka, pa] = kp(ba, a);
    auto [kc, pc] = kp(bc, c);
    llvm::PHINode* pk = b.CreatePHI(i8, 2);
    pk->addIncoming(ka, ba);
    pk->addIncoming(kc, bc);
    llvm::PHINode* pp = b.CreatePHI(i64, 2);
    pp->addIncoming(pa, ba);
    pp->addIncoming(pc, bc);
    return CV{kDyn, pk, pp};
  }

  CV if_(const FNode& n) {
    const bool then_bails = n.kids[1].op == Op::Bail;
    const bool else_bails = n.kids.size() > 2 && n.kids[2].op == Op::Bail;
    if (then_bails || else_bails) {
      // A branch left to the general evaluation (fastloop.cpp, compile_branch):
      // taking it bails; the other branch is the if's value.
      llvm::Value* c = cond(n.kids[0]);
      if (then_bails && else_bails) {
        bail_if(b.getTrue());
        return CV{Reg::Nil};
      }
      if (then_bails) {
        bail_if(c);
        return n.kids.size() > 2 ? eval_any(n.kids[2]) : CV{Reg::Nil};
      }
      bail_if(b.CreateNot(c));
      return eval_any(n.kids[1]);
    }
    llvm::Value* c = cond(n.kids[0]);
    llvm::BasicBlock* then_b = llvm::BasicBlock::Create(ctx, "then", fn);
    llvm::BasicBlock* else_b = llvm::BasicBlock::Create(ctx, "else", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "endif", fn);
    b.CreateCondBr(c, then_b, else_b);
    b.SetInsertPoint(then_b);
    CV tv = eval_any(n.kids[1]);
    llvm::BasicBlock* then_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(else_b);
    CV ev{Reg::Nil};
    if (n.kids.size() > 2) ev = eval_any(n.kids[2]);
    llvm::BasicBlock* else_end = b.GetInsertBlock();
    b.CreateBr(done);
    b.SetInsertPoint(done);
    return merge(tv, then_end, ev, else_end);
  }

  void interrupt_check(llvm::BasicBlock* on_interrupt) {
    if (!interrupt_at) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      interrupt_at = e.CreateLoad(
          i8p, e.CreateBitCast(e.CreateConstInBoundsGEP1_64(e.getInt8Ty(), fn->getArg(0),
                                                            offsetof(NativeCtx, interrupt)),
                               i8p->getPointerTo()));
    }
    llvm::Value* flag = interrupt_at;
    llvm::LoadInst* l = b.CreateLoad(i8, flag);
    l->setAtomic(llvm::AtomicOrdering::Monotonic);
    l->setAlignment(llvm::Align(1));
    llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "go", fn);
    b.CreateCondBr(b.CreateICmpNE(l, b.getInt8(0)), on_interrupt, go, unlikely());
    b.SetInsertPoint(go);
  }

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
    std::vector<int> coef;    // per index: -1, 0 or 1 times the counter
  };

  // A nested loop (FastLoop::Impl::loop): Ctrl-C inside a turn bails.
  CV while_(const FNode& n) {
    llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    llvm::Value* lk = e.CreateAlloca(i8);
    llvm::Value* lp = e.CreateAlloca(i64);
    b.CreateStore(b.getInt8(Reg::Nil), lk);
    b.CreateStore(b.getInt64(0), lp);
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "while", fn);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "body", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "wend", fn);
    RangeLoop rl;
    // A loop with loops inside is versioned inside the unchecked version of
    // an outer loop only (where something remains to check): elsewhere
    // (the checked versions) its inner loops are, so that the code grows
    // linearly with the depth of the nest.
    if (range_loop(n.kids[0], n.kids[1], rl) && (!rl.loops_in || proven)) {
      const bool unit = rl.step == 1 || rl.step == -1;
      if (unit) no_overflow.insert(rl.inc);
      if (unit && proven && prelogged && all_proven(n.kids[1], *proven) &&
          (!maybe_undef[rl.k] || !const_end(rl))) {
        // Inside a loop nest whose check before it covered every access of
        // this loop (and logged its writes): one version, without checks.
        // A counter or end that may be undefined at the call's start (an
        // inner loop's hidden registers are) was assigned just before the
        // loop: LLVM folds its flag's test away (else the general turns).
        // Not for such a counter with an end of constants only (`range(3)`):
        // the versioned form below measured faster there (SLP's packing).
        llvm::Value* bad = b.getFalse();
        if (maybe_undef[rl.k]) bad = b.CreateNot(b.CreateLoad(i1, def[rl.k]));
        llvm::Value* e0 = end_value(rl, bad);
        llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "proven_range", fn);
        b.CreateCondBr(bad, head, fast, unlikely());
        b.SetInsertPoint(fast);
        range_chunks(n, rl, e0, lk, lp, done, *proven);
      } else {
      // Two versions: with the accesses checked once before the loop (and
      // their writes logged there), and as below when that check fails.
      // With loops inside, the accesses of the whole nest whose indices
      // stay within intervals known before the loop are checked there too.
      std::vector<Hoisted> hs;
      std::set<const FNode*> pr;
      if (!unit) pr.insert(rl.inc);  // no overflow: range_ok checks the end
      for (size_t q = 0; q < n.kids[1].kids.size(); ++q) collect(n.kids[1].kids[q], rl, q, hs, pr);
      llvm::Value *k0, *e0;
      llvm::Value* ok = range_ok(rl, hs, k0, e0);
      std::set<int> copy;
      if (rl.loops_in) ok = b.CreateAnd(ok, nest_ok(n.kids[1], rl, k0, e0, pr, copy));
      if (proven) pr.insert(proven->begin(), proven->end());
      llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, "range", fn);
      b.CreateCondBr(ok, fast, head);
      b.SetInsertPoint(fast);
      prelog(rl, hs, k0, e0);
      for (int r : copy) snapshot_once(r);
      range_chunks(n, rl, e0, lk, lp, done, pr);
      }
    } else {
      b.CreateBr(head);
    }
    b.SetInsertPoint(head);
    interrupt_check(interrupted);
    b.CreateCondBr(cond(n.kids[0]), body, done);
    b.SetInsertPoint(body);
    loops.push_back({head, done, lk, lp});
    CV v = eval_any(n.kids[1]);
    loops.pop_back();
    b.CreateStore(kind_of(v), lk);
    b.CreateStore(to_payload(v), lp);
    b.CreateBr(head);
    b.SetInsertPoint(done);
    return CV{kDyn, b.CreateLoad(i8, lk), b.CreateLoad(i64, lp)};
  }

  // The turns of range loop `n` with the accesses in `pr` unchecked (and
  // their writes logged before), in chunks of 65536 turns with Ctrl-C
  // checked between them: the turns of a chunk form a loop with no exit but
  // its end, which LLVM vectorises. Ends branching to `done`.
  void range_chunks(const FNode& n, const RangeLoop& rl, llvm::Value* e0, llvm::Value* lk,
                    llvm::Value* lp, llvm::BasicBlock* done, const std::set<const FNode*>& pr) {
    llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "chunk", fn);
    llvm::BasicBlock* fhead = llvm::BasicBlock::Create(ctx, "rhead", fn);
    llvm::BasicBlock* fbody = llvm::BasicBlock::Create(ctx, "rbody", fn);
    llvm::BasicBlock* fend = llvm::BasicBlock::Create(ctx, "rchunk_end", fn);
    llvm::BasicBlock* ffin = llvm::BasicBlock::Create(ctx, "rfin", fn);
    b.CreateBr(chunk);
    b.SetInsertPoint(chunk);
    if (rl.loops_in) {
      // Loops inside: one loop, Ctrl-C checked on each turn (the chunks of
      // its innermost loops check it too); chunks here would double the
      // depth of the nest for the optimiser (seconds of compile time).
      b.CreateBr(fhead);
      b.SetInsertPoint(fhead);
      interrupt_check(interrupted);
      b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), fbody, fend);
    } else {
      // Ctrl-C before a chunk when more than one chunk's turns are left: a
      // shorter loop (every chunk of 65,536 turns or less) is the inner loop
      // of a loop that checks it on each turn, and a constant short range
      // (`range(-1, 2)`, `range(3)`) then keeps no exit but its end, which
      // LLVM unrolls whole.
      llvm::Value* k = b.CreateLoad(i64, val[rl.k]);
      llvm::Value* left = rl.step > 0 ? b.CreateSub(e0, k) : b.CreateSub(k, e0);
      llvm::BasicBlock* longer = llvm::BasicBlock::Create(ctx, "long_range", fn);
      llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "chunk_go", fn);
      if (!const_end(rl)) {
        // An end known at run time only (`range(k.shape[1])`, a local the
        // loop does not write): at most one chunk's turns left, the common
        // case, run as one plain loop up to the end, without the chunk's
        // bookkeeping, which LLVM cannot drop when it does not know that
        // one chunk suffices.
        llvm::BasicBlock* phead = llvm::BasicBlock::Create(ctx, "shead", fn);
        llvm::BasicBlock* pbody = llvm::BasicBlock::Create(ctx, "sbody", fn);
        b.CreateCondBr(b.CreateICmpSGT(left, b.getInt64(1 << 16)), longer, phead);
        b.SetInsertPoint(phead);
        b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), pbody, ffin);
        b.SetInsertPoint(pbody);
        unchecked_turn(n, rl, phead, done, lk, lp, pr);
      } else {
        b.CreateCondBr(b.CreateICmpSGT(left, b.getInt64(1 << 16)), longer, go);
      }
      b.SetInsertPoint(longer);
      interrupt_check(interrupted);
      b.CreateBr(go);
      b.SetInsertPoint(go);
      llvm::Value* lim = chunk_limit(rl, b.CreateLoad(i64, val[rl.k]), e0, b.getInt64(1 << 16));
      b.CreateBr(fhead);
      b.SetInsertPoint(fhead);
      b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), lim), fbody, fend);
    }
    b.SetInsertPoint(fbody);
    unchecked_turn(n, rl, fhead, done, lk, lp, pr);
    b.SetInsertPoint(fend);
    b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), chunk, ffin);
    b.SetInsertPoint(ffin);
    count(rl.cond->counter);
    b.CreateBr(done);
  }

  // Node counters that always hold the same value, merged into one before
  // -O3: each counted node has its own counter, incremented where the node
  // runs, so the nodes of one loop body are a dozen equal counters that
  // LLVM keeps apart (each started from 0, equal only by induction), packs
  // into vectors and spills around the nest's inner loops (conv2d_loop's
  // windows). Counters are equal wherever they are read when they are
  // incremented equally often in every region (a block and the blocks
  // after its checks: the other way out of a check leads to no read of a
  // counter) and no read falls between the increments of one region.
  void merge_counters() {
    std::map<llvm::Value*, int> ctr;  // alloca -> index
    std::vector<llvm::Value*> allocas;
    for (auto& [slot, a] : counts) {
      ctr[a] = static_cast<int>(allocas.size());
      allocas.push_back(a);
    }
    if (allocas.size() < 2) return;
    const size_t nc = allocas.size();
    struct Inc {
      llvm::LoadInst* ld;
      llvm::Instruction* add;
      llvm::StoreInst* st;
    };
    std::vector<std::vector<Inc>> incs(nc);
    std::vector<bool> other_write(nc, false);
    std::set<llvm::LoadInst*> inc_loads;
    llvm::BasicBlock* entry = &fn->getEntryBlock();
    auto ctr_of = [&](llvm::Value* p) {
      auto it = ctr.find(p);
      return it == ctr.end() ? -1 : it->second;
    };
    for (llvm::BasicBlock& bb : *fn) {
      for (llvm::Instruction& i : bb) {
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
        if (!st) continue;
        const int c = ctr_of(st->getPointerOperand());
        if (c < 0) continue;
        auto* add = llvm::dyn_cast<llvm::BinaryOperator>(st->getValueOperand());
        auto* one = add ? llvm::dyn_cast<llvm::ConstantInt>(add->getOperand(1)) : nullptr;
        auto* ld = add ? llvm::dyn_cast<llvm::LoadInst>(add->getOperand(0)) : nullptr;
        if (add && add->getOpcode() == llvm::Instruction::Add && one && one->isOne() && ld &&
            ld->getPointerOperand() == st->getPointerOperand() && ld->hasOneUse() &&
            add->hasOneUse() && ld->getParent() == &bb && add->getParent() == &bb) {
          incs[c].push_back({ld, add, st});
          inc_loads.insert(ld);
        } else if (!(&bb == entry && llvm::isa<llvm::ConstantInt>(st->getValueOperand()) &&
                     llvm::cast<llvm::ConstantInt>(st->getValueOperand())->isZero())) {
          other_write[c] = true;
        }
      }
    }
    // Blocks from which a read of a counter can be reached ("loud").
    std::set<llvm::BasicBlock*> loud;
    std::vector<llvm::BasicBlock*> work;
    std::map<llvm::BasicBlock*, std::vector<std::pair<llvm::Instruction*, int>>> reads;
    for (llvm::BasicBlock& bb : *fn) {
      for (llvm::Instruction& i : bb) {
        auto* ld = llvm::dyn_cast<llvm::LoadInst>(&i);
        if (!ld || inc_loads.count(ld)) continue;
        const int c = ctr_of(ld->getPointerOperand());
        if (c < 0) continue;
        reads[&bb].push_back({ld, c});
        if (loud.insert(&bb).second) work.push_back(&bb);
      }
    }
    while (!work.empty()) {
      llvm::BasicBlock* bb = work.back();
      work.pop_back();
      for (llvm::BasicBlock* pred : llvm::predecessors(bb))
        if (loud.insert(pred).second) work.push_back(pred);
    }
    // Regions: a block continues its single predecessor's region when the
    // predecessor's other successors are quiet. Positions count along the
    // region (block order within it, then the instruction).
    std::map<llvm::BasicBlock*, std::pair<llvm::BasicBlock*, int64_t>> region;  // head, offset
    std::function<std::pair<llvm::BasicBlock*, int64_t>(llvm::BasicBlock*)> head_of =
        [&](llvm::BasicBlock* bb) -> std::pair<llvm::BasicBlock*, int64_t> {
      if (auto it = region.find(bb); it != region.end()) return it->second;
      std::pair<llvm::BasicBlock*, int64_t> r{bb, 0};
      region[bb] = r;  // a cycle of single predecessors ends here
      llvm::BasicBlock* pred = bb->getSinglePredecessor();
      if (pred && pred != bb) {
        bool quiet = true;
        for (llvm::BasicBlock* succ : llvm::successors(pred))
          if (succ != bb && loud.count(succ)) quiet = false;
        if (quiet) {
          auto ph = head_of(pred);
          if (ph.first != bb) r = {ph.first, ph.second + static_cast<int64_t>(pred->size()) + 1};
        }
      }
      region[bb] = r;
      return r;
    };
    std::map<llvm::Instruction*, int64_t> index;
    for (llvm::BasicBlock& bb : *fn) {
      int64_t k = 0;
      for (llvm::Instruction& i : bb) index[&i] = k++;
    }
    for (llvm::BasicBlock& bb : *fn) head_of(&bb);  // before any increment is erased
    auto pos = [&](llvm::Instruction* i) {
      auto h = head_of(i->getParent());
      return std::make_pair(h.first, h.second + index[i]);
    };
    // Counters grouped by how often each region increments them.
    std::map<std::map<llvm::BasicBlock*, int>, std::vector<int>> groups;
    for (size_t c = 0; c < nc; ++c) {
      if (other_write[c] || incs[c].empty()) continue;
      std::map<llvm::BasicBlock*, int> sig;
      for (const Inc& in : incs[c]) ++sig[pos(in.ld).first];
      groups[sig].push_back(static_cast<int>(c));
    }
    for (auto& [sig, members] : groups) {
      if (members.size() < 2) continue;
      // The span of the group's increments in each region; a read inside it
      // may see members apart.
      std::map<llvm::BasicBlock*, std::pair<int64_t, int64_t>> span;
      for (int c : members) {
        for (const Inc& in : incs[c]) {
          auto a = pos(in.ld);
          auto z = pos(in.st);
          auto [it, fresh] = span.try_emplace(a.first, a.second, z.second);
          if (!fresh) {
            it->second.first = std::min(it->second.first, a.second);
            it->second.second = std::max(it->second.second, z.second);
          }
        }
      }
      std::set<int> in_group(members.begin(), members.end());
      bool apart = false;
      for (auto& [bb, rs] : reads) {
        for (auto& [ld, c] : rs) {
          if (!in_group.count(c)) continue;
          auto p = pos(ld);
          auto it = span.find(p.first);
          if (it != span.end() && p.second > it->second.first && p.second < it->second.second)
            apart = true;
        }
      }
      if (apart) continue;
      llvm::Value* rep = allocas[members[0]];
      for (size_t m = 1; m < members.size(); ++m) {
        const int c = members[m];
        for (const Inc& in : incs[c]) {
          in.st->eraseFromParent();
          in.add->eraseFromParent();
          in.ld->eraseFromParent();
        }
        incs[c].clear();
        for (auto& [bb, rs] : reads)
          for (auto& [ld, rc] : rs)
            if (rc == c) llvm::cast<llvm::LoadInst>(ld)->setOperand(0, rep);
      }
    }
  }

  // One turn of range loop `n` with the accesses in `pr` unchecked, then
  // back to `head`.
  void unchecked_turn(const FNode& n, const RangeLoop& rl, llvm::BasicBlock* head,
                      llvm::BasicBlock* done, llvm::Value* lk, llvm::Value* lp,
                      const std::set<const FNode*>& pr) {
    count(rl.cond->counter);
    const auto* saved_proven = proven;
    const bool saved_prelogged = prelogged;
    proven = &pr;
    prelogged = true;
    loops.push_back({head, done, lk, lp});
    CV fv = eval_any(n.kids[1]);
    loops.pop_back();
    proven = saved_proven;
    prelogged = saved_prelogged;
    b.CreateStore(kind_of(fv), lk);
    b.CreateStore(to_payload(fv), lp);
    b.CreateBr(head);
  }

  // True when every element access under `n` is in `pr`.
  bool all_proven(const FNode& n, const std::set<const FNode*>& pr) {
    if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) && !pr.count(&n))
      return false;
    for (const FNode& k : n.kids)
      if (!all_proven(k, pr)) return false;
    return true;
  }

  // A copy of array register `r` to the log, once per call (before writes
  // not logged one by one).
  void snapshot_once(int r) {
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
  struct Nest {
    const RangeLoop* rl;
    llvm::Value *k0, *e0;
    std::map<int, std::vector<const FNode*>> assigns;  // per register: its Assign nodes
    std::vector<Inner> inners;
    std::map<const FNode*, std::pair<int, size_t>> role;  // Assign -> (0 init, 1 inc, 2 ivar, 3 end; inner)
    std::map<int, std::pair<llvm::Value*, llvm::Value*>> memo;
    std::set<int> visiting;
    llvm::Value* bad;
  };

  static void assigns_of(const FNode& n, Nest& ns) {
    if (n.op == Op::Assign) ns.assigns[n.reg].push_back(&n);
    for (const FNode& k : n.kids) assigns_of(k, ns);
  }

  void find_inners(const FNode& n, Nest& ns) {
    if (n.op == Op::Block) {
      for (size_t q = 0; q < n.kids.size(); ++q) {
        const FNode& w = n.kids[q];
        if (w.op != Op::While) continue;
        const FNode& c = w.kids[0];
        const FNode& body = w.kids[1];
        if (c.op != Op::Binary || (c.fast != Fast::lt && c.fast != Fast::gt) ||
            c.kids[0].op != Op::Var || body.op != Op::Block)
          continue;
        const int k2 = c.kids[0].reg;
        const FNode& ev = c.kids[1];
        if (ev.op != Op::Var && (ev.op != Op::Const || ev.constant.k != Reg::PyInt)) continue;
        if (ev.op == Op::Var && ev.reg == k2) continue;
        int64_t step = 0;
        const FNode *init = nullptr, *end = ev.op == Op::Const ? &ev : nullptr, *end_asg = nullptr;
        for (size_t p = q; p-- > 0;) {
          const FNode& a = n.kids[p];
          if (a.op != Op::Assign) continue;
          if (a.reg == k2 && !init) init = &a;
          if (ev.op == Op::Var && a.reg == ev.reg && !end_asg) end_asg = &a;
        }
        if (!init) continue;
        // The counter assigned only there and by its increment, the end
        // only there (or not in the nest at all: its interval is its own).
        if (ns.assigns[k2].size() != 2) continue;
        if (ev.op == Op::Var && end_asg && ns.assigns[ev.reg].size() != 1) continue;
        if (!end_asg) end = &ev;
        const FNode* inc = nullptr;
        std::vector<const FNode*> ivars;
        for (const FNode& a : body.kids) {
          if (a.op != Op::Assign) break;
          if (a.reg == k2) {
            const FNode& v = a.kids[0];
            if (v.op == Op::Binary && v.fast == Fast::add && v.kids[0].op == Op::Var &&
                v.kids[0].reg == k2 && v.kids[1].op == Op::Const &&
                v.kids[1].constant.k == Reg::PyInt && step_of(c.fast, v.kids[1].constant.i)) {
              inc = &a;
              step = v.kids[1].constant.i;
            }
            break;
          }
          if (a.kids[0].op == Op::Var && a.kids[0].reg == k2) ivars.push_back(&a);
        }
        if (!inc) continue;
        const size_t at = ns.inners.size();
        ns.inners.push_back({&init->kids[0], end_asg ? &end_asg->kids[0] : end, step, k2});
        ns.role[init] = {0, at};
        ns.role[inc] = {1, at};
        for (const FNode* a : ivars) ns.role[a] = {2, at};
        if (end_asg) ns.role[end_asg] = {3, at};
      }
    }
    for (const FNode& k : n.kids) find_inners(k, ns);
  }

  // Python's a // c for a constant c > 0.
  llvm::Value* floor_div(llvm::Value* a, int64_t c) {
    llvm::Value* q = b.CreateSDiv(a, b.getInt64(c));
    llvm::Value* down = b.CreateAnd(b.CreateICmpSLT(a, b.getInt64(0)),
                                    b.CreateICmpNE(b.CreateSRem(a, b.getInt64(c)), b.getInt64(0)));
    return b.CreateSub(q, b.CreateZExt(down, i64));
  }
  llvm::Value* smin(llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSLT(x, y), x, y); }
  llvm::Value* smax(llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSGT(x, y), x, y); }
  llvm::Value* checked(llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y, Nest& ns) {
    llvm::Value* r = b.CreateBinaryIntrinsic(id, x, y);
    ns.bad = b.CreateOr(ns.bad, b.CreateExtractValue(r, 1));
    return b.CreateExtractValue(r, 0);
  }

  // The interval [lo, hi] of int expression `x` over the nest's turns;
  // false when it is not known before the loop.
  bool interval(const FNode& x, Nest& ns, llvm::Value*& lo, llvm::Value*& hi) {
    switch (x.op) {
      case Op::Const:
        if (x.constant.k != Reg::PyInt) return false;
        lo = hi = b.getInt64(static_cast<uint64_t>(x.constant.i));
        return true;
      case Op::Var:
        return var_interval(x.reg, ns, lo, hi);
      case Op::Binary: {
        if ((x.fast != Fast::add && x.fast != Fast::sub && x.fast != Fast::mod &&
             x.fast != Fast::floordiv) ||
            x.kids.size() != 2)
          return false;
        llvm::Value *alo, *ahi, *clo, *chi;
        if (!interval(x.kids[0], ns, alo, ahi) || !interval(x.kids[1], ns, clo, chi)) return false;
        if (x.fast == Fast::mod) {
          // Python's a % c for c > 0 is in [0, c - 1], whatever a's sign
          // (wrap-around indices: grid[(i + di) % n]).
          ns.bad = b.CreateOr(ns.bad, b.CreateICmpSLE(clo, b.getInt64(0)));
          lo = b.getInt64(0);
          hi = b.CreateSub(chi, b.getInt64(1));
        } else if (x.fast == Fast::floordiv) {
          // a // c for a constant c > 0: monotonic in a, floor of each end.
          const FNode& c = x.kids[1];
          if (c.op != Op::Const || c.constant.k != Reg::PyInt || c.constant.i <= 0) return false;
          lo = floor_div(alo, c.constant.i);
          hi = floor_div(ahi, c.constant.i);
        } else if (x.fast == Fast::add) {
          lo = checked(llvm::Intrinsic::sadd_with_overflow, alo, clo, ns);
          hi = checked(llvm::Intrinsic::sadd_with_overflow, ahi, chi, ns);
        } else {
          lo = checked(llvm::Intrinsic::ssub_with_overflow, alo, chi, ns);
          hi = checked(llvm::Intrinsic::ssub_with_overflow, ahi, clo, ns);
        }
        return true;
      }
      case Op::GetItem: {  // x.shape[d]
        const FNode& s = x.kids[0];
        if (!(s.op == Op::Call && s.spec->name == "shape" && s.kids.size() == 1 &&
              arr_var(s.kids[0]) && x.kids.size() == 2 && x.kids[1].op == Op::Const &&
              x.kids[1].constant.k == Reg::PyInt))
          return false;
        const int q = s.kids[0].reg;
        if (ns.rl->rebound.count(q)) return false;  // another array on later turns
        const ArrT& e = atype[q];
        int64_t d = x.kids[1].constant.i;
        if (d < 0) d += e.nd;
        if (!e.indexable || d < 0 || d >= e.nd) return false;
        lo = hi = ashape(q, d);
        return true;
      }
      case Op::Call: {  // len(x)
        if (!(x.spec->name == "len" && x.kids.size() == 1 && arr_var(x.kids[0]))) return false;
        const int q = x.kids[0].reg;
        if (ns.rl->rebound.count(q)) return false;
        const ArrT& e = atype[q];
        if (!e.indexable || e.nd < 1) return false;
        lo = hi = ashape(q, 0);
        return true;
      }
      default:
        return false;
    }
  }

  bool var_interval(int r, Nest& ns, llvm::Value*& lo, llvm::Value*& hi) {
    const RangeLoop& rl = *ns.rl;
    if (auto m = ns.memo.find(r); m != ns.memo.end()) {
      lo = m->second.first, hi = m->second.second;
      return true;
    }
    if (r == rl.k || rl.ivar.count(r)) {  // the counter: [k0, last + step] (after its increment too)
      llvm::Value* last = last_turn(rl, ns.k0, ns.e0);
      if (rl.k == r) last = b.CreateAdd(last, b.getInt64(rl.step));  // no overflow: range_ok
      lo = rl.step > 0 ? ns.k0 : last;
      hi = rl.step > 0 ? last : ns.k0;
      ns.memo[r] = {lo, hi};
      return true;
    }
    const bool entry = val[r] && is_scalar(kind[r]);
    if (entry && !is_int(kind[r])) return false;
    // Undefined when the call began and first assigned after this point of
    // the code: assigned since (by code after the loop), its value is not
    // known here.
    if (!val[r]) ns.bad = b.CreateOr(ns.bad, b.CreateLoad(i1, def[r]));
    if (!rl.assigned.count(r)) {  // not changed by the loop: its value now
      if (!entry) return false;
      if (maybe_undef[r]) ns.bad = b.CreateOr(ns.bad, b.CreateNot(b.CreateLoad(i1, def[r])));
      lo = hi = b.CreateLoad(i64, val[r]);
      ns.memo[r] = {lo, hi};
      return true;
    }
    if (ns.visiting.count(r)) return false;
    ns.visiting.insert(r);
    lo = hi = nullptr;
    auto join = [&](llvm::Value* l, llvm::Value* h) {
      lo = lo ? smin(lo, l) : l;
      hi = hi ? smax(hi, h) : h;
    };
    bool ok = true;
    for (const FNode* a : ns.assigns[r]) {
      auto it = ns.role.find(a);
      if (it == ns.role.end()) {
        ok = false;
        break;
      }
      const Inner& in = ns.inners[it->second.second];
      const int role = it->second.first;
      if ((role == 0 || role == 1) && in.k != r) {
        ok = false;
        break;
      }
      llvm::Value *slo, *shi, *elo, *ehi;
      if (!interval(*in.start, ns, slo, shi) || !interval(*in.stop, ns, elo, ehi)) {
        ok = false;
        break;
      }
      switch (role) {
        case 0:  // the counter: from its start to its last turn's value + step
        case 1:
          if (in.step > 0)
            join(slo, smax(shi, checked(llvm::Intrinsic::sadd_with_overflow, ehi,
                                        b.getInt64(in.step - 1), ns)));
          else
            join(smin(slo, checked(llvm::Intrinsic::sadd_with_overflow, elo,
                                   b.getInt64(in.step + 1), ns)),
                 shi);
          break;
        case 2:  // j = k2 while k2 < e2
          if (in.step > 0)
            join(slo, checked(llvm::Intrinsic::ssub_with_overflow, ehi, b.getInt64(1), ns));
          else
            join(checked(llvm::Intrinsic::sadd_with_overflow, elo, b.getInt64(1), ns), shi);
          break;
        default:  // e2
          join(elo, ehi);
      }
    }
    ns.visiting.erase(r);
    if (!ok || !lo) return false;
    if (entry) {  // the value before the loop, read before the loop assigns it
      llvm::Value* v = b.CreateLoad(i64, val[r]);
      llvm::Value* d = maybe_undef[r] ? static_cast<llvm::Value*>(b.CreateLoad(i1, def[r])) : b.getTrue();
      lo = b.CreateSelect(d, smin(lo, v), lo);
      hi = b.CreateSelect(d, smax(hi, v), hi);
    }
    ns.memo[r] = {lo, hi};
    return true;
  }

  // Marks the index arithmetic of an access proven (no overflow checks, and
  // a % whose divisor interval() found positive without its zero check).
  static void index_ops(const FNode& n, std::set<const FNode*>& pr) {
    if (n.op != Op::Binary) return;
    pr.insert(&n);
    for (const FNode& k : n.kids) index_ops(k, pr);
  }

  void nest_collect(const FNode& n, Nest& ns, llvm::Value*& ok, std::set<const FNode*>& pr,
                    std::set<int>& copy) {
    if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) && !pr.count(&n) &&
        !(proven && proven->count(&n)) && !ns.rl->rebound.count(n.kids[0].reg)) {
      const int r = n.kids[0].reg;
      const ArrT& e = atype[r];
      const size_t first = n.op == Op::GetItem ? 1 : 2;
      const size_t nidx = n.kids.size() - first;
      if (e.indexable && static_cast<size_t>(e.nd) == nidx && nidx > 0 &&
          (n.op == Op::GetItem || e.writable)) {
        llvm::Value* in = b.getTrue();
        size_t d = 0;
        for (; d < nidx; ++d) {
          llvm::Value *lo, *hi;
          if (!interval(n.kids[first + d], ns, lo, hi)) break;
          llvm::Value* ext = ashape(r, d);
          in = b.CreateAnd(in, b.CreateAnd(b.CreateICmpULT(lo, ext), b.CreateICmpULT(hi, ext)));
        }
        if (d == nidx) {
          ok = b.CreateAnd(ok, in);
          pr.insert(&n);
          for (size_t k = 0; k < nidx; ++k) index_ops(n.kids[first + k], pr);
          if (n.op == Op::SetItem) copy.insert(r);
        }
      }
    }
    for (const FNode& k : n.kids) nest_collect(k, ns, ok, pr, copy);
  }

  // Before a range loop with loops inside: true when every access of the
  // nest whose indices have known intervals (and not already in `pr`) is in
  // range for all of them; those join `pr`, and the arrays they write,
  // `copy` (copied whole once per call before the loop).
  llvm::Value* nest_ok(const FNode& body, const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0,
                       std::set<const FNode*>& pr, std::set<int>& copy) {
    Nest ns;
    ns.rl = &rl;
    ns.k0 = k0;
    ns.e0 = e0;
    ns.bad = b.getFalse();
    assigns_of(body, ns);
    find_inners(body, ns);
    llvm::Value* ok = b.getTrue();
    nest_collect(body, ns, ok, pr, copy);
    return b.CreateAnd(ok, b.CreateNot(ns.bad));
  }

  // ---- range loops: `for i in range(a, b)` as the translator writes it,
  // while(k < e, block(i = k, k = k + 1, ...)) (or k > e and k + -1), with
  // neither k nor e assigned elsewhere in the body and no loop inside it.
  static void scan(const FNode& n, std::map<int, int>& assigns, bool& loops_in) {
    if (n.op == Op::Assign) ++assigns[n.reg];
    if (n.op == Op::While) loops_in = true;
    for (const FNode& k : n.kids) scan(k, assigns, loops_in);
  }
  bool int_reg(int r) const { return is_int(kind[r]) && !dyn[r]; }
  // A range's step for a loop condition k < e (positive) or k > e
  // (negative), as `range(a, b, step)` gives: at most 2^32 either way, so
  // that the bounds below stay far from int64's ends.
  static bool step_of(Fast cond, int64_t step) {
    constexpr int64_t kMaxStep = int64_t{1} << 32;
    return cond == Fast::lt ? step > 0 && step <= kMaxStep : step < 0 && step >= -kMaxStep;
  }
  // The counter's value at the last turn of a loop that turns at least once
  // (k0 before e0): k0 plus the whole steps that stay before e0.
  llvm::Value* last_turn(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0) {
    if (rl.step == 1 || rl.step == -1) return b.CreateSub(e0, b.getInt64(rl.step));
    const int64_t mag = rl.step > 0 ? rl.step : -rl.step;
    llvm::Value* span = rl.step > 0 ? b.CreateSub(b.CreateSub(e0, k0), b.getInt64(1))
                                    : b.CreateSub(b.CreateSub(k0, e0), b.getInt64(1));
    llvm::Value* whole = b.CreateMul(b.CreateUDiv(span, b.getInt64(mag)), b.getInt64(mag));
    return rl.step > 0 ? b.CreateAdd(k0, whole) : b.CreateSub(k0, whole);
  }
  // The number of turns of such a loop.
  llvm::Value* turn_count(const RangeLoop& rl, llvm::Value* k0, llvm::Value* e0) {
    if (rl.step == 1) return b.CreateSub(e0, k0);
    if (rl.step == -1) return b.CreateSub(k0, e0);
    const int64_t mag = rl.step > 0 ? rl.step : -rl.step;
    llvm::Value* span = rl.step > 0 ? b.CreateSub(b.CreateSub(e0, k0), b.getInt64(1))
                                    : b.CreateSub(b.CreateSub(k0, e0), b.getInt64(1));
    return b.CreateAdd(b.CreateUDiv(span, b.getInt64(mag)), b.getInt64(1));
  }

  bool range_loop(const FNode& cond, const FNode& body, RangeLoop& rl) {
    if (cond.op != Op::Binary || cond.kids.size() != 2) return false;
    if (cond.fast != Fast::lt && cond.fast != Fast::gt) return false;
    const FNode& kv = cond.kids[0];
    const FNode& ev = cond.kids[1];
    if (kv.op != Op::Var || !int_reg(kv.reg)) return false;
    if (ev.op == Op::Var) {
      if (!int_reg(ev.reg) || ev.reg == kv.reg) return false;
    } else if (ev.op != Op::Const || ev.constant.k != Reg::PyInt) {
      return false;
    }
    if (body.op != Op::Block) return false;
    std::map<int, int> assigns;
    scan(body, assigns, rl.loops_in);
    rl.cond = &cond;
    rl.k = kv.reg;
    rl.end = &ev;
    if (assigns[rl.k] != 1 || (ev.op == Op::Var && assigns.count(ev.reg))) return false;
    for (size_t q = 0; q < body.kids.size(); ++q) {
      const FNode& s = body.kids[q];
      if (s.op != Op::Assign) return false;
      if (s.reg == rl.k) {
        const FNode& v = s.kids[0];
        if (v.op != Op::Binary || v.fast != Fast::add || v.kids[0].op != Op::Var ||
            v.kids[0].reg != rl.k || v.kids[1].op != Op::Const ||
            v.kids[1].constant.k != Reg::PyInt ||
            !step_of(cond.fast, v.kids[1].constant.i))
          return false;
        rl.step = v.kids[1].constant.i;
        rl.inc_at = q;
        rl.inc = &v;
        break;
      }
      if (s.kids[0].op == Op::Var && s.kids[0].reg == rl.k && assigns[s.reg] == 1)
        rl.ivar[s.reg] = q;
    }
    if (!rl.inc) return false;
    for (const auto& [r, c] : assigns) rl.assigned.insert(r);
    rebound_in(body, rl.rebound);
    return true;
  }

  // The coefficient of the counter in index expression `n` (-1, 0, 1), or 2
  // when `n` is not the counter plus or minus what the loop leaves alone.
  int affine(const FNode& n, const RangeLoop& rl, size_t at, std::vector<const FNode*>& ops) {
    switch (n.op) {
      case Op::Const:
        return n.constant.k == Reg::PyInt ? 0 : 2;
      case Op::Var: {
        if (n.reg == rl.k) return 1;
        auto iv = rl.ivar.find(n.reg);
        if (iv != rl.ivar.end()) return iv->second < at ? 1 : 2;
        return int_reg(n.reg) && !rl.assigned.count(n.reg) ? 0 : 2;
      }
      case Op::Binary: {
        if ((n.fast != Fast::add && n.fast != Fast::sub) || n.kids.size() != 2) return 2;
        const int a = affine(n.kids[0], rl, at, ops);
        const int c = affine(n.kids[1], rl, at, ops);
        if (a == 2 || c == 2) return 2;
        const int r = n.fast == Fast::add ? a + c : a - c;
        if (r < -1 || r > 1) return 2;
        ops.push_back(&n);
        return r;
      }
      default:
        return 2;
    }
  }

  void collect(const FNode& n, const RangeLoop& rl, size_t at, std::vector<Hoisted>& hs,
               std::set<const FNode*>& pr) {
    if ((n.op == Op::GetItem || n.op == Op::SetItem) && arr_var(n.kids[0]) &&
        !rl.rebound.count(n.kids[0].reg)) {
      const int r = n.kids[0].reg;
      const ArrT& e = atype[r];
      const size_t first = n.op == Op::GetItem ? 1 : 2;
      const size_t nidx = n.kids.size() - first;
      if (e.indexable && static_cast<size_t>(e.nd) == nidx && nidx > 0 &&
          (n.op == Op::GetItem || e.writable)) {
        Hoisted h{&n, r, first, at > rl.inc_at, {}};
        std::vector<const FNode*> ops;
        for (size_t k = 0; k < nidx; ++k) {
          const int c = affine(n.kids[first + k], rl, at, ops);
          if (c == 2) break;
          h.coef.push_back(c);
        }
        if (h.coef.size() == nidx) {
          hs.push_back(h);
          pr.insert(&n);
          pr.insert(ops.begin(), ops.end());
        }
      }
    }
    for (const FNode& k : n.kids) collect(k, rl, at, hs, pr);
  }

  // Index expression `n` (affine) with the counter at `t`; `bad` collects
  // overflows and variables not defined.
  llvm::Value* affine_at(const FNode& n, const RangeLoop& rl, bool after_inc, llvm::Value* t,
                         llvm::Value*& bad) {
    auto ovf = [&](llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y) {
      llvm::Value* r = b.CreateBinaryIntrinsic(id, x, y);
      bad = b.CreateOr(bad, b.CreateExtractValue(r, 1));
      return b.CreateExtractValue(r, 0);
    };
    switch (n.op) {
      case Op::Const:
        return b.getInt64(static_cast<uint64_t>(n.constant.i));
      case Op::Var:
        if (n.reg == rl.k)
          return after_inc ? ovf(llvm::Intrinsic::sadd_with_overflow, t, b.getInt64(rl.step)) : t;
        if (rl.ivar.count(n.reg)) return t;
        if (maybe_undef[n.reg]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[n.reg])));
        return b.CreateLoad(i64, val[n.reg]);
      default: {
        llvm::Value* x = affine_at(n.kids[0], rl, after_inc, t, bad);
        llvm::Value* y = affine_at(n.kids[1], rl, after_inc, t, bad);
        return ovf(n.fast == Fast::add ? llvm::Intrinsic::sadd_with_overflow
                                       : llvm::Intrinsic::ssub_with_overflow,
                   x, y);
      }
    }
  }

  // A range's end LLVM knows: a constant, or a register assigned only
  // constants (its value at the loop is one of them, before the optimiser
  // runs it is a load).
  bool const_end(const RangeLoop& rl) const {
    return rl.end->op == Op::Const || const_only[rl.end->reg];
  }

  llvm::Value* end_value(const RangeLoop& rl, llvm::Value*& bad) {
    if (rl.end->op == Op::Const) return b.getInt64(static_cast<uint64_t>(rl.end->constant.i));
    const int r = rl.end->reg;
    if (maybe_undef[r]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[r])));
    return b.CreateLoad(i64, val[r]);
  }

  // Before a range loop: true when it turns at least once and every hoisted
  // access is in range at its first and last turns (so at all of them: the
  // indices are monotonic in the counter). Sets k0 and e0.
  llvm::Value* range_ok(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value*& k0,
                        llvm::Value*& e0) {
    llvm::Value* bad = b.getFalse();
    if (maybe_undef[rl.k]) bad = b.CreateOr(bad, b.CreateNot(b.CreateLoad(i1, def[rl.k])));
    k0 = b.CreateLoad(i64, val[rl.k]);
    e0 = end_value(rl, bad);
    llvm::Value* turns_once = rl.step > 0 ? b.CreateICmpSLT(k0, e0) : b.CreateICmpSGT(k0, e0);
    llvm::Value* last = last_turn(rl, k0, e0);
    llvm::Value* ok = b.CreateAnd(turns_once, b.CreateNot(bad));
    if (rl.step > 1) {  // k + step after the last turn (at most e0 - 1 + step) fits
      ok = b.CreateAnd(ok, b.CreateICmpSLE(e0, b.getInt64(INT64_MAX - (rl.step - 1))));
    } else if (rl.step < -1) {
      ok = b.CreateAnd(ok, b.CreateICmpSGE(e0, b.getInt64(INT64_MIN - (rl.step + 1))));
    }
    for (const Hoisted& h : hs) {
      for (size_t d = 0; d < h.coef.size(); ++d) {
        llvm::Value* bad_d = b.getFalse();
        const FNode& ix = h.n->kids[h.first + d];
        llvm::Value* lo = affine_at(ix, rl, h.after_inc, k0, bad_d);
        llvm::Value* hi = affine_at(ix, rl, h.after_inc, last, bad_d);
        llvm::Value* ext = ashape(h.arr, d);
        ok = b.CreateAnd(ok, b.CreateNot(bad_d));
        ok = b.CreateAnd(ok, b.CreateAnd(b.CreateICmpULT(lo, ext), b.CreateICmpULT(hi, ext)));
      }
    }
    return ok;
  }

  // The old bytes of every element the proven writes of a range loop will
  // write (all turns), to the log, before the loop: no logging inside it.
  // An array written by a range loop is copied whole (once per call) when
  // it has at most 4 elements per turn of the loop; else the elements it
  // will write are logged.
  void prelog(const RangeLoop& rl, const std::vector<Hoisted>& hs, llvm::Value* k0,
              llvm::Value* e0) {
    llvm::Value* turns_n = turn_count(rl, k0, e0);
    for (const Hoisted& h : hs) {
      if (h.n->op != Op::SetItem) continue;
      llvm::Value*& flag = snapped[h.arr];
      if (!flag) {
        llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
        flag = e.CreateAlloca(i1);
        e.CreateStore(e.getFalse(), flag);
      }
      llvm::Value* elements = b.getInt64(1);
      for (int d = 0; d < atype[h.arr].nd; ++d)
        elements = b.CreateMul(elements, ashape(h.arr, d));
      llvm::BasicBlock* copy = llvm::BasicBlock::Create(ctx, "copy", fn);
      llvm::BasicBlock* log = llvm::BasicBlock::Create(ctx, "prelog", fn);
      llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "logged", fn);
      llvm::BasicBlock* test = llvm::BasicBlock::Create(ctx, "small", fn);
      b.CreateCondBr(b.CreateOr(b.CreateLoad(i1, flag), fresh_of(h.arr)), next, test);
      b.SetInsertPoint(test);
      b.CreateCondBr(b.CreateICmpULE(elements, b.CreateMul(turns_n, b.getInt64(4))), copy, log);
      b.SetInsertPoint(copy);
      auto* st = llvm::FunctionType::get(i8p, {i8p, i64, i64}, false);
      llvm::Value* n_at = b.CreateLoad(i64, undo_n);
      b.CreateStore(b.CreateCall(st, fptr(reinterpret_cast<void*>(&native_snapshot), st),
                                 {cptr, n_at, apay(h.arr)}),
                    undo_ptr);
      b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
      b.CreateStore(b.CreateAdd(n_at, b.getInt64(1)), undo_n);
      b.CreateStore(b.getTrue(), flag);
      b.CreateBr(next);
      b.SetInsertPoint(log);
      llvm::Value* bad = b.getFalse();  // already checked by range_ok
      llvm::Value* off = b.getInt64(0);
      llvm::Value* step = b.getInt64(0);
      for (size_t d = 0; d < h.coef.size(); ++d) {
        llvm::Value* i0 = affine_at(h.n->kids[h.first + d], rl, h.after_inc, k0, bad);
        off = b.CreateAdd(off, b.CreateMul(i0, astride(h.arr, d)));
        if (h.coef[d] != 0)
          step = b.CreateAdd(step, b.CreateMul(astride(h.arr, d), b.getInt64(h.coef[d] * rl.step)));
      }
      const unsigned size = dtype_size(atype[h.arr].dt);
      llvm::Value* first =
          b.CreateInBoundsGEP(i8, abase(h.arr), b.CreateMul(off, b.getInt64(size)));
      auto* ft = llvm::FunctionType::get(i8p, {i8p, i64, i8p, i64, i64, i64}, false);
      llvm::Value* n_now = b.CreateLoad(i64, undo_n);
      llvm::Value* np = b.CreateCall(
          ft, fptr(reinterpret_cast<void*>(&native_log_range), ft),
          {cptr, n_now, first, b.CreateMul(step, b.getInt64(size)), turns_n, b.getInt64(size)});
      b.CreateStore(np, undo_ptr);
      b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
      b.CreateStore(b.CreateAdd(n_now, b.getInt64(1)), undo_n);
      b.CreateBr(next);
      b.SetInsertPoint(next);
    }
  }

  // The end of this chunk of a range loop's turns: at most `room` more.
  llvm::Value* chunk_limit(const RangeLoop& rl, llvm::Value* k, llvm::Value* e0, llvm::Value* room) {
    llvm::Value* left = rl.step > 0 ? b.CreateSub(e0, k) : b.CreateSub(k, e0);
    llvm::Value* cut = rl.step > 0 ? b.CreateAdd(k, room) : b.CreateSub(k, room);
    return b.CreateSelect(b.CreateICmpUGT(left, room), cut, e0);
  }
  llvm::Value* before(const RangeLoop& rl, llvm::Value* k, llvm::Value* lim) {
    return rl.step > 0 ? b.CreateICmpSLT(k, lim) : b.CreateICmpSGT(k, lim);
  }

  // The registers, counters and the loop's value back to the context, each
  // as `get` gives it (now, or as at the start of the turn).
  using Getter = std::function<llvm::Value*(llvm::Value*, llvm::Type*)>;
  void store_state(const Getter& get) {
    const size_t nr = regs.size();
    llvm::Value* cp = ctx_ptr(offsetof(NativeCtx, counts));
    for (size_t r = 0; r < nr; ++r) {
      if (slot_base[r] && kind[r] == Reg::Arr && rows.count(static_cast<int>(r))) {
        store_row(static_cast<int>(r), get);
        continue;
      }
      if (slot_base[r] && kind[r] == Reg::Arr) {  // an array register that may change
        llvm::Value* d = get(def[r], i1);
        b.CreateStore(b.CreateSelect(d, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef)),
                      field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
        b.CreateStore(get(slot_pay[r], i64),
                      field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
        b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
        continue;
      }
      if (kind[r] == Reg::Obj && val[r]) {
        store_obj(r, get(def[r], i1), get(val[r], i64));
        b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
        continue;
      }
      if (!is_scalar(kind[r])) continue;
      llvm::Value* kp = field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8);
      llvm::Value* d = get(def[r], i1);
      CV cv{kind[r], get(val[r], type_of(kind[r]))};
      if (dyn[r]) cv.s = get(strong[r], i1);
      b.CreateStore(b.CreateSelect(d, kind_of(cv), b.getInt8(Reg::Undef)), kp);
      b.CreateStore(to_payload(cv), field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
      b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
    }
    for (auto& [slot, a] : counts) {
      llvm::Value* p = field(cp, static_cast<int64_t>(slot) * 8, i64);
      b.CreateStore(b.CreateAdd(b.CreateLoad(i64, p), get(a, i64)), p);
    }
    b.CreateStore(get(last_k, i8), field(cptr, offsetof(NativeCtx, last), i8));
    b.CreateStore(get(last_p, i64), field(cptr, offsetof(NativeCtx, last) + 8, i64));
    b.CreateStore(b.CreateLoad(i64, undo_n), field(cptr, offsetof(NativeCtx, undo_n), i64));
  }

  // Row register r to the context's registers: its entry, made now
  // (native_row_view) when it has none yet; Undef when it holds no row or
  // the entry cannot be made.
  void store_row(int r, const Getter& get) {
    const RowOf& row = rows.at(r);
    llvm::Value* d = get(def[r], i1);
    llvm::Value* pay = get(slot_pay[r], i64);
    llvm::Value* off = row_off.count(r) ? get(row_off[r], i64) : b.getInt64(0);
    llvm::BasicBlock* from = b.GetInsertBlock();
    llvm::BasicBlock* make = llvm::BasicBlock::Create(ctx, "row_entry", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "row_stored", fn);
    b.CreateCondBr(b.CreateAnd(d, b.CreateICmpSLT(pay, b.getInt64(0))), make, done);
    b.SetInsertPoint(make);
    auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64, i64}, false);
    llvm::Value* made =
        b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_row_view), ft),
                     {cptr, apay(row.from), off, b.getInt64(static_cast<int64_t>(row.nidx))});
    b.CreateBr(done);
    b.SetInsertPoint(done);
    llvm::PHINode* entry = b.CreatePHI(i64, 2);
    entry->addIncoming(pay, from);
    entry->addIncoming(made, make);
    llvm::Value* held = b.CreateAnd(d, b.CreateICmpSGE(entry, b.getInt64(0)));
    b.CreateStore(b.CreateSelect(held, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef)),
                  field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
    b.CreateStore(entry, field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
    b.CreateStore(get(asg[r], i8), b.CreateConstInBoundsGEP1_64(i8, asgp, r));
  }

  // Object register r ({Obj, index}, or Undef) to the context's registers.
  void store_obj(size_t r, llvm::Value* d, llvm::Value* index) {
    b.CreateStore(b.CreateSelect(d, b.getInt8(Reg::Obj), b.getInt8(Reg::Undef)),
                  field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
    b.CreateStore(b.CreateAnd(index, b.getInt64(0xffffffff)),
                  field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
  }

  // The state at the start of a turn, block `at` (loads that -O3 turns into
  // the values live there), for a bail block; made once the turn's code is
  // emitted (the registers it assigns first have their allocas then).
  std::map<llvm::Value*, llvm::Value*> snapshot(llvm::BasicBlock* at) {
    auto ip = b.saveIP();
    b.SetInsertPoint(&*at->getFirstInsertionPt());
    std::map<llvm::Value*, llvm::Value*> at_start;
    auto snap = [&](llvm::Value* a, llvm::Type* t) {
      if (a && !at_start.count(a)) at_start[a] = b.CreateLoad(t, a);
    };
    for (size_t r = 0; r < regs.size(); ++r) {
      if (slot_base[r] && kind[r] == Reg::Arr) {
        snap(def[r], i1);
        snap(slot_pay[r], i64);
        snap(asg[r], i8);
        if (row_off.count(static_cast<int>(r))) snap(row_off[static_cast<int>(r)], i64);
        continue;
      }
      if (kind[r] == Reg::Obj && val[r]) {
        snap(def[r], i1);
        snap(val[r], i64);
        snap(asg[r], i8);
        continue;
      }
      if (!is_scalar(kind[r])) continue;
      snap(def[r], i1);
      snap(val[r], type_of(kind[r]));
      if (dyn[r]) snap(strong[r], i1);
      snap(asg[r], i8);
    }
    for (auto& [slot, a] : counts) snap(a, i64);
    snap(last_k, i8);
    snap(last_p, i64);
    b.restoreIP(ip);
    return at_start;
  }

  // The turns of a versioned range loop, in chunks: at `chunk`, Ctrl-C and
  // the turn limit (to `checkpoint`), then turns while the counter is before
  // the chunk's end, each emitted by `turn` (called once, in the turn's
  // block), then the next chunk, or
  // `done` at e0. Returns the turn's block.
  llvm::BasicBlock* chunked_turns(const RangeLoop& rl, llvm::Value* e0, llvm::BasicBlock* chunk,
                                  llvm::BasicBlock* done, llvm::BasicBlock* checkpoint,
                                  llvm::BasicBlock* interrupted, llvm::Value* max_turns,
                                  llvm::Value* turns,
                                  const std::function<void()>& turn) {
    llvm::BasicBlock* fhead = llvm::BasicBlock::Create(ctx, "thead", fn);
    llvm::BasicBlock* fbody = llvm::BasicBlock::Create(ctx, "tbody", fn);
    llvm::BasicBlock* fend = llvm::BasicBlock::Create(ctx, "tchunk_end", fn);
    llvm::BasicBlock* ffin = llvm::BasicBlock::Create(ctx, "tfin", fn);
    b.SetInsertPoint(chunk);
    interrupt_check(interrupted);
    llvm::Value* t = b.CreateLoad(i64, turns);
    llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "tgo", fn);
    b.CreateCondBr(b.CreateICmpSGE(t, max_turns), checkpoint, go, unlikely());
    b.SetInsertPoint(go);
    llvm::Value* lim = chunk_limit(rl, b.CreateLoad(i64, val[rl.k]), e0, b.CreateSub(max_turns, t));
    b.CreateBr(fhead);
    b.SetInsertPoint(fhead);
    b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), lim), fbody, fend);
    b.SetInsertPoint(fbody);
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, turns), b.getInt64(1)), turns);
    count(rl.cond->counter);
    // With loops inside, Ctrl-C on each turn too: their chunks of at most
    // 65,536 turns do not check it (range_chunks).
    if (rl.loops_in) interrupt_check(interrupted);
    loops.push_back({fhead, done, nullptr, nullptr});
    turn();
    loops.pop_back();
    b.CreateBr(fhead);
    b.SetInsertPoint(fend);
    b.CreateCondBr(before(rl, b.CreateLoad(i64, val[rl.k]), e0), chunk, ffin);
    b.SetInsertPoint(ffin);
    count(rl.cond->counter);
    b.CreateBr(done);
    return fbody;
  }

  // The body's accesses the range loop `rl` proves (hs, pr) and the check
  // of them before it (true: the unchecked version may run), its counter's
  // increment then without overflow check.
  llvm::Value* hoist(const RangeLoop& rl, std::vector<Hoisted>& hs, std::set<const FNode*>& pr,
                     llvm::Value*& k0, llvm::Value*& e0) {
    // k + 1 right after k < end holds cannot overflow; k + step in the
    // version range_ok admits (end far enough from int64's end) neither.
    if (rl.step == 1 || rl.step == -1)
      no_overflow.insert(rl.inc);
    else
      pr.insert(rl.inc);
    for (size_t q = 0; q < loop_body.kids.size(); ++q) collect(loop_body.kids[q], rl, q, hs, pr);
    return range_ok(rl, hs, k0, e0);
  }

  // Registers that may be assigned another array (rebinds): those assigned
  // an allocation or a variable (see below), found until nothing changes.
  void find_rebinds() {
    rebinds.assign(regs.size(), false);
    std::vector<const FNode*> asg_nodes;
    std::function<void(const FNode&)> walk = [&](const FNode& n) {
      if (n.op == Op::Assign) asg_nodes.push_back(&n);
      if (alloc_name(n)) makes_arrays = true;
      for (const FNode& k : n.kids) walk(k);
    };
    walk(loop_cond);
    walk(loop_body);
    for (bool more = true; more;) {
      more = false;
      for (const FNode* a : asg_nodes) {
        const int r = a->reg;
        const FNode& v = a->kids[0];
        const Reg::Kind k0 = regs[r].k;
        if (rebinds[r] || (k0 != Reg::Arr && k0 != Reg::Undef)) continue;
        // A variable of the loop's frames assigned a variable (u_prev = u,
        // swaps); a local of a function called inline only when that
        // variable's array changes too (its parameters otherwise hold the
        // caller's fixed arrays, whose accesses stay hoisted).
        const bool local = static_cast<size_t>(r) < im.vars.size() && im.vars[r].depth < 0;
        const FNode& src = is_iterate(v) && iterates_array(v) ? v.kids[0] : v;
        const bool from_var = src.op == Op::Var && (rebinds[src.reg] || !local);
        if (alloc_name(v) || from_var) rebinds[r] = more = true;
      }
    }
  }

  // Lists in the loop: made or appended to (their sweep at each turn's
  // start), or a variable holding one (or another object) when it began.
  void find_lists() {
    std::vector<const FNode*> asg;
    std::function<void(const FNode&)> walk = [&](const FNode& n) {
      if (n.op == Op::NewList || (is_iterate(n) && !iterates_array(n)))
        lists = makes_arrays = true;
      if (n.op == Op::Append) lists = true;
      if (n.op == Op::NewDict) lists = makes_arrays = true;
      if (n.op == Op::Assign) asg.push_back(&n);
      for (const FNode& k : n.kids) walk(k);
    };
    walk(loop_cond);
    walk(loop_body);
    find_iterate_aliases();
    find_fixed_lists();
    item_kind.assign(regs.size(), -1);
    table_kind.assign(regs.size(), -1);
    for (size_t r = 0; r < regs.size(); ++r) {
      if (regs[r].k != Reg::Obj) continue;
      lists = true;
      const auto o = static_cast<size_t>(regs[r].a);
      if (o < objects.size()) table_kind[r] = native_table_kind(objects[o]);
      Reg first;
      if (o < objects.size() && objects[o].is_list() && !objects[o].as_list().empty() &&
          FastLoop::Impl::scalar_of(objects[o].as_list()[0], first))
        item_kind[r] = first.k;
    }
    find_dicts(asg);
    // Through `ys = xs` and `_it = iterate(xs)`, then from the variables
    // items are assigned to, until nothing changes.
    for (bool more = true; more;) {
      more = false;
      for (const FNode* a : asg) {
        const FNode& v = a->kids[0];
        const FNode* src = v.op == Op::Var ? &v : is_iterate(v) ? &v.kids[0] : nullptr;
        if (src && src->op == Op::Var && item_kind[a->reg] < 0 && item_kind[src->reg] >= 0) {
          item_kind[a->reg] = item_kind[src->reg];
          more = true;
        }
        if (v.op == Op::GetItem && v.kids.size() == 2 && v.kids[0].op == Op::Var &&
            item_kind[v.kids[0].reg] < 0 && is_scalar(regs[a->reg].k)) {
          item_kind[v.kids[0].reg] = regs[a->reg].k;
          more = true;
        }
      }
    }
  }
  void find_fixed_lists() {
    table_plain.assign(regs.size(), true);
    std::function<void(const FNode&)> uses = [&](const FNode& n) {
      for (size_t k = 0; k < n.kids.size(); ++k) {
        const FNode& c = n.kids[k];
        if (c.op == Op::Var) {
          const bool container = k == 0 && (n.op == Op::GetItem || n.op == Op::SetItem);
          const bool len = n.op == Op::Call && n.spec && n.spec->name == "len";
          if (!container && !len) table_plain[c.reg] = false;
        }
        uses(c);
      }
    };
    uses(loop_cond);
    uses(loop_body);
    std::function<void(const FNode&)> assigns = [&](const FNode& n) {
      // t = setitem(t, ...) only; an append to it: not a table.
      if (n.op == Op::Append) table_plain[n.reg] = false;
      if (n.op == Op::Assign &&
          !(n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
            n.kids[0].kids[0].reg == n.reg))
        table_plain[n.reg] = false;
      for (const FNode& k : n.kids) assigns(k);
    };
    assigns(loop_cond);
    assigns(loop_body);
    list_fixed.assign(regs.size(), true);
    std::function<void(const FNode&)> walk = [&](const FNode& n) {
      if (n.op == Op::Assign || n.op == Op::Append) list_fixed[n.reg] = false;
      if (n.op == Op::SetItem && !n.kids.empty() && n.kids[0].op == Op::Var)
        list_fixed[n.kids[0].reg] = false;
      for (const FNode& k : n.kids) walk(k);
    };
    walk(loop_cond);
    walk(loop_body);
  }
  void find_iterate_aliases() {
    no_held.assign(regs.size(), false);
    std::vector<int> reads(regs.size(), 0), assigns(regs.size(), 0);
    std::function<void(const FNode&)> tally = [&](const FNode& n) {
      if (n.op == Op::Var) ++reads[n.reg];
      if (n.op == Op::Assign || n.op == Op::Append) ++assigns[n.reg];
      for (const FNode& k : n.kids) tally(k);
    };
    tally(loop_cond);
    tally(loop_body);
    std::function<void(const FNode&)> walk = [&](const FNode& blk) {
      for (const FNode& k : blk.kids) walk(k);
      if (blk.op != Op::Block) return;
      for (size_t i = 0; i < blk.kids.size(); ++i) {
        const FNode& a = blk.kids[i];
        if (a.op != Op::Assign || !is_iterate(a.kids[0]) || a.kids[0].kids[0].op != Op::Var)
          continue;
        const int it = a.reg, xs = a.kids[0].kids[0].reg;
        size_t w = i + 1;
        while (w < blk.kids.size() && blk.kids[w].op != Op::While) ++w;
        if (w == blk.kids.size() || assigns[it] != 1 || it == xs) continue;
        std::vector<int> in_reads(regs.size(), 0), in_assigns(regs.size(), 0);
        std::function<void(const FNode&)> local = [&](const FNode& n) {
          if (n.op == Op::Var) ++in_reads[n.reg];
          if (n.op == Op::Assign || n.op == Op::Append) ++in_assigns[n.reg];
          for (const FNode& k : n.kids) local(k);
        };
        for (size_t q = i + 1; q <= w; ++q) local(blk.kids[q]);
        if (in_reads[it] != reads[it] || in_assigns[xs] != 0) continue;
        iterate_alias.insert(&a.kids[0]);
        no_held[it] = true;
      }
    };
    walk(loop_cond);
    walk(loop_body);
  }
  // `iterate(x)` of a variable holding an array when the loop starts (its
  // value is the array itself).
  bool iterates_array(const FNode& n) const {
    const FNode& x = n.kids[0];
    return x.op == Op::Var && regs[static_cast<size_t>(x.reg)].k == Reg::Arr;
  }
  static bool is_iterate(const FNode& n) {
    return n.op == Op::Call && n.spec && n.spec->name == "iterate" && n.kids.size() == 1;
  }

  // Registers every assignment of which is an int constant (a range's
  // hidden end in `range(3)`): LLVM sees their value.
  void find_const_only() {
    const_only.assign(regs.size(), false);
    std::vector<bool> other(regs.size(), false);
    std::function<void(const FNode&)> walk = [&](const FNode& n) {
      if (n.op == Op::Assign) {
        const bool c = n.kids[0].op == Op::Const && n.kids[0].constant.k == Reg::PyInt;
        (c ? const_only : other)[n.reg] = true;
      }
      for (const FNode& k : n.kids) walk(k);
    };
    walk(loop_cond);
    walk(loop_body);
    for (size_t r = 0; r < regs.size(); ++r) const_only[r] = const_only[r] && !other[r];
  }

  // The array registers `n` assigns another array (not x = setitem(x, ...)).
  void rebound_in(const FNode& n, std::set<int>& out) const {
    if (n.op == Op::Assign && rebinds[n.reg] &&
        !(n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
          n.kids[0].kids[0].reg == n.reg))
      out.insert(n.reg);
    for (const FNode& k : n.kids) rebound_in(k, out);
  }

  // At a turn's start, after arrays were made: the array registers to the
  // context and the arrays no register (nor the checkpoint, nor the loop's
  // value) refers to any more released (native_sweep).
  void sweep_point() {
    llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx, "sweep", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "swept", fn);
    b.CreateCondBr(b.CreateLoad(i1, made_any), go, next, unlikely());
    b.SetInsertPoint(go);
    sweeps.push_back(go);
    for (size_t r = 0; r < regs.size(); ++r) {
      if (!slot_base[r]) continue;
      llvm::Value* holds = b.CreateLoad(i1, def[r]);
      if (rows.count(static_cast<int>(r)))  // a row not made an entry holds none
        holds = b.CreateAnd(holds, b.CreateICmpSGE(b.CreateLoad(i64, slot_pay[r]), b.getInt64(0)));
      llvm::Value* k = b.CreateSelect(holds, b.getInt8(Reg::Arr), b.getInt8(Reg::Undef));
      b.CreateStore(k, field(regp, static_cast<int64_t>(r * sizeof(Reg)), i8));
      b.CreateStore(b.CreateLoad(i64, slot_pay[r]),
                    field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64));
    }
    b.CreateStore(b.CreateLoad(i8, last_k), field(cptr, offsetof(NativeCtx, last), i8));
    b.CreateStore(b.CreateLoad(i64, last_p), field(cptr, offsetof(NativeCtx, last) + 8, i64));
    auto* ft = llvm::FunctionType::get(b.getVoidTy(), {i8p}, false);
    b.CreateCall(ft, fptr(reinterpret_cast<void*>(&native_sweep), ft), {cptr});
    b.CreateStore(b.getFalse(), made_any);
    b.CreateBr(next);
    b.SetInsertPoint(next);
  }

  // The body's value as the loop's value so far.
  void body_turn() {
    if (makes_arrays) sweep_point();
    CV v = eval_any(loop_body);
    b.CreateStore(kind_of(v), last_k);
    b.CreateStore(to_payload(v), last_p);
  }

  // The loop itself a range loop without loops inside: its turns as one
  // loop with the accesses checked before it, each turn's writes undone
  // from registers on a bail; the general turns (`top`) when the check
  // fails. Ends at a checkpoint after max_turns turns, as they do.
  void top_range(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                 llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                 llvm::Value* max_turns, llvm::Value* turns) {
    std::vector<Hoisted> hs;
    std::set<const FNode*> pr;
    llvm::Value *k0, *e0;
    llvm::Value* ok = hoist(rl, hs, pr, k0, e0);
    llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "tchunk", fn);
    llvm::BasicBlock* fbail = llvm::BasicBlock::Create(ctx, "tbail", fn);
    b.CreateCondBr(ok, chunk, top);
    std::vector<Site> sv;
    llvm::BasicBlock* fbody =
        chunked_turns(rl, e0, chunk, done, checkpoint, interrupted, max_turns, turns,
                      [&] {
                        // The draws before the turn (a bail rewinds the stream
                        // there), kept only if the body draws.
                        auto* at = llvm::cast<llvm::Instruction>(
                            b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, draws), i64)));
                        auto* keep = b.CreateStore(
                            at, field(cptr, offsetof(NativeCtx, draws_at_turn), i64));
                        uniform_draws = false;
                        llvm::BasicBlock* saved_bail = bail;
                        bail = fbail;
                        proven = &pr;
                        sites = &sv;
                        body_turn();
                        proven = nullptr;
                        sites = nullptr;
                        bail = saved_bail;
                        if (!uniform_draws) {
                          keep->eraseFromParent();
                          at->eraseFromParent();
                        }
                      });
    // A bail: this turn's writes undone, newest first, then the state as at
    // its start. A site not written this turn points at a scratch slot.
    std::map<llvm::Value*, llvm::Value*> at_start = snapshot(fbody);
    if (!sv.empty()) {
      llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      llvm::Value* scratch = e.CreateBitCast(e.CreateAlloca(i64), i8p);
      auto ip = b.saveIP();
      b.SetInsertPoint(&*fbody->getFirstInsertionPt());
      for (const Site& st : sv) b.CreateStore(scratch, st.addr);
      b.restoreIP(ip);
    }
    b.SetInsertPoint(fbail);
    for (auto it = sv.rbegin(); it != sv.rend(); ++it) {
      llvm::Value* p = b.CreateBitCast(b.CreateLoad(i8p, it->addr), it->t->getPointerTo());
      b.CreateStore(b.CreateLoad(it->t, it->old), p);
    }
    store_state([&](llvm::Value* a, llvm::Type*) { return at_start.at(a); });
    b.CreateRet(b.getInt32(kNativeBail));
  }

  // The loop itself a range loop with loops inside: the accesses of the
  // whole nest checked before it (range_ok, nest_ok), its turns without
  // those checks; a bail goes back to the call's start (the writes logged
  // before the loop, or none when nothing in it can bail). The general
  // turns (`top`) when the check fails. Ends at a checkpoint after
  // max_turns turns.
  void top_nest(const RangeLoop& rl, llvm::BasicBlock* top, llvm::BasicBlock* done,
                llvm::BasicBlock* checkpoint, llvm::BasicBlock* interrupted,
                llvm::Value* max_turns, llvm::Value* turns) {
    std::vector<Hoisted> hs;
    std::set<const FNode*> pr;
    llvm::Value *k0, *e0;
    llvm::Value* ok = hoist(rl, hs, pr, k0, e0);
    std::set<int> copy;
    ok = b.CreateAnd(ok, nest_ok(loop_body, rl, k0, e0, pr, copy));
    llvm::BasicBlock* pre = llvm::BasicBlock::Create(ctx, "tnest", fn);
    llvm::BasicBlock* chunk = llvm::BasicBlock::Create(ctx, "tchunk", fn);
    b.CreateCondBr(ok, pre, top);
    const int64_t bails_before = bails;
    chunked_turns(rl, e0, chunk, done, checkpoint, interrupted, max_turns, turns,
                  [&] {
                    proven = &pr;
                    prelogged = true;
                    body_turn();
                    proven = nullptr;
                    prelogged = false;
                  });
    const bool can_bail = bails > bails_before;
    // Before the loop: the old bytes of what it writes unchecked, unless no
    // turn can bail (then nothing needs undoing: Ctrl-C and checkpoints
    // keep the state as it is).
    b.SetInsertPoint(pre);
    if (can_bail) {
      // An array the nest only writes (never reads, passes or assigns), in
      // memory no other array of the loop shares, needs no undo: the turns
      // redone after a bail write the same values into it again.
      std::set<int> only_written;
      for (const Hoisted& h : hs)
        if (h.n->op == Op::SetItem) only_written.insert(h.arr);
      for (int r : copy) only_written.insert(r);
      std::vector<int> reads(regs.size(), 0);
      count_reads(loop_cond, reads);
      count_reads(loop_body, reads);
      for (auto it = only_written.begin(); it != only_written.end();)
        it = reads[*it] ? only_written.erase(it) : std::next(it);
      std::vector<Hoisted> logged;
      for (const Hoisted& h : hs)
        if (!only_written.count(h.arr)) logged.push_back(h);
      prelog(rl, logged, k0, e0);
      for (int r : copy)
        if (!only_written.count(r)) snapshot_once(r);
      for (int r : only_written) {
        llvm::BasicBlock* undo = llvm::BasicBlock::Create(ctx, "shared_memory", fn);
        llvm::BasicBlock* own = llvm::BasicBlock::Create(ctx, "own_memory", fn);
        llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "undo_planned", fn);
        b.CreateCondBr(shares_memory(r), undo, own, unlikely());
        b.SetInsertPoint(undo);
        std::vector<Hoisted> mine;
        for (const Hoisted& h : hs)
          if (h.arr == r) mine.push_back(h);
        prelog(rl, mine, k0, e0);
        if (copy.count(r)) snapshot_once(r);
        b.CreateBr(next);
        // Its own memory: marked as copied, so the loops inside log nothing of it.
        b.SetInsertPoint(own);
        llvm::Value*& flag = snapped[r];
        if (!flag) {
          llvm::IRBuilder<> e(&fn->getEntryBlock(), fn->getEntryBlock().begin());
          flag = e.CreateAlloca(i1);
          e.CreateStore(e.getFalse(), flag);
        }
        b.CreateStore(b.getTrue(), flag);
        b.CreateBr(next);
        b.SetInsertPoint(next);
      }
    }
    b.CreateBr(chunk);
  }

  // Per register, the uses of its variable other than as the array of an
  // element write assigned back to it (x = setitem(x, v, i) counts none).
  void count_reads(const FNode& n, std::vector<int>& reads) {
    if (n.op == Op::Var) {
      ++reads[n.reg];
      return;
    }
    if (n.op == Op::Assign && n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
        n.kids[0].kids[0].reg == n.reg) {
      for (size_t q = 1; q < n.kids[0].kids.size(); ++q) count_reads(n.kids[0].kids[q], reads);
      return;
    }
    for (const FNode& k : n.kids) count_reads(k, reads);
  }

  // True when the elements of array register `r` may share memory with
  // those of another array register (by the bytes they span).
  llvm::Value* shares_memory(int r) {
    auto span = [&](int q, llvm::Value*& lo, llvm::Value*& hi) {
      const ArrT& e = atype[q];
      llvm::Value* neg = b.getInt64(0);
      llvm::Value* pos = b.getInt64(0);
      for (int d = 0; d < e.nd; ++d) {
        llvm::Value* reach = b.CreateMul(b.CreateSub(ashape(q, d), b.getInt64(1)), astride(q, d));
        neg = b.CreateAdd(neg, b.CreateSelect(b.CreateICmpSLT(reach, b.getInt64(0)), reach, b.getInt64(0)));
        pos = b.CreateAdd(pos, b.CreateSelect(b.CreateICmpSGT(reach, b.getInt64(0)), reach, b.getInt64(0)));
      }
      const int64_t size = dtype_size(e.dt);
      llvm::Value* base = b.CreatePtrToInt(abase(q), i64);
      lo = b.CreateAdd(base, b.CreateMul(neg, b.getInt64(size)));
      hi = b.CreateAdd(base, b.CreateMul(b.CreateAdd(pos, b.getInt64(1)), b.getInt64(size)));
    };
    if (!atype[r].indexable) return b.getTrue();
    llvm::Value *lo, *hi;
    span(r, lo, hi);
    llvm::Value* shared = b.getFalse();
    for (size_t q = 0; q < regs.size(); ++q) {
      if (static_cast<int>(q) == r || kind[q] != Reg::Arr || regs[q].k != Reg::Arr) continue;
      if (!atype[q].indexable) return b.getTrue();
      llvm::Value *qlo, *qhi;
      span(static_cast<int>(q), qlo, qhi);
      shared = b.CreateOr(shared, b.CreateAnd(b.CreateICmpULT(lo, qhi), b.CreateICmpULT(qlo, hi)));
    }
    return shared;
  }

  // ---- the function
  void build(const std::string& name) {
    auto* ft = llvm::FunctionType::get(i32, {i8p}, false);
    fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, mod);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr("target-cpu", jit().cpu);
    fn->addFnAttr("target-features", jit().features);
    llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
    b.SetInsertPoint(entry);
    cptr = fn->getArg(0);
    const size_t nr = regs.size();
    kind.resize(nr);
    maybe_undef.resize(nr);
    val.assign(nr, nullptr);
    def.assign(nr, nullptr);
    asg.assign(nr, nullptr);
    arr_base.assign(nr, nullptr);
    arr_shape.assign(nr, {});
    arr_stride.assign(nr, {});
    arr_payload.assign(nr, nullptr);
    atype.assign(nr, ArrT{});
    slot_base.assign(nr, nullptr);
    slot_pay.assign(nr, nullptr);
    slot_fresh.assign(nr, nullptr);
    slot_shape.assign(nr, {});
    slot_stride.assign(nr, {});
    find_rebinds();
    for (const auto& [r, row] : rows) rebinds[static_cast<size_t>(r)] = true;
    find_const_only();
    find_lists();
    strong.assign(nr, nullptr);
    regp = ctx_ptr(offsetof(NativeCtx, regs));
    asgp = ctx_ptr(offsetof(NativeCtx, assigned));
    llvm::Value* arrp = ctx_ptr(offsetof(NativeCtx, arrays));
    for (size_t r = 0; r < nr; ++r) {
      const Reg::Kind k = regs[r].k;
      kind[r] = k;
      maybe_undef[r] = k == Reg::Undef;
      def[r] = b.CreateAlloca(i1);
      b.CreateStore(b.getInt1(k != Reg::Undef), def[r]);
      asg[r] = b.CreateAlloca(i8);
      b.CreateStore(b.CreateLoad(i8, b.CreateConstInBoundsGEP1_64(i8, asgp, r)), asg[r]);
      llvm::Value* payload = field(regp, static_cast<int64_t>(r * sizeof(Reg) + 8), i64);
      if (dyn[r]) {
        strong[r] = b.CreateAlloca(i1);
        b.CreateStore(b.getInt1(is_strong(k)), strong[r]);
        kind[r] = py_kind(k);
      }
      if (is_scalar(k)) {
        val[r] = b.CreateAlloca(type_of(k));
        llvm::Value* x = b.CreateLoad(i64, payload);
        if (is_bool(k))
          x = b.CreateICmpNE(b.CreateTrunc(x, i8), b.getInt8(0));
        else if (is_float(k))
          x = b.CreateBitCast(x, f64);
        b.CreateStore(x, val[r]);
      } else if (k == Reg::Arr) {
        arr_payload[r] = b.CreateLoad(i64, payload);
        const ArrEntry& ae = arrays[regs[r].a];
        atype[r] = ArrT{ae.dt, ae.nd, ae.writable, ae.indexable, native_unit_last(ae)};
        const int64_t at = static_cast<int64_t>(r * sizeof(NativeArray));
        arr_base[r] = b.CreateLoad(i8p, field(arrp, at + offsetof(NativeArray, base), i8p));
        for (int d = 0; d < kMaxDims; ++d) {
          arr_shape[r].push_back(b.CreateLoad(
              i64, field(arrp, at + offsetof(NativeArray, shape) + 8 * d, i64)));
          arr_stride[r].push_back(b.CreateLoad(
              i64, field(arrp, at + offsetof(NativeArray, strides) + 8 * d, i64)));
        }
        if (rebinds[r]) ensure_slots(static_cast<int>(r));
      } else if (k == Reg::Obj && lists) {
        val[r] = b.CreateAlloca(i64);
        b.CreateStore(b.CreateSExt(b.CreateTrunc(b.CreateLoad(i64, payload), i32), i64), val[r]);
      } else if (k != Reg::Undef) {
        kind[r] = Reg::Obj;  // Nil, objects: only if the loop never reads or writes it
      }
    }
    // Row variables unassigned at the start: their kind and slots already
    // (a read before the turn's assignment, on a turn after the first,
    // reads the row of the turn before; on the first, a bail).
    for (const auto& [r, row] : rows) {
      const auto ru = static_cast<size_t>(r);
      if (kind[ru] != Reg::Undef || kind[static_cast<size_t>(row.fixed)] != Reg::Arr) continue;
      const ArrT& xt = atype[static_cast<size_t>(row.fixed)];
      if (!xt.indexable || xt.nd <= static_cast<int>(row.nidx)) continue;
      kind[ru] = Reg::Arr;
      atype[ru] = ArrT{xt.dt, xt.nd - static_cast<int>(row.nidx), xt.writable, true, xt.unit_last};
      ensure_slots(r);
    }
    if (lists) {
      held = b.CreateAlloca(i32, b.getInt32(static_cast<uint32_t>(std::max<size_t>(nr, 1))));
      for (size_t r = 0; r < nr; ++r) {
        b.CreateStore(val[r] && kind[r] == Reg::Obj && !no_held[r]
                          ? b.CreateTrunc(b.CreateLoad(i64, val[r]), i32)
                          : b.getInt32(-1),
                      b.CreateConstInBoundsGEP1_64(i32, held, r));
      }
    }
    undo_ptr = b.CreateAlloca(i8p);
    undo_n = b.CreateAlloca(i64);
    undo_cap = b.CreateAlloca(i64);
    b.CreateStore(ctx_ptr(offsetof(NativeCtx, undo)), undo_ptr);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_n), i64)), undo_n);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, undo_cap), i64)), undo_cap);
    llvm::Value* max_turns = b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, max_turns), i64));
    llvm::Value* max_undo = b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, max_undo), i64));
    last_k = b.CreateAlloca(i8);
    last_p = b.CreateAlloca(i64);
    b.CreateStore(b.CreateLoad(i8, field(cptr, offsetof(NativeCtx, last), i8)), last_k);
    b.CreateStore(b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, last) + 8, i64)), last_p);
    llvm::Value* turns = b.CreateAlloca(i64);
    b.CreateStore(b.getInt64(0), turns);
    made_any = b.CreateAlloca(i1);
    b.CreateStore(b.getFalse(), made_any);

    bail = llvm::BasicBlock::Create(ctx, "bail", fn);
    exit = llvm::BasicBlock::Create(ctx, "exit", fn);
    llvm::BasicBlock* top = llvm::BasicBlock::Create(ctx, "top", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, "done", fn);
    llvm::BasicBlock* checkpoint = llvm::BasicBlock::Create(ctx, "checkpoint", fn);
    interrupted = llvm::BasicBlock::Create(ctx, "interrupted", fn);
    RangeLoop rl;
    // A range loop with lists goes through the general turns (a bail there
    // goes back to the call's start, where the interpreter's roll-back
    // takes back the lists' changes; top_range's goes to the turn's start).
    if (range_loop(loop_cond, loop_body, rl) && (rl.loops_in || !lists)) {
      if (rl.loops_in)
        top_nest(rl, top, done, checkpoint, interrupted, max_turns, turns);
      else
        top_range(rl, top, done, checkpoint, interrupted, max_turns, turns);
    } else {
      b.CreateBr(top);
    }

    // Between two turns: Ctrl-C, the limits, then the condition.
    b.SetInsertPoint(top);
    interrupt_check(interrupted);
    llvm::Value* t = b.CreateLoad(i64, turns);
    llvm::BasicBlock* turn = llvm::BasicBlock::Create(ctx, "turn", fn);
    llvm::Value* logged = b.CreateAdd(
        b.CreateLoad(i64, undo_n),
        b.CreateLoad(i64, field(cptr, offsetof(NativeCtx, range_units), i64)));
    b.CreateCondBr(b.CreateOr(b.CreateICmpSGE(t, max_turns), b.CreateICmpSGE(logged, max_undo)),
                   checkpoint, turn, unlikely());
    b.SetInsertPoint(turn);
    b.CreateStore(b.CreateAdd(t, b.getInt64(1)), turns);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx, "outer_body", fn);
    b.CreateCondBr(cond(loop_cond), body, done);
    b.SetInsertPoint(body);
    loops.push_back({top, done, nullptr, nullptr});
    body_turn();
    loops.pop_back();
    b.CreateBr(top);

    auto exit_with = [&](llvm::BasicBlock* bb, int code) {
      b.SetInsertPoint(bb);
      b.CreateBr(exit);
      exit_code->addIncoming(b.getInt32(code), bb);
    };
    b.SetInsertPoint(exit);
    exit_code = b.CreatePHI(i32, 3);
    exit_with(done, kNativeDone);
    exit_with(checkpoint, kNativeCheckpoint);
    exit_with(interrupted, kNativeInterrupt);
    // The registers, counters and the loop's value back, as they are.
    b.SetInsertPoint(exit);
    store_state([&](llvm::Value* a, llvm::Type* t) { return b.CreateLoad(t, a); });
    b.CreateRet(exit_code);
    // A bail: back to the call's start (the caller undoes the log; the
    // registers in the context were not written).
    b.SetInsertPoint(bail);
    b.CreateStore(b.CreateLoad(i64, undo_n), field(cptr, offsetof(NativeCtx, undo_n), i64));
    b.CreateRet(b.getInt32(kNativeBailCall));
    // The object registers to the context before each sweep (their kinds
    // are all known now).
    for (llvm::BasicBlock* go : sweeps) {
      b.SetInsertPoint(&*go->getFirstInsertionPt());
      for (size_t r = 0; r < regs.size(); ++r)
        if (kind[r] == Reg::Obj && val[r])
          store_obj(r, b.CreateLoad(i1, def[r]), b.CreateLoad(i64, val[r]));
    }
    for (const HeldCheck& c : held_checks) {
      b.SetInsertPoint(c.block);
      llvm::Value* other = b.getFalse();
      llvm::Value* o = b.CreateTrunc(c.obj, i32);
      for (size_t k = 0; k < regs.size(); ++k)
        if (static_cast<int>(k) != c.r && kind[k] == Reg::Obj && val[k] && !no_held[k])
          other = b.CreateOr(other, b.CreateICmpEQ(b.CreateLoad(i32, b.CreateConstInBoundsGEP1_64(
                                                                      i32, held, k)),
                                                   o));
      b.CreateStore(other, c.other);
      b.CreateBr(c.next);
    }
    // Blocks left without a terminator after a break: unreachable.
    for (llvm::BasicBlock& bb : *fn) {
      if (!bb.getTerminator()) {
        b.SetInsertPoint(&bb);
        b.CreateUnreachable();
      }
    }
    merge_counters();
  }
};

}  // namespace

void* const* native_helpers() { return kHelpers; }

namespace {

// `A[i][j]` and `A[i][j] = v` (`A = setitem(A, setitem(getitem(A, i), v, j),
// i)` as translated) of a variable A holding an array of two or more dims
// when the loop starts, rewritten as `A[i, j]` and `A = setitem(A, v, i,
// j)`: one element access instead of a row made and indexed. The same for
// an integer index as NumPy's: A[i] of a 2-D array is a view of row i, whose
// element j is A[i, j] and whose writes are A's. The compiled code keeps A's
// dims (another array in A is a bail), and its element accesses take only
// int indices (any other kind: no native code), so the rewrite holds
// wherever the code runs. The interpreter keeps the loop as written.
class ChainFlattener {
 public:
  using FNode = FastLoop::Impl::FNode;
  ChainFlattener(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays)
      : regs_(regs), arrays_(arrays) {}

  // True when `n` has a chain to flatten (then rewrite a copy of it).
  bool has_chain(const FNode& n) const {
    if (n.op == Op::GetItem && n.kids.size() >= 2 && n.kids[0].op == Op::GetItem) return true;
    if (n.op == Op::SetItem && n.kids.size() >= 3 && n.kids[1].op == Op::SetItem) return true;
    for (const FNode& k : n.kids)
      if (has_chain(k)) return true;
    return false;
  }

  // The row variables of a loop (after rewrite): `r = x[i...]`, a
  // statement (not the body's last: its value would be the loop's) and r's
  // only assignment, of an array variable x of more dims than indices that
  // the loop assigns only by element writes, with r read only as the array
  // of element reads. r's element reads are then x's elements, with no
  // array made per turn.
  std::map<int, RowOf> rows(const FNode& cond, const FNode& body) const {
    Tally t;
    tally(cond, false, t);
    if (body.op == Op::Block) {
      for (size_t k = 0; k < body.kids.size(); ++k)
        tally(body.kids[k], k + 1 < body.kids.size(), t);
    } else {
      tally(body, false, t);
    }
    std::map<int, RowOf> out;
    for (const auto& [r, a] : t.candidate) {
      const FNode& g = a->kids[0];
      const int x = g.kids[0].reg;
      const size_t nidx = g.kids.size() - 1;
      // x is fixed for the loop, or only ever the same fixed array (`for
      // row in t` nested in another loop: its hidden `it = iterate(t)`).
      int fixed = x;
      if (t.rebound.count(x)) {
        auto al = t.alias_of.find(x);
        if (al == t.alias_of.end() || al->second < 0 || t.rebound.count(al->second)) continue;
        fixed = al->second;
      }
      const Reg::Kind k0 = regs_[static_cast<size_t>(r)].k;
      if (x == r || fixed == r || t.assigns[r] != 1 || t.reads[r] != t.array_reads[r] ||
          dims_of_reg(fixed) <= static_cast<int>(nidx) || (k0 != Reg::Undef && k0 != Reg::Arr))
        continue;
      out[r] = RowOf{x, nidx, fixed};
    }
    return out;
  }

  void rewrite(FNode& n) const {
    for (FNode& k : n.kids) rewrite(k);
    if (n.op == Op::GetItem && n.kids.size() >= 2 && n.kids[0].op == Op::GetItem) {
      // (A[p...])[q...] with A[p...] a view: A[p..., q...]
      const FNode& inner = n.kids[0];
      const int nd = dims_of(inner);
      if (nd < 0 || static_cast<int>(inner.kids.size() - 1) >= nd) return;
      std::vector<FNode> kids(inner.kids.begin(), inner.kids.end());
      kids.insert(kids.end(), n.kids.begin() + 1, n.kids.end());
      merge_counts(n, inner);
      n.kids = std::move(kids);
      return;
    }
    if (n.op == Op::SetItem && n.kids.size() >= 3 && n.kids[1].op == Op::SetItem &&
        n.kids[1].kids.size() >= 3) {
      // T = setitem(T, setitem(T[p...], v, q...), p...): T[p..., q...] = v,
      // T being A or a view A[r...] of it.
      const FNode& target = n.kids[0];
      const FNode& write = n.kids[1];
      const FNode& view = write.kids[0];
      const int nd = target.op == Op::Var ? dims_of_var(target) : dims_of(target);
      if (nd < 0 || view.op != Op::GetItem) return;
      const size_t pre = target.op == Op::Var ? 0 : target.kids.size() - 1;
      const size_t np = n.kids.size() - 2;
      if (view.kids.size() != 1 + pre + np || static_cast<int>(pre + np) >= nd) return;
      const FNode& root = target.op == Op::Var ? target : target.kids[0];
      if (!same(view.kids[0], root)) return;
      for (size_t k = 0; k < pre; ++k)
        if (!same(view.kids[1 + k], target.kids[1 + k])) return;
      for (size_t k = 0; k < np; ++k)
        if (!same(view.kids[1 + pre + k], n.kids[2 + k])) return;
      merge_counts(n, write);
      merge_counts(n, view);
      std::vector<FNode> kids;
      kids.push_back(target);
      kids.push_back(write.kids[1]);
      kids.insert(kids.end(), n.kids.begin() + 2, n.kids.end());
      kids.insert(kids.end(), write.kids.begin() + 2, write.kids.end());
      n.kids = std::move(kids);
    }
  }

 private:
  static void merge_counts(FNode& into, const FNode& from) {
    if (from.counter >= 0) into.also_count.push_back(from.counter);
    into.also_count.insert(into.also_count.end(), from.also_count.begin(), from.also_count.end());
  }

  struct Tally {
    std::map<int, int> assigns, reads, array_reads;
    std::map<int, const FNode*> candidate;
    std::set<int> rebound;  // assigned other than by x = setitem(x, ...)
    // A variable whose every assignment is `x = t` or `x = iterate(t)` of
    // one variable t: t (-1: assigned anything else or from several).
    std::map<int, int> alias_of;
  };
  // `statement`: n is a statement of a block whose value is not the loop's.
  void tally(const FNode& n, bool statement, Tally& t) const {
    if (n.op == Op::Assign) {
      ++t.assigns[n.reg];
      const FNode& v = n.kids[0];
      if (!(v.op == Op::SetItem && v.kids[0].op == Op::Var && v.kids[0].reg == n.reg)) {
        t.rebound.insert(n.reg);
        const bool iter = v.op == Op::Call && v.spec && v.spec->name == "iterate" &&
                          v.kids.size() == 1;
        const FNode& src = iter ? v.kids[0] : v;
        const int from = src.op == Op::Var ? src.reg : -1;
        auto [it, fresh] = t.alias_of.emplace(n.reg, from);
        if (!fresh && it->second != from) it->second = -1;
      }
      if (statement && v.op == Op::GetItem && v.kids.size() >= 2 && v.kids[0].op == Op::Var)
        t.candidate[n.reg] = &n;
    }
    if (n.op == Op::Var) ++t.reads[n.reg];
    if (n.op == Op::GetItem && !n.kids.empty() && n.kids[0].op == Op::Var)
      ++t.array_reads[n.kids[0].reg];
    const bool block = n.op == Op::Block;
    for (const FNode& k : n.kids) tally(k, block, t);
  }

  // The dims of the array variable `v` holds when the loop starts (-1: none).
  int dims_of_var(const FNode& v) const { return v.op == Op::Var ? dims_of_reg(v.reg) : -1; }
  int dims_of_reg(int reg) const {
    if (reg < 0 || static_cast<size_t>(reg) >= regs_.size()) return -1;
    const Reg& r = regs_[static_cast<size_t>(reg)];
    if (r.k != Reg::Arr || r.a < 0 || static_cast<size_t>(r.a) >= arrays_.size()) return -1;
    return arrays_[static_cast<size_t>(r.a)].nd;
  }
  // Of A[p...]'s root A, when `g` is that (already flattened) getitem.
  int dims_of(const FNode& g) const {
    if (g.op != Op::GetItem || g.kids.empty()) return -1;
    return dims_of_var(g.kids[0]);
  }
  static bool same(const FNode& a, const FNode& b) { return FastLoop::Impl::same_pure(a, b); }
  const std::vector<Reg>& regs_;
  const std::vector<ArrEntry>& arrays_;
};

}  // namespace

std::unique_ptr<NativeCode> native_compile(const FastLoop::Impl& im, const std::vector<Reg>& regs,
                                           const std::vector<ArrEntry>& arrays,
                                           const std::vector<Value>& objects, std::string& why) {
  Jit& j = jit();
  if (!j.lljit) {
    why = "the JIT could not start: " + j.error;
    return nullptr;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto fresh = [&] {
    auto m = std::make_unique<llvm::Module>("tessera_loop", *context);
    m->setDataLayout(j.lljit->getDataLayout());
    m->setTargetTriple(j.lljit->getTargetTriple().str());
    return m;
  };
  auto mod = fresh();
  std::vector<bool> dyn(regs.size(), false);
  const FastLoop::Impl::FNode* cond = &im.cond;
  const FastLoop::Impl::FNode* body = &im.body;
  FastLoop::Impl::FNode flat_cond, flat_body;
  ChainFlattener chains(regs, arrays);
  if (chains.has_chain(im.cond) || chains.has_chain(im.body)) {
    flat_cond = im.cond;
    flat_body = im.body;
    chains.rewrite(flat_cond);
    chains.rewrite(flat_body);
    cond = &flat_cond;
    body = &flat_body;
  }
  const std::map<int, RowOf> rows = chains.rows(*cond, *body);
  for (;;) {
    try {
      Gen g(im, *cond, *body, regs, arrays, objects, *context, *mod, dyn, rows);
      g.build("tessera_loop");
      break;
    } catch (const Refuse& r) {
      why = r.why;
      return nullptr;
    } catch (const Retry& r) {
      if (dyn[r.reg]) {
        why = "internal error: a variable's kind could not be settled";
        return nullptr;
      }
      dyn[r.reg] = true;
      mod = fresh();
    }
  }
  std::string verify;
  llvm::raw_string_ostream os(verify);
  if (llvm::verifyModule(*mod, &os)) {
    why = "internal error: invalid code generated: " + os.str();
    return nullptr;
  }
  // The key: the code before optimisation, and what makes the same code
  // give other machine code.
  std::string ir;
  {
    llvm::raw_string_ostream ios(ir);
    mod->print(ios, nullptr);
  }
  const char* cpu_key = std::getenv("TESSERA_CACHE_CPU");  // tests: another CPU's entry
  const std::string salt = std::string("tessera ") + TESSERA_VERSION_STRING + " llvm " +
                           LLVM_VERSION_STRING + " format 2 helpers " +
                           std::to_string(std::size(kHelpers)) + " cpu " +
                           (cpu_key ? std::string(cpu_key) : j.cpu + " " + j.features) + "\n";
  const Digest key = sha1(salt, ir);
  const std::string name = "tessera_loop_" + hex(key);
  auto code = std::make_unique<NativeCode>();
  code->signature = native_signature(regs, arrays);
  {
    std::lock_guard<std::mutex> lock(j.mu);
    auto it = j.loaded.find(name);
    if (it != j.loaded.end()) {  // the same code, compiled in this process already
      code->fn = it->second;
      code->from_cache = true;
      code->compile_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return code;
    }
  }
  const NativeCache cache(key);
  std::string note;
  std::string obj = cache.load(note);
  code->from_cache = !obj.empty();
  if (obj.empty()) {
    mod->getFunction("tessera_loop")->setName(name);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    // -O3 with both vectorisers (PassBuilder leaves SLP off unless asked).
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    pto.LoopInterleaving = true;
    pto.LoopUnrolling = true;
    llvm::PassBuilder pb(j.tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    const auto t_opt = std::chrono::steady_clock::now();
    mpm.run(*mod, mam);
    if (native_debug()) {  // where the first call's time goes
      auto ms = [](auto a, auto b) {
        return std::to_string(std::lround(std::chrono::duration<double, std::milli>(b - a).count()));
      };
      note += "; IR " + std::to_string(ir.size()) + " bytes, generated in " + ms(t0, t_opt) +
              " ms, optimised in " + ms(t_opt, std::chrono::steady_clock::now()) + " ms";
    }
    if (native_setting() == "ir") {
      llvm::errs() << "; tessera native loop " << im.where << " (cpu " << j.cpu << ")\n";
      mod->print(llvm::errs(), nullptr);
    }
    // Machine code: an object file, the cache's entry and what the JIT links.
    llvm::SmallVector<char, 0> buf;
    {
      std::lock_guard<std::mutex> lock(j.mu);
      llvm::raw_svector_ostream out(buf);
      llvm::legacy::PassManager pm;
      if (j.tm->addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_ObjectFile)) {
        why = "the target cannot emit an object file";
        return nullptr;
      }
      pm.run(*mod);
    }
    obj.assign(buf.data(), buf.size());
    cache.store(obj, note);
  }
  std::lock_guard<std::mutex> lock(j.mu);
  if (auto it = j.loaded.find(name); it != j.loaded.end()) {
    code->fn = it->second;
  } else {
    if (auto err = j.lljit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(obj, name))) {
      why = "the JIT refused the code: " + llvm::toString(std::move(err));
      return nullptr;
    }
    auto sym = j.lljit->lookup(name);
    if (!sym) {
      why = "the JIT did not find the code: " + llvm::toString(sym.takeError());
      return nullptr;
    }
    code->fn = reinterpret_cast<NativeFn>(sym->getAddress());
    j.loaded[name] = code->fn;
  }
  code->cache_note = note;
  code->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return code;
}

}  // namespace tessera
