// The endpoint's transmit scheduler: the timer heap that finds the earliest
// QP deadline, and the ready list that serves only QPs with work.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine/endpoint.h"
#include "engine/timer_heap.h"
#include "seeds.h"

namespace softmrc::engine::test {
namespace {

TEST(TimerHeap, TopIsTheEarliestDeadlineThroughRandomSetsAndRemovals) {
  for (const uint64_t seed : seeds(20)) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const auto keys = static_cast<uint32_t>(1 + rng() % 64);
    TimerHeap heap;
    heap.init(keys);
    std::map<uint32_t, TimeNs> model;
    for (int op = 0; op < 2000; ++op) {
      const auto key = static_cast<uint32_t>(rng() % keys);
      const TimeNs at = rng() % 4 == 0 ? kNever : rng() % 1000;
      heap.set(key, at);
      if (at == kNever)
        model.erase(key);
      else
        model[key] = at;
      TimeNs earliest = kNever;
      for (const auto& [k, t] : model) earliest = std::min(earliest, t);
      ASSERT_EQ(heap.top_time(), earliest) << "op " << op;
      ASSERT_EQ(heap.empty(), model.empty());
      if (!model.empty()) {
        ASSERT_EQ(model.at(heap.top_key()), earliest);
      }
    }
  }
}

// An endpoint with `n` QPs in RTS towards a peer that never answers.
struct ManyQps {
  explicit ManyQps(uint32_t n) : mem(1 << 16) {
    EndpointConfig cfg;
    cfg.num_planes = 2;
    cfg.max_qps = n;
    cfg.qp.max_send_wr = 16;
    cfg.qp.max_recv_wr = 16;
    EXPECT_TRUE(ep.init(cfg).ok());
    EXPECT_TRUE(
        ep.register_region(
              Region{kVa, mem.size(), mem.data(), kAccessLocalWrite | kAccessRemoteWrite}, &key)
            .ok());
    std::vector<EvEntry> evs(4);
    for (uint32_t i = 0; i < evs.size(); ++i) {
      evs[i].plane = static_cast<uint8_t>(i % 2);
      evs[i].value.bytes[31] = static_cast<uint8_t>(i);
    }
    QpAttr at;
    at.evs = evs;
    at.ev_config.num_planes = 2;
    at.ev_config.probe_initial_ns = 10'000;
    at.ev_config.probe_max_ns = 80'000;
    at.path_mtu = 1024;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t qpn = 0;
      EXPECT_TRUE(ep.create_qp(&qpn).ok());
      at.dest_qpn = 1000 + qpn;
      EXPECT_TRUE(ep.connect_qp(qpn, at, 0).ok());
      qpns.push_back(qpn);
    }
    // connect_qp leaves every QP ready: drain so that only work is ready.
    TxPacket tx[64];
    while (ep.poll_tx(tx, 64, 0) > 0) {
    }
  }
  Status write(uint32_t qpn, uint32_t len) {
    WriteRequest wr;
    wr.local_addr = kVa;
    wr.length = len;
    wr.lkey = key;
    wr.remote_addr = 0x1000;
    wr.rkey = 1;
    return ep.post_write(qpn, wr);
  }
  static constexpr uint64_t kVa = 0x10000;
  std::vector<uint8_t> mem;
  Endpoint ep;
  uint32_t key = 0;
  std::vector<uint32_t> qpns;
};

TEST(Scheduler, IdleQpsAreNotWokenAndTheirTimersAreNotDue) {
  ManyQps m(500);
  EXPECT_EQ(m.ep.next_wakeup(), kNever);
  TxPacket tx[8];
  EXPECT_EQ(m.ep.poll_tx(tx, 8, 1'000'000), 0u);
}

TEST(Scheduler, ReadyQpsShareTransmitInBurstsRoundRobin) {
  ManyQps m(300);
  const uint32_t busy[] = {7, 150, 299};
  for (uint32_t qpn : busy) ASSERT_TRUE(m.write(qpn, 64 * 1024).ok());  // 64 packets each
  EXPECT_EQ(m.ep.next_wakeup(), 0u);
  std::vector<TxPacket> tx(3 * kQpTxBurst);
  ASSERT_EQ(m.ep.poll_tx(tx.data(), tx.size(), 10), tx.size());
  for (uint32_t i = 0; i < tx.size(); ++i)
    EXPECT_EQ(tx[i].src_qpn, busy[i / kQpTxBurst]) << "packet " << i;
}

TEST(Scheduler, TheRetransmitTimerOfAnIdleQpFiresOnTime) {
  ManyQps m(200);
  ASSERT_TRUE(m.write(42, 1024).ok());
  TxPacket tx[4];
  ASSERT_EQ(m.ep.poll_tx(tx, 4, 0), 1u);
  const TimeNs rto = m.ep.next_wakeup();
  ASSERT_EQ(rto, ack_timeout_ns(QpAttr{}.timeout)) << "the default ACK timeout";
  EXPECT_EQ(m.ep.poll_tx(tx, 4, rto - 1), 0u);
  ASSERT_EQ(m.ep.poll_tx(tx, 4, rto), 1u);
  EXPECT_EQ(tx[0].src_qpn, 42u);
  EXPECT_EQ(m.ep.qp(42)->counters().timeouts, 1u);
}

TEST(Scheduler, ADestroyedQpLeavesTheReadyListAndTheTimers) {
  ManyQps m(10);
  ASSERT_TRUE(m.write(3, 4096).ok());
  ASSERT_TRUE(m.write(4, 1024).ok());
  TxPacket tx[1];
  ASSERT_EQ(m.ep.poll_tx(tx, 1, 0), 1u);  // QP 4 sent its only packet; QP 3 has more
  ASSERT_TRUE(m.ep.destroy_qp(3).ok());
  ASSERT_TRUE(m.ep.destroy_qp(4).ok());
  EXPECT_EQ(m.ep.next_wakeup(), kNever);
  EXPECT_EQ(m.ep.poll_tx(tx, 1, 1'000'000'000), 0u);
}

}  // namespace
}  // namespace softmrc::engine::test
