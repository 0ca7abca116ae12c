// The responder: placement in any order within the MPR window, duplicates
// and out-of-window packets, ACK coalescing and the immediate cases, SACK
// bitmaps (also across the PSN wrap), trim NACKs, WIMM completion order and
// the protocol errors. The test plays the requester by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/psn.h"
#include "one_qp.h"

namespace softmrc::engine::test {
namespace {

using wire::NackCode;
using wire::Opcode;

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), seed);
  return v;
}

std::vector<TxPacket> feedback(OneQp& q, TimeNs now) {
  std::vector<TxPacket> out;
  for (const TxPacket& p : q.tx(now))
    if (wire::is_feedback(p.t.opcode)) out.push_back(p);
  return out;
}

TEST(Responder, PlacesPacketsInAnyOrderWithinTheWindow) {
  OneQp q;
  const auto p0 = bytes(1024, 1), p1 = bytes(1024, 2), p2 = bytes(100, 3);
  q.ep.on_packet(q.data(502, Opcode::kWriteLast, 4096 + 2048, 2148, 2048, p2), 0, 10);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 4096, 2148, 0, p0), 1, 20);
  q.ep.on_packet(q.data(501, Opcode::kWriteMiddle, 4096 + 1024, 2148, 1024, p1), 0, 30);
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), q.mem.begin() + 4096));
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), q.mem.begin() + 4096 + 1024));
  EXPECT_TRUE(std::equal(p2.begin(), p2.end(), q.mem.begin() + 4096 + 2048));
  EXPECT_EQ(q.qp().epsn(), 503u);
  EXPECT_EQ(q.qp().counters().rx_data_packets, 3u);
  EXPECT_EQ(q.qp().counters().rx_data_bytes, 2148u);
}

// softmrcd makes each placement itself, while it checks the next packet's
// ICRC: the engine then accepts the packet but leaves the copy to it, and a
// packet it places nothing for leaves no copy.
TEST(Responder, ADeferredPlacementIsLeftToItsCaller) {
  OneQp q;
  const auto before = q.mem;
  const auto payload = bytes(100, 7);
  const wire::DeferredCopy stale{q.mem.data(), payload.data(), 1};
  wire::DeferredCopy d = stale;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 4096, 100, 0, payload), 0, 10, kUnknownPeer, &d);
  EXPECT_EQ(q.mem, before);
  EXPECT_EQ(d.dst, q.mem.data() + 4096);
  EXPECT_EQ(d.src, payload.data());
  EXPECT_EQ(d.len, 100u);
  EXPECT_EQ(q.qp().epsn(), 501u);
  EXPECT_EQ(q.qp().counters().rx_data_packets, 1u);

  d = stale;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 4096, 100, 0, payload), 0, 20, kUnknownPeer, &d);
  EXPECT_EQ(d.len, 0u) << "a duplicate";
  EXPECT_EQ(q.qp().counters().rx_duplicates, 1u);

  d = stale;
  const auto small = bytes(16, 1);
  wire::PacketView outside = q.data(501, Opcode::kWriteOnly, 0, 16, 0, small);
  outside.t.data.rkey += 1;
  q.ep.on_packet(outside, 0, 30, kUnknownPeer, &d);
  EXPECT_EQ(d.len, 0u) << "refused";
  EXPECT_EQ(q.qp().state(), QpState::kError);
  EXPECT_EQ(q.mem, before);
}

TEST(Responder, DuplicateIsDiscardedCountedAndAcknowledgedAtOnce) {
  OneQpConfig cfg;
  cfg.tuning.ack_every_packets = 16;
  OneQp q(cfg);
  const auto first = bytes(1024, 1), second = bytes(1024, 9);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 4096, 0, first), 0, 10);
  EXPECT_TRUE(feedback(q, 10).empty()) << "in order: coalesced";
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 4096, 0, second), 0, 20);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), q.mem.begin()));
  EXPECT_EQ(q.qp().counters().rx_duplicates, 1u);
  const auto fb = feedback(q, 20);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.opcode, Opcode::kAck);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 501u);
  EXPECT_TRUE(fb[0].t.fb.flags & wire::kFbDuplicate);
}

TEST(Responder, PacketBeyondTheWindowIsCountedNackedAndNotPlaced) {
  OneQp q;  // window: 8 * 128 PSNs from 500
  const auto before = q.mem;
  q.ep.on_packet(q.data(500 + 1024, Opcode::kWriteOnly, 0, 64, 0, bytes(64, 1)), 0, 10);
  EXPECT_EQ(q.mem, before);
  EXPECT_EQ(q.qp().counters().rx_out_of_window, 1u);
  const auto fb = feedback(q, 10);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.code, NackCode::kOutOfWindow);
  EXPECT_EQ(fb[0].t.fb.ref_psn, 1524u);
  q.ep.on_packet(q.data(500 + 1023, Opcode::kWriteOnly, 0, 64, 0, bytes(64, 1)), 0, 20);
  EXPECT_EQ(q.qp().counters().rx_data_packets, 1u) << "the last PSN of the window is inside";
}

TEST(Responder, InOrderPacketsAreAcknowledgedCoalesced) {
  OneQpConfig cfg;
  cfg.tuning.ack_every_packets = 4;
  cfg.tuning.ack_delay_ns = 3'000;
  OneQp q(cfg);
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 64 * 1024, 0, p), 0, 0);
  for (uint32_t i = 1; i < 3; ++i)
    q.ep.on_packet(q.data(500 + i, Opcode::kWriteMiddle, 1024 * i, 64 * 1024, 1024 * i, p), 0,
                   i * 100);
  EXPECT_TRUE(feedback(q, 300).empty());
  q.ep.on_packet(q.data(503, Opcode::kWriteMiddle, 3072, 64 * 1024, 3072, p), 1, 400);
  auto fb = feedback(q, 400);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 504u);
  EXPECT_EQ(fb[0].t.fb.ref_psn, 503u);
  EXPECT_EQ(fb[0].plane, 1) << "back on the plane the packet came in on";
  EXPECT_EQ(q.qp().counters().acks_tx, 1u);

  q.ep.on_packet(q.data(504, Opcode::kWriteMiddle, 4096, 64 * 1024, 4096, p), 0, 1'000);
  EXPECT_TRUE(feedback(q, 1'000).empty());
  EXPECT_EQ(q.ep.next_wakeup(), 4'000u) << "the delayed ACK";
  fb = feedback(q, 4'000);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 505u);
  EXPECT_EQ(fb[0].t.fb.service_time_ns, 3'000u) << "arrival to ACK";
  EXPECT_TRUE(fb[0].t.fb.flags & wire::kFbSvcTimeValid);
  EXPECT_EQ(q.ep.next_wakeup(), kNever);
}

TEST(Responder, GapIsAcknowledgedAtOnceWithTheSackBitmap) {
  OneQp q;
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 8192, 0, p), 0, 0);
  q.ep.on_packet(q.data(502, Opcode::kWriteMiddle, 2048, 8192, 2048, p), 0, 10);
  q.ep.on_packet(q.data(503, Opcode::kWriteMiddle, 3072, 8192, 3072, p), 0, 20);
  auto fb = feedback(q, 20);
  ASSERT_EQ(fb.size(), 2u);
  const wire::Feedback& f = fb[1].t.fb;
  EXPECT_EQ(f.cum_psn, 501u);
  EXPECT_EQ(f.ref_psn, 503u);
  EXPECT_EQ(f.sack_base, 501u);
  EXPECT_EQ(f.sack_bitmap[0], 0b110u);
  EXPECT_EQ(f.sack_bitmap[1], 0u);
  EXPECT_EQ(f.echo_tag, 3u);
  EXPECT_EQ(f.window_mpr, 8);
  // The hole fills: epsn jumps over everything already received.
  q.ep.on_packet(q.data(501, Opcode::kWriteMiddle, 1024, 8192, 1024, p), 0, 30);
  EXPECT_EQ(q.qp().epsn(), 504u);
}

TEST(Responder, SackBitmapEndsAtAReferencedPsnFarBeyondTheCumulativePoint) {
  OneQp q;
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(500 + 300, Opcode::kWriteMiddle, 0, 1 << 20, 0, p), 0, 0);
  const auto fb = feedback(q, 0);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 500u);
  EXPECT_EQ(fb[0].t.fb.sack_base, 800u - 127);
  EXPECT_EQ(fb[0].t.fb.sack_bitmap[0], 0u);
  EXPECT_EQ(fb[0].t.fb.sack_bitmap[1], uint64_t{1} << 63);
}

// With the window as large as the bitmap ring (MPR 8 = 1024 PSNs), the
// bitmap of a NACK for a PSN past the window's end reaches past it too, to
// ring positions that alias PSNs at the window's start: the packet received
// out of order at 502 must not show up there as 1526.
TEST(Responder, OutOfWindowNackSacksNothingBeyondTheWindow) {
  OneQp q;  // window [500, 1524), ring of 1024
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(502, Opcode::kWriteMiddle, 2048, 8192, 2048, p), 0, 0);
  ASSERT_EQ(feedback(q, 0).size(), 1u);
  q.ep.on_packet(q.data(500 + 1024 + 10, Opcode::kWriteMiddle, 0, 1 << 20, 0, p), 0, 10);
  const auto fb = feedback(q, 10);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.code, NackCode::kOutOfWindow);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 500u);
  EXPECT_EQ(fb[0].t.fb.sack_base, 1534u - 127);
  EXPECT_EQ(fb[0].t.fb.sack_bitmap[0], 0u);
  EXPECT_EQ(fb[0].t.fb.sack_bitmap[1], 0u);
}

TEST(Responder, SackBitmapIsRightAcrossThePsnWrap) {
  OneQpConfig cfg;
  cfg.rq_psn = 0xfffffe;
  OneQp q(cfg);
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(0xffffff, Opcode::kWriteMiddle, 1024, 8192, 1024, p), 0, 0);
  q.ep.on_packet(q.data(1, Opcode::kWriteMiddle, 3072, 8192, 3072, p), 0, 10);
  auto fb = feedback(q, 10);
  ASSERT_EQ(fb.size(), 2u);
  EXPECT_EQ(fb[1].t.fb.cum_psn, 0xfffffeu);
  EXPECT_EQ(fb[1].t.fb.sack_bitmap[0], 0b1010u);
  q.ep.on_packet(q.data(0xfffffe, Opcode::kWriteFirst, 0, 8192, 0, p), 0, 20);
  q.ep.on_packet(q.data(0, Opcode::kWriteMiddle, 2048, 8192, 2048, p), 0, 30);
  EXPECT_EQ(q.qp().epsn(), 2u);
}

TEST(Responder, PacketThatFillsTheOldestHoleIsAcknowledgedAtOnce) {
  OneQp q;  // ACK delay 4 us
  const auto p = bytes(1024, 0);
  // A two-packet message whose last packet overtook its first: the first
  // completes it, so its ACK must not wait for coalescing.
  q.ep.on_packet(q.data(501, Opcode::kWriteLast, 1024, 2048, 1024, p), 0, 0);
  ASSERT_EQ(feedback(q, 0).size(), 1u) << "the gap";
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 2048, 0, p), 0, 10);
  const auto fb = feedback(q, 10);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 502u);
  EXPECT_EQ(fb[0].t.fb.ref_psn, 500u);
}

TEST(Responder, InOrderPacketBehindNoHoleIsStillCoalesced) {
  OneQp q;
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 8192, 0, p), 0, 0);
  q.ep.on_packet(q.data(501, Opcode::kWriteMiddle, 1024, 8192, 1024, p), 0, 10);
  EXPECT_TRUE(feedback(q, 10).empty());
  EXPECT_EQ(q.ep.next_wakeup(), 4'000u);
}

TEST(Responder, LastPacketOfAMessageIsAcknowledgedAtOnce) {
  OneQp q;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 10, 0, bytes(10, 0)), 0, 0);
  const auto fb = feedback(q, 0);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 501u);
}

TEST(Responder, TrimmedPacketGetsATrimNackAndIsNotPlaced) {
  OneQp q;
  wire::PacketView pv = q.data(500, Opcode::kWriteFirst, 0, 4096, 0, {});
  pv.trimmed = true;
  pv.ecn = wire::kEcnCe;
  q.ep.on_packet(pv, 1, 0);
  const auto fb = feedback(q, 0);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.opcode, Opcode::kNack);
  EXPECT_EQ(fb[0].t.fb.code, NackCode::kTrimmed);
  EXPECT_EQ(fb[0].t.fb.ref_psn, 500u);
  EXPECT_EQ(fb[0].t.fb.echo_tag, 3u);
  EXPECT_TRUE(fb[0].t.fb.flags & wire::kFbEcnEcho);
  EXPECT_EQ(q.qp().epsn(), 500u);
  EXPECT_EQ(q.qp().counters().rx_trimmed, 1u);
  EXPECT_EQ(q.qp().counters().nacks_tx[size_t(NackCode::kTrimmed)], 1u);
}

TEST(Responder, TrimNacksCanBeSwitchedOff) {
  OneQpConfig cfg;
  cfg.tuning.trim_nack = false;
  OneQp q(cfg);
  wire::PacketView pv = q.data(500, Opcode::kWriteFirst, 0, 4096, 0, {});
  pv.trimmed = true;
  q.ep.on_packet(pv, 1, 0);
  EXPECT_TRUE(feedback(q, 0).empty());
  EXPECT_EQ(q.qp().counters().rx_trimmed, 1u);
}

TEST(Responder, CeMarksAreCountedAndEchoed) {
  OneQp q;
  wire::PacketView pv = q.data(500, Opcode::kWriteOnly, 0, 16, 0, bytes(16, 0));
  pv.ecn = wire::kEcnCe;
  const auto payload = bytes(16, 0);
  pv.payload = payload.data();
  q.ep.on_packet(pv, 0, 0);
  const auto fb = feedback(q, 0);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.ce_count, 1);
  EXPECT_TRUE(fb[0].t.fb.flags & wire::kFbEcnEcho);
  EXPECT_EQ(q.qp().counters().rx_ce, 1u);
}

TEST(Responder, WimmCompletesOnlyAfterEveryEarlierWriteIsPlaced) {
  OneQp q;
  ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{7}).ok());
  ASSERT_TRUE(q.ep.post_recv(q.qpn, RecvRequest{8}).ok());
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(502, Opcode::kWriteOnlyImm, 8192, 16, 0, bytes(16, 5), 0xabc), 0, 0);
  EXPECT_TRUE(q.completions().empty());
  q.ep.on_packet(q.data(501, Opcode::kWriteLast, 1024, 2048, 1024, p), 0, 10);
  EXPECT_TRUE(q.completions().empty()) << "the Write before it is not all placed";
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 2048, 0, p), 0, 20);
  const auto c = q.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRecvWriteImm);
  EXPECT_EQ(c[0].imm, 0xabcu);
  EXPECT_EQ(c[0].byte_len, 16u);
  EXPECT_EQ(c[0].qpn, q.qpn);
  EXPECT_EQ(q.qp().recv_queue_depth(), 1u);
}

TEST(Responder, WimmWithNoReceivePostedIsAProtocolError) {
  OneQp q;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnlyImm, 0, 16, 0, bytes(16, 5), 1), 0, 0);
  const auto fb = feedback(q, 0);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.code, NackCode::kInvalidRequest);
  EXPECT_EQ(q.qp().state(), QpState::kError);
  const auto ev = q.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, EventType::kQpError);
  EXPECT_EQ(ev[0].status, WcStatus::kRemoteInvalidRequest);
}

TEST(Responder, WriteOutsideARegionIsRefusedAndNothingIsWritten) {
  struct Case {
    const char* name;
    uint64_t va_delta;
    uint32_t rkey_delta;
  };
  for (const Case& c : {Case{"past the end", 64 * 1024 - 8, 0}, Case{"wrong key", 0, 1},
                        Case{"below the start", uint64_t(-8), 0}}) {
    SCOPED_TRACE(c.name);
    OneQp q;
    const auto before = q.mem;
    wire::PacketView pv = q.data(500, Opcode::kWriteOnly, 0, 16, 0, {});
    const auto payload = bytes(16, 1);
    pv.payload = payload.data();
    pv.payload_len = 16;
    pv.t.data.va += c.va_delta;
    pv.t.data.rkey += c.rkey_delta;
    q.ep.on_packet(pv, 0, 0);
    EXPECT_EQ(q.mem, before);
    const auto fb = feedback(q, 0);
    ASSERT_EQ(fb.size(), 1u);
    EXPECT_EQ(fb[0].t.fb.code, NackCode::kRemoteAccess);
    EXPECT_EQ(q.qp().state(), QpState::kError);
  }
}

TEST(Responder, MalformedDataPacketsAreRefused) {
  struct Case {
    const char* name;
    Opcode op;
    uint32_t msg_len, offset, len;
  };
  for (const Case& c : {Case{"past msg_len", Opcode::kWriteLast, 100, 64, 64},
                        Case{"first not at offset 0", Opcode::kWriteFirst, 4096, 1024, 1024},
                        Case{"last short of msg_len", Opcode::kWriteLast, 4096, 1024, 1024},
                        Case{"middle not a full MTU", Opcode::kWriteMiddle, 4096, 1024, 512},
                        Case{"over the MTU", Opcode::kWriteOnly, 2048, 0, 2048}}) {
    SCOPED_TRACE(c.name);
    OneQp q;
    const auto before = q.mem;
    q.ep.on_packet(q.data(500, c.op, 0, c.msg_len, c.offset, bytes(c.len, 1)), 0, 0);
    EXPECT_EQ(q.mem, before);
    const auto fb = feedback(q, 0);
    ASSERT_EQ(fb.size(), 1u);
    EXPECT_EQ(fb[0].t.fb.code, NackCode::kInvalidRequest);
  }
}

TEST(Responder, ProbeRequestsAreAnsweredOnTheirArrivalPlaneEvenForQpnZero) {
  OneQp q;
  wire::PacketView req;
  req.t.opcode = Opcode::kProbeRequest;
  req.t.dest_qpn = 0;
  req.t.path_tag = 0x55;
  req.t.probe.req_id = 9;
  req.t.probe.t_send_ns = 1234;
  q.ep.on_packet(req, 1, 5'000, /*src_peer=*/42);
  auto out = q.tx(5'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].t.opcode, Opcode::kProbeReply);
  EXPECT_EQ(out[0].peer, 42u);
  EXPECT_EQ(out[0].plane, 1);
  EXPECT_EQ(out[0].t.dest_qpn, 0u);
  EXPECT_EQ(out[0].t.probe.req_id, 9);
  EXPECT_EQ(out[0].t.probe.port, 1);
  EXPECT_EQ(out[0].t.probe.echo_tag, 0x55u);
  EXPECT_EQ(out[0].t.probe.t_send_ns, 1234u);
  EXPECT_FALSE(out[0].is_data);

  req.t.dest_qpn = q.qpn;
  q.ep.on_packet(req, 1, 6'000);
  out = q.tx(6'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, 9u);
  EXPECT_EQ(out[0].t.dest_qpn, 77u);
  EXPECT_EQ(out[0].plane, 1);
  EXPECT_EQ(q.qp().evs().entry(out[0].ev).plane, 1);
  EXPECT_EQ(q.ep.counters().probe_replies_tx, 2u);
}

// Packets are made in reused slots: the endpoint's queue of control
// packets restarts at its first slot whenever it empties, and a data
// packet is made in the caller's array, which softmrcd polls into for
// ever. A packet must carry nothing of the one before it: a probe reply
// made where an ACK was is exactly the reply its own fields make, and a
// data packet polled where that reply was has no probe or feedback fields.
TEST(Responder, APacketCarriesNothingOfThePacketBeforeItInItsSlot) {
  OneQp q;
  TxPacket slot;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 10, 0, bytes(10, 0)), 0, 1'000);
  ASSERT_EQ(q.ep.poll_tx(&slot, 1, 1'000), 1u);
  ASSERT_EQ(slot.t.opcode, Opcode::kAck);
  ASSERT_NE(slot.t.fb, wire::Feedback{});

  wire::PacketView req;
  req.t.opcode = Opcode::kProbeRequest;
  req.t.path_tag = 0x55;
  req.t.probe.req_id = 9;
  req.t.probe.t_send_ns = 1234;
  q.ep.on_packet(req, 1, 2'000, /*src_peer=*/42);
  ASSERT_EQ(q.ep.poll_tx(&slot, 1, 2'000), 1u);
  wire::Transport reply;
  reply.opcode = Opcode::kProbeReply;
  reply.path_tag = kNoEv;
  reply.probe.req_id = 9;
  reply.probe.port = 1;
  reply.probe.flags = wire::kProbeSvcTimeValid;
  reply.probe.echo_tag = 0x55;
  reply.probe.t_send_ns = 1234;
  EXPECT_EQ(slot.t, reply);

  ASSERT_TRUE(q.write(1, 0, 1024).ok());
  ASSERT_EQ(q.ep.poll_tx(&slot, 1, 3'000), 1u);
  ASSERT_TRUE(slot.is_data);
  EXPECT_EQ(slot.t.probe, wire::Probe{});
  EXPECT_EQ(slot.t.fb, wire::Feedback{});
}

// A QP may have no usable EV at all: plane 1 went dark both ways, so each
// side took its EVs there for ASSUMED_BAD (min_active kept plane 0's),
// then plane 0 failed. Plane 1 heals; both sides probe it. If neither
// answers for want of a usable EV, neither EV set ever recovers, and both
// QPs run out of retries over a working plane. The reply goes on the
// arrival plane's default path instead.
TEST(Responder, AProbeIsAnsweredEvenWithNoUsableEv) {
  OneQp q;  // 2 planes x 2 EVs, min_active 1
  ASSERT_TRUE(q.write(1, 0, 4 * 1024).ok());
  ASSERT_EQ(q.tx(0).size(), 4u);
  q.tx(ack_timeout_ns(q.config().timeout));  // every EV loses a packet: three go ASSUMED_BAD
  ASSERT_EQ(q.qp().evs().usable_count(), 1u);
  uint8_t good_plane = 0;
  for (uint32_t e = 0; e < q.qp().evs().size(); ++e)
    if (q.qp().evs().usable(e)) good_plane = q.qp().evs().entry(e).plane;
  const auto dark_plane = static_cast<uint8_t>(1 - good_plane);
  q.ep.set_plane_up(good_plane, false, 2'000'000);
  ASSERT_EQ(q.qp().evs().usable_count(), 0u);
  q.tx(2'000'000);

  wire::PacketView req;
  req.t.opcode = Opcode::kProbeRequest;
  req.t.dest_qpn = q.qpn;
  req.t.path_tag = 0x55;
  req.t.probe.req_id = 9;
  q.ep.on_packet(req, dark_plane, 2'000'100);
  const auto out = q.tx(2'000'100);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].t.opcode, Opcode::kProbeReply);
  EXPECT_EQ(out[0].peer, 9u);
  EXPECT_EQ(out[0].t.dest_qpn, 77u);
  EXPECT_EQ(out[0].plane, dark_plane);
  EXPECT_EQ(out[0].ev, kNoEv) << "the framer's default path";
  ASSERT_NE(out[0].wire_ev, nullptr);
  EXPECT_TRUE(std::all_of(std::begin(out[0].wire_ev->bytes), std::end(out[0].wire_ev->bytes),
                          [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(out[0].t.probe.echo_tag, 0x55u);
  EXPECT_EQ(out[0].t.probe.port, dark_plane);
}

TEST(Responder, ConnectionlessProbeRoundTripBecomesAnEvent) {
  OneQp q;
  wire::WireEv ev{};
  ASSERT_TRUE(q.ep.send_probe(42, 1, &ev, 17, 1'000).ok());
  const auto out = q.tx(1'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].t.opcode, Opcode::kProbeRequest);
  EXPECT_EQ(out[0].t.dest_qpn, 0u);
  wire::PacketView reply;
  reply.t.opcode = Opcode::kProbeReply;
  reply.t.dest_qpn = 0;
  reply.t.probe.req_id = 17;
  reply.t.probe.t_send_ns = 1'000;
  q.ep.on_packet(reply, 1, 4'500);
  const auto e = q.events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].type, EventType::kProbeReply);
  EXPECT_EQ(e[0].probe_req_id, 17);
  EXPECT_EQ(e[0].rtt_ns, 3'500u);
  EXPECT_EQ(e[0].plane, 1);
}

TEST(Responder, FeedbackIsSentAgainOnALivePlaneWhenAPlaneIsLost) {
  OneQp q;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 10, 0, bytes(10, 0)), 0, 0);
  ASSERT_EQ(feedback(q, 0).size(), 1u);  // it may have gone out on plane 0 and died there
  wire::PacketView ps;
  ps.t.opcode = Opcode::kPortStatus;
  ps.t.dest_qpn = q.qpn;
  ps.t.port_status = wire::PortStatus{0b10, 1, 2};
  q.ep.on_packet(ps, 1, 5'000);
  const auto fb = feedback(q, 5'000);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].plane, 1);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 501u);
  EXPECT_EQ(fb[0].t.fb.echo_tag, kNoEv) << "no packet to take an RTT sample from";
}

// Nothing has arrived yet: there is no state to repeat, and an ACK of
// cum_psn = rq_psn would only be a stray packet (with no PSN referenced).
TEST(Responder, NoFeedbackIsSentAgainWhenAPlaneIsLostBeforeAnythingArrived) {
  for (const bool local : {false, true}) {
    SCOPED_TRACE(local ? "local port down" : "the peer's port status");
    OneQp q;
    if (local) {
      q.ep.set_plane_up(0, false, 5'000);
    } else {
      wire::PacketView ps;
      ps.t.opcode = Opcode::kPortStatus;
      ps.t.dest_qpn = q.qpn;
      ps.t.port_status = wire::PortStatus{0b10, 1, 2};
      q.ep.on_packet(ps, 1, 5'000);
    }
    EXPECT_TRUE(feedback(q, 5'000).empty());
    EXPECT_EQ(q.qp().counters().acks_tx, 0u);
  }
}

// The peer may take every plane away (a port status with no bit set): a
// delayed ACK that then has no EV to leave on must not stay due, or the
// endpoint asks to be called at once, forever (a virtual-time driver spins
// without advancing time). It goes with the next feedback that can leave.
TEST(Responder, DelayedAckWithNoUsableEvLeftIsNotDueForever) {
  OneQp q;
  const auto p = bytes(1024, 0);
  q.ep.on_packet(q.data(500, Opcode::kWriteFirst, 0, 4096, 0, p), 0, 0);
  EXPECT_EQ(q.ep.next_wakeup(), 4'000u) << "the delayed ACK";
  wire::PacketView ps;
  ps.t.opcode = Opcode::kPortStatus;
  ps.t.dest_qpn = q.qpn;
  ps.t.port_status = wire::PortStatus{0, 1, 2};
  q.ep.on_packet(ps, 1, 1'000);
  EXPECT_EQ(q.qp().evs().usable_count(), 0u);
  EXPECT_TRUE(feedback(q, 5'000).empty());
  EXPECT_GT(q.ep.next_wakeup(), 5'000u) << "nothing can be sent: no work now";

  ps.t.port_status = wire::PortStatus{0b11, 2, 2};
  q.ep.on_packet(ps, 1, 6'000);
  q.ep.on_packet(q.data(501, Opcode::kWriteMiddle, 1024, 4096, 1024, p), 0, 7'000);
  const auto fb = feedback(q, 11'000);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].t.fb.cum_psn, 502u);
}

TEST(Responder, DestroyingOrResettingAQpDropsItsQueuedFeedback) {
  for (const bool destroy : {true, false}) {
    SCOPED_TRACE(destroy ? "destroy" : "reset");
    OneQp q;
    q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 10, 0, bytes(10, 0)), 0, 0);
    EXPECT_EQ(q.ep.next_wakeup(), 0u) << "an ACK is waiting";
    if (destroy) {
      ASSERT_TRUE(q.ep.destroy_qp(q.qpn).ok());
    } else {
      QpAttr a;
      a.state = QpState::kReset;
      ASSERT_TRUE(q.ep.modify_qp(q.qpn, a, kAttrState, 0).ok());
    }
    TxPacket out[4];
    EXPECT_EQ(q.ep.poll_tx(out, 4, 0), 0u) << "its EVs are gone: nothing may point at them";
  }
}

TEST(Responder, PacketsForUnknownOrUnreadyQpsAreCountedAndDropped) {
  OneQp q;
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 0, 0, {}), 5, 0);
  EXPECT_EQ(q.ep.counters().rx_bad_plane, 1u);
  wire::PacketView pv = q.data(500, Opcode::kWriteOnly, 0, 0, 0, {});
  pv.t.dest_qpn = 1234;
  q.ep.on_packet(pv, 0, 0);
  EXPECT_EQ(q.ep.counters().rx_unknown_qpn, 1u);
  EXPECT_EQ(q.qp().counters().rx_data_packets, 0u);
}

TEST(Responder, FeedbackForAQpNotSendingAndStrayProbeRepliesAreUnexpected) {
  OneQpConfig only_receives;
  only_receives.last = QpState::kRtr;
  OneQp rtr(only_receives);
  rtr.ep.on_packet(rtr.ack(100, 100, 0), 0, 0);
  EXPECT_EQ(rtr.ep.counters().rx_unexpected, 1u) << "an RTR QP has sent nothing to acknowledge";
  OneQp rts;
  wire::PacketView reply;
  reply.t.opcode = Opcode::kProbeReply;
  reply.t.dest_qpn = rts.qpn;
  reply.t.probe.echo_tag = static_cast<uint32_t>(rts.qp().evs().size());
  rts.ep.on_packet(reply, 0, 0);
  EXPECT_EQ(rts.ep.counters().rx_unexpected, 1u) << "a reply naming none of its EVs";
  EXPECT_EQ(rts.qp().counters().probe_replies_rx, 0u);
}

TEST(Responder, FeedbackWithNoUsableEvIsCountedNotSent) {
  OneQp q;
  wire::PacketView ps;
  ps.t.opcode = Opcode::kPortStatus;
  ps.t.dest_qpn = q.qpn;
  ps.t.port_status = wire::PortStatus{0, 1, 2};  // the peer has no plane left
  q.ep.on_packet(ps, 0, 0);
  ASSERT_EQ(q.qp().evs().usable_count(), 0u);
  q.ep.on_packet(q.data(500, Opcode::kWriteOnly, 0, 10, 0, bytes(10, 0)), 0, 1'000);
  EXPECT_EQ(q.qp().counters().rx_data_packets, 1u);
  EXPECT_TRUE(feedback(q, 1'000).empty());
  EXPECT_EQ(q.ep.counters().ctrl_no_ev, 1u);
  EXPECT_EQ(q.qp().counters().acks_tx, 0u);
}

}  // namespace
}  // namespace softmrc::engine::test
