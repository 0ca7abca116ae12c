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
