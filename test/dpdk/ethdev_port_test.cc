// The ethdev port driver on vdevs: net_null TX/RX smoke, a net_ring port
// that loops frames back byte for byte, link state changes seen by
// polling, the refusals (unknown device, multi-segment TX on a PMD
// without it), the farewell of a net_memif pair in this process, a memif
// client's restart on the interrupt thread and its connect that never
// waits, a memif server meeting a client already gone, and the unmap guard (an munmap on EAL's
// interrupt thread waits for the burst in progress). One EAL for the whole binary (--no-huge, its
// own prefix).
#include <gtest/gtest.h>
#include <rte_alarm.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "eal_environment.h"
#include "port/ethdev/eal_cleanup.h"
#include "port/ethdev/ethdev_port.h"
#include "port/ethdev/hangup_guard.h"
#include "port/ethdev/unmap_guard.h"

namespace softmrc::port {
namespace {

// The memif pairs' servers are removed: a plain rte_eal_cleanup() had EAL's
// interrupt thread read their handles in memory it was unmapping (SIGSEGV
// in rte_intr_fd_get() in 5-13% of runs, in 39 of 40 with the unmap
// guard's alarm tests moved first).
test::EalEnvironment* const kEal = [] {
  test::EalEnvironment* eal = test::add_eal("smrcd-port-test", 2047, 64, RTE_MBUF_DEFAULT_BUF_SIZE);
  eal->cleanup = eal_cleanup;
  return eal;
}();

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

// Polls a memif server and its client until both links are up (DPDK's
// interrupt thread connects the two); false if they are not within 5 s.
bool connected(EthdevPort& server, EthdevPort& client) {
  for (int i = 0; i < 5000 && !(server.link_up() && client.link_up()); ++i) {
    rte_delay_us_sleep(1000);
    server.poll_link(rte_rdtsc());
    client.poll_link(rte_rdtsc());
  }
  return server.link_up() && client.link_up();
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
    ASSERT_TRUE(connected(server, client)) << "the memif pair never connected";
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

// A memif server that is alive but accepts nothing (stopped, hung): its
// listen backlog full of connections it never took.
class HungServer {
 public:
  HungServer() {
    path_ = "/tmp/smrcd-port-test-hung-" + std::to_string(::getpid()) + ".sock";
    ::unlink(path_.c_str());
    listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listener_, 0), 0);
    for (int i = 0; i < 8; ++i) {  // until the backlog takes no more
      const int c = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
      queued_.push_back(c);
      if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) break;
    }
    EXPECT_EQ(errno, EAGAIN) << "the backlog never filled";
  }
  ~HungServer() {
    close_listener();
    for (int c : queued_) ::close(c);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  // What a connect() waiting for it then gets: refused.
  void close_listener() {
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
  }

 private:
  std::string path_;
  int listener_ = -1;
  std::vector<int> queued_;
};

// Runs `step` on a thread of its own; false if it has not returned within
// 5 s (then `server` closes, which ends a connect() waiting for it).
template <typename Step>
bool returns_at_once(HungServer& server, Step step) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    step();
    done.store(true);
  });
  for (int i = 0; i < 5000 && !done.load(); ++i) usleep(1000);
  const bool in_time = done.load();
  if (!in_time) server.close_listener();
  t.join();
  return in_time;
}

// A memif client port connects when it starts (on the control thread) and
// again on each reconnect (on EAL's interrupt thread): a connect() that
// waited for a server that accepts nothing would stop that thread and
// everything it serves. It fails at once instead, and the port tries again
// later.
TEST(EthdevPort, AMemifClientDoesNotWaitForAServerThatAcceptsNothing) {
  HungServer server;
  uint16_t id = 0;
  std::string err;
  ASSERT_TRUE(EthdevPort::attach(
      "net_memif_hungc0,role=client,id=0,socket=" + server.path() + ",socket-abstract=no", &id,
      &err))
      << err;
  EthdevPort port;
  ASSERT_TRUE(port.open(id, small_port(), &err)) << err;
  bool started = false;
  ASSERT_TRUE(returns_at_once(server, [&] { started = port.start(&err); }))
      << "start() waited for the server";
  ASSERT_TRUE(started) << err;  // a memif client may start without its server
  EXPECT_FALSE(port.link_up());
  // The first reconnect is due kReconnectFirstUs after the failed start;
  // the polls take its outcome.
  rte_delay_us_sleep(EthdevPort::kReconnectFirstUs + 10'000);
  ASSERT_TRUE(returns_at_once(server, [&] {
    for (int i = 0; i < 10'000 && port.reconnect_failures() == 0; ++i) {
      port.poll_link(rte_rdtsc());
      usleep(1000);
    }
  })) << "a reconnect waited for the server";
  EXPECT_EQ(port.reconnect_failures(), 1u);
  EXPECT_EQ(port.reconnects(), 0u);
  EXPECT_FALSE(port.link_up());
  port.close();
}

// The descriptors this process has open.
size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Holds EAL's interrupt thread in an alarm's callback until released (at
// most 10 s): alarms and interrupts wait meanwhile.
class InterruptThreadHeld {
 public:
  InterruptThreadHeld() {
    EXPECT_EQ(rte_eal_alarm_set(1, &hold, this), 0);
    for (int i = 0; i < 5000 && !held_.load(); ++i) usleep(1000);
    EXPECT_TRUE(held_.load()) << "the interrupt thread ran no alarm";
  }
  ~InterruptThreadHeld() { release(); }
  void release() {
    released_.store(true);
    while (held_.load() && !done_.load()) usleep(100);
  }

 private:
  static void hold(void* arg) {
    auto* self = static_cast<InterruptThreadHeld*>(arg);
    self->held_.store(true);
    for (int i = 0; i < 100'000 && !self->released_.load(); ++i) usleep(100);
    self->done_.store(true);
  }

  std::atomic<bool> held_{false};
  std::atomic<bool> released_{false};
  std::atomic<bool> done_{false};
};

// Returns once the interrupt thread has run every alarm set before (at
// most 5 s): alarms run in the order they are due.
void drain_interrupt_thread() {
  std::atomic<bool> ran{false};
  ASSERT_EQ(rte_eal_alarm_set(
                1, [](void* arg) { static_cast<std::atomic<bool>*>(arg)->store(true); }, &ran),
            0);
  for (int i = 0; i < 5000 && !ran.load(); ++i) usleep(1000);
  ASSERT_TRUE(ran.load()) << "the interrupt thread ran no alarm in 5 s";
}

// A memif client on a socket nothing listens on, started (its link down),
// its first reconnect due.
void open_lonely_client(const char* name, EthdevPort* port) {
  const std::string path = "/tmp/smrcd-port-test-nobody-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  uint16_t id = 0;
  std::string err;
  ASSERT_TRUE(EthdevPort::attach(
      std::string(name) + ",role=client,id=0,socket=" + path + ",socket-abstract=no", &id, &err))
      << err;
  ASSERT_TRUE(port->open(id, small_port(), &err)) << err;
  ASSERT_TRUE(port->start(&err)) << err;
  ASSERT_FALSE(port->link_up());
  rte_delay_us_sleep(EthdevPort::kReconnectFirstUs + 10'000);
}

// memif's handshake and disconnect run on the interrupt thread with no
// lock against a stop from another thread, so a reconnect's restart runs
// there too: the lcore that asks for it goes on (its other ports polled),
// makes no burst on the port, and takes the outcome once the interrupt
// thread has run it.
TEST(EthdevPort, AMemifClientIsRestartedOnTheInterruptThreadNotOnItsLcore) {
  EthdevPort port;
  open_lonely_client("net_memif_lonely0", &port);
  {
    InterruptThreadHeld held;
    port.poll_link(rte_rdtsc());
    EXPECT_EQ(port.reconnect_failures(), 0u) << "restarted on the polling thread";
    rte_mbuf* m = frame_with(3, 60);
    EXPECT_EQ(port.tx_burst(&m, 1), 0);  // no burst while it restarts
    rte_pktmbuf_free(m);
    rte_delay_us_sleep(1000);
    port.poll_link(rte_rdtsc());  // nothing to take yet, nor asked again
    EXPECT_EQ(port.reconnect_failures(), 0u);
  }
  drain_interrupt_thread();
  EXPECT_EQ(port.reconnect_failures(), 0u) << "taken by the lcore, not the interrupt thread";
  port.poll_link(rte_rdtsc());
  EXPECT_EQ(port.reconnect_failures(), 1u);  // nothing listens: the restart failed
  EXPECT_EQ(port.reconnects(), 0u);
  EXPECT_FALSE(port.link_up());
  port.close();
}

// A memif server whose interrupt thread was held (the process stopped,
// descheduled) while a client connected and gave up accepts that client's
// dead connection once it runs again. DPDK 22.11's memif then frees the
// connection's state without unregistering its callback; the next
// registration had EAL's interrupt thread panic ("Error adding fd ...
// epoll_ctl"). The hangup guard makes the send succeed: memif reads the
// hangup, lets the connection go (its socket closed), and serves the
// clients that come next.
TEST(EthdevPort, AMemifServerSurvivesAClientThatGaveUpBeforeItWasAccepted) {
  const std::string path = "/tmp/smrcd-port-test-gaveup-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  const std::string common = ",id=0,socket=" + path + ",socket-abstract=no";
  uint16_t id = 0;
  std::string err;
  EthdevPort server;
  ASSERT_TRUE(EthdevPort::attach("net_memif_gaveups,role=server" + common, &id, &err)) << err;
  ASSERT_TRUE(server.open(id, small_port(), &err)) << err;
  ASSERT_TRUE(server.start(&err)) << err;
  const uint64_t gone_sends = hangup_guard::peer_gone_sends();
  const size_t fds = open_fds();
  {
    InterruptThreadHeld held;
    const int gave_up = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(::connect(gave_up, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ::close(gave_up);
  }
  drain_interrupt_thread();
  EXPECT_EQ(hangup_guard::peer_gone_sends(), gone_sends + 1);
  for (int i = 0; i < 1000 && open_fds() != fds; ++i) usleep(1000);
  EXPECT_EQ(open_fds(), fds) << "the dead connection's socket stayed open";
  EthdevPort client;
  ASSERT_TRUE(EthdevPort::attach("net_memif_gaveupc,role=client" + common, &id, &err)) << err;
  ASSERT_TRUE(client.open(id, small_port(), &err)) << err;
  ASSERT_TRUE(client.start(&err)) << err;
  EXPECT_TRUE(connected(server, client)) << "the next client was not served";
  EthdevPort* both[] = {&server, &client};
  EthdevPort::close_all(both);
}

// A port destroyed (the daemon shutting down) while its restart waits for
// the interrupt thread drops the restart: nothing runs on it afterwards.
TEST(EthdevPort, APortClosedWithItsRestartQueuedDropsTheRestart) {
  alignas(EthdevPort) unsigned char storage[sizeof(EthdevPort)];
  auto* port = new (storage) EthdevPort;
  open_lonely_client("net_memif_lonely1", port);
  {
    InterruptThreadHeld held;
    port->poll_link(rte_rdtsc());
    port->~EthdevPort();
    std::memset(storage, 0xA5, sizeof(storage));
  }
  drain_interrupt_thread();
  for (unsigned char b : storage) ASSERT_EQ(b, 0xA5) << "the restart ran on the destroyed port";
}

// A page that EAL's interrupt thread unmaps (an alarm's callback runs
// there, as memif's disconnect does), saying when it was done.
class UnmapOnInterruptThread {
 public:
  UnmapOnInterruptThread() {
    void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    page_ = static_cast<volatile uint64_t*>(p);
    *page_ = 7;
  }
  ~UnmapOnInterruptThread() {
    if (!done_.load()) rte_eal_alarm_cancel(&UnmapOnInterruptThread::unmap, this);
  }

  void unmap_in(uint64_t us) { ASSERT_EQ(rte_eal_alarm_set(us, &unmap, this), 0); }
  // Until the unmap is done (at most 5 s); false if it is not.
  bool wait() {
    for (int i = 0; i < 5000 && !done_.load(); ++i) usleep(1000);
    return done_.load();
  }
  bool done() const { return done_.load(); }
  std::chrono::steady_clock::time_point done_at() const { return done_at_; }
  bool was_on_interrupt_thread() const { return on_interrupt_thread_; }
  uint64_t read() const { return *page_; }

 private:
  static constexpr size_t kPage = 4096;

  static void unmap(void* arg) {
    auto* self = static_cast<UnmapOnInterruptThread*>(arg);
    self->on_interrupt_thread_ = rte_thread_is_intr();
    EXPECT_EQ(munmap(const_cast<uint64_t*>(self->page_), kPage), 0);
    self->done_at_ = std::chrono::steady_clock::now();
    self->done_.store(true);
  }

  volatile uint64_t* page_ = nullptr;
  bool on_interrupt_thread_ = false;
  std::chrono::steady_clock::time_point done_at_;
  std::atomic<bool> done_{false};
};

// Reads `page` for `ms` milliseconds; fails if it was unmapped meanwhile.
void keep_reading(const UnmapOnInterruptThread& page, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  uint64_t sum = 0;
  while (std::chrono::steady_clock::now() < until) sum += page.read();
  EXPECT_GT(sum, 0u);
  EXPECT_FALSE(page.done()) << "unmapped under the burst";
}

// What a preempted burst on a memif link whose peer was killed sees: the
// interrupt thread unmaps the link's memory. The unmap waits for the burst
// to end, not for a burst inside it (an RX callback's TX) to end; without
// the guard, the burst's reads fault.
TEST(UnmapGuard, AnUnmapOnTheInterruptThreadWaitsForTheBurstInProgress) {
  const uint64_t timeouts = unmap_guard::wait_timeouts();
  UnmapOnInterruptThread page;
  std::chrono::steady_clock::time_point burst_end;
  {
    const unmap_guard::Burst burst;
    {
      const unmap_guard::Burst inner;
      page.unmap_in(1000);
      keep_reading(page, 150);
    }
    keep_reading(page, 100);
    burst_end = std::chrono::steady_clock::now();
  }
  ASSERT_TRUE(page.wait());
  EXPECT_TRUE(page.was_on_interrupt_thread());
  EXPECT_GE(page.done_at(), burst_end);
  EXPECT_EQ(unmap_guard::wait_timeouts(), timeouts);
}

// Between bursts, or on a thread that is not the interrupt thread (the
// burst's own: waiting would never end), an unmap does not wait.
TEST(UnmapGuard, AnUnmapBetweenBurstsOrOffTheInterruptThreadDoesNotWait) {
  const uint64_t timeouts = unmap_guard::wait_timeouts();
  { const unmap_guard::Burst burst; }
  UnmapOnInterruptThread page;
  page.unmap_in(1000);
  ASSERT_TRUE(page.wait());
  EXPECT_TRUE(page.was_on_interrupt_thread());
  {
    const unmap_guard::Burst burst;
    void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(munmap(p, 4096), 0);
  }
  EXPECT_EQ(unmap_guard::wait_timeouts(), timeouts);
}

// A burst preempted for longer than the limit holds the interrupt thread
// (every link's events) no longer: the unmap goes ahead, and is counted.
TEST(UnmapGuard, ABurstOutlastingTheLimitIsWaitedForNoLonger) {
  const uint64_t timeouts = unmap_guard::wait_timeouts();
  UnmapOnInterruptThread page;
  {
    const unmap_guard::Burst burst;
    page.unmap_in(1000);
    EXPECT_TRUE(page.wait()) << "still waiting after 5 s";
  }
  EXPECT_EQ(unmap_guard::wait_timeouts(), timeouts + 1);
}

}  // namespace
}  // namespace softmrc::port
