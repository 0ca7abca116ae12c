// The ethdev port driver on vdevs: net_null TX/RX smoke, a net_ring port
// that loops frames back byte for byte, link state changes seen by
// polling, the refusals (unknown device, multi-segment TX on a PMD
// without it), and the farewell of a net_memif pair in this process. One
// EAL for the whole binary (--no-huge, its own prefix).
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <unistd.h>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>

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

// Opens and starts `port` on a net_ring over one new ring (what it sends,
// it receives) of `size` slots.
void open_ring_port(const char* name, unsigned size, const EthdevPortConfig& c, rte_ring** ring,
                    EthdevPort* port) {
  *ring = rte_ring_create(name, size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
  ASSERT_NE(*ring, nullptr);
  const int id = rte_eth_from_ring(*ring);
  ASSERT_GE(id, 0);
  std::string err;
  ASSERT_TRUE(port->open(static_cast<uint16_t>(id), c, &err)) << err;
  ASSERT_TRUE(port->start(&err)) << err;
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
  rte_ring* ring = nullptr;
  EthdevPort port;
  ASSERT_NO_FATAL_FAILURE(open_ring_port("port_test_loop", 256, small_port(), &ring, &port));

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
  rte_ring* ring = nullptr;
  EthdevPort port;
  ASSERT_NO_FATAL_FAILURE(open_ring_port("port_test_link", 64, small_port(), &ring, &port));
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

// A link-status interrupt (raised here by hand: no vdev that softmrc's
// tests can run raises one) makes the next poll read the link at once,
// long before the poll period, and is counted. On a port without the
// interrupt, as this net_ring is, only the poll period differs.
TEST(EthdevPort, LinkInterruptIsReadAtOnceAndCounted) {
  rte_ring* ring = nullptr;
  EthdevPort port;
  EthdevPortConfig c = small_port();
  c.link_poll_us = 1'000'000;
  ASSERT_NO_FATAL_FAILURE(open_ring_port("port_test_lsc", 64, c, &ring, &port));
  const uint64_t now = rte_rdtsc();
  EXPECT_FALSE(port.poll_link(now));  // the first read: up, as it was
  ASSERT_TRUE(port.link_up());

  ASSERT_TRUE(port.set_admin_up(false));
  const uint64_t ms = rte_get_tsc_hz() / 1000;
  EXPECT_FALSE(port.poll_link(now + ms));  // the next poll is a second away
  EXPECT_TRUE(port.link_up());
  EXPECT_EQ(port.link_interrupts(), 0u);
  EthdevPort::on_link_event(port.port_id(), RTE_ETH_EVENT_INTR_LSC, &port, nullptr);
  EXPECT_EQ(port.link_interrupts(), 1u);
  EXPECT_TRUE(port.poll_link(now + 2 * ms));
  EXPECT_FALSE(port.link_up());
  EXPECT_FALSE(port.poll_link(now + 3 * ms));  // the interrupt was taken
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

TEST(Farewell, FramesAreReadBackAndNothingElseIs) {
  const uint8_t src[6] = {2, 0, 0, 0, 0, 9};
  uint8_t f[kFarewellFrameLen];
  for (Farewell kind : {Farewell::kBye, Farewell::kByeAck}) {
    write_farewell(kind, src, f);
    EXPECT_EQ(farewell_kind(f), kind);
    EXPECT_EQ(f[12], 0x88);
    EXPECT_EQ(f[13], 0xB5);
    EXPECT_EQ(std::memcmp(f + 6, src, 6), 0);
  }
  write_farewell(Farewell::kBye, src, f);
  EXPECT_EQ(farewell_kind({f, 19}), Farewell::kNone);  // too short for the kind
  uint8_t g[kFarewellFrameLen];
  for (size_t at : {12, 13, 14, 17, 18, 19}) {  // EtherType, magic, version, kind
    std::memcpy(g, f, sizeof(g));
    g[at] ^= 0x40;
    EXPECT_EQ(farewell_kind(g), Farewell::kNone) << "byte " << at;
  }
}

// A memif pair in this process: the server end on one socket, the client
// end on the same one.
class MemifPair : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    const std::string sock =
        "/tmp/smrcd-port-test-" + std::to_string(::getpid()) + "-" + std::to_string(n) + ".sock";
    const std::string common = ",id=0,socket=" + sock + ",socket-abstract=no";
    const std::string tag = std::to_string(n++);
    std::string err;
    uint16_t id = 0;
    ASSERT_TRUE(EthdevPort::attach("net_memif_fws" + tag + ",role=server" + common, &id, &err))
        << err;
    ASSERT_TRUE(server.open(id, small_port(), &err)) << err;
    ASSERT_TRUE(EthdevPort::attach("net_memif_fwc" + tag + ",role=client" + common, &id, &err))
        << err;
    ASSERT_TRUE(client.open(id, small_port(), &err)) << err;
    ASSERT_TRUE(server.start(&err)) << err;
    ASSERT_TRUE(client.start(&err)) << err;
    // DPDK's interrupt thread connects the two.
    for (int i = 0; i < 5000 && !(server.link_up() && client.link_up()); ++i) {
      rte_delay_us_sleep(1000);
      server.poll_link(rte_rdtsc());
      client.poll_link(rte_rdtsc());
    }
    ASSERT_TRUE(server.link_up() && client.link_up()) << "the memif pair never connected";
    ::unlink(sock.c_str());
  }

  // What an lcore does with `port` until `stop`: bursts and link polls.
  static void poll_until(EthdevPort* port, const std::atomic<bool>* stop) {
    rte_mbuf* pkts[32];
    while (!stop->load(std::memory_order_acquire)) {
      if (const uint16_t n = port->rx_burst(pkts, 32); n > 0) rte_pktmbuf_free_bulk(pkts, n);
      port->poll_link(rte_rdtsc());
    }
  }

  // `closing` closes while an lcore polls `polled`: the lcore hears the
  // farewell, answers, and keeps off the link from then on.
  void close_while_polled(EthdevPort* closing, EthdevPort* polled) {
    std::atomic<bool> stop{false};
    std::thread lcore(poll_until, polled, &stop);
    EthdevPort* ports[] = {closing};
    EthdevPort::close_all(ports);
    stop.store(true, std::memory_order_release);
    lcore.join();
    EXPECT_TRUE(polled->peer_closing());
    EXPECT_FALSE(polled->link_up());
    rte_mbuf* m = frame_with(1, 60);
    EXPECT_EQ(polled->tx_burst(&m, 1), 0);  // kept off: no burst reaches the PMD
    rte_pktmbuf_free(m);
    rte_mbuf* rx[4];
    EXPECT_EQ(polled->rx_burst(rx, 4), 0);
    // The peer has closed; a port kept off its link closes after it, at once.
    EthdevPort* rest[] = {polled};
    EthdevPort::close_all(rest);
  }

  EthdevPort server;
  EthdevPort client;
};

TEST_F(MemifPair, AClientsFarewellKeepsItsPollingServerOffTheLink) {
  close_while_polled(&client, &server);
}

TEST_F(MemifPair, AServersFarewellKeepsItsPollingClientOffTheLink) {
  close_while_polled(&server, &client);
}

// Frames between the two still flow before any farewell, and a farewell
// frame never reaches the caller of rx_burst.
TEST_F(MemifPair, FramesFlowAndFarewellsAreTakenOutOfBursts) {
  rte_mbuf* tx[3] = {frame_with(5, 64), nullptr, frame_with(9, 80)};
  tx[1] = rte_pktmbuf_alloc(kEal->pool);
  const uint8_t src[6] = {2, 0, 0, 0, 0, 1};
  write_farewell(Farewell::kByeAck,  // unasked: no effect on a port not closing
                 src, reinterpret_cast<uint8_t*>(rte_pktmbuf_append(tx[1], kFarewellFrameLen)));
  ASSERT_EQ(client.tx_burst(tx, 3), 3);
  rte_mbuf* rx[8];
  uint16_t got = 0;
  for (int i = 0; i < 1000 && got < 2; ++i) got += server.rx_burst(rx + got, 8 - got);
  ASSERT_EQ(got, 2);
  EXPECT_EQ(rx[0]->pkt_len, 64u);
  EXPECT_EQ(rx[1]->pkt_len, 80u);
  rte_pktmbuf_free_bulk(rx, got);
  EXPECT_FALSE(server.peer_closing());
  EthdevPort* both[] = {&server, &client};
  EthdevPort::close_all(both);
}

}  // namespace
}  // namespace softmrc::port
