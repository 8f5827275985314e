// Tests of the dataset readers: IDX files of every element type written byte
// by byte, plain and gzip-compressed (stored blocks built here, and real
// deflate from the gzip tool when present), truncated and corrupted files;
// whitespace-separated text in the UCI HAR format, ragged rows and bad numbers.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

class DataIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("tessera_dataio_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
    return path(name);
  }

  fs::path dir_;
};

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
}
void put_le32(std::string& s, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) s += static_cast<char>((v >> shift) & 0xff);
}

// An IDX header: magic 00 00 TYPE NDIMS, then big-endian dimensions.
std::string idx_header(uint8_t type, const std::vector<uint32_t>& dims) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) put_be32(s, d);
  return s;
}

uint32_t crc32(const std::string& data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A gzip member holding `data` in uncompressed ("stored") deflate blocks.
std::string gzip_stored(const std::string& data) {
  std::string s{'\x1f', '\x8b', '\x08', '\0', '\0', '\0', '\0', '\0', '\0', '\x03'};
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(data.size() - pos, 65535);
    bool last = pos + n == data.size();
    s += static_cast<char>(last ? 1 : 0);
    s += static_cast<char>(n & 0xff);
    s += static_cast<char>(n >> 8);
    s += static_cast<char>(~n & 0xff);
    s += static_cast<char>((~n >> 8) & 0xff);
    s += data.substr(pos, n);
    pos += n;
  } while (pos < data.size());
  put_le32(s, crc32(data));
  put_le32(s, static_cast<uint32_t>(data.size()));
  return s;
}

Value read_idx(const std::string& p, Value dtype = Value()) {
  return call_primitive("file_read_idx", std::vector<Value>{Value(p), std::move(dtype)});
}
Value read_txt(const std::string& p, const char* dtype = "float64") {
  return call_primitive("file_read_txt", std::vector<Value>{Value(p), Value(dtype)});
}

// 2 x 3 x 4 uint8 images with values 0, 10, ..., 230 (and one 255).
std::string image_idx() {
  std::string s = idx_header(0x08, {2, 3, 4});
  for (int i = 0; i < 24; ++i) s += static_cast<char>(i == 23 ? 255 : i * 10);
  return s;
}
std::vector<double> image_values() {
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(i == 23 ? 255 : i * 10);
  return v;
}

TEST_F(DataIoTest, IdxUint8AsInt64AndFloat32) {
  std::string p = write("images-idx3-ubyte", image_idx());
  EXPECT_TRUE(array_eq(read_idx(p), DType::int64, {2, 3, 4}, image_values()));
  EXPECT_TRUE(array_eq(read_idx(p, Value("float32")), DType::float32, {2, 3, 4}, image_values()));
}

TEST_F(DataIoTest, IdxEveryElementTypeIsBigEndian) {
  std::string i8 = idx_header(0x09, {3});
  i8 += {'\xff', '\x7f', '\x80'};
  EXPECT_TRUE(array_eq(read_idx(write("i8", i8)), DType::int64, {3}, {-1, 127, -128}));

  std::string i16 = idx_header(0x0B, {2});
  i16 += {'\x01', '\x02', '\xff', '\xfe'};
  EXPECT_TRUE(array_eq(read_idx(write("i16", i16)), DType::int64, {2}, {258, -2}));

  std::string i32 = idx_header(0x0C, {2, 1});
  put_be32(i32, 70000);
  put_be32(i32, static_cast<uint32_t>(-5));
  EXPECT_TRUE(array_eq(read_idx(write("i32", i32)), DType::int64, {2, 1}, {70000, -5}));

  std::string f32 = idx_header(0x0D, {2});
  float fv[2] = {1.5f, -0.25f};
  for (float f : fv) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    put_be32(f32, u);
  }
  EXPECT_TRUE(array_eq(read_idx(write("f32", f32)), DType::float32, {2}, {1.5, -0.25}));

  std::string f64s = idx_header(0x0E, {1});
  double d = 3.141592653589793;
  uint64_t u;
  std::memcpy(&u, &d, 8);
  put_be32(f64s, static_cast<uint32_t>(u >> 32));
  put_be32(f64s, static_cast<uint32_t>(u));
  EXPECT_TRUE(array_eq(read_idx(write("f64", f64s)), DType::float64, {1}, {d}, 0, 0));

  // Labels: a 1-d uint8 file, as train-labels-idx1-ubyte.
  std::string labels = idx_header(0x08, {4});
  labels += {'\x09', '\x00', '\x03', '\x07'};
  EXPECT_TRUE(array_eq(read_idx(write("labels", labels)), DType::int64, {4}, {9, 0, 3, 7}));

  // An empty dimension is a valid, empty file.
  EXPECT_TRUE(array_eq(read_idx(write("empty", idx_header(0x08, {0, 28}))), DType::int64, {0, 28},
                       {}));
}

TEST_F(DataIoTest, IdxGzipStoredBlocksAndMembers) {
  std::string plain = image_idx();
  std::string p = write("images.gz", gzip_stored(plain));
  EXPECT_TRUE(array_eq(read_idx(p), DType::int64, {2, 3, 4}, image_values()));

  // Two gzip members (as `cat a.gz b.gz`) decompress to their concatenation.
  std::string first = plain.substr(0, 10), rest = plain.substr(10);
  std::string q = write("two.gz", gzip_stored(first) + gzip_stored(rest));
  EXPECT_TRUE(array_eq(read_idx(q), DType::int64, {2, 3, 4}, image_values()));

  // Several stored blocks (> 65535 bytes).
  std::string big = idx_header(0x08, {300, 300});
  for (int i = 0; i < 90000; ++i) big += static_cast<char>(i % 251);
  Value r = read_idx(write("big.gz", gzip_stored(big)), Value("float32"));
  ASSERT_TRUE(r.is_array());
  EXPECT_EQ(r.as_array().shape(), (Shape{300, 300}));
  EXPECT_EQ(r.as_array().get_double(89999), 89999 % 251);
  EXPECT_EQ(r.as_array().get_double(70000), 70000 % 251);
}

TEST_F(DataIoTest, IdxGzipFromTheGzipTool) {
  if (std::system("command -v gzip >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gzip tool";
  std::string big = idx_header(0x08, {1000, 28, 28});
  for (int i = 0; i < 1000 * 28 * 28; ++i) big += static_cast<char>((i * 7) % 256);
  std::string p = write("images", big);
  ASSERT_EQ(std::system(("gzip -9 -k '" + p + "'").c_str()), 0);
  Value plain = read_idx(p), zipped = read_idx(p + ".gz");
  ASSERT_TRUE(zipped.is_array());
  EXPECT_TRUE(zipped.equals(plain));
  EXPECT_EQ(zipped.as_array().get_int(12345), (12345 * 7) % 256);

  // Cut the compressed file short: a truncated gzip stream.
  std::ifstream in(p + ".gz", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string gz = ss.str();
  std::string cut = write("cut.gz", gz.substr(0, gz.size() / 2));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(cut); }, "[file_read_idx] '" + cut + "': truncated gzip stream"));
  // Flip bytes in the middle of the deflate data.
  std::string bad = gz;
  for (size_t i = bad.size() / 2; i < bad.size() / 2 + 16; ++i) bad[i] = static_cast<char>(~bad[i]);
  std::string badp = write("bad.gz", bad);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { read_idx(badp); }, "corrupt gzip data"));
}

TEST_F(DataIoTest, IdxGzipBombStopsAtTheLimit) {
  if (std::system("command -v gzip >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gzip tool";
  // 4 MB of zeros compress to a few KB, and decompress past a 64 KB limit.
  std::string p = write("bomb", std::string(4 << 20, '\0'));
  ASSERT_EQ(std::system(("gzip -9 '" + p + "'").c_str()), 0);
  ::setenv("TESSERA_MAX_FILE_BYTES", "65536", 1);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(p + ".gz"); },
      "[file_read_idx] '" + p + ".gz': the data decompresses to more than 65536 bytes, the limit"));
  ::unsetenv("TESSERA_MAX_FILE_BYTES");
}

TEST_F(DataIoTest, IdxGzipErrors) {
  std::string gz = gzip_stored(image_idx());
  std::string cut = write("cut.gz", gz.substr(0, gz.size() - 20));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(cut); }, "[file_read_idx] '" + cut + "': truncated gzip stream"));
  std::string crc = gz;
  crc[crc.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  std::string crcp = write("crc.gz", crc);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(crcp); }, "corrupt gzip data (incorrect data check)"));
  std::string trailing = write("trailing.gz", gz + "junk");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(trailing); }, "unexpected data after the gzip stream (4 bytes at offset"));
  // A gzip file that decompresses to something that is not IDX.
  std::string notidx = write("text.gz", gzip_stored("hello, world"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(notidx); }, "not an IDX file: the magic number must start with two zero"));
}

TEST_F(DataIoTest, IdxContentErrors) {
  std::string full = image_idx();
  std::string p = write("short", full.substr(0, full.size() - 5));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(p); },
      "[file_read_idx] '" + p +
          "': truncated: the header says shape (2, 3, 4) of uint8 (24 bytes of data), but the "
          "file has only 19 bytes after the header"));
  std::string extra = write("extra", full + "xyz");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(extra); }, "corrupt: the header says shape (2, 3, 4) of uint8 (24 bytes "
                                "of data), but the file has 3 extra bytes after the data"));
  std::string tiny = write("tiny", std::string("\0\0", 2));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { read_idx(tiny); },
                                                 "too short for an IDX header (2 bytes"));
  std::string magic = write("magic", "PK\x03\x04 zip file");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(magic); }, "not an IDX file: the magic number must start with two zero "
                                "bytes, got 0x50 0x4b"));
  std::string type = write("type", idx_header(0x07, {1}) + "x");
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { read_idx(type); },
                                                 "unknown IDX element type code 0x7"));
  std::string header = write("header", idx_header(0x08, {2, 3}).substr(0, 9));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_idx(header); },
      "truncated header: 2 dimensions need 12 header bytes, the file has 9"));
  std::string huge = write("huge", idx_header(0x08, {0x90000000u}));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { read_idx(huge); }, "not a valid extent"));
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { read_idx(path("missing")); },
                                              "[file_read_idx] cannot open"));
  EXPECT_TRUE(throws_with<TypeError>([&] { read_idx(p, Value("quaternion")); }, "quaternion"));
}

TEST_F(DataIoTest, TextInTheHarFormat) {
  // The UCI HAR files: leading spaces, one or two spaces between values, e-002 exponents.
  std::string p = write("body_acc_x_train.txt",
                        "  2.5808515e-002  1.0000000e+000 -1.5e-003\n"
                        " -7.0e-001 4   5.25e+000\r\n"
                        "\n"
                        "# a comment line\n"
                        "\t1e3\t+2\t-0\n");
  EXPECT_TRUE(array_eq(read_txt(p), DType::float64, {3, 3},
                       {0.025808515, 1.0, -0.0015, -0.7, 4, 5.25, 1000, 2, 0}, 0, 0));
  EXPECT_TRUE(array_eq(read_txt(p, "float32"), DType::float32, {3, 3},
                       {0.025808515, 1.0, -0.0015, -0.7, 4, 5.25, 1000, 2, 0}, 1e-7));
  std::string labels = write("y_train.txt", "5\n5\n 6\n1\n");
  EXPECT_TRUE(array_eq(read_txt(labels, "int64"), DType::int64, {4, 1}, {5, 5, 6, 1}));
  EXPECT_TRUE(array_eq(read_txt(write("empty.txt", "\n\n")), DType::float64, {0, 0}, {}));
  std::string last = write("nolf.txt", "1 2\n3 4");
  EXPECT_TRUE(array_eq(read_txt(last), DType::float64, {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(array_eq(read_txt(write("t.gz", gzip_stored("1 2\n3 4\n"))), DType::float64,
                       {2, 2}, {1, 2, 3, 4}));
}

TEST_F(DataIoTest, TextErrorsNameTheLine) {
  std::string ragged = write("ragged.txt", "1 2 3\n4 5 6\n\n7 8\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_txt(ragged); },
      "[file_read_txt] '" + ragged + "' line 4: expected 3 values (as on line 1), found 2"));
  std::string longer = write("long.txt", "\n1 2\n3 4 5\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_txt(longer); }, "line 3: expected 2 values (as on line 2), found 3"));
  std::string bad = write("bad.txt", "1 2 3\n4 x5 6\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_txt(bad); },
      "[file_read_txt] '" + bad + "' line 2, value 2: cannot parse 'x5' as float64"));
  std::string frac = write("frac.txt", "1\n2.5\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_txt(frac, "int64"); }, "line 2, value 1: cannot parse '2.5' as int64"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { read_txt(frac, "bool"); },
      "[file_read_txt] argument 'dtype' must be 'float64', 'float32' or 'int64', got 'bool'"));
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { read_txt(path("missing.txt")); },
                                              "[file_read_txt] cannot open"));
}

TEST_F(DataIoTest, LargeTextIsTheSameForAnyThreadCountAndReportsTheFirstError) {
  std::string text;
  for (int r = 0; r < 4000; ++r) {
    for (int c = 0; c < 128; ++c) {
      text += ' ';
      text += std::to_string(r * 0.001 - c * 0.5);
    }
    text += '\n';
  }
  std::string p = write("big.txt", text);
  std::vector<Value> results;
  for (int threads : {1, 4}) {
    set_num_threads(threads);
    results.push_back(read_txt(p, "float32"));
  }
  ASSERT_TRUE(results[0].is_array());
  EXPECT_EQ(results[0].as_array().shape(), (Shape{4000, 128}));
  EXPECT_TRUE(results[0].equals(results[1]));
  EXPECT_FLOAT_EQ(static_cast<float>(results[0].as_array().get_double(3999 * 128 + 2)),
                  static_cast<float>(3.999 - 1.0));

  // Errors on lines 3500 and 1200: line 1200 is reported with any number of threads.
  std::string broken = text;
  auto break_line = [&](int line) {
    size_t pos = 0;
    for (int l = 1; l < line; ++l) pos = broken.find('\n', pos) + 1;
    broken[pos + 1] = '?';
  };
  break_line(3500);
  break_line(1200);
  std::string q = write("broken.txt", broken);
  for (int threads : {1, 4}) {
    set_num_threads(threads);
    EXPECT_TRUE(throws_with<std::invalid_argument>([&] { read_txt(q); }, "' line 1200, value 1"));
  }
  set_num_threads(2);
}

}  // namespace
