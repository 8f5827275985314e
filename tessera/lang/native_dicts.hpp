// Dicts (and sets, which jit code holds as dicts: _sets.py) read and written
// by native loops (docs/runtime.md, "Dicts and sets in native code"): the
// helpers the generated code calls on the interpreter's own objects, as
// native_list_get does for lists. Keys are numbers or tuples of numbers
// given as registers; values read are numbers of one register kind, known
// when the loop was compiled. Writes go through the interpreter's own_dict,
// so that its roll-back applies unchanged. Called through
// NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// Whether a register other than `r` holds object `obj` (`held`: each of the
// `nheld` registers' object, -1 none): a write through `r` would be seen
// there (Python's aliasing), so the interpreter does it. Counted without a
// branch, so that the compiler vectorises it: it runs at every helper write.
inline bool native_held_elsewhere(const int32_t* held, int64_t nheld, int64_t r, int64_t obj) {
  const auto o = static_cast<int32_t>(obj);
  int32_t hits = 0;
  for (int64_t k = 0; k < nheld; ++k) hits += held[k] == o ? 1 : 0;
  if (r >= 0 && r < nheld && held[r] == o) --hits;
  return hits > 0;
}

// What native_dict_find reports.
enum NativeDictFound : int32_t {
  kNativeDictHit = 0,   // the key is there (its value, when asked for, in `out`)
  kNativeDictMiss = 1,  // the key is not there
  kNativeDictBail = 2,  // no dict at `obj`, a key the helpers do not build, or a
                        // value of another kind than `kind`: the interpreter's
};

// Looks up the key made of the `nkeys` numbers `keys` (several: a tuple) in
// the dict at object index `obj`. `kind` >= 0: the value must be a number
// of that register kind, its payload written to `out`; -1: only whether the
// key is there (`k in d`).
extern "C" int32_t native_dict_find(NativeCtx* c, int64_t obj, const Reg* keys, int64_t nkeys,
                                    int64_t kind, int64_t* out);

// d[key] = value in place on the dict at `obj`, held by register `r`
// (`held`: each of the `nheld` registers' object, -1 none), logged for the
// interpreter's roll-back as its own write is (own_dict). 0 when done; 1
// when left to the interpreter: no dict there, another register holds it
// (it would see the change), a key or value it does not take. `view` (five
// words, or null): after a write, the dict's view as native_dict_view gives
// it, view[4] its result (the code's next probe needs no call). `missing`:
// 1 when the code's own probe found the int key not there (not looked up
// again), 0 when it does not know.
extern "C" int32_t native_dict_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, const Reg* keys, int64_t nkeys, const Reg* value,
                                   uint64_t* view, int64_t missing);

// The index and items of the compact dict at `obj`, for the generated code's
// own probe of int keys within +-2**53 (Dict::int_probe; the slots' layout
// and probe order in core/value.cpp): out[0] the slots' address, out[1]
// their number - 1, out[2] the items' address (two words an item: key,
// value), out[3] their kinds' (a byte an item, the value's kind in bits
// 2-3: DictValueKind). 1 when given (good until a helper call changes the
// dict), 0 when not (no dict there, not compact, not indexed: the helpers'
// then).
extern "C" int32_t native_dict_view(NativeCtx* c, int64_t obj, uint64_t* out);

// len() of the list, tuple or dict at `obj`; -1 for another object.
extern "C" int64_t native_container_len(NativeCtx* c, int64_t obj);

// {} (a set() too): a new empty dict in the interpreter's objects, released
// by its sweep; its object index, or -1.
extern "C" int64_t native_dict_new(NativeCtx* c);

}  // namespace tessera
