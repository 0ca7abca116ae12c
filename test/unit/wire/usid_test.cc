// SRv6 uSID containers: a path plus the destination's node uSID, consumed
// hop by hop until the packet is addressed to the destination itself.
#include "wire/usid.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "wire/packet.h"
#include "wire_test_util.h"

namespace softmrc::wire {
namespace {

using Addr = std::array<uint8_t, 16>;

Addr addr(const char* text) {
  Addr a{};
  EXPECT_EQ(inet_pton(AF_INET6, text, a.data()), 1) << text;
  return a;
}

TEST(Usid, LocatorIsBlockAndOneNonZeroNodeUsid) {
  EXPECT_TRUE(usid_locator(addr("fcbb:bb00:2::").data()));
  EXPECT_EQ(usid_at(addr("fcbb:bb00:2::").data(), 0), 2);
  EXPECT_FALSE(usid_locator(addr("fcbb:bb00::").data()));      // no node uSID
  EXPECT_FALSE(usid_locator(addr("fcbb:bb00:2:3::").data()));  // a path, not a node
  EXPECT_FALSE(usid_locator(addr("fd00::1").data()));          // not uSID-shaped
}

TEST(Usid, AppendFillsTheFirstFreeSlot) {
  Addr a = addr("fcbb:bb00:c001::");
  ASSERT_TRUE(usid_append(a.data(), 0x0002));
  EXPECT_EQ(a, addr("fcbb:bb00:c001:2::"));
  Addr empty = addr("fcbb:bb00::");
  ASSERT_TRUE(usid_append(empty.data(), 7));
  EXPECT_EQ(empty, addr("fcbb:bb00:7::"));
  Addr five = addr("fcbb:bb00:1:2:3:4:5:0");
  ASSERT_TRUE(usid_append(five.data(), 9));
  EXPECT_EQ(five, addr("fcbb:bb00:1:2:3:4:5:9"));
  Addr full = five;
  EXPECT_FALSE(usid_append(full.data(), 10));
  EXPECT_EQ(full, five);
}

TEST(Usid, ShiftConsumesTheActiveUsidAndKeepsTheBlock) {
  Addr a = addr("fcbb:bb00:c001:c002:2::");
  EXPECT_EQ(usid_shift(a.data()), 0xc001);
  EXPECT_EQ(a, addr("fcbb:bb00:c002:2::"));
  EXPECT_EQ(usid_shift(a.data()), 0xc002);
  EXPECT_EQ(a, addr("fcbb:bb00:2::"));
  Addr full = addr("fcbb:bb00:1:2:3:4:5:6");
  EXPECT_EQ(usid_shift(full.data()), 1);
  EXPECT_EQ(full, addr("fcbb:bb00:2:3:4:5:6:0"));
  Addr end = addr("fcbb:bb00::");
  EXPECT_EQ(usid_shift(end.data()), 0);
  EXPECT_EQ(end, addr("fcbb:bb00::"));
}

// An EV of two containers: the address's, then the SRH segment's.
struct Path {
  uint8_t bytes[32] = {};
  Path(const char* address, const char* segment) {
    std::memcpy(bytes, addr(address).data(), 16);
    if (segment != nullptr) std::memcpy(bytes + 16, addr(segment).data(), 16);
  }
  Addr address() const { return container(0); }
  Addr segment() const { return container(16); }
  Addr container(size_t at) const {
    Addr a;
    std::memcpy(a.data(), bytes + at, 16);
    return a;
  }
};

TEST(Usid, RouteEndsAPathThatFitsTheAddressWithoutAnSrh) {
  const Addr dest = addr("fcbb:bb00:2::");
  Path p("fcbb:bb00:c001::", nullptr);
  EXPECT_EQ(usid_route(p.bytes, dest.data()), Srv6Route::kAddress);
  EXPECT_EQ(p.address(), addr("fcbb:bb00:c001:2::"));
  // A segment with a block but no uSID names no hop: it stays unsent.
  Path blocked("fcbb:bb00:c001::", "fcbb:bb00::");
  EXPECT_EQ(usid_route(blocked.bytes, dest.data()), Srv6Route::kAddress);
  EXPECT_EQ(blocked.address(), addr("fcbb:bb00:c001:2::"));
}

TEST(Usid, RouteEndsALongerPathInTheSrhSegment) {
  const Addr dest = addr("fcbb:bb00:2::");
  // Seven hops: six in the address, one in the segment.
  Path seven("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7::");
  EXPECT_EQ(usid_route(seven.bytes, dest.data()), Srv6Route::kWithSrh);
  EXPECT_EQ(seven.address(), addr("fcbb:bb00:1:2:3:4:5:6"));
  EXPECT_EQ(seven.segment(), addr("fcbb:bb00:7:2::"));
  // A full address and no segment: the destination gets one of its own,
  // under its block.
  Path six("fcbb:bb00:1:2:3:4:5:6", nullptr);
  EXPECT_EQ(usid_route(six.bytes, addr("fcbb:cc00:2::").data()), Srv6Route::kWithSrh);
  EXPECT_EQ(six.segment(), addr("fcbb:cc00:2::"));
  // The address's list may end early (End-of-Carrier): the segment still
  // follows it, so the destination ends the segment's list.
  Path gap("fcbb:bb00:1::", "fcbb:bb00:7::");
  EXPECT_EQ(usid_route(gap.bytes, dest.data()), Srv6Route::kWithSrh);
  EXPECT_EQ(gap.address(), addr("fcbb:bb00:1::"));
  EXPECT_EQ(gap.segment(), addr("fcbb:bb00:7:2::"));
}

TEST(Usid, RouteRefusesAPathWithNoSlotLeft) {
  Path full("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7:8:9:a:b:c");
  const Path before = full;
  EXPECT_EQ(usid_route(full.bytes, addr("fcbb:bb00:2::").data()), Srv6Route::kTooLong);
  EXPECT_EQ(std::memcmp(full.bytes, before.bytes, 32), 0);
}

TEST(Usid, DeliverConsumesEveryHopDownToTheDestination) {
  Addr a = addr("fcbb:bb00:c001:c002:2::");
  usid_deliver(a.data(), nullptr);
  EXPECT_EQ(a, addr("fcbb:bb00:2::"));
  // Already there: nothing moves.
  usid_deliver(a.data(), nullptr);
  EXPECT_EQ(a, addr("fcbb:bb00:2::"));
}

TEST(Usid, DeliverGoesOnIntoTheSrhSegment) {
  Path p("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7:2::");
  uint8_t srh[sizeof(SrhOneSegment)] = {};
  srh[offsetof(SrhOneSegment, hdr_ext_len)] = 2;
  srh[offsetof(SrhOneSegment, routing_type)] = kSrhRoutingType;
  srh[offsetof(SrhOneSegment, segments_left)] = 1;
  std::memcpy(srh + offsetof(SrhOneSegment, segment), p.bytes + 16, 16);
  Addr a = p.address();
  usid_deliver(a.data(), srh);
  EXPECT_EQ(a, addr("fcbb:bb00:2::"));
  EXPECT_EQ(srh[offsetof(SrhOneSegment, segments_left)], 0);
  // No segment left: the address alone is the rest of the path.
  Addr b = addr("fcbb:bb00:5:2::");
  usid_deliver(b.data(), srh);
  EXPECT_EQ(b, addr("fcbb:bb00:2::"));
}

// Framed, carried and delivered: the frame's SRH holds the segment, and
// after the switches the receiver parses it as its own.
TEST(Usid, AnSrhPathArrivesAddressedToTheDestination) {
  FrameSpec f = testing::make_frame(IpVersion::kV6, EvMode::kSrv6, false, true);
  Path p("fcbb:bb00:1:2:3:4:5:6", "fcbb:bb00:7::");
  ASSERT_EQ(usid_route(p.bytes, addr("fcbb:bb00:2::").data()), Srv6Route::kWithSrh);
  WireEv ev;
  std::memcpy(ev.bytes, p.bytes, 32);
  const Transport t = testing::make_transport(Opcode::kWriteOnly, 64);
  std::vector<uint8_t> frame(kMaxHeaderLen + 64 + kIcrcLen);
  const size_t n = build_packet(f, ev, {26, kEcnEct0}, t, testing::make_payload(64), frame);
  ASSERT_GT(n, 0u);
  frame.resize(n);
  const size_t l3 = sizeof(EthHdr);
  usid_deliver(frame.data() + l3 + offsetof(Ipv6Hdr, dst), frame.data() + l3 + sizeof(Ipv6Hdr));
  ParseConfig cfg;
  cfg.ev_mode = EvMode::kSrv6;
  PacketView v;
  ASSERT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);  // the ICRC too
  EXPECT_TRUE(v.has_srh);
  EXPECT_EQ(std::memcmp(v.dst_ip, addr("fcbb:bb00:2::").data(), 16), 0);
}

// What a switch does to the destination address leaves the ICRC valid: it
// is outside the ICRC in SRv6 mode.
TEST(Usid, ShiftedDestinationStillPassesTheIcrc) {
  FrameSpec f = testing::make_frame(IpVersion::kV6, EvMode::kSrv6, false, false);
  WireEv ev;
  const Addr path = addr("fcbb:bb00:c001:2::");
  std::memcpy(ev.bytes, path.data(), 16);
  const Transport t = testing::make_transport(Opcode::kWriteOnly, 256);
  std::vector<uint8_t> frame(kMaxHeaderLen + 256 + kIcrcLen);
  const size_t n = build_packet(f, ev, {26, kEcnEct0}, t, testing::make_payload(256), frame);
  ASSERT_GT(n, 0u);
  frame.resize(n);
  uint8_t* da = frame.data() + sizeof(EthHdr) + offsetof(Ipv6Hdr, dst);
  ASSERT_EQ(usid_shift(da), 0xc001);
  ParseConfig cfg;
  cfg.ev_mode = EvMode::kSrv6;
  PacketView v;
  ASSERT_EQ(parse(frame, cfg, &v), ParseStatus::kOk);
  EXPECT_EQ(std::memcmp(v.dst_ip, addr("fcbb:bb00:2::").data(), 16), 0);
}

}  // namespace
}  // namespace softmrc::wire
