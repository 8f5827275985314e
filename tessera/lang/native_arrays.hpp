// Arrays made inside native loops (docs/runtime.md, "Native loops"): the
// helpers the generated code calls to make an array (np.zeros(n), x.copy(),
// ...) as the interpreter makes it, and to release, between turns, those no
// register refers to any more. Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// Makes what the allocating primitive of the loop's counted node `slot`
// (`op`) gives for the one operand `arg` (a register: an int shape, or an
// array entry): directly, or by the primitive itself where it has an error
// to report; the code counts it (undone with its turn). The array joins the
// interpreter's table of arrays; its descriptor goes to `out`.
// Returns its entry, or -1 when the result is not an array of dtype `dt`
// and rank `nd`, or the primitive failed (the interpreter redoes the turn
// and reports it), or the loop holds too many arrays or bytes.
extern "C" int64_t native_alloc(NativeCtx* c, int64_t slot, int64_t op, const Reg* arg,
                                int64_t dt, int64_t nd, NativeArray* out);

// What native_alloc makes (its `op`): np.zeros(n), np.ones(n), np.empty(n)
// of float64; zeros_like(x), ones_like(x), empty_like(x), a copy of x.
enum class NativeAlloc : int64_t { zeros, ones, empty, zeros_like, ones_like, empty_like, copy };

// Releases the arrays that neither the registers (the context's, written
// by the code just before), the checkpoint's, nor the loop's value refer to.
extern "C" void native_sweep(NativeCtx* c);

}  // namespace tessera
