// The link/output-queue primitive: serialisation, ECN, trim-or-drop, the
// priority class and each fault, in virtual time.
#include "fabric/link.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "print.h"

namespace softmrc::fabric {
namespace {

// 100 Gb/s: 1250 bytes take exactly 100 ns.
constexpr uint64_t k100G = 100'000;
constexpr uint32_t kPkt = 1250;
constexpr uint32_t kHeader = 100;

LinkConfig config(uint64_t buffer = kUnbounded, Overflow overflow = Overflow::kDrop) {
  LinkConfig c;
  c.rate_mbps = k100G;
  c.delay_ns = 500;
  c.buffer_bytes = buffer;
  c.overflow = overflow;
  return c;
}

// The first of the seeds a randomised test runs: FABRIC_SEED, else 1.
uint64_t first_seed() {
  const char* env = std::getenv("FABRIC_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 1;
}

PacketMeta data(bool trimmable = true) {
  PacketMeta p;
  p.bytes = kPkt;
  p.header_bytes = kHeader;
  p.trimmable = trimmable;
  p.ecn_capable = true;
  return p;
}

PacketMeta control() {
  PacketMeta p;
  p.bytes = kHeader;
  p.control = true;
  return p;
}

Link make(const LinkConfig& c) {
  Link l;
  EXPECT_EQ(l.init(c), nullptr);
  return l;
}

TEST(Link, IdleLinkDeliversAfterSerialisationAndDelay) {
  Link l = make(config());
  Rng rng;
  PacketMeta p = data();
  const Verdict v = l.enqueue(p, 1000, rng);
  ASSERT_TRUE(v.delivered());
  EXPECT_EQ(v.at_ns, 1000u + 100 + 500);
  EXPECT_FALSE(p.ce);
  EXPECT_FALSE(p.trimmed);
  EXPECT_EQ(l.counters().packets, 1u);
  EXPECT_EQ(l.counters().bytes, kPkt);
}

TEST(Link, PacketsQueueBehindEachOtherAndTheBacklogDrains) {
  Link l = make(config());
  Rng rng;
  for (int i = 0; i < 10; ++i) {
    PacketMeta p = data();
    EXPECT_EQ(l.enqueue(p, 0, rng).at_ns, 100u * (i + 1) + 500);
  }
  EXPECT_EQ(l.backlog_bytes(0), 10u * kPkt);
  EXPECT_EQ(l.backlog_bytes(500), 5u * kPkt);
  EXPECT_EQ(l.backlog_bytes(1000), 0u);
  EXPECT_EQ(l.idle_at_ns(), 1000u);
  EXPECT_EQ(l.counters().busy_ps, 10u * 100'000);
}

TEST(Link, MarksCeOnlyAboveTheThresholdAndOnlyEcnCapablePackets) {
  LinkConfig c = config();
  c.ecn_threshold_bytes = 3 * kPkt;
  Link l = make(c);
  Rng rng;
  int marked = 0;
  for (int i = 0; i < 6; ++i) {
    PacketMeta p = data();
    ASSERT_TRUE(l.enqueue(p, 0, rng).delivered());
    EXPECT_EQ(p.ce, i >= 4) << "packet " << i << " found " << i * kPkt << " bytes queued";
    marked += p.ce;
  }
  EXPECT_EQ(marked, 2);
  PacketMeta not_ect = data();
  not_ect.ecn_capable = false;
  ASSERT_TRUE(l.enqueue(not_ect, 0, rng).delivered());
  EXPECT_FALSE(not_ect.ce);
  EXPECT_EQ(l.counters().ce_marks, 2u);
}

TEST(Link, DropPolicyDropsWhatDoesNotFit) {
  Link l = make(config(8 * kPkt, Overflow::kDrop));
  Rng rng;
  for (int i = 0; i < 8; ++i) {
    PacketMeta p = data();
    EXPECT_TRUE(l.enqueue(p, 0, rng).delivered()) << i;
  }
  PacketMeta p = data();
  const Verdict v = l.enqueue(p, 0, rng);
  EXPECT_EQ(v.drop, DropReason::kOverflow);
  EXPECT_EQ(v.at_ns, kNever);
  EXPECT_EQ(l.counters().drops[size_t(DropReason::kOverflow)], 1u);
  // Once one packet has left, one fits again.
  PacketMeta later = data();
  EXPECT_TRUE(l.enqueue(later, 100, rng).delivered());
}

TEST(Link, TrimPolicyCutsTrimmableDataAndSendsTheHeaderAhead) {
  Link l = make(config(8 * kPkt, Overflow::kTrim));
  Rng rng;
  TimeNs last_data = 0;
  for (int i = 0; i < 8; ++i) {
    PacketMeta p = data();
    last_data = l.enqueue(p, 0, rng).at_ns;
  }
  PacketMeta p = data();
  const Verdict v = l.enqueue(p, 0, rng);
  ASSERT_TRUE(v.delivered());
  EXPECT_TRUE(p.trimmed);
  EXPECT_EQ(p.bytes, kHeader);
  EXPECT_EQ(v.at_ns, 8u + 500);  // 100 bytes in 8 ns, ahead of 800 ns of data
  EXPECT_LT(v.at_ns, last_data);
  EXPECT_EQ(l.counters().trims, 1u);
  // A trimmed header is not trimmed again and keeps the priority class.
  const Verdict again = l.enqueue(p, 10, rng);
  EXPECT_TRUE(again.delivered());
  EXPECT_EQ(l.counters().trims, 1u);
}

TEST(Link, TrimPolicyStillDropsDataThatIsNotTrimmable) {
  Link l = make(config(2 * kPkt, Overflow::kTrim));
  Rng rng;
  for (int i = 0; i < 2; ++i) {
    PacketMeta p = data(false);
    ASSERT_TRUE(l.enqueue(p, 0, rng).delivered());
  }
  PacketMeta p = data(false);
  EXPECT_EQ(l.enqueue(p, 0, rng).drop, DropReason::kOverflow);
  EXPECT_FALSE(p.trimmed);
}

// A packet that is all header has nothing to cut off: trimming it would
// only move it to the priority class. It is dropped like any other.
TEST(Link, TrimPolicyDropsAPacketThatIsAllHeader) {
  Link l = make(config(2 * kPkt, Overflow::kTrim));
  Rng rng;
  for (int i = 0; i < 2; ++i) {
    PacketMeta p = data();
    ASSERT_TRUE(l.enqueue(p, 0, rng).delivered());
  }
  PacketMeta p = data();
  p.bytes = p.header_bytes;  // a zero-length Write
  EXPECT_EQ(l.enqueue(p, 0, rng).drop, DropReason::kOverflow);
  EXPECT_FALSE(p.trimmed);
  EXPECT_EQ(l.counters().trims, 0u);
  EXPECT_FALSE(l.would_trim(p, 0));
}

TEST(Link, ControlPacketsBypassQueuedDataAndDelayLaterData) {
  Link l = make(config());
  Rng rng;
  for (int i = 0; i < 5; ++i) {
    PacketMeta p = data();
    ASSERT_TRUE(l.enqueue(p, 0, rng).delivered());
  }
  PacketMeta c = control();
  EXPECT_EQ(l.enqueue(c, 0, rng).at_ns, 8u + 500);
  // Data arriving after the control packet waits for it as well.
  PacketMeta d = data();
  EXPECT_EQ(l.enqueue(d, 0, rng).at_ns, 600u + 8 + 500);
}

TEST(Link, PriorityClassHasItsOwnLimit) {
  LinkConfig cfg = config();
  cfg.priority_buffer_bytes = 3 * kHeader;
  Link l = make(cfg);
  Rng rng;
  for (int i = 0; i < 3; ++i) {
    PacketMeta c = control();
    ASSERT_TRUE(l.enqueue(c, 0, rng).delivered());
  }
  PacketMeta c = control();
  EXPECT_EQ(l.enqueue(c, 0, rng).drop, DropReason::kPriorityOverflow);
}

TEST(Link, DownDropsNewPacketsAndLosesQueuedOnes) {
  Link l = make(config());
  Rng rng;
  PacketMeta queued = data();
  ASSERT_TRUE(l.enqueue(queued, 0, rng).delivered());
  const uint32_t tag = l.down_count();
  EXPECT_TRUE(l.survived(tag));
  l.set_up(false, 50);
  EXPECT_FALSE(l.survived(tag));
  PacketMeta p = data();
  EXPECT_EQ(l.enqueue(p, 60, rng).drop, DropReason::kLinkDown);
  l.set_up(true, 70);
  // Up again, but the packet queued before the failure is still lost, and
  // the queue starts empty.
  EXPECT_FALSE(l.survived(tag));
  PacketMeta fresh = data();
  EXPECT_EQ(l.enqueue(fresh, 70, rng).at_ns, 70u + 100 + 500);
  EXPECT_TRUE(l.survived(l.down_count()));
}

TEST(Link, BlackholeDropsSilentlyWhileTheLinkStaysUp) {
  Link l = make(config());
  Rng rng;
  l.set_blackhole(true);
  EXPECT_TRUE(l.up());
  PacketMeta p = data();
  EXPECT_EQ(l.enqueue(p, 0, rng).drop, DropReason::kBlackhole);
  l.set_blackhole(false);
  EXPECT_TRUE(l.enqueue(p, 0, rng).delivered());
}

TEST(Link, EvBlackholeDropsOnlyThatEv) {
  Link l = make(config());
  Rng rng;
  l.set_ev_blackholed(7, true);
  PacketMeta seven = data();
  seven.ev = 7;
  PacketMeta eight = data();
  eight.ev = 8;
  EXPECT_EQ(l.enqueue(seven, 0, rng).drop, DropReason::kEvBlackhole);
  EXPECT_TRUE(l.enqueue(eight, 0, rng).delivered());
  l.set_ev_blackholed(7, false);
  EXPECT_TRUE(l.enqueue(seven, 0, rng).delivered());
}

TEST(Link, DegradedRateSlowsSerialisation) {
  Link l = make(config());
  Rng rng;
  l.set_rate_factor(0.25, 0);
  EXPECT_EQ(l.rate_bps(), k100G * 1'000'000 / 4);
  PacketMeta p = data();
  EXPECT_EQ(l.enqueue(p, 0, rng).at_ns, 400u + 500);
  l.set_rate_factor(1, 400);
  PacketMeta q = data();
  EXPECT_EQ(l.enqueue(q, 400, rng).at_ns, 500u + 500);
}

// A queue built while the link was slow drains at the full rate once it
// is back: its bytes stay, the time left to send them shrinks.
TEST(Link, RateChangeRescalesWhatIsQueued) {
  Link l = make(config(8 * kPkt, Overflow::kTrim));
  Rng rng;
  l.set_rate_factor(0.01, 0);
  for (int i = 0; i < 8; ++i) {
    PacketMeta p = data();
    ASSERT_TRUE(l.enqueue(p, 0, rng).delivered()) << i;
    ASSERT_FALSE(p.trimmed) << i;
  }
  EXPECT_EQ(l.backlog_bytes(0), 8u * kPkt);
  EXPECT_EQ(l.idle_at_ns(), 80'000u);  // 8 packets of 10 us
  // Two packets' worth sent at 1 Gb/s, then back to 100 Gb/s.
  l.set_rate_factor(1, 20'000);
  EXPECT_EQ(l.backlog_bytes(20'000), 6u * kPkt);
  EXPECT_EQ(l.idle_at_ns(), 20'600u);
  PacketMeta later = data();
  EXPECT_EQ(l.enqueue(later, 20'600, rng).at_ns, 20'600u + 100 + 500);
  EXPECT_FALSE(later.trimmed);
  // And slowing down stretches it.
  l.set_rate_factor(0.5, 20'600);
  EXPECT_EQ(l.idle_at_ns(), 20'800u);
  EXPECT_EQ(l.backlog_bytes(20'600), uint64_t{kPkt});
}

// 1 Mb/s at a factor of 0.001 is 1 kb/s, not a whole Mb/s.
TEST(Link, SlowRatesKeepTheirPrecision) {
  for (const auto& [mbps, factor] :
       {std::pair<uint64_t, double>{1, 0.001}, {100, 0.005}, {1000, 0.0015}}) {
    LinkConfig c = config();
    c.rate_mbps = mbps;
    c.delay_ns = 0;
    Link l = make(c);
    Rng rng;
    l.set_rate_factor(factor, 0);
    PacketMeta p = data();
    const double want_ns = kPkt * 8 * 1000 / (static_cast<double>(mbps) * factor);
    EXPECT_NEAR(static_cast<double>(l.enqueue(p, 0, rng).at_ns), want_ns, 1)
        << mbps << " Mb/s x " << factor;
  }
}

// Gray loss: the share lost matches the configured rate, for several seeds
// (each printed on failure), and the wire time of a lost packet is spent.
TEST(Link, GrayLossDropsTheConfiguredShareAndStillUsesTheWire) {
  const uint64_t base = first_seed();
  for (uint64_t seed = base; seed < base + 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: FABRIC_SEED=" + std::to_string(seed) +
                 ")");
    Link l = make(config());
    l.set_loss_rate(0.05);
    Rng rng(seed);
    constexpr int kN = 40'000;
    int lost = 0;
    for (int i = 0; i < kN; ++i) {
      PacketMeta p = data();
      const Verdict v = l.enqueue(p, 100u * i, rng);
      if (!v.delivered()) {
        EXPECT_EQ(v.drop, DropReason::kLoss);
        ++lost;
      }
    }
    // 5 % of 40000: mean 2000, sd 44; allow 5 sd.
    EXPECT_NEAR(lost, 2000, 220);
    EXPECT_EQ(l.counters().packets, uint64_t{kN});
    EXPECT_EQ(l.counters().drops[size_t(DropReason::kLoss)], uint64_t(lost));
  }
}

// Corruption: the configured share of the data it delivers, marked with
// what the link does to the ICRC; never control packets (no payload) nor
// trimmed ones (their payload is gone), nor packets the wire lost.
TEST(Link, CorruptionMarksTheConfiguredShareOfDeliveredData) {
  const uint64_t base = first_seed();
  for (uint64_t seed = base; seed < base + 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: FABRIC_SEED=" + std::to_string(seed) +
                 ")");
    Link l = make(config(kUnbounded, Overflow::kTrim));
    l.set_loss_rate(0.5);
    l.set_corruption(0.05, Corruption::kRecomputedIcrc);
    Rng rng(seed);
    constexpr int kN = 40'000;
    int corrupted = 0;
    for (int i = 0; i < kN; ++i) {
      PacketMeta p = data();
      const Verdict v = l.enqueue(p, 100u * i, rng);
      if (p.corrupted == Corruption::kNone) continue;
      EXPECT_EQ(p.corrupted, Corruption::kRecomputedIcrc);
      EXPECT_TRUE(v.delivered());
      ++corrupted;
    }
    // 5 % of the 20000 delivered: mean 1000, sd 31; allow 5 sd.
    EXPECT_NEAR(corrupted, 1000, 160);
    EXPECT_EQ(l.counters().corruptions, uint64_t(corrupted));
  }
  Link l = make(config(kUnbounded, Overflow::kTrim));
  l.set_corruption(1, Corruption::kBadIcrc);
  Rng rng;
  PacketMeta ack = control();
  PacketMeta cut = data();
  cut.trimmed = true;
  cut.bytes = kHeader;
  PacketMeta whole = data();
  for (PacketMeta* p : {&ack, &cut, &whole}) ASSERT_TRUE(l.enqueue(*p, 0, rng).delivered());
  EXPECT_EQ(ack.corrupted, Corruption::kNone);
  EXPECT_EQ(cut.corrupted, Corruption::kNone);
  EXPECT_EQ(whole.corrupted, Corruption::kBadIcrc);
  l.set_corruption(0, Corruption::kBadIcrc);
  PacketMeta after = data();
  l.enqueue(after, 1000, rng);
  EXPECT_EQ(after.corrupted, Corruption::kNone);
  EXPECT_EQ(l.counters().corruptions, 1u);
}

TEST(Link, SameSeedSameVerdicts) {
  Link a = make(config(4 * kPkt, Overflow::kTrim));
  Link b = make(config(4 * kPkt, Overflow::kTrim));
  a.set_loss_rate(0.3);
  b.set_loss_rate(0.3);
  Rng ra(42), rb(42);
  for (int i = 0; i < 1000; ++i) {
    PacketMeta pa = data(), pb = data();
    const Verdict va = a.enqueue(pa, 37u * i, ra);
    const Verdict vb = b.enqueue(pb, 37u * i, rb);
    ASSERT_EQ(va.at_ns, vb.at_ns) << i;
    ASSERT_EQ(va.drop, vb.drop) << i;
    ASSERT_EQ(pa.trimmed, pb.trimmed) << i;
  }
}

// A daemon's clock runs for months: 2^64 ps is only 213.5 days.
TEST(Link, KeepsTimeAfterTwoHundredAndFourteenDays) {
  Link l = make(config(8 * kPkt, Overflow::kTrim));
  Rng rng;
  constexpr TimeNs kDay = 86'400ull * 1'000'000'000;
  PacketMeta first = data();
  EXPECT_EQ(l.enqueue(first, 213 * kDay, rng).at_ns, 213 * kDay + 100 + 500);
  // One packet every 200 ns on a link that sends one in 100 ns: none waits.
  for (TimeNs t = 214 * kDay; t < 214 * kDay + 20'000; t += 200) {
    PacketMeta p = data();
    EXPECT_EQ(l.enqueue(p, t, rng).at_ns, t + 100 + 500);
    EXPECT_FALSE(p.trimmed);
  }
  EXPECT_EQ(l.backlog_bytes(214 * kDay + 20'000), 0u);
  EXPECT_EQ(l.idle_at_ns(), 214 * kDay + 19'800 + 100);
}

TEST(Link, InitRejectsAZeroRateOrBuffer) {
  Link l;
  LinkConfig c = config();
  c.rate_mbps = 0;
  EXPECT_STREQ(l.init(c), "rate_mbps: not 1..10^7");
  c = config();
  c.buffer_bytes = 0;
  EXPECT_STREQ(l.init(c), "buffer_bytes: 0");
}

}  // namespace
}  // namespace softmrc::fabric
