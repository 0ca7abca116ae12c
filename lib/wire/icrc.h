// CRC-32 (IEEE 802.3, as zlib and Ethernet compute it) and the ICRC rule of
// softmrc wire v1: which bytes the invariant CRC covers and which are masked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/packet.h"

namespace softmrc::wire {

// Running CRC-32: start from kCrc32Init, feed bytes, finish with crc32_final.
inline constexpr uint32_t kCrc32Init = 0xffffffff;
uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len);
constexpr uint32_t crc32_final(uint32_t state) {
  return ~state;
}
// One-shot CRC-32 of a buffer (crc32("123456789") == 0xcbf43926).
uint32_t crc32(std::span<const uint8_t> data);
// Copies `len` bytes from `src` to `dst` (which must not overlap) and feeds
// them to the running CRC in the same pass: one read of the data instead of
// two, for a payload that is both copied and checked.
uint32_t crc32_copy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t len);

// The state `len` zero bytes take `state` to: a running CRC moved `len`
// bytes further along the stream, the CRC being linear (zlib's
// crc32_combine() rests on the same). One multiply up to kMaxShift bytes
// (a payload and its type header), one per kMaxShift beyond.
inline constexpr size_t kMaxShift = kMaxPayload + 64;
uint32_t crc32_shift(uint32_t state, size_t len);

// The CRC engines. Every engine computes the same function; the fastest
// one the CPU has is chosen at start-up. Like rte_net_crc_set_alg(), a test
// or benchmark may pick another: set it before any lcore computes CRCs.
enum class CrcEngine : uint8_t {
  kTables,   // slicing-by-8 tables: any CPU
  kClmul,    // PCLMULQDQ folding, four 128-bit lanes (x86-64 with SSE4.1)
  kVpclmul,  // VPCLMULQDQ folding, four 512-bit lanes (x86-64 with AVX-512)
};
CrcEngine crc32_engine();
// Selects `engine` if the CPU has it, else leaves the choice unchanged;
// returns the engine in use.
CrcEngine crc32_set_engine(CrcEngine engine);
// The fastest engine this CPU has.
CrcEngine crc32_best_engine();

// The ICRC of bytes[l3_offset, end) of `headers` followed by `payload`.
// `headers` must hold at least the IP, SRH, UDP and BTH headers. With
// `side`, the fold makes what it can of that copy on the way (the wide
// fold of a long stream: whole 256-byte turns) and leaves the rest in it.
uint32_t icrc_of(const IcrcLayout& layout, std::span<const uint8_t> headers,
                 std::span<const uint8_t> payload, DeferredCopy* side = nullptr);

// The ICRC of a frame whose headers (`hlen` bytes, at least the IP, SRH,
// UDP and BTH headers) are already in `frame`, while `payload` is copied to
// frame + hlen in the same pass.
uint32_t icrc_copy(const IcrcLayout& layout, uint8_t* frame, size_t hlen,
                   std::span<const uint8_t> payload);

// Whether the ICRC of a frame whose Ethernet FCS its port checked is right.
// `frame` is every byte the FCS covers (Ethernet padding included), `fcs`
// its value (the CRC-32 of `frame`), and frame[0, body_offset) holds at
// least the Ethernet, IP, SRH, UDP and BTH headers; the ICRC field sits at
// icrc_offset. The FCS and the ICRC fold the same body (what is between the
// two offsets), so the FCS says what the body adds: only the headers and
// what follows the body are folded here, in a time the body's length does
// not change. False also where the offsets do not fit the frame.
bool icrc_matches_fcs(const IcrcLayout& layout, std::span<const uint8_t> frame, size_t body_offset,
                      size_t icrc_offset, uint32_t fcs);

}  // namespace softmrc::wire
