// A plane's port on an lcore of its own (app/softmrcd/port_task.h), on a
// net_ring port that loops what it sends back to itself. The test thread
// plays both lcores in turn: PortTask::poll() is the port lcore's pass, the
// rest the endpoint's. Frames cross both ways in order, a full rx ring
// leaves frames in the port instead of losing them, link changes reach the
// endpoint once each, frames for a down link that the port refuses are
// freed and counted, and close() gives every mbuf back.
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <string>
#include <vector>

#include "eal_environment.h"
#include "softmrcd/port_task.h"

namespace softmrc::softmrcd {
namespace {

test::EalEnvironment* const kEal =
    test::add_eal("smrcd-port-task-test", 4095, 0, RTE_MBUF_DEFAULT_BUF_SIZE);

// A started net_ring port whose TX ring is its RX ring, and its port task.
class LoopPort : public ::testing::Test {
 protected:
  void open(unsigned ring_size) {
    static int n = 0;
    const std::string name = "port_task_loop" + std::to_string(n++);
    in_use_before_ = rte_mempool_in_use_count(kEal->pool);
    ring_ = rte_ring_create(name.c_str(), ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(ring_, nullptr);
    const int id = rte_eth_from_ring(ring_);
    ASSERT_GE(id, 0);
    port::EthdevPortConfig c;
    c.rx_desc = c.tx_desc = 64;
    c.rx_pool = kEal->pool;
    c.link_poll_us = 1;
    std::string err;
    ASSERT_TRUE(port_.open(static_cast<uint16_t>(id), c, &err)) << err;
    ASSERT_TRUE(port_.start(&err)) << err;
    ASSERT_TRUE(task_.setup(&port_, name, &err)) << err;
    task_.start();
  }
  void TearDown() override {
    task_.close();
    port_.close();
    rte_mbuf* m[32];
    unsigned k;
    while ((k = rte_ring_dequeue_burst(ring_, reinterpret_cast<void**>(m), 32, nullptr)) > 0)
      rte_pktmbuf_free_bulk(m, k);
    rte_ring_free(ring_);
    EXPECT_EQ(rte_mempool_in_use_count(kEal->pool), in_use_before_) << "an mbuf leaked";
  }

  static rte_mbuf* frame(uint32_t seq) {
    rte_mbuf* m = rte_pktmbuf_alloc(kEal->pool);
    *reinterpret_cast<uint32_t*>(rte_pktmbuf_append(m, 64)) = seq;
    return m;
  }
  static uint32_t seq_of(const rte_mbuf* m) { return *rte_pktmbuf_mtod(m, const uint32_t*); }
  // A pass of the port lcore a millisecond after the last, so that its
  // link polls (every microsecond) always read the link.
  bool pass() {
    tsc_ += rte_get_tsc_hz() / 1000;
    return task_.poll(tsc_);
  }
  // What the endpoint takes from the rx ring, as sequence numbers.
  std::vector<uint32_t> take() {
    std::vector<uint32_t> seqs;
    rte_mbuf* m[32];
    uint16_t k;
    while ((k = task_.rx_burst(m, 32)) > 0) {
      for (uint16_t i = 0; i < k; ++i) seqs.push_back(seq_of(m[i]));
      rte_pktmbuf_free_bulk(m, k);
    }
    return seqs;
  }

  rte_ring* ring_ = nullptr;
  port::EthdevPort port_;
  PortTask task_;
  uint64_t tsc_ = rte_rdtsc();
  unsigned in_use_before_ = 0;
};

TEST_F(LoopPort, FramesCrossBothWaysInOrder) {
  open(1024);
  rte_mbuf* tx[40];
  for (uint32_t i = 0; i < 40; ++i) tx[i] = frame(i);
  EXPECT_EQ(task_.tx_burst(tx, 40), 40);  // into the tx ring: nothing sent yet
  EXPECT_EQ(rte_ring_count(ring_), 0u);
  EXPECT_TRUE(take().empty());
  // A pass receives before it sends, so the frames come back a pass later;
  // it sends one burst (32) a pass.
  EXPECT_TRUE(pass());
  EXPECT_EQ(rte_ring_count(ring_), 32u);
  std::vector<uint32_t> got;
  for (int i = 0; i < 3; ++i) {
    pass();
    for (uint32_t s : take()) got.push_back(s);
  }
  ASSERT_EQ(got.size(), 40u);
  for (uint32_t i = 0; i < 40; ++i) EXPECT_EQ(got[i], i);
  EXPECT_FALSE(pass());  // nothing left to move
  EXPECT_EQ(task_.counters().rx_stalls, 0u);
  EXPECT_EQ(task_.counters().tx_link_down, 0u);
}

TEST_F(LoopPort, AFullRxRingLeavesFramesInThePort) {
  open(1024);
  constexpr uint32_t kFirst = 20, kFrames = 400;
  // As if the peer had sent them: 20 frames, and once they are in the rx
  // ring (which then has room for 7 more bursts and 12 frames) 380 more.
  const auto arrive = [&](uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; ++i) ASSERT_EQ(rte_ring_enqueue(ring_, frame(i)), 0);
  };
  arrive(0, kFirst);
  pass();
  arrive(kFirst, kFrames);
  for (int i = 0; i < 20; ++i) pass();  // the endpoint takes nothing meanwhile
  constexpr uint32_t kHeld = kFirst + (kPortRingSlots - kFirst) / 32 * 32;
  EXPECT_EQ(rte_ring_count(ring_), kFrames - kHeld);
  EXPECT_EQ(task_.counters().rx_stalls, 20u - (kPortRingSlots - kFirst) / 32);
  std::vector<uint32_t> got = take();
  EXPECT_EQ(got.size(), kHeld);
  while (got.size() < kFrames && pass())
    for (uint32_t s : take()) got.push_back(s);
  ASSERT_EQ(got.size(), kFrames) << "frames were lost between the lcores";
  for (uint32_t i = 0; i < kFrames; ++i) ASSERT_EQ(got[i], i);
}

TEST_F(LoopPort, LinkChangesReachTheEndpointOnceEach) {
  open(1024);
  EXPECT_TRUE(task_.link_up());
  EXPECT_FALSE(task_.poll_link());
  ASSERT_TRUE(port_.set_admin_up(false));
  EXPECT_FALSE(task_.poll_link());  // not before the port lcore read it
  pass();
  EXPECT_TRUE(task_.poll_link());
  EXPECT_FALSE(task_.link_up());
  EXPECT_FALSE(task_.peer_closing());
  pass();
  EXPECT_FALSE(task_.poll_link());  // no change, no report
  ASSERT_TRUE(port_.set_admin_up(true));
  pass();
  EXPECT_TRUE(task_.poll_link());
  EXPECT_TRUE(task_.link_up());
}

TEST_F(LoopPort, FramesADownLinkRefusesAreFreedAndCounted) {
  open(64);  // the port holds 63 frames
  // Fill the rx ring, then the port: the port lcore can neither receive
  // nor send.
  const auto fill_port = [&] {
    while (rte_ring_free_count(ring_) > 0) ASSERT_EQ(rte_ring_enqueue(ring_, frame(999)), 0);
  };
  while (task_.counters().rx_stalls == 0) {
    fill_port();
    pass();
  }
  fill_port();
  rte_mbuf* tx[8];
  for (uint32_t i = 0; i < 8; ++i) tx[i] = frame(100 + i);
  ASSERT_EQ(task_.tx_burst(tx, 8), 8);
  pass();  // the link is up: the port lcore keeps what the port refuses
  EXPECT_EQ(task_.counters().tx_link_down, 0u);
  ASSERT_TRUE(port_.set_admin_up(false));
  pass();  // reads the link, down: it frees them
  EXPECT_EQ(task_.counters().tx_link_down, 8u);
  EXPECT_TRUE(task_.poll_link());
  EXPECT_FALSE(task_.link_up());
}

TEST_F(LoopPort, CloseGivesBackWhatIsBetweenTheLcores) {
  open(1024);
  for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(rte_ring_enqueue(ring_, frame(i)), 0);
  pass();  // 32 frames into the rx ring
  rte_mbuf* tx[16];
  for (uint32_t i = 0; i < 16; ++i) tx[i] = frame(200 + i);
  ASSERT_EQ(task_.tx_burst(tx, 16), 16);
  // TearDown closes the task and checks that every mbuf came back.
}

}  // namespace
}  // namespace softmrc::softmrcd
