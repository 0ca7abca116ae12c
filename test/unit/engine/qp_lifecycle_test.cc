// QP lifecycle: RESET -> INIT -> RTR -> RTS and ERROR, the attributes each
// transition takes, and the refusals (with reasons) of everything else.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/endpoint.h"
#include "one_qp.h"

namespace softmrc::engine {

// Moves an idle QP's send queue on to absolute position `pos`, where some
// four billion Writes would have left it: no test can post that many.
struct QpTestAccess {
  static void start_send_queue_at(const Qp& qp, uint32_t pos) {
    Qp& q = const_cast<Qp&>(qp);  // the endpoint's own, non-const object
    ASSERT_TRUE(q.sq_.empty());
    q.sq_.restart_at(pos);
    q.sq_next_ = pos;
  }
};

namespace {

class QpLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    open(8, 64);
    evs.resize(4);
    for (uint8_t i = 0; i < 4; ++i) evs[i].plane = i % 2;
  }

  // The endpoint (again) with these QP limits, and a QP on it.
  void open(uint8_t max_mpr, uint16_t max_wimm) {
    EndpointConfig cfg;
    cfg.num_planes = 2;
    cfg.qp.max_mpr = max_mpr;
    cfg.qp.max_wimm = max_wimm;
    ASSERT_TRUE(ep.init(cfg).ok());
    ASSERT_TRUE(ep.create_qp(&qpn).ok());
  }

  Status to_init() {
    QpAttr a;
    a.state = QpState::kInit;
    a.evs = evs;
    a.ev_config.num_planes = 2;
    a.ev_config.probe_initial_ns = 10'000;
    a.ev_config.probe_max_ns = 100'000;
    return ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0);
  }
  Status to_rtr() {
    QpAttr a;
    a.state = QpState::kRtr;
    a.dest_qpn = 12;
    a.path_mtu = 4096;
    a.rq_psn = 5;
    return ep.modify_qp(qpn, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn, 0);
  }
  Status to_rts() {
    QpAttr a;
    a.state = QpState::kRts;
    a.sq_psn = 9;
    return ep.modify_qp(qpn, a, kAttrState | kAttrSqPsn, 0);
  }
  QpState state() {
    QpState s;
    QpAttr a;
    EXPECT_TRUE(ep.query_qp(qpn, &s, &a).ok());
    return s;
  }
  // The reason of a refused RTS modify with one field changed.
  std::string rts_refusal(void (*edit)(QpAttr&), uint32_t mask) {
    QpAttr a;
    a.state = QpState::kRts;
    a.sq_psn = 9;
    edit(a);
    Status st = ep.modify_qp(qpn, a, kAttrState | kAttrSqPsn | mask, 0);
    return st.ok() ? "accepted" : st.reason();
  }

  Endpoint ep;
  uint32_t qpn = 0;
  std::vector<EvEntry> evs;
};

TEST_F(QpLifecycle, MovesResetInitRtrRtsInOrder) {
  EXPECT_EQ(state(), QpState::kReset);
  ASSERT_TRUE(to_init().ok());
  EXPECT_EQ(state(), QpState::kInit);
  ASSERT_TRUE(to_rtr().ok());
  EXPECT_EQ(state(), QpState::kRtr);
  ASSERT_TRUE(to_rts().ok());
  EXPECT_EQ(state(), QpState::kRts);
  QpState s;
  QpAttr a;
  ASSERT_TRUE(ep.query_qp(qpn, &s, &a).ok());
  EXPECT_EQ(a.dest_qpn, 12u);
  EXPECT_EQ(a.rq_psn, 5u);
  EXPECT_EQ(a.sq_psn, 9u);
  EXPECT_EQ(a.path_mtu, 4096u);
}

// An optional field left out takes its default, cut to the endpoint's
// limit: MPR 8 and max WIMM 128 on an endpoint that allows 2 and 4. The
// requester then starts no more than 4 WIMMs before an ACK, and the
// responder takes no more than 4 waiting for their turn to complete.
TEST_F(QpLifecycle, DefaultsOverTheEndpointsLimitsAreCutToThem) {
  open(2, 4);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  QpState s;
  QpAttr a;
  ASSERT_TRUE(ep.query_qp(qpn, &s, &a).ok());
  EXPECT_EQ(a.mpr, 2);
  EXPECT_EQ(a.mpr_dest, 2);
  EXPECT_EQ(a.max_wimm, 4);
  EXPECT_EQ(a.max_wimm_dest, 4);

  for (uint64_t id = 1; id <= 6; ++id) {
    WriteRequest wr;
    wr.wr_id = id;
    wr.with_imm = true;
    ASSERT_TRUE(ep.post_write(qpn, wr).ok());
    ASSERT_TRUE(ep.post_recv(qpn, RecvRequest{id}).ok());
  }
  TxPacket tx[16];
  EXPECT_EQ(ep.poll_tx(tx, 16, 0), 4u) << "4 zero-length WIMMs, then none before an ACK";

  // Zero-length WIMMs behind a hole at rq_psn 5: each waits for its turn.
  auto wimm = [&](uint32_t psn) {
    wire::PacketView pv;
    pv.t.opcode = wire::Opcode::kWriteOnlyImm;
    pv.t.dest_qpn = qpn;
    pv.t.psn = psn;
    ep.on_packet(pv, 0, 10);
    return ep.qp(qpn)->state();
  };
  for (uint32_t psn = 6; psn < 10; ++psn) ASSERT_EQ(wimm(psn), QpState::kRts) << psn;
  EXPECT_EQ(wimm(10), QpState::kError) << "a fifth waiting WIMM is over max_wimm_dest";
}

TEST_F(QpLifecycle, SkippingAStateIsRefused) {
  EXPECT_STREQ(to_rtr().reason(), "modify: transition not allowed");
  EXPECT_FALSE(to_rts().ok());
  ASSERT_TRUE(to_init().ok());
  EXPECT_FALSE(to_rts().ok());
  EXPECT_EQ(state(), QpState::kInit);
  ASSERT_TRUE(to_rtr().ok());
  EXPECT_STREQ(to_init().reason(), "modify: transition not allowed") << "RTR -> INIT";
  EXPECT_EQ(state(), QpState::kRtr);
}

// INIT -> INIT, as rdma_cm does before RTR: the profiles it names replace
// the QP's, those it does not name stay, and so do the receives posted in
// INIT. With no profile it changes nothing.
TEST_F(QpLifecycle, InitAgainReplacesTheProfilesItNamesAndKeepsTheReceives) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(ep.post_recv(qpn, RecvRequest{7}).ok());
  const Qp& q = *ep.qp(qpn);
  QpAttr a;
  a.state = QpState::kInit;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok()) << "no profile named";
  EXPECT_EQ(state(), QpState::kInit);
  EXPECT_EQ(q.evs().size(), 4u);
  EXPECT_EQ(q.attr().cc.algorithm, CcAlgorithm::kNone);

  a.cc.algorithm = CcAlgorithm::kNscc;
  a.cc.nscc = default_nscc_params(10'000'000'000, 50'000, 4096);
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState | kAttrCcProfile, 0).ok()) << "the CC profile";
  EXPECT_EQ(q.attr().cc.algorithm, CcAlgorithm::kNscc);
  EXPECT_EQ(q.evs().size(), 4u) << "the EV profile, not named, stays";

  // A plane that went down in INIT is down in the new EV set too.
  ep.set_plane_up(1, false, 0);
  std::vector<EvEntry> two(2);
  two[1].plane = 1;
  a.evs = two;
  a.ev_config.num_planes = 2;
  a.ev_config.probe_initial_ns = 10'000;
  a.ev_config.probe_max_ns = 100'000;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0).ok()) << "the EV profile";
  EXPECT_EQ(q.evs().size(), 2u);
  EXPECT_TRUE(q.evs().plane_up(0));
  EXPECT_FALSE(q.evs().plane_up(1));
  EXPECT_EQ(q.attr().cc.algorithm, CcAlgorithm::kNscc) << "the CC profile, not named, stays";
  EXPECT_EQ(q.recv_queue_depth(), 1u) << "the receive posted in INIT";

  // Refused: an EV profile the checks or the EV set refuse (the CC profile
  // named with it is not taken either), a field of RTR. The QP keeps both
  // its profiles.
  a.cc = CcProfile{};
  a.ev_config.min_active = 3;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile | kAttrCcProfile, 0).reason(),
               "ev profile: min_active not 1..the EV count");
  a.ev_config.min_active = 1;
  a.ev_config.probe_initial_ns = 0;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile | kAttrCcProfile, 0).reason(),
               "probe_initial_ns is 0");
  a.ev_config.probe_initial_ns = 10'000;
  a.rq_psn = 5;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile | kAttrRqPsn, 0).reason(),
               "modify: attribute not settable in this transition");
  EXPECT_EQ(state(), QpState::kInit);
  EXPECT_EQ(q.evs().size(), 2u);
  EXPECT_EQ(q.attr().cc.algorithm, CcAlgorithm::kNscc);

  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  a = QpAttr{};
  a.state = QpState::kError;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok());
  Completion c[2];
  ASSERT_EQ(ep.poll_completions(c, 2), 1u);
  EXPECT_EQ(c[0].wr_id, 7u) << "the receive posted before INIT -> INIT, flushed at ERR";
}

TEST_F(QpLifecycle, InitRequiresAnEvProfileOnKnownPlanes) {
  QpAttr a;
  a.state = QpState::kInit;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState, 0).reason(), "modify: required attribute missing");
  a.ev_config.num_planes = 2;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0).reason(), "ev profile: no EVs");
  evs[1].plane = 2;
  a.evs = evs;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0).reason(),
               "ev profile: EV on unknown plane");
  EXPECT_EQ(state(), QpState::kReset);
}

// min_active 0 would let losses take every EV out of use; softmrcd's
// configuration and the controller refuse it, and so does the engine.
TEST_F(QpLifecycle, InitRefusesAMinActiveOfZeroOrAboveTheEvCount) {
  QpAttr a;
  a.state = QpState::kInit;
  a.evs = evs;  // 4
  a.ev_config.num_planes = 2;
  a.ev_config.probe_initial_ns = 10'000;
  a.ev_config.probe_max_ns = 100'000;
  for (const uint32_t bad : {0u, 5u}) {
    a.ev_config.min_active = bad;
    EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0).reason(),
                 "ev profile: min_active not 1..the EV count")
        << bad;
  }
  EXPECT_EQ(state(), QpState::kReset);
  a.ev_config.min_active = 4;
  EXPECT_TRUE(ep.modify_qp(qpn, a, kAttrState | kAttrEvProfile, 0).ok());
}

TEST_F(QpLifecycle, AttributeOfAnotherTransitionIsRefused) {
  ASSERT_TRUE(to_init().ok());
  QpAttr a;
  a.state = QpState::kRtr;
  a.path_mtu = 1024;
  a.sq_psn = 3;  // an RTS attribute
  EXPECT_STREQ(
      ep.modify_qp(qpn, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn | kAttrSqPsn, 0)
          .reason(),
      "modify: attribute not settable in this transition");
}

TEST_F(QpLifecycle, OutOfRangeValuesAreRefusedWithAReason) {
  ASSERT_TRUE(to_init().ok());
  QpAttr a;
  a.state = QpState::kRtr;
  a.path_mtu = 3000;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn, 0).reason(),
               "path_mtu: not 256..4096 (power of two) or 9000");
  a.path_mtu = 9000;
  a.rq_psn = 1u << 24;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn, 0).reason(),
               "rq_psn: over 24 bits");
  a.rq_psn = 0;
  a.mpr_dest = 9;  // max_mpr is 8
  EXPECT_STREQ(
      ep.modify_qp(qpn, a, kAttrState | kAttrDest | kAttrPathMtu | kAttrRqPsn | kAttrMprDest, 0)
          .reason(),
      "mpr_dest: not 1..max_mpr");
  ASSERT_TRUE(to_rtr().ok());

  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.timeout = 25; }, kAttrTimeout), "timeout: over 24");
  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.retry_linear = 8; }, kAttrRetryCnt),
            "retry: linear over 7 or exponential over 25");
  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.retry_exp = 26; }, kAttrRetryCnt),
            "retry: linear over 7 or exponential over 25");
  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.mpr = 0; }, kAttrMpr), "mpr: not 1..max_mpr");
  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.max_wimm = 65; }, kAttrMaxWimm),
            "max_wimm: over the endpoint's limit");
  EXPECT_EQ(rts_refusal([](QpAttr& x) { x.caps = 1u << 7; }, kAttrCaps),
            "caps: unknown capability bits");
  EXPECT_EQ(state(), QpState::kRtr);
  EXPECT_EQ(rts_refusal(
                [](QpAttr& x) {
                  x.timeout = 24;
                  x.retry_linear = 7;
                  x.retry_exp = 25;
                },
                kAttrTimeout | kAttrRetryCnt),
            "accepted");
}

TEST_F(QpLifecycle, ResponderWindowChangesInRtsOnlyWithDynamicMpr) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  QpAttr a;
  a.state = QpState::kRts;
  a.mpr_dest = 2;
  EXPECT_STREQ(ep.modify_qp(qpn, a, kAttrState | kAttrMprDest, 0).reason(),
               "mpr_dest: changes in RTS need dynamic MPR");
  a.timeout = 12;
  EXPECT_TRUE(ep.modify_qp(qpn, a, kAttrState | kAttrTimeout, 0).ok());
  QpState s;
  ASSERT_TRUE(ep.query_qp(qpn, &s, &a).ok());
  EXPECT_EQ(a.timeout, 12);
}

TEST_F(QpLifecycle, ErrorFlushesEveryOutstandingRequestInPostOrderAndResetAllowsReuse) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  std::vector<uint8_t> buf(64);
  uint32_t key = 0;
  ASSERT_TRUE(ep.register_region(Region{0x100, 64, buf.data(), 0}, &key).ok());
  for (uint64_t id = 1; id <= 3; ++id) {
    WriteRequest wr;
    wr.wr_id = id;
    wr.local_addr = 0x100;
    wr.length = 64;
    wr.lkey = key;
    wr.signaled = id != 2;  // flushes complete even when unsignaled
    ASSERT_TRUE(ep.post_write(qpn, wr).ok());
  }
  ASSERT_TRUE(ep.post_recv(qpn, RecvRequest{50}).ok());
  QpAttr a;
  a.state = QpState::kError;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok());
  Completion c[8];
  ASSERT_EQ(ep.poll_completions(c, 8), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(c[i].status, WcStatus::kFlushed);
  }
  EXPECT_EQ(c[3].wr_id, 50u);
  EXPECT_EQ(c[3].opcode, WcOpcode::kRecvWriteImm);
  Event e[4];
  ASSERT_EQ(ep.poll_events(e, 4), 1u);
  EXPECT_EQ(e[0].type, EventType::kQpError);

  WriteRequest wr;
  wr.lkey = key;
  wr.local_addr = 0x100;
  EXPECT_STREQ(ep.post_write(qpn, wr).reason(), "post_write: QP not in RTS");
  a.state = QpState::kReset;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok());
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  EXPECT_TRUE(ep.post_write(qpn, wr).ok());
}

// Found by protocol_storm: RESET -> ERROR answered OK and left the QP in RESET.
TEST_F(QpLifecycle, ResetMovesToErrorLikeAnyOtherState) {
  QpAttr a;
  a.state = QpState::kError;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok());
  EXPECT_EQ(state(), QpState::kError);
  Event e[2];
  EXPECT_EQ(ep.poll_events(e, 2), 0u) << "nothing failed: no QP error event";
  a.state = QpState::kReset;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kAttrState, 0).ok());
  EXPECT_EQ(state(), QpState::kReset);
  EXPECT_TRUE(to_init().ok());
}

// Send-queue positions wrap at 2^32; UINT32_MAX is a position like any
// other, not "no request": a NACK for the Write there fails that Write, and
// an error that is no Write's fault flushes it like the rest.
TEST(QpRequests, TheSendQueuePositionBeforeTheWrapIsARequestLikeAnyOther) {
  for (const bool nack : {true, false}) {
    SCOPED_TRACE(nack ? "REMOTE_ACCESS NACK" : "WIMM with no receive posted");
    test::OneQp q;  // sq_psn 100, rq_psn 500
    QpTestAccess::start_send_queue_at(q.qp(), UINT32_MAX - 1);
    for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(q.write(id, 0, 100).ok());
    const auto tx = q.tx(0);  // queue positions 2^32 - 2, 2^32 - 1, 0
    ASSERT_EQ(tx.size(), 3u);
    ASSERT_EQ(tx[1].t.psn, 101u);
    if (nack)
      q.ep.on_packet(q.ack(100, 101, tx[1].ev, {}, wire::NackCode::kRemoteAccess), 0, 1'000);
    else
      q.ep.on_packet(q.data(500, wire::Opcode::kWriteOnlyImm, 0, 0, 0, {}), 0, 1'000);
    EXPECT_EQ(q.qp().state(), QpState::kError);
    EXPECT_EQ(q.qp().counters().feedback_ignored, 0u);
    const auto c = q.completions();
    ASSERT_EQ(c.size(), 3u);
    for (uint64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(c[i].wr_id, i + 1);
      EXPECT_EQ(c[i].status, nack && i == 1 ? WcStatus::kRemoteAccessError : WcStatus::kFlushed)
          << "Write " << i + 1;
    }
  }
}

TEST(QpRequests, BadWorkRequestsAreRefusedNeverUndefined) {
  test::OneQp q;
  EXPECT_STREQ(q.write(1, 0, 100, false, 0, 0, 5).reason(), "ok");
  WriteRequest wr;
  wr.local_addr = test::OneQp::kVa + q.mem.size() - 10;
  wr.length = 11;
  wr.lkey = q.key;
  EXPECT_STREQ(q.ep.post_write(q.qpn, wr).reason(),
               "post_write: local buffer outside the lkey's region");
  wr.length = 10;
  wr.lkey = q.key + 1;
  EXPECT_FALSE(q.ep.post_write(q.qpn, wr).ok());
  wr.lkey = q.key;
  wr.remote_addr = UINT64_MAX - 4;
  EXPECT_STREQ(q.ep.post_write(q.qpn, wr).reason(), "post_write: remote range wraps");
  EXPECT_FALSE(q.ep.post_write(999, wr).ok());
  EXPECT_FALSE(q.ep.post_recv(0, RecvRequest{}).ok());
  for (int i = 0; i < 63; ++i) ASSERT_TRUE(q.write(10 + i, 0, 8).ok());
  EXPECT_STREQ(q.write(99, 0, 8).reason(), "post_write: send queue full");
}

TEST(QpRequests, QpnsAreNonZeroAndReusableAfterDestroy) {
  Endpoint ep;
  EndpointConfig cfg;
  cfg.max_qps = 2;
  ASSERT_TRUE(ep.init(cfg).ok());
  uint32_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(ep.create_qp(&a).ok());
  ASSERT_TRUE(ep.create_qp(&b).ok());
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_FALSE(ep.create_qp(&c).ok());
  ASSERT_TRUE(ep.destroy_qp(a).ok());
  EXPECT_EQ(ep.qp(a), nullptr);
  EXPECT_FALSE(ep.destroy_qp(a).ok());
  EXPECT_TRUE(ep.create_qp(&c).ok());
}

}  // namespace
}  // namespace softmrc::engine
