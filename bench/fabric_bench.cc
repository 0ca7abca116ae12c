// Cost of the fabric model and of the simulator built on it:
//   BM_LinkEnqueue      - one packet through an output queue (idle link,
//                         and a full queue that trims)
//   BM_Route            - EV -> path at a leaf (ECMP hash; with withdrawn
//                         links, where the leaf counts the usable spines)
//   BM_Transit          - a packet across the whole fabric at once, as the
//                         real-time emulator will use it
//   BM_EventQueue       - push + pop on the simulator's event heap at a
//                         given depth
//   BM_Simulate         - a whole small scenario in virtual time, MRC over
//                         lib/engine and the go-back-N baseline side by
//                         side: simulated events per second of wall time
// docs/benchmarks.md ("Simulator") has the figures.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "event_queue.h"
#include "fabric/config_node.h"
#include "fabric/fabric.h"
#include "scenario.h"
#include "simulator.h"

namespace softmrc {
namespace {

using fabric::PacketMeta;

fabric::TopologyConfig topology(uint32_t hosts, uint32_t planes, uint32_t radix) {
  fabric::TopologyConfig c;
  c.hosts = hosts;
  c.planes = planes;
  c.radix = radix;
  return c;
}

PacketMeta data_packet() {
  PacketMeta p;
  p.bytes = 4206;
  p.header_bytes = 106;
  p.trimmable = true;
  p.ecn_capable = true;
  return p;
}

void BM_LinkEnqueue(benchmark::State& state) {
  const bool congested = state.range(0) != 0;
  fabric::LinkConfig c;
  c.buffer_bytes = 64 << 10;
  c.ecn_threshold_bytes = 16 << 10;
  c.overflow = fabric::Overflow::kTrim;
  fabric::Link link;
  if (link.init(c)) state.SkipWithError("link init");
  fabric::Rng rng(1);
  fabric::TimeNs now = 0;
  for (auto _ : state) {
    PacketMeta p = data_packet();
    benchmark::DoNotOptimize(link.enqueue(p, now, rng));
    // Idle: one packet time apart (337 ns at 100 Gb/s); congested: 10 at once.
    now += congested ? 34 : 400;
  }
  state.counters["trims"] = static_cast<double>(link.counters().trims);
}
BENCHMARK(BM_LinkEnqueue)->Arg(0)->Arg(1);

void BM_Route(benchmark::State& state) {
  fabric::Fabric f;
  if (f.init(topology(1024, 8, 64))) state.SkipWithError("fabric init");
  if (state.range(0)) {  // a failed spine in every plane, routed around
    for (uint32_t p = 0; p < 8; ++p) f.set_switch_up({p, fabric::SwitchTier::kSpine, 3}, false, 0);
    f.advance(f.topology().config().reroute_ns);
  }
  uint32_t ev = 0;
  fabric::Path path;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.route(ev & 7, 5, 900, 0xc000 + (ev & 255), &path));
    ++ev;
  }
}
BENCHMARK(BM_Route)->Arg(0)->Arg(1);

void BM_Transit(benchmark::State& state) {
  fabric::Fabric f;
  if (f.init(topology(1024, 8, 64))) state.SkipWithError("fabric init");
  fabric::Rng rng(1);
  fabric::TimeNs now = 0;
  uint32_t i = 0;
  for (auto _ : state) {
    PacketMeta p = data_packet();
    p.ev = 0xc000 + (i & 255);
    benchmark::DoNotOptimize(f.transit(i & 7, i & 1023, (i * 7 + 500) & 1023, p, now, rng));
    now += 5;
    ++i;
  }
}
BENCHMARK(BM_Transit);

void BM_EventQueue(benchmark::State& state) {
  sim::EventQueue q;
  fabric::Rng rng(1);
  uint64_t now = 0;
  for (int64_t i = 0; i < state.range(0); ++i)
    q.push(now + rng.below(100'000), sim::EventType::kHop, static_cast<uint32_t>(i));
  for (auto _ : state) {
    const sim::Event e = q.pop();
    now = e.at_ns;
    q.push(now + rng.below(100'000), sim::EventType::kHop, e.id);
  }
}
BENCHMARK(BM_EventQueue)->Arg(1 << 10)->Arg(1 << 14)->Arg(1 << 18);

// 64 hosts x 4 planes, a permutation of 256 KiB per host, with a link
// failure: the same run for both transports.
void BM_Simulate(benchmark::State& state) {
  const sim::Scenario sc = sim::read_scenario(fabric::ConfigNode::parse(R"(
topology: {hosts: 64, planes: 4, radix: 16, switch_queue: {buffer_kib: 512}}
faults: [{type: link_down, at_us: 10, plane: 0, leaf: 0, spine: 0}]
workload: {pattern: permutation, message_kib: 256, steps: 2}
mrc: {evs_per_plane: 16}
run: {verify: false}
)"));
  sim::SimOptions opt;
  opt.transport = state.range(0) ? sim::TransportKind::kRoce : sim::TransportKind::kMrc;
  uint64_t events = 0;
  for (auto _ : state) {
    sim::Simulator s(sc, opt);
    events += s.run().events;
  }
  state.SetLabel(sim::transport_name(opt.transport));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Simulate)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace softmrc

BENCHMARK_MAIN();
