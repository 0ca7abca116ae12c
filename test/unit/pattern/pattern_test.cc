// Payload patterns: what fill() writes, verify() accepts, whole or a part at
// a time, and nothing else.
#include "pattern/pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace softmrc::pattern {
namespace {

TEST(Pattern, FilledMessageVerifiesOnlyAsItself) {
  std::vector<uint8_t> buf(4099);  // a tail that is not a whole word
  fill(buf.data(), buf.size(), 7, 42);
  EXPECT_TRUE(verify(buf.data(), buf.size(), 7, 42));
  EXPECT_FALSE(verify(buf.data(), buf.size(), 7, 43));
  EXPECT_FALSE(verify(buf.data(), buf.size(), 8, 42));
}

TEST(Pattern, PartsAtTheirOffsetsVerify) {
  std::vector<uint8_t> buf(10000);
  fill(buf.data(), buf.size(), 3, 9);
  for (uint64_t part : {8u, 64u, 1000u, 4096u}) {
    for (uint64_t off = 0; off < buf.size(); off += part) {
      const uint64_t len = std::min<uint64_t>(part, buf.size() - off);
      EXPECT_TRUE(verify(buf.data() + off, len, 3, 9, off)) << "part " << part << " at " << off;
    }
  }
  // A part checked as if it were elsewhere in the message fails.
  EXPECT_FALSE(verify(buf.data() + 64, 64, 3, 9, 0));
  EXPECT_FALSE(verify(buf.data() + 64, 64, 3, 9, 128));
}

TEST(Pattern, EveryByteCounts) {
  std::vector<uint8_t> buf(1027);
  fill(buf.data(), buf.size(), 1, 2);
  for (size_t i = 0; i < buf.size(); ++i) {
    buf[i] ^= 0x10;
    EXPECT_FALSE(verify(buf.data(), buf.size(), 1, 2)) << "byte " << i;
    const uint64_t off = i / 256 * 256;  // the part that holds it
    const uint64_t len = std::min<uint64_t>(256, buf.size() - off);
    EXPECT_FALSE(verify(buf.data() + off, len, 1, 2, off)) << "byte " << i;
    buf[i] ^= 0x10;
  }
  EXPECT_TRUE(verify(buf.data(), buf.size(), 1, 2));
}

}  // namespace
}  // namespace softmrc::pattern
