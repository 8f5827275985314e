#include "tessera/kernels/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <streambuf>

#include "tessera/core/error.hpp"

namespace tessera::kernels {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A stream buffer writing to a file descriptor (the temporary of
// write_file_atomic); errors are remembered, not thrown.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return error_; }
  int sync() override { return flush_buffer() ? 0 : -1; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

 private:
  bool flush_buffer() {
    const char* p = pbase();
    while (p < pptr() && !error_) {
      ssize_t put = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (put < 0) {
        if (errno != EINTR) error_ = errno;
        continue;
      }
      p += put;
    }
    setp(buf_, buf_ + sizeof buf_);
    return !error_;
  }
  int fd_;
  int error_ = 0;
  char buf_[1 << 16];
};

// The process's umask, read without changing it (umask(2) sets it, which
// would race with other threads creating files).
mode_t current_umask() {
  if (FILE* f = std::fopen("/proc/self/status", "re")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask & 0777);
  }
  return 022;
}

}  // namespace

mode_t mode_for_replacing(const std::string& path) {
  struct stat st {};
  // lstat: a link at `path` is replaced by the rename, not written through,
  // so its target's mode says nothing.
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  return 0666 & ~current_umask();
}

uint64_t max_file_bytes() {
  if (const char* env = std::getenv("TESSERA_MAX_FILE_BYTES")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return v;
  }
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::string read_whole_file(const std::string& path, const char* op, bool follow_links) {
  auto fail = [&](const char* what, int err) {
    throw std::runtime_error(
        error_message("[", op, "] ", what, " '", path, "': ", std::strerror(err)));
  };
  // O_NONBLOCK: opening a pipe with no writer would wait forever (it is
  // refused below, as every file that is not a regular one).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0 && errno == ELOOP && !follow_links) {
    throw std::invalid_argument(error_message("[", op, "] cannot read '", path,
                                              "': it is a symbolic link, and links are not "
                                              "followed here (only files are read)"));
  }
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
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::invalid_argument(error_message("[", op, "] cannot read '", path, "': it is ",
                                              file_kind(st.st_mode),
                                              ", not a regular file (only files are read)"));
  }
  const uint64_t limit = max_file_bytes();
  auto too_large = [&](uint64_t size) {
    ::close(fd);
    throw std::invalid_argument(error_message(
        "[", op, "] cannot read '", path, "': it has ", size, " bytes, more than the limit of ",
        limit, " (the machine's memory; set TESSERA_MAX_FILE_BYTES to change it)"));
  };
  if (static_cast<uint64_t>(st.st_size) > limit) too_large(static_cast<uint64_t>(st.st_size));
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
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
    // A file that grows while it is read stops at the limit too.
    const uint64_t total = bytes.size() + static_cast<size_t>(got);
    if (total > limit) too_large(total);
    bytes.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return bytes;
}

void write_file_atomic(const std::string& path, const std::string& bytes, const char* op) {
  auto write = [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  write_file_atomic(path, write, op);
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write,
                       const char* op) {
  // The temporary is made by mkstemp (O_CREAT|O_EXCL, a random name) in
  // the target's folder, so the rename stays on one file system and no
  // existing path (a symbolic link planted at a guessable name) is opened.
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
  // mkstemp creates the file private (0600): give it the mode of the file it
  // replaces, or an ordinary new file's.
  ::fchmod(fd, mode_for_replacing(path));
  {
    FdBuf buf(fd);
    std::ostream out(&buf);
    try {
      write(out);
    } catch (...) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw;
    }
    out.flush();
    if (buf.error()) fail(buf.error());
    if (!out) fail(EIO);
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
