// CRC-32 and the ICRC masking rule (docs/wire-format.md, "ICRC").
//
// Three engines compute the same function. On x86-64, carry-less multiply
// folding: VPCLMULQDQ over four 512-bit lanes (256 bytes a turn) where the
// CPU has AVX-512, else PCLMULQDQ over four 128-bit lanes. A packet waits
// for its CRC's latency, so what is left at the end (the lanes, the blocks
// after them) folds each straight onto the last block, the multiplies
// independent instead of a chain; a stream of at most 207 bytes (a
// header-only packet) folds every block that way (icrc_short(): without a
// partial last block, unrolled). A last partial block is shifted into
// place with PSHUFB, so any stream of 16 bytes or more is folded whole.
// Slicing-by-8 tables do the rest: streams under 16 bytes and CPUs without
// PCLMULQDQ. The folding constants are powers of x modulo the CRC-32
// polynomial, bit-reflected, as in Intel's white paper "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ".
//
// The ICRC's variant fields are never copied out to be masked: each
// layout has a constant mask of ones that is OR-ed into the header blocks
// as they are loaded. A payload that is copied anyway (build_packet()) is
// folded from the registers its copy goes through.
#include "wire/icrc.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <utility>

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

constexpr uint32_t crc_byte(uint32_t state, uint8_t b) {
  return (state >> 8) ^ kTables[0][(state ^ b) & 0xff];
}

// Four bytes from state 0; w is them as a little-endian machine loads them.
uint32_t crc_four(uint32_t w) {
  return kTables[3][w & 0xff] ^ kTables[2][(w >> 8) & 0xff] ^ kTables[1][(w >> 16) & 0xff] ^
         kTables[0][w >> 24];
}

// Eight bytes at once; lo and hi are bytes 0-3 and 4-7 as a little-endian
// machine loads them.
uint32_t crc_word(uint32_t state, uint32_t lo, uint32_t hi) {
  lo ^= state;
  return kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
         kTables[4][lo >> 24] ^ crc_four(hi);
}

uint32_t crc_tables(uint32_t state, const uint8_t* data, size_t len) {
  for (; len >= 8; data += 8, len -= 8) state = crc_word(state, get_le32(data), get_le32(data + 4));
  if (len >= 4) {  // an ICRC field: four lookups at once
    state = crc_four(state ^ get_le32(data));
    data += 4;
    len -= 4;
  }
  while (len--) state = crc_byte(state, *data++);
  return state;
}

// RoCEv2 feeds 8 bytes of ones in place of the InfiniBand LRH: every ICRC
// starts from the state they leave.
constexpr uint32_t kIcrcSeed = [] {
  uint32_t s = kCrc32Init;
  for (int i = 0; i < 8; ++i) s = crc_byte(s, 0xff);
  return s;
}();

// kIcrcSeedBefore[z]: the state that z zero bytes take to kIcrcSeed, so that
// an ICRC may start z bytes early, on zeros: up to 15 in icrc_short(), the
// IP header's offset in header_difference(). One zero byte maps s to
// (s >> 8) ^ T[s & 0xff], whose top byte names s & 0xff: the top bytes of
// the 256 table entries are all different.
constexpr std::array<uint32_t, 32> kIcrcSeedBefore = [] {
  std::array<uint32_t, 32> seed{};
  uint32_t t = kIcrcSeed;
  for (size_t z = 0; z < seed.size(); ++z) {
    seed[z] = t;
    uint32_t low = 0;
    while (kTables[0][low] >> 24 != t >> 24) ++low;
    t = (t ^ kTables[0][low]) << 8 | low;
  }
  return seed;
}();
static_assert(crc_byte(crc_byte(kIcrcSeedBefore[2], 0), 0) == kIcrcSeed);

// Ones over the variant fields of one header layout, from the IP header on
// (IPv6 + SRH + UDP + BTH at most: 84 bytes), zero up to kShortBlocks
// blocks, which the short-stream folds read whole. Twelve blocks hold a
// header-only packet, or one with a payload of up to 64-odd bytes.
constexpr size_t kShortBlocks = 12;
struct IcrcMask {
  // 16 zero bytes, then the mask: icrc_short() loads blocks that start
  // up to 15 bytes before the stream.
  std::array<uint8_t, 16 + 16 * kShortBlocks> padded{};
  size_t len = 0;     // up to and including the last variant byte
  size_t blocks = 0;  // 16-byte blocks that hold variant bytes
  constexpr const uint8_t* bytes() const { return padded.data() + 16; }
};

constexpr IcrcMask make_mask(bool v4, bool srh, bool srv6) {
  IcrcMask m;
  const auto ones = [&m](size_t off, size_t n) {
    for (size_t i = off; i < off + n; ++i) m.padded[16 + i] = 0xff;
  };
  size_t udp = 0;
  if (v4) {
    ones(offsetof(Ipv4Hdr, tos), 1);
    ones(offsetof(Ipv4Hdr, ttl), 1);
    ones(offsetof(Ipv4Hdr, checksum), 2);
    udp = sizeof(Ipv4Hdr);
  } else {
    m.padded[16] = 0x0f;  // traffic class and flow label, below the version
    ones(1, 3);
    ones(offsetof(Ipv6Hdr, hop_limit), 1);
    // uSID forwarding shifts the destination and consumes SRH segments.
    if (srv6) ones(offsetof(Ipv6Hdr, dst), 16 + (srh ? sizeof(SrhOneSegment) : 0));
    udp = sizeof(Ipv6Hdr) + (srh ? sizeof(SrhOneSegment) : 0);
  }
  ones(udp + offsetof(UdpHdr, checksum), 2);
  const size_t resv = udp + sizeof(UdpHdr) + offsetof(Bth, resv8a);
  ones(resv, 1);
  m.len = resv + 1;
  m.blocks = (m.len + 15) / 16;
  return m;
}

// IPv4; then IPv6 by [has SRH][SRv6 mode].
constexpr IcrcMask kMasks[5] = {
    make_mask(true, false, false), make_mask(false, false, false), make_mask(false, false, true),
    make_mask(false, true, false), make_mask(false, true, true),
};
constexpr IcrcMask kNoMask{};

const IcrcMask& mask_of(const IcrcLayout& layout) {
  if (layout.ip_version == IpVersion::kV4) return kMasks[0];
  return kMasks[1 + (layout.has_srh ? 2 : 0) + (layout.ev_mode == EvMode::kSrv6 ? 1 : 0)];
}

uint32_t crc_masked_tables(uint32_t state, const uint8_t* p, size_t len, const IcrcMask& m) {
  const uint8_t* mask = m.bytes();
  size_t i = 0;
  for (; i + 8 <= std::min(len, m.len); i += 8)
    state = crc_word(state, get_le32(p + i) | get_le32(mask + i),
                     get_le32(p + i + 4) | get_le32(mask + i + 4));
  for (; i < std::min(len, m.len); ++i) state = crc_byte(state, p[i] | mask[i]);
  return crc_tables(state, p + i, len - i);
}

CrcEngine detect_engine() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1")) {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
      return CrcEngine::kVpclmul;
    return CrcEngine::kClmul;
  }
#endif
  return CrcEngine::kTables;
}

// Before this file's initialisers run (another file's static initialiser),
// both read as zero: kTables, which every CPU has.
const CrcEngine kBestEngine = detect_engine();
std::atomic<CrcEngine> g_engine{kBestEngine};

CrcEngine engine() {
  return g_engine.load(std::memory_order_relaxed);
}

// r (a remainder modulo P, the CRC-32 polynomial, bit b the coefficient of
// x^b) times x, modulo P.
constexpr uint64_t times_x(uint64_t r) {
  r <<= 1;
  return r >> 32 ? r ^ 0x104c11db7 : r;
}

// A remainder's 32 bits in the reflected order the CRC works in.
constexpr uint32_t reflect32(uint64_t r) {
  uint32_t reflected = 0;
  for (unsigned b = 0; b < 32; ++b) reflected |= uint32_t((r >> b) & 1) << (31 - b);
  return reflected;
}

#if defined(__x86_64__)
#define SOFTMRC_CLMUL __attribute__((target("pclmul,sse4.1")))
#define SOFTMRC_VPCLMUL __attribute__((target("pclmul,sse4.1,avx512f,vpclmulqdq")))

// reflect(x^n mod P) << 1: the multiplier that moves a reflected 32-bit
// remainder n bits further along the stream.
constexpr uint64_t fold_k(unsigned n) {
  uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) r = times_x(r);
  return uint64_t{reflect32(r)} << 1;
}

// Folding a 128-bit lane forward by d bits multiplies its low half by
// k(d + 32) and its high half by k(d - 32); as a vector, low half first.
struct alignas(16) FoldPair {
  uint64_t lo;
  uint64_t hi;
};
constexpr FoldPair fold_by(unsigned bits) {
  return {fold_k(bits + 32), fold_k(bits - 32)};
}
static_assert(fold_by(512).lo == 0x154442bd4 && fold_by(512).hi == 0x1c6e41596);  // Intel's k1, k2

// P itself, x^32 .. x^0 as bit j = x^(32 - j), as fold_k() lays out its
// multipliers.
constexpr uint64_t kPolyK = 0x1db710641;

// floor(x^e / P), its terms x^(e - 32) .. x^1 as bit j = x^(e - 32 - j):
// the Barrett constant but for its x^0 term, which adds nothing to a
// quotient that drops every term below x^64 (finish()).
constexpr uint64_t barrett_mu(unsigned e) {
  uint64_t r = 0, mu = 0;
  for (unsigned d = e + 1; d-- > 0;) {
    r = r << 1 | (d == e ? 1 : 0);
    if (r >> 32) {
      r ^= 0x104c11db7;
      if (d > 0) mu |= uint64_t{1} << (e - 32 - d);
    }
  }
  return mu;
}
static_assert(barrett_mu(64) == (0x1f7011641 & 0xffffffff));  // Intel's mu', bar its x^0
constexpr uint64_t kBarrettMu96 = barrett_mu(96);

constexpr FoldPair kFold128 = fold_by(128);
constexpr FoldPair kFold512 = fold_by(512);
constexpr FoldPair kFold2048 = fold_by(2048);

// kFoldBlocks[j] folds a block j blocks forward.
constexpr std::array<FoldPair, kShortBlocks> kFoldBlocks = [] {
  std::array<FoldPair, kShortBlocks> k{};
  for (unsigned j = 1; j < kShortBlocks; ++j) k[j] = fold_by(128 * j);
  return k;
}();

// kFoldLanes[j] folds a 512-bit lane j of its 64-byte blocks forward.
constexpr std::array<FoldPair, 7> kFoldLanes = [] {
  std::array<FoldPair, 7> k{};
  for (unsigned j = 1; j < k.size(); ++j) k[j] = fold_by(512 * j);
  return k;
}();

// The multipliers that fold a 512-bit lane's first three 128-bit lanes
// onto its fourth, and nothing for the fourth.
alignas(64) constexpr FoldPair kFoldOntoFourth[4] = {fold_by(384), fold_by(256), fold_by(128)};

// kFoldPastEndUp[kShortBlocks - N + i] folds block i of N whole blocks
// N - 1 - i blocks and 64 bits forward: past the stream's end, in the form
// past_end() makes. The distances go down along the array, so four blocks'
// multipliers are 64 bytes in a row (icrc_short_wide()); zeros follow, for
// the lanes after a stream's last block.
constexpr std::array<FoldPair, kShortBlocks + 4> kFoldPastEndUp = [] {
  std::array<FoldPair, kShortBlocks + 4> k{};
  for (unsigned t = 0; t < kShortBlocks; ++t) k[t] = fold_by(128 * (kShortBlocks - 1 - t) + 64);
  return k;
}();

// PSHUFB indices that shift a block by n bytes: 16 - n from kShift + n
// moves bytes up (towards the end of the stream), kShift + 16 + n down.
alignas(16) constexpr uint8_t kShift[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};

SOFTMRC_CLMUL inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

SOFTMRC_CLMUL inline void store128(uint8_t* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

SOFTMRC_CLMUL inline __m128i pair128(const FoldPair& k) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(&k));
}

// acc folded forward by the distance k encodes, plus next.
SOFTMRC_CLMUL inline __m128i fold128(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next);
}

// Where a fold has got to: the next input byte, the bytes left, and where
// the next copied byte goes (kCopy only). The folds work on local copies: a
// pointer kept in memory would be reloaded after every store through dst,
// which may alias it. `side`, if any, is an unrelated copy that the wide
// fold makes 256 bytes a turn while it lasts (DeferredCopy).
struct Stream {
  const uint8_t* p;
  size_t len;
  uint8_t* dst;
  DeferredCopy* side = nullptr;
};

// Folds the whole 16-byte blocks of the stream into x, which holds what
// came before, copying them to dst when kCopy; leaves len % 16 bytes.
template <bool kCopy>
SOFTMRC_CLMUL __m128i fold_blocks_clmul(__m128i x, Stream& s) {
  const uint8_t* p = s.p;
  size_t len = s.len;
  uint8_t* dst = s.dst;
  // What comes before x, folded onto the last whole block: the lanes, and
  // then the blocks left, each go straight there by its own distance, so
  // their multiplies are independent instead of a chain of up to six.
  __m128i before = _mm_setzero_si128();
  if (len >= 48) {  // x and the next three blocks are four lanes
    const __m128i k512 = pair128(kFold512);
    __m128i x2 = load128(p), x3 = load128(p + 16), x4 = load128(p + 32);
    if constexpr (kCopy) {
      store128(dst, x2);
      store128(dst + 16, x3);
      store128(dst + 32, x4);
      dst += 48;
    }
    p += 48;
    len -= 48;
    for (; len >= 64; p += 64, len -= 64) {
      const __m128i b1 = load128(p), b2 = load128(p + 16), b3 = load128(p + 32),
                    b4 = load128(p + 48);
      if constexpr (kCopy) {
        store128(dst, b1);
        store128(dst + 16, b2);
        store128(dst + 32, b3);
        store128(dst + 48, b4);
        dst += 64;
      }
      x = fold128(x, k512, b1);
      x2 = fold128(x2, k512, b2);
      x3 = fold128(x3, k512, b3);
      x4 = fold128(x4, k512, b4);
    }
    const size_t left = len / 16;
    before = fold128(x, pair128(kFoldBlocks[left + 3]),
                     fold128(x2, pair128(kFoldBlocks[left + 2]),
                             fold128(x3, pair128(kFoldBlocks[left + 1]), before)));
    x = x4;
  }
  for (size_t d = len / 16; d > 0; --d, p += 16, len -= 16) {
    const __m128i b = load128(p);
    if constexpr (kCopy) {
      store128(dst, b);
      dst += 16;
    }
    before = fold128(x, pair128(kFoldBlocks[d]), before);
    x = b;
  }
  s = {p, len, dst, s.side};
  return _mm_xor_si128(before, x);
}

SOFTMRC_VPCLMUL inline __m512i fold512(__m512i acc, __m512i k, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                   _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96);  // a^b^c
}

// k in each of the four 128-bit lanes. (The maskz forms: GCC 12's
// unmasked ones trip -Wuninitialized.)
SOFTMRC_VPCLMUL inline __m512i broadcast(const FoldPair& k) {
  return _mm512_maskz_broadcast_i32x4(0xffff, pair128(k));
}

// The XOR of v's four 128-bit lanes.
SOFTMRC_VPCLMUL inline __m128i xor_lanes(__m512i v) {
  const __m256i halves = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xf, v, 0),
                                          _mm512_maskz_extracti64x4_epi64(0xf, v, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
}

// 256 bytes of a side copy, if it has them: one turn's worth.
SOFTMRC_VPCLMUL inline void side_turn(DeferredCopy& side) {
  if (side.len < 256) return;
  const uint8_t* q = side.src;
  const __m512i d1 = _mm512_loadu_si512(q), d2 = _mm512_loadu_si512(q + 64),
                d3 = _mm512_loadu_si512(q + 128), d4 = _mm512_loadu_si512(q + 192);
  _mm512_storeu_si512(side.dst, d1);
  _mm512_storeu_si512(side.dst + 64, d2);
  _mm512_storeu_si512(side.dst + 128, d3);
  _mm512_storeu_si512(side.dst + 192, d4);
  side = {side.dst + 256, side.src + 256, side.len - 256};
}

// As fold_blocks_clmul, 256 bytes a turn; needs len >= 256 and leaves
// fewer than 64 bytes.
template <bool kCopy>
SOFTMRC_VPCLMUL __m128i fold_blocks_vpclmul(__m128i x, Stream& s) {
  const uint8_t* p = s.p;
  size_t len = s.len;
  uint8_t* dst = s.dst;
  const __m512i k2048 = broadcast(kFold2048);
  const __m128i b1 = load128(p), b2 = load128(p + 16), b3 = load128(p + 32);
  __m512i z1 = _mm512_castsi128_si512(x);  // x and the next three blocks are the first lane
  z1 = _mm512_inserti32x4(z1, b1, 1);
  z1 = _mm512_inserti32x4(z1, b2, 2);
  z1 = _mm512_inserti32x4(z1, b3, 3);
  __m512i z2 = _mm512_loadu_si512(p + 48), z3 = _mm512_loadu_si512(p + 112),
          z4 = _mm512_loadu_si512(p + 176);
  if constexpr (kCopy) {
    store128(dst, b1);
    store128(dst + 16, b2);
    store128(dst + 32, b3);
    _mm512_storeu_si512(dst + 48, z2);
    _mm512_storeu_si512(dst + 112, z3);
    _mm512_storeu_si512(dst + 176, z4);
    dst += 240;
  }
  p += 240;
  len -= 240;
  DeferredCopy side = s.side != nullptr ? *s.side : DeferredCopy{};
  side_turn(side);
  for (; len >= 256; p += 256, len -= 256) {
    const __m512i c1 = _mm512_loadu_si512(p), c2 = _mm512_loadu_si512(p + 64),
                  c3 = _mm512_loadu_si512(p + 128), c4 = _mm512_loadu_si512(p + 192);
    side_turn(side);
    if constexpr (kCopy) {
      _mm512_storeu_si512(dst, c1);
      _mm512_storeu_si512(dst + 64, c2);
      _mm512_storeu_si512(dst + 128, c3);
      _mm512_storeu_si512(dst + 192, c4);
      dst += 256;
    }
    z1 = fold512(z1, k2048, c1);
    z2 = fold512(z2, k2048, c2);
    z3 = fold512(z3, k2048, c3);
    z4 = fold512(z4, k2048, c4);
  }
  // The lanes, then the 64-byte blocks left, each folded straight onto the
  // last whole one; then its 128-bit lanes straight onto its fourth. The
  // multiplies are independent instead of a chain of up to nine.
  const size_t left = len / 64;
  __m512i before =
      fold512(z1, broadcast(kFoldLanes[left + 3]),
              fold512(z2, broadcast(kFoldLanes[left + 2]),
                      fold512(z3, broadcast(kFoldLanes[left + 1]), _mm512_setzero_si512())));
  __m512i last = z4;
  for (size_t d = left; d > 0; --d, p += 64, len -= 64) {
    const __m512i c = _mm512_loadu_si512(p);
    if constexpr (kCopy) {
      _mm512_storeu_si512(dst, c);
      dst += 64;
    }
    before = fold512(last, broadcast(kFoldLanes[d]), before);
    last = c;
  }
  const __m512i whole = _mm512_xor_si512(before, last);
  const __m512i fourth =
      fold512(whole, _mm512_load_si512(kFoldOntoFourth), _mm512_maskz_mov_epi64(0xc0, whole));
  x = xor_lanes(fourth);
  if (s.side != nullptr) *s.side = side;
  s = {p, len, dst, s.side};
  return x;
}

template <bool kCopy>
SOFTMRC_CLMUL __m128i fold_blocks(bool wide, __m128i x, Stream& s) {
  if (wide && s.len >= 256) x = fold_blocks_vpclmul<kCopy>(x, s);
  return fold_blocks_clmul<kCopy>(x, s);
}

// x holds a stream but its last rem bytes (1..15); last16 are the stream's
// last 16 bytes. The rem bytes join the top of x into one whole block, and
// what x shifts out is folded over it.
SOFTMRC_CLMUL __m128i fold_tail(__m128i x, const uint8_t* last16, size_t rem) {
  const __m128i spill = _mm_shuffle_epi8(x, load128(kShift + rem));
  const __m128i keep = load128(kShift + 16 + rem);
  const __m128i next = _mm_blendv_epi8(_mm_shuffle_epi8(x, keep), load128(last16), keep);
  return fold128(spill, pair128(kFold128), next);
}

// A lane moved 64 bits on: its first half folded onto the second. What it
// held times x^64 comes out in the 96 bits finish() takes.
SOFTMRC_CLMUL __m128i past_end(__m128i x) {
  return _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, pair128(kFold128), 0x10));
}

// u is U, bit m the coefficient of x^(95 - m), U the stream times x^32
// (past_end()); returns U mod P, the CRC's state, by Barrett reduction in
// two dependent multiplies: the quotient q = floor(U / x^32) * mu / x^64,
// mu = floor(x^96 / P), then U - q * P, whose last 32 bits are the state.
SOFTMRC_CLMUL uint32_t finish(__m128i u) {
  const __m128i mu_poly = _mm_set_epi64x(kPolyK, kBarrettMu96);
  const __m128i q = _mm_clmulepi64_si128(u, mu_poly, 0x00);
  const __m128i qp = _mm_clmulepi64_si128(q, mu_poly, 0x10);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(u, qp), 2));
}

// A lane (bit m the coefficient of x^(127 - m)) to the state.
SOFTMRC_CLMUL uint32_t reduce(__m128i x) {
  return finish(past_end(x));
}

// Folds the stream (s.len >= 16) into 128 bits but for its last
// s.len % 16 bytes, which it leaves in s. A mask covers the first
// mask->blocks blocks, and then s.len >= 16 * mask->blocks.
SOFTMRC_CLMUL __m128i fold_stream(bool wide, uint32_t state, Stream& s, const IcrcMask* mask) {
  __m128i x = load128(s.p);
  if (mask != nullptr) x = _mm_or_si128(x, load128(mask->bytes()));
  x = _mm_xor_si128(x, _mm_cvtsi32_si128(static_cast<int>(state)));
  s.p += 16;
  s.len -= 16;
  if (mask != nullptr) {
    for (size_t i = 1; i < mask->blocks; ++i, s.p += 16, s.len -= 16)
      x = fold128(x, pair128(kFold128),
                  _mm_or_si128(load128(s.p), load128(mask->bytes() + 16 * i)));
  }
  return fold_blocks<false>(wide, x, s);
}

// The n blocks block(0) .. block(n - 1), 1 <= n <= kShortBlocks, `state`
// XORed into the first: every block is folded straight onto the last by
// its own distance, so the multiplies are independent instead of a chain.
// kPastEnd folds them, the last too, 64 bits further, into the form
// finish() takes: one multiply less on the way to the state.
// `block` is a lambda marked SOFTMRC_CLMUL: a lambda does not take its
// function's target, and without it every load is a call (a 128-byte CRC
// took 19.5 ns instead of 16.7, BM_Crc32Latency/128). Unrolled: whole
// for icrc_short()'s constant n, by up to 16 for the others.
template <bool kPastEnd, typename Block>
SOFTMRC_CLMUL __m128i fold_onto_last(uint32_t state, size_t n, Block block) {
  const __m128i first = _mm_cvtsi32_si128(static_cast<int>(state));
  __m128i x = _mm_setzero_si128();
#pragma GCC unroll 16
  for (size_t i = 0; i + 1 < n; ++i) {
    __m128i b = block(i);
    if (i == 0) b = _mm_xor_si128(b, first);
    const FoldPair& k = kPastEnd ? kFoldPastEndUp[kShortBlocks - n + i] : kFoldBlocks[n - 1 - i];
    x = fold128(b, pair128(k), x);
  }
  __m128i b = block(n - 1);
  if (n == 1) b = _mm_xor_si128(b, first);
  return _mm_xor_si128(x, kPastEnd ? past_end(b) : b);
}

// A stream of n whole blocks (a header-only packet), `mask` OR-ed over them.
SOFTMRC_CLMUL __m128i fold_short(uint32_t state, const uint8_t* p, size_t n, const IcrcMask& mask) {
  return fold_onto_last<false>(state, n, [&](size_t i) SOFTMRC_CLMUL {
    return _mm_or_si128(load128(p + 16 * i), load128(mask.bytes() + 16 * i));
  });
}

// The ICRC state after the h bytes at l3 (16 <= h <= 16 * kShortBlocks),
// `mask` OR-ed over them: a header-only packet, or one with a short
// payload. The stream is taken as z = 16 * N - h zero bytes and then the
// h bytes, so that it ends on a block boundary (no partial last block to
// shift in); the zeros start from the state that brings them to the seed.
// Each block is folded straight onto the last: N independent multiplies,
// unrolled for each N.
template <size_t N>
SOFTMRC_CLMUL uint32_t icrc_short(const uint8_t* mask, const uint8_t* l3, size_t h) {
  const size_t z = 16 * N - h;
  // Block 0 is the stream's first 16 bytes moved up by z, behind zeros;
  // the others are loaded z bytes early, as is every block of the mask.
  return finish(fold_onto_last<true>(kIcrcSeedBefore[z], N, [&](size_t i) SOFTMRC_CLMUL {
    const __m128i b =
        i == 0 ? _mm_shuffle_epi8(load128(l3), load128(kShift + 16 - z)) : load128(l3 + 16 * i - z);
    return _mm_or_si128(b, load128(mask + 16 * i - z));
  }));
}

// icrc_short() four blocks to a 512-bit multiply: a third of the
// instructions, the same depth. Block 0, which starts before l3, is folded
// alone; lanes past the stream's end are neither loaded (masked) nor
// multiplied (zero multipliers).
template <size_t N>
SOFTMRC_VPCLMUL uint32_t icrc_short_wide(const uint8_t* mask, const uint8_t* l3, size_t h) {
  const size_t z = 16 * N - h;
  const FoldPair* k = kFoldPastEndUp.data() + kShortBlocks - N;
  __m512i u = _mm512_setzero_si512();
  for (size_t g = 0; 4 * g + 1 < N; ++g) {  // blocks 4g + 1 .. 4g + 4
    const size_t blocks = std::min<size_t>(4, N - 1 - 4 * g);
    const __mmask8 in = static_cast<__mmask8>((1u << (2 * blocks)) - 1);
    const size_t at = 16 + 64 * g - z;
    const __m512i v = _mm512_or_si512(_mm512_maskz_loadu_epi64(in, l3 + at),
                                      _mm512_maskz_loadu_epi64(in, mask + at));
    u = fold512(v, _mm512_loadu_si512(k + 1 + 4 * g), u);
  }
  const __m128i b0 =
      _mm_or_si128(_mm_shuffle_epi8(load128(l3), load128(kShift + 16 - z)), load128(mask - z));
  const __m128i seed = _mm_cvtsi32_si128(static_cast<int>(kIcrcSeedBefore[z]));
  return finish(fold128(_mm_xor_si128(b0, seed), pair128(k[0]), xor_lanes(u)));
}

using IcrcShortFn = uint32_t (*)(const uint8_t*, const uint8_t*, size_t);
template <size_t... I>
constexpr std::array<IcrcShortFn, sizeof...(I)> icrc_short_table(bool wide,
                                                                 std::index_sequence<I...>) {
  return wide ? std::array<IcrcShortFn, sizeof...(I)>{icrc_short_wide<I + 1>...}
              : std::array<IcrcShortFn, sizeof...(I)>{icrc_short<I + 1>...};
}
// kIcrcShort[wide][N - 1] is icrc_short<N>, or icrc_short_wide<N>.
constexpr std::array<IcrcShortFn, kShortBlocks> kIcrcShort[2] = {
    icrc_short_table(false, std::make_index_sequence<kShortBlocks>{}),
    icrc_short_table(true, std::make_index_sequence<kShortBlocks>{})};

// Whether icrc_short() takes h bytes.
constexpr bool icrc_is_short(size_t h) {
  return h >= 16 && h <= 16 * kShortBlocks;
}

// The FCS's state after the n blocks at `frame` XOR the ICRC's after the
// same bytes from the IP header (at l3) on, masked by `m`, in one fold:
// the CRC is linear, so the two streams may be XORed where they are as
// long. The ICRC's is made as long by starting it l3 bytes early on zeros
// (from kIcrcSeedBefore[l3]); XORed, the streams are the frame up to the
// IP header, then a ^ (a | mask) = mask & ~a, and their states XOR too.
SOFTMRC_CLMUL uint32_t header_difference(const uint8_t* frame, size_t n, size_t l3,
                                         const IcrcMask& m) {
  // Ones from byte 16 on: the part of the block around l3 the ICRC covers.
  alignas(16) static constexpr uint8_t kZerosThenOnes[48] = {
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
      0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const auto block = [&](size_t i) SOFTMRC_CLMUL {
    const __m128i f = load128(frame + 16 * i);
    if (16 * i + 16 <= l3) return f;
    // The mask is loaded from up to 16 bytes before it, which are zero.
    const __m128i covered = _mm_or_si128(f, load128(m.bytes() + 16 * i - l3));
    if (16 * i >= l3) return _mm_xor_si128(f, covered);
    return _mm_xor_si128(f, _mm_and_si128(covered, load128(kZerosThenOnes + 16 + 16 * i - l3)));
  };
  return finish(fold_onto_last<true>(kCrc32Init ^ kIcrcSeedBefore[l3], n, block));
}

// A stream of len >= 16 bytes; with a mask, len >= 16 * mask->blocks.
// Makes what it can of `side` on the way (Stream).
SOFTMRC_CLMUL uint32_t crc_folded(bool wide, uint32_t state, const uint8_t* p, size_t len,
                                  const IcrcMask* mask, DeferredCopy* side = nullptr) {
  const uint8_t* const last16 = p + len - 16;
  __m128i x;
  if (len < 16 * (kShortBlocks + 1)) {
    const size_t n = len / 16;
    x = fold_short(state, p, n, mask != nullptr ? *mask : kNoMask);
    len -= 16 * n;
  } else {
    Stream s{p, len, nullptr, side};
    x = fold_stream(wide, state, s, mask);
    len = s.len;
  }
  if (len > 0) x = fold_tail(x, last16, len);
  return reduce(x);
}

// The stream x holds, then src[0, len), copied to dst on the way when
// kCopy. last16 are the last 16 bytes of the whole stream, read from the
// source: read back from dst they would wait for the copy's stores.
template <bool kCopy>
SOFTMRC_CLMUL uint32_t crc_continued(bool wide, __m128i x, uint8_t* dst, const uint8_t* src,
                                     size_t len, const uint8_t* last16,
                                     DeferredCopy* side = nullptr) {
  Stream s{src, len, dst, side};
  x = fold_blocks<kCopy>(wide, x, s);
  if (s.len > 0) {
    if constexpr (kCopy) std::memcpy(s.dst, s.p, s.len);
    x = fold_tail(x, last16, s.len);
  }
  return reduce(x);
}

// The ICRC of h bytes of headers from l3 (h >= 16 * m.blocks), then a
// payload of len >= 16 bytes at src, copied to dst when kCopy. The headers
// fold whole, their last partial block shifted in, and the payload streams
// on from there.
template <bool kCopy>
SOFTMRC_CLMUL uint32_t icrc_folded(bool wide, const IcrcMask& m, const uint8_t* l3, size_t h,
                                   uint8_t* dst, const uint8_t* src, size_t len,
                                   DeferredCopy* side = nullptr) {
  Stream headers{l3, h, nullptr};
  __m128i x = fold_stream(wide, kIcrcSeed, headers, &m);
  if (headers.len > 0) x = fold_tail(x, l3 + h - 16, headers.len);
  return crc32_final(crc_continued<kCopy>(wide, x, dst, src, len, src + len - 16, side));
}

SOFTMRC_CLMUL __m128i copy_first_block(uint32_t state, uint8_t* dst, const uint8_t* src) {
  const __m128i b = load128(src);
  store128(dst, b);
  return _mm_xor_si128(b, _mm_cvtsi32_si128(static_cast<int>(state)));
}
#endif

uint32_t crc_masked(uint32_t state, const uint8_t* p, size_t len, const IcrcMask& m,
                    DeferredCopy* side) {
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && len >= 16 * m.blocks)
    return crc_folded(e == CrcEngine::kVpclmul, state, p, len, &m, side);
#endif
  return crc_masked_tables(state, p, len, m);
}

// The ICRC state after the len bytes at l3 (from the IP header on), taken
// from the seed with `m` OR-ed over them: a header-only packet, or headers
// and a short payload in one stream.
uint32_t icrc_masked(const IcrcMask& m, const uint8_t* l3, size_t len,
                     DeferredCopy* side = nullptr) {
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && icrc_is_short(len))
    return kIcrcShort[e == CrcEngine::kVpclmul][(len + 15) / 16 - 1](m.bytes(), l3, len);
#endif
  return crc_masked(kIcrcSeed, l3, len, m, side);
}

// kShiftBy[n] (n >= 4): reflect(x^(8n - 32) mod P). A remainder s times it,
// carry-less, is 64 bits that the tables turn into s x^(8n) mod P: they
// fold eight bytes from state 0, which multiplies them by x^32.
constexpr std::array<uint32_t, kMaxShift + 1> kShiftBy = [] {
  std::array<uint32_t, kMaxShift + 1> k{};
  uint64_t r = 1;  // x^0, for n = 4
  for (size_t n = 4; n <= kMaxShift; ++n) {
    k[n] = reflect32(r);
    for (int i = 0; i < 8; ++i) r = times_x(r);
  }
  return k;
}();

#if defined(__x86_64__)
SOFTMRC_CLMUL uint64_t clmul_x86(uint32_t a, uint64_t b) {
  return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_clmulepi64_si128(
      _mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi64_si128(static_cast<long long>(b)), 0)));
}
#endif

// a times b, carry-less; b has at most 33 bits.
uint64_t clmul(uint32_t a, uint64_t b) {
#if defined(__x86_64__)
  if (engine() != CrcEngine::kTables) return clmul_x86(a, b);
#endif
  uint64_t r = 0;
  for (unsigned i = 0; i < 32; ++i) r ^= (uint64_t{0} - ((a >> i) & 1)) & (b << i);
  return r;
}

}  // namespace

CrcEngine crc32_engine() {
  return engine();
}

CrcEngine crc32_best_engine() {
  return kBestEngine;
}

CrcEngine crc32_set_engine(CrcEngine e) {
  if (static_cast<uint8_t>(e) <= static_cast<uint8_t>(kBestEngine))
    g_engine.store(e, std::memory_order_relaxed);
  return engine();
}

uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len) {
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && len >= 16)
    return crc_folded(e == CrcEngine::kVpclmul, state, data, len, nullptr);
#endif
  return crc_tables(state, data, len);
}

uint32_t crc32(std::span<const uint8_t> data) {
  return crc32_final(crc32_update(kCrc32Init, data.data(), data.size()));
}

uint32_t crc32_copy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t len) {
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && len >= 16) {
    const __m128i x = copy_first_block(state, dst, src);
    return crc_continued<true>(e == CrcEngine::kVpclmul, x, dst + 16, src + 16, len - 16,
                               src + len - 16);
  }
#endif
  if (len > 0) std::memcpy(dst, src, len);
  return crc_tables(state, src, len);
}

uint32_t crc32_shift(uint32_t state, size_t len) {
  for (; len > kMaxShift; len -= kMaxShift) state = crc32_shift(state, kMaxShift);
  if (len < 4) {
    while (len--) state = crc_byte(state, 0);
    return state;
  }
  // The reflected product, one bit short of 64: << 1 aligns it.
  const uint64_t p = clmul(state, uint64_t{kShiftBy[len]} << 1);
  return crc_word(0, static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32));
}

bool icrc_matches_fcs(const IcrcLayout& layout, std::span<const uint8_t> frame, size_t body_offset,
                      size_t icrc_offset, uint32_t fcs) {
  if (body_offset > icrc_offset || icrc_offset > frame.size() ||
      frame.size() - icrc_offset < kIcrcLen)
    return false;
  const uint8_t* p = frame.data();
  // Both CRCs run over the body from different states, the FCS's from its
  // fold of the Ethernet header on, the ICRC's from its fold of the masked
  // headers: the body adds the same to both, so their states differ after
  // it as before it, moved along by its length. The FCS's state at the
  // frame's end is then the ICRC's at the body's end (the claimed ICRC)
  // taken over what follows the body, plus that difference moved over it
  // all. The claim's part does not wait for the header folds.
  uint32_t difference;
#if defined(__x86_64__)
  // The body may start later: on a block boundary, both folds of the
  // headers are one of whole blocks.
  const size_t split = (body_offset + 15) / 16 * 16;
  if (engine() != CrcEngine::kTables && split <= icrc_offset && split <= 16 * kShortBlocks &&
      layout.l3_offset < kIcrcSeedBefore.size()) {
    difference = header_difference(p, split / 16, layout.l3_offset, mask_of(layout));
    body_offset = split;
  } else
#endif
  {
    difference =
        crc32_update(kCrc32Init, p, body_offset) ^ ~icrc_of(layout, frame.first(body_offset), {});
  }
  const uint32_t claimed = ~get_be32(p + icrc_offset);
  const uint32_t claim_at_end = crc32_update(claimed, p + icrc_offset, frame.size() - icrc_offset);
  return crc32_final(claim_at_end ^ crc32_shift(difference, frame.size() - body_offset)) == fcs;
}

uint32_t icrc_of(const IcrcLayout& layout, std::span<const uint8_t> headers,
                 std::span<const uint8_t> payload, DeferredCopy* side) {
  const IcrcMask& m = mask_of(layout);
  const uint8_t* l3 = headers.data() + layout.l3_offset;
  const size_t h = headers.size() - layout.l3_offset;
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && h >= 16 * m.blocks && payload.size() >= 16)
    return icrc_folded<false>(e == CrcEngine::kVpclmul, m, l3, h, nullptr, payload.data(),
                              payload.size(), side);
#endif
  uint32_t state = icrc_masked(m, l3, h, side);
  if (!payload.empty()) state = crc32_update(state, payload.data(), payload.size());
  return crc32_final(state);
}

uint32_t icrc_copy(const IcrcLayout& layout, uint8_t* frame, size_t hlen,
                   std::span<const uint8_t> payload) {
  const IcrcMask& m = mask_of(layout);
  uint8_t* const l3 = frame + layout.l3_offset;
  const size_t h = hlen - layout.l3_offset;
  const size_t len = payload.size();
#if defined(__x86_64__)
  const CrcEngine e = engine();
  if (e != CrcEngine::kTables && h >= 16 * m.blocks && len >= 16)
    return icrc_folded<true>(e == CrcEngine::kVpclmul, m, l3, h, frame + hlen, payload.data(), len);
#endif
  // A short payload joins the headers in one short stream.
  if (len > 0) std::memcpy(frame + hlen, payload.data(), len);
  return crc32_final(icrc_masked(m, l3, h + len));
}

}  // namespace softmrc::wire
