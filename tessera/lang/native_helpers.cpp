// The functions native loop code calls (native_helpers.hpp): the log's
// growth, range entries and whole-array copies, float functions, and
// np.random.random()'s draws; and the table of all helpers, kHelpers.
#include "tessera/lang/native_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/sort.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_calls.hpp"
#include "tessera/lang/native_comprehensions.hpp"
#include "tessera/lang/native_dicts.hpp"
#include "tessera/lang/native_lists.hpp"
#include "tessera/lang/native_strings.hpp"
#include "tessera/primitives/random_stream.hpp"

namespace tessera {

extern "C" NativeUndo* native_grow_undo(NativeCtx* c, int64_t n) {
  const size_t want = std::max<size_t>(1024, static_cast<size_t>(n) * 2);
  c->log->entries.resize(want);
  c->undo = c->log->entries.data();
  c->undo_cap = static_cast<int64_t>(want);
  return c->undo;
}

extern "C" NativeUndo* native_log_range(NativeCtx* c, int64_t n, char* first, int64_t step_bytes,
                                        int64_t count, int64_t size) {
  if (n + 1 > c->undo_cap) native_grow_undo(c, n + 1);
  NativeLog& log = *c->log;
  const size_t at = log.bytes.size();
  log.bytes.resize(at + static_cast<size_t>(count * size));
  char* to = log.bytes.data() + at;
  if (step_bytes == size) {
    std::memcpy(to, first, static_cast<size_t>(count * size));
  } else {
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(to + j * size, first + j * step_bytes, static_cast<size_t>(size));
  }
  c->undo[n].where = kNativeRangeTag;
  c->undo[n].old = log.ranges.size();
  log.ranges.push_back(NativeRange{first, step_bytes, count, size, at});
  c->range_units += count * size / 16;
  return c->undo;
}

namespace {

// Buffers for whole-array copies of 64 KiB to 1 MiB, kept per thread for
// the next call: the array allocator recycles smaller and larger blocks, but
// blocks of these sizes go back to the system when freed, so each call's
// copy met fresh pages (165 page faults a call for lcs's 677 KB table, as
// many as making the table). At most two per thread (plain data: a thread
// that ends leaves them to the process).
constexpr size_t kSnapPoolMin = size_t{64} << 10;
constexpr size_t kSnapPoolMax = size_t{1} << 20;
struct SnapBlock {
  size_t bytes;
  void* data;
};
thread_local SnapBlock t_snap_pool[2] = {{0, nullptr}, {0, nullptr}};

// A contiguous copy of `a` in a pooled buffer, or a.copy().
Array snapshot_copy(const Array& a) {
  const size_t bytes = a.nbytes();
  if (bytes <= kSnapPoolMin || bytes > kSnapPoolMax) return a.copy();
  const size_t rounded = (bytes + 4095) & ~size_t{4095};
  void* p = nullptr;
  size_t have = 0;
  for (SnapBlock& blk : t_snap_pool) {
    if (blk.data && blk.bytes >= rounded) {
      p = blk.data;
      have = blk.bytes;
      blk = {0, nullptr};
      break;
    }
  }
  if (!p) {
    p = std::aligned_alloc(64, rounded);
    if (!p) return a.copy();  // its MemoryError, or memory the allocator finds
    have = rounded;
  }
  std::shared_ptr<void> owner(p, [have](void* q) {
    for (SnapBlock& blk : t_snap_pool) {
      if (!blk.data) {
        blk = {have, q};
        return;
      }
    }
    std::free(q);
  });
  Array copy = Array::wrap(a.dtype(), a.shape(), p, std::move(owner));
  if (a.is_contiguous())
    std::memcpy(p, a.origin_raw(), bytes);
  else
    copy.assign(a);
  return copy;
}

}  // namespace

extern "C" NativeUndo* native_snapshot(NativeCtx* c, int64_t n, int64_t entry) {
  if (n + 1 > c->undo_cap) native_grow_undo(c, n + 1);
  const Array& a = c->entries[entry].array;
  c->undo[n].where = kNativeCopyTag;
  c->undo[n].old = c->log->copies.size();
  c->log->copies.emplace_back(a, snapshot_copy(a));
  // A copy of the whole array for this call: the call's turns before its
  // checkpoint at least its elements (a checkpoint every 16,384 turns made
  // coin_change's 2,000,001-element table be copied 122 times a call). A
  // bail then redoes at most that many turns, as a copy costs about them.
  c->max_turns = std::max<int64_t>(c->max_turns, static_cast<int64_t>(a.size()));
  return c->undo;
}

namespace {

// The bytes [lo, hi) a block's elements span.
void block_span(const char* p, const int64_t* strides, const int64_t* shape, int32_t nd,
                int64_t size, const char*& lo, const char*& hi) {
  int64_t a = 0, z = 0;
  for (int32_t d = 0; d < nd; ++d) {
    const int64_t reach = (shape[d] - 1) * strides[d] * size;
    (reach < 0 ? a : z) += reach;
  }
  lo = p + a;
  hi = p + z + size;
}

// Element by element, the last dimension innermost.
void copy_block(char* dst, const int64_t* ds, const char* src, const int64_t* ss,
                const int64_t* shape, int32_t nd, int64_t size) {
  if (nd == 0) {
    std::memcpy(dst, src, static_cast<size_t>(size));
    return;
  }
  if (nd == 1 && ds[0] == 1 && ss[0] == 1) {
    std::memmove(dst, src, static_cast<size_t>(shape[0] * size));
    return;
  }
  for (int64_t i = 0; i < shape[0]; ++i)
    copy_block(dst + i * ds[0] * size, ds + 1, src + i * ss[0] * size, ss + 1, shape + 1, nd - 1,
               size);
}

}  // namespace

extern "C" int32_t native_copy_block(char* dst, const int64_t* dst_strides, const char* src,
                                     const int64_t* src_strides, const int64_t* shape, int32_t nd,
                                     int64_t size) {
  for (int32_t d = 0; d < nd; ++d)
    if (shape[d] == 0) return 0;
  const char *dlo, *dhi, *slo, *shi;
  block_span(dst, dst_strides, shape, nd, size, dlo, dhi);
  block_span(src, src_strides, shape, nd, size, slo, shi);
  if (slo < dhi && dlo < shi) {
    if (dst == src && std::equal(dst_strides, dst_strides + nd, src_strides)) return 0;
    // Shared memory: the source read whole first, as NumPy does.
    int64_t count = 1;
    for (int32_t d = 0; d < nd; ++d) count *= shape[d];
    std::unique_ptr<char[]> buf(new (std::nothrow) char[static_cast<size_t>(count * size)]);
    if (!buf) return 1;  // out of memory: a bail, the interpreter's MemoryError
    int64_t packed[8];  // the native code's arrays have at most 4 dimensions
    if (nd > 8) return 1;
    int64_t step = 1;
    for (int32_t d = nd - 1; d >= 0; --d) {
      packed[d] = step;
      step *= shape[d];
    }
    copy_block(buf.get(), packed, src, src_strides, shape, nd, size);
    copy_block(dst, dst_strides, buf.get(), packed, shape, nd, size);
    return 0;
  }
  copy_block(dst, dst_strides, src, src_strides, shape, nd, size);
  return 0;
}

extern "C" double native_hypot(double x, double y) { return std::hypot(x, y); }

extern "C" void native_sort_1d(char* base, int64_t n, int64_t stride, int32_t dt) {
  dispatch_all(static_cast<DType>(dt), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_arithmetic_v<T>) {
      T* p = reinterpret_cast<T*>(base);
      auto at = [&](int64_t i) -> T& { return p[i * stride]; };
      if (n <= 32) {  // a window of a filter: insertion sort, stable
        for (int64_t i = 1; i < n; ++i) {
          const T v = at(i);
          int64_t j = i;
          for (; j > 0 && kernels::sort_less(v, at(j - 1)); --j) at(j) = at(j - 1);
          at(j) = v;
        }
        return;
      }
      std::vector<T> buf(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = at(i);
      std::stable_sort(buf.begin(), buf.end(), kernels::sort_less<T>);
      for (int64_t i = 0; i < n; ++i) at(i) = buf[static_cast<size_t>(i)];
    }
  });
}

extern "C" double native_unary(int32_t op, double v) {
  return kernels::unary_float(static_cast<UnaryOp>(op), v);
}
extern "C" double native_float_floordiv(double a, double b) {
  return kernels::float_floor_divide(a, b);
}
extern "C" double native_float_mod(double a, double b) { return kernels::float_mod(a, b); }
extern "C" double native_pow(double a, double b) { return std::pow(a, b); }
// The draws come from the call's batch, computed several at a time
// (native_random.cpp); the positions not drawn go back to the stream when
// the call returns.
extern "C" double native_uniform(NativeCtx* c) {
  ++c->draws;
  NativeDraws* d = c->rand;
  if (d == nullptr) {
    const kernels::RandomKey key = next_uniform_key();
    const auto w = kernels::philox4x32(key, 0);
    return kernels::unit_double(w[0], w[1]);
  }
  if (d->pos == d->len) native_draws_refill(*d);
  return d->buf[d->pos++];
}

extern "C" int32_t native_loop_call(NativeCtx* c, int64_t obj, int64_t kinds, const int64_t* words,
                                    int64_t* result) {
  if (c->state == nullptr || obj < 0 || static_cast<size_t>(obj) >= c->state->objects.size())
    return 1;
  const Value& fv = c->state->objects[static_cast<size_t>(obj)];
  const Closure* closure =
      fv.is_function() ? dynamic_cast<const Closure*>(fv.as_function().get()) : nullptr;
  if (closure == nullptr) return 1;
  uint8_t k[8];
  const auto n = static_cast<size_t>(kinds & 0xf);
  auto ret = static_cast<uint8_t>((kinds >> 4) & 0xf);
  for (size_t i = 0; i < n && i < 7; ++i) k[i] = static_cast<uint8_t>(kinds >> (8 * i + 8));
  return native_call_words(*closure, k, n, words, *result, ret) ? 0 : 1;
}

extern "C" void* native_loop_callee(NativeCtx* c, int64_t obj, int64_t kinds) {
  if (c->state == nullptr || obj < 0 || static_cast<size_t>(obj) >= c->state->objects.size())
    return nullptr;
  const Value& fv = c->state->objects[static_cast<size_t>(obj)];
  const Closure* closure =
      fv.is_function() ? dynamic_cast<const Closure*>(fv.as_function().get()) : nullptr;
  if (closure == nullptr) return nullptr;
  uint8_t k[8];
  const auto n = static_cast<size_t>(kinds & 0xf);
  const auto ret = static_cast<uint8_t>((kinds >> 4) & 0xf);
  for (size_t i = 0; i < n && i < 7; ++i) k[i] = static_cast<uint8_t>(kinds >> (8 * i + 8));
  return native_call_entry(*closure, k, n, ret);
}

namespace native_gen {

void* const kHelpers[] = {reinterpret_cast<void*>(&native_grow_undo),
                          reinterpret_cast<void*>(&native_log_range),
                          reinterpret_cast<void*>(&native_snapshot),
                          reinterpret_cast<void*>(&native_unary),
                          reinterpret_cast<void*>(&native_float_floordiv),
                          reinterpret_cast<void*>(&native_float_mod),
                          reinterpret_cast<void*>(&native_pow),
                          reinterpret_cast<void*>(&native_uniform),
                          reinterpret_cast<void*>(&native_alloc),
                          reinterpret_cast<void*>(&native_sweep),
                          reinterpret_cast<void*>(&native_list_new),
                          reinterpret_cast<void*>(&native_list_append),
                          reinterpret_cast<void*>(&native_list_len),
                          reinterpret_cast<void*>(&native_list_get),
                          reinterpret_cast<void*>(&native_list_iterate),
                          reinterpret_cast<void*>(&native_row_view),
                          reinterpret_cast<void*>(&native_dict_find),
                          reinterpret_cast<void*>(&native_dict_set),
                          reinterpret_cast<void*>(&native_container_len),
                          reinterpret_cast<void*>(&native_dict_new),
                          reinterpret_cast<void*>(&native_list2_get),
                          reinterpret_cast<void*>(&native_list2_set),
                          reinterpret_cast<void*>(&native_list_set),
                          reinterpret_cast<void*>(&native_str_byte),
                          reinterpret_cast<void*>(&native_seq_len),
                          reinterpret_cast<void*>(&native_list2_len),
                          reinterpret_cast<void*>(&native_row_read),
                          reinterpret_cast<void*>(&native_row_write),
                          reinterpret_cast<void*>(&native_dict_view),
                          reinterpret_cast<void*>(&native_loop_call),
                          reinterpret_cast<void*>(&native_str_view),
                          reinterpret_cast<void*>(&native_str_object),
                          reinterpret_cast<void*>(&native_str_compare),
                          reinterpret_cast<void*>(&native_str_find),
                          reinterpret_cast<void*>(&native_list_str),
                          reinterpret_cast<void*>(&native_str_strip),
                          reinterpret_cast<void*>(&native_list_concat),
                          reinterpret_cast<void*>(&native_comp_room),
                          reinterpret_cast<void*>(&native_comp_put),
                          reinterpret_cast<void*>(&native_plain_list_len),
                          reinterpret_cast<void*>(&native_loop_callee),
                          reinterpret_cast<void*>(&native_list_append_list),
                          reinterpret_cast<void*>(&native_sort_1d),
                          reinterpret_cast<void*>(&native_copy_block),
                          reinterpret_cast<void*>(&native_hypot)};

}  // namespace native_gen

}  // namespace tessera
