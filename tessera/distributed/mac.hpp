// Message authentication for the datagrams ranks exchange outside MPI (the
// heartbeats): SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), written
// from the published specifications, and a comparison whose time does not
// depend on where two tags differ.
//
// Internal to tessera/distributed (heartbeat.cpp uses it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::distributed::detail {

using Digest = std::array<uint8_t, 32>;

// SHA-256 of `n` bytes at `data`, in pieces: update() any number of times,
// then digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  Digest digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;  // bytes
};

Digest sha256(const void* data, size_t n);

// HMAC-SHA-256 with a key of any length (a key longer than the block, 64
// bytes, is hashed first, as RFC 2104 says).
Digest hmac_sha256(const void* key, size_t key_n, const void* data, size_t n);

// True when the `n` bytes at a and b are equal, in a time that depends on n
// only.
bool equal_in_constant_time(const void* a, const void* b, size_t n);

// Fills `n` bytes with random bytes from the kernel (getrandom, else
// /dev/urandom); false (errno set) when neither gave them.
bool random_bytes(void* out, size_t n);

// Lower-case hex of bytes, and its inverse (false for anything but 2 * n hex
// digits).
std::string to_hex(const void* data, size_t n);
bool from_hex(const std::string& hex, void* out, size_t n);

}  // namespace tessera::distributed::detail
