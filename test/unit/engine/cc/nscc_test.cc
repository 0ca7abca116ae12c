// Specification of congestion control: validation, the "none" profile and
// each NSCC reaction, one at a time, in synthetic time.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "engine/cc/congestion_control.h"

namespace softmrc::engine {
namespace {

constexpr uint32_t kMtu = 4096;
constexpr TimeNs kUs = 1000;
constexpr uint64_t kLinkBps = 100'000'000'000;
constexpr TimeNs kBaseRttNs = 10 * kUs;

// 100 Gb/s and 10 us: BDP 125 kB, max_cwnd 187.5 kB, target 5 us.
NsccParams params() {
  return default_nscc_params(kLinkBps, kBaseRttNs, kMtu);
}

CcProfile nscc(const NsccParams& p = params()) {
  return CcProfile{CcAlgorithm::kNscc, p};
}

CongestionControl make_cc(const NsccParams& p = params(), TimeNs now = 0) {
  CongestionControl cc;
  EXPECT_EQ(validate(nscc(p)), nullptr);
  cc.init(nscc(p), kMtu, now);
  return cc;
}

AckSample ack(uint32_t bytes, TimeNs delay_ns, bool ecn = false) {
  return AckSample{bytes, 0, kBaseRttNs + delay_ns, ecn};
}

TEST(Nscc, DefaultsAreDerivedFromLinkRateAndBaseRtt) {
  const NsccParams p = params();
  EXPECT_EQ(validate(nscc(p)), nullptr);
  EXPECT_EQ(p.base_rtt_ns, kBaseRttNs);
  EXPECT_EQ(p.target_delay_ns, kBaseRttNs / 2);
  EXPECT_EQ(p.max_cwnd_bytes, 187'500u);
  EXPECT_EQ(p.adjust_bytes_threshold, 8u * kMtu);
  EXPECT_EQ(p.adjust_period_ns, kBaseRttNs);
  EXPECT_EQ(p.qa_threshold_ns, 4 * p.target_delay_ns);
  EXPECT_EQ(p.qa_gate, 3);
  EXPECT_DOUBLE_EQ(p.fi, 1.0);
  EXPECT_DOUBLE_EQ(p.max_md_jump, 0.5);

  const NsccParams fast = default_nscc_params(800'000'000'000, kBaseRttNs, kMtu);
  EXPECT_EQ(fast.max_cwnd_bytes, 1'500'000u);
  EXPECT_DOUBLE_EQ(fast.fi, 1'000'000.0 / (32.0 * kMtu)) << "fair increase scales with the BDP";
  const NsccParams tiny = default_nscc_params(1'000'000, kBaseRttNs, kMtu);
  EXPECT_EQ(tiny.max_cwnd_bytes, 2u * kMtu) << "never below two MTUs";
  EXPECT_EQ(validate(nscc(tiny)), nullptr);
}

TEST(Nscc, ValidateNamesEveryBadParameter) {
  struct Case {
    const char* field;
    void (*spoil)(NsccParams&);
  };
  const Case cases[] = {
      {"base_rtt_ns", [](NsccParams& p) { p.base_rtt_ns = 0; }},
      {"base_rtt_ns", [](NsccParams& p) { p.base_rtt_ns = 2'000'000'000; }},
      {"target_delay_ns", [](NsccParams& p) { p.target_delay_ns = 0; }},
      {"max_cwnd_bytes", [](NsccParams& p) { p.max_cwnd_bytes = 0; }},
      {"max_cwnd_bytes", [](NsccParams& p) { p.max_cwnd_bytes = uint64_t{1} << 41; }},
      {"adjust_bytes_threshold", [](NsccParams& p) { p.adjust_bytes_threshold = 0; }},
      {"adjust_period_ns", [](NsccParams& p) { p.adjust_period_ns = 0; }},
      {"eta", [](NsccParams& p) { p.eta = -1; }},
      {"eta", [](NsccParams& p) { p.eta = 0.0 / 0.0; }},
      {"fi", [](NsccParams& p) { p.fi = -0.5; }},
      {"fi_scale", [](NsccParams& p) { p.fi_scale = 100; }},
      {"gamma", [](NsccParams& p) { p.gamma = 0; }},
      {"gamma", [](NsccParams& p) { p.gamma = 1.5; }},
      {"max_md_jump", [](NsccParams& p) { p.max_md_jump = 0; }},
      {"max_md_jump", [](NsccParams& p) { p.max_md_jump = 1; }},
      {"qa_gate", [](NsccParams& p) { p.qa_gate = 64; }},
      {"qa_threshold_ns", [](NsccParams& p) { p.qa_threshold_ns = p.target_delay_ns; }},
  };
  for (const Case& c : cases) {
    NsccParams p = params();
    c.spoil(p);
    const char* reason = validate(nscc(p));
    ASSERT_NE(reason, nullptr) << c.field;
    EXPECT_EQ(std::string(reason).rfind(c.field, 0), 0u) << reason;
  }
  NsccParams p = params();
  p.disable_qa = true;
  p.qa_threshold_ns = 0;
  EXPECT_EQ(validate(nscc(p)), nullptr) << "quick adapt fields are unused when it is off";
  EXPECT_NE(validate(CcProfile{static_cast<CcAlgorithm>(9), params()}), nullptr);
}

TEST(Nscc, NoneProfileLeavesTheWindowUnboundedAndOnlyCounts) {
  CongestionControl cc;
  const CcProfile none{};  // algorithm kNone, NSCC parameters unset
  ASSERT_EQ(validate(none), nullptr);
  cc.init(none, kMtu, 0);
  cc.on_ack(ack(kMtu, 50 * kUs, true), 1);
  cc.on_trim(0, 2);
  cc.on_loss(0, 3);
  cc.on_timeout(4);
  EXPECT_EQ(cc.cwnd_bytes(), UINT64_MAX);
  EXPECT_EQ(cc.counters().trims, 1u);
  EXPECT_EQ(cc.counters().losses, 1u);
  EXPECT_EQ(cc.counters().timeouts, 1u);
  EXPECT_EQ(cc.counters().decreases, 0u);
}

TEST(Nscc, StartsAtMaxCwnd) {
  const CongestionControl cc = make_cc();
  EXPECT_EQ(cc.cwnd_bytes(), params().max_cwnd_bytes);
}

// Feedback whose packet's send time is unknown: at most once per base RTT.
TEST(Nscc, EcnWithHighDelayDecreasesAtMostOncePerBaseRtt) {
  CongestionControl cc = make_cc();
  const TimeNs delay = 3 * params().target_delay_ns;  // below the quick adapt threshold
  uint64_t before = cc.cwnd_bytes();
  for (TimeNs t = 0; t < kBaseRttNs; t += 100) cc.on_ack(ack(kMtu, delay, true), t);
  EXPECT_EQ(cc.counters().decreases, 1u);
  EXPECT_LT(cc.cwnd_bytes(), before);
  before = cc.cwnd_bytes();
  for (TimeNs t = kBaseRttNs; t < 2 * kBaseRttNs; t += 100) cc.on_ack(ack(kMtu, delay, true), t);
  EXPECT_EQ(cc.counters().decreases, 2u);
  EXPECT_LT(cc.cwnd_bytes(), before);
}

// Marks on packets sent before a decrease describe the queue it answered:
// however long the round trip (here 2.5 base RTTs), they do not cut again.
TEST(Nscc, EcnDecreasesOncePerRoundTrip) {
  CongestionControl cc = make_cc();
  const TimeNs delay = 3 * params().target_delay_ns;  // below the quick adapt threshold
  const TimeNs rtt = kBaseRttNs + delay;
  const TimeNs start = 10 * kBaseRttNs;
  AckSample a = ack(kMtu, delay, true);
  for (TimeNs t = start; t < start + rtt; t += 100) {
    a.sent_ns = t - rtt;
    cc.on_ack(a, t);
  }
  EXPECT_EQ(cc.counters().decreases, 1u);
  const uint64_t before = cc.cwnd_bytes();
  a.sent_ns = start;  // sent as the first decrease happened
  cc.on_ack(a, start + rtt);
  EXPECT_EQ(cc.counters().decreases, 2u);
  EXPECT_LT(cc.cwnd_bytes(), before);
}

TEST(Nscc, DecreaseDepthIsGammaTimesExcessDelayOverDelay) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  const double before = static_cast<double>(cc.cwnd_bytes());
  cc.on_ack(ack(kMtu, 2 * p.target_delay_ns, true), 0);  // (avg - target) / avg = 1/2
  EXPECT_NEAR(static_cast<double>(cc.cwnd_bytes()), before * (1 - p.gamma / 2), 1.0);
}

TEST(Nscc, DecreaseIsBoundedByMaxMdJump) {
  NsccParams p = params();
  p.eta = 0;
  p.gamma = 1;
  p.disable_qa = true;
  CongestionControl cc = make_cc(p);
  const double before = static_cast<double>(cc.cwnd_bytes());
  cc.on_ack(ack(kMtu, 50 * p.target_delay_ns, true), 0);  // gamma alone would cut 98%
  EXPECT_NEAR(static_cast<double>(cc.cwnd_bytes()), before * (1 - p.max_md_jump), 1.0);
}

TEST(Nscc, DecreaseWaitsForTheSmoothedDelayToCrossTheTarget) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  for (TimeNs t = 0; t < 20; t++) cc.on_ack(ack(kMtu, 0, false), t);  // smoothed delay 0
  const uint64_t before = cc.cwnd_bytes();
  cc.on_ack(ack(kMtu, 2 * p.target_delay_ns, true), 20);
  EXPECT_EQ(cc.counters().decreases, 0u) << "one late sample does not cut";
  EXPECT_GE(cc.cwnd_bytes(), before);
}

TEST(Nscc, EcnBelowTargetHoldsTheWindow) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  cc.on_timeout(0);  // room to grow, so a hold is visible
  const uint64_t before = cc.cwnd_bytes();
  for (TimeNs t = 0; t < 10 * kBaseRttNs; t += 100) cc.on_ack(ack(kMtu, 1 * kUs, true), t);
  EXPECT_EQ(cc.cwnd_bytes(), before);
}

// Average window growth per RTT over ten RTTs of ACKs, one per MTU of the
// window, at a fixed delay (batching leaves at most one batch unapplied).
double growth_per_rtt(CongestionControl& cc, TimeNs delay) {
  constexpr int kRtts = 10;
  const double start = static_cast<double>(cc.cwnd_bytes());
  TimeNs now = 0;
  for (int r = 0; r < kRtts; r++) {
    const auto acks = static_cast<uint32_t>(cc.cwnd_bytes() / kMtu);
    for (uint32_t i = 0; i < acks; i++) cc.on_ack(ack(kMtu, delay), now + i * kBaseRttNs / acks);
    now += kBaseRttNs;
  }
  return (static_cast<double>(cc.cwnd_bytes()) - start) / kRtts;
}

TEST(Nscc, HighDelayWithoutEcnIsAFairIncreaseOfFiMtusPerRtt) {
  NsccParams p = params();
  p.eta = 0;
  p.fi = 2;
  for (const int timeouts : {1, 3}) {  // a large and a small window
    CongestionControl cc = make_cc(p);
    for (int i = 0; i < timeouts; i++) cc.on_timeout(0);
    const double growth = growth_per_rtt(cc, p.target_delay_ns + 1 * kUs);
    EXPECT_NEAR(growth, p.fi * kMtu, 0.15 * p.fi * kMtu) << "timeouts " << timeouts;
  }
}

TEST(Nscc, ProportionalIncreaseShrinksAsDelayNearsTheTarget) {
  NsccParams p = params();
  p.eta = 0;
  const TimeNs target = p.target_delay_ns;
  double growth[2];
  const TimeNs delays[2] = {target / 4, 3 * target / 4};  // headroom 3/4 and 1/4
  for (int i = 0; i < 2; i++) {
    CongestionControl cc = make_cc(p);
    cc.on_timeout(0);
    cc.on_timeout(0);
    growth[i] = growth_per_rtt(cc, delays[i]);
  }
  EXPECT_GT(growth[1], 0);
  EXPECT_NEAR(growth[0] / growth[1], 3.0, 0.3);
  // At headroom 3/4: three quarters of max_cwnd / 16 per RTT.
  EXPECT_NEAR(growth[0], 0.75 * p.max_cwnd_bytes / 16, 0.15 * p.max_cwnd_bytes / 16);
}

TEST(Nscc, IncreasesAreBatchedByAdjustBytesThreshold) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  cc.on_timeout(0);
  const uint64_t before = cc.cwnd_bytes();
  const uint32_t batch = static_cast<uint32_t>(p.adjust_bytes_threshold / kMtu);
  for (uint32_t i = 1; i < batch; i++) {
    cc.on_ack(ack(kMtu, p.target_delay_ns), 1);
    EXPECT_EQ(cc.cwnd_bytes(), before) << "ack " << i;
  }
  cc.on_ack(ack(kMtu, p.target_delay_ns), 1);
  EXPECT_GT(cc.cwnd_bytes(), before);
  EXPECT_EQ(cc.counters().increases, 1u);
}

TEST(Nscc, IncreasesAreAppliedAfterAdjustPeriodWhateverTheBytes) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  cc.on_timeout(0);
  const uint64_t before = cc.cwnd_bytes();
  cc.on_ack(ack(kMtu, p.target_delay_ns), 1);
  EXPECT_EQ(cc.cwnd_bytes(), before);
  cc.on_ack(ack(kMtu, p.target_delay_ns), p.adjust_period_ns);
  EXPECT_GT(cc.cwnd_bytes(), before);
}

// From a window of one MTU, the proportional increase at zero delay is
// max_cwnd / 16 per window of ACKs: 2.9 MTUs for the one MTU acknowledged.
// A window never grows by more than was delivered since the last step.
TEST(Nscc, AnIncreaseIsNeverMoreThanTheBytesDelivered) {
  NsccParams p = params();
  p.eta = 0;
  p.fi_scale = 0;  // no fast increase: the proportional rule alone
  CongestionControl cc = make_cc(p);
  while (cc.cwnd_bytes() > kMtu) cc.on_timeout(0);
  ASSERT_EQ(cc.cwnd_bytes(), kMtu);
  ASSERT_GT(p.max_cwnd_bytes / 16, kMtu) << "the uncapped step would exceed what was delivered";
  cc.on_ack(ack(kMtu, 0), p.adjust_period_ns);
  EXPECT_EQ(cc.counters().increases, 1u);
  EXPECT_EQ(cc.cwnd_bytes(), 2u * kMtu);
}

TEST(Nscc, EtaAddsItsMtusOncePerAdjustPeriod) {
  NsccParams p = params();
  p.eta = 1;
  CongestionControl cc = make_cc(p);
  cc.on_timeout(0);
  const uint64_t before = cc.cwnd_bytes();
  // ECN below target holds the window: only eta moves it.
  for (TimeNs t = 0; t <= 5 * p.adjust_period_ns; t += p.adjust_period_ns / 4)
    cc.on_ack(ack(kMtu, 1 * kUs, true), t);
  EXPECT_EQ(cc.cwnd_bytes(), before + 5 * kMtu);
}

TEST(Nscc, FastIncreaseAfterAWholeWindowNearZeroDelay) {
  NsccParams p = params();
  p.eta = 0;
  p.adjust_bytes_threshold = uint64_t{1} << 40;  // no batched increase gets in the way
  p.adjust_period_ns = 1'000'000'000;
  CongestionControl cc = make_cc(p);
  cc.on_timeout(0);
  cc.on_timeout(0);
  const uint64_t window = cc.cwnd_bytes();
  TimeNs now = 0;
  for (uint64_t acked = 0; acked <= window; acked += kMtu) {
    EXPECT_EQ(cc.cwnd_bytes(), window) << "not before a whole window";
    cc.on_ack(ack(kMtu, 0), now++);
  }
  EXPECT_GT(cc.cwnd_bytes(), window);
  // From now on every ACK grows the window at once by fi_scale per byte.
  const uint64_t before = cc.cwnd_bytes();
  cc.on_ack(ack(kMtu, 0), now++);
  EXPECT_NEAR(static_cast<double>(cc.cwnd_bytes() - before), p.fi_scale * kMtu, 1.0);
  // A sample away from zero delay ends it.
  cc.on_ack(ack(kMtu, p.target_delay_ns / 2), now++);
  const uint64_t after = cc.cwnd_bytes();
  cc.on_ack(ack(kMtu, 0), now++);
  EXPECT_EQ(cc.cwnd_bytes(), after);
}

TEST(Nscc, QuickAdaptSetsTheWindowToDeliveredBytesAfterATrim) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  const TimeNs window = p.base_rtt_ns + p.target_delay_ns;
  cc.on_ack(AckSample{3 * kMtu, 40 * kMtu, kBaseRttNs + 1 * kUs, false}, 1 * kUs);
  cc.on_trim(40 * kMtu, 2 * kUs);
  EXPECT_EQ(cc.counters().quick_adapts, 0u) << "judged at the end of the window";
  cc.on_ack(AckSample{kMtu, 39 * kMtu, kBaseRttNs + 1 * kUs, false}, window);
  EXPECT_EQ(cc.counters().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd_bytes(), 4u * kMtu);

  // Marks on the 39 packets in flight at that moment predate it: no cut.
  TimeNs now = window;
  for (int i = 0; i < 39; i++)
    cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 3 * p.target_delay_ns, true}, now += 100);
  EXPECT_EQ(cc.counters().decreases, 1u) << "only the trim's own cut";
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 3 * p.target_delay_ns, true}, now += 100);
  EXPECT_EQ(cc.counters().decreases, 2u) << "fresh feedback counts again";
}

TEST(Nscc, QuickAdaptNeedsDeliveryBelowMaxCwndShiftedByQaGate) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  const TimeNs window = p.base_rtt_ns + p.target_delay_ns;
  const uint64_t gate = p.max_cwnd_bytes >> p.qa_gate;
  cc.on_ack(AckSample{static_cast<uint32_t>(gate), 0, kBaseRttNs + 1 * kUs, false}, 1);
  cc.on_trim(0, 2);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, window);
  EXPECT_EQ(cc.counters().quick_adapts, 0u);
  EXPECT_GT(cc.cwnd_bytes(), gate);
}

TEST(Nscc, QuickAdaptOnDelayAboveQaThreshold) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  const TimeNs window = p.base_rtt_ns + p.target_delay_ns;
  cc.on_ack(AckSample{2 * kMtu, 0, kBaseRttNs + p.qa_threshold_ns + 1, false}, 1);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, window);
  EXPECT_EQ(cc.counters().quick_adapts, 1u);
  EXPECT_EQ(cc.cwnd_bytes(), 3u * kMtu);
}

TEST(Nscc, NoQuickAdaptWithoutATrigger) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, 1);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, 10 * kBaseRttNs);
  EXPECT_EQ(cc.counters().quick_adapts, 0u);
}

TEST(Nscc, DisableQaTurnsQuickAdaptOff) {
  NsccParams p = params();
  p.disable_qa = true;
  CongestionControl cc = make_cc(p);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, 1);
  cc.on_trim(0, 2);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 1 * kUs, false}, 10 * kBaseRttNs);
  EXPECT_EQ(cc.counters().quick_adapts, 0u);
  EXPECT_GT(cc.cwnd_bytes(), p.max_cwnd_bytes / 2);
}

TEST(Nscc, TrimAndLossCutOneMtuEach) {
  NsccParams p = params();
  p.disable_qa = true;
  CongestionControl cc = make_cc(p);
  cc.on_trim(0, 1);
  EXPECT_EQ(cc.cwnd_bytes(), p.max_cwnd_bytes - kMtu);
  cc.on_loss(0, 2);
  EXPECT_EQ(cc.cwnd_bytes(), p.max_cwnd_bytes - 2 * kMtu);
  EXPECT_EQ(cc.counters().trims, 1u);
  EXPECT_EQ(cc.counters().losses, 1u);
  EXPECT_EQ(cc.counters().decreases, 2u);
}

TEST(Nscc, TimeoutCutsByMaxMdJump) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  cc.on_timeout(1);
  EXPECT_NEAR(static_cast<double>(cc.cwnd_bytes()), p.max_cwnd_bytes * (1 - p.max_md_jump), 1.0);
  EXPECT_EQ(cc.counters().timeouts, 1u);
}

TEST(Nscc, BaseRttRatchetsDownOnly) {
  CongestionControl cc = make_cc();
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs - 2 * kUs, false}, 1);
  EXPECT_EQ(cc.base_rtt_ns(), kBaseRttNs - 2 * kUs);
  cc.on_ack(AckSample{kMtu, 0, kBaseRttNs + 5 * kUs, false}, 2);
  EXPECT_EQ(cc.base_rtt_ns(), kBaseRttNs - 2 * kUs);
  EXPECT_EQ(cc.avg_delay_ns(), (7 * kUs) / 16) << "delay is measured from the new base";
}

TEST(Nscc, AckWithoutRttSampleUsesTheSmoothedDelay) {
  NsccParams p = params();
  p.eta = 0;
  CongestionControl cc = make_cc(p);
  cc.on_ack(ack(kMtu, 2 * p.target_delay_ns, false), 0);  // smoothed delay: 2 x target
  const uint64_t before = cc.cwnd_bytes();
  cc.on_ack(AckSample{kMtu, 0, 0, true}, 1);  // ECN, no sample: delay above target
  EXPECT_LT(cc.cwnd_bytes(), before);
}

TEST(Nscc, WindowStaysWithinOneMtuAndMaxCwnd) {
  const NsccParams p = params();
  CongestionControl cc = make_cc(p);
  for (int i = 0; i < 100; i++) cc.on_timeout(i);
  EXPECT_EQ(cc.cwnd_bytes(), kMtu);
  TimeNs now = 100;
  for (int i = 0; i < 100'000; i++) cc.on_ack(ack(kMtu, 0), now += 100);
  EXPECT_EQ(cc.cwnd_bytes(), p.max_cwnd_bytes);
}

}  // namespace
}  // namespace softmrc::engine
