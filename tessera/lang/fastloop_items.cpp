// The scalar loop fast path's element and item operations
// (fastloop_impl.hpp): x[i...] reads and writes of arrays, lists and dicts
// (nested ones in place), the lists and dicts a run makes its own for its
// roll-back, new lists and dicts, append, astype, and calls of primitives.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_number_lists.hpp"
#include "tessera/lang/native_calls.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/primitives/text.hpp"

namespace tessera {

Reg FastLoop::Impl::getitem(const FNode& n, State& st) const {
  if (n.kids.size() == 2 && n.kids[0].op == Op::GetItem && n.kids[0].kids.size() == 2)
    return nested_getitem(n, st);
  return getitem_of(n, eval(n.kids[0], st), st);
}

// c[i][j] with c a list (or tuple) in an object register: its item c[i] read
// in place, not placed as an object of its own at every read (a table's
// row: `d[i - 1][j] + 1` filled the table of objects in a few hundred turns).
Reg FastLoop::Impl::nested_getitem(const FNode& n, State& st) const {
  const FNode& in = n.kids[0];
  const Reg c = eval(in.kids[0], st);
  if (c.k != Reg::Obj) {
    const Reg x = getitem_of(in, c, st);
    ++st.counts[in.counter];
    return getitem_of(n, x, st);
  }
  const Reg i = eval(in.kids[1], st);
  const Value& cv = st.objects[static_cast<size_t>(c.a)];
  if (!cv.is_list() || !i.int_payload()) {
    const Reg x = getitem_general(in, c, &i, 1, st);
    ++st.counts[in.counter];
    return getitem_of(n, x, st);
  }
  const List& items = cv.as_list();
  const auto len = static_cast<int64_t>(items.size());
  const int64_t j = i.i < 0 ? i.i + len : i.i;
  if (j < 0 || j >= len) throw BAIL;  // the IndexError is the general path's
  const Value& row = items[static_cast<size_t>(j)];
  ++st.counts[in.counter];
  if (row.is_list()) {
    const Reg k = eval(n.kids[1], st);
    if (k.int_payload() && row.number_items() != nullptr) {
      const auto rlen = static_cast<int64_t>(row.list_size());
      const int64_t kk = k.i < 0 ? k.i + rlen : k.i;
      if (kk < 0 || kk >= rlen) throw BAIL;
      return native_number_reg(*row.number_items(), static_cast<size_t>(kk));
    }
    if (k.int_payload()) {
      const List& r = row.as_list();
      const auto rlen = static_cast<int64_t>(r.size());
      const int64_t kk = k.i < 0 ? k.i + rlen : k.i;
      if (kk < 0 || kk >= rlen) throw BAIL;
      return to_reg(r[static_cast<size_t>(kk)], st);
    }
    return getitem_general(n, to_reg(row, st), &k, 1, st);
  }
  return getitem_of(n, to_reg(row, st), st);
}

Reg FastLoop::Impl::getitem_of(const FNode& n, const Reg& x, State& st) const {
  const size_t nidx = n.kids.size() - 1;
  Reg idx[kMaxDims];
  size_t done = 0;  // index operands evaluated into idx
  if (x.k == Reg::Arr && nidx > 0 && nidx <= static_cast<size_t>(kMaxDims)) {
    // x[i, j] of ints: the element, read here.
    bool ints = true;
    for (; done < nidx && ints; ++done) {
      idx[done] = eval(n.kids[done + 1], st);
      ints = idx[done].int_payload();
    }
    const ArrEntry& e = st.arrays[x.a];
    if (n.cpart) {
      // A part of an element of a complex128 array (fastloop_complex.cpp).
      if (!ints || !e.indexable || static_cast<size_t>(e.nd) != nidx ||
          e.dt != DType::complex128)
        throw BAIL;
      int64_t off = 0;
      for (size_t k = 0; k < nidx; ++k) {
        int64_t j = idx[k].i < 0 ? idx[k].i + e.shape[k] : idx[k].i;
        if (j < 0 || j >= e.shape[k]) throw BAIL;  // the IndexError is the general path's
        off += j * e.strides[k];
      }
      const double* parts = reinterpret_cast<const double*>(e.base);
      return Reg::real(Reg::NpFloat, parts[2 * off + n.cpart - 1]);
    }
    if (ints && e.indexable && static_cast<size_t>(e.nd) == nidx &&
        (e.dt == DType::float64 || e.dt == DType::int64 || e.dt == DType::bool_ ||
         e.dt == DType::float32 || int_kind_of(e.dt) != Reg::Undef)) {
      int64_t off = 0;
      for (size_t k = 0; k < nidx; ++k) {
        int64_t j = idx[k].i < 0 ? idx[k].i + e.shape[k] : idx[k].i;
        if (j < 0 || j >= e.shape[k]) throw BAIL;  // the IndexError is the general path's
        off += j * e.strides[k];
      }
      // The element (a 0-d own value in the general evaluation).
      switch (e.dt) {
        case DType::float64:
          return Reg::real(Reg::NpFloat, reinterpret_cast<const double*>(e.base)[off]);
        case DType::int64:
          return Reg::make(Reg::NpInt, reinterpret_cast<const int64_t*>(e.base)[off]);
        case DType::float32:
          return Reg::real(Reg::NpF32, reinterpret_cast<const float*>(e.base)[off]);
        case DType::bool_:
          return Reg::boolean(Reg::NpBool, reinterpret_cast<const bool*>(e.base)[off]);
        default:  // int32 and the narrower ints
          return narrow_int_element(e.dt, e.base, off);
      }
    }
  }
  if (x.k == Reg::Obj && nidx == 1) {
    // xs[i] of a list or tuple and an int: the item, read here (the
    // primitive's argument binding scanned the whole list).
    idx[0] = eval(n.kids[1], st);
    done = 1;
    const Value& v = st.objects[static_cast<size_t>(x.a)];
    if (const NumberList* nl = v.number_items(); nl != nullptr && idx[0].int_payload()) {
      // An item of a list held unboxed, not written out as Values.
      const auto len = static_cast<int64_t>(nl->bits.size());
      const int64_t j = idx[0].i < 0 ? idx[0].i + len : idx[0].i;
      if (j < 0 || j >= len) throw BAIL;
      return native_number_reg(*nl, static_cast<size_t>(j));
    }
    if (v.is_list() && idx[0].int_payload()) {
      const List& items = v.as_list();
      const auto len = static_cast<int64_t>(items.size());
      const int64_t j = idx[0].i < 0 ? idx[0].i + len : idx[0].i;
      if (j < 0 || j >= len) throw BAIL;  // the IndexError is the general path's
      return to_reg(items[static_cast<size_t>(j)], st);
    }
    // d[k] of a dict, s[i] of an ASCII string (fastloop_objects.cpp).
    if (Reg r; dict_item(x, idx, 1, st, r) || string_item(x, idx[0], st, r)) return r;
  } else if (x.k == Reg::Obj && nidx > 1 && nidx <= static_cast<size_t>(kMaxDims) &&
             st.objects[static_cast<size_t>(x.a)].is_dict()) {
    // d[i, j]: a tuple key.
    for (; done < nidx; ++done) idx[done] = eval(n.kids[done + 1], st);
    if (Reg r; dict_item(x, idx, nidx, st, r)) return r;
  }
  return getitem_general(n, x, idx, done, st);
}

Reg FastLoop::Impl::getitem_general(const FNode& n, const Reg& x, const Reg* idx, size_t done,
                                    State& st) const {
  // Other indexing (slices, rows, lists, other dtypes): the primitive itself,
  // with the operands evaluated so far and the rest.
  std::vector<Value> vals;
  vals.push_back(to_value(x, st));
  for (size_t k = 0; k < done; ++k) vals.push_back(to_value(idx[k], st));
  for (size_t k = done + 1; k < n.kids.size(); ++k)
    vals.push_back(to_value(eval(n.kids[k], st), st));
  count_general(vals, st);
  Value r;
  try {
    r = n.call->compute(vals);
  } catch (...) {
    throw BAIL;
  }
  --st.counts[n.counter];  // compute() counted it; eval adds one for every getitem
  return to_reg(std::move(r), st);
}

Reg FastLoop::Impl::setitem(const FNode& n, State& st) const {
  Reg x = eval(n.kids[0], st);
  if (x.k == Reg::Obj && is_nested_write(n)) return nested_setitem(n, x, st);
  Reg v = eval(n.kids[1], st);
  const size_t nidx = n.kids.size() - 2;
  if (x.k == Reg::Obj) return object_setitem(n, x, v, st);
  if (x.k != Reg::Arr || !v.scalar() || !element_index(n, st, x)) {
    // Slices, masks, array values: setitem itself, after a snapshot.
    if (x.k != Reg::Arr || v.k == Reg::Undef) throw BAIL;
    std::vector<Value> vals{to_value(x, st), to_value(v, st)};
    for (size_t k = 2; k < n.kids.size(); ++k) vals.push_back(to_value(eval(n.kids[k], st), st));
    Reg r = call_values(n, vals, st);
    --st.counts[n.counter];  // compute() counted it; eval adds one for every setitem
    return r;
  }
  int64_t off = 0;
  {
    const ArrEntry& e = st.arrays[x.a];
    if (!e.indexable || !e.writable || static_cast<size_t>(e.nd) != nidx || is_complex(e.dt)) {
      throw BAIL;
    }
  }
  for (size_t k = 0; k < nidx; ++k) {
    Reg i = eval(n.kids[k + 2], st);
    if (!i.int_payload()) throw BAIL;
    const ArrEntry& e = st.arrays[x.a];
    int64_t j = i.i < 0 ? i.i + e.shape[k] : i.i;
    if (j < 0 || j >= e.shape[k]) throw BAIL;
    off += j * e.strides[k];
  }
  const ArrEntry& e = st.arrays[x.a];
  const bool float_value = v.float_payload();
  // NaN or infinity into integers, and numbers an integer dtype cannot hold
  // (store_fits), are errors the general evaluation reports.
  if (float_value && !std::isfinite(v.f) && !is_inexact(e.dt) && e.dt != DType::bool_) throw BAIL;
  if (!store_fits(v, e.dt)) throw BAIL;
  const size_t es = dtype_size(e.dt);
  char* p = e.base + off * static_cast<int64_t>(es);
  st.arrays[static_cast<size_t>(x.a)].written = st.epoch;  // kept for a roll-back
  State::Undo u;
  u.arr = x.a;
  u.offset = off * static_cast<int64_t>(es);
  u.size = static_cast<uint8_t>(es);
  std::memcpy(u.old, p, es);
  st.undo.push_back(u);
  dispatch_all(e.dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = reinterpret_cast<T*>(p);
    switch (v.k) {
      case Reg::PyBool:
      case Reg::NpBool:
        *dst = element_cast<T>(v.b);
        break;
      case Reg::PyInt:
      case Reg::NpInt:
      case Reg::NpI32:
      case Reg::NpI8:
      case Reg::NpU8:
      case Reg::NpI16:
      case Reg::NpU16:
      case Reg::NpU32:
        *dst = element_cast<T>(v.i);
        break;
      default:
        *dst = element_cast<T>(v.f);
        break;
    }
  });
  return x;
}

bool FastLoop::Impl::element_index(const FNode& n, const State& st, const Reg& x) {
  const size_t nidx = n.kids.size() - 2;
  const ArrEntry& e = st.arrays[x.a];
  if (!e.indexable || static_cast<size_t>(e.nd) != nidx) return false;
  for (size_t k = 0; k < nidx; ++k) {
    const FNode& i = n.kids[k + 2];
    Reg::Kind kind = Reg::Undef;
    if (i.op == Op::Const)
      kind = i.constant.k;
    else if (i.op == Op::Var)
      kind = st.regs[i.reg].k;
    else if (i.op == Op::Binary || i.op == Op::AsType)
      kind = Reg::PyInt;  // evaluated below
    else
      return false;
    if (kind != Reg::PyInt && kind != Reg::NpInt && !narrow_int_kind(kind)) return false;
  }
  return true;
}

// Item k of the list at object slot `slot`, the list made this run's own
// (its whole value before logged once per checkpoint, so a roll-back puts
// it back with the items it held then); a bail for what the general path
// reports (an index that is not an int, out of range).
Value& FastLoop::Impl::own_list_item(int32_t slot, const Reg& k, State& st) {
  const auto o = static_cast<size_t>(slot);
  if (!k.int_payload()) throw BAIL;
  Value& held = st.objects[o];
  const auto len = static_cast<int64_t>(held.as_list().size());
  const int64_t j = k.i < 0 ? k.i + len : k.i;
  if (j < 0 || j >= len) throw BAIL;  // the general path's IndexError
  const bool fresh = st.object_epoch[o] == st.epoch && held.unique_list();
  if (!fresh && std::find(st.snapshot_lists.begin(), st.snapshot_lists.end(), slot) ==
                    st.snapshot_lists.end()) {
    // Its whole value now goes back on a roll-back (after the appends'
    // cut, newest first: the items written since are undone too).
    st.list_undo.push_back({slot, -2, held});
    st.snapshot_lists.push_back(slot);
    if (st.object_logged[o] != st.epoch) {
      st.object_logged[o] = st.epoch;
      st.logged_objects.push_back(slot);
    }
  }
  List* items = held.unique_list();
  if (!items) {
    held = Value(List(held.as_list()));
    items = held.unique_list();
  }
  return (*items)[static_cast<size_t>(j)];
}

// The dict at object slot `slot`, made this run's own before `key` is
// written: changed in place, as a list's append: made since the checkpoint
// (a roll-back drops it), or with its changes since logged as its length
// then (the keys added since are cut) and the value before of each key it
// had that is written; a dict held elsewhere too (the frame's variable) is
// copied once, the one before kept whole.
Dict& FastLoop::Impl::own_dict(int32_t slot, const Value& key, State& st) {
  const auto o = static_cast<size_t>(slot);
  Value& held = st.objects[o];
  Dict* d = held.unique_dict();
  const bool fresh = d && st.object_epoch[o] == st.epoch;
  const bool whole_kept = std::find(st.snapshot_lists.begin(), st.snapshot_lists.end(), slot) !=
                          st.snapshot_lists.end();
  if (!d || (!fresh && !whole_kept)) {
    if (st.object_logged[o] != st.epoch) {
      st.object_logged[o] = st.epoch;
      st.logged_objects.push_back(slot);
      if (d) st.list_undo.push_back({slot, static_cast<int64_t>(d->items.size()), Value()});
    }
    if (!d) {
      st.list_undo.push_back({slot, -2, held});
      st.snapshot_lists.push_back(slot);
      held = Value(Dict(held.as_dict()));
      d = held.unique_dict();
    } else if (const std::ptrdiff_t pos = d->position(key); pos >= 0) {
      // By position and a copy: a compact dict is not written out as Values.
      st.list_undo.push_back({slot, State::kDictItemUndo - static_cast<int64_t>(pos),
                              d->value_at(static_cast<size_t>(pos))});
    }
  }
  return *d;
}

// A dict key from register k as the general path makes it (a bail for any
// other kind of key, and for what it reports).
Value FastLoop::Impl::dict_key(const Reg& k, const char* op, State& st) {
  if (!k.scalar() && !(k.k == Reg::Obj && st.objects[static_cast<size_t>(k.a)].is_string()))
    throw BAIL;
  try {
    return python_dict_key(to_value(k, st), op);
  } catch (...) {
    throw BAIL;  // the general path raises it at the user's line
  }
}

Reg FastLoop::Impl::object_setitem(const FNode& n, const Reg& x, const Reg& v,
                                   State& st) const {
  const auto o = static_cast<size_t>(x.a);
  const bool is_list = st.objects[o].is_list() && !st.objects[o].is_tuple();
  const size_t nidx = n.kids.size() - 2;
  if (!n.in_place || v.k == Reg::Undef || !(is_list || st.objects[o].is_dict()) ||
      (is_list && nidx != 1) || nidx > static_cast<size_t>(kMaxDims))
    throw BAIL;
  // Another register holding the same object would see the change (Python's
  // aliasing): left to the general path.
  for (size_t r = 0; r < st.regs.size(); ++r) {
    if (static_cast<int>(r) != n.kids[0].reg && st.regs[r].k == Reg::Obj && st.regs[r].a == x.a)
      throw BAIL;
  }
  Reg idx[kMaxDims];
  for (size_t k = 0; k < nidx; ++k) idx[k] = eval(n.kids[k + 2], st);
  const Reg& k = idx[0];
  if (is_list) {
    Value item = to_value(v, st);
    own_list_item(x.a, k, st) = std::move(item);
    ++st.inline_ops;
    return x;
  }
  // d[i, j] = v: a tuple key (`pairs.add((a, b))`, `grid[x, y] = c`).
  Value key;
  if (nidx == 1) {
    key = dict_key(k, "setitem", st);
  } else if (!key_of(idx, nidx, st, key)) {
    throw BAIL;
  }
  Value item = to_value(v, st);
  own_dict(x.a, key, st).set(std::move(key), std::move(item));
  ++st.inline_ops;
  return x;
}

// `c[i][j] = v` (`c = setitem(c, setitem(c[i], v, j), i)`, the same i) of a
// list or dict c in an object register whose item c[i] is a list or dict:
// the item changed in place in c, made c's own first (c logged as above;
// an item shared with what was logged, or with anything else, is copied
// before it changes, so a roll-back finds the one before). Before, the
// inner setitem left the loop to the general path, which copied the item
// (a row of a dynamic-programming table) at every write.
Reg FastLoop::Impl::nested_setitem(const FNode& n, const Reg& x, State& st) const {
  const FNode& inner = n.kids[1];
  const auto o = static_cast<size_t>(x.a);
  const bool is_list = st.objects[o].is_list() && !st.objects[o].is_tuple();
  if (!is_list && !st.objects[o].is_dict()) throw BAIL;
  for (size_t r = 0; r < st.regs.size(); ++r) {
    if (static_cast<int>(r) != n.kids[0].reg && st.regs[r].k == Reg::Obj && st.regs[r].a == x.a)
      throw BAIL;
  }
  const Reg v = eval(inner.kids[1], st);  // Python's order: the value, then the targets
  if (v.k == Reg::Undef) throw BAIL;
  const Reg ki = eval(n.kids[2], st);
  const Reg kj = eval(inner.kids[2], st);
  Value* item;
  if (is_list) {
    item = &own_list_item(x.a, ki, st);
  } else {
    const Value key = dict_key(ki, "getitem", st);
    if (st.objects[o].as_dict().position(key) < 0) throw BAIL;  // the general path's KeyError
    Dict& d = own_dict(x.a, key, st);
    item = const_cast<Value*>(d.find(key));
  }
  if (item->is_list() && !item->is_tuple()) {
    if (!kj.int_payload()) throw BAIL;
    const auto len = static_cast<int64_t>(item->as_list().size());
    const int64_t j = kj.i < 0 ? kj.i + len : kj.i;
    if (j < 0 || j >= len) throw BAIL;
    List* row = item->unique_list();
    if (!row) {
      *item = Value(List(item->as_list()));
      row = item->unique_list();
    }
    (*row)[static_cast<size_t>(j)] = to_value(v, st);
  } else if (item->is_dict()) {
    Value key = dict_key(kj, "setitem", st);
    Dict* row = item->unique_dict();
    if (!row) {
      *item = Value(Dict(item->as_dict()));
      row = item->unique_dict();
    }
    row->set(std::move(key), to_value(v, st));
  } else {
    throw BAIL;  // an array, a tuple (its TypeError), a string: the general path's
  }
  ++st.counts[inner.counter];
  ++st.counts[inner.kids[0].counter];
  st.inline_ops += 2;
  return x;
}

// The write `nested_setitem` takes: `c = setitem(c, setitem(getitem(c, i), v, j), i)`.
bool FastLoop::Impl::is_nested_write(const FNode& n) {
  if (!n.in_place || n.kids.size() != 3 || n.kids[1].op != Op::SetItem) return false;
  const FNode& inner = n.kids[1];
  if (inner.kids.size() != 3 || inner.kids[0].op != Op::GetItem) return false;
  const FNode& read = inner.kids[0];
  return read.kids.size() == 2 && read.kids[0].op == Op::Var && read.kids[0].reg == n.kids[0].reg &&
         same_pure(read.kids[1], n.kids[2]) && inner.counter >= 0 && read.counter >= 0;
}

bool FastLoop::Impl::same_pure(const FNode& a, const FNode& b) {
  if (a.op != b.op || a.kids.size() != b.kids.size()) return false;
  switch (a.op) {
    case Op::Var:
      return a.reg == b.reg;
    case Op::Const:
      return (a.constant.k == Reg::PyInt || a.constant.k == Reg::NpInt) &&
             a.constant.k == b.constant.k && a.constant.i == b.constant.i;
    case Op::Binary:
      if (a.fast != b.fast || a.spec != b.spec) return false;
      for (size_t k = 0; k < a.kids.size(); ++k)
        if (!same_pure(a.kids[k], b.kids[k])) return false;
      return true;
    default:
      return false;
  }
}

Reg FastLoop::Impl::new_list(const FNode& n, State& st) const {
  List items;
  items.reserve(n.kids.size());
  for (const FNode& k : n.kids) {
    Reg r = eval(k, st);
    if (r.k == Reg::Undef) throw BAIL;
    items.push_back(to_value(r, st));
  }
  Reg r;
  r.k = Reg::Obj;
  r.i = 0;
  r.a = place_object(Value(std::move(items)), st);
  return r;
}

Reg FastLoop::Impl::new_dict(const FNode& n, State& st) const {
  Dict d;
  for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
    const Reg k = eval(n.kids[i], st);
    const Reg v = eval(n.kids[i + 1], st);
    if (k.k == Reg::Undef || v.k == Reg::Undef) throw BAIL;
    Value key = dict_key(k, "dict", st);
    d.set(std::move(key), to_value(v, st));
  }
  Reg r;
  r.k = Reg::Obj;
  r.i = 0;
  r.a = place_object(Value(std::move(d)), st);
  return r;
}

namespace {

bool flo_immutable_object(const Value& v) {
  if (v.is_string()) return true;
  if (!v.is_tuple()) return false;
  for (const Value& item : v.as_list())
    if (!item.is_string() && !item.is_bool() && !item.is_int() && !item.is_float()) return false;
  return true;
}

}  // namespace

Reg FastLoop::Impl::append(const FNode& n, State& st) const {
  Reg v = eval(n.kids[0], st);
  // Lists of lists and dicts: the general path's. A string or a tuple of
  // numbers and strings (Python's immutable values: nothing seen through
  // another name changes) is appended here (`sorted(pairs)`, words), and so
  // is a list just made by the item's own expression (`t.append([0] * n)`,
  // the rows of `[[0] * n for _ in range(m)]`): nothing else refers to it.
  // So is a list comprehension's list (`[[f(i, j) for j ...] for i ...]`):
  // block(acc = [], the loop appending to acc, acc), acc a hidden variable
  // the next turn assigns a new list before appending to it.
  const FNode& item = n.kids[0];
  const bool comprehension = item.op == Op::Block && item.kids.size() >= 2 &&
                             item.kids.front().op == Op::Assign &&
                             item.kids.front().kids.size() == 1 &&
                             item.kids.front().kids[0].op == Op::NewList &&
                             item.kids.back().op == Op::Var &&
                             item.kids.back().reg == item.kids.front().reg;
  const bool made_here = item.op == Op::NewList || item.op == Op::Binary || comprehension;
  if (v.k == Reg::Undef ||
      (v.k == Reg::Obj && !flo_immutable_object(st.objects[v.a]) &&
       !(made_here && st.objects[v.a].is_list() && !st.objects[v.a].is_tuple())))
    throw BAIL;
  const Reg x = st.regs[n.reg];
  if (x.k != Reg::Obj) throw BAIL;
  // Another register holding the same list would see the append (Python's
  // aliasing): left to the general path.
  for (size_t k = 0; k < st.regs.size(); ++k)
    if (static_cast<int>(k) != n.reg && st.regs[k].k == Reg::Obj && st.regs[k].a == x.a) throw BAIL;
  if (!list_push(st, x.a, to_value(v, st))) throw BAIL;
  st.assigned[n.reg] = 1;
  return x;
}

Reg FastLoop::Impl::call_native(const FNode& n, State& st) const {
  const Reg& f = st.regs[static_cast<size_t>(n.reg)];
  if (f.k != Reg::Obj) throw BAIL;
  const Value& fv = st.objects[static_cast<size_t>(f.a)];
  const Closure* closure =
      fv.is_function() ? dynamic_cast<const Closure*>(fv.as_function().get()) : nullptr;
  if (!closure) throw BAIL;
  // Numbers only (the code writes nothing), as the registers' payloads.
  const size_t na = n.kids.size();
  if (na > 7) throw BAIL;
  int64_t words[7];
  uint8_t kinds[7];
  Reg regs[7];
  bool lists = false;
  for (size_t i = 0; i < na; ++i) {
    const Reg a = regs[i] = eval(n.kids[i], st);
    if (a.k == Reg::Obj && st.objects[static_cast<size_t>(a.a)].is_list()) {
      lists = true;
      continue;
    }
    if (!a.scalar()) throw BAIL;
    kinds[i] = a.k;
    words[i] = a.k == Reg::PyBool || a.k == Reg::NpBool ? int64_t{a.b} : a.i;
  }
  if (lists) {
    // Lists of numbers too: the call from the general path's entry, which
    // copies them (nothing of the loop's objects is written, so a roll-back
    // has nothing of the call's to undo); the lists the function gives back
    // come as a new list(result, p, ...), taken apart by the loop's getitems.
    std::vector<Value> args;
    args.reserve(na);
    for (size_t i = 0; i < na; ++i) args.push_back(to_value(regs[i], st));
    Value out;
    if (!native_call(*closure, args, out)) throw BAIL;
    Reg r;
    if (out.is_list()) {
      r.k = Reg::Obj;
      r.i = 0;
      r.a = place_object(std::move(out), st);
      return r;
    }
    if (!scalar_of(out, r)) throw BAIL;
    return r;
  }
  int64_t w = 0;
  uint8_t ret = Reg::Undef;
  if (!native_call_words(*closure, kinds, na, words, w, ret)) throw BAIL;
  const auto k = static_cast<Reg::Kind>(ret);
  if (k == Reg::PyBool || k == Reg::NpBool) return Reg::boolean(k, w != 0);
  return Reg::make(k, w);  // a float's bits, as the payload holds them
}

bool FastLoop::Impl::list_push(State& st, int32_t obj, Value v) {
  const auto o = static_cast<size_t>(obj);
  Value& list = st.objects[o];
  if (!list.is_list() || list.is_tuple()) return false;
  // A Python number onto an empty list or one held unboxed: kept unboxed.
  if (Reg r; v.is_scalar() && (list.number_items() != nullptr || list.list_ptr()->empty()) &&
             scalar_of(v, r) && native_push_number(st, obj, r) == 0)
    return true;
  if (st.object_epoch[o] == st.epoch && list.unique_list()) {
    list.unique_list()->push_back(std::move(v));  // made since the checkpoint
    return true;
  }
  if (st.object_logged[o] != st.epoch) {
    // Its first change since the checkpoint: its length then (a roll-back
    // cuts it back), one entry however many appends follow.
    st.object_logged[o] = st.epoch;
    st.logged_objects.push_back(obj);
    st.list_undo.push_back({obj, static_cast<int64_t>(list.as_list().size()), Value()});
  }
  if (!list.unique_list()) {
    // Held elsewhere too (the frame's variable): a copy of its own, the one
    // before kept for a roll-back.
    Value copy{List(list.as_list())};
    st.list_undo.push_back({obj, -2, std::move(list)});
    list = std::move(copy);
  }
  list.unique_list()->push_back(std::move(v));
  return true;
}

Reg FastLoop::Impl::astype(const FNode& n, State& st) const {
  Reg v = eval(n.kids[0], st);
  if (!v.scalar()) throw BAIL;
  const bool strong = v.strong() || n.numpy_scalar;
  double f = v.float_payload()                            ? v.f
             : (v.k == Reg::PyBool || v.k == Reg::NpBool) ? (v.b ? 1.0 : 0.0)
                                                          : static_cast<double>(v.i);
  switch (n.cast_to) {
    case DType::float32:
      // An int past 2**53 is rounded once by NumPy's cast and twice through a
      // double: the general path's.
      if (v.int_payload() && (v.i > (int64_t{1} << 53) || v.i < -(int64_t{1} << 53))) throw BAIL;
      return Reg::real(Reg::NpF32, static_cast<double>(static_cast<float>(f)));
    case DType::int32: {
      // Values out of int32's range (NumPy's OverflowError of a Python int, a
      // wrap of NumPy's, NaN) go the general way.
      if (!(f >= -2147483648.0 && f < 2147483648.0)) throw BAIL;
      return Reg::make(Reg::NpI32, v.int_payload() ? v.i : static_cast<int64_t>(f));
    }
    case DType::int64: {
      int64_t i = v.int_payload() ? v.i : element_cast<int64_t>(f);
      return Reg::make(strong ? Reg::NpInt : Reg::PyInt, i);
    }
    case DType::float64:
      return Reg::real(strong ? Reg::NpFloat : Reg::PyFloat,
                       v.int_payload() ? static_cast<double>(v.i) : f);
    case DType::int8:
    case DType::uint8:
    case DType::int16:
    case DType::uint16:
    case DType::uint32: {
      // In the kind's range: exact (a float truncated, as NumPy's cast);
      // else the general path's (a Python int's OverflowError, NumPy's wrap
      // of its scalars, a float's warning).
      const Reg::Kind k = int_kind_of(n.cast_to);
      if (v.int_payload()) {
        if (!narrow_int_fits(k, v.i)) throw BAIL;
        return Reg::make(k, v.i);
      }
      const double t = std::trunc(f);
      if (!(t >= -2147483648.0 && t < 4294967296.0) || !narrow_int_fits(k, static_cast<int64_t>(t)))
        throw BAIL;
      return Reg::make(k, static_cast<int64_t>(t));
    }
    default:
      return Reg::boolean(strong ? Reg::NpBool : Reg::PyBool, truthy(v));
  }
}

Reg FastLoop::Impl::call(const FNode& n, State& st) const {
  if (n.obj_op != ObjOp::none && n.slot >= 0) return object_call(n, st);
  if (n.kids.size() == 1 && n.shape_items < 0 && !n.const_arg && n.spec->name == "item") {
    // x.item() of a number: Python's number of its value (NumPy's int32 and
    // float32 widen), read here.
    Reg r = eval(n.kids[0], st);
    if (r.scalar()) {
      if (n.slot >= 0) ++st.counts[static_cast<size_t>(n.slot)];
      if (r.k == Reg::PyBool || r.k == Reg::NpBool) return Reg::boolean(Reg::PyBool, r.b);
      if (r.int_payload()) return Reg::make(Reg::PyInt, r.i);
      return Reg::real(Reg::PyFloat, r.f);
    }
    if (!n.call || r.k == Reg::Undef) throw BAIL;
    std::vector<Value> vals{to_value(r, st)};
    return call_values(n, vals, st);
  }
  if (n.kids.size() == 1 && n.shape_items < 0 && !n.const_arg && n.spec->name == "len") {
    // len() of a list, dict, string or array, read here (a loop's `for x in
    // xs` asks it at every turn); counted in the node's slot, as native code does.
    const Reg r = eval(n.kids[0], st);
    int64_t len = -1;
    const Value* obj = r.k == Reg::Obj ? &st.objects[static_cast<size_t>(r.a)] : nullptr;
    if (obj && obj->is_list()) {
      len = static_cast<int64_t>(obj->list_size());
    } else if (obj && obj->is_dict()) {
      len = static_cast<int64_t>(obj->as_dict().items.size());
    } else if (obj && obj->is_string()) {
      len = utf8_length(obj->as_string());  // Python's: code points
    } else if (r.k == Reg::Arr) {
      const ArrEntry& e = st.arrays[static_cast<size_t>(r.a)];
      if (e.indexable && e.nd >= 1) len = e.shape[0];
    }
    if (len >= 0 && n.slot >= 0) {
      ++st.counts[static_cast<size_t>(n.slot)];
      return Reg::make(Reg::PyInt, len);
    }
    if (r.k == Reg::Undef) throw BAIL;
    std::vector<Value> vals{to_value(r, st)};
    return call_values(n, vals, st);
  }
  std::vector<Value> vals;
  vals.reserve(std::max(n.kids.size() + 1, n.spec->params.size()));
  if (n.reuse) {
    // The operands first, then their values: an array is given up (give())
    // only when no other operand is that array too (link() sets `reuse`
    // only for at most kMaxReuseKids operands).
    Reg regs[kMaxReuseKids];
    const size_t nk = n.kids.size();
    for (size_t i = 0; i < nk; ++i) {
      regs[i] = eval(n.kids[i], st);
      if (regs[i].k == Reg::Undef) throw BAIL;
    }
    for (size_t i = 0; i < nk; ++i) {
      bool shared = false;
      for (size_t j = 0; j < nk && regs[i].k == Reg::Arr; ++j)
        shared |= j != i && regs[j].k == Reg::Arr && regs[j].a == regs[i].a;
      vals.push_back(shared ? to_value(regs[i], st) : give(n, i, regs[i], st));
    }
  } else {
    for (const FNode& k : n.kids) {
      Reg r = eval(k, st);
      if (r.k == Reg::Undef) throw BAIL;
      vals.push_back(to_value(r, st));
    }
  }
  if (n.shape_items >= 0) {  // the shape's items into its tuple (or list)
    List items(std::vector<Value>(vals.begin(), vals.begin() + n.shape_items));
    vals.erase(vals.begin(), vals.begin() + n.shape_items);
    vals.insert(vals.begin(),
                n.shape_tuple ? Value::tuple(std::move(items)) : Value(std::move(items)));
  }
  if (n.const_arg) vals.push_back(*n.const_arg);
  return call_values(n, vals, st);
}

// A primitive the loop calls: an array operation (the loop may go the
// general way when those are most of its work, see run), or one on lists,
// dicts, strings and numbers (`k in d`, `d[k]`), which the general path
// would do no faster.
void FastLoop::Impl::count_general(const std::vector<Value>& vals, State& st) {
  for (const Value& v : vals) {
    if (v.is_array() || v.is_tiled()) {
      ++st.general_ops;
      return;
    }
  }
  ++st.inline_ops;
}

Reg FastLoop::Impl::call_values(const FNode& n, std::vector<Value>& vals, State& st) const {
  count_general(vals, st);
  if (n.spec->writes) {
    // The elements it may write, as they are now (small arrays only: a
    // large one goes the general way, where the copy would cost more than
    // the per-statement cost it saves).
    constexpr int64_t kMaxSnapshot = 1 << 16;
    if (vals.empty() || !vals[0].is_array()) throw BAIL;
    const Array& target = vals[0].as_array();
    if (target.size() > kMaxSnapshot || !target.writable()) throw BAIL;
    st.snapshots.emplace_back(target, target.copy());
    st.snapshot_elements += target.size();
    State::Undo u{};
    u.arr = -1;
    u.offset = static_cast<int64_t>(st.snapshots.size() - 1);
    st.undo.push_back(u);
  }
  Value r;
  try {
    r = n.call->compute(vals);
  } catch (...) {
    throw BAIL;
  }
  if (r.is_array() && r.as_array().size() >= kLargeResult) ++st.large_results;
  return to_reg(std::move(r), st);
}

}  // namespace tessera
