// Lists of numbers held unboxed in loops (native_number_lists.hpp).
#include "tessera/lang/native_number_lists.hpp"

#include <cstring>

#include "tessera/lang/native_lists.hpp"

namespace tessera {

bool native_number_bits(const Reg& r, NumberKind& kind, uint64_t& bits) {
  switch (r.k) {
    case Reg::PyBool: kind = NumberKind::py_bool; bits = r.b ? 1 : 0; return true;
    case Reg::NpBool: kind = NumberKind::np_bool; bits = r.b ? 1 : 0; return true;
    case Reg::PyInt: kind = NumberKind::py_int; break;
    case Reg::NpInt: kind = NumberKind::np_int64; break;
    case Reg::NpI32: kind = NumberKind::np_int32; break;
    case Reg::PyFloat: kind = NumberKind::py_float; break;
    case Reg::NpFloat: kind = NumberKind::np_float64; break;
    case Reg::NpF32: kind = NumberKind::np_float32; break;
    default: return false;
  }
  // Ints as their int64, floats as their double's bits (a float32's exactly).
  std::memcpy(&bits, &r.i, sizeof bits);
  return true;
}

Reg native_number_reg(const NumberList& n, size_t i) {
  const uint64_t b = n.bits[i];
  const auto i64 = static_cast<int64_t>(b);
  switch (n.kind) {
    case NumberKind::py_bool: return Reg::boolean(Reg::PyBool, b != 0);
    case NumberKind::np_bool: return Reg::boolean(Reg::NpBool, b != 0);
    case NumberKind::py_int: return Reg::make(Reg::PyInt, i64);
    case NumberKind::np_int64: return Reg::make(Reg::NpInt, i64);
    case NumberKind::np_int32: return Reg::make(Reg::NpI32, i64);
    case NumberKind::py_float: return Reg::make(Reg::PyFloat, i64);
    case NumberKind::np_float64: return Reg::make(Reg::NpFloat, i64);
    case NumberKind::np_float32: return Reg::make(Reg::NpF32, i64);
  }
  return Reg();
}

int native_push_number(FastLoop::Impl::State& st, int32_t obj, const Reg& item) {
  const auto o = static_cast<size_t>(obj);
  Value& list = st.objects[o];
  if (!list.is_list()) return 1;
  // (number_items() first: a NumberList is no tuple, and is_tuple's look at
  // the deleter of another kind compares type names.)
  NumberList* n = list.number_items();
  if (n == nullptr && list.is_tuple()) return 1;
  NumberKind kind;
  uint64_t bits;
  if (!native_number_bits(item, kind, bits)) return -1;
  if (n != nullptr ? n->kind != kind : !list.list_ptr()->empty()) return -1;
  const bool alone = list.list_ptr().use_count() == 1;
  if (!(st.object_epoch[o] == st.epoch && alone)) {
    if (st.object_logged[o] != st.epoch) {
      // As list_push: the length at its first change since the checkpoint.
      st.object_logged[o] = st.epoch;
      st.logged_objects.push_back(obj);
      st.list_undo.push_back({obj, static_cast<int64_t>(list.list_size()), Value()});
    }
    if (!alone) {
      // Held elsewhere too (the frame's variable): a list of its own, the
      // one before kept for a roll-back.
      Value copy = Value::number_list(kind, n != nullptr ? n->bits : std::vector<uint64_t>());
      st.list_undo.push_back({obj, -2, std::move(list)});
      list = std::move(copy);
      n = list.number_items();
    }
  }
  if (n == nullptr) {
    // An empty list of Values only this object holds: a NumberList from now on.
    list = Value::number_list(kind, {});
    n = list.number_items();
  }
  n->bits.push_back(bits);
  return 0;
}

void native_list_site(const Value& list, int64_t* out) {
  if (const NumberList* n = list.number_items()) {
    out[0] = static_cast<int64_t>(reinterpret_cast<intptr_t>(n->bits.data()));
    out[1] = static_cast<int64_t>(n->bits.size());
    out[2] = 8;
    out[3] = n->kind == NumberKind::py_int     ? static_cast<int64_t>(ValueKind::integer)
             : n->kind == NumberKind::py_float ? static_cast<int64_t>(ValueKind::floating)
                                               : 255;
    return;
  }
  const NativeValueLayout& l = native_value_layout();
  const List& items = list.as_list();
  out[0] = static_cast<int64_t>(reinterpret_cast<intptr_t>(items.data())) + l.payload_at;
  out[1] = static_cast<int64_t>(items.size());
  out[2] = l.size;
  out[3] = -1;
}

bool native_truncate_numbers(Value& list, size_t keep) {
  NumberList* n = list.number_items();
  if (n == nullptr) return false;
  if (n->bits.size() <= keep) return true;
  if (list.list_ptr().use_count() == 1) {
    n->bits.resize(keep);
  } else {
    const auto end = n->bits.begin() + static_cast<std::ptrdiff_t>(keep);
    list = Value::number_list(n->kind, std::vector<uint64_t>(n->bits.begin(), end));
  }
  return true;
}

}  // namespace tessera
