// Dataset file kernels: gzip decompression (zlib), the IDX format of MNIST
// and Fashion-MNIST, and whitespace-separated numeric text (the UCI HAR
// "Inertial Signals" files). Parsing is split into a sequential scan (header,
// line starts) and range functions the primitives run in tiles.
//
// Errors name the calling op and the file; malformed content is a ValueError
// (std::invalid_argument) saying what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// True when `bytes` starts with the gzip magic 1f 8b.
bool is_gzip(std::string_view bytes);

// Decompresses a gzip stream (several members are concatenated, as gunzip
// does). Truncated or corrupted input is a ValueError naming `name`.
std::string gunzip(std::string_view bytes, const std::string& name, const char* op);

// The element types of the IDX format (the third byte of the magic number).
enum class IdxType : uint8_t {
  uint8 = 0x08,
  int8 = 0x09,
  int16 = 0x0B,
  int32 = 0x0C,
  float32 = 0x0D,
  float64 = 0x0E,
};

// A checked IDX header: element type, shape and where the data starts.
struct IdxHeader {
  IdxType type = IdxType::uint8;
  Shape shape;
  size_t data_offset = 0;
};

// Size of one element of an IDX type.
size_t idx_type_size(IdxType t);
// "uint8", "int16", ... for messages.
const char* idx_type_name(IdxType t);

// Reads and checks the header of an (uncompressed) IDX file: magic bytes, type
// code, dimensions, and that the data is exactly as long as the shape says.
IdxHeader parse_idx_header(std::string_view bytes, const std::string& name, const char* op);

// Converts elements [begin, end) of the big-endian IDX data into `out` (any
// dtype; values are converted as by astype).
void idx_decode_range(std::string_view bytes, const IdxHeader& header, Array& out, int64_t begin,
                      int64_t end);

// The data lines of a text of whitespace-separated numbers: blank lines and
// lines starting with '#' are skipped.
struct TextLines {
  std::vector<std::string_view> lines;  // the data lines
  std::vector<int64_t> line_numbers;    // their 1-based line numbers in the file
  int64_t columns = 0;                  // values on the first data line
};
TextLines split_text_lines(std::string_view text);

// The problem found while parsing a line (line 0: none).
struct TextError {
  int64_t line = 0;
  std::string message;
};

// Parses data lines [begin, end) into rows of `out` (2-d, columns wide; dtype
// float32, float64 or int64). Returns the first problem (a line with another
// number of values, or text that is not a number of the dtype) instead of
// throwing, so that tiles can be checked in line order.
TextError parse_text_rows(const TextLines& text, Array& out, int64_t begin, int64_t end);

}  // namespace tessera::kernels
