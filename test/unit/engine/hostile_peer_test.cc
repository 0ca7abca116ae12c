// A hostile peer against one QP, as a property test: whatever the peer
// sends (feedback with cumulative PSNs in and out of the window, random SACK
// bases and bitmaps, absurd service times and CE counts, every NACK code,
// data that is malformed, trimmed, CE-marked or aimed outside the region,
// Write-with-Immediate with and without receives, bogus probe replies,
// probe requests, port status) and whatever happens locally (planes going
// down and up, EVs denied and allowed, time passing, PSNs near the wrap):
//
//  - every posted send and receive completes exactly once and in post
//    order, also when the QP goes to ERROR, and an unsignaled Write
//    completes only with an error;
//  - a data packet the QP sends points into the registered region;
//  - right after poll_tx has handed out everything, nothing is due
//    (next_wakeup() > now): the endpoint never asks to be called at once
//    for work it then does not do.
//
// seeds.h: a failure prints its seed; ENGINE_SEED=<n> replays it,
// ENGINE_SEEDS=<count> runs a longer soak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/psn.h"
#include "one_qp.h"
#include "seeds.h"

namespace softmrc::engine::test {
namespace {

using wire::NackCode;
using wire::Opcode;

constexpr int kSteps = 3000;
constexpr uint32_t kPayload = 256;  // the MTU of every scenario

class HostilePeer {
 public:
  explicit HostilePeer(uint64_t seed) : rng_(seed), q_(config()) {}

  // Runs the scenario; gtest assertions report what broke.
  void run() {
    for (int i = 0; i < 16; ++i) post_recv();
    for (step_ = 0; step_ < kSteps; ++step_) {
      act();
      check_completions();
      if (::testing::Test::HasFatalFailure()) return;
      if (q_.qp().state() == QpState::kError) break;
    }
    if (q_.qp().state() != QpState::kError) {
      QpAttr attr;
      attr.state = QpState::kError;
      ASSERT_TRUE(q_.ep.modify_qp(q_.qpn, attr, kAttrState, now_).ok());
      check_completions();
    }
    // Through ERROR, everything posted has completed (flushed or not) ...
    for (const auto& [id, signaled] : sends_)
      if (signaled) {
        EXPECT_EQ(send_done_.count(id), 1u) << "send " << id << " never completed";
      }
    for (uint64_t id : recvs_)
      EXPECT_EQ(recv_done_.count(id), 1u) << "receive " << id << " never completed";
    // ... and nothing the peer sends after that completes anything again.
    for (int i = 0; i < 200 && !::testing::Test::HasFatalFailure(); ++i) {
      act();
      check_completions();
    }
    EXPECT_EQ(q_.qp().state(), QpState::kError);
  }

 private:
  uint64_t rnd(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // A PSN within a few hundred of `base`, mostly ahead of it, some behind.
  uint32_t near(uint32_t base) { return psn_add(base, kPsnModulus - 8 + rnd(300)); }

  OneQpConfig config() {
    OneQpConfig c;
    c.num_planes = static_cast<uint8_t>(1 + rnd(3));
    c.evs_per_plane = 1 + rnd(3);
    c.mtu = kPayload;
    c.max_mpr = 2;
    c.mpr = static_cast<uint8_t>(1 + rnd(2));
    c.max_wimm = static_cast<uint16_t>(1 + rnd(4));
    c.sq_psn = wire::kPsnMask - rnd(300);
    c.rq_psn = wire::kPsnMask - rnd(300);
    c.min_active = 1 + rnd(std::min<uint32_t>(2, c.num_planes * c.evs_per_plane));
    c.retry_linear = static_cast<uint8_t>(rnd(8));
    c.retry_exp = static_cast<uint8_t>(rnd(8));
    c.timeout = static_cast<uint8_t>(4 + rnd(6));
    c.caps = static_cast<uint32_t>(rnd(8));
    c.tuning.trim_nack = rnd(4) != 0;
    c.tuning.service_time = rnd(4) != 0;
    if (rnd(2)) {
      c.cc.algorithm = CcAlgorithm::kNscc;
      c.cc.nscc = default_nscc_params(100'000'000'000ull, 10'000, c.mtu);
    }
    num_planes_ = c.num_planes;
    num_evs_ = c.num_planes * c.evs_per_plane;
    return c;
  }

  uint8_t plane() { return static_cast<uint8_t>(rnd(num_planes_ + (rnd(50) == 0))); }

  void act() {
    switch (rnd(16)) {
      case 0:
      case 1:
        return post_write();
      case 2:
        return post_recv();
      case 3:
      case 4:
      case 5:
        return feedback();
      case 6:
      case 7:
      case 8:
        return data();
      case 9:
        return control();
      case 10:
        return local_event();
      default:
        return advance();
    }
  }

  void post_write() {
    const uint64_t id = next_id_++;
    WriteRequest wr;
    wr.wr_id = id;
    wr.local_addr = OneQp::kVa + rnd(1000);
    wr.length = static_cast<uint32_t>(rnd(3) ? rnd(2000) : 0);
    wr.lkey = q_.key;
    wr.remote_addr = 0x9000000;
    wr.rkey = 5;
    wr.with_imm = rnd(3) == 0;
    wr.imm = 7;
    wr.signaled = rnd(4) != 0;
    if (q_.ep.post_write(q_.qpn, wr).ok()) sends_[id] = wr.signaled;
  }

  void post_recv() {
    const uint64_t id = next_id_++;
    if (q_.ep.post_recv(q_.qpn, RecvRequest{id}).ok()) recvs_.insert(id);
  }

  // An ACK or NACK to the requester: mostly plausible, often not.
  void feedback() {
    const uint32_t una = q_.qp().snd_una(), nxt = q_.qp().snd_nxt();
    const uint32_t cum = rnd(4) ? psn_add(una, rnd(psn_diff(nxt, una) + 1)) : near(una);
    const uint32_t ref = rnd(4) && !sent_.empty() ? sent_[rnd(sent_.size())] : near(una);
    const uint32_t tag =
        rnd(4) ? static_cast<uint32_t>(rnd(num_evs_)) : static_cast<uint32_t>(rng_());
    static constexpr NackCode kCodes[] = {NackCode::kNone,           NackCode::kNone,
                                          NackCode::kNone,           NackCode::kTrimmed,
                                          NackCode::kOutOfWindow,    NackCode::kRemoteAccess,
                                          NackCode::kInvalidRequest, NackCode::kQpGone};
    // The codes that end the QP are rare, or few scenarios would last.
    const NackCode code = kCodes[rnd(rnd(200) == 0 ? 8 : 5)];
    wire::PacketView pv = q_.ack(cum, ref, tag, {}, code, static_cast<uint8_t>(rng_()));
    wire::Feedback& fb = pv.t.fb;
    fb.sack_base = rnd(2) ? cum : near(una);
    fb.sack_bitmap[0] = rnd(2) ? rng_() : rng_() & rng_() & rng_();
    fb.sack_bitmap[1] = rnd(2) ? rng_() : 0;
    if (rnd(4) != 0) {  // no bit for a PSN never sent, or the whole feedback is void
      const int32_t sent = psn_diff(nxt, fb.sack_base);
      for (uint32_t k = 0; k < 2; ++k) {
        const int32_t n = std::clamp(sent - static_cast<int32_t>(64 * k), 0, 64);
        if (n < 64) fb.sack_bitmap[k] &= (uint64_t{1} << n) - 1;
      }
    }
    fb.service_time_ns = static_cast<uint32_t>(rng_() >> rnd(64));
    fb.window_mpr = static_cast<uint16_t>(rnd(4) ? q_.config().mpr : rng_());
    fb.ce_count = static_cast<uint16_t>(rnd(2) ? rnd(3) : rng_());
    if (code == NackCode::kQpGone) fb.echo_tag = q_.config().dest_qpn;
    q_.ep.on_packet(pv, plane(), now_, rnd(2) ? 9 : kUnknownPeer);
  }

  // Data to the responder: mostly in order (so ACKs are coalesced), some
  // reordered, duplicate or out of window, trimmed or CE-marked; now and
  // then malformed or aimed outside the region.
  void data() {
    static constexpr Opcode kOps[] = {Opcode::kWriteFirst,   Opcode::kWriteMiddle,
                                      Opcode::kWriteLast,    Opcode::kWriteOnly,
                                      Opcode::kWriteLastImm, Opcode::kWriteOnlyImm};
    const Opcode op = kOps[rnd(40) == 0 ? 4 + rnd(2) : rnd(4)];
    const uint32_t epsn = q_.qp().epsn();
    const uint32_t psn = rnd(2) ? epsn : rnd(2) ? psn_add(epsn, rnd(20)) : near(epsn);
    uint32_t len = wire::is_last(op) ? static_cast<uint32_t>(rnd(kPayload + 1)) : kPayload;
    const uint32_t msg_off = wire::is_first(op) ? 0 : kPayload * static_cast<uint32_t>(rnd(3));
    const uint32_t msg_len =
        wire::is_last(op) ? msg_off + len : msg_off + len + static_cast<uint32_t>(rnd(500));
    uint32_t off = static_cast<uint32_t>(rnd(4096));
    if (rnd(3000) == 0) len = static_cast<uint32_t>(rnd(kPayload));  // malformed (mostly)
    if (rnd(3000) == 0) off = static_cast<uint32_t>(q_.mem.size() - rnd(kPayload));  // outside
    const std::vector<uint8_t> payload(len, 0xab);
    wire::PacketView pv = q_.data(psn, op, off, msg_len, msg_off, payload, 1);
    pv.t.path_tag = static_cast<uint32_t>(rnd(4) ? rnd(num_evs_) : rng_());
    pv.t.ack_req = rnd(8) == 0;
    if (rnd(8) == 0) {
      pv.trimmed = true;
      pv.payload = nullptr;
      pv.payload_len = 0;
    }
    if (rnd(4) == 0) pv.ecn = wire::kEcnCe;
    q_.ep.on_packet(pv, plane(), now_, 9);
  }

  // Probe replies (mostly bogus), probe requests and the peer's port status.
  void control() {
    wire::PacketView pv;
    pv.t.dest_qpn = rnd(10) == 0 ? 0 : q_.qpn;
    switch (rnd(3)) {
      case 0:
        pv.t.opcode = Opcode::kProbeReply;
        pv.t.probe.echo_tag = static_cast<uint32_t>(rnd(4) ? rnd(num_evs_ + 1) : rng_());
        pv.t.probe.t_send_ns = rnd(2) ? now_ - rnd(now_ + 1) : rng_();
        pv.t.probe.service_time_ns = static_cast<uint32_t>(rng_() >> rnd(64));
        break;
      case 1:
        pv.t.opcode = Opcode::kProbeRequest;
        pv.t.path_tag = static_cast<uint32_t>(rng_());
        pv.t.probe.req_id = static_cast<uint16_t>(rng_());
        pv.t.probe.t_send_ns = rng_();
        break;
      default:
        pv.t.opcode = Opcode::kPortStatus;
        // Usually newer, so it counts; every plane gone a quarter of the time.
        port_seq_ += rnd(8) == 0 ? 0 : 1;
        pv.t.port_status = wire::PortStatus{
            rnd(4) == 0 ? 0 : static_cast<uint32_t>(rnd(1u << num_planes_)), port_seq_,
            static_cast<uint8_t>(rnd(20) == 0 ? rnd(256) : num_planes_)};
        break;
    }
    q_.ep.on_packet(pv, plane(), now_, 9);
  }

  void local_event() {
    if (rnd(2))
      q_.ep.set_plane_up(plane(), rnd(2) == 0, now_);
    else
      (void)q_.ep.set_ev_denied(q_.qpn, static_cast<uint32_t>(rnd(num_evs_ + 1)), rnd(2) == 0,
                                now_);
  }

  // Time passes (to the next deadline, or by a random amount), then
  // everything the endpoint has to send goes out.
  void advance() {
    const TimeNs w = q_.ep.next_wakeup();
    if (rnd(4) == 0 && w != kNever && w > now_)
      now_ = w;
    else
      now_ += rnd(rnd(4) == 0 ? 200'000 : 10'000);
    for (const TxPacket& p : q_.tx(now_)) {
      if (!p.is_data) continue;
      sent_.push_back(p.t.psn);
      if (p.payload_len > 0) {
        ASSERT_GE(p.payload, q_.mem.data()) << "step " << step_;
        ASSERT_LE(p.payload + p.payload_len, q_.mem.data() + q_.mem.size()) << "step " << step_;
      }
    }
    if (sent_.size() > 64) sent_.erase(sent_.begin(), sent_.begin() + 32);
    ASSERT_GT(q_.ep.next_wakeup(), now_) << "due right after poll_tx, step " << step_;
  }

  void check_completions() {
    for (const Completion& c : q_.completions()) {
      ASSERT_EQ(c.qpn, q_.qpn);
      if (c.opcode == WcOpcode::kRecvWriteImm) {
        ASSERT_EQ(recvs_.count(c.wr_id), 1u) << "receive " << c.wr_id << " never posted";
        ASSERT_TRUE(recv_done_.insert(c.wr_id).second) << "receive " << c.wr_id << " twice";
        ASSERT_GT(c.wr_id, last_recv_) << "receive completions out of post order";
        last_recv_ = c.wr_id;
      } else {
        const auto it = sends_.find(c.wr_id);
        ASSERT_NE(it, sends_.end()) << "send " << c.wr_id << " never posted";
        ASSERT_TRUE(send_done_.insert(c.wr_id).second) << "send " << c.wr_id << " twice";
        ASSERT_GT(c.wr_id, last_send_) << "send completions out of post order";
        if (!it->second) {
          ASSERT_NE(c.status, WcStatus::kSuccess) << "unsignaled send " << c.wr_id;
        }
        last_send_ = c.wr_id;
      }
    }
  }

  std::mt19937_64 rng_;
  uint8_t num_planes_ = 0;
  uint32_t num_evs_ = 0;
  OneQp q_;  // after the members config() sets
  TimeNs now_ = 0;
  int step_ = 0;
  uint32_t port_seq_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, bool> sends_;  // wr_id -> signaled
  std::set<uint64_t> recvs_;
  std::set<uint64_t> send_done_, recv_done_;
  uint64_t last_send_ = 0, last_recv_ = 0;
  std::vector<uint32_t> sent_;  // PSNs of recent data packets, for plausible feedback
};

TEST(HostilePeer, EveryRequestCompletesOnceAndNothingIsDueAfterPollTx) {
  for (const uint64_t seed : seeds(500)) {
    SCOPED_TRACE(::testing::Message()
                 << "seed=" << seed << " (replay: ENGINE_SEED=" << seed << ")");
    HostilePeer(seed).run();
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace softmrc::engine::test
