#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/kernels/linalg.hpp"

namespace tessera::kernels {

static_assert(std::endian::native == std::endian::little,
              ".npy encoding assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

// The three entries of a .npy header dict.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
  bool has_descr = false, has_order = false, has_shape = false;
};

// Recursive-descent reader of the Python dict literal in a .npy header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name, const char* op)
      : s_(text), name_(name), op_(op) {}

  NpyHeader parse() {
    NpyHeader h;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') {
          throw std::invalid_argument(error_message(
              "[", op_, "] '", name_, "': unsupported dtype: structured arrays are not supported"));
        }
        h.descr = string_literal();
        h.has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        h.has_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        h.has_shape = true;
      } else {
        fail("unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the dict");
    if (!h.has_descr) fail("missing key 'descr'");
    if (!h.has_order) fail("missing key 'fortran_order'");
    if (!h.has_shape) fail("missing key 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(error_message("[", op_, "] '", name_, "': malformed header: ",
                                              what, " at position ", pos_, " in \"", s_, "\""));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape out;
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (pos_ == start) fail("expected a non-negative integer in the shape");
      int64_t v = 0;
      for (size_t i = start; i < pos_; ++i) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("shape entry too large");
        v = v * 10 + (s_[i] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 longs
      out.push_back(v);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return out;
  }

  std::string_view s_;
  const std::string& name_;
  const char* op_;
  size_t pos_ = 0;
};

// How one stored element is decoded.
struct ElementFormat {
  char kind = 0;         // 'f', 'i', 'u' or 'b'
  int size = 0;          // bytes per element
  bool swap = false;     // big-endian data
  DType dtype{};         // dtype of the resulting array
};

ElementFormat element_format(const std::string& descr, const std::string& name, const char* op) {
  auto unsupported = [&]() -> ElementFormat {
    throw std::invalid_argument(
        error_message("[", op, "] '", name, "': unsupported dtype '", descr,
                      "' (supported: bool, int8-64, uint8-64, float16/32/64, complex64/128)"));
  };
  if (descr.size() < 3 || descr.size() > 4) unsupported();
  ElementFormat f;
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') unsupported();
  f.kind = descr[1];
  std::string digits = descr.substr(2);
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) unsupported();
  }
  f.size = std::stoi(digits);
  f.swap = order == '>' && f.size > 1;
  auto pick = [&](std::initializer_list<std::pair<int, DType>> options) {
    for (auto [size, dt] : options) {
      if (size == f.size) {
        f.dtype = dt;
        return;
      }
    }
    unsupported();
  };
  switch (f.kind) {
    case 'f': pick({{2, DType::float16}, {4, DType::float32}, {8, DType::float64}}); break;
    case 'i':
      pick({{1, DType::int8}, {2, DType::int16}, {4, DType::int32}, {8, DType::int64}});
      break;
    case 'u':
      pick({{1, DType::uint8}, {2, DType::uint16}, {4, DType::uint32}, {8, DType::uint64}});
      break;
    case 'c': pick({{8, DType::complex64}, {16, DType::complex128}}); break;
    case 'b': pick({{1, DType::bool_}}); break;
    default: unsupported();
  }
  return f;
}

// Decodes n elements from `src` into `out` (whose dtype is f.dtype): the
// bytes as they are, swapped for big-endian data (each part of a complex
// number on its own), bools normalised to 0/1.
void decode(const ElementFormat& f, const unsigned char* src, int64_t n, Array& out) {
  auto* dst = static_cast<unsigned char*>(out.raw());
  const size_t bytes = static_cast<size_t>(n) * f.size;
  std::memcpy(dst, src, bytes);
  if (f.swap) {
    const int unit = f.kind == 'c' ? f.size / 2 : f.size;
    for (size_t i = 0; i < bytes; i += unit) std::reverse(dst + i, dst + i + unit);
  }
  if (f.kind == 'b') {
    for (size_t i = 0; i < bytes; ++i) dst[i] = dst[i] != 0;
  }
}

const char* descr_of(DType dt) {
  switch (dt) {
    case DType::bool_: return "|b1";
    case DType::int8: return "|i1";
    case DType::int16: return "<i2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::uint8: return "|u1";
    case DType::uint16: return "<u2";
    case DType::uint32: return "<u4";
    case DType::uint64: return "<u8";
    case DType::float16: return "<f2";
    case DType::float32:
    case DType::bfloat16: return "<f4";  // NumPy has no bfloat16: stored as float32
    case DType::float64: return "<f8";
    case DType::complex64: return "<c8";
    case DType::complex128: return "<c16";
  }
  return "<f8";
}

}  // namespace

Array parse_npy(const std::string& bytes, const std::string& name, const char* op) {
  if (bytes.size() < 10 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    throw std::invalid_argument(
        error_message("[", op, "] '", name, "' is not a .npy file: bad magic string"));
  }
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6], minor = u[7];
  size_t header_len, start;
  if (major == 1) {
    header_len = u[8] | (size_t(u[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      throw std::invalid_argument(error_message("[", op, "] '", name, "': truncated header"));
    }
    header_len = u[8] | (size_t(u[9]) << 8) | (size_t(u[10]) << 16) | (size_t(u[11]) << 24);
    start = 12;
  } else {
    throw std::invalid_argument(error_message("[", op, "] '", name,
                                              "': unsupported .npy format version ", major, ".",
                                              minor));
  }
  if (bytes.size() - start < header_len) {
    throw std::invalid_argument(error_message("[", op, "] '", name,
                                              "': truncated header: expected ", header_len,
                                              " bytes, found ", bytes.size() - start));
  }
  std::string_view text(bytes.data() + start, header_len);
  NpyHeader h = HeaderParser(text, name, op).parse();
  ElementFormat f = element_format(h.descr, name, op);
  const int64_t n = shape_size(h.shape, op);
  const size_t data_start = start + header_len;
  const size_t available = bytes.size() - data_start;
  // Checked before allocating, so a corrupt shape cannot request huge memory.
  if (static_cast<uint64_t>(n) > available / static_cast<size_t>(f.size)) {
    const uint64_t size = static_cast<uint64_t>(f.size);
    std::string needed = static_cast<uint64_t>(n) <= std::numeric_limits<uint64_t>::max() / size
                             ? std::to_string(static_cast<uint64_t>(n) * size)
                             : std::to_string(n) + " x " + std::to_string(size);
    throw std::invalid_argument(error_message("[", op, "] '", name, "': truncated data: shape ",
                                              shape_str(h.shape), " of '", h.descr, "' needs ",
                                              needed, " bytes, found ", available));
  }
  const auto* src = u + data_start;
  if (!h.fortran_order || h.shape.size() < 2) {
    Array out(f.dtype, h.shape);
    decode(f, src, n, out);
    return out;
  }
  // Fortran order is C order of the reversed shape; reversing the axes back
  // gives the array.
  Shape reversed(h.shape.rbegin(), h.shape.rend());
  Array tmp(f.dtype, reversed);
  decode(f, src, n, tmp);
  std::vector<int> perm;
  for (int i = static_cast<int>(reversed.size()) - 1; i >= 0; --i) perm.push_back(i);
  return permute_axes(tmp, perm);
}

std::string format_npy(const Array& x0) {
  const Array x = x0.dtype() == DType::bfloat16 ? x0.astype(DType::float32) : x0.contiguous();
  std::string dict = "{'descr': '";
  dict += descr_of(x.dtype());
  dict += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < x.shape().size(); ++i) {
    dict += std::to_string(x.shape()[i]);
    if (x.ndim() == 1 || i + 1 < x.shape().size()) dict += ",";
    if (i + 1 < x.shape().size()) dict += " ";
  }
  dict += "), }";
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned.
  size_t preamble = kMagicLen + 2 + 2;
  int major = 1;
  size_t total = preamble + dict.size() + 1;
  size_t padded = (total + kAlign - 1) / kAlign * kAlign;
  if (padded - preamble > 0xffff) {
    major = 2;
    preamble = kMagicLen + 2 + 4;
    total = preamble + dict.size() + 1;
    padded = (total + kAlign - 1) / kAlign * kAlign;
  }
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  const size_t len = dict.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major == 2) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  out += dict;
  if (x.dtype() == DType::bool_) {
    // One byte per bool, 0 or 1.
    const bool* p = x.data<bool>();
    for (int64_t i = 0; i < x.size(); ++i) out += p[i] ? '\1' : '\0';
  } else {
    out.append(static_cast<const char*>(x.raw()), x.nbytes());
  }
  return out;
}

}  // namespace tessera::kernels
