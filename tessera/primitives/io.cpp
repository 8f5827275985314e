// File input/output primitives: CSV text and NumPy's .npy format, with the
// numpy-style aliases load and save. Writes are atomic (temporary file renamed
// into place); reads check the content and name the file and line on errors.
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

namespace kn = kernels;

Value read_csv(Args& args) {
  const std::string& path = args.string(0);
  const std::string& delimiter = args.string(1);
  int64_t skip = args.integer(2);
  DType dt = args.dtype(3, DType::float64);
  std::string text = kn::read_whole_file(path, args.op());
  return kn::parse_csv(text, path, delimiter, skip, dt, args.op());
}

Value write_csv(Args& args) {
  const std::string& path = args.string(0);
  Array x = args.array(1);
  std::string text = kn::format_csv(x, args.string(2), args.op());
  kn::write_file_atomic(path, text, args.op());
  return Value();
}

Value read_npy(Args& args) {
  const std::string& path = args.string(0);
  return kn::parse_npy(kn::read_whole_file(path, args.op()), path, args.op());
}

Value write_npy(Args& args, bool add_suffix) {
  std::string path = args.string(0);
  // np.save appends ".npy" to a path lacking it; file_write_npy writes the path as given.
  if (add_suffix && (path.size() < 4 || path.compare(path.size() - 4, 4, ".npy") != 0)) {
    path += ".npy";
  }
  Array x = args.array(1);
  kn::write_file_atomic(path, kn::format_npy(x), args.op());
  return Value();
}

const bool registered_io = register_primitives({
    {.name = "file_read_csv",
     .family = "io",
     .params = {{"path"}, opt("delimiter", Value(",")), opt("skip_header", Value(int64_t{0})),
                opt("dtype", Value("float64"))},
     .help = "Reads a CSV file into a 2-d array of the given dtype (numpy.loadtxt with ndmin=2); "
             "the first skip_header lines, blank lines and '#' comments are skipped. Ragged rows "
             "and unparsable cells are ValueErrors naming the line.",
     .eval = read_csv,
     .ns_per_element = 50.0},
    {.name = "file_write_csv",
     .family = "io",
     .params = {{"path"}, {"x"}, opt("delimiter", Value(","))},
     .help = "Writes a 1-d (one value per line) or 2-d array as CSV (numpy.savetxt); floats use "
             "the shortest text that reads back exactly, bools 1/0. Returns nil.",
     .eval = write_csv,
     .ns_per_element = 50.0},
    {.name = "file_read_npy",
     .family = "io",
     .params = {{"path"}},
     .help = "Reads a .npy file (numpy.load): float16/32/64, integers (read as int64) and bool, "
             "in C or Fortran order.",
     .eval = read_npy,
     .ns_per_element = 1.0},
    {.name = "file_write_npy",
     .family = "io",
     .params = {{"path"}, {"x"}},
     .help = "Writes x to exactly `path` in the .npy format (numpy.save without the suffix "
             "rule). Returns nil.",
     .eval = [](Args& a) -> Value { return write_npy(a, false); },
     .ns_per_element = 1.0},
    {.name = "load",
     .family = "io",
     .params = {{"path"}},
     .help = "Alias of file_read_npy, as numpy.load for .npy files.",
     .eval = read_npy,
     .ns_per_element = 1.0},
    {.name = "save",
     .family = "io",
     .params = {{"path"}, {"x"}},
     .help = "Writes x in the .npy format as numpy.save does, appending '.npy' to a path that "
             "lacks it. Returns nil.",
     .eval = [](Args& a) -> Value { return write_npy(a, true); },
     .ns_per_element = 1.0},
});

}  // namespace

}  // namespace tessera
