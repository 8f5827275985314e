// The disk cache of compiled native loops (docs/runtime.md, "Compile
// cache"): one file per entry, keyed by the SHA-1 of the loop's code before
// optimisation and of what makes the same code give other machine code.
// Entries are untrusted files (see native_cache.cpp). Used by native.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tessera {

using Digest = std::array<uint8_t, 20>;

// SHA-1 of `a` followed by `b`.
Digest sha1(const std::string& a, const std::string& b = "");
// 40 lower-case hex digits.
std::string hex(const Digest& d);

// The entry of one key in the cache folder (TESSERA_CACHE_DIR, else
// $HOME/.cache/tessera; none when that is empty or "0").
class NativeCache {
 public:
  explicit NativeCache(const Digest& key);
  // The object stored for the key, or empty with the reason in `why`.
  std::string load(std::string& why) const;
  // Stores `obj` for the key (a temporary file, then renamed); a failure
  // is added to `why`, never thrown: the code runs without the cache.
  void store(const std::string& obj, std::string& why) const;

 private:
  Digest key_;
  std::string dir_;   // empty: no cache
  std::string path_;
};

}  // namespace tessera
