// Python's values in the loop interpreter (docs/runtime.md, "Objects in
// loops"): `k in d`, `d.get(k, v)`, `d[k]` (a tuple key too), `not x`, `s.find(t)`, the
// truth of a string, list or dict, `s[i]` of an ASCII string and `a == b` of
// two strings, computed on the objects the registers hold instead of through
// the primitive (a vector of operands, the argument binding, a copy of the
// container and a new object placed for each result). What each computes is
// what the primitive computes, by the same functions (python_dict_key,
// Dict::find, Value::truthy); any other kind goes through the primitive with
// the operands already evaluated, and what the primitive would report (a
// missing key, an unhashable one) rolls the turn back to the general path.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/text.hpp"

namespace tessera {

using ObjState = FastLoop::Impl::State;

namespace {

// A register that is a dict key as it stands: a number (Python's or
// NumPy's) or a string held as an object.
bool flo_keyable(const Reg& r, const ObjState& st) {
  return r.scalar() || (r.k == Reg::Obj && st.objects[static_cast<size_t>(r.a)].is_string());
}

const Value& flo_object(const Reg& r, const ObjState& st) {
  return st.objects[static_cast<size_t>(r.a)];
}

}  // namespace

bool FastLoop::Impl::object_truthy(const Reg& r, const State& st) {
  const Value& v = flo_object(r, st);
  if (!v.is_string() && !v.is_list() && !v.is_dict()) throw BAIL;
  try {
    return v.truthy("if");
  } catch (...) {
    throw BAIL;
  }
}

bool FastLoop::Impl::key_of(const Reg* idx, size_t nidx, const State& st, Value& key) {
  for (size_t k = 0; k < nidx; ++k)
    if (!flo_keyable(idx[k], st)) return false;
  try {
    if (nidx == 1 && idx[0].k == Reg::Obj) {
      key = python_dict_key(flo_object(idx[0], st), "getitem");  // a string, not copied first
    } else if (nidx == 1) {
      key = python_dict_key(to_value(idx[0], st), "getitem");
    } else {
      List items;
      items.reserve(nidx);
      for (size_t k = 0; k < nidx; ++k) items.push_back(to_value(idx[k], st));
      key = python_dict_key(Value::tuple(std::move(items)), "getitem");
    }
  } catch (...) {
    throw BAIL;  // unhashable: the general path's TypeError
  }
  return true;
}

bool FastLoop::Impl::dict_item(const Reg& d, const Reg* idx, size_t nidx, State& st, Reg& out) {
  if (d.k != Reg::Obj || !flo_object(d, st).is_dict()) return false;
  Value key;
  if (!key_of(idx, nidx, st, key)) return false;
  // By position and a copy: a compact dict (numbers only) stays compact.
  const Dict& dict = flo_object(d, st).as_dict();
  const std::ptrdiff_t at = dict.position(key);
  if (at < 0) throw BAIL;  // the general path's KeyError
  out = to_reg(dict.value_at(static_cast<size_t>(at)), st);
  return true;
}

bool FastLoop::Impl::string_item(const Reg& s, const Reg& i, State& st, Reg& out) {
  if (s.k != Reg::Obj || !i.int_payload()) return false;
  const auto o = static_cast<size_t>(s.a);
  const Value& v = st.objects[o];
  if (!v.is_string()) return false;
  const std::string& text = v.as_string();
  int8_t& ascii = st.object_ascii[o];
  if (ascii < 0) {
    ascii = 1;
    for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
  }
  if (!ascii) return false;  // characters of several bytes: the primitive's
  const auto n = static_cast<int64_t>(text.size());
  const int64_t j = i.i < 0 ? i.i + n : i.i;
  if (j < 0 || j >= n) throw BAIL;  // the general path's IndexError
  const auto c = static_cast<unsigned char>(text[static_cast<size_t>(j)]);
  int32_t& slot = st.char_objects[c];
  if (slot < 0) {
    slot = place_object(Value(std::string(1, static_cast<char>(c))), st);
    st.char_slots.push_back(slot);
  }
  out.k = Reg::Obj;
  out.i = 0;
  out.a = slot;
  return true;
}

bool FastLoop::Impl::object_compare(const FNode& n, const Reg& a, const Reg& b,
                                    const State& st, Reg& out) {
  if (a.k != Reg::Obj || b.k != Reg::Obj || (n.fast != Fast::eq && n.fast != Fast::ne))
    return false;
  const Value& x = flo_object(a, st);
  const Value& y = flo_object(b, st);
  if (!x.is_string() || !y.is_string()) return false;
  // Python's str == str: a Python bool (the general path's python_equal).
  const bool same = a.a == b.a || x.as_string() == y.as_string();
  out = Reg::boolean(Reg::PyBool, n.fast == Fast::eq ? same : !same);
  return true;
}

Reg FastLoop::Impl::object_call(const FNode& n, State& st) const {
  constexpr size_t kMaxKids = 3;
  Reg regs[kMaxKids];
  const size_t nk = n.kids.size();
  for (size_t i = 0; i < nk; ++i) {
    regs[i] = eval(n.kids[i], st);
    if (regs[i].k == Reg::Undef) throw BAIL;
  }
  auto done = [&](Reg r) {
    ++st.counts[static_cast<size_t>(n.slot)];
    ++st.inline_ops;
    return r;
  };
  switch (n.obj_op) {
    case ObjOp::contains: {
      // `item in container`: a dict's key; a substring of a string.
      const Reg& c = regs[0];
      if (c.k != Reg::Obj) break;
      const Value& cv = flo_object(c, st);
      if (cv.is_dict()) {
        Value key;
        if (!key_of(&regs[1], 1, st, key)) break;
        return done(Reg::boolean(Reg::PyBool, cv.as_dict().position(key) >= 0));
      }
      if (cv.is_string() && regs[1].k == Reg::Obj && flo_object(regs[1], st).is_string()) {
        const std::string& s = cv.as_string();
        return done(Reg::boolean(Reg::PyBool,
                                 s.find(flo_object(regs[1], st).as_string()) != std::string::npos));
      }
      break;
    }
    case ObjOp::get: {
      // d.get(key, default): the value, or the default (None without one).
      if (regs[0].k != Reg::Obj || !flo_object(regs[0], st).is_dict()) break;
      Value key;
      if (!key_of(&regs[1], 1, st, key)) break;
      const Dict& dict = flo_object(regs[0], st).as_dict();
      if (const std::ptrdiff_t at = dict.position(key); at >= 0)
        return done(to_reg(dict.value_at(static_cast<size_t>(at)), st));
      if (nk == 3) return done(regs[2]);
      Reg nil;
      nil.k = Reg::Nil;
      return done(nil);
    }
    case ObjOp::not_:
    case ObjOp::logical_not: {
      // Python's `not x` (not_) of anything Python can test; logical_not of
      // a Python number, whose result is a Python bool too (scalar_unary).
      const Reg& x = regs[0];
      if (x.k == Reg::PyBool || x.k == Reg::PyInt || x.k == Reg::PyFloat)
        return done(Reg::boolean(Reg::PyBool, !truthy(x)));
      if (n.obj_op == ObjOp::logical_not) break;
      if (x.scalar()) return done(Reg::boolean(Reg::PyBool, !truthy(x)));
      if (x.k == Reg::Nil) return done(Reg::boolean(Reg::PyBool, true));
      if (x.k == Reg::Obj) return done(Reg::boolean(Reg::PyBool, !object_truthy(x, st)));
      break;
    }
    case ObjOp::unpack: {
      // `i, j = pair` of a list or tuple of that many items: the value
      // itself (the primitive's), without the copy into its operands.
      const Reg& x = regs[0];
      if (x.k != Reg::Obj || regs[1].k != Reg::PyInt || !flo_object(x, st).is_list()) break;
      if (static_cast<int64_t>(flo_object(x, st).as_list().size()) != regs[1].i) break;
      return done(x);
    }
    case ObjOp::str_find: {
      // s.find(sub) of two strings: the index in characters, or -1 (the
      // primitive's: text.cpp). An ASCII string's bytes are its characters.
      if (regs[0].k != Reg::Obj || regs[1].k != Reg::Obj) break;
      const Value& sv = flo_object(regs[0], st);
      const Value& subv = flo_object(regs[1], st);
      if (!sv.is_string() || !subv.is_string()) break;
      const std::string& s = sv.as_string();
      const size_t at = s.find(subv.as_string());
      if (at == std::string::npos) return done(Reg::make(Reg::PyInt, -1));
      int8_t& ascii = st.object_ascii[static_cast<size_t>(regs[0].a)];
      if (ascii < 0) {
        ascii = 1;
        for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
      }
      return done(Reg::make(Reg::PyInt, ascii ? static_cast<int64_t>(at)
                                              : utf8_length(s.substr(0, at))));
    }
    case ObjOp::none:
      break;
  }
  std::vector<Value> vals;
  vals.reserve(std::max(nk, n.spec->params.size()));
  for (size_t i = 0; i < nk; ++i) vals.push_back(to_value(regs[i], st));
  return call_values(n, vals, st);
}

}  // namespace tessera
