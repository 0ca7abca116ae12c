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

// Where the headers the ICRC masks sit in a frame. Offsets are from the start
// of the Ethernet header.
struct IcrcLayout {
  size_t l3_offset = 0;
  IpVersion ip_version = IpVersion::kV6;
  bool has_srh = false;
  EvMode ev_mode = EvMode::kUdp;
};

// The ICRC of bytes[l3_offset, end) of `headers` followed by `payload`.
// `headers` must hold at least the IP, SRH, UDP and BTH headers.
uint32_t icrc_of(const IcrcLayout& layout, std::span<const uint8_t> headers,
                 std::span<const uint8_t> payload);

}  // namespace softmrc::wire
