// Lists built by comprehensions and concatenation in native loops
// (native_comprehensions.hpp).
#include "tessera/lang/native_comprehensions.hpp"

#include <algorithm>
#include <bit>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_dicts.hpp"

namespace tessera {

namespace {

// The list at object index `obj` (not a tuple), or nullptr.
const List* plain_list(const FastLoop::Impl::State& st, int64_t obj) {
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  if (!v.is_list() || v.is_tuple()) return nullptr;
  return &v.as_list();
}

}  // namespace

extern "C" int64_t native_list_concat(NativeCtx* c, int64_t a, int64_t b) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  const List* x = plain_list(st, a);
  const List* y = plain_list(st, b);
  if (x == nullptr || y == nullptr) return -1;
  try {
    List out;
    out.reserve(x->size() + y->size());
    out.insert(out.end(), x->begin(), x->end());
    out.insert(out.end(), y->begin(), y->end());
    const int32_t at = FastLoop::Impl::place_object(Value(std::move(out)), st);
    ++st.made;  // a sweep between turns releases the lists let go of
    return at;
  } catch (...) {
    return -1;
  }
}

extern "C" int64_t native_plain_list_len(NativeCtx* c, int64_t obj) {
  if (c->state == nullptr) return -1;
  const List* x = plain_list(*c->state, obj);
  return x == nullptr ? -1 : static_cast<int64_t>(x->size());
}

extern "C" int64_t* native_comp_room(NativeCtx* c, int64_t site, int64_t need, int64_t* room) {
  if (c->log == nullptr || site < 0 || need < 0) return nullptr;
  try {
    auto& all = c->log->comp_items;
    if (all.size() <= static_cast<size_t>(site)) all.resize(static_cast<size_t>(site) + 1);
    std::vector<int64_t>& items = all[static_cast<size_t>(site)];
    if (items.size() < static_cast<size_t>(need))
      items.resize(std::max<size_t>({static_cast<size_t>(need), 2 * items.size(), 64}));
    *room = static_cast<int64_t>(items.size());
    return items.data();
  } catch (...) {
    return nullptr;
  }
}

extern "C" int32_t native_comp_put(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, int64_t kind, const int64_t* items, int64_t n) {
  if (c->state == nullptr) return 1;
  FastLoop::Impl::State& st = *c->state;
  if (plain_list(st, obj) == nullptr || native_held_elsewhere(held, nheld, r, obj)) return 1;
  if (n == 0) return 0;
  try {
    const auto item = [&](int64_t k) {
      return FastLoop::Impl::to_value(Reg::make(static_cast<Reg::Kind>(kind), items[k]), st);
    };
    // The first through the interpreter's append (its log, its copy of a
    // list held elsewhere); the list is then its own, so the rest go on
    // its end directly, as the next appends would.
    const auto o = static_cast<int32_t>(obj);
    Value& held_list = st.objects[static_cast<size_t>(o)];
    int64_t from = 0;
    // A list made since the checkpoint (the comprehension's `acc = []` in
    // this turn), empty and its own: the items go in directly (a roll-back
    // drops the list whole). Through list_push, the first item would make
    // it a NumberList written out at once by unique_list().
    const bool fresh = st.object_epoch[static_cast<size_t>(o)] == st.epoch &&
                       held_list.number_items() == nullptr && held_list.list_size() == 0;
    if (!fresh) {
      if (!FastLoop::Impl::list_push(st, o, item(0))) return 1;
      from = 1;
    }
    List* list = st.objects[static_cast<size_t>(o)].unique_list();
    if (list == nullptr) return 1;
    list->reserve(list->size() + static_cast<size_t>(n - from));
    // Python's ints and floats made where they go (no Value moved).
    if (kind == Reg::PyInt) {
      for (int64_t k = from; k < n; ++k) list->emplace_back(items[k]);
    } else if (kind == Reg::PyFloat) {
      for (int64_t k = from; k < n; ++k) list->emplace_back(std::bit_cast<double>(items[k]));
    } else {
      for (int64_t k = from; k < n; ++k) list->push_back(item(k));
    }
    return 0;
  } catch (...) {
    return 1;
  }
}

extern "C" int32_t native_list_append_list(NativeCtx* c, const int32_t* held, int64_t nheld,
                                           int64_t r, int64_t obj, int64_t item) {
  if (c->state == nullptr) return 1;
  FastLoop::Impl::State& st = *c->state;
  if (plain_list(st, obj) == nullptr || plain_list(st, item) == nullptr || item == obj ||
      native_held_elsewhere(held, nheld, r, obj))
    return 1;
  try {
    // The item's list itself, not a copy: a row of a table is an object of
    // its own in Python. The code appends only lists nothing else refers to
    // (a comprehension's list the next turn replaces, a display, a `+`), as
    // the interpreter's append.
    const Value row = st.objects[static_cast<size_t>(item)];
    return FastLoop::Impl::list_push(st, static_cast<int32_t>(obj), row) ? 0 : 1;
  } catch (...) {
    return 1;
  }
}

}  // namespace tessera
