// Tests of the file I/O primitives: CSV and .npy round trips for every dtype in
// a temporary directory, files written by hand so the formats themselves are
// checked, malformed and missing files, and every error message.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tessera/core/error.hpp"

using namespace tessera;
using namespace tessera::test;
namespace fs = std::filesystem;

namespace {

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("tessera_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream f(path(name), std::ios::binary);
    f << bytes;
  }
  std::string read_bytes(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

// A .npy file built byte by byte: version 1.0 header padded to 64 bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  size_t preamble = major == 1 ? 10 : 12;
  size_t total = preamble + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  size_t len = header.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

template <class T>
std::string raw(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

}  // namespace

TEST_F(IoTest, CsvRoundTripEveryDtype) {
  const std::string p = path("a.csv");
  Value f = f64({0.1, -2.5, 1e-300, 3, std::nan(""), -std::numeric_limits<double>::infinity()},
                {2, 3});
  call("file_write_csv", {p, f});
  EXPECT_TRUE(array_eq(call("file_read_csv", {p}), DType::float64, {2, 3},
                       {0.1, -2.5, 1e-300, 3, std::nan(""), -INFINITY}, 0.0, 0.0));

  Value g = f32({0.1f, 1.0f / 3.0f, -7.25f, 1e30f}, {2, 2});
  call("file_write_csv", {p, g});
  EXPECT_TRUE(array_eq(call_primitive("file_read_csv", {{"", p}, {"dtype", Value("float32")}}),
                       DType::float32, {2, 2}, {0.1f, 1.0f / 3.0f, -7.25f, 1e30f}, 0.0, 0.0));

  Value i = i64({1, -2, 9007199254740993LL, INT64_MIN}, {2, 2});
  call("file_write_csv", {p, i});
  Value ri = call_primitive("file_read_csv", {{"", p}, {"dtype", Value("int64")}});
  ASSERT_TRUE(ri.is_array());
  EXPECT_EQ(ri.as_array().shape(), (Shape{2, 2}));
  EXPECT_EQ(ri.as_array().data<int64_t>()[2], 9007199254740993LL);
  EXPECT_EQ(ri.as_array().data<int64_t>()[3], INT64_MIN);

  call("file_write_csv", {p, b8({true, false, false, true}, {2, 2})});
  EXPECT_TRUE(array_eq(call_primitive("file_read_csv", {{"", p}, {"dtype", Value("bool")}}),
                       DType::bool_, {2, 2}, {1, 0, 0, 1}));
  EXPECT_EQ(listing(), std::vector<std::string>{"a.csv"});
}

TEST_F(IoTest, CsvWritesShortestTextAndOneValuePerLineFor1d) {
  call("file_write_csv", {path("m.csv"), f64({0.1, 2, 3.5, -1e-20}, {2, 2})});
  EXPECT_EQ(read_bytes("m.csv"), "0.1,2\n3.5,-1e-20\n");
  call("file_write_csv", {path("f.csv"), f32({0.1f, 2.5f}, {1, 2})});
  EXPECT_EQ(read_bytes("f.csv"), "0.1,2.5\n");
  call_primitive("file_write_csv",
                 {{"", path("v.csv")}, {"", i64({1, -2, 3})}, {"delimiter", Value(";")}});
  EXPECT_EQ(read_bytes("v.csv"), "1\n-2\n3\n");
  call_primitive("file_write_csv", {{"", path("t.csv")}, {"", Value(List{List{1, 2}})},
                                    {"delimiter", Value("\t")}});
  EXPECT_EQ(read_bytes("t.csv"), "1\t2\n");
  call("file_write_csv", {path("b.csv"), b8({true, false})});
  EXPECT_EQ(read_bytes("b.csv"), "1\n0\n");
  // One column reads back 2-d.
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("v.csv")}), DType::float64, {3, 1},
                       {1, -2, 3}));
}

TEST_F(IoTest, CsvReaderOptions) {
  write_bytes("h.csv", "x;y;z\r\nunits\r\n1; 2 ;3\r\n\r\n# a comment\r\n+4;-5.5e1;inf\r\n");
  Value r = call_primitive("file_read_csv", {{"", path("h.csv")}, {"delimiter", Value(";")},
                                             {"skip_header", Value(2)}});
  EXPECT_TRUE(array_eq(r, DType::float64, {2, 3}, {1, 2, 3, 4, -55, INFINITY}));
  // Out-of-range text saturates to infinity as NumPy's parser does.
  write_bytes("big.csv", "1e40,-1e400\n");
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("big.csv"), ",", 0, "float32"}),
                       DType::float32, {1, 2}, {INFINITY, -INFINITY}));
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("big.csv")}), DType::float64, {1, 2},
                       {1e40, -INFINITY}));
  write_bytes("b.csv", "True,false\n0,1\n");
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("b.csv"), ",", 0, "bool"}), DType::bool_,
                       {2, 2}, {1, 0, 0, 1}));
  write_bytes("e.csv", "");
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("e.csv")}), DType::float64, {0, 0}, {}));
  // No trailing newline on the last line.
  write_bytes("n.csv", "1,2\n3,4");
  EXPECT_TRUE(array_eq(call("file_read_csv", {path("n.csv"), ",", 0, "int64"}), DType::int64,
                       {2, 2}, {1, 2, 3, 4}));
}

TEST_F(IoTest, CsvMalformedFiles) {
  const std::string p = path("bad.csv");
  write_bytes("bad.csv", "1,2,3\n4,5,6\n7,8\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p}); },
      "[file_read_csv] '" + p + "' line 3: expected 3 values, found 2"));
  write_bytes("bad.csv", "a,b\n1,abc\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p, ",", 1}); },
      "[file_read_csv] '" + p + "' line 2, column 2: cannot parse 'abc' as float64"));
  write_bytes("bad.csv", "1,1.5\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p, ",", 0, "int64"}); },
      "[file_read_csv] '" + p + "' line 1, column 2: cannot parse '1.5' as int64"));
  write_bytes("bad.csv", "1,,2\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p}); },
      "[file_read_csv] '" + p + "' line 1, column 2: cannot parse '' as float64"));
  write_bytes("bad.csv", "1,2\n");
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p, ",", 0, "bool"}); },
      "[file_read_csv] '" + p + "' line 1, column 2: cannot parse '2' as bool"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p, ""}); },
      "[file_read_csv] delimiter must be a non-empty string without newlines, got ''"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {p, ",", -1}); },
      "[file_read_csv] skip_header must be non-negative, got -1"));
  EXPECT_TRUE(throws_with<TypeError>([&] { call("file_read_csv", {p, ",", 0, "quaternion"}); },
                                     "quaternion"));
  EXPECT_TRUE(
      throws_with<TypeError>([&] { call("file_read_csv", {Value(3)}); },
                             "[file_read_csv] argument 'path' must be a string, got int 3"));
}

TEST_F(IoTest, MissingAndUnwritableFiles) {
  const std::string missing = path("nope.csv");
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_read_csv", {missing}); },
      "[file_read_csv] cannot open '" + missing + "': No such file or directory"));
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_read_npy", {missing}); },
      "[file_read_npy] cannot open '" + missing + "': No such file or directory"));
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("load", {missing}); }, "[load] cannot open '" + missing + "'"));
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_read_csv", {dir_.string()}); },
      "[file_read_csv] cannot open '" + dir_.string() + "': Is a directory"));
  const std::string nodir = path("no/such/dir/x.csv");
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_write_csv", {nodir, f64({1}, {1})}); },
      "[file_write_csv] cannot write '" + nodir + "': No such file or directory"));
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_write_npy", {nodir, f64({1}, {1})}); },
      "[file_write_npy] cannot write '" + nodir + "'"));
}

TEST_F(IoTest, ReadersRefuseFilesThatAreNotRegularOrTooLarge) {
  // /dev/zero never ends: refused before anything is read.
  for (const char* op : {"file_read_npy", "file_read_csv", "load", "file_read_idx", "file_read_txt"}) {
    EXPECT_TRUE(throws_with<std::invalid_argument>(
        [&] { call(op, {std::string("/dev/zero")}); },
        std::string("[") + op + "] cannot read '/dev/zero': it is a character device, not a regular file"))
        << op;
  }
  // A pipe with no writer: refused at once, not waited on.
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("file_read_npy", {fifo}); },
                                                 "': it is a pipe, not a regular file"));
  // Larger than the limit (a setting): refused before it is read.
  write_bytes("big.csv", std::string(5000, '1'));
  ::setenv("TESSERA_MAX_FILE_BYTES", "4096", 1);
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_csv", {path("big.csv")}); },
      "[file_read_csv] cannot read '" + path("big.csv") +
          "': it has 5000 bytes, more than the limit of 4096 (the machine's memory; set "
          "TESSERA_MAX_FILE_BYTES to change it)"));
  ::unsetenv("TESSERA_MAX_FILE_BYTES");
  EXPECT_NO_THROW(call("file_read_csv", {path("big.csv")}));
}

TEST_F(IoTest, FailedWritesLeaveNoPartialFile) {
  const std::string p = path("keep.csv");
  call("file_write_csv", {p, f64({1, 2})});
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_write_csv", {p, Array::zeros(DType::float64, {2, 2, 2})}); },
      "[file_write_csv] expected a 1-d or 2-d array, got shape (2, 2, 2)"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_write_csv", {p, Array::scalar(1.0)}); },
      "[file_write_csv] expected a 1-d or 2-d array, got shape ()"));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_write_csv", {p, f64({1}, {1}), ""}); },
      "[file_write_csv] delimiter must be a non-empty string"));
  EXPECT_EQ(read_bytes("keep.csv"), "1\n2\n");
  // Renaming onto a directory fails after the data was written: the temporary goes away.
  fs::create_directories(dir_ / "sub");
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { call("file_write_npy", {path("sub"), f64({1, 2})}); },
      "[file_write_npy] cannot write '" + path("sub") + "': Is a directory"));
  EXPECT_EQ(listing(), (std::vector<std::string>{"keep.csv", "sub"}));
}

TEST_F(IoTest, NpyRoundTripEveryDtypeAndShape) {
  const std::string p = path("x.npy");
  std::vector<Value> cases = {
      f64({1.5, -2, 1e-300, std::nan("")}, {2, 2}), f32({0.1f, 2, 3, 4, 5, 6}, {3, 2}),
      i64({1, -2, INT64_MAX, INT64_MIN}), b8({true, false, true}, {3, 1}),
      Array::scalar(7.25), Array(DType::float32, {0, 3}),
      i64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})};
  for (const Value& v : cases) {
    call("file_write_npy", {p, v});
    Value r = call("file_read_npy", {p});
    const Array& a = v.as_array();
    std::vector<double> expected;
    for (int64_t i = 0; i < a.size(); ++i) expected.push_back(a.get_double(i));
    EXPECT_TRUE(array_eq(r, a.dtype(), a.shape(), expected, 0.0, 0.0)) << v.describe();
    if (a.dtype() == DType::int64) {
      for (int64_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(r.as_array().data<int64_t>()[i], a.data<int64_t>()[i]);
      }
    }
  }
}

TEST_F(IoTest, NpyWrittenHeaderFollowsTheFormat) {
  call("file_write_npy", {path("h.npy"), f64({1, 2, 3, 4, 5, 6}, {2, 3})});
  std::string b = read_bytes("h.npy");
  ASSERT_EQ(b.size(), 128u + 48u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(b[6], 1);
  EXPECT_EQ(b[7], 0);
  EXPECT_EQ(static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8), 118);
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(b.substr(10, dict.size()), dict);
  EXPECT_EQ(b[127], '\n');
  EXPECT_EQ(b.substr(10 + dict.size(), 127 - 10 - dict.size()),
            std::string(127 - 10 - dict.size(), ' '));
  EXPECT_EQ(b.substr(128), raw<double>({1, 2, 3, 4, 5, 6}));

  call("file_write_npy", {path("s.npy"), i64({5}, {1})});
  EXPECT_NE(read_bytes("s.npy").find("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }"),
            std::string::npos);
  call("file_write_npy", {path("z.npy"), Array::scalar_bool(true)});
  std::string z = read_bytes("z.npy");
  EXPECT_NE(z.find("{'descr': '|b1', 'fortran_order': False, 'shape': (), }"), std::string::npos);
  EXPECT_EQ(z.size(), 129u);
  EXPECT_EQ(z.back(), '\1');
  call("file_write_npy", {path("f.npy"), f32({1}, {1, 1})});
  EXPECT_NE(read_bytes("f.npy").find("'descr': '<f4'"), std::string::npos);
}

TEST_F(IoTest, NpyHandWrittenFiles) {
  write_bytes("i4.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
                                  raw<int32_t>({1, -2, 3, 2147483647})));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("i4.npy")}), DType::int32, {2, 2},
                       {1, -2, 3, 2147483647}));
  // Keys in another order, double quotes, no trailing comma.
  write_bytes("o.npy", npy_bytes("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f8\"}",
                                 raw<double>({1, 2, 3})));
  EXPECT_TRUE(array_eq(call("load", {path("o.npy")}), DType::float64, {3}, {1, 2, 3}));
  // Fortran order: the data is column-major.
  write_bytes("f.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                 raw<double>({1, 4, 2, 5, 3, 6})));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("f.npy")}), DType::float64, {2, 3},
                       {1, 2, 3, 4, 5, 6}));
  // float16: 1.0 = 0x3c00, -2.0 = 0xc000, 0.5 = 0x3800, inf = 0x7c00, 2^-24 = 0x0001.
  write_bytes("h.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }",
                                 raw<uint16_t>({0x3c00, 0xc000, 0x3800, 0x7c00, 0x0001})));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("h.npy")}), DType::float16, {5},
                       {1, -2, 0.5, INFINITY, std::ldexp(1.0, -24)}, 0.0, 0.0));
  // Big-endian int64 and bool bytes other than 0/1.
  write_bytes("be.npy", npy_bytes("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }",
                                  std::string("\0\0\0\0\0\0\1\2", 8)));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("be.npy")}), DType::int64, {1}, {258}));
  write_bytes("b.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                 std::string("\0\2\1", 3)));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("b.npy")}), DType::bool_, {3}, {0, 1, 1}));
  write_bytes("u.npy", npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
                                 std::string("\xff\x01", 2)));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("u.npy")}), DType::uint8, {2}, {255, 1}));
  // Big-endian complex: each part swapped on its own, real part first.
  std::string be_c(16, '\0');
  be_c[0] = '\x3f', be_c[1] = '\xf0';  // 1.0
  be_c[8] = '\xc0';                     // -2.0
  write_bytes("c.npy", npy_bytes("{'descr': '>c16', 'fortran_order': False, 'shape': (1,), }",
                                 be_c));
  Array c = call("file_read_npy", {path("c.npy")}).as_array();
  EXPECT_EQ(c.dtype(), DType::complex128);
  EXPECT_EQ(c.get_complex(0), std::complex<double>(1.0, -2.0));
  // Format 2.0 has a 4-byte header length.
  write_bytes("v2.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                  raw<float>({1.5f, -3}), 2));
  EXPECT_TRUE(array_eq(call("file_read_npy", {path("v2.npy")}), DType::float32, {2}, {1.5, -3}));
}

TEST_F(IoTest, SaveAppendsSuffixAndLoadReadsIt) {
  call("save", {path("arr"), i64({4, 5})});
  EXPECT_EQ(listing(), std::vector<std::string>{"arr.npy"});
  EXPECT_TRUE(array_eq(call("load", {path("arr.npy")}), DType::int64, {2}, {4, 5}));
  call("save", {path("arr.npy"), i64({6}, {1})});
  EXPECT_EQ(listing(), std::vector<std::string>{"arr.npy"});
  EXPECT_TRUE(array_eq(call("load", {path("arr.npy")}), DType::int64, {1}, {6}));
  // file_write_npy writes the path as given.
  call("file_write_npy", {path("plain"), f64({1})});
  EXPECT_EQ(listing(), (std::vector<std::string>{"arr.npy", "plain"}));
  EXPECT_TRUE(call("save", {path("n"), f64({1})}).is_nil());
}

TEST_F(IoTest, NpyMalformedFiles) {
  const std::string p = path("bad.npy");
  auto expect_value_error = [&](const std::string& bytes, const std::string& needle) {
    write_bytes("bad.npy", bytes);
    EXPECT_TRUE(throws_with<std::invalid_argument>([&] { call("file_read_npy", {p}); },
                                                   "[file_read_npy] '" + p + needle));
  };
  expect_value_error("PK\3\4 not npy at all", "' is not a .npy file: bad magic string");
  expect_value_error("\x93NUM", "' is not a .npy file: bad magic string");
  std::string good = npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                               raw<double>({1, 2, 3, 4, 5, 6}));
  expect_value_error(good.substr(0, good.size() - 8),
                     "': truncated data: shape (2, 3) of '<f8' needs 48 bytes, found 40");
  expect_value_error(good.substr(0, 40), "': truncated header: expected 118 bytes, found 30");
  std::string v9 = good;
  v9[6] = 9;
  expect_value_error(v9, "': unsupported .npy format version 9.0");
  expect_value_error(npy_bytes("{'descr': '<f8', 'fortran_order': False}", ""),
                     "': malformed header: missing key 'shape'");
  expect_value_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}", ""),
                     "': malformed header: expected a non-negative integer in the shape");
  expect_value_error(npy_bytes("{'descr': '<f8', 'fortran_order': maybe, 'shape': (1,)}", ""),
                     "': malformed header: expected True or False");
  expect_value_error(npy_bytes("{'descr': '<f8' 'fortran_order': False}", ""),
                     "': malformed header: expected ',' or '}'");
  expect_value_error(npy_bytes("{'descr': '<f8', 'colour': 'red'}", ""),
                     "': malformed header: unknown key 'colour'");
  expect_value_error(npy_bytes("{'descr': '<c32', 'fortran_order': False, 'shape': (1,), }",
                               std::string(32, '\0')),
                     "': unsupported dtype '<c32'");
  expect_value_error(npy_bytes("{'descr': '<u16', 'fortran_order': False, 'shape': (1,), }",
                               std::string(16, '\0')),
                     "': unsupported dtype '<u16'");
  expect_value_error(
      npy_bytes("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }", ""),
      "': unsupported dtype: structured arrays are not supported");
  // A huge shape in a small file is caught before any allocation.
  write_bytes("bad.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                                   "'shape': (4611686018427387904, 4), }",
                                   ""));
  EXPECT_TRUE(throws_with<MemoryError>([&] { call("file_read_npy", {p}); }, "file_read_npy"));
  write_bytes("bad.npy",
              npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
                        ""));
  EXPECT_TRUE(throws_with<std::invalid_argument>(
      [&] { call("file_read_npy", {p}); },
      "truncated data: shape (1000000000000,) of '<f8' needs 8000000000000 bytes, found 0"));
}
