// Payload patterns for end-to-end verification: the bytes of message `seq`
// of stream `stream` are a function of (stream, seq, offset), so a sender
// can fill a buffer and a receiver check it without exchanging anything,
// and a stale, misplaced or foreign packet cannot pass the check. Used by
// smrc-loopback and softmrcd's traffic generator.
#pragma once

#include <cstdint>

namespace softmrc::pattern {

// The 8 bytes at offset 8 * word of message `seq` of `stream`.
inline uint64_t word(uint64_t stream, uint64_t seq, uint64_t word) {
  uint64_t x =
      stream * 0xd6e8feb86659fd93ull + seq * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  return x * 0x94d049bb133111ebull;
}

void fill(uint8_t* p, uint64_t len, uint64_t stream, uint64_t seq);
// True when [p, p + len) holds exactly what fill() wrote at `offset` of the
// message (a multiple of 8): a long message can be checked a part at a time.
bool verify(const uint8_t* p, uint64_t len, uint64_t stream, uint64_t seq, uint64_t offset = 0);

}  // namespace softmrc::pattern
