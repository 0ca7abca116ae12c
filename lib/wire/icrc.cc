// CRC-32 by slicing-by-8 tables, and the ICRC masking rule
// (docs/wire-format.md, "ICRC").
#include "wire/icrc.h"

#include <array>
#include <bit>
#include <cstddef>
#include <cstring>

namespace softmrc::wire {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}

constexpr Tables kTables = make_tables();

// The masked copy never exceeds IPv6 + SRH + UDP + BTH.
constexpr size_t kMaskedMax =
    sizeof(Ipv6Hdr) + sizeof(SrhOneSegment) + sizeof(UdpHdr) + sizeof(Bth);

}  // namespace

uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len) {
  while (len >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, data, 4);
    std::memcpy(&hi, data + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= state;
    state = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
            kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
            kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    data += 8;
    len -= 8;
  }
  while (len--) state = (state >> 8) ^ kTables[0][(state ^ *data++) & 0xff];
  return state;
}

uint32_t crc32(std::span<const uint8_t> data) {
  return crc32_final(crc32_update(kCrc32Init, data.data(), data.size()));
}

uint32_t icrc_of(const IcrcLayout& layout, std::span<const uint8_t> headers,
                 std::span<const uint8_t> payload) {
  // RoCEv2 prefixes 8 bytes of ones in place of the InfiniBand LRH.
  static constexpr uint8_t kPseudoLrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uint32_t state = crc32_update(kCrc32Init, kPseudoLrh, sizeof(kPseudoLrh));

  // Copy IP [+ SRH] + UDP + BTH and set the fields switches may change to ones.
  const size_t ip_len = layout.ip_version == IpVersion::kV4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
  const size_t srh_len = layout.has_srh ? sizeof(SrhOneSegment) : 0;
  const size_t masked_len = ip_len + srh_len + sizeof(UdpHdr) + sizeof(Bth);
  uint8_t m[kMaskedMax];
  std::memcpy(m, headers.data() + layout.l3_offset, masked_len);
  if (layout.ip_version == IpVersion::kV4) {
    auto ip = load<Ipv4Hdr>(m);
    ip.tos = 0xff;
    ip.ttl = 0xff;
    ip.checksum.set(0xffff);
    store(m, ip);
  } else {
    auto ip = load<Ipv6Hdr>(m);
    ip.version_tc_flow.set(ip.version_tc_flow.get() | 0x0fffffff);  // traffic class, flow label
    ip.hop_limit = 0xff;
    if (layout.ev_mode == EvMode::kSrv6) {
      // uSID forwarding shifts the destination and consumes SRH segments.
      std::memset(ip.dst, 0xff, sizeof(ip.dst));
      std::memset(m + ip_len, 0xff, srh_len);
    }
    store(m, ip);
  }
  uint8_t* udp = m + ip_len + srh_len;
  udp[offsetof(UdpHdr, checksum)] = 0xff;
  udp[offsetof(UdpHdr, checksum) + 1] = 0xff;
  udp[sizeof(UdpHdr) + offsetof(Bth, resv8a)] = 0xff;
  state = crc32_update(state, m, masked_len);

  const size_t rest = layout.l3_offset + masked_len;
  state = crc32_update(state, headers.data() + rest, headers.size() - rest);
  state = crc32_update(state, payload.data(), payload.size());
  return crc32_final(state);
}

}  // namespace softmrc::wire
