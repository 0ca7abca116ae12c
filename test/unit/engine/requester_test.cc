// The requester: segmentation, the bounds on what is in flight (MPR, max
// WIMM, congestion window), SACK processing, retransmission decisions (SACK
// holes, trim NACKs, timeouts with linear then exponential retries), EV
// probing and plane changes. The test plays the responder by hand.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <set>

#include "engine/psn.h"
#include "one_qp.h"

namespace softmrc::engine::test {
namespace {

using wire::NackCode;
using wire::Opcode;

std::vector<TxPacket> data_only(const std::vector<TxPacket>& v) {
  std::vector<TxPacket> out;
  for (const TxPacket& p : v)
    if (p.is_data) out.push_back(p);
  return out;
}

TEST(Segmentation, MessageIsCutIntoMtuPacketsWithFirstMiddleLastOpcodes) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 10, 3000, false, 0, 0x9000000, 5).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 3u);
  const Opcode ops[] = {Opcode::kWriteFirst, Opcode::kWriteMiddle, Opcode::kWriteLast};
  const uint32_t lens[] = {1024, 1024, 952};
  for (uint32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const TxPacket& p = tx[i];
    EXPECT_TRUE(p.is_data);
    EXPECT_EQ(p.peer, 9u);
    EXPECT_EQ(p.src_qpn, q.qpn);
    EXPECT_EQ(p.t.opcode, ops[i]);
    EXPECT_EQ(p.t.dest_qpn, 77u);
    EXPECT_EQ(p.t.psn, 100 + i);
    EXPECT_EQ(p.t.data.offset, 1024 * i);
    EXPECT_EQ(p.t.data.va, 0x9000000u + 1024 * i);
    EXPECT_EQ(p.t.data.rkey, 5u);
    EXPECT_EQ(p.t.data.msg_len, 3000u);
    EXPECT_EQ(p.t.data.msn, 0u);
    EXPECT_EQ(p.payload_len, lens[i]);
    EXPECT_EQ(p.payload, q.mem.data() + 10 + 1024 * i);
    EXPECT_EQ(p.t.ack_req, i == 2);
    EXPECT_EQ(p.t.mth_flags, 0);
    EXPECT_EQ(p.t.path_tag, p.ev);
    EXPECT_EQ(p.wire_ev, &q.qp().evs().entry(p.ev).value);
    EXPECT_EQ(p.plane, q.qp().evs().entry(p.ev).plane);
  }
}

TEST(Segmentation, ZeroByteWritesAreOnePacketWithoutPayload) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 0).ok());
  ASSERT_TRUE(q.write(2, 0, 0, true, 0x1234).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].t.opcode, Opcode::kWriteOnly);
  EXPECT_EQ(tx[0].payload_len, 0u);
  EXPECT_EQ(tx[0].payload, nullptr);
  EXPECT_EQ(tx[1].t.opcode, Opcode::kWriteOnlyImm);
  EXPECT_EQ(tx[1].t.data.imm, 0x1234u);
  EXPECT_EQ(tx[1].t.data.msn, 1u);
  EXPECT_EQ(tx[1].t.psn, 101u);
}

TEST(Segmentation, ImmediateRidesOnTheLastPacketOnly) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 2048, true, 0xbeef).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].t.opcode, Opcode::kWriteFirst);
  EXPECT_EQ(tx[0].t.data.imm, 0u);
  EXPECT_EQ(tx[1].t.opcode, Opcode::kWriteLastImm);
  EXPECT_EQ(tx[1].t.data.imm, 0xbeefu);
}

TEST(Segmentation, OneGibWriteIsCutAcrossThePsnWrapAndCompletesOnce) {
  constexpr uint64_t kLen = uint64_t{1} << 30;
  OneQpConfig cfg;
  cfg.mtu = 4096;
  cfg.sq_psn = 0xffffff - 1000;
  OneQp q(cfg);
  // Address space only: the requester hands out pointers, it never reads.
  void* big = mmap(nullptr, kLen, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(big, MAP_FAILED);
  uint32_t key = 0;
  ASSERT_TRUE(
      q.ep.register_region(Region{0x1'0000'0000, kLen, static_cast<uint8_t*>(big), 0}, &key).ok());
  WriteRequest wr;
  wr.wr_id = 7;
  wr.local_addr = 0x1'0000'0000;
  wr.length = static_cast<uint32_t>(kLen);
  wr.lkey = key;
  wr.remote_addr = 0x5000;
  ASSERT_TRUE(q.ep.post_write(q.qpn, wr).ok());

  uint32_t expect_psn = cfg.sq_psn;
  uint64_t expect_off = 0;
  TimeNs now = 0;
  bool ok = true;
  while (expect_off < kLen && ok) {
    const auto tx = q.tx(now);
    ASSERT_FALSE(tx.empty());
    for (const TxPacket& p : tx) {
      ok &= p.t.psn == expect_psn && p.t.data.offset == expect_off && p.payload_len == 4096 &&
            p.payload == static_cast<uint8_t*>(big) + expect_off;
      expect_psn = psn_add(expect_psn, 1);
      expect_off += 4096;
    }
    now += 1000;
    q.ep.on_packet(q.ack(expect_psn, psn_add(expect_psn, kPsnModulus - 1), tx.back().ev), 0, now);
  }
  EXPECT_TRUE(ok);
  EXPECT_EQ(expect_off, kLen);
  EXPECT_EQ(expect_psn, psn_add(cfg.sq_psn, kLen / 4096));
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, kLen);
  munmap(big, kLen);
}

TEST(Window, MprBoundsThePsnsInFlight) {
  OneQpConfig cfg;
  cfg.mpr = 1;  // 128 PSNs
  cfg.mem_bytes = 256 * 1024;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 200 * 1024).ok());
  EXPECT_EQ(q.tx(0).size(), 128u);
  EXPECT_TRUE(q.tx(0).empty());
  q.ep.on_packet(q.ack(110, 109, 0), 0, 1000);
  const auto more = q.tx(1000);
  ASSERT_EQ(more.size(), 10u);
  EXPECT_EQ(more.front().t.psn, 228u);
}

TEST(Window, MaxWimmBoundsTheImmediatesOutstanding) {
  OneQpConfig cfg;
  cfg.max_wimm = 2;
  OneQp q(cfg);
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(q.write(i, 0, 8, true, uint32_t(i)).ok());
  ASSERT_TRUE(q.write(4, 0, 8).ok());
  EXPECT_EQ(q.tx(0).size(), 2u);  // the third WIMM waits, and the Write behind it
  q.ep.on_packet(q.ack(101, 100, 0), 0, 1000);
  const auto tx = q.tx(1000);
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].t.data.imm, 3u);
  EXPECT_EQ(tx[1].t.opcode, Opcode::kWriteOnly);
}

TEST(Window, CongestionWindowBoundsTheBytesInFlight) {
  OneQpConfig cfg;
  cfg.cc.algorithm = CcAlgorithm::kNscc;
  cfg.cc.nscc = default_nscc_params(100'000'000'000ull, 10'000, cfg.mtu);
  cfg.cc.nscc.max_cwnd_bytes = 4 * 1024;
  OneQp q(cfg);
  ASSERT_LE(q.qp().cc().cwnd_bytes(), 4u * 1024);
  ASSERT_TRUE(q.write(1, 0, 16 * 1024).ok());
  const auto tx = q.tx(0);
  EXPECT_EQ(tx.size() * 1024, q.qp().cc().cwnd_bytes());
  EXPECT_EQ(q.qp().inflight_bytes(), tx.size() * 1024);
}

TEST(Window, WithDynamicMprTheResponderAdvertisedWindowBoundsTheFlight) {
  OneQpConfig cfg;
  cfg.caps = kCapDynamicMpr;
  cfg.mem_bytes = 1 << 20;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 600 * 1024).ok());
  EXPECT_EQ(q.tx(0).size(), 600u);
  wire::PacketView ack = q.ack(110, 109, 0);
  ack.t.fb.window_mpr = 1;  // the responder shrinks to 128 PSNs
  q.ep.on_packet(ack, 0, 1'000);
  ASSERT_TRUE(q.write(2, 0, 8).ok());
  EXPECT_TRUE(q.tx(1'000).empty()) << "590 in flight, window 128";
  ack = q.ack(650, 649, 0);
  ack.t.fb.window_mpr = 1;
  q.ep.on_packet(ack, 0, 2'000);
  const auto tx = q.tx(2'000);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].t.psn, 700u);
}

TEST(Window, WithoutDynamicMprTheAdvertisedWindowIsIgnored) {
  OneQpConfig cfg;
  cfg.mpr = 2;
  cfg.mem_bytes = 1 << 20;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 300 * 1024).ok());
  EXPECT_EQ(q.tx(0).size(), 256u);
  wire::PacketView ack = q.ack(110, 109, 0);
  ack.t.fb.window_mpr = 1;
  q.ep.on_packet(ack, 0, 1'000);
  EXPECT_EQ(q.tx(1'000).size(), 10u);
}

TEST(Scheduling, QpsOfAnEndpointTakeTurnsInBursts) {
  OneQp q;
  uint32_t second = 0;
  ASSERT_TRUE(q.ep.create_qp(&second).ok());
  std::vector<EvEntry> evs(2);
  evs[1].plane = 1;
  QpAttr a;
  a.state = QpState::kInit;
  a.evs = evs;
  a.ev_config.num_planes = 2;
  a.ev_config.probe_initial_ns = 10'000;
  a.ev_config.probe_max_ns = 10'000;
  ASSERT_TRUE(q.ep.modify_qp(second, a, kAttrState | kAttrEvProfile, 0).ok());
  a = QpAttr{};
  a.state = QpState::kRtr;
  a.dest_qpn = 88;
  a.path_mtu = 1024;
  ASSERT_TRUE(
      q.ep.modify_qp(second, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn, 0).ok());
  a.state = QpState::kRts;
  ASSERT_TRUE(q.ep.modify_qp(second, a, kAttrState | kAttrSqPsn, 0).ok());
  ASSERT_TRUE(q.write(1, 0, 40 * 1024).ok());
  WriteRequest wr;
  wr.local_addr = OneQp::kVa;
  wr.length = 40 * 1024;
  wr.lkey = q.key;
  ASSERT_TRUE(q.ep.post_write(second, wr).ok());
  TxPacket out[64];
  ASSERT_EQ(q.ep.poll_tx(out, 64, 0), 64u);
  size_t to_first = 0;
  for (const TxPacket& p : out) to_first += p.t.dest_qpn == 77;
  EXPECT_EQ(to_first, 32u) << "bursts of kQpTxBurst, alternating";
  for (size_t i = 0; i < kQpTxBurst; ++i) EXPECT_EQ(out[i].t.dest_qpn, out[0].t.dest_qpn);
  EXPECT_NE(out[kQpTxBurst].t.dest_qpn, out[0].t.dest_qpn);
}

TEST(Sack, SendsCompleteInPostOrderOnceEveryPacketIsAcknowledged) {
  OneQp q;
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(q.write(i, 0, 100).ok());
  WriteRequest unsignaled;
  unsignaled.wr_id = 4;
  unsignaled.local_addr = OneQp::kVa;
  unsignaled.length = 8;
  unsignaled.lkey = q.key;
  unsignaled.signaled = false;
  ASSERT_TRUE(q.ep.post_write(q.qpn, unsignaled).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 4u);
  q.ep.on_packet(q.ack(100, 102, tx[2].ev, {101, 102, 103}), 0, 1000);
  EXPECT_TRUE(q.completions().empty()) << "the first request is not acknowledged yet";
  q.ep.on_packet(q.ack(101, 100, tx[0].ev), 0, 2000);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 3u);  // the unsignaled one completes silently
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i].wr_id, i + 1);
    EXPECT_EQ(c[i].status, WcStatus::kSuccess);
    EXPECT_EQ(c[i].opcode, WcOpcode::kWrite);
    EXPECT_EQ(c[i].byte_len, 100u);
  }
  EXPECT_EQ(q.qp().counters().send_completions, 4u);
  EXPECT_EQ(q.qp().snd_una(), 104u);
}

TEST(Sack, SelectivelyAcknowledgedPacketsAreNeverResent) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 6 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 6u);
  q.ep.on_packet(q.ack(100, 105, tx[5].ev, {101, 102, 103, 104, 105}), 0, 1000);
  const TimeNs rto = q.ep.next_wakeup();
  const auto resent = data_only(q.tx(std::max<TimeNs>(rto, 1'048'576)));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].t.psn, 100u);
}

// The packet that fills the oldest hole came the slowest way: its sample
// must count, or the RTT and the reorder window see only the fast paths.
TEST(Rtt, ThePacketThatMovesTheCumulativeAckIsSampledToo) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 2u);
  q.ep.on_packet(q.ack(100, 101, tx[1].ev, {101}), 0, 3'000);
  EXPECT_EQ(q.qp().srtt_ns(), 3'000u);
  q.ep.on_packet(q.ack(102, 100, tx[0].ev), 0, 9'000);
  EXPECT_EQ(q.qp().snd_una(), 102u);
  EXPECT_EQ(q.qp().rtt_max_ns(), 9'000u);
  EXPECT_EQ(q.qp().srtt_ns(), (7 * 3'000u + 9'000u) / 8);
}

// Eight later transmissions acknowledged (the default reorder threshold),
// and the packet older than the reorder window (1.25 smoothed RTT).
TEST(Sack, HoleIsResentOnceOvertakenByEnoughLaterPacketsAndOlderThanTheReorderWindow) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 10 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 10u);
  std::vector<uint32_t> later;
  for (uint32_t p = 101; p < 110; ++p) later.push_back(p);
  q.ep.on_packet(q.ack(100, 109, tx[9].ev, later), 0, 4'000);  // RTT sample: 4 us
  EXPECT_EQ(q.qp().srtt_ns(), 4'000u);
  EXPECT_TRUE(q.tx(4'000).empty()) << "still inside the reorder window";
  // The window: rtt_max + kInitialReorderMult quarters of srtt = 4 + 4 us.
  EXPECT_EQ(q.ep.next_wakeup(), 8'000u);
  EXPECT_TRUE(q.tx(7'999).empty());
  const auto resent = q.tx(8'000);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].t.psn, 100u);
  EXPECT_NE(resent[0].ev, tx[0].ev) << "never on the EV that lost it";
  EXPECT_EQ(resent[0].t.mth_flags, wire::kMthRetransmit);
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kSack)], 1u);
  EXPECT_EQ(q.qp().evs().state(tx[0].ev), EvState::kAssumedBad);
  const auto ev = q.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, EventType::kEvStateChange);
  EXPECT_EQ(ev[0].ev.ev, tx[0].ev);
  EXPECT_EQ(ev[0].ev.new_state, EvState::kAssumedBad);
}

// Two Writes of 4 packets, sent at 0 and 3 us over 2 planes x 2 EVs: the
// EV of PSN 100 (`dead`) carries one packet of the second too (`young`);
// `acked` are the second's others.
struct TwoBatches {
  OneQp q;
  std::vector<TxPacket> first, second;
  uint32_t dead = 0;
  uint32_t young = 0;
  std::vector<uint32_t> acked;

  void send() {
    ASSERT_TRUE(q.write(1, 0, 4 * 1024).ok());
    first = q.tx(0);
    ASSERT_EQ(first.size(), 4u);
    ASSERT_TRUE(q.write(2, 0, 4 * 1024).ok());
    second = q.tx(3'000);
    ASSERT_EQ(second.size(), 4u);
    dead = first[0].ev;
    for (const TxPacket& p : second) {
      if (p.ev == dead)
        young = p.t.psn;
      else
        acked.push_back(p.t.psn);
    }
    ASSERT_NE(young, 0u);
  }
};

// A loss that takes its EV out of use resends, with it, whatever else on
// that EV was overtaken, however young: the path is taken for broken.
TEST(Sack, LossThatBlacklistsAnEvResendsTheOvertakenPacketsOnItAtOnce) {
  TwoBatches b;
  ASSERT_NO_FATAL_FAILURE(b.send());
  auto& [q, first, second, dead, young, acked] = b;
  q.ep.on_packet(q.ack(100, 103, first[3].ev, {101, 102, 103}), 0, 4'000);  // RTT 4 us
  q.ep.on_packet(q.ack(100, acked.back(), second.back().ev, acked), 0, 6'000);
  // PSN 100 leaves the reorder window at 0 + 4 + 4 * 3.875 / 4 us; the
  // young packet, sent at 3 us, would stay in it until 10.875 us.
  const TimeNs deadline = q.ep.next_wakeup();
  ASSERT_LT(deadline, 8'000u);
  const auto resent = q.tx(deadline);
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_EQ(resent[0].t.psn, 100u);
  EXPECT_EQ(resent[1].t.psn, young);
  EXPECT_EQ(q.qp().evs().state(dead), EvState::kAssumedBad);
  EXPECT_EQ(q.qp().evs().counters(dead).losses, 1u) << "one loss blamed it";
}

// A packet on an EV found broken is lost as soon as it is overtaken, without
// waiting out the reorder window.
TEST(Sack, OvertakenPacketOnAnAssumedBadEvIsResentWithoutWaitingForTheWindow) {
  TwoBatches b;
  ASSERT_NO_FATAL_FAILURE(b.send());
  auto& [q, first, second, dead, young, acked] = b;
  q.ep.on_packet(q.ack(100, 103, first[3].ev, {101, 102, 103}), 0, 4'000);  // RTT 4 us
  const auto resent = q.tx(q.ep.next_wakeup());  // 100 leaves the window: its EV is found broken
  ASSERT_EQ(resent.size(), 1u) << "the young packet was not overtaken yet";
  EXPECT_EQ(resent[0].t.psn, 100u);
  ASSERT_EQ(q.qp().evs().state(dead), EvState::kAssumedBad);
  acked.insert(acked.begin(), resent[0].t.psn);
  q.ep.on_packet(q.ack(100, acked.back(), second.back().ev, acked), 0, 8'500);
  // The window would keep it (sent at 3 us) until after 10 us.
  const auto now_lost = q.tx(8'500);
  ASSERT_EQ(now_lost.size(), 1u);
  EXPECT_EQ(now_lost[0].t.psn, young);
}

TEST(Sack, HoleOvertakenByTooFewPacketsWaitsForTheTailProbe) {
  OneQpConfig cfg;  // ack_delay 4 us
  cfg.tuning.reorder_threshold = 8;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 8 * 1024).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(100, 107, tx[7].ev, {101, 102, 103, 104, 105, 106, 107}), 0, 4'000);
  // srtt = rtt_max = 4 us: the probe timeout is 2 x 4 + 4 us after the ACK.
  EXPECT_EQ(q.ep.next_wakeup(), 16'000u);
  EXPECT_TRUE(q.tx(15'999).empty());
  const auto probe = q.tx(16'000);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].t.psn, 100u);
  EXPECT_NE(probe[0].ev, tx[0].ev);
  EXPECT_EQ(q.qp().evs().state(tx[0].ev), EvState::kGood) << "a probe blames no EV";
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kTailProbe)], 1u);
  EXPECT_EQ(q.ep.next_wakeup(), 40'000u) << "a second probe after twice the timeout";
  const auto second = q.tx(40'000);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].t.psn, 100u);
  EXPECT_NE(second[0].ev, probe[0].ev);
  EXPECT_TRUE(q.tx(100'000).empty()) << "two probes until progress";
  EXPECT_EQ(q.ep.next_wakeup(), 4'000u + 1'048'576u)
      << "then the retransmit timer, re-armed by the last progress";
}

TEST(Sack, TailProbesLostWithTheirAcksEndInTheRetransmitTimeout) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev), 0, 4'000);
  ASSERT_EQ(q.tx(16'000).size(), 1u) << "the first tail probe of 101";
  ASSERT_EQ(q.tx(40'000).size(), 1u) << "the second";
  EXPECT_EQ(q.qp().counters().timeouts, 0u);
  const auto resent = q.tx(4'000 + 1'048'576);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].t.psn, 101u);
  EXPECT_EQ(q.qp().counters().timeouts, 1u);
}

// A Write of two packets whose first alone is acknowledged (at 4 us), and
// the tail probe that stands in for the second when feedback went quiet.
struct TailProbe {
  OneQp q;
  std::vector<TxPacket> tx, probe;

  void send() {
    ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
    tx = q.tx(0);
    q.ep.on_packet(q.ack(101, 100, tx[0].ev), 0, 4'000);
    probe = q.tx(16'000);
    ASSERT_EQ(probe.size(), 1u);
  }
};

TEST(Sack, TailProbeThatWasNewsToTheResponderBlamesTheEvOfWhatItReplaced) {
  TailProbe t;
  ASSERT_NO_FATAL_FAILURE(t.send());
  auto& [q, tx, probe] = t;
  EXPECT_EQ(q.qp().evs().state(tx[1].ev), EvState::kGood) << "not blamed for going quiet";
  q.ep.on_packet(q.ack(102, 101, probe[0].ev), 0, 20'000);
  EXPECT_EQ(q.qp().evs().state(tx[1].ev), EvState::kAssumedBad) << "the original was lost";
  EXPECT_EQ(q.qp().evs().state(probe[0].ev), EvState::kGood);
  ASSERT_EQ(q.completions().size(), 1u);
}

TEST(Sack, DuplicateAnsweringATailProbeDoesNotWidenTheReorderWindow) {
  TailProbe t;
  ASSERT_NO_FATAL_FAILURE(t.send());
  auto& [q, tx, probe] = t;
  // The original arrived and only its ACK was lost: the probe is a duplicate.
  q.ep.on_packet(q.ack(102, 101, probe[0].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 20'000);
  EXPECT_EQ(q.qp().counters().duplicate_feedback, 1u);
  EXPECT_EQ(q.qp().reorder_mult(), kInitialReorderMult);
  EXPECT_EQ(q.qp().evs().state(tx[1].ev), EvState::kGood) << "only its ACK was lost";
  ASSERT_EQ(q.completions().size(), 1u);
}

// The original's ACK came first and ended the probe episode; the probe's
// duplicate, arriving after it, is still no lesson about reordering.
TEST(Sack, DuplicateOfATailProbeAfterProgressDoesNotWidenTheReorderWindow) {
  TailProbe t;
  ASSERT_NO_FATAL_FAILURE(t.send());
  auto& [q, tx, probe] = t;
  q.ep.on_packet(q.ack(102, 101, tx[1].ev), 0, 18'000);
  ASSERT_EQ(q.completions().size(), 1u);
  q.ep.on_packet(q.ack(102, 101, probe[0].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 20'000);
  EXPECT_EQ(q.qp().counters().duplicate_feedback, 1u);
  EXPECT_EQ(q.qp().reorder_mult(), kInitialReorderMult);
}

// RACK's DSACK rounds: the duplicates of one round trip widen the reorder
// window once; a duplicate after the cumulative ACK passed what was in
// flight then widens it again.
TEST(Sack, DuplicatesWidenTheReorderWindowOncePerRoundTrip) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 4 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 4u);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 4'000);
  q.ep.on_packet(q.ack(102, 101, tx[1].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 4'100);
  q.ep.on_packet(q.ack(103, 102, tx[2].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 4'200);
  EXPECT_EQ(q.qp().counters().duplicate_feedback, 3u);
  EXPECT_EQ(q.qp().reorder_mult(), kInitialReorderMult + 1);
  q.ep.on_packet(q.ack(104, 103, tx[3].ev), 0, 4'300);  // the round is over
  ASSERT_TRUE(q.write(2, 0, 2 * 1024).ok());
  const auto next = q.tx(5'000);
  ASSERT_EQ(next.size(), 2u);
  q.ep.on_packet(q.ack(105, 104, next[0].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 9'000);
  EXPECT_EQ(q.qp().reorder_mult(), kInitialReorderMult + 2);
}

// And forgets it a step per 16 round trips without a duplicate, down to
// where it started.
TEST(Sack, ReorderWindowNarrowsBackAfterSixteenRoundTripsWithoutDuplicates) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev, {}, NackCode::kNone, wire::kFbDuplicate), 0, 4'000);
  ASSERT_EQ(q.qp().reorder_mult(), kInitialReorderMult + 1);
  q.ep.on_packet(q.ack(102, 101, tx[1].ev), 0, 4'100);  // round trip 1
  TimeNs now = 5'000;
  for (uint32_t round = 2; round <= 17; ++round, now += 1'000) {
    ASSERT_TRUE(q.write(round, 0, 1024).ok());
    const auto one = q.tx(now);
    ASSERT_EQ(one.size(), 1u);
    q.ep.on_packet(q.ack(psn_add(one[0].t.psn, 1), one[0].t.psn, one[0].ev), 0, now + 500);
    EXPECT_EQ(q.qp().reorder_mult(), kInitialReorderMult + (round < 16 ? 1 : 0)) << round;
  }
}

// A SACK bit for a PSN never sent voids the feedback as a cumulative PSN
// would: it is not about this connection's packets, and none of it (here
// the bit for 101, which was sent) is trusted. Bits for PSNs already
// acknowledged are not suspect: a late ACK names them.
TEST(Sack, ASackBitForAPsnNeverSentVoidsTheWholeFeedback) {
  OneQpConfig cfg;
  cfg.sq_psn = 0xfffffe;  // 0xfffffe, 0xffffff, 0: the check holds across the wrap
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 3 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 3u);
  ASSERT_EQ(q.qp().inflight_bytes(), 3u * 1024);
  for (const uint32_t unsent : {1u, psn_add(0xfffffe, 127)}) {
    q.ep.on_packet(q.ack(0xfffffe, 0xffffff, tx[1].ev, {0xffffff, unsent}), 0, 1'000);
    EXPECT_EQ(q.qp().inflight_bytes(), 3u * 1024) << "SACK of " << unsent;
  }
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);

  q.ep.on_packet(q.ack(0xfffffe, 0xffffff, tx[1].ev, {0xffffff}), 0, 2'000);
  EXPECT_EQ(q.qp().inflight_bytes(), 2u * 1024);
  wire::PacketView late = q.ack(1, 0, tx[2].ev);
  late.t.fb.sack_base = 0xfffffe;
  late.t.fb.sack_bitmap[0] = 0b111;  // all sent; 0xfffffe was not yet acknowledged
  q.ep.on_packet(late, 0, 3'000);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
  EXPECT_EQ(q.qp().snd_una(), 1u);
  ASSERT_EQ(q.completions().size(), 1u);
  q.ep.on_packet(late, 0, 4'000);  // now every bit is below snd_una: a stale copy
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
}

TEST(Sack, AcknowledgementOfAPsnNeverSentIsIgnored) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 100).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(150, 100, tx[0].ev), 0, 1000);
  EXPECT_TRUE(q.completions().empty());
  EXPECT_EQ(q.qp().counters().feedback_ignored, 1u);
  EXPECT_EQ(q.qp().snd_una(), 100u);
}

TEST(Trim, TrimNackResendsThatPsnAtOnceOnAnotherEvWithoutBlamingTheEv) {
  OneQpConfig cfg;
  cfg.cc.algorithm = CcAlgorithm::kNscc;
  cfg.cc.nscc = default_nscc_params(100'000'000'000ull, 10'000, cfg.mtu);
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 4 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 4u);
  q.ep.on_packet(q.ack(100, 101, tx[1].ev, {}, NackCode::kTrimmed), 0, 3'000);
  const auto resent = q.tx(3'000);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].t.psn, 101u);
  EXPECT_NE(resent[0].ev, tx[1].ev);
  EXPECT_EQ(q.qp().evs().state(tx[1].ev), EvState::kGood) << "a trim says congestion";
  EXPECT_EQ(q.qp().evs().counters(tx[1].ev).trims, 1u);
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kTrim)], 1u);
  EXPECT_EQ(q.qp().counters().nacks_rx[size_t(NackCode::kTrimmed)], 1u);
  EXPECT_EQ(q.qp().cc().counters().trims, 1u);
}

TEST(Trim, TrimNackAboutAnOlderCopyIsIgnored) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(100, 101, tx[1].ev, {}, NackCode::kTrimmed), 0, 3'000);
  const auto resent = q.tx(3'000);
  ASSERT_EQ(resent.size(), 1u);
  // A second NACK echoing the first copy's EV refers to the copy already resent.
  q.ep.on_packet(q.ack(100, 101, tx[1].ev, {}, NackCode::kTrimmed), 0, 4'000);
  EXPECT_TRUE(q.tx(4'000).empty());
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kTrim)], 1u);
}

TEST(Timeout, RetransmitTimerResendsEverythingUnacknowledgedAndBlamesTheEvs) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 3 * 1024).ok());
  const auto tx = q.tx(0);
  EXPECT_EQ(q.ep.next_wakeup(), ack_timeout_ns(10));
  EXPECT_TRUE(q.tx(ack_timeout_ns(10) - 1).empty());
  const auto resent = data_only(q.tx(ack_timeout_ns(10)));
  ASSERT_EQ(resent.size(), 3u);
  std::set<uint32_t> psns;
  for (const TxPacket& p : resent) psns.insert(p.t.psn);
  EXPECT_EQ(psns, (std::set<uint32_t>{100, 101, 102}));
  EXPECT_EQ(q.qp().counters().timeouts, 1u);
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kTimeout)], 3u);
  EXPECT_EQ(q.qp().retries(), 1u);
}

TEST(Timeout, RetransmitsOfADestroyedQpStayCounted) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 3 * 1024).ok());
  q.tx(0);
  ASSERT_EQ(data_only(q.tx(ack_timeout_ns(10))).size(), 3u);
  EXPECT_EQ(q.ep.counters().destroyed_qp_retransmits, 0u);
  ASSERT_TRUE(q.ep.destroy_qp(q.qpn).ok());
  EXPECT_EQ(q.ep.counters().destroyed_qp_retransmits, 3u);
}

// With linear = 2 and exponential = 2 the timer waits B, B, then 2B, 4B
// (four retries), and the fifth timeout, 8B later at 16B, ends the QP.
TEST(Timeout, LinearRetriesThenExponentialBackoffThenRetryExceeded) {
  OneQpConfig cfg;
  cfg.timeout = 0;  // B = 1024 ns
  cfg.retry_linear = 2;
  cfg.retry_exp = 2;
  cfg.probe_initial_ns = 1'000'000;  // keep probes out of the way
  cfg.probe_max_ns = 1'000'000;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 64).ok());
  ASSERT_TRUE(q.write(2, 0, 64).ok());
  ASSERT_EQ(q.tx(0).size(), 2u);
  std::vector<TimeNs> resends;
  for (int i = 0; i < 10 && q.qp().state() == QpState::kRts; ++i) {
    const TimeNs t = q.ep.next_wakeup();
    if (!data_only(q.tx(t)).empty()) resends.push_back(t);
  }
  EXPECT_EQ(resends, (std::vector<TimeNs>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(q.qp().state(), QpState::kError);
  EXPECT_EQ(q.qp().counters().timeouts, 5u);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(c[1].status, WcStatus::kFlushed);
  bool error_event = false;
  for (const Event& e : q.events())
    error_event |= e.type == EventType::kQpError && e.status == WcStatus::kRetryExceeded;
  EXPECT_TRUE(error_event);
}

TEST(Timeout, ExponentialCountOfTwentyFiveRetriesForever) {
  OneQpConfig cfg;
  cfg.timeout = 0;
  cfg.retry_linear = 0;
  cfg.retry_exp = kRetryExpUnlimited;
  cfg.probe_initial_ns = cfg.probe_max_ns = kMaxEvTimerNs;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 64).ok());
  q.tx(0);
  TimeNs last = 0;
  TimeNs gap = 0;
  int resends = 0;
  while (resends < 40) {  // probes (at most one a minute) come in between
    const TimeNs t = q.ep.next_wakeup();
    ASSERT_NE(t, kNever);
    if (!data_only(q.tx(t)).empty()) {
      gap = t - last;
      last = t;
      ++resends;
    }
  }
  EXPECT_EQ(q.qp().state(), QpState::kRts);
  EXPECT_EQ(gap, TimeNs{1024} << 25) << "the backoff stops doubling";
}

TEST(Timeout, ProgressResetsTheRetryCount) {
  OneQpConfig cfg;
  cfg.timeout = 0;
  cfg.retry_linear = 1;
  cfg.retry_exp = 1;
  OneQp q(cfg);
  ASSERT_TRUE(q.write(1, 0, 2 * 1024).ok());
  const auto tx = q.tx(0);
  q.tx(1024);
  q.tx(2048 + 1024);
  EXPECT_EQ(q.qp().retries(), 2u);
  q.ep.on_packet(q.ack(101, 100, q.qp().evs().size()), 0, 3'500);
  EXPECT_EQ(q.qp().retries(), 0u);
  EXPECT_EQ(q.ep.next_wakeup(), 3'500u + 1024);
  q.tx(4'524);
  EXPECT_EQ(q.qp().state(), QpState::kRts);
  EXPECT_EQ(q.qp().retries(), 1u);
}

TEST(Nack, RemoteAccessNackFailsThatRequestAndFlushesTheRest) {
  OneQp q;
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(q.write(i, 0, 100).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev), 0, 1000);
  q.ep.on_packet(q.ack(101, 101, tx[1].ev, {}, NackCode::kRemoteAccess), 0, 1100);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].wr_id, 2u);
  EXPECT_EQ(c[1].status, WcStatus::kRemoteAccessError);
  EXPECT_EQ(c[2].status, WcStatus::kFlushed);
  EXPECT_EQ(q.qp().state(), QpState::kError);
}

TEST(Nack, ARefusalNamingNoPsnInFlightIsAStrayAndIgnored) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 100).ok());
  const auto tx = q.tx(0);
  for (NackCode code : {NackCode::kRemoteAccess, NackCode::kInvalidRequest})
    q.ep.on_packet(q.ack(100, 5'000, tx[0].ev, {}, code), 0, 1000);
  EXPECT_EQ(q.qp().state(), QpState::kRts);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
  EXPECT_TRUE(q.completions().empty());
}

// A QP_GONE names the QP that is gone in its echo tag: OneQp's peer QP.
constexpr uint32_t kGoneQpn = OneQpConfig{}.dest_qpn;

TEST(Nack, QpGoneFailsTheFirstUnackedRequestWithRemoteOperationalError) {
  OneQp q;
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(q.write(i, 0, 100).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev), 0, 1000);
  q.ep.on_packet(q.ack(101, 101, kGoneQpn, {}, NackCode::kQpGone), 0, 1100);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].status, WcStatus::kRemoteOperationalError);
  EXPECT_EQ(c[2].status, WcStatus::kFlushed);
  EXPECT_EQ(q.qp().state(), QpState::kError);
}

TEST(Nack, QpGoneForAPsnThisQpCouldNotHaveSentIsIgnored) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 100).ok());
  q.tx(0);                                                                   // PSN 100 outstanding
  q.ep.on_packet(q.ack(100, 99, kGoneQpn, {}, NackCode::kQpGone), 0, 1000);  // before it
  q.ep.on_packet(q.ack(100, 5000, kGoneQpn, {}, NackCode::kQpGone), 0, 1100);  // never sent
  EXPECT_EQ(q.qp().state(), QpState::kRts);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
  EXPECT_TRUE(q.completions().empty());
  q.ep.on_packet(q.ack(100, 101, kGoneQpn, {}, NackCode::kQpGone), 0,
                 1200);  // all sent, none acked
  EXPECT_EQ(q.qp().state(), QpState::kError);
}

// A QP in RTR has sent nothing: the notice's SACK base (the PSN the peer
// would have sent next) must lie in its receive window or just past it.
TEST(Nack, QpGoneFailsAQpThatOnlyReceivesIfThePeerCouldHaveSentThatFar) {
  OneQpConfig cfg;
  cfg.last = QpState::kRtr;
  OneQp q(cfg);  // expects PSN 500 next
  ASSERT_EQ(q.qp().state(), QpState::kRtr);
  ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{7}).ok());
  const uint32_t window = uint32_t{cfg.mpr} * kMprUnitPsns;
  const auto gone = [&](uint32_t next_psn) {
    wire::PacketView pv = q.ack(500, 500, kGoneQpn, {}, NackCode::kQpGone);
    pv.t.fb.sack_base = next_psn;
    return pv;
  };
  q.ep.on_packet(gone(499), 0, 1000);               // before what it expects
  q.ep.on_packet(gone(500 + window + 1), 0, 1100);  // past anything it could accept
  EXPECT_EQ(q.qp().state(), QpState::kRtr);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
  EXPECT_TRUE(q.completions().empty());
  q.ep.on_packet(gone(500 + window), 0, 1200);  // the whole window sent, none arrived
  EXPECT_EQ(q.qp().state(), QpState::kError);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[0].status, WcStatus::kFlushed);
  const auto ev = q.events();
  EXPECT_TRUE(std::any_of(ev.begin(), ev.end(), [](const Event& e) {
    return e.type == EventType::kQpError && e.status == WcStatus::kRemoteOperationalError;
  }));
}

// A late notice from another QP, or from another endpoint, must not fail
// this one, whatever its PSNs: in RTS and in RTR alike.
TEST(Nack, QpGoneNamingAnotherQpOrFromAnotherEndpointIsIgnored) {
  for (const QpState last : {QpState::kRts, QpState::kRtr}) {
    SCOPED_TRACE(last == QpState::kRts ? "RTS" : "RTR");
    OneQpConfig cfg;
    cfg.last = last;
    OneQp q(cfg);
    if (last == QpState::kRts) {
      ASSERT_TRUE(q.write(1, 0, 100).ok());
      q.tx(0);  // PSN 100 outstanding
    }
    wire::PacketView gone = q.ack(100, 100, kGoneQpn + 1, {}, NackCode::kQpGone);
    gone.t.fb.sack_base = 500;      // what the RTR QP expects next
    q.ep.on_packet(gone, 0, 1000);  // another QP of the peer's
    gone.t.fb.echo_tag = kGoneQpn;
    q.ep.on_packet(gone, 0, 1100, /*src_peer=*/8);  // the QP, of another endpoint
    EXPECT_EQ(q.qp().state(), last);
    EXPECT_EQ(q.qp().counters().feedback_ignored, 2u);
    EXPECT_EQ(q.qp().counters().nacks_rx[size_t(NackCode::kQpGone)], 0u);
    q.ep.on_packet(gone, 0, 1200, /*src_peer=*/9);  // the peer's
    EXPECT_EQ(q.qp().state(), QpState::kError);
    EXPECT_EQ(q.qp().counters().nacks_rx[size_t(NackCode::kQpGone)], 1u);
  }
}

// The QP_GONE NACKs of aborted QP `qpn` among `tx`, each checked for what
// the peer needs to match it to the QP it was connected to.
size_t gone_notices(const std::vector<TxPacket>& tx, uint32_t qpn) {
  size_t n = 0;
  for (const TxPacket& p : tx) {
    if (p.t.opcode != Opcode::kNack || p.t.fb.code != NackCode::kQpGone) continue;
    EXPECT_EQ(p.peer, 9u);
    EXPECT_EQ(p.t.dest_qpn, kGoneQpn);
    EXPECT_EQ(p.t.fb.echo_tag, qpn);
    EXPECT_EQ(p.t.fb.ref_psn, 500u);    // what it expected next
    EXPECT_EQ(p.t.fb.sack_base, 100u);  // what it would have sent next
    ++n;
  }
  return n;
}

// In case every copy of the notice is lost, it goes out again after the
// QP's ACK timeout and then at doubling intervals, kGoneNoticeResends
// times, on every up plane.
TEST(Nack, AbortedQpResendsItsNoticeAtDoublingIntervalsThenStops) {
  OneQp q;
  const TimeNs rto = ack_timeout_ns(q.config().timeout);
  const uint32_t qpn = q.qpn;
  ASSERT_TRUE(q.ep.abort_qp(qpn, 1000).ok());
  EXPECT_EQ(gone_notices(q.tx(1000), qpn), 2u);
  TimeNs at = 1000, interval = rto;
  for (int i = 0; i < kGoneNoticeResends; ++i) {
    SCOPED_TRACE(i);
    at += interval;
    EXPECT_EQ(q.ep.next_wakeup(), at);
    EXPECT_EQ(gone_notices(q.tx(at - 1), qpn), 0u);
    EXPECT_EQ(gone_notices(q.tx(at), qpn), 2u);
    interval *= 2;
  }
  EXPECT_EQ(q.ep.next_wakeup(), kNever);
  EXPECT_EQ(gone_notices(q.tx(at + 100 * interval), qpn), 0u);
  EXPECT_EQ(q.ep.counters().qp_gone_tx, 2u * (1 + kGoneNoticeResends));
}

// Taking the QPN of an aborted QP whose notices still go out would end
// them: create_qp takes it only when no other QPN is free.
TEST(Nack, AQpnStillSendingNoticesIsTakenLast) {
  OneQp q;  // room for two QPs
  const TimeNs rto = ack_timeout_ns(q.config().timeout);
  const uint32_t gone = q.qpn;
  ASSERT_TRUE(q.ep.abort_qp(gone, 0).ok());
  EXPECT_EQ(gone_notices(q.tx(0), gone), 2u);
  uint32_t first = 0, second = 0;
  ASSERT_TRUE(q.ep.create_qp(&first).ok());
  EXPECT_NE(first, gone);
  EXPECT_EQ(gone_notices(q.tx(rto), gone), 2u);  // still sent
  ASSERT_TRUE(q.ep.create_qp(&second).ok());
  EXPECT_EQ(second, gone);
  EXPECT_EQ(q.ep.next_wakeup(), kNever);
  EXPECT_EQ(gone_notices(q.tx(100 * rto), gone), 0u);
  EXPECT_EQ(q.ep.qp(second)->state(), QpState::kReset);
}

// softmrcd's shutdown: the QP stays (its work requests flush into the CQ)
// and its peer hears once; with the QPN in use no round follows.
TEST(Nack, AbandonedQpTellsItsPeerOnceAndFlushes) {
  OneQp q;
  ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{7}).ok());
  ASSERT_TRUE(q.ep.abandon_qp(q.qpn, 1000).ok());
  EXPECT_EQ(q.qp().state(), QpState::kError);
  EXPECT_EQ(gone_notices(q.tx(1000), q.qpn), 2u);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kFlushed);
  EXPECT_TRUE(q.tx(1000 + 1000 * ack_timeout_ns(q.config().timeout)).empty());
  EXPECT_EQ(q.ep.counters().qp_gone_tx, 2u);
  EXPECT_TRUE(q.ep.abandon_qp(q.qpn, 2000).ok());  // in ERROR already: nobody to tell
  EXPECT_EQ(q.ep.counters().qp_gone_tx, 2u);
}

// A QP never connected has no peer to tell.
TEST(Nack, AbortingAQpNeverConnectedSendsNothing) {
  Endpoint ep;
  ASSERT_TRUE(ep.init(EndpointConfig{}).ok());
  uint32_t qpn = 0;
  ASSERT_TRUE(ep.create_qp(&qpn).ok());
  ASSERT_TRUE(ep.abort_qp(qpn, 0).ok());
  EXPECT_EQ(ep.next_wakeup(), kNever);
  EXPECT_EQ(ep.counters().qp_gone_tx, 0u);
  EXPECT_FALSE(ep.abort_qp(qpn, 0).ok());
}

// The peer's answer to a probe of `ev` sent at `sent_ns` (echoed unchanged).
wire::PacketView probe_reply(const OneQp& q, uint32_t ev, TimeNs sent_ns) {
  wire::PacketView reply;
  reply.t.opcode = Opcode::kProbeReply;
  reply.t.dest_qpn = q.qpn;
  reply.t.probe.echo_tag = ev;
  reply.t.probe.t_send_ns = sent_ns;
  return reply;
}

// Ten packets out; the first is declared lost at 8 us, so its EV (*bad)
// goes ASSUMED_BAD, to be probed from 18 us; its resend is acknowledged at
// 9 us, leaving nothing in flight.
void lose_the_first_of_ten(OneQp& q, uint32_t* bad) {
  ASSERT_TRUE(q.write(1, 0, 10 * 1024).ok());
  const auto tx = q.tx(0);
  std::vector<uint32_t> later;
  for (uint32_t p = 101; p < 110; ++p) later.push_back(p);
  q.ep.on_packet(q.ack(100, 109, tx[9].ev, later), 0, 4'000);
  const auto resent = q.tx(8'000);
  *bad = tx[0].ev;
  ASSERT_EQ(q.qp().evs().state(*bad), EvState::kAssumedBad);
  ASSERT_EQ(resent.size(), 1u);
  q.ep.on_packet(q.ack(110, 100, resent[0].ev), 0, 9'000);
}

TEST(Probe, AssumedBadEvIsProbedWithBackoffAndAReplyRestoresIt) {
  OneQp q;  // probes after 10 us, then 20 us, ...
  uint32_t bad = kNoEv;
  ASSERT_NO_FATAL_FAILURE(lose_the_first_of_ten(q, &bad));

  EXPECT_EQ(q.ep.next_wakeup(), 18'000u);
  auto probes = q.tx(18'000);
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].t.opcode, Opcode::kProbeRequest);
  EXPECT_EQ(probes[0].ev, bad);
  EXPECT_EQ(probes[0].t.dest_qpn, 77u);
  EXPECT_EQ(probes[0].t.probe.t_send_ns, 18'000u);
  EXPECT_EQ(q.ep.next_wakeup(), 38'000u) << "the next probe waits twice as long";
  EXPECT_EQ(q.tx(38'000).size(), 1u);

  q.ep.on_packet(probe_reply(q, bad, probes[0].t.probe.t_send_ns), 0, 39'000);
  EXPECT_EQ(q.qp().evs().state(bad), EvState::kGood);
  EXPECT_EQ(q.qp().counters().probes_tx, 2u);
  EXPECT_EQ(q.qp().counters().probe_replies_rx, 1u);
  const auto ev = q.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].ev.old_state, EvState::kAssumedBad);
  EXPECT_EQ(ev[1].ev.new_state, EvState::kGood);
  EXPECT_EQ(q.qp().counters().ev_state_changes, 2u);
}

// A reply to a probe sent before its EV last went bad (late behind a
// queue, or a copy) says nothing of the path since: the EV stays out of
// use until a probe of this failure is answered.
TEST(Probe, AReplyToAProbeSentBeforeTheEvWentBadAgainIsIgnored) {
  OneQp q;
  uint32_t bad = kNoEv;
  ASSERT_NO_FATAL_FAILURE(lose_the_first_of_ten(q, &bad));

  q.ep.on_packet(probe_reply(q, bad, 7'999), 0, 10'000);  // a probe of before 8 us
  EXPECT_EQ(q.qp().evs().state(bad), EvState::kAssumedBad);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 1u);
  EXPECT_EQ(q.qp().counters().probe_replies_rx, 1u);

  const auto probes = q.tx(18'000);
  ASSERT_EQ(probes.size(), 1u);
  q.ep.on_packet(probe_reply(q, bad, probes[0].t.probe.t_send_ns), 0, 19'000);
  EXPECT_EQ(q.qp().evs().state(bad), EvState::kGood);
  EXPECT_EQ(q.qp().counters().feedback_ignored, 1u);
}

TEST(Plane, LocalPlaneDownStopsItsEvsAtOnceAndResendsWhatWasInFlightThere) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 4 * 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 4u);
  size_t on_plane0 = 0;
  for (const TxPacket& p : tx) on_plane0 += p.plane == 0;
  ASSERT_GT(on_plane0, 0u);
  q.ep.set_plane_up(0, false, 1'000);
  EXPECT_FALSE(q.qp().evs().plane_up(0));
  const auto out = q.tx(1'000);
  size_t status = 0, resent = 0;
  for (const TxPacket& p : out) {
    EXPECT_EQ(p.plane, 1);
    if (p.t.opcode == Opcode::kPortStatus) {
      ++status;
      EXPECT_EQ(p.t.port_status.port_mask, 0b10u);
      EXPECT_EQ(p.t.port_status.num_planes, 2);
    }
    resent += p.is_data;
  }
  EXPECT_EQ(status, 2u);
  EXPECT_EQ(resent, on_plane0);
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kPlaneDown)], on_plane0);
  EXPECT_EQ(q.qp().evs().state(tx[0].ev), EvState::kGood) << "a plane is not an EV's fault";
}

TEST(Plane, PeerPortStatusTakesItsPlanesOutOfUseAndOlderUpdatesAreIgnored) {
  OneQp q;
  auto status = [&](uint32_t mask, uint32_t seq) {
    wire::PacketView pv;
    pv.t.opcode = Opcode::kPortStatus;
    pv.t.dest_qpn = q.qpn;
    pv.t.port_status = wire::PortStatus{mask, seq, 2};
    q.ep.on_packet(pv, 1, 1'000);
  };
  status(0b10, 5);
  EXPECT_FALSE(q.qp().evs().plane_up(0));
  EXPECT_TRUE(q.qp().evs().plane_up(1));
  status(0b11, 4);
  EXPECT_FALSE(q.qp().evs().plane_up(0)) << "an older update";
  status(0b11, 6);
  EXPECT_TRUE(q.qp().evs().plane_up(0));
  EXPECT_EQ(q.qp().counters().port_status_rx, 2u);
}

TEST(Plane, PortStatusFromAnEndpointOtherThanThePeerIsIgnored) {
  OneQp q;
  wire::PacketView pv;
  pv.t.opcode = Opcode::kPortStatus;
  pv.t.dest_qpn = q.qpn;
  pv.t.port_status = wire::PortStatus{0, 7, 2};
  q.ep.on_packet(pv, 1, 1'000, q.qp().attr().peer + 1);
  EXPECT_TRUE(q.qp().evs().plane_up(0));
  EXPECT_TRUE(q.qp().evs().plane_up(1));
  EXPECT_EQ(q.qp().counters().feedback_ignored, 1u);
  q.ep.on_packet(pv, 1, 1'000, q.qp().attr().peer);
  EXPECT_FALSE(q.qp().evs().plane_up(0)) << "the peer's own";
}

TEST(Ecn, EcnEchoReachesTheEvSet) {
  OneQp q;
  ASSERT_TRUE(q.write(1, 0, 100).ok());
  const auto tx = q.tx(0);
  q.ep.on_packet(q.ack(101, 100, tx[0].ev, {}, NackCode::kNone, wire::kFbEcnEcho), 0, 2'000);
  EXPECT_EQ(q.qp().evs().counters(tx[0].ev).ecn_marks, 1u);
  EXPECT_EQ(q.qp().evs().counters(tx[0].ev).acked, 1u);
}

OneQpConfig nscc_config(uint32_t min_active) {
  OneQpConfig cfg;
  cfg.cc.algorithm = CcAlgorithm::kNscc;
  cfg.cc.nscc = default_nscc_params(100'000'000'000ull, 10'000, cfg.mtu);
  cfg.min_active = min_active;
  return cfg;
}

// Packet 100 is overtaken by 101..109 and declared lost.
void lose_first_packet(OneQp& q) {
  ASSERT_TRUE(q.write(1, 0, 10 * 1024).ok());
  const auto tx = q.tx(0);
  std::vector<uint32_t> later;
  for (uint32_t p = 101; p < 110; ++p) later.push_back(p);
  q.ep.on_packet(q.ack(100, 109, tx[9].ev, later), 0, 4'000);
  q.tx(8'000);  // past the reorder window
}

TEST(Cc, ALossThatBlacklistsItsEvIsAPathFailureNotCongestion) {
  OneQp q(nscc_config(1));
  lose_first_packet(q);
  EXPECT_EQ(q.qp().counters().retransmits[size_t(RetxCause::kSack)], 1u);
  EXPECT_EQ(q.qp().evs().usable_count(), 3u) << "the EV went ASSUMED_BAD";
  EXPECT_EQ(q.qp().cc().counters().losses, 0u);
}

TEST(Cc, LossesTheEvsCannotExplainAndTimeoutsReachTheCongestionController) {
  OneQp q(nscc_config(4));  // every EV must stay usable
  lose_first_packet(q);
  EXPECT_EQ(q.qp().evs().usable_count(), 4u);
  EXPECT_EQ(q.qp().cc().counters().losses, 1u);
  q.tx(q.ep.next_wakeup() + 2'000'000);
  EXPECT_EQ(q.qp().cc().counters().timeouts, 1u);
}

// A responder cannot hold a packet longer than its round trip took. A
// service time that says it did (a peer counting in the wrong unit) used
// to leave an RTT sample of 1 ns: the smoothed RTT collapsed, and NSCC's
// base RTT, which only ever ratchets down, stayed at 1 ns for good.
TEST(Rtt, AServiceTimeLongerThanTheRoundTripIsIgnored) {
  OneQp q(nscc_config(1));
  ASSERT_TRUE(q.write(1, 0, 1024).ok());
  const auto tx = q.tx(0);
  ASSERT_EQ(tx.size(), 1u);
  wire::PacketView ack = q.ack(101, 100, tx[0].ev, {}, NackCode::kNone, wire::kFbSvcTimeValid);
  ack.t.fb.service_time_ns = 15'000'000;  // 15 ms: microseconds taken for nanoseconds
  q.ep.on_packet(ack, 0, 15'000);
  EXPECT_EQ(q.qp().snd_una(), 101u);
  EXPECT_EQ(q.qp().srtt_ns(), 15'000u) << "the round trip as measured";
  EXPECT_EQ(q.qp().cc().base_rtt_ns(), 10'000u) << "the configured one, not 1 ns";
}

}  // namespace
}  // namespace softmrc::engine::test
