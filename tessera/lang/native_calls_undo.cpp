// The undo log of native calls (native_calls_undo.hpp).
#include "tessera/lang/native_calls_undo.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace tessera::detail {
namespace {

// The bytes an array argument's elements span.
struct NcRegion {
  char* start;
  size_t bytes;
};

// The log's storage and the arrays' copies, of the thread the code runs on
// (native code never runs inside native code: one call at a time a thread).
struct NcUndoState {
  std::vector<int64_t> log;
  std::vector<NcRegion> regions;
  size_t region_bytes = 0;
  std::vector<std::vector<char>> copies;
};

NcUndoState& nc_undo_state() {
  thread_local NcUndoState state;
  return state;
}

constexpr size_t kNcLogStart = 1024;     // words
constexpr size_t kNcLogKept = 1 << 18;   // words (2 MB) a thread keeps between calls
// A log of more bytes than this and 8 times the arrays' turns into copies
// (which undo the log so far into them: as costly as the log, once).
constexpr size_t kNcLogMostBytes = size_t{4} << 20;

// Copies the arrays as they were before the call: their bytes now, with the
// log so far undone in the copies.
void nc_take_snapshot(NcContext& c, NcUndoState& st) {
  st.copies.resize(st.regions.size());
  for (size_t r = 0; r < st.regions.size(); ++r)
    st.copies[r].assign(st.regions[r].start, st.regions[r].start + st.regions[r].bytes);
  for (int64_t i = c.used - 3; i >= 0; i -= 3) {
    char* at = reinterpret_cast<char*>(static_cast<uintptr_t>(c.log[i]));
    const uint64_t old = static_cast<uint64_t>(c.log[i + 1]);
    const auto n = static_cast<size_t>(c.log[i + 2]);
    for (size_t r = 0; r < st.regions.size(); ++r) {  // views may overlap: every copy
      const NcRegion& g = st.regions[r];
      if (at >= g.start && at + n <= g.start + g.bytes)
        std::memcpy(st.copies[r].data() + (at - g.start), &old, n);
    }
  }
}

}  // namespace

void nc_grow_log(int32_t* ctx) {
  auto* c = reinterpret_cast<NcContext*>(ctx);
  NcUndoState& st = nc_undo_state();
  if (!c->snapshot && !c->lost) {
    try {
      const size_t words = st.log.size() * 2;
      if (words * sizeof(int64_t) > std::max(8 * st.region_bytes, kNcLogMostBytes)) {
        nc_take_snapshot(*c, st);
        c->snapshot = true;
      } else {
        st.log.resize(words);
        c->log = st.log.data();
        c->capacity = static_cast<int64_t>(st.log.size());
        return;
      }
    } catch (const std::bad_alloc&) {
      c->lost = true;
    }
  }
  c->used = 0;  // the log's buffer is scratch from now on
}

void nc_undo(NcContext& c) {
  NcUndoState& st = nc_undo_state();
  if (c.snapshot) {
    for (size_t r = 0; r < st.regions.size(); ++r)
      std::memcpy(st.regions[r].start, st.copies[r].data(), st.regions[r].bytes);
  } else {
    for (int64_t i = c.used - 3; i >= 0; i -= 3) {
      const uint64_t old = static_cast<uint64_t>(c.log[i + 1]);
      std::memcpy(reinterpret_cast<char*>(static_cast<uintptr_t>(c.log[i])), &old,
                  static_cast<size_t>(c.log[i + 2]));
    }
  }
  c.used = 0;
}

void nc_undo_begin(NcContext& c) {
  NcUndoState& st = nc_undo_state();
  if (st.log.size() < kNcLogStart || st.log.size() > kNcLogKept) {
    // A log grown past kNcLogKept by an earlier call is let go.
    st.log = std::vector<int64_t>(kNcLogStart);
  }
  st.copies.clear();
  st.regions.clear();
  st.region_bytes = 0;
  c.log = st.log.data();
  c.capacity = static_cast<int64_t>(st.log.size());
}

void nc_undo_cover(const int64_t* desc, int ndim, size_t item_bytes) {
  int64_t low = 0, high = static_cast<int64_t>(item_bytes);
  for (int d = 0; d < ndim; ++d) {
    const int64_t n = desc[2 + d], stride = desc[2 + ndim + d];
    if (n == 0) return;  // no elements: nothing to copy
    (stride < 0 ? low : high) += (n - 1) * stride;
  }
  NcUndoState& st = nc_undo_state();
  char* start = reinterpret_cast<char*>(static_cast<uintptr_t>(desc[0])) + low;
  st.regions.push_back({start, static_cast<size_t>(high - low)});
  st.region_bytes += static_cast<size_t>(high - low);
}

}  // namespace tessera::detail
