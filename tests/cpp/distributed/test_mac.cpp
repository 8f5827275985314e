// SHA-256 and HMAC-SHA-256 (tessera/distributed/mac.hpp) against the
// published known answers: FIPS 180-2 appendix B / NIST's examples for
// SHA-256, RFC 4231 section 4 for HMAC-SHA-256.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/distributed/mac.hpp"

namespace tessera::test {
namespace {

using namespace distributed::detail;

std::string hex(const Digest& d) { return to_hex(d.data(), d.size()); }

std::vector<uint8_t> repeat(uint8_t byte, size_t n) { return std::vector<uint8_t>(n, byte); }

TEST(Mac, Sha256KnownAnswers) {
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in uneven pieces.
  Sha256 s;
  std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, piece.size());
    s.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(hex(s.digest()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Mac, HmacSha256Rfc4231) {
  struct Case {
    std::vector<uint8_t> key;
    std::string data;
    std::string mac;
  };
  std::vector<uint8_t> key4;
  for (uint8_t b = 1; b <= 25; ++b) key4.push_back(b);
  std::string dd(50, '\xdd'), cd(50, '\xcd');
  std::vector<Case> cases = {
      {repeat(0x0b, 20), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {repeat(0xaa, 20), dd, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, cd, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {repeat(0xaa, 131), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {repeat(0xaa, 131),
       "This is a test using a larger than block-size key and a larger than block-size data. "
       "The key needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    EXPECT_EQ(hex(hmac_sha256(c.key.data(), c.key.size(), c.data.data(), c.data.size())), c.mac)
        << "RFC 4231 test case " << (i < 4 ? i + 1 : i + 2);
  }
  // Test case 5: the output truncated to 128 bits.
  std::vector<uint8_t> k5 = repeat(0x0c, 20);
  std::string d5 = "Test With Truncation";
  EXPECT_EQ(hex(hmac_sha256(k5.data(), k5.size(), d5.data(), d5.size())).substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
}

TEST(Mac, ConstantTimeCompareAndHex) {
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
  EXPECT_TRUE(equal_in_constant_time(a, b, 4));
  EXPECT_FALSE(equal_in_constant_time(a, c, 4));
  EXPECT_EQ(to_hex(c, 4), "01020305");
  uint8_t back[4] = {};
  EXPECT_TRUE(from_hex("01020305", back, 4));
  EXPECT_TRUE(equal_in_constant_time(back, c, 4));
  EXPECT_FALSE(from_hex("0102030", back, 4));
  EXPECT_FALSE(from_hex("0102030g", back, 4));
}

}  // namespace
}  // namespace tessera::test
