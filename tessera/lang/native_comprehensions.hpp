// Lists built by comprehensions and concatenation in native loops
// (docs/runtime.md, "Comprehensions and list concatenation in native
// code"): the helpers the generated code calls for `a + b` of two lists.
// Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// a + b of the lists at object indices `a` and `b` (lists, not tuples or
// strings): a new list of a's items then b's, placed in the interpreter's
// objects as its own `+` places it (released by its sweep between turns);
// its object index, or -1 for anything else (the interpreter's, which
// gives what Python gives or raises).
extern "C" int64_t native_list_concat(NativeCtx* c, int64_t a, int64_t b);

// len() of the list at object index `obj` (not a tuple or a string); -1 for
// anything else.
extern "C" int64_t native_plain_list_len(NativeCtx* c, int64_t obj);

// Room for at least `need` numbers (8-byte payloads) in the call's buffer
// for comprehension `site` (NativeLog::comp_items), the ones in it so far
// kept: its address, its room in `*room`; null when none can be had.
extern "C" int64_t* native_comp_room(NativeCtx* c, int64_t site, int64_t need, int64_t* room);
// The `n` numbers of register kind `kind` at `items` appended to the list
// at object index `obj` held by register `r` (`held`: each of the `nheld`
// registers' object, -1 none), as that many of the interpreter's appends:
// 0 when done; 1 when left to the interpreter (no list there, or another
// register holds it).
extern "C" int32_t native_comp_put(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, int64_t kind, const int64_t* items, int64_t n);

// xs.append(row) of the list at object index `item` (a list, not a tuple)
// onto the list at object index `obj` held by register `r` (`held` as
// native_comp_put's): 0 when done; 1 when left to the interpreter.
extern "C" int32_t native_list_append_list(NativeCtx* c, const int32_t* held, int64_t nheld,
                                           int64_t r, int64_t obj, int64_t item);

}  // namespace tessera
