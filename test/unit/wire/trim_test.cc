// Switch-side operations: trimming keeps the MRC headers and drops the
// payload; ECN marking sets CE without breaking the ICRC.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "wire/packet.h"
#include "wire_test_util.h"

namespace softmrc::wire {
namespace {

using testing::build;
using testing::make_frame;
using testing::make_payload;
using testing::make_transport;

class Trim : public ::testing::TestWithParam<std::tuple<IpVersion, bool, Opcode>> {};

TEST_P(Trim, KeepsEveryMrcHeaderAndReportsTrimmed) {
  const auto [ip, vlan, op] = GetParam();
  const FrameSpec f = make_frame(ip, EvMode::kUdp, vlan);
  const Transport t = make_transport(op, 2048);
  auto frame = build(f, t, make_payload(2048), {26, kEcnEct0});
  const size_t n = trim(frame, DscpConfig{});
  ASSERT_EQ(n, header_len(f, op));
  frame.resize(n);

  PacketView v;
  ASSERT_EQ(parse(frame, ParseConfig{}, &v), ParseStatus::kOk);
  EXPECT_TRUE(v.trimmed);
  EXPECT_EQ(v.dscp, DscpConfig{}.trimmed);
  EXPECT_EQ(v.ecn, kEcnEct0);
  EXPECT_EQ(v.payload, nullptr);
  EXPECT_EQ(v.payload_len, 0u);
  EXPECT_EQ(v.t.psn, t.psn);
  EXPECT_EQ(v.t.data.va, t.data.va);
  EXPECT_EQ(v.t.data.offset, t.data.offset);
  EXPECT_EQ(v.t.data.imm, t.data.imm);
}

INSTANTIATE_TEST_SUITE_P(
    DataPackets, Trim,
    ::testing::Combine(::testing::Values(IpVersion::kV4, IpVersion::kV6), ::testing::Bool(),
                       ::testing::Values(Opcode::kWriteFirst, Opcode::kWriteMiddle,
                                         Opcode::kWriteLastImm, Opcode::kWriteOnly)));

TEST(Trim, TrimmedPacketIsParsedWithoutReadingPastItsHeaders) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kUdp);
  auto frame = build(f, make_transport(Opcode::kWriteMiddle, 1024), make_payload(1024));
  const size_t n = trim(frame, DscpConfig{});
  // Exactly the headers, in a buffer of their own: ASan would catch any
  // read of payload or ICRC.
  std::vector<uint8_t> exact(frame.begin(), frame.begin() + static_cast<long>(n));
  PacketView v;
  ASSERT_EQ(parse(exact, ParseConfig{}, &v), ParseStatus::kOk);
  EXPECT_TRUE(v.trimmed);
}

TEST(Trim, OnlyTrimmableDataIsTrimmed) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kUdp);
  auto ack = build(f, make_transport(Opcode::kAck), {}, {26, kEcnEct0});
  EXPECT_EQ(trim(ack, DscpConfig{}), 0u);
  auto other_class = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64), {10, 0});
  EXPECT_EQ(trim(other_class, DscpConfig{}), 0u);
  auto once = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64));
  once.resize(trim(once, DscpConfig{}));
  EXPECT_EQ(trim(once, DscpConfig{}), 0u) << "a trimmed packet is not trimmed again";
  std::vector<uint8_t> garbage(100, 0xee);
  EXPECT_EQ(trim(garbage, DscpConfig{}), 0u);
}

TEST(Trim, TrimmedDscpOnAControlPacketIsABadField) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kUdp);
  auto ack = build(f, make_transport(Opcode::kAck), {}, {DscpConfig{}.trimmed, 0});
  PacketView v;
  EXPECT_EQ(parse(ack, ParseConfig{}, &v), ParseStatus::kBadField);
}

TEST(Trim, ConfiguredCodePointsAreHonoured) {
  DscpConfig dscp;
  dscp.trimmable = 8;
  dscp.trimmed = 9;
  const FrameSpec f = make_frame(IpVersion::kV4, EvMode::kUdp);
  auto frame = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64), {8, 0});
  frame.resize(trim(frame, dscp));
  ASSERT_FALSE(frame.empty());
  ParseConfig cfg;
  cfg.dscp = dscp;
  PacketView v;
  ASSERT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);
  EXPECT_TRUE(v.trimmed);
  EXPECT_EQ(v.dscp, 9);
}

TEST(MarkCe, SetsCeOnEcnCapablePacketsAndKeepsThemValid) {
  for (IpVersion ip : {IpVersion::kV4, IpVersion::kV6}) {
    const FrameSpec f = make_frame(ip, EvMode::kUdp, true);
    auto frame = build(f, make_transport(Opcode::kWriteOnly, 64), make_payload(64));
    ASSERT_TRUE(mark_ce(frame));
    PacketView v;
    ASSERT_EQ(parse(frame, ParseConfig{}, &v), ParseStatus::kOk);  // checksums still good
    EXPECT_EQ(v.ecn, kEcnCe);
    EXPECT_EQ(v.dscp, 26);
  }
}

// What a switch forwards is not always softmrcd's: an IPv4 header with
// options (IHL 6, Router Alert) keeps a checksum over all of it.
TEST(MarkCe, KeepsTheChecksumOfAnIpv4HeaderWithOptions) {
  std::vector<uint8_t> frame(sizeof(EthHdr) + 24 + sizeof(UdpHdr) + 100, 0);
  put_be16(frame.data() + offsetof(EthHdr, ether_type), kEtherTypeIpv4);
  uint8_t* ip = frame.data() + sizeof(EthHdr);
  ip[offsetof(Ipv4Hdr, version_ihl)] = 0x46;
  ip[offsetof(Ipv4Hdr, tos)] = 26 << 2 | kEcnEct0;
  put_be16(ip + offsetof(Ipv4Hdr, total_length), static_cast<uint16_t>(frame.size() - 14));
  ip[offsetof(Ipv4Hdr, ttl)] = 64;
  ip[offsetof(Ipv4Hdr, protocol)] = kIpProtoUdp;
  ip[12] = ip[16] = 10;
  ip[15] = 1;
  ip[19] = 2;
  put_be16(ip + 20, 0x9404);  // Router Alert
  // The one's-complement sum of all 12 words: 0xffff when the checksum is right.
  const auto sum = [ip] {
    uint32_t s = 0;
    for (size_t i = 0; i < 24; i += 2) s += get_be16(ip + i);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return s;
  };
  put_be16(ip + offsetof(Ipv4Hdr, checksum), static_cast<uint16_t>(~sum()));
  ASSERT_EQ(sum(), 0xffffu);
  ASSERT_TRUE(mark_ce(frame));
  EXPECT_EQ(ip[offsetof(Ipv4Hdr, tos)], 26 << 2 | kEcnCe);
  EXPECT_EQ(sum(), 0xffffu);
}

// The IPv4 header checksum from scratch: the complement of the sum of the
// header with the checksum field taken as zero.
uint16_t checksum_from_scratch(const uint8_t* ip) {
  std::array<uint8_t, sizeof(Ipv4Hdr)> h;
  std::memcpy(h.data(), ip, h.size());
  put_be16(h.data() + offsetof(Ipv4Hdr, checksum), 0);
  return static_cast<uint16_t>(~ipv4_header_sum(h.data()));
}

// Rewrites the header's identification so that its checksum becomes
// `target` (0..0xfffe): the values next to the wrap of the ones'-complement
// sum are where a switch's incremental update needs its second fold.
void steer_checksum(uint8_t* ip, uint16_t target) {
  put_be16(ip + offsetof(Ipv4Hdr, id), 0);
  put_be16(ip + offsetof(Ipv4Hdr, checksum), 0);
  const uint32_t s = ipv4_header_sum(ip);                // 1..0xffff
  const uint32_t want = static_cast<uint16_t>(~target);  // 1..0xffff
  put_be16(ip + offsetof(Ipv4Hdr, id),
           static_cast<uint16_t>(want >= s ? want - s : want + 0xffff - s));
  put_be16(ip + offsetof(Ipv4Hdr, checksum), checksum_from_scratch(ip));
}

// Whatever the header, trim() and mark_ce() leave the IPv4 checksum that a
// computation from scratch gives (seeded: WIRE_SEED=<n> replays one header).
TEST(MarkCe, TrimAndMarkKeepTheIpv4ChecksumOfRandomHeaders) {
  const char* one = std::getenv("WIRE_SEED");
  const uint64_t first = one ? std::strtoull(one, nullptr, 10) : 1;
  const uint64_t last = one ? first : 2000;
  for (uint64_t seed = first; seed <= last; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: WIRE_SEED=" + std::to_string(seed) +
                 ")");
    std::mt19937_64 rng(seed);
    FrameSpec f = make_frame(IpVersion::kV4, EvMode::kUdp, rng() % 2 == 0);
    for (int i = 0; i < 4; ++i) {
      f.src_ip[i] = static_cast<uint8_t>(rng());
      f.dst_ip[i] = static_cast<uint8_t>(rng());
    }
    f.ttl = static_cast<uint8_t>(1 + rng() % 255);
    const auto len = static_cast<uint32_t>(rng() % 4097);
    const uint8_t ecn = static_cast<uint8_t>(1 + rng() % 3);  // ECT(1), ECT(0) or CE
    const uint8_t dscp = rng() % 4 == 0 ? static_cast<uint8_t>(rng() % 64) : 26;
    auto frame = build(f, make_transport(Opcode::kWriteOnly, len), make_payload(len), {dscp, ecn});
    uint8_t* ip = frame.data() + (f.has_vlan ? 18 : 14);
    static constexpr uint16_t kTargets[] = {0, 1, 2, 3, 4, 5, 0xfffb, 0xfffe};
    steer_checksum(ip, rng() % 2 ? kTargets[rng() % 8] : static_cast<uint16_t>(rng() % 0xffff));
    ASSERT_EQ(ipv4_header_sum(ip), 0xffffu);
    const uint16_t before = get_be16(ip + offsetof(Ipv4Hdr, checksum));

    const auto op = rng() % 3;
    if (op != 1) {
      const size_t n = trim(frame, DscpConfig{});
      ASSERT_EQ(n != 0, dscp == DscpConfig{}.trimmable);
      if (n != 0) frame.resize(n);
      ip = frame.data() + (f.has_vlan ? 18 : 14);
    }
    if (op != 0) {
      ASSERT_TRUE(mark_ce(frame));
    }
    EXPECT_EQ(get_be16(ip + offsetof(Ipv4Hdr, checksum)), checksum_from_scratch(ip))
        << "checksum before " << before;
    EXPECT_EQ(ipv4_header_sum(ip), 0xffffu);
    ParseConfig cfg;
    cfg.verify_icrc = false;  // the steered identification is not in the ICRC
    PacketView v;
    EXPECT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);
  }
}

// ECT(0) marked CE adds 1 to the second word; with a checksum of 0 (the
// other words sum to 0xffff) the incremental sum is 0xffff + 0xffff + 1 =
// 0x1ffff, which takes two end-around-carry folds to become 1.
TEST(MarkCe, AnIncrementalSumOf0x1ffffIsFoldedTwice) {
  auto frame = build(make_frame(IpVersion::kV4, EvMode::kUdp),
                     make_transport(Opcode::kWriteOnly, 64), make_payload(64), {26, kEcnEct0});
  uint8_t* ip = frame.data() + 14;
  steer_checksum(ip, 0);
  ASSERT_EQ(get_be16(ip + offsetof(Ipv4Hdr, checksum)), 0u);
  ASSERT_TRUE(mark_ce(frame));
  EXPECT_EQ(get_be16(ip + offsetof(Ipv4Hdr, checksum)), 0xfffeu);
  EXPECT_EQ(ipv4_header_sum(ip), 0xffffu);
}

TEST(MarkCe, LeavesNotEctPacketsAlone) {
  const FrameSpec f = make_frame(IpVersion::kV6, EvMode::kUdp);
  auto frame = build(f, make_transport(Opcode::kAck), {}, {48, kEcnNotEct});
  const auto before = frame;
  EXPECT_FALSE(mark_ce(frame));
  EXPECT_EQ(frame, before);
  std::vector<uint8_t> tiny(5, 0);
  EXPECT_FALSE(mark_ce(tiny));
}

}  // namespace
}  // namespace softmrc::wire
