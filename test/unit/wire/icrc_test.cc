// The ICRC: CRC-32 itself under every engine, the copy that computes it on
// the way, which fields it covers, and the zero-copy path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "wire/icrc.h"
#include "wire_test_util.h"

namespace softmrc::wire {
namespace {

using testing::build;
using testing::make_frame;
using testing::make_payload;
using testing::make_transport;

uint32_t trailer(const std::vector<uint8_t>& frame) {
  const uint8_t* p = frame.data() + frame.size() - kIcrcLen;
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// The ICRC of `frame` recomputed from scratch after a change.
uint32_t recompute(const std::vector<uint8_t>& frame, EvMode mode) {
  const std::span<const uint8_t> all(frame);
  return packet_icrc(all.first(frame.size() - kIcrcLen), {}, mode);
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  constexpr std::string_view kCheck = "123456789";
  EXPECT_EQ(crc32({reinterpret_cast<const uint8_t*>(kCheck.data()), kCheck.size()}), 0xcbf43926u);
  EXPECT_EQ(crc32({}), 0u);
}

TEST(Crc32, IncrementalEqualsOneShotAtEverySplit) {
  const auto data = make_payload(300);
  const uint32_t whole = crc32(data);
  for (size_t split = 0; split <= data.size(); ++split) {
    uint32_t s = crc32_update(kCrc32Init, data.data(), split);
    s = crc32_update(s, data.data() + split, data.size() - split);
    ASSERT_EQ(crc32_final(s), whole) << split;
  }
}

// Bit at a time, straight from the definition: the reference every engine
// must match.
uint32_t crc32_bitwise_update(uint32_t c, const uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
  }
  return c;
}

uint32_t crc32_bitwise(const uint8_t* p, size_t len) {
  return ~crc32_bitwise_update(0xffffffff, p, len);
}

// Randomised tests draw from SOFTMRC_TEST_SEED if it is set, else from a
// fresh seed; a failure prints the seed that reproduces it.
uint64_t test_seed() {
  if (const char* s = std::getenv("SOFTMRC_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  return std::random_device{}();
}

std::string seed_note(uint64_t seed) {
  return "SOFTMRC_TEST_SEED=" + std::to_string(seed);
}

// Lengths that reach every path of the engines: under 16 bytes, the short
// fold (up to 207), the 128-bit and 512-bit lanes and their remainders,
// now and then a jumbo payload.
size_t random_length(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return rng() % 220;
    case 1:
      return rng() % 600;
    case 2:
      return rng() % 2100;
    default:
      return 8000 + rng() % 1100;
  }
}

// A payload length `op` may carry: none on a control packet; on data, any
// up to kMaxPayload, and at least a byte but on a last packet.
uint32_t random_payload_len(Opcode op, std::mt19937_64& rng) {
  if (!is_data(op)) return 0;
  const auto len = static_cast<uint32_t>(std::min<size_t>(random_length(rng), kMaxPayload));
  return len == 0 && !is_last(op) ? 1 : len;
}

const char* engine_name(CrcEngine e) {
  switch (e) {
    case CrcEngine::kTables:
      return "tables";
    case CrcEngine::kClmul:
      return "clmul";
    case CrcEngine::kVpclmul:
      return "vpclmul";
  }
  return "?";
}

// Every engine this CPU has; a test that selects one restores the best.
std::vector<CrcEngine> engines() {
  std::vector<CrcEngine> all;
  for (CrcEngine e : {CrcEngine::kTables, CrcEngine::kClmul, CrcEngine::kVpclmul})
    if (static_cast<int>(e) <= static_cast<int>(crc32_best_engine())) all.push_back(e);
  return all;
}

class EveryEngine : public ::testing::Test {
 protected:
  void TearDown() override { crc32_set_engine(crc32_best_engine()); }
  static void use(CrcEngine e) { ASSERT_EQ(crc32_set_engine(e), e); }
};

TEST_F(EveryEngine, CrcMatchesTheBitwiseDefinitionOnRandomLengthsAndAlignments) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> buf(9100 + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 1500; ++i) {
      const size_t len = random_length(rng);
      const size_t offset = rng() % 64;
      const uint32_t state = static_cast<uint32_t>(rng());
      ASSERT_EQ(crc32_update(state, buf.data() + offset, len),
                crc32_bitwise_update(state, buf.data() + offset, len))
          << engine_name(e) << " len " << len << " offset " << offset;
    }
  }
}

TEST_F(EveryEngine, CrcOfPiecesEqualsTheCrcOfTheWhole) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> buf(9100);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 300; ++i) {
      const size_t len = random_length(rng);
      const uint32_t whole = crc32({buf.data(), len});
      uint32_t s = kCrc32Init;
      for (size_t done = 0; done < len;) {
        const size_t piece = std::min(len - done, random_length(rng) % 300 + 1);
        s = crc32_update(s, buf.data() + done, piece);
        done += piece;
      }
      ASSERT_EQ(crc32_final(s), whole) << engine_name(e) << " len " << len;
    }
  }
}

// What a copy's destination buffer holds around the copy.
constexpr uint8_t kGuard = 0xa5;

// Random bytes to copy from, and a destination with room around any copy
// of up to 9100 bytes at an offset under 64.
struct CopyBuffers {
  explicit CopyBuffers(std::mt19937_64& rng) : src(9100 + 64), dst(9100 + 128) {
    for (auto& b : src) b = static_cast<uint8_t>(rng());
  }
  std::vector<uint8_t> src;
  std::vector<uint8_t> dst;
};

// That `dst` holds the `len` bytes of `src` at `to`, and kGuard elsewhere.
::testing::AssertionResult copied_alone(const std::vector<uint8_t>& dst, size_t to,
                                        const uint8_t* src, size_t len) {
  const auto is_guard = [](uint8_t b) { return b == kGuard; };
  if (std::memcmp(dst.data() + to, src, len) != 0)
    return ::testing::AssertionFailure() << "the copy differs";
  if (!std::all_of(dst.begin(), dst.begin() + static_cast<ptrdiff_t>(to), is_guard))
    return ::testing::AssertionFailure() << "wrote before dst";
  if (!std::all_of(dst.begin() + static_cast<ptrdiff_t>(to + len), dst.end(), is_guard))
    return ::testing::AssertionFailure() << "wrote past dst + len";
  return ::testing::AssertionSuccess();
}

TEST_F(EveryEngine, CrcCopyEqualsACopyThenACrc) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  auto [src, dst] = CopyBuffers(rng);
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 1000; ++i) {
      const size_t len = random_length(rng);
      const size_t from = rng() % 64;
      const size_t to = rng() % 64;
      const uint32_t state = static_cast<uint32_t>(rng());
      std::fill(dst.begin(), dst.end(), kGuard);
      const uint32_t got = crc32_copy(state, dst.data() + to, src.data() + from, len);
      ASSERT_EQ(got, crc32_bitwise_update(state, src.data() + from, len))
          << engine_name(e) << " len " << len << " from " << from << " to " << to;
      ASSERT_TRUE(copied_alone(dst, to, src.data() + from, len))
          << engine_name(e) << " len " << len << " from " << from << " to " << to;
    }
  }
}

TEST(Crc32, EveryLengthAndAlignmentMatchesTheBitwiseDefinition) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(9100);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len = 0; len <= 600; ++len) {
    for (size_t offset : {0, 1, 7, 13}) {
      ASSERT_EQ(crc32({buf.data() + offset, len}), crc32_bitwise(buf.data() + offset, len))
          << "len " << len << " offset " << offset;
    }
  }
  for (size_t len : {1024, 4096, 4099, 9000, 9099})
    ASSERT_EQ(crc32({buf.data() + 1, len}), crc32_bitwise(buf.data() + 1, len)) << len;
}

TEST(Icrc, ZeroCopyHeadersPlusPayloadEqualsTheContiguousTrailer) {
  for (EvMode mode : {EvMode::kUdp, EvMode::kStev, EvMode::kSrv6}) {
    const FrameSpec f = make_frame(IpVersion::kV6, mode, true, mode == EvMode::kSrv6);
    const Transport t = make_transport(Opcode::kWriteOnly, 4096);
    const auto payload = make_payload(4096);
    const auto frame = build(f, t, payload);
    const size_t hlen = header_len(f, t.opcode);
    EXPECT_EQ(packet_icrc(std::span<const uint8_t>(frame).first(hlen), payload, mode),
              trailer(frame));
  }
}

struct Change {
  const char* what;
  size_t offset;  // from the IPv6 header
  uint8_t xor_mask;
};

// IPv6 + UDP + BTH offsets (no VLAN): IPv6 at 14, UDP at 54, BTH at 62.
TEST(Icrc, VariantFieldsAreMasked) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kStev);
  const auto frame = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64));
  const uint32_t icrc = trailer(frame);
  for (const Change& c : {Change{"traffic class", 0, 0x0f}, Change{"flow label", 3, 0xff},
                          Change{"hop limit", 7, 0x01}, Change{"udp checksum", 46, 0xff},
                          Change{"bth resv8a", 52, 0x01}}) {
    auto changed = frame;
    changed[14 + c.offset] ^= c.xor_mask;
    EXPECT_EQ(recompute(changed, EvMode::kStev), icrc) << c.what;
  }
}

TEST(Icrc, InvariantFieldsAreCovered) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kUdp);
  const auto frame = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64));
  const uint32_t icrc = trailer(frame);
  for (const Change& c :
       {Change{"source address", 8, 1}, Change{"destination address", 24, 1},
        Change{"udp source port", 40, 1}, Change{"opcode", 48, 1}, Change{"dest qpn", 55, 1},
        Change{"psn", 59, 1}, Change{"path tag", 67, 1}, Change{"payload", 100, 1}}) {
    auto changed = frame;
    changed[14 + c.offset] ^= c.xor_mask;
    EXPECT_NE(recompute(changed, EvMode::kUdp), icrc) << c.what;
  }
}

TEST(Icrc, Ipv4TosTtlAndChecksumAreMasked) {
  const FrameSpec f = make_frame(IpVersion::kV4, EvMode::kUdp);
  const auto frame = build(f, make_transport(Opcode::kAck), {});
  const uint32_t icrc = trailer(frame);
  for (size_t off : {1, 8, 10, 11}) {
    auto changed = frame;
    changed[14 + off] ^= 0x5a;
    EXPECT_EQ(recompute(changed, EvMode::kUdp), icrc) << off;
  }
  auto id_changed = frame;
  id_changed[14 + 4] ^= 1;  // identification is not a variant field
  EXPECT_NE(recompute(id_changed, EvMode::kUdp), icrc);
}

TEST(Icrc, Srv6ForwardingMayRewriteTheDestinationAndSrh) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kSrv6, false, true);
  const auto frame = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64));
  const uint32_t icrc = trailer(frame);
  auto shifted = frame;
  // A uSID hop shifts the destination left by 16 bits; the end of the
  // container moves the SRH segment up and decrements segments_left.
  std::memmove(&shifted[14 + 24 + 6], &shifted[14 + 24 + 8], 8);
  shifted[14 + 40 + 3] = 0;
  shifted[14 + 40 + 8] ^= 0xff;
  EXPECT_EQ(recompute(shifted, EvMode::kSrv6), icrc);
  // Outside SRv6 mode the same change is corruption.
  EXPECT_NE(recompute(shifted, EvMode::kStev), icrc);
}

// The bits of each variant field of a built frame, as docs/wire-format.md
// lists them: (offset in the frame, mask of its bits).
std::vector<std::pair<size_t, uint8_t>> variant_bits(const std::vector<uint8_t>& frame,
                                                     const FrameSpec& f) {
  std::vector<std::pair<size_t, uint8_t>> bits;
  const auto ones = [&bits](size_t off, size_t n) {
    for (size_t i = 0; i < n; ++i) bits.emplace_back(off + i, 0xff);
  };
  const size_t ip = f.has_vlan ? 18 : 14;
  size_t udp = ip + 20;
  if (f.ip_version == IpVersion::kV4) {
    ones(ip + 1, 1);   // DSCP, ECN
    ones(ip + 8, 1);   // TTL
    ones(ip + 10, 2);  // header checksum
  } else {
    const bool srh = frame[ip + 6] == kIpProtoRouting;
    bits.emplace_back(ip, 0x0f);  // traffic class and flow label
    ones(ip + 1, 3);
    ones(ip + 7, 1);  // hop limit
    if (f.ev_mode == EvMode::kSrv6) ones(ip + 24, 16 + (srh ? 24 : 0));
    udp = ip + 40 + (srh ? 24 : 0);
  }
  ones(udp + 6, 2);      // UDP checksum
  ones(udp + 8 + 4, 1);  // BTH reserved byte
  return bits;
}

// The ICRC a byte at a time, as the document states it: eight bytes of
// ones, then the IP packet up to the ICRC with every variant bit set.
uint32_t reference_icrc(std::vector<uint8_t> frame, const FrameSpec& f) {
  for (const auto& [off, mask] : variant_bits(frame, f)) frame[off] |= mask;
  const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const size_t ip = f.has_vlan ? 18 : 14;
  const uint32_t c = crc32_bitwise_update(0xffffffff, lrh, sizeof(lrh));
  return ~crc32_bitwise_update(c, frame.data() + ip, frame.size() - ip - kIcrcLen);
}

struct Framing {
  IpVersion ip;
  EvMode mode;
  bool vlan;
  bool srh;
};

constexpr Framing kFramings[] = {
    {IpVersion::kV4, EvMode::kUdp, false, false}, {IpVersion::kV4, EvMode::kUdp, true, false},
    {IpVersion::kV6, EvMode::kUdp, false, false}, {IpVersion::kV6, EvMode::kStev, false, false},
    {IpVersion::kV6, EvMode::kStev, true, false}, {IpVersion::kV6, EvMode::kSrv6, false, false},
    {IpVersion::kV6, EvMode::kSrv6, false, true}, {IpVersion::kV6, EvMode::kSrv6, true, true},
};

// build_packet (headers, then the payload copied and folded in one pass),
// packet_icrc over separate headers and payload, and parse all agree with
// the reference, whatever the variant fields hold.
TEST_F(EveryEngine, IcrcMatchesTheDocumentedRuleForEveryFramingAndLength) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 400; ++i) {
      const Framing& fr = kFramings[rng() % std::size(kFramings)];
      const Opcode op = testing::kAllOpcodes[rng() % std::size(testing::kAllOpcodes)];
      const uint32_t len = random_payload_len(op, rng);
      std::vector<uint8_t> payload(len);
      for (auto& b : payload) b = static_cast<uint8_t>(rng());
      const FrameSpec f = make_frame(fr.ip, fr.mode, fr.vlan, fr.srh);
      const auto frame = build(f, make_transport(op, len), payload);
      ASSERT_FALSE(frame.empty());
      SCOPED_TRACE(std::string(engine_name(e)) + " " + opcode_name(op) + " framing " +
                   std::to_string(&fr - kFramings) + " payload " + std::to_string(len));
      const uint32_t want = reference_icrc(frame, f);
      ASSERT_EQ(trailer(frame), want);
      const size_t hlen = header_len(f, op);
      ASSERT_EQ(packet_icrc(std::span<const uint8_t>(frame).first(hlen), payload, fr.mode), want);
      ParseConfig cfg;
      cfg.ev_mode = fr.mode;
      PacketView v;
      ASSERT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);

      auto scribbled = frame;
      for (const auto& [off, mask] : variant_bits(frame, f))
        scribbled[off] ^= static_cast<uint8_t>(rng()) & mask;
      ASSERT_EQ(recompute(scribbled, fr.mode), want);
    }
  }
}

// Every layout and every covered length from 16 bytes to past the
// short-stream limit (each alignment of a stream's end to its blocks),
// headers alone and headers plus a payload, against the table engine; the
// bytes before the IP header and after the stream hold random bytes that
// must not count.
TEST_F(EveryEngine, IcrcOfShortStreamsMatchesTheTablesAtEveryLength) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> buf(18 + 260 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  struct Layout {
    IpVersion ip;
    bool srh;
    EvMode mode;
  };
  constexpr Layout kLayouts[] = {{IpVersion::kV4, false, EvMode::kUdp},
                                 {IpVersion::kV6, false, EvMode::kUdp},
                                 {IpVersion::kV6, false, EvMode::kSrv6},
                                 {IpVersion::kV6, true, EvMode::kUdp},
                                 {IpVersion::kV6, true, EvMode::kSrv6}};
  for (const Layout& l : kLayouts) {
    for (size_t l3 : {size_t{14}, size_t{18}}) {
      const IcrcLayout layout{l3, l.ip, l.srh, l.mode};
      for (size_t h = 16; h <= 260; ++h) {
        SCOPED_TRACE("layout " + std::to_string(&l - kLayouts) + " l3 " + std::to_string(l3) +
                     " covered " + std::to_string(h));
        const std::span<const uint8_t> frame(buf.data(), l3 + h);
        const size_t split = l3 + std::min<size_t>(h, 96);
        use(CrcEngine::kTables);
        const uint32_t want = icrc_of(layout, frame, {});
        ASSERT_EQ(icrc_of(layout, frame.first(split), frame.subspan(split)), want);
        for (CrcEngine e : engines()) {
          use(e);
          ASSERT_EQ(icrc_of(layout, frame, {}), want) << engine_name(e);
          ASSERT_EQ(icrc_of(layout, frame.first(split), frame.subspan(split)), want)
              << engine_name(e);
          std::vector<uint8_t> copy(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(split));
          copy.resize(l3 + h + 8);
          ASSERT_EQ(icrc_copy(layout, copy.data(), split, frame.subspan(split)), want)
              << engine_name(e);
        }
      }
    }
  }
}

// parse() with a deferred copy makes the copy whatever it finds (a good
// frame, a bad ICRC, a truncated frame, a trimmed one, no ICRC check), and
// finds what it finds without one. The copy touches no byte outside its
// destination.
TEST_F(EveryEngine, ParseMakesItsDeferredCopyWhateverTheResult) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  auto [src, dst] = CopyBuffers(rng);
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 600; ++i) {
      const Framing& fr = kFramings[rng() % std::size(kFramings)];
      const Opcode op = rng() % 2 ? Opcode::kWriteOnly : Opcode::kWriteMiddle;
      const auto len = static_cast<uint32_t>(std::min<size_t>(random_length(rng), kMaxPayload));
      auto frame = build(make_frame(fr.ip, fr.mode, fr.vlan, fr.srh),
                         make_transport(op, std::max<uint32_t>(len, 1)),
                         make_payload(std::max<uint32_t>(len, 1)));
      ASSERT_FALSE(frame.empty());
      ParseConfig cfg;
      cfg.ev_mode = fr.mode;
      const int variant = static_cast<int>(rng() % 5);
      if (variant == 1) frame.back() ^= 1;  // the ICRC
      if (variant == 2) frame.resize(frame.size() / 2);
      if (variant == 3) cfg.verify_icrc = false;
      if (variant == 4) {  // the frame's DSCP is the one that says trimmed
        PacketView v;
        ASSERT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);
        cfg.dscp.trimmed = v.dscp;
      }
      const size_t copy_len = random_length(rng);
      const size_t from = rng() % 64;
      const size_t to = rng() % 64;
      SCOPED_TRACE(std::string(engine_name(e)) + " variant " + std::to_string(variant) +
                   " payload " + std::to_string(len) + " copy " + std::to_string(copy_len) +
                   " from " + std::to_string(from) + " to " + std::to_string(to));
      std::fill(dst.begin(), dst.end(), kGuard);
      PacketView plain;
      PacketView copying;
      const ParseStatus want = parse(frame, cfg, &plain);
      ASSERT_EQ(parse(frame, cfg, &copying, {},
                      DeferredCopy{dst.data() + to, src.data() + from, copy_len}),
                want);
      ASSERT_EQ(copying.payload_len, plain.payload_len);
      ASSERT_EQ(copying.trimmed, plain.trimmed);
      ASSERT_TRUE(copied_alone(dst, to, src.data() + from, copy_len));
    }
  }
}

// The wide fold makes the copy in its 256-byte turns (what it is for), and
// leaves the rest, exactly, to its caller.
TEST_F(EveryEngine, WideFoldMakesMostOfADeferredCopy) {
  if (crc32_best_engine() != CrcEngine::kVpclmul) GTEST_SKIP() << "no VPCLMULQDQ";
  use(CrcEngine::kVpclmul);
  const auto frame = build(make_frame(IpVersion::kV6, EvMode::kUdp),
                           make_transport(Opcode::kWriteMiddle, 4096), make_payload(4096));
  const IcrcLayout layout{14, IpVersion::kV6, false, EvMode::kUdp};
  const std::span<const uint8_t> covered(frame.data(), frame.size() - kIcrcLen);
  const auto src = make_payload(4096 + 100);
  std::vector<uint8_t> dst(src.size());
  DeferredCopy side{dst.data(), src.data(), src.size()};
  ASSERT_EQ(icrc_of(layout, covered, {}, &side), icrc_of(layout, covered, {}));
  ASSERT_LT(side.len, 512u);
  ASSERT_EQ(side.len % 256, 100u);
  const size_t made = src.size() - side.len;
  EXPECT_EQ(side.src, src.data() + made);
  EXPECT_EQ(side.dst, dst.data() + made);
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), made));
}

// Moving a running CRC along by n bytes is feeding it n zeros, for every
// short length, random ones up to the table's end and a few past it.
TEST_F(EveryEngine, ShiftEqualsFeedingZeros) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> zeros(3 * kMaxShift, 0);
  for (CrcEngine e : engines()) {
    use(e);
    for (size_t n = 0; n <= kMaxShift; n += n < 80 ? 1 : 1 + rng() % 300) {
      const auto state = static_cast<uint32_t>(rng());
      ASSERT_EQ(crc32_shift(state, n), crc32_bitwise_update(state, zeros.data(), n))
          << engine_name(e) << " n " << n << " state " << state;
    }
    for (size_t n : {kMaxShift, kMaxShift + 1, 2 * kMaxShift + 3, 3 * kMaxShift})
      ASSERT_EQ(crc32_shift(0x12345678, n), crc32_bitwise_update(0x12345678, zeros.data(), n))
          << engine_name(e) << " n " << n;
  }
}

// A frame as a port that keeps the CRC hands it over: the IP packet, link
// padding up to the 60-byte minimum and now and then more (rarely
// kilobytes: a hostile frame), and the FCS of all of it.
struct FcsFrame {
  std::vector<uint8_t> bytes;  // what the FCS covers
  PortChecks checks;
};

FcsFrame with_fcs(std::vector<uint8_t> frame, std::mt19937_64& rng) {
  size_t pad = frame.size() < 60 ? 60 - frame.size() : 0;
  if (rng() % 4 == 0) pad += rng() % 24;
  if (rng() % 16 == 0) pad += rng() % 10000;
  for (size_t i = 0; i < pad; ++i) frame.push_back(static_cast<uint8_t>(rng()));
  FcsFrame f{std::move(frame), {}};
  f.checks.fcs_kept = true;
  f.checks.fcs = crc32(f.bytes);
  return f;
}

// The check through a kept FCS decides as the fold of the whole frame
// does: for every framing, opcode and length, for a frame untouched, with
// its TTL and UDP checksum rewritten (and its FCS recomputed, as the next
// hop does), and with a covered byte corrupted before the last hop's FCS (in a
// switch): refused. An FCS that is not the frame's (a port that did not
// keep it where DPDK says) falls back to the fold, which decides.
TEST_F(EveryEngine, AKeptFcsChecksTheIcrcAsAFoldOfTheWholeFrameDoes) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  int from_fcs = 0;
  for (CrcEngine e : engines()) {
    use(e);
    for (int i = 0; i < 300; ++i) {
      const Framing& fr = kFramings[rng() % std::size(kFramings)];
      const Opcode op = testing::kAllOpcodes[rng() % std::size(testing::kAllOpcodes)];
      const uint32_t len = random_payload_len(op, rng);
      const FrameSpec f = make_frame(fr.ip, fr.mode, fr.vlan, fr.srh);
      const auto built = build(f, make_transport(op, len), make_payload(len));
      ASSERT_FALSE(built.empty());
      SCOPED_TRACE(std::string(engine_name(e)) + " " + opcode_name(op) + " framing " +
                   std::to_string(&fr - kFramings) + " payload " + std::to_string(len));
      const size_t ip = fr.vlan ? 18 : 14;
      const size_t body = header_len(f, op) - transport_header_len(op) + sizeof(Bth) + sizeof(Mth);
      const bool long_body = built.size() - kIcrcLen - body >= kIcrcFromFcsMinBody;
      ParseConfig cfg;
      cfg.ev_mode = fr.mode;
      PacketView v;

      FcsFrame good = with_fcs(built, rng);
      ASSERT_EQ(parse(good.bytes, cfg, &v, good.checks), ParseStatus::kOk);
      EXPECT_EQ(v.icrc_check, long_body ? IcrcCheck::kFromFcs : IcrcCheck::kFolded);
      from_fcs += v.icrc_check == IcrcCheck::kFromFcs;

      // What every hop may rewrite: the TTL or hop limit, the UDP checksum.
      auto rewritten = built;
      const bool v4 = fr.ip == IpVersion::kV4;
      const size_t udp = ip + (v4 ? 20 : 40 + (fr.srh ? 24 : 0));
      rewritten[ip + (v4 ? 8 : 7)] = static_cast<uint8_t>(1 + rng() % 255);
      rewritten[udp + 6] = static_cast<uint8_t>(rng());
      rewritten[udp + 7] = static_cast<uint8_t>(rng());
      if (v4) {  // as a router would: the header checksum stays right
        put_be16(&rewritten[ip + 10], 0);
        put_be16(&rewritten[ip + 10], static_cast<uint16_t>(~ipv4_header_sum(&rewritten[ip])));
      }
      FcsFrame moved = with_fcs(rewritten, rng);
      ASSERT_EQ(parse(moved.bytes, cfg, &v, moved.checks), ParseStatus::kOk);

      // A covered byte: the BTH's opcode-independent fields on, ICRC included.
      auto corrupt = built;
      const size_t at = body - sizeof(Mth) + rng() % (built.size() - (body - sizeof(Mth)));
      corrupt[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      const FcsFrame bad = with_fcs(corrupt, rng);
      const IcrcLayout layout{ip, fr.ip, fr.srh, fr.mode};
      EXPECT_FALSE(
          icrc_matches_fcs(layout, bad.bytes, body, built.size() - kIcrcLen, bad.checks.fcs))
          << "corrupt byte " << at;
      if (at >= header_len(f, op)) {  // in the payload or the ICRC: only the ICRC catches it
        EXPECT_EQ(parse(bad.bytes, cfg, &v, bad.checks), ParseStatus::kBadIcrc) << "at " << at;
      }

      FcsFrame wrong_fcs = good;
      wrong_fcs.checks.fcs ^= static_cast<uint32_t>(1 + rng() % 0xffffffff);
      ASSERT_EQ(parse(wrong_fcs.bytes, cfg, &v, wrong_fcs.checks), ParseStatus::kOk);
      EXPECT_EQ(v.icrc_check, long_body ? IcrcCheck::kFcsWrong : IcrcCheck::kFolded);
    }
  }
  EXPECT_GT(from_fcs, 0);
}

// Offsets that do not fit the frame are refused, not read past.
TEST(Icrc, AnFcsCheckRefusesOffsetsOutsideTheFrame) {
  const auto frame = build(make_frame(IpVersion::kV6, EvMode::kUdp),
                           make_transport(Opcode::kWriteMiddle, 1024), make_payload(1024));
  const IcrcLayout layout{14, IpVersion::kV6, false, EvMode::kUdp};
  const uint32_t fcs = crc32(frame);
  const size_t body = 14 + 40 + 8 + sizeof(Bth) + sizeof(Mth);
  const size_t icrc = frame.size() - kIcrcLen;
  EXPECT_TRUE(icrc_matches_fcs(layout, frame, body, icrc, fcs));
  EXPECT_FALSE(icrc_matches_fcs(layout, frame, body, icrc + 1, fcs));
  EXPECT_FALSE(icrc_matches_fcs(layout, frame, icrc + 1, icrc, fcs));
  EXPECT_FALSE(icrc_matches_fcs(layout, std::span(frame).first(icrc + 3), body, icrc, fcs));
}

}  // namespace
}  // namespace softmrc::wire
