// Payload patterns (see pattern.h). Whole words are moved as integers (no
// call per word): checking a message costs about as much as writing it.
#include "pattern/pattern.h"

#include <cstring>

namespace softmrc::pattern {

void fill(uint8_t* p, uint64_t len, uint64_t stream, uint64_t seq) {
  const uint64_t words = len / 8;
  for (uint64_t w = 0; w < words; ++w) {
    const uint64_t v = word(stream, seq, w);
    std::memcpy(p + w * 8, &v, 8);
  }
  if (const uint64_t tail = len % 8) {
    const uint64_t v = word(stream, seq, words);
    std::memcpy(p + words * 8, &v, tail);
  }
}

bool verify(const uint8_t* p, uint64_t len, uint64_t stream, uint64_t seq, uint64_t offset) {
  const uint64_t words = len / 8;
  const uint64_t first = offset / 8;
  uint64_t diff = 0;
  for (uint64_t w = 0; w < words; ++w) {
    uint64_t v;
    std::memcpy(&v, p + w * 8, 8);
    diff |= v ^ word(stream, seq, first + w);
  }
  if (const uint64_t tail = len % 8) {
    const uint64_t v = word(stream, seq, first + words);
    if (std::memcmp(p + words * 8, &v, tail) != 0) return false;
  }
  return diff == 0;
}

}  // namespace softmrc::pattern
