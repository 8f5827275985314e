// Arrays made inside native loops (docs/runtime.md, "Native loops"): the
// helpers the generated code calls to make an array (np.zeros(n), x.copy(),
// ...) as the interpreter makes it, and to release, between turns, those no
// register refers to any more. Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// Makes what the allocating primitive `op` gives for the operands `args`
// (registers: the `nargs` extents of a shape, or one array's entry), of
// dtype `dt` for a shape (the code counts the call, undone with its turn).
// The array joins the interpreter's table of arrays; its descriptor goes to
// `out`. Returns its entry, or -1 when the primitive would report an error
// (a negative extent: the interpreter redoes the turn and reports it), the
// result would not be an array of dtype `dt` and rank `nd`, or the loop
// would hold too many arrays or bytes.
extern "C" int64_t native_alloc(NativeCtx* c, int64_t op, const Reg* args, int64_t nargs,
                                int64_t dt, int64_t nd, NativeArray* out);

// What native_alloc makes (its `op`): np.zeros(n), np.ones(n), np.empty(n)
// of float64; zeros_like(x), ones_like(x), empty_like(x), a copy of x.
enum class NativeAlloc : int64_t { zeros, ones, empty, zeros_like, ones_like, empty_like, copy };

// Releases the arrays that neither the registers (the context's, written
// by the code just before), the checkpoint's, nor the loop's value refer to.
extern "C" void native_sweep(NativeCtx* c);

// The entry of a view of the array at entry `entry` without its first
// `nidx` dims, from its element `offset` (in elements: a row `x[i]`, as
// native code holds it), for the interpreter's registers; -1 when none can
// be made (no interpreter state, too many arrays).
extern "C" int64_t native_row_view(NativeCtx* c, int64_t entry, int64_t offset, int64_t nidx);

// Lists made and appended to by native code (docs/runtime.md, "Lists built
// by append"), held in the interpreter's objects as its own Op::NewList and
// Op::Append hold them, so that its roll-back and sweep apply unchanged.
// A new list of the `n` numbers `items`: its object index, or -1 (no
// interpreter state, too many objects).
extern "C" int64_t native_list_new(NativeCtx* c, const Reg* items, int64_t n);
// The number `item` appended to the list at object index `obj`, held by
// register `r`; `held` gives each of the `nheld` registers' object (-1
// none). 0 when done; 1 when left to the interpreter: no list there, or
// another register holds the same list (it would see the append).
extern "C" int32_t native_list_append(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                      int64_t obj, const Reg* item);
// len() of the list (or tuple) at object index `obj`; -1 for another object.
extern "C" int64_t native_list_len(NativeCtx* c, int64_t obj);
// Item `i` (negative from the end) of the list or tuple at object index
// `obj`, if it is a number of register kind `kind`: its payload to `out`,
// 0; 1 otherwise (out of range, another kind: the interpreter's).
extern "C" int32_t native_list_get(NativeCtx* c, int64_t obj, int64_t i, int64_t kind, int64_t* out);
// What `for x in xs` visits of the list or tuple at `obj` (iterate): the
// same list in a new object slot; -1 for another object.
extern "C" int64_t native_list_iterate(NativeCtx* c, int64_t obj);

}  // namespace tessera
