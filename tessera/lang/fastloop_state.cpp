// The scalar loop fast path's registers and state (fastloop_impl.hpp):
// values into registers and back (arrays into entries of the state's
// table, Python's objects placed in its objects), objects released, and the
// state rolled back to a checkpoint, swept of what no register holds, and
// written back to the loop's frames.
#include <cstring>
#include <utility>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native_number_lists.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/random_stream.hpp"

namespace tessera {

namespace {

// An array value into an entry of st.arrays: `a` is copied or moved in
// (Ref: const Array& or Array&&).
template <class Ref>
Reg array_reg(Ref&& a, FastLoop::Impl::State& st) {
  if (st.free_arrays.empty() && st.arrays.size() >= kMaxArrays) throw BAIL;
  ArrEntry e{std::forward<Ref>(a)};  // not a default Array first: that allocates a 0-d buffer
  const Array& x = e.array;
  if (!st.loading_frame && x.use_count() <= 3 && !x.foreign()) {  // a buffer made in the loop
    e.own_bytes = static_cast<int64_t>(x.storage_bytes());
    st.new_bytes += e.own_bytes;
    if (st.new_bytes > kMaxNewBytes) throw BAIL;
  }
  e.base = static_cast<char*>(x.origin_raw());
  e.dt = x.dtype();
  e.nd = x.ndim();
  e.writable = x.writable();
  e.indexable = e.nd <= kMaxDims;
  if (e.indexable) {
    for (int k = 0; k < e.nd; ++k) e.shape[k] = x.dim(k);
    if (x.is_contiguous()) {  // C order's strides, without the vector strides() makes
      int64_t step = 1;
      for (int k = e.nd - 1; k >= 0; --k) {
        e.strides[k] = step;
        step *= e.shape[k];
      }
    } else {
      const std::vector<int64_t> s = x.strides();
      for (int k = 0; k < e.nd; ++k) e.strides[k] = s[k];
    }
  }
  Reg r;
  r.k = Reg::Arr;
  r.i = 0;
  if (!st.free_arrays.empty()) {
    r.a = st.free_arrays.back();
    st.free_arrays.pop_back();
    st.arrays[static_cast<size_t>(r.a)] = std::move(e);
  } else {
    st.arrays.push_back(std::move(e));
    r.a = static_cast<int32_t>(st.arrays.size() - 1);
  }
  ++st.made;
  return r;
}

// A 0-d array that is a strong scalar (an own value of these dtypes: a 0-d
// view or a NumPy array passed in stays an array, writes reach it), into
// `out`; false for any other array.
bool scalar_reg(const Array& a, Reg& out) {
  if (a.ndim() != 0 || a.foreign() || a.storage_bytes() != dtype_size(a.dtype())) return false;
  switch (a.dtype()) {
    case DType::float64:
      out = Reg::real(Reg::NpFloat, a.origin<double>()[0]);
      return true;
    case DType::int64:
      out = Reg::make(Reg::NpInt, a.origin<int64_t>()[0]);
      return true;
    case DType::float32:
      out = Reg::real(Reg::NpF32, a.origin<float>()[0]);
      return true;
    case DType::bool_:
      out = Reg::boolean(Reg::NpBool, a.origin<bool>()[0]);
      return true;
    default:
      if (int_kind_of(a.dtype()) != Reg::Undef) {  // int32 and the narrower ints
        out = narrow_int_element(a.dtype(), a.origin_raw(), 0);
        return true;
      }
      return false;
  }
}

}  // namespace

bool FastLoop::Impl::scalar_of(const Value& v, Reg& out) {
  if (v.is_bool()) {
    out = Reg::boolean(Reg::PyBool, v.as_bool());
  } else if (v.is_int()) {
    out = Reg::make(Reg::PyInt, v.as_int());
  } else if (v.is_float()) {
    out = Reg::real(Reg::PyFloat, v.as_float());
  } else {
    return v.is_array() && scalar_reg(v.as_array(), out);
  }
  return true;
}

Reg FastLoop::Impl::to_reg(const Value& v, State& st) {
  if (v.is_bool()) return Reg::boolean(Reg::PyBool, v.as_bool());
  if (v.is_int()) return Reg::make(Reg::PyInt, v.as_int());
  if (v.is_float()) return Reg::real(Reg::PyFloat, v.as_float());
  if (v.is_nil()) {
    Reg r;
    r.k = Reg::Nil;
    return r;
  }
  if (!v.is_array()) {
    Reg r;
    r.k = Reg::Obj;
    r.i = 0;
    r.a = place_object(v, st);
    return r;
  }
  Reg r;
  if (scalar_reg(v.as_array(), r)) return r;
  return array_reg(v.as_array(), st);
}

int32_t FastLoop::Impl::place_object(Value v, State& st) {
  ++st.objects_made;  // a sweep between turns releases the objects let go of
  if (!st.free_objects.empty()) {
    const int32_t i = st.free_objects.back();
    st.free_objects.pop_back();
    st.objects[static_cast<size_t>(i)] = std::move(v);
    st.object_epoch[static_cast<size_t>(i)] = st.epoch;
    st.object_logged[static_cast<size_t>(i)] = 0;
    st.object_ascii[static_cast<size_t>(i)] = -1;
    return i;
  }
  if (st.objects.size() >= kMaxArrays) throw BAIL;
  if (st.objects.capacity() == 0) {
    // Room for a few (a table's rows): not four vectors regrown one by one.
    constexpr size_t kFirstObjects = 16;
    st.objects.reserve(kFirstObjects);
    st.object_epoch.reserve(kFirstObjects);
    st.object_logged.reserve(kFirstObjects);
    st.object_ascii.reserve(kFirstObjects);
  }
  st.objects.push_back(std::move(v));
  st.object_epoch.resize(st.objects.size(), 0);
  st.object_logged.resize(st.objects.size(), 0);
  st.object_ascii.resize(st.objects.size(), -1);
  st.object_epoch.back() = st.epoch;
  return static_cast<int32_t>(st.objects.size() - 1);
}

Reg FastLoop::Impl::to_reg(Value&& v, State& st) {
  if (!v.is_array()) return to_reg(static_cast<const Value&>(v), st);
  Reg r;
  if (scalar_reg(v.as_array(), r)) return r;
  return array_reg(std::move(v.as_array()), st);
}

bool FastLoop::Impl::dying(const Reg& r, int owner, const State& st) {
  if (r.k != Reg::Arr) return false;
  const ArrEntry& e = st.arrays[static_cast<size_t>(r.a)];
  // A logged element write must stay restorable; a shared buffer (a view,
  // an argument the caller holds, a snapshot) is seen by others.
  if (e.released || e.written == st.epoch || !e.array.unique()) return false;
  auto refers = [&](const Reg& x) { return x.k == Reg::Arr && x.a == r.a; };
  for (size_t k = 0; k < st.regs.size(); ++k) {
    if (static_cast<int>(k) != owner && refers(st.regs[k])) return false;
  }
  for (const Reg& x : st.saved) {
    if (refers(x)) return false;
  }
  for (const Reg* x : st.roots) {
    if (refers(*x)) return false;
  }
  return true;
}

void FastLoop::Impl::release(State& st, int32_t index) {
  ArrEntry& e = st.arrays[static_cast<size_t>(index)];
  st.new_bytes -= e.own_bytes;
  e.own_bytes = 0;
  e.released = true;
  e.base = nullptr;
  { Array gone = std::move(e.array); }  // moved from: no 0-d buffer allocated in its place
  st.free_arrays.push_back(index);
}

Value FastLoop::Impl::give(const FNode& n, size_t i, const Reg& r, State& st) {
  if (i < 8 && ((n.reuse >> i) & 1)) {
    const FNode& k = n.kids[i];
    if (dying(r, k.op == Op::Var ? k.reg : -1, st)) {
      Value v(std::move(st.arrays[static_cast<size_t>(r.a)].array));
      release(st, r.a);
      return v;
    }
  }
  return to_value(r, st);
}

Value FastLoop::Impl::to_value(const Reg& r, const State& st) {
  switch (r.k) {
    case Reg::PyBool:
      return Value(r.b);
    case Reg::PyInt:
      return Value(r.i);
    case Reg::PyFloat:
      return Value(r.f);
    case Reg::NpBool:
      return Value(Array::scalar_bool(r.b));
    case Reg::NpInt:
      return Value(Array::scalar_int(r.i));
    case Reg::NpFloat:
      return Value(Array::scalar(r.f));
    case Reg::NpF32:
      return Value(Array::scalar(r.f, DType::float32));
    case Reg::NpI32:
    case Reg::NpI8:
    case Reg::NpU8:
    case Reg::NpI16:
    case Reg::NpU16:
    case Reg::NpU32:
      return Value(Array::scalar(static_cast<double>(r.i), narrow_int_dtype(r.k)));
    case Reg::Arr:
      return Value(st.arrays[r.a].array);
    case Reg::Obj:
      return st.objects[r.a];
    default:
      return Value();
  }
}

void FastLoop::Impl::rollback(State& st, size_t objects_before) const {
  for (auto it = st.list_undo.rbegin(); it != st.list_undo.rend(); ++it) {
    Value& list = st.objects[static_cast<size_t>(it->obj)];
    const auto keep = static_cast<size_t>(it->index);
    if (it->index == -2) {
      list = std::move(it->old);
    } else if (list.is_dict()) {
      Dict* d = list.unique_dict();
      if (!d) {  // shared since (not by the loop's own changes): a copy of its own
        list = Value(Dict(list.as_dict()));
        d = list.unique_dict();
      }
      if (it->index >= 0) {
        d->truncate(keep);
      } else if (const auto pos = static_cast<size_t>(State::kDictItemUndo - it->index);
                 pos < d->items.size()) {
        d->set_value_at(pos, std::move(it->old));
      }
    } else if (list.is_list() && native_truncate_numbers(list, keep)) {
      // A list held unboxed cut back as such (as_list() would write it out).
    } else if (list.is_list() && list.as_list().size() > keep) {
      if (List* items = list.unique_list())
        items->resize(keep);
      else
        list = Value(List(list.as_list().begin(), list.as_list().begin() + it->index));
    }
  }
  st.list_undo.clear();
  st.logged_objects.clear();
  for (auto it = st.undo.rbegin(); it != st.undo.rend(); ++it) {
    if (it->arr < 0) {
      auto& [target, before] = st.snapshots[static_cast<size_t>(it->offset)];
      target.assign(before);
    } else {
      std::memcpy(st.arrays[it->arr].base + it->offset, it->old, it->size);
    }
  }
  st.undo.clear();
  st.snapshots.clear();
  st.snapshot_elements = 0;
  st.regs = st.saved;
  st.assigned = st.saved_assigned;
  st.counts = st.saved_counts;
  // The arrays made since the checkpoint are released by the next sweep.
  st.objects.resize(objects_before);
  st.object_epoch.resize(objects_before);
  st.object_logged.resize(objects_before);
  st.object_ascii.resize(objects_before);
  const auto placed_since = [&](int32_t c) { return static_cast<size_t>(c) >= objects_before; };
  if (std::erase_if(st.char_slots, placed_since)) {
    for (int32_t& c : st.char_objects)
      if (c >= 0 && placed_since(c)) c = -1;
  }
  std::erase_if(st.free_objects, [&](int32_t i) { return static_cast<size_t>(i) >= objects_before; });
  std::erase_if(st.constant_objects,
                [&](const auto& e) { return static_cast<size_t>(e.second) >= objects_before; });
  st.flow = State::Flow::normal;
  // The draws since the checkpoint are made again by the general
  // evaluation: the stream goes back (unless another task drew meanwhile).
  if (st.draws) rewind_random_stream(st.stream_at_checkpoint + st.draws, st.stream_at_checkpoint);
  st.draws = 0;
}

void FastLoop::Impl::sweep(State& st) {
  // Nothing made since the last sweep: at most an array a register let go
  // of without a new one made, released at the next sweep that has work.
  // Objects are swept once every kObjectSweep made (a string per turn
  // swept them at every turn: a fifth of a word count's time), so a loop
  // making a list per turn holds at most that many it let go of.
  constexpr int64_t kObjectSweep = 16;
  const bool objects = st.objects_made >= kObjectSweep;
  if (st.made == 0 && !objects) return;
  st.made = 0;
  std::vector<uint8_t>& marks = st.marks;
  marks.assign(st.arrays.size(), 0);
  auto mark = [&](const Reg& r) {
    if (r.k == Reg::Arr) marks[static_cast<size_t>(r.a)] = 1;
  };
  for (const Reg& r : st.regs) mark(r);
  for (const Reg& r : st.saved) mark(r);
  for (const Reg* r : st.roots) mark(*r);
  for (size_t i = 0; i < st.arrays.size(); ++i) {
    ArrEntry& e = st.arrays[i];
    if (marks[i] || e.released || e.written == st.epoch) continue;
    release(st, static_cast<int32_t>(i));
  }
  // Lists made in the loop (and other objects) no register, checkpoint,
  // loop value, constant or logged list change refers to.
  if (!objects || st.objects.size() < 64) return;
  st.objects_made = 0;
  marks.assign(st.objects.size(), 0);
  auto mark_obj = [&](const Reg& r) {
    if (r.k == Reg::Obj && static_cast<size_t>(r.a) < marks.size()) marks[static_cast<size_t>(r.a)] = 1;
  };
  for (const Reg& r : st.regs) mark_obj(r);
  for (const Reg& r : st.saved) mark_obj(r);
  for (const Reg* r : st.roots) mark_obj(*r);
  for (const auto& c : st.constant_objects) marks[static_cast<size_t>(c.second)] = 1;
  for (int32_t c : st.char_slots) marks[static_cast<size_t>(c)] = 1;
  for (int32_t i : st.logged_objects) marks[static_cast<size_t>(i)] = 1;
  for (int32_t i : st.free_objects) marks[static_cast<size_t>(i)] = 1;  // already free
  for (size_t i = 0; i < st.objects.size(); ++i) {
    if (marks[i]) continue;
    st.objects[i] = Value();
    st.free_objects.push_back(static_cast<int32_t>(i));
  }
}

void FastLoop::Impl::write_back(const FramePtr& frame, const State& st, bool finished) const {
  for (size_t c = 0; c < counted.size(); ++c) {
    if (st.counts[c] && counted[c])  // (null: the nodes the complex lowering made)
      counted[c]->counters().evaluations.fetch_add(st.counts[c], std::memory_order_relaxed);
  }
  for (size_t r = 0; r < vars.size(); ++r) {
    if (!st.assigned[r] || vars[r].depth < 0) continue;
    // Nothing reads it after a loop that runs once in its frame (a
    // comprehension's hidden variables).
    if (finished && runs_once && loop_local[r]) continue;
    const Reg& x = st.regs[r];
    if (st.numbers_written_only && x.k == Reg::Obj && r < st.loaded_objects.size() &&
        st.loaded_objects[r] == x.a && st.objects[static_cast<size_t>(x.a)].is_list()) {
      frame->up(vars[r].depth)->set_numbers_written(vars[r].slot, to_value(x, st));
      continue;
    }
    frame->up(vars[r].depth)->set(vars[r].slot, to_value(x, st));
  }
  for (const TupleVar& t : frame_tuples) {
    if (!st.assigned[t.items[0]]) continue;  // the items are assigned together
    frame->up(vars[t.reg].depth)->set(vars[t.reg].slot, tuple_value(t, st));
  }
}

}  // namespace tessera
