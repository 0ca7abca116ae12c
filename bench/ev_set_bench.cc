// Microbenchmarks of the per-packet calls of lib/engine/path and lib/engine/cc:
// EvSet::pick() over a full-size set (4096 EVs on 8 planes) for each policy,
// with part of the set ASSUMED_BAD, and NSCC's per-ACK update.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "engine/cc/congestion_control.h"
#include "engine/path/ev_set.h"

namespace softmrc::engine {
namespace {

constexpr uint8_t kPlanes = 8;

EvSet full_set(SprayPolicy policy) {
  std::vector<EvEntry> evs(kMaxEvsPerQp);
  for (uint32_t i = 0; i < evs.size(); i++) {
    evs[i].value.bytes[0] = static_cast<uint8_t>(i >> 8);
    evs[i].value.bytes[1] = static_cast<uint8_t>(i);
    evs[i].plane = static_cast<uint8_t>(i % kPlanes);
  }
  EvSetConfig cfg;
  cfg.min_active = kMaxEvsPerQp / 4;
  cfg.policy = policy;
  cfg.probe_initial_ns = 10'000;
  cfg.probe_max_ns = 1'000'000;
  cfg.ecn_avoid_ns = 50'000;
  cfg.num_planes = kPlanes;
  EvSet set;
  set.init(evs, cfg);
  return set;
}

// state.range(0): percent of the EVs marked ASSUMED_BAD first; for
// kEcnAvoid, the same share carries a fresh CE mark instead.
void BM_EvSetPick(benchmark::State& state, SprayPolicy policy) {
  EvSet set = full_set(policy);
  const auto share = static_cast<uint32_t>(state.range(0));
  for (uint32_t ev = 0; ev < kMaxEvsPerQp; ev++) {
    if (ev * 7919 % 100 >= share) continue;  // spread over the planes
    if (policy == SprayPolicy::kEcnAvoid)
      set.on_ecn(ev, 0);
    else
      set.on_loss(ev, 0);
  }
  TimeNs now = 1;
  for (auto _ : state) benchmark::DoNotOptimize(set.pick(now));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_EvSetPick, round_robin, SprayPolicy::kRoundRobin)->Arg(0)->Arg(50);
BENCHMARK_CAPTURE(BM_EvSetPick, ecn_avoid, SprayPolicy::kEcnAvoid)->Arg(0)->Arg(50);

// A loss and a probe reply: two state changes and their events.
void BM_EvSetLossAndRestore(benchmark::State& state) {
  EvSet set = full_set(SprayPolicy::kRoundRobin);
  uint32_t ev = 0;
  TimeNs now = 0;
  for (auto _ : state) {
    set.on_loss(ev, now);
    set.on_probe_reply(ev, now, now);
    set.clear_events();
    ev = (ev + 1) % kMaxEvsPerQp;
    now++;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EvSetLossAndRestore);

void BM_NsccOnAck(benchmark::State& state) {
  const NsccParams p = default_nscc_params(100'000'000'000, 10'000, 4096);
  CongestionControl cc;
  cc.init(CcProfile{CcAlgorithm::kNscc, p}, 4096, 0);
  TimeNs now = 0;
  uint32_t i = 0;
  for (auto _ : state) {
    // Delays sweep all four quadrants.
    const TimeNs delay = (i * 613) % (2 * p.target_delay_ns);
    cc.on_ack(AckSample{4096, 64 * 4096, p.base_rtt_ns + delay, (i & 3) == 0}, now += 330);
    benchmark::DoNotOptimize(cc.cwnd_bytes());
    i++;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NsccOnAck);

}  // namespace
}  // namespace softmrc::engine

BENCHMARK_MAIN();
