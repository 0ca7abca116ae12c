// Topology shape, link numbering, forwarding by EV (hash and structured),
// rerouting after failures, and whole-path transit.
#include "fabric/fabric.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "print.h"

namespace softmrc::fabric {
namespace {

// 16 hosts, radix 8 at 1:1: 4 hosts per leaf, 4 leaves, 4 spines.
TopologyConfig small(uint32_t planes = 2) {
  TopologyConfig c;
  c.hosts = 16;
  c.planes = planes;
  c.radix = 8;
  c.host_link_mbps = 100'000;
  c.fabric_link_mbps = 100'000;
  c.host_link_delay_ns = 500;
  c.fabric_link_delay_ns = 700;
  c.reroute_ns = 10'000;
  return c;
}

Fabric make(const TopologyConfig& c) {
  Fabric f;
  EXPECT_EQ(f.init(c), nullptr);
  return f;
}

TEST(Topology, ShapeFollowsRadixAndOversubscription) {
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  EXPECT_EQ(t.hosts_per_leaf(), 4u);
  EXPECT_EQ(t.leaves(), 4u);
  EXPECT_EQ(t.spines(), 4u);
  EXPECT_EQ(t.leaf_of(5), 1u);
  TopologyConfig c = small();
  c.oversubscription = 3;  // 6 host ports, 2 uplinks
  ASSERT_EQ(t.init(c), nullptr);
  EXPECT_EQ(t.hosts_per_leaf(), 6u);
  EXPECT_EQ(t.spines(), 2u);
  EXPECT_EQ(t.leaves(), 3u);  // the last leaf is partly populated
}

TEST(Topology, RefusesMoreLeavesThanASpineHasPorts) {
  Topology t;
  TopologyConfig c = small();
  c.hosts = 100;
  EXPECT_STREQ(t.init(c),
               "hosts: more leaves than a spine has ports (raise radix or oversubscription)");
  c = small();
  c.planes = 0;
  EXPECT_STREQ(t.init(c), "planes: not 1..32");
}

TEST(Topology, LinkIdsAreDenseAndDescribeThemselves) {
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  std::set<uint32_t> seen;
  for (uint32_t p = 0; p < t.planes(); ++p) {
    for (uint32_t h = 0; h < t.hosts(); ++h) {
      seen.insert(t.host_up(p, h));
      seen.insert(t.host_down(p, h));
      const LinkInfo i = t.info(t.host_down(p, h));
      EXPECT_EQ(i.kind, LinkKind::kHostDown);
      EXPECT_EQ(i.host, h);
      EXPECT_EQ(i.plane, p);
    }
    for (uint32_t l = 0; l < t.leaves(); ++l) {
      for (uint32_t s = 0; s < t.spines(); ++s) {
        seen.insert(t.leaf_up(p, l, s));
        seen.insert(t.spine_down(p, s, l));
        const LinkInfo i = t.info(t.spine_down(p, s, l));
        EXPECT_EQ(i.kind, LinkKind::kSpineDown);
        EXPECT_EQ(i.leaf, l);
        EXPECT_EQ(i.spine, s);
      }
    }
  }
  EXPECT_EQ(seen.size(), t.num_links());
  EXPECT_EQ(*seen.rbegin(), t.num_links() - 1);
  EXPECT_EQ(t.link_name(t.leaf_up(1, 2, 3)), "p1 leaf2->spine3");
}

TEST(Topology, NicQueuesAreUnboundedAndSwitchQueuesAreNot) {
  Topology t;
  ASSERT_EQ(t.init(small()), nullptr);
  EXPECT_EQ(t.link_config(t.host_up(0, 0)).buffer_bytes, kUnbounded);
  EXPECT_EQ(t.link_config(t.host_down(0, 0)).buffer_bytes, small().buffer_bytes);
  EXPECT_EQ(t.link_config(t.leaf_up(0, 0, 0)).overflow, Overflow::kTrim);
  EXPECT_EQ(t.link_config(t.spine_down(0, 0, 0)).delay_ns, 700u);
}

TEST(Fabric, SameLeafTakesTwoHopsOtherLeavesFour) {
  Fabric f = make(small());
  Path p;
  ASSERT_TRUE(f.route(1, 0, 3, 99, &p));
  ASSERT_EQ(p.hops, 2u);
  EXPECT_EQ(p.links[0], f.topology().host_up(1, 0));
  EXPECT_EQ(p.links[1], f.topology().host_down(1, 3));
  ASSERT_TRUE(f.route(1, 0, 13, 99, &p));
  ASSERT_EQ(p.hops, 4u);
  const LinkInfo up = f.topology().info(p.links[1]);
  const LinkInfo down = f.topology().info(p.links[2]);
  EXPECT_EQ(up.leaf, 0u);
  EXPECT_EQ(down.leaf, 3u);
  EXPECT_EQ(up.spine, down.spine);
}

TEST(Fabric, HashSpreadsEvsEvenlyOverSpines) {
  Fabric f = make(small());
  std::vector<int> per_spine(4);
  for (uint32_t ev = 0; ev < 4000; ++ev) {
    Path p;
    ASSERT_TRUE(f.route(0, 1, 9, ev, &p));
    ++per_spine[f.topology().info(p.links[1]).spine];
  }
  for (int n : per_spine) EXPECT_NEAR(n, 1000, 120);
  // The same EV between other hosts may take another spine: ECMP hashes
  // the addresses too.
  int differ = 0;
  for (uint32_t ev = 0; ev < 100; ++ev) {
    Path a, b;
    ASSERT_TRUE(f.route(0, 1, 9, ev, &a));
    ASSERT_TRUE(f.route(0, 2, 9, ev, &b));
    differ += a.links[2] != b.links[2];
  }
  EXPECT_GT(differ, 50);
}

TEST(Fabric, StructuredEvNamesTheSpine) {
  TopologyConfig c = small();
  c.ev_routing = EvRouting::kStructured;
  Fabric f = make(c);
  for (uint32_t ev = 0; ev < 8; ++ev) {
    Path p;
    ASSERT_TRUE(f.route(0, 1, 9, ev, &p));
    EXPECT_EQ(f.topology().info(p.links[1]).spine, ev % 4);
  }
}

// After a link fails, ECMP keeps hashing onto it (and losing packets) for
// reroute_ns; then the routing withdraws it and no EV maps there.
TEST(Fabric, HashRoutingAvoidsAFailedLinkOnceRoutingHasReacted) {
  Fabric f = make(small());
  const Topology& t = f.topology();
  const uint32_t dead = t.spine_down(0, 2, 3);  // spine 2 -> leaf 3
  f.set_link_up(dead, false, 1000);
  EXPECT_EQ(f.next_route_change(), 11'000u);
  const auto via_dead = [&] {
    int n = 0;
    for (uint32_t ev = 0; ev < 400; ++ev) {
      Path p;
      EXPECT_TRUE(f.route(0, 0, 12, ev, &p));
      n += p.links[2] == dead;
    }
    return n;
  };
  std::vector<uint32_t> changed;
  f.advance(10'999, &changed);
  EXPECT_TRUE(changed.empty());
  EXPECT_GT(via_dead(), 50);
  f.advance(11'000, &changed);
  EXPECT_EQ(changed, std::vector<uint32_t>{dead});
  EXPECT_EQ(via_dead(), 0);
  EXPECT_FALSE(f.routed(dead));
  // Traffic to other leaves may still use spine 2.
  int spine2 = 0;
  for (uint32_t ev = 0; ev < 400; ++ev) {
    Path p;
    ASSERT_TRUE(f.route(0, 0, 8, ev, &p));
    spine2 += t.info(p.links[1]).spine == 2;
  }
  EXPECT_GT(spine2, 50);
  f.set_link_up(dead, true, 20'000);
  f.advance(30'000);
  EXPECT_GT(via_dead(), 50);
}

TEST(Fabric, NoRouteWhenEverySpineTowardsTheLeafIsWithdrawn) {
  Fabric f = make(small(1));
  const Topology& t = f.topology();
  for (uint32_t s = 0; s < t.spines(); ++s) f.set_link_up(t.spine_down(0, s, 2), false, 0);
  f.advance(t.config().reroute_ns);
  Path p;
  EXPECT_FALSE(f.route(0, 0, 9, 1, &p));
  PacketMeta pkt;
  pkt.bytes = 1000;
  Rng rng;
  EXPECT_EQ(f.transit(0, 0, 9, pkt, 0, rng).drop, DropReason::kNoRoute);
  EXPECT_TRUE(f.route(0, 0, 5, 1, &p));  // leaf 1 is still reachable
}

TEST(Fabric, StructuredRoutingIgnoresRoutingState) {
  TopologyConfig c = small(1);
  c.ev_routing = EvRouting::kStructured;
  Fabric f = make(c);
  const uint32_t dead = f.topology().leaf_up(0, 0, 1);
  f.set_link_up(dead, false, 0);
  f.advance(c.reroute_ns);
  Path p;
  ASSERT_TRUE(f.route(0, 0, 9, 1, &p));
  EXPECT_EQ(p.links[1], dead);
  PacketMeta pkt;
  pkt.bytes = 1000;
  pkt.ev = 1;
  Rng rng;
  uint32_t where = 0;
  EXPECT_EQ(f.transit(0, 0, 9, pkt, 0, rng, &where).drop, DropReason::kLinkDown);
  EXPECT_EQ(where, dead);
}

TEST(Fabric, BlackholeIsNeverRoutedAround) {
  Fabric f = make(small(1));
  const uint32_t bad = f.topology().leaf_up(0, 0, 1);
  f.link(bad).set_blackhole(true);
  f.advance(1'000'000'000);
  EXPECT_TRUE(f.routed(bad));
  EXPECT_EQ(f.next_route_change(), kNever);
}

TEST(Fabric, TransitAddsSerialisationAndDelayPerHop) {
  Fabric f = make(small(1));
  PacketMeta pkt;
  pkt.bytes = 1250;  // 100 ns per hop at 100 Gb/s
  Rng rng;
  const Verdict v = f.transit(0, 0, 9, pkt, 1000, rng);
  ASSERT_TRUE(v.delivered());
  EXPECT_EQ(v.at_ns, 1000u + 4 * 100 + 2 * 500 + 2 * 700);
  const Verdict same_leaf = f.transit(0, 0, 1, pkt, 5000, rng);
  EXPECT_EQ(same_leaf.at_ns, 5000u + 2 * 100 + 2 * 500);
}

TEST(Fabric, LeafDownTakesItsHostsPortsDown) {
  Fabric f = make(small());
  EXPECT_TRUE(f.host_port_up(0, 5));
  f.set_switch_up({0, SwitchTier::kLeaf, 1}, false, 0);
  for (uint32_t h = 4; h < 8; ++h) EXPECT_FALSE(f.host_port_up(0, h)) << h;
  EXPECT_TRUE(f.host_port_up(0, 8));
  EXPECT_TRUE(f.host_port_up(1, 5));
  f.set_switch_up({0, SwitchTier::kLeaf, 1}, true, 10);
  EXPECT_TRUE(f.host_port_up(0, 5));
}

TEST(Fabric, EvBlackholeKillsThatEvFromEveryHost) {
  Fabric f = make(small(1));
  f.set_ev_blackholed(0, 77, true);
  Rng rng;
  for (uint32_t src = 0; src < 16; ++src) {
    PacketMeta a;
    a.bytes = 100;
    a.ev = 77;
    PacketMeta b = a;
    b.ev = 78;
    const uint32_t dst = (src + 5) % 16;
    EXPECT_EQ(f.transit(0, src, dst, a, 0, rng).drop, DropReason::kEvBlackhole);
    EXPECT_TRUE(f.transit(0, src, dst, b, 0, rng).delivered());
  }
}

}  // namespace
}  // namespace softmrc::fabric
