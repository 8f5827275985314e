#include "tessera/kernels/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera::kernels {

std::string read_whole_file(const std::string& path, const char* op) {
  auto fail = [&](const char* what, int err) {
    throw std::runtime_error(
        error_message("[", op, "] ", what, " '", path, "': ", std::strerror(err)));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot open", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("cannot open", EISDIR);
  }
  std::string bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail("cannot read", err);
    }
    if (got == 0) break;
    bytes.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return bytes;
}

void write_file_atomic(const std::string& path, const std::string& bytes, const char* op) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  auto fail = [&](int err) {
    if (fd >= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
    throw std::runtime_error(error_message("[", op, "] cannot write '", path,
                                           "': ", std::strerror(err)));
  };
  if (fd < 0) fail(errno);
  // mkstemp creates the file private (0600); a saved array is an ordinary file.
  ::fchmod(fd, 0644);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    done += static_cast<size_t>(put);
  }
  if (::close(fd) != 0) {
    int err = errno;
    fd = -1;
    ::unlink(tmp.c_str());
    throw std::runtime_error(error_message("[", op, "] cannot write '", path,
                                           "': ", std::strerror(err)));
  }
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(error_message("[", op, "] cannot write '", path,
                                           "': ", std::strerror(err)));
  }
}

}  // namespace tessera::kernels
