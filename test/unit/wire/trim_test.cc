// Switch-side operations: trimming keeps the MRC headers and drops the
// payload; ECN marking sets CE without breaking the ICRC.
#include <gtest/gtest.h>

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
