// The slow paths of the row cache's t[i][j] sites (native_lists.hpp,
// NativeRowCache): what the generated code did inline at every site until
// 2026-12-06, once, here. The inline part (native_gen_rows.cpp) takes a
// slot that holds the row, an index in range and an item of the kind
// compiled for; these do the rest exactly as it did.
#include <cstring>

#include "tessera/lang/native_helpers.hpp"
#include "tessera/lang/native_lists.hpp"

namespace tessera {

namespace {

// Row i's slot.
int slot_of(int64_t i) { return static_cast<int>(i & (kNativeRowSlots - 1)); }

// Row i looked up (kNativeRowMode) into slot s at generation `gen`.
void fill(NativeCtx* c, NativeRowCache& rc, int s, int64_t obj, int64_t i, int64_t gen) {
  const int32_t code = native_list2_get(c, obj, i, 0, kNativeRowMode, rc.buf);
  rc.ok[s] = code == 0;
  rc.key[s] = i;
  rc.gen[s] = gen;
  rc.data[s] = rc.buf[0];
  rc.len[s] = rc.buf[1];
  rc.stride[s] = rc.buf[2];
  rc.kfix[s] = rc.buf[3];
}

bool holds(const NativeRowCache& rc, int s, int64_t i, int64_t gen) {
  return rc.ok[s] && rc.key[s] == i && rc.gen[s] == gen;
}

// Item j's 8 bytes (negative j from the end) when it is in range and of
// ValueKind `want`; null otherwise.
char* item_at(const NativeRowCache& rc, int s, int64_t j, int64_t want) {
  const int64_t len = rc.len[s];
  const int64_t jj = j < 0 ? j + len : j;
  if (!rc.ok[s] || static_cast<uint64_t>(jj) >= static_cast<uint64_t>(len)) return nullptr;
  char* base = reinterpret_cast<char*>(rc.data[s]);
  if (rc.kfix[s] >= 0) return rc.kfix[s] == want ? base + jj * 8 : nullptr;
  const NativeValueLayout& l = native_value_layout();
  char* at = base + jj * l.size;
  return at[l.kind_at - l.payload_at] == static_cast<char>(want) ? at : nullptr;
}

}  // namespace

extern "C" int32_t native_row_read(NativeCtx* c, NativeRowCache* rc, int64_t obj, int64_t i,
                                   int64_t j, int64_t gen, int64_t kind, int64_t want,
                                   int64_t* out) {
  const int s = slot_of(i);
  if (!holds(*rc, s, i, gen)) {
    fill(c, *rc, s, obj, i, gen);
    rc->writable[s] = 0;  // a read does not ask
  }
  if (const char* p = item_at(*rc, s, j, want)) {
    std::memcpy(out, p, 8);
    return 0;
  }
  return native_list2_get(c, obj, i, j, kind, out) == 0 ? 0 : 1;
}

extern "C" int32_t native_row_write(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                    int64_t obj, int64_t i, int64_t j, const Reg* item,
                                    int64_t bits, int64_t want, NativeRowCache* rc, int64_t* gen,
                                    int64_t* counted) {
  const int s = slot_of(i);
  char* p = holds(*rc, s, i, *gen) && rc->writable[s] ? item_at(*rc, s, j, want) : nullptr;
  if (p == nullptr) {
    const int32_t code = native_list2_set(c, held, nheld, r | kNativeInPlaceAsk, obj, i, j, item);
    if (code == 1) return 1;
    const bool in_place = code == 2;
    // The helper's own write may have moved rows (a copy): every kept
    // address is looked up again. A yes to the ask moved nothing, so the
    // other rows stay good (nbody's rows are written by turns).
    if (!in_place) ++*gen;
    fill(c, *rc, s, obj, i, *gen);
    rc->writable[s] = 1;
    rc->logs[s] = in_place;
    if (!in_place) return 0;  // written by the helper
    p = item_at(*rc, s, j, want);
    if (p == nullptr) return 1;  // the helper saw it of that kind
  }
  if (rc->logs[s] && rc->ranged[s] != rc->data[s]) {
    // Each write's 16-byte entry until the site has logged as many as its
    // row holds items, or at once for a row of 16 items or fewer: then the
    // row's numbers once as one range, and no more entries for that row
    // in this call (coin_sums's 160,000 writes into 20,001 items grew a
    // 2.5 MB log a call). A bail undoes the log newest first.
    const int64_t len = rc->len[s];
    if (++*counted > len || len <= 16) {
      native_log_range(c, c->undo_n, reinterpret_cast<char*>(rc->data[s]), rc->stride[s], len, 8);
      ++c->undo_n;
      rc->ranged[s] = rc->data[s];
    } else {
      if (c->undo_n >= c->undo_cap) native_grow_undo(c, c->undo_n);
      uint64_t old;
      std::memcpy(&old, p, 8);
      c->undo[c->undo_n] = NativeUndo{reinterpret_cast<uint64_t>(p) | (uint64_t{3} << 60), old};
      ++c->undo_n;
    }
  }
  std::memcpy(p, &bits, 8);
  return 0;
}

}  // namespace tessera
