// softmrcd's and smrc-fabric's YAML readers: how numbers and MACs are
// spelt, keys given twice, values (defaults included) against the limits
// they must respect, and that every configuration shipped in config/ is
// accepted and means what its comments say.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "smrc-fabric/config.h"
#include "softmrcd/config.h"
#include "softmrcd/config_reader.h"

namespace softmrc::softmrcd {
namespace {

// One hosted endpoint and a peer, with `extra` added at the top level.
std::string with_peer(const std::string& extra) {
  return "endpoints:\n"
         "  - name: a\n"
         "    planes: [{port: net_null0, ip: 'fd00::a'}]\n"
         "peers:\n"
         "  - name: b\n"
         "    planes: [{mac: '02:00:00:00:0b:00', ip: 'fd00::b'}]\n" +
         extra;
}

// The message refusing softmrcd's `text` (after "t.yaml: "), or "accepted".
std::string softmrcd_error(const std::string& text, Config* cfg = nullptr) {
  Config local;
  std::string err;
  if (parse_config(text, "t.yaml", cfg ? cfg : &local, &err)) return "accepted";
  return err.rfind("t.yaml: ", 0) == 0 ? err.substr(8) : err;
}

std::string fabric_error(const std::string& text, smrc_fabric::FabricConfig* cfg = nullptr) {
  smrc_fabric::FabricConfig local;
  std::string err;
  if (smrc_fabric::parse_config(text, "t.yaml", cfg ? cfg : &local, &err)) return "accepted";
  return err.rfind("t.yaml: ", 0) == 0 ? err.substr(8) : err;
}

// "<key>: <problem>" of what read() refused, or "accepted".
template <typename Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const ConfigError& e) {
    return e.key + ": " + e.problem;
  }
  return "accepted";
}

// The same of whole_number() / decimal_number() on `text`.
std::string whole_error(const std::string& text, uint64_t lo, uint64_t hi) {
  return refusal([&] { whole_number(YAML::Node(text), "k", lo, hi); });
}

std::string decimal_error(const std::string& text, double lo, double hi) {
  return refusal([&] { decimal_number(YAML::Node(text), "k", lo, hi); });
}

TEST(WholeNumber, DecimalWithLeadingZerosOrHex) {
  const auto read = [](const std::string& text) {
    return whole_number(YAML::Node(text), "k", 0, UINT64_MAX);
  };
  EXPECT_EQ(read("0"), 0u);
  EXPECT_EQ(read("10"), 10u);
  EXPECT_EQ(read("010"), 10u);  // not octal 8
  EXPECT_EQ(read("0800"), 800u);
  EXPECT_EQ(read("0x1f"), 31u);
  EXPECT_EQ(read("0X10"), 16u);
  EXPECT_EQ(read("0x0010"), 16u);
  EXPECT_EQ(read("18446744073709551615"), UINT64_MAX);
}

TEST(WholeNumber, RefusesOtherSpellings) {
  for (const char* text : {"", "-1", "+1", "1.0", "1e3", "0x", "0x-1", "0x+1", "0o17", "0b101",
                           " 1", "1 ", "1_000", "08x", "0xg", "ten"})
    EXPECT_EQ(whole_error(text, 0, 100), "k: '" + std::string(text) + "' is not a whole number")
        << text;
}

TEST(WholeNumber, OutOfRange) {
  EXPECT_EQ(whole_error("0101", 0, 100), "k: 101 is out of range 0..100");
  EXPECT_EQ(whole_error("0x65", 0, 100), "k: 101 is out of range 0..100");
  EXPECT_EQ(whole_error("0", 1, 100), "k: 0 is out of range 1..100");
  // Too big for 64 bits: still a whole number, said as written.
  EXPECT_EQ(whole_error("99999999999999999999", 0, 100),
            "k: 99999999999999999999 is out of range 0..100");
}

TEST(DecimalNumber, DecimalNotation) {
  const auto read = [](const std::string& text) {
    return decimal_number(YAML::Node(text), "k", -10, 10);
  };
  EXPECT_DOUBLE_EQ(read("1.25"), 1.25);
  EXPECT_DOUBLE_EQ(read("01.5"), 1.5);
  EXPECT_DOUBLE_EQ(read(".5"), 0.5);
  EXPECT_DOUBLE_EQ(read("1e-3"), 0.001);
  EXPECT_DOUBLE_EQ(read("-2"), -2);
  EXPECT_FALSE(std::signbit(read("-0")));  // a probability of -0 would be printed so
  EXPECT_DOUBLE_EQ(read("7"), 7);
}

TEST(DecimalNumber, RefusesOtherSpellings) {
  for (const char* text :
       {"", "0x10", "0x1p3", "inf", "-inf", "nan", "+1", " 1", "1 ", "1,5", "1.5.2", "e3", "fast"})
    EXPECT_EQ(decimal_error(text, 0, 100), "k: '" + std::string(text) + "' is not a number")
        << text;
  EXPECT_EQ(decimal_error("-0.5", 0, 1), "k: -0.5 is out of range 0..1");
  EXPECT_EQ(decimal_error("1e400", 0, 1), "k: '1e400' is not a number");
}

TEST(Numbers, AsTheReadersSeeThem) {
  Config cfg;
  ASSERT_EQ(softmrcd_error("endpoints:\n"
                           "  - name: a\n"
                           "    planes: [{port: net_null0, ip: 'fd00::a', vlan: 010}]\n"
                           "rings: {rx_desc: 0x100}\n",
                           &cfg),
            "accepted");
  EXPECT_EQ(cfg.endpoints[0].planes[0].vlan, 10);
  EXPECT_EQ(cfg.rx_desc, 256);
  smrc_fabric::FabricConfig fab;
  ASSERT_EQ(fabric_error("links:\n"
                         "  - a: [net_null0]\n"
                         "    b: [net_null1]\n"
                         "    schedule: [{at_ms: 0800, plane: 0, state: down}]\n",
                         &fab),
            "accepted");
  ASSERT_EQ(fab.links[0].fabric.schedule.size(), 1u);
  EXPECT_EQ(fab.links[0].fabric.schedule[0].at_ns, 800'000'000u);
  EXPECT_EQ(fabric_error("links: [{a: [net_null0], b: [net_null1], rate_gbps: 0x10}]\n"),
            "links[0].rate_gbps: '0x10' is not a number");
  // The link model's rates are whole Mb/s.
  EXPECT_EQ(fabric_error("links: [{a: [net_null0], b: [net_null1], rate_gbps: 0.0015}]\n"),
            "links[0].rate_gbps: 0.0015 is not a whole number of Mb/s (a multiple of 0.001)");
  ASSERT_EQ(fabric_error("links: [{a: [net_null0], b: [net_null1], rate_gbps: 2.5}]\n", &fab),
            "accepted");
  EXPECT_EQ(fab.links[0].fabric.planes[0].link.rate_mbps, 2500u);
}

// An undo (for_ms) falls due with the entry after it: the entry wins.
TEST(Schedule, AnEntryAtTheEndOfAnotherIsNotUndone) {
  smrc_fabric::FabricConfig fab;
  ASSERT_EQ(fabric_error("links:\n"
                         "  - a: [net_null0]\n"
                         "    b: [net_null1]\n"
                         "    schedule:\n"
                         "      - {at_ms: 1000, plane: 0, loss: 0.5, for_ms: 1000}\n"
                         "      - {at_ms: 2000, plane: 0, loss: 0.2}\n"
                         "      - {at_ms: 3000, plane: 0, state: down, for_ms: 1000}\n"
                         "      - {at_ms: 4000, plane: 0, state: down}\n",
                         &fab),
            "accepted");
  const std::vector<LinkEvent>& s = fab.links[0].fabric.schedule;
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[2].at_ns, 2'000'000'000u);
  EXPECT_EQ(s[2].action, LinkAction::kLoss);
  EXPECT_DOUBLE_EQ(s[2].value, 0.2);
  EXPECT_EQ(s[4].action, LinkAction::kUp);
  EXPECT_EQ(s[5].at_ns, 4'000'000'000u);
  EXPECT_EQ(s[5].action, LinkAction::kDown);
}

// Corruption is scheduled as the other faults are, and undone to the
// plane's own setting.
TEST(Schedule, CorruptionComesAndGoes) {
  smrc_fabric::FabricConfig fab;
  ASSERT_EQ(fabric_error("links:\n"
                         "  - a: [net_null0, net_null2]\n"
                         "    b: [net_null1, net_null3]\n"
                         "    planes: [{plane: 0, corrupt: 0.01, corrupt_icrc: recompute}]\n"
                         "    schedule:\n"
                         "      - {at_ms: 100, plane: 0, corrupt: 0.2, for_ms: 50}\n"
                         "      - {at_ms: 200, plane: 1, corrupt_icrc: recompute, for_ms: 10}\n"
                         "      - {at_ms: 300, plane: 1, corrupt: 0.5, direction: b_to_a}\n",
                         &fab),
            "accepted");
  const std::vector<LinkEvent>& s = fab.links[0].fabric.schedule;
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].action, LinkAction::kCorrupt);
  EXPECT_DOUBLE_EQ(s[0].value, 0.2);
  EXPECT_EQ(s[1].at_ns, 150'000'000u);
  EXPECT_EQ(s[1].action, LinkAction::kCorrupt);
  EXPECT_DOUBLE_EQ(s[1].value, 0.01);
  EXPECT_EQ(s[2].action, LinkAction::kCorruptIcrc);
  EXPECT_EQ(s[2].corruption, fabric::Corruption::kRecomputedIcrc);
  EXPECT_EQ(s[3].at_ns, 210'000'000u);
  EXPECT_EQ(s[3].action, LinkAction::kCorruptIcrc);
  EXPECT_EQ(s[3].corruption, fabric::Corruption::kBadIcrc);
  EXPECT_EQ(s[4].direction, LinkDirection::kBToA);
  EXPECT_DOUBLE_EQ(s[4].value, 0.5);
  const auto entry = [](const std::string& e) {
    return fabric_error(
        "links: [{a: [net_null0], b: [net_null1], schedule: [{at_ms: 1, plane: 0, " + e + "}]}]\n");
  };
  EXPECT_EQ(entry("corrupt: 1.5"), "links[0].schedule[0].corrupt: 1.5 is out of range 0..1");
  EXPECT_EQ(entry("corrupt_icrc: fix"),
            "links[0].schedule[0].corrupt_icrc: 'fix' is not keep or recompute");
  EXPECT_EQ(entry("corrupt: 0.1, loss: 0.1"),
            "links[0].schedule[0]: has both 'loss' and 'corrupt'; one change per event");
  EXPECT_EQ(entry("corrupt: 0.1, evs: [1]"), "links[0].schedule[0].evs: only goes with blackhole");
}

TEST(Mac, SixHexPairs) {
  const auto peer_mac = [](const std::string& mac) {
    return "endpoints:\n"
           "  - name: a\n"
           "    planes: [{port: net_null0, ip: 'fd00::a'}]\n"
           "peers:\n"
           "  - name: b\n"
           "    planes: [{mac: '" +
           mac + "', ip: 'fd00::b'}]\n";
  };
  Config cfg;
  ASSERT_EQ(softmrcd_error(peer_mac("02:Ab:cD:00:10:ff"), &cfg), "accepted");
  const uint8_t want[6] = {0x02, 0xab, 0xcd, 0x00, 0x10, 0xff};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(cfg.endpoints[1].planes[0].mac.bytes[i], want[i]) << i;
  // sscanf's %x read "-1" as ff and "+2" as 02, and skipped spaces.
  for (const char* mac :
       {"-1:00:00:00:00:01", "+2:00:00:00:00:01", " 2:00:00:00:00:01", "02:00:00:00:00:1",
        "02-00-00-00-00-01", "02:00:00:00:00:0g", "02:00:00:00:00:01:"})
    EXPECT_EQ(softmrcd_error(peer_mac(mac)), "peers[0].planes[0].mac: '" + std::string(mac) +
                                                 "' is not a MAC address (like 02:00:00:00:00:01)")
        << mac;
}

TEST(DuplicateKeys, Refused) {
  EXPECT_EQ(softmrcd_error("path_mtu: 1024\n" + with_peer("path_mtu: 4096\n")),
            "path_mtu: is given twice (lines 1 and 8)");
  EXPECT_EQ(softmrcd_error("endpoints:\n"
                           "  - name: a\n"
                           "    planes: [{port: net_null0, ip: 'fd00::a', ip: 'fd00::c'}]\n"),
            "endpoints[0].planes[0].ip: is given twice (line 3)");
  EXPECT_EQ(softmrcd_error(with_peer("qp: {ev_profile: fast}\n"
                                     "ev_profiles:\n"
                                     "  fast: {evs_per_plane: 4}\n"
                                     "  fast: {evs_per_plane: 8}\n")),
            "ev_profiles.fast: is given twice (lines 9 and 10)");
  EXPECT_EQ(softmrcd_error(with_peer("cc_profiles: {x: {link_gbps: 10}, x: {}}\n")),
            "cc_profiles.x: is given twice (line 7)");
  EXPECT_EQ(fabric_error("links:\n"
                         "  - a: [net_null0]\n"
                         "    b: [net_null1]\n"
                         "    loss: 0.1\n"
                         "    loss: 0.2\n"),
            "links[0].loss: is given twice (lines 4 and 5)");
  EXPECT_EQ(fabric_error("stats: {snapshot_ms: 10}\n"
                         "links: [{a: [net_null0], b: [net_null1]}]\n"
                         "stats: {log_interval_ms: 0}\n"),
            "stats: is given twice (lines 1 and 3)");
}

// qp.mpr and qp.max_wimm apply to every QP (the traffic generator's, and
// applications' unless they say otherwise), so their defaults too must
// fit the limits; a flow's window must fit every bound.
TEST(Limits, DefaultsIncluded) {
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_mpr: 4}\n")),
            "qp.mpr: 8 (the default) is above limits.max_mpr (4)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_mpr: 4}\nqp: {mpr: 5}\n")),
            "qp.mpr: 5 is above limits.max_mpr (4)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_mpr: 4}\nqp: {mpr: 4}\n")), "accepted");
  EXPECT_EQ(softmrcd_error(with_peer("qp: {mpr: 65}\n")), "qp.mpr: 65 is out of range 1..64");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_wimm: 64}\n")),
            "qp.max_wimm: 128 (the default) is above limits.max_wimm (64)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_wimm: 64}\nqp: {max_wimm: 64}\n")), "accepted");

  const std::string fits = "limits: {max_wimm: 64}\nqp: {max_wimm: 64}\n";
  EXPECT_EQ(softmrcd_error(with_peer(fits + "traffic: [{from: a, to: b, window: 100}]\n")),
            "traffic[0].window: 100 is above qp.max_wimm (64)");
  EXPECT_EQ(softmrcd_error(with_peer(fits + "traffic: [{from: a, to: b, window: 64}]\n")),
            "accepted");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_recv_wr: 4}\ntraffic: [{from: a, to: b}]\n")),
            "traffic[0].window: 8 (the default) is above limits.max_recv_wr (4)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 10}\ntraffic: [{from: a, to: b}]\n")),
            "traffic[0].window: 8 (the default) is above limits.max_send_wr / 2 (5)");
  // The tightest bound is named.
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 10, max_recv_wr: 3}\n"
                                     "traffic: [{from: a, to: b, window: 9}]\n")),
            "traffic[0].window: 9 is above limits.max_recv_wr (3)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 10, max_recv_wr: 3}\n"
                                     "traffic: [{from: a, to: b, window: 3}]\n")),
            "accepted");
  // A write flow's send queue holds its window and two batch markers.
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 2}\n"
                                     "traffic: [{from: a, to: b, op: write, window: 1}]\n")),
            "traffic[0].window: 1 is above limits.max_send_wr - 2, the batch markers' room (0)");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 2}\n"
                                     "traffic: [{from: a, to: b, op: wimm, window: 1}]\n")),
            "accepted");
  EXPECT_EQ(softmrcd_error(with_peer("limits: {max_send_wr: 3}\n"
                                     "traffic: [{from: a, to: b, op: write, window: 1}]\n")),
            "accepted");
}

const std::filesystem::path kConfigDir = std::filesystem::path(SOFTMRC_SOURCE_ROOT) / "config";

// Every file of config/softmrcd is softmrcd's; config/smrc-fabric holds
// smrc-fabric's files and the endpoints' that go with them, so each of
// those must be accepted by one of the two readers. (config/scenarios is
// smrc-sim's: test/sim loads each of those.)
TEST(ShippedConfigs, Accepted) {
  int softmrcd_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigDir / "softmrcd")) {
    if (entry.path().extension() != ".yaml") continue;
    Config cfg;
    std::string err;
    EXPECT_TRUE(load_config(entry.path().string(), &cfg, &err)) << err;
    ++softmrcd_files;
  }
  EXPECT_GE(softmrcd_files, 7);

  int fabric_files = 0, endpoint_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigDir / "smrc-fabric")) {
    if (entry.path().extension() != ".yaml") continue;
    smrc_fabric::FabricConfig fab;
    Config cfg;
    std::string fabric_err, softmrcd_err;
    if (smrc_fabric::load_config(entry.path().string(), &fab, &fabric_err))
      ++fabric_files;
    else if (load_config(entry.path().string(), &cfg, &softmrcd_err))
      ++endpoint_files;
    else
      ADD_FAILURE() << "neither reader takes it: " << fabric_err << " / " << softmrcd_err;
  }
  EXPECT_GE(fabric_files, 1);
  EXPECT_GE(endpoint_files, 2);
}

// A directory is no file, not an empty one.
TEST(Files, DirectoryCannotBeOpened) {
  const std::string dir = kConfigDir.string();
  Config cfg;
  smrc_fabric::FabricConfig fab;
  std::string err;
  EXPECT_FALSE(load_config(dir, &cfg, &err));
  EXPECT_EQ(err, dir + ": cannot open: Is a directory");
  err.clear();
  EXPECT_FALSE(smrc_fabric::load_config(dir, &fab, &err));
  EXPECT_EQ(err, dir + ": cannot open: Is a directory");
}

// What demo.yaml's comment promises, so that a renamed key cannot drop it.
TEST(ShippedConfigs, Demo) {
  Config cfg;
  std::string err;
  ASSERT_TRUE(load_config((kConfigDir / "softmrcd" / "demo.yaml").string(), &cfg, &err)) << err;
  ASSERT_EQ(cfg.endpoints.size(), 2u);
  for (const EndpointSpec& e : cfg.endpoints) EXPECT_EQ(e.planes.size(), 4u) << e.name;
  ASSERT_EQ(cfg.links.size(), 1u);
  const LinkFabricSpec& f = cfg.links[0].fabric;
  ASSERT_EQ(f.planes.size(), 4u);
  for (uint32_t p = 0; p < 3; ++p) {
    const fabric::LinkConfig& l = f.planes[p].link;
    EXPECT_EQ(l.rate_mbps, 1250u) << p;
    EXPECT_EQ(l.delay_ns, 100'000u) << p;
    EXPECT_EQ(l.buffer_bytes, 256u << 10) << p;
    EXPECT_EQ(l.ecn_threshold_bytes, 64u << 10) << p;
    EXPECT_EQ(l.overflow, fabric::Overflow::kTrim) << p;
  }
  // Plane 3: slower, a small buffer that never marks: it trims.
  const fabric::LinkConfig& trimming = f.planes[3].link;
  EXPECT_EQ(trimming.rate_mbps, 600u);
  EXPECT_EQ(trimming.buffer_bytes, 16u << 10);
  EXPECT_EQ(trimming.ecn_threshold_bytes, fabric::kUnbounded);
  EXPECT_EQ(trimming.overflow, fabric::Overflow::kTrim);
  // Plane 2 fails at 8 s and comes back at 14 s.
  ASSERT_EQ(f.schedule.size(), 2u);
  EXPECT_EQ(f.schedule[0].plane, 2);
  EXPECT_EQ(f.schedule[0].action, LinkAction::kDown);
  EXPECT_EQ(f.schedule[0].at_ns, 8'000'000'000u);
  EXPECT_EQ(f.schedule[1].plane, 2);
  EXPECT_EQ(f.schedule[1].action, LinkAction::kUp);
  EXPECT_EQ(f.schedule[1].at_ns, 14'000'000'000u);
  ASSERT_EQ(cfg.traffic.size(), 1u);
  EXPECT_EQ(cfg.traffic[0].qps, 2u);
  EXPECT_EQ(cfg.traffic[0].op, TrafficOp::kWimm);
}

}  // namespace
}  // namespace softmrc::softmrcd
