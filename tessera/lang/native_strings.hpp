// Strings in native loops (docs/runtime.md, "Strings in native code"): the
// helpers the generated code calls (through NativeCtx::helpers only) to read
// a string variable's bytes, to make a string it computed into an object of
// the interpreter's, and to compare and search text given as views (an
// address, a length and a step in bytes between characters, negative for a
// reversed slice). ASCII text only: a character is one byte. Defined in
// native_gen_strings.cpp, beside the code that calls them.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// The bytes of the ASCII string at object index `obj` (its length to
// `len`); null when there is none there or it has other characters. Valid
// until an object is placed (the table of objects may move).
extern "C" const char* native_str_view(NativeCtx* c, int64_t obj, int64_t* len);

// A string object of the `len` characters at p, p + step, ...: its index in
// the interpreter's objects (a one-character one shared, as the
// interpreter's s[i]), -1 when none can be placed.
extern "C" int64_t native_str_object(NativeCtx* c, const char* p, int64_t len, int64_t step);

// Python's order of two views: negative, zero or positive.
extern "C" int64_t native_str_compare(const char* a, int64_t na, int64_t sa, const char* b,
                                      int64_t nb, int64_t sb);

// The first position of view `b` in view `a` (Python's a.find(b)), -1 when absent.
extern "C" int64_t native_str_find(const char* a, int64_t na, int64_t sa, const char* b,
                                   int64_t nb, int64_t sb);

// Item i (negative from the end) of the list or tuple at object index `obj`
// when it is an ASCII string: its bytes (its length to `len`); null otherwise.
// Valid while the list is not changed (the loop reads it only).
extern "C" const char* native_list_str(NativeCtx* c, int64_t obj, int64_t i, int64_t* len);

// Python's a.strip(chars) of view `a` by the characters of view `chars`: the
// length kept, its first position to `first`.
extern "C" int64_t native_str_strip(const char* a, int64_t na, int64_t sa, const char* chars,
                                    int64_t nc, int64_t sc, int64_t* first);

}  // namespace tessera
