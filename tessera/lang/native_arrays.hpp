// Arrays made inside native loops (docs/runtime.md, "Native loops"): the
// helpers the generated code calls to make an array (np.zeros(n), x.copy(),
// ...) as the interpreter makes it, and to release, between turns, those no
// register refers to any more. Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// Runs the allocating primitive of the loop's counted node `slot` on the one
// operand `arg` (a register: an int shape, or an array entry), as the
// interpreter does (the code counts it, undone with its turn), and enters
// the result in the interpreter's table of arrays; its descriptor to `out`.
// Returns its entry, or -1 when the result is not an array of dtype `dt`
// and rank `nd`, or the primitive failed (the interpreter redoes the turn
// and reports it), or the loop holds too many arrays or bytes.
extern "C" int64_t native_alloc(NativeCtx* c, int64_t slot, const Reg* arg, int64_t dt,
                                int64_t nd, NativeArray* out);

// Releases the arrays that neither the registers (the context's, written
// by the code just before), the checkpoint's, nor the loop's value refer to.
extern "C" void native_sweep(NativeCtx* c);

}  // namespace tessera
