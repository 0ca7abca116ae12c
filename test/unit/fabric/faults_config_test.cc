// Fault schedules (expansion, order, effect on the fabric) and the YAML
// readers, including that every error names its key.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fabric/config.h"
#include "fabric/faults.h"

namespace softmrc::fabric {
namespace {

TopologyConfig small() {
  TopologyConfig c;
  c.hosts = 16;
  c.planes = 2;
  c.radix = 8;
  c.reroute_ns = 1000;
  return c;
}

FaultSpec link_fault(FaultKind kind, TimeNs at) {
  FaultSpec s;
  s.where = "faults[0]";
  s.kind = kind;
  s.at_ns = at;
  s.target.form = FaultTarget::Form::kFabricLink;
  s.target.plane = 1;
  s.target.leaf = 2;
  s.target.spine = 3;
  return s;
}

std::string error_of(const std::string& yaml) {
  try {
    const ConfigNode root = ConfigNode::parse(yaml);
    if (root.has("topology")) read_topology(root.map("topology"));
    read_faults(root, "faults");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// A schedule applied to a fabric of the small topology.
class ScheduleOnFabric : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(f.init(small()), nullptr); }
  Fabric f;
  FaultSchedule s;
};

TEST_F(ScheduleOnFabric, LinkDownForADurationComesBackUp) {
  FaultSpec spec = link_fault(FaultKind::kLinkDown, 5000);
  spec.for_ns = 2000;
  ASSERT_EQ(s.add(spec, f.topology()), "");
  ASSERT_EQ(s.events().size(), 2u);
  const uint32_t up = f.topology().leaf_up(1, 2, 3);
  const uint32_t down = f.topology().spine_down(1, 3, 2);
  EXPECT_EQ(s.next_at(), 5000u);
  EXPECT_TRUE(s.apply_due(4999, f).empty());
  const auto first = s.apply_due(5000, f);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].what, "link_down p1 leaf2<->spine3");
  EXPECT_FALSE(f.link(up).up());
  EXPECT_FALSE(f.link(down).up());
  EXPECT_EQ(s.next_at(), 7000u);
  ASSERT_EQ(s.apply_due(7000, f).size(), 1u);
  EXPECT_TRUE(f.link(up).up());
  EXPECT_EQ(s.next_at(), kNever);
}

TEST_F(ScheduleOnFabric, FlapExpandsIntoCyclesInTimeOrderWithOtherFaults) {
  FaultSpec flap = link_fault(FaultKind::kFlap, 1000);
  flap.period_ns = 1000;
  flap.down_ns = 300;
  flap.count = 3;
  ASSERT_EQ(s.add(flap, f.topology()), "");
  FaultSpec gray = link_fault(FaultKind::kGray, 1500);
  gray.loss = 0.01;
  ASSERT_EQ(s.add(gray, f.topology()), "");
  std::vector<TimeNs> at;
  for (const FaultEvent& e : s.events()) at.push_back(e.at_ns);
  EXPECT_EQ(at, (std::vector<TimeNs>{1000, 1300, 1500, 2000, 2300, 3000, 3300}));
  s.apply_due(1600, f);
  EXPECT_DOUBLE_EQ(f.link(f.topology().leaf_up(1, 2, 3)).loss_rate(), 0.01);
  EXPECT_TRUE(f.link(f.topology().leaf_up(1, 2, 3)).up());
}

TEST_F(ScheduleOnFabric, SwitchRebootTakesEveryLinkOfTheSwitch) {
  FaultSpec spec;
  spec.where = "faults[0]";
  spec.kind = FaultKind::kSwitchDown;
  spec.target.form = FaultTarget::Form::kSpine;
  spec.target.plane = 0;
  spec.target.spine = 1;
  spec.at_ns = 100;
  spec.for_ns = 900;
  ASSERT_EQ(s.add(spec, f.topology()), "");
  EXPECT_EQ(s.events()[0].links.size(), 2u * f.topology().leaves());
  s.apply_due(100, f);
  for (uint32_t l = 0; l < f.topology().leaves(); ++l) {
    EXPECT_FALSE(f.link(f.topology().leaf_up(0, l, 1)).up());
    EXPECT_FALSE(f.link(f.topology().spine_down(0, 1, l)).up());
  }
  s.apply_due(1000, f);
  EXPECT_TRUE(f.link(f.topology().leaf_up(0, 0, 1)).up());
}

TEST_F(ScheduleOnFabric, CorruptionIsSetOnItsLinksAndUndoneWhenItEnds) {
  FaultSpec spec = link_fault(FaultKind::kCorrupt, 100);
  spec.target.direction = Direction::kUp;
  spec.probability = 0.25;
  spec.corruption = Corruption::kRecomputedIcrc;
  spec.for_ns = 100;
  ASSERT_EQ(s.add(spec, f.topology()), "");
  const Link& up = f.link(f.topology().leaf_up(1, 2, 3));
  s.apply_due(100, f);
  EXPECT_DOUBLE_EQ(up.corrupt_rate(), 0.25);
  EXPECT_EQ(up.corruption(), Corruption::kRecomputedIcrc);
  EXPECT_DOUBLE_EQ(f.link(f.topology().spine_down(1, 3, 2)).corrupt_rate(), 0);
  const auto end = s.apply_due(200, f);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].what, "corrupt p1 leaf2<->spine3 (up), ICRC recomputed: over");
  EXPECT_DOUBLE_EQ(up.corrupt_rate(), 0);
  // One corruption per link at a time; a probability it can use.
  FaultSpec again = spec;
  again.at_ns = 150;
  EXPECT_EQ(s.add(again, f.topology()),
            "faults[0]: overlaps faults[0] on a link: one corrupt fault per link at a time");
  again.at_ns = 200;
  again.probability = 0;
  EXPECT_EQ(s.add(again, f.topology()), "faults[0]: probability: must be in (0, 1]");
}

TEST_F(ScheduleOnFabric, DegradeAndBlackholeAreUndoneWhenTheyEnd) {
  FaultSpec slow = link_fault(FaultKind::kDegrade, 0);
  slow.rate_factor = 0.5;
  slow.for_ns = 100;
  FaultSpec hole = link_fault(FaultKind::kBlackhole, 0);
  hole.for_ns = 200;
  ASSERT_EQ(s.add(slow, f.topology()), "");
  ASSERT_EQ(s.add(hole, f.topology()), "");
  const Link& l = f.link(f.topology().leaf_up(1, 2, 3));
  s.apply_due(0, f);
  EXPECT_EQ(l.rate_bps(), l.config().rate_mbps * 1'000'000 / 2);
  EXPECT_TRUE(l.blackhole());
  s.apply_due(200, f);
  EXPECT_EQ(l.rate_bps(), l.config().rate_mbps * 1'000'000);
  EXPECT_FALSE(l.blackhole());
}

// Two down faults on one link: it is up only once neither holds it.
TEST_F(ScheduleOnFabric, OverlappingDownsHoldTheLinkUntilTheLastEnds) {
  FaultSpec first = link_fault(FaultKind::kLinkDown, 100);
  first.for_ns = 200;  // to 300
  FaultSpec second = link_fault(FaultKind::kLinkDown, 200);
  second.for_ns = 200;  // to 400
  FaultSpec reboot;     // spine 3, whose links include leaf 2's: 250 to 500
  reboot.where = "faults[2]";
  reboot.kind = FaultKind::kSwitchDown;
  reboot.target.form = FaultTarget::Form::kSpine;
  reboot.target.plane = 1;
  reboot.target.spine = 3;
  reboot.at_ns = 250;
  reboot.for_ns = 250;
  for (const FaultSpec& spec : {first, second, reboot}) ASSERT_EQ(s.add(spec, f.topology()), "");
  const Link& l = f.link(f.topology().leaf_up(1, 2, 3));
  for (const auto& [at, up] : std::vector<std::pair<TimeNs, bool>>{
           {100, false}, {300, false}, {400, false}, {499, false}, {500, true}}) {
    s.apply_due(at, f);
    EXPECT_EQ(l.up(), up) << at;
  }
}

TEST_F(ScheduleOnFabric, ABlackholeLastsWhileAnyHoldsIt) {
  FaultSpec forever = link_fault(FaultKind::kBlackhole, 100);
  FaultSpec brief = link_fault(FaultKind::kBlackhole, 50);
  brief.for_ns = 100;
  ASSERT_EQ(s.add(forever, f.topology()), "");
  ASSERT_EQ(s.add(brief, f.topology()), "");
  s.apply_due(1000, f);
  EXPECT_TRUE(f.link(f.topology().leaf_up(1, 2, 3)).blackhole());
}

// A fault that starts when another on its links ends is not undone by that
// end, whichever was written first.
TEST_F(ScheduleOnFabric, AnEndFallsBeforeAStartAtTheSameTime) {
  FaultSpec later = link_fault(FaultKind::kGray, 500);
  later.loss = 0.2;
  FaultSpec earlier = link_fault(FaultKind::kGray, 0);
  earlier.loss = 0.5;
  earlier.for_ns = 500;
  ASSERT_EQ(s.add(later, f.topology()), "");
  ASSERT_EQ(s.add(earlier, f.topology()), "");
  s.apply_due(500, f);
  EXPECT_DOUBLE_EQ(f.link(f.topology().leaf_up(1, 2, 3)).loss_rate(), 0.2);
}

TEST(FaultSchedule, RefusesWhatItCannotDoAsWritten) {
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  FaultSchedule s;
  FaultSpec up = link_fault(FaultKind::kLinkUp, 0);
  up.for_ns = 100;
  EXPECT_EQ(s.add(up, t),
            "faults[0]: for_us: a link_up fault is not undone (only link_down, switch_down, "
            "blackhole, gray, degrade and corrupt are)");
  FaultSpec flap = link_fault(FaultKind::kFlap, 0);
  flap.period_ns = 100;
  flap.down_ns = 10;
  flap.count = 2;
  flap.for_ns = 1000;
  EXPECT_NE(s.add(flap, t).find("for_us: a flap fault is not undone"), std::string::npos);
  FaultSpec sw;
  sw.where = "faults[0]";
  sw.kind = FaultKind::kSwitchDown;
  sw.target.form = FaultTarget::Form::kLeaf;
  sw.target.direction = Direction::kUp;
  EXPECT_EQ(s.add(sw, t),
            "faults[0]: direction: a switch's faults take every link into and out "
            "of it");
  sw.target.direction = Direction::kBoth;
  sw.kind = FaultKind::kSwitchUp;
  sw.for_ns = 5;
  EXPECT_NE(s.add(sw, t).find("for_us: a switch_up fault is not undone"), std::string::npos);
  // One loss (or rate) per link at a time.
  FaultSpec gray = link_fault(FaultKind::kGray, 100);
  gray.loss = 0.1;
  gray.for_ns = 100;
  ASSERT_EQ(s.add(gray, t), "");
  FaultSpec plane = link_fault(FaultKind::kGray, 150);
  plane.where = "faults[1]";
  plane.target.form = FaultTarget::Form::kPlaneFabric;
  plane.loss = 0.2;
  EXPECT_EQ(s.add(plane, t),
            "faults[1]: overlaps faults[0] on a link: one gray fault per link at a time");
  plane.at_ns = 200;
  EXPECT_EQ(s.add(plane, t), "");
  EXPECT_EQ(s.events().size(), 3u);
}

// Every cycle of a flap on every link is an event per link: bounded.
TEST(FaultSchedule, RefusesASchedulePastItsSize) {
  TopologyConfig big;
  big.hosts = 65536;
  big.radix = 1024;
  Topology t;
  ASSERT_EQ(t.init(big), nullptr);
  FaultSchedule s;
  FaultSpec flap = link_fault(FaultKind::kFlap, 0);
  flap.target.form = FaultTarget::Form::kPlaneFabric;
  flap.target.plane = 0;
  flap.period_ns = 10'000;
  flap.down_ns = 5'000;
  flap.count = 100'000;
  EXPECT_EQ(s.add(flap, t),
            "faults[0]: expands to 26214400000 link changes (200000 events x 131072 links), more "
            "than the 16777216 a schedule holds in all: fewer cycles or a narrower target");
  flap.count = 64;  // 16.8 M link changes
  EXPECT_EQ(s.add(flap, t), "");
  flap.count = 1;
  EXPECT_NE(s.add(flap, t), "");
  EXPECT_EQ(s.events().size(), 128u);
}

TEST(FaultSchedule, RefusesTargetsTheTopologyDoesNotHave) {
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  FaultSchedule s;
  FaultSpec spec = link_fault(FaultKind::kLinkDown, 0);
  spec.target.leaf = 9;
  EXPECT_EQ(s.add(spec, t), "faults[0]: leaf 9 does not exist (leaves: 4)");
  spec = link_fault(FaultKind::kSwitchDown, 0);
  EXPECT_EQ(s.add(spec, t), "faults[0]: switch_down needs a switch: leaf or spine alone");
  spec = link_fault(FaultKind::kFlap, 0);
  spec.period_ns = 100;
  spec.down_ns = 100;
  spec.count = 1;
  EXPECT_EQ(s.add(spec, t), "faults[0]: down_us: must be above 0 and below period_us");
  EXPECT_TRUE(s.events().empty());
}

TEST(Config, TopologyKeysWithUnitsAndDefaults) {
  const ConfigNode root = ConfigNode::parse(R"(
topology:
  hosts: 64
  planes: 4
  radix: 16
  oversubscription: 1
  host_link: {gbps: 400, delay_ns: 300}
  fabric_link: {gbps: 200}
  switch_queue: {buffer_kib: 512, ecn_kib: 100, overflow: drop}
  ev_routing: structured
  reroute_us: 50
)");
  const TopologyConfig c = read_topology(root.map("topology"));
  EXPECT_EQ(c.hosts, 64u);
  EXPECT_EQ(c.planes, 4u);
  EXPECT_EQ(c.host_link_mbps, 400'000u);
  EXPECT_EQ(c.host_link_delay_ns, 300u);
  EXPECT_EQ(c.fabric_link_mbps, 200'000u);
  EXPECT_EQ(c.fabric_link_delay_ns, 500u);  // default
  EXPECT_EQ(c.buffer_bytes, 512u << 10);
  EXPECT_EQ(c.ecn_threshold_bytes, 100u << 10);
  EXPECT_EQ(c.priority_buffer_bytes, 64u << 10);  // default
  EXPECT_EQ(c.overflow, Overflow::kDrop);
  EXPECT_EQ(c.ev_routing, EvRouting::kStructured);
  EXPECT_EQ(c.reroute_ns, 50'000u);
}

// ecn_kib as softmrcd reads it: 0 never marks, and a threshold the buffer
// never reaches is a mistake.
TEST(Config, EcnThresholdZeroNeverMarksAndMustBeBelowTheBuffer) {
  const auto queue = [](const std::string& q) {
    return read_topology(
        ConfigNode::parse("topology: {hosts: 16, radix: 8, switch_queue: {" + q + "}}")
            .map("topology"));
  };
  EXPECT_EQ(queue("ecn_kib: 0").ecn_threshold_bytes, kUnbounded);
  EXPECT_EQ(queue("ecn_kib: 0.5").ecn_threshold_bytes, 512u);
  EXPECT_EQ(queue("").ecn_threshold_bytes, 64u << 10);
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, switch_queue: {buffer_kib: 32, ecn_kib: "
                     "32}}"),
            "topology.switch_queue.ecn_kib: must be below buffer_kib (32): no packet would be "
            "marked, got '32'");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, switch_queue: {buffer_kib: 16}}"),
            "topology.switch_queue.ecn_kib: must be below buffer_kib (16): no packet would be "
            "marked, got '64' (the default)");
}

TEST(Config, EveryErrorNamesItsKey) {
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, radx: 3}"),
            "topology.radx: unknown key (known here: hosts, planes, radix, oversubscription, "
            "host_link, fabric_link, switch_queue, ev_routing, reroute_us, hash_seed)");
  EXPECT_EQ(error_of("topology: {hosts: 16}"),
            "topology.radix: missing (an integer in [2, 1024] is required)");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, host_link: {gbps: fast}}"),
            "topology.host_link.gbps: must be a number in [0.001, 10000], got 'fast'");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, host_link: {gbps: 0.0015}}"),
            "topology.host_link.gbps: must be a whole number of Mb/s (a multiple of 0.001), got "
            "'0.0015'");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, switch_queue: {overflow: mark}}"),
            "topology.switch_queue.overflow: must be one of drop, trim, got 'mark'");
  EXPECT_EQ(error_of("topology: {hosts: 500, radix: 8}"),
            "topology: hosts: more leaves than a spine has ports (raise radix or "
            "oversubscription)");
  EXPECT_EQ(error_of("faults: [{type: melt, at_us: 1, plane: 0, spine: 1}]"),
            "faults[0].type: must be one of link_down, link_up, switch_down, switch_up, "
            "blackhole, gray, flap, degrade, corrupt, got 'melt'");
  EXPECT_EQ(error_of("faults: [{type: gray, plane: 0, spine: 1, loss: 0.1}]"),
            "faults[0].at_us: missing (a number in [0, 1e+09] is required)");
  EXPECT_EQ(error_of("faults: [{type: gray, at_us: 1, plane: 0, host: 1, spine: 1, loss: 0.1}]"),
            "faults[0].plane: name exactly one target besides the plane: host, leaf and/or "
            "spine, or all_fabric_links: true");
  EXPECT_EQ(error_of("faults: [{type: link_down, at_us: 1, plane: 0, host: 1, loss: 0.1}]"),
            "faults[0].loss: does not apply to a link_down fault");
  EXPECT_EQ(error_of("faults: [{type: gray, at_us: 1, plane: 0, host: 1, loss: 0.1, icrc: keep}]"),
            "faults[0].icrc: does not apply to a gray fault");
  EXPECT_EQ(error_of("faults: [{type: corrupt, at_us: 1, plane: 0, host: 1, probability: 0.1, "
                     "icrc: fix}]"),
            "faults[0].icrc: must be one of keep, recompute, got 'fix'");
  EXPECT_EQ(error_of("faults: [{type: corrupt, at_us: 1, plane: 0, host: 1, loss: 0.1}]"),
            "faults[0].probability: missing (a number in [0, 1] is required)");
  EXPECT_EQ(error_of("faults: {type: link_down}"), "faults: must be a list");
  EXPECT_NE(error_of("topology: [1, 2").find("line 1"), std::string::npos);
}

// What yaml-cpp and strtod would let through: a key twice (the second
// silently lost), a key that is no name, hex floats, a signed or spaced
// integer (" -1" wrapped to 2^64-1).
TEST(Config, KeysAreNamesGivenOnceAndNumbersDecimal) {
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8}\nname: t\ntopology: {hosts: 8, radix: 4}"),
            "topology: is given twice (lines 1 and 3)");
  EXPECT_EQ(error_of("topology:\n  hosts: 16\n  radix: 8\n  hosts: 8\n"),
            "topology.hosts: is given twice (lines 2 and 4)");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8}\n? [x]\n: 1\n"),
            "the key on line 2 is a list or mapping, not a name");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, host_link: {? {a: 1} : 2}}"),
            "topology.host_link: the key on line 1 is a list or mapping, not a name");
  EXPECT_EQ(error_of("topology: {hosts: 16, radix: 8, oversubscription: 0x1p1}"),
            "topology.oversubscription: must be a number in [0.1, 64], got '0x1p1'");
  for (const char* v : {"' 2'", "'+2'", "'2 '", "inf"})
    EXPECT_EQ(error_of(std::string("topology: {hosts: 16, radix: 8, oversubscription: ") + v + "}"),
              std::string("topology.oversubscription: must be a number in [0.1, 64], got '") +
                  (v[0] == '\'' ? std::string(v + 1, std::strlen(v) - 2) : v) + "'")
        << v;
  for (const char* v : {" -1", "-1", "+1", " 1", "0x10", "18446744073709551616"})
    EXPECT_EQ(error_of(std::string("topology: {hosts: 16, radix: 8, hash_seed: '") + v + "'}"),
              std::string("topology.hash_seed: must be an integer in [0, 18446744073709551615], "
                          "got '") +
                  v + "'")
        << v;
  const TopologyConfig c =
      read_topology(ConfigNode::parse("topology: {hosts: 16, radix: 8, oversubscription: 1.5e0, "
                                      "hash_seed: 18446744073709551615}")
                        .map("topology"));
  EXPECT_DOUBLE_EQ(c.oversubscription, 1.5);
  EXPECT_EQ(c.hash_seed, UINT64_MAX);
}

TEST(Config, FaultsOfEveryKind) {
  const ConfigNode root = ConfigNode::parse(R"(
faults:
  - {type: link_down, at_us: 10, for_us: 5, plane: 0, leaf: 1, spine: 2}
  - {type: switch_down, at_us: 20, for_us: 100, plane: 1, spine: 3}
  - {type: gray, at_us: 0, plane: 1, all_fabric_links: true, loss: 0.01}
  - {type: flap, at_us: 1, plane: 0, host: 3, period_us: 10, down_us: 2, count: 4}
  - {type: degrade, at_us: 1, plane: 0, leaf: 0, spine: 0, rate: 0.25, direction: up}
  - {type: blackhole, at_us: 1, plane: 0, leaf: 2}
  - {type: corrupt, at_us: 2, plane: 1, host: 0, probability: 0.5}
  - {type: corrupt, at_us: 2, plane: 0, host: 0, probability: 1, icrc: recompute}
)");
  const std::vector<FaultSpec> specs = read_faults(root, "faults");
  ASSERT_EQ(specs.size(), 8u);
  EXPECT_EQ(specs[0].kind, FaultKind::kLinkDown);
  EXPECT_EQ(specs[0].at_ns, 10'000u);
  EXPECT_EQ(specs[0].for_ns, 5'000u);
  EXPECT_EQ(specs[1].target.form, FaultTarget::Form::kSpine);
  EXPECT_EQ(specs[2].target.form, FaultTarget::Form::kPlaneFabric);
  EXPECT_DOUBLE_EQ(specs[2].loss, 0.01);
  EXPECT_EQ(specs[3].target.form, FaultTarget::Form::kHostLink);
  EXPECT_EQ(specs[3].count, 4u);
  EXPECT_EQ(specs[4].target.direction, Direction::kUp);
  EXPECT_EQ(specs[5].target.form, FaultTarget::Form::kLeaf);
  EXPECT_EQ(specs[6].kind, FaultKind::kCorrupt);
  EXPECT_DOUBLE_EQ(specs[6].probability, 0.5);
  EXPECT_EQ(specs[6].corruption, Corruption::kBadIcrc);  // icrc: keep, the default
  EXPECT_EQ(specs[7].corruption, Corruption::kRecomputedIcrc);
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  FaultSchedule s;
  for (const FaultSpec& spec : specs) EXPECT_EQ(s.add(spec, t), "");
  EXPECT_EQ(s.events().size(), 2u + 2 + 1 + 8 + 1 + 1 + 1 + 1);
}

}  // namespace
}  // namespace softmrc::fabric
