// Dataset readers of the io family: IDX files (MNIST, Fashion-MNIST; plain or
// gzip-compressed) and whitespace-separated numeric text (the UCI HAR
// "Inertial Signals" files). Decoding and parsing run in tiles over elements
// or lines; errors name the file and, for text, the line.
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/dataio.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kn = kernels;

constexpr double kIdxNs = 0.5;
constexpr double kTextNsPerValue = 30.0;

// The file's bytes, decompressed when they start with the gzip magic.
std::string read_maybe_gzip(const std::string& path, const char* op) {
  std::string bytes = kn::read_whole_file(path, op);
  if (kn::is_gzip(bytes)) return kn::gunzip(bytes, path, op);
  return bytes;
}

Value read_idx(Args& a) {
  const std::string& path = a.string(0);
  std::optional<DType> requested = a.opt_dtype(1);
  std::string bytes = read_maybe_gzip(path, a.op());
  kn::IdxHeader header = kn::parse_idx_header(bytes, path, a.op());
  DType natural = header.type == kn::IdxType::float32   ? DType::float32
                  : header.type == kn::IdxType::float64 ? DType::float64
                                                        : DType::int64;
  Array out(requested.value_or(natural), header.shape);
  parallel_for(out.size(), kIdxNs, [&](int64_t b, int64_t e) {
    kn::idx_decode_range(bytes, header, out, b, e);
  });
  return out;
}

Value read_txt(Args& a) {
  const std::string& path = a.string(0);
  DType dtype = a.dtype(1, DType::float64);
  if (dtype == DType::bool_) {
    a.value_error(1, "must be 'float64', 'float32' or 'int64', got 'bool'");
  }
  std::string text = read_maybe_gzip(path, a.op());
  kn::TextLines lines = kn::split_text_lines(text);
  const auto rows = static_cast<int64_t>(lines.lines.size());
  Array out(dtype, {rows, lines.columns});
  // Tiles report their first problem; the one on the earliest line is raised,
  // whatever the order in which tiles ran.
  std::mutex mutex;
  kn::TextError first;
  double row_ns = kTextNsPerValue * static_cast<double>(std::max<int64_t>(lines.columns, 1));
  parallel_for(rows, row_ns, [&](int64_t b, int64_t e) {
    kn::TextError err = kn::parse_text_rows(lines, out, b, e);
    if (err.line == 0) return;
    std::lock_guard<std::mutex> lock(mutex);
    if (first.line == 0 || err.line < first.line) first = std::move(err);
  });
  if (first.line != 0) {
    throw std::invalid_argument(error_message("[", a.op(), "] '", path, "' ", first.message));
  }
  return out;
}

const bool registered_data = register_primitives({
    {.name = "file_read_idx",
     .family = "io",
     .params = {{"path"}, opt("dtype", Value())},
     .help = "Reads an IDX file (the format of MNIST and Fashion-MNIST: unsigned/signed bytes, "
             "int16, int32, float32 or float64, big-endian), gzip-compressed or not (detected "
             "by its magic bytes). Integer data comes back as int64 and float data in its own "
             "dtype, unless dtype names another (e.g. 'float32' for images). Truncated or "
             "corrupt files are ValueErrors saying what the header promised.",
     .eval = read_idx,
     .ns_per_element = kIdxNs},
    {.name = "file_read_txt",
     .family = "io",
     .params = {{"path"}, opt("dtype", Value("float64"))},
     .help = "Reads whitespace-separated numbers, one row per line (numpy.loadtxt with ndmin=2; "
             "the UCI HAR 'Inertial Signals' format), into a 2-d array of dtype float64, "
             "float32 or int64; gzip-compressed files are read too. Blank lines and '#' "
             "comments are skipped; rows of another length and text that is not a number are "
             "ValueErrors naming the line.",
     .eval = read_txt,
     .ns_per_element = kTextNsPerValue},
});

}  // namespace

}  // namespace tessera
