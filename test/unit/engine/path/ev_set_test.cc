// Specification of the per-QP EV set: spraying, EV states, probing with
// backoff, min_active, planes, controller denial and the event log.
#include "engine/path/ev_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

#include "../seeds.h"

namespace softmrc::engine {
namespace {

using test::seeds;

constexpr TimeNs kUs = 1000;
constexpr TimeNs kProbeInitialNs = 10 * kUs;
constexpr TimeNs kProbeMaxNs = 160 * kUs;
constexpr TimeNs kEcnAvoidNs = 50 * kUs;

// EV i sits on plane i % planes, so the input interleaves planes.
std::vector<EvEntry> make_evs(uint8_t planes, uint32_t per_plane) {
  std::vector<EvEntry> evs(size_t{planes} * per_plane);
  for (uint32_t i = 0; i < evs.size(); i++) {
    evs[i].value.bytes[0] = static_cast<uint8_t>(i >> 8);
    evs[i].value.bytes[1] = static_cast<uint8_t>(i);
    evs[i].plane = static_cast<uint8_t>(i % planes);
  }
  return evs;
}

EvSetConfig make_config(uint8_t planes, uint32_t min_active = 1,
                        SprayPolicy policy = SprayPolicy::kRoundRobin) {
  EvSetConfig cfg;
  cfg.min_active = min_active;
  cfg.policy = policy;
  cfg.probe_initial_ns = kProbeInitialNs;
  cfg.probe_max_ns = kProbeMaxNs;
  cfg.ecn_avoid_ns = kEcnAvoidNs;
  cfg.num_planes = planes;
  return cfg;
}

EvSet make_set(uint8_t planes, uint32_t per_plane, uint32_t min_active = 1,
               SprayPolicy policy = SprayPolicy::kRoundRobin) {
  EvSet set;
  const char* err = set.init(make_evs(planes, per_plane), make_config(planes, min_active, policy));
  EXPECT_EQ(err, nullptr) << err;
  return set;
}

TEST(EvSet, InitRejectsEveryInvalidSetOrConfig) {
  EvSet set;
  const auto evs = make_evs(2, 4);
  EXPECT_NE(set.init({}, make_config(2)), nullptr);
  const std::vector<EvEntry> too_many(kMaxEvsPerQp + 1, EvEntry{{}, 0});
  EXPECT_NE(set.init(too_many, make_config(1)), nullptr);
  EXPECT_NE(set.init(evs, make_config(0)), nullptr);
  EXPECT_NE(set.init(evs, make_config(kMaxPlanes + 1)), nullptr);
  EXPECT_NE(set.init(evs, make_config(1)), nullptr) << "an EV on plane 1 of a 1-plane set";
  EXPECT_NE(set.init(evs, make_config(2, 9)), nullptr) << "min_active above the EV count";
  EXPECT_STREQ(set.init(evs, make_config(2, 0)), "min_active is 0");
  auto cfg = make_config(2);
  cfg.probe_initial_ns = 0;
  EXPECT_NE(set.init(evs, cfg), nullptr);
  cfg = make_config(2);
  cfg.probe_max_ns = cfg.probe_initial_ns - 1;
  EXPECT_NE(set.init(evs, cfg), nullptr);
  cfg = make_config(2);
  cfg.probe_max_ns = kMaxEvTimerNs + 1;
  EXPECT_NE(set.init(evs, cfg), nullptr);
  cfg = make_config(2);
  cfg.ecn_avoid_ns = kMaxEvTimerNs + 1;
  EXPECT_NE(set.init(evs, cfg), nullptr);
  cfg = make_config(2);
  cfg.policy = static_cast<SprayPolicy>(7);
  EXPECT_NE(set.init(evs, cfg), nullptr);

  EXPECT_EQ(set.init(evs, make_config(2, 8)), nullptr) << "min_active may equal the EV count";
  EXPECT_EQ(set.size(), 8u);
  EXPECT_EQ(set.usable_count(), 8u);
  const std::vector<EvEntry> full(kMaxEvsPerQp, EvEntry{{}, 0});
  EXPECT_EQ(set.init(full, make_config(1)), nullptr);
  EXPECT_EQ(set.usable_count(), kMaxEvsPerQp);
}

TEST(EvSet, RoundRobinRotatesPlanesAndCoversEveryEv) {
  EvSet set = make_set(4, 8);
  std::vector<uint32_t> first_round;
  uint8_t prev_plane = 3;
  for (int i = 0; i < 32; i++) {
    const uint32_t ev = set.pick(0);
    ASSERT_NE(ev, kNoEv);
    EXPECT_EQ(set.entry(ev).plane, (prev_plane + 1) % 4) << "pick " << i;
    prev_plane = set.entry(ev).plane;
    first_round.push_back(ev);
  }
  EXPECT_EQ(std::set<uint32_t>(first_round.begin(), first_round.end()).size(), 32u);
  for (int i = 0; i < 32; i++) EXPECT_EQ(set.pick(0), first_round[i]) << "the cycle repeats";
}

TEST(EvSet, PlanesShareTrafficEquallyWhateverTheirUsableCount) {
  EvSet set = make_set(2, 8, 1);
  for (uint32_t ev = 3; ev < 16; ev += 2) {  // plane 1: keep only EV 1
    ASSERT_TRUE(set.set_denied(ev, true, 0));
  }
  int on_plane[2] = {};
  for (int i = 0; i < 1000; i++) on_plane[set.entry(set.pick(0)).plane]++;
  EXPECT_EQ(on_plane[0], 500);
  EXPECT_EQ(on_plane[1], 500);
}

TEST(EvSet, PickAvoidsTheAvoidEvWhileAnotherIsUsable) {
  EvSet set = make_set(2, 2);
  for (uint32_t avoid = 0; avoid < 4; avoid++)
    for (int i = 0; i < 50; i++) EXPECT_NE(set.pick(0, avoid), avoid);

  // Plane 1 reduced to EV 1 alone: avoiding it sends the packet to plane 0.
  ASSERT_TRUE(set.set_denied(3, true, 0));
  for (int i = 0; i < 10; i++) EXPECT_EQ(set.entry(set.pick(0, 1)).plane, 0);

  // The only usable EV is returned even when it is the one to avoid.
  ASSERT_TRUE(set.set_denied(0, true, 0));
  ASSERT_TRUE(set.set_denied(2, true, 0));
  EXPECT_EQ(set.usable_count(), 1u);
  EXPECT_EQ(set.pick(0, 1), 1u);
}

TEST(EvSet, LossMarksAssumedBadAtOnceAndTheEvIsNeverPicked) {
  EvSet set = make_set(2, 4);
  EXPECT_TRUE(set.on_loss(5, 7 * kUs));
  EXPECT_EQ(set.state(5), EvState::kAssumedBad);
  EXPECT_EQ(set.usable_count(), 7u);
  EXPECT_FALSE(set.usable(5));
  ASSERT_EQ(set.events().size(), 1u);
  const EvEvent& e = set.events()[0];
  EXPECT_EQ(e.ev, 5u);
  EXPECT_EQ(e.plane, 1);
  EXPECT_EQ(e.old_state, EvState::kGood);
  EXPECT_EQ(e.new_state, EvState::kAssumedBad);
  EXPECT_EQ(e.drop_count, 1u);
  EXPECT_EQ(e.at, 7 * kUs);
  for (int i = 0; i < 1000; i++) EXPECT_NE(set.pick(0), 5u);
  for (int i = 0; i < 100; i++) EXPECT_NE(set.pick_on_plane(1, 0), 5u);

  EXPECT_FALSE(set.on_loss(5, 8 * kUs)) << "already ASSUMED_BAD: only counted";
  EXPECT_EQ(set.counters(5).losses, 2u);
  EXPECT_EQ(set.counters(5).state_changes, 1u);
}

TEST(EvSet, ProbeBackoffDoublesUpToTheCap) {
  EvSet set = make_set(1, 4);
  const TimeNs t0 = 100 * kUs;
  EXPECT_EQ(set.next_wakeup(), kNever);
  ASSERT_TRUE(set.on_loss(2, t0));

  EXPECT_EQ(set.next_wakeup(), t0 + kProbeInitialNs);
  EXPECT_EQ(set.probe_due(t0 + kProbeInitialNs - 1), kNoEv);
  TimeNs now = t0 + kProbeInitialNs;
  std::vector<TimeNs> gaps;
  for (int i = 0; i < 7; i++) {
    ASSERT_EQ(set.probe_due(now), 2u);
    EXPECT_EQ(set.probe_due(now), 2u) << "still due until a probe is sent";
    set.on_probe_sent(2, now);
    EXPECT_EQ(set.probe_due(now), kNoEv);
    gaps.push_back(set.next_wakeup() - now);
    now = set.next_wakeup();
  }
  const std::vector<TimeNs> expected = {20 * kUs,  40 * kUs,  80 * kUs, 160 * kUs,
                                        160 * kUs, 160 * kUs, 160 * kUs};
  EXPECT_EQ(gaps, expected);
  EXPECT_EQ(set.counters(2).probes_sent, 7u);
}

// Of two EVs whose probes are due, the one that has waited longer goes
// first, whatever order they became ASSUMED_BAD in.
TEST(EvSet, TheEarliestDueProbeGoesFirst) {
  EvSet set = make_set(1, 4);
  ASSERT_TRUE(set.on_loss(1, 0));  // probe at 10 us
  ASSERT_EQ(set.probe_due(10 * kUs), 1u);
  set.on_probe_sent(1, 10 * kUs);         // next at 30 us
  ASSERT_TRUE(set.on_loss(3, 15 * kUs));  // probe at 25 us
  EXPECT_EQ(set.probe_due(35 * kUs), 3u);
  set.on_probe_sent(3, 35 * kUs);  // next at 55 us
  EXPECT_EQ(set.probe_due(35 * kUs), 1u);
  set.on_probe_sent(1, 35 * kUs);
  EXPECT_EQ(set.probe_due(35 * kUs), kNoEv);
}

TEST(EvSet, ProbeReplyRestoresGoodWithAnEvent) {
  EvSet set = make_set(1, 4);
  ASSERT_TRUE(set.on_loss(1, 0));
  EXPECT_FALSE(set.on_loss(1, 1 * kUs));
  EXPECT_FALSE(set.on_loss(1, 2 * kUs));
  set.clear_events();

  EXPECT_TRUE(set.on_probe_reply(1, 10 * kUs, 30 * kUs));
  EXPECT_EQ(set.state(1), EvState::kGood);
  EXPECT_EQ(set.usable_count(), 4u);
  EXPECT_EQ(set.next_wakeup(), kNever);
  ASSERT_EQ(set.events().size(), 1u);
  EXPECT_EQ(set.events()[0].old_state, EvState::kAssumedBad);
  EXPECT_EQ(set.events()[0].new_state, EvState::kGood);
  EXPECT_EQ(set.events()[0].drop_count, 2u) << "losses while ASSUMED_BAD";
  EXPECT_EQ(set.events()[0].at, 30 * kUs);
  EXPECT_EQ(set.counters(1).probe_replies, 1u);

  std::set<uint32_t> picked;
  for (int i = 0; i < 4; i++) picked.insert(set.pick(0));
  EXPECT_TRUE(picked.count(1));

  EXPECT_TRUE(set.on_probe_reply(1, 10 * kUs, 40 * kUs));  // a late duplicate reply
  EXPECT_EQ(set.events().size(), 1u);
  EXPECT_EQ(set.counters(1).probe_replies, 2u);
}

// Only a probe sent since the EV went bad speaks for the path now.
TEST(EvSet, AReplyToAProbeFromBeforeTheFailureLeavesTheEvBad) {
  EvSet set = make_set(1, 4);
  ASSERT_TRUE(set.on_loss(1, 20 * kUs));
  EXPECT_FALSE(set.on_probe_reply(1, 19 * kUs, 30 * kUs));
  EXPECT_EQ(set.state(1), EvState::kAssumedBad);
  EXPECT_EQ(set.counters(1).probe_replies, 1u);
  EXPECT_TRUE(set.on_probe_reply(1, 20 * kUs, 31 * kUs));
  EXPECT_EQ(set.state(1), EvState::kGood);
}

TEST(EvSet, LossesOnTheLastMinActiveUsableEvsAreOnlyCounted) {
  EvSet set = make_set(2, 4, 3);
  int marked = 0;
  for (uint32_t ev = 0; ev < 8; ev++) marked += set.on_loss(ev, ev * kUs);
  EXPECT_EQ(marked, 5);
  EXPECT_EQ(set.usable_count(), 3u);
  for (uint32_t ev = 5; ev < 8; ev++) {
    EXPECT_EQ(set.state(ev), EvState::kGood);
    EXPECT_EQ(set.counters(ev).losses, 1u);
  }
  EXPECT_EQ(set.events().size(), 5u);

  // A restored EV can be marked again: there is one above min_active.
  set.on_probe_reply(0, 10 * kUs, 50 * kUs);
  EXPECT_TRUE(set.on_loss(0, 51 * kUs));
  EXPECT_FALSE(set.on_loss(6, 52 * kUs));
}

TEST(EvSet, PlaneDownMakesAllItsEvsUnusableAndPlaneUpRestoresThem) {
  EvSet set = make_set(2, 4);
  set.set_plane_up(1, false);
  EXPECT_FALSE(set.plane_up(1));
  EXPECT_EQ(set.usable_count(), 4u);
  for (int i = 0; i < 100; i++) EXPECT_EQ(set.entry(set.pick(0)).plane, 0);
  EXPECT_EQ(set.pick_on_plane(1, 0), kNoEv);
  for (uint32_t ev = 1; ev < 8; ev += 2) EXPECT_EQ(set.state(ev), EvState::kGood);
  EXPECT_TRUE(set.events().empty()) << "a plane event is not an EV state change";

  EXPECT_FALSE(set.on_loss(1, 0)) << "losses on a down plane blame the plane";
  EXPECT_EQ(set.state(1), EvState::kGood);

  set.set_plane_up(0, false);
  EXPECT_EQ(set.usable_count(), 0u);
  EXPECT_EQ(set.pick(0), kNoEv);

  set.set_plane_up(0, true);
  set.set_plane_up(1, true);
  EXPECT_EQ(set.usable_count(), 8u);
  EXPECT_NE(set.entry(set.pick(0)).plane, set.entry(set.pick(0)).plane);
  EXPECT_EQ(set.entry(set.pick_on_plane(1, 0)).plane, 1);
}

TEST(EvSet, PlaneDownPausesProbesOfItsAssumedBadEvs) {
  EvSet set = make_set(2, 4);
  ASSERT_TRUE(set.on_loss(3, 0));  // plane 1
  set.set_plane_up(1, false);
  EXPECT_EQ(set.next_wakeup(), kNever);
  EXPECT_EQ(set.probe_due(kProbeMaxNs), kNoEv);
  EXPECT_EQ(set.state(3), EvState::kAssumedBad);

  set.set_plane_up(1, true);
  EXPECT_EQ(set.next_wakeup(), kProbeInitialNs);
  EXPECT_EQ(set.probe_due(kProbeMaxNs), 3u) << "overdue probes go out at once";
  EXPECT_EQ(set.usable_count(), 7u) << "still ASSUMED_BAD";
}

TEST(EvSet, DenyAndUndenyAreControllerStateChanges) {
  EvSet set = make_set(1, 3, 3);
  EXPECT_TRUE(set.set_denied(0, true, 5));
  EXPECT_EQ(set.state(0), EvState::kDenied);
  EXPECT_EQ(set.usable_count(), 2u) << "the controller may go below min_active";
  for (int i = 0; i < 10; i++) EXPECT_NE(set.pick(0), 0u);
  EXPECT_TRUE(set.set_denied(0, true, 6)) << "denying twice changes nothing";
  EXPECT_TRUE(set.set_denied(1, false, 6)) << "undenying a GOOD EV changes nothing";
  ASSERT_EQ(set.events().size(), 1u);
  EXPECT_EQ(set.events()[0].new_state, EvState::kDenied);

  EXPECT_TRUE(set.set_denied(0, false, 7));
  EXPECT_EQ(set.state(0), EvState::kGood);
  EXPECT_EQ(set.usable_count(), 3u);
  EXPECT_FALSE(set.set_denied(3, true, 7));
  EXPECT_FALSE(set.set_denied(kNoEv, false, 7));
  EXPECT_EQ(set.events().size(), 2u);
}

TEST(EvSet, DenyingAnAssumedBadEvStopsItsProbes) {
  EvSet set = make_set(1, 3);
  ASSERT_TRUE(set.on_loss(2, 0));
  ASSERT_TRUE(set.set_denied(2, true, 1));
  EXPECT_EQ(set.next_wakeup(), kNever);
  EXPECT_EQ(set.probe_due(kProbeMaxNs), kNoEv);
  set.on_probe_reply(2, 1, 2);  // a reply to a probe sent before the denial
  EXPECT_EQ(set.state(2), EvState::kDenied);
  ASSERT_TRUE(set.set_denied(2, false, 3));
  EXPECT_EQ(set.state(2), EvState::kGood);
}

TEST(EvSet, EcnAvoidSkipsARecentlyMarkedEvAndReturnsToItAfterEcnAvoidNs) {
  EvSet set = make_set(1, 4, 1, SprayPolicy::kEcnAvoid);
  set.on_ecn(1, 0);
  EXPECT_EQ(set.counters(1).ecn_marks, 1u);
  for (TimeNs t = 0; t < kEcnAvoidNs; t += kUs) EXPECT_NE(set.pick(t), 1u) << "t=" << t;
  std::set<uint32_t> picked;
  for (int i = 0; i < 4; i++) picked.insert(set.pick(kEcnAvoidNs));
  EXPECT_EQ(picked.size(), 4u);
}

TEST(EvSet, RoundRobinIgnoresEcnMarks) {
  EvSet set = make_set(1, 4);
  set.on_ecn(1, 0);
  std::set<uint32_t> picked;
  for (int i = 0; i < 4; i++) picked.insert(set.pick(0));
  EXPECT_EQ(picked.size(), 4u);
}

TEST(EvSet, EcnAvoidStillSpraysWhenEveryEvIsMarked) {
  EvSet set = make_set(1, 4, 1, SprayPolicy::kEcnAvoid);
  for (uint32_t ev = 0; ev < 4; ev++) set.on_ecn(ev, 0);
  std::set<uint32_t> picked;
  for (int i = 0; i < 4; i++) picked.insert(set.pick(1));
  EXPECT_EQ(picked.size(), 4u);
}

// Picks per plane over `n` picks.
std::vector<uint32_t> plane_shares(EvSet& set, uint8_t planes, uint32_t n) {
  std::vector<uint32_t> shares(planes, 0);
  for (uint32_t i = 0; i < n; i++) shares[set.entry(set.pick(kEcnAvoidNs * 10)).plane]++;
  return shares;
}

TEST(EvSet, EcnAvoidGivesACongestedPlaneLessTrafficAndCleanAcksWinItBack) {
  EvSet set = make_set(4, 4, 1, SprayPolicy::kEcnAvoid);
  EXPECT_EQ(plane_shares(set, 4, 400), (std::vector<uint32_t>{100, 100, 100, 100}));
  for (int i = 0; i < 400; i++) set.on_ecn(3, 0);  // EV 3 sits on plane 3
  EXPECT_EQ(set.plane_weight(3), kPlaneWeightMin) << "bounded below";
  std::vector<uint32_t> shares = plane_shares(set, 4, 4000);
  EXPECT_NEAR(shares[3], 4000 * 1.0 / (3 * 16 + 1), 2) << "weight 1/16 of each other plane's";
  EXPECT_NEAR(shares[0], shares[1], 1);
  // Clean acknowledgements restore it one step each, up to the maximum.
  for (uint32_t i = 0; i < kPlaneWeightMax; i++) set.on_acked(7);  // plane 3
  EXPECT_EQ(set.plane_weight(3), kPlaneWeightMax);
  EXPECT_EQ(plane_shares(set, 4, 400), (std::vector<uint32_t>{100, 100, 100, 100}));
}

TEST(EvSet, ATrimLowersAPlaneMoreThanACeMark) {
  EvSet set = make_set(2, 2, 1, SprayPolicy::kEcnAvoid);
  set.on_ecn(0, 0);
  set.on_trim(1);
  EXPECT_EQ(set.plane_weight(0), kPlaneWeightMax - kPlaneWeightMax / 64);
  EXPECT_EQ(set.plane_weight(1), kPlaneWeightMax - kPlaneWeightMax / 8);
}

TEST(EvSet, RoundRobinKeepsPlanesEqualWhateverTheirCongestion) {
  EvSet set = make_set(4, 4);
  for (int i = 0; i < 40; i++) set.on_trim(3);
  EXPECT_EQ(plane_shares(set, 4, 400), (std::vector<uint32_t>{100, 100, 100, 100}));
}

TEST(EvSet, EcnAvoidNeverPicksADownPlaneWhateverItsWeight) {
  EvSet set = make_set(3, 2, 1, SprayPolicy::kEcnAvoid);
  for (int i = 0; i < 200; i++) set.on_ecn(0, 0);
  set.set_plane_up(1, false);
  const std::vector<uint32_t> shares = plane_shares(set, 3, 170);
  EXPECT_EQ(shares[1], 0u);
  EXPECT_NEAR(shares[0], 10, 1) << "64 against 1024";
  EXPECT_NEAR(shares[2], 160, 1);
}

TEST(EvSet, CountersArePerEv) {
  EvSet set = make_set(1, 2);
  set.on_sent(0, 4096, false);
  set.on_sent(0, 1000, true);
  set.on_acked(0);
  set.on_trim(0);
  set.on_ecn(1, 0);
  const EvCounters& c = set.counters(0);
  EXPECT_EQ(c.tx_packets, 2u);
  EXPECT_EQ(c.tx_bytes, 5096u);
  EXPECT_EQ(c.retransmits, 1u);
  EXPECT_EQ(c.acked, 1u);
  EXPECT_EQ(c.trims, 1u);
  EXPECT_EQ(c.ecn_marks, 0u);
  EXPECT_EQ(set.counters(1).ecn_marks, 1u);
  EXPECT_EQ(set.counters(1).tx_packets, 0u);
}

TEST(EvSet, EventsBeyondTheBufferAreCountedAsLostUntilDrained) {
  EvSet set = make_set(1, 4);  // room for max(64, 2 * 4) events
  for (int i = 0; i < 40; i++) {
    ASSERT_TRUE(set.set_denied(0, true, i));
    ASSERT_TRUE(set.set_denied(0, false, i));
  }
  EXPECT_EQ(set.events().size(), 64u);
  EXPECT_EQ(set.events_lost(), 16u);
  EXPECT_EQ(set.counters(0).state_changes, 80u);
  set.clear_events();
  ASSERT_TRUE(set.set_denied(0, true, 100));
  EXPECT_EQ(set.events().size(), 1u);
  EXPECT_EQ(set.events()[0].at, 100u);
}

// Random operations against a shadow model of the states.
TEST(EvSet, RandomisedOperationsKeepEveryInvariant) {
  for (const uint64_t seed : seeds(25)) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const auto planes = static_cast<uint8_t>(1 + rng() % 8);
    const auto per_plane = static_cast<uint32_t>(1 + rng() % 16);
    const uint32_t n = planes * per_plane;
    const auto min_active = static_cast<uint32_t>(1 + rng() % n);
    const SprayPolicy policy = rng() % 2 ? SprayPolicy::kEcnAvoid : SprayPolicy::kRoundRobin;
    EvSet set;
    ASSERT_EQ(set.init(make_evs(planes, per_plane), make_config(planes, min_active, policy)),
              nullptr);
    std::vector<EvState> shadow(n, EvState::kGood);
    std::vector<bool> up(planes, true);
    auto is_usable = [&](uint32_t ev) {
      return shadow[ev] == EvState::kGood && up[set.entry(ev).plane];
    };
    TimeNs now = 0;

    for (int step = 0; step < 3000; step++) {
      SCOPED_TRACE(::testing::Message() << "step=" << step);
      now += rng() % (5 * kUs);
      const auto ev = static_cast<uint32_t>(rng() % n);
      switch (rng() % 9) {
        case 0: {
          const bool changed = set.on_loss(ev, now);
          if (changed) {
            EXPECT_TRUE(is_usable(ev));
            shadow[ev] = EvState::kAssumedBad;
            EXPECT_GE(set.usable_count(), min_active);
          } else if (is_usable(ev)) {
            EXPECT_LE(set.usable_count(), min_active) << "a usable EV was spared";
          }
          break;
        }
        case 1:
          set.on_probe_reply(ev, now, now);
          if (shadow[ev] == EvState::kAssumedBad) shadow[ev] = EvState::kGood;
          break;
        case 2: {
          const bool deny = rng() % 3 != 0;
          ASSERT_TRUE(set.set_denied(ev, deny, now));
          if (deny) shadow[ev] = EvState::kDenied;
          if (!deny && shadow[ev] == EvState::kDenied) shadow[ev] = EvState::kGood;
          break;
        }
        case 3: {
          const auto p = static_cast<uint8_t>(rng() % planes);
          up[p] = rng() % 4 != 0;
          set.set_plane_up(p, up[p]);
          break;
        }
        case 4:
          set.on_ecn(ev, now);
          break;
        case 5: {
          const uint32_t due = set.probe_due(now);
          if (due != kNoEv) {
            EXPECT_EQ(shadow[due], EvState::kAssumedBad);
            EXPECT_TRUE(up[set.entry(due).plane]);
            EXPECT_LE(set.next_wakeup(), now);
            set.on_probe_sent(due, now);
          } else {
            EXPECT_TRUE(set.next_wakeup() > now || set.next_wakeup() == kNever);
          }
          break;
        }
        case 6: {
          const auto p = static_cast<uint8_t>(rng() % planes);
          const uint32_t got = set.pick_on_plane(p, now);
          if (got != kNoEv) {
            EXPECT_EQ(set.entry(got).plane, p);
            EXPECT_TRUE(is_usable(got));
          }
          break;
        }
        default: {
          const uint32_t avoid = rng() % 2 ? ev : kNoEv;
          const uint32_t got = set.pick(now, avoid);
          if (got == kNoEv) {
            EXPECT_EQ(set.usable_count(), 0u);
          } else {
            EXPECT_TRUE(is_usable(got)) << "picked EV " << got;
            if (got == avoid) {
              EXPECT_EQ(set.usable_count(), 1u);
            }
          }
        }
      }
      uint32_t usable = 0;
      for (uint32_t i = 0; i < n; i++) {
        usable += is_usable(i);
        ASSERT_EQ(set.state(i), shadow[i]) << "EV " << i;
      }
      ASSERT_EQ(set.usable_count(), usable);
      for (const EvEvent& e : set.events()) EXPECT_NE(e.old_state, e.new_state);
      set.clear_events();
    }
  }
}

}  // namespace
}  // namespace softmrc::engine
