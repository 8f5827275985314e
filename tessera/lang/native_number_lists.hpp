// Lists of numbers held unboxed (core/value.hpp's NumberList) in loops: the
// native helpers' and the loop interpreter's access to their bits, so that
// `xs.append(x)`, `xs[i]`, `xs[i] = v` and len(xs) leave them unboxed
// (docs/runtime.md, "Lists of numbers held unboxed").
#pragma once

#include <cstdint>

#include "tessera/core/value.hpp"
#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

// The kind a register's number is held as in a NumberList, and its bits
// (false: not a number).
bool native_number_bits(const Reg& r, NumberKind& kind, uint64_t& bits);
// Item i of a NumberList as a register of the kind it was appended as.
Reg native_number_reg(const NumberList& n, size_t i);

// xs.append(item) of a number onto the list at object index `obj`, kept
// unboxed: onto a NumberList of its kind, or an empty list of Values made
// one. 0 done, 1 not a list; -1 not for this (the list's Values take it).
// Logged for a roll-back as FastLoop::Impl::list_push logs.
int native_push_number(FastLoop::Impl::State& st, int32_t obj, const Reg& item);

// What the generated code needs to read and write a list's numbers where
// they are (native_list2_get's kNativeRowMode and kNativeFlatMode): out[0]
// the address of item 0's 8 bytes, out[1] the number of items, out[2] the
// bytes from one item to the next, out[3] the ValueKind every item reads
// as (a NumberList's; 255: another kind, never read in place) or -1: each
// item's own kind byte, NativeValueLayout::kind_at - payload_at bytes from
// its payload (a list of Values).
void native_list_site(const Value& list, int64_t* out);

// Truncates a list to `keep` items (a roll-back of appends), a NumberList's
// bits if it is one that only `list` holds. False: not one.
bool native_truncate_numbers(Value& list, size_t keep);

}  // namespace tessera
