// The traffic generator (app/softmrcd/txgen.h) between two engine endpoints
// in virtual time (the engine tests' harness): every message is checked,
// a wrong byte and a slot's stale bytes are caught, a responder whose
// checking lags far behind what arrives still checks every message before
// its slot is reused, and a flow ended by a stopping daemon tells its
// responder how many messages it had.
// Nothing here needs the EAL; the suite is dpdk's because softmrcd's
// headers are.
#include "softmrcd/txgen.h"

#include <gtest/gtest.h>

#include <functional>

#include "../unit/engine/harness.h"
#include "pattern/pattern.h"

namespace softmrc::softmrcd {
namespace {

using engine::test::Harness;
using engine::test::HarnessConfig;

constexpr uint64_t kRegionVa[2] = {0x10000000ull, 0x20000000ull};  // the harness's
constexpr uint64_t kStream = 7;

struct Flow {
  uint32_t size = 256 * 1024;  // four check slices a message
  uint32_t window = 4;
  uint64_t messages = 48;
  engine::TimeNs duration_ns = 0;
  TrafficOp op = TrafficOp::kWimm;
  uint32_t check_every = 1;  // b checks in one pass of this many
  // Flips a byte of a's copy of this message once it is posted.
  uint64_t corrupt = UINT64_MAX;
  // a's copy of this message (at least a slot cycle in) holds again what
  // the message before it in its slot held: what b's slot would hold had
  // its Write not landed.
  uint64_t stale = UINT64_MAX;
  // b's receiver as for a requester in another process: done only after the
  // end arrived and the QP was quiet for 1 ms, or a was silent for
  // requester_timeout_ns.
  bool remote = false;
  engine::TimeNs requester_timeout_ns = 0;
  double loss_a_to_b_plane1 = 0;  // of every packet a sends on plane 1
  uint32_t max_send_wr = 256;     // each side's send queue
};

// A flow from a to b over the harness, softmrcd's lcore order in each pass.
class Pair {
 public:
  explicit Pair(const Flow& flow) : flow_(flow), h_(harness_config(flow), 1) {
    const FlowSpec f = spec(flow);
    for (Txgen& g : gen_) g.init(4);
    Txgen::SenderSetup s{h_.a().qpn,   f,         kStream, h_.a().mem.data(), h_.a().key,
                         kRegionVa[1], h_.b().key};
    s.local_va = kRegionVa[0];
    gen_[0].add_sender(s);
    Txgen::ReceiverSetup r{h_.b().qpn, f, kStream, h_.b().mem.data()};
    if (flow.remote) {
      r.remote_peer = 0;  // a, in the harness's numbering
      r.remote_name = "a";
    }
    r.linger_ns = 1'000'000;
    EXPECT_TRUE(gen_[1].add_receiver(r, h_.b().ep).ok());
    h_.pipe(0, 1).drop_rate = flow.loss_a_to_b_plane1;
    gen_[0].start(h_.now());
    h_.set_app([this](int side) { return pass(side); });
  }

  bool run(const std::function<bool()>& until) { return h_.run(until, 2'000'000'000); }
  // Runs for at most `limit` with a pass at least every 100 us, as a lcore
  // polls, even when nothing is in flight: the generator's probes and
  // timeouts are its own, not engine timers.
  bool run_polling(const std::function<bool()>& until, engine::TimeNs limit) {
    const engine::TimeNs end = h_.now() + limit;
    while (h_.now() < end) {
      const engine::TimeNs step_end = std::min(end, h_.now() + 100'000);
      if (h_.run(until, step_end)) return true;
      h_.run_for(step_end - h_.now());
    }
    return until();
  }
  // Lets virtual time pass with nothing in flight (a responder's linger).
  void idle_for(engine::TimeNs ns) { h_.run_for(ns); }
  Txgen& a() { return gen_[0]; }
  Txgen& b() { return gen_[1]; }
  Harness& harness() { return h_; }
  // a's process is killed: it runs no more passes, and the fabric loses
  // what a sends or is sent, a's answers to probes included.
  void kill_a() {
    a_dead_ = true;
    cut();
  }
  // The fabric loses everything from here on.
  void cut() {
    h_.set_filter([](int, const engine::TxPacket&) { return engine::test::Verdict::kDrop; });
  }
  // A side's QP goes to ERROR (a failure, or the daemon's flush): what it
  // has in flight, and its posted receives, complete with status FLUSHED.
  void fail_qp(int side) {
    engine::QpAttr error;
    error.state = engine::QpState::kError;
    engine::test::Side& s = h_.side(side);
    EXPECT_TRUE(s.ep.modify_qp(s.qpn, error, engine::kAttrState, h_.now()).ok());
  }

 private:
  static FlowSpec spec(const Flow& flow) {
    FlowSpec f;
    f.op = flow.op;
    f.size_bytes = flow.size;
    f.window = flow.window;
    f.messages = flow.messages;
    f.duration_ns = flow.duration_ns;
    f.requester_timeout_ns = flow.requester_timeout_ns;
    return f;
  }
  static HarnessConfig harness_config(const Flow& flow) {
    const FlowSpec f = spec(flow);
    HarnessConfig hc;
    hc.mtu = 4096;
    hc.mem_bytes = uint64_t{Txgen::slots(f)} * f.size_bytes;
    hc.max_wimm = 64;
    hc.max_send_wr = flow.max_send_wr;
    hc.timeout = 10;  // 1 ms: nothing here is lost
    return hc;
  }

  bool pass(int side) {
    if (side == 0 && a_dead_) return false;
    engine::Endpoint& ep = h_.side(side).ep;
    engine::Completion wc[32];
    for (size_t n; (n = ep.poll_completions(wc, 32)) > 0;)
      for (size_t i = 0; i < n; ++i) gen_[side].on_completion(wc[i], ep);
    const std::vector<engine::Event>& ev = h_.events(side);
    for (; events_seen_[side] < ev.size(); ++events_seen_[side])
      if (ev[events_seen_[side]].type == engine::EventType::kProbeReply)
        gen_[side].on_probe_reply(ev[events_seen_[side]], h_.now());
    if (side == 1 && ++b_passes_ % flow_.check_every != 0) return false;
    const uint64_t posted = gen_[side].counters().posted;
    gen_[side].post(ep, h_.now());
    const uint64_t now_posted = gen_[side].counters().posted;
    const uint32_t slots = Txgen::slots(spec(flow_));
    if (const uint64_t m = flow_.corrupt; posted <= m && m < now_posted)
      h_.side(side).mem[(m % slots + 1) * flow_.size - 5] ^= 1;  // in its last check slice
    if (const uint64_t m = flow_.stale; posted <= m && m < now_posted)
      pattern::fill(&h_.side(side).mem[m % slots * flow_.size], flow_.size, kStream, m - slots);
    return now_posted != posted;
  }

  Flow flow_;
  Harness h_;
  Txgen gen_[2];
  uint64_t b_passes_ = 0;
  size_t events_seen_[2] = {};
  bool a_dead_ = false;
};

struct Result {
  TxgenCounters a, b;
  bool finished = false;
};

Result run(const Flow& r) {
  Pair p(r);
  Result out;
  out.finished = p.run([&] { return p.a().finished(); });
  out.a = p.a().counters();
  out.b = p.b().counters();
  return out;
}

void expect_all_checked(const Result& x, const Flow& r) {
  ASSERT_TRUE(x.finished);
  EXPECT_EQ(x.a.completed, r.messages);
  EXPECT_EQ(x.a.errors + x.b.errors, 0u);
  EXPECT_EQ(x.b.mismatches, 0u);
  EXPECT_EQ(x.b.verified, r.messages);
  EXPECT_EQ(x.b.verified_bytes, r.messages * r.size);
}

// Each test runs a wimm flow and a write flow.
class TxgenOp : public testing::TestWithParam<TrafficOp> {
 protected:
  Flow flow() const {
    Flow r;
    r.op = GetParam();
    return r;
  }
};

TEST_P(TxgenOp, ChecksEveryMessage) {
  const Flow r = flow();
  expect_all_checked(run(r), r);
}

// b checks in one pass of 200 only: its checking falls a window behind
// what arrives, and the messages the requester's next window may overwrite
// are then checked before the ACK that lets it go on.
TEST_P(TxgenOp, LaggingResponderChecksBeforeSlotsAreReused) {
  Flow r = flow();
  r.check_every = 200;
  expect_all_checked(run(r), r);
}

// A window of one message, with packets lost on one plane: resent markers
// arrive out of order (write mode keeps two in flight, the last batch's,
// whose ACK may still be on its way, and the next), and the responder has
// a receive for each. The send queue is the least the configuration
// accepts: with two, a write flow's Write and both markers did not fit.
TEST_P(TxgenOp, WindowOfOneSurvivesLossThatReordersMarkers) {
  Flow r = flow();
  r.window = 1;
  r.max_send_wr = r.op == TrafficOp::kWrite ? 1 + kWriteMarkersInFlight : 2;
  r.size = 4096;
  r.messages = 400;
  r.loss_a_to_b_plane1 = 0.25;
  expect_all_checked(run(r), r);
}

TEST_P(TxgenOp, WrongByteIsOneMismatch) {
  Flow r = flow();
  r.corrupt = 13;
  const Result x = run(r);
  ASSERT_TRUE(x.finished);
  EXPECT_EQ(x.b.mismatches, 1u);
  EXPECT_EQ(x.b.verified, r.messages - 1);
}

// A slot's bytes name their message, not the slot: a Write that never
// landed leaves the bytes of the slot's previous message, which are
// wrong.
TEST_P(TxgenOp, StaleSlotIsOneMismatch) {
  Flow r = flow();
  r.stale = 13;
  ASSERT_GE(r.stale, Txgen::slots(FlowSpec{.op = r.op, .window = r.window}));
  const Result x = run(r);
  ASSERT_TRUE(x.finished);
  EXPECT_EQ(x.b.mismatches, 1u);
  EXPECT_EQ(x.b.verified, r.messages - 1);
}

// A duration counts from the start: a second start while the flow runs
// (the prompt's 'start' typed again) does not restart it.
TEST_P(TxgenOp, StartWhileRunningKeepsTheDeadline) {
  Flow r = flow();
  r.messages = 0;
  r.duration_ns = 5'000'000;
  Pair p(r);
  const engine::TimeNs started = p.harness().now();
  p.idle_for(r.duration_ns / 2);
  ASSERT_GT(p.a().counters().completed, 0u);
  p.a().start(p.harness().now());
  ASSERT_TRUE(p.run([&] { return p.a().finished(); }));
  // Its last window completes shortly after the deadline.
  EXPECT_LT(p.harness().now() - started, r.duration_ns + r.duration_ns / 5);
}

// The daemon's shutdown: a stopped flow's last messages, which checking
// lagged behind, are checked by finish_checks().
TEST_P(TxgenOp, FinishChecksWhatIsLeft) {
  Flow r = flow();
  r.messages = 0;
  r.check_every = 1000;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= 20; }));
  p.a().stop();
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == 0; }));
  const uint64_t completed = p.a().counters().completed;
  EXPECT_LT(p.b().counters().verified, completed);
  p.b().finish_checks();
  EXPECT_EQ(p.b().counters().verified, completed);
  EXPECT_EQ(p.b().counters().mismatches, 0u);
}

// The daemon's flush: what a flow had in flight when it stopped ends with
// status FLUSHED and is counted as flushed, one per message (a write
// flow's batch markers are no messages), so that posted messages are the
// completed and the flushed ones.
TEST_P(TxgenOp, FlushCountsEachMessageOnce) {
  Flow r = flow();
  r.messages = 0;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= 20; }));
  p.cut();  // a window stays in flight
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == r.window; }));
  p.a().end_flows();
  p.fail_qp(0);
  p.a().abandon();
  // b's receives end at the flush too, which is no failure.
  p.b().end_flows();
  p.fail_qp(1);
  p.b().abandon();
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == 0; }));
  EXPECT_EQ(p.b().counters().errors, 0u);
  const TxgenCounters a = p.a().counters();
  EXPECT_EQ(a.flushed, r.window);
  EXPECT_EQ(a.posted, a.completed + a.flushed);
  EXPECT_EQ(a.errors, 0u);
  EXPECT_EQ(a.in_flight_at_stop, r.window);
  EXPECT_EQ(a.flushed_at_stop, r.window);
  EXPECT_EQ(a.drained, 0u);
}

// A QP that failed mid-run flushed its messages before the shutdown: the
// shutdown had none of them in flight, and flushed none.
TEST_P(TxgenOp, ShutdownCountsOnlyWhatItEnded) {
  Flow r = flow();
  r.messages = 0;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= 20; }));
  p.cut();
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == r.window; }));
  p.fail_qp(0);
  testing::internal::CaptureStderr();
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == 0; }));
  p.a().end_flows();
  p.a().abandon();
  const TxgenCounters a = p.a().counters();
  EXPECT_EQ(a.flushed, r.window);
  EXPECT_EQ(a.in_flight_at_stop, 0u);
  EXPECT_EQ(a.flushed_at_stop, 0u);
  // The next message finds the QP in ERROR: refused, once, and said once.
  EXPECT_EQ(a.errors, 1u);
  const std::string next = std::to_string(a.posted);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "softmrcd: txgen: QP 1: message " + next + ": post_write: QP not in RTS\n");
}

// A QP that fails mid-batch is one error: the next message it refuses
// (a write flow posts no batch marker to a failed QP either).
TEST_P(TxgenOp, FailedQpIsOneError) {
  Flow r = flow();
  r.messages = 0;
  Pair p(r);
  ASSERT_TRUE(p.run([&] {
    const TxgenCounters& a = p.a().counters();
    return a.completed >= 20 && a.posted % r.window != 0;
  }));
  p.fail_qp(0);
  ASSERT_TRUE(p.run([&] { return p.a().in_flight() == 0; }));
  EXPECT_EQ(p.a().counters().errors, 1u);
}

// A responder whose QP failed mid-run (its receives flushed) will get
// nothing more: its flow ends unfinished, as one error, with what arrived
// checked, and a responder for another process's requester is done, even
// one that would wait for a quiet requester for ever.
TEST_P(TxgenOp, FailedResponderQpEndsTheFlow) {
  Flow r = flow();
  r.messages = 0;
  r.remote = true;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.b().counters().verified >= 20; }));
  p.fail_qp(1);
  ASSERT_TRUE(p.run_polling([&] { return p.b().finished(); }, 10'000'000));
  const TxgenCounters b = p.b().counters();
  EXPECT_EQ(b.errors, 1u);
  EXPECT_EQ(b.mismatches, 0u);
  EXPECT_GE(b.verified, 20u);
}

// The daemon's shutdown on the requester's side: a flow without a limit
// ends as if it had reached one, so a responder in another process learns
// how many messages there were, checks them all and is done.
TEST_P(TxgenOp, EndedFlowTellsTheResponderItsCount) {
  Flow r = flow();
  r.messages = 0;
  r.remote = true;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= 20; }));
  EXPECT_FALSE(p.b().finished());
  p.a().end_flows();
  EXPECT_EQ(p.a().ends_owed(), 1u);
  ASSERT_TRUE(p.run([&] { return p.a().finished(); }));
  EXPECT_EQ(p.a().ends_owed(), 0u);
  // What was in flight at the stop completed during the drain.
  EXPECT_GT(p.a().counters().in_flight_at_stop, 0u);
  EXPECT_EQ(p.a().counters().drained, p.a().counters().in_flight_at_stop);
  p.idle_for(2'000'000);
  ASSERT_TRUE(p.run([&] { return p.b().finished(); }));
  const TxgenCounters a = p.a().counters(), b = p.b().counters();
  EXPECT_EQ(a.completed, a.posted);
  EXPECT_EQ(b.verified, a.completed);
  EXPECT_EQ(a.errors + b.errors + b.mismatches, 0u);
}

// A requester that is only quiet answers the responder's probes, and the
// flow goes on; one that was killed answers nothing, and the responder
// ends the flow unfinished after the timeout, with an error, having checked
// everything that arrived.
TEST_P(TxgenOp, SilentRequesterEndsTheFlowAfterItsTimeout) {
  Flow r = flow();
  r.messages = 0;
  r.remote = true;
  r.requester_timeout_ns = 40'000'000;
  Pair p(r);
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= 20; }));
  p.a().stop();
  // Quiet for three timeouts, answering every probe: still going.
  ASSERT_FALSE(p.run_polling([&] { return p.b().finished(); }, 3 * r.requester_timeout_ns));
  EXPECT_EQ(p.b().counters().errors, 0u);
  const uint64_t sent = p.a().counters().completed;

  p.a().start(p.harness().now());
  ASSERT_TRUE(p.run([&] { return p.a().counters().completed >= sent + 20; }));
  p.kill_a();
  const engine::TimeNs killed = p.harness().now();
  ASSERT_TRUE(p.run_polling([&] { return p.b().finished(); }, 2 * r.requester_timeout_ns));
  EXPECT_GE(p.harness().now() - killed, r.requester_timeout_ns);
  const TxgenCounters b = p.b().counters();
  EXPECT_EQ(b.errors, 1u);
  EXPECT_EQ(b.mismatches, 0u);
  EXPECT_GE(b.verified, sent + 20);
}

INSTANTIATE_TEST_SUITE_P(Ops, TxgenOp, testing::Values(TrafficOp::kWimm, TrafficOp::kWrite),
                         [](const testing::TestParamInfo<TrafficOp>& i) {
                           return i.param == TrafficOp::kWimm ? "wimm" : "write";
                         });

}  // namespace
}  // namespace softmrc::softmrcd
