// CRC-32 and the ICRC masking rule (docs/wire-format.md, "ICRC").
//
// Two CRC engines compute the same function: carry-less multiplication
// folding (PCLMULQDQ, x86-64 CPUs that have it, chosen at run time) for
// every 16-byte block of buffers of 64 bytes or more, and slicing-by-8
// tables for the rest and for other CPUs. The folding constants are powers
// of x modulo the reflected CRC-32 polynomial, as in Intel's white paper
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ".
#include "wire/icrc.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

uint32_t crc32_update_tables(uint32_t state, const uint8_t* data, size_t len) {
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

#if defined(__x86_64__)
#define SOFTMRC_CLMUL __attribute__((target("pclmul,sse4.1")))

SOFTMRC_CLMUL __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// acc * (x^a, x^b) folded forward by the distance k encodes, plus next.
SOFTMRC_CLMUL __m128i fold128(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next);
}

// Folds len bytes (len >= 64, a multiple of 16) into the CRC state.
SOFTMRC_CLMUL uint32_t crc32_update_folded(uint32_t state, const uint8_t* data, size_t len) {
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);     // x^(4*128+-32) mod P
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);     // x^(128+-32) mod P
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);                 // x^64 mod P
  const __m128i poly_mu = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // Barrett: mu', P'
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);

  __m128i x1 = _mm_xor_si128(load128(data), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x2 = load128(data + 16), x3 = load128(data + 32), x4 = load128(data + 48);
  data += 64;
  len -= 64;
  for (; len >= 64; data += 64, len -= 64) {  // four lanes, 64 bytes a turn
    x1 = fold128(x1, k1k2, load128(data));
    x2 = fold128(x2, k1k2, load128(data + 16));
    x3 = fold128(x3, k1k2, load128(data + 32));
    x4 = fold128(x4, k1k2, load128(data + 48));
  }
  x1 = fold128(x1, k3k4, x2);  // four lanes into one
  x1 = fold128(x1, k3k4, x3);
  x1 = fold128(x1, k3k4, x4);
  for (; len >= 16; data += 16, len -= 16) x1 = fold128(x1, k3k4, load128(data));

  // 128 -> 64 bits, then -> 32 bits, then Barrett reduction.
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(x1, k3k4, 0x10));
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 4),
                     _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly_mu, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x1, t), 1));
}

const bool kHaveClmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif

}  // namespace

uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len) {
#if defined(__x86_64__)
  if (len >= 64 && kHaveClmul) {
    const size_t folded = len & ~size_t{15};
    state = crc32_update_folded(state, data, folded);
    data += folded;
    len -= folded;
  }
#endif
  return crc32_update_tables(state, data, len);
}

uint32_t crc32(std::span<const uint8_t> data) {
  return crc32_final(crc32_update(kCrc32Init, data.data(), data.size()));
}

uint32_t icrc_of(const IcrcLayout& layout, std::span<const uint8_t> headers,
                 std::span<const uint8_t> payload) {
  // The masked headers and what follows them go through the CRC as one
  // buffer: a single long run folds much faster than several short ones.
  constexpr size_t kPseudoLrhLen = 8;  // RoCEv2's ones in place of the IB LRH
  constexpr size_t kTailMax = 160;     // bytes after the masked headers copied along
  uint8_t m[kPseudoLrhLen + kMaskedMax + kTailMax];
  std::memset(m, 0xff, kPseudoLrhLen);

  // Copy IP [+ SRH] + UDP + BTH and set the fields switches may change to ones.
  const size_t ip_len = layout.ip_version == IpVersion::kV4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
  const size_t srh_len = layout.has_srh ? sizeof(SrhOneSegment) : 0;
  const size_t masked_len = ip_len + srh_len + sizeof(UdpHdr) + sizeof(Bth);
  uint8_t* ip = m + kPseudoLrhLen;
  std::memcpy(ip, headers.data() + layout.l3_offset, masked_len);
  if (layout.ip_version == IpVersion::kV4) {
    auto h = load<Ipv4Hdr>(ip);
    h.tos = 0xff;
    h.ttl = 0xff;
    h.checksum.set(0xffff);
    store(ip, h);
  } else {
    auto h = load<Ipv6Hdr>(ip);
    h.version_tc_flow.set(h.version_tc_flow.get() | 0x0fffffff);  // traffic class, flow label
    h.hop_limit = 0xff;
    if (layout.ev_mode == EvMode::kSrv6) {
      // uSID forwarding shifts the destination and consumes SRH segments.
      std::memset(h.dst, 0xff, sizeof(h.dst));
      std::memset(ip + ip_len, 0xff, srh_len);
    }
    store(ip, h);
  }
  uint8_t* udp = ip + ip_len + srh_len;
  udp[offsetof(UdpHdr, checksum)] = 0xff;
  udp[offsetof(UdpHdr, checksum) + 1] = 0xff;
  udp[sizeof(UdpHdr) + offsetof(Bth, resv8a)] = 0xff;

  const size_t rest = layout.l3_offset + masked_len;
  const size_t tail = std::min(kTailMax, headers.size() - rest);
  std::memcpy(ip + masked_len, headers.data() + rest, tail);
  uint32_t state = crc32_update(kCrc32Init, m, kPseudoLrhLen + masked_len + tail);
  state = crc32_update(state, headers.data() + rest + tail, headers.size() - rest - tail);
  state = crc32_update(state, payload.data(), payload.size());
  return crc32_final(state);
}

}  // namespace softmrc::wire
