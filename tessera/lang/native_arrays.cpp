// Arrays made inside native loops (native_arrays.hpp).
#include "tessera/lang/native_arrays.hpp"

#include <algorithm>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_number_lists.hpp"
#include "tessera/lang/native_dicts.hpp"

namespace tessera {

namespace {

// What the primitive gives (its eval, without the call's argument binding
// and tiled fills: a few hundred ns a turn), or an empty value for what it
// would report (a negative extent) and what the loop may not hold (more
// than kMaxNewBytes).
Value make_directly(NativeAlloc op, const Reg* args, int64_t nargs, DType dt,
                    const FastLoop::Impl::State& st) {
  if (op == NativeAlloc::copy) return Value(st.arrays[static_cast<size_t>(args[0].a)].array.copy());
  Shape shape;
  if (op <= NativeAlloc::empty) {
    for (int64_t k = 0; k < nargs; ++k) shape.push_back(args[k].i);
  } else {
    const Array& x = st.arrays[static_cast<size_t>(args[0].a)].array;
    shape = x.shape();
    dt = x.dtype();
  }
  int64_t bytes = static_cast<int64_t>(dtype_size(dt));
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxNewBytes) return Value();
  Array out(dt, shape);
  const bool one = op == NativeAlloc::ones || op == NativeAlloc::ones_like;
  dispatch_all(dt, [&](auto tag) {  // np.zeros(n, dtype=np.uint8) too
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    std::fill(p, p + out.size(), element_cast<T>(one ? 1.0 : 0.0));
  });
  return Value(std::move(out));
}

}  // namespace

extern "C" int64_t native_alloc(NativeCtx* c, int64_t op, const Reg* args, int64_t nargs,
                                int64_t dt, int64_t nd, NativeArray* out) {
  // No interpreter state (a prange chunk: its workers share none): a bail,
  // and the loop runs as range.
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  // Everything thrown (the primitive's errors, Bail) stops here: the
  // generated code cannot unwind.
  try {
    Value made =
        make_directly(static_cast<NativeAlloc>(op), args, nargs, static_cast<DType>(dt), st);
    if (!made.is_array()) return -1;
    const Reg reg = FastLoop::Impl::to_reg(made, st);
    c->entries = st.arrays.data();
    if (reg.k != Reg::Arr) return -1;
    const ArrEntry& e = st.arrays[static_cast<size_t>(reg.a)];
    if (static_cast<int64_t>(e.dt) != dt || e.nd != nd || !e.indexable || !e.writable) return -1;
    out->base = e.base;
    for (int d = 0; d < e.nd; ++d) {
      out->shape[d] = e.shape[d];
      out->strides[d] = e.strides[d];
    }
    return reg.a;
  } catch (...) {
    c->entries = st.arrays.data();
    return -1;
  }
}

extern "C" int64_t native_row_view(NativeCtx* c, int64_t entry, int64_t offset, int64_t nidx) {
  if (c->state == nullptr || entry < 0) return -1;
  FastLoop::Impl::State& st = *c->state;
  try {
    if (static_cast<size_t>(entry) >= st.arrays.size()) return -1;
    const Array& x = st.arrays[static_cast<size_t>(entry)].array;
    const auto k = static_cast<size_t>(nidx);
    if (k > x.shape().size()) return -1;
    Shape shape(x.shape().begin() + static_cast<std::ptrdiff_t>(k), x.shape().end());
    std::vector<int64_t> strides = x.strides();
    strides.erase(strides.begin(), strides.begin() + static_cast<std::ptrdiff_t>(k));
    Value row(Array::view(x, std::move(shape), std::move(strides), x.offset() + offset));
    const Reg reg = FastLoop::Impl::to_reg(row, st);
    c->entries = st.arrays.data();
    return reg.k == Reg::Arr ? reg.a : -1;
  } catch (...) {
    c->entries = st.arrays.data();
    return -1;
  }
}

extern "C" void native_sweep(NativeCtx* c) {
  if (c->state == nullptr) return;
  FastLoop::Impl::State& st = *c->state;
  st.roots.push_back(&c->last);
  FastLoop::Impl::sweep(st);
  st.roots.pop_back();
}

extern "C" int64_t native_list_new(NativeCtx* c, const Reg* items, int64_t n) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  try {
    List list;
    list.reserve(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) list.push_back(FastLoop::Impl::to_value(items[k], st));
    const int32_t at = FastLoop::Impl::place_object(Value(std::move(list)), st);
    ++st.made;  // a sweep between turns releases the lists let go of
    return at;
  } catch (...) {
    return -1;
  }
}

extern "C" int32_t native_list_append(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                      int64_t obj, const Reg* item) {
  if (c->state == nullptr) return 1;
  FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return 1;
  if (native_held_elsewhere(held, nheld, r, obj)) return 1;
  try {
    // A number kept unboxed (a NumberList), no Value made for it.
    if (const int rc = native_push_number(st, static_cast<int32_t>(obj), *item); rc >= 0)
      return rc;
    return FastLoop::Impl::list_push(st, static_cast<int32_t>(obj),
                                     FastLoop::Impl::to_value(*item, st))
               ? 0
               : 1;
  } catch (...) {
    return 1;
  }
}

extern "C" int32_t native_list_get(NativeCtx* c, int64_t obj, int64_t i, int64_t kind, int64_t* out) {
  if (c->state == nullptr) return 1;
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return 1;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  if (!v.is_list()) return 1;
  if (const NumberList* n = v.number_items()) {
    const auto len = static_cast<int64_t>(n->bits.size());
    if (i < 0) i += len;
    if (i < 0 || i >= len) return 1;
    const Reg r = native_number_reg(*n, static_cast<size_t>(i));
    if (r.k != kind) return 1;
    *out = r.i;
    return 0;
  }
  const List& items = v.as_list();
  const auto len = static_cast<int64_t>(items.size());
  if (i < 0) i += len;
  if (i < 0 || i >= len) return 1;
  const Value& item = items[static_cast<size_t>(i)];
  if (kind == Reg::PyInt && item.is_int()) {  // the common case, without scalar_of's call
    *out = item.as_int();
    return 0;
  }
  Reg r;
  if (!FastLoop::Impl::scalar_of(item, r) || r.k != kind) return 1;
  *out = r.i;
  return 0;
}

extern "C" int64_t native_list_iterate(NativeCtx* c, int64_t obj) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return -1;
  Value v = st.objects[static_cast<size_t>(obj)];
  if (!v.is_list()) return -1;
  try {
    const int32_t at = FastLoop::Impl::place_object(std::move(v), st);
    ++st.made;
    return at;
  } catch (...) {
    return -1;
  }
}

extern "C" int64_t native_list_len(NativeCtx* c, int64_t obj) {
  if (c->state == nullptr) return -1;
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return -1;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  return v.is_list() ? static_cast<int64_t>(v.list_size()) : -1;
}

}  // namespace tessera
