// The endpoint's event and completion queues when the caller stops polling
// them: what does not fit is counted (events_lost, cq_overflow: softmrcd's
// /softmrc/drops), what fits is kept intact and in order, polling makes
// room for what comes next, and a QP's move to ERROR always fits.
#include <gtest/gtest.h>

#include <vector>

#include "one_qp.h"

namespace softmrc::engine::test {
namespace {

using wire::Opcode;

constexpr uint32_t kQueue = 4;  // a power of two: the ring's capacity is exactly this

// The reply to connectionless probe `req_id`, as the peer's endpoint sends it.
wire::PacketView probe_reply(uint16_t req_id) {
  wire::PacketView pv;
  pv.t.opcode = Opcode::kProbeReply;
  pv.t.dest_qpn = kQpnConnectionless;
  pv.t.probe.req_id = req_id;
  return pv;
}

// The probe replies' ids, in the order the events were polled.
std::vector<uint16_t> reply_ids(const std::vector<Event>& events) {
  std::vector<uint16_t> ids;
  for (const Event& e : events) {
    EXPECT_EQ(e.type, EventType::kProbeReply);
    ids.push_back(e.probe_req_id);
  }
  return ids;
}

OneQpConfig small_queues() {
  OneQpConfig c;
  c.event_queue = kQueue;
  c.completion_queue = kQueue;
  return c;
}

TEST(EventQueue, ProbeRepliesBeyondAFullQueueAreCountedAndTheKeptOnesComeFirstInOrder) {
  OneQp q(small_queues());
  for (uint16_t id = 1; id <= kQueue + 2; ++id) q.ep.on_packet(probe_reply(id), 0, 0);
  EXPECT_EQ(q.ep.counters().events_lost, 2u);
  EXPECT_EQ(reply_ids(q.events()), (std::vector<uint16_t>{1, 2, 3, 4}));
  q.ep.on_packet(probe_reply(7), 0, 0);
  EXPECT_EQ(reply_ids(q.events()), std::vector<uint16_t>{7}) << "polling made room";
  EXPECT_EQ(q.ep.counters().events_lost, 2u);
}

TEST(EventQueue, AQpsEventBeyondAFullQueueIsCountedAndLaterOnesArrive) {
  OneQp q(small_queues());
  for (uint16_t id = 1; id <= kQueue; ++id) q.ep.on_packet(probe_reply(id), 0, 0);
  ASSERT_TRUE(q.ep.set_ev_denied(q.qpn, 0, true, 0).ok());
  EXPECT_EQ(q.qp().counters().ev_state_changes, 1u);
  EXPECT_EQ(q.ep.counters().events_lost, 1u);
  EXPECT_EQ(reply_ids(q.events()), (std::vector<uint16_t>{1, 2, 3, 4}));
  ASSERT_TRUE(q.ep.set_ev_denied(q.qpn, 1, true, 0).ok());
  const auto e = q.events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].type, EventType::kEvStateChange);
  EXPECT_EQ(e[0].qpn, q.qpn);
  EXPECT_EQ(e[0].ev.ev, 1u);
  EXPECT_EQ(e[0].ev.new_state, EvState::kDenied);
  EXPECT_EQ(q.ep.counters().events_lost, 1u);
}

// The QP's move to ERROR is its caller's only word that it failed: a queue
// full of other events still takes it (a slot per QP kept for that), and
// still refuses the others.
TEST(EventQueue, AQpErrorIsKeptWhenOtherEventsFillTheQueue) {
  OneQp q(small_queues());
  for (uint16_t id = 1; id <= kQueue + 1; ++id) q.ep.on_packet(probe_reply(id), 0, 0);
  EXPECT_EQ(q.ep.counters().events_lost, 1u);
  QpAttr error;
  error.state = QpState::kError;
  ASSERT_TRUE(q.ep.modify_qp(q.qpn, error, kAttrState, 0).ok());
  q.ep.on_packet(probe_reply(9), 0, 0);
  EXPECT_EQ(q.ep.counters().events_lost, 2u) << "the reply after the error";
  const auto e = q.events();
  ASSERT_EQ(e.size(), kQueue + 1);
  EXPECT_EQ(reply_ids({e.begin(), e.begin() + kQueue}), (std::vector<uint16_t>{1, 2, 3, 4}));
  EXPECT_EQ(e[kQueue].type, EventType::kQpError);
  EXPECT_EQ(e[kQueue].qpn, q.qpn);
}

// Posts Writes of 100 bytes with wr_ids [first, first + n) and acknowledges
// them all.
void write_and_ack(OneQp& q, uint64_t first, uint32_t n, TimeNs now) {
  for (uint64_t id = first; id < first + n; ++id) ASSERT_TRUE(q.write(id, 0, 100).ok());
  const auto tx = q.tx(now);
  ASSERT_EQ(tx.size(), n);
  q.ep.on_packet(q.ack(q.qp().snd_nxt(), tx.back().t.psn, tx.back().ev), 0, now + 1'000);
}

// The kCqOverflow events among `events`, each checked to name `qpn`.
size_t overflow_events(const std::vector<Event>& events, uint32_t qpn) {
  size_t n = 0;
  for (const Event& e : events) {
    if (e.type != EventType::kCqOverflow) continue;
    EXPECT_EQ(e.qpn, qpn);
    ++n;
  }
  return n;
}

TEST(CompletionQueue, SendCompletionsBeyondAFullQueueAreCountedAndTheKeptOnesComeFirstInOrder) {
  OneQp q(small_queues());
  write_and_ack(q, 1, kQueue + 2, 0);
  EXPECT_EQ(q.qp().counters().send_completions, kQueue + 2);
  EXPECT_EQ(q.ep.counters().cq_overflow, 2u);
  EXPECT_EQ(overflow_events(q.events(), q.qpn), 1u) << "once per overflow";
  const auto c = q.completions();
  ASSERT_EQ(c.size(), kQueue);
  for (uint64_t i = 0; i < kQueue; ++i) {
    EXPECT_EQ(c[i].wr_id, i + 1);
    EXPECT_EQ(c[i].qpn, q.qpn);
    EXPECT_EQ(c[i].status, WcStatus::kSuccess);
    EXPECT_EQ(c[i].opcode, WcOpcode::kWrite);
    EXPECT_EQ(c[i].byte_len, 100u);
  }
  EXPECT_EQ(q.qp().state(), QpState::kRts);

  write_and_ack(q, 9, 1, 10'000);
  const auto after = q.completions();
  ASSERT_EQ(after.size(), 1u) << "polling made room";
  EXPECT_EQ(after[0].wr_id, 9u);
  EXPECT_EQ(q.ep.counters().cq_overflow, 2u);
  EXPECT_TRUE(q.events().empty());

  write_and_ack(q, 10, kQueue + 1, 20'000);
  EXPECT_EQ(q.ep.counters().cq_overflow, 3u);
  EXPECT_EQ(overflow_events(q.events(), q.qpn), 1u) << "a completion fitted in between";
}

TEST(CompletionQueue, ReceiveCompletionsBeyondAFullQueueAreCountedAndTheKeptOnesComeFirstInOrder) {
  OneQp q(small_queues());
  const uint32_t rq_psn = q.config().rq_psn;
  const std::vector<uint8_t> payload(8, 0xab);
  for (uint32_t i = 0; i < kQueue + 2; ++i) {
    ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{100 + i}).ok());
    q.ep.on_packet(q.data(rq_psn + i, Opcode::kWriteOnlyImm, 0, 8, 0, payload, 1000 + i), 0, 0);
  }
  EXPECT_EQ(q.qp().counters().recv_completions, kQueue + 2);
  EXPECT_EQ(q.ep.counters().cq_overflow, 2u);
  EXPECT_EQ(overflow_events(q.events(), q.qpn), 1u);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), kQueue);
  for (uint32_t i = 0; i < kQueue; ++i) {
    EXPECT_EQ(c[i].wr_id, 100u + i);
    EXPECT_EQ(c[i].opcode, WcOpcode::kRecvWriteImm);
    EXPECT_EQ(c[i].status, WcStatus::kSuccess);
    EXPECT_EQ(c[i].imm, 1000u + i);
    EXPECT_EQ(c[i].byte_len, 8u);
  }

  ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{200}).ok());
  q.ep.on_packet(q.data(rq_psn + kQueue + 2, Opcode::kWriteOnlyImm, 0, 8, 0, payload, 2000), 0, 0);
  const auto after = q.completions();
  ASSERT_EQ(after.size(), 1u) << "polling made room";
  EXPECT_EQ(after[0].wr_id, 200u);
  EXPECT_EQ(after[0].imm, 2000u);
  EXPECT_EQ(q.ep.counters().cq_overflow, 2u);
}

TEST(CompletionQueue, AFlushIntoAFullQueueIsReportedOnceAheadOfTheQpError) {
  OneQp q(small_queues());
  write_and_ack(q, 1, kQueue, 0);
  EXPECT_EQ(q.ep.counters().cq_overflow, 0u);
  for (uint64_t id = 100; id < 100 + 2 * kQueue; ++id)
    ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{id}).ok());
  QpAttr error;
  error.state = QpState::kError;
  ASSERT_TRUE(q.ep.modify_qp(q.qpn, error, kAttrState, 10'000).ok());
  EXPECT_EQ(q.ep.counters().cq_overflow, 2 * kQueue) << "every flushed receive";
  const auto e = q.events();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].type, EventType::kCqOverflow);
  EXPECT_EQ(e[0].qpn, q.qpn);
  EXPECT_EQ(e[1].type, EventType::kQpError) << "not crowded out by the lost completions";
  EXPECT_EQ(e[1].qpn, q.qpn);
  EXPECT_EQ(q.ep.counters().events_lost, 0u);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), kQueue);
  for (uint64_t i = 0; i < kQueue; ++i) EXPECT_EQ(c[i].wr_id, i + 1);
}

}  // namespace
}  // namespace softmrc::engine::test
