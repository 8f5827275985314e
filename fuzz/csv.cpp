// Fuzz target: the CSV reader (file_read_csv, np.loadtxt). The first byte
// picks the dtype and the delimiter, the second the header lines skipped;
// the rest is the file. A table read writes back and reads back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/core/value.hpp"
#include "tessera/kernels/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kn = tessera::kernels;
  if (size < 2) return 0;
  static const char* const delimiters[] = {",", ";", "\t", " ", "::", "|", ", "};
  const auto dtype = static_cast<tessera::DType>(data[0] % tessera::kNumDTypes);
  const std::string delimiter = delimiters[(data[0] / tessera::kNumDTypes) % 7];
  const int64_t skip = data[1] % 4;
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  tessera::Array a;
  if (!tessera::fuzz::expect_clean_error(
          [&] { a = kn::parse_csv(text, "fuzz.csv", delimiter, skip, dtype, "file_read_csv"); })) {
    return 0;
  }
  if (a.size() == 0) return 0;
  std::string written;
  if (!tessera::fuzz::expect_clean_error(
          [&] { written = kn::format_csv(a, delimiter, "file_write_csv"); })) {
    return 0;  // complex numbers are read, but not written
  }
  tessera::Array b = kn::parse_csv(written, "again.csv", delimiter, 0, dtype, "file_read_csv");
  if (a.str() != b.str()) tessera::fuzz::fail("written and read back, the table changed", a.str());
  return 0;
}
