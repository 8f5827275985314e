// Dicts and sets read and written by native loops (native_dicts.hpp).
#include "tessera/lang/native_dicts.hpp"

#include <cstring>
#include <utility>

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

namespace {

// A number register as the dict key the interpreter makes of it (key_of:
// python_dict_key of its value): Python's bool, int or float, NumPy's
// scalars as the Python number of the same value. False for anything else.
bool ndict_scalar_key(const Reg& r, Value& out) {
  if (r.k == Reg::PyBool || r.k == Reg::NpBool) {
    out = Value(r.b);
  } else if (r.int_payload()) {
    out = Value(r.i);
  } else if (r.float_payload()) {
    out = Value(r.f);
  } else {
    return false;
  }
  return true;
}

// The key of `n` registers: one number, or a tuple of them (`d[i, j]`,
// `pairs.add((a, b))`).
bool ndict_key(const Reg* keys, int64_t n, Value& out) {
  if (n == 1) return ndict_scalar_key(keys[0], out);
  if (n < 1) return false;
  List items(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    if (!ndict_scalar_key(keys[k], items[static_cast<size_t>(k)])) return false;
  out = Value::tuple(std::move(items));
  return true;
}

// A string key in an object register (d[word] in native code,
// native_gen_strings.cpp): the string, as the interpreter's key_of makes it.
bool ndict_str_key(NativeCtx* c, const Reg& k, Value& out) {
  const FastLoop::Impl::State& st = *c->state;
  if (k.a < 0 || static_cast<size_t>(k.a) >= st.objects.size() ||
      !st.objects[static_cast<size_t>(k.a)].is_string())
    return false;
  out = st.objects[static_cast<size_t>(k.a)];
  return true;
}

// The same Python bool, int or float, bit for bit (0.0 is not -0.0).
bool ndict_same_number(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_bool()) return a.as_bool() == b.as_bool();
  if (a.is_int()) return a.as_int() == b.as_int();
  if (a.is_float()) {
    const double x = a.as_float(), y = b.as_float();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return false;
}

// A Python bool, int or float register as a compact dict value's bits and
// kind (Dict::set_int_number); false for NumPy's scalars (stored as Values).
bool ndict_number_bits(const Reg& r, uint64_t& bits, DictValueKind& kind) {
  switch (r.k) {
    case Reg::PyBool: bits = r.b ? 1 : 0; kind = DictValueKind::boolean; return true;
    case Reg::PyInt: bits = static_cast<uint64_t>(r.i); kind = DictValueKind::integer; return true;
    case Reg::PyFloat: std::memcpy(&bits, &r.f, sizeof bits); kind = DictValueKind::floating; return true;
    default: return false;
  }
}

// The register kind a compact dict's value reads as (scalar_of's), -1 for None.
int64_t ndict_reg_kind(DictValueKind kind) {
  switch (kind) {
    case DictValueKind::boolean: return Reg::PyBool;
    case DictValueKind::integer: return Reg::PyInt;
    case DictValueKind::floating: return Reg::PyFloat;
    default: return -1;
  }
}

// The dict at object index `obj`, or null.
const Value* ndict_at(const NativeCtx* c, int64_t obj) {
  if (c->state == nullptr) return nullptr;  // a prange chunk: no interpreter state
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  return v.is_dict() ? &v : nullptr;
}

}  // namespace

extern "C" int32_t native_dict_find(NativeCtx* c, int64_t obj, const Reg* keys, int64_t nkeys,
                                    int64_t kind, int64_t* out) {
  const Value* d = ndict_at(c, obj);
  if (d == nullptr) return kNativeDictBail;
  // Everything thrown stops here: the generated code cannot unwind.
  try {
    // Positions and copies of the value, never an address: a compact dict
    // (numbers only) is read as it is, without writing its items out.
    const Dict& dict = d->as_dict();
    std::ptrdiff_t at;
    if (nkeys == 1 && keys[0].int_payload()) {
      // A compact dict answers with the value's bits: no Value made at all.
      uint64_t bits;
      DictValueKind vk;
      at = dict.find_int_number(keys[0].i, bits, vk);
      if (at != -2) {
        if (at < 0) return kNativeDictMiss;
        if (kind < 0) return kNativeDictHit;
        if (ndict_reg_kind(vk) != kind) return kNativeDictBail;
        *out = static_cast<int64_t>(bits);
        return kNativeDictHit;
      }
      at = dict.position_int(keys[0].i);  // no Value made, the index alone decides
    } else {
      Value key;
      if (!ndict_key(keys, nkeys, key) &&
          !(nkeys == 1 && keys[0].k == Reg::Obj && ndict_str_key(c, keys[0], key)))
        return kNativeDictBail;
      at = dict.position(key);
    }
    if (at < 0) return kNativeDictMiss;
    if (kind < 0) return kNativeDictHit;
    Reg r;
    if (!FastLoop::Impl::scalar_of(dict.value_at(static_cast<size_t>(at)), r) || r.k != kind)
      return kNativeDictBail;
    *out = r.i;
    return kNativeDictHit;
  } catch (...) {
    return kNativeDictBail;
  }
}

namespace {

int32_t ndict_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r, int64_t obj,
                  const Reg* keys, int64_t nkeys, const Reg* value, bool missing) {
  if (ndict_at(c, obj) == nullptr || !value->scalar()) return 1;
  // Another register holding the same dict would see the change (Python's
  // aliasing): the interpreter's, which leaves it to the general path.
  if (native_held_elsewhere(held, nheld, r, obj)) return 1;
  FastLoop::Impl::State& st = *c->state;
  try {
    if (nkeys == 1 && keys[0].int_payload()) {
      // An int key: found and written by its own paths (Dict::find_int, set_int).
      const int64_t k = keys[0].i;
      uint64_t bits;
      DictValueKind vk;
      if (ndict_number_bits(*value, bits, vk)) {
        // A compact dict: the register's bits compared and written as they
        // are (Dict::find_int_number, set_int_number), no Value made.
        uint64_t old_bits = 0;
        DictValueKind old_kind = DictValueKind::nil;
        const Dict& now = st.objects[static_cast<size_t>(obj)].as_dict();
        // The code's probe read this very index: a key it did not find is
        // not there (only a compact dict is probed by the code).
        const std::ptrdiff_t at =
            missing && now.items.compact() ? -1 : now.find_int_number(k, old_bits, old_kind);
        if (at >= 0 && old_kind == vk && old_bits == bits) {
          ++st.inline_ops;
          return 0;
        }
        if (at != -2) {
          FastLoop::Impl::own_dict(static_cast<int32_t>(obj), Value(k), st)
              .set_int_number(k, bits, vk);
          ++st.inline_ops;
          return 0;
        }
      }
      Value item = FastLoop::Impl::to_value(*value, st);
      const Dict& now = st.objects[static_cast<size_t>(obj)].as_dict();
      if (const std::ptrdiff_t at = now.position_int(k);
          at >= 0 && ndict_same_number(now.value_at(static_cast<size_t>(at)), item)) {
        ++st.inline_ops;
        return 0;
      }
      FastLoop::Impl::own_dict(static_cast<int32_t>(obj), Value(k), st).set_int(k, std::move(item));
      ++st.inline_ops;
      return 0;
    }
    Value key;
    if (!ndict_key(keys, nkeys, key) &&
        !(nkeys == 1 && keys[0].k == Reg::Obj && ndict_str_key(c, keys[0], key)))
      return 1;
    Value item = FastLoop::Impl::to_value(*value, st);
    // s.add(k) of a k already there (d[k] = v of v there): nothing changes,
    // nothing to log. Only the very same Python number (1 replaces True).
    const Dict& now = st.objects[static_cast<size_t>(obj)].as_dict();
    if (const std::ptrdiff_t at = now.position(key);
        at >= 0 && ndict_same_number(now.value_at(static_cast<size_t>(at)), item)) {
      ++st.inline_ops;
      return 0;
    }
    FastLoop::Impl::own_dict(static_cast<int32_t>(obj), key, st)
        .set(std::move(key), std::move(item));
    ++st.inline_ops;
    return 0;
  } catch (...) {
    return 1;  // a dict at its size limit: the general path reports it
  }
}

}  // namespace

extern "C" int32_t native_dict_set(NativeCtx* c, const int32_t* held, int64_t nheld, int64_t r,
                                   int64_t obj, const Reg* keys, int64_t nkeys, const Reg* value,
                                   uint64_t* view, int64_t missing) {
  const int32_t rc = ndict_set(c, held, nheld, r, obj, keys, nkeys, value, missing == 1);
  if (rc == 0 && view != nullptr) view[4] = static_cast<uint64_t>(native_dict_view(c, obj, view));
  return rc;
}

extern "C" int32_t native_dict_view(NativeCtx* c, int64_t obj, uint64_t* out) {
  const Value* d = ndict_at(c, obj);
  if (d == nullptr) return 0;
  const Dict::IntProbe view = d->as_dict().int_probe();
  if (!view.valid) return 0;
  out[0] = reinterpret_cast<uint64_t>(view.slots);
  out[1] = view.mask;
  out[2] = reinterpret_cast<uint64_t>(view.numbers);
  out[3] = reinterpret_cast<uint64_t>(view.kinds);
  return 1;
}

extern "C" int64_t native_container_len(NativeCtx* c, int64_t obj) {
  if (c->state == nullptr) return -1;
  const FastLoop::Impl::State& st = *c->state;
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return -1;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  if (v.is_list()) return static_cast<int64_t>(v.list_size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().items.size());
  return -1;
}

extern "C" int64_t native_dict_new(NativeCtx* c) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  try {
    const int32_t at = FastLoop::Impl::place_object(Value(Dict()), st);
    ++st.made;  // a sweep between turns releases the dicts let go of
    return at;
  } catch (...) {
    return -1;
  }
}

}  // namespace tessera
