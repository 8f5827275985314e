// Native code for the scalar loop fast path (docs/runtime.md, "Native
// loops"): a loop whose registers have settled on fixed kinds (float64,
// int64 and bool scalars, Python's or NumPy's; arrays of known dtype and
// rank that are only indexed) is compiled with LLVM's ORC JIT into one
// function over those registers, called instead of the register
// interpreter. No LLVM header is included here: they stay in native.cpp
// and the generator's files (native_gen.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_random.hpp"

namespace tessera {

// An array register as the native code sees it: its first element and, per
// dimension, its extent and stride in elements.
struct NativeArray {
  char* base = nullptr;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// An element write's old bytes: `where` is the element's address with the
// log2 of its size in the top 4 bits; or, with kNativeRangeTag there, the
// old bytes of the elements a range loop writes, `old` indexing ranges; or,
// with kNativeCopyTag, a whole array copied, `old` indexing copies.
struct NativeUndo {
  uint64_t where;
  uint64_t old;
};
constexpr uint64_t kNativeRangeTag = uint64_t{15} << 60;
constexpr uint64_t kNativeCopyTag = uint64_t{14} << 60;

// Elements `first`, then every `step_bytes`, `count` of them, of `size`
// bytes; their old bytes at `bytes_at` in NativeLog::bytes.
struct NativeRange {
  char* first;
  int64_t step_bytes;
  int64_t count;
  int64_t size;
  size_t bytes_at;
};

// The log of a native call's writes and the storage it grows into. Its
// entries' buffer (4096 of them to start, 64 KB) is this thread's from one
// loop run to the next: made and zeroed once, not at each run.
struct NativeLog {
  NativeLog();
  ~NativeLog();
  NativeLog(const NativeLog&) = delete;
  NativeLog& operator=(const NativeLog&) = delete;
  std::vector<NativeUndo> entries;
  std::vector<NativeRange> ranges;
  std::vector<char> bytes;
  std::vector<std::pair<Array, Array>> copies;  // (array, its elements before)
  // Per comprehension site of the code, the numbers its list gets when its
  // loop ends (native_comprehensions.hpp).
  std::vector<std::vector<int64_t>> comp_items;
};

struct NativeCtx {
  Reg* regs;                  // in and out (written back unless the code bails)
  uint8_t* assigned;          // in and out
  uint64_t* counts;           // in and out: evaluations of the counted nodes
  const NativeArray* arrays;  // per register (only Arr registers are read)
  const ArrEntry* entries;    // the arrays the registers refer to (moved by native_alloc)
  NativeUndo* undo;           // the log of element writes since the call (see NativeStatus)
  int64_t undo_n;
  int64_t undo_cap;
  NativeLog* log;                       // grown by native_grow_undo and native_log_range
  int64_t range_units;                  // out: ranges' bytes / 16 (counted like log entries)
  int64_t max_turns;                    // outer turns before returning kNativeCheckpoint
  int64_t max_undo;                     // log entries before returning kNativeCheckpoint
  Reg last;                             // in and out: the loop's value so far
  void* const* helpers;                 // native_helpers(): the functions the code calls
  const volatile void* interrupt;       // interrupt_flag_address()
  int64_t draws;                        // in and out: np.random.random() draws made
  int64_t draws_at_turn;  // out: the draws before the turn that returned kNativeBail
  NativeDraws* rand;      // the call's batch of draws (native_random.hpp); null: one by one
  // The interpreter's state and loop: arrays made by the code (native_alloc)
  // become entries of its table, released by its sweep (native_sweep).
  FastLoop::Impl::State* state;
  const FastLoop::Impl* impl;
  // The list (object index, storage) and row storage the call's last list
  // write made its own and logged (native_lists.cpp): the next write into
  // the same row skips the checks and the log. Never read by the code.
  int64_t owned_obj = -1;
  const void* owned_list = nullptr;
  const void* owned_row = nullptr;
  // out, with kNativeNeedFull: which check before a loop failed (Gen::site_id
  // + 1; 0: not known), so that only that loop's general version is added.
  int64_t need_site = 0;
};

// What a native loop function returns.
enum NativeStatus : int32_t {
  kNativeDone = 0,        // the loop ended (condition false or break); registers written
  kNativeCheckpoint = 1,  // turns or writes reached the limits, between two turns
  kNativeBail = 2,  // a turn met what only the interpreter or the general path does: the state
                    // is as at its start, and the log holds its writes (none: kept in registers)
  kNativeInterrupt = 3,   // Ctrl-C seen (between two turns, or inside one); registers written
  kNativeBailCall = 4,  // as kNativeBail, but back to the call's start: registers untouched, the
                        // log holds every write since
  kNativeNeedFull = 5,  // as kNativeBailCall, from a lazily compiled code (NativeCode::partial)
                        // whose check before a loop failed: run again with the whole code
};

using NativeFn = int32_t (*)(NativeCtx*);

struct NativeUpgrade;  // native_tiers.hpp

struct NativeCode {
  NativeCode() = default;
  ~NativeCode();  // detaches it from its optimised tier still being compiled
  NativeCode(const NativeCode&) = delete;
  NativeCode& operator=(const NativeCode&) = delete;
  // Swapped once, from the partial code to the whole one, while other
  // threads may be running the partial (both stay loaded).
  std::atomic<NativeFn> fn{nullptr};
  // Compiled lazily: the versions of its loops checked once before them
  // only; it returns kNativeNeedFull where they do not apply, and the whole
  // code (native_compile without `lazy`) replaces it then.
  std::atomic<bool> partial{false};
  bool whole_refused = false;  // the whole code could not be compiled (under the loop's lock)
  std::vector<uint8_t> signature;  // the register kinds (and arrays' dtypes, ranks) it is for
  double compile_ms = 0;           // code generation, optimisation and machine code (or loading)
  bool from_cache = false;         // read from the disk cache (no optimisation, no codegen)
  std::string cache_note;          // why the cache was not used (TESSERA_NATIVE=debug)
  // Tiered compilation (native_tiers.hpp): true while `fn` is the quickly
  // compiled code, whose optimised version a background thread compiles and
  // swaps into `fn` through `upgrade`.
  std::atomic<bool> quick{false};
  std::shared_ptr<NativeUpgrade> upgrade;
  std::string key_hex;  // the cache key of its code
  // A partial code's: the key of the loop's first partial code (no general
  // version), under which the cache marks what later compiles need ("needs
  // whole": the sites given general versions, or the whole code), and those
  // sites (Gen::general_sites).
  std::string base_key_hex;
  std::set<int> general_sites;
  // For a trace's compile event (native_trace.cpp): loaded by this process
  // already (from_cache too), the unoptimised IR's size, and the steps'
  // times (-1: not run, the machine code came from a cache).
  bool from_process = false;
  uint64_t ir_bytes = 0;
  double generate_ms = -1, optimise_ms = -1, codegen_ms = -1;
};

// False when TESSERA_NATIVE=0 (the register interpreter only).
bool native_enabled();
// TESSERA_NATIVE=debug: say what the generator and the disk cache did.
bool native_debug();

// The functions the generated code calls, by index (no process address is
// in the code, so that it can be kept on disk and used by other processes).
void* const* native_helpers();

// True when the array's last dimension has unit stride or at most one
// element: its code then uses the constant stride 1 (part of the signature).
bool native_unit_last(const ArrEntry& e);

// The signature of the registers `regs` (arrays described by `arrays`).
std::vector<uint8_t> native_signature(const std::vector<Reg>& regs,
                                      const std::vector<ArrEntry>& arrays);
// The same into `out` (its buffer reused: computed at every run of a loop).
void native_signature(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays,
                      std::vector<uint8_t>& out);
// The native code's view of the registers' arrays (base, shape, strides),
// one entry per register (only array registers' are filled), into `out`.
void native_array_table(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays,
                        std::vector<NativeArray>& out);

// Compiles the loop `im` for registers of the kinds in `regs`; null with the
// reason in `why` when the loop (or a register's kind) is outside what the
// generator handles.
// `objects`: the interpreter's objects the registers refer to (a list's
// items give the kind its reads are compiled for).
// `lazy`: the versions checked once before each loop only, where the loop
// has them (NativeCode::partial; TESSERA_NATIVE_LAZY=0 compiles all at once).
std::unique_ptr<NativeCode> native_compile(const FastLoop::Impl& im, const std::vector<Reg>& regs,
                                           const std::vector<ArrEntry>& arrays,
                                           const std::vector<Value>& objects, std::string& why,
                                           bool lazy = false,
                                           const std::set<int>* general_sites = nullptr);

// False when TESSERA_NATIVE_LAZY=0.
bool native_lazy_enabled();

// False when TESSERA_NATIVE_TIERS=0: every loop compiled optimised at once.
bool native_tiers_enabled();

// Tiered compilation's counts in this process (tests, benchmarks).
struct NativeTierStats {
  int64_t quick = 0;      // codes compiled by the quick tier
  int64_t optimised = 0;  // optimised codes compiled in the background
  int64_t swapped = 0;    // codes whose function became the optimised one
  int64_t pending = 0;    // background compiles queued or running
  int64_t needs_whole = 0;  // lazy compiles that went whole at once (the cache's mark)
};
NativeTierStats native_tier_stats();
// Waits until no background compile is queued or running.
void native_tiers_wait();
// Stops the background thread: its queue dropped, the compile under way
// waited for; later loops compile optimised at once. Called at exit (the
// Python module's atexit, else a C atexit handler): LLVM's statics must not
// be destroyed under a running compile.
void native_tiers_stop();

// Undoes the element writes logged by a native call, newest first.
void native_undo(const NativeLog& log, int64_t n);

}  // namespace tessera
