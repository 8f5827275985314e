// Lists of lists and string characters in native loops (native_lists.hpp).
#include "tessera/lang/native_lists.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_arrays.hpp"
#include "tessera/lang/native_dicts.hpp"
#include "tessera/lang/native_number_lists.hpp"

namespace tessera {

namespace {

// The payload of a number of register kind `kind` held in `v` (Python's
// bool, int or float, or a NumPy scalar): false for another kind.
bool nlists_number(const Value& v, int64_t kind, int64_t* out) {
  if (kind == Reg::PyInt && v.is_int()) {
    *out = v.as_int();
    return true;
  }
  if (kind == Reg::PyFloat && v.is_float()) {
    const double f = v.as_float();
    __builtin_memcpy(out, &f, sizeof f);
    return true;
  }
  Reg r;
  if (!FastLoop::Impl::scalar_of(v, r) || r.k != kind) return false;
  *out = r.i;
  return true;
}

bool nlists_index(int64_t& i, int64_t len) {
  if (i < 0) i += len;
  return i >= 0 && i < len;
}

// The list (not a tuple) at object index `obj`, or null.
Value* nlists_list(FastLoop::Impl::State& st, int64_t obj) {
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  Value& v = st.objects[static_cast<size_t>(obj)];
  return v.is_list() && !v.is_tuple() ? &v : nullptr;
}


bool nlists_aliased(const int32_t* held, int64_t nheld, int64_t r, int64_t obj) {
  return native_held_elsewhere(held, nheld, r, obj);
}

// Whether item j of a NumberList may be written in place with `item`: an
// index in range, an int or float of the list's kind (what the generated
// code writes in place).
bool nlists_number_in_place(const NumberList& n, int64_t j, const Reg& item) {
  if (!nlists_index(j, static_cast<int64_t>(n.bits.size()))) return false;
  return (item.k == Reg::PyInt && n.kind == NumberKind::py_int) ||
         (item.k == Reg::PyFloat && n.kind == NumberKind::py_float);
}

// Whether t[i][j] = item may be done in place (native_list2_set's ask).
bool nlists_in_place(const FastLoop::Impl::State& st, int64_t obj, int64_t i, int64_t j,
                     const Reg& item) {
  const Value& t = st.objects[static_cast<size_t>(obj)];
  if (!t.is_list() || t.is_tuple()) return false;
  const auto& outer = t.list_ptr();
  // Held here, and perhaps by the variable's own slot (no one else).
  const long others = outer.use_count() - 1;
  if (others > 1 || (others == 1 && std::find(st.frame_lists.begin(), st.frame_lists.end(),
                                              outer.get()) == st.frame_lists.end()))
    return false;
  const List& rows = *outer;
  if (!nlists_index(i, static_cast<int64_t>(rows.size()))) return false;
  const Value& row = rows[static_cast<size_t>(i)];
  if (!row.is_list() || row.is_tuple() || row.list_ptr().use_count() != 1) return false;
  if (const NumberList* n = row.number_items()) return nlists_number_in_place(*n, j, item);
  const List& items = row.as_list();
  if (!nlists_index(j, static_cast<int64_t>(items.size()))) return false;
  const Value& old = items[static_cast<size_t>(j)];
  return (item.k == Reg::PyInt && old.is_int()) || (item.k == Reg::PyFloat && old.is_float());
}

// Whether xs[i] = item may be done in place (native_list_set's ask): the
// list held by its register and perhaps its variable's frame slot alone,
// item i of the kind written.
bool nlists_flat_in_place(const FastLoop::Impl::State& st, int64_t obj, int64_t i,
                          const Reg& item) {
  const Value& xs = st.objects[static_cast<size_t>(obj)];
  if (!xs.is_list() || xs.is_tuple()) return false;
  const auto& p = xs.list_ptr();
  const long others = p.use_count() - 1;
  if (others > 1 || (others == 1 && std::find(st.frame_lists.begin(), st.frame_lists.end(),
                                              p.get()) == st.frame_lists.end()))
    return false;
  if (const NumberList* n = xs.number_items()) return nlists_number_in_place(*n, i, item);
  const List& items = *p;
  if (!nlists_index(i, static_cast<int64_t>(items.size()))) return false;
  const Value& old = items[static_cast<size_t>(i)];
  return (item.k == Reg::PyInt && old.is_int()) || (item.k == Reg::PyFloat && old.is_float());
}

// The bytes of `v` placed in storage filled with `fill` first (what padding
// holds is then known).
std::vector<unsigned char> nlists_bytes(const Value& v, unsigned char fill) {
  alignas(Value) unsigned char buf[sizeof(Value)];
  std::memset(buf, fill, sizeof buf);
  auto* p = new (buf) Value(v);
  std::vector<unsigned char> out(buf, buf + sizeof buf);
  p->~Value();
  return out;
}

NativeValueLayout nlists_find_layout() {
  NativeValueLayout l;
  l.size = static_cast<int64_t>(sizeof(Value));
  const int64_t pattern = 0x0123456789abcdefLL;
  const std::vector<unsigned char> a = nlists_bytes(Value(pattern), 0x00);
  const std::vector<unsigned char> b = nlists_bytes(Value(pattern), 0xff);
  int found = 0;
  for (size_t at = 0; at + 8 <= a.size(); at += 8) {
    if (std::memcmp(&a[at], &pattern, 8) == 0 && std::memcmp(&b[at], &pattern, 8) == 0) {
      l.payload_at = static_cast<int64_t>(at);
      ++found;
    }
  }
  const double fpattern = 1.2345678901234567e-300;
  const std::vector<unsigned char> f = nlists_bytes(Value(fpattern), 0x5a);
  if (found != 1 || std::memcmp(&f[static_cast<size_t>(l.payload_at)], &fpattern, 8) != 0)
    return l;
  // The kind's byte: the same whatever the storage held, and the kind's
  // number, for every kind tried.
  const Value kinds[] = {Value(), Value(true), Value(pattern), Value(fpattern)};
  int kind_bytes = 0;
  for (size_t at = 0; at < a.size(); ++at) {
    if (at >= static_cast<size_t>(l.payload_at) && at < static_cast<size_t>(l.payload_at) + 8)
      continue;
    bool all = true;
    for (const Value& v : kinds) {
      const auto want = static_cast<unsigned char>(v.kind());
      all = all && nlists_bytes(v, 0x00)[at] == want && nlists_bytes(v, 0xff)[at] == want;
    }
    if (all) {
      l.kind_at = static_cast<int64_t>(at);
      ++kind_bytes;
    }
  }
  l.valid = kind_bytes == 1 && static_cast<int>(ValueKind::integer) < 256 &&
            static_cast<int>(ValueKind::floating) < 256;
  return l;
}

}  // namespace

const NativeValueLayout& native_value_layout() {
  static const NativeValueLayout layout = nlists_find_layout();
  return layout;
}

namespace {

// Row t[i] (a list or a tuple) of the list of lists at `obj`, or null.
const Value* nlists_row(const FastLoop::Impl::State& st, int64_t obj, int64_t i) {
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const Value& t = st.objects[static_cast<size_t>(obj)];
  if (!t.is_list()) return nullptr;
  const List& rows = t.as_list();
  if (!nlists_index(i, static_cast<int64_t>(rows.size()))) return nullptr;
  const Value& row = rows[static_cast<size_t>(i)];
  return row.is_list() ? &row : nullptr;
}

}  // namespace

extern "C" int32_t native_list2_get(NativeCtx* c, int64_t obj, int64_t i, int64_t j, int64_t kind,
                                    int64_t* out) {
  if (c->state == nullptr) return 1;
  const FastLoop::Impl::State& st = *c->state;
  if (kind == kNativeFlatMode || kind == kNativeFlatReadMode) {
    if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return 1;
    const Value& xs = st.objects[static_cast<size_t>(obj)];
    if (!xs.is_list() || (xs.is_tuple() && kind == kNativeFlatMode)) return 1;
    native_list_site(xs, out);
    return 0;
  }
  const Value* row = nlists_row(st, obj, i);
  if (row == nullptr) return 1;
  if (kind == kNativeRowMode || kind == kNativeReadRowMode) {
    if (row->is_tuple() && kind == kNativeRowMode) return 1;
    native_list_site(*row, out);
    return 0;
  }
  if (const NumberList* n = row->number_items()) {
    if (!nlists_index(j, static_cast<int64_t>(n->bits.size()))) return 1;
    const Reg r = native_number_reg(*n, static_cast<size_t>(j));
    if (r.k != kind) return 1;
    *out = r.i;
    return 0;
  }
  const List& items = row->as_list();
  if (!nlists_index(j, static_cast<int64_t>(items.size()))) return 1;
  return nlists_number(items[static_cast<size_t>(j)], kind, out) ? 0 : 1;
}

extern "C" int32_t native_list2_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                    int64_t obj, int64_t i, int64_t j, const Reg* item) {
  if (c->state == nullptr) return 1;
  FastLoop::Impl::State& st = *c->state;
  const bool ask = (r & kNativeInPlaceAsk) != 0;
  r &= ~kNativeInPlaceAsk;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size() ||
      nlists_aliased(held, nheld, r, obj))
    return 1;
  if (ask && nlists_in_place(st, obj, i, j, *item)) return 2;
  // A row held unboxed is written in place (above) or by the interpreter,
  // never written out here: bytes the call's log holds for it would be
  // restored into bits no one reads.
  if (const Value* row = nlists_row(st, obj, i); row != nullptr && row->number_items() != nullptr)
    return 1;
  // A DP row is written left to right: the row the last write made its own
  // (in this call, so since the checkpoint; native code makes no tuples, so
  // it is still a list) takes the next write without the log's checks.
  const Value& held_t = st.objects[static_cast<size_t>(obj)];
  if (c->owned_obj == obj && c->owned_row != nullptr && held_t.is_list() &&
      held_t.list_ptr().get() == c->owned_list && held_t.list_ptr().use_count() == 1) {
    List& rows = const_cast<List&>(held_t.as_list());
    int64_t ii = i;
    if (nlists_index(ii, static_cast<int64_t>(rows.size()))) {
      Value& row = rows[static_cast<size_t>(ii)];
      if (row.is_list() && row.list_ptr().get() == c->owned_row &&
          row.list_ptr().use_count() == 1) {
        List& items = const_cast<List&>(row.as_list());
        int64_t jj = j;
        if (!nlists_index(jj, static_cast<int64_t>(items.size()))) return 1;
        items[static_cast<size_t>(jj)] = FastLoop::Impl::to_value(*item, st);
        st.inline_ops += 2;
        return 0;
      }
    }
  }
  Value* t = nlists_list(st, obj);
  if (t == nullptr) return 1;
  // Checked before anything is logged or copied: a bail leaves no trace.
  const List& rows = t->as_list();
  int64_t ii = i;
  if (!nlists_index(ii, static_cast<int64_t>(rows.size()))) return 1;
  const Value& before = rows[static_cast<size_t>(ii)];
  if (!before.is_list() || before.is_tuple()) return 1;
  if (!nlists_index(j, static_cast<int64_t>(before.as_list().size()))) return 1;
  try {
    Value& row = FastLoop::Impl::own_list_item(static_cast<int32_t>(obj), Reg::make(Reg::PyInt, i),
                                               st);
    List* items = row.unique_list();
    if (items == nullptr) {
      row = Value(List(row.as_list()));
      items = row.unique_list();
    }
    (*items)[static_cast<size_t>(j)] = FastLoop::Impl::to_value(*item, st);
    st.inline_ops += 2;
    c->owned_obj = obj;
    c->owned_list = st.objects[static_cast<size_t>(obj)].list_ptr().get();
    c->owned_row = items;
    return 0;
  } catch (...) {
    return 1;
  }
}

extern "C" int32_t native_list_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, int64_t i, const Reg* item) {
  if (c->state == nullptr) return 1;
  FastLoop::Impl::State& st = *c->state;
  const bool ask = (r & kNativeInPlaceAsk) != 0;
  r &= ~kNativeInPlaceAsk;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size() ||
      nlists_aliased(held, nheld, r, obj))
    return 1;
  if (ask && nlists_flat_in_place(st, obj, i, *item)) return 2;
  // As native_list2_set: a list held unboxed is not written out here.
  if (st.objects[static_cast<size_t>(obj)].number_items() != nullptr) return 1;
  const Value& held_xs = st.objects[static_cast<size_t>(obj)];
  if (c->owned_obj == obj && c->owned_row == nullptr && held_xs.is_list() &&
      held_xs.list_ptr().get() == c->owned_list && held_xs.list_ptr().use_count() == 1) {
    List& items = const_cast<List&>(held_xs.as_list());
    if (!nlists_index(i, static_cast<int64_t>(items.size()))) return 1;
    items[static_cast<size_t>(i)] = FastLoop::Impl::to_value(*item, st);
    ++st.inline_ops;
    return 0;
  }
  Value* xs = nlists_list(st, obj);
  if (xs == nullptr) return 1;
  int64_t ii = i;
  if (!nlists_index(ii, static_cast<int64_t>(xs->as_list().size()))) return 1;
  try {
    Value v = FastLoop::Impl::to_value(*item, st);
    FastLoop::Impl::own_list_item(static_cast<int32_t>(obj), Reg::make(Reg::PyInt, i), st) =
        std::move(v);
    ++st.inline_ops;
    c->owned_obj = obj;
    c->owned_list = st.objects[static_cast<size_t>(obj)].list_ptr().get();
    c->owned_row = nullptr;
    return 0;
  } catch (...) {
    return 1;
  }
}

extern "C" int64_t native_str_byte(NativeCtx* c, int64_t obj, int64_t i) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return -1;
  const auto o = static_cast<size_t>(obj);
  const Value& v = st.objects[o];
  if (!v.is_string()) return -1;
  const std::string& text = v.as_string();
  int8_t& ascii = st.object_ascii[o];
  if (ascii < 0) {  // as string_item (fastloop_objects.cpp) caches it
    ascii = 1;
    for (char ch : text) ascii &= static_cast<unsigned char>(ch) < 0x80;
  }
  if (!ascii || !nlists_index(i, static_cast<int64_t>(text.size()))) return -1;
  return static_cast<unsigned char>(text[static_cast<size_t>(i)]);
}

extern "C" int64_t native_seq_len(NativeCtx* c, int64_t obj) {
  if (c->state != nullptr && obj >= 0 && static_cast<size_t>(obj) < c->state->objects.size() &&
      c->state->objects[static_cast<size_t>(obj)].is_string())
    return native_str_byte(c, obj, 0) >= 0 || c->state->objects[static_cast<size_t>(obj)]
                                                   .as_string()
                                                   .empty()
               ? static_cast<int64_t>(c->state->objects[static_cast<size_t>(obj)].as_string().size())
               : -1;
  return native_container_len(c, obj);  // a list's or a dict's
}

extern "C" int64_t native_list2_len(NativeCtx* c, int64_t obj, int64_t i) {
  if (c->state == nullptr) return -1;
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return -1;
  const Value& t = st.objects[static_cast<size_t>(obj)];
  if (!t.is_list() || !nlists_index(i, static_cast<int64_t>(t.list_size()))) return -1;
  if (t.number_items() != nullptr) return -1;  // numbers have no len()
  const Value& item = t.as_list()[static_cast<size_t>(i)];
  if (item.is_list()) return static_cast<int64_t>(item.list_size());
  if (!item.is_string()) return -1;
  for (char ch : item.as_string())
    if (static_cast<unsigned char>(ch) >= 0x80) return -1;  // len() counts characters
  return static_cast<int64_t>(item.as_string().size());
}

int native_table_kind(const Value& v) {
  if (!v.is_list() || v.number_items() != nullptr || v.as_list().empty()) return -1;
  const Value& row = v.as_list().front();
  if (!row.is_list() || row.list_size() == 0) return -1;
  if (const NumberList* n = row.number_items()) return native_number_reg(*n, 0).k;
  Reg first;
  if (!FastLoop::Impl::scalar_of(row.as_list().front(), first)) return -1;
  return first.k;
}

}  // namespace tessera
