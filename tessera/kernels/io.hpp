// File input/output kernels: CSV text (csv.cpp) and NumPy's .npy format
// (npy.cpp), plus the whole-file read and atomic write they share (io.cpp).
//
// Errors name the calling op and the file: a file that cannot be opened is a
// std::runtime_error, malformed content a ValueError (std::invalid_argument).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "tessera/core/array.hpp"

namespace tessera::kernels {

// The bytes of a file. Throws std::runtime_error
// "[op] cannot open 'path': No such file or directory" when it cannot be read,
// and ValueError when it is not a regular file (a device, a pipe: /dev/zero
// would never end) or is larger than max_file_bytes(). With follow_links
// false (files in folders others can write: traces), a symbolic link at
// `path` is refused too (O_NOFOLLOW) instead of read through.
std::string read_whole_file(const std::string& path, const char* op, bool follow_links = true);

// The largest file (or decompressed stream) a reader takes in whole:
// TESSERA_MAX_FILE_BYTES if set, else the machine's physical memory.
uint64_t max_file_bytes();

// Writes `bytes` to a temporary file beside `path` and renames it into place,
// so a failed write never leaves a partial file. The temporary is a new file
// (mkstemp: O_CREAT|O_EXCL), so nothing planted at a predictable name (a
// symbolic link) is followed. A file replaced keeps its permission bits; a
// new one gets 0666 less the umask, as open() gives. Throws std::runtime_error.
void write_file_atomic(const std::string& path, const std::string& bytes, const char* op);
// The same with the content streamed by `write` (large outputs: traces).
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write,
                       const char* op);

// The permission bits a file written at `path` gets: those of the regular
// file it replaces, or 0666 less the umask for a new one.
mode_t mode_for_replacing(const std::string& path);

// Parses CSV text into a 2-d array of `dtype` (one column stays 2-d). Blank
// lines and lines starting with '#' are skipped after the first `skip_header`
// lines. `name` is the file name used in messages.
Array parse_csv(const std::string& text, const std::string& name, const std::string& delimiter,
                int64_t skip_header, DType dtype, const char* op);

// CSV text of a 1-d (one value per line) or 2-d array; floats in the shortest
// form that reads back exactly, bools as 1/0.
std::string format_csv(const Array& x, const std::string& delimiter, const char* op);

// Decodes a .npy file (format 1.0, 2.0 or 3.0). Reads descr '<f8' '<f4' '<f2'
// (as float32), '|b1' and signed/unsigned integers up to '<i8'/'<u4' (as int64),
// either byte order, C or Fortran order.
Array parse_npy(const std::string& bytes, const std::string& name, const char* op);

// Encodes an array as a .npy file (format 1.0, or 2.0 for very long headers).
std::string format_npy(const Array& x);

}  // namespace tessera::kernels
