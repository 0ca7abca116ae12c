// Small deterministic scenarios with asserted outcomes: everything is
// delivered and verified, in the workload's order, faults cost MRC a
// bounded step time while the baseline stalls for its timeout, trimming
// turns overflow into NACKs, and a run replays exactly from its seed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "engine/qp_attr.h"
#include "sim_util.h"

namespace softmrc::sim::test {
namespace {

// 16 hosts, 2 planes of a radix-8 Clos: 4 hosts per leaf, 4 leaves, 4 spines.
constexpr const char* kFabric = R"(
topology:
  hosts: 16
  planes: 2
  radix: 8
  host_link: {gbps: 100, delay_ns: 500}
  fabric_link: {gbps: 100, delay_ns: 500}
  switch_queue: {buffer_kib: 256, ecn_kib: 64, overflow: trim}
  reroute_us: 200
mrc: {evs_per_plane: 8}
)";

Scenario with(const std::string& rest) {
  return scenario(std::string(kFabric) + rest);
}

TimeNs step_time(const RunResult& r, uint32_t step) {
  return r.steps.at(step).time_ns();
}

// Both transports deliver every byte; MRC's are checked against the
// pattern (the baseline carries lengths only).
TEST(SimScenario, PermutationDeliversEveryByteOverBothTransports) {
  const Scenario sc = with("workload: {pattern: permutation, message_kib: 256, steps: 3}\n");
  const uint64_t seed = seed_or_env(11);
  SCOPED_TRACE(seed_note(seed));
  for (TransportKind t : {TransportKind::kMrc, TransportKind::kRoce}) {
    SCOPED_TRACE(transport_name(t));
    const RunResult r = run(sc, t, seed).result;
    expect_all_delivered(r);
    ASSERT_EQ(r.transfers.size(), 3u * 16);
    // A permutation: each host sends once and receives once per step.
    for (uint32_t step = 0; step < 3; ++step) {
      std::vector<int> sent(16), got(16);
      for (const TransferRecord& x : r.transfers) {
        if (x.t.step != step) continue;
        EXPECT_NE(x.t.src, x.t.dst);
        ++sent[x.t.src];
        ++got[x.t.dst];
      }
      EXPECT_EQ(std::count(sent.begin(), sent.end(), 1), 16);
      EXPECT_EQ(std::count(got.begin(), got.end(), 1), 16);
    }
    for (uint64_t b : r.host_rx_bytes) EXPECT_EQ(b, 3u * 256 * 1024);
  }
}

TEST(SimScenario, StepsRunInOrderAndEachEndsWithItsSlowestTransfer) {
  const Scenario sc = with(
      "workload: {pattern: all_to_all, message_kib: 16, concurrency: 3, steps: 2, "
      "compute_us: 5}\n");
  const uint64_t seed = seed_or_env(3);
  SCOPED_TRACE(seed_note(seed));
  const RunResult r = run(sc, TransportKind::kMrc, seed).result;
  expect_all_delivered(r);
  ASSERT_EQ(r.steps.size(), 2u);
  for (const StepRecord& s : r.steps) {
    TimeNs last = 0;
    for (const TransferRecord& x : r.transfers)
      if (x.t.step == s.step) {
        EXPECT_GE(x.start_ns, s.start_ns);
        last = std::max(last, x.delivered_ns);
      }
    EXPECT_EQ(s.end_ns, last) << "step " << s.step;
  }
  // The second step starts compute_us after every connection of the first
  // was released.
  EXPECT_EQ(r.steps[1].start_ns, r.steps[0].done_ns + 5'000);
  // All-to-all order: a host starts its k-th peer only after one of its
  // earlier transfers finished, and never has more than 3 in flight.
  for (uint32_t host = 0; host < 16; ++host) {
    std::vector<const TransferRecord*> mine;
    for (const TransferRecord& x : r.transfers)
      if (x.t.step == 0 && x.t.src == host) mine.push_back(&x);
    ASSERT_EQ(mine.size(), 15u);
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_EQ(mine[k]->t.dst, (host + 1 + k) % 16);
      size_t in_flight = 0;
      for (const TransferRecord* o : mine)
        in_flight += o->start_ns <= mine[k]->start_ns && o->done_ns > mine[k]->start_ns;
      EXPECT_LE(in_flight, 3u) << "host " << host << " peer " << k;
    }
  }
}

TEST(SimScenario, RingAllReducePhasesWaitForTheirPredecessor) {
  const Scenario sc = with("workload: {pattern: ring_allreduce, message_kib: 64}\n");
  const uint64_t seed = seed_or_env(5);
  SCOPED_TRACE(seed_note(seed));
  for (TransportKind t : {TransportKind::kMrc, TransportKind::kRoce}) {
    SCOPED_TRACE(transport_name(t));
    const RunResult r = run(sc, t, seed).result;
    expect_all_delivered(r);
    ASSERT_EQ(r.transfers.size(), 2u * 15 * 16);
    // Phase k of host h (id k * 16 + h) starts only once phase k-1 of h has
    // finished and phase k-1 of its predecessor has arrived.
    for (uint32_t k = 1; k < 30; ++k) {
      for (uint32_t h = 0; h < 16; ++h) {
        const TransferRecord& me = r.transfers[k * 16 + h];
        const TransferRecord& own = r.transfers[(k - 1) * 16 + h];
        const TransferRecord& pred = r.transfers[(k - 1) * 16 + (h + 15) % 16];
        EXPECT_GE(me.start_ns, own.done_ns) << "phase " << k << " host " << h;
        EXPECT_GE(me.start_ns, pred.delivered_ns) << "phase " << k << " host " << h;
      }
    }
  }
}

// On a healthy fabric a late packet is not a lost one: spraying reorders
// by the queues' differences, and the reorder window must absorb that. A
// needless resend wastes bandwidth and takes a working EV out of use.
TEST(SimScenario, FaultFreeSprayingResendsAlmostNothing) {
  const Scenario sc =
      with("workload: {pattern: all_to_all, message_kib: 256, concurrency: 8, steps: 2}\n");
  for (uint64_t seed = seed_or_env(1), end = seed + 3; seed < end; ++seed) {
    SCOPED_TRACE(seed_note(seed));
    const RunResult r = run(sc, TransportKind::kMrc, seed).result;
    expect_all_delivered(r);
    EXPECT_LE(r.stack.needless * 1000, r.stack.data_packets) << "at most 0.1% needless";
    EXPECT_LE(r.stack.ev_to_bad * 1000, r.stack.data_packets);
    EXPECT_EQ(r.stack.timeouts, 0u);
  }
}

// A leaf/spine link fails mid-step and stays down. MRC must not take much
// longer than a fault-free step: lost packets are resent on other EVs
// within about an RTT, and a lost tail (or a last ACK lost on the dead
// reverse path) is found by a tail probe, not by the ACK timeout. The
// baseline's QPs hashed onto the link wait for their retransmission timeout.
TEST(SimScenario, LinkFailureCostsMrcLessThanAnAckTimeoutAndTheBaselineItsTimeout) {
  const std::string workload =
      "workload: {pattern: all_to_all, message_kib: 64, concurrency: 4, steps: 2}\n";
  const Scenario faulty = with(workload +
                               "faults:\n  - {type: link_down, at_us: 15, plane: 0, leaf: 0, "
                               "spine: 1}\n");
  const Scenario clean = with(workload);
  for (uint64_t seed = seed_or_env(1), end = seed + 3; seed < end; ++seed) {
    SCOPED_TRACE(seed_note(seed));
    const RunResult mrc = run(faulty, TransportKind::kMrc, seed).result;
    const RunResult mrc_clean = run(clean, TransportKind::kMrc, seed).result;
    expect_all_delivered(mrc);
    expect_all_delivered(mrc_clean);
    EXPECT_GT(mrc.drops[size_t(fabric::DropReason::kLinkDown)], 0u);
    EXPECT_GT(mrc.stack.ev_to_bad, 0u);
    const TimeNs ack_timeout = engine::ack_timeout_ns(faulty.mrc.timeout);
    EXPECT_LE(step_time(mrc, 0), step_time(mrc_clean, 0) + ack_timeout / 2);
    EXPECT_LE(mrc.stack.timeouts, 1u);
    EXPECT_GT(mrc.stack.retx_tail_probe, 0u);

    const RunResult roce = run(faulty, TransportKind::kRoce, seed).result;
    expect_all_delivered(roce);
    const TimeNs roce_rto = 4096ull << faulty.roce.timeout;
    EXPECT_GT(step_time(roce, 0), roce_rto);
    EXPECT_GT(step_time(roce, 0), 100 * step_time(mrc, 0));
  }
}

TEST(SimScenario, IncastTrimsBecomeNacksAndDropsBecomeSackOrTimerResends) {
  const std::string incast =
      "workload: {pattern: incast, incast_senders: 12, message_kib: 256, steps: 2}\n";
  const uint64_t seed = seed_or_env(7);
  SCOPED_TRACE(seed_note(seed));
  Scenario trim = with(incast);
  const RunResult t = run(trim, TransportKind::kMrc, seed).result;
  expect_all_delivered(t);
  EXPECT_GT(t.trims, 0u);
  EXPECT_GT(t.stack.retx_trim, 0u);
  EXPECT_EQ(t.drops[size_t(fabric::DropReason::kOverflow)], 0u);

  Scenario drop = trim;
  drop.topology.overflow = fabric::Overflow::kDrop;
  const RunResult d = run(drop, TransportKind::kMrc, seed).result;
  expect_all_delivered(d);
  EXPECT_EQ(d.trims, 0u);
  EXPECT_GT(d.drops[size_t(fabric::DropReason::kOverflow)], 0u);
  EXPECT_EQ(d.stack.retx_trim, 0u);
  EXPECT_GT(d.stack.retx_sack + d.stack.retx_timeout, 0u);

  // The baseline's data is never trimmable: a trimming switch drops it.
  const RunResult r = run(trim, TransportKind::kRoce, seed).result;
  expect_all_delivered(r);
  EXPECT_EQ(r.trims, 0u);
}

TEST(SimScenario, GrayLossIsResentSelectivelyByMrcAndByGoBackNInTheBaseline) {
  const Scenario sc = with(
      "workload: {pattern: permutation, message_kib: 512, steps: 2}\n"
      "faults:\n  - {type: gray, at_us: 0, plane: 0, all_fabric_links: true, loss: 0.02}\n"
      "roce: {timeout: 8}\n");
  const uint64_t seed = seed_or_env(13);
  SCOPED_TRACE(seed_note(seed));
  const RunResult m = run(sc, TransportKind::kMrc, seed).result;
  expect_all_delivered(m);
  EXPECT_GT(m.drops[size_t(fabric::DropReason::kLoss)], 0u);
  // Selective: about one resend per loss, not a window per loss.
  EXPECT_LE(m.stack.retransmits, 4 * m.drops[size_t(fabric::DropReason::kLoss)] + 64);

  const RunResult r = run(sc, TransportKind::kRoce, seed).result;
  expect_all_delivered(r);
  EXPECT_GT(r.stack.go_back_n, 0u);
  EXPECT_GT(r.stack.retransmits, r.drops[size_t(fabric::DropReason::kLoss)]);
}

// A silent blackhole is never routed around. MRC finds it by loss and
// keeps it out of use; the baseline's QPs on it retry until they fail.
TEST(SimScenario, BlackholeIsAvoidedByMrcAndFailsTheBaseline) {
  const Scenario sc = with(
      "workload: {pattern: all_to_all, message_kib: 32, concurrency: 4}\n"
      "faults:\n  - {type: blackhole, at_us: 0, plane: 1, leaf: 2, spine: 3}\n"
      "roce: {timeout: 6, retry: 2}\n");
  const uint64_t seed = seed_or_env(17);
  SCOPED_TRACE(seed_note(seed));
  const RunResult m = run(sc, TransportKind::kMrc, seed).result;
  expect_all_delivered(m);
  EXPECT_GT(m.drops[size_t(fabric::DropReason::kBlackhole)], 0u);
  EXPECT_GT(m.stack.ev_to_bad, 0u);

  const RunResult r = run(sc, TransportKind::kRoce, seed).result;
  EXPECT_GT(r.steps_failed(), 0u);
  EXPECT_FALSE(r.finished);
  EXPECT_GT(r.stack.qp_errors, 0u);
}

// A transfer that fails counts as finished: its step lasts until the
// failure, not until the last transfer that arrived. A step the run stops
// in (the time limit) lasts until the end of the run. Per-host goodput
// divides by these step times, so it must not count a stalled step as
// short: 32 KiB over a 100 us step that never ended is not 19 Gb/s.
TEST(SimScenario, StepTimesRunUntilFailuresAndTheEndOfARunStoppedMidStep) {
  const std::string base =
      "workload: {pattern: permutation, message_kib: 64, steps: 2}\n"
      "faults:\n  - {type: blackhole, at_us: 0, plane: 0, host: 1}\n";
  const uint64_t seed = seed_or_env(23);
  SCOPED_TRACE(seed_note(seed));
  {
    const RunResult r =
        run(with(base + "roce: {timeout: 4, retry: 1}\n"), TransportKind::kRoce, seed).result;
    ASSERT_GT(r.steps_failed(), 0u);
    EXPECT_EQ(r.stop, "every step ended, some transfers failed");
    for (const StepRecord& s : r.steps) {
      TimeNs last = 0;
      for (const TransferRecord& x : r.transfers)
        if (x.t.step == s.step) last = std::max(last, x.failed ? x.done_ns : x.delivered_ns);
      EXPECT_EQ(s.end_ns, last) << "step " << s.step;
    }
  }
  const RunResult r =
      run(with(base + "run: {time_limit_ms: 0.1}\n"), TransportKind::kRoce, seed).result;
  ASSERT_EQ(r.stop, "time limit (run.time_limit_ms)");
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_FALSE(r.steps[0].complete);
  EXPECT_EQ(r.end_ns, 100'000u);
  EXPECT_EQ(r.steps[0].end_ns, r.end_ns);

  char dir[] = "/tmp/sim_steps_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_EQ(write_results(dir, with(base), {r}), "");
  std::FILE* f = std::fopen((std::string(dir) + "/hosts.csv").c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[256];
  ASSERT_NE(std::fgets(line, sizeof line, f), nullptr);  // the header
  uint32_t rows = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned host = 0;
    unsigned long long bytes = 0;
    double gbps = 0;
    ASSERT_EQ(std::sscanf(line, "roce,%*u,%u,%llu,%lf", &host, &bytes, &gbps), 3) << line;
    EXPECT_NEAR(gbps, static_cast<double>(bytes) * 8 / 100'000, 0.001) << line;
    ++rows;
  }
  std::fclose(f);
  EXPECT_EQ(rows, 16u);
  for (const char* name : {"summary.json", "steps.csv", "timeseries.csv", "hosts.csv"})
    std::remove((std::string(dir) + "/" + name).c_str());
  rmdir(dir);
}

// The time series covers the run and no more, and each bin's goodput is
// over the time it covers: the last bin, cut short by the end of the run,
// is not divided by a whole bin (that showed a dip at every run's end),
// and a run that ends on a boundary has no empty bin after it.
TEST(SimScenario, TimeSeriesBinsCoverTheRunAndTheLastOneOnlyItsPart) {
  const uint64_t seed = seed_or_env(29);
  SCOPED_TRACE(seed_note(seed));
  const std::string wl = "workload: {pattern: permutation, message_kib: 64, steps: 2}\n";
  // MRC finishes part way through a bin; the baseline is stopped by the
  // time limit, on a boundary.
  const std::pair<TransportKind, std::string> cases[] = {
      {TransportKind::kMrc, "run: {bin_us: 10}\n"},
      {TransportKind::kRoce,
       "faults:\n  - {type: blackhole, at_us: 0, plane: 0, host: 1}\n"
       "run: {bin_us: 10, time_limit_ms: 0.1}\n"}};
  for (const auto& [transport, extra] : cases) {
    SCOPED_TRACE(extra);
    const RunResult r = run(with(wl + extra), transport, seed).result;
    ASSERT_GT(r.end_ns, 0u);
    if (transport == TransportKind::kRoce) {
      ASSERT_EQ(r.end_ns, 100'000u) << r.stop;
    } else {
      ASSERT_NE(r.end_ns % r.bin_ns, 0u);
    }
    EXPECT_EQ(r.bins.size(), (r.end_ns + r.bin_ns - 1) / r.bin_ns);
    uint64_t bytes = 0, host_bytes = 0;
    for (const Bin& b : r.bins) bytes += b.rx_bytes;
    for (uint64_t b : r.host_rx_bytes) host_bytes += b;
    EXPECT_EQ(bytes, host_bytes);
    for (size_t b = 0; b < r.bins.size(); ++b) {
      const TimeNs width = std::min(r.bin_ns, r.end_ns - b * r.bin_ns);
      EXPECT_DOUBLE_EQ(bin_gbps(r, b), static_cast<double>(r.bins[b].rx_bytes) * 8 / width)
          << "bin " << b << " of " << r.bins.size() << ", run end " << r.end_ns;
    }
  }
}

TEST(SimScenario, SwitchRebootTakesEvsOutAndProbesBringThemBack) {
  const Scenario sc = with(
      "workload: {pattern: all_to_all, message_kib: 64, concurrency: 4, steps: 6, "
      "compute_us: 100}\n"
      "faults:\n  - {type: switch_down, at_us: 10, for_us: 150, plane: 0, spine: 2}\n");
  const uint64_t seed = seed_or_env(19);
  SCOPED_TRACE(seed_note(seed));
  const RunResult m = run(sc, TransportKind::kMrc, seed).result;
  expect_all_delivered(m);
  EXPECT_GT(m.stack.ev_to_bad, 0u);
  EXPECT_GT(m.stack.ev_to_good, 0u);
  ASSERT_EQ(m.faults.size(), 2u);
  EXPECT_EQ(m.faults[1].what, "switch_down p0 spine2: back up");
}

TEST(SimScenario, FramedModeCarriesEveryPacketThroughLibWire) {
  Scenario sc = with("workload: {pattern: incast, incast_senders: 6, message_kib: 128}\n");
  sc.run.framed = true;
  sc.topology.buffer_bytes = 64 << 10;  // trims and marks: wire::trim and wire::mark_ce run too
  sc.topology.ecn_threshold_bytes = 16 << 10;
  const uint64_t seed = seed_or_env(23);
  SCOPED_TRACE(seed_note(seed));
  const RunResult r = run(sc, TransportKind::kMrc, seed).result;
  expect_all_delivered(r);
  EXPECT_GT(r.trims, 0u);
  EXPECT_GT(r.stack.trimmed_rx, 0u);  // parsed as trimmed from the bytes
  EXPECT_GT(r.ce_marks, 0u);
  // The same run without framing makes the same decisions.
  sc.run.framed = false;
  const RunResult plain = run(sc, TransportKind::kMrc, seed).result;
  EXPECT_EQ(plain.end_ns, r.end_ns);
  EXPECT_EQ(plain.trims, r.trims);
  EXPECT_EQ(plain.stack.retransmits, r.stack.retransmits);
}

// A corrupt fault on plane 0's leaf/spine links, in framed MRC runs.
Scenario corrupting(const std::string& icrc) {
  return with(
      "workload: {pattern: permutation, message_kib: 64, steps: 2}\n"
      "faults:\n  - {type: corrupt, at_us: 0, plane: 0, all_fabric_links: true, probability: "
      "0.05, icrc: " +
      icrc +
      "}\n"
      "transports: [mrc]\n"
      "run: {framed: true}\n");
}

// A switch that rewrites a payload byte and recomputes the ICRC passes
// every check on the way: only the receiver's comparison of the bytes with
// what was sent finds it, and fails the transfer.
TEST(SimScenario, CorruptionUnderARecomputedIcrcIsFoundByTheByteCheckAlone) {
  const uint64_t seed = seed_or_env(31);
  SCOPED_TRACE(seed_note(seed));
  const RunResult r = run(corrupting("recompute"), TransportKind::kMrc, seed).result;
  EXPECT_GT(r.corruptions, 0u);
  EXPECT_EQ(r.stack.icrc_errors, 0u);
  EXPECT_EQ(r.stack.parse_errors, 0u);
  EXPECT_GT(r.stack.verify_failures, 0u);
  EXPECT_GT(r.steps_failed(), 0u);
  EXPECT_FALSE(r.finished);
}

// The same corruption on the wire, the ICRC left as it was: the receiver
// drops the frame and MRC resends it as it would a lost one.
TEST(SimScenario, CorruptionUnderAStaleIcrcIsDroppedAndResent) {
  const uint64_t seed = seed_or_env(31);
  SCOPED_TRACE(seed_note(seed));
  const RunResult r = run(corrupting("keep"), TransportKind::kMrc, seed).result;
  expect_all_delivered(r);
  EXPECT_GT(r.stack.icrc_errors, 0u);
  EXPECT_LE(r.stack.icrc_errors, r.corruptions);
  EXPECT_GT(r.stack.retransmits, 0u);
}

// Unframed packets and the baseline's carry no bytes: a corrupt fault
// there would corrupt nothing, so the run is refused, naming the fault.
TEST(SimScenario, CorruptionIsRefusedWhereNoBytesTravel) {
  Scenario sc = corrupting("keep");
  sc.run.framed = false;
  const std::string unframed =
      "faults[0]: a corrupt fault needs framed packets: unframed ones carry no bytes to corrupt "
      "(run.framed: true, or --framed)";
  EXPECT_EQ(unsupported(sc, TransportKind::kMrc), unframed);
  sc.run.framed = true;
  EXPECT_EQ(unsupported(sc, TransportKind::kMrc), "");
  const std::string baseline =
      "faults[0]: a corrupt fault needs MRC: the baseline carries lengths, not bytes "
      "(transports: [mrc], or --transport mrc)";
  EXPECT_EQ(unsupported(sc, TransportKind::kRoce), baseline);
  SimOptions opt;
  opt.transport = TransportKind::kRoce;
  try {
    Simulator refused(sc, opt);
    ADD_FAILURE() << "a baseline run with a corrupt fault was set up";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(e.what(), baseline);
  }
}

TEST(SimScenario, SameSeedReplaysExactlyAndAnotherSeedDiffers) {
  const Scenario sc = with(
      "workload: {pattern: permutation, message_kib: 64, steps: 2}\n"
      "faults:\n  - {type: gray, at_us: 0, plane: 1, all_fabric_links: true, loss: 0.01}\n");
  const uint64_t seed = seed_or_env(29);
  SCOPED_TRACE(seed_note(seed));
  for (TransportKind t : {TransportKind::kMrc, TransportKind::kRoce}) {
    SCOPED_TRACE(transport_name(t));
    const SimRun a = run(sc, t, seed, true);
    const SimRun b = run(sc, t, seed, true);
    const SimRun c = run(sc, t, seed + 1, true);
    EXPECT_FALSE(a.trace.empty());
    EXPECT_EQ(a.trace, b.trace);
    EXPECT_EQ(a.result.events, b.result.events);
    EXPECT_NE(a.trace, c.trace);
  }
}

}  // namespace
}  // namespace softmrc::sim::test
