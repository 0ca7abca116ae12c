// The fabric emulator's data path on real mbufs (app/softmrcd/emulator.h):
// delivery times, the priority class overtaking queued data, trimming and
// CE marking of built frames (checked by parsing them again), EV
// blackholes, loss, the delay line's bound, a hop going down, SRv6 paths
// routed and consumed (an SRH's segment included), payload corruption
// under a stale or a recomputed ICRC; and the goodput trace with the
// recovery measurement. One EAL for the binary.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "eal_environment.h"
#include "softmrcd/emulator.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {
namespace {

test::EalEnvironment* const kEal = test::add_eal("smrcd-emu-test", 1023, 0, 10240);

constexpr uint32_t kPayload = 4096;
constexpr uint64_t kUs = 1000;

struct FrameOptions {
  bool data = true;
  wire::IpVersion ip = wire::IpVersion::kV6;
  uint16_t udp_src_port = 0xc000;
  // SRv6 mode: the path as the framer sends it (the address, and the SRH's
  // segment if any), instead of a UDP source port.
  const char* srv6_address = nullptr;
  const char* srv6_segment = nullptr;
};

// A frame as softmrcd's framer builds it: data with DSCP 26 and ECT(0),
// control (an ACK) with DSCP 48.
std::vector<uint8_t> build(const FrameOptions& o) {
  wire::FrameSpec f;
  f.ip_version = o.ip;
  f.src_mac.bytes[5] = 1;
  f.dst_mac.bytes[5] = 2;
  f.src_ip[0] = f.dst_ip[0] = 10;
  f.src_ip[3] = 1;
  f.dst_ip[3] = 2;
  wire::WireEv ev;
  ev.bytes[0] = static_cast<uint8_t>(o.udp_src_port >> 8);
  ev.bytes[1] = static_cast<uint8_t>(o.udp_src_port);
  if (o.srv6_address != nullptr) {
    f.ev_mode = wire::EvMode::kSrv6;
    EXPECT_EQ(inet_pton(AF_INET6, o.srv6_address, ev.bytes), 1);
    f.srv6_srh = o.srv6_segment != nullptr;
    if (f.srv6_srh) {
      EXPECT_EQ(inet_pton(AF_INET6, o.srv6_segment, ev.bytes + 16), 1);
    }
  }
  wire::Transport t;
  std::vector<uint8_t> payload;
  wire::TxMarking mark{48, wire::kEcnNotEct};
  if (o.data) {
    t.opcode = wire::Opcode::kWriteOnly;
    t.data.msg_len = kPayload;
    payload.assign(kPayload, 0x5a);
    mark = {26, wire::kEcnEct0};
  } else {
    t.opcode = wire::Opcode::kAck;
  }
  t.dest_qpn = 7;
  t.psn = 100;
  std::vector<uint8_t> out(wire::kMaxHeaderLen + kPayload + wire::kIcrcLen);
  out.resize(wire::build_packet(f, ev, mark, t, payload, out));
  return out;
}

rte_mbuf* mbuf_of(const std::vector<uint8_t>& frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(kEal->pool);
  std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(),
              frame.size());
  return m;
}

// The same frame as a chain: headers, then payload and ICRC (as the framer
// sends a payload in place).
rte_mbuf* chained_mbuf_of(const std::vector<uint8_t>& frame, uint16_t header_len) {
  rte_mbuf* head = rte_pktmbuf_alloc(kEal->pool);
  rte_mbuf* tail = rte_pktmbuf_alloc(kEal->pool);
  std::memcpy(rte_pktmbuf_append(head, header_len), frame.data(), header_len);
  const auto rest = static_cast<uint16_t>(frame.size() - header_len);
  std::memcpy(rte_pktmbuf_append(tail, rest), frame.data() + header_len, rest);
  EXPECT_EQ(rte_pktmbuf_chain(head, tail), 0);
  return head;
}

std::vector<uint8_t> bytes_of(const rte_mbuf* m) {
  std::vector<uint8_t> out(m->pkt_len);
  const void* p = rte_pktmbuf_read(m, 0, m->pkt_len, out.data());
  if (p != out.data()) std::memcpy(out.data(), p, m->pkt_len);
  return out;
}

// What a hop delivers by `now`, taken whole.
struct Sink {
  std::vector<rte_mbuf*> got;
  uint16_t room = UINT16_MAX;

  void take(EmulatedHop& hop, uint64_t now) {
    hop.deliver(now, [this](rte_mbuf** pkts, uint16_t n) {
      const uint16_t k = std::min(n, room);
      got.insert(got.end(), pkts, pkts + k);
      room = static_cast<uint16_t>(room - k);
      return k;
    });
  }
  ~Sink() {
    for (rte_mbuf* m : got) rte_pktmbuf_free(m);
  }
};

HopConfig gbps1(uint64_t delay_ns) {
  HopConfig c;
  c.link.rate_mbps = 1000;
  c.link.delay_ns = delay_ns;
  return c;
}

uint64_t serialise_ns(size_t bytes) {
  return (bytes * 8 * 1000 + 999) / 1000;  // at 1 Gb/s
}

size_t drops(const EmulatedHop& hop, fabric::DropReason r) {
  return hop.counters().drops[size_t(r)];
}

// The first of the seeds a randomised test runs: EMULATOR_SEED, else 1.
uint64_t first_seed() {
  const char* env = std::getenv("EMULATOR_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 1;
}

std::string seed_trace(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: EMULATOR_SEED=" + std::to_string(seed) + ")";
}

// Where two frames of one length differ.
std::vector<size_t> differences(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<size_t> at;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) at.push_back(i);
  return at;
}

TEST(EmulatedHop, DeliversAfterSerialisationAndDelay) {
  EmulatedHop hop;
  ASSERT_EQ(hop.init(gbps1(10 * kUs)), nullptr);
  const std::vector<uint8_t> frame = build({});
  rte_mbuf* m = mbuf_of(frame);
  hop.admit(&m, 1, 0);
  const uint64_t due = serialise_ns(frame.size()) + 10 * kUs;
  Sink sink;
  sink.take(hop, due - 1);
  EXPECT_TRUE(sink.got.empty());
  sink.take(hop, due);
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(bytes_of(sink.got[0]), frame);
  const HopCounters c = hop.counters();
  EXPECT_EQ(c.packets, 1u);
  EXPECT_EQ(c.bytes, frame.size());
  EXPECT_EQ(c.payload_bytes, kPayload);
  EXPECT_EQ(hop.held(), 0u);
}

TEST(EmulatedHop, ControlOvertakesQueuedData) {
  EmulatedHop hop;
  ASSERT_EQ(hop.init(gbps1(5 * kUs)), nullptr);
  rte_mbuf* pkts[4] = {mbuf_of(build({})), mbuf_of(build({})), mbuf_of(build({})),
                       mbuf_of(build({.data = false}))};
  const rte_mbuf* ack = pkts[3];
  const rte_mbuf* first = pkts[0];
  hop.admit(pkts, 4, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 4u);
  EXPECT_EQ(sink.got[0], ack);  // it waited for none of the data
  EXPECT_EQ(sink.got[1], first);
}

TEST(EmulatedHop, TrimsWhatOverflowsAndRewritesItsHeaders) {
  HopConfig c = gbps1(0);
  c.link.buffer_bytes = 8 << 10;
  c.link.overflow = fabric::Overflow::kTrim;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  rte_mbuf* pkts[3] = {mbuf_of(build({})), mbuf_of(build({})), mbuf_of(build({}))};
  hop.admit(pkts, 3, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 3u);
  EXPECT_EQ(hop.counters().trims, 2u);
  // The trimmed headers ride the priority class: they arrive first.
  wire::ParseConfig pc;
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint8_t> frame = bytes_of(sink.got[i]);
    wire::PacketView v;
    ASSERT_EQ(wire::parse(frame, pc, &v), wire::ParseStatus::kOk) << i;
    EXPECT_TRUE(v.trimmed);
    EXPECT_EQ(v.payload_len, 0u);
    EXPECT_EQ(v.dscp, wire::DscpConfig{}.trimmed);
    EXPECT_EQ(v.t.psn, 100u);
  }
  EXPECT_EQ(sink.got[2]->pkt_len, build({}).size());
  EXPECT_EQ(hop.counters().payload_bytes, kPayload);  // trimmed headers carry none
}

TEST(EmulatedHop, TrimsAChainedFrameIntoItsFirstSegment) {
  HopConfig c = gbps1(0);
  c.link.buffer_bytes = 5 << 10;  // room for one frame: the chained one is trimmed
  c.link.overflow = fabric::Overflow::kTrim;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  const std::vector<uint8_t> frame = build({});
  const uint16_t header_len = static_cast<uint16_t>(frame.size() - kPayload - wire::kIcrcLen);
  rte_mbuf* pkts[2] = {mbuf_of(frame), chained_mbuf_of(frame, header_len)};
  hop.admit(pkts, 2, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 2u);
  rte_mbuf* trimmed = sink.got[0];
  EXPECT_EQ(trimmed->nb_segs, 1);
  EXPECT_EQ(trimmed->pkt_len, header_len);
  wire::PacketView v;
  ASSERT_EQ(wire::parse(bytes_of(trimmed), wire::ParseConfig{}, &v), wire::ParseStatus::kOk);
  EXPECT_TRUE(v.trimmed);
}

// A frame the queue would trim but lib/wire cannot cut (a bad IPv4 header
// checksum) is dropped as untrimmable: not counted as a trim too, and it
// takes no time from the priority class.
TEST(EmulatedHop, AFrameThatCannotBeCutIsOnlyAnUntrimmableDrop) {
  HopConfig c = gbps1(0);
  c.link.buffer_bytes = 5 << 10;  // room for one frame
  c.link.overflow = fabric::Overflow::kTrim;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  const std::vector<uint8_t> good = build({.ip = wire::IpVersion::kV4});
  std::vector<uint8_t> bad = good;
  bad[sizeof(wire::EthHdr) + offsetof(wire::Ipv4Hdr, checksum)] ^= 0xff;
  rte_mbuf* pkts[3] = {mbuf_of(good), mbuf_of(bad), mbuf_of(good)};
  const rte_mbuf* cut = pkts[2];
  hop.admit(pkts, 3, 0);
  const HopCounters k = hop.counters();
  EXPECT_EQ(k.hop_drops[size_t(HopDrop::kUntrimmable)], 1u);
  EXPECT_EQ(k.trims, 1u);
  EXPECT_EQ(k.total_drops(), 1u);
  // The third frame's header is out after its own serialisation only.
  Sink sink;
  sink.take(hop, serialise_ns(good.size() - kPayload - wire::kIcrcLen));
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(sink.got[0], cut);
  sink.take(hop, 1'000 * kUs);
  EXPECT_EQ(sink.got.size(), 2u);
}

TEST(EmulatedHop, MarksCeAndKeepsTheIpv4ChecksumAndIcrcValid) {
  HopConfig c = gbps1(0);
  c.link.ecn_threshold_bytes = 1 << 10;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  const FrameOptions v4{.ip = wire::IpVersion::kV4};
  rte_mbuf* pkts[2] = {mbuf_of(build(v4)), mbuf_of(build(v4))};
  hop.admit(pkts, 2, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(hop.counters().ce_marks, 1u);
  wire::PacketView v;
  ASSERT_EQ(wire::parse(bytes_of(sink.got[0]), wire::ParseConfig{}, &v), wire::ParseStatus::kOk);
  EXPECT_EQ(v.ecn, wire::kEcnEct0);  // found the queue empty
  ASSERT_EQ(wire::parse(bytes_of(sink.got[1]), wire::ParseConfig{}, &v), wire::ParseStatus::kOk);
  EXPECT_EQ(v.ecn, wire::kEcnCe);
}

TEST(EmulatedHop, BlackholesTheChosenEvOnly) {
  EmulatedHop hop;
  ASSERT_EQ(hop.init(gbps1(0)), nullptr);
  hop.set_ev_blackholed(0xc001, true);
  EXPECT_EQ(hop.state().blackholed_evs, 1u);
  rte_mbuf* pkts[2] = {mbuf_of(build({.udp_src_port = 0xc001})),
                       mbuf_of(build({.udp_src_port = 0xc002}))};
  hop.admit(pkts, 2, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  EXPECT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(drops(hop, fabric::DropReason::kEvBlackhole), 1u);
  hop.set_ev_blackholed(0xc001, false);
  EXPECT_EQ(hop.state().blackholed_evs, 0u);
}

// An SRv6 plane routes on the active uSID and consumes the path down to the
// destination's uSID, going on into an SRH's segment; the ICRC stays valid.
TEST(EmulatedHop, RoutesSrv6PathsAndDeliversThemToTheDestination) {
  HopConfig c = gbps1(0);
  c.srv6 = true;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  hop.set_ev_blackholed(0xc001, true);
  rte_mbuf* pkts[3] = {
      mbuf_of(build({.srv6_address = "fcbb:bb00:c001:2::"})),
      mbuf_of(build({.srv6_address = "fcbb:bb00:c002:c005:2::"})),
      mbuf_of(
          build({.srv6_address = "fcbb:bb00:c003:1:2:3:4:5", .srv6_segment = "fcbb:bb00:7:2::"})),
  };
  hop.admit(pkts, 3, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(drops(hop, fabric::DropReason::kEvBlackhole), 1u);
  wire::ParseConfig cfg;
  cfg.ev_mode = wire::EvMode::kSrv6;
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<uint8_t> f = bytes_of(sink.got[i]);
    wire::PacketView v;
    ASSERT_EQ(wire::parse(f, cfg, &v), wire::ParseStatus::kOk) << i;
    char dst[INET6_ADDRSTRLEN];
    EXPECT_STREQ(inet_ntop(AF_INET6, v.dst_ip, dst, sizeof(dst)), "fcbb:bb00:2::") << i;
    EXPECT_EQ(v.has_srh, i == 1);
  }
  const std::vector<uint8_t> srh = bytes_of(sink.got[1]);
  EXPECT_EQ(srh[sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr) +
                offsetof(wire::SrhOneSegment, segments_left)],
            0);
}

TEST(EmulatedHop, LosesAboutTheConfiguredShare) {
  HopConfig c = gbps1(0);
  c.loss = 0.1;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  Sink sink;
  for (int i = 0; i < 2000; ++i) {
    rte_mbuf* m = mbuf_of(build({.data = false}));
    hop.admit(&m, 1, uint64_t(i) * 10 * kUs);
    sink.take(hop, uint64_t(i) * 10 * kUs + 5 * kUs);
    for (rte_mbuf* got : sink.got) rte_pktmbuf_free(got);
    sink.got.clear();
  }
  const size_t lost = drops(hop, fabric::DropReason::kLoss);
  EXPECT_GT(lost, 120u);
  EXPECT_LT(lost, 280u);
  EXPECT_EQ(hop.counters().packets + lost, 2000u);
}

// A data frame's headers are all but its payload and ICRC.
size_t header_len(const std::vector<uint8_t>& frame) {
  return frame.size() - kPayload - wire::kIcrcLen;
}

// The data frames a corrupting hop is tried on: IPv4 and IPv6 on a plain
// hop, and on an SRv6 hop a path (whose destination the ICRC leaves out,
// and the hop shifts to the receiver's).
struct CorruptionSetup {
  bool srv6;
  std::vector<FrameOptions> kinds;
};
const CorruptionSetup kSetups[] = {
    {false, {{.ip = wire::IpVersion::kV4}, {}}},
    {true, {{.srv6_address = "fcbb:bb00:c001:2::"}}},
};

// What the setup's frames look like once delivered uncorrupted.
std::vector<uint8_t> delivered_whole(const CorruptionSetup& s, const FrameOptions& o) {
  std::vector<uint8_t> f = build(o);
  if (s.srv6) {
    EXPECT_EQ(inet_pton(AF_INET6, "fcbb:bb00:2::",
                        f.data() + sizeof(wire::EthHdr) + offsetof(wire::Ipv6Hdr, dst)),
              1);
  }
  return f;
}

wire::ParseConfig parse_config_for(const CorruptionSetup& s) {
  wire::ParseConfig pc;
  if (s.srv6) pc.ev_mode = wire::EvMode::kSrv6;
  return pc;
}

// Sends each of the setup's frames `rounds` times through `hop`, one at a
// time, and returns what arrived, in order.
std::vector<std::vector<uint8_t>> through(EmulatedHop& hop, const CorruptionSetup& s, int rounds) {
  std::vector<std::vector<uint8_t>> out;
  uint64_t now = 0;
  for (int r = 0; r < rounds; ++r) {
    for (const FrameOptions& o : s.kinds) {
      rte_mbuf* m = mbuf_of(build(o));
      hop.admit(&m, 1, now);
      now += 100 * kUs;
      Sink sink;
      sink.take(hop, now);
      EXPECT_EQ(sink.got.size(), 1u);
      for (rte_mbuf* got : sink.got) out.push_back(bytes_of(got));
    }
  }
  return out;
}

HopConfig corrupting(const CorruptionSetup& s, double p, fabric::Corruption how, uint64_t seed) {
  HopConfig c = gbps1(0);
  c.corrupt = p;
  c.corrupt_icrc = how;
  c.srv6 = s.srv6;
  c.seed = seed;
  return c;
}

// A bit error on the wire: one payload byte changed, the ICRC left as it
// was, so the receiver's check refuses every such frame.
TEST(EmulatedHop, CorruptionWithAStaleIcrcFailsTheIcrcCheck) {
  const uint64_t base = first_seed();
  for (uint64_t seed = base; seed < base + 3; ++seed) {
    for (const CorruptionSetup& s : kSetups) {
      SCOPED_TRACE(seed_trace(seed) + (s.srv6 ? ", SRv6" : ""));
      EmulatedHop hop;
      ASSERT_EQ(hop.init(corrupting(s, 1, fabric::Corruption::kBadIcrc, seed)), nullptr);
      const auto got = through(hop, s, 20);
      ASSERT_EQ(got.size(), 20 * s.kinds.size());
      std::set<size_t> places;  // the byte is drawn, not always the same one
      for (size_t i = 0; i < got.size(); ++i) {
        const std::vector<uint8_t> whole = delivered_whole(s, s.kinds[i % s.kinds.size()]);
        ASSERT_EQ(got[i].size(), whole.size()) << i;
        const std::vector<size_t> at = differences(got[i], whole);
        ASSERT_EQ(at.size(), 1u) << i;
        EXPECT_GE(at[0], header_len(whole)) << i;
        EXPECT_LT(at[0], header_len(whole) + kPayload) << i;
        places.insert(at[0] - header_len(whole));
        wire::PacketView v;
        EXPECT_EQ(wire::parse(got[i], parse_config_for(s), &v), wire::ParseStatus::kBadIcrc) << i;
      }
      EXPECT_GT(places.size(), 1u);
      EXPECT_EQ(hop.counters().corrupted, got.size());
      EXPECT_EQ(hop.counters().corrupt_skipped_chained, 0u);
    }
  }
}

// A faulty switch: one payload byte changed under a fresh ICRC, so the
// frame parses and only its bytes show it.
TEST(EmulatedHop, CorruptionWithARecomputedIcrcParses) {
  const uint64_t base = first_seed();
  for (uint64_t seed = base; seed < base + 3; ++seed) {
    for (const CorruptionSetup& s : kSetups) {
      SCOPED_TRACE(seed_trace(seed) + (s.srv6 ? ", SRv6" : ""));
      EmulatedHop hop;
      ASSERT_EQ(hop.init(corrupting(s, 1, fabric::Corruption::kRecomputedIcrc, seed)), nullptr);
      const auto got = through(hop, s, 20);
      ASSERT_EQ(got.size(), 20 * s.kinds.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const std::vector<uint8_t> whole = delivered_whole(s, s.kinds[i % s.kinds.size()]);
        const std::vector<size_t> at = differences(got[i], whole);
        const size_t icrc_at = whole.size() - wire::kIcrcLen;
        ASSERT_FALSE(at.empty()) << i;
        EXPECT_GE(at[0], header_len(whole)) << i;
        EXPECT_LT(at[0], icrc_at) << i;
        EXPECT_TRUE(at.size() == 1 || at[1] >= icrc_at) << i << ": one payload byte, then the ICRC";
        wire::PacketView v;
        ASSERT_EQ(wire::parse(got[i], parse_config_for(s), &v), wire::ParseStatus::kOk) << i;
        EXPECT_EQ(v.payload_len, kPayload) << i;
      }
      EXPECT_EQ(hop.counters().corrupted, got.size());
      EXPECT_EQ(hop.state().corrupt_icrc, fabric::Corruption::kRecomputedIcrc);
    }
  }
}

// Control packets have no payload, a probability of 0 changes nothing, and
// the counter counts only what was changed.
TEST(EmulatedHop, CorruptionLeavesControlPacketsAndAZeroProbabilityAlone) {
  HopConfig c = gbps1(0);
  c.corrupt = 1;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  const std::vector<uint8_t> ack = build({.data = false});
  Sink sink;
  for (int i = 0; i < 50; ++i) {
    rte_mbuf* m = mbuf_of(ack);
    hop.admit(&m, 1, uint64_t(i) * 10 * kUs);
  }
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 50u);
  for (rte_mbuf* m : sink.got) EXPECT_EQ(bytes_of(m), ack);
  EXPECT_EQ(hop.counters().corrupted, 0u);

  hop.set_corrupt(0);
  EXPECT_EQ(hop.state().corrupt, 0);
  const std::vector<uint8_t> data = build({});
  Sink data_sink;
  for (int i = 0; i < 50; ++i) {
    rte_mbuf* m = mbuf_of(data);
    hop.admit(&m, 1, 2'000 * kUs + uint64_t(i) * 100 * kUs);
  }
  data_sink.take(hop, 10'000 * kUs);
  ASSERT_EQ(data_sink.got.size(), 50u);
  for (rte_mbuf* m : data_sink.got) EXPECT_EQ(bytes_of(m), data);
  EXPECT_EQ(hop.counters().corrupted, 0u);

  // At run time, both the share and the ICRC's fate.
  hop.set_corrupt(1);
  hop.set_corrupt_icrc(fabric::Corruption::kRecomputedIcrc);
  rte_mbuf* m = mbuf_of(data);
  hop.admit(&m, 1, 20'000 * kUs);
  Sink on;
  on.take(hop, 30'000 * kUs);
  ASSERT_EQ(on.got.size(), 1u);
  wire::PacketView v;
  EXPECT_EQ(wire::parse(bytes_of(on.got[0]), wire::ParseConfig{}, &v), wire::ParseStatus::kOk);
  EXPECT_FALSE(differences(bytes_of(on.got[0]), data).empty());
  EXPECT_EQ(hop.counters().corrupted, 1u);
}

// Which frames and which bytes follow the seed: a run is reproducible.
TEST(EmulatedHop, CorruptionFollowsTheSeed) {
  const uint64_t base = first_seed();
  for (uint64_t seed = base; seed < base + 3; ++seed) {
    SCOPED_TRACE(seed_trace(seed));
    const CorruptionSetup& s = kSetups[0];
    EmulatedHop one, two, other;
    ASSERT_EQ(one.init(corrupting(s, 0.3, fabric::Corruption::kBadIcrc, seed)), nullptr);
    ASSERT_EQ(two.init(corrupting(s, 0.3, fabric::Corruption::kBadIcrc, seed)), nullptr);
    ASSERT_EQ(other.init(corrupting(s, 0.3, fabric::Corruption::kBadIcrc, seed + 1000)), nullptr);
    const auto a = through(one, s, 150);
    EXPECT_EQ(a, through(two, s, 150));
    EXPECT_NE(a, through(other, s, 150));
    size_t changed = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t n = differences(a[i], build(s.kinds[i % s.kinds.size()])).size();
      EXPECT_LE(n, 1u) << i;
      changed += n;
    }
    EXPECT_EQ(one.counters().corrupted, changed);
    // 30% of 300: mean 90, sd 8; allow 5 sd.
    EXPECT_NEAR(double(changed), 90, 40);
  }
}

// A chained frame's payload may be the sender's own memory, sent in place:
// the hop corrupts a copy of it made in the first segment, and leaves the
// sender's segment as it was; with no room there for the copy, it leaves
// the frame whole and counts it.
TEST(EmulatedHop, CorruptionChangesACopyOfAChainedFramesPayload) {
  const uint64_t seed = first_seed();
  SCOPED_TRACE(seed_trace(seed));
  HopConfig c = gbps1(0);
  c.corrupt = 1;
  c.seed = seed;
  EmulatedHop hop;
  ASSERT_EQ(hop.init(c), nullptr);
  const std::vector<uint8_t> frame = build({});
  const auto header = static_cast<uint16_t>(header_len(frame));
  rte_mbuf* roomy = chained_mbuf_of(frame, header);
  rte_mbuf* cramped = chained_mbuf_of(frame, header);
  // No tailroom in the first segment: its header ends its buffer.
  cramped->data_off = static_cast<uint16_t>(cramped->buf_len - header);
  std::memcpy(rte_pktmbuf_mtod(cramped, uint8_t*), frame.data(), header);
  rte_mbuf* sender = roomy->next;  // the payload as the sender keeps it
  rte_mbuf_refcnt_update(sender, 1);
  rte_mbuf* pkts[2] = {roomy, cramped};
  hop.admit(pkts, 2, 0);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(sink.got[0]->nb_segs, 1);
  const std::vector<uint8_t> got = bytes_of(sink.got[0]);
  EXPECT_EQ(differences(got, frame).size(), 1u);
  wire::PacketView v;
  EXPECT_EQ(wire::parse(got, wire::ParseConfig{}, &v), wire::ParseStatus::kBadIcrc);
  EXPECT_EQ(bytes_of(sender), std::vector<uint8_t>(frame.begin() + header, frame.end()));
  EXPECT_EQ(rte_mbuf_refcnt_read(sender), 1);  // the hop let go of it
  rte_pktmbuf_free(sender);
  EXPECT_EQ(bytes_of(sink.got[1]), frame);
  EXPECT_EQ(hop.counters().corrupted, 1u);
  EXPECT_EQ(hop.counters().corrupt_skipped_chained, 1u);
}

TEST(EmulatedHop, HoldsAtMostItsDelayLineAndFreesEverything) {
  HopConfig c = gbps1(100 * kUs);
  c.delay_line_packets = 16;
  const unsigned before = rte_mempool_avail_count(kEal->pool);
  {
    EmulatedHop hop;
    ASSERT_EQ(hop.init(c), nullptr);
    rte_mbuf* pkts[20];
    for (rte_mbuf*& m : pkts) m = mbuf_of(build({.data = false}));
    hop.admit(pkts, 20, 0);
    EXPECT_EQ(hop.held(), 16u);
    EXPECT_EQ(hop.counters().hop_drops[size_t(HopDrop::kDelayLineFull)], 4u);
    EXPECT_EQ(hop.counters().max_held_packets, 16u);
    Sink sink;
    sink.room = 10;  // the receiver's ring takes 10
    sink.take(hop, 1'000 * kUs);
    EXPECT_EQ(sink.got.size(), 10u);
    EXPECT_EQ(hop.counters().hop_drops[size_t(HopDrop::kRxRingFull)], 6u);
  }
  EXPECT_EQ(rte_mempool_avail_count(kEal->pool), before);
}

// The run's end drops what the delay line still holds, counted, so that
// what a hop took adds up to what it delivered and dropped.
TEST(EmulatedHop, WhatItHoldsAtTheEndIsDroppedAtShutdown) {
  const unsigned before = rte_mempool_avail_count(kEal->pool);
  EmulatedHop hop;
  ASSERT_EQ(hop.init(gbps1(50 * kUs)), nullptr);
  const std::vector<uint8_t> frame = build({});
  rte_mbuf* pkts[5];
  for (rte_mbuf*& m : pkts) m = mbuf_of(frame);
  hop.admit(pkts, 5, 0);
  {
    Sink sink;
    sink.take(hop, 2 * serialise_ns(frame.size()) + 50 * kUs);
    EXPECT_EQ(sink.got.size(), 2u);
  }
  hop.clear();
  const HopCounters c = hop.counters();
  EXPECT_EQ(c.hop_drops[size_t(HopDrop::kAtShutdown)], 3u);
  EXPECT_EQ(c.packets + c.total_drops(), 5u);
  EXPECT_EQ(rte_mempool_avail_count(kEal->pool), before);
}

TEST(EmulatedHop, GoingDownLosesWhatItHolds) {
  const unsigned before = rte_mempool_avail_count(kEal->pool);
  EmulatedHop hop;
  ASSERT_EQ(hop.init(gbps1(50 * kUs)), nullptr);
  rte_mbuf* pkts[5];
  for (rte_mbuf*& m : pkts) m = mbuf_of(build({}));
  hop.admit(pkts, 5, 0);
  hop.set_up(false, 10 * kUs);
  EXPECT_EQ(hop.held(), 0u);
  EXPECT_EQ(drops(hop, fabric::DropReason::kLinkDown), 5u);
  EXPECT_EQ(rte_mempool_avail_count(kEal->pool), before);
  rte_mbuf* m = mbuf_of(build({}));
  hop.admit(&m, 1, 20 * kUs);
  EXPECT_EQ(drops(hop, fabric::DropReason::kLinkDown), 6u);
  hop.set_up(true, 30 * kUs);
  m = mbuf_of(build({}));
  hop.admit(&m, 1, 30 * kUs);
  Sink sink;
  sink.take(hop, 1'000 * kUs);
  EXPECT_EQ(sink.got.size(), 1u);
}

TEST(DeliveryTrace, CapturesTheBinsAroundAMomentAndMeasuresRecovery) {
  DeliveryTrace trace;
  trace.init(100 * kUs, 50, 150, 2);
  // 1000 bytes per 100 us bin, nothing for 0.5 ms after the fault at 10 ms,
  // then 750 per bin.
  for (uint64_t t = 0; t < 30'000 * kUs; t += 100 * kUs) {
    if (t == 10'000 * kUs) {
      ASSERT_TRUE(trace.mark(t, 42));
    }
    const bool gap = t >= 10'000 * kUs && t < 10'500 * kUs;
    trace.add(t, gap ? 0 : t < 10'000 * kUs ? 1000 : 750);
  }
  ASSERT_EQ(trace.captures().size(), 1u);
  const DeliveryTrace::Capture& c = trace.captures()[0];
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.tag, 42u);
  EXPECT_EQ(c.num_bins, 200u);
  EXPECT_EQ(c.at_bin, 50u);
  const Recovery r = measure_recovery(c, trace.bin_ns(), 0.75, 2, 10);
  ASSERT_TRUE(r.measured);
  EXPECT_TRUE(r.recovered);
  EXPECT_DOUBLE_EQ(r.before_gbps, 1000 * 8 / 100e3);
  EXPECT_EQ(r.recovery_ns, 500 * kUs);
  EXPECT_DOUBLE_EQ(r.lowest_gbps, 0);
  EXPECT_EQ(r.longest_gap_ns, 500 * kUs);
  EXPECT_DOUBLE_EQ(r.after_gbps, 750 * 8 / 100e3);
}

TEST(DeliveryTrace, ABurstRightAfterTheFaultIsNotARecovery) {
  DeliveryTrace::Capture c;
  c.at_bin = 20;
  c.num_bins = 200;
  c.bins.assign(200, 1000);
  // In-flight data lands at once, then 0.3 ms at half the level.
  for (uint32_t i = 22; i < 25; ++i) c.bins[i] = 500;
  const Recovery r = measure_recovery(c, 100 * kUs, 0.75, 1, 10);
  ASSERT_TRUE(r.measured && r.recovered);
  EXPECT_EQ(r.recovery_ns, 500 * kUs);
  EXPECT_DOUBLE_EQ(r.lowest_gbps, 500 * 8 / 100e3);
}

TEST(DeliveryTrace, AnOpenCaptureIsClosedWithWhatThereIs) {
  DeliveryTrace trace;
  trace.init(100 * kUs, 20, 100, 1);
  for (uint64_t t = 0; t < 5'000 * kUs; t += 100 * kUs) trace.add(t, 1000);
  ASSERT_TRUE(trace.mark(5'000 * kUs, 1));
  EXPECT_FALSE(trace.mark(5'000 * kUs, 2));  // one capture only
  trace.add(6'000 * kUs, 1000);
  trace.finish(6'000 * kUs);
  const DeliveryTrace::Capture& c = trace.captures()[0];
  EXPECT_FALSE(c.done);
  EXPECT_EQ(c.num_bins, 30u);  // 2 ms before, 1 ms after
  EXPECT_EQ(c.bins[19], 1000u);
  EXPECT_EQ(c.bins[25], 0u);  // the trace skipped from 5 to 6 ms
  EXPECT_EQ(c.max_stall_ns, 1'000 * kUs);
}

// A stall shortly before the moment counts, one longer ago does not.
TEST(DeliveryTrace, AStallJustBeforeTheMomentCounts) {
  DeliveryTrace trace;
  trace.init(100 * kUs, 500, 100, 2);  // 50 ms before, 10 ms after
  uint64_t t = 0;
  for (; t < 5'000 * kUs; t += 100 * kUs) trace.add(t, 1000);
  t += 3'000 * kUs;  // a 3.1 ms stall, 20 ms before the first moment: too long ago
  for (; t < 28'000 * kUs; t += 100 * kUs) trace.add(t, 1000);
  ASSERT_TRUE(trace.mark(t, 1));
  t += 1'500 * kUs;  // a 1.5 ms stall, 2.5 ms before the second moment
  for (; t < 32'000 * kUs; t += 100 * kUs) trace.add(t, 1000);
  ASSERT_TRUE(trace.mark(t, 2));
  trace.finish(t);
  EXPECT_EQ(trace.captures()[0].max_stall_ns, 1'500 * kUs) << "the later stall, after it";
  EXPECT_EQ(trace.captures()[1].max_stall_ns, 1'500 * kUs);
  DeliveryTrace quiet;
  quiet.init(100 * kUs, 500, 100, 1);
  for (t = 0; t < 5'000 * kUs; t += 100 * kUs) quiet.add(t, 1000);
  t += 3'000 * kUs;
  for (; t < 28'000 * kUs; t += 100 * kUs) quiet.add(t, 1000);
  ASSERT_TRUE(quiet.mark(t, 1));
  quiet.finish(t + 100 * kUs);
  EXPECT_EQ(quiet.captures()[0].max_stall_ns, 100 * kUs) << "20 ms ago is past the lookback";
}

}  // namespace
}  // namespace softmrc::softmrcd
