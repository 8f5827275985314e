#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"

namespace tessera::kernels {

namespace {

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

template <class F>
bool parse_float(std::string_view s, F& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ptr != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves `out` untouched on overflow or underflow; strtod gives
    // inf or the nearest denormal/zero as NumPy's parser does.
    std::string copy(s);
    if constexpr (std::is_same_v<F, float>) {
      out = std::strtof(copy.c_str(), nullptr);
    } else {
      out = std::strtod(copy.c_str(), nullptr);
    }
    return true;
  }
  return ec == std::errc();
}

bool parse_int(std::string_view s, int64_t& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_bool(std::string_view s, bool& out) {
  if (s == "1" || s == "true" || s == "True" || s == "TRUE") {
    out = true;
    return true;
  }
  if (s == "0" || s == "false" || s == "False" || s == "FALSE") {
    out = false;
    return true;
  }
  return false;
}

template <class T>
bool parse_cell(std::string_view s, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    return parse_bool(s, out);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return parse_int(s, out);
  } else {
    return parse_float(s, out);
  }
}

template <class T>
void append_value(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? '1' : '0';
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) {
        out += "nan";
        return;
      }
      if (std::isinf(v)) {
        out += v > 0 ? "inf" : "-inf";
        return;
      }
    }
    // std::to_chars without a format gives the shortest text that reads back
    // to the same value (per type: float32 values print as float32).
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, res.ptr);
  }
}

}  // namespace

Array parse_csv(const std::string& text, const std::string& name, const std::string& delimiter,
                int64_t skip_header, DType dtype, const char* op) {
  if (delimiter.empty() || delimiter.find('\n') != std::string::npos) {
    throw std::invalid_argument(error_message(
        "[", op, "] delimiter must be a non-empty string without newlines, got '", delimiter,
        "'"));
  }
  if (skip_header < 0) {
    throw std::invalid_argument(
        error_message("[", op, "] skip_header must be non-negative, got ", skip_header));
  }
  return dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // std::vector<bool> has no data(); bools are collected as bytes.
    using Slot = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    std::vector<Slot> values;
    int64_t rows = 0, cols = -1;
    std::string_view all(text);
    int64_t line_no = 0;
    size_t pos = 0;
    while (pos < all.size()) {
      size_t nl = all.find('\n', pos);
      std::string_view line = all.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
      pos = nl == std::string_view::npos ? all.size() : nl + 1;
      ++line_no;
      if (line_no <= skip_header) continue;
      std::string_view body = trim(line);
      if (body.empty() || body[0] == '#') continue;
      int64_t found = 0;
      size_t start = 0;
      for (;;) {
        size_t d = line.find(delimiter, start);
        std::string_view cell =
            trim(line.substr(start, d == std::string_view::npos ? d : d - start));
        ++found;
        T v{};
        if (!parse_cell(cell, v)) {
          throw std::invalid_argument(error_message("[", op, "] '", name, "' line ", line_no,
                                                    ", column ", found, ": cannot parse '", cell,
                                                    "' as ", dtype_name(dtype)));
        }
        values.push_back(static_cast<Slot>(v));
        if (d == std::string_view::npos) break;
        start = d + delimiter.size();
      }
      if (cols < 0) {
        cols = found;
      } else if (found != cols) {
        throw std::invalid_argument(error_message("[", op, "] '", name, "' line ", line_no,
                                                  ": expected ", cols, " values, found ", found));
      }
      ++rows;
    }
    Array out(dtype, {rows, cols < 0 ? 0 : cols});
    T* p = out.template data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    return out;
  });
}

std::string format_csv(const Array& x, const std::string& delimiter, const char* op) {
  if (x.ndim() != 1 && x.ndim() != 2) {
    throw std::invalid_argument(error_message("[", op, "] expected a 1-d or 2-d array, got shape ",
                                              shape_str(x.shape())));
  }
  if (delimiter.empty() || delimiter.find('\n') != std::string::npos) {
    throw std::invalid_argument(error_message(
        "[", op, "] delimiter must be a non-empty string without newlines, got '", delimiter,
        "'"));
  }
  const int64_t rows = x.shape()[0], cols = x.ndim() == 2 ? x.shape()[1] : 1;
  std::string out;
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.template data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        if (c) out += delimiter;
        append_value(out, p[r * cols + c]);
      }
      out += '\n';
    }
  });
  return out;
}

}  // namespace tessera::kernels
