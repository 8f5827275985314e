// The undo log of native calls (native_calls.cpp): the code of a call logs
// each write to an array element before making it; when the call bails, the
// log is replayed backwards so that the general path runs the call again on
// the arrays as they were. No LLVM here: the code reads NcContext's words.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::detail {

// What a call's native code shares with native_call, as 64-bit words: the
// status (word 0, where the code's status pointer points), then the undo log
// (buffer, words used, capacity), three words a write (address, old bytes,
// their size). The code appends inline and calls nc_grow_log when full.
struct NcContext {
  int32_t status = 0;
  int32_t unused = 0;
  int64_t* log = nullptr;
  int64_t used = 0;
  int64_t capacity = 0;
  // Not read by the code:
  bool snapshot = false;  // the arrays' bytes are in copies, the log is dropped
  bool lost = false;      // no memory for the log or the copies: no undo possible
};

// Starts the log of a call on this thread (one call at a time a thread:
// native code never runs inside native code).
void nc_undo_begin(NcContext& c);

// Adds the bytes an array argument spans (its descriptor: address of element
// 0, writable, shape, strides in bytes) to those a snapshot copies.
void nc_undo_cover(const int64_t* desc, int ndim, size_t item_bytes);

// Called by the code when the log is full: a bigger log, or, past 4 MB and 8
// times the covered arrays' bytes, copies of those arrays instead (memory
// stays bounded for any number of writes). Never throws (the code has no
// unwind tables): without memory it sets `lost`.
void nc_grow_log(int32_t* ctx);

// Puts back what the call's writes changed.
void nc_undo(NcContext& c);

}  // namespace tessera::detail
