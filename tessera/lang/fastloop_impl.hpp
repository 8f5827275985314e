// The fast path's registers, operations and compiled loop (FastLoop::Impl),
// shared by the register interpreter (fastloop*.cpp) and the native code
// (native*.cpp, the generator native_gen*.cpp). Private to those files.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/lang/fastloop.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

class CallNode;
class PrimitiveCallNode;
struct NativeCode;
struct NativeLog;
struct ParallelPlan;

namespace fl {

struct Reg {
  // Obj: any other value (a slice, a string, a list), held in State::objects,
  // passed to primitives as it is. NpF32 and NpI32: NumPy's float32 and
  // int32 scalars, held as the double (exactly) and the int64 (sign
  // extended) of their value, so that f and i read them as the wider kinds;
  // NpI8 ... NpU32 the other integer scalars narrower than int64 (int8,
  // uint8, int16, uint16, uint32), held as the int64 of their value too
  // (narrow_int_kind below: their widths and NumPy's promotion).
  enum Kind : uint8_t {
    Undef,
    Nil,
    PyBool,
    PyInt,
    PyFloat,
    NpBool,
    NpInt,
    NpFloat,
    NpF32,
    NpI32,
    NpI8,
    NpU8,
    NpI16,
    NpU16,
    NpU32,
    Arr,
    Obj
  };
  Kind k = Undef;
  union {
    bool b;
    int64_t i;
    double f;
    int32_t a;  // index into State::arrays (Arr) or State::objects (Obj)
  };
  Reg() : i(0) {}
  static Reg make(Kind k, int64_t i) {
    Reg r;
    r.k = k;
    r.i = i;
    return r;
  }
  static Reg real(Kind k, double f) {
    Reg r;
    r.k = k;
    r.f = f;
    return r;
  }
  static Reg boolean(Kind k, bool b) {
    Reg r;
    r.k = k;
    r.i = 0;
    r.b = b;
    return r;
  }
  bool strong() const { return k >= NpBool && k <= NpU32; }
  bool scalar() const { return k >= PyBool && k <= NpU32; }
  bool narrow() const { return k >= NpF32 && k <= NpU32; }
  // The payload is `i` (ints of any width) or `f` (floats of any width).
  bool int_payload() const { return k == PyInt || k == NpInt || (k >= NpI32 && k <= NpU32); }
  bool float_payload() const { return k == PyFloat || k == NpFloat || k == NpF32; }
};

// NumPy's integer scalars narrower than int64 (NpI32 ... NpU32): their
// dtype, width and sign; the register kind of an integer dtype (Undef for
// int64, uint64 and the rest); the value wrapped to the kind (NumPy's
// integer arithmetic wraps around); whether a Python int fits it (NEP 50:
// NumPy 2 raises OverflowError for one that does not); and the kind two of
// them promote to (np.promote_types; NpInt where it is int64).
inline bool narrow_int_kind(int k) { return k >= Reg::NpI32 && k <= Reg::NpU32; }
inline DType narrow_int_dtype(int k) {
  switch (k) {
    case Reg::NpI8: return DType::int8;
    case Reg::NpU8: return DType::uint8;
    case Reg::NpI16: return DType::int16;
    case Reg::NpU16: return DType::uint16;
    case Reg::NpU32: return DType::uint32;
    default: return DType::int32;
  }
}
inline int narrow_int_bits(int k) {
  return k == Reg::NpI8 || k == Reg::NpU8 ? 8 : k == Reg::NpI16 || k == Reg::NpU16 ? 16 : 32;
}
inline bool narrow_int_unsigned(int k) {
  return k == Reg::NpU8 || k == Reg::NpU16 || k == Reg::NpU32;
}
inline Reg::Kind int_kind_of(DType dt) {
  switch (dt) {
    case DType::int8: return Reg::NpI8;
    case DType::uint8: return Reg::NpU8;
    case DType::int16: return Reg::NpI16;
    case DType::uint16: return Reg::NpU16;
    case DType::int32: return Reg::NpI32;
    case DType::uint32: return Reg::NpU32;
    default: return Reg::Undef;
  }
}
inline int64_t narrow_int_wrap(int k, int64_t v) {
  switch (k) {
    case Reg::NpI8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case Reg::NpU8: return static_cast<uint8_t>(v);
    case Reg::NpI16: return static_cast<int16_t>(static_cast<uint16_t>(v));
    case Reg::NpU16: return static_cast<uint16_t>(v);
    case Reg::NpU32: return static_cast<uint32_t>(v);
    default: return static_cast<int32_t>(static_cast<uint32_t>(v));
  }
}
inline bool narrow_int_fits(int k, int64_t v) { return narrow_int_wrap(k, v) == v; }
// Element `off` of a buffer of integer dtype `dt` (int_kind_of(dt) not
// Undef) as its register.
inline Reg narrow_int_element(DType dt, const void* base, int64_t off) {
  switch (dt) {
    case DType::int8: return Reg::make(Reg::NpI8, static_cast<const int8_t*>(base)[off]);
    case DType::uint8: return Reg::make(Reg::NpU8, static_cast<const uint8_t*>(base)[off]);
    case DType::int16: return Reg::make(Reg::NpI16, static_cast<const int16_t*>(base)[off]);
    case DType::uint16: return Reg::make(Reg::NpU16, static_cast<const uint16_t*>(base)[off]);
    case DType::uint32: return Reg::make(Reg::NpU32, static_cast<const uint32_t*>(base)[off]);
    default: return Reg::make(Reg::NpI32, static_cast<const int32_t*>(base)[off]);
  }
}
inline Reg::Kind narrow_int_promote(int a, int b) {
  if (a == b) return static_cast<Reg::Kind>(a);
  const int ba = narrow_int_bits(a), bb = narrow_int_bits(b);
  const bool ua = narrow_int_unsigned(a), ub = narrow_int_unsigned(b);
  int bits;
  bool uns;
  if (ua == ub) {
    bits = std::max(ba, bb), uns = ua;
  } else {
    // A signed and an unsigned: the signed kind wide enough for both.
    const int ubits = ua ? ba : bb, sbits = ua ? bb : ba;
    bits = sbits > ubits ? sbits : 2 * ubits, uns = false;
  }
  if (bits > 32) return Reg::NpInt;
  if (bits == 8) return uns ? Reg::NpU8 : Reg::NpI8;
  if (bits == 16) return uns ? Reg::NpU16 : Reg::NpI16;
  return uns ? Reg::NpU32 : Reg::NpI32;
}

// Whether NumPy 2 stores the number `v` into an element of dtype `dt`
// without an OverflowError (check_scalar_store's rule, primitives/storage.cpp):
// Python's ints and floats (truncated) must fit an integer dtype; NumPy's
// scalars of another kind must fit a signed one (an unsigned one wraps them).
// NaN and infinity are left to the caller.
inline bool store_fits(const Reg& v, DType dt) {
  if (!is_integer(dt) || v.k == Reg::PyBool || v.k == Reg::NpBool) return true;
  if (v.k != Reg::PyInt && v.k != Reg::PyFloat) {
    if (!is_signed_integer(dt) || v.k == int_kind_of(dt)) return true;
    if (dt == DType::int64 && v.k == Reg::NpInt) return true;
  }
  const int bits = static_cast<int>(dtype_size(dt) * 8);
  const bool uns = !is_signed_integer(dt);
  if (v.int_payload()) {
    if (uns && v.i < 0) return false;
    if (bits == 64) return true;
    const int64_t lo = uns ? 0 : -(int64_t{1} << (bits - 1));
    const int64_t hi = uns ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
    return v.i >= lo && v.i <= hi;
  }
  if (!v.float_payload() || !std::isfinite(v.f)) return true;
  const double t = std::trunc(v.f);
  const double lo = uns ? 0.0 : -std::ldexp(1.0, bits - 1);
  const double end = std::ldexp(1.0, uns ? bits : bits - 1);
  return t >= lo && t < end;
}

// Thrown inside a turn for anything the fast path leaves to the general
// evaluation; caught where the turn began.
struct Bail {
  int line;  // where in this file (TESSERA_FAST_LOOPS=debug reports it)
};
#define BAIL \
  Bail { __LINE__ }

constexpr int kMaxDims = 4;
// An array is kept while a register, the checkpoint's registers or a loop's
// value refers to it, or an element write since the checkpoint went into it
// (a roll-back restores those); the others are released between turns
// (FastLoop::Impl::sweep), so a loop's results go back to the allocator's
// pool for the next turn. At most this many entries held at once, and this
// many bytes of buffers the loop allocated itself (views share their base's
// buffer and cost nothing).
constexpr size_t kMaxArrays = 1 << 16;
constexpr int64_t kMaxNewBytes = int64_t{64} << 20;

struct ArrEntry {
  Array array;
  char* base = nullptr;
  DType dt = DType::float64;
  int nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // elements
  bool writable = false;
  bool indexable = false;  // nd <= kMaxDims
  bool released = false;   // a free slot (State::free_arrays)
  uint32_t written = 0;    // the checkpoint (State::epoch) of its last logged element write
  int64_t own_bytes = 0;   // of a buffer the loop allocated (counted in State::new_bytes)
};

enum class Op : uint8_t {
  Const,
  Var,
  Assign,
  Block,
  If,
  While,
  Break,
  Continue,
  Logic,
  Binary,
  GetItem,
  SetItem,
  AsType,
  Call,
  Uniform,
  // A branch of an `if` outside the subset (a raise, a call of a function
  // with an early return): taking it leaves the loop to the general
  // evaluation, which redoes the turns since the last checkpoint.
  Bail,
  // A tuple display `(a, b)`: only while compiling; lower_tuples replaces
  // every one by registers of its items (fastloop_tuples.cpp).
  MakeTuple,
  // `[]`, `[a, b]`, `list()`: a new list, held as an object.
  NewList,
  // `{}`, `{k: v, ...}`: a new dict (kids: key, value, key, value, ...).
  NewDict,
  // xs = append(xs, v) (`xs.append(v)`): v appended to the list in `reg`
  // in place (a shared list copied first), logged for a roll-back.
  Append,
  // f(a, b) of a recursive jit function f (not inlined) on numbers: a
  // native function of its own (native_calls.hpp), `reg` the register of
  // the variable holding f, the kids its arguments. Anything it cannot
  // compute (an error, an overflow, another f) leaves the turn to the
  // general path.
  NativeCall
};

// Primitives on Python's values that the interpreter computes in place for
// the kinds it knows (fastloop_objects.cpp), else through the primitive.
enum class ObjOp : uint8_t { none, contains, get, not_, logical_not, unpack, str_find };

// Binary operations computed inline for two ints or two floats.
enum class Fast : int8_t { none = -1, add, sub, mul, div, lt, le, gt, ge, eq, ne, floordiv, mod };

}  // namespace fl

using fl::ArrEntry;
using fl::Bail;
using fl::Fast;
using fl::ObjOp;
using fl::kMaxArrays;
using fl::kMaxDims;
using fl::kMaxNewBytes;
using fl::Op;
using fl::Reg;
using fl::int_kind_of;
using fl::narrow_int_bits;
using fl::narrow_int_dtype;
using fl::narrow_int_element;
using fl::narrow_int_fits;
using fl::narrow_int_kind;
using fl::narrow_int_promote;
using fl::narrow_int_unsigned;
using fl::narrow_int_wrap;
using fl::store_fits;

// An array result of this many elements makes a loop go the general way
// (FastLoop::run).
constexpr int64_t kLargeResult = 4096;

struct FastLoop::Impl {
  struct State;
  struct FNode;
  // What evaluates a node: chosen once per node after compilation (link), by
  // its operation and, for arithmetic, by the primitive and the operands'
  // shapes, so that a turn goes from node to node through one indirect call
  // each instead of one large switch (whose frame and branches every
  // operation paid for).
  using Handler = Reg (*)(const Impl&, const FNode&, State&);
  struct FNode {
    Handler fn = nullptr;
    Op op = Op::Const;
    Reg constant;
    int reg = -1;
    bool is_and = false;
    // While: a loop of the body itself (not of a function called inline),
    // whose turns may release the arrays nothing refers to any more.
    bool sweeps = false;
    // While: nobody reads the loop's value (WhileNode::mark_value_unused):
    // it keeps none, as the general evaluation, so that its last turn's
    // array stays free to reuse (give()).
    bool value_unused = false;
    Fast fast = Fast::none;
    // Binary and Call: bit i set when operand i's array may be handed to the
    // primitive itself (its buffer reused for the result) if nothing else
    // refers to it: a temporary (an expression's result), or the variable
    // the node's value is assigned to (`x = x + y`). See give().
    uint8_t reuse = 0;
    DType cast_to = DType::float64;
    // AsType: np.int64(x), np.float64(x), np.bool_(x): NumPy's scalar even of a
    // Python number (astype's numpy_scalar), as np.float32(x) and np.int32(x) always are.
    bool numpy_scalar = false;
    const PrimitiveSpec* spec = nullptr;
    const PrimitiveCallNode* call = nullptr;
    int counter = -1;  // index into State::counts (primitives computed inline)
    int slot = -1;     // index into `counted` (Call nodes too, which compute() counts)
    // np.zeros((n, m), dtype="int64") and the like: kids[0..shape_items)
    // are the items of the shape's tuple (or list: shape_tuple false), built
    // when the call runs, and const_arg a constant operand after the kids
    // (the dtype's name); shape_items -1: kids are the operands.
    int shape_items = -1;
    bool shape_tuple = false;
    // SetItem: its value is assigned back to the variable it writes into
    // (`d[k] = v`), so a dict that variable alone holds may change in place.
    bool in_place = false;
    // Call: a primitive on objects computed in place (object_call).
    ObjOp obj_op = ObjOp::none;
    const Value* const_arg = nullptr;
    // Assign: the value a function called inline returns or falls off its
    // end with (compile_call); If: the choice between them. Native code,
    // which holds no None, bails where that value is None.
    bool returned = false;
    // GetItem: the real (1) or imaginary (2) part of an element of a
    // complex128 array (fastloop_complex.cpp), a NumPy float64.
    int8_t cpart = 0;
    std::vector<FNode> kids;
    // Native code only: the counters of the nodes a chained access was
    // flattened from (`A[i][j]`'s inner getitem), counted with this one's.
    std::vector<int> also_count;
  };
  // Nodes the passes after compilation build (fastloop_tuples.cpp,
  // fastloop_complex.cpp): a register's read, and its assignment.
  static FNode var_node(int reg) {
    FNode v;
    v.op = Op::Var;
    v.reg = reg;
    return v;
  }
  static FNode assign_node(int reg, FNode value) {
    FNode a;
    a.op = Op::Assign;
    a.reg = reg;
    a.kids.push_back(std::move(value));
    return a;
  }
  // A variable of the frame `depth` frames up from the loop's; a negative
  // depth is a local of a function called inline (its own register at
  // each call site, never read from or written to a frame).
  struct VarRef {
    int depth;
    size_t slot;
    // An item of a tuple variable or a tuple display's temporary
    // (fastloop_tuples.cpp): never read from or written to a frame itself.
    bool tuple_item = false;
  };
  // A call of a jit function compiled inline (its body's operations in the
  // loop's, its locals in registers of their own): the loop runs so only
  // while the variable called (`depth`, `slot`) still holds that function,
  // closing over the frame `env_depth` up from the loop's (-1: any frame,
  // for a function that reads nothing around it).
  struct Inlined {
    int depth;
    size_t slot;
    std::shared_ptr<const FunctionCode> code;
    int env_depth;
  };
  std::vector<Inlined> inlined;
  FNode cond, body;
  bool value_unused = false;  // of the loop itself (FNode::value_unused)
  std::vector<VarRef> vars;
  // By register: a variable nothing reads outside the loop (a local of the
  // loop's function that mark_loop_reads found read only inside it, or of a
  // function called inline), whose value after the loop nobody sees.
  std::vector<bool> loop_local;
  // The loop runs once in its frame (WhileNode::runs_once): its loop-local
  // variables are not stored back in the frame when it ends.
  bool runs_once = false;
  std::map<std::pair<int, size_t>, int> reg_of;
  // The primitive nodes computed inline, whose evaluations are counted in
  // State::counts and added to the nodes' counters when the run ends (the
  // general evaluation counts each one as it goes).
  std::vector<const Node*> counted;
  // Set when a run found the loop to be mostly array operations: later runs
  // go straight to the general path.
  mutable std::atomic<bool> prefer_general{false};
  // Native code (native.cpp), one per signature of register kinds it was
  // compiled for, and the signatures the generator refused.
  std::string where;  // the loop's file:line
  // For a trace's loop events (native_trace.cpp): the WhileNode, and `where`
  // interned once (the recorder keeps names for the life of the process).
  const void* node = nullptr;
  mutable std::atomic<const std::string*> trace_name{nullptr};
  // Loops inside: native code from the first turn (an outer turn on the
  // interpreter can be a long one).
  bool nested = false;
  // A prange loop (parallel_while): its plan for running the native code in
  // chunks on the workers (native_parallel.cpp), or null with the reason it
  // runs as range in `serial_why`. `names`: the variables' names by register.
  bool parallel = false;
  std::shared_ptr<const ParallelPlan> plan;
  std::string serial_why;
  std::vector<std::string> names;
  void name_reg(int r, const std::string& name);
  void plan_parallel();
  enum class Parallel { done, interrupted, serial };
  // From the state `st` (a checkpoint), the rest of the loop as chunks of
  // the native code `code` in parallel: done (`st` and `last` as after the
  // loop), interrupted (`st` untouched), or serial (nothing changed: the
  // caller runs the loop as range).
  Parallel run_parallel(const NativeCode& code, State& st, Reg& last) const;
  mutable std::mutex native_mu;
  mutable std::vector<std::unique_ptr<NativeCode>> native_codes;
  mutable std::vector<std::vector<uint8_t>> native_refused;
  // The code a run last found (one of native_codes, which are never
  // removed): a run with the same signature takes it without the lock.
  mutable std::atomic<const NativeCode*> native_recent{nullptr};

  struct State {
    std::vector<Reg> regs, saved;
    std::vector<uint8_t> assigned, saved_assigned;
    std::vector<uint64_t> counts, saved_counts;
    std::vector<ArrEntry> arrays;
    std::vector<int32_t> free_arrays;  // released slots of `arrays`, reused by to_reg
    std::vector<uint8_t> marks;        // sweep's scratch
    // The values of the loops running (the run's and inner loops'): arrays
    // they refer to are kept.
    std::vector<const Reg*> roots;
    int64_t made = 0;    // arrays made since the last sweep
    int64_t objects_made = 0;  // objects placed since the last sweep of objects
    uint32_t epoch = 1;  // the checkpoint's number
    std::vector<Value> objects;
    std::vector<int32_t> free_objects;  // released slots of `objects` (sweep)
    // The lists the loop's variables held when it began: each is also in
    // its variable's frame slot, which nothing reads until the loop writes
    // the variable back (native_lists.cpp writes their rows in place).
    std::vector<const void*> frame_lists;
    // Per register, the object it held when the loop began (-1: none), and
    // whether only native code has run the loop's turns (its helpers write
    // numbers into lists, nothing else): a register that still holds its
    // object then gives it back to its slot with no scan for closures.
    std::vector<int32_t> loaded_objects;
    bool numbers_written_only = true;
    // The check a partial native code's last kNativeNeedFull came from
    // (NativeCtx::need_site).
    int64_t need_site = 0;
    // Changes to lists and dicts held in `objects` since the checkpoint,
    // undone newest first by a roll-back: a list's length before its first
    // append or a dict's before its first write (`index`; the items added
    // since are cut off), the list or dict a shared one was copied from
    // (`index` -2, `old` the one before), or a dict item's value before a
    // write (`index` kDictItemUndo - its position, `old` that value).
    static constexpr int64_t kDictItemUndo = -3;
    struct ListUndo {
      int32_t obj;
      int64_t index;
      Value old;
    };
    std::vector<ListUndo> list_undo;
    // Lists whose whole value before an item write is in list_undo since the
    // checkpoint (by slot); both tables are emptied at each checkpoint.
    std::vector<int32_t> snapshot_lists;
    // By object slot: the checkpoint (epoch) it was placed in, and the last
    // one in which list_undo got an entry for it. A list placed since the
    // checkpoint is appended to without a log entry (a roll-back drops it:
    // no saved register refers to it); `logged_objects` lists the slots
    // list_undo refers to, once each, for the sweep.
    std::vector<uint32_t> object_epoch, object_logged;
    // By object slot: a string's bytes all ASCII (1), not (0), unknown (-1).
    std::vector<int8_t> object_ascii;
    // The one-character ASCII strings `s[i]` read, placed once (slot or -1):
    // a read places no object of its own (fastloop_objects.cpp).
    int32_t char_objects[128];
    std::vector<int32_t> char_slots;  // those placed
    State() { std::fill(std::begin(char_objects), std::end(char_objects), -1); }
    std::vector<int32_t> logged_objects;
    // Constants other than numbers (a slice `:`, a string) in `objects`,
    // placed on their first evaluation: the index by constant node. A
    // rollback drops the entries placed since its checkpoint.
    std::vector<std::pair<const FNode*, int32_t>> constant_objects;
    int64_t new_bytes = 0;  // of the buffers the loop allocated that are held now
    // The frame's variables are being read at a run's start: their arrays are
    // not the loop's own (no share of kMaxNewBytes, whatever their size).
    bool loading_frame = false;
    // Operations done here and ones handed to the primitives (arrays): a
    // loop of mostly array operations runs better on the general path.
    int64_t inline_ops = 0, general_ops = 0;
    // Primitive calls that made arrays of kLargeResult elements or more.
    int64_t large_results = 0;
    struct Undo {
      int32_t arr;     // element write: the entry written; -1 for a snapshot
      int64_t offset;  // bytes from the entry's base; a snapshot's index
      uint8_t old[16];
      uint8_t size;
    };
    std::vector<Undo> undo;
    // What an array-writing primitive (x += y on arrays, x[1:] = v, copyto)
    // wrote into, and its elements before: restored on a roll-back.
    std::vector<std::pair<Array, Array>> snapshots;
    int64_t snapshot_elements = 0;
    enum class Flow { normal, brk, cont } flow = Flow::normal;
    uint64_t draws = 0;  // random draws since the checkpoint
    uint64_t stream_at_checkpoint = 0;
  };

  // Variables of the loop's frames that hold tuples of fixed length: one
  // register per item (fastloop_tuples.cpp), read from the frame's tuple at
  // the start of a run and written back as a tuple.
  struct TupleVar {
    int reg;
    std::vector<int> items;
    // 0: a tuple; a complex number's two parts (fastloop_complex.cpp):
    // 1 Python's complex, 2 NumPy's complex128, 3 either by turns (the
    // parts' kinds say which).
    int cx = 0;
  };
  // What the complex lowering relied on of a variable of the loop's frames
  // (its kind when the loop was compiled), checked when a run starts; a
  // variable not assigned yet passes.
  struct CxGuard {
    enum What : uint8_t { none, python_number, numpy_scalar, array };
    int reg;
    uint8_t what;
    DType dt;  // array's
  };
  std::vector<CxGuard> cx_guards;
  std::vector<TupleVar> frame_tuples;
  std::vector<int> frame_tuple_of;  // by register: index into frame_tuples, or -1

  // ---- compilation
  // TESSERA_FAST_LOOPS=debug: say on stderr which loops stay general and why.
  static bool debug();
  // A primitive call of at most this many operands may be given its operands'
  // arrays (FNode::reuse).
  static constexpr size_t kMaxReuseKids = 4;
  // A primitive with no effect but its result (no writes, not asynchronous,
  // not a collective nor autodiff's): the fast path runs it, and it may take
  // over its operands' arrays (link).
  static bool pure_primitive(const PrimitiveSpec& spec);
  bool compile(const Node* n, FNode& out);
  // Replaces the tuples in `cond` and `body` (displays, variables holding
  // them, unpacking, constant indexing, calls returning them) by registers
  // of their items; false (said under TESSERA_FAST_LOOPS=debug) when a tuple
  // is used whole (given to a primitive, compared, indexed by a variable).
  bool lower_tuples();
  // Replaces complex numbers (complex(x, y), elements of complex128 arrays,
  // complex variables of the frames) by registers of their real and
  // imaginary parts and their operations by float ones, with CPython's and
  // NumPy's formulas (fastloop_complex.cpp). A loop it cannot lower keeps
  // them as objects (true either way).
  bool lower_complex();
  // The items of frame tuple `t` from the frame's value `v` (false: not a
  // tuple of that many numbers or arrays) and back.
  bool load_tuple(const TupleVar& t, const Value& v, State& st) const;
  Value tuple_value(const TupleVar& t, const State& st) const;
  // A branch of an `if`: compiled, or else an Op::Bail (always true).
  bool compile_branch(const Node* n, FNode& out);
  // A call of a jit function, inline (see Inlined); false when it is not
  // one the loop can hold (say why under TESSERA_FAST_LOOPS=debug).
  bool compile_call(const CallNode& c, FNode& out);
  // The register of variable (depth, slot) of the code being compiled: the
  // loop's, or that of the function inlined innermost.
  int var_reg(int depth, size_t slot);
  // While compiling: the frame the loop first runs in, and the calls being
  // inlined, innermost last (`site` numbers their locals' registers).
  struct Scope {
    int site;
    int env_depth;
    // A function with a `return` before its end: the registers of the value
    // returned and of "returned" (a bool), -1 otherwise. Its body runs as
    // one turn of a loop that a return leaves (compile_call); each of its
    // own loops holding a return is followed by "if returned: break".
    int ret_value = -1;
    int ret_done = -1;
  };
  const Frame* frame = nullptr;
  std::vector<Scope> scopes;
  // The functions being inlined (outermost first), and those of them found
  // to call themselves (directly or through others): a recursive function
  // is not inlined, even where its call is in a branch that would bail, so
  // that the general path runs it as a native function of its own.
  std::vector<const FunctionCode*> inlining, recursive;
  int sites = 0;
  int reg(int depth, size_t slot) {
    auto key = std::make_pair(depth, slot);
    auto it = reg_of.find(key);
    if (it != reg_of.end()) return it->second;
    int r = static_cast<int>(vars.size());
    vars.push_back({depth, slot});
    reg_of[key] = r;
    return r;
  }

  // Sets the handlers of `n` and of the nodes under it.
  static void link(FNode& n);

  // ---- execution
  Reg eval(const FNode& n, State& st) const { return n.fn(*this, n, st); }
  static Reg to_reg(const Value& v, State& st);
  // The same for a value given up: its array is moved into the entry.
  static Reg to_reg(Value&& v, State& st);
  // True when register value `r` is an array that only `owner` (a register,
  // or -1 for none: a temporary) refers to: no other register, checkpoint or
  // loop value, no element write logged since the checkpoint, and a buffer
  // no other Array shares.
  static bool dying(const Reg& r, int owner, const State& st);
  // Operand `i` of `n` for the primitive: the array moved out of its entry
  // (released) when the node may reuse it and it is dying, else a copy.
  static Value give(const FNode& n, size_t i, const Reg& r, State& st);
  // Frees entry `index` (its array already moved out or dropped).
  static void release(State& st, int32_t index);
  static Value to_value(const Reg& r, const State& st);
  // The register of a number (Python's or a NumPy scalar's kind), as to_reg
  // makes it; false for any other value (nothing placed).
  static bool scalar_of(const Value& v, Reg& out);
  static bool truthy(const Reg& r) {
    switch (r.k) {
      case Reg::PyBool:
      case Reg::NpBool:
        return r.b;
      case Reg::PyInt:
      case Reg::NpInt:
      case Reg::NpI32:
      case Reg::NpI8:
      case Reg::NpU8:
      case Reg::NpI16:
      case Reg::NpU16:
      case Reg::NpU32:
        return r.i != 0;
      case Reg::PyFloat:
      case Reg::NpFloat:
      case Reg::NpF32:
        return r.f != 0.0;
      default:
        throw BAIL;
    }
  }
  static Value py(const Reg& r) {
    switch (r.k) {
      case Reg::PyBool:
      case Reg::NpBool:
        return Value(r.b);
      case Reg::PyInt:
      case Reg::NpInt:
        return Value(r.i);
      case Reg::PyFloat:
      case Reg::NpFloat:
        return Value(r.f);
      default:
        throw BAIL;
    }
  }
  Reg binary(const FNode& n, const Reg& a, const Reg& b, State& st) const;
  // An operand a float32 or a NumPy integer scalar narrower than int64
  // (NumPy 2's promotion, NEP 50).
  __attribute__((noinline)) Reg binary_narrow(const FNode& n, const Reg& a, const Reg& b,
                                              State& st) const;
  // `x op y` (n.fast) of two ints held by kind k (narrow_int_kind: both of
  // them its values), NumPy's meaning: arithmetic wrapped around and
  // comparisons; false for what the general path does (by zero).
  static bool narrow_int_op(const FNode& n, Reg::Kind k, int64_t x, int64_t y, Reg& out);
  // Arrays and NumPy's 0-d bools: the primitive itself.
  __attribute__((noinline)) Reg binary_general(const FNode& n, const Reg& a, const Reg& b,
                                               State& st) const;
  __attribute__((noinline)) Reg loop(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg logic(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg rest(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg getitem(const FNode& n, State& st) const;
  Reg nested_getitem(const FNode& n, State& st) const;
  Reg getitem_of(const FNode& n, const Reg& x, State& st) const;
  __attribute__((noinline)) Reg getitem_general(const FNode& n, const Reg& x, const Reg* idx,
                                                size_t done, State& st) const;
  __attribute__((noinline)) Reg setitem(const FNode& n, State& st) const;
  // d[k] = v and xs[i] = v (`n` in place) on the dict or list in register
  // `x`: the general path's key rules, changed in place (a dict copied once
  // a checkpoint, a list's value before logged once a checkpoint).
  Reg new_dict(const FNode& n, State& st) const;
  static Value& own_list_item(int32_t slot, const Reg& k, State& st);
  static Dict& own_dict(int32_t slot, const Value& key, State& st);
  static Value dict_key(const Reg& k, const char* op, State& st);
  __attribute__((noinline)) Reg nested_setitem(const FNode& n, const Reg& x, State& st) const;
  static bool is_nested_write(const FNode& n);
  // The same expression read twice (variables, int constants, arithmetic).
  static bool same_pure(const FNode& a, const FNode& b);
  __attribute__((noinline)) Reg object_setitem(const FNode& n, const Reg& x, const Reg& v,
                                               State& st) const;
  // True when every index operand of setitem `n` is an int expression that
  // is a variable or a constant (an element write; checked without
  // evaluating anything else).
  static bool element_index(const FNode& n, const State& st, const Reg& x);
  __attribute__((noinline)) Reg astype(const FNode& n, State& st) const;
  // ---- Python's values in place (fastloop_objects.cpp)
  // The truth of a string, list, tuple or dict in an object register, as
  // Python's (and the general path's) `if`.
  static bool object_truthy(const Reg& r, const State& st);
  // A Call of an ObjOp primitive: `k in d`, `d.get(k, v)`, `not x`, `s.find(t)` computed
  // here for dicts and strings held as objects and for numbers; other kinds
  // through the primitive, with the operands already evaluated.
  __attribute__((noinline)) Reg object_call(const FNode& n, State& st) const;
  // a == b and a != b of two strings held as objects (n.fast eq or ne);
  // false when either is something else.
  static bool object_compare(const FNode& n, const Reg& a, const Reg& b, const State& st,
                             Reg& out);
  // s[i] of an ASCII string held as an object, into `out` (false: not one,
  // or i is not an int); the character's object placed once per run.
  static bool string_item(const Reg& s, const Reg& i, State& st, Reg& out);
  // d[k] of a dict held as an object with scalar or string keys `idx`
  // (several: a tuple key), into `out`; false when it is not one.
  static bool dict_item(const Reg& d, const Reg* idx, size_t nidx, State& st, Reg& out);
  // A dict key from registers (several: a tuple), as the general path makes
  // it; false for a kind of key the interpreter does not build.
  static bool key_of(const Reg* idx, size_t nidx, const State& st, Value& key);
  __attribute__((noinline)) Reg call(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg new_list(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg append(const FNode& n, State& st) const;
  __attribute__((noinline)) Reg call_native(const FNode& n, State& st) const;
  // A slot of st.objects for `v` (a released one, else a new one).
  static int32_t place_object(Value v, State& st);
  // The item `v` appended in place to the list in object slot `obj` (a list
  // held elsewhere too copied first, the one before kept for a roll-back),
  // the append logged: Op::Append's work, also native code's
  // (native_list_append). False when the slot holds no list.
  static bool list_push(State& st, int32_t obj, Value v);
  // The primitive of `n` on `vals` by the general code (compute()), after a
  // snapshot of what it writes into for one that writes.
  static void count_general(const std::vector<Value>& vals, State& st);
  __attribute__((noinline)) Reg call_values(const FNode& n, std::vector<Value>& vals,
                                            State& st) const;
  void rollback(State& st, size_t objects_before) const;
  // Releases the arrays no register, checkpoint, loop value or logged
  // element write refers to (between turns only: no operand is held
  // elsewhere then).
  static void sweep(State& st);
  // The native code for the registers' kinds now (compiled on first use),
  // or null; and one call of it from a checkpoint.
  const NativeCode* native_for(const State& st) const;
  // A partial code (NativeCode::partial) completed: compiled again, for the
  // kinds in `st` (the same signature), with the general version of the loop
  // whose check failed (State::need_site; the code may stay partial), or
  // with every version when `whole`. False when that code is refused (then
  // the interpreter runs what the partial code cannot).
  bool native_complete(const NativeCode& code, const State& st, bool whole = false) const;
  int32_t run_native(const NativeCode& code, State& st, Reg& last,
                     NativeLog& log, int64_t& undo_count) const;
  // The registers the loop assigned into the frame; `finished`: the loop
  // ended here (no general evaluation goes on from its registers).
  void write_back(const FramePtr& frame, const State& st, bool finished = false) const;
};

}  // namespace tessera
