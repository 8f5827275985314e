// The disk cache of compiled loops (native_cache.hpp).
// An entry is one file, <dir>/native/<key>.o, its key the SHA-1 of the
// unoptimised IR (the loop's operations typed by its signature), tessera's
// and LLVM's versions, the code format and the CPU (name and features):
//   "TESSERA-NATIVE01" | key (20 bytes) | size (8, little-endian) |
//   SHA-1 of key + object (20) | object (size bytes)
// Files are untrusted: opened without following links, regular files only,
// the size checked against the file's before anything is allocated, the key
// and the content's hash checked before the object is used; anything else
// is recompiled (and the entry written again: a temporary file in the same
// folder, then renamed over it).

#include "tessera/lang/native_cache.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/SHA1.h>

namespace tessera {

namespace {

constexpr char kMagic[17] = "TESSERA-NATIVE01";
constexpr size_t kHeader = 16 + 20 + 8 + 20;
constexpr int64_t kMaxObject = int64_t{64} << 20;

// TESSERA_CACHE_DIR (empty or "0": no cache), else $HOME/.cache/tessera.
std::string cache_dir() {
  const char* e = std::getenv("TESSERA_CACHE_DIR");
  std::string d;
  if (e) {
    d = e;
    if (d.empty() || d == "0") return "";
  } else {
    const char* home = std::getenv("HOME");
    if (!home || !*home) return "";
    d = std::string(home) + "/.cache/tessera";
  }
  return d + "/native";
}

// The cache holds machine code this process will run: only a folder of
// this user's that no one else may write into (as ssh requires of ~/.ssh)
// is read or written; any other is no cache at all.
bool private_dir(const std::string& d) {
  struct stat st;
  return ::lstat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool make_dirs(const std::string& d) {
  for (size_t at = 1; at <= d.size(); ++at) {
    if (at < d.size() && d[at] != '/') continue;
    const std::string part = d.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return private_dir(d);
}

// The object of entry `key`, or empty with the reason in `why`.
std::string cache_read(const std::string& path, const Digest& key, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    why = errno == ENOENT ? "no entry" : errno == ELOOP ? "the entry is a symbolic link" : "unreadable";
    return "";
  }
  std::string out;
  struct stat st;
  char head[kHeader];
  int64_t size = -1;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_size < static_cast<off_t>(kHeader) ||
             ::read(fd, head, kHeader) != static_cast<ssize_t>(kHeader)) {
    why = "truncated header";
  } else if (std::memcmp(head, kMagic, 16) != 0) {
    why = "not a tessera native entry (or another format)";
  } else if (std::memcmp(head + 16, key.data(), 20) != 0) {
    why = "the key differs";
  } else {
    uint64_t u = 0;
    for (int k = 0; k < 8; ++k) u |= uint64_t{static_cast<uint8_t>(head[36 + k])} << (8 * k);
    size = u > static_cast<uint64_t>(kMaxObject) ? -1 : static_cast<int64_t>(u);
    if (size < 0 || st.st_size != static_cast<off_t>(kHeader + static_cast<size_t>(size))) {
      why = "the size in the header is not the file's";
    } else {
      out.resize(static_cast<size_t>(size));
      size_t got = 0;
      while (got < out.size()) {
        const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
        if (r <= 0) break;
        got += static_cast<size_t>(r);
      }
      const std::string k(reinterpret_cast<const char*>(key.data()), 20);
      if (got != out.size()) {
        why = "truncated object";
        out.clear();
      } else if (std::memcmp(sha1(k, out).data(), head + 44, 20) != 0) {
        why = "the content's hash differs (corrupt)";
        out.clear();
      }
    }
  }
  ::close(fd);
  return out;
}

void cache_write(const std::string& dir, const std::string& path, const Digest& key,
                 const std::string& obj, std::string& why) {
  if (!make_dirs(dir)) {
    why += "; no cache: " + dir +
           " could not be made, or is not a folder of this user's that only this user may "
           "write into";
    return;
  }
  std::string head(kMagic, 16);
  const std::string k(reinterpret_cast<const char*>(key.data()), 20);
  head += k;
  for (int b = 0; b < 8; ++b) head += static_cast<char>((uint64_t{obj.size()} >> (8 * b)) & 255);
  const Digest h = sha1(k, obj);
  head.append(reinterpret_cast<const char*>(h.data()), 20);
  std::string tmp = dir + "/.tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());  // O_EXCL: never a file planted there
  if (fd < 0) {
    why += "; could not write in " + dir;
    return;
  }
  bool ok = true;
  for (const std::string* part : {static_cast<const std::string*>(&head), &obj}) {
    size_t done = 0;
    while (ok && done < part->size()) {
      const ssize_t r = ::write(fd, part->data() + done, part->size() - done);
      if (r <= 0) ok = false;
      else done += static_cast<size_t>(r);
    }
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    why += "; could not write " + path;
  }
}


}  // namespace

Digest sha1(const std::string& a, const std::string& b) {
  llvm::SHA1 h;
  h.update(llvm::StringRef(a));
  h.update(llvm::StringRef(b));
  Digest d;
  const auto r = h.final();
  std::memcpy(d.data(), r.data(), 20);
  return d;
}

std::string hex(const Digest& d) {
  static const char* x = "0123456789abcdef";
  std::string s;
  for (uint8_t c : d) {
    s += x[c >> 4];
    s += x[c & 15];
  }
  return s;
}

NativeCache::NativeCache(const Digest& key) : key_(key), dir_(cache_dir()) {
  if (!dir_.empty()) path_ = dir_ + "/" + hex(key_) + ".o";
}

std::string NativeCache::load(std::string& why) const {
  if (dir_.empty()) {
    why = "off (TESSERA_CACHE_DIR)";
    return "";
  }
  if (!private_dir(dir_)) {
    why = "no entry";  // made (or refused, saying why) when stored
    return "";
  }
  return cache_read(path_, key_, why);
}

void NativeCache::store(const std::string& obj, std::string& why) const {
  if (!dir_.empty()) cache_write(dir_, path_, key_, obj, why);
}

}  // namespace tessera
