// The ethdev port driver on vdevs: net_null TX/RX smoke, a net_ring port
// that loops frames back byte for byte, link state changes seen by
// polling, and the refusals (unknown device, multi-segment TX on a PMD
// without it). One EAL for the whole binary (--no-huge, its own prefix).
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstring>
#include <string>

#include "eal_environment.h"
#include "port/ethdev/ethdev_port.h"

namespace softmrc::port {
namespace {

test::EalEnvironment* const kEal =
    test::add_eal("smrcd-port-test", 2047, 64, RTE_MBUF_DEFAULT_BUF_SIZE);

EthdevPortConfig small_port() {
  EthdevPortConfig c;
  c.rx_desc = 64;
  c.tx_desc = 64;
  c.rx_pool = kEal->pool;
  c.link_poll_us = 1;
  return c;
}

rte_mbuf* frame_with(uint8_t seed, uint16_t len) {
  rte_mbuf* m = rte_pktmbuf_alloc(kEal->pool);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
  for (uint16_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(seed + i);
  return m;
}

TEST(EthdevPort, NullPortSendsAndReceivesBursts) {
  uint16_t id = 0;
  std::string err;
  ASSERT_TRUE(EthdevPort::attach("net_null_smoke0,size=128", &id, &err)) << err;
  EthdevPort port;
  ASSERT_TRUE(port.open(id, small_port(), &err)) << err;
  ASSERT_TRUE(port.start(&err)) << err;
  EXPECT_EQ(port.driver(), "net_null");
  EXPECT_TRUE(port.link_up());

  rte_mbuf* tx[32];
  for (int i = 0; i < 32; ++i) tx[i] = frame_with(static_cast<uint8_t>(i), 100);
  EXPECT_EQ(port.tx_burst(tx, 32), 32);  // net_null frees what it sends

  rte_mbuf* rx[32];
  const uint16_t n = port.rx_burst(rx, 32);
  EXPECT_EQ(n, 32);
  for (uint16_t i = 0; i < n; ++i) EXPECT_EQ(rx[i]->pkt_len, 128u);
  rte_pktmbuf_free_bulk(rx, n);

  rte_eth_stats st;
  ASSERT_TRUE(port.stats(&st));
  EXPECT_EQ(st.opackets, 32u);
  EXPECT_EQ(st.ipackets, 32u);
  port.close();
}

TEST(EthdevPort, RingPortLoopsFramesBackUnchanged) {
  rte_ring* ring = rte_ring_create("port_test_loop", 256, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
  ASSERT_NE(ring, nullptr);
  const int id = rte_eth_from_ring(ring);  // one ring: what it sends, it receives
  ASSERT_GE(id, 0);
  EthdevPort port;
  std::string err;
  ASSERT_TRUE(port.open(static_cast<uint16_t>(id), small_port(), &err)) << err;
  ASSERT_TRUE(port.start(&err)) << err;

  rte_mbuf* tx[8];
  for (int i = 0; i < 8; ++i) tx[i] = frame_with(static_cast<uint8_t>(i * 7), 60 + i);
  ASSERT_EQ(port.tx_burst(tx, 8), 8);
  rte_mbuf* rx[8];
  ASSERT_EQ(port.rx_burst(rx, 8), 8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(rx[i]->pkt_len, 60u + i);
    const auto* p = rte_pktmbuf_mtod(rx[i], const uint8_t*);
    for (int b = 0; b < 60 + i; ++b) ASSERT_EQ(p[b], static_cast<uint8_t>(i * 7 + b));
  }
  rte_pktmbuf_free_bulk(rx, 8);
  port.close();
  rte_ring_free(ring);
}

TEST(EthdevPort, LinkDownAndUpAreSeenByPolling) {
  rte_ring* ring = rte_ring_create("port_test_link", 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
  ASSERT_NE(ring, nullptr);
  const int id = rte_eth_from_ring(ring);
  ASSERT_GE(id, 0);
  EthdevPort port;
  std::string err;
  ASSERT_TRUE(port.open(static_cast<uint16_t>(id), small_port(), &err)) << err;
  ASSERT_TRUE(port.start(&err)) << err;
  ASSERT_TRUE(port.link_up());
  EXPECT_FALSE(port.link_interrupt());  // net_ring has none: the driver polls

  ASSERT_TRUE(port.set_admin_up(false));
  // The poll period is 1 us: a poll a millisecond later must see the change.
  const uint64_t later = rte_rdtsc() + rte_get_tsc_hz() / 1000;
  EXPECT_TRUE(port.poll_link(later));
  EXPECT_FALSE(port.link_up());
  EXPECT_FALSE(port.poll_link(later + rte_get_tsc_hz() / 1000));  // no change, no report

  ASSERT_TRUE(port.set_admin_up(true));
  EXPECT_TRUE(port.poll_link(later + 2 * rte_get_tsc_hz() / 1000));
  EXPECT_TRUE(port.link_up());
  port.close();
  rte_ring_free(ring);
}

TEST(EthdevPort, UnknownDeviceIsRefusedWithItsName) {
  uint16_t id = 0;
  std::string err;
  EXPECT_FALSE(EthdevPort::attach("net_nosuchdriver0", &id, &err));
  EXPECT_NE(err.find("cannot probe 'net_nosuchdriver0'"), std::string::npos) << err;
}

TEST(EthdevPort, MultiSegmentTxIsRefusedWhereThePmdLacksIt) {
  uint16_t id = 0;
  std::string err;
  ASSERT_TRUE(EthdevPort::attach("net_null_noseg0", &id, &err)) << err;
  EXPECT_FALSE(EthdevPort::can_multi_seg(id));
  EthdevPortConfig c = small_port();
  c.tx_multi_seg = true;
  EthdevPort port;
  EXPECT_FALSE(port.open(id, c, &err));
  EXPECT_NE(err.find("cannot send multi-segment packets"), std::string::npos) << err;
}

// net_tap takes frames of at most 1522 bytes; rte_eth_dev_configure() would
// only say "Invalid argument".
TEST(EthdevPort, AnMtuAboveThePortsLargestFrameIsRefusedWithBothSizes) {
  uint16_t id = 0;
  std::string err;
  if (!EthdevPort::attach("net_tap_mtu0,iface=smrcmtu0", &id, &err))
    GTEST_SKIP() << "no tap device here: " << err;
  EthdevPortConfig c = small_port();
  c.mtu = 4244;  // a 4 KiB path MTU's largest frame, less the Ethernet header
  EthdevPort port;
  EXPECT_FALSE(port.open(id, c, &err));
  EXPECT_NE(err.find("MTU 4244 needs frames of 4262 bytes, above the port's maximum of 1522"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace softmrc::port
