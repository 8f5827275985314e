// Lists of lists and string characters in native loops (docs/runtime.md,
// "Lists of lists and characters in native code"): the helpers the
// generated code calls for `t[i][j]`, `t[i][j] = v`, `xs[i] = v` and `s[i]`,
// on the interpreter's own objects, so that its roll-back applies unchanged.
// Called through NativeCtx::helpers only.
#pragma once

#include <cstdint>

#include "tessera/lang/native.hpp"

namespace tessera {

// t[i][j] (negative indices from the end) of the list of lists at object
// index `obj`, if it is a number of register kind `kind`: its payload to
// `out`, 0; 1 otherwise (no list of lists there, an index out of range,
// an item of another kind: the interpreter's, which raises what Python does).
extern "C" int32_t native_list2_get(NativeCtx* c, int64_t obj, int64_t i, int64_t j, int64_t kind,
                                    int64_t* out);
// With `kind` kNativeRowMode, native_list2_get gives instead row t[i]'s
// items (a list's, not a tuple's) as out[0] (their address) and out[1]
// (their number), read by the generated code in place (NativeValueLayout);
// valid until a write through the helpers changes the list of lists.
constexpr int64_t kNativeRowMode = -7;
// With `kind` kNativeFlatMode (i and j unused), the same for the flat list
// at `obj` itself: its items' address and number, read in place by `xs[i]`.
constexpr int64_t kNativeFlatMode = -8;
// With `kind` kNativeReadRowMode, as kNativeRowMode but a tuple row too: for
// `a, b = t[i]` (native_gen_rows.cpp), which reads the items and keeps no
// address past the next helper call, and never writes.
constexpr int64_t kNativeReadRowMode = -9;
// With `kind` kNativeFlatReadMode, as kNativeFlatMode but a tuple too: for a
// read site (`for c in coins` of a tuple), whose kept address no write uses.
constexpr int64_t kNativeFlatReadMode = -10;

// Where a Value keeps what the generated code reads and writes in place: its
// size, the byte of its kind (ValueKind) and the offset of an int's or a
// float's 8 bytes; found at start-up (valid false: not found, no in-place
// reads or writes).
struct NativeValueLayout {
  bool valid = false;
  int64_t size = 0;
  int64_t kind_at = 0;
  int64_t payload_at = 0;
};
const NativeValueLayout& native_value_layout();

// t[i][j] = item on the list of lists at `obj`, held by register `r` (`held`:
// each of the `nheld` registers' object, -1 none), as the interpreter's
// nested write does it: the outer list's value before logged once per
// checkpoint, a row shared with it (or with anything else) copied before it
// changes. 0 when done; 1 when left to the interpreter (another register
// holds the same list, no list of lists, an index out of range).
//
// With kNativeInPlaceAsk set in `r`, it writes nothing and gives 2 when the
// row may be written in place by the code, its old bytes logged as an
// array element's (the call's log undoes them before the interpreter's
// roll-back): the list of lists seen by nothing but its register (and the
// frame slot the loop writes it back to), the row by nothing but that list,
// item j of the kind written.
constexpr int64_t kNativeInPlaceAsk = int64_t{1} << 40;
extern "C" int32_t native_list2_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                    int64_t obj, int64_t i, int64_t j, const Reg* item);
// xs[i] = item on the flat list at `obj`, held by register `r`: the
// interpreter's object_setitem (the same log). 0 done; 1 left to it. With
// kNativeInPlaceAsk set in `r`, as native_list2_set's: 2 (nothing written)
// when the list is seen by nothing but its register and its frame slot and
// item i is of the kind written, so the code writes it in place, its old
// bytes in the call's log.
extern "C" int32_t native_list_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, int64_t i, const Reg* item);
// s[i] (negative from the end) of the ASCII string at object index `obj`:
// its byte; -1 for anything else (not a string, not ASCII, out of range).
extern "C" int64_t native_str_byte(NativeCtx* c, int64_t obj, int64_t i);

// len() of the list, tuple or ASCII string at `obj` (native_list_len for a
// list; a string of other characters, whose len() is not its bytes': -1).
extern "C" int64_t native_seq_len(NativeCtx* c, int64_t obj);

// len(t[i]) of the list at `obj` (negative i from the end) whose item i is a
// list, a tuple or an ASCII string; -1 for anything else (the interpreter's).
extern "C" int64_t native_list2_len(NativeCtx* c, int64_t obj, int64_t i);

// The rows the t[i][j] sites of a table register keep (native_gen_rows.cpp):
// row i in slot i mod kNativeRowSlots, in the generated function's frame.
// A slot: the row's index and the write generation it was found at, its
// items' address, number, stride (bytes between items) and kind (kfix: -1
// for Values, each with its kind byte, or the ValueKind of a NumberList's
// items), the items' address whose numbers were logged whole (ranged),
// whether it holds a row (ok), whether the in-place ask said yes for it
// (writable) and whether its writes need the log (logs). A site's common
// case is read inline; everything else is one call of the helpers below,
// so that each site is a few instructions and a call, not the whole logic
// (nbody_game's code was 2 MB of IR and took seconds to compile).
constexpr int kNativeRowSlots = 8;
struct NativeRowCache {
  int64_t key[kNativeRowSlots], gen[kNativeRowSlots], data[kNativeRowSlots],
      len[kNativeRowSlots], stride[kNativeRowSlots], kfix[kNativeRowSlots],
      ranged[kNativeRowSlots];
  int64_t buf[4];
  uint8_t ok[kNativeRowSlots], writable[kNativeRowSlots], logs[kNativeRowSlots];
};

// t[i][j] read through the cache `rc` when the inline test failed: row i
// looked up again (native_list2_get's kNativeRowMode) unless its slot holds
// it at generation `gen`, item j of ValueKind `want` read where it is, or
// else native_list2_get of register kind `kind`. 0 with the payload in
// `out`; 1 to bail.
extern "C" int32_t native_row_read(NativeCtx* c, NativeRowCache* rc, int64_t obj, int64_t i,
                                   int64_t j, int64_t gen, int64_t kind, int64_t want,
                                   int64_t* out);
// t[i][j] = item (its payload `bits`, of ValueKind `want`) through the
// cache when the inline test failed: written in place when the slot holds
// a row the in-place ask said yes for; else native_list2_set asked (a yes:
// the row kept writable; a write of its own: `*gen` bumped, as it may have
// moved rows). An in-place write logs the item's old bytes in the call's
// log (c->undo_n kept by the caller), or the row's numbers whole once
// (native_log_range) when the row has 16 items or fewer or the site
// (`counted`) has logged as many as the row holds. 0 done; 1 to bail.
extern "C" int32_t native_row_write(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                    int64_t obj, int64_t i, int64_t j, const Reg* item,
                                    int64_t bits, int64_t want, NativeRowCache* rc, int64_t* gen,
                                    int64_t* counted);

// The register kind of t[0][0] when `v` is a list of lists whose first row
// starts with a number, else -1 (the kind the generator compiles reads for).
int native_table_kind(const Value& v);

}  // namespace tessera
