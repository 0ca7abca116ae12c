// The workload patterns on their own, the scenario reader's errors, and
// that every scenario shipped in config/scenarios loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "sim_util.h"
#include "workload.h"

namespace softmrc::sim::test {
namespace {

WorkloadConfig config(Pattern p) {
  WorkloadConfig w;
  w.pattern = p;
  w.message_bytes = 1000;
  w.concurrency = 3;
  w.incast_senders = 5;
  w.steps = 4;
  return w;
}

TEST(Workload, PermutationIsANewDerangementEveryStep) {
  for (uint64_t seed = seed_or_env(1), end = seed + 20; seed < end; ++seed) {
    SCOPED_TRACE(seed_note(seed));
    Workload w(config(Pattern::kPermutation), 9, seed);
    std::set<std::vector<uint32_t>> seen;
    for (uint32_t step = 0; step < 4; ++step) {
      std::vector<Transfer> ready;
      w.begin_step(step, &ready);
      ASSERT_EQ(ready.size(), 9u);
      std::vector<uint32_t> dst;
      for (const Transfer& t : ready) {
        EXPECT_NE(t.src, t.dst);
        EXPECT_EQ(t.step, step);
        dst.push_back(t.dst);
      }
      std::vector<uint32_t> sorted = dst;
      std::sort(sorted.begin(), sorted.end());
      for (uint32_t i = 0; i < 9; ++i) EXPECT_EQ(sorted[i], i);
      seen.insert(dst);
    }
    EXPECT_GT(seen.size(), 1u);
  }
}

TEST(Workload, AllToAllKeepsConcurrencyTransfersPerHostInPairwiseOrder) {
  Workload w(config(Pattern::kAllToAll), 6, 1);
  std::vector<Transfer> ready;
  w.begin_step(0, &ready);
  EXPECT_EQ(w.transfers(), 30u);
  ASSERT_EQ(ready.size(), 18u);  // 3 per host
  EXPECT_EQ(ready[0].dst, 1u);
  EXPECT_EQ(ready[1].dst, 2u);
  EXPECT_EQ(ready[2].dst, 3u);
  // Host 0's first transfer finishes: its fourth peer (host 4) may start.
  std::vector<Transfer> more;
  w.finished(ready[0].id, &more);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].src, 0u);
  EXPECT_EQ(more[0].dst, 4u);
  // Finishing everything in any order ends the step exactly once.
  std::vector<Transfer> pending = ready;
  pending.erase(pending.begin());
  pending.push_back(more[0]);
  while (!pending.empty()) {
    const Transfer t = pending.back();
    pending.pop_back();
    EXPECT_FALSE(w.step_complete());
    w.finished(t.id, &pending);
  }
  EXPECT_TRUE(w.step_complete());
  EXPECT_EQ(w.finished_count(), 30u);
}

TEST(Workload, IncastSendsFromTheFirstHostsToHostZero) {
  Workload w(config(Pattern::kIncast), 8, 1);
  std::vector<Transfer> ready;
  w.begin_step(0, &ready);
  ASSERT_EQ(ready.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ready[i].src, i + 1);
    EXPECT_EQ(ready[i].dst, 0u);
    EXPECT_EQ(ready[i].bytes, 1000u);
  }
}

TEST(Workload, RingAllReduceSendsAChunkPerPhaseAroundTheRing) {
  Workload w(config(Pattern::kRingAllReduce), 4, 1);
  std::vector<Transfer> ready;
  w.begin_step(0, &ready);
  EXPECT_EQ(w.transfers(), 2u * 3 * 4);
  ASSERT_EQ(ready.size(), 4u);  // phase 0 of every host
  for (const Transfer& t : ready) {
    EXPECT_EQ(t.dst, (t.src + 1) % 4);
    EXPECT_EQ(t.bytes, 250u);
  }
  // Host 1's phase 1 needs its own phase 0 done and host 0's arrived.
  std::vector<Transfer> next;
  w.finished(ready[1].id, &next);  // 1 -> 2 done: host 2 has received, host 1 has sent
  EXPECT_TRUE(next.empty());
  w.finished(ready[0].id, &next);  // 0 -> 1 done: host 1 may go on
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].src, 1u);
  EXPECT_EQ(next[0].id, 1 * 4 + 1u);
}

std::string error_of(const std::string& yaml) {
  try {
    scenario(yaml);
  } catch (const fabric::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ScenarioFile, ErrorsNameTheKeyAndTheProblem) {
  const std::string topo = "topology: {hosts: 8, radix: 4}\n";
  EXPECT_EQ(error_of(topo + "workload: {pattern: broadcast}\n"),
            "workload.pattern: must be one of permutation, all_to_all, incast, ring_allreduce, "
            "got 'broadcast'");
  EXPECT_EQ(error_of(topo + "mrc: {mtu: 1500}\n"),
            "mrc.mtu: must be 256, 512, 1024, 2048, 4096 or 9000");
  EXPECT_EQ(error_of(topo + "workload: {concurrency: 8}\n"),
            "workload.concurrency: must be an integer in [1, 7], got '8'");
  EXPECT_EQ(error_of(topo + "transports: [mrc, ib]\n"),
            "transports: each must be mrc or roce, got 'ib'");
  EXPECT_EQ(error_of(topo + "faults: [{type: link_down, at_us: 1, plane: 2, leaf: 0, spine: 0}]\n"),
            "faults[0]: plane 2 does not exist (planes: 1)");
  EXPECT_EQ(error_of(topo + "run: {sed: 3}\n"),
            "run.sed: unknown key (known here: seed, time_limit_ms, framed, verify, bin_us, "
            "port_detect_us, nic_queue_packets)");
  EXPECT_EQ(error_of("workload: {}\n"), "topology: missing (a mapping is required)");
  // A run stuck until its limit fills every bin up to it, in memory.
  EXPECT_EQ(error_of(topo + "run: {time_limit_ms: 1000000, bin_us: 100}\n"),
            "run.bin_us: at least 1000 for a time_limit_ms of 1e+06: the time series holds at "
            "most 1000000 bins");
  EXPECT_EQ(error_of(topo + "run: {time_limit_ms: 1000000, bin_us: 1000}\n"), "");
  EXPECT_EQ(error_of(topo + "run: {time_limit_ms: 1000, bin_us: 1}\n"), "");
  EXPECT_EQ(error_of(topo + "run: {time_limit_ms: 1000, bin_us: 0.1}\n"),
            "run.bin_us: at least 1 for a time_limit_ms of 1000: the time series holds at most "
            "1000000 bins");
}

TEST(ScenarioFile, EveryShippedScenarioLoads) {
  const std::filesystem::path dir = std::filesystem::path(SOFTMRC_SOURCE_ROOT) / "config/scenarios";
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_scenario(entry.path().string()));
    ++loaded;
  }
  EXPECT_GE(loaded, 6);
}

}  // namespace
}  // namespace softmrc::sim::test
