// Arrays as text, as NumPy prints them (numpy.array2string at its defaults:
// precision 8, floatmode 'maxprec', linewidth 75, threshold 1000, edgeitems 3).
//
// Floats of one array share a layout chosen from the values themselves:
// scientific when the largest magnitude is 1e8 or more (1e6 for float32,
// 1e3 for float16: 10^min(8, the type's decimal digits)), the smallest is
// under 1e-4, or they span more than three decades; otherwise positional,
// each value in its shortest digits (in its own type: float32's and
// float16's digits, not float64's) cut to 8 decimals, the decimal points
// aligned. Rows wrap at 75 columns; arrays over 1,000 elements print their
// first and last 3 items per axis, and only those choose the layout.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera {

namespace {

constexpr int kPrecision = 8;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 75;

// A finite value as decimal digits: value = ±d[0].d[1..] × 10^exp.
struct Digits {
  bool negative = false;
  std::string d;  // no trailing zeros, "0" for zero
  int exp = 0;
};

// Parses to_chars/printf scientific text ("-1.25e+03", "1e-05").
Digits parse_scientific(const char* s, const char* end) {
  Digits out;
  if (s < end && *s == '-') {
    out.negative = true;
    ++s;
  }
  while (s < end && *s != 'e') {
    if (*s != '.') out.d += *s;
    ++s;
  }
  if (s < end) {
    ++s;  // 'e'
    std::from_chars(s + (*s == '+' ? 1 : 0), end, out.exp);
  }
  while (out.d.size() > 1 && out.d.back() == '0') out.d.pop_back();
  if (out.d == "0") out.exp = 0;
  return out;
}

// The shortest digits that read back as `v` in `dt` (float32's digits for a
// float32, the 16-bit type's for float16/bfloat16).
Digits shortest_digits(double v, DType dt) {
  char buf[64];
  std::to_chars_result r;
  if (dt == DType::float32 || dt == DType::complex64) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v), std::chars_format::scientific);
  } else if (dt == DType::float16 || dt == DType::bfloat16) {
    r = std::to_chars(buf, buf + sizeof buf, shortest_decimal_16(v, dt),
                      std::chars_format::scientific);
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  }
  Digits d = parse_scientific(buf, r.ptr);
  d.negative = std::signbit(v);
  return d;
}

// Number text in two parts: the integer part (with its sign) and the
// fraction (no trailing zeros); `exp` set in scientific layout.
struct Parts {
  std::string whole, frac;
  int exp = 0;
};

std::string sign_of(const Digits& d, bool plus) { return d.negative ? "-" : (plus ? "+" : ""); }

// Positional, the shortest digits unless they need more than `precision`
// decimals; then the exact value rounded to `precision` decimals (as
// NumPy's Dragon4 does in its unique mode with a cutoff).
Parts positional(double v, DType dt, int precision, bool plus) {
  Digits d = shortest_digits(v, dt);
  const int decimals = std::max<int>(0, static_cast<int>(d.d.size()) - 1 - d.exp);
  if (decimals > precision) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, "%.*f", precision, std::fabs(v));
    std::string s(buf, static_cast<size_t>(std::max(n, 0)));
    auto dot = s.find('.');
    Parts p{sign_of(d, plus) + s.substr(0, dot), dot == std::string::npos ? "" : s.substr(dot + 1)};
    while (!p.frac.empty() && p.frac.back() == '0') p.frac.pop_back();
    return p;
  }
  Parts p;
  p.whole = sign_of(d, plus);
  if (d.exp >= 0) {
    for (int i = 0; i <= d.exp; ++i) p.whole += i < static_cast<int>(d.d.size()) ? d.d[i] : '0';
    if (static_cast<int>(d.d.size()) > d.exp + 1) p.frac = d.d.substr(d.exp + 1);
  } else {
    p.whole += "0";
    p.frac = std::string(-d.exp - 1, '0') + d.d;
  }
  if (d.d == "0") p.frac.clear();
  return p;
}

// Scientific, the shortest digits unless the mantissa needs more than
// `precision` decimals or fewer than `min_digits`; then the exact value
// rounded to that many (Dragon4's unique mode: digits past the shortest
// are the value's own, not zeros).
Parts scientific(double v, DType dt, int precision, bool plus, int min_digits = 0) {
  Digits d = shortest_digits(v, dt);
  const int decimals = static_cast<int>(d.d.size()) - 1;
  if (decimals > precision || decimals < min_digits) {
    char buf[128];
    const int n = std::snprintf(buf, sizeof buf, "%.*e", decimals > precision ? precision : min_digits,
                                std::fabs(v));
    Digits r = parse_scientific(buf, buf + std::max(n, 0));
    r.negative = d.negative;
    d = r;
  }
  return Parts{sign_of(d, plus) + d.d.substr(0, 1), d.d.substr(1), d.exp};
}

// NumPy's FloatingFormat: one layout for all the values of an array.
class FloatFormat {
 public:
  FloatFormat() = default;
  FloatFormat(const std::vector<double>& values, DType dt, bool plus) : dt_(dt), plus_(plus) {
    std::vector<double> finite;
    for (double v : values) {
      if (std::isfinite(v)) finite.push_back(v);
    }
    double max_abs = 0, min_abs = 0;
    bool any_nonzero = false;
    for (double v : finite) {
      const double a = std::fabs(v);
      if (a == 0) continue;
      max_abs = any_nonzero ? std::max(max_abs, a) : a;
      min_abs = any_nonzero ? std::min(min_abs, a) : a;
      any_nonzero = true;
    }
    if (any_nonzero) {
      // NumPy 2.2's cutoff: 10^min(8, decimal digits the type holds).
      const double cutoff = dt == DType::float32 || dt == DType::complex64 ? 1e6
                            : dt == DType::float16                         ? 1e3
                            : dt == DType::bfloat16                        ? 1e2
                                                                           : 1e8;
      const double ratio = dt == DType::float32 || dt == DType::complex64
                               ? static_cast<float>(max_abs) / static_cast<float>(min_abs)
                               : max_abs / min_abs;
      exp_format_ = max_abs >= cutoff || min_abs < 1e-4 || ratio > 1000.0;
    }
    if (finite.empty()) {
      pad_left_ = pad_right_ = 0;
    } else if (exp_format_) {
      int frac = 0, whole = 0, exp_digits = 2;
      for (double v : finite) {
        Parts p = scientific(v, dt_, kPrecision, plus_);
        frac = std::max(frac, static_cast<int>(p.frac.size()));
        whole = std::max(whole, static_cast<int>(p.whole.size()));
        exp_digits = std::max(exp_digits, static_cast<int>(std::to_string(std::abs(p.exp)).size()));
      }
      precision_ = frac;
      min_digits_ = frac;
      pad_left_ = whole;
      exp_size_ = exp_digits;
      pad_right_ = exp_size_ + 2 + precision_;
    } else {
      int frac = 0, whole = 0;
      for (double v : finite) {
        Parts p = positional(v, dt_, kPrecision, plus_);
        frac = std::max(frac, static_cast<int>(p.frac.size()));
        whole = std::max(whole, static_cast<int>(p.whole.size()));
      }
      pad_left_ = whole;
      pad_right_ = frac;
    }
    if (finite.size() != values.size()) {
      bool neg_inf = plus_;
      for (double v : values) neg_inf = neg_inf || (std::isinf(v) && v < 0);
      const int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neg_inf ? 1 : 0) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) {
      std::string s = std::isnan(v) ? (plus_ ? "+nan" : "nan")
                                    : (v < 0 ? "-inf" : (plus_ ? "+inf" : "inf"));
      const int width = pad_left_ + pad_right_ + 1;
      return std::string(std::max<int>(0, width - static_cast<int>(s.size())), ' ') + s;
    }
    Parts p = exp_format_ ? scientific(v, dt_, precision_, plus_, min_digits_)
                          : positional(v, dt_, precision_, plus_);
    if (static_cast<int>(p.frac.size()) < min_digits_) p.frac.resize(min_digits_, '0');
    std::string s(std::max<int>(0, pad_left_ - static_cast<int>(p.whole.size())), ' ');
    s += p.whole + "." + p.frac;
    if (exp_format_) {
      std::string e = std::to_string(std::abs(p.exp));
      s += std::string("e") + (p.exp < 0 ? "-" : "+") +
           std::string(std::max<int>(0, exp_size_ - static_cast<int>(e.size())), '0') + e;
    } else if (static_cast<int>(p.frac.size()) < pad_right_) {
      s += std::string(pad_right_ - p.frac.size(), ' ');
    }
    return s;
  }

 private:
  DType dt_ = DType::float64;
  bool plus_ = false;
  bool exp_format_ = false;
  int precision_ = kPrecision;
  int min_digits_ = 0;
  int pad_left_ = 0, pad_right_ = 0, exp_size_ = -1;
};

std::string pad_to(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string int_text(const Array& a, int64_t i) {
  if (a.dtype() == DType::uint64) return std::to_string(static_cast<uint64_t>(a.get_int(i)));
  return std::to_string(a.get_int(i));
}

// Formats the elements of one array (built from the elements that print).
class ElementFormat {
 public:
  ElementFormat(const Array& a, const std::vector<int64_t>& shown) : a_(a) {
    const DType dt = a.dtype();
    if (dt == DType::bool_) return;
    if (is_integer(dt)) {
      for (int64_t i : shown) width_ = std::max(width_, int_text(a, i).size());
    } else if (is_complex(dt)) {
      std::vector<double> re, im;
      for (int64_t i : shown) {
        std::complex<double> z = a.get_complex(i);
        re.push_back(z.real());
        im.push_back(z.imag());
      }
      real_ = FloatFormat(re, dt, false);
      imag_ = FloatFormat(im, dt, true);
    } else {
      std::vector<double> v;
      for (int64_t i : shown) v.push_back(a.get_double(i));
      real_ = FloatFormat(v, dt, false);
    }
  }

  std::string operator()(int64_t i) const {
    const DType dt = a_.dtype();
    if (dt == DType::bool_) return a_.get_bool(i) ? " True" : "False";
    if (is_integer(dt)) return pad_to(int_text(a_, i), width_);
    if (is_complex(dt)) {
      std::complex<double> z = a_.get_complex(i);
      std::string im = imag_(z.imag());
      size_t end = im.find_last_not_of(' ') + 1;  // 'j' before the padding
      return real_(z.real()) + im.substr(0, end) + "j" + im.substr(end);
    }
    return real_(a_.get_double(i));
  }

 private:
  const Array& a_;
  size_t width_ = 0;
  FloatFormat real_, imag_;
};

// Flat (C-order) indices of the elements that print: all of them, or with
// summarization the first and last kEdgeItems along every axis.
void shown_indices(const Shape& shape, const std::vector<int64_t>& strides, bool summary, int axis,
                   int64_t base, std::vector<int64_t>& out) {
  if (axis == static_cast<int>(shape.size())) {
    out.push_back(base);
    return;
  }
  const int64_t n = shape[axis];
  const bool cut = summary && n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) i = n - kEdgeItems;
    shown_indices(shape, strides, summary, axis + 1, base + i * strides[axis], out);
  }
}

// Appends `word` to the current `line`, wrapping first if the line would
// grow past `width` (never wrapping a line that holds only its indent).
void extend_line(std::string& s, std::string& line, const std::string& word, size_t width,
                 const std::string& indent) {
  if (line.size() + word.size() > width && line.size() > indent.size()) {
    size_t end = line.find_last_not_of(' ');
    s += line.substr(0, end == std::string::npos ? 0 : end + 1) + "\n";
    line = indent;
  }
  line += word;
}

struct Printer {
  const Array& a;
  const ElementFormat& format;
  std::vector<int64_t> strides;
  bool summary;

  std::string row(int axis, int64_t base, const std::string& indent, int width) const {
    const int axes_left = a.ndim() - axis;
    if (axes_left == 0) return format(base);
    const std::string next_indent = indent + " ";
    const int next_width = width - 1;
    const int64_t n = a.shape()[axis];
    const bool cut = summary && n > 2 * kEdgeItems;
    const int64_t leading = cut ? kEdgeItems : 0;
    const int64_t trailing = cut ? kEdgeItems : n;
    auto item = [&](int64_t i) {
      return row(axis + 1, base + i * strides[axis], next_indent, next_width);
    };
    std::string s;
    if (axes_left == 1) {
      const size_t elem_width = static_cast<size_t>(std::max(width - 1, 0));
      std::string line = indent;
      for (int64_t i = 0; i < leading; ++i) {
        extend_line(s, line, item(i), elem_width, indent);
        line += " ";
      }
      if (cut) {
        extend_line(s, line, "...", elem_width, indent);
        line += " ";
      }
      for (int64_t i = trailing; i > 1; --i) {
        extend_line(s, line, item(n - i), elem_width, indent);
        line += " ";
      }
      extend_line(s, line, item(n - 1), elem_width, indent);
      s += line;
    } else {
      const std::string line_sep(axes_left - 1, '\n');
      for (int64_t i = 0; i < leading; ++i) s += indent + item(i) + line_sep;
      if (cut) s += indent + "..." + line_sep;
      for (int64_t i = trailing; i > 1; --i) s += indent + item(n - i) + line_sep;
      s += indent + item(n - 1);
    }
    return "[" + s.substr(indent.size()) + "]";
  }
};

// Python's layout of a float: positional from 1e-4 up to `upper`
// (1e16 for float64, 1e6 for float32, 1e3 for 16-bit floats, as NumPy's
// scalars print), otherwise "1e-05" / "2.5e+16".
std::string scalar_float_text(double v, DType dt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double upper = dt == DType::float32 || dt == DType::complex64 ? 1e6
                       : dt == DType::float16 || dt == DType::bfloat16 ? 1e3
                                                                       : 1e16;
  Digits d = shortest_digits(v, dt);
  const double a = std::fabs(dt == DType::float16 || dt == DType::bfloat16
                                 ? shortest_decimal_16(v, dt)
                                 : v);
  if (a != 0 && (a < 1e-4 || a >= upper)) {
    std::string s = (d.negative ? "-" : "") + d.d.substr(0, 1);
    if (d.d.size() > 1) s += "." + d.d.substr(1);
    std::string e = std::to_string(std::abs(d.exp));
    return s + "e" + (d.exp < 0 ? "-" : "+") + (e.size() < 2 ? "0" : "") + e;
  }
  Parts p = positional(v, dt, 1000, false);
  return p.whole + "." + (p.frac.empty() ? "0" : p.frac);
}

// NumPy's text of one element as a scalar: "1.5", "1e-05", "(1+2j)", "True".
std::string scalar_text(const Array& a, int64_t i) {
  const DType dt = a.dtype();
  if (dt == DType::bool_) return a.get_bool(i) ? "True" : "False";
  if (is_integer(dt)) return int_text(a, i);
  if (is_complex(dt)) {
    std::complex<double> z = a.get_complex(i);
    auto part = [dt](double v) {
      std::string t = scalar_float_text(v, dt);
      if (t.size() > 2 && t.compare(t.size() - 2, 2, ".0") == 0) t.resize(t.size() - 2);
      return t;
    };
    std::string im = part(std::fabs(z.imag()));
    if (z.real() == 0.0 && !std::signbit(z.real())) {
      return (std::signbit(z.imag()) ? "-" : "") + im + "j";
    }
    const bool minus = std::signbit(z.imag()) && !std::isnan(z.imag());
    return "(" + part(z.real()) + (minus ? "-" : "+") + im + "j)";
  }
  return scalar_float_text(a.get_double(i), dt);
}

}  // namespace

std::string Array::str() const {
  if (ndim() == 0) return scalar_text(*this, 0);
  if (size_ == 0) return "[]";
  const bool summary = size_ > kThreshold;
  std::vector<int64_t> strides = contiguous_strides(shape_);
  std::vector<int64_t> shown;
  shown_indices(shape_, strides, summary, 0, 0, shown);
  ElementFormat format(*this, shown);
  Printer printer{*this, format, strides, summary};
  return printer.row(0, 0, " ", kLineWidth);
}

std::string Array::repr_short() const {
  std::string s = "array of shape " + shape_str(shape_) + " and dtype " +
                  std::string(dtype_name(dtype_));
  if (size_ == 1) s += " (value " + scalar_text(*this, 0) + ")";
  return s;
}

}  // namespace tessera
