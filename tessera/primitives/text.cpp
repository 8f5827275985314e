// The text family: Python's str(), repr() and format() of Values, and the
// primitives `format` and `repr` (the Python front end writes f"{x:.4f}" as
// concat(format(x, ".4f")) and f"{x!r}" as repr(x)).
//
// Float digits come from std::to_chars, which rounds correctly, as Python's
// dtoa does; the layout rules (when to use an exponent, ".0", "1e+16") are
// Python's (Python/pystrtod.c and Python/formatter_unicode.c).
#include <complex>
#include "tessera/primitives/text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0) n = 4;
    else if (c >= 0xE0) n = 3;
    else if (c >= 0xC0) n = 2;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

int64_t utf8_length(const std::string& s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace {

// The decimal digits of |v| and the exponent of the first one, rounded to
// `precision` digits after the first (shortest round-trip when negative).
struct Decimal {
  std::string digits;
  int exp = 0;
};

// T is double, or float for the shortest digits of a float32 (NumPy prints
// float32 scalars with those).
template <class T>
Decimal decimal_of(T v, int precision) {
  std::string buf(static_cast<size_t>(std::max(precision, 0)) + 32, '\0');
  auto r = precision < 0
               ? std::to_chars(buf.data(), buf.data() + buf.size(), std::fabs(v),
                               std::chars_format::scientific)
               : std::to_chars(buf.data(), buf.data() + buf.size(), std::fabs(v),
                               std::chars_format::scientific, precision);
  std::string s(buf.data(), r.ptr);
  size_t e = s.find('e');
  Decimal d;
  d.exp = std::stoi(s.substr(e + 1));
  for (size_t i = 0; i < e; ++i) {
    if (s[i] >= '0' && s[i] <= '9') d.digits += s[i];
  }
  return d;
}

std::string exponent_text(int exp) {
  std::string digits = std::to_string(exp < 0 ? -exp : exp);
  if (digits.size() < 2) digits = "0" + digits;
  return std::string(exp < 0 ? "e-" : "e+") + digits;
}

// digits with the decimal point after `decpt` of them (zeros added either side).
std::string fixed_layout(const std::string& digits, int decpt) {
  const int n = static_cast<int>(digits.size());
  if (decpt <= 0) return "0." + std::string(-decpt, '0') + digits;
  if (decpt >= n) return digits + std::string(decpt - n, '0');
  return digits.substr(0, decpt) + "." + digits.substr(decpt);
}

std::string sci_layout(const std::string& digits, int exp) {
  std::string s = digits.substr(0, 1);
  if (digits.size() > 1) s += "." + digits.substr(1);
  return s + exponent_text(exp);
}

// |v| in Python's repr form: shortest digits, an exponent below 1e-4 and
// from 1e16 on, ".0" on integral values (NumPy's scalars of other widths
// print through Array::str).
std::string repr_body(double v) {
  Decimal d = decimal_of(v, -1);
  const int decpt = d.exp + 1;
  const bool sci = decpt <= -4 || decpt > 16;
  if (sci) return sci_layout(d.digits, d.exp);
  std::string s = fixed_layout(d.digits, decpt);
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

// |v| in the 'g' style with `precision` significant digits; `add_dot_0` is
// the style of an omitted type with a precision (at least one decimal).
std::string general_body(double v, int precision, bool alt, bool add_dot_0) {
  if (precision == 0) precision = 1;
  Decimal d = decimal_of(v, precision - 1);
  const int decpt = d.exp + 1;
  if (!alt) {
    while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  }
  const bool use_exp = decpt <= -4 || decpt > (add_dot_0 ? precision - 1 : precision);
  std::string s = use_exp ? sci_layout(d.digits, d.exp) : fixed_layout(d.digits, decpt);
  if (alt && s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".");
  }
  if (add_dot_0 && !use_exp && s.find('.') == std::string::npos) s += ".0";
  return s;
}

std::string to_chars_text(double v, std::chars_format fmt, int precision) {
  std::string buf(static_cast<size_t>(precision) + 400, '\0');
  auto r = std::to_chars(buf.data(), buf.data() + buf.size(), std::fabs(v), fmt, precision);
  return std::string(buf.data(), r.ptr);
}

std::string float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return (std::signbit(v) ? "-" : "") + repr_body(v);
}

// A 0-d array as the NumPy scalar it comes back to Python as.
Value scalar_of(const Array& a) {
  switch (a.dtype()) {
    case DType::bool_: return Value(a.get_bool(0));
    case DType::int64: return Value(a.get_int(0));
    default: return Value(a.get_double(0));
  }
}

struct ReprEscapeRange {
  char32_t first, last;
};
#include "tessera/primitives/printable_tables.inc"

// The code point of the UTF-8 sequence at s[i] (its length in n), or 0 with
// n = 1 for a byte that does not start a whole sequence.
char32_t repr_code_point(const std::string& s, size_t i, size_t& n) {
  const auto c = static_cast<unsigned char>(s[i]);
  n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (n == 1 || i + n > s.size()) {
    n = 1;
    return 0;
  }
  char32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Whether repr() writes the non-ASCII code point cp as an escape (Python's
// str.isprintable() refuses it: printable_tables.inc, from Python's own data).
bool repr_escapes(char32_t cp) {
  const auto below = [](char32_t v, const ReprEscapeRange& r) { return v < r.first; };
  const auto* it = std::upper_bound(std::begin(kReprEscaped), std::end(kReprEscaped), cp, below);
  return it != std::begin(kReprEscaped) && cp <= (it - 1)->last;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static const char* hex = "0123456789abcdef";
  std::string out(1, quote);
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {
      // Python's repr: \xhh, \uhhhh or \Uhhhhhhhh for a character it does not print
      size_t n = 1;
      const char32_t cp = repr_code_point(s, i, n);
      if (cp != 0 && repr_escapes(cp)) {
        const int digits = cp <= 0xFF ? 2 : cp <= 0xFFFF ? 4 : 8;
        out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
        for (int k = digits - 1; k >= 0; --k) out += hex[(cp >> (4 * k)) & 15];
      } else {
        out.append(s, i, n);
      }
      i += n - 1;
      continue;
    }
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + quote;
}

std::string sequence_text(const Value& v) {
  NestingLevel level("str", v);
  const List& items = v.as_list();
  std::string s = v.is_tuple() ? "(" : "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ", ";
    s += python_repr(items[i]);
  }
  if (v.is_tuple()) return s + (items.size() == 1 ? ",)" : ")");
  return s + "]";
}

}  // namespace

std::string python_type_name(const Value& v) {
  switch (v.kind()) {
    case ValueKind::nil: return "NoneType";
    case ValueKind::string: return "str";
    case ValueKind::array: return "numpy.ndarray";
    case ValueKind::tiled: return "TiledArray";
    default: return v.kind_name();
  }
}

std::string python_str(const Value& v) {
  switch (v.kind()) {
    case ValueKind::nil: return "None";
    case ValueKind::boolean: return v.as_bool() ? "True" : "False";
    case ValueKind::floating: return float_str(v.as_float());
    case ValueKind::string: return v.as_string();
    case ValueKind::array: {
      // NumPy's text of the array, or of its element as a NumPy scalar.
      return v.as_array().str();
    }
    case ValueKind::list: return sequence_text(v);
    case ValueKind::dict: {
      NestingLevel level("str", v);
      std::string s = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().items) {
        if (!first) s += ", ";
        first = false;
        s += python_repr(k) + ": " + python_repr(x);
      }
      return s + "}";
    }
    case ValueKind::slice: {
      auto part = [](const std::optional<int64_t>& p) { return p ? std::to_string(*p) : "None"; };
      const Slice& s = v.as_slice();
      return "slice(" + part(s.start) + ", " + part(s.stop) + ", " + part(s.step) + ")";
    }
    default: return v.str();
  }
}

std::string python_repr(const Value& v) {
  if (v.is_string()) return string_repr(v.as_string());
  if (v.is_array() && v.as_array().ndim() == 0) {
    const Array& a = v.as_array();
    std::string body = python_str(v);
    if (a.dtype() == DType::bool_) return a.get_bool(0) ? "np.True_" : "np.False_";
    if (is_complex(a.dtype()) && body.size() > 1 && body.front() == '(') {
      body = body.substr(1, body.size() - 2);  // np.complex128(1+2j), not ((1+2j))
    }
    return "np." + std::string(dtype_name(a.dtype())) + "(" + body + ")";
  }
  if (v.is_array()) {
    throw TypeError(error_message("[repr] repr() of an array (", v.describe(),
                                  ") is not supported inside a jit function; use str()"));
  }
  return python_str(v);
}

namespace {

struct FormatSpec {
  std::string fill = " ";
  char align = 0;  // 0: the type's default
  char sign = 0;
  bool z = false, alt = false, zero = false;
  int64_t width = -1, precision = -1;
  char grouping = 0;
  char type = 0;
};

[[noreturn]] void spec_error(const char* op, const std::string& what) {
  throw std::invalid_argument(error_message("[", op, "] ", what));
}

bool is_align(char c) { return c == '<' || c == '>' || c == '=' || c == '^'; }

FormatSpec parse_spec(const std::string& spec, const Value& v, const char* op) {
  FormatSpec f;
  size_t pos = 0;
  const std::vector<std::string> chars = utf8_chars(spec);
  // [[fill]align]: the fill is one character (code point).
  bool fill_given = false;
  if (chars.size() >= 2 && chars[1].size() == 1 && is_align(chars[1][0])) {
    f.fill = chars[0];
    f.align = chars[1][0];
    pos = chars[0].size() + 1;
    fill_given = true;
  } else if (!spec.empty() && is_align(spec[0])) {
    f.align = spec[0];
    pos = 1;
  }
  auto at = [&](char c) { return pos < spec.size() && spec[pos] == c; };
  if (at('+') || at('-') || at(' ')) f.sign = spec[pos++];
  if (at('z')) {
    f.z = true;
    ++pos;
  }
  if (at('#')) {
    f.alt = true;
    ++pos;
  }
  if (!fill_given && at('0')) {
    // The 0 flag: zeros as the fill, after the sign unless aligned otherwise.
    f.zero = true;
    f.fill = "0";
    ++pos;
  }
  auto number = [&]() -> int64_t {
    int64_t n = -1;
    while (pos < spec.size() && spec[pos] >= '0' && spec[pos] <= '9') {
      n = (n < 0 ? 0 : n) * 10 + (spec[pos++] - '0');
      if (n > std::numeric_limits<int32_t>::max()) {
        spec_error(op, "Too many decimal digits in format string");
      }
    }
    return n;
  };
  f.width = number();
  if (at(',') || at('_')) {
    f.grouping = spec[pos++];
    if (at(',') || at('_')) {
      if (spec[pos] != f.grouping) spec_error(op, "Cannot specify both ',' and '_'.");
      spec_error(op, std::string("Cannot specify '") + f.grouping + "' with '" + f.grouping + "'.");
    }
  }
  if (at('.')) {
    ++pos;
    f.precision = number();
    if (f.precision < 0) spec_error(op, "Format specifier missing precision");
  }
  if (spec.size() - pos > 1) {
    spec_error(op, "Invalid format specifier '" + spec + "' for object of type '" +
                       python_type_name(v) + "'");
  }
  if (pos < spec.size()) f.type = spec[pos];
  return f;
}

// Pads `body` (the sign and prefix first, `lead` bytes of it) to the width.
std::string pad(const FormatSpec& f, const std::string& body, size_t lead, char default_align) {
  const int64_t len = utf8_length(body);
  if (f.width <= len) return body;
  const int64_t n = f.width - len;
  const char align = f.align ? f.align : default_align;
  auto fill = [&](int64_t k) {
    std::string s;
    for (int64_t i = 0; i < k; ++i) s += f.fill;
    return s;
  };
  switch (align) {
    case '<': return body + fill(n);
    case '^': return fill(n / 2) + body + fill(n - n / 2);
    case '=': return body.substr(0, lead) + fill(n) + body.substr(lead);
    default: return fill(n) + body;
  }
}

// Digits with a separator every `group` from the right; with `min_width` > 0
// zeros (and separators) are added on the left up to that width, as Python
// does for zero-padded, grouped numbers.
std::string group_digits(const std::string& digits, int group, char sep, int64_t min_width) {
  if (!sep) {
    const int64_t n = static_cast<int64_t>(digits.size());
    return (min_width > n ? std::string(min_width - n, '0') : "") + digits;
  }
  std::string out;  // built right to left
  int64_t remaining = static_cast<int64_t>(digits.size());
  size_t end = digits.size();
  bool first = true;
  while (true) {
    int64_t len = std::min<int64_t>(group, std::max<int64_t>(std::max(remaining, min_width), 1));
    int64_t zeros = std::max<int64_t>(0, len - remaining);
    int64_t chars = std::max<int64_t>(0, std::min(remaining, len));
    if (!first) out += sep;
    first = false;
    for (int64_t i = 0; i < chars; ++i) out += digits[--end];
    out.append(static_cast<size_t>(zeros), '0');
    remaining -= chars;
    min_width -= len;
    if (remaining <= 0 && min_width <= 0) break;
    min_width -= 1;
  }
  return std::string(out.rbegin(), out.rend());
}

// sign + prefix + digits (grouped) + rest, padded: the layout shared by ints
// and floats.
std::string number_layout(const FormatSpec& f, bool negative, const std::string& prefix,
                          const std::string& digits, const std::string& rest, int group) {
  std::string sign = negative ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  const bool zero_pad = f.fill == "0" && (f.align ? f.align : (f.zero ? '=' : '>')) == '=';
  int64_t min_width = 0;
  if (zero_pad && f.width > 0) {
    min_width = f.width - static_cast<int64_t>(sign.size() + prefix.size() + rest.size());
  }
  std::string body = sign + prefix + group_digits(digits, group, f.grouping, min_width) + rest;
  FormatSpec g = f;
  if (f.zero && !f.align) g.align = '=';
  return pad(g, body, sign.size() + prefix.size(), '>');
}

std::string format_int(int64_t v, FormatSpec f, const char* op) {
  const char type = f.type ? f.type : 'd';
  if (f.precision >= 0) spec_error(op, "Precision not allowed in integer format specifier");
  if (f.z) spec_error(op, "Negative zero coercion (z) not allowed in integer format specifier");
  if (f.grouping == ',' && type != 'd') {
    spec_error(op, std::string("Cannot specify ',' with '") + type + "'.");
  }
  if (f.grouping == '_' && type == 'n') spec_error(op, "Cannot specify '_' with 'n'.");
  if (type == 'c') {
    if (f.sign) spec_error(op, "Sign not allowed with integer format specifier 'c'");
    if (f.alt) spec_error(op, "Alternate form (#) not allowed with integer format specifier 'c'");
    if (f.grouping) spec_error(op, std::string("Cannot specify '") + f.grouping + "' with 'c'.");
    if (v < 0 || v > 0x10FFFF) {
      throw std::overflow_error(error_message("[", op, "] %c arg not in range(0x110000)"));
    }
    std::string ch;
    auto c = static_cast<uint32_t>(v);
    if (c < 0x80) {
      ch += static_cast<char>(c);
    } else if (c < 0x800) {
      ch += static_cast<char>(0xC0 | (c >> 6));
      ch += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      ch += static_cast<char>(0xE0 | (c >> 12));
      ch += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      ch += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      ch += static_cast<char>(0xF0 | (c >> 18));
      ch += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      ch += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      ch += static_cast<char>(0x80 | (c & 0x3F));
    }
    return pad(f, ch, 0, '>');
  }
  int base = 10;
  std::string prefix;
  switch (type) {
    case 'd':
    case 'n': break;
    case 'b': base = 2; prefix = "0b"; break;
    case 'o': base = 8; prefix = "0o"; break;
    case 'x': base = 16; prefix = "0x"; break;
    case 'X': base = 16; prefix = "0X"; break;
    default:
      spec_error(op, std::string("Unknown format code '") + type + "' for object of type 'int'");
  }
  if (!f.alt) prefix.clear();
  const bool negative = v < 0;
  uint64_t mag = negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits;
  const char* symbols = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    digits += symbols[mag % base];
    mag /= base;
  } while (mag);
  digits = std::string(digits.rbegin(), digits.rend());
  return number_layout(f, negative, prefix, digits, "", base == 10 ? 3 : 4);
}

std::string format_float(double v, FormatSpec f, const char* op) {
  char type = f.type;
  if (type && std::string("eEfFgGn%").find(type) == std::string::npos) {
    spec_error(op, std::string("Unknown format code '") + type + "' for object of type 'float'");
  }
  if (type == 'n' && f.grouping) {
    spec_error(op, std::string("Cannot specify '") + f.grouping + "' with 'n'.");
  }
  const bool upper = type == 'E' || type == 'F' || type == 'G';
  bool percent = type == '%';
  if (percent) v *= 100.0;
  bool negative = std::signbit(v) && !std::isnan(v);
  std::string body;
  if (std::isnan(v) || std::isinf(v)) {
    body = std::isnan(v) ? "nan" : "inf";
    if (upper) body = std::isnan(v) ? "NAN" : "INF";
    if (percent) body += "%";
    f.grouping = 0;  // no digits to group (Python pads inf with plain zeros)
    return number_layout(f, negative, "", "", body, 3);
  }
  const int p = static_cast<int>(f.precision);
  switch (type) {
    case 0:
      body = p < 0 ? repr_body(v) : general_body(v, p, f.alt, true);
      if (f.alt && body.find('.') == std::string::npos) body.insert(body.find('e'), ".");
      break;
    case 'e':
    case 'E':
      body = to_chars_text(v, std::chars_format::scientific, p < 0 ? 6 : p);
      if (f.alt && body.find('.') == std::string::npos) body.insert(body.find('e'), ".");
      break;
    case 'f':
    case 'F':
    case '%':
      body = to_chars_text(v, std::chars_format::fixed, p < 0 ? 6 : p);
      if (f.alt && body.find('.') == std::string::npos) body += ".";
      break;
    default:  // g, G, n
      body = general_body(v, p < 0 ? 6 : p, f.alt, false);
  }
  if (upper) {
    for (char& c : body) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (percent) body += "%";
  if (f.z && negative && body.find_first_of("123456789") >= body.find_first_of("eE%")) {
    negative = false;  // a negative zero after rounding
  }
  size_t int_end = body.find_first_not_of("0123456789");
  if (int_end == std::string::npos) int_end = body.size();
  return number_layout(f, negative, "", body.substr(0, int_end), body.substr(int_end), 3);
}

std::string format_string(const std::string& s, FormatSpec f, const char* op) {
  if (f.type && f.type != 's') {
    spec_error(op, std::string("Unknown format code '") + f.type + "' for object of type 'str'");
  }
  if (f.sign) spec_error(op, "Sign not allowed in string format specifier");
  if (f.alt) spec_error(op, "Alternate form (#) not allowed in string format specifier");
  if (f.z) spec_error(op, "Negative zero coercion (z) not allowed in format specifier");
  if (f.align == '=') spec_error(op, "'=' alignment not allowed in string format specifier");
  if (f.grouping) spec_error(op, std::string("Cannot specify '") + f.grouping + "' with 's'.");
  std::string body = s;
  if (f.precision >= 0 && utf8_length(s) > f.precision) {
    body.clear();
    std::vector<std::string> chars = utf8_chars(s);
    for (int64_t i = 0; i < f.precision; ++i) body += chars[i];
  }
  return pad(f, body, 0, '<');
}

}  // namespace

std::string format_value(const Value& v, const std::string& spec, const char* op) {
  if (spec.empty()) return python_str(v);
  Value x = v;
  if (x.is_array() && x.as_array().ndim() == 0) x = scalar_of(x.as_array());
  // A bool with a spec formats as the int it is (format(True, ">5") is "    1").
  if (x.is_bool()) x = Value(int64_t{x.as_bool()});
  switch (x.kind()) {
    case ValueKind::integer: {
      FormatSpec f = parse_spec(spec, x, op);
      if (f.type && std::string("eEfFgG%").find(f.type) != std::string::npos) {
        return format_float(static_cast<double>(x.as_int()), f, op);
      }
      return format_int(x.as_int(), f, op);
    }
    case ValueKind::floating: {
      double d = x.as_float();
      if (v.is_array() && v.as_array().dtype() == DType::float32) d = static_cast<float>(d);
      return format_float(d, parse_spec(spec, x, op), op);
    }
    case ValueKind::string: return format_string(x.as_string(), parse_spec(spec, x, op), op);
    default:
      throw TypeError(error_message("[", op, "] unsupported format string passed to ",
                                    python_type_name(v), ".__format__: '", spec, "'"));
  }
}

std::string percent_format(const std::string& fmt, const Value& args, const char* op) {
  const bool is_tuple = args.is_tuple();
  const List single{args};
  const List& values = is_tuple ? args.as_list() : single;
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  auto fail = [&](const std::string& what) -> void {
    throw TypeError(error_message("[", op, "] ", what));
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) {
      throw std::invalid_argument(error_message("[", op, "] incomplete format"));
    }
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) {
        throw std::invalid_argument(error_message("[", op, "] incomplete format key"));
      }
      if (!args.is_dict()) fail("format requires a mapping");
      Value key(fmt.substr(i + 1, close - i - 1));
      value = args.as_dict().find(key);
      if (!value) throw KeyError(error_message("[", op, "] ", python_repr(key)));
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    const std::string flag_chars = "#0- +";
    while (i < fmt.size() && flag_chars.find(fmt[i]) != std::string::npos) flags += fmt[i++];
    auto number = [&]() -> std::string {
      std::string n;
      if (i < fmt.size() && fmt[i] == '*') {
        if (next >= values.size()) fail("not enough arguments for format string");
        const Value& w = values[next++];
        if (!w.is_int()) fail("* wants int");
        ++i;
        return std::to_string(w.as_int());
      }
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') n += fmt[i++];
      return n;
    };
    std::string width = number(), precision;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = number();
      if (precision.empty()) precision = "0";
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw std::invalid_argument(error_message("[", op, "] incomplete format"));
    char type = fmt[i];
    if (!value) {
      if (next >= values.size()) fail("not enough arguments for format string");
      value = &values[next++];
    }
    const bool left = flags.find('-') != std::string::npos;
    std::string spec(left ? "<" : ">");
    Value v = *value;
    if (v.is_array() && v.as_array().ndim() == 0) v = scalar_of(v.as_array());
    if (type == 's' || type == 'r') {
      std::string text = type == 's' ? python_str(*value) : python_repr(*value);
      spec += width;
      if (!precision.empty()) spec += "." + precision;
      out += format_value(Value(text), spec, op);
      continue;
    }
    if (type == 'c') {
      if (v.is_string()) {
        if (utf8_length(v.as_string()) != 1) fail("%c requires an int or a unicode character");
        out += format_value(v, spec + width, op);
      } else {
        if (!v.is_int() && !v.is_bool()) fail("%c requires an int or a unicode character");
        out += format_value(v, spec + width + "c", op);
      }
      continue;
    }
    const std::string numeric_types = "diuoxXeEfFgG";
    if (numeric_types.find(type) == std::string::npos) {
      throw std::invalid_argument(error_message("[", op, "] unsupported format character '",
                                                std::string(1, type), "'"));
    }
    if (!v.is_scalar()) {
      fail(error_message("%", type, " format: a real number is required, not ",
                         python_type_name(*value)));
    }
    if (flags.find('+') != std::string::npos) {
      spec += "+";
    } else if (flags.find(' ') != std::string::npos) {
      spec += " ";
    }
    if (flags.find('#') != std::string::npos) spec += "#";
    if (flags.find('0') != std::string::npos && !left) spec = "0=" + spec.substr(1);
    spec += width;
    if (type == 'd' || type == 'i' || type == 'u') {
      if (v.is_float()) {
        const double d = std::trunc(v.as_float());
        if (!std::isfinite(d)) fail("cannot convert float infinity or NaN to integer");
        v = Value(static_cast<int64_t>(d));
      }
      out += format_value(v, spec + "d", op);
    } else if (type == 'o' || type == 'x' || type == 'X') {
      if (v.is_float()) {
        fail(error_message("%", type, " format: an integer is required, not float"));
      }
      out += format_value(v, spec + type, op);
    } else {
      if (!precision.empty()) spec += "." + precision;
      if (v.is_int()) v = Value(static_cast<double>(v.as_int()));
      if (v.is_bool()) v = Value(v.as_bool() ? 1.0 : 0.0);
      out += format_value(v, spec + type, op);
    }
  }
  if (!used_mapping && !args.is_dict() && next < values.size()) {
    fail("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Python's str.isspace() for one character (code point) of UTF-8 text.
bool is_space(const std::string& c) {
  if (c.size() == 1) {
    const auto b = static_cast<unsigned char>(c[0]);
    return b == ' ' || (b >= '\t' && b <= '\r') || (b >= 0x1c && b <= 0x1f);
  }
  static const char* const wide[] = {"\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80",
                                     "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
                                     "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* w : wide) {
    if (c == w) return true;
  }
  // U+2000..U+200A
  if (c.size() != 3 || c[0] != '\xe2' || c[1] != '\x80') return false;
  const auto last = static_cast<unsigned char>(c[2]);
  return last >= 0x80 && last <= 0x8a;
}

Value str_split(Args& a) {
  const std::string& s = a.string(0);
  int64_t maxsplit = a.integer(2);
  List out;
  if (a.is_nil(1)) {
    // Runs of whitespace separate; leading and trailing whitespace give nothing.
    const std::vector<std::string> cs = utf8_chars(s);
    size_t i = 0;
    while (i < cs.size() && is_space(cs[i])) ++i;
    while (i < cs.size()) {
      std::string piece;
      if (maxsplit == 0) {  // the rest, trailing whitespace kept
        while (i < cs.size()) piece += cs[i++];
        out.emplace_back(std::move(piece));
        break;
      }
      while (i < cs.size() && !is_space(cs[i])) piece += cs[i++];
      out.emplace_back(std::move(piece));
      --maxsplit;
      while (i < cs.size() && is_space(cs[i])) ++i;
    }
    return Value(std::move(out));
  }
  const std::string& sep = a.string(1);
  if (sep.empty()) a.value_error(1, "is an empty separator");
  size_t i = 0;
  for (size_t at = s.find(sep); at != std::string::npos && maxsplit != 0; at = s.find(sep, i)) {
    out.emplace_back(s.substr(i, at - i));
    i = at + sep.size();
    --maxsplit;
  }
  out.emplace_back(s.substr(i));
  return Value(std::move(out));
}

Value str_strip(Args& a, bool left, bool right) {
  const std::string& text = a.string(0);
  if (is_ascii(text) && (a.is_nil(1) || is_ascii(a.string(1)))) {
    // ASCII text and characters: bytes are characters (a word stripped in a
    // loop split every word into strings of one character before).
    const std::string* chars = a.is_nil(1) ? nullptr : &a.string(1);
    auto strip = [&](char c) {
      const auto u = static_cast<unsigned char>(c);
      if (!chars) return u == ' ' || (u >= '\t' && u <= '\r') || (u >= 0x1c && u <= 0x1f);
      return chars->find(c) != std::string::npos;
    };
    size_t b = 0, e = text.size();
    while (left && b < e && strip(text[b])) ++b;
    while (right && e > b && strip(text[e - 1])) --e;
    return Value(text.substr(b, e - b));
  }
  // Whole characters (code points) are compared, not bytes.
  const std::vector<std::string> cs = utf8_chars(a.string(0));
  std::vector<std::string> set;
  if (!a.is_nil(1)) set = utf8_chars(a.string(1));
  auto strip = [&](const std::string& c) {
    return a.is_nil(1) ? is_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cs.size();
  while (left && b < e && strip(cs[b])) ++b;
  while (right && e > b && strip(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return Value(std::move(out));
}

Value str_case(Args& a, bool upper) {
  const std::string& s = a.string(0);
  if (!is_ascii(s)) {
    throw std::invalid_argument(error_message("[", a.op(),
                                              "] changing the case of non-ASCII text is not "
                                              "supported: got ",
                                              a[0].describe()));
  }
  std::string out = s;
  for (char& c : out) c = static_cast<char>(upper ? std::toupper(c) : std::tolower(c));
  return Value(std::move(out));
}

// s.startswith(prefix) / endswith: prefix may be a tuple of strings.
Value str_affix(Args& a, bool start) {
  const std::string& s = a.string(0);
  List options = a[1].is_list() ? a[1].as_list() : List{a[1]};
  for (const Value& o : options) {
    if (!o.is_string()) a.type_error(1, "a string or a tuple of strings");
    const std::string& p = o.as_string();
    if (p.size() > s.size()) continue;
    if (s.compare(start ? 0 : s.size() - p.size(), p.size(), p) == 0) return true;
  }
  return false;
}

Value str_replace(Args& a) {
  const std::string &s = a.string(0), &old = a.string(1), &repl = a.string(2);
  int64_t count = a.integer(3);
  if (old.empty()) {
    // Python inserts repl between every character (and at both ends).
    std::vector<std::string> cs = utf8_chars(s);
    std::string out;
    for (size_t i = 0; i <= cs.size(); ++i) {
      if (count != 0) {
        out += repl;
        --count;
      }
      if (i < cs.size()) out += cs[i];
    }
    return Value(std::move(out));
  }
  std::string out;
  size_t i = 0;
  for (size_t at = s.find(old); at != std::string::npos && count != 0; at = s.find(old, i)) {
    out += s.substr(i, at - i) + repl;
    i = at + old.size();
    --count;
  }
  return Value(out + s.substr(i));
}

Value str_join(Args& a) {
  const std::string& sep = a.string(0);
  if (!a[1].is_list()) a.type_error(1, "a list or tuple of strings");
  std::string out;
  const List& items = a[1].as_list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw TypeError(error_message("[", a.op(), "] sequence item ", i, ": expected str instance, ",
                                    python_type_name(items[i]), " found"));
    }
    if (i) out += sep;
    out += items[i].as_string();
  }
  return Value(std::move(out));
}

Value str_find(Args& a) {
  const std::string &s = a.string(0), &sub = a.string(1);
  size_t at = s.find(sub);
  if (at == std::string::npos) return Value(int64_t{-1});
  return Value(utf8_length(s.substr(0, at)));
}

PrimitiveSpec str_spec(const char* name, std::vector<Param> params, std::string help,
                       std::function<Value(Args&)> eval) {
  PrimitiveSpec spec{.name = name,
                     .family = "text",
                     .params = std::move(params),
                     .help = std::move(help),
                     .eval = std::move(eval)};
  spec.grads.assign(spec.params.size(), "");
  return spec;
}

const bool registered_text = register_primitives({
    str_spec("str_split", {{"s"}, opt("sep", Value()), opt("maxsplit", Value(int64_t{-1}))},
             "Python's s.split(sep, maxsplit): a list of strings; without sep, runs of whitespace "
             "separate.",
             str_split),
    str_spec("str_join", {{"sep"}, {"items"}},
             "Python's sep.join(items) for a list or tuple of strings (TypeError naming a "
             "non-string item).",
             str_join),
    str_spec("str_strip", {{"s"}, opt("chars", Value())},
             "Python's s.strip(chars): without chars, whitespace.",
             [](Args& a) { return str_strip(a, true, true); }),
    str_spec("str_lstrip", {{"s"}, opt("chars", Value())}, "Python's s.lstrip(chars).",
             [](Args& a) { return str_strip(a, true, false); }),
    str_spec("str_rstrip", {{"s"}, opt("chars", Value())}, "Python's s.rstrip(chars).",
             [](Args& a) { return str_strip(a, false, true); }),
    str_spec("str_upper", {{"s"}}, "Python's s.upper() (ASCII text only).",
             [](Args& a) { return str_case(a, true); }),
    str_spec("str_lower", {{"s"}}, "Python's s.lower() (ASCII text only).",
             [](Args& a) { return str_case(a, false); }),
    str_spec("str_startswith", {{"s"}, {"prefix"}},
             "Python's s.startswith(prefix); prefix may be a tuple of strings.",
             [](Args& a) { return str_affix(a, true); }),
    str_spec("str_endswith", {{"s"}, {"suffix"}},
             "Python's s.endswith(suffix); suffix may be a tuple of strings.",
             [](Args& a) { return str_affix(a, false); }),
    str_spec("str_replace", {{"s"}, {"old"}, {"new"}, opt("count", Value(int64_t{-1}))},
             "Python's s.replace(old, new, count).", str_replace),
    str_spec("str_find", {{"s"}, {"sub"}},
             "Python's s.find(sub): the index (in characters) of the first occurrence, or -1.",
             str_find),
    {.name = "format",
     .family = "text",
     .params = {{"value"}, opt("spec", Value(std::string()))},
     .help = "Python's format(value, spec) with the format mini-language "
             "[[fill]align][sign][z][#][0][width][,|_][.precision][type] for ints (b c d o x X n "
             "and the float types), floats (e E f F g G n % or none) and strings (s); an empty "
             "spec gives str(value) for any value. f\"{x:.4f}\" is format(x, \".4f\"). Bad specs "
             "raise ValueError, values that take no spec (None, lists, arrays) TypeError.",
     .eval = [](Args& a) -> Value { return Value(format_value(a[0], a.string(1), a.op())); },
     .grads = {"", ""}},
    {.name = "repr",
     .family = "text",
     .params = {{"x"}},
     .help = "Python's repr(x): strings quoted ('a', \"it's\"), NumPy scalars as np.float64(0.5), "
             "other values as str(x). repr of an n-d array raises TypeError.",
     .eval = [](Args& a) -> Value { return Value(python_repr(a[0])); },
     .grads = {""}},
});

}  // namespace

}  // namespace tessera
