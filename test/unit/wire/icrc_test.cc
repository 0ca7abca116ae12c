// The ICRC: CRC-32 itself, which fields it covers, and the zero-copy path.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string_view>

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

// Bit at a time, straight from the definition: the reference both fast
// engines (folding and tables) must match.
uint32_t crc32_bitwise(const uint8_t* p, size_t len) {
  uint32_t c = 0xffffffff;
  for (size_t i = 0; i < len; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
  }
  return ~c;
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

}  // namespace
}  // namespace softmrc::wire
