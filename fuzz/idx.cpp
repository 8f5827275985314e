// Fuzz target: the IDX reader of MNIST-style datasets (file_read_idx), gzip
// decompression included. The data is decoded in its own dtype and in one
// the last byte picks (file_read_idx(path, dtype=...)).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tessera/kernels/dataio.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace kn = tessera::kernels;
  using tessera::DType;
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto requested = static_cast<DType>(data[size - 1] % tessera::kNumDTypes);
  tessera::fuzz::expect_clean_error([&] {
    const char* op = "file_read_idx";
    std::string plain = kn::is_gzip(bytes) ? kn::gunzip(bytes, "fuzz.idx.gz", op) : bytes;
    kn::IdxHeader header = kn::parse_idx_header(plain, "fuzz.idx", op);
    DType natural = header.type == kn::IdxType::float32   ? DType::float32
                    : header.type == kn::IdxType::float64 ? DType::float64
                                                          : DType::int64;
    for (DType dt : {natural, requested}) {
      tessera::Array out(dt, header.shape);
      // In two ranges, as the tiles of the primitive decode it.
      kn::idx_decode_range(plain, header, out, 0, out.size() / 2);
      kn::idx_decode_range(plain, header, out, out.size() / 2, out.size());
    }
  });
  return 0;
}
