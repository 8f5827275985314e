// Fuzz target: the reader of whitespace-separated numeric text
// (file_read_txt, the UCI HAR files), gzip decompression included. The
// length of the input picks the dtype.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/kernels/dataio.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kn = tessera::kernels;
  using tessera::DType;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  static const DType dtypes[] = {DType::float64, DType::float32, DType::int64};
  tessera::fuzz::expect_clean_error([&] {
    const char* op = "file_read_txt";
    std::string text = kn::is_gzip(bytes) ? kn::gunzip(bytes, "fuzz.txt.gz", op) : bytes;
    kn::TextLines lines = kn::split_text_lines(text);
    const auto rows = static_cast<int64_t>(lines.lines.size());
    tessera::Array out(dtypes[size % 3], {rows, lines.columns});
    // In two ranges, as the tiles of the primitive parse it.
    kn::parse_text_rows(lines, out, 0, rows / 2);
    kn::parse_text_rows(lines, out, rows / 2, rows);
  });
  return 0;
}
