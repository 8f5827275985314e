#include "tessera/kernels/dataio.hpp"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"

namespace tessera::kernels {

namespace {

uint32_t read_be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

template <class T>
T load_be(const unsigned char* p) {
  // Assemble the big-endian bytes into an unsigned integer of T's size, then
  // reinterpret it as T.
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 2, uint16_t,
                                                  std::conditional_t<sizeof(T) == 4, uint32_t,
                                                                     uint64_t>>>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>((u << 8) | U{p[i]});
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

template <class Src, class Dst>
void decode(const unsigned char* data, Dst* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    out[i] = element_cast<Dst>(load_be<Src>(data + i * sizeof(Src)));
  }
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

template <class T>
bool parse_number(std::string_view s, T& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || s[0] == '+') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ptr != s.data() + s.size()) return false;
  if constexpr (std::is_floating_point_v<T>) {
    if (ec == std::errc::result_out_of_range) {
      // from_chars leaves `out` unset on overflow or underflow; strtod gives
      // inf or the nearest denormal or zero, as NumPy does.
      std::string copy(s);
      out = std::is_same_v<T, float> ? std::strtof(copy.c_str(), nullptr)
                                     : std::strtod(copy.c_str(), nullptr);
      return true;
    }
  }
  return ec == std::errc();
}

template <class T>
TextError parse_rows(const TextLines& text, T* out, int64_t begin, int64_t end, DType dtype) {
  const int64_t cols = text.columns;
  for (int64_t r = begin; r < end; ++r) {
    std::string_view line = text.lines[r];
    T* row = out + r * cols;
    int64_t found = 0;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      if (i == line.size()) break;
      size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      std::string_view cell = line.substr(i, j - i);
      T v{};
      if (!parse_number(cell, v)) {
        return {text.line_numbers[r],
                error_message("line ", text.line_numbers[r], ", value ", found + 1,
                              ": cannot parse '", cell, "' as ", dtype_name(dtype))};
      }
      if (found < cols) row[found] = v;
      ++found;
      i = j;
    }
    if (found != cols) {
      return {text.line_numbers[r],
              error_message("line ", text.line_numbers[r], ": expected ", cols,
                            " values (as on line ", text.line_numbers[0], "), found ", found)};
    }
  }
  return {};
}

}  // namespace

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& name, const char* op) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer), not raw zlib.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    throw std::runtime_error(error_message("[", op, "] '", name, "': cannot start zlib"));
  }
  std::string out;
  // The gzip trailer holds the uncompressed size modulo 2^32: a good first
  // guess, capped by deflate's best ratio (about 1032:1) against corrupt trailers.
  size_t guess = bytes.size() * 4;
  if (bytes.size() >= 4) {
    const auto* t = reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size() - 4;
    guess = uint32_t{t[0]} | (uint32_t{t[1]} << 8) | (uint32_t{t[2]} << 16) |
            (uint32_t{t[3]} << 24);
    guess = std::min(guess, bytes.size() * 1100);
  }
  out.resize(std::max<size_t>(guess, 1024) + 1);
  size_t produced = 0, consumed = 0;
  auto fail = [&](const std::string& what) {
    inflateEnd(&zs);
    throw std::invalid_argument(error_message("[", op, "] '", name, "': ", what));
  };
  // A small file may inflate to any size (a "zip bomb"): the output is held
  // to the limit on files read whole.
  const uint64_t limit = max_file_bytes();
  out.resize(std::min<uint64_t>(out.size(), limit + 1));
  for (;;) {
    if (produced == out.size()) {
      if (out.size() > limit) {
        fail(error_message("the data decompresses to more than ", limit,
                           " bytes, the limit (the machine's memory; set TESSERA_MAX_FILE_BYTES to "
                           "change it)"));
      }
      out.resize(std::min<uint64_t>(out.size() * 2, limit + 1));
    }
    size_t in_left = bytes.size() - consumed;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + consumed));
    zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, UINT_MAX));
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, UINT_MAX));
    uInt in_before = zs.avail_in, out_before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += in_before - zs.avail_in;
    produced += out_before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (consumed == bytes.size()) break;
      // Another gzip member follows (as `cat a.gz b.gz` makes), or garbage.
      if (!is_gzip(bytes.substr(consumed))) {
        fail(error_message("unexpected data after the gzip stream (", bytes.size() - consumed,
                           " bytes at offset ", consumed, ")"));
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      fail(error_message("corrupt gzip data (", zs.msg ? zs.msg : "invalid stream",
                         ") at compressed offset ", consumed));
    }
    if (rc == Z_MEM_ERROR) {
      inflateEnd(&zs);
      throw MemoryError(error_message("[", op, "] '", name, "': out of memory decompressing"));
    }
    if (consumed == bytes.size() && produced < out.size()) {
      // All input used, room left for output, and still no end of stream.
      fail(error_message("truncated gzip stream: the file ends after ", bytes.size(),
                         " bytes, before the end of the compressed data"));
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  return out;
}

size_t idx_type_size(IdxType t) {
  switch (t) {
    case IdxType::uint8:
    case IdxType::int8: return 1;
    case IdxType::int16: return 2;
    case IdxType::int32:
    case IdxType::float32: return 4;
    case IdxType::float64: return 8;
  }
  return 1;
}

const char* idx_type_name(IdxType t) {
  switch (t) {
    case IdxType::uint8: return "uint8";
    case IdxType::int8: return "int8";
    case IdxType::int16: return "int16";
    case IdxType::int32: return "int32";
    case IdxType::float32: return "float32";
    case IdxType::float64: return "float64";
  }
  return "?";
}

IdxHeader parse_idx_header(std::string_view bytes, const std::string& name, const char* op) {
  auto bad = [&](const std::string& what) -> std::invalid_argument {
    return std::invalid_argument(error_message("[", op, "] '", name, "': ", what));
  };
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) {
    throw bad(error_message("too short for an IDX header (", bytes.size(),
                            " bytes; an IDX file starts with 4 magic bytes)"));
  }
  if (p[0] != 0 || p[1] != 0) {
    throw bad(error_message("not an IDX file: the magic number must start with two zero bytes, "
                            "got 0x",
                            std::hex, int{p[0]}, " 0x", int{p[1]}));
  }
  IdxHeader h;
  switch (p[2]) {
    case 0x08: case 0x09: case 0x0B: case 0x0C: case 0x0D: case 0x0E:
      h.type = static_cast<IdxType>(p[2]);
      break;
    default:
      throw bad(error_message("unknown IDX element type code 0x", std::hex, int{p[2]},
                              " (expected 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, "
                              "0x0d float32 or 0x0e float64)"));
  }
  const int ndims = p[3];
  h.data_offset = 4 + 4 * static_cast<size_t>(ndims);
  if (bytes.size() < h.data_offset) {
    throw bad(error_message("truncated header: ", ndims, " dimensions need ", h.data_offset,
                            " header bytes, the file has ", bytes.size()));
  }
  for (int d = 0; d < ndims; ++d) {
    uint32_t extent = read_be32(p + 4 + 4 * d);
    if (extent > static_cast<uint32_t>(INT32_MAX)) {
      throw bad(error_message("dimension ", d, " is ", extent,
                              ", not a valid extent (corrupt header?)"));
    }
    h.shape.push_back(static_cast<int64_t>(extent));
  }
  const int64_t count = shape_size(h.shape, op);
  const size_t elem = idx_type_size(h.type);
  const size_t have = bytes.size() - h.data_offset;
  // Overflow-safe: count * elem compared through division.
  if (static_cast<uint64_t>(count) > have / elem ||
      static_cast<uint64_t>(count) * elem != have) {
    const bool short_file = static_cast<uint64_t>(count) > have / elem;
    std::string expected = error_message("the header says shape ", shape_str(h.shape), " of ",
                                         idx_type_name(h.type), " (", count * elem,
                                         " bytes of data)");
    if (short_file) {
      throw bad(error_message("truncated: ", expected, ", but the file has only ", have,
                              " bytes after the header"));
    }
    throw bad(error_message("corrupt: ", expected, ", but the file has ", have - count * elem,
                            " extra bytes after the data"));
  }
  return h;
}

void idx_decode_range(std::string_view bytes, const IdxHeader& header, Array& out, int64_t begin,
                      int64_t end) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + header.data_offset;
  dispatch(out.dtype(), [&](auto tag) {
    using Dst = typename decltype(tag)::type;
    Dst* o = out.data<Dst>();
    switch (header.type) {
      case IdxType::uint8: decode<uint8_t>(data, o, begin, end); break;
      case IdxType::int8: decode<int8_t>(data, o, begin, end); break;
      case IdxType::int16: decode<int16_t>(data, o, begin, end); break;
      case IdxType::int32: decode<int32_t>(data, o, begin, end); break;
      case IdxType::float32: decode<float>(data, o, begin, end); break;
      case IdxType::float64: decode<double>(data, o, begin, end); break;
    }
  });
}

TextLines split_text_lines(std::string_view text) {
  TextLines t;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t stop = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, stop - pos);
    pos = stop + 1;
    ++line_no;
    size_t first = 0;
    while (first < line.size() && is_space(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    t.lines.push_back(line);
    t.line_numbers.push_back(line_no);
  }
  if (!t.lines.empty()) {
    std::string_view first = t.lines[0];
    size_t i = 0;
    while (i < first.size()) {
      while (i < first.size() && is_space(first[i])) ++i;
      if (i == first.size()) break;
      ++t.columns;
      while (i < first.size() && !is_space(first[i])) ++i;
    }
  }
  return t;
}

TextError parse_text_rows(const TextLines& text, Array& out, int64_t begin, int64_t end) {
  switch (out.dtype()) {
    case DType::float32: return parse_rows(text, out.data<float>(), begin, end, out.dtype());
    case DType::float64: return parse_rows(text, out.data<double>(), begin, end, out.dtype());
    case DType::int64: return parse_rows(text, out.data<int64_t>(), begin, end, out.dtype());
    default: break;
  }
  return {0, std::string(dtype_name(out.dtype())) + " is not a text dtype"};
}

}  // namespace tessera::kernels
