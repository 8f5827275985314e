#include "tessera/core/value.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool Value::truthy(const char* op) const {
  switch (kind()) {
    case ValueKind::nil: return false;
    case ValueKind::boolean: return as_bool();
    case ValueKind::integer: return as_int() != 0;
    case ValueKind::floating: return as_float() != 0.0;
    case ValueKind::string: return !as_string().empty();
    case ValueKind::array: {
      const Array& a = as_array();
      if (a.size() != 1) {
        throw std::invalid_argument(error_message(
            "[", op, "] the truth value of an array with more than one element is ambiguous: got ",
            describe(), "; use all() or any()"));
      }
      return a.get_bool(0);
    }
    case ValueKind::list: return !as_list().empty();
    case ValueKind::dict: return !as_dict().items.empty();
    case ValueKind::function: return true;
    case ValueKind::slice: return true;
    case ValueKind::tiled:
      throw std::invalid_argument(error_message("[", op, "] the truth value of a ", describe(),
                                                " is ambiguous; reduce it first (e.g. all_gather_d, sum)"));
  }
  return false;
}

std::string Value::kind_name() const {
  static const char* names[] = {"nil",   "bool", "int",  "float",   "string",
                                "array", "list", "dict", "function", "slice", "tiled array"};
  if (is_tuple()) return "tuple";
  return names[static_cast<int>(kind())];
}

std::string Value::str() const {
  switch (kind()) {
    case ValueKind::nil: return "nil";
    case ValueKind::boolean: return as_bool() ? "true" : "false";
    case ValueKind::integer: return std::to_string(as_int());
    case ValueKind::floating: return float_repr(as_float());
    case ValueKind::string: return as_string();
    case ValueKind::array: return as_array().str();
    case ValueKind::list: {
      std::string s = is_tuple() ? "(" : "[";
      const List& l = as_list();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) s += ", ";
        s += l[i].is_string() ? "'" + l[i].as_string() + "'" : l[i].str();
      }
      if (is_tuple()) return s + (l.size() == 1 ? ",)" : ")");
      return s + "]";
    }
    case ValueKind::dict: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) s += ", ";
        first = false;
        s += (k.is_string() ? "'" + k.as_string() + "'" : k.str()) + ": " +
             (v.is_string() ? "'" + v.as_string() + "'" : v.str());
      }
      return s + "}";
    }
    case ValueKind::function: return "<function " + as_function()->name() + ">";
    case ValueKind::slice: {
      auto part = [](const std::optional<int64_t>& p) { return p ? std::to_string(*p) : "nil"; };
      const Slice& s = as_slice();
      return "slice(" + part(s.start) + ", " + part(s.stop) + ", " + part(s.step) + ")";
    }
    case ValueKind::tiled: return as_tiled().str();
  }
  return "?";
}

std::string Value::describe() const {
  switch (kind()) {
    case ValueKind::nil: return "nil";
    case ValueKind::boolean: return std::string("bool ") + (as_bool() ? "true" : "false");
    case ValueKind::integer: return "int " + std::to_string(as_int());
    case ValueKind::floating: return "float " + float_repr(as_float());
    case ValueKind::string: {
      std::string s = as_string();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "string '" + s + "'";
    }
    case ValueKind::array: {
      const Array& a = as_array();
      std::string s = std::string(dtype_name(a.dtype())) + " array of shape " + shape_str(a.shape());
      return s;
    }
    case ValueKind::list:
      return kind_name() + " of length " + std::to_string(as_list().size());
    case ValueKind::dict: return "dict of size " + std::to_string(as_dict().items.size());
    case ValueKind::function: return "function " + as_function()->name();
    case ValueKind::slice: return str();
    case ValueKind::tiled: return as_tiled().describe();
  }
  return "?";
}

bool Value::equals(const Value& other) const {
  if (is_scalar() && other.is_scalar()) {
    if (is_float() || other.is_float()) {
      auto d = [](const Value& v) {
        return v.is_float() ? v.as_float() : v.is_int() ? double(v.as_int()) : double(v.as_bool());
      };
      return d(*this) == d(other);
    }
    auto i = [](const Value& v) { return v.is_int() ? v.as_int() : int64_t(v.as_bool()); };
    return i(*this) == i(other);
  }
  if (kind() != other.kind() || is_tuple() != other.is_tuple()) return false;
  switch (kind()) {
    case ValueKind::nil: return true;
    case ValueKind::string: return as_string() == other.as_string();
    case ValueKind::array: {
      const Array &a = as_array(), &b = other.as_array();
      if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
      return a.nbytes() == 0 ||
             std::memcmp(a.contiguous().raw(), b.contiguous().raw(), a.nbytes()) == 0;
    }
    case ValueKind::list: {
      const List &a = as_list(), &b = other.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case ValueKind::dict: {
      const Dict &a = as_dict(), &b = other.as_dict();
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [k, v] : a.items) {
        const Value* o = b.find(k);
        if (!o || !o->equals(v)) return false;
      }
      return true;
    }
    case ValueKind::function: return as_function() == other.as_function();
    case ValueKind::slice: return as_slice() == other.as_slice();
    case ValueKind::tiled: {
      const TiledArray &a = as_tiled(), &b = other.as_tiled();
      return a.same_tiling(b) && a.locality == b.locality && Value(a.tile).equals(Value(b.tile));
    }
    default: return false;
  }
}

DType scalar_dtype(const Value& v) {
  if (v.is_bool()) return DType::bool_;
  if (v.is_int()) return DType::int64;
  return DType::float64;
}

Array to_array(const Value& v, const char* op, const char* what) {
  switch (v.kind()) {
    case ValueKind::array: return v.as_array().contiguous();
    case ValueKind::boolean: return Array::scalar_bool(v.as_bool());
    case ValueKind::integer: return Array::scalar_int(v.as_int());
    case ValueKind::floating: return Array::scalar(v.as_float());
    case ValueKind::list: {
      // Nested lists of numbers become arrays, as np.array does.
      const List& l = v.as_list();
      if (l.empty()) return Array(DType::float64, {0});
      std::vector<Array> rows;
      rows.reserve(l.size());
      for (const Value& e : l) rows.push_back(to_array(e, op, what));
      DType dt = rows[0].dtype();
      for (const Array& r : rows) {
        if (r.shape() != rows[0].shape()) {
          throw std::invalid_argument(error_message(
              "[", op, "] ", what, " is a ragged nested list: elements of shapes ",
              shape_str(rows[0].shape()), " and ", shape_str(r.shape())));
        }
        dt = promote(dt, r.dtype());
      }
      Shape shape = rows[0].shape();
      shape.insert(shape.begin(), static_cast<int64_t>(rows.size()));
      Array out(dt, shape);
      int64_t inner = rows[0].size();
      dispatch(dt, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* dst = out.data<T>();
        for (size_t r = 0; r < rows.size(); ++r) {
          Array c = rows[r].astype(dt).contiguous();
          const T* src = c.data<T>();
          std::copy(src, src + inner, dst + r * inner);
        }
      });
      return out;
    }
    default:
      throw TypeError(
          error_message("[", op, "] ", what, " must be a number or an array, got ", v.describe()));
  }
}

}  // namespace tessera

namespace tessera {

DType result_type(const Value& a, const Value& b) {
  bool wa = a.is_scalar(), wb = b.is_scalar();
  DType da = wa ? scalar_dtype(a) : a.as_array().dtype();
  DType db = wb ? scalar_dtype(b) : b.as_array().dtype();
  if (wa == wb) return promote(da, db);
  // One weak scalar against one array: the array's dtype wins unless the
  // scalar is of a higher kind (int over bool, float over integers).
  DType arr = wa ? db : da, weak = wa ? da : db;
  if (weak == DType::float64 && !is_floating(arr)) return DType::float64;
  if (weak == DType::int64 && arr == DType::bool_) return DType::int64;
  return arr;
}

}  // namespace tessera
