// The framer's addressing (app/softmrcd/framer.h): the frames it builds
// carry the plane's VLAN tag and priority, and a received frame is ours
// only with the plane's VLAN (none, or a priority tag, on an untagged
// plane) and IP. Frames are checked byte by byte and by parsing them.
#include "softmrcd/framer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <string>
#include <vector>

#include "eal_environment.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {
namespace {

test::EalEnvironment* const kEal = test::add_eal("smrcd-framer-test", 1023, 0, 2048);

// Endpoint a: plane 0 on VLAN 100 with priority 5, plane 1 untagged.
constexpr const char* kConfig = R"(
path_mtu: 1024
endpoints:
  - name: a
    planes:
      - {port: net_null0, mac: "02:00:00:00:00:0a", ip: "fd00::a", vlan: 100, vlan_pcp: 5}
      - {port: net_null1, mac: "02:00:00:01:00:0a", ip: "fd01::a"}
peers:
  - name: b
    planes:
      - {mac: "02:00:00:00:00:0b", ip: "fd00::b"}
      - {mac: "02:00:00:01:00:0b", ip: "fd01::b"}
)";

// The frame `framer` builds of `p`, or empty if it dropped the packet
// (counted in `drops`).
std::vector<uint8_t> frame_one(Framer& framer, const engine::TxPacket& p, DropCounters* drops) {
  rte_mbuf* m = nullptr;
  bool extbuf = false;
  framer.frame(&p, 1, &m, &extbuf, drops);
  if (m == nullptr) return {};
  const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
  std::vector<uint8_t> out(d, d + m->data_len);
  rte_pktmbuf_free(m);
  return out;
}

class FramerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(parse_config(kConfig, "framer_test.yaml", &cfg_, &err)) << err;
    std::vector<wire::MacAddr> macs;
    for (const PlaneSpec& p : cfg_.endpoints[0].planes) macs.push_back(p.mac);
    ASSERT_TRUE(framer_.init(cfg_, 0, macs, kEal->pool, nullptr, &err)) << err;
  }
  void TearDown() override { framer_.close(); }

  // An ACK from a to b on `plane`, as the framer builds it.
  std::vector<uint8_t> frame_ack(uint8_t plane) {
    const wire::WireEv default_path{};  // a connectionless packet's: the plane's default
    engine::TxPacket p;
    p.peer = 1;
    p.plane = plane;
    p.wire_ev = &default_path;
    p.t.opcode = wire::Opcode::kAck;
    p.t.dest_qpn = 7;
    p.t.psn = 100;
    DropCounters drops;
    std::vector<uint8_t> out = frame_one(framer_, p, &drops);
    EXPECT_FALSE(out.empty());
    return out;
  }

  // A frame from b to `dst_ip` on a plane, tagged (`tci`) or not.
  Framer::Addressed addressed(uint8_t plane, const char* dst_ip, bool tagged, uint16_t tci) {
    wire::FrameSpec f;
    f.src_mac = cfg_.endpoints[1].planes[plane].mac;
    f.dst_mac = cfg_.endpoints[0].planes[plane].mac;
    std::memcpy(f.src_ip, cfg_.endpoints[1].planes[plane].ip, 16);
    EXPECT_EQ(inet_pton(AF_INET6, dst_ip, f.dst_ip), 1);
    f.has_vlan = tagged;
    f.vlan_tci = tci;
    wire::Transport t;
    t.opcode = wire::Opcode::kAck;
    t.dest_qpn = 7;
    std::vector<uint8_t> frame(wire::kMaxHeaderLen + wire::kIcrcLen);
    frame.resize(wire::build_packet(f, wire::WireEv{}, {48, wire::kEcnNotEct}, t, {}, frame));
    wire::PacketView v;
    EXPECT_EQ(wire::parse(frame, framer_.parse_config(), &v), wire::ParseStatus::kOk);
    return framer_.for_us(v, plane);
  }

  Config cfg_;
  Framer framer_;
};

TEST_F(FramerTest, APlaneWithAVlanTagsItsFramesWithItAndItsPriority) {
  const std::vector<uint8_t> f = frame_ack(0);
  ASSERT_GE(f.size(), 18u);
  EXPECT_EQ(f[12] << 8 | f[13], 0x8100);
  EXPECT_EQ(f[14] << 8 | f[15], 5 << 13 | 100);  // PCP 5, DEI 0, VLAN 100
  EXPECT_EQ(f[16] << 8 | f[17], 0x86dd);
  wire::PacketView v;
  ASSERT_EQ(wire::parse(f, framer_.parse_config(), &v), wire::ParseStatus::kOk);
  EXPECT_TRUE(v.has_vlan);
  EXPECT_EQ(v.t.opcode, wire::Opcode::kAck);
}

// A packet for a peer or plane the framer has no addresses for (the
// endpoint itself, a peer index past the configured ones, a plane it does
// not have) is dropped and counted in tx_no_peer, taking no mbuf with it.
TEST_F(FramerTest, APacketForNoConfiguredPeerOrPlaneIsDroppedAndCounted) {
  const unsigned free_before = rte_mempool_avail_count(kEal->pool);
  const wire::WireEv default_path{};
  DropCounters drops;
  for (const auto& [peer, plane] : {std::pair{0u, 0}, {2u, 0}, {1u, 2}}) {
    engine::TxPacket p;
    p.peer = peer;
    p.plane = static_cast<uint8_t>(plane);
    p.wire_ev = &default_path;
    p.t.opcode = wire::Opcode::kAck;
    EXPECT_TRUE(frame_one(framer_, p, &drops).empty()) << "peer " << peer << " plane " << plane;
  }
  EXPECT_EQ(drops.other[size_t(Drop::kTxNoPeer)], 3u);
  EXPECT_EQ(rte_mempool_avail_count(kEal->pool), free_before);
  EXPECT_FALSE(frame_ack(1).empty()) << "the configured peer's frames still go";
}

TEST_F(FramerTest, AnUntaggedPlaneSendsUntaggedFrames) {
  const std::vector<uint8_t> f = frame_ack(1);
  ASSERT_GE(f.size(), 14u);
  EXPECT_EQ(f[12] << 8 | f[13], 0x86dd);
  EXPECT_EQ(f.size(), frame_ack(0).size() - 4);
}

TEST_F(FramerTest, ATaggedPlaneTakesOnlyItsVlan) {
  EXPECT_EQ(addressed(0, "fd00::a", true, 5 << 13 | 100), Framer::Addressed::kUs);
  EXPECT_EQ(addressed(0, "fd00::a", true, 100), Framer::Addressed::kUs);  // any priority
  EXPECT_EQ(addressed(0, "fd00::a", true, 101), Framer::Addressed::kOtherVlan);
  EXPECT_EQ(addressed(0, "fd00::a", false, 0), Framer::Addressed::kOtherVlan);
  EXPECT_EQ(addressed(0, "fd00::a", true, 5 << 13), Framer::Addressed::kOtherVlan);
  EXPECT_EQ(addressed(0, "fd00::c", true, 100), Framer::Addressed::kOtherIp);
}

TEST_F(FramerTest, AnUntaggedPlaneTakesUntaggedAndPriorityTaggedFrames) {
  EXPECT_EQ(addressed(1, "fd01::a", false, 0), Framer::Addressed::kUs);
  EXPECT_EQ(addressed(1, "fd01::a", true, 3 << 13), Framer::Addressed::kUs);
  EXPECT_EQ(addressed(1, "fd01::a", true, 100), Framer::Addressed::kOtherVlan);
  EXPECT_EQ(addressed(1, "fd00::a", false, 0), Framer::Addressed::kOtherIp);
}

// SRv6 mode: a and b are uSID locators on one plane.
constexpr const char* kSrv6Config = R"(
path_mtu: 1024
endpoints:
  - name: a
    ev_mode: srv6
    planes:
      - {port: net_null0, mac: "02:00:00:00:00:0a", ip: "fcbb:bb00:1::"}
peers:
  - name: b
    planes:
      - {mac: "02:00:00:00:00:0b", ip: "fcbb:bb00:2::"}
)";

class Srv6FramerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(parse_config(kSrv6Config, "framer_test.yaml", &cfg_, &err)) << err;
    ASSERT_TRUE(framer_.init(cfg_, 0, {cfg_.endpoints[0].planes[0].mac}, kEal->pool, nullptr, &err))
        << err;
  }
  void TearDown() override { framer_.close(); }

  static void put(const char* text, uint8_t* out) { ASSERT_EQ(inet_pton(AF_INET6, text, out), 1); }

  // A 64-byte Write from a to b on the path `address` (+ `segment`): the
  // frame, or empty if the framer dropped it.
  std::vector<uint8_t> frame_write(const char* address, const char* segment) {
    wire::WireEv path;
    put(address, path.bytes);
    if (segment != nullptr) put(segment, path.bytes + 16);
    const std::vector<uint8_t> payload(64, 0x5a);
    engine::TxPacket p;
    p.peer = 1;
    p.ev = 0;
    p.wire_ev = &path;
    p.is_data = true;
    p.t.opcode = wire::Opcode::kWriteOnly;
    p.t.dest_qpn = 7;
    p.t.data.msg_len = 64;
    p.payload = payload.data();
    p.payload_len = 64;
    return frame_one(framer_, p, &drops_);
  }

  static std::string text(const uint8_t* addr) {
    char buf[INET6_ADDRSTRLEN];
    return inet_ntop(AF_INET6, addr, buf, sizeof(buf));
  }

  Config cfg_;
  Framer framer_;
  DropCounters drops_;
};

TEST_F(Srv6FramerTest, APathThatFitsTheAddressEndsAtTheDestinationWithoutAnSrh) {
  const std::vector<uint8_t> f = frame_write("fcbb:bb00:c001::", nullptr);
  wire::PacketView v;
  ASSERT_EQ(wire::parse(f, framer_.parse_config(), &v), wire::ParseStatus::kOk);
  EXPECT_FALSE(v.has_srh);
  EXPECT_EQ(text(v.dst_ip), "fcbb:bb00:c001:2::");
}

TEST_F(Srv6FramerTest, ALongerPathGoesOnInAnSrhThatEndsAtTheDestination) {
  const std::vector<uint8_t> f = frame_write("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7::");
  wire::PacketView v;
  ASSERT_EQ(wire::parse(f, framer_.parse_config(), &v), wire::ParseStatus::kOk);  // ICRC too
  ASSERT_TRUE(v.has_srh);
  EXPECT_EQ(text(v.dst_ip), "fcbb:bb00:1:2:3:4:5:6");
  EXPECT_EQ(text(v.srh_segment), "fcbb:bb00:7:2::");
  const size_t srh = sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr);
  EXPECT_EQ(f[sizeof(wire::EthHdr) + offsetof(wire::Ipv6Hdr, next_header)], wire::kIpProtoRouting);
  EXPECT_EQ(f[srh + offsetof(wire::SrhOneSegment, segments_left)], 1);
  EXPECT_EQ(v.payload_len, 64u);
  // A full address and no segment: the destination is the segment.
  const std::vector<uint8_t> six = frame_write("fcbb:bb00:1:2:3:4:5:6", nullptr);
  ASSERT_EQ(wire::parse(six, framer_.parse_config(), &v), wire::ParseStatus::kOk);
  ASSERT_TRUE(v.has_srh);
  EXPECT_EQ(text(v.srh_segment), "fcbb:bb00:2::");
  EXPECT_EQ(drops_.other[size_t(Drop::kTxBuild)], 0u);
}

TEST_F(Srv6FramerTest, APathWithNoSlotForTheDestinationIsDroppedAndCounted) {
  EXPECT_TRUE(frame_write("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7:8:9:a:b:c").empty());
  EXPECT_EQ(drops_.other[size_t(Drop::kTxBuild)], 1u);
}

// Payload in place: an empty attach pool fails the frame, counted, and
// gives back the TX pool's mbufs it took.
TEST(ExtbufFramer, AnEmptyAttachPoolLeaksNoTxMbuf) {
  Config cfg;
  std::string err;
  ASSERT_TRUE(
      parse_config(std::string(kConfig) + "tx_payload: extbuf\n", "framer_test.yaml", &cfg, &err))
      << err;
  rte_mempool* attach = rte_pktmbuf_pool_create("framer_x", 7, 0, 0, 0, SOCKET_ID_ANY);
  ASSERT_NE(attach, nullptr);
  std::vector<wire::MacAddr> macs;
  for (const PlaneSpec& p : cfg.endpoints[0].planes) macs.push_back(p.mac);
  Framer framer;
  ASSERT_TRUE(framer.init(cfg, 0, macs, kEal->pool, attach, &err)) << err;
  std::vector<uint8_t> region(4096, 0x5a);
  ASSERT_TRUE(framer.add_extbuf_region(region.data(), region.size(), RTE_BAD_IOVA, &err)) << err;
  const unsigned in_use = rte_mempool_in_use_count(kEal->pool);
  engine::TxPacket p;
  p.peer = 1;
  p.plane = 1;
  p.ev = 0;
  const wire::WireEv path{};
  p.wire_ev = &path;
  p.is_data = true;
  p.t.opcode = wire::Opcode::kWriteOnly;
  p.t.dest_qpn = 7;
  p.t.data.msg_len = 256;
  p.payload = region.data();
  p.payload_len = 256;
  std::vector<engine::TxPacket> tx(12, p);
  std::vector<rte_mbuf*> m(tx.size());
  bool extbuf[12];
  DropCounters drops;
  framer.frame(tx.data(), tx.size(), m.data(), extbuf, &drops);
  size_t framed = 0;
  for (rte_mbuf* f : m) {
    if (f == nullptr) continue;
    EXPECT_EQ(f->nb_segs, 3);
    ++framed;
    rte_pktmbuf_free(f);
  }
  EXPECT_EQ(framed, 7u);  // the attach pool's every mbuf
  EXPECT_EQ(drops.other[size_t(Drop::kTxNoMbuf)], 5u);
  framer.close();
  EXPECT_EQ(rte_mempool_in_use_count(kEal->pool), in_use);
  EXPECT_TRUE(framer.release_retired(region.data()));
  rte_mempool_free(attach);
}

TEST(Ipv4ChecksumVerdict, NoneIsAHeaderThePortVerified) {
  EXPECT_EQ(ipv4_checksum_verdict(RTE_MBUF_F_RX_IP_CKSUM_GOOD), wire::PortVerdict::kGood);
  EXPECT_EQ(ipv4_checksum_verdict(RTE_MBUF_F_RX_IP_CKSUM_NONE), wire::PortVerdict::kGood);
  EXPECT_EQ(ipv4_checksum_verdict(RTE_MBUF_F_RX_IP_CKSUM_BAD), wire::PortVerdict::kBad);
  EXPECT_EQ(ipv4_checksum_verdict(RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN), wire::PortVerdict::kUnchecked);
  EXPECT_EQ(ipv4_checksum_verdict(RTE_MBUF_F_RX_L4_CKSUM_BAD), wire::PortVerdict::kUnchecked);
}

}  // namespace
}  // namespace softmrc::softmrcd
