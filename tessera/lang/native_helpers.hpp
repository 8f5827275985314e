// The functions native loop code calls (native.cpp, native_gen.hpp), by
// index into NativeCtx::helpers (kHelpers): no process address is in the
// code, so that it can be kept on disk and used by other processes. Those on
// arrays, lists and dicts are declared in native_arrays.hpp,
// native_lists.hpp and native_dicts.hpp; these are the log's and numbers'.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// Room for at least `n` entries in the log of element writes (twice as
// many, 1024 at least); the log's new address.
extern "C" NativeUndo* native_grow_undo(NativeCtx* c, int64_t n);

// Appends one range entry to the log: the old bytes of `count` elements of
// `size` bytes, `first` then every `step_bytes`.
extern "C" NativeUndo* native_log_range(NativeCtx* c, int64_t n, char* first, int64_t step_bytes,
                                        int64_t count, int64_t size);

// A copy of the whole array of entry `entry` (a register's array now) to the
// log, before writes not logged one by one.
extern "C" NativeUndo* native_snapshot(NativeCtx* c, int64_t n, int64_t entry);

// The interpreter's float functions and operators (kernels/elementwise.hpp).
extern "C" double native_unary(int32_t op, double v);
extern "C" double native_float_floordiv(double a, double b);
extern "C" double native_float_mod(double a, double b);
extern "C" double native_pow(double a, double b);

// x.sort() of a 1-d array in place (`n` elements `stride` elements apart,
// dtype `dt`): the sort primitive's order (kernels::sort_less, stable: NaNs
// last, equal elements as they were).
extern "C" void native_sort_1d(char* base, int64_t n, int64_t stride, int32_t dt);
// hypot(x, y) (a complex number's abs() in native code).
extern "C" double native_hypot(double x, double y);
// Copies the block of `nd` dimensions of `shape` at `src` (strides in
// elements of `size` bytes) into the one at `dst`, as NumPy's assignment:
// through a buffer when the two share memory. 0, or 1 when out of memory.
extern "C" int32_t native_copy_block(char* dst, const int64_t* dst_strides, const char* src,
                                     const int64_t* src_strides, const int64_t* shape, int32_t nd,
                                     int64_t size);

// np.random.random(): the interpreter's draw (fastloop.cpp, Op::Uniform),
// counted so that a roll-back can rewind the stream.
extern "C" double native_uniform(NativeCtx* c);

// A call of a recursive jit function from native loop code (Op::NativeCall):
// the function in the state's object `obj`, its arguments' register kinds
// packed in `kinds` (their count in the low 4 bits, the result's kind the
// code expects in the next 4, an argument's kind a byte above each),
// their payloads in `words`; 0 with `result` set, else the turn bails.
extern "C" int32_t native_loop_call(NativeCtx* c, int64_t obj, int64_t kinds, const int64_t* words,
                                    int64_t* result);

// The entry of the native code of the function in the state's object `obj`
// for arguments and result of the kinds packed in `kinds` (as
// native_loop_call's), after native_loop_call's checks: the loop's code
// calls it directly for the rest of its native call (native_call_entry);
// null when the call is the general path's.
extern "C" void* native_loop_callee(NativeCtx* c, int64_t obj, int64_t kinds);

namespace native_gen {

// The functions the generated code calls, by index into NativeCtx::helpers
// (native_helpers()); a new one goes at the end (the disk cache's key
// counts them).
constexpr size_t kHelperCount = 45;
extern void* const kHelpers[kHelperCount];

}  // namespace native_gen

}  // namespace tessera
