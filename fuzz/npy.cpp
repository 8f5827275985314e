// Fuzz target: the .npy reader (np.load, Dataset.from_npy). What it reads
// must write back and read back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/core/value.hpp"
#include "tessera/kernels/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kn = tessera::kernels;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tessera::Array a;
  if (!tessera::fuzz::expect_clean_error([&] { a = kn::parse_npy(bytes, "fuzz.npy", "load"); })) {
    return 0;
  }
  tessera::Array b = kn::parse_npy(kn::format_npy(a), "again.npy", "load");
  if (!tessera::Value(a).equals(tessera::Value(b))) {
    tessera::fuzz::fail("written and read back, the array changed", a.repr_short());
  }
  return 0;
}
